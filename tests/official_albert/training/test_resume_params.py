"""A training run into a model_dir that holds a checkpoint: run-defining params must be the recorded ones.

`train_lib.check_resume_params` runs before anything is built, so these tests need only a real (one-variable)
checkpoint and a params.yaml, no model.
"""

import logging
import re

import pytest
import tensorflow as tf
import yaml

from official_albert.training import resume_params
from official_albert.training import train_lib
from official_albert.training.experiment_config import save_params_yaml
from official_albert.training.hyperparams import ConfigError
from tests.official_albert.training.test_train_lib import tiny_params

REFUSED = [
    ({"trainer": {"optimizer": "adamw"}}, "trainer.optimizer", "'lamb'", "'adamw'"),
    ({"trainer": {"learning_rate": 0.5}}, "trainer.learning_rate", "0.01", "0.5"),
    ({"trainer": {"warmup_steps": 5}}, "trainer.warmup_steps", "2", "5"),
    ({"trainer": {"loss_normalization": "per_replica"}}, "trainer.loss_normalization", "'global_batch'",
     "'per_replica'"),
    ({"runtime": {"seed": 7}}, "runtime.seed", "42", "7"),
    ({"task": {"train_data": {"global_batch_size": 8}}}, "task.train_data.global_batch_size", "4", "8"),
    ({"task": {"train_data": {"input_path": "other/*.tfrecord"}}}, "task.train_data.input_path", "'dummy'",
     "'other/*.tfrecord'"),
    ({"task": {"sentence_loss_weight": 0.0}}, "task.sentence_loss_weight", "1.0", "0.0"),
]
ALLOWED = [
    {"trainer": {"steps_per_loop": 1, "checkpoint_interval": 4, "summary_interval": 1, "validation_interval": 4,
                 "validation_steps": 1, "max_to_keep": 2, "eval_at_start": True}},
    {"task": {"validation_data": {"global_batch_size": 2, "input_path": "eval/*.tfrecord"}}},
    {"runtime": {"jit_compile": True, "distribution_strategy": "off"}},
]


def _resumable_dir(tmp_path, params=None):
  """A model_dir holding a checkpoint and the params.yaml of `params` (default: the tiny run)."""
  model_dir = str(tmp_path / "run")
  tf.train.Checkpoint(v=tf.Variable(1.0)).save(f"{model_dir}/ckpt")
  save_params_yaml(params or tiny_params(), model_dir)
  return model_dir


def _recorded(model_dir):
  with open(f"{model_dir}/params.yaml") as f:
    return yaml.safe_load(f)


@pytest.mark.parametrize("override,key,old,new", REFUSED, ids=[r[1] for r in REFUSED])
def test_refused_change_names_key_values_and_fix(tmp_path, override, key, old, new):
  model_dir = _resumable_dir(tmp_path)
  before = _recorded(model_dir)
  with pytest.raises(ConfigError) as raised:
    train_lib.run_experiment(tiny_params(**override), model_dir, "train")
  message = str(raised.value)
  assert f"{key}: {old} (params.yaml) -> {new} (this run)" in message
  assert "new --model_dir" in message and "allow_params_change" in message
  assert message.count("(params.yaml) ->") == 1  # only the changed key
  assert _recorded(model_dir) == before  # params.yaml still describes the weights


def test_every_refused_key_is_listed(tmp_path):
  model_dir = _resumable_dir(tmp_path)
  params = tiny_params(trainer={"optimizer": "adamw", "learning_rate": 0.5}, runtime={"seed": 7})
  with pytest.raises(ConfigError, match=r"trainer.optimizer.*\n.*trainer.learning_rate.*\n.*runtime.seed"):
    train_lib.check_resume_params(params, model_dir, "train_and_eval")


@pytest.mark.parametrize("override", ALLOWED)
def test_allowed_changes_pass(tmp_path, override):
  model_dir = _resumable_dir(tmp_path)
  train_lib.check_resume_params(tiny_params(**override), model_dir, "train")


def test_train_steps_change_warns(tmp_path, caplog):
  model_dir = _resumable_dir(tmp_path)
  with caplog.at_level(logging.WARNING, logger=resume_params.__name__):
    train_lib.check_resume_params(tiny_params(trainer={"train_steps": 12}), model_dir, "train")  # (not refused)
    resume_params.warn_schedule_change(tiny_params(trainer={"train_steps": 12}), model_dir, "train")
  assert "trainer.train_steps 6 -> 12" in caplog.text and "schedule" in caplog.text


def test_train_steps_change_takes_its_derived_warm_up_along(tmp_path, caplog):
  """The fine-tuning recipes derive warmup_steps from train_steps (10%, `finetuning_rates.fit_rates`): extending a run
  moves both, and was refused naming warmup_steps (review of 0256a3b). An explicit warm-up change alone is refused."""
  model_dir = _resumable_dir(tmp_path, tiny_params(trainer={"train_steps": 10, "warmup_steps": 1}))
  with caplog.at_level(logging.WARNING):
    train_lib.check_resume_params(tiny_params(trainer={"train_steps": 20, "warmup_steps": 2}), model_dir, "train")
    resume_params.warn_schedule_change(tiny_params(trainer={"train_steps": 20, "warmup_steps": 2}), model_dir, "train")
  assert "trainer.warmup_steps 1 -> 2" in caplog.text
  with pytest.raises(ConfigError, match=r"trainer.warmup_steps: 1 \(params.yaml\) -> 2"):
    train_lib.check_resume_params(tiny_params(trainer={"train_steps": 10, "warmup_steps": 2}), model_dir, "train")


