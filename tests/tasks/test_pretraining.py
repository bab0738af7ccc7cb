"""The MLM + SOP pretraining task: losses and metrics against NumPy (reference §1.5, §1.6, §4.3), inputs, gradients."""

import numpy as np
import pytest
import tensorflow as tf

from official_albert.training import base_task
from official_albert.training.experiment_config import ModelConfig
from official_albert.training.experiment_config import TaskConfig
from tasks.pretraining import MLM_WEIGHT_EPSILON
from tasks.pretraining import pretraining_losses
from tasks.pretraining import PretrainingDataConfig
from tasks.pretraining import PretrainingTask
from tasks.pretraining import PretrainingTaskConfig

REFERENCE_METRICS = {"masked_lm_accuracy", "masked_lm_loss", "sentence_order_accuracy", "sentence_order_loss", "loss"}


def _log_softmax(x):
  x = x - x.max(-1, keepdims=True)
  return x - np.log(np.exp(x).sum(-1, keepdims=True))


def _batch(seed=0, b=3, p=5, v=11):
  rng = np.random.default_rng(seed)
  outputs = {"mlm_logits": rng.normal(size=(b, p, v)).astype(np.float32),
             "sop_logits": rng.normal(size=(b, 2)).astype(np.float32)}
  weights = np.ones((b, p), np.float32)
  weights[0, 3:] = 0.0  # padded prediction slots
  weights[2, 1:] = 0.0
  labels = {"masked_lm_ids": rng.integers(0, v, size=(b, p)).astype(np.int32), "masked_lm_weights": weights,
            "next_sentence_labels": rng.integers(0, 2, size=(b, 1)).astype(np.int32)}
  return outputs, labels


def _numpy_losses(outputs, labels):
  log_probs = _log_softmax(outputs["mlm_logits"].astype(np.float64))
  ids, w = labels["masked_lm_ids"], labels["masked_lm_weights"].astype(np.float64)
  nll = -np.take_along_axis(log_probs, ids[..., None], -1)[..., 0]
  mlm = (w * nll).sum() / (w.sum() + 1e-5)
  sop_lp = _log_softmax(outputs["sop_logits"].astype(np.float64))
  sop = -np.take_along_axis(sop_lp, labels["next_sentence_labels"].reshape(-1, 1), -1).mean()
  return mlm, sop, nll


def test_losses_match_the_reference_formula():
  outputs, labels = _batch()
  mlm, sop, _ = _numpy_losses(outputs, labels)
  losses = pretraining_losses({k: tf.constant(v) for k, v in outputs.items()},
                              {k: tf.constant(v) for k, v in labels.items()})
  assert MLM_WEIGHT_EPSILON == 1e-5
  np.testing.assert_allclose(losses["masked_lm_loss"].numpy(), mlm, rtol=1e-5)
  np.testing.assert_allclose(losses["sentence_order_loss"].numpy(), sop, rtol=1e-5)
  np.testing.assert_allclose(losses["loss"].numpy(), mlm + sop, rtol=1e-5)


def test_sentence_loss_weight_scales_the_sentence_loss_only():
  """Table 5's "None" row (experiments.projects.ablations): weight 0 trains the masked LM alone; the sentence loss is
  still reported, and the chance-level watch leaves the untrained sentence head alone."""
  import math

  from official_albert.training.hyperparams import ConfigError
  outputs, labels = _batch()
  mlm, sop, _ = _numpy_losses(outputs, labels)
  outs = {k: tf.constant(v) for k, v in outputs.items()}
  labs = {k: tf.constant(v) for k, v in labels.items()}
  for weight in (0.0, 0.5, 1.0):
    losses = pretraining_losses(outs, labs, sentence_loss_weight=weight)
    np.testing.assert_allclose(losses["loss"].numpy(), mlm + weight * sop, rtol=1e-5)
    np.testing.assert_allclose(losses["sentence_order_loss"].numpy(), sop, rtol=1e-5)
    task = PretrainingTask(PretrainingTaskConfig(sentence_loss_weight=weight))
    np.testing.assert_allclose(float(task.build_losses(labs, outs)), mlm + weight * sop, rtol=1e-5)
    assert task.chance_losses() == ({"sentence_order_loss": math.log(2.0)} if weight else {})
  with pytest.raises(ConfigError, match="sentence_loss_weight"):
    PretrainingTaskConfig(sentence_loss_weight=-1.0).validate()


def test_padded_prediction_slots_do_not_affect_loss_or_metrics():
  outputs, labels = _batch()
  changed_outputs = {k: v.copy() for k, v in outputs.items()}
  changed_labels = {k: v.copy() for k, v in labels.items()}
  pad = labels["masked_lm_weights"] == 0
  noise = np.random.default_rng(1).normal(size=changed_outputs["mlm_logits"][pad].shape)
  changed_outputs["mlm_logits"][pad] = 50.0 * noise
  changed_labels["masked_lm_ids"][pad] = 0
  task = PretrainingTask(PretrainingTaskConfig())
  results = []
  for outs, labs in ((outputs, labels), (changed_outputs, changed_labels)):
    outs = {k: tf.constant(v) for k, v in outs.items()}
    labs = {k: tf.constant(v) for k, v in labs.items()}
    metrics = task.build_metrics()
    task.process_metrics(metrics, labs, outs)
    results.append((float(task.build_losses(labs, outs)), {m.name: float(m.result()) for m in metrics}))
  assert results[0][0] == pytest.approx(results[1][0], rel=1e-6)
  assert results[0][1] == pytest.approx(results[1][1], rel=1e-6)


