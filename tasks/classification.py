"""The base of the classification-style tasks: GLUE (`glue/`), RACE (`race/`) and any labelled-text task.

They share one shape (reference §5.1, §5.3): the pooled output goes through dropout and one linear layer to
`logits`; training minimises the mean cross-entropy (or, for a one-output regression head, the mean squared error);
training and evaluation report `cls_accuracy` (Keras, streaming) and evaluation `eval_loss`; the task's reference
metrics (MCC, F1, Pearson, per-level accuracy, ...) are computed once over the whole evaluation set from the
collected logits and labels. A subclass provides the model, its record layout and its metrics:

    class MyTask(ClassificationTask):
      def build_model(self): ...                       # logits [B, num_labels] (or [B, C] for multiple choice)
      def feature_spec(self, seq_length): ...          # tf.io features of the TFRecords, labels included
      def compute_metrics(self, logits, labels, extras): ...   # {reference metric name: value}
      def compute_metric_names(self): ...              # its keys under this config, known before an evaluation
"""

from __future__ import annotations

import dataclasses
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import keras
import numpy as np
import tensorflow as tf

from official_albert.data import input_pipeline
from official_albert.training import base_task
from official_albert.training.experiment_config import DataConfig
from official_albert.training.experiment_config import eval_data_config
from tasks.raw_inputs import RawInputTaskConfig


@dataclasses.dataclass
class FineTuningTaskConfig(RawInputTaskConfig):
  """What the GLUE, RACE and text configs share: the head's settings and the three splits (at the reference's
  defaults; the text tasks' config sets shorter sequences).

  Attributes:
    classifier_dropout: dropout on the pooled output (0.1, hard-coded in the reference).
    exit_heads: a head per iteration of the shared block, trained with PABEE's weighted loss, for early exit at
      inference (`modeling.early_exit`).
    train_data / validation_data / predict_data: records or raw data (each task's config says which); training
      defaults to the reference's batch 32 at sequence length 512.
  """
  classifier_dropout: float = 0.1
  exit_heads: bool = False
  train_data: DataConfig = dataclasses.field(default_factory=lambda: DataConfig(global_batch_size=32,
                                                                                seq_length=512))
  validation_data: DataConfig = dataclasses.field(default_factory=eval_data_config)
  predict_data: DataConfig = dataclasses.field(default_factory=eval_data_config)


