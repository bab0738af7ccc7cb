"""Prediction files of the text tasks: one per input file, rows in input order, written atomically.

CSV / TSV: the columns `id`, `text` (`text_pair`), `prediction`, `score` and one `score_<label>` per label
(multi-label predictions joined by the label separator; a JSON list, with a warning, where that cell would
not split back into the labels). JSONL: the same keys, `scores` as a {label: probability}
object and multi-label predictions as a list. CoNLL (token classification): `token<TAB>tag`, a blank line between
sentences, a token's spaces kept (`_PredictionFile._conll_row`: the CoNLL reader reads such a file back at tabs).
Rows are written as they come (`write_rows` takes a generator), so a 1000-label model's file is never held whole.
"""

from __future__ import annotations

import collections
import collections.abc
import contextlib
import csv
import hashlib
import json
import logging
import os
import re
from typing import Dict, Iterable, List, Optional, Sequence

from official_albert import file_io
from tasks import row_files
from tasks.text import conll
from tasks.text import data as text_data

logger = logging.getLogger(__name__)

_CHUNK_CHARS = 1 << 20  # text gathered before a write to the file
_TSV_BREAKS = re.compile(r"[\t\r\n]")


def _output_format(path: str, input_format: str, output_format: str) -> str:
  return output_format or text_data.file_format(path, input_format) or "jsonl"


def _columns(rows: Iterable[Dict]) -> List[str]:
  """The CSV / TSV header of `rows`: every key in the order first seen, `scores` as one `score_<label>` per label
  (a dict as an ordered set, each row's score labels checked against a set: a list's `in` cost rows × labels²)."""
  columns: Dict[str, None] = {}
  scored = set()
  for row in rows:
    for key, value in row.items():
      if key != "scores":
        columns.setdefault(key)
        continue
      for label in value:
        if label not in scored:
          scored.add(label)
          columns.setdefault(f"score_{label}")
  return list(columns)


class _Sink:
  """Text into a binary file as UTF-8, in chunks of about `_CHUNK_CHARS` (a line break written as is on every
  platform, as a whole-file write wrote it)."""

  def __init__(self, file):
    self.file, self.parts, self.size = file, [], 0

  def write(self, text: str) -> None:
    self.parts.append(text)
    self.size += len(text)
    if self.size >= _CHUNK_CHARS:
      self.flush()

  def flush(self) -> None:
    if self.parts:
      self.file.write("".join(self.parts).encode("utf-8"))
    self.parts, self.size = [], 0


