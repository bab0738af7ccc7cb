"""Odd-shaped rows and cells of users' CSV / TSV files: what `tasks.row_files.read_rows` makes of them, and says.

Users' files come from spreadsheets, pandas, `csv.writer` and `cat`, and each leaves a mark that a strict reader
would read as data, silently:
- two exports joined with `cat` repeat the header, maybe with the columns in another order (a permutation of the
  header is a new header: the rows after it are read by its order, never as the first file's columns);
- `csv.writer` / pandas write a TSV cell that holds a quote in CSV quoting (`"She said ""hi"" twice"`), while TSV
  is read without quoting (GLUE's files hold bare quotes): a cell wholly in that form is read as its text;
- a hand-written CSV with a space after each comma (`pos, "Great film"`) keeps its quotes (the quote does not open
  a quoted cell after a space) and a comma inside one splits the row: said, since reading such a file with
  `skipinitialspace` would also take the leading spaces of a correctly written file's unquoted cells;
- a tab-separated file named `.csv` and a UTF-16 file (no BOM: a NUL byte between the letters) would otherwise fail
  as a missing column.
The few that are read otherwise than the bytes say are counted and logged once per file, naming its first line.
"""

from __future__ import annotations

import ast
import json
import logging
import re
from typing import List, Optional, Sequence, Union

logger = logging.getLogger(__name__)

_MAX_LINES = 5
_SPACE_QUOTE = re.compile(r'^[ \t]+"')


def list_cell(cell: str) -> Optional[list]:
  """`cell` ("[...]") as the list it writes in JSON (`["a", "b"]`) or as a Python literal (`['a', 'b']`: what
  pandas' and datasets' `to_csv` write for a list column); None when it is neither. Never evaluates code
  (`ast.literal_eval`)."""
  try:
    parsed = json.loads(cell)
  except ValueError:
    try:
      parsed = ast.literal_eval(cell)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
      return None
  return parsed if isinstance(parsed, list) else None


def unquoted_tsv_cell(cell: str, all_quoted: bool = False) -> Optional[str]:
  """The text of a TSV cell written wholly in CSV quoting (starts and ends with `"`, every quote inside doubled, as
  `csv.writer` and pandas write a cell holding a quote), else None: `"She said ""hi"" twice"` → `She said "hi"
  twice`. A cell with a bare quote inside (`"a" and "b"`, GLUE's style) is not in that form, nor one without a
  doubled quote (`"Great"`: minimal quoting quotes a TSV cell only for a quote, a tab or a line break in it, so
  those quotes are the text's) unless `all_quoted` (every cell of its row is quoted: `QUOTE_ALL`)."""
  if len(cell) < 2 or cell[0] != '"' or cell[-1] != '"':
    return None
  inner = cell[1:-1]
  if '"' in inner.replace('""', "") or ('""' not in inner and not all_quoted):
    return None
  return inner.replace('""', '"')


def utf16_hint(line: Union[str, bytes]) -> str:
  """For a line read as UTF-8: ' (the file looks UTF-16LE / BE ...; re-save it as UTF-8 ...)' when it is UTF-16 text
  (a UTF-16 byte-order mark, or a NUL at every other position, as ASCII letters are in UTF-16), else ''."""
  nul = b"\x00" if isinstance(line, bytes) else "\x00"
  if isinstance(line, bytes) and line.startswith((b"\xff\xfe", b"\xfe\xff")):
    order, sign = ("LE", "FF FE") if line.startswith(b"\xff\xfe") else ("BE", "FE FF")
    sign = f"its byte-order mark {sign}"
  else:
    text = line.strip(b"\r\n" if isinstance(line, bytes) else "\r\n")
    odd, even = text[1::2], text[0::2]  # (NUL padding is NULs at both: not text)
    if len(text) < 4 or not any(a.count(nul) == len(a) and nul not in b for a, b in ((odd, even), (even, odd))):
      return ""
    order, sign = "LE" if odd.count(nul) == len(odd) else "BE", "a NUL byte between the letters"
  return (f" (the file looks UTF-16{order}: {sign}, as Excel's 'Unicode Text' and PowerShell write; re-save it as "
          f"UTF-8, e.g. `iconv -f UTF-16{order} -t UTF-8 FILE > FILE.utf8`)")


def separator_hint(fmt: str, header: Sequence[str]) -> str:
  """' The header holds tabs: ...' for a `.csv` whose header looks tab-separated (or a `.tsv` whose header looks
  comma-separated), naming the setting that reads it; else ''."""
  note = _separator_note(fmt, header)
  return f" {note[0].upper()}{note[1:]}." if note else ""


def _separator_note(fmt: str, header: Sequence[str]) -> str:
  joined = "".join(header)
  if fmt == "csv" and "\t" in joined:
    return "the header holds tabs: the file looks tab-separated; set task.input_format=tsv (or rename it to .tsv)"
  if fmt == "tsv" and len(header) == 1 and ("," in joined or ";" in joined):
    return ("the header holds no tab but commas / semicolons: the file looks comma-separated; set "
            "task.input_format=csv (or rename it to .csv)")
  return ""


