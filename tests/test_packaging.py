"""`pip install .` gives a working project: the wheel holds every package, the console scripts run from any folder.

The install goes into a fresh virtual environment whose only link to the test environment is a `.pth` file that
makes the already installed dependencies (TensorFlow and the rest, 2 GB) importable, so the test needs no download;
the project itself comes only from the wheel (PYTHONPATH is cleared and the working folder is elsewhere).
"""

import json
import os
import pathlib
import shutil
import subprocess
import sys
import sysconfig
import zipfile

import pytest

from tests.conftest import CHILD_PYTHONPATH
from tests.conftest import CHILD_SITE

try:
  import tomllib  # Python >= 3.11
except ModuleNotFoundError:  # Python 3.10 (requires-python): the copy pip ships, pip being in every environment
  from pip._vendor import tomli as tomllib

# A wheel built and installed into a fresh virtual environment, its binaries run: end to end, in the large tier.
pytestmark = pytest.mark.large

REPO_ROOT = pathlib.Path(__file__).resolve().parent.parent
# Read from pyproject.toml, so that a script or an extra added there is built, installed and run here too (a list
# written out here covered 13 of 26 scripts, and the wheel was built without requirements-retrieval.txt).
with open(REPO_ROOT / "pyproject.toml", "rb") as _f:
  PYPROJECT = tomllib.load(_f)
SCRIPTS = tuple(PYPROJECT["project"]["scripts"])
_DYNAMIC = PYPROJECT["tool"]["setuptools"]["dynamic"]
EXTRAS = {extra: spec["file"] for extra, spec in _DYNAMIC["optional-dependencies"].items()}
REQUIREMENT_FILES = tuple(dict.fromkeys(_DYNAMIC["dependencies"]["file"] + sum(EXTRAS.values(), [])))


def _run(cmd, cwd, env=None, timeout=600):
  result = subprocess.run([str(c) for c in cmd], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout,
                          check=False)
  return result


def _clean_env():
  """The test environment without the repository on PYTHONPATH (pip would take the checkout for an install).

  tests/child_site stays (it holds no package): without it each console script started Keras's scikit-learn, JAX and
  pyplot imports, 3-4 s of CPU per process here, ~30 s per run of this file (AMD EPYC, 2 cores)."""
  env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
  return dict(env, PYTHONPATH=str(CHILD_SITE))


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
  out = tmp_path_factory.mktemp("wheel")
  # A copy of what a release holds, so the in-place build leaves no build/ or *.egg-info in the checkout.
  source = out / "source"
  source.mkdir()
  for name in ("pyproject.toml", "README.md", *REQUIREMENT_FILES):
    shutil.copy(REPO_ROOT / name, source / name)
  for package in ("official_albert", "tasks", "data_prep", "experiments"):
    shutil.copytree(REPO_ROOT / package, source / package, ignore=shutil.ignore_patterns("__pycache__"))
  # --no-build-isolation: the test environment's setuptools builds it (no download).
  result = _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--quiet",
                 "--wheel-dir", out, source], cwd=out, env=_clean_env())
  assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
  (path,) = out.glob("official_albert-*.whl")
  return path


def test_wheel_holds_the_packages_scripts_and_dependencies(wheel):
  with zipfile.ZipFile(wheel) as z:
    names = set(z.namelist())
    metadata = z.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
    entry_points = z.read(next(n for n in names if n.endswith(".dist-info/entry_points.txt"))).decode()
  for path in ("official_albert/train.py", "official_albert/checkpoints/loading.py", "official_albert/file_io.py",
               "tasks/squad/task.py", "tasks/glue/task.py", "data_prep/create_pretraining_data.py",
               "experiments/registry.py", "experiments/benchmark/__main__.py"):
    assert path in names, f"{path} is missing from the wheel"
  assert not any(n.startswith("tests/") for n in names), "tests must not be installed"
  for script in SCRIPTS:
    assert f"{script} = " in entry_points, script
  # Dependencies come from requirements.txt (one list); the test/bench/beam extras from their files.
  for requirement in ("tensorflow==2.21.*", "tensorflow-text==2.21.*", "absl-py>=2.1", "safetensors>=0.4"):
    assert f"Requires-Dist: {requirement}" in metadata, requirement
  assert "License-Expression: Apache-2.0" in metadata
  for extra in EXTRAS:  # each with its file's requirements (a file left out of the build only warns)
    assert f"Provides-Extra: {extra}" in metadata, extra
    assert f'extra == "{extra}"' in metadata, f"the {extra} extra has no requirement"


def test_the_readme_names_every_script_and_extra():
  readme = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
  install = readme[readme.index("## Installing as a package"):]
  install = install[:install.index("\n## ", 1)]
  missing = [name for name in (*SCRIPTS, *(f".[{extra}]" for extra in EXTRAS)) if name not in install]
  assert not missing, f"README.md's 'Installing as a package' does not name {missing} (pyproject.toml has them)"


