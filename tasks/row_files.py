"""Rows of one's own CSV / TSV / JSONL files, as every task on raw text files reads them.

The formats (by extension or `task.input_format`), the readers (CSV with standard quoting, `;`-separated when the
header has `;` and no `,`; TSV without quoting, but a cell wholly in CSV quoting is its text; JSONL objects; blank
lines passed over), the header check against the configured columns and the bad-row policy (`BadRows`: raise naming
file:line and the fix, or with `task.skip_bad_rows` count, skip and log) are written here once; odd shapes of rows
and cells (the header again after `cat a.csv b.csv`, maybe reordered: never data) are `row_cells`'. A
`;`-separated CSV is a decimal-comma locale's export, so in its number columns (a regression label, a pair's score)
`4,8` is read as 4.8; in any other file it stays an error that says so. `read_row_file` is the loop the row tasks
(`text_classification` / `text_regression`, `text_embedding`, `text_ranking`) share: a task says only what one row
must hold (its `parse`), and a bad row raises `RowProblem`. Files are read a line at a time (`text_lines`), never
whole, so what reading costs in memory is the rows a task keeps. A file whose name ends in `.gz` (`pairs.csv.gz`) is
gzip-compressed and read as it is decompressed, its format from the name without `.gz`.
"""

from __future__ import annotations

import csv
import difflib
import itertools
import json
import logging
import os
import re
import sys
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple

from official_albert import file_io
from tasks import row_cells

logger = logging.getLogger(__name__)

FORMATS = ("csv", "tsv", "jsonl", "conll")
EXTENSIONS = {".csv": "csv", ".tsv": "tsv", ".jsonl": "jsonl", ".ndjson": "jsonl", ".conll": "conll",
              ".conllx": "conll", ".iob": "conll", ".bio": "conll"}
_MAX_REASONS = 5
_LINE_BREAK = re.compile(r"\r\n|\r|\n")
_BOM = b"\xef\xbb\xbf"
_LINE_PIECE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+")
_DECIMAL_COMMA = re.compile(r"[+-]?\d+,\d+")


class TextDataError(ValueError):
  """A raw text file is malformed; the message names file:line, the column and the fix."""


def file_format(path: str, explicit: str = "") -> Optional[str]:
  """csv | tsv | jsonl | conll for a raw file (`explicit` wins), None for anything else (TFRecords)."""
  if explicit:
    if explicit not in FORMATS:
      raise ValueError(f"task.input_format={explicit!r} is not one of {FORMATS} (or '' = from the extension).")
    return explicit
  return EXTENSIONS.get(os.path.splitext(uncompressed_name(path))[1].lower())


def uncompressed_name(path: str) -> str:
  """`path` without a `.gz` ending (`pairs.csv.gz` → `pairs.csv`): the name whose extension says the format."""
  return path[:-3] if path.lower().endswith(".gz") else path


def file_stem(path: str) -> str:
  """The file's name without its format's extension (and `.gz`): `data/reviews.csv.gz` → `reviews`, the stem of
  the records and prediction files made from it."""
  return os.path.splitext(os.path.basename(uncompressed_name(path)))[0]


def text_lines(path: str, undecodable: Optional[Callable[[int, bytes, int, int], Exception]] = None
               ) -> Iterator[Tuple[int, str]]:
  """(1-based line number, the line with its ending) of a UTF-8 file, read a line at a time.

  Lines end at \\n, \\r\\n or \\r, as `physical_lines` splits (not at U+2028 and the other separators that a JSON
  string or a CSV cell may hold raw); a BOM at the top is dropped. Only the line being read is in memory, so a file
  far larger than memory is read in constant space (the rows a caller keeps are its own); reading the whole file
  first, as this module did, took ~5× the file's size before the first row.

  A `.gz` file is decompressed as it is read (constant space too); its byte offsets are the decompressed text's.

  Args:
    path: the file (local or through tf.io.gfile).
    undecodable: (line, its bytes, the bad byte's index there, its offset in the file) → the error to raise at the
      first line that is not UTF-8, for a reader with its own wording (GLUE's); None: TextDataError.

  Raises:
    TextDataError: at the first line that is not UTF-8, naming it and the byte's offset in the file; a `.gz` file
      that is not gzip or is cut short, naming the line reached.
  """
  number = 0
  try:
    with file_io.open_bytes(path) as stream:
      for number, line in _decoded_lines(path, stream, undecodable):
        yield number, line
  except file_io.GZIP_ERRORS as e:
    raise TextDataError(file_io.gzip_error(path, e, number)) from None


