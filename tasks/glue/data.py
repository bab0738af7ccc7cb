"""GLUE data: TSV processors, feature conversion, records, metrics and submission files (reference §5.1).

Every processor reads the standard GLUE release layout (`<data_dir>/<DIR>/{train,dev,test}.tsv`, MNLI's
`dev_matched.tsv` etc.) with the reference's columns and label lists. The text goes to the tokenizer unchanged:
`FullTokenizer.tokenize` applies the reference `preprocess_text` itself.

Headers: the reference skips the first line of every file but CoLA's train/dev unchecked, so a file without its
header row silently loses its first example. Here the first row is compared with the release's header (`HEADERS`,
only the columns the task reads, case-insensitive): the header is skipped; a first row that is a valid example
instead (a file saved without its header) is kept and a warning names the file and the expected header; anything
else (another task's file, renamed or shifted columns) is a `GlueDataError` naming the file, the row found and the
header expected. On the release files this reads exactly what the reference reads. (`tasks/glue/files.py`: the
TSV reading, UTF-8 errors with file:line, the header table.)

The metrics of each task (`compute_metrics`, names as the reference's) come from `tasks/metrics.py`. The fine-tuning
task (config, model, training and prediction) is `tasks/glue/task.py`; this module itself needs neither Keras nor the
trainer: it is what `data_prep.create_finetuning_data` and the raw-file inputs call.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from typing import Dict, List, Optional, Sequence

import numpy as np
import tensorflow as tf

from official_albert import file_io
from official_albert.tokenization import pack_ids
from tasks import raw_inputs
from tasks.glue.files import GlueDataError
from tasks.glue.files import is_header
from tasks.glue.files import is_number
from tasks.glue.files import iter_tsv
from tasks.metrics import accuracy
from tasks.metrics import check_same_length
from tasks.metrics import f1_score
from tasks.metrics import matthews_corrcoef
from tasks.metrics import pearson
from tasks.metrics import spearman
from tasks.records import FILE_ORDER
from tasks.records import RecordOptions
from tasks.records import RecordWriter
from tasks.records import training_order

logger = logging.getLogger(__name__)


@dataclasses.dataclass
class InputExample:
  """One GLUE example.

  Attributes:
    guid: "<split>-<line>" for train/dev; the file's index column for test files (used in submissions).
    text_a: first sequence (raw text).
    text_b: second sequence or None for single-sentence tasks.
    label: a label string from the task's label list, a float for STS-B, or None for test files.
  """
  guid: str
  text_a: str
  text_b: Optional[str] = None
  label: Optional[object] = None


@dataclasses.dataclass(frozen=True)
class _Layout:
  """Columns of one split's file; None = absent."""
  a: int
  b: Optional[int] = None
  label: Optional[int] = None  # -1 = last column.
  index: Optional[int] = None  # Test files: the id column written to the submission.
  header: bool = True


@dataclasses.dataclass(frozen=True)
class GlueTaskSpec:
  """Static description of one GLUE task (reference §5.1 table).

  Attributes:
    name: lower-case task key (`cola`, `sst-2`, `mnli`, `mnli-mm`, `ax`, ...).
    directory: the folder under data_dir.
    files: split name → file name.
    layouts: split name → column layout; "test" also covers predict-only files.
    labels: label strings; None for regression (STS-B).
    submission_name: the file name the GLUE server expects.
    skip_bad_rows: default for rows with missing columns (the reference skips QQP's IndexError rows).
  """
  name: str
  directory: str
  files: Dict[str, str]
  layouts: Dict[str, _Layout]
  labels: Optional[Sequence[str]]
  submission_name: str
  skip_bad_rows: bool = False

  @property
  def is_regression(self) -> bool:
    return self.labels is None

  @property
  def num_labels(self) -> int:
    return 1 if self.labels is None else len(self.labels)

_BINARY = ("0", "1")
_NLI = ("contradiction", "entailment", "neutral")
_ENTAIL = ("entailment", "not_entailment")
_STD_FILES = {"train": "train.tsv", "dev": "dev.tsv", "test": "test.tsv"}


