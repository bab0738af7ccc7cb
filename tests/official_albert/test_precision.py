"""`global_dtype_policy`: the policy holds inside the block and the previous one is back afterwards, raise or not."""

import keras
import pytest

from official_albert import precision
from tests.conftest import REPO_ROOT


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
from official_albert import precision
print("ONEDNN", precision.onednn_custom_ops_enabled())
print("RESULT", "changed" if precision.weight_updates_reach_the_kernels() else "stale")
"""


def _run_stale_probe(env_extra):
  import os
  import subprocess
  import sys
  env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "CUDA_VISIBLE_DEVICES": "", **env_extra}
  out = subprocess.run([sys.executable, "-c", _STALE_PROBE], env=env, capture_output=True, text=True, timeout=300,
                       cwd=str(REPO_ROOT))
  assert out.returncode == 0, out.stderr[-2000:]
  return "ONEDNN True" in out.stdout, out.stdout.split("RESULT ")[-1].strip()


@pytest.mark.slow
@pytest.mark.cpu_kind
@pytest.mark.parametrize("cpu", ["this_cpu", "avx2_only"])
@pytest.mark.parametrize("value", ["0", "1"])
def test_frozen_weight_kernels_keep_the_first_weights_which_is_why_training_refuses_them(value, cpu):
  # The danger `check_weights_may_change` guards against, shown on TF itself: with the variable on, a weight update
  # does not reach the fused kernel. If TF ever refreshes its cache, this fails and the guard can be relaxed. The
  # cache exists only where TF runs its oneDNN kernels: not on an AVX2-only CPU by default (reproduced here by
  # `precision.AVX2_ONLY_ENV`), where every call reads the weights.
  env = {precision.FROZEN_WEIGHTS_ENV: value, **(precision.AVX2_ONLY_ENV if cpu == "avx2_only" else {})}
  custom_ops, result = _run_stale_probe(env)
  if cpu == "avx2_only":
    assert not custom_ops
  else:
    assert custom_ops is precision.onednn_custom_ops_enabled()  # the child ran on this CPU with this environment
  assert result == ("stale" if value == "1" and custom_ops else "changed")


@pytest.mark.slow
@pytest.mark.cpu_kind
def test_frozen_weight_kernels_cache_under_an_avx2_isa_cap_when_tf_runs_onednn_kernels():
  # ONEDNN_MAX_CPU_ISA=AVX2 alone takes effect in oneDNN (AVX2 kernels) but TF still runs its oneDNN kernels where
  # its CPU rule says so: then the AVX2 kernels cache their weights too. The same holds on an AVX2-only CPU with
  # TF_ENABLE_ONEDNN_OPTS=1, which is why training refuses the variable whatever the CPU.
  custom_ops, result = _run_stale_probe({precision.FROZEN_WEIGHTS_ENV: "1", "ONEDNN_MAX_CPU_ISA": "AVX2"})
  assert result == ("stale" if custom_ops else "changed")


@pytest.mark.slow
@pytest.mark.cpu_kind
def test_the_probe_picks_float32_on_an_avx2_only_cpu():
  # No bf16 instructions: TF emulates bf16 and it is no faster than float32 (0.87-0.92x measured), so "auto" must
  # not pick it. Run under `precision.AVX2_ONLY_ENV` in a child (oneDNN reads its ISA cap once per process). A
  # timing on a loaded machine can flip once; emulated bf16 cannot win three probes in a row.
  import os
  import subprocess
  import sys
  code = ("from official_albert import precision\n"
          "for _ in range(3):\n"
          "  p = precision.probe_matmul_speed(repeats=9)\n"
          "  print(p.describe())\n"
          "  if p.faster_policy() == 'float32':\n"
          "    break\n"
          "print('POLICY', p.faster_policy(), precision.onednn_custom_ops_enabled())\n")
  env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", **precision.AVX2_ONLY_ENV}
  out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300,
                       cwd=str(REPO_ROOT))
  assert out.returncode == 0, out.stderr[-2000:]
  assert "POLICY float32 False" in out.stdout, out.stdout


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


# Serve, then train, in one process: the variable is on at the first oneDNN kernel (TF reads it there, once) and
# unset before training. The guard must refuse from what the kernels do, not from the variable's value now.
_SERVE_THEN_TRAIN = """
import os
os.environ[precision_env] = "1"
import numpy as np, tensorflow as tf
from official_albert import precision
import tempfile
from official_albert import train
from official_albert.training import train_lib
w, b = tf.Variable(np.ones((8, 8), np.float32)), tf.Variable(np.zeros(8, np.float32))
x = tf.constant(np.ones((2, 8), np.float32))
tf.function(lambda: tf.nn.gelu(tf.matmul(x, w) + b, approximate=True))()  # a dense layer served: TF reads the variable
del os.environ[precision_env]
print("ONEDNN", precision.onednn_custom_ops_enabled())
params = train.build_params("albert_tiny_pretrain")
try:
  with train_lib.runtime_scope(params):  # checks the variable only
    train_lib.Trainer(params, tempfile.mkdtemp())  # probes once its strategy exists
    print("GUARD accepted")
