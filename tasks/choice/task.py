"""`text_multiple_choice`: multiple choice on the user's own files, any number of choices per row up to a cap.

Inputs: `task.train_data.input_path` / `task.validation_data.input_path` / `task.predict_data.input_path` name CSV /
TSV / JSONL files (or records made earlier) with the columns `task.context_column` (optional), `task.question_column`,
`task.choices_column` (a list of texts) and `task.label_column` (the answer's index or text); `tasks.choice.data`
reads them and caches the records as the other row-file tasks do (`tasks.row_task`).

Model: `AlbertMultipleChoice` (the RACE head: each choice's pooled output → [1, H] → one logit) over
`task.num_choices` choices. A row with fewer has padding choices, whose logits are set to -1e9 before the softmax
(`masked_logits`): the loss, `eval_accuracy` and the predictions see the row's own choices only, so a 3-choice row
scores the same among 5-choice rows as alone.

Prediction (`--mode=predict`): `<stem>.predictions.jsonl`, one line per row of the file: its file and line, the
predicted index and choice text, and the probabilities over the row's own choices.
"""

from __future__ import annotations

import json
import os
from typing import Any, Dict, List

import keras
import numpy as np
import tensorflow as tf

from official_albert import file_io
from official_albert.modeling.models import AlbertMultipleChoice
from official_albert.training import base_task
from official_albert.training.experiment_config import DataConfig
from tasks import row_files
from tasks.choice import data as choice_data
from tasks.choice.config import TextMultipleChoiceConfig
from tasks.row_task import RowFileTask
from tasks.text import data as text_data

PADDING_LOGIT = -1e9


def masked_logits(logits: tf.Tensor, choice_mask: tf.Tensor) -> tf.Tensor:
  """[B, C] float32 logits with the padding choices (mask 0) at -1e9: out of a softmax, never an argmax."""
  logits = tf.cast(logits, tf.float32)
  return tf.where(tf.cast(choice_mask, tf.bool), logits, tf.fill(tf.shape(logits), PADDING_LOGIT))


