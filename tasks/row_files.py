"""Reading the rows of one's own CSV / TSV / JSONL files for the row-file tasks (`text_embedding`, `text_ranking`).

Built on the text tasks' readers (`tasks.text.data`: the formats, header checks and bad-row policy, errors naming
file:line and the fix): a task says only what one row must hold (`parse`), and a bad row raises `RowProblem`.
"""

from __future__ import annotations

import logging
from typing import Any, Callable, Dict, List

from tasks.text.data import BadRows
from tasks.text.data import check_columns
from tasks.text.data import file_format
from tasks.text.data import read_rows
from tasks.text.data import TextDataError

logger = logging.getLogger(__name__)


class RowProblem(Exception):
  """What is wrong with one row; a `read_row_file` parser raises it and the row is bad (raised or skipped)."""


def row_text(row: Dict[str, Any], column: str, setting: str) -> str:
  """The non-blank text in `column`, else `RowProblem` naming the column and its setting (e.g. task.query_column)."""
  value = row.get(column)
  if not isinstance(value, str) or not value.strip():
    raise RowProblem(f"column {column!r} ({setting}): the text is missing, empty or not a string")
  return value


def read_row_file(path: str, input_format: str, skip_bad_rows: bool, wanted: Dict[str, str], reader: str,
                  parse: Callable[[int, Dict[str, Any]], Any], noun: str) -> List[Any]:
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

  Raises:
    TextDataError: another format, a missing column, a bad row (naming file:line, the key and the fix).
  """
  fmt = file_format(path, input_format)
  if fmt not in ("csv", "tsv", "jsonl"):
    raise TextDataError(f"{path}: {fmt or 'unknown'} format; {reader} CSV, TSV or JSONL (set task.input_format).")
  bad = BadRows(path, skip_bad_rows)
  examples, total, checked = [], 0, False
  for line, row, error in read_rows(path, fmt):
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
