"""SQuAD's steps are resolved from `task.train_epochs` and the run's training questions (reference §5.2).

Before: the recipe's `trainer.train_steps` (3,649 = 2 epochs of SQuAD v1.1's 87,599 questions at batch 48) were
trained whatever the run's file and batch, with a start-up warning only: 175 epochs of a 1,000-question file, 0.67
epoch at batch 16. The reference computes int(questions / batch · epochs), warm-up 10% of them; explicit steps win.
"""

import json
import logging

import pytest
import tensorflow as tf

from experiments.registry import get_experiment
from official_albert.training import base_task
from official_albert.training import resume_params
from official_albert.training import train_lib
from official_albert.training.experiment_config import save_params_yaml
from tasks.squad import schedule


def _records(tmp_path, questions):
  records = tmp_path / "train.tf_record"
  records.write_bytes(b"")
  (tmp_path / "train.meta.json").write_text(json.dumps({"num_examples": questions, "is_training": True}))
  return str(records)


def _start(params, mode="train"):
  train_lib.prepare_inputs(params, mode, base_task.create_task(params.task))
  return params.trainer.train_steps, params.trainer.warmup_steps


def _squad(tmp_path, experiment="squad_v1", questions=1000, **overrides):
  params = get_experiment(experiment).override({"task": {"train_data": {"input_path": _records(tmp_path, questions)}}})
  return params.override(overrides) if overrides else params


def test_the_recipes_steps_become_the_runs_epochs(tmp_path, caplog):
  with caplog.at_level(logging.WARNING):
    assert _start(_squad(tmp_path)) == (41, 4)  # int(1000 / 48 * 2), int(41 * 0.1)
  assert "trains 175.15 epochs of the 1000 training questions" in caplog.text
  assert "trainer.train_steps=41,trainer.warmup_steps=4" in caplog.text
  # At batch 16 on SQuAD v1.1 itself: the reference's 10,949 steps (2 epochs), not 3,649 (0.67 epoch).
  batch16 = {"task.train_data.global_batch_size": 16}
  assert _start(_squad(tmp_path, questions=87599, **batch16)) == (10949, 1094)
  assert _start(_squad(tmp_path, "squad_v2_paper", 130319, **batch16)) == (24434, 2443)
  # The user's epochs (3 instead of the recipe's 2) with the recipe's steps.
  assert _start(_squad(tmp_path, **{"task.train_epochs": 3.0})) == (62, 6)


def test_the_reference_data_at_the_recipes_batch_keeps_its_steps(tmp_path):
  assert _start(_squad(tmp_path, questions=87599)) == (3649, 364)
  assert _start(_squad(tmp_path, "squad_v2", 130319)) == (5429, 542)
  assert _start(_squad(tmp_path, "squad_v2_paper", 130319)) == (8144, 814)


def test_explicit_steps_win(tmp_path, caplog):
  with caplog.at_level(logging.WARNING):
    assert _start(_squad(tmp_path, **{"trainer.train_steps": 2})) == (2, 364)
  assert "trainer.train_steps=2 at task.train_data.global_batch_size=48 trains 0.10 epochs" in caplog.text
  assert _start(_squad(tmp_path, **{"trainer.warmup_steps": 7})) == (41, 7)  # an explicit warm-up stays
  assert _start(_squad(tmp_path, **{"task.train_epochs": 0.0})) == (3649, 364)  # off: the recipe's as set
  caplog.clear()
  with caplog.at_level(logging.WARNING):
    assert _start(_squad(tmp_path), mode="eval") == (3649, 364)  # (reads no training data)
  assert "training questions" not in caplog.text


@pytest.mark.parametrize("warmup", [364, 365])  # the recipe's int(10%), finetuning_rates' round(10%)
def test_a_warmup_derived_from_the_recipes_steps_follows_them(tmp_path, warmup):
  params = _squad(tmp_path, **{"trainer.warmup_steps": warmup})
  changes, message = schedule.resolve_steps(params, 5000, "mine.json")
  assert changes == {"train_steps": 208, "warmup_steps": 20} and "trainer.train_steps=208" in message
  assert schedule.resolve_steps(params, 9, "tiny.json")[0]["train_steps"] == 1  # (at least one step)


class _Built(Exception):
  """Raised where run_experiment builds its Trainer: every start-up check ran."""


def test_a_resume_of_resolved_steps_is_no_change(tmp_path, caplog, monkeypatch):
  """A resumed run's recipe steps resolve to the steps params.yaml records (41): no "train_steps 41 -> 3649" warning
  (the comparison is made once the task resolved them, `resume_params.warn_schedule_change`); a real change warns."""
  model_dir = str(tmp_path / "run")
  tf.train.Checkpoint(v=tf.Variable(1.0)).save(f"{model_dir}/ckpt")
  first = _squad(tmp_path)
  _start(first)
  save_params_yaml(first, model_dir)  # (its record: 41 / 4)
  for epochs, warned in ((2.0, False), (3.0, True)):
    params = _squad(tmp_path, **{"task.train_epochs": epochs})
    monkeypatch.setattr(train_lib, "Trainer", lambda *args, **kwargs: (_ for _ in ()).throw(_Built()))
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger=resume_params.__name__), pytest.raises(_Built):
      train_lib.run_experiment(params, model_dir, "train")  # (not refused: its start-up up to the Trainer)
    resumed = " ".join(r.getMessage() for r in caplog.records if r.name == resume_params.__name__)
    assert ("trainer.train_steps 41 -> 62" in resumed) == warned, resumed
    assert "3649" not in resumed


def test_the_callers_config_keeps_the_recipes_steps(tmp_path, monkeypatch):
  """The resolution changes the run's copy of the config only: a notebook's second run from the same config (another
  file) resolves its own steps (review of 4399b8f: with mixed_precision_dtype set, the first run's 41 stayed)."""
  params = _squad(tmp_path, **{"runtime.mixed_precision_dtype": "float32"})
  monkeypatch.setattr(train_lib, "Trainer", lambda *args, **kwargs: (_ for _ in ()).throw(_Built()))
  with pytest.raises(_Built):
    train_lib.run_experiment(params, str(tmp_path / "run"), "train")
  assert (params.trainer.train_steps, params.trainer.warmup_steps) == (3649, 364)
