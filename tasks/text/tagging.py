"""`token_classification`: one tag per word (NER, POS, ...) with `AlbertTokenClassifier`.

Each word's tag sits on its first SentencePiece piece (`tasks.text.data.token_record`); the loss is the mean
cross-entropy over those positions of the whole global batch (the trainer sums `label_tokens` over replicas). Eval
reports `token_accuracy` and the conlleval / seqeval entity `entity_precision`, `entity_recall`, `entity_f1` (the
best-checkpoint metric) over the words that fit in seq_length. With dynamic padding the label-side features are
cut to the logits' length here (the input pipeline cuts only the model inputs).
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional

import keras
import numpy as np
import tensorflow as tf

from official_albert.training import base_task
from tasks.text import data as text_data
from tasks.text import metrics as text_metrics
from tasks.text import predictions as text_predictions
from tasks.text.task import TextTask
from tasks.text.task import TokenClassificationConfig

LABEL_TOKENS = "label_tokens"  # the loss denominator: labelled first pieces


def _cut(labels: Dict[str, tf.Tensor], key: str, logits: tf.Tensor) -> tf.Tensor:
  return labels[key][:, :tf.shape(logits)[1]]


def _token_weights(labels: Dict[str, tf.Tensor], label_ids: tf.Tensor) -> tf.Tensor:
  """[B, S] 1 at labelled first pieces of real examples, else 0."""
  valid = base_task.example_weights(labels, label_ids)
  return tf.cast(label_ids >= 0, tf.float32) * valid[:, None]


@base_task.register_task("token_classification", config_cls=TokenClassificationConfig)
class TokenClassificationTask(TextTask):
  """Word tagging from CoNLL or JSONL files (see the module docstring)."""

  label_kind = "tags"
  best_metric = "entity_f1"

  def _token_losses(self, labels, logits):
    label_ids = _cut(labels, "label_ids", logits)
    ce = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=tf.maximum(label_ids, 0),
                                                        logits=tf.cast(logits, tf.float32))
    return ce, _token_weights(labels, label_ids)

  def loss_denominators(self, labels: Any) -> Dict[str, tf.Tensor]:
    # Positions past a trimmed batch's length are all IGNORE_LABEL, so the uncut labels give the same count.
    return {LABEL_TOKENS: tf.reduce_sum(_token_weights(labels, labels["label_ids"]))}

  def build_losses(self, labels, model_outputs, aux_losses=None, denominators=None) -> tf.Tensor:
    ce, weights = self._token_losses(labels, model_outputs["logits"])
    count = tf.reduce_sum(weights) if denominators is None else denominators[LABEL_TOKENS]
    loss = tf.math.divide_no_nan(tf.reduce_sum(ce * weights), tf.cast(count, tf.float32))
    if aux_losses:
      loss = loss + tf.add_n([tf.cast(a, tf.float32) for a in aux_losses])
    return loss

  def build_metrics(self, training: bool = True) -> List[keras.metrics.Metric]:
    metrics = [] if training else [keras.metrics.Mean(name="eval_loss")]
    return metrics + [keras.metrics.SparseCategoricalAccuracy(name="token_accuracy")]

  def process_metrics(self, metrics, labels, model_outputs) -> None:
    logits = tf.cast(model_outputs["logits"], tf.float32)
    ce, weights = self._token_losses(labels, logits)
    for metric in metrics:
      if metric.name == "eval_loss":
        metric.update_state(ce, sample_weight=weights)
      elif metric.name == "token_accuracy":
        metric.update_state(tf.maximum(_cut(labels, "label_ids", logits), 0), logits, sample_weight=weights)

  def eval_outputs(self, features, labels, outputs):
    del features
    logits = outputs["logits"]
    return {"pred_ids": tf.argmax(logits, axis=-1, output_type=tf.int32),
            "label_ids": _cut(labels, "label_ids", logits)}

  def predict_outputs(self, features, outputs):
    logits = tf.cast(outputs["logits"], tf.float32)
    return {"pred_ids": tf.argmax(logits, axis=-1, output_type=tf.int32),
            "pred_scores": tf.reduce_max(tf.nn.softmax(logits, axis=-1), axis=-1),
            "word_starts": _cut(features, "word_starts", logits)}

  def aggregate_logs(self, state, step_outputs):
    """Per example, the tag ids at its first pieces (batches may differ in length, so no stacking)."""
    state = state or {"gold": [], "pred": [], "scores": []}
    if "label_ids" in step_outputs:
      for gold, pred in zip(step_outputs["label_ids"], step_outputs["pred_ids"]):
        keep = gold >= 0
        state["gold"].append(gold[keep])
        state["pred"].append(pred[keep])
    else:
      for starts, pred, score in zip(step_outputs["word_starts"], step_outputs["pred_ids"],
                                     step_outputs["pred_scores"]):
        keep = starts > 0
        state["pred"].append(pred[keep])
        state["scores"].append(score[keep])
    return state

  def reduce_aggregated_logs(self, aggregated_logs, global_step=None) -> Dict[str, float]:
    del global_step
    if not aggregated_logs:
      return {}
    tags = np.asarray(self.labels)
    gold = [list(tags[g]) for g in aggregated_logs["gold"]]
    pred = [list(tags[p]) for p in aggregated_logs["pred"]]
    return text_metrics.entity_scores(gold, pred)

  def reduced_metric_names(self) -> List[str]:
    """`text_metrics.entity_scores`' keys."""
    return ["entity_precision", "entity_recall", "entity_f1", "token_accuracy"]

  def word_predictions(self, example: text_data.TextExample, pred_ids, scores):
    """Tags and scores per word of `example` (None for words without a first piece in the record)."""
    pieces = text_data.word_pieces(self.tokenizer, [example])[0]
    _, first = text_data.align_words(pieces, self.params.predict_data.seq_length)
    placed = [i for i, position in enumerate(first) if position is not None]
    if len(placed) != len(pred_ids):
      raise ValueError(f"{example.path}:{example.line}: {len(pred_ids)} predicted tags for {len(placed)} words; the "
                       "records are stale — delete task.records_dir.")
    tags: List[Optional[str]] = [None] * len(example.tokens)
    probs: List[Optional[float]] = [None] * len(example.tokens)
    for i, tag_id, score in zip(placed, pred_ids, scores):
      tags[i], probs[i] = self.labels[int(tag_id)], round(float(score), 6)
    return tags, probs

  def write_prediction_files(self, aggregated_logs, output_dir: str) -> Dict[str, str]:
    examples = self.predict_examples()
    preds = aggregated_logs["pred"]
    if len(examples) != len(preds):
      raise ValueError(f"{len(preds)} predicted sentences for {len(examples)} sentences of "
                       f"{self.params.predict_data.input_path}; the records are stale — delete task.records_dir.")
    rows = []
    for example, pred_ids, scores in zip(examples, preds, aggregated_logs["scores"]):
      tags, probs = self.word_predictions(example, pred_ids, scores)
      rows.append({"id": example.guid, "tokens": example.tokens, "tags": tags, "scores": probs})
    return text_predictions.write_rows(examples, rows, output_dir, self.columns()["input_format"],
                                       self.params.predict_output_format)
