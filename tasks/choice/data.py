"""Multiple-choice rows for `text_multiple_choice`: CSV / TSV / JSONL rows → `ChoiceExample`s → fixed-length records.

Rows are read with the row-file tasks' reader (`tasks.row_files`: formats, header check, bad-row policy, errors naming
file:line, the key and the fix). Each row becomes one record of `num_choices` choices, each packed as RACE packs an
option (`official_albert.tokenization.choices.pack_choices`: `[CLS] context [SEP] question+choice [SEP]`); a row with
fewer choices is padded with all-zero rows, and `choice_mask` [num_choices] says which are real (1) — the task keeps
the padding out of the softmax, so a row's scores do not depend on how many choices the others have.
"""

from __future__ import annotations

import dataclasses
import logging
import re
from typing import Any, Dict, Iterator, List, Optional, Sequence

import numpy as np

from official_albert.tokenization.choices import pack_choices
from tasks import row_cells
from tasks import row_files

ENCODER_KEYS = ("input_word_ids", "input_mask", "input_type_ids")
logger = logging.getLogger(__name__)


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
  """The choices column's value as texts; None when it is not a list of non-blank texts. A CSV / TSV cell (or a JSONL
  string) holds the list in JSON (`["a", "b"]`) or as Python writes it (`['a', 'b']`: pandas' and datasets' `to_csv`
  of a list column), as text_ranking reads its negatives."""
  if isinstance(value, str) and (cells or value.strip().startswith("[")):
    value = row_cells.list_cell(value.strip())
  if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
    return None
  return value


LABEL_FORMATS = ("auto", "index", "text", "letter", "index1")
# Digit labels read 0-based with none of them 0 among this many: the file is likely numbered from 1 (a warning).
_ONE_BASED_HINT_ROWS = 20
# A whole number as pandas / a spreadsheet writes a float column ("1.0"): the index 1, as JSONL's 1.0 is, and as
# text_classification reads the label 1.0 as the class 1.
_WHOLE_FLOAT = re.compile(r"([0-9]+)\.0+")


def _digits(value: Any) -> Optional[int]:
  """A label written as an integer (a number, digits, or digits with a zero fraction: "1.0"), else None."""
  if isinstance(value, bool):
    return None
  if isinstance(value, (int, float)) and float(value).is_integer():
    return int(value)
  if not isinstance(value, str):
    return None
  whole = _WHOLE_FLOAT.fullmatch(value.strip())
  digits = whole.group(1) if whole else value.strip()
  return int(digits) if digits.isdecimal() else None  # (not "²")


def _readings(value: Any, choices: Sequence[str], label_format: str) -> Dict[str, int]:
  """The choice each reading of a label names: {"index" | "text" | "letter": its index}, the readings that
  `label_format` allows and that name a choice (an index in range, the text of exactly one choice, a letter in
  range)."""
  found = {}
  if label_format in ("auto", "index", "index1") and _digits(value) is not None:
    index = _digits(value) - (label_format == "index1")
    if 0 <= index < len(choices):
      found["index"] = index
  text = str(int(value)) if isinstance(value, (int, float)) and float(value).is_integer() else value
  if isinstance(text, str) and label_format in ("auto", "text"):  # (a JSON number 15 reads as the choice "15" too)
    matches = [i for i, choice in enumerate(choices) if choice.strip() == text.strip()]
    if len(matches) == 1:
      found["text"] = matches[0]
  if isinstance(value, str) and len(value.strip()) == 1 and (
      label_format == "letter" or (label_format in ("auto", "index1") and value.strip().isupper())):
    index = ord(value.strip().upper()) - ord("A")
    if 0 <= index < len(choices) and value.strip().isalpha():
      found["letter"] = index
  return found


