"""The training loop's logged numbers (audit s32_observe findings 1-4): the learning rate a step applied, TensorBoard
scalars that cover the whole summary interval, a throughput without the first step's one-time costs, and the
mixed_float16 steps the loss scaler skipped.

Tiny runs of the shared test config (H 32, 2 layers, seeded dummy data), a few steps each.
"""

import glob
import os

import keras
import pytest
import tensorflow as tf
from tensorflow.core.util import event_pb2

from official_albert.training import loop_metrics
from official_albert.training import train_lib
from tests.official_albert.training.test_train_lib import tiny_params


def _train(model_dir, trainer_overrides):
  """Trains a tiny Trainer; returns (trainer, result, [(step, logs)] from on_loop_end)."""
  overrides = {"trainer": dict({"validation_interval": 1000, "eval_at_start": False}, **trainer_overrides)}
  trainer = train_lib.Trainer(tiny_params(**overrides), str(model_dir))
  history = []
  result = trainer.train(on_loop_end=lambda step, logs: history.append((step, dict(logs))))
  return trainer, result, history


def _scalars(model_dir, tag):
  """{step: value} of the `train/` TensorBoard scalar `tag`."""
  out = {}
  for path in glob.glob(os.path.join(str(model_dir), "train", "events.*")):
    for record in tf.data.TFRecordDataset(path):
      event = event_pb2.Event.FromString(record.numpy())
      for value in event.summary.value:
        if value.tag == tag:
          out[event.step] = float(tf.make_ndarray(value.tensor))
  return out


@pytest.mark.slow
def test_summary_scalar_covers_every_step_since_the_previous_write(tmp_path):
  """Checkpoints every 3 steps cut the loops at 3 and 4; the scalars written at step 4 cover steps 1-4, not the
  step-4 loop alone. The per-step losses come from the same run one step per loop (the same steps, bit for bit).

  That run also shows the logged learning rate: the one the step applied. Keras evaluates the schedule at
  `iterations` before adding 1, so step 1 applied lr(0) = 0 (warmup 4, lr 0.01: lr(n) = 0.0025·n); read after the
  step, as it was, the log said lr(1) = 0.0025, the next step's rate, and 0 at the last step of every run.
  """
  _, _, per_step = _train(tmp_path / "per_step", {"train_steps": 4, "steps_per_loop": 1, "checkpoint_interval": 4,
                                                  "summary_interval": 1, "warmup_steps": 4, "learning_rate": 0.01})
  assert [step for step, _ in per_step] == [1, 2, 3, 4]
  assert [logs["learning_rate"] for _, logs in per_step] == pytest.approx([0.0, 0.0025, 0.005, 0.0075], abs=1e-9)
  losses = [logs["loss"] for _, logs in per_step]
  norms = [logs["global_norm"] for _, logs in per_step]
  model_dir = tmp_path / "cut"
  _, _, history = _train(model_dir, {"train_steps": 4, "steps_per_loop": 4, "checkpoint_interval": 3,
                                     "summary_interval": 4, "warmup_steps": 4, "learning_rate": 0.01})
  assert [step for step, _ in history] == [3, 4]  # the checkpoint cut the interval in two loops
  assert _scalars(model_dir, "loss") == {4: pytest.approx(sum(losses) / 4, rel=1e-5)}
  assert _scalars(model_dir, "global_norm") == {4: pytest.approx(sum(norms) / 4, rel=1e-5)}
  assert history[1][1]["loss"] == pytest.approx(sum(losses) / 4, rel=1e-5)  # the log line and history say the same
  assert _scalars(model_dir, "learning_rate") == {4: pytest.approx(0.0075)}  # the peak, which step 4 applied