def _decoded_lines(path: str, f, undecodable=None) -> Iterator[Tuple[int, str]]:
  """`text_lines` of an open binary stream (the file's bytes, or its decompressed bytes)."""
  number, offset = 0, 0
  for raw in _byte_lines(f):  # split at b"\n" only: no byte of a multi-byte UTF-8 character is 0x0A
    start = 3 if offset == 0 and raw.startswith(_BOM) else 0
    try:
      text = raw[start:].decode("utf-8")
    except UnicodeDecodeError as e:  # (a \r before the byte ended a line: only a line's own \r\n follows it)
      line = number + raw[:start + e.start].count(b"\r") + 1
      if undecodable is not None:
        raise undecodable(line, raw, start + e.start, offset + start + e.start) from None
      fix = (row_cells.utf16_hint(raw) if offset == 0 else "") or "; re-save the file as UTF-8"
      raise TextDataError(f"{path}:{line}: not UTF-8 ({e.reason} at byte {offset + start + e.start}){fix}.") from None
    offset += len(raw)
    ending = 2 if text.endswith("\r\n") else 1 if text.endswith(("\n", "\r")) else 0
    if "\r" not in text[:len(text) - ending]:
      number += 1
      yield number, text
      continue
    for piece in _LINE_PIECE.findall(text):  # old Mac endings (\r alone): several lines in one read
      number += 1
      yield number, piece


def _byte_lines(f, block: int = 1 << 16) -> Iterator[bytes]:
  """The lines of a binary file, each with its b"\\n", every byte kept. Not `for line in f`: a `tf.io.gfile.GFile`
  (gs://, s3://, ram://) drops each \\r from the lines it iterates, so a CRLF file, a \\r inside a quoted cell or an old
  Mac file read otherwise there than on a local disk."""
  pending: List[bytes] = []
  for chunk in iter(lambda: f.read(block), b""):
    pieces = chunk.split(b"\n")
    if len(pieces) == 1:
      pending.append(chunk)
      continue
    yield b"".join(pending + [pieces[0], b"\n"])
    for piece in pieces[1:-1]:
      yield piece + b"\n"
    pending = [pieces[-1]] if pieces[-1] else []
  if pending:
    yield b"".join(pending)


class BadRows:
  """Raises on a bad row, or counts and remembers it when skipping."""

  def __init__(self, path: str, skip: bool):
    self.path, self.skip, self.count, self.reasons = path, skip, 0, []

  def __call__(self, line: int, message: str) -> None:
    where = f"{self.path}:{line}: {message}"
    if not self.skip:
      raise TextDataError(f"{where} (fix the row, or set task.skip_bad_rows=true to skip and count such rows).")
    self.count += 1
    if len(self.reasons) < _MAX_REASONS:
      self.reasons.append(where)

  def log(self, total: int) -> None:
    if self.count:
      logger.warning("%s: skipped %d of %d rows (task.skip_bad_rows=true); first: %s", self.path, self.count, total,
                     " | ".join(self.reasons))


# ------------------------------------------------------------------------------------------------------ rows
def physical_lines(text: str) -> List[str]:
  """The file's lines, split at \\n, \\r\\n or \\r only: `str.splitlines` also splits at U+2028, U+0085 and other
  Unicode separators, which JSON strings and CoNLL tokens may hold raw (a row would be cut in two)."""
  lines = _LINE_BREAK.split(text)
  return lines[:-1] if lines[-1] == "" else lines


def csv_delimiter(path: str, header: str) -> str:
  """`,`, or `;` for a `.csv` whose header (its first non-blank line) has semicolons and no comma (the export of a
  spreadsheet in a locale with a decimal comma); said in the log, since a one-column header would otherwise read
  every row as 'N fields'."""
  if ";" in header and "," not in header:
    logger.info("%s: the header %r has ';' and no ',': read as ';'-separated.", path, header.strip()[:80])
    return ";"
  return ","


def decimal_comma_hint(value: Any) -> str:
  """For the error on a number cell: how to write `value` when it is a decimal comma (`4,8`), else ''."""
  if isinstance(value, str) and _DECIMAL_COMMA.fullmatch(value.strip()):
    return (f"; a decimal comma is read only in a ';'-separated CSV (a decimal-comma locale's export): write "
            f"{value.strip().replace(',', '.')}, or save the file with ';' between the columns")
  return ""


def _decimal_commas(row: Dict[str, Any], columns: Sequence[str]) -> int:
  """Rewrites `4,8` as `4.8` in the `columns` of one row of a `;`-separated CSV; the number of cells rewritten."""
  count = 0
  for column in columns:
    value = row.get(column)
    if isinstance(value, str) and _DECIMAL_COMMA.fullmatch(value.strip()):
      row[column] = value.strip().replace(",", ".")
      count += 1
  return count


class _RepeatedKey(ValueError):
  """A JSON object names a key twice."""


