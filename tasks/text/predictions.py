"""Prediction files of the text tasks: one per input file, rows in input order, written atomically.

CSV / TSV: the columns `id`, `text` (`text_pair`), `prediction`, `score` and one `score_<label>` per label
(multi-label predictions joined by the label separator; a JSON list, with a warning, where that cell would
not split back into the labels). JSONL: the same keys, `scores` as a {label: probability}
object and multi-label predictions as a list. CoNLL (token classification): `token<TAB>tag`, a blank line between
sentences, a token's spaces kept (`_conll_text`: the CoNLL reader reads such a file back at tabs).
"""

from __future__ import annotations

import collections
import csv
import hashlib
import io
import json
import logging
import os
import re
from typing import Dict, List, Sequence

from official_albert import file_io
from tasks import row_files
from tasks.text import conll
from tasks.text import data as text_data

logger = logging.getLogger(__name__)

_TSV_BREAKS = re.compile(r"[\t\r\n]")


def _output_format(path: str, input_format: str, output_format: str) -> str:
  return output_format or text_data.file_format(path, input_format) or "jsonl"


def _csv_text(rows: Sequence[Dict], fmt: str, separator: str) -> str:
  columns: List[str] = []
  for row in rows:
    for key, value in row.items():
      names = [f"score_{k}" for k in value] if key == "scores" else [key]
      columns.extend(n for n in names if n not in columns)
  buffer = io.StringIO()
  writer = _TsvWriter(buffer) if fmt == "tsv" else _CsvWriter(buffer)
  writer.writerow(columns)
  as_lists = 0
  for row in rows:
    flat = {}
    for key, value in row.items():
      if key == "scores":
        flat.update({f"score_{k}": f"{v:.6f}" for k, v in value.items()})
      elif isinstance(value, list):
        flat[key], listed = _label_cell(value, separator)
        as_lists += listed
      elif isinstance(value, float):
        # (a regression's value to float32's 9 digits: fixed-point wrote 3.2e-07 as 0.000000)
        flat[key] = f"{value:.6f}" if key == "score" else f"{value:.9g}"
      else:
        flat[key] = value
    writer.writerow([flat.get(c, "") for c in columns])
  if as_lists:
    logger.warning("%d multi-label prediction(s) were written as a JSON list (%s): joined by the label separator "
                   "%r they could not be read back as the predicted labels (an empty separator, or a label holding "
                   "it). Use task.predict_output_format=jsonl, or a separator no label holds.", as_lists,
                   '["a", "b"]', separator)
  if fmt == "tsv" and writer.changed:
    logger.warning("%d value(s) held a tab or a line break, which a TSV field cannot: each was written as a space "
                   "(use task.predict_output_format=jsonl or csv to keep them).", writer.changed)
  return buffer.getvalue()


def _label_cell(labels: Sequence[str], separator: str):
  """(the cell of a multi-label prediction, whether it is a JSON list): the labels joined by `separator`, unless
  that cell would not split back into them (an empty separator joining several, a label holding the separator)."""
  if (not separator and len(labels) > 1) or (separator and any(separator in label for label in labels)):
    return json.dumps(list(labels), ensure_ascii=False), True
  return separator.join(labels), False


class _CsvWriter:
  """csv rows ending in \n, with a field that holds a lone \r quoted too: the csv module quotes only the characters
  of its line terminator, and a bare \r split the row in two when read back."""

  def __init__(self, buffer: io.StringIO):
    self.minimal = csv.writer(buffer, lineterminator="\n")
    self.quoted = csv.writer(buffer, lineterminator="\n", quoting=csv.QUOTE_ALL)

  def writerow(self, values) -> None:
    has_cr = any(isinstance(v, str) and "\r" in v for v in values)
    (self.quoted if has_cr else self.minimal).writerow(values)


class _TsvWriter:
  """TSV as the text tasks read it (no quoting, no escapes): fields verbatim, backslashes included (the csv module's
  escapechar doubled them, so a text no longer matched its input row); a tab or line break, which no TSV field can
  hold, becomes a space and is counted."""

  def __init__(self, buffer: io.StringIO):
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


def _conll_text(rows: Sequence[Dict], path: str) -> str:
  """`token<TAB>tag` lines, a blank line between sentences: tab-separated, so that a token keeps its spaces ("Hà Nội"
  read back whole by `tasks.text.conll`, which splits such a file at tabs); what no column can hold (`_conll_token`)
  becomes `_`, counted in a warning. Where every token holds as many spaces (one "New York" line), the reader's
  `auto` layout cannot tell the file from a space-separated one: a warning names `task.conll_separator=tab`."""
  lines, changed, spaces = [], 0, []  # spaces: per token of the lines the reader's layout is decided from
  for row in rows:
    for token, tag in zip(row["tokens"], row["tags"]):
      text = _conll_token(token)
      changed += text != str(token)
      if len(spaces) < conll.LAYOUT_SAMPLE_LINES and not text.startswith(("#", "-DOCSTART-")):
        spaces.append(text.count(" "))
      lines.append(f"{text}\t{'_' if tag is None else tag}")
    lines.append("")
  if changed:
    logger.warning("%d token(s) held a tab or a line break, or were empty or had spaces at an end, which a CoNLL "
                   "column cannot: each such character was written as '_' (use task.predict_output_format=jsonl to "
                   "keep them).", changed)
  if spaces and min(spaces) == max(spaces) > 0:
    logger.warning("%s: every token holds %d space(s), so the CoNLL reader cannot tell this tab-separated file from a "
                   "space-separated one: read it back with task.conll_separator=tab.", path, spaces[0])
  return "\n".join(lines) + ("\n" if lines else "")


def write_rows(examples: Sequence[text_data.TextExample], rows: Sequence[Dict], output_dir: str, input_format: str,
               output_format: str, separator: str = "|") -> Dict[str, str]:
  """Writes `rows` (one per example) into `<output_dir>/<input stem>.predictions.<ext>` per input file (inputs of the
  same name in different folders get `<stem>-<hash of the path>`, named in the log and in the returned map).

  Returns:
    {input file: prediction file}.
  """
  by_file: Dict[str, List[Dict]] = {}
  for example, row in zip(examples, rows):
    by_file.setdefault(example.path, []).append(row)
  names = {path: f"{row_files.file_stem(path)}.predictions."
                 f"{_output_format(path, input_format, output_format)}" for path in by_file}
  repeated = {n for n, count in collections.Counter(names.values()).items() if count > 1}
  written = {}
  for path, file_rows in by_file.items():
    fmt = _output_format(path, input_format, output_format)
    stem = row_files.file_stem(path)
    if names[path] in repeated:  # (a/test.csv and b/test.csv: one file would hold the other's rows only)
      stem += "-" + hashlib.sha256(os.path.abspath(path).encode("utf-8")).hexdigest()[:8]
      logger.warning("%s: other inputs also have the name %r; its predictions go to %s.predictions.%s.", path,
                     os.path.basename(path), stem, fmt)
    target = os.path.join(output_dir, f"{stem}.predictions.{fmt}")
    if fmt == "jsonl":
      text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in file_rows)
    elif fmt == "conll":
      if "tags" not in file_rows[0]:
        raise ValueError("task.predict_output_format=conll is for token_classification; use csv, tsv or jsonl.")
      text = _conll_text(file_rows, target)
    else:
      if "tags" in file_rows[0]:
        raise ValueError(f"task.predict_output_format={fmt} cannot hold token tags; use jsonl or conll.")
      text = _csv_text(file_rows, fmt, separator)
    file_io.atomic_write_text(target, text)
    written[path] = target
  return written