class _PredictionFile:
  """One prediction file, written as its rows come: each row is formatted and written (through `_Sink`) when given,
  so neither the rows nor the file's text are held whole (a 1000-label JSONL of 20k rows held 2.9 GiB). The text
  goes to a temporary beside `target` (`file_io.atomic_path`), renamed over it by `close`; a failure removes it.

  Args:
    target: the prediction file.
    fmt: jsonl, csv, tsv or conll.
    separator: what joins a multi-label prediction's labels (CSV / TSV).
    columns: the CSV / TSV header; a row with a column it lacks is an error (rows streamed take the first row's).
  """

  def __init__(self, target: str, fmt: str, separator: str, columns: Sequence[str] = ()):
    self.target, self.fmt, self.separator, self.columns = target, fmt, separator, list(columns)
    self.known, self.rows, self.as_lists, self.changed, self.spaces = set(columns), 0, 0, 0, []
    self._stack: Optional[contextlib.ExitStack] = None

  def __enter__(self) -> "_PredictionFile":
    with contextlib.ExitStack() as stack:
      tmp = stack.enter_context(file_io.atomic_path(self.target))
      self.sink = _Sink(stack.enter_context(file_io.open_file(tmp, "wb")))
      self._stack = stack.pop_all()
    if self.fmt in ("csv", "tsv"):
      self.writer = _TsvWriter(self.sink) if self.fmt == "tsv" else _CsvWriter(self.sink)
      self.writer.writerow(self.columns)
    return self

  def __exit__(self, kind, error, trace) -> bool:
    if kind is None:
      self.close()
    elif self._stack is not None:  # (the temporary removed; a file already closed stays, complete)
      stack, self._stack = self._stack, None
      stack.__exit__(kind, error, trace)
    return False

  def write(self, row: Dict) -> None:
    self.rows += 1
    if self.fmt == "jsonl":
      self.sink.write(json.dumps(row, ensure_ascii=False) + "\n")
    elif self.fmt == "conll":
      self._conll_row(row)
    else:
      self._csv_row(row)

  def _csv_row(self, row: Dict) -> None:
    flat = {}
    for key, value in row.items():
      if key == "scores":
        flat.update({f"score_{k}": f"{v:.6f}" for k, v in value.items()})
      elif isinstance(value, list):
        flat[key], listed = _label_cell(value, self.separator)
        self.as_lists += listed
      elif isinstance(value, float):
        # (a regression's value to float32's 9 digits: fixed-point wrote 3.2e-07 as 0.000000)
        flat[key] = f"{value:.6f}" if key == "score" else f"{value:.9g}"
      else:
        flat[key] = value
    if not self.known.issuperset(flat):
      raise ValueError(f"{self.target}: prediction row {self.rows} has the column(s) "
                       f"{sorted(set(flat) - self.known)[:5]}, which its header (the first row's) lacks: give every "
                       "row the same keys, or pass the rows as a list (its header names every row's keys).")
    self.writer.writerow([flat.get(c, "") for c in self.columns])

  def _conll_row(self, row: Dict) -> None:
    """`token<TAB>tag` lines and a blank line: tab-separated, so that a token keeps its spaces ("Hà Nội" read back
    whole by `tasks.text.conll`, which splits such a file at tabs); what no column can hold (`_conll_token`) becomes
    `_`, counted. `spaces`: per token of the lines the reader's layout is decided from."""
    for token, tag in zip(row["tokens"], row["tags"]):
      text = _conll_token(token)
      self.changed += text != str(token)
      if len(self.spaces) < conll.LAYOUT_SAMPLE_LINES and not text.startswith(("#", "-DOCSTART-")):
        self.spaces.append(text.count(" "))
      self.sink.write(f"{text}\t{'_' if tag is None else tag}\n")
    self.sink.write("\n")

  def _conll_warnings(self) -> None:
    """What `_conll_row` changed; and where every token holds as many spaces (one "New York" line), the reader's
    `auto` layout cannot tell the file from a space-separated one: a warning names `task.conll_separator=tab`."""
    if self.changed:
      logger.warning("%d token(s) held a tab or a line break, or were empty or had spaces at an end, which a CoNLL "
                     "column cannot: each such character was written as '_' (use task.predict_output_format=jsonl "
                     "to keep them).", self.changed)
    if self.spaces and min(self.spaces) == max(self.spaces) > 0:
      logger.warning("%s: every token holds %d space(s), so the CoNLL reader cannot tell this tab-separated file from "
                     "a space-separated one: read it back with task.conll_separator=tab.", self.target, self.spaces[0])

  def close(self) -> None:
    """Logs what the file could not hold as given, and renames it into place (a failure removes the temporary)."""
    if self._stack is None:
      return
    stack, self._stack = self._stack, None
    with stack:
      self.sink.flush()
      if self.as_lists:
        logger.warning("%d multi-label prediction(s) were written as a JSON list (%s): joined by the label separator "
                       "%r they could not be read back as the predicted labels (an empty separator, or a label "
                       "holding it). Use task.predict_output_format=jsonl, or a separator no label holds.",
                       self.as_lists, '["a", "b"]', self.separator)
      if self.fmt == "tsv" and self.writer.changed:
        logger.warning("%d value(s) held a tab or a line break, which a TSV field cannot: each was written as a "
                       "space (use task.predict_output_format=jsonl or csv to keep them).", self.writer.changed)
      if self.fmt == "conll":
        self._conll_warnings()


def _label_cell(labels: Sequence[str], separator: str):
  """(the cell of a multi-label prediction, whether it is a JSON list): the labels joined by `separator`, unless
  that cell would not split back into them (an empty separator joining several, a label holding the separator)."""
  if (not separator and len(labels) > 1) or (separator and any(separator in label for label in labels)):
    return json.dumps(list(labels), ensure_ascii=False), True
  return separator.join(labels), False


class _CsvWriter:
  """csv rows ending in \n, with a field that holds a lone \r quoted too: the csv module quotes only the characters
  of its line terminator, and a bare \r split the row in two when read back."""

  def __init__(self, buffer: _Sink):
    self.minimal = csv.writer(buffer, lineterminator="\n")
    self.quoted = csv.writer(buffer, lineterminator="\n", quoting=csv.QUOTE_ALL)

  def writerow(self, values) -> None:
    has_cr = any(isinstance(v, str) and "\r" in v for v in values)
    (self.quoted if has_cr else self.minimal).writerow(values)