def _unique_keys(pairs: List[Tuple[str, Any]]) -> Dict[str, Any]:
  out: Dict[str, Any] = {}
  for key, value in pairs:
    if key in out:
      raise _RepeatedKey(key)
    out[key] = value
  return out


# A JSON escape of a UTF-16 surrogate ("\ud83d"): json.loads makes a lone one a str that no UTF-8 file and no
# tokenizer takes (a bare TypeError deep in SentencePiece, far from the row).
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


def lone_surrogate(raw: str, value: Any) -> Optional[str]:
  """Where the parsed JSON `value` of the line `raw` holds a lone UTF-16 surrogate (a character cut in half, as a
  truncated emoji of scraped text): "key 'text'" / "item 2 of key 'choices'"... with the fix, or None. Cheap for the
  lines with no surrogate escape (a regular-expression search)."""
  if not _SURROGATE_ESCAPE.search(raw):
    return None

  def find(item: Any, where: str) -> Optional[str]:
    if isinstance(item, str):
      try:
        item.encode("utf-8")
      except UnicodeEncodeError:
        return where or "the value"
    elif isinstance(item, dict):
      for key, inner in item.items():
        found = find(key, f"a key name near {key!r}") or find(inner, f"key {key!r}")
        if found:
          return found
    elif isinstance(item, list):
      for i, inner in enumerate(item):
        found = find(inner, f"item {i} of {where}" if where else f"item {i}")
        if found:
          return found
    return None

  found = find(value, "")
  if found is None:
    return None
  return (f"{found} holds a lone UTF-16 surrogate escape (half of a character, e.g. an emoji cut short): no tokenizer "
          "or UTF-8 file takes it; remove it, or write the whole character (a \\ud83d\\ude00 pair)")


def _jsonl_rows(path: str) -> Iterator[Tuple[int, Optional[Dict[str, Any]], Optional[str]]]:
  """`read_rows` of a JSONL file: (line, object, None), or (line, None, why) for a line that is not an object."""
  for number, piece in text_lines(path):
    raw = piece.rstrip("\r\n")
    if not raw.strip():
      continue
    try:
      row = json.loads(raw, object_pairs_hook=_unique_keys)
    except json.JSONDecodeError as e:
      if row_cells.utf16_hint(raw):  # (every line of the file is; one error, not one per row)
        raise TextDataError(f"{path}:{number}: not UTF-8 text{row_cells.utf16_hint(raw)}.") from None
      yield number, None, f"not valid JSON ({e.msg}; column {e.colno})"
      continue
    except _RepeatedKey as e:  # (json.loads keeps the last value silently; a CSV header's repeat is refused too)
      yield number, None, f"key {e.args[0]!r} given twice in one object; keep one"
      continue
    if not isinstance(row, dict):
      yield number, None, "not a JSON object"
      continue
    surrogate = lone_surrogate(raw, row)
    yield (number, None, surrogate) if surrogate else (number, row, None)


def read_rows(path: str, fmt: str, number_columns: Sequence[str] = ()
              ) -> Iterator[Tuple[int, Optional[Dict[str, Any]], Optional[str]]]:
  """(line, row dict or None, error) for CSV/TSV (header row = keys) and JSONL; blank lines are passed over.

  A CSV / TSV row that is a header of two or more columns again (files joined with `cat`) is never data: as it is,
  it is skipped; in another column order, it is the header of the rows after it; each kind counted in one warning
  naming the file and its first line. In a one-column file such a row is data (a predict input may hold the word
  `text` as a text). A TSV cell wholly in CSV quoting is read as its text (`row_cells`; counted, logged once).
  In a `;`-separated CSV, a decimal comma (`4,8`) in `number_columns` is rewritten `4.8` (counted, logged once).
  """
  if fmt == "jsonl":
    yield from _jsonl_rows(path)
    return
  # A CSV is read strictly: a quote opened in a cell and never closed otherwise took every row after it into that
  # cell (a row accepted, the rest of the file gone, no count), and text after a closing quote joined the cell.
  options = {"delimiter": "\t", "quoting": csv.QUOTE_NONE} if fmt == "tsv" else {"strict": True}
  pieces: Iterator[str] = (piece for _, piece in text_lines(path))
  if fmt == "csv":  # the delimiter is the header's: read up to it, then read those lines again as the CSV's first
    top: List[str] = []
    for piece in pieces:
      top.append(piece)
      if piece.strip():
        break
    options["delimiter"] = csv_delimiter(path, top[-1] if top else "")
    pieces = itertools.chain(top, pieces)
  commas = number_columns if options.get("delimiter") == ";" else ()
  notes = row_cells.ShapeNotes(path, fmt)
  previous = csv.field_size_limit(sys.maxsize)  # long documents exceed the csv module's 128 KiB default
  try:
    reader = csv.reader(pieces, **options)
    header, line, decimals = None, 1, 0
    for row in reader:
      start, line = line, reader.line_num + 1
      if not row or (len(row) == 1 and not row[0].strip()):
        continue
      row = notes.cells(start, row)
      if header is None:
        problem = row_cells.header_problem(row, options["delimiter"])
        if problem:
          raise TextDataError(f"{path}:{start}: {problem}")
        header = [h.strip() for h in row]
        continue
      again = row_cells.header_again(header, row)
      if again is not None:
        header = notes.header(start, header, again)
        continue
      if len(row) != len(header):
        hint = row_cells.field_count_hint(fmt, header, row)
        yield start, None, f"{len(row)} fields, the header has {len(header)}{hint}"
        continue
      record = dict(zip(header, row))
      decimals += _decimal_commas(record, commas)
      yield start, record, None
    notes.log()
    if decimals:
      logger.info("%s: read %d decimal-comma number(s) in column(s) %s as decimals (4,8 = 4.8: the file is "
                  "';'-separated).", path, decimals, list(commas))
  except csv.Error as e:
    raise TextDataError(f"{path}:{line}: {fmt.upper()} syntax error in the row starting here (read to line "
                        f"{reader.line_num}): {e}. A cell that starts with a quote must end with one, before the "
                        'delimiter, and a quote inside it is doubled ("She said ""hi"""); fix the row, or write the '
                        "file as JSONL.") from None
  finally:
    csv.field_size_limit(previous)


