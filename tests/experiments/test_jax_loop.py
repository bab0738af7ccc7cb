"""experiments.jax_loop trains as the train binary: its schedule is `AlbertLearningRateSchedule` and its optimizer
the binary's AdamW (no bias correction, LayerNorm and biases not decayed, global-norm clip 1.0), on Keras' JAX
backend with TensorFlow absent (tests/experiments/jax_loop_harness.py, in its own process: KERAS_BACKEND is read at
Keras' first import) against the TensorFlow originals here, on the same weights and gradients.
"""

import importlib.util
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

from experiments import jax_loop
from official_albert.training import optimization
from official_albert.training.lr_schedule import AlbertLearningRateSchedule
from tests.conftest import CHILD_PYTHONPATH
from tests.experiments import jax_loop_harness as harness

REPO_ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def jax_run(tmp_path_factory):
  """The harness's arrays (learning rates, weights after each step) from a JAX process without TensorFlow."""
  if importlib.util.find_spec("jax") is None:
    pytest.skip("jax is not installed (requirements-jax.txt)")
  out = tmp_path_factory.mktemp("jax_loop") / "jax.npz"
  env = dict(os.environ, KERAS_BACKEND="jax", PYTHONPATH=CHILD_PYTHONPATH, JAX_PLATFORMS="cpu", OMP_NUM_THREADS="1")
  result = subprocess.run([sys.executable, "-m", "tests.experiments.jax_loop_harness", str(out)], cwd=REPO_ROOT,
                          env=env, capture_output=True, text=True, timeout=600)
  assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-5000:]
  return np.load(out)


def test_schedule_is_the_train_binarys(jax_run):
  reference = AlbertLearningRateSchedule(harness.PEAK, harness.TOTAL_STEPS, num_warmup_steps=harness.WARMUP)
  expected = np.asarray([float(reference(s)) for s in harness.SCHEDULE_STEPS], np.float32)
  assert expected[0] == 0.0 and expected[harness.SCHEDULE_STEPS.index(harness.WARMUP)] == pytest.approx(
      harness.PEAK * (1 - harness.WARMUP / harness.TOTAL_STEPS))
  np.testing.assert_array_equal(jax_run["learning_rates"], expected)
  here = jax_loop.warmup_linear_decay(harness.PEAK, harness.TOTAL_STEPS)  # the same Keras ops on this backend
  np.testing.assert_array_equal([float(here(s)) for s in harness.SCHEDULE_STEPS], expected)


def test_optimizer_steps_are_the_train_binarys_adamw(jax_run):
  """Four steps (the first at lr 0, then warmup and decay) of clipped gradients: every weight within 1e-6."""
  net = harness.model()
  variables = net.trainable_variables
  optimizer = optimization.create_optimizer("adamw", harness.PEAK, num_train_steps=harness.TOTAL_STEPS,
                                            num_warmup_steps=harness.WARMUP)
  optimizer.build(variables)
  decayed = sorted(path for path, decay, _ in optimizer.variable_decisions() if decay)
  assert decayed == ["dense/kernel", "output/kernel"]  # LayerNorm/gamma, LayerNorm/beta and the biases are not
  for i, grads in enumerate(harness.gradients(variables)):
    optimizer.apply(grads, variables)
    for variable in variables:
      np.testing.assert_allclose(jax_run[f"step{i + 1}/{variable.path}"], variable.numpy(), rtol=0, atol=1e-6,
                                 err_msg=f"step {i + 1} {variable.path}")


def test_the_restated_constants_are_the_train_binarys():
  optimizer = optimization.create_optimizer("adamw", 1e-3)
  assert jax_loop.EXCLUDE_FROM_WEIGHT_DECAY == optimization.DEFAULT_EXCLUDE_FROM_WEIGHT_DECAY
  assert (jax_loop.WEIGHT_DECAY_RATE, jax_loop.EPSILON, jax_loop.BETA_1, jax_loop.BETA_2, jax_loop.CLIP_NORM) == (
      optimizer.weight_decay_rate, optimizer.epsilon, optimizer.beta_1, optimizer.beta_2, optimizer.global_clipnorm)


def test_a_non_finite_step_is_not_applied_and_the_run_stops_naming_it(jax_run):
  """As the train binary: an inf gradient left weights, slots and step count as they were (it once made every weight
  NaN while the run went on to report its accuracy), and `run` raises at the next evaluation naming step 3."""
  assert bool(jax_run["skipped_step_unchanged"])
  assert np.isnan(jax_run["skipped_step_loss"])
  assert str(jax_run["run_error"]).startswith("step 3: the loss or a gradient is not finite"), jax_run["run_error"]