def test_an_empty_list_is_unset_like_none(tmp_path):
  """task.labels=[] means "labels.json's" in a trained model_dir (the text tasks): not a change of labels; another
  list is."""
  model_dir = _resumable_dir(tmp_path)
  recorded = dict(_recorded(model_dir), task={"labels": ["neg", "pos"]})
  with open(f"{model_dir}/params.yaml", "w") as f:
    yaml.safe_dump(recorded, f)

  class Given:  # (check_resume_params reads the params through to_yaml only)
    def __init__(self, labels):
      self.data = dict(recorded, task={"labels": labels})

    def to_yaml(self):
      return yaml.safe_dump(self.data)
  train_lib.check_resume_params(Given([]), model_dir, "train")
  with pytest.raises(ConfigError, match=r"task.labels: \['neg', 'pos'\] \(params.yaml\) -> \['a', 'b'\]"):
    train_lib.check_resume_params(Given(["a", "b"]), model_dir, "train")


def test_same_params_pass_silently(tmp_path, caplog):
  model_dir = _resumable_dir(tmp_path)
  with caplog.at_level(logging.WARNING, logger=resume_params.__name__):
    train_lib.check_resume_params(tiny_params(), model_dir, "train")
    resume_params.warn_schedule_change(tiny_params(), model_dir, "train")
  assert not caplog.text


def test_fresh_model_dir_is_not_checked(tmp_path):
  model_dir = str(tmp_path / "fresh")
  save_params_yaml(tiny_params(), model_dir)  # a params.yaml but no checkpoint: nothing to resume
  train_lib.check_resume_params(tiny_params(trainer={"optimizer": "adamw"}), model_dir, "train")
  train_lib.check_resume_params(tiny_params(), str(tmp_path / "absent"), "train")


@pytest.mark.parametrize("mode", ["eval", "predict"])
def test_eval_and_predict_are_not_checked(tmp_path, mode):
  model_dir = _resumable_dir(tmp_path)
  train_lib.check_resume_params(tiny_params(trainer={"optimizer": "adamw"}), model_dir, mode)


def test_allow_params_change_continues_with_a_warning(tmp_path, caplog):
  model_dir = _resumable_dir(tmp_path)
  with caplog.at_level(logging.WARNING, logger=train_lib.__name__):
    train_lib.check_resume_params(tiny_params(runtime={"seed": 7}), model_dir, "train", allow_change=True)
  assert "runtime.seed: 42 (params.yaml) -> 7 (this run)" in caplog.text


def test_squads_epoch_check_can_be_switched_off_at_a_resume(tmp_path):
  # The start-up warning (tasks/squad/schedule.py) says `task.train_epochs=0` keeps the run's own steps; it changes
  # no weight, so a resume that sets it is accepted.
  from official_albert import train  # noqa: PLC0415
  squad = train.build_params("squad_v1")
  model_dir = _resumable_dir(tmp_path, squad)
  train_lib.check_resume_params(squad.override({"task": {"train_epochs": 0.0}}), model_dir, "train")


@pytest.mark.parametrize("override, key, old, new", [
    ({"trainer": {"exclude_from_weight_decay": []}}, "trainer.exclude_from_weight_decay", "['LayerNorm', 'bias']",
     "[]"),
    ({"task": {"train_data": {"seed": None}}}, "task.train_data.seed", "42", "None"),
    ({"task": {"model": {"layers_to_keep": []}}}, "task.model.layers_to_keep", "[0]", "[]"),
], ids=["weight-decay-exclusions", "data-seed", "layers-to-keep"])
def test_none_or_empty_outside_the_task_settings_is_a_change(tmp_path, override, key, old, new):
  """Only a task's own setting (task.<name>) left None / [] means "as the model directory records". Before, any key
  was exempt: decaying LayerNorm and biases from the resume on, or another data seed, trained on without a word."""
  base = {"task": {"train_data": {"seed": 42}, "model": {"layers_to_keep": [0]}},
          "trainer": {"exclude_from_weight_decay": ["LayerNorm", "bias"]}}
  model_dir = _resumable_dir(tmp_path, tiny_params(**base))
  train_lib.check_resume_params(tiny_params(**base), model_dir, "train")
  section, values = next(iter(override.items()))
  given = tiny_params(**dict(base, **{section: dict(base[section], **values)}))
  with pytest.raises(ConfigError, match=rf"{key}: {re.escape(old)} \(params.yaml\) -> {re.escape(new)} \(this run\)"):
    train_lib.check_resume_params(given, model_dir, "train")
