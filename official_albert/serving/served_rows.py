"""What the server's `ServedModel` queues and how it sets a head's pipeline options: the batcher's row types for
token ids and multiple-choice questions, the QA windows and multiple-choice packing the pipelines pick for a folder,
and a model's token-id limits. Kept apart from `served_model` so that the rows read in one place (and that module
stays one class)."""

from __future__ import annotations

import dataclasses
from typing import Dict, List, Optional, Tuple, Union

from official_albert.data import squad_features
from official_albert.serving.http_protocols import ApiError
from official_albert.serving.http_protocols import IdLimits
from official_albert.serving.pipeline_inputs import fit_seq_length
from official_albert.serving.pipeline_inputs import recorded_qa_length
from official_albert.serving.qa_settings import resolved_qa_settings
from official_albert.tokenization import SPECIAL_TOKEN_IDS
from official_albert.tokenization.choices import fit_qa_length

# Fill-mask predictions per mask (OIP's `parameters.top_k`; default: the pipeline's), at most MAX_TOP_K (each repeats
# the whole sequence).
FILL_MASK_TOP_K, MAX_TOP_K = 5, 100


def qa_options(model, folder: str) -> Dict[str, Union[int, float]]:
  """The SQuAD windows and post-processing `question_answering` picks when called on `folder` (the run's recorded
  ones: `qa_settings.served_qa_settings`; else the reference's 384 / 128 / 64 fitted to the model's positions,
  `squad_features.fit_windows`, and 30 / 20 / 0.0). Computed once here because the server passes the loaded model,
  from which the pipeline could not read a trainer folder's record."""
  length = fit_seq_length(None, model, folder, squad_features.REFERENCE_SEQ_LENGTH)
  return {"max_seq_length": length, **resolved_qa_settings(model, folder, length)}


def choice_options(model, folder: str) -> Dict[str, int]:
  """The packing `multiple_choice` picks when called on `folder` (as `qa_options`: its recorded length and
  max_qa_length, else the model's positions and RACE's 128 fitted to them: `choices.fit_qa_length`)."""
  length = fit_seq_length(None, model, folder)
  return {"max_seq_length": length,
          "max_qa_length": fit_qa_length(length, recorded_qa_length(model, folder))}


@dataclasses.dataclass(frozen=True)
class ChoiceRow:
  """One multiple-choice question as the batcher queues it: the pipeline's `context`, `question` and `choices`."""
  context: str
  question: str
  choices: Tuple[str, ...]


@dataclasses.dataclass(frozen=True)
class MaskRow:
  """One fill-mask text as the batcher queues it, with its request's `top_k` (OIP's `parameters.top_k`): rows of
  different top_k never share a call."""
  text: str
  top_k: int


def mask_rows(tokenizer, texts: List[str], top_k: Optional[int], name: str, positions: Optional[int] = None,
              cut_at: Optional[int] = None, max_top_k: int = MAX_TOP_K) -> List[MaskRow]:
  """A fill-mask request's rows at `top_k` (default FILL_MASK_TOP_K, at most `max_top_k`), each text checked: it
  holds a [MASK], and fits the model's `positions` — or, for a SavedModel, whose graph cuts a text at the export's
  seq_length (`cut_at`) and computes its --top_k (`max_top_k`) predictions, fits that length (the pipeline refuses
  a text it would cut: refused here, the request is a 400 of its own, not its batch's error).
  Raises ApiError (400) naming the text or parameter and the fix."""
  if top_k is not None and top_k > max_top_k:
    raise ApiError(400, f"parameters.top_k: {top_k}, but model {name!r} is a SavedModel exported with "
                   f"--top_k={max_top_k} (its graph computes that many per [MASK]); ask for at most {max_top_k}, or "
                   f"re-export it with --top_k={top_k}.")
  mask = SPECIAL_TOKEN_IDS["[MASK]"]
  for i, ids in enumerate(tokenizer.encode_ids_batch(texts)):
    if mask not in ids:
      raise ApiError(400, f"text[{i}]: no [MASK] token; write [MASK] where a word should be predicted.")
    if cut_at is not None and len(ids) + 2 > cut_at:  # ([CLS] and [SEP] around it)
      raise ApiError(400, f"text[{i}]: {len(ids) + 2} tokens packed, beyond the export's seq_length={cut_at} where "
                     "the SavedModel cuts a text (its answer would see, and its `sequence` give back, only the "
                     "first ones); shorten the text around its [MASK], or re-export with a larger --seq_length.")
    if positions is not None and len(ids) + 2 > positions:
      raise ApiError(400, f"text[{i}]: {len(ids) + 2} tokens, more than the model's {positions} positions; shorten "
                     "the text around its [MASK].")
  return [MaskRow(t, top_k or min(FILL_MASK_TOP_K, max_top_k)) for t in texts]


@dataclasses.dataclass(frozen=True)
class TokenIds:
  """One row of token ids sent over OIP (`input_word_ids` with its `input_mask` and `input_type_ids`): what the
  batcher queues in place of a text. Rows of different lengths share a call padded with mask 0, which changes no
  answer (as texts padded to the batch's longest)."""
  ids: Tuple[int, ...]
  mask: Tuple[int, ...]
  types: Tuple[int, ...]


def protocol_id_limits(config, max_length: int) -> IdLimits:
  """The `IdLimits` of a model of `config` served at `max_length` positions."""
  return IdLimits(int(config.vocab_size), int(max_length), int(config.type_vocab_size))
