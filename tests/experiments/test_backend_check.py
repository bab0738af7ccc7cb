"""experiments.backend_check runs with JAX and no TensorFlow, reports every row and check, and its training learns.

Never timed: the numbers are for an accelerator run; here a tiny model on the CPU, in its own process (KERAS_BACKEND
is read at Keras' first import) with TensorFlow made absent (`sys.modules[name] = None`, Python's mark of a missing
module).
"""

import importlib.util
import json
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

from tests.conftest import CHILD_PYTHONPATH
from tests.conftest import without_tensorflow

REPO_ROOT = pathlib.Path(__file__).resolve().parents[2]
_WITHOUT_TENSORFLOW = without_tensorflow("experiments.backend_check")

@pytest.mark.parametrize("dtypes", [("float32", "bfloat16"), ("bfloat16", "float32")])
def test_every_dtype_holds_the_same_weights_whatever_their_order(dtypes):
  """The bfloat16-vs-float32 check compares one model: listing bfloat16 first must not give it other weights."""
  from experiments import backend_check
  from experiments.benchmark.core import TINY
  from official_albert import AlbertConfig
  from official_albert.modeling.encoder import AlbertEncoder
  models = backend_check.build_models(AlbertEncoder, AlbertConfig(**TINY), dtypes)
  assert list(models) == list(dtypes)
  first, second = (models[d] for d in dtypes)
  assert len(first.weights) == len(second.weights)
  for a, b in zip(first.weights, second.weights):
    assert a.path == b.path and a.dtype == b.dtype == "float32"
    assert np.array_equal(np.asarray(a.value), np.asarray(b.value)), a.path


# ~30 CPU-s: four XLA compilations; a worker process
@pytest.mark.large
@pytest.mark.slow
@pytest.mark.timing
@pytest.mark.skipif(importlib.util.find_spec("jax") is None, reason="jax is not installed (requirements-jax.txt)")
def test_backend_check_runs_without_tensorflow_and_learns(tmp_path):
  output = tmp_path / "backend_check.json"
  env = {k: v for k, v in os.environ.items() if k != "KERAS_BACKEND"}  # unset: the binary selects jax itself
  env.update(PYTHONPATH=CHILD_PYTHONPATH, JAX_PLATFORMS="cpu", OMP_NUM_THREADS="1")
  result = subprocess.run(
      [sys.executable, "-c", _WITHOUT_TENSORFLOW, "--preset=tiny", "--batch_size=4", "--seq_length=16",
       "--max_predictions_per_seq=4", "--dtypes=float32,bfloat16", "--repeats=4", "--warmup=1",
       "--matmul_n=256", f"--output_file={output}"],
      cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=900)
  assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-5000:]
  report = json.loads(output.read_text())
  names = [row["name"] for row in report["rows"]]
  assert names == [f"{workload} {dtype}" for dtype in ("float32", "bfloat16")
                   for workload in ("encoder_inference", "pretrain_step", "matmul")]
  for row in report["rows"]:
    assert row["repeats"] == 4 and row["median_s"] > 0 and row["gflops"] > 0, row
    if not row["name"].startswith("matmul"):
      assert row["tokens_per_s"] == pytest.approx(4 * 16 / row["median_s"]) and row["mfu"] > 0, row
  assert report["device"]["platform"] == "cpu" and report["versions"]["jax"]
  checks = report["checks"]
  for dtype in ("float32", "bfloat16"):
    # The same batch every step (AdamW, lr 1e-4): the loss falls, from about ln(V) + ln(2) at random weights.
    loss = checks[f"pretrain_loss {dtype}"]
    assert loss["falls"] and 5.0 < loss["first"] < 6.0, loss
  assert checks["float32 default vs highest matmul precision"]["sequence_output_cosine"] > 0.99999
  assert checks["bfloat16 vs float32 (highest)"]["sequence_output_cosine"] > 0.9995