@pytest.mark.slow
def test_installed_binaries_run_from_another_folder(wheel, tmp_path):
  venv = tmp_path / "venv"
  result = _run([sys.executable, "-m", "venv", venv], cwd=tmp_path)
  assert result.returncode == 0, result.stderr
  python = venv / "bin" / "python"
  site = _run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], cwd=tmp_path)
  site_packages = pathlib.Path(site.stdout.strip())
  # The dependencies of the test environment (not the project: the repository is not on this path).
  (site_packages / "test_env_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
  # The fresh environment's own pip installs the wheel (so the console scripts start its Python).
  result = _run([python, "-m", "pip", "install", "--no-deps", "--no-index", "--quiet", wheel], cwd=tmp_path,
                env=_clean_env())
  assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
  env = _clean_env()
  env["TF_CPP_MIN_LOG_LEVEL"] = "2"
  work = tmp_path / "elsewhere"
  work.mkdir()

  where = _run([python, "-c", "import official_albert, tasks, experiments; "
                "print(official_albert.__file__, tasks.__file__, experiments.__file__)"], cwd=work, env=env)
  assert where.returncode == 0, where.stderr[-3000:]
  assert all(str(site_packages) in p for p in where.stdout.split()), where.stdout
  assert str(REPO_ROOT) not in where.stdout

  for script in SCRIPTS:  # each answers --help with its own flags (absl's test flags are not the binary's)
    assert (venv / "bin" / script).exists(), script
    shown = _run([venv / "bin" / script, "--help"], cwd=work, env=env)
    listed = shown.stdout + shown.stderr
    assert "Traceback" not in listed and "\n  --[no]verbose:" in listed, f"{script}: {listed[-2000:]}"
    assert "test_tmpdir" not in listed, script
  # The benchmark without --spm_model_file: the checkout's fixture is not installed (a model is trained instead).
  bench = _run([venv / "bin" / "albert-benchmark", "--workload=tokenize", "--repeats=1", "--warmup=0",
                f"--output_dir={work / 'bench'}"], cwd=work, env={**env, "TMPDIR": str(tmp_path)})
  assert bench.returncode == 0, bench.stdout[-2000:] + bench.stderr[-3000:]
  (work / "dev.json").write_text(json.dumps({"version": "1.1", "data": [{"title": "t", "paragraphs": [
      {"context": "Paris is in France.", "qas": [{"id": "q", "question": "Where?",
                                                  "answers": [{"text": "France", "answer_start": 12}]}]}]}]}))
  (work / "pred.json").write_text(json.dumps({"q": "in France"}))
  scores = _run([venv / "bin" / "albert-squad-evaluate", "dev.json", "pred.json"], cwd=work, env=env)
  assert scores.returncode == 0, scores.stderr[-2000:]
  assert json.loads(scores.stdout) == pytest.approx({"exact_match": 0.0, "f1": 100 * 2 / 3})  # "in" stays a token

  model_dir = work / "run"
  override = ("task.train_data.input_path=dummy,task.train_data.global_batch_size=2,"
              "task.train_data.seq_length=16,task.train_data.max_predictions_per_seq=2,trainer.train_steps=2,"
              "trainer.steps_per_loop=1,trainer.checkpoint_interval=2")
  train = _run([venv / "bin" / "albert-train", "--experiment=albert_tiny_pretrain", "--mode=train",
                f"--model_dir={model_dir}", f"--params_override={override}"], cwd=work, env=env)
  assert train.returncode == 0, train.stderr[-4000:]
  assert (model_dir / "ckpt-2.index").exists() and (model_dir / "params.yaml").exists()
  converted = _run([venv / "bin" / "albert-convert-checkpoint", "--input_format=native", f"--input={model_dir}",
                    "--output_format=hf", f"--output_dir={work / 'hf'}"], cwd=work, env=env)
  assert converted.returncode == 0, converted.stderr[-4000:]
  assert json.loads((work / "hf" / "config.json").read_text())["architectures"] == ["AlbertForPreTraining"]


@pytest.mark.slow
def test_a_foreign_package_of_the_same_name_fails_loudly(tmp_path):
  """A user's own `experiments` package in the working folder shadows ours under `python -m`: say so at once."""
  (tmp_path / "experiments").mkdir()
  (tmp_path / "experiments" / "__init__.py").write_text("")
  env = dict(os.environ, PYTHONPATH=CHILD_PYTHONPATH, TF_CPP_MIN_LOG_LEVEL="2")
  result = _run([sys.executable, "-m", "official_albert.train", "--experiment=albert_tiny_pretrain",
                 f"--model_dir={tmp_path / 'run'}"], cwd=tmp_path, env=env, timeout=300)
  assert result.returncode != 0
  assert f"'experiments' imported from {tmp_path / 'experiments' / '__init__.py'} is not official_albert's" in (
      result.stderr), result.stderr[-3000:]