@base_task.register_task("text_multiple_choice", config_cls=TextMultipleChoiceConfig)
class TextMultipleChoiceTask(RowFileTask):
  """Multiple choice on rows of the user's files (see the module docstring)."""

  best_metric = "eval_accuracy"
  row_noun = "questions"
  overlap_fields = ("context", "question", "choices")  # (an evaluation question trained on: RowFileTask's check)

  # --------------------------------------------------------------------------------------------- inputs
  def columns(self) -> Dict[str, str]:
    p = self.params
    return {"context": p.context_column, "question": p.question_column, "choices": p.choices_column,
            "label": p.label_column}

  def read(self, data_config: DataConfig, role: str) -> List[choice_data.ChoiceExample]:
    p = self.params
    return [e for f in text_data.expand_paths(data_config.input_path)
            for e in choice_data.read_choice_rows(f, self.columns(), p.num_choices, role != "predict",
                                                  p.input_format, p.skip_bad_rows, p.label_format)]

  def record_path(self, data_config: DataConfig, role: str) -> str:
    """The cached records of `data_config`'s raw files (built now when the cache key does not match)."""
    p = self.params
    key = self.record_key(data_config, text_data.expand_paths(data_config.input_path))
    key.update(columns=self.columns(), num_choices=p.num_choices, labelled=role != "predict",
               label_format=p.label_format,
               max_qa_length=p.max_qa_length, input_format=p.input_format,
               skip_bad_rows=p.skip_bad_rows, record_shuffle_seed=p.record_shuffle_seed,
               train_order=self.order_seed(role) is not None)
    return self.cached_records(
        data_config, role, key, lambda: self.read(data_config, role),
        lambda examples, indices: choice_data.records(examples, indices, self.tokenizer, data_config.seq_length,
                                                      p.num_choices, p.max_qa_length, p.skip_bad_rows))

  def role_feature_spec(self, data_config: DataConfig, role: str) -> Dict[str, tf.io.FixedLenFeature]:
    shape = [self.params.num_choices, data_config.seq_length]
    spec = {k: tf.io.FixedLenFeature(shape, tf.int64) for k in choice_data.ENCODER_KEYS}
    spec["choice_mask"] = tf.io.FixedLenFeature([self.params.num_choices], tf.int64)
    spec["label_ids"] = tf.io.FixedLenFeature([], tf.int64)
    spec["example_index"] = tf.io.FixedLenFeature([], tf.int64)
    return spec

  def model_inputs(self, features: Dict[str, tf.Tensor]) -> Dict[str, tf.Tensor]:
    missing = [k for k in choice_data.ENCODER_KEYS if k not in features]
    if missing:
      raise KeyError(f"{self.name}: the input batch lacks {missing}; it has {sorted(features)}.")
    return {k: features[k] for k in choice_data.ENCODER_KEYS}

  # --------------------------------------------------------------------------------------------- model
  def build_model(self) -> keras.Model:
    p = self.params
    model = AlbertMultipleChoice(p.model.to_albert_config(), num_choices=p.num_choices,
                                 dropout_rate=p.classifier_dropout)
    seq = max(p.train_data.seq_length, 2)
    model({k: tf.zeros([1, p.num_choices, seq], tf.int32) for k in base_task.ENCODER_INPUT_KEYS}, training=False)
    return model

  # --------------------------------------------------------------------------------------------- loss
  def build_losses(self, labels: Any, model_outputs: Dict[str, tf.Tensor], aux_losses=None,
                   denominators=None) -> tf.Tensor:
    """Σ over this replica's valid rows of the cross-entropy over the row's own choices / the global batch's rows."""
    logits = masked_logits(model_outputs["logits"], labels["choice_mask"])
    per_row = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=tf.cast(labels["label_ids"], tf.int32),
                                                             logits=logits)
    return base_task.example_mean_loss(per_row, labels, aux_losses, denominators)

  # --------------------------------------------------------------------------------------------- evaluation
  def eval_outputs(self, features, labels, outputs) -> Dict[str, tf.Tensor]:
    return {"logits": masked_logits(outputs["logits"], features["choice_mask"]), "label_ids": labels["label_ids"]}

  def reduce_aggregated_logs(self, aggregated_logs, global_step=None) -> Dict[str, float]:
    del global_step
    if not aggregated_logs:
      return {}
    logits = np.concatenate(aggregated_logs["logits"]).astype(np.float64)
    labels = np.concatenate(aggregated_logs["label_ids"]).astype(np.int64)
    log_z = np.log(np.exp(logits - logits.max(1, keepdims=True)).sum(1)) + logits.max(1)
    loss = log_z - logits[np.arange(len(labels)), labels]
    return {"eval_accuracy": float(np.mean(np.argmax(logits, 1) == labels)), "eval_loss": float(np.mean(loss)),
            "num_examples": float(len(labels))}

  def reduced_metric_names(self) -> List[str]:
    return ["eval_accuracy", "eval_loss", "num_examples"]

  # --------------------------------------------------------------------------------------------- predict
  def predict_outputs(self, features, outputs) -> Dict[str, tf.Tensor]:
    return {"logits": masked_logits(outputs["logits"], features["choice_mask"]),
            "example_index": features["example_index"]}

  def write_prediction_files(self, aggregated_logs, output_dir: str) -> Dict[str, str]:
    """`<stem>.predictions.jsonl`: per row of the files (in their order) its file, line, `prediction` (the index),
    `choice` (the text) and `probabilities` over its own choices."""
    data = self.params.predict_data
    if not text_data.is_raw_input(data.input_path, self.params.input_format):
      raise ValueError(f"{self.name}: --mode=predict writes each answer beside its row, so task.predict_data."
                       f"input_path must name the raw files (got {data.input_path!r}).")
    examples = self.read(data, "predict")
    order = np.argsort(np.concatenate(aggregated_logs["example_index"]), kind="stable")
    logits = np.concatenate(aggregated_logs["logits"]).astype(np.float64)[order]
    if len(logits) != len(examples):
      raise ValueError(f"{len(logits)} predictions for {len(examples)} rows of {data.input_path}; the records are "
                       "stale — delete task.records_dir.")
    lines = []
    for example, row in zip(examples, logits):
      own = row[:len(example.choices)]
      probabilities = np.exp(own - own.max())
      probabilities /= probabilities.sum()
      best = int(np.argmax(own))
      lines.append(json.dumps({"file": example.path, "line": example.line, "prediction": best,
                               "choice": example.choices[best],
                               "probabilities": [round(float(x), 6) for x in probabilities]}, ensure_ascii=False))
    stem = row_files.file_stem(text_data.expand_paths(data.input_path)[0])
    path = os.path.join(output_dir, f"{stem}.predictions.jsonl")
    file_io.atomic_write_text(path, "".join(line + "\n" for line in lines))
    return {"predictions": path}
