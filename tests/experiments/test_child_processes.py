"""The experiments' child processes (`python -m experiments...`) run our packages, not a user's `experiments/`.

`-m` puts the current folder first on the child's sys.path; a user working in a project of their own with an
`experiments/` package had the frozen-weights benchmark rows fail and the early-exit study's bench stage crash with
"No module named experiments.benchmark". The parent's `cli.child_env` keeps that folder out (PYTHONSAFEPATH) and
puts our packages' folder first. Each case captures the environment a launcher hands its child, then runs
`python -m experiments.benchmark --help` from a folder that holds a foreign `experiments/` with it.
"""

import subprocess
import sys

import pytest

from experiments.benchmark import driver
from experiments.benchmark import long_inputs
from experiments.benchmark.core import BenchSettings


class _Captured(Exception):
  pass


def _capture_env(monkeypatch, module, name):
  seen = {}

  def fake(argv, **kwargs):
    seen["env"] = kwargs.get("env")
    raise _Captured()

  monkeypatch.setattr(module.subprocess, name, fake)
  return seen


def _driver_env(monkeypatch):
  seen = _capture_env(monkeypatch, driver, "run")
  with pytest.raises(_Captured):
    driver.run_in_frozen_weight_process(BenchSettings(workload="gemm"), log=lambda *_: None)
  return seen["env"]


def _long_inputs_env(monkeypatch):
  seen = _capture_env(monkeypatch, long_inputs, "Popen")
  rows = long_inputs.build_rows([64], ["dense"], ["float32"], ["inference"], ["ours"], "tensorflow")
  with pytest.raises(_Captured):
    long_inputs.run_group(rows, {}, memory_limit_mib=100.0, log=lambda *_: None)
  return seen["env"]


@pytest.mark.parametrize("launcher", [_driver_env, _long_inputs_env], ids=["driver", "long_inputs"])
def test_child_runs_our_experiments_from_a_folder_with_its_own(launcher, monkeypatch, tmp_path):
  env = launcher(monkeypatch)
  assert env is not None and env.get("PYTHONSAFEPATH") == "1"
  (tmp_path / "experiments").mkdir()
  (tmp_path / "experiments" / "__init__.py").write_text("")
  monkeypatch.undo()  # the launchers' subprocess is this module's: its functions are back
  shown = subprocess.run([sys.executable, "-m", "experiments.benchmark", "--help"], cwd=tmp_path,
                         env={**env, "TF_CPP_MIN_LOG_LEVEL": "2"}, capture_output=True, text=True, timeout=300)
  listed = shown.stdout + shown.stderr
  assert "No module named" not in listed and "--workload" in listed, listed[-2000:]
