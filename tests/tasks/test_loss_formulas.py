"""The fine-tuning losses against an independent NumPy computation of the reference formulas.

Reference §5.1 (GLUE: softmax cross-entropy, mean over the batch; STS-B: squeezed logits, mean squared error), §5.2
(SQuAD v1: (CE(start) + CE(end)) / 2; v2: 0.5·(CE_start + CE_end) + 0.5·sigmoid-CE(is_impossible, cls_logits), each
term a batch mean), §5.3 (RACE: softmax cross-entropy over the 4 choices). Before, the task tests only asserted
that the loss was finite or fell; a wrong formula (sum instead of mean, a missing 1/2, start and end positions
swapped, the BCE sign or weight) passed. Every case also checks the padding weights (`_valid`) of the last eval
batch and the global-batch denominator the trainer passes under a distribution strategy.
"""

import numpy as np
import pytest
import tensorflow as tf

from official_albert.training import base_task
from tasks import glue
from tasks import race
from tasks.squad import task as squad

RNG = np.random.RandomState(12)


def _log_softmax(x):
  x = np.asarray(x, np.float64)
  shifted = x - x.max(-1, keepdims=True)
  return shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))


def _nll(logits, labels):
  """-log softmax(logits)[label], per row, in float64."""
  return -np.take_along_axis(_log_softmax(logits), np.asarray(labels)[:, None], -1)[:, 0]


def _sigmoid_ce(logits, labels):
  p = 1.0 / (1.0 + np.exp(-np.asarray(logits, np.float64)))
  return -(labels * np.log(p) + (1 - labels) * np.log(1 - p))


def _check(task, labels, outputs, per_example):
  """build_losses = mean of `per_example`; with `_valid` weights, their weighted mean; with a global denominator,
  the weighted sum divided by it."""
  loss = float(task.build_losses(labels, outputs))
  assert loss == pytest.approx(per_example.mean(), rel=1e-5)
  valid = np.array([1, 1, 0, 1, 0, 1][:len(per_example)], np.float32)
  weighted = float(task.build_losses({**labels, base_task.VALID_KEY: valid}, outputs))
  assert weighted == pytest.approx((per_example * valid).sum() / valid.sum(), rel=1e-5)
  global_batch = float(task.build_losses({**labels, base_task.VALID_KEY: valid}, outputs,
                                         denominators={base_task.EXAMPLES: tf.constant(10.0)}))
  assert global_batch == pytest.approx((per_example * valid).sum() / 10.0, rel=1e-5)
  return loss


def test_glue_classification_loss_is_mean_softmax_cross_entropy():
  task = glue.GlueTask(glue.GlueTaskConfig(task_name="mnli"))
  logits = RNG.normal(0, 2, (6, 3)).astype(np.float32)
  labels = np.array([0, 2, 1, 1, 0, 2], np.int32)
  _check(task, {"label_ids": tf.constant(labels)}, {"logits": tf.constant(logits)}, _nll(logits, labels))
  # The eval loss that is reported (eval_loss) is the same quantity, over the valid examples.
  metrics = task.build_metrics(training=False)
  task.process_metrics(metrics, {"label_ids": tf.constant(labels)}, {"logits": tf.constant(logits)})
  eval_loss = {m.name: float(m.result()) for m in metrics}["eval_loss"]
  assert eval_loss == pytest.approx(_nll(logits, labels).mean(), rel=1e-5)


def test_glue_regression_loss_is_mean_squared_error():
  task = glue.GlueTask(glue.GlueTaskConfig(task_name="sts-b"))
  assert task.is_regression
  scores = RNG.normal(2.5, 1.5, (6, 1)).astype(np.float32)
  labels = RNG.uniform(0, 5, 6).astype(np.float32)
  per_example = (scores[:, 0].astype(np.float64) - labels) ** 2
  _check(task, {"label_ids": tf.constant(labels)}, {"logits": tf.constant(scores)}, per_example)


def test_race_loss_is_cross_entropy_over_the_choices():
  task = race.RaceTask(race.RaceTaskConfig())
  logits = RNG.normal(0, 2, (6, 4)).astype(np.float32)  # [B, 4 choices]
  labels = np.array([3, 0, 1, 2, 2, 0], np.int32)
  _check(task, {"label_ids": tf.constant(labels), "level_ids": tf.zeros([6], tf.int32)},
         {"logits": tf.constant(logits)}, _nll(logits, labels))


def _positions(seq):
  start = np.array([3, 0, 7, 5, 1, 9], np.int32)
  end = np.array([4, 0, 9, 8, 2, 9], np.int32)  # differs from start in most rows: a start/end swap shows
  assert start.max() < seq and end.max() < seq
  return start, end


def test_squad_v1_loss_is_half_the_sum_of_start_and_end_cross_entropy():
  task = squad.SquadTask(squad.SquadTaskConfig(version_2_with_negative=False))
  seq = 11
  start_logits = RNG.normal(0, 2, (6, seq)).astype(np.float32)
  end_logits = RNG.normal(0, 2, (6, seq)).astype(np.float32)
  start, end = _positions(seq)
  per_example = (_nll(start_logits, start) + _nll(end_logits, end)) / 2
  labels = {"start_positions": tf.constant(start), "end_positions": tf.constant(end),
            "is_impossible": tf.zeros([6], tf.int32)}
  _check(task, labels, {"start_logits": tf.constant(start_logits), "end_logits": tf.constant(end_logits)},
         per_example)


def test_squad_v2_loss_adds_half_the_answer_class_cross_entropy():
  task = squad.SquadTask(squad.SquadTaskConfig(version_2_with_negative=True))
  seq = 11
  # The v2 head outputs log-probabilities (p_mask-masked log-softmax); the loss reads them as they are.
  start_log_probs = _log_softmax(RNG.normal(0, 2, (6, seq))).astype(np.float32)
  end_log_probs = _log_softmax(RNG.normal(0, 2, (6, seq))).astype(np.float32)
  cls_logits = RNG.normal(0, 2, 6).astype(np.float32)
  start, end = _positions(seq)
  impossible = np.array([0, 1, 0, 0, 1, 0], np.int32)
  rows = np.arange(6)
  span = -(start_log_probs[rows, start].astype(np.float64) + end_log_probs[rows, end]) / 2
  per_example = span + 0.5 * _sigmoid_ce(cls_logits, impossible)
  labels = {"start_positions": tf.constant(start), "end_positions": tf.constant(end),
            "is_impossible": tf.constant(impossible)}
  outputs = {"start_log_probs": tf.constant(start_log_probs), "end_log_probs": tf.constant(end_log_probs),
             "cls_logits": tf.constant(cls_logits)}
  loss = _check(task, labels, outputs, per_example)
  # The reference's form: mean start CE, mean end CE, mean BCE, combined as (s + e)/2 + bce/2.
  reference = (-start_log_probs[rows, start].mean() - end_log_probs[rows, end].mean()) / 2 + 0.5 * _sigmoid_ce(
      cls_logits, impossible).mean()
  assert loss == pytest.approx(reference, rel=1e-5)