def _pair(a, b, label=-1, test_a=None, test_b=None):
  """Layouts for a pair task whose test file has the index in column 0."""
  return {
      "train": _Layout(a=a, b=b, label=label),
      "dev": _Layout(a=a, b=b, label=label),
      "test": _Layout(a=a if test_a is None else test_a, b=b if test_b is None else test_b, index=0),
  }


TASKS: Dict[str, GlueTaskSpec] = {}


def _register(spec: GlueTaskSpec) -> None:
  TASKS[spec.name] = spec


_register(GlueTaskSpec(
    "cola", "CoLA", dict(_STD_FILES),
    {"train": _Layout(a=3, label=1, header=False), "dev": _Layout(a=3, label=1, header=False),
     "test": _Layout(a=1, index=0)},
    _BINARY, "CoLA.tsv"))
_register(GlueTaskSpec(
    "sst-2", "SST-2", dict(_STD_FILES),
    {"train": _Layout(a=0, label=1), "dev": _Layout(a=0, label=1), "test": _Layout(a=1, index=0)},
    _BINARY, "SST-2.tsv"))
_register(GlueTaskSpec("mrpc", "MRPC", dict(_STD_FILES), _pair(3, 4, label=0), _BINARY, "MRPC.tsv"))
_register(GlueTaskSpec("sts-b", "STS-B", dict(_STD_FILES), _pair(7, 8), None, "STS-B.tsv"))
_register(GlueTaskSpec("qqp", "QQP", dict(_STD_FILES), _pair(3, 4, label=5, test_a=1, test_b=2), _BINARY,
                       "QQP.tsv", skip_bad_rows=True))
_register(GlueTaskSpec("mnli", "MNLI", {"train": "train.tsv", "dev": "dev_matched.tsv", "test": "test_matched.tsv"},
                       _pair(8, 9), _NLI, "MNLI-m.tsv"))
_register(GlueTaskSpec("mnli-mm", "MNLI", {"train": "train.tsv", "dev": "dev_mismatched.tsv",
                                           "test": "test_mismatched.tsv"}, _pair(8, 9), _NLI, "MNLI-mm.tsv"))
_register(GlueTaskSpec("qnli", "QNLI", dict(_STD_FILES), _pair(1, 2), _ENTAIL, "QNLI.tsv"))
_register(GlueTaskSpec("rte", "RTE", dict(_STD_FILES), _pair(1, 2), _ENTAIL, "RTE.tsv"))
_register(GlueTaskSpec("wnli", "WNLI", dict(_STD_FILES), _pair(1, 2), _BINARY, "WNLI.tsv"))
# The diagnostic set: MNLI labels, predict only (the reference defines AXProcessor but never registers it, bug #25).
_register(GlueTaskSpec("ax", "diagnostic", {"test": "diagnostic.tsv"}, {"test": _Layout(a=1, b=2, index=0)}, _NLI,
                       "AX.tsv"))

# Aliases used by the reference (`mismnli`) and by common tooling.
_ALIASES = {"mismnli": "mnli-mm", "mnli-m": "mnli", "sst2": "sst-2", "stsb": "sts-b", "sts_b": "sts-b",
            "diagnostic": "ax", "mnli_mismatched": "mnli-mm", "mnli_matched": "mnli"}


def get_spec(name: str) -> GlueTaskSpec:
  """Returns the spec for a task name (case-insensitive; reference aliases such as `mismnli` accepted)."""
  key = name.lower()
  key = _ALIASES.get(key, key)
  if key not in TASKS:
    raise ValueError(f"Unknown GLUE task {name!r}; known: {sorted(TASKS)} (aliases {sorted(_ALIASES)}).")
  return TASKS[key]


