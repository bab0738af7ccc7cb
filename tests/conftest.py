"""Shared pytest fixtures.

- `shared_data_dir`: the real public GLUE/SQuAD samples in ../shared/data (skips cleanly when absent; users won't
  have it).
- `spm_model_file`: the small committed SentencePiece fixture (tests/fixtures/test_spm.model, made by
  tests/fixtures/make_test_spm.py from the installed Python's documentation).
- `tiny_model_dirs`: one tiny random-weight model directory per head (tests/tiny.py, `HEADS`), saved once per
  session (per pytest-xdist worker) and shared read-only by the export, pipeline and label tests.
- `ALBERT_TEST_LOAD=N` in the environment: N CPU-burning processes run beside the whole session, so that a test
  assuming a step, a process start or a signal is fast shows up as a failure here before it flakes in CI. With
  `-m timing` only the tests that coordinate processes or wait on progress run (`make test-under-load`). Under
  pytest-xdist (`make test` runs two workers) the first worker starts them, so N is the count for the whole run.
- `LONGEST_FIRST`: the files that take longest start first (the longest-processing-time-first rule: the short files
  at the end fill the gaps). pytest-xdist's `--dist loadfile` hands whole files to the workers in collection order
  only with `--no-loadscope-reorder` (the Makefile passes it); by default it orders the files by their number of
  tests, which put files of a few long tests (the documented recipe, scale-out) near the end, where one worker could
  run one alone while the other had finished. Order only: every test still runs.
"""

import os
import pathlib
import subprocess
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")

import pytest  # noqa: E402

REPO_ROOT = pathlib.Path(__file__).resolve().parent.parent
FIXTURES = REPO_ROOT / "tests" / "fixtures"

# Every Python process the tests start (and the pytest-xdist workers) imports with tests/child_site/sitecustomize.py,
# which keeps Keras from importing scikit-learn, JAX and pyplot for features this project never uses (~1.5 s of CPU
# per process; its docstring says which imports and why).
# A test that sets a child's PYTHONPATH itself sets CHILD_PYTHONPATH (the repository after this folder).
CHILD_SITE = REPO_ROOT / "tests" / "child_site"
CHILD_PYTHONPATH = os.pathsep.join([str(CHILD_SITE), str(REPO_ROOT)])
os.environ["PYTHONPATH"] = os.pathsep.join(
    [str(CHILD_SITE)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and p != str(CHILD_SITE)])
# The pytest process itself (it runs the tests under TEST_WORKERS=0) sends no OpenVINO usage telemetry either: 6-10 s
# of CPU per conversion (child_site/sitecustomize.py says why). OpenVINO and NNCF fall back to no telemetry.
sys.modules.setdefault("openvino_telemetry", None)


def _shared_data_candidates():
  env = os.environ.get("OFFICIAL_ALBERT_SHARED_DATA")
  if env:
    yield pathlib.Path(env)
  yield REPO_ROOT.parent / "shared" / "data"


# The longest test files of a `make test` run (the sum of their tests' times in session 38's 2-worker run, AMD EPYC
# 2 cores, 2026-12-02: 3,815 s of pytest, after OpenVINO's telemetry was refused), longest first.
LONGEST_FIRST = (
    "tests/official_albert/training/test_scale_out.py",  # 488
    "tests/tasks/test_text_embedding.py",  # 289
    "tests/experiments/projects/ablations/test_study.py",  # 287
    "tests/official_albert/training/test_run_guards.py",  # 228
    "tests/official_albert/modeling/test_long_attention.py",  # 227
    "tests/test_readme_commands.py",  # ~205 (618 before its commands forked from a warm interpreter, session 48)
    "tests/official_albert/training/test_train_lib.py",  # 198
    "tests/official_albert/modeling/test_model_harness.py",  # 191
    "tests/official_albert/serving/test_export_harness.py",  # 176
    "tests/official_albert/serving/test_server.py",  # 170
    "tests/experiments/projects/retrieval/test_study.py",  # 153
    "tests/tasks/test_pretraining_dynamic.py",  # 139
    "tests/tasks/test_text_ranking.py",  # 138
    "tests/test_distributed_docs.py",  # ~138 (185 before the warm interpreter)
    "tests/experiments/test_benchmark.py",  # 133
    "tests/experiments/test_benchmark_long_inputs.py",  # 132
    "tests/experiments/test_demo.py",  # 123
    "tests/test_packaging.py",  # 114
    "tests/tasks/test_training_order.py",  # 91
    "tests/official_albert/training/test_resume_interruptions.py",  # 87
    "tests/official_albert/serving/test_depthwise.py",  # 86
    "tests/tasks/test_finetuning_tasks.py",  # 81
    "tests/test_cpu_kinds.py",  # 79
    "tests/official_albert/serving/test_server_exports.py",  # 78
    "tests/tasks/test_text_sst2_parity.py",  # 75
    "tests/official_albert/test_precision.py",  # 72
    "tests/official_albert/serving/test_early_exit_serving.py",  # 70
    "tests/official_albert/serving/test_embedding.py",  # 70
    "tests/tasks/test_text_classification.py",  # 68
    "tests/experiments/projects/long_inputs/test_finetune_jax.py",  # 67
    "tests/official_albert/serving/test_custom_gradient_release.py",  # 66
    "tests/official_albert/checkpoints/test_extend_positions.py",  # 65
    "tests/official_albert/serving/test_grpc_server.py",  # 61
    "tests/official_albert/serving/test_litert_export.py",  # 61
    "tests/official_albert/serving/test_export.py",  # 60
    "tests/official_albert/data/test_dynamic_padding.py",  # 59
)


