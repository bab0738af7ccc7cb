"""GLUE TSV files: reading them (UTF-8, no quoting) and checking their header row against the GLUE release.

Split out of the GLUE data (`tasks.glue` exports these names) so that each module holds one concept: this one knows
the files, data.py the tasks' examples. A file that is not UTF-8 is an error naming file:line and the fix (the
decoder alone names a byte offset). Files are read a line at a time (`iter_tsv`): what an MNLI-sized file costs is
the examples kept, not the file and its parse columns; a `.gz` file is read as it decompresses. The header check
replaces the reference's unchecked skip of the first line, which silently drops the first example of a file saved
without its header (see `is_header`).
"""

from __future__ import annotations

import logging
import math
from typing import Dict, Iterator, List, Optional, Tuple

from tasks import row_files

logger = logging.getLogger(__name__)


class GlueDataError(ValueError):
  """A GLUE file is malformed; the message names the file and line."""


_STSB = "index|genre|filename|year|old_index|source1|source2|sentence1|sentence2"
_MNLI = ("index|promptID|pairID|genre|sentence1_binary_parse|sentence2_binary_parse|sentence1_parse|sentence2_parse|"
         "sentence1|sentence2")
_PAIR = "index|sentence1|sentence2"
# The header rows of the GLUE release, "|"-separated: task folder → (train and dev files, test file); '' = none.
_RELEASE = {
    "CoLA": ("", "index|sentence"),
    "SST-2": ("sentence|label", "index|sentence"),
    "MRPC": ("Quality|#1 ID|#2 ID|#1 String|#2 String", "index|#1 ID|#2 ID|#1 String|#2 String"),
    "STS-B": (_STSB + "|score", _STSB),
    "QQP": ("id|qid1|qid2|question1|question2|is_duplicate", "id|question1|question2"),
    "MNLI": (_MNLI + "|label1|gold_label", _MNLI),
    "QNLI": ("index|question|sentence|label", "index|question|sentence"),
    "RTE": (_PAIR + "|label", _PAIR),
    "WNLI": (_PAIR + "|label", _PAIR),
    "diagnostic": ("", _PAIR),
}
# (task folder, split) → the header's column names. MNLI's dev files carry the five annotator labels.
HEADERS: Dict[Tuple[str, str], Tuple[str, ...]] = {
    (folder, split): tuple(header.split("|"))
    for folder, (train_dev, test) in _RELEASE.items()
    for split, header in (("train", train_dev), ("dev", train_dev), ("test", test)) if header
}
HEADERS[("MNLI", "dev")] = tuple((_MNLI + "|label1|label2|label3|label4|label5|gold_label").split("|"))


def read_tsv(path: str) -> List[List[str]]:
  """Every row of a GLUE TSV (`iter_tsv`), row i from line i + 1."""
  return [row for _, row in iter_tsv(path)]


def iter_tsv(path: str) -> Iterator[Tuple[int, List[str]]]:
  """(line number, cells) of a TSV with no quoting (GLUE texts contain bare `"`), as the reference's
  `csv.reader(quotechar=None)` reads it: cells split at tabs only, a blank line an empty row, lines ending at \n,
  \r\n or \r (CRLF files, the MRPC / STS-B samples, read as LF ones; not at U+2028, which a text may hold), a
  byte-order mark at the top dropped. Read a line at a time (a `.gz` file as it decompresses).

  Raises:
    GlueDataError: the file is not UTF-8 (at its first bad line; the rows before it are yielded); the message names
      file:line, the byte and the fix.
  """
  def undecodable(line: int, raw: bytes, at: int, offset: int) -> GlueDataError:
    return GlueDataError(
        f"{path}:{line}: invalid UTF-8 (byte 0x{raw[at]:02x} at byte {at + 1} of the line, byte offset {offset} of "
        f"the file). GLUE files are UTF-8. Fix: convert the file to UTF-8 (from Latin-1: `iconv -f latin1 -t utf-8 "
        f"{path} > fixed.tsv`) or correct line {line}.")

  for number, line in row_files.text_lines(path, undecodable):
    line = line.rstrip("\r\n")  # (one piece, one ending: \n, \r\n or \r)
    yield number, line.split("\t") if line else []


def is_number(text: str) -> bool:
  """Whether `text` is a finite decimal number (`float` also reads NaN, infinity and `1_0`)."""
  try:
    value = float(text)
  except ValueError:
    return False
  return math.isfinite(value) and "_" not in text


def is_header(row: List[str], spec, split: str, layout, path: str) -> bool:
  """Whether the first row of a file whose layout has a header is that header.

  The row is the header when every column the task reads (`layout`: text, label, index) holds the release's name
  (`HEADERS`, case-insensitive). Otherwise, a row that is a valid example (its label in the task's label set, a
  number for STS-B; for test files an integer index) means the file was saved without its header: it is kept as an
  example (False) and a warning names the file and the expected header. Anything else raises.

  Args:
    row: the first row.
    spec: the task's `GlueTaskSpec` (name, directory, labels).
    split: "train", "dev" or "test".
    layout: the split's column layout (`a`, `b`, `label` (-1 = last), `index`).
    path: the file, for the messages.

  Raises:
    GlueDataError: naming the file, the row found and the header expected.
  """
  names: Optional[Tuple[str, ...]] = HEADERS.get((spec.directory, split))
  if names is None:
    return True  # no release header known for this layout: the reference's unchecked skip
  cells = [c.strip().lower() for c in row]
  read = [(c, names[c]) for c in (layout.a, layout.b, layout.index) if c is not None]
  if layout.label is not None:
    read.append((len(cells) - 1 if layout.label == -1 else layout.label, names[layout.label]))
  if all(0 <= c < len(cells) and cells[c] == name.lower() for c, name in read):
    return True
  expected = "\t".join(names)
  if len(row) > max(c for c, _ in read):
    if layout.label is not None:
      value = row[len(row) - 1 if layout.label == -1 else layout.label].strip()
      example = is_number(value) if spec.labels is None else value in spec.labels
    else:
      example = layout.index is None or row[layout.index].strip().isdigit()
    if example:
      logger.warning("%s:1: %s %s file without its header row (expected %r): row 1 is read as an example. Add the "
                     "header row to silence this warning.", path, spec.name, split, expected)
      return False
  found = "\t".join(row)[:200]
  raise GlueDataError(
      f"{path}:1: the first row {found!r} is neither the {spec.name} {split} header {expected!r} nor an example "
      f"(columns read: {[name for _, name in read]}). Fix: use the GLUE release's {spec.directory} {split} file or "
      f"restore its header row; a file of another task, or with its columns in another order, cannot be read as "
      f"{spec.name}.")
