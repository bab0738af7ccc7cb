"""The early exit under Keras' JAX and PyTorch backends exits where TensorFlow does, with TensorFlow's logits."""

import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

from tests.conftest import CHILD_PYTHONPATH
from tests.official_albert.modeling import early_exit_harness

REPO_ROOT = pathlib.Path(__file__).resolve().parents[3]
pytestmark = [pytest.mark.slow, pytest.mark.timing]  # timing: worker processes, bounded by their exit


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
  import tensorflow as tf
  directory = tmp_path_factory.mktemp("early_exit_backends")
  tf.keras.utils.set_random_seed(5)
  built = early_exit_harness.models()
  arrays = {}
  for name, (model, _) in built.items():
    for i, w in enumerate(model.weights):
      value = w.numpy()
      # Heads 50x their init: answers change between iterations, so rows leave at different iterations.
      arrays[f"{name}/{i}"] = value * 50.0 if "output_weights" in w.path else value
    model.set_weights([arrays[f"{name}/{i}"] for i in range(len(model.weights))])
  np.savez(directory / "weights.npz", **arrays)
  return directory, early_exit_harness.run(built)


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["jax", "torch"])
def test_early_exit_matches_tensorflow(reference, backend):
  import importlib.util
  if importlib.util.find_spec(backend) is None:
    pytest.skip(f"{backend} is not installed")
  directory, expected = reference
  env = dict(os.environ, KERAS_BACKEND=backend, PYTHONPATH=CHILD_PYTHONPATH, TF_CPP_MIN_LOG_LEVEL="2",
             JAX_PLATFORMS="cpu", OMP_NUM_THREADS="1")
  done = subprocess.run([sys.executable, "-m", "tests.official_albert.modeling.early_exit_harness",
                         f"--dir={directory}"], env=env, cwd=REPO_ROOT, stdout=subprocess.PIPE,
                        stderr=subprocess.STDOUT, text=True, timeout=600)
  assert done.returncode == 0, done.stdout[-4000:]
  got = np.load(directory / f"{backend}.npz")
  assert set(got.files) == set(expected)
  for key, value in expected.items():
    if key.endswith("/exit"):
      np.testing.assert_array_equal(got[key], value, err_msg=key)
    else:
      np.testing.assert_allclose(got[key], value, rtol=1e-4, atol=1e-4, err_msg=key)
  assert len(set(expected["classifier/patience_1/exit"])) >= 2  # the compaction had something to do
