"""The fine-tuning recipes against the reference (audit s30): every GLUE / SQuAD / RACE experiment's resolved numbers
pinned to reference §7.4 (a typo in a recipe table passed the suite, whose other tests compare an experiment with
itself); prediction packs at the evaluation's length; a preset keeps the recipe's dropout; and a SQuAD run whose data
or batch make other epochs than the recipe's is warned at start-up with the steps to set."""

import json
import logging

import pytest

from experiments.registry import get_experiment
from experiments.registry import registered_experiments
from official_albert import train
from official_albert.training import model_source
from official_albert.training import train_lib
from official_albert.training.experiment_config import RECIPE_MODEL_FIELDS
from tasks.squad import schedule

# Reference §7.4 (run_glue.sh; README for SQuAD and RACE; Table 14 for squad_v2_paper and the ALBERT dropout):
# (learning rate, train batch, train steps, warm-up, max_seq_length, ALBERT dropout). WNLI is not in run_glue.sh:
# run_classifier's flag defaults. SQuAD's steps: int(87599 / 48 · 2), int(130319 / 48 · 2), int(130319 / 48 · 3),
# warm-up int(0.1 · steps). RACE: the README's (v2) command, ALBERT dropout 0 for the v2 models.
REFERENCE = {
    "glue/sst-2": (1e-5, 32, 20935, 1256, 512, 0.0),
    "glue/mnli": (3e-5, 128, 10000, 1000, 512, 0.0),
    "glue/mnli-mm": (3e-5, 128, 10000, 1000, 512, 0.0),
    "glue/cola": (1e-5, 16, 5336, 320, 512, 0.0),
    "glue/qnli": (1e-5, 32, 33112, 1986, 512, 0.0),
    "glue/qqp": (5e-5, 128, 14000, 1000, 512, 0.1),
    "glue/rte": (3e-5, 32, 800, 200, 512, 0.1),
    "glue/sts-b": (2e-5, 16, 3598, 214, 512, 0.0),
    "glue/mrpc": (2e-5, 32, 800, 200, 512, 0.0),
    "glue/wnli": (5e-5, 32, 1000, 0, 512, 0.1),
    "squad_v1": (5e-5, 48, 3649, 364, 384, 0.0),
    "squad_v2": (5e-5, 48, 5429, 542, 384, 0.0),
    "squad_v2_paper": (3e-5, 48, 8144, 814, 512, 0.0),
    "race": (1e-5, 32, 12000, 1000, 512, 0.0),
}
SAVE_EVERY = {"glue/qnli": 200, "glue/wnli": 1000, "squad_v1": 1000, "squad_v2": 1000, "squad_v2_paper": 1000}


def test_every_finetuning_recipe_is_the_references():
  registered = {n for n in registered_experiments() if n.startswith(("glue/", "squad", "race"))}
  assert registered == set(REFERENCE)
  for name, (lr, batch, steps, warmup, msl, dropout) in REFERENCE.items():
    p = get_experiment(name)
    t, task = p.trainer, p.task
    got = (t.learning_rate, task.train_data.global_batch_size, t.train_steps, t.warmup_steps,
           task.train_data.seq_length, task.model.hidden_dropout_prob)
    assert got == (lr, batch, steps, warmup, msl, dropout), name
    assert task.model.attention_probs_dropout_prob == dropout, name
    assert task.model.classifier_dropout_prob == 0.1, name
    assert task.validation_data.seq_length == msl, name
    assert (t.optimizer, t.weight_decay_rate, t.clip_norm, t.epsilon) == ("adamw", 0.01, 1.0, 1e-6), name
    assert t.checkpoint_interval == SAVE_EVERY.get(name, 100), name


def test_prediction_packs_at_the_evaluations_length():
  for name in registered_experiments():
    task = get_experiment(name).task
    if hasattr(task, "predict_data") and hasattr(task, "validation_data") and hasattr(task, "model"):
      assert task.predict_data.seq_length == task.validation_data.seq_length, name


