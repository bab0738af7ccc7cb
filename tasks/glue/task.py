"""GLUE fine-tuning: the task config, the classifier task over GLUE records or raw TSVs, submission files (§5.1).

The data side — processors, feature conversion, records, metrics, submission format — is `tasks/glue/data.py`
(Model Garden's `classifier_data_lib` beside its `sentence_prediction` task); the package (`tasks.glue`) exports the
public names of both.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Dict, List, Optional, Sequence, Tuple

import keras
import numpy as np
import tensorflow as tf

from official_albert import file_io
from official_albert import model_directory
from official_albert.data import records as records_lib
from official_albert.modeling import early_exit
from official_albert.modeling.models import AlbertClassifier
from official_albert.training import base_task
from official_albert.training.experiment_config import ConfigError
from official_albert.training.experiment_config import DataConfig
from tasks import raw_inputs
from tasks.classification import ClassificationTask
from tasks.classification import FineTuningTaskConfig
from tasks.glue import data as glue_data
from tasks.glue.data import compute_metrics
from tasks.glue.data import get_spec
from tasks.glue.data import GlueTaskSpec
from tasks.glue.data import InputExample
from tasks.glue.data import key_metric
from tasks.glue.data import read_examples
from tasks.glue.data import write_submission
from tasks.glue.files import GlueDataError
from tasks.records import check_record_order

logger = logging.getLogger(__name__)

RECORD_SUFFIX, META_SUFFIX = ".tf_record", ".meta.json"  # (create_finetuning_data's names: records and their meta)


@dataclasses.dataclass
class GlueTaskConfig(FineTuningTaskConfig):
  """A GLUE fine-tuning run.

  Attributes:
    task_name: GLUE task (see `TASKS`); sets num_labels, regression and the best-checkpoint metric.
    classifier_dropout, exit_heads: the head's settings (`FineTuningTaskConfig`).
    train_data / validation_data: TFRecords from `data_prep.create_finetuning_data --task=glue/<name>`
      (`input_path`, `seq_length` = its max_seq_length), or the raw data — a GLUE folder (train / dev file) or a
      `.tsv` — turned into cached records (`tasks.raw_inputs`, with spm_model_file, do_lower_case, tokenizer_mode,
      records_dir); `input_path="dummy"` gives random records.
    predict_data: `--mode=predict` records (create_finetuning_data `--splits=test`), in file order, or the raw
      folder / TSV (its `predict_split` file or layout; the submission ids then come from it).
    predict_file: the TSV those records were made from (test layout); its index column names the submission rows.
      '' = the file the records' .meta.json names (`records_source`: create_finetuning_data's input), else rows
      numbered 0..N-1 (the index of the standard GLUE test files).
    predict_skip_bad_rows: as create_finetuning_data's `--skip_bad_rows` for that file (None = task default).
    skip_bad_rows: the same for raw train / validation data.
    predict_split: the split (layout) of the predict data: "test" (index column, no label) or "dev".
  """
  task_name: str = "mrpc"
  predict_file: str = ""
  predict_skip_bad_rows: Optional[bool] = None
  skip_bad_rows: Optional[bool] = None
  predict_split: str = "test"

  def validate(self) -> None:
    super().validate()
    try:
      spec = get_spec(self.task_name)
    except ValueError as e:
      raise ConfigError(f"task.task_name: {e}") from None
    if self.predict_split not in spec.layouts:
      raise ConfigError(f"task.predict_split={self.predict_split!r}: {spec.name} has {sorted(spec.layouts)}.")


def head_order(task: str, names: Sequence[str], source: str) -> Optional[List[int]]:
  """For each label of `task` (its order: records, metrics and submissions use it), the classifier output that
  `names` — a checkpoint's label names in output order (labels.json, an HF config's id2label) — gives it; None when
  the outputs are already in the task's order, or `names` names nothing (HF's LABEL_i defaults; STS-B's score).

  Why: a classifier converted from Hugging Face keeps its own label order (MNLI fine-tunes usually have entailment,
  neutral, contradiction; the reference contradiction, entailment, neutral): read in the task's order, every
  prediction would get another class's name. Names compare without case and surrounding spaces (ENTAILMENT).

  Raises:
    GlueDataError: `names` is another label set (or names one twice); the message names both lists and `source`.
  """
  spec = get_spec(task)
  if spec.is_regression or not names or list(names) == [f"LABEL_{i}" for i in range(len(names))]:
    return None
  theirs = [str(name).strip().lower() for name in names]
  ours = [label.lower() for label in spec.labels]
  if sorted(theirs) != sorted(ours) and all(label.isdigit() for label in ours) and len(theirs) == len(ours):
    # The binary tasks' labels are 0 / 1: a converted model's names for them (negative/positive, not_duplicate/
    # duplicate, ...) say nothing about which is 0, and HF's GLUE fine-tunes put them in the dataset's order.
    logger.warning("%s names the outputs %s; GLUE %s's labels are %s: output i is read as label %s[i] (the index "
                   "order HF's GLUE fine-tunes use).", source, list(names), spec.name, list(spec.labels),
                   list(spec.labels))
    return None
  if sorted(theirs) != sorted(ours):
    raise GlueDataError(
        f"{source} names the classifier's outputs {list(names)}, but GLUE {spec.name} has the labels "
        f"{list(spec.labels)}: the outputs cannot be matched to the task's labels. Name each output with the task's "
        f"label in output order in {source} (or delete that file when the outputs are already in the order "
        f"{list(spec.labels)}), or evaluate this model with the task it was trained for.")
  order = [theirs.index(label) for label in ours]
  return None if order == list(range(len(ours))) else order


def records_source(input_path: str, task: str) -> Optional[Tuple[str, str, Optional[bool]]]:
  """(file, split, skip_bad_rows) that the one record file `input_path` was written from, as its `.meta.json` records
  (create_finetuning_data and the raw-input cache key it by their input files); None when it has no meta, is not
  `task`'s or was made from several files, or that file is gone or changed since (its size and SHA-256
  differ from the meta's: another sample of the same length would pair these records' predictions
  with its ids; a relative path read from another working folder is another file too).

  Why: predict records of one's own test TSV hold no ids; its index column (QQP's `id`: any numbers, in any order)
  names the submission rows, and numbering them 0..N-1 is right for the standard GLUE files only."""
  path = raw_inputs.single_path(input_path) or ""
  if not path.endswith(RECORD_SUFFIX) or not file_io.exists(path[:-len(RECORD_SUFFIX)] + META_SUFFIX):
    return None
  try:
    key = file_io.read_json(path[:-len(RECORD_SUFFIX)] + META_SUFFIX).get("cache_key") or {}
  except ValueError:  # (an unreadable meta: the records are read without it, as before)
    return None
  inputs = key.get("inputs") or []
  if key.get("task") != task or len(inputs) != 1 or not file_io.exists(str(inputs[0].get("path", ""))):
    return None
  source = str(inputs[0]["path"])
  if not records_lib.unchanged_input(inputs[0]):
    logger.warning("%s changed since the predict records %s were written from it (size or content): its "
                   "index column is not used for them; set task.predict_file to the TSV they were made from, or "
                   "rebuild them from this one.", source, path)
    return None
  return source, str(key.get("split", "test")), key.get("skip_bad_rows")


def glue_feature_spec(seq_length: int, is_regression: bool):
  spec = {k: tf.io.FixedLenFeature([seq_length], tf.int64) for k in base_task.ENCODER_INPUT_KEYS}
  spec["label_ids"] = tf.io.FixedLenFeature([], tf.float32 if is_regression else tf.int64)
  return spec


def _dummy_dataset(spec: GlueTaskSpec, data: DataConfig, batch_size: int, seed: int, vocab_size: int):
  rng = np.random.default_rng(seed)
  n, s = 4 * batch_size, data.seq_length
  labels = (rng.uniform(0, 5, n).astype(np.float32) if spec.is_regression
            else rng.integers(0, spec.num_labels, n).astype(np.int32))
  features = {"input_word_ids": rng.integers(5, vocab_size, (n, s)).astype(np.int32),
              "input_mask": np.ones((n, s), np.int32), "input_type_ids": np.zeros((n, s), np.int32),
              "label_ids": labels}
  ds = tf.data.Dataset.from_tensor_slices(features)
  if data.is_training:
    ds = ds.repeat()
  return ds.batch(batch_size, drop_remainder=data.drop_remainder)


@base_task.register_task("glue", config_cls=GlueTaskConfig)
class GlueTask(raw_inputs.RawRecordsMixin, ClassificationTask):
  """Sentence(-pair) classification / STS-B regression with `AlbertClassifier` (reference §5.1).

  Eval metrics (whole dev set, in `reduce_aggregated_logs`): `compute_metrics` names — `eval_accuracy`,
  `matthew_corr` (CoLA), `f1` (MRPC/QQP), `pearson`/`spearman`/`MSE` (STS-B; `mse`, the name of earlier runs, is
  kept as an alias) — plus the Keras `eval_loss`.
  """

  def __init__(self, params: GlueTaskConfig, logging_dir: Optional[str] = None):
    super().__init__(params, logging_dir)
    self.spec = get_spec(params.task_name)
    self.best_metric = key_metric(self.spec.name)

  def canonical_task_name(self, name: str) -> str:
    """The one spelling of a GLUE task name (`sst2` and `SST-2` are `sst-2`): what `best_checkpoint.json` records
    the best was chosen on (`evaluation.chosen_on`). A ValueError for an unknown name."""
    return get_spec(name).name

  def initialize(self, model: keras.Model) -> None:
    """The warm start, and `save_assets`: written when training starts fresh (eval and predict leave the directory's
    record alone)."""
    super().initialize(model)
    self.save_assets()

  def save_assets(self) -> None:
    """`labels.json` (the task's labels in output order, as the text tasks write it) into model_dir, so that
    `pipelines.classify` and the exports name a GLUE model's outputs (not LABEL_i) and a later eval / predict knows
    its order (chief only; STS-B's score has no names). A labels.json already there must name the task's labels in
    its order: another order is another classifier's (a converted model's), which this run's checkpoints would
    contradict."""
    if not self.logging_dir or self.spec.is_regression:
      return
    ours = list(self.spec.labels)
    saved = model_directory.read_label_file(self.logging_dir)
    if saved is None:
      file_io.makedirs(self.logging_dir)
      model_directory.write_label_file(self.logging_dir, model_directory.LabelFile(ours, task=f"glue/{self.spec.name}"))
      return
    if [str(name).strip().lower() for name in saved.labels] != [label.lower() for label in ours]:
      labels_file = model_directory.path(self.logging_dir, model_directory.LABELS_FILE)
      raise ValueError(f"{labels_file} names the outputs {saved.labels}, but GLUE {self.spec.name} trains the labels "
                       f"{ours} in that order: the checkpoints this run writes there would contradict it. Train in a "
                       f"new --model_dir (task.init_checkpoint={self.logging_dir} starts from its encoder).")

  def after_restore(self, model: keras.Model, prefix: str) -> None:
    """Puts the classifier restored from checkpoint `prefix` into the task's label order when the checkpoint's
    folder names its outputs in another order (labels.json, id2label: `head_order`), permuting the rows of every
    head's `output_weights` and `output_bias` (the exit heads' too), logged. Eval and predict call it
    (`Evaluator`); a converted HF MNLI model otherwise scored and submitted permuted classes without a word."""
    if self.spec.is_regression:
      return
    folder = model_directory.checkpoint_folder(prefix)
    labels_file = model_directory.path(folder, model_directory.LABELS_FILE)
    source = labels_file if file_io.exists(labels_file) else f"{folder} (config.json id2label / labels.txt)"
    names = model_directory.label_names(folder, self.spec.num_labels)
    order = head_order(self.spec.name, names, source)
    if order is None:
      return
    for head in [model.classifier] + early_exit.exit_heads(model):
      head.output_weights.assign(tf.gather(head.output_weights, order))
      head.output_bias.assign(tf.gather(head.output_bias, order))
    logger.warning("%s names the classifier's outputs %s; GLUE %s reads them as %s: the head restored from %s is "
                   "permuted into the task's order (outputs %s).", source, names, self.spec.name,
                   list(self.spec.labels), prefix, order)

  def build_model(self) -> keras.Model:
    model = AlbertClassifier(self.params.model.to_albert_config(), num_labels=self.spec.num_labels,
                             dropout_rate=self.params.classifier_dropout, exit_heads=self.params.exit_heads)
    seq = max(self.params.train_data.seq_length, 2)
    model({k: tf.zeros([1, seq], tf.int32) for k in base_task.ENCODER_INPUT_KEYS}, training=False)
    return model

  @property
  def is_regression(self) -> bool:
    return self.spec.is_regression

  def feature_spec(self, seq_length: int):
    return glue_feature_spec(seq_length, self.spec.is_regression)

  def build_inputs(self, data_config: DataConfig, input_context: Optional[tf.distribute.InputContext] = None,
                   role: Optional[str] = None) -> tf.data.Dataset:
    if data_config.input_path.strip() == "dummy":
      batch_size = data_config.global_batch_size
      if input_context is not None:
        batch_size = input_context.get_per_replica_batch_size(batch_size)
      pipeline = input_context.input_pipeline_id if input_context is not None else 0
      return _dummy_dataset(self.spec, data_config, batch_size, (data_config.seed or 0) + pipeline,
                            self.params.model.vocab_size)
    return super().build_inputs(self.raw_to_records(data_config, role), input_context, role)

  def raw_writer(self, data_config: DataConfig, role: str):
    return glue_data.raw_writer(self.params, data_config, role)

  def compute_metrics(self, logits, labels, extras) -> Dict[str, float]:
    del extras
    preds = logits.reshape(-1) if self.spec.is_regression else np.argmax(logits, axis=-1)
    return compute_metrics(self.spec.name, labels, preds)

  def compute_metric_names(self) -> List[str]:
    """`glue_data.compute_metrics`' keys for `task.task_name` (its per-task metrics)."""
    if self.spec.is_regression:
      return ["pearson", "spearman", "MSE", "mse"]
    return (["eval_accuracy"] + (["matthew_corr"] if self.spec.name == "cola" else [])
            + (["f1", "accuracy_and_f1"] if self.spec.name in ("mrpc", "qqp") else []))

  def _predict_examples(self, num_records: int) -> List[InputExample]:
    """The examples behind the predict records: from `predict_file`, else the file the records' `.meta.json` says
    they were written from (`records_source`), or numbered 0..N-1 when neither names one."""
    p = self.params
    raw = self.raw_writer(p.predict_data, "predict")
    split, path = (raw[1], raw[0].input_files(raw[1])[0]) if raw else (p.predict_split, p.predict_file)
    skip = p.predict_skip_bad_rows
    if not raw:
      check_record_order(raw_inputs.single_path(p.predict_data.input_path) or "", f"GLUE {self.spec.name} predict")
    if not path:
      source = records_source(p.predict_data.input_path, f"glue/{self.spec.name}")
      examples = self._source_examples(source)
      if examples is not None and len(examples) == num_records:
        logger.info("task.predict_file is empty: the %s submission rows take the index column of %s, the %s file "
                    "the predict records were written from (their .meta.json).", self.spec.name, source[0], source[1])
        return examples
      logger.warning("task.predict_file is empty%s: the %s submission rows are numbered 0..%d in record order (the "
                     "index of the standard GLUE test files; set task.predict_file to the TSV the records were made "
                     "from for its own).", f" and {source[0]} is not the records' file" if source else "",
                     self.spec.name, num_records - 1)
      return [InputExample(guid=str(i), text_a="") for i in range(num_records)]
    examples = read_examples(self.spec.name, "", split, skip_bad_rows=skip, path=path)
    if len(examples) != num_records:
      raise ValueError(f"GLUE {self.spec.name}: {path} has {len(examples)} examples but "
                       f"task.predict_data.input_path {p.predict_data.input_path} has {num_records} records; "
                       "rebuild the records from this file.")
    return examples

  def _source_examples(self, source) -> Optional[List[InputExample]]:
    """The examples of `records_source`'s file, None without one or when it no longer reads (it was edited)."""
    if source is None:
      return None
    try:
      return read_examples(self.spec.name, "", source[1], skip_bad_rows=source[2], path=source[0])
    except GlueDataError as e:
      logger.warning("%s", e)
      return None

  def write_prediction_files(self, aggregated_logs, output_dir: str) -> Dict[str, str]:
    """`<output_dir>/<TASK>.tsv` in the GLUE submission format (index, prediction)."""
    logits = np.concatenate(aggregated_logs["logits"], axis=0)
    examples = self._predict_examples(len(logits))
    return {"submission": write_submission(self.spec.name, examples, logits, output_dir)}
