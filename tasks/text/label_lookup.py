"""A label as read (a cell, a JSON value) → the output index of a fixed label set, in constant time per label.

Every row's label (every token's tag) is looked up, so the spelling → index map of a label set is built once and
reused: `lookup` finds it by the label list's identity (and length), without copying or hashing the list (that cost
O(labels) per lookup: 1M rows against 10k labels took minutes per records build). A label list is not changed in
place once rows are looked up against it (the task's labels are fixed once resolved; `ReadOptions.labels` is a
tuple); a new list, equal or not, gets its own map.
"""

from __future__ import annotations

import functools
import logging
import math
import re
import threading
from typing import Any, Dict, List, Optional, Sequence, Tuple
import unicodedata

logger = logging.getLogger("tasks.text.data")  # (the readers' logger: one name to filter the text tasks' reading by)

_WHOLE_FLOAT = re.compile(r"[-+]?[0-9]+\.0+")
_RECENT_SETS = 8  # label sets whose maps are kept (a run reads against one or two: the task's, the options')
_recent: List[Tuple[Sequence[str], int, Dict[str, int]]] = []  # (labels, len(labels), map), the newest first
_recent_lock = threading.Lock()


def label_text(value: Any) -> str:
  """A label as its string: a JSON number that is a whole number is written as an integer, so the labels `1` and
  `1.0` of one JSONL file are one class (not '1' and '1.0'); NaN and the infinities (json.dumps' missing values) are
  '', no label (they were classes 'nan' / 'inf'); text is stripped and in Unicode NFC, so `négatif` typed as é (NFC)
  and as e + combining accent (NFD, as macOS file names write it) is one label, not two that print alike."""
  if isinstance(value, float) and (value.is_integer() or not math.isfinite(value)):
    value = int(value) if value.is_integer() else ""
  return unicodedata.normalize("NFC", str(value)).strip()


@functools.lru_cache(maxsize=8)
def _known(labels: Tuple[str, ...]) -> Dict[str, int]:
  """Spelling → output index of a fixed label set (`task.labels` or labels.json, as written): every name by its own
  spelling first, then its `label_text` form (and '1' for a saved '1.0', as JSONL's 1.0 was read before it became
  '1') where no other output has that form too. labels.json of a run before NFC / whole-number reading may name two
  outputs that are now one label (NFC and NFD `négatif`); those keep their ids by exact spelling, and a warning names
  them. Cached by value, so that an equal list built anew (a task's labels read twice) warns once."""
  index: Dict[str, int] = {}
  owners: Dict[str, List[int]] = {}
  for i, label in enumerate(labels):
    index.setdefault(label, i)
    text = label_text(label)
    for alias in {text, str(int(float(text)))} if _WHOLE_FLOAT.fullmatch(text) else {text}:
      owners.setdefault(alias, []).append(i)
  shared = {alias: ids for alias, ids in owners.items() if len(ids) > 1}
  index.update({alias: ids[0] for alias, ids in owners.items() if alias not in shared and alias not in index})
  if shared:
    logger.warning("The label set %s names outputs %s that are one label after NFC / stripping / 1.0 → 1 (a model "
                   "trained before labels were read so); rows are matched to these outputs by their exact spelling "
                   "only.", list(labels)[:20], [[(i, ascii(labels[i])) for i in ids] for ids in shared.values()][:5])
  return index


def output_index(labels: Sequence[str]) -> Dict[str, int]:
  """`_known(labels)`, found by the identity and length of `labels`: O(1) for a label list already looked up (the
  list is held, so its id cannot be reused by another), O(labels) once for a new one."""
  with _recent_lock:
    for entry in _recent:
      if entry[0] is labels and entry[1] == len(labels):
        return entry[2]
  index = _known(tuple(labels))
  with _recent_lock:
    _recent.insert(0, (labels, len(labels), index))
    del _recent[_RECENT_SETS:]
  return index


def lookup(labels: Sequence[str], value: Any) -> Optional[int]:
  """The output index of a row's label as read (a string, or a JSON number): its exact spelling (str(1.0) = '1.0',
  as runs before whole-number reading saved it), then its `label_text` form; None when neither is known."""
  known = output_index(labels)
  for key in (str(value), label_text(value)):
    if key in known:
      return known[key]
  return None
