"""`token_classification`: one tag per word (NER, POS, ...) with `AlbertTokenClassifier`.

Each word's tag sits on its first SentencePiece piece (`tasks.text.data.token_record`); the loss is the mean
cross-entropy over those positions of the whole global batch (the trainer sums `label_tokens` over replicas). Eval
reports `token_accuracy` and the conlleval / seqeval entity `entity_precision`, `entity_recall`, `entity_f1` (the
best-checkpoint metric) over whole sentences: a sentence longer than seq_length comes as several records (its
sub-sentences, `tasks.text.data.token_records`), which `aggregate_logs` collects with their `records_id` /
`sentence_id` / `sub_sentence_id` (records files evaluated together never merge: `tasks.text.sentence_ids`) and
`reduce_aggregated_logs` / `write_prediction_files` join back in order (`join_sub_sentences`), so every word is
scored and predicted, an entity cut between two sub-sentences included. The ids, not the order the outputs arrive
in, place each record (replicas and padded batches cannot shuffle sentences). With dynamic padding the label-side
features are cut to the logits' length here (the input pipeline cuts only the model inputs).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Dict, List, Optional, Sequence, Tuple

import keras
import numpy as np
import tensorflow as tf

from official_albert.training import base_task
from tasks.text import data as text_data
from tasks.text import metrics as text_metrics
from tasks.text import predictions as text_predictions
from tasks.text import sentence_ids
from tasks.text.task import TextTask
from tasks.text.task import TokenClassificationConfig

LABEL_TOKENS = "label_tokens"  # the loss denominator: labelled first pieces
# Where a record sits: its records build, its sentence, its place in it (-1: records made without them).
SENTENCE_KEYS = (sentence_ids.RECORDS_ID, "sentence_id", "sub_sentence_id")


def _cut(labels: Dict[str, tf.Tensor], key: str, logits: tf.Tensor) -> tf.Tensor:
  return labels[key][:, :tf.shape(logits)[1]]


def _token_weights(labels: Dict[str, tf.Tensor], label_ids: tf.Tensor) -> tf.Tensor:
  """[B, S] 1 at labelled first pieces of real examples, else 0."""
  valid = base_task.example_weights(labels, label_ids)
  return tf.cast(label_ids >= 0, tf.float32) * valid[:, None]


def _sentence_ids(inputs: Dict[str, tf.Tensor], like: tf.Tensor) -> Dict[str, tf.Tensor]:
  """[B] `SENTENCE_KEYS` of a batch (-1 where the records have none)."""
  missing = -tf.ones(tf.shape(like)[:1], tf.int32)
  return {k: tf.cast(inputs[k], tf.int32) if k in inputs else missing for k in SENTENCE_KEYS}


def join_sub_sentences(state: Dict[str, List[Any]], keys: Sequence[str]) -> Tuple[List[int], Dict[str, List[Any]]]:
  """(sentence ids, {key: per sentence, its sub-sentences' arrays joined}) of `aggregate_logs`' state.

  A sentence is its records build's (`records_id`, `tasks.text.sentence_ids`) and its `sentence_id` there: the
  sentence ids of two records files evaluated together both count from 0, and sentence k of each was joined into one.
  Sentences come in (`records_id`, `sentence_id`) order and their sub-sentences in `sub_sentence_id` order, whatever
  order the records were evaluated in. Records without sentence ids (-1: made before long sentences were split) are
  each a sentence of their own, after the others, in arrival order.

  Raises:
    ValueError: a sub-sentence met twice: records files without `records_id` (made before it) listed together, or
      records of the same examples listed twice, whose sentences cannot be told apart.
  """
  builds = state.get(sentence_ids.RECORDS_ID) or [-1] * len(state["sentence_id"])
  groups: Dict[Tuple[int, int, int], List[int]] = {}
  for i, (build, sentence) in enumerate(zip(builds, state["sentence_id"])):
    groups.setdefault((0, build, sentence) if sentence >= 0 else (1, -1, i), []).append(i)
  ids, joined = [], {k: [] for k in keys}
  for group in sorted(groups):
    members = sorted(groups[group], key=lambda i: state["sub_sentence_id"][i])
    subs = [state["sub_sentence_id"][i] for i in members]
    twice = [sub for sub in subs if subs.count(sub) > 1]
    if twice:
      raise ValueError(f"Tagging records: sub-sentence {twice[0]} of sentence {group[2]} (records_id {group[1]}) was "
                       f"met {subs.count(twice[0])} times: the evaluated records files hold sentences they do not tell "
                       "apart (records made before records_id, or the same examples' records listed twice). List the "
                       "raw CoNLL / JSONL files in input_path (their records are rebuilt with ids), or each records "
                       "file once.")
    ids.append(group[2] if group[0] == 0 else -1)
    for k in keys:
      joined[k].append(np.concatenate([state[k][i] for i in members]))
  return ids, joined


@base_task.register_task("token_classification", config_cls=TokenClassificationConfig)
class TokenClassificationTask(TextTask):
  """Word tagging from CoNLL or JSONL files (see the module docstring)."""

  label_kind = "tags"
  best_metric = "entity_f1"

  def read_options(self, with_labels: bool, labels=()) -> text_data.ReadOptions:
    """The text tasks' reading options with `task.conll_separator` (set, else labels.json's, else auto: `columns`; in
    the records' cache key through them)."""
    return dataclasses.replace(super().read_options(with_labels, labels),
                               conll_separator=self.columns()["conll_separator"])

  def feature_spec(self, seq_length: int):
    """The text records' features with `records_id` (-1 in records made before it: one such file still joins)."""
    return dict(super().feature_spec(seq_length), **{sentence_ids.RECORDS_ID: tf.io.FixedLenFeature([], tf.int64, -1)})

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
            "label_ids": _cut(labels, "label_ids", logits), **_sentence_ids(labels, logits)}

  def predict_outputs(self, features, outputs):
    logits = tf.cast(outputs["logits"], tf.float32)
    return {"pred_ids": tf.argmax(logits, axis=-1, output_type=tf.int32),
            "pred_scores": tf.reduce_max(tf.nn.softmax(logits, axis=-1), axis=-1),
            "word_starts": _cut(features, "word_starts", logits), **_sentence_ids(features, logits)}

  def aggregate_logs(self, state, step_outputs):
    """Per record, the tag ids at its first pieces (batches may differ in length, so no stacking) and its
    `SENTENCE_KEYS`, by which `join_sub_sentences` puts the sentences back together."""
    state = state or {"gold": [], "pred": [], "scores": [], **{k: [] for k in SENTENCE_KEYS}}
    count = len(step_outputs["pred_ids"])
    for k in SENTENCE_KEYS:
      state[k].extend(int(v) for v in step_outputs.get(k, np.full([count], -1)))
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
    """Entity and token scores over whole sentences (their sub-sentences joined)."""
    del global_step
    if not aggregated_logs:
      return {}
    tags = np.asarray(self.labels)
    _, joined = join_sub_sentences(aggregated_logs, ("gold", "pred"))
    gold = [list(tags[g]) for g in joined["gold"]]
    pred = [list(tags[p]) for p in joined["pred"]]
    return text_metrics.entity_scores(gold, pred)

  def reduced_metric_names(self) -> List[str]:
    """`text_metrics.entity_scores`' keys."""
    return ["entity_precision", "entity_recall", "entity_f1", "token_accuracy"]

  def word_predictions(self, example: text_data.TextExample, pred_ids, scores):
    """Tags and scores per word of `example` from its sub-sentences' joined predictions (every word has one)."""
    pieces = text_data.word_pieces(self.tokenizer, [example])[0]
    placed = text_data.placed_words(pieces, self.params.predict_data.seq_length, text_data.unk_id(self.tokenizer))
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
    ids, joined = join_sub_sentences(aggregated_logs, ("pred", "scores"))
    if ids != list(range(len(examples))):
      raise ValueError(f"{len(ids)} predicted sentences for {len(examples)} sentences of "
                       f"{self.params.predict_data.input_path}; the records are stale — delete task.records_dir.")
    rows = []
    for example, pred_ids, scores in zip(examples, joined["pred"], joined["scores"]):
      tags, probs = self.word_predictions(example, pred_ids, scores)
      rows.append({"id": example.guid, "tokens": example.tokens, "tags": tags, "scores": probs})
    return text_predictions.write_rows(examples, rows, output_dir, self.columns()["input_format"],
                                       self.params.predict_output_format)
