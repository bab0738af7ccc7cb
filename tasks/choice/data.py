"""Multiple-choice rows for `text_multiple_choice`: CSV / TSV / JSONL rows → `ChoiceExample`s → fixed-length records.

Rows are read with the row-file tasks' reader (`tasks.row_files`: formats, header check, bad-row policy, errors naming
file:line, the key and the fix). Each row becomes one record of `num_choices` choices, each packed as RACE packs an
option (`official_albert.tokenization.choices.pack_choices`: `[CLS] context [SEP] question+choice [SEP]`); a row with
fewer choices is padded with all-zero rows, and `choice_mask` [num_choices] says which are real (1) — the task keeps
the padding out of the softmax, so a row's scores do not depend on how many choices the others have.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any, Dict, Iterator, List, Optional, Sequence

import numpy as np

from official_albert.tokenization.choices import pack_choices
from tasks import row_files

ENCODER_KEYS = ("input_word_ids", "input_mask", "input_type_ids")


@dataclasses.dataclass
class ChoiceExample:
  """One row: its file:line, its texts and the index of its answer (None in a file to predict)."""
  path: str
  line: int
  context: str
  question: str
  choices: List[str]
  label: Optional[int]


def _choices(value: Any, cells: bool) -> Optional[List[str]]:
  """The choices column's value as texts (a CSV / TSV cell holds a JSON list); None when it is not a list of
  non-blank texts."""
  if cells and isinstance(value, str):
    try:
      value = json.loads(value)
    except ValueError:
      return None
  if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
    return None
  return value


def _label(value: Any, choices: Sequence[str], column: str) -> int:
  """The answer's index from an index (a number or digits) or the text of exactly one choice."""
  if isinstance(value, bool) or value is None or (isinstance(value, str) and not value.strip()):
    raise row_files.RowProblem(f"column {column!r} (task.label_column): no answer; give the choice's index (0-based) "
                               "or its text")
  if isinstance(value, (int, float)) or (isinstance(value, str) and value.strip().isdigit()):
    index = int(value) if not isinstance(value, float) or value.is_integer() else -1
    if not 0 <= index < len(choices):
      raise row_files.RowProblem(f"column {column!r} (task.label_column): index {value!r} is not one of the row's "
                                 f"{len(choices)} choices (0..{len(choices) - 1}, 0-based)")
    return index
  if not isinstance(value, str):
    raise row_files.RowProblem(f"column {column!r} (task.label_column): {value!r:.60} is neither a choice's index nor "
                               "its text")
  found = [i for i, choice in enumerate(choices) if choice.strip() == value.strip()]
  if len(found) != 1:
    how = "no choice is" if not found else f"{len(found)} choices ({found}) are"
    raise row_files.RowProblem(f"column {column!r} (task.label_column): {how} the text {value!r:.60}; give the "
                               "answer's index (0-based), or make the choices distinct")
  return found[0]


def read_choice_rows(path: str, columns: Dict[str, str], num_choices: int, labelled: bool, input_format: str = "",
                     skip_bad_rows: bool = False) -> List[ChoiceExample]:
  """The rows of one file.

  Args:
    path: a CSV, TSV or JSONL file.
    columns: {"context", "question", "choices", "label"} → column names (context '' = none).
    num_choices: the most choices a row may have (task.num_choices).
    labelled: read the label (train / eval); predict files need none.
    input_format, skip_bad_rows: as the other row-file tasks read them.

  Raises:
    TextDataError: a missing column, a blank question, fewer than 2 or more than `num_choices` choices, a label that
      names no choice (naming file:line, the key and the fix).
  """
  wanted = {f"{side}_column": column for side, column in columns.items()
            if column and (labelled or side != "label")}
  cells = row_files.file_format(path, input_format) in ("csv", "tsv")

  def parse(line: int, row: Dict[str, Any]) -> ChoiceExample:
    question = row_files.row_text(row, columns["question"], "task.question_column")
    context = ""
    if columns["context"]:
      context = row.get(columns["context"])
      if not isinstance(context, str):
        raise row_files.RowProblem(f"column {columns['context']!r} (task.context_column): not a text")
    choices = _choices(row.get(columns["choices"]), cells)
    if choices is None:
      form = "a cell holding a JSON list of texts" if cells else "a JSON list of texts"
      raise row_files.RowProblem(f"column {columns['choices']!r} (task.choices_column): expected {form}, none blank; "
                                 f"got {row.get(columns['choices'])!r:.80}")
    if not 2 <= len(choices) <= num_choices:
      raise row_files.RowProblem(f"column {columns['choices']!r} (task.choices_column): {len(choices)} choices; a row "
                                 f"has 2 to task.num_choices={num_choices} (raise task.num_choices for more)")
    label = _label(row.get(columns["label"]), choices, columns["label"]) if labelled else None
    return ChoiceExample(path, line, context, question, choices, label)

  return row_files.read_row_file(path, input_format, skip_bad_rows, wanted, "text_multiple_choice reads", parse,
                                 "questions")


def records(examples: Sequence[ChoiceExample], indices: Sequence[int], tokenizer, seq_length: int, num_choices: int,
            max_qa_length: int) -> Iterator[Dict[str, np.ndarray]]:
  """The records of `examples` (record i carries `example_index` indices[i]): ids [num_choices, seq_length] with the
  padding choices all zero, `choice_mask` [num_choices], `label_ids` (-1 without a label)."""
  for example, index in zip(examples, indices):
    packed = pack_choices(tokenizer, example.context, example.question, example.choices, seq_length, max_qa_length)
    record = {k: np.zeros([num_choices, seq_length], np.int32) for k in ENCODER_KEYS}
    for c, row in enumerate(packed):
      for k in ENCODER_KEYS:
        record[k][c] = row[k]
    record["choice_mask"] = (np.arange(num_choices) < len(packed)).astype(np.int64)
    record["label_ids"] = np.int64(-1 if example.label is None else example.label)
    record["example_index"] = np.int64(index)
    yield record
