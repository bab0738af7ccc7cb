"""Evaluation rows that are training rows, compared as the model sees them: counted and warned about, never refused.

An evaluation on training rows is not held-out: its scores, and the best checkpoint chosen on them, flatter the model.
A dev set may share some texts with training on purpose (a stock question, a common query), so it is one warning
naming the count and the first such row of both files, never an error. Rows are compared by their texts as the
tokenizer sees them (`comparison_text`): "Great film" and "great film " (or an NFD "Café") are one input to a
lower-casing tokenizer, so an evaluation row written so is a training row to the model. The text tasks
(`tasks.text.repeated_rows`) and the row-file tasks (`tasks.row_task.RowFileTask`) share this count.
"""

from __future__ import annotations

import logging
from typing import Any, Callable, Hashable, Mapping, Optional, Sequence, Tuple

from tasks.comparison_text import comparison_text

logger = logging.getLogger(__name__)


def model_text(value: Any, tokenizer_options: Optional[Mapping[str, object]] = None) -> Hashable:
  """A field's value as the tokenizer sees it: a text (`comparison_text`), a list of texts (each), None as None."""
  if isinstance(value, str):
    return comparison_text(value, tokenizer_options)
  if isinstance(value, (list, tuple)):
    return tuple(model_text(v, tokenizer_options) for v in value)
  return value


def row_key(example: Any, fields: Sequence[str], tokenizer_options: Optional[Mapping[str, object]] = None
            ) -> Tuple[Hashable, ...]:
  """The `fields` of `example` that make its model input, as the tokenizer sees them (equal keys: one input)."""
  return tuple(model_text(getattr(example, field), tokenizer_options) for field in fields)


def warn_training_rows(examples: Sequence[Any], training: Sequence[Any], key: Callable[[Any], Hashable]) -> int:
  """Counts the `examples` (evaluation rows, with `path` and `line`) whose `key` a training row has, and warns once
  with the count and the first such row and the training row it repeats. Returns the count."""
  trained = {}
  for example in training:
    trained.setdefault(key(example), example)
  count, first = 0, None
  for example in examples:
    earlier = trained.get(key(example))
    if earlier is not None:
      count += 1
      first = first or (example, earlier)
  if count:
    example, earlier = first
    logger.warning("%d of %d evaluation rows are training rows too (first: %s:%d repeats %s:%d): their scores are "
                   "not held-out scores (rows compared as the tokenizer sees them: case, spaces and Unicode form as "
                   "it treats them).", count, len(examples), example.path, example.line, earlier.path, earlier.line)
  return count
