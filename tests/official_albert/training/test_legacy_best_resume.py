"""A best_checkpoint.json written before `chosen_on` was recorded, in a model_dir a newer version resumes (audit s33 F).

Such a best is judged by what model_dir's params.yaml says it was chosen on (`evaluation.recorded_chosen_on`, read at
each evaluation). A training run rewrites params.yaml with its own params before it evaluates, so a resume evaluating
on another file (validation_data is free to change at a resume) read its own input back as the best's and ranked
its numbers against the best chosen on the old dev set: a better score on an easier file replaced model.ckpt-best.
The run now writes the recorded evaluation into the best's file before it rewrites params.yaml.

The files are written here as versions before 2026-12-01 wrote them (no `chosen_on`; no experiment comment line).
"""

import json
import types

import pytest
import tensorflow as tf
import yaml

from official_albert.training import checkpointing
from official_albert.training import evaluation
from official_albert.training import train_lib
from tests.official_albert.training.test_train_lib import tiny_params

OLD_DEV = "/data/old/dev.csv"
OLD_BEST = {"global_step": 2, "metric": "eval_accuracy", "results": {"eval_accuracy": 0.5, "global_step": 2},
            "source": "runs/tc/ckpt-2", "value": 0.5}


def _write_old_dir(model_dir, best=OLD_BEST, dev=OLD_DEV):
  model_dir.mkdir(parents=True, exist_ok=True)
  (model_dir / "params.yaml").write_text(yaml.safe_dump({"task": {
      "train_data": {"input_path": "/data/old/train.csv"}, "validation_data": {"input_path": dev}}}))
  (model_dir / "best_checkpoint.json").write_text(json.dumps(best, indent=2))


def _best(model_dir):
  return json.loads((model_dir / "best_checkpoint.json").read_text())


def _trainer(model_dir, is_chief=True):
  return types.SimpleNamespace(model_dir=str(model_dir), is_chief=is_chief,
                               task=types.SimpleNamespace(name="text_classification"))


def test_the_recorded_evaluation_is_kept_before_params_yaml_is_rewritten(tmp_path):
  _write_old_dir(tmp_path)
  evaluation.record_legacy_chosen_on(_trainer(tmp_path))
  best = _best(tmp_path)
  old_on = {"task": "text_classification", "validation_input": evaluation.input_key(OLD_DEV)}
  assert best == dict(OLD_BEST, chosen_on=old_on)
  # The resume rewrites params.yaml with its own validation file, then evaluates on it: not ranked against the best.
  new_dev = str(tmp_path / "easy_dev.csv")
  _write_old_dir(tmp_path, best=best, dev=new_dev)
  weights, step = tf.Variable(0.0), tf.Variable(4, dtype=tf.int64)
  keeper = checkpointing.CheckpointKeeper(str(tmp_path), tf.distribute.get_strategy(),
                                          {"model": tf.train.Checkpoint(w=weights)}, step, max_to_keep=5)
  keeper.save()
  ours = {"task": "text_classification", "validation_input": evaluation.input_key(new_dev)}
  assert not keeper.update_best({"eval_accuracy": 1.0}, "eval_accuracy", True, chosen_on=ours,
                                legacy_chosen_on=evaluation.recorded_chosen_on(str(tmp_path), "text_classification"))
  assert _best(tmp_path)["global_step"] == 2


@pytest.mark.parametrize("case", ["recorded", "non_chief", "no_params"])
def test_nothing_is_written_when_there_is_nothing_to_record(tmp_path, case):
  _write_old_dir(tmp_path, best=dict(OLD_BEST, chosen_on={"task": "x", "validation_input": "y"})
                 if case == "recorded" else OLD_BEST)
  if case == "no_params":
    (tmp_path / "params.yaml").unlink()
  before = (tmp_path / "best_checkpoint.json").read_text()
  evaluation.record_legacy_chosen_on(_trainer(tmp_path, is_chief=case != "non_chief"))
  assert (tmp_path / "best_checkpoint.json").read_text() == before


class _Stop(Exception):
  pass


def test_a_training_run_records_it_before_it_rewrites_params_yaml(tmp_path, monkeypatch):
  """run_experiment's order: the legacy best is given its record while params.yaml is still the old run's."""
  _write_old_dir(tmp_path, best=dict(OLD_BEST, metric="masked_lm_accuracy"))
  seen = []

  def save_params_yaml(params, model_dir):
    seen.append(_best(tmp_path).get("chosen_on"))
    raise _Stop()

  monkeypatch.setattr(train_lib, "save_params_yaml", save_params_yaml)
  with pytest.raises(_Stop):
    train_lib.run_experiment(tiny_params(), str(tmp_path), "train")
  assert seen and seen[0]["validation_input"] == evaluation.input_key(OLD_DEV)
