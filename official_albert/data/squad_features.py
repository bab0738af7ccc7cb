"""SQuAD-style windowed features (reference §5.2): question + paragraph windows, max-context owners, `p_mask`.

Shared by the fine-tuning records (`tasks.squad.data`, which re-exports these names) and the question-answering
predictor (`serving.task_pipelines.question_answering`), so a prediction sees exactly the features the model was
trained and evaluated on.

Features follow the reference layout `[CLS] question [SEP] doc-span [SEP]`, with `doc_stride` windows, max-context
scores, `p_mask` (1 = cannot be an answer: question, both [SEP], padding), [CLS] labels for out-of-span and
impossible answers (v1 too), and unique ids from 1000000000. Characters are aligned by
`tokenization.alignment.align_tokens`; examples that align badly are counted and logged ("mismatch") and get no
features (the reference fallback answer at evaluation); nothing is dropped silently.

An example is any object with the attributes of `tasks.squad.reading.SquadExample`: `qas_id`, `question_text`,
`paragraph_text`, `orig_answer_text`, `start_char`, `is_impossible`.
"""

from __future__ import annotations

import dataclasses
import logging
import math
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from official_albert.tokenization.alignment import align_tokens
from official_albert.tokenization.alignment import Alignment
from official_albert.tokenization.alignment import answer_token_span

logger = logging.getLogger(__name__)

UNIQUE_ID_START = 1000000000


@dataclasses.dataclass
class SquadFeature:
  """One window of one example.

  Attributes:
    unique_id: from 1000000000, one per feature.
    example_index: index into the example list.
    doc_span_index: window number within the example.
    tokens: the token strings of the whole sequence.
    token_to_orig: sequence position → (start, end) character offsets in the paragraph (paragraph tokens only).
    token_is_max_context: sequence position → whether this window is the max-context one for that token.
    input_word_ids, input_mask, input_type_ids, p_mask: int lists of length max_seq_length.
    start_position, end_position: answer token positions (0 = [CLS] for impossible, out-of-span, or an answer no
      piece covers; -1 only when the example has no answer: prediction data).
    is_impossible: 1 when the label points to [CLS].
    doc_offset: position of the first paragraph token (len(question) + 2).
  """
  unique_id: int
  example_index: int
  doc_span_index: int
  tokens: List[str]
  token_to_orig: Dict[int, Tuple[int, int]]
  token_is_max_context: Dict[int, bool]
  input_word_ids: List[int]
  input_mask: List[int]
  input_type_ids: List[int]
  p_mask: List[int]
  start_position: int
  end_position: int
  is_impossible: int
  doc_offset: int


@dataclasses.dataclass
class FeatureStats:
  """Counts logged by `convert_examples_to_features` (never silent)."""
  examples: int = 0
  features: int = 0
  mismatched_examples: List[str] = dataclasses.field(default_factory=list)
  answers_off_token_boundary: List[str] = dataclasses.field(default_factory=list)
  out_of_span_features: int = 0
  cut_questions: List[str] = dataclasses.field(default_factory=list)  # longer than max_query_length: cut (warned)


# ------------------------------------------------------------------------------------------------------ windows
def max_context_score(span_start: int, span_len: int, position: int) -> float:
  """The reference's context score of a token in a window: min(left, right) + 0.01 · window length."""
  left = position - span_start
  right = span_start + span_len - 1 - position
  return min(left, right) + 0.01 * span_len


# The reference's windows: 384 pieces, a stride of 128, questions cut at 64 pieces.
REFERENCE_SEQ_LENGTH, REFERENCE_DOC_STRIDE, REFERENCE_QUERY_LENGTH = 384, 128, 64


def fit_windows(max_seq_length: int, doc_stride: Optional[int] = None,
                max_query_length: Optional[int] = None) -> Tuple[int, int]:
  """(doc_stride, max_query_length) for windows of `max_seq_length` pieces; a value given is kept.

  Why: the reference's 128 / 64 are kept wherever they fit (so records made by `create_finetuning_data` with its
  defaults still match), but a model of 67 positions or fewer would be refused outright (its windows cannot hold a
  64-piece question and three markers). There the reference's proportions at 384 pieces are kept instead: 64 pieces
  get a stride of 21 and questions cut at 10.
  """
  check_window_settings(doc_stride, max_query_length)
  # Only windows the reference's question cap does not fit change, and only what is not given: a stride left unset
  # beside a question cap that was given stays the reference's, as create_finetuning_data's default made it.
  too_short = max_query_length is None and max_seq_length <= REFERENCE_QUERY_LENGTH + 3
  scale = max_seq_length / REFERENCE_SEQ_LENGTH
  if max_query_length is None:
    max_query_length = max(1, int(REFERENCE_QUERY_LENGTH * scale)) if too_short else REFERENCE_QUERY_LENGTH
  if doc_stride is None:
    doc_stride = max(1, int(REFERENCE_DOC_STRIDE * scale)) if too_short else REFERENCE_DOC_STRIDE
  return int(doc_stride), int(max_query_length)