def answer_index(value: Any, choices: Sequence[str], column: str, label_format: str = "auto") -> int:
  """The answer's index from its label: a 0-based index (a number or digits), the text of exactly one choice, or a
  letter (A = the first), as `label_format` allows ("auto": any, unless two readings name different choices;
  "index1": a 1-based index or a capital letter, as ARC's answerKey mixes them)."""
  if isinstance(value, bool) or value is None or (isinstance(value, str) and not value.strip()):
    raise row_files.RowProblem(f"column {column!r} (task.label_column): no answer; give the choice's index (0-based), "
                               "its text or its letter")
  if isinstance(value, str):
    text_matches = [i for i, choice in enumerate(choices) if choice.strip() == value.strip()]
    if len(text_matches) > 1 and label_format in ("auto", "text"):
      raise row_files.RowProblem(f"column {column!r} (task.label_column): {len(text_matches)} choices "
                                 f"({text_matches}) are the text {value!r:.60}; give the answer's index (0-based, "
                                 "task.label_format=index), or make the choices distinct")
  found = _readings(value, choices, label_format)
  if len(set(found.values())) > 1:
    readings = "; ".join(f"as {kind}: choice {i} ({choices[i]!r:.40})" for kind, i in sorted(found.items()))
    raise row_files.RowProblem(f"column {column!r} (task.label_column): {value!r:.60} names different choices "
                               f"({readings}); set task.label_format to {' or '.join(sorted(found))} (the way the "
                               "file's labels are written)")
  if not found:
    allowed = {"auto": "a choice's index (0-based), its text or its letter (A = the first)",
               "index": "a choice's index (0-based)", "text": "the text of exactly one choice",
               "letter": "a choice's letter (A = the first)",
               "index1": "a choice's 1-based index (1 = the first) or its capital letter"}[label_format]
    last, first = len(choices) - 1, int(label_format == "index1")
    one_based = (" (if the file numbers its choices from 1, set task.label_format=index1)"
                 if label_format in ("auto", "index") and _digits(value) == len(choices) else "")
    raise row_files.RowProblem(f"column {column!r} (task.label_column): {value!r:.60} is not {allowed} of the row's "
                               f"{len(choices)} choices ({first}..{last + first}, A..{chr(ord('A') + min(last, 25))}; "
                               f"task.label_format={label_format}){one_based}")
  return next(iter(found.values()))


def read_choice_rows(path: str, columns: Dict[str, str], num_choices: int, labelled: bool, input_format: str = "",
                     skip_bad_rows: bool = False, label_format: str = "auto") -> List[ChoiceExample]:
  """The rows of one file.

  Args:
    path: a CSV, TSV or JSONL file.
    columns: {"context", "question", "choices", "label"} → column names (context '' = none).
    num_choices: the most choices a row may have (task.num_choices).
    labelled: read the label (train / eval); predict files need none.
    input_format, skip_bad_rows: as the other row-file tasks read them.
    label_format: how the labels are written (`LABEL_FORMATS`; task.label_format).

  Raises:
    TextDataError: a missing column, a blank question, fewer than 2 or more than `num_choices` choices, a label that
      names no choice (naming file:line, the key and the fix).
  """
  wanted = {f"{side}_column": column for side, column in columns.items()
            if column and (labelled or side != "label")}
  cells = row_files.file_format(path, input_format) in ("csv", "tsv")
  digit_labels: List[tuple] = []  # (line, label, choices) of the labels written as integers

  def parse(line: int, row: Dict[str, Any]) -> ChoiceExample:
    question = row_files.row_text(row, columns["question"], "task.question_column")
    context = ""
    if columns["context"]:
      if columns["context"] not in row:  # (a JSONL row; a CSV / TSV header without it is refused at its line 1)
        raise row_files.RowProblem(f"no key {columns['context']!r} (task.context_column); the row's keys are "
                                   f"{sorted(row)[:10]}: set task.context_column to the key holding the passage, "
                                   "or to '' if the file has none")
      context = row[columns["context"]]
      if not isinstance(context, str):
        raise row_files.RowProblem(f"column {columns['context']!r} (task.context_column): {context!r:.40} is not a "
                                   "text; give the passage as a string, or set task.context_column='' if the file "
                                   "has none")
    choices = _choices(row.get(columns["choices"]), cells)
    if choices is None:
      form = ("a cell holding a list of texts (JSON [\"a\", \"b\"] or Python ['a', 'b'])" if cells else
              "a JSON list of texts")
      raise row_files.RowProblem(f"column {columns['choices']!r} (task.choices_column): expected {form}, none blank; "
                                 f"got {row.get(columns['choices'])!r:.80}")
    if not 2 <= len(choices) <= num_choices:
      raise row_files.RowProblem(f"column {columns['choices']!r} (task.choices_column): {len(choices)} choices; a row "
                                 f"has 2 to task.num_choices={num_choices} (raise task.num_choices for more)")
    value = row.get(columns["label"])
    number = _digits(value) if labelled and label_format in ("auto", "index") else None
    texts = {c.strip() for c in choices}
    if number is not None and (label_format == "index" or not {str(number), str(value).strip()} & texts):
      digit_labels.append((line, number, len(choices)))  # (not a choice's text)
    label = answer_index(value, choices, columns["label"], label_format) if labelled else None
    return ChoiceExample(path, line, context, question, choices, label)

  examples = row_files.read_row_file(path, input_format, skip_bad_rows, wanted, "text_multiple_choice reads", parse,
                                     "questions")
  _check_zero_based(path, digit_labels)
  return examples