class _TsvWriter:
  """TSV as the text tasks read it (no quoting, no escapes): fields verbatim, backslashes included (the csv module's
  escapechar doubled them, so a text no longer matched its input row); a tab or line break, which no TSV field can
  hold, becomes a space and is counted."""

  def __init__(self, buffer: _Sink):
    self.buffer, self.changed = buffer, 0

  def writerow(self, values) -> None:
    fields = []
    for value in values:
      text, n = _TSV_BREAKS.subn(" ", "" if value is None else str(value))
      self.changed += bool(n)
      fields.append(text)
    self.buffer.write("\t".join(fields) + "\n")


_CONLL_BREAKS = re.compile(r"[\t\r\n]")  # no CoNLL column holds them: the reader splits columns at tabs, lines at \r \n


def _conll_token(token) -> str:
  """`token` as its CoNLL column: a tab or line break becomes `_`, and so does a space at either end (the reader
  strips a tab column's spaces) or an empty token (no column); spaces inside stay ("Hà Nội")."""
  text = _CONLL_BREAKS.sub("_", str(token))
  inner = text.strip(" ")
  if not inner:
    return "_" * max(len(text), 1)
  return "_" * (len(text) - len(text.lstrip(" "))) + inner + "_" * (len(text) - len(text.rstrip(" ")))


def _check_format(fmt: str, row: Dict) -> None:
  if fmt == "conll" and "tags" not in row:
    raise ValueError("task.predict_output_format=conll is for token_classification; use csv, tsv or jsonl.")
  if fmt in ("csv", "tsv") and "tags" in row:
    raise ValueError(f"task.predict_output_format={fmt} cannot hold token tags; use jsonl or conll.")


def write_rows(examples: Sequence[text_data.TextExample], rows: Iterable[Dict], output_dir: str, input_format: str,
               output_format: str, separator: str = "|") -> Dict[str, str]:
  """Writes `rows` (one per example, in order) into `<output_dir>/<input stem>.predictions.<ext>` per input file
  (inputs of the same name in different folders get `<stem>-<hash of the path>`, named in the log and in the returned
  map). Each file is written as its rows come and renamed into place after its input's last row (`_PredictionFile`):
  `rows` may be a generator that makes each row when asked, so that no more than one is held. A CSV / TSV header
  names every row's keys where `rows` is a list, the first row's of the file where it is streamed.

  Returns:
    {input file: prediction file}.
  """
  if isinstance(rows, collections.abc.Sized):
    examples = examples[:len(rows)]  # (zip's pairs, as before: rows short of the examples write no more)
  remaining = collections.Counter(e.path for e in examples)
  formats = {path: _output_format(path, input_format, output_format) for path in remaining}
  names = {path: f"{row_files.file_stem(path)}.predictions.{fmt}" for path, fmt in formats.items()}
  repeated = {n for n, count in collections.Counter(names.values()).items() if count > 1}
  headers: Dict[str, List[str]] = {}
  if isinstance(rows, collections.abc.Sequence):  # (all at hand: the header names every row's keys)
    tabular: Dict[str, List[Dict]] = {}
    for example, row in zip(examples, rows):
      if formats[example.path] in ("csv", "tsv"):
        tabular.setdefault(example.path, []).append(row)
    headers = {path: _columns(file_rows) for path, file_rows in tabular.items()}
  written, files = {}, {}
  with contextlib.ExitStack() as pending:  # (a failure removes the temporaries of the files not yet complete)
    for example, row in zip(examples, rows):
      path = example.path
      out = files.get(path)
      if out is None:
        fmt, stem = formats[path], row_files.file_stem(path)
        _check_format(fmt, row)
        if names[path] in repeated:  # (a/test.csv and b/test.csv: one file would hold the other's rows only)
          stem += "-" + hashlib.sha256(os.path.abspath(path).encode("utf-8")).hexdigest()[:8]
          logger.warning("%s: other inputs also have the name %r; its predictions go to %s.predictions.%s.", path,
                         os.path.basename(path), stem, fmt)
        written[path] = os.path.join(output_dir, f"{stem}.predictions.{fmt}")
        columns = headers.get(path) or (_columns([row]) if fmt in ("csv", "tsv") else ())
        out = files[path] = pending.enter_context(_PredictionFile(written[path], fmt, separator, columns))
      out.write(row)
      remaining[path] -= 1
      if not remaining[path]:
        out.close()
  return written
