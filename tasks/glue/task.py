"""GLUE fine-tuning: the task config, the classifier task over GLUE records or raw TSVs, submission files (§5.1).

The data side — processors, feature conversion, records, metrics, submission format — is `tasks/glue/data.py`
(Model Garden's `classifier_data_lib` beside its `sentence_prediction` task); the package (`tasks.glue`) exports the
public names of both.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Dict, List, Optional

import keras
import numpy as np
import tensorflow as tf

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

logger = logging.getLogger(__name__)


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
      '' = rows numbered 0..N-1 (the index of the standard GLUE test files).
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
    """The examples behind the predict records: from `predict_file`, or numbered 0..N-1 when it is unset."""
    p = self.params
    raw = self.raw_writer(p.predict_data, "predict")
    split, path = (raw[1], raw[0].input_files(raw[1])[0]) if raw else (p.predict_split, p.predict_file)
    if not path:
      logger.warning("task.predict_file is empty: the %s submission rows are numbered 0..%d in record order.",
                     self.spec.name, num_records - 1)
      return [InputExample(guid=str(i), text_a="") for i in range(num_records)]
    examples = read_examples(self.spec.name, "", split, skip_bad_rows=p.predict_skip_bad_rows, path=path)
    if len(examples) != num_records:
      raise ValueError(f"GLUE {self.spec.name}: {path} has {len(examples)} examples but "
                       f"task.predict_data.input_path {p.predict_data.input_path} has {num_records} records; "
                       "rebuild the records from this file.")
    return examples

  def write_prediction_files(self, aggregated_logs, output_dir: str) -> Dict[str, str]:
    """`<output_dir>/<TASK>.tsv` in the GLUE submission format (index, prediction)."""
    logits = np.concatenate(aggregated_logs["logits"], axis=0)
    examples = self._predict_examples(len(logits))
    return {"submission": write_submission(self.spec.name, examples, logits, output_dir)}
