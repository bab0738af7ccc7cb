"""The train binary's flags (CLI audit): what each is for is checked before anything is built or written.

`--mode=eval --checkpoint` evaluates that checkpoint (it evaluated the latest) and the training modes refuse it; an
empty `--model_dir` (an unset `$MODEL_DIR`: the run went half to the current folder, half to `/`) and one naming a
file are refused; a repeated `--params_override` is applied in order (the first was dropped); `--tpu` with a config
that names another strategy is refused (the run trained on the host without a word).

The flags are parsed into a fresh `FlagValues` and `train.main` / `train.build_params` run in-process; the model and
data are test_train_lib.py's TINY (H 32, 2 layers, the task's synthetic "dummy" batches).
"""

import json
import os

from absl import app
from absl import flags
import pytest

from official_albert import cli
from official_albert import train
from official_albert.training import train_lib
from tests.official_albert.training.test_train_lib import TINY
from tests.official_albert.training.test_train_lib import tiny_params

EXPERIMENT = "albert_tiny_pretrain"
RUN_EXPERIMENT = train_lib.run_experiment  # the real one, for the tests that stub it


def _flags(*args):
  fv = flags.FlagValues()
  train.define_flags(fv)
  fv(["train", f"--experiment={EXPERIMENT}", *args])
  return fv


def _stub_run_experiment(monkeypatch):
  """Replaces the trainer: a test of a refused flag must not run (or write) anything when the check is missing."""
  calls = []
  monkeypatch.setattr(train_lib, "run_experiment", lambda *args, **kwargs: calls.append(args) or {
      "status": "completed", "global_step": 0})
  return calls


@pytest.fixture(scope="module")
def two_checkpoints(tmp_path_factory):
  """A run directory holding ckpt-2 and ckpt-4."""
  model_dir = str(tmp_path_factory.mktemp("run"))
  train_lib.run_experiment(tiny_params(trainer={"train_steps": 4}), model_dir, "train")
  return model_dir


def test_eval_reads_the_checkpoint_given_and_refuses_a_missing_one(two_checkpoints):
  model_dir = two_checkpoints
  override = json.dumps(dict(TINY, trainer=dict(TINY["trainer"], validation_steps=1)))
  eval_flags = [f"--model_dir={model_dir}", "--mode=eval", f"--params_override={override}"]
  assert train.main(["train"], _flags(*eval_flags, f"--checkpoint={model_dir}/ckpt-2")) == 0
  with open(os.path.join(model_dir, "eval_results.json")) as f:
    results = json.load(f)
  assert results["global_step"] == 2  # it evaluated the latest, ckpt-4
  assert results["checkpoint"] == f"{model_dir}/ckpt-2"
  missing = os.path.join(model_dir, "no", "such", "ckpt")
  with pytest.raises(FileNotFoundError, match=f"checkpoint {missing} not found .*ckpt.index is missing") as raised:
    train.main(["train"], _flags(*eval_flags, f"--checkpoint={missing}"))
  assert cli.is_user_error(raised.value)  # one `error:` line from the binary
  assert train.main(["train"], _flags(*eval_flags)) == 0  # no flag: the latest
  with open(os.path.join(model_dir, "eval_results.json")) as f:
    assert json.load(f)["global_step"] == 4


@pytest.mark.parametrize("mode", ["train", "train_and_eval"])
def test_the_training_modes_refuse_checkpoint_saying_what_it_is_for(mode, tmp_path, monkeypatch):
  calls = _stub_run_experiment(monkeypatch)
  fv = _flags(f"--model_dir={tmp_path}", f"--mode={mode}", f"--checkpoint={tmp_path}/ckpt-2")
  with pytest.raises(app.UsageError, match=f"--mode={mode}: --checkpoint names the checkpoint that --mode=eval / "
                     "predict reads.*task.init_checkpoint"):
    train.main(["train"], fv)
  assert not calls
  with pytest.raises(ValueError, match="only eval and predict read a given checkpoint"):
    RUN_EXPERIMENT(tiny_params(), str(tmp_path), mode, checkpoint=f"{tmp_path}/ckpt-2")


@pytest.mark.parametrize("model_dir", ["", "   "])
def test_an_empty_model_dir_is_refused_before_anything_is_written(model_dir, tmp_path, monkeypatch):
  monkeypatch.chdir(tmp_path)
  calls = _stub_run_experiment(monkeypatch)
  with pytest.raises(app.UsageError, match=r"--model_dir=.* is empty \(an unset shell variable\?\)"):
    train.main(["train"], _flags(f"--model_dir={model_dir}"))
  with pytest.raises(app.UsageError, match="is empty"):
    train.run(EXPERIMENT, "train", model_dir)
  assert not calls and os.listdir(tmp_path) == []


def test_a_model_dir_that_is_a_file_is_one_error_line(tmp_path, monkeypatch):
  calls = _stub_run_experiment(monkeypatch)
  afile = tmp_path / "afile.yaml"
  afile.write_text("x: 1\n")
  with pytest.raises(NotADirectoryError, match=f"--model_dir={afile} is a file, not a directory") as raised:
    train.main(["train"], _flags(f"--model_dir={afile}"))
  assert cli.is_user_error(raised.value) and not calls
  assert afile.read_text() == "x: 1\n"


def test_params_override_given_twice_is_applied_in_order(tmp_path):
  fv = _flags(f"--model_dir={tmp_path}", "--params_override=trainer.train_steps=7,trainer.learning_rate=0.5",
              "--params_override=trainer.learning_rate=0.001")
  params = train.build_params(fv.experiment, fv.config_file, fv.params_override)
  assert (params.trainer.train_steps, params.trainer.learning_rate) == (7, 0.001)
  # The single-flag forms: one key=value list, YAML / JSON; and the importable API's one string.
  fv = _flags(f"--model_dir={tmp_path}", '--params_override={"trainer": {"train_steps": 9}}')
  assert train.build_params(fv.experiment, fv.config_file, fv.params_override).trainer.train_steps == 9
  assert train.build_params(EXPERIMENT, params_override="trainer.train_steps=8").trainer.train_steps == 8


def test_tpu_with_another_distribution_strategy_is_refused_naming_both(tmp_path):
  gpu_box = tmp_path / "gpu_box.yaml"
  gpu_box.write_text("runtime:\n  distribution_strategy: one_device\n")
  with pytest.raises(app.UsageError, match=r"--tpu=my-tpu but runtime\.distribution_strategy from .*'one_device'.*"
                     "--distribution_strategy=tpu"):
    train.build_params(EXPERIMENT, [str(gpu_box)], tpu="my-tpu")
  with pytest.raises(app.UsageError, match=r"--tpu=my-tpu but --distribution_strategy is 'mirrored'"):
    train.build_params(EXPERIMENT, tpu="my-tpu", distribution_strategy="mirrored")
  params = train.build_params(EXPERIMENT, [str(gpu_box)], tpu="my-tpu", distribution_strategy="tpu")
  assert (params.runtime.tpu, params.runtime.distribution_strategy) == ("my-tpu", "tpu")
  assert train.build_params(EXPERIMENT, tpu="local").runtime.distribution_strategy == "tpu"  # --tpu alone