def task_file(spec: GlueTaskSpec, data_dir: str, split: str) -> str:
  """Path of a split's TSV; `data_dir` may be the GLUE root or the task folder itself."""
  if split not in spec.files:
    raise ValueError(f"GLUE task {spec.name!r} has no {split!r} split (has {sorted(spec.files)}).")
  nested = os.path.join(data_dir, spec.directory, spec.files[split])
  if tf.io.gfile.exists(nested):
    return nested
  flat = os.path.join(data_dir, spec.files[split])
  if tf.io.gfile.exists(flat):
    return flat
  raise FileNotFoundError(f"GLUE {spec.name} {split} file not found: tried {nested} and {flat}.")


def read_examples(task: str, data_dir: str, split: str, skip_bad_rows: Optional[bool] = None,
                  path: Optional[str] = None) -> List[InputExample]:
  """Reads one split of a GLUE task.

  The first row of a file with a header is checked against `HEADERS` (module docstring): the header is skipped,
  a valid example in its place is kept with a warning (the file lost its header), anything else is an error.

  Args:
    task: task name (see `TASKS`).
    data_dir: GLUE root (holding `CoLA/`, `MNLI/`, ...) or the task folder.
    split: "train", "dev" or "test".
    skip_bad_rows: rows with missing columns are skipped and counted (logged) instead of raising. Defaults to the
      task's reference behaviour (True only for QQP's train and dev splits).
    path: read this file instead of the standard one (layout still chosen by `split`).

  Returns:
    The examples in file order.

  Raises:
    GlueDataError: the first row is neither the expected header nor an example; the file is not UTF-8; a row lacks
      a needed column (unless skipped), a label is outside the task's label set, or an STS-B score is not a
      number; the message names file:line.
  """
  spec = get_spec(task)
  if split not in spec.layouts:
    raise ValueError(f"GLUE task {spec.name!r} has no {split!r} split.")
  layout = spec.layouts[split]
  path = path or task_file(spec, data_dir, split)
  # (the reference skips QQP's short rows in train / dev only: a test row skipped would leave its id out of the
  # submission, which the GLUE server refuses)
  skip = (spec.skip_bad_rows and split != "test") if skip_bad_rows is None else skip_bad_rows
  needed = max(c for c in (layout.a, layout.b, layout.label, layout.index) if c is not None)
  examples, skipped, rows = [], 0, 0
  for line, row in iter_tsv(path):  # (a line at a time: only the examples are kept)
    rows += 1
    if line == 1 and layout.header and is_header(row, spec, split, layout, path):
      continue
    if not row or (len(row) == 1 and not row[0].strip()):
      continue  # A blank line (e.g. a trailing newline pair) carries no example.
    label_col = None
    if layout.label is not None:
      label_col = len(row) - 1 if layout.label == -1 else layout.label
    if len(row) <= needed or (layout.label == -1 and len(row) <= max(layout.a, layout.b or 0) + 1):
      if skip:
        skipped += 1
        continue
      raise GlueDataError(f"{path}:{line}: {spec.name} row has {len(row)} columns, needs column {needed} "
                          f"(pass skip_bad_rows=True / --skip_bad_rows to skip and count such rows).")
    text_a = row[layout.a]
    text_b = row[layout.b] if layout.b is not None else None
    label = None
    if label_col is not None:
      raw = row[label_col]
      if spec.is_regression:
        label = float(raw) if is_number(raw) else None
        if label is None:  # (float() also takes NaN, infinity and 1_0: a NaN loss, or a score of 10)
          raise GlueDataError(f"{path}:{line}: STS-B score {raw!r} is not a finite decimal number.")
      else:
        if raw not in spec.labels:
          raise GlueDataError(f"{path}:{line}: label {raw!r} not in {spec.name} labels {list(spec.labels)}.")
        label = raw
    guid = row[layout.index] if layout.index is not None else f"{split}-{line}"
    examples.append(InputExample(guid=guid, text_a=text_a, text_b=text_b, label=label))
  if skipped:
    logger.warning("%s: skipped %d of %d rows with missing columns (%s).", path, skipped, rows, spec.name)
  logger.info("%s: read %d %s %s examples.", path, len(examples), spec.name, split)
  return examples