def _model(tmp_path, experiment, *overrides):
  params = train.build_params(experiment, params_override=list(overrides), mode="train",
                              model_dir=str(tmp_path / "run"))
  return params.task.model


def test_a_preset_keeps_the_recipes_dropout(tmp_path, caplog):
  assert RECIPE_MODEL_FIELDS == model_source.TRAINING_FIELDS
  with caplog.at_level(logging.INFO):
    model = _model(tmp_path, "glue/qqp", "task.model.preset=albert-large-v2")
  assert (model.hidden_size, model.num_hidden_layers) == (1024, 24)  # the shape is the preset's
  assert (model.hidden_dropout_prob, model.attention_probs_dropout_prob) == (0.1, 0.1)  # Table 14's, not 0.0
  assert "preset=albert-large-v2 keeps the recipe's hidden_dropout_prob=0.1" in caplog.text
  model = _model(tmp_path, "glue/mrpc", "task.model.preset=albert-base-v1")
  assert (model.hidden_dropout_prob, model.attention_probs_dropout_prob) == (0.0, 0.0)  # not v1's 0.1


@pytest.mark.parametrize("overrides", [
    ("task.model.preset=albert-large-v2,task.model.hidden_dropout_prob=0.3",),
    ("task.model.hidden_dropout_prob=0.3,task.model.preset=albert-large-v2",),
    ("task.model.hidden_dropout_prob=0.3", "task.model.preset=albert-large-v2"),
    ("task.model.preset=albert-large-v2", "task.model.hidden_dropout_prob=0.3"),
])
def test_an_explicit_dropout_wins_over_the_preset_in_any_order(tmp_path, overrides):
  model = _model(tmp_path, "glue/qqp", *overrides)
  assert (model.hidden_size, model.hidden_dropout_prob, model.attention_probs_dropout_prob) == (1024, 0.3, 0.1)


def test_squad_steps_are_checked_against_the_recipes_epochs(tmp_path):
  params = train.build_params("squad_v1", params_override="task.train_data.global_batch_size=16", mode="train",
                              model_dir=str(tmp_path / "run"))
  assert params.task.train_epochs == 2.0
  message = schedule.epochs_warning(params, 1000, "mine.json")
  assert "trainer.train_steps=3649 at task.train_data.global_batch_size=16 trains 58.38 epochs" in message
  assert f"trainer.train_steps={int(1000 / 16 * 2)},trainer.warmup_steps={int(int(1000 / 16 * 2) * 0.1)}" in message
  assert "task.train_epochs=0" in message
  reference = get_experiment("squad_v1")
  assert schedule.epochs_warning(reference, 87599, "train-v1.1.json") is None  # the recipe's own data and batch
  assert schedule.epochs_warning(get_experiment("squad_v2_paper"), 130319, "train-v2.0.json") is None
  assert schedule.epochs_warning(params.override("task.train_epochs=0"), 1000, "mine.json") is None


def test_a_training_run_warns_at_start_up_from_the_records_count(tmp_path, caplog):
  records = tmp_path / "train.tf_record"
  records.write_bytes(b"")
  (tmp_path / "train.meta.json").write_text(json.dumps({"num_examples": 1000, "is_training": True}))
  params = get_experiment("squad_v1").override({"task": {"train_data": {"input_path": str(records)}}})
  from official_albert.training import base_task  # noqa: PLC0415 (the registered tasks come with experiments)
  task = base_task.create_task(params.task)
  with caplog.at_level(logging.WARNING):
    train_lib.prepare_inputs(params, "train", task)
  assert "trains 175.15 epochs of the 1000 training questions" in caplog.text
  assert "trainer.train_steps=41,trainer.warmup_steps=4" in caplog.text
  caplog.clear()
  with caplog.at_level(logging.WARNING):
    train_lib.prepare_inputs(params, "eval", task)  # (reads no training data)
    task.check_schedule(params, "predict")
  assert "training questions" not in caplog.text
