"""What the pipelines say about their inputs instead of accepting them silently (issue 44): texts that are not strings,
a batch size below 1, a `seq_length` above the model's positions, texts cut, empty texts, a patience that can never
end a row early; and the pipelines' default length (the one the run's --mode=predict uses, else the model's
positions: a model extended to 1,024 positions is used at 1,024; question answering's windows at most the recipe's
384)."""

from __future__ import annotations

import logging
import numbers
from typing import Iterable, List, Optional, Sequence

import numpy as np

from official_albert import model_directory as md
from official_albert.modeling.early_exit import unreachable_patience

logger = logging.getLogger("official_albert.serving.pipelines")


def as_list(texts, name: str = "texts") -> List[str]:
  """One text or a sequence of them, as a list; a ValueError naming the first element that is not a string (else
  the tokenizer fails deep inside with a TypeError that names no text), or the first text holding a lone surrogate
  (which no UTF-8 tokenizer takes). `name`: the argument, for the message
  (`text_pairs` goes through here too, so one pair string is one pair, not a list of characters)."""
  if texts is None or not isinstance(texts, (str, bytes, Iterable)):  # (list(None): "'NoneType' object is not ...")
    raise ValueError(f"{name} is {texts!r}: give a string or a list of strings.")
  items = [texts] if isinstance(texts, (str, bytes)) else list(texts)
  bad = next((i for i, t in enumerate(items) if not isinstance(t, (str, bytes))), None)
  if bad is not None:
    raise ValueError(f"{name}[{bad}] is a {type(items[bad]).__name__}, not a string.")
  for i, t in enumerate(items):
    if isinstance(t, str):
      try:
        t.encode("utf-8")
      except UnicodeEncodeError as e:  # a lone surrogate: SentencePiece's TypeError would name no text
        raise ValueError(f"{name}[{i}] is not valid Unicode: {e.reason} at character {e.start} "
                         f"({t[e.start]!r}); decode the source with errors='replace' or drop the character.") from None
  return items


def check_batch_size(batch_size) -> None:
  """A ValueError for a batch size that is not a whole number >= 1 (range() would say 'arg 3 must not be zero')."""
  if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) or batch_size < 1:
    raise ValueError(f"batch_size={batch_size!r}; give a whole number >= 1.")


def check_top_k(top_k) -> None:
  """fill_mask's `top_k` below 1 refused, on a model directory and a SavedModel alike (the SavedModel path answered
  every mask with `[]`)."""
  if isinstance(top_k, bool) or not isinstance(top_k, numbers.Integral) or top_k < 1:
    raise ValueError(f"top_k must be a whole number >= 1, got {top_k!r}.")


def check_seq_length(seq_length) -> None:
  """A ValueError for a `seq_length` that is neither None (the model's default) nor a whole number >= 3 (`[CLS] x
  [SEP]`): 0 meant the default length, silently, and 2 packed no text."""
  if seq_length is not None and (isinstance(seq_length, bool) or not isinstance(seq_length, (int, np.integer))
                                 or seq_length < 3):
    raise ValueError(f"seq_length={seq_length!r}; give a whole number >= 3 ([CLS] text [SEP]), or None for the "
                     "model's default length.")


def warn_cut(seq_length: Optional[int], max_positions: int) -> None:
  """Logs the cut of a `seq_length` above the model's max_position_embeddings (the pipelines pack at most that),
  after `check_seq_length`."""
  check_seq_length(seq_length)
  if seq_length is not None and seq_length > max_positions:
    logger.warning("seq_length=%d is above the model's max_position_embeddings (%d): texts are cut at %d tokens.",
                   seq_length, max_positions, max_positions)


def empty_texts(texts: Sequence[str], text_pairs: Optional[Sequence[str]], purpose: str) -> List[int]:
  """The indices of the texts that are empty or only white space (their pair too, if any), with a warning."""
  pairs = text_pairs if text_pairs is not None else [""] * len(texts)
  empty = [i for i, (text, pair) in enumerate(zip(texts, pairs)) if not str(text).strip() and not str(pair).strip()]
  if empty:
    logger.warning("%s: %d of %d texts are empty (the first at index %d); their answers are marked \"empty\": true "
                   "and say nothing about a text.", purpose, len(empty), len(texts), empty[0])
  return empty