def pytest_collection_modifyitems(config, items):
  """Moves the files of LONGEST_FIRST to the front, in that order (stable: tests keep their order in a file)."""
  del config
  rank = {path: i for i, path in enumerate(LONGEST_FIRST)}
  items.sort(key=lambda item: rank.get(item.nodeid.split("::", 1)[0], len(rank)))


LOAD_ENV = "ALBERT_TEST_LOAD"
# A busy loop that ends by itself once its parent (pytest) is gone, even if pytest is killed with -9.
_BURNER = "import os\nparent = os.getppid()\nwhile os.getppid() == parent:\n  pass\n"


@pytest.fixture(scope="session", autouse=True)
def background_load():
  """`ALBERT_TEST_LOAD=N`: N busy processes compete with the tests for the CPU for the whole session."""
  count = int(os.environ.get(LOAD_ENV, "0") or 0)
  if os.environ.get("PYTEST_XDIST_WORKER", "gw0") != "gw0":
    count = 0  # one set of burners for the whole run, not one per xdist worker
  burners = [subprocess.Popen([sys.executable, "-c", _BURNER]) for _ in range(max(0, count))]
  try:
    yield len(burners)
  finally:
    for burner in burners:
      burner.kill()
      burner.wait()


@pytest.fixture(scope="session")
def shared_data_dir() -> pathlib.Path:
  for candidate in _shared_data_candidates():
    if candidate.is_dir():
      return candidate
  pytest.skip("../shared/data (real GLUE/SQuAD samples) is not present")


@pytest.fixture(scope="session")
def spm_model_file() -> str:
  path = FIXTURES / "test_spm.model"
  if not path.exists():
    raise FileNotFoundError(f"{path} is missing: run `python tests/fixtures/make_test_spm.py`.")
  return str(path)


@pytest.fixture(scope="session")
def tiny_model_dirs(tmp_path_factory):
  """`dirs[head]` is a saved tiny model directory (tests/tiny.py): built on first use, then shared read-only."""
  from tests import tiny
  return tiny.ModelDirs(tmp_path_factory.mktemp("tiny_models"))


def docs_shell_env(tmp_path: pathlib.Path) -> dict:
  """The environment a documented shell command runs in: `python` = this interpreter (a wrapper keeps its venv)."""
  import shlex
  import sys
  bin_dir = tmp_path / "bin"
  bin_dir.mkdir()
  wrapper = bin_dir / "python"
  wrapper.write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} "$@"\n')
  wrapper.chmod(0o755)
  return dict(os.environ, PATH=f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}", PYTHONPATH=CHILD_PYTHONPATH,
              TF_CPP_MIN_LOG_LEVEL="2")


def without_tensorflow(console_module: str) -> str:
  """`python -c` source that runs `console_module`'s `console_main()` with TensorFlow made absent (`sys.modules[name] =
  None` is Python's mark of a missing module): what a JAX-only accelerator host has."""
  return ("import sys\n"
          "for name in ('tensorflow', 'tensorflow_text', 'tf_keras'):\n"
          "  sys.modules[name] = None\n"
          f"from {console_module} import console_main\n"
          "console_main()\n")



@pytest.fixture(scope="session")
def tiny_exports(tmp_path_factory):
  """The export harness's folders (tests/official_albert/serving/export_harness.py): `exports.folder(format, model,
  attention)`, written on first use and then shared read-only; under pytest-xdist the workers share one root, so
  each folder is written once per run. `exports.models` holds the model directories and their Keras models."""
  from tests.official_albert.serving import export_harness
  base = tmp_path_factory.getbasetemp()
  root = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
  return export_harness.Exports(root / "tiny_exports", export_harness.Models(root / "tiny_export_models"))


@pytest.fixture(name="live_pid")
def fixture_live_pid():
  """The pid of a process that runs while the test does (not the parent's: under a container's PID 1 it is 0)."""
  child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
  try:
    yield child.pid
  finally:
    child.kill()
    child.wait()