def check_window_settings(doc_stride: Optional[int], max_query_length: Optional[int]) -> None:
  """Refuses a doc_stride or max_query_length below 1 (None = not given, fine).

  Why: a stride of 0 never moves the next window (a negative one moves it back), so the windowing of any paragraph
  longer than one window never ends; a question cap of 0 drops every question and a negative one cuts its last
  pieces (`[:-1]`), both silently.
  """
  for name, value, why in (("doc_stride", doc_stride, "each window must start at least 1 piece after the last"),
                           ("max_query_length", max_query_length, "0 would drop every question, a negative value "
                            "its last pieces")):
    if value is not None and int(value) < 1:
      raise ValueError(f"{name}={value} must be >= 1 ({why}); set it to a positive number of pieces (the "
                       f"reference uses doc_stride={REFERENCE_DOC_STRIDE}, max_query_length="
                       f"{REFERENCE_QUERY_LENGTH}) or leave it unset to get those fitted to the model.")


def doc_spans(num_tokens: int, max_tokens_for_doc: int, doc_stride: int) -> List[Tuple[int, int]]:
  """(start, length) windows over `num_tokens` paragraph tokens: each starts min(length, doc_stride) after the
  previous one, until the end of the paragraph is covered (reference). A doc_stride below 1 is refused (it would
  never end)."""
  check_window_settings(doc_stride, None)
  if max_tokens_for_doc < 1:
    raise ValueError(f"no room for the paragraph: {max_tokens_for_doc} pieces per window (max_seq_length too short "
                     "for the question); raise max_seq_length or lower max_query_length.")
  spans = []
  start = 0
  while start < num_tokens:
    length = min(num_tokens - start, max_tokens_for_doc)
    spans.append((start, length))
    if start + length == num_tokens:
      break
    start += min(length, doc_stride)
  return spans


def max_context_owners(spans: Sequence[Tuple[int, int]], num_tokens: int) -> List[int]:
  """Per paragraph token, the window in which it has the most context (the first window wins ties, as the
  reference)."""
  best_span = [-1] * num_tokens
  best_score = [-math.inf] * num_tokens
  for k, (span_start, span_len) in enumerate(spans):
    for doc_pos in range(span_start, span_start + span_len):
      score = max_context_score(span_start, span_len, doc_pos)
      if score > best_score[doc_pos]:
        best_score[doc_pos], best_span[doc_pos] = score, k
  return best_span