def test_metrics_have_reference_names_and_values():
  outputs, labels = _batch()
  task = PretrainingTask(PretrainingTaskConfig())
  metrics = task.build_metrics(training=False)
  assert {m.name for m in metrics} == REFERENCE_METRICS
  task.process_metrics(metrics, {k: tf.constant(v) for k, v in labels.items()},
                       {k: tf.constant(v) for k, v in outputs.items()})
  got = {m.name: float(m.result()) for m in metrics}
  mlm, sop, nll = _numpy_losses(outputs, labels)
  w = labels["masked_lm_weights"]
  correct = outputs["mlm_logits"].argmax(-1) == labels["masked_lm_ids"]
  assert got["masked_lm_accuracy"] == pytest.approx((w * correct).sum() / w.sum(), rel=1e-6)
  assert got["masked_lm_loss"] == pytest.approx((w * nll).sum() / w.sum(), rel=1e-5)  # weighted mean
  sop_correct = outputs["sop_logits"].argmax(-1) == labels["next_sentence_labels"].reshape(-1)
  assert got["sentence_order_accuracy"] == pytest.approx(sop_correct.mean())
  assert got["sentence_order_loss"] == pytest.approx(sop, rel=1e-5)
  assert got["loss"] == pytest.approx(mlm + sop, rel=1e-5)


def test_eval_loss_weights_the_sentence_loss_as_training_does():
  """The eval `loss` (what best_checkpoint_metric=loss ranks) is masked_lm_loss + sentence_loss_weight ×
  sentence_order_loss, as the training loss: the ablation's "None" row (weight 0) reports the masked-LM loss alone."""
  outputs, labels = _batch()
  mlm, sop, _ = _numpy_losses(outputs, labels)
  outs = {k: tf.constant(v) for k, v in outputs.items()}
  labs = {k: tf.constant(v) for k, v in labels.items()}
  for weight in (0.0, 0.5, 1.0):
    task = PretrainingTask(PretrainingTaskConfig(sentence_loss_weight=weight))
    metrics = task.build_metrics(training=False)
    task.process_metrics(metrics, labs, outs)
    got = {m.name: float(m.result()) for m in metrics}
    assert got["loss"] == pytest.approx(mlm + weight * sop, rel=1e-5), weight
    assert got["loss"] == pytest.approx(float(task.build_losses(labs, outs)), rel=1e-5), weight


TINY_MODEL = dict(vocab_size=97, embedding_size=8, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                  intermediate_size=32, max_position_embeddings=16)


def _tiny_task(input_path="dummy"):
  data = PretrainingDataConfig(input_path=input_path, global_batch_size=4, seq_length=16, max_predictions_per_seq=3,
                               dummy_vocab_size=97, seed=3)
  return PretrainingTask(PretrainingTaskConfig(model=ModelConfig().replace(**TINY_MODEL), train_data=data,
                                               validation_data=data.replace(is_training=False)))


def test_dummy_inputs_and_every_variable_gets_a_gradient():
  task = _tiny_task()
  batch = next(iter(task.build_inputs(task.params.train_data)))
  assert set(batch) == {"input_word_ids", "input_mask", "input_type_ids", "masked_lm_positions", "masked_lm_ids",
                        "masked_lm_weights", "next_sentence_labels"}
  assert batch["input_word_ids"].shape == (4, 16) and batch["masked_lm_positions"].shape == (4, 3)
  model = task.build_model()
  metrics = task.build_metrics()
  loss, grads = task.compute_gradients(batch, model, None, metrics)
  assert np.isfinite(float(loss))
  assert len(grads) == len(model.trainable_variables)
  assert all(g is not None and float(tf.reduce_sum(tf.abs(tf.convert_to_tensor(g)))) > 0 for g in grads)
  assert float(metrics[-1].result()) == pytest.approx(float(loss), rel=1e-5)


def test_input_context_divides_the_batch_and_empty_path_raises():
  task = _tiny_task()
  context = tf.distribute.InputContext(num_input_pipelines=2, input_pipeline_id=1, num_replicas_in_sync=2)
  batch = next(iter(task.build_inputs(task.params.train_data, context)))
  assert batch["input_word_ids"].shape[0] == 2
  with pytest.raises(ValueError, match="empty input_path"):
    _tiny_task("").build_inputs(_tiny_task("").params.train_data.replace(input_path=""))


def test_registered_and_config_bound():
  assert base_task.get_task("pretraining") is PretrainingTask
  assert isinstance(base_task.create_task(PretrainingTaskConfig()), PretrainingTask)
  with pytest.raises(TypeError, match="PretrainingTaskConfig"):
    PretrainingTask(TaskConfig())
