"""Keras backends: the modeling package under JAX and PyTorch gives TensorFlow's numbers.

Every model type (and the encoder with `layer_loop=True`) gets perturbed random weights under TensorFlow, is saved
as a native model directory (and as an HF directory), and is run; a fresh process per backend (KERAS_BACKEND is read
at Keras' first import) loads the same files and runs the same inputs (tests/official_albert/modeling/
backend_harness.py). Checked: every output of every head within 1e-5 (float32), from the HF directories with
TensorFlow absent from the process and from the native checkpoints; the pretrainer's gradients within 1e-5 of each
tensor's scale; under mixed_bfloat16 the outputs and gradients as close to float32 as TensorFlow's own bf16 is.
"""

import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

from official_albert.checkpoints.formats import MODEL_TYPES
from tests.conftest import CHILD_PYTHONPATH
from tests.official_albert.modeling import backend_harness

REPO_ROOT = pathlib.Path(__file__).resolve().parents[3]
BACKENDS = ("jax", "torch")
TOLERANCE = 1e-5
TIMEOUT = 600
# ~50 CPU-seconds in all (TF reference ~9, the JAX worker ~27 of which ~7 compile the truncated-normal initializer per
# variable shape, the PyTorch worker ~12); the two workers run side by side.
pytestmark = [pytest.mark.slow, pytest.mark.timing]  # timing: worker processes, bounded by their exit


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
  """{"reference": npz, backend: npz | (None, log)}: the TensorFlow reference and each backend's worker output."""
  directory = tmp_path_factory.mktemp("backends")
  backend_harness.write_reference(str(directory))
  workers = {}
  for backend in BACKENDS:
    if backend == "jax" and not _installed("jax"):
      continue
    # One thread each: tiny matrices, two workers on a shared 2-core machine (torch's OpenMP pool costs ~30% more).
    env = dict(os.environ, KERAS_BACKEND=backend, PYTHONPATH=CHILD_PYTHONPATH, TF_CPP_MIN_LOG_LEVEL="2",
               JAX_PLATFORMS="cpu", OMP_NUM_THREADS="1")
    workers[backend] = subprocess.Popen(
        [sys.executable, "-m", "tests.official_albert.modeling.backend_harness", f"--dir={directory}"], env=env,
        cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
  results = {"reference": np.load(directory / "reference.npz")}
  try:
    for backend, worker in workers.items():
      log, _ = worker.communicate(timeout=TIMEOUT)
      results[backend] = np.load(directory / f"{backend}.npz") if worker.returncode == 0 else (None, log[-6000:])
  finally:
    for worker in workers.values():
      if worker.poll() is None:
        worker.kill()
        worker.wait()
  return results


def _installed(module: str) -> bool:
  import importlib.util  # pylint: disable=g-import-not-at-top
  return importlib.util.find_spec(module) is not None


def _outputs(runs, backend):
  if backend not in runs:
    pytest.skip(f"{backend} is not installed (requirements-jax.txt)")
  result = runs[backend]
  if isinstance(result, tuple):
    pytest.fail(f"the {backend} worker failed:\n{result[1]}")
  return result


def _cosine(a, b) -> float:
  a, b = np.asarray(a, np.float64).ravel(), np.asarray(b, np.float64).ravel()
  return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


@pytest.mark.slow
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("source", ["hf", "native"])
def test_every_head_matches_tensorflow(runs, backend, source):
  """`hf`: loaded from the HF directories with TensorFlow absent; `native`: through TF's checkpoint reader."""
  reference, outputs = runs["reference"], _outputs(runs, backend)
  keys = sorted(k for k in reference.files if not k.startswith("grad/"))
  assert {k.split("/")[0] for k in keys} == {*MODEL_TYPES, "encoder_loop"}
  for key in keys:
    expected, actual = reference[key], outputs[f"{source}/{key}"]
    assert actual.dtype == expected.dtype and actual.shape == expected.shape, (key, actual.dtype, actual.shape)
    if np.issubdtype(expected.dtype, np.integer):  # the SQuAD 2.0 head's top-k indices
      np.testing.assert_array_equal(actual, expected, err_msg=f"{backend} {source} {key}")
    else:
      np.testing.assert_allclose(actual, expected, rtol=0, atol=TOLERANCE, err_msg=f"{backend} {source} {key}")


@pytest.mark.parametrize("backend", BACKENDS)
def test_original_release_reads_the_same_weights(runs, backend):
  assert float(_outputs(runs, backend)["check/tf1_vs_native_max_abs"]) == 0.0


@pytest.mark.parametrize("backend", BACKENDS)
def test_pretrainer_gradients_match_tensorflow(runs, backend):
  """Gradients of a loss over the MLM and SOP logits; each within 1e-5 of its tensor's largest value (≥ 1)."""
  reference, outputs = runs["reference"], _outputs(runs, backend)
  keys = [k for k in reference.files if k.startswith("grad/")]
  assert len(keys) == len([k for k in outputs.files if k.startswith("grad/")]) > 20
  for key in keys:
    expected = reference[key]
    np.testing.assert_allclose(outputs[key], expected, rtol=0, atol=TOLERANCE * max(1.0, np.abs(expected).max()),
                               err_msg=f"{backend} {key}")


@pytest.mark.parametrize("backend", BACKENDS)
def test_mixed_precision_is_as_close_to_float32_as_tensorflow(runs, backend):
  """mixed_bfloat16: outputs and gradients as close to the float32 reference as TensorFlow's own bf16 run.

  Cosine to float32 over five seeded weight draws of this model (the minimum over the draws; outputs / the worst
  gradient tensor): TensorFlow 0.99975 / 0.99907, JAX 0.99958 / 0.99939, PyTorch 0.99974 / 0.99922 (AMD EPYC). The
  bars: 0.9995 for outputs and for all gradients together (the update's direction), 0.996 for each gradient tensor
  whose float32 norm is at least 1% of the largest one (smaller ones are rounding noise in both precisions: the key
  bias's gradient, for one, is zero in exact arithmetic, softmax ignoring a shift along the keys). On an AMX Xeon the
  embedding LayerNorm's gamma gradient of this draw is TensorFlow's own worst, 0.9964 (PyTorch 0.9973 once the heads
  compute their logits in float32): the per-tensor bar sits below what TensorFlow itself reaches there.
  """
  reference, outputs = runs["reference"], _outputs(runs, backend)
  for name in ("mlm_logits", "sop_logits", "sequence_output", "pooled_output"):
    assert _cosine(outputs[f"bf16/pretrainer/{name}"], reference[f"pretrainer/{name}"]) > 0.9995, name
  keys = sorted(k for k in reference.files if k.startswith("grad/"))
  for key in keys:
    actual = outputs["bf16_" + key]
    assert actual.dtype == np.float32 and np.isfinite(actual).all(), key  # float32 variables, float32 gradients
  expected = {k: reference[k] for k in keys}
  actual = {k: outputs["bf16_" + k] for k in keys}
  assert _cosine(np.concatenate([actual[k].ravel() for k in keys]),
                 np.concatenate([expected[k].ravel() for k in keys])) > 0.9995
  largest = max(np.linalg.norm(g) for g in expected.values())
  for key in keys:
    if np.linalg.norm(expected[key]) >= 0.01 * largest:
      assert _cosine(actual[key], expected[key]) > 0.996, (key, _cosine(actual[key], expected[key]))