def field_count_hint(fmt: str, header: Sequence[str], row: Sequence[str]) -> str:
  """The likely cause of a row with another number of fields than the header, for its error; '' when none is seen."""
  separator = _separator_note(fmt, header)
  if separator:
    return f"; {separator}"
  spaced = next((cell for cell in row if _SPACE_QUOTE.match(cell)), None)
  if fmt == "csv" and spaced is not None:
    return (f"; the cell {spaced[:30]!r} begins with a space and a quote: after a space the quote does not open a "
            "quoted cell, so the comma inside it splits the row; remove the spaces after the commas")
  if fmt == "tsv" and any(cell.startswith('"') for cell in row):
    return ("; TSV is read without quoting, so a cell in CSV quoting (\"...\", as csv.writer and pandas write a cell "
            "holding a tab or a line break) is split there; remove the tabs / line breaks from the text, or write "
            "the file as CSV or JSONL")
  return ""


def header_again(header: List[str], row: Sequence[str]) -> Optional[List[str]]:
  """The row's cells when it is the header again (two files joined with `cat`): the same names, maybe in another
  order; else None. Only for a header of two or more columns: in a one-column file (`text\\nhello\\ntext`) the word
  is also a text."""
  if len(header) < 2 or len(row) != len(header):
    return None
  first = row[0].lstrip("\ufeff").strip()  # (a joined file brings its own BOM)
  if first not in header:  # (a data row, nearly always: no sorting per row, which took ~12% of a CSV's reading)
    return None
  cells = [first] + [c.strip() for c in row[1:]]
  if cells != header and all(_is_number(name) for name in header):  # (pandas' 0,1 header: "1,0" is a data row)
    return None
  return cells if sorted(cells) == sorted(header) else None


def _is_number(name: str) -> bool:
  try:
    float(name)
  except ValueError:
    return False
  return True


def header_problem(row: Sequence[str], delimiter: str) -> Optional[str]:
  """Why a CSV / TSV header row cannot name the columns (UTF-16 text, a name given twice), else None."""
  utf16 = utf16_hint(delimiter.join(row))
  if utf16:  # (its names read as 't\x00e\x00x\x00t\x00', and 'no column text' pointed at the settings)
    return f"the header is not UTF-8 text{utf16}."
  header = [h.strip() for h in row]
  repeated = sorted({h for h in header if h and header.count(h) > 1})
  if repeated:  # (a dict of the row would keep the last one silently)
    return f"the header names column(s) {repeated} more than once; rename them so that each column has one name."
  return None


class ShapeNotes:
  """What one CSV / TSV file's reading made of odd rows and cells, logged once at its end (`log`)."""

  def __init__(self, path: str, fmt: str):
    self.path, self.fmt = path, fmt
    self.again: List[int] = []  # lines of the header repeated as it is
    self.reordered: List[int] = []  # lines of the header repeated in another order
    self.unquoted: List[int] = [0, 0]  # TSV cells read without their CSV quoting, the first one's line
    self.spaced: List[int] = [0, 0]  # CSV cells that begin with a space and a quote, the first one's line
    self.all_quoted: Optional[bool] = None  # a TSV written with every cell quoted (QUOTE_ALL): its header says

  def header(self, line: int, header: List[str], cells: List[str]) -> List[str]:
    """The header for the rows after `line`, where the header appears again as `cells`."""
    (self.again if cells == header else self.reordered).append(line)
    return cells

  def cells(self, line: int, row: List[str]) -> List[str]:
    """The row's cells as read: a TSV cell in CSV quoting as its text; a CSV cell that begins with a space and a
    quote as it is (its quotes stay in the text), counted."""
    if self.fmt == "csv":  # (` "a" b` is csv.writer's own quoting of a text that begins with a space and a quote)
      self._count(self.spaced, line, sum(1 for cell in row if _SPACE_QUOTE.match(cell) and cell.endswith('"')))
      return row
    if self.all_quoted is None:  # (the first row, the header: a QUOTE_ALL writer quotes its names too)
      self.all_quoted = len(row) > 1 and all(len(c) > 1 and c[0] == c[-1] == '"' for c in row)
    texts = [unquoted_tsv_cell(cell, self.all_quoted) for cell in row]
    self._count(self.unquoted, line, sum(text is not None for text in texts))
    return [cell if text is None else text for cell, text in zip(row, texts)]

  @staticmethod
  def _count(counter: List[int], line: int, count: int) -> None:
    if count:
      counter[0] += count
      counter[1] = counter[1] or line

  def log(self) -> None:
    """One warning per kind of odd shape the file had."""
    if self.again:
      logger.warning("%s:%d: the header again: files concatenated? Skipped %d such row(s) (lines %s); remove them "
                     "from the file to silence this.", self.path, self.again[0], len(self.again),
                     ", ".join(map(str, self.again[:_MAX_LINES])))
    if self.reordered:
      logger.warning("%s:%d: the header again with its columns in another order: files concatenated? Each such row "
                     "is read as a header and the rows after it by its column order (%d such row(s), lines %s); "
                     "write the files with one column order, or remove those rows, to silence this.", self.path,
                     self.reordered[0], len(self.reordered), ", ".join(map(str, self.reordered[:_MAX_LINES])))
    if self.unquoted[0]:
      logger.warning('%s:%d: read %d TSV cell(s) written in CSV quoting ("..." with each quote inside doubled, as '
                     "csv.writer and pandas' to_csv(sep='\\t') write a cell holding a quote) as their text without "
                     "those quotes; other cells are read as written (TSV has no quoting). Write the file with "
                     "quoting=csv.QUOTE_NONE, or as JSONL, to silence this.", self.path, self.unquoted[1],
                     self.unquoted[0])
    if self.spaced[0]:
      logger.warning('%s:%d: %d cell(s) begin with a space and a quote (`, "text"`): after a space the quote does not '
                     "open a quoted cell, so the quotes are read as part of the text; remove the spaces after the "
                     "commas.", self.path, self.spaced[1], self.spaced[0])