def check_columns(path: str, fmt: str, keys: Sequence[str], wanted: Dict[str, str]) -> None:
  """For CSV/TSV: a configured column missing from the header is one error for the file, not one per row."""
  for option, column in wanted.items():
    if column and column not in keys:
      close = difflib.get_close_matches(column, list(keys), n=1)
      hint = row_cells.separator_hint(fmt, keys)  # (a tab-separated .csv: its one 'column' is the whole header)
      if not hint:
        hint = (f" Did you mean {close[0]!r}?" if close else "") + f" Set task.{option} to the column's name."
      raise TextDataError(f"{path}:1: no column {column!r} in the {fmt.upper()} header {list(keys)}.{hint}")


class RowProblem(Exception):
  """What is wrong with one row; a `read_row_file` parser raises it and the row is bad (raised or skipped)."""


def row_text(row: Dict[str, Any], column: str, setting: str) -> str:
  """The non-blank text in `column`, else `RowProblem` naming the column and its setting (e.g. task.query_column)."""
  value = row.get(column)
  if not isinstance(value, str) or not value.strip():
    raise RowProblem(f"column {column!r} ({setting}): the text is missing, empty or not a string")
  return value


def read_row_file(path: str, input_format: str, skip_bad_rows: bool, wanted: Dict[str, str], reader: str,
                  parse: Callable[[int, Dict[str, Any]], Any], noun: str,
                  number_columns: Sequence[str] = ()) -> List[Any]:
  """The examples `parse(line, row)` makes of a CSV / TSV / JSONL file's rows, under the house's bad-row policy.

  The loop each row-file task would otherwise write again: the format check, the
  header check against `wanted` (setting name → column), unreadable rows and `RowProblem`s counted or raised by
  `BadRows`, and one log line.

  Args:
    path: a CSV, TSV or JSONL file.
    input_format: csv | tsv | jsonl; '' = from the extension.
    skip_bad_rows: count and log bad rows instead of raising.
    wanted: setting name → column the header must have (CSV / TSV).
    reader: who reads, for the format error (e.g. "text_ranking reads").
    parse: (line, row) -> example; raises `RowProblem` for a bad row.
    noun: what an example is, for the log line (e.g. "pairs").
    number_columns: columns holding a number (a regression label, a score): in a `;`-separated CSV their decimal
      commas are read as decimal points before `parse` sees the row.

  Raises:
    TextDataError: another format, a missing column, a bad row (naming file:line, the key and the fix).
  """
  fmt = file_format(path, input_format)
  if fmt not in ("csv", "tsv", "jsonl"):
    raise TextDataError(f"{path}: {fmt or 'unknown'} format; {reader} CSV, TSV or JSONL (set task.input_format).")
  bad = BadRows(path, skip_bad_rows)
  examples, total, checked = [], 0, False
  for line, row, error in read_rows(path, fmt, number_columns):
    total += 1
    if error:
      bad(line, error)
      continue
    if fmt != "jsonl" and not checked:
      check_columns(path, fmt, list(row), wanted)
      checked = True
    try:
      examples.append(parse(line, row))
    except RowProblem as problem:
      bad(line, str(problem))
  bad.log(total)
  logger.info("%s: read %d %s (%s).", path, len(examples), noun, fmt)
  return examples