def convert_example(example: InputExample, spec: GlueTaskSpec, tokenizer, max_seq_length: int) -> Dict[str, object]:
  """`[CLS] A [SEP] (B [SEP])` ids, mask, segment ids and label (reference `convert_single_example`: B only when it
  has pieces).

  Returns:
    A dict with int32 arrays `input_word_ids`, `input_mask`, `input_type_ids` [max_seq_length] and `label_ids`
    (int32 label index; float32 for STS-B; -1 / nan when the example has no label).
  """
  ids_a = tokenizer.convert_tokens_to_ids(tokenizer.tokenize(example.text_a))
  # The reference's `if example.text_b:` / `if tokens_b:`: an empty (or blank) B packs one segment, `[CLS] A [SEP]`,
  # not `[CLS] A [SEP] [SEP]` (QQP / MNLI rows with an empty second column).
  ids_b = tokenizer.convert_tokens_to_ids(tokenizer.tokenize(example.text_b)) if example.text_b else None
  ids_b = ids_b or None
  features = {k: np.asarray(v, np.int32) for k, v in pack_ids(ids_a, ids_b, max_seq_length).items()}
  if spec.is_regression:
    features["label_ids"] = np.float32(np.nan if example.label is None else example.label)
  else:
    features["label_ids"] = np.int32(-1 if example.label is None else spec.labels.index(example.label))
  return features


def convert_examples(examples: Sequence[InputExample], task: str, tokenizer,
                     max_seq_length: int) -> Dict[str, np.ndarray]:
  """Converts examples to stacked arrays ([N, L] ids/mask/types, [N] labels)."""
  spec = get_spec(task)
  feats = [convert_example(e, spec, tokenizer, max_seq_length) for e in examples]
  if not feats:
    return {"input_word_ids": np.zeros([0, max_seq_length], np.int32),
            "input_mask": np.zeros([0, max_seq_length], np.int32),
            "input_type_ids": np.zeros([0, max_seq_length], np.int32),
            "label_ids": np.zeros([0], np.float32 if spec.is_regression else np.int32)}
  return {k: np.stack([f[k] for f in feats]) for k in feats[0]}


class GlueRecords(RecordWriter):
  """`create_finetuning_data --task=glue/<name>`: one record per example (see `convert_example`)."""

  default_max_seq_length = 512

  def __init__(self, options):
    super().__init__(options)
    if not options.input_dir and not options.input_file:
      raise ValueError("--input_dir (the GLUE root) is required for GLUE tasks.")
    self.spec = get_spec(options.task.split("/", 1)[1])

  def input_files(self, split: str) -> List[str]:
    return [self.options.input_file or task_file(self.spec, self.options.input_dir, split)]

  def cache_settings(self):
    # `empty_text_b`: records written before an empty / blank text_b packed as one segment (the reference's) had
    # `[CLS] A [SEP] [SEP]`; the key's new entry keeps such a cache from being reused.
    return {"skip_bad_rows": self.options.skip_bad_rows, "train_shuffle_seed": self.options.train_shuffle_seed,
            "empty_text_b": "one_segment"}

  def records(self, split: str, tokenizer):
    examples = read_examples(self.spec.name, self.options.input_dir or "", split,
                             skip_bad_rows=self.options.skip_bad_rows, path=self.options.input_file)
    examples = training_order(examples, split, self.options.train_shuffle_seed)
    records = (convert_example(e, self.spec, tokenizer, self.options.max_seq_length) for e in examples)
    return records, {"num_examples": len(examples), "num_labels": self.spec.num_labels,
                     "is_regression": self.spec.is_regression,
                     "labels": list(self.spec.labels) if self.spec.labels else None}