def exit_heads_loss(exit_logits: tf.Tensor, mean_loss) -> tf.Tensor:
  """PABEE's loss over every iteration's head: Σ_i (i+1)·L_i / Σ_i (i+1), i = 0 … L-1 (`exit_logits` [B, L, K];
  `mean_loss(logits)` is the task's loss of one head). Deeper heads weigh more: they answer the harder rows."""
  layers = exit_logits.shape[1]
  total = tf.add_n([float(i + 1) * mean_loss(exit_logits[:, i]) for i in range(layers)])
  return total / float(layers * (layers + 1) // 2)


def example_losses(logits: tf.Tensor, label_ids: tf.Tensor, is_regression: bool) -> tf.Tensor:
  """[B] cross-entropy of `logits` [B, K] against int labels, or squared error of a [B, 1] score."""
  logits = tf.cast(logits, tf.float32)
  if is_regression:
    return tf.square(tf.reshape(logits, [-1]) - tf.cast(tf.reshape(label_ids, [-1]), tf.float32))
  return tf.nn.sparse_softmax_cross_entropy_with_logits(labels=tf.cast(tf.reshape(label_ids, [-1]), tf.int32),
                                                        logits=logits)


class ClassificationTask(base_task.Task):
  """Logits from the pooled output; cross-entropy or MSE; whole-dataset reference metrics.

  Attributes:
    extra_label_keys: label-side features (beyond `label_ids`) collected at evaluation and handed to
      `compute_metrics` (e.g. RACE's `level_ids`).
  """

  extra_label_keys: Tuple[str, ...] = ()

  @property
  def is_regression(self) -> bool:
    return False

  def feature_spec(self, seq_length: int) -> Dict[str, tf.io.FixedLenFeature]:
    """The TFRecord features (model inputs and labels) at `seq_length`."""
    raise NotImplementedError

  def decode(self, records: tf.Tensor, seq_length: int) -> Dict[str, tf.Tensor]:
    """A batch of serialized records → int32/float32 features; override to reshape (e.g. [B, choices, S])."""
    return input_pipeline.decode_record(records, self.feature_spec(seq_length))

  def compute_metrics(self, logits: np.ndarray, labels: np.ndarray,
                      extras: Mapping[str, np.ndarray]) -> Dict[str, float]:
    """The task's reference metrics over the whole evaluation set."""
    raise NotImplementedError

  def compute_metric_names(self) -> Optional[List[str]]:
    """The keys `compute_metrics` returns under this config (None: unknown before an evaluation), so that
    `trainer.best_checkpoint_metric` is checked at start-up (`Task.eval_metric_names`)."""
    return None

  # --------------------------------------------------------------------------------------------- inputs
  def build_inputs(self, data_config: DataConfig, input_context: Optional[tf.distribute.InputContext] = None,
                   role: Optional[str] = None) -> tf.data.Dataset:
    del role  # records: every role reads them alike
    if not data_config.input_path:
      raise ValueError(f"{self.name or type(self).__name__}: empty input_path (set task.train_data.input_path / "
                       "task.validation_data.input_path to the create_finetuning_data TFRecords).")
    batch_size = data_config.global_batch_size
    if input_context is not None:
      batch_size = input_context.get_per_replica_batch_size(batch_size)
    return input_pipeline.make_dataset(
        data_config.input_path, lambda records: self.decode(records, data_config.seq_length), batch_size,
        data_config.is_training, input_context=input_context, seed=data_config.seed,
        shuffle_buffer_size=max(data_config.shuffle_buffer_size, 1), drop_remainder=data_config.drop_remainder,
        **data_config.padding_options())

  # --------------------------------------------------------------------------------------------- loss, metrics
  def example_losses(self, logits: tf.Tensor, label_ids: tf.Tensor) -> tf.Tensor:
    """Per-example losses [B]; the hook a task with other label kinds (e.g. multi-label text) overrides."""
    return example_losses(logits, label_ids, self.is_regression)

  def build_losses(self, labels, model_outputs, aux_losses=None, denominators=None) -> tf.Tensor:
    """Mean per-example loss over the (global) batch; with exit heads (`exit_logits`) PABEE's weighted mean of every
    iteration's loss (`exit_heads_loss`)."""
    denominator = None if denominators is None else denominators[base_task.EXAMPLES]

    def mean_loss(logits):
      losses = self.example_losses(logits, labels["label_ids"])
      return base_task.weighted_mean(losses, base_task.example_weights(labels, losses), denominator)

    if "exit_logits" in model_outputs:
      loss = exit_heads_loss(model_outputs["exit_logits"], mean_loss)
    else:
      loss = mean_loss(model_outputs["logits"])
    if aux_losses:
      loss = loss + tf.add_n([tf.cast(l, tf.float32) for l in aux_losses])
    return loss

  def build_metrics(self, training: bool = True) -> List[keras.metrics.Metric]:
    metrics = [] if training else [keras.metrics.Mean(name="eval_loss")]
    if not self.is_regression:
      metrics.append(keras.metrics.SparseCategoricalAccuracy(name="cls_accuracy"))
    return metrics

  def process_metrics(self, metrics: Sequence[keras.metrics.Metric], labels: Any,
                      model_outputs: Dict[str, tf.Tensor]) -> None:
    """`cls_accuracy` (argmax of `logits` vs `label_ids`) and `eval_loss` (the mean per-example loss)."""
    logits = tf.cast(model_outputs["logits"], tf.float32)
    valid = base_task.example_weights(labels, logits)
    for metric in metrics:
      if metric.name == "cls_accuracy":
        metric.update_state(tf.reshape(labels["label_ids"], [-1]), logits, sample_weight=valid)
      elif metric.name == "eval_loss":
        metric.update_state(self.example_losses(logits, labels["label_ids"]), sample_weight=valid)

  def eval_outputs(self, features, labels, outputs):
    del features
    out = {"logits": tf.cast(outputs["logits"], tf.float32), "label_ids": labels["label_ids"]}
    out.update({k: labels[k] for k in self.extra_label_keys})
    return out

  def reduce_aggregated_logs(self, aggregated_logs, global_step=None) -> Dict[str, float]:
    del global_step
    if not aggregated_logs:
      return {}
    logits = np.concatenate(aggregated_logs["logits"], axis=0)
    labels = np.concatenate(aggregated_logs["label_ids"], axis=0)
    extras = {k: np.concatenate(aggregated_logs[k], axis=0) for k in self.extra_label_keys}
    return self.compute_metrics(logits, labels, extras)

  def reduced_metric_names(self) -> Optional[List[str]]:
    """`compute_metric_names()`; None when `compute_metrics` is overridden below it (its names would be stale)."""
    if not base_task.stated_with(type(self), "compute_metric_names", "compute_metrics"):
      return None
    return self.compute_metric_names()

  def predict_outputs(self, features, outputs):
    del features
    return {"logits": tf.cast(outputs["logits"], tf.float32)}
