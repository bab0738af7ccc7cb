"""The label set a training file gives (the order of the classifier's outputs), and the spellings worth a warning.

A label's spelling is its name: labels written two ways (case, full-width letters, a no-break space, `1` and `1.0`)
stay separate classes, as written, with a warning naming them (a file that means one class would otherwise train two,
each on part of it, without a word). A multi-label row whose label cell is empty trains as negative for every class
(a row with no category is a legitimate example); how many there are is logged, since an empty cell is as often a
gap in the file.
"""

from __future__ import annotations

import logging
import math
from typing import Any, Dict, Iterable, List, Sequence
import unicodedata

from official_albert import file_io
from official_albert import model_directory
from official_albert.checkpoints import native

logger = logging.getLogger("tasks.text.data")  # (the readers' logger: one name to filter the text tasks' reading by)


def label_set(examples: Iterable[Any]) -> List[str]:
  """The sorted labels (or tags) of `examples` (`tasks.text.data.TextExample`): the order of the classifier's
  outputs."""
  seen = set()
  for e in examples:
    seen.update(e.label if isinstance(e.label, list) else [e.label])
  labels = sorted(str(v) for v in seen if v is not None)
  _warn_numbers_written_twice(labels)
  _warn_case_variants(labels)
  return labels


def warn_empty_label_cells(path: str, column: str, examples: Sequence[Any]) -> None:
  """Logs how many of a multi-label file's rows have no label: they train as negative for every class."""
  empty = [e.line for e in examples if e.label == []]
  if empty:
    logger.warning("%s: %d of %d rows have an empty label cell in column %r (e.g. line %s); multi-label reads each "
                   "as negative for every class. If they are gaps in the file, fill or remove them.", path, len(empty),
                   len(examples), column, empty[0])


def _warn_case_variants(labels: Sequence[str]) -> None:
  """Logs labels equal but for case, compatibility forms (full-width letters, a no-break space: NFKC) or spaces: they
  stay separate classes (a label's spelling is its name), but a file that means one class would train two."""
  by_folded: Dict[str, List[str]] = {}
  for label in labels:
    by_folded.setdefault(" ".join(unicodedata.normalize("NFKC", label).casefold().split()), []).append(label)
  for spellings in by_folded.values():
    if len(spellings) > 1:
      logger.warning("Labels [%s] differ only in case, width or spaces; they are %d separate classes. If they are one, "
                     "write the label column one way and rebuild.", ", ".join(map(ascii, spellings)), len(spellings))


def _warn_numbers_written_twice(labels: Sequence[str]) -> None:
  """Logs labels that are one number written two ways ('1' and '1.0', as a spreadsheet or pandas writes a column
  with a gap): CSV / TSV cells are label names, so they are two classes (JSONL numbers are merged by
  `label_text`), which is rarely what the file means."""
  by_number: Dict[float, List[str]] = {}
  for label in labels:
    try:
      number = float(label)
    except ValueError:
      continue
    if math.isfinite(number):
      by_number.setdefault(number, []).append(label)
  for spellings in by_number.values():
    if len(spellings) > 1:
      logger.warning("Labels %s are one number written %d ways; they are %d separate classes. If they are one, "
                     "write the label column one way (e.g. 1 rather than 1.0) and rebuild.", spellings,
                     len(spellings), len(spellings))


def check_saved_labels(model_dir: str, labels: List[str]) -> None:
  """Raises when labels.json does not name one label per output of the classifier trained in `model_dir` (a
  hand-edited or copied file would fail the restore with a bare shape error)."""
  if not file_io.exists(model_directory.path(model_dir, model_directory.CHECKPOINT_STATE_FILE)):
    return
  outputs = native.infer_num_outputs(model_dir)
  if outputs is not None and outputs != len(labels):
    raise ValueError(f"{model_directory.path(model_dir, model_directory.LABELS_FILE)} names {len(labels)} labels "
                     f"{labels[:10]} but the classifier trained in {model_dir} has {outputs} outputs: the file "
                     "belongs to another run. Restore the labels.json written by this model's training run (or "
                     "retrain).")