# ----------------------------------------------------------------------------------------------------- features
# Long because: the reference's convert_examples_to_features (run_squad_sp.py), step for step (tokenize the question,
# align, window the paragraph, label each window), so that the two read side by side.
def convert_examples_to_features(examples: Sequence[Any], tokenizer, max_seq_length: int = 384,
                                 doc_stride: int = 128, max_query_length: int = 64,
                                 min_match_fraction: float = 0.8) -> Tuple[List[SquadFeature], FeatureStats]:
  """Windows each example into features (reference `convert_examples_to_features`).

  Args:
    examples: `SquadExample`s (`tasks.squad.read_squad_examples`) or objects with the same attributes.
    tokenizer: `official_albert.tokenization.FullTokenizer` (its `tokenize` applies `preprocess_text`).
    max_seq_length, doc_stride, max_query_length: reference defaults 384 / 128 / 64.
    min_match_fraction: below this fraction of aligned paragraph characters an example counts as a mismatch and
      produces no features (the reference uses 0.8 of its LCS); it is counted, logged and gets the fallback answer.

  Returns:
    (features, stats).
  """
  check_window_settings(doc_stride, max_query_length)
  if max_seq_length <= max_query_length + 3:
    raise ValueError(f"max_seq_length={max_seq_length} must exceed max_query_length + 3 = {max_query_length + 3}.")
  lower = bool(getattr(tokenizer, "do_lower_case", True))
  quotes = getattr(tokenizer, "mode", "hf") == "hf"  # FullTokenizer's "hf" mode turns `` and '' into " (HF does).
  cls_id, sep_id = tokenizer.convert_tokens_to_ids(["[CLS]", "[SEP]"])
  stats = FeatureStats(examples=len(examples))
  features: List[SquadFeature] = []
  unique_id = UNIQUE_ID_START
  para_cache: Dict[str, Tuple[List[str], List[int], Alignment]] = {}
  for ex_index, example in enumerate(examples):
    if example.paragraph_text not in para_cache:
      para_tokens = list(tokenizer.tokenize(example.paragraph_text))
      para_cache.clear()  # Questions of one paragraph are adjacent; keep only the current paragraph.
      para_cache[example.paragraph_text] = (para_tokens, tokenizer.convert_tokens_to_ids(para_tokens),
                                            align_tokens(para_tokens, example.paragraph_text, lower, quotes))
    para_tokens, para_ids, alignment = para_cache[example.paragraph_text]
    if alignment.matched_fraction < min_match_fraction or not para_ids:
      stats.mismatched_examples.append(example.qas_id)
      logger.warning("MISMATCH: question %s: only %.1f%% of the paragraph aligned with its %d pieces; no features.",
                     example.qas_id, 100 * alignment.matched_fraction, len(para_ids))
      continue
    query_tokens = list(tokenizer.tokenize(example.question_text))
    if len(query_tokens) > max_query_length:  # (the reference's cut, kept; its end often holds the question words)
      stats.cut_questions.append(example.qas_id)
      query_tokens = query_tokens[:max_query_length]
    query_ids = tokenizer.convert_tokens_to_ids(query_tokens)

    tok_start = tok_end = -1
    has_answer = bool(example.orig_answer_text) and not example.is_impossible and example.start_char >= 0
    if has_answer:
      tok_start, tok_end = answer_token_span(alignment, example.start_char, len(example.orig_answer_text))
      recovered = (example.paragraph_text[alignment.starts[tok_start]:alignment.ends[tok_end]]
                   if tok_start >= 0 else None)
      if recovered != example.orig_answer_text:
        stats.answers_off_token_boundary.append(example.qas_id)
        logger.log(logging.WARNING if tok_start < 0 else logging.INFO,
                   "Question %s: answer %r does not fall on token boundaries (tokens give %r%s).", example.qas_id,
                   example.orig_answer_text, recovered, "; no piece covers it: labelled [CLS]" if tok_start < 0 else "")

    spans = doc_spans(len(para_ids), max_seq_length - len(query_ids) - 3, doc_stride)
    best_span = max_context_owners(spans, len(para_ids))

    doc_offset = len(query_ids) + 2
    for span_index, (span_start, span_len) in enumerate(spans):
      ids = [cls_id] + list(query_ids) + [sep_id]
      types = [0] * len(ids)
      p_mask = [0] + [1] * (len(query_ids) + 1)
      token_to_orig, is_max = {}, {}
      for i in range(span_len):
        doc_pos = span_start + i
        pos = len(ids)
        token_to_orig[pos] = (alignment.starts[doc_pos], alignment.ends[doc_pos])
        is_max[pos] = best_span[doc_pos] == span_index
        ids.append(para_ids[doc_pos])
        types.append(1)
        p_mask.append(0)
      ids.append(sep_id)
      types.append(1)
      p_mask.append(1)
      tokens = ["[CLS]"] + query_tokens + ["[SEP]"] + para_tokens[span_start:span_start + span_len] + ["[SEP]"]
      pad = max_seq_length - len(ids)
      mask = [1] * len(ids) + [0] * pad
      ids += [0] * pad
      types += [0] * pad
      p_mask += [1] * pad

      if example.is_impossible:
        start_pos, end_pos, impossible = 0, 0, 1
      elif tok_start >= 0 and span_start <= tok_start and tok_end < span_start + span_len:
        start_pos, end_pos, impossible = tok_start - span_start + doc_offset, tok_end - span_start + doc_offset, 0
      elif tok_start >= 0 or has_answer:
        # Out of this window, or an answer no piece covers (only " ", U+200B, a BOM...: it is in no window):
        # [CLS] label, v1 too (reference). A -1 label would break the gather of the training loss.
        start_pos, end_pos, impossible = 0, 0, 1
        stats.out_of_span_features += 1
      else:
        start_pos, end_pos, impossible = -1, -1, 0  # No label (prediction data).
      features.append(SquadFeature(
          unique_id=unique_id, example_index=ex_index, doc_span_index=span_index, tokens=tokens,
          token_to_orig=token_to_orig, token_is_max_context=is_max, input_word_ids=ids, input_mask=mask,
          input_type_ids=types, p_mask=p_mask, start_position=start_pos, end_position=end_pos,
          is_impossible=impossible, doc_offset=doc_offset))
      unique_id += 1
  stats.features = len(features)
  if stats.cut_questions:
    logger.warning("%d question(s) longer than max_query_length=%d pieces were cut to their first %d (e.g. %s): the "
                   "words after the cut are not read; raise max_query_length (the window's other pieces are the "
                   "context's).", len(stats.cut_questions), max_query_length, max_query_length,
                   stats.cut_questions[:3])
  logger.info("SQuAD features: %d examples → %d features; %d mismatched examples (fallback answers); %d answers "
              "not on token boundaries; %d out-of-span windows.", stats.examples, stats.features,
              len(stats.mismatched_examples), len(stats.answers_off_token_boundary), stats.out_of_span_features)
  return features, stats


def features_to_arrays(features: Sequence[SquadFeature], is_training: bool) -> Dict[str, np.ndarray]:
  """Stacks features into model-input arrays [N, L] and [N] (the records of `feature_record`, batched)."""
  out = {
      "unique_ids": np.asarray([f.unique_id for f in features], np.int64),
      "input_word_ids": np.asarray([f.input_word_ids for f in features], np.int32),
      "input_mask": np.asarray([f.input_mask for f in features], np.int32),
      "input_type_ids": np.asarray([f.input_type_ids for f in features], np.int32),
      "p_mask": np.asarray([f.p_mask for f in features], np.int32),
  }
  if is_training:
    out["start_positions"] = np.asarray([f.start_position for f in features], np.int32)
    out["end_positions"] = np.asarray([f.end_position for f in features], np.int32)
    out["is_impossible"] = np.asarray([f.is_impossible for f in features], np.int32)
  return out