# -------------------------------------------------------------------------------------------------- raw inputs
def raw_writer(params, data_config, role: str):
  """The `GlueRecords` and split of a raw GLUE input (`tasks.raw_inputs`), None for records: a folder (GLUE root or
  task folder: the role's split file) or one `.tsv` (or `.tsv.gz`; read with the role's layout)."""
  raw_inputs.refuse_raw_lists(data_config.input_path, (".tsv", ".tsv.gz"), "a GLUE task")
  path = raw_inputs.single_path(data_config.input_path)
  folder = raw_inputs.is_dir(path)
  if not (folder or raw_inputs.ends_with(path, (".tsv", ".tsv.gz"))):
    return None
  skip = params.predict_skip_bad_rows if role == "predict" else params.skip_bad_rows
  options = RecordOptions(task=f"glue/{get_spec(params.task_name).name}", input_dir=path if folder else None,
                          input_file=None if folder else path, max_seq_length=data_config.seq_length,
                          skip_bad_rows=skip, **FILE_ORDER if role == "predict" else {})
  return GlueRecords(options), raw_inputs.split_of(role, params.predict_split)


# ----------------------------------------------------------------------------------------------------------- metrics
def compute_metrics(task: str, labels, predictions) -> Dict[str, float]:
  """Task metrics with the reference names (`eval_accuracy`, `matthew_corr`, `pearson`, `MSE`) plus F1/Spearman.

  STS-B's mean squared error is reported as `MSE`, the name of the reference's `metric_fn` (ALBERT
  classifier_utils: "pearson", "MSE", "eval_loss"), and also as `mse` (same value), the name earlier runs of this
  package wrote, so their result files, `best_checkpoint_metric` settings and scripts keep working.

  Args:
    task: GLUE task name.
    labels: label indices ([N] ints) or STS-B scores ([N] floats).
    predictions: predicted indices or STS-B scores, same shape.
  """
  spec = get_spec(task)
  if spec.is_regression:
    labels, predictions = np.asarray(labels, np.float64), np.asarray(predictions, np.float64)
    check_same_length(labels, predictions)
    mse = float(np.mean((predictions - labels) ** 2)) if labels.size else 0.0
    return {"pearson": pearson(predictions, labels), "spearman": spearman(predictions, labels), "MSE": mse,
            "mse": mse}
  out = {"eval_accuracy": accuracy(labels, predictions)}
  if spec.name == "cola":
    out["matthew_corr"] = matthews_corrcoef(labels, predictions)
  if spec.name in ("mrpc", "qqp"):
    out["f1"] = f1_score(labels, predictions)
    out["accuracy_and_f1"] = (out["f1"] + out["eval_accuracy"]) / 2
  return out


KEY_METRIC = {"cola": "matthew_corr", "sts-b": "pearson"}


def key_metric(task: str) -> str:
  """The metric the reference uses to pick the best checkpoint."""
  return KEY_METRIC.get(get_spec(task).name, "eval_accuracy")


# ------------------------------------------------------------------------------------------------------- submissions


def predictions_to_labels(task: str, outputs) -> List[object]:
  """Logits [N, C] → label strings; STS-B outputs [N] or [N, 1] → floats."""
  spec = get_spec(task)
  outputs = np.asarray(outputs)
  if spec.is_regression:
    return [float(v) for v in outputs.reshape(-1)]
  if outputs.ndim != 2 or outputs.shape[1] != spec.num_labels:
    raise ValueError(f"{spec.name}: expected logits [N, {spec.num_labels}], got shape {outputs.shape}.")
  return [spec.labels[i] for i in np.argmax(outputs, axis=-1)]


def write_submission(task: str, examples: Sequence[InputExample], outputs, output_dir: str) -> str:
  """Writes `<output_dir>/<TASK>.tsv` (`index<TAB>prediction`, GLUE server names) atomically; returns its path."""

  spec = get_spec(task)
  preds = predictions_to_labels(task, outputs)
  if len(preds) != len(examples):
    raise ValueError(f"{spec.name}: {len(preds)} predictions for {len(examples)} examples.")
  lines = ["index\tprediction"]
  for example, pred in zip(examples, preds):
    value = f"{pred:.3f}" if spec.is_regression else pred
    lines.append(f"{example.guid}\t{value}")
  path = os.path.join(output_dir, spec.submission_name)
  file_io.atomic_write_text(path, "\n".join(lines) + "\n")
  return path
