"""`TextMultipleChoiceConfig`: what `--experiment=text_multiple_choice` reads (columns, choices per row).

Separate from the task so that the checks a user meets first (`validate`, run before any file is read or any model
built) read on one page: each names the `task.*` key at fault and the value that fixes it.
"""

from __future__ import annotations

import dataclasses

from official_albert.training.experiment_config import ConfigError
from tasks import raw_inputs
from tasks.choice.data import LABEL_FORMATS


@dataclasses.dataclass
class TextMultipleChoiceConfig(raw_inputs.RowFilesTaskConfig):
  """Multiple choice on the user's own files (see `tasks.choice`).

  Attributes:
    context_column: the passage each choice is read against ('' = the files have none: the question alone).
    question_column: the question (may hold "_" blanks, which each choice fills, as RACE's do).
    choices_column: the choices: a JSONL list of texts, or a CSV / TSV cell holding a list of texts in JSON
      (["a", "b"]) or as Python writes one (['a', 'b']: pandas' to_csv of a list column).
    label_column: the answer: the choice's index (0-based: a number, digits, or a whole number written as pandas
      writes a float column, 1.0), the choice's text (exactly one choice must be that text) or its letter (A = the
      first, as RACE, ARC and CommonsenseQA write answers). Not read by `--mode=predict`.
    label_format: how the labels are written: "auto" (any of the three; a label that two readings read as different
      choices, such as "3" among the choices ["1", "2", "3", "4"], is a bad row naming both, rather than a silently
      wrong answer; integer answers none of which is 0, one equal to its row's choice count, are refused as
      numbered from 1), "index", "text", "letter" (a or A = the first) or "index1" (1 = the first; a capital letter
      is read too, as ARC's answerKey mixes them).
    num_choices: the choices the model scores per row: a row with fewer is padded with empty choices that are
      masked out of the softmax, loss, accuracy and predictions; a row with more is a bad row.
    max_qa_length: the question+choice cap in pieces (the end is kept: the choice sits there); RACE's 128, cut to
      fit a shorter seq_length when the run leaves it unset (`model_source.fit_question_caps`).
    classifier_dropout: dropout before the [1, H] scorer (the reference's RACE head: 0.1).
  """
  context_column: str = "context"
  question_column: str = "question"
  choices_column: str = "choices"
  label_column: str = "label"
  label_format: str = "auto"
  num_choices: int = 4
  max_qa_length: int = 128
  classifier_dropout: float = 0.1

  def validate(self) -> None:
    super().validate()
    if self.input_format and self.input_format not in ("csv", "tsv", "jsonl"):
      raise ConfigError(f"task.input_format={self.input_format!r}: text_multiple_choice reads csv, tsv or jsonl (or "
                        "'' = from the extension).")
    for key in ("question_column", "choices_column", "label_column"):
      if not getattr(self, key):
        raise ConfigError(f"task.{key} is empty: a row is a question, its choices and its label; name the column "
                          "(task.context_column may be '' for rows without a passage).")
    if self.label_format not in LABEL_FORMATS:
      raise ConfigError(f"task.label_format={self.label_format!r} is not one of {LABEL_FORMATS}: how the answers are "
                        "written (auto reads an index, a choice's text or a letter).")
    if self.num_choices < 2:
      raise ConfigError(f"task.num_choices={self.num_choices}: a question needs at least 2 choices; set it to the "
                        "most choices a row of your files has.")
    if self.max_qa_length < 1:
      raise ConfigError(f"task.max_qa_length={self.max_qa_length}: the question+choice cap must be >= 1 (RACE's "
                        "128).")
    for data in (self.train_data, self.validation_data, self.predict_data):
      if data.pad_to_multiple_of or data.length_bucket_window:
        raise ConfigError("text_multiple_choice reads fixed-length records: set pad_to_multiple_of=0 and "
                          "length_bucket_window=0 in task.train_data / task.validation_data / task.predict_data.")
