"""The text tasks' configs, and the settings a trained model directory records for them.

`TextTaskConfig` and its three task configs (`text_classification`, `text_regression`, `token_classification`), the
reading settings saved in labels.json (`COLUMN_SETTINGS`) and the fallback to a directory's params.yaml: what a run
reads before any data, in a file of its own so that tasks/text/task.py holds the tasks themselves. The settings a
model directory records default to None ("not set"): tasks/text/task.py says how a run resolves them.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Dict, List, Optional

from official_albert import file_io
from official_albert import model_directory
from official_albert.training.experiment_config import ConfigError
from official_albert.training.hyperparams import load_file
from tasks import raw_inputs
from tasks.classification import FineTuningTaskConfig
from tasks.text import conll
from tasks.text import data as text_data

LABELS_FILE = model_directory.LABELS_FILE
SPM_FILE = model_directory.SPM_FILE
TOKENIZER_CONFIG_FILE = model_directory.TOKENIZER_CONFIG_FILE  # (`write_tokenizer_options`' file: do_lower_case)
# The reading settings saved in labels.json ("columns") and reused when a later run leaves them unset (None).
COLUMN_SETTINGS = ("text_column", "text_pair_column", "label_column", "input_format", "label_separator",
                   "conll_token_column", "conll_tag_column", "conll_separator")


@dataclasses.dataclass
class TextTaskConfig(raw_inputs.RowFilesTaskConfig, FineTuningTaskConfig):
  """Fine-tuning on your own files (see the module docstring): the classification config (`FineTuningTaskConfig`:
  classifier_dropout, exit_heads and the three splits) with the files' columns, shorter default sequences (128) and
  the fine-tuning shuffle buffer.

  The reading and tokenizer settings a model directory records (the columns, `do_lower_case`) are None by default:
  not set, so that a run in a trained model_dir takes the recorded value, and a value given explicitly — the
  default's too — wins (a default-valued field could not tell "not set" from "set back to the default").

  Attributes:
    text_column, text_pair_column, label_column: CSV/TSV header names or JSONL keys ('' = none); None = the ones
      labels.json saved, else `text`, none, `label` (`column_defaults`).
    id_column: the id's header name or JSONL key; '' = the line number.
    input_format: csv | tsv | jsonl | conll; '' = from each file's extension (.csv .tsv .jsonl .ndjson .conll ...);
      None = labels.json's, else ''.
    labels: the label set in output order; [] = labels.json's in a trained model_dir, else the sorted labels of the
      training file. Given with a labels.json, it must be that file's list in that order.
    skip_bad_rows: skip, count and log bad rows (and evaluation labels unseen in training) instead of raising.
    do_lower_case: None = as the model in model_dir was trained (its tokenizer_config.json, else its params.yaml),
      else true.
    spm_model_file, tokenizer_mode, records_dir: the tokenizer and the record cache (`raw_inputs.RawInputTaskConfig`).
    record_shuffle_seed: the training records are written in the order of a permutation of the row positions drawn
      with this seed (as SQuAD's are), so a file sorted by label (a database export, a folder per class) trains
      shuffled. The permutation is of positions, not contents: the same rows in another order train in another
      sequence (the same distribution, not the same batches). Negative keeps the file order. Evaluation and
      prediction records keep the file order.
    classifier_dropout, exit_heads: the head's settings (`FineTuningTaskConfig`); with exit heads the model can leave
      early at inference (`pipelines.classify(..., patience=N)`); sequence-level tasks only.
    predict_data: `--mode=predict` input (raw files or records).
    predict_output_format: csv | tsv | jsonl | conll; '' = the input's format.
  """
  text_column: Optional[str] = None
  text_pair_column: Optional[str] = None
  label_column: Optional[str] = None
  id_column: str = ""
  labels: List[str] = dataclasses.field(default_factory=list)
  predict_output_format: str = ""
  input_format: Optional[str] = None
  do_lower_case: Optional[bool] = None

  def column_defaults(self) -> Dict[str, Any]:
    """The value of each reading setting (`COLUMN_SETTINGS`) this task has when neither the run nor labels.json
    gives one."""
    return {"text_column": "text", "text_pair_column": "", "label_column": "label", "input_format": ""}

  def validate(self) -> None:
    super().validate()
    for name in ("input_format", "predict_output_format"):
      if getattr(self, name) and getattr(self, name) not in text_data.FORMATS:
        raise ConfigError(f"task.{name}={getattr(self, name)!r} is not one of {text_data.FORMATS} (or '').")
    if len(set(map(text_data.label_text, self.labels))) != len(self.labels):  # (NFC / stripped: as rows are read)
      raise ConfigError(f"task.labels has duplicates: {self.labels} (compared in Unicode NFC, stripped).")


@dataclasses.dataclass
class TextClassificationConfig(TextTaskConfig):
  """Attributes: multi_label (several labels per row: JSONL lists or `label_separator`-joined cells; sigmoid
  outputs; None = what labels.json records in a trained model_dir, else false: one set against the file is an
  error, the model's head is one or the other), multi_label_threshold (probability at which a label is predicted;
  None = labels.json's, the training run's, else 0.5), label_separator (None = labels.json's, else `|`)."""
  multi_label: Optional[bool] = None
  multi_label_threshold: Optional[float] = None
  label_separator: Optional[str] = None

  def column_defaults(self) -> Dict[str, Any]:
    return dict(super().column_defaults(), label_separator="|")

  def validate(self) -> None:
    super().validate()
    threshold = self.multi_label_threshold
    if threshold is not None and not 0 < threshold < 1:
      raise ConfigError(f"task.multi_label_threshold={threshold!r} is no probability in (0, 1); leave it unset to "
                        "predict at the model's threshold (labels.json), else "
                        f"{model_directory.MULTI_LABEL_THRESHOLD}.")


@dataclasses.dataclass
class TextRegressionConfig(TextTaskConfig):
  """One float per row in `label_column`; MSE loss; Pearson / Spearman / MSE."""


@dataclasses.dataclass
class TokenClassificationConfig(TextTaskConfig):
  """Tags per word: CoNLL columns or JSONL lists (`text_column` = tokens, `label_column` = tags, unless labels.json
  saved others); `conll_token_column` / `conll_tag_column` (negative = from the end; None = labels.json's, else 0 and
  -1); `conll_separator` (None = labels.json's, else `auto`): where CoNLL lines split into columns, `auto` (per
  file, from its first lines: at tabs only when its column counts show a tab-separated file,
  `tasks.text.conll.file_layout`; a tie is warned about), `tab` (a token keeps its spaces: "Hà Nội") or `space` (at
  spaces and tabs). Why a setting: a tab file whose tokens all hold as many spaces (one line, a sentence of two-word
  names) cannot be told from a space file by its columns."""
  conll_token_column: Optional[int] = None
  conll_tag_column: Optional[int] = None
  conll_separator: Optional[str] = None

  def column_defaults(self) -> Dict[str, Any]:
    return dict(super().column_defaults(), text_column="tokens", label_column="tags", conll_token_column=0,
                conll_tag_column=-1, conll_separator="auto")

  def validate(self) -> None:
    super().validate()
    try:
      if self.conll_separator is not None:
        conll.check_separator(self.conll_separator)
    except ValueError as e:
      raise ConfigError(str(e)) from None
    if self.exit_heads:
      raise ConfigError("task.exit_heads=true is for the sequence-level tasks (text_classification, text_regression, "
                        "GLUE, RACE); token_classification has one output per token.")


def check_label_count(labels: List[str], label_kind: str, source: str) -> List[str]:
  """`labels` when a classifier of `label_kind` can learn them; else a ConfigError naming `source` and the fix.

  Why: one label trains nothing useful. A single-label classifier (softmax over one output) has a loss of exactly 0,
  whatever the data; a one-label multi-label classifier (one sigmoid) has one output, which every serving path
  (`pipelines.classify`, the SavedModel, the server, LiteRT) reads as a regression score: its raw logit, not the
  probability `--mode=predict` writes. Both are refused wherever the labels come from (`task.labels`, the training
  file, labels.json).
  """
  if len(labels) >= 2 or label_kind not in ("class", "multi"):
    return labels
  if label_kind == "class":
    raise ConfigError(f"{source}: {len(labels)} label(s) {labels}; single-label text_classification needs at least 2 "
                      "(task.labels, or the training file's label column): a one-output softmax always has loss 0. "
                      "Give the other class(es), or use text_regression for scores.")
  raise ConfigError(f"{source}: task.multi_label=true with the one label {labels}: a one-output classifier is served "
                    "as a regression head (its raw logit as the score), not the label's probability. Train it as two "
                    f"classes instead (task.multi_label=false, labels e.g. [{labels[0]!r}, 'not_{labels[0]}'], a row's "
                    "label the label or its absence), or as text_regression on a 0/1 score.")


def params_yaml_task(model_dir: str) -> Dict[str, Any]:
  """The task section of model_dir's params.yaml ({} without a readable one): where a directory trained before
  tokenizer_config.json was written records its do_lower_case."""
  file_path = model_directory.path(model_dir, model_directory.PARAMS_FILE)
  if not file_io.exists(file_path):
    return {}
  try:
    task = load_file(file_path).get("task", {})  # a file always, whatever '=' or ':' model_dir holds
  except (ValueError, OSError):
    return {}
  return task if isinstance(task, dict) else {}
