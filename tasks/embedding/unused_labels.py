"""A pairs file's label column that `text_embedding` does not read: refused when it marks some pairs as non-matching.

Paraphrase and duplicate sets (Quora duplicates, PAWS, MRPC) are written `sentence1, sentence2, label` with label 0 on
the pairs that do NOT match. With `task.loss=mnrl` (no `task.score_column`) every row is an (anchor, positive) pair:
the label-0 rows would be trained as matches, silently. So a column named like a label (`LABEL_NAMES`,
case-insensitive) that the run does not read is looked at while the rows are read (`read_pairs`): 0 / false / a
negative class on some rows is an error naming the file, the column, the count and the fixes; all 1 / true is logged
as ignored; other values (graded scores) are warned about. `task.ignore_label_column=true` opts out (a column that
means something else).
"""

from __future__ import annotations

import dataclasses
import logging
import math
from typing import Any, Dict, Iterable, Optional, Tuple

from tasks import row_files

logger = logging.getLogger(__name__)

# Column names read as "this row's label" (compared lower-cased, spaces stripped).
LABEL_NAMES = ("label", "labels", "score", "is_duplicate", "similarity", "relevance")
POSITIVE_WORDS = frozenset({"true", "yes", "y", "positive", "pos", "duplicate", "paraphrase", "entailment",
                            "relevant", "similar", "match"})
NEGATIVE_WORDS = frozenset({"false", "no", "n", "negative", "neg", "not_duplicate", "not duplicate", "non_duplicate",
                            "not_paraphrase", "contradiction", "neutral", "not_entailment", "irrelevant",
                            "not_relevant", "dissimilar", "different", "mismatch"})


def value_kind(value: Any) -> Optional[str]:
  """"positive" (1, true, yes, ...), "negative" (0 or below, false, no, contradiction, ...), "other" (a graded score
  such as 3.8, an unknown class) or None (a blank cell: says nothing)."""
  if value is None or isinstance(value, (list, dict)):
    return None if not value else "other"
  if isinstance(value, bool):
    return "positive" if value else "negative"
  text = str(value).strip().lower()
  if not text:
    return None
  try:
    number = float(text)
  except ValueError:
    return "positive" if text in POSITIVE_WORDS else "negative" if text in NEGATIVE_WORDS else "other"
  if math.isnan(number):
    return "other"
  return "negative" if number <= 0 else "positive" if number == 1 else "other"


@dataclasses.dataclass
class _Column:
  """What one label-like column held: rows per kind and the first (line, value) of each kind."""
  counts: Dict[str, int] = dataclasses.field(default_factory=lambda: {"positive": 0, "negative": 0, "other": 0})
  firsts: Dict[str, Tuple[int, Any]] = dataclasses.field(default_factory=dict)
  values: Dict[str, Any] = dataclasses.field(default_factory=dict)  # distinct values (the first _MAX_VALUES + 1)
  numeric: bool = True  # every value a number

  def add(self, line: int, value: Any, kind: str) -> None:
    self.counts[kind] += 1
    self.firsts.setdefault(kind, (line, value))
    text = str(value).strip().lower()
    if len(self.values) <= _MAX_VALUES:
      self.values.setdefault(text, value)
    try:
      float(text)
    except ValueError:
      self.numeric = False


_MAX_VALUES = 8


class UnusedLabels:
  """Tallies the label-like columns a run does not read, row by row (`see`), and judges them once read (`check`).

  Args:
    path: the file, for the messages.
    read_columns: the columns the run reads (anchor, positive, negative, score).
  """

  def __init__(self, path: str, read_columns: Iterable[str]):
    self.path = path
    self.read_columns = {c for c in read_columns if c}
    self.columns: Dict[str, _Column] = {}
    self.rows = 0

  def see(self, line: int, row: Dict[str, Any]) -> None:
    """Counts one row that will be trained (or evaluated) as a pair."""
    self.rows += 1
    for key, value in row.items():
      if not isinstance(key, str) or key in self.read_columns or key.strip().lower() not in LABEL_NAMES:
        continue
      kind = value_kind(value)
      if kind is not None:
        self.columns.setdefault(key, _Column()).add(line, value, kind)

  def check(self) -> None:
    """Raises for a column with 0 / false / a negative class on some rows; logs the others (ignored columns).

    Raises:
      TextDataError: naming the file, the column, how many rows and the first, and the three fixes.
    """
    for name, column in self.columns.items():
      negative = column.counts["negative"]
      if negative and len(column.values) > 1:
        line, value = column.firsts["negative"]
        binary = column.numeric and not column.counts["other"]
        fix = (f"Drop those rows (keep the matching pairs); or set task.score_column={name} with task.loss=cosent "
               "(or cosine, for scores in [-1, 1]) to learn from the column" if binary else
               f"It holds classes ({', '.join(map(repr, list(column.values.values())[:_MAX_VALUES]))}"
               f"{', ...' if len(column.values) > _MAX_VALUES else ''}): keep only the rows of the class that means a "
               "match (NLI sets such as SNLI / MultiNLI write entailment as 0: keep those, drop neutral and "
               "contradiction)" + (f"; or, for graded scores, set task.score_column={name} with task.loss=cosent"
                                   if column.numeric else ""))
        raise row_files.TextDataError(
            f"{self.path}: column {name!r} is not read (no task.score_column is set), yet {negative} of {self.rows} "
            f"rows hold 0 / false / a negative class there (first: line {line}, {value!r}); task.loss=mnrl trains "
            f"every row as a matching (anchor, positive) pair, so non-matching pairs would be trained as matches. "
            f"{fix}; or, if the column means something else, set task.ignore_label_column=true.")
    for name, column in self.columns.items():
      if len(column.values) == 1:
        logger.info("%s: column %r (%r on every row) is not read: every row is a matching pair.", self.path, name,
                    next(iter(column.values.values())))
      elif column.counts["other"]:
        line, value = column.firsts["other"]
        logger.warning("%s: column %r is not read (no task.score_column is set) and holds values other than 1 / "
                       "true (first: line %d, %r): every row is trained as a matching pair. If it grades the pairs, "
                       "set task.score_column=%s with task.loss=cosent; if it means something else, set "
                       "task.ignore_label_column=true.", self.path, name, line, value, name)
      else:
        logger.info("%s: column %r (1 / true on every row) is not read: every row is a matching pair.", self.path,
                    name)  # (1 and true, yes, ...: several spellings of a match)
