"""`global_dtype_policy`: the policy holds inside the block and the previous one is back afterwards, raise or not."""

import keras
import pytest

from official_albert import precision


def test_policy_is_set_inside_and_restored_even_when_the_block_raises():
  before = keras.config.dtype_policy().name
  with pytest.raises(RuntimeError, match="boom"):
    with precision.global_dtype_policy("mixed_bfloat16"):
      assert keras.config.dtype_policy().name == "mixed_bfloat16"
      assert keras.layers.Dense(2).compute_dtype == "bfloat16"  # what layers built in the block get
      raise RuntimeError("boom")
  assert keras.config.dtype_policy().name == before
  assert keras.layers.Dense(2).compute_dtype == "float32"


def test_policy_for_dtype_maps_the_shorthands_and_names_the_accepted_ones():
  assert precision.policy_for_dtype("bfloat16") == "mixed_bfloat16"
  assert precision.policy_for_dtype("float32") == "float32"
  with pytest.raises(ValueError, match=r"dtype='float16' is not one of \('float32', 'bfloat16'\)"):
    precision.policy_for_dtype("float16")


def test_frozen_weight_kernels_variable_is_read_as_tensorflow_reads_it():
  name = precision.FROZEN_WEIGHTS_ENV
  assert name == "TF_ONEDNN_ASSUME_FROZEN_WEIGHTS"
  for value, on in (("1", True), ("true", True), (" TRUE ", True), ("0", False), ("false", False), ("", False)):
    assert precision.frozen_weight_kernels_enabled({name: value}) is on, value
  assert precision.frozen_weight_kernels_enabled({}) is False


_STALE_PROBE = """
import numpy as np, tensorflow as tf
w = tf.Variable(np.ones((16, 32), np.float32))
b = tf.Variable(np.zeros(32, np.float32))
x = tf.constant(np.ones((4, 16), np.float32))
f = tf.function(lambda: tf.nn.gelu(tf.matmul(x, w) + b, approximate=True))  # one fused oneDNN MatMul kernel
before = f().numpy()
w.assign(2 * w)
print("RESULT", "changed" if not np.allclose(before, f().numpy()) else "stale")
"""


@pytest.mark.parametrize("value,want", [("0", "changed"), ("1", "stale")])
def test_frozen_weight_kernels_keep_the_first_weights_which_is_why_training_refuses_them(value, want):
  # The danger `check_weights_may_change` guards against, shown on TF itself: with the variable on, a weight update
  # does not reach the fused kernel. If TF ever refreshes its cache, this fails and the guard can be relaxed.
  import os
  import subprocess
  import sys
  env = {**os.environ, precision.FROZEN_WEIGHTS_ENV: value, "TF_CPP_MIN_LOG_LEVEL": "3", "CUDA_VISIBLE_DEVICES": ""}
  out = subprocess.run([sys.executable, "-c", _STALE_PROBE], env=env, capture_output=True, text=True, timeout=300)
  assert out.returncode == 0, out.stderr[-2000:]
  assert f"RESULT {want}" in out.stdout


def test_training_refuses_a_process_with_frozen_weight_kernels(monkeypatch):
  from official_albert.training import train_lib
  from official_albert.training.experiment_config import ExperimentConfig
  monkeypatch.setenv(precision.FROZEN_WEIGHTS_ENV, "1")
  with pytest.raises(RuntimeError, match="TF_ONEDNN_ASSUME_FROZEN_WEIGHTS='1' is set.*unset TF_ONEDNN_ASSUME"):
    with train_lib.runtime_scope(ExperimentConfig()):
      pass
  monkeypatch.setenv(precision.FROZEN_WEIGHTS_ENV, "0")
  with train_lib.runtime_scope(ExperimentConfig()):
    pass