except RuntimeError as e:
  print("GUARD refused:", e)
"""


@pytest.mark.slow
@pytest.mark.cpu_kind
def test_training_refuses_a_process_that_served_with_frozen_weight_kernels_and_then_unset_them():
  import os
  import subprocess
  import sys
  code = f"precision_env = {precision.FROZEN_WEIGHTS_ENV!r}\n" + _SERVE_THEN_TRAIN
  env = {k: v for k, v in os.environ.items() if k != precision.FROZEN_WEIGHTS_ENV}
  env.update(TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="")
  out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300,
                       cwd=str(REPO_ROOT))
  assert out.returncode == 0, out.stderr[-2000:]
  if "ONEDNN True" in out.stdout:  # the kernels that cache weights ran (not on an AVX2-only CPU by default)
    assert "GUARD refused: official_albert.train: this process's oneDNN MatMul kernels keep their first" in out.stdout
    assert "train in a new process started without TF_ONEDNN_ASSUME_FROZEN_WEIGHTS" in out.stdout, out.stdout
  else:
    assert "GUARD accepted" in out.stdout, out.stdout


_SCOPE_THEN_LOGICAL_CPUS = """
import tempfile
from official_albert import train
from official_albert.training import train_lib
params = train.build_params("albert_tiny_pretrain", params_override="runtime.num_cpu_devices=2")
with train_lib.runtime_scope(params):  # a caller that lets the Trainer build its strategy (train_lib's docstring)
  print("REPLICAS", train_lib.Trainer(params, tempfile.mkdtemp()).num_replicas)
"""


@pytest.mark.slow
def test_the_guard_probes_after_the_strategy_has_made_its_logical_cpus():
  # The probe runs ops, which fixes TensorFlow's devices: run inside `runtime_scope` it made the Trainer's 2 logical
  # CPUs impossible ("TensorFlow already initialised 1 CPU device(s)"); the Trainer probes after building them.
  import os
  import subprocess
  import sys
  env = {k: v for k, v in os.environ.items() if k != precision.FROZEN_WEIGHTS_ENV}
  env.update(TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="")
  out = subprocess.run([sys.executable, "-c", _SCOPE_THEN_LOGICAL_CPUS], env=env, capture_output=True, text=True,
                       timeout=300, cwd=str(REPO_ROOT))
  assert out.returncode == 0, out.stderr[-2000:]
  assert "REPLICAS 2" in out.stdout, out.stdout


def test_the_weights_probe_answers_once_per_process_and_training_accepts_a_fresh_one(monkeypatch):
  # This process never had the variable on, so weight updates reach its kernels; the answer is kept (TF never reads
  # the variable again), and a later run does not probe again.
  monkeypatch.delenv(precision.FROZEN_WEIGHTS_ENV, raising=False)
  assert precision.weight_updates_reach_the_kernels() is True
  monkeypatch.setattr(precision, "_weight_updates_reach_the_kernels", False)  # as a latched process would answer
  with pytest.raises(RuntimeError, match="keep their first weights.*once per process"):
    precision.check_weights_may_change("official_albert.train")
