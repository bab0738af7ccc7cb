"""The study kit (experiments/study.py, issue 45 item 3): settings with flags made from their fields, named
resumable stages keyed by a fingerprint, the run directory's layout, and mean ± std over seeds in summary.json."""

import dataclasses
import json
import os
from typing import Sequence

from absl import flags
import pytest

from experiments import study


@dataclasses.dataclass
class _Settings(study.Settings):
  steps: int = dataclasses.field(metadata={"help": "Training steps"})
  rate: float = 0.1
  name: str = "a"
  kind: str = dataclasses.field(default="x", metadata={"choices": ("x", "y")})
  tasks: Sequence[str] = ("t1", "t2")
  shuffle: bool = True
  seed: int = 0

  @classmethod
  def full(cls):
    return cls(steps=1000)

  @classmethod
  def quick(cls):
    return cls(steps=10, rate=0.5)


FIELDS = ("steps", "rate", "name", "kind", "tasks", "shuffle")


def _parse(*args):
  fv = flags.FlagValues()
  study.define_settings_flags(_Settings, fv, FIELDS)
  fv(["prog", *args])
  return study.settings_from_flags(_Settings, fv, FIELDS), fv


def test_flags_are_made_from_the_fields_and_unset_ones_keep_the_size():
  assert _parse()[0] == _Settings.full()
  assert _parse("--quick")[0] == _Settings.quick()
  settings, fv = _parse("--quick", "--steps=7", "--rate=0.25", "--name=b", "--kind=y", "--tasks=t3",
                        "--noshuffle")
  assert settings == _Settings(steps=7, rate=0.25, name="b", kind="y", tasks=("t3",), shuffle=False)
  assert "Training steps (default: the size's)." == fv["steps"].help
  with pytest.raises(flags.IllegalFlagValueError):
    _parse("--kind=z")  # choices make an enum flag


def test_a_field_no_flag_is_made_for_is_named():
  @dataclasses.dataclass
  class Bad(study.Settings):
    table: dict = dataclasses.field(default_factory=dict)
  with pytest.raises(TypeError, match="'table'"):
    study.define_settings_flags(Bad, flags.FlagValues(), ("table",))


def test_sizes_default_to_refusing_and_replace_ignores_unset_values():
  with pytest.raises(NotImplementedError, match="quick"):
    study.Settings.quick()
  settings = _Settings.full()
  assert settings.replace(steps=None, rate=0.2) == dataclasses.replace(settings, rate=0.2)
  assert settings.fingerprint() == _Settings.full().fingerprint() != _Settings.quick().fingerprint()
  assert settings.fingerprint(["name"]) == _Settings.quick().fingerprint(["name"])  # only the named fields count


def test_a_stage_runs_once_per_key_and_records_its_time(tmp_path):
  calls = []

  def stage(value):
    calls.append(value)
    return {"value": value}

  out = str(tmp_path)
  logs = []
  assert study.run_stage(out, "data", {"k": 1}, lambda: stage(1), logs.append) == {"value": 1}
  assert study.run_stage(out, "data", {"k": 1}, lambda: stage(2), logs.append) == {"value": 1}  # resumed
  assert calls == [1] and "done before" in logs[-1]
  assert study.run_stage(out, "data", {"k": 2}, lambda: stage(3), logs.append) == {"value": 3}  # other settings
  assert calls == [1, 3] and "other settings" in logs[-1]
  marker = json.loads((tmp_path / "stages" / "data.json").read_text())
  assert marker["fingerprint"] == study.fingerprint({"k": 2}) and marker["result"] == {"value": 3}
  assert set(study.stage_times(out)["data"]) == {"wall_s", "loadavg_start", "loadavg_end"}
  (tmp_path / "stages" / "data.json").write_text('{"fingerprint": "')  # damaged (an edit, a disk fault): run again
  assert study.stage_times(out) == {}
  assert study.run_stage(out, "data", {"k": 2}, lambda: stage(4), logs.append) == {"value": 4}
  assert calls == [1, 3, 4] and "or is damaged" in logs[-1]


def test_a_stage_that_fails_leaves_no_marker(tmp_path):
  def broken():
    raise RuntimeError("killed")
  with pytest.raises(RuntimeError):
    study.run_stage(str(tmp_path), "train", {}, broken)
  assert not os.path.exists(study.stage_path(str(tmp_path), "train"))
  assert study.run_stage(str(tmp_path), "train", {}, lambda: 5, lambda _: None) == 5


def test_the_run_directory_layout(tmp_path):
  out = str(tmp_path)
  assert study.run_path(out, "sop", 2) == os.path.join(out, "runs", "sop", "seed2")
  assert study.stage_path(out, "data") == os.path.join(out, "stages", "data.json")
  assert study.summary_path(out) == os.path.join(out, "summary.json")


def test_summary_is_mean_and_sample_std_over_seeds(tmp_path):
  assert study.mean_std([0.5, 0.7, None, 0.9]) == pytest.approx({"mean": 0.7, "std": 0.2, "n": 3})
  assert study.mean_std([0.4]) == {"mean": 0.4, "std": 0.0, "n": 1}
  assert study.mean_std([None]) == {"mean": None, "std": None, "n": 0}
  study.run_stage(str(tmp_path), "data", {}, lambda: 1, lambda _: None)
  results = {"sop": [{"acc": 0.6, "loss": 1.0}, {"acc": 0.8, "loss": 2.0}], "nsp": [{"acc": 0.5}]}
  written = study.write_summary(str(tmp_path), _Settings.quick(), [1, 2], results, ("acc", "loss"), note="x")
  assert json.loads((tmp_path / "summary.json").read_text()) == json.loads(json.dumps(written))
  assert written["summary"]["sop"]["acc"] == pytest.approx({"mean": 0.7, "std": 0.1414213562, "n": 2})
  assert written["summary"]["nsp"]["loss"] == {"mean": None, "std": None, "n": 0}
  assert written["per_seed"]["sop"] == results["sop"] and written["seeds"] == [1, 2] and written["note"] == "x"
  assert written["settings"]["steps"] == 10 and list(written["stages"]) == ["data"]


def test_the_held_out_fraction_is_one_constant():
  """Issue 44 leftover: the demo, the ablations and the early-exit study hold out the same documents because they
  read one number, not because a test keeps three copies equal."""
  from experiments.demo import DemoSettings
  from experiments.projects.ablations.studies import StudySettings
  assert DemoSettings.full().heldout_every == StudySettings.full().heldout_every == study.HELDOUT_EVERY
  assert DemoSettings.quick().heldout_every == study.HELDOUT_EVERY
