"""Multi-label cells as users' tools write them.

Why: pandas' and datasets' `to_csv` write a list column as Python's repr (`['sports', 'politics']`), a JSON export as
`["sports", "politics"]`, and a JSONL writer may hold that list as a string; each was one class of its own, the
cell's text ("['sports', 'politics']" beside "['sports']"), with no warning. Labels joined by another character than
`task.label_separator` ("sports, politics" beside "sports" and "politics") were classes of their own too: the model
learned the combination, never its parts. A cell written as a list is read as that list; joined labels are named in
a warning (they may be one label whose name holds a comma: "Arts, Culture").
"""

from __future__ import annotations

import collections
import logging
from typing import Any, Sequence

from tasks import row_cells

logger = logging.getLogger(__name__)

_JOINERS = (",", ";", "|", "/", "+")  # what a multi-label cell's labels are joined by when not by label_separator


def listed(value: Any) -> Any:
  """`value` as a list when it is a string written as a list of quoted labels (JSON or Python's spelling: what a
  list column's export writes), else as given: `[1]` or `[2]|[3]` are label names in brackets (a list column of
  strings writes its items quoted), read as before, so one file's `[2]` and `[1]|[2]` stay one class `[2]`."""
  if isinstance(value, str):
    stripped = value.strip()
    if stripped.startswith("[") and stripped.endswith("]"):
      parsed = row_cells.list_cell(stripped)
      if parsed is not None and all(isinstance(item, str) for item in parsed):
        return parsed
  return value


def warn_joined_labels(examples: Sequence, separator: str) -> None:
  """Warns when labels of `examples` (multi-label `TextExample`s) are other labels of theirs joined by another
  character than `separator`, naming the rows' count, an example and the setting that splits them."""
  labels = {label for e in examples for label in (e.label or ())}
  joined = {}
  for label in labels:
    for joiner in _JOINERS:
      parts = [p.strip() for p in label.split(joiner)] if joiner != separator and joiner in label else []
      if len(parts) > 1 and all(p in labels and p != label for p in parts):
        joined[label] = joiner
        break
  if not joined:
    return
  rows = [e for e in examples if any(label in joined for label in (e.label or ()))]
  first = next(label for label in rows[0].label if label in joined)
  joiners = collections.Counter(joined.values()).most_common(1)[0][0]
  logger.warning("%d row(s) hold %d label(s) that are other labels joined by %r, not by task.label_separator=%r "
                 "(e.g. %r at %s:%s): each is a class of its own, learned apart from its parts. If they are several "
                 "labels, set task.label_separator=%r.", len(rows), len(joined),
                 joiners, separator, first, rows[0].path, rows[0].line, joiners)