def _check_zero_based(path: str, digit_labels: Sequence[tuple]) -> None:
  """Refuses a file whose integer labels read 0-based look 1-based: none is 0 and one equals its row's choice count
  (that row was a bad row, and `skip_bad_rows` skipped it while every other label silently named the next choice);
  warns when none is 0 among many."""
  if not digit_labels or any(label == 0 for _, label, _ in digit_labels):
    return
  past = [(line, label, n) for line, label, n in digit_labels if label == n]
  if past:
    line, label, n = past[0]
    raise row_files.TextDataError(
        f"{path}:{line}: the answers look numbered from 1: label {label} with {n} choices names no 0-based choice "
        f"({len(past)} such rows), and no label in the file is 0; set task.label_format=index1 (1 = the first "
        "choice), or number the answers from 0.")
  if len(digit_labels) >= _ONE_BASED_HINT_ROWS:
    logger.warning("%s: none of its %d answers written as numbers is 0: if they are numbered from 1, every one names "
                   "the next choice; set task.label_format=index1.", path, len(digit_labels))


def records(examples: Sequence[ChoiceExample], indices: Sequence[int], tokenizer, seq_length: int, num_choices: int,
            max_qa_length: int, skip_bad_rows: bool = False) -> Iterator[Dict[str, np.ndarray]]:
  """The records of `examples` (record i carries `example_index` indices[i]): ids [num_choices, seq_length] with the
  padding choices all zero, `choice_mask` [num_choices], `label_ids` (-1 without a label).

  Raises:
    TextDataError: a labelled row whose answer packs to the same pieces as another choice (cut by max_qa_length, or
      differing only in case under lower-casing): its label could not be learned nor scored; skipped and counted
      under `skip_bad_rows`.
  """
  skipped = []
  for example, index in zip(examples, indices):
    packed = pack_choices(tokenizer, example.context, example.question, example.choices, seq_length, max_qa_length)
    twin = _answer_twin(packed, example.label)
    if twin is not None:
      problem = (f"{example.path}:{example.line}: the answer (choice {example.label}, "
                 f"{example.choices[example.label]!r:.40}) packs to the same pieces as choice {twin} "
                 f"({example.choices[twin]!r:.40}): the question+choice cut to task.max_qa_length={max_qa_length} "
                 "drops what differs, or they differ only in case under lower-casing; raise task.max_qa_length, make "
                 "the choices distinct, or set task.skip_bad_rows=true to skip such rows")
      if not skip_bad_rows:
        raise row_files.TextDataError(problem)
      skipped.append(problem)
      continue
    record = {k: np.zeros([num_choices, seq_length], np.int32) for k in ENCODER_KEYS}
    for c, row in enumerate(packed):
      for k in ENCODER_KEYS:
        record[k][c] = row[k]
    record["choice_mask"] = (np.arange(num_choices) < len(packed)).astype(np.int64)
    record["label_ids"] = np.int64(-1 if example.label is None else example.label)
    record["example_index"] = np.int64(index)
    yield record
  if skipped:
    logger.warning("Skipped %d rows whose answer packs like another choice (task.skip_bad_rows); the first: %s",
                   len(skipped), skipped[0])


def _answer_twin(packed: Sequence[Dict[str, Any]], label: Optional[int]) -> Optional[int]:
  """Another choice whose packed ids equal the answer's, else None (None without a label)."""
  if label is None:
    return None
  answer = packed[label]["input_word_ids"]
  return next((c for c, row in enumerate(packed)
               if c != label and np.array_equal(np.asarray(row["input_word_ids"]), np.asarray(answer))), None)