def warn_patience(patience: Optional[int], iterations: int, purpose: str) -> None:
  """Logs a patience that can never end a row early (`early_exit.unreachable_patience`)."""
  never = unreachable_patience(patience or 0, iterations)
  if never:
    logger.warning("%s: %s", purpose, never)


def pads_to_cap(model) -> bool:
  """Whether the pipelines pack `model`'s rows to the full length (seq_length / positions) instead of to each
  batch's longest text: block_sparse models, whose pattern (the last global block, the random blocks) follows the
  padded length, so a text's answer would depend on its batch-mates and differ from the export's, which runs such
  models at seq_length (serving/export.py). A config whose attention_type is None (a SavedModel exported before it
  was recorded: `saved_model_runtime.ExportedShape`) pads to the full length too: safe whatever the type."""
  attention_type = getattr(getattr(model, "config", None), "attention_type", "dense")
  return attention_type is None or attention_type == "block_sparse"


def default_seq_length(model, model_dir: Optional[str], recipe: Optional[int] = None) -> int:
  """A pipeline's length when none is given: an export folder's export length; a trainer directory's predict length
  (`md.recorded_seq_length`: params.yaml's task.predict_data.seq_length, else validation_data's, else train_data's;
  at most the model's positions); else the model's max_position_embeddings, or with a `recipe` (question answering's
  384-piece windows, which cover any context whatever their length) the smaller of the two.

  Why the training run's record and not a later predict run's: params.yaml is written by the run that trained the
  directory (an eval-only run writes one only where there is none), and `--mode=predict` writes only its prediction
  files. A predict run's --params_override (task.predict_data.seq_length=384 on a directory trained and recorded at
  128) is recorded nowhere, and several predict runs may read one directory at different lengths; the recorded
  predict length is the one the training run declared for prediction (the recipes set it to their training and
  evaluation length, at which the checkpoint was chosen). So a directory answers the same whatever predict runs
  came after it (and export_saved_model's warning of a default length below it names the same record); pass
  `seq_length` (question answering: `max_seq_length`) to answer at a later predict run's length."""
  if getattr(model, "config", None) is None:
    return 128  # a stub model object without a config
  positions = model.config.max_position_embeddings
  settings = getattr(model, "settings", None)
  if isinstance(settings, dict) and settings.get("seq_length"):
    return min(int(settings["seq_length"]), positions)
  recorded = md.recorded_seq_length(model_dir)
  if recorded:
    logger.info("seq_length=%d: the length %s packs texts at in --mode=predict (%s).", min(recorded, positions),
                model_dir, md.PARAMS_FILE)
    return min(recorded, positions)
  if recipe is not None and recipe != positions:
    logger.info("seq_length=%d: the recipe's %d at most the model's max_position_embeddings %d.",
                min(recipe, positions), recipe, positions)
    return min(recipe, positions)
  return positions


def recorded_qa_length(model, model_dir: Optional[str]) -> Optional[int]:
  """Multiple choice: the question+option cap the folder records — an export's (a SavedModel's `tokenization_info`,
  an OpenVINO / LiteRT folder's serving_config.json: the cap its graph or the export packed with), else the trainer
  directory's task.max_qa_length — or None (then RACE's 128, fitted: `choices.fit_qa_length`). An export folder has
  no params.yaml, so without this its pipelines packed at the default while a SavedModel's text signatures used the
  run's value."""
  settings = getattr(model, "settings", None)
  if isinstance(settings, dict) and settings.get("max_qa_length"):
    return int(settings["max_qa_length"])
  return md.recorded_task_int(model_dir, "max_qa_length")


def fit_seq_length(seq_length: Optional[int], model, model_dir: Optional[str], recipe: Optional[int] = None) -> int:
  """`seq_length` cut to the model's positions with a warning (`warn_cut`), or `default_seq_length` when None."""
  check_seq_length(seq_length)
  if seq_length is None:
    return default_seq_length(model, model_dir, recipe)
  config = getattr(model, "config", None)
  if config is None:
    return int(seq_length)
  warn_cut(seq_length, config.max_position_embeddings)
  return min(int(seq_length), config.max_position_embeddings)


def log_cut_texts(cut: Sequence[int], total: int, length: int) -> None:
  """Logs the texts longer than the packed length (`cut`: their full lengths in tokens)."""
  if cut:
    logger.warning("%d of %d texts are longer than seq_length=%d and were cut (the longest has %d tokens); pass a "
                   "larger seq_length (at most the model's max_position_embeddings) to keep more.", len(cut), total,
                   length, max(cut))