@pytest.mark.slow
def test_the_first_step_is_timed_apart_from_the_throughput(tmp_path, monkeypatch):
  """The first step of a Trainer (compile, input start-up, skip-resume reading) runs as a call of its own; the
  throughput counts the other steps over their time only, and the first step's time is logged apart."""
  calls = []
  real = train_lib.Trainer._call_loop

  def spy(self, num_steps):
    result = real(self, num_steps)
    calls.append(result)
    return result

  monkeypatch.setattr(train_lib.Trainer, "_call_loop", spy)
  trainer, result, history = _train(tmp_path, {"train_steps": 6, "steps_per_loop": 3, "checkpoint_interval": 3,
                                               "summary_interval": 3})
  assert [c.steps for c in calls] == [1, 2, 3]  # the first loop of 3 steps as 1 + 2; the same 6 steps in all
  batch = trainer.params.task.train_data.global_batch_size
  first_window, second_window = history[0][1], history[1][1]
  assert first_window["first_step_seconds"] == calls[0].seconds
  assert first_window["examples_per_second"] == pytest.approx(2 * batch / calls[1].seconds)
  assert "first_step_seconds" not in second_window
  assert second_window["examples_per_second"] == pytest.approx(3 * batch / calls[2].seconds)
  assert trainer.first_step_end is not None and trainer.first_step_end[1] == 1  # the ETA's clock starts there


def test_a_window_of_the_first_step_only_has_no_throughput():
  window = loop_metrics.Window()
  window.add(loop_metrics.LoopResult(steps=1, applied=1, loss_sum=2.0, norm_sum=0.5, learning_rate=0.0,
                                     seconds=30.0), first_step=True)
  logs = window.logs({}, global_batch_size=8)
  assert "examples_per_second" not in logs and logs["first_step_seconds"] == 30.0
  window.add(loop_metrics.LoopResult(steps=4, applied=4, loss_sum=4.0, norm_sum=2.0, learning_rate=0.1,
                                     seconds=2.0))
  logs = window.logs({}, global_batch_size=8)
  assert logs["examples_per_second"] == 16.0 and logs["loss"] == 6.0 / 5 and logs["learning_rate"] == 0.1
  window.clear()
  with pytest.raises(ValueError, match="holds no step"):
    window.logs({}, global_batch_size=8)
  assert loop_metrics.eta_seconds(10, 20, now=15.0, clock_start=5.0, clock_step=5) == 20.0


@pytest.mark.slow
def test_steps_the_loss_scaler_skipped_are_counted_and_not_in_the_norm(tmp_path):
  """mixed_float16: the first attempted step's gradient overflows and the scaler skips it (the step count, and the
  previous norm, 0, stay as they were). It is logged as skipped_steps and not averaged into global_norm."""
  params = tiny_params(trainer={"train_steps": 2, "steps_per_loop": 3, "checkpoint_interval": 2,
                                "summary_interval": 2, "validation_interval": 1000, "eval_at_start": False},
                       runtime={"mixed_precision_dtype": "mixed_float16"})
  trainer = train_lib.Trainer(params, str(tmp_path))
  optimizer = trainer.optimizer
  assert isinstance(optimizer, keras.optimizers.LossScaleOptimizer)
  with trainer.strategy.scope():
    attempts = tf.Variable(0, trainable=False)
  real_apply = optimizer.apply

  def apply(grads, variables=None):
    attempts.assign_add(1)
    factor = tf.where(attempts == 1, float("inf"), 1.0)  # the first attempt overflows
    return real_apply([g * tf.cast(factor, g.dtype) for g in grads], variables)

  optimizer.apply = apply
  norms = []  # the optimizer's norm after each loop: both loops end on an applied step
  result = trainer.train(on_loop_end=lambda step, logs: norms.append(float(optimizer.inner_optimizer.global_norm)))
  assert int(attempts.numpy()) == 3 and result["global_step"] == 2
  logs = result["train_logs"]  # the window of steps 1-2: three attempts, one skipped
  assert logs["skipped_steps"] == 1.0
  assert len(norms) == 2 and all(n > 0 for n in norms)
  assert logs["global_norm"] == pytest.approx(sum(norms) / 2, rel=1e-5)  # the skipped step's stale 0 is not in it
