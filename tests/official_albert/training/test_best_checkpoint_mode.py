"""`trainer.best_checkpoint_mode`: which direction of `trainer.best_checkpoint_metric` keeps `model.ckpt-best`.

The default was max, so `best_checkpoint_metric=eval_loss` (or pretraining's `loss`, STS-B's `MSE`) kept the
checkpoint with the highest loss. The default is now auto: min for a loss-like name, max for any other; max / min
as written (an explicit max for a loss is warned about, and old params.yaml files that record max keep it).
"""

import csv
import json
import logging
import os
import random
import types

import pytest
import yaml

from official_albert import train
from official_albert.training import evaluation
from official_albert.training import experiment_config
from official_albert.training.experiment_config import ExperimentConfig
from official_albert.training.experiment_config import TrainerConfig
from official_albert.training.hyperparams import ConfigError

WORDS = "alpha beta gamma delta epsilon zeta theta iota kappa lambda sigma omega river stone cloud field".split()
TINY_MODEL = {"preset": "", "vocab_size": 1000, "embedding_size": 16, "hidden_size": 32, "num_hidden_layers": 1,
              "num_attention_heads": 2, "intermediate_size": 64, "max_position_embeddings": 32,
              "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0}


def _direction(metric, mode, task_metric="eval_accuracy"):
  """(name, higher is better) the Evaluator ranks by, for these trainer settings."""
  trainer = types.SimpleNamespace(
      task=types.SimpleNamespace(best_metric=task_metric, best_metric_higher_is_better=True),
      params=types.SimpleNamespace(trainer=types.SimpleNamespace(best_checkpoint_metric=metric,
                                                                 best_checkpoint_mode=mode)))
  return evaluation.Evaluator(trainer).best_metric()


def test_auto_is_the_default_and_picks_min_for_loss_like_names():
  assert TrainerConfig().best_checkpoint_mode == "auto"
  for name in ("eval_loss", "loss", "masked_lm_loss", "MSE", "mse", "eval_RMSE", "Loss"):
    assert _direction(name, "auto") == (name, False), name
  for name in ("eval_accuracy", "pearson", "spearman", "f1", "best_f1", "ndcg@10", "global_step"):
    assert _direction(name, "auto") == (name, True), name
  # Explicit modes are kept as written; no metric named: the task's own metric and direction.
  assert _direction("eval_loss", "max") == ("eval_loss", True)
  assert _direction("eval_accuracy", "min") == ("eval_accuracy", False)
  assert _direction("", "min") == ("eval_accuracy", True)


def test_an_unknown_mode_is_refused_naming_the_key():
  with pytest.raises(ConfigError, match=r"trainer\.best_checkpoint_mode='lowest' is not one of \('auto', 'max', "
                                        r"'min'\)"):
    ExperimentConfig().override({"trainer": {"best_checkpoint_mode": "lowest"}})


def test_an_old_params_yaml_that_records_max_keeps_max_with_a_warning(tmp_path, caplog):
  """params.yaml files written when max was the default record it: they load, and mean max."""
  path = tmp_path / "params.yaml"
  path.write_text(yaml.safe_dump({"trainer": {"best_checkpoint_metric": "eval_loss", "best_checkpoint_mode": "max"}}))
  params = experiment_config.load_params_yaml(ExperimentConfig(), str(path))
  assert params.trainer.best_checkpoint_mode == "max"
  assert _direction(params.trainer.best_checkpoint_metric, params.trainer.best_checkpoint_mode)[1] is True
  with caplog.at_level(logging.WARNING):
    assert evaluation.check_best_checkpoint_mode(params.trainer) == "eval_loss"
  assert "best_checkpoint_mode=max keeps the checkpoint with the HIGHEST eval_loss" in caplog.text
  caplog.clear()
  with caplog.at_level(logging.WARNING):
    evaluation.check_best_checkpoint_mode(params.trainer.replace(best_checkpoint_mode="auto"))
    evaluation.check_best_checkpoint_mode(params.trainer.replace(best_checkpoint_metric="f1"))
  assert "best_checkpoint_mode" not in caplog.text


@pytest.mark.slow
def test_train_and_eval_keeps_the_checkpoint_with_the_lowest_eval_loss(tmp_path, spm_model_file):
  """best_checkpoint_metric=eval_loss, no mode: model.ckpt-best is the argmin of the eval history (it was the argmax:
  the auditor's run kept step 2, the highest loss)."""
  rng = random.Random(2)
  rows = [(" ".join(rng.choice(WORDS) for _ in range(6)), str(i % 2)) for i in range(40)]
  for name, part in (("train.csv", rows[:32]), ("dev.csv", rows[32:])):
    with open(tmp_path / name, "w", newline="") as f:
      csv.writer(f).writerows([("text", "label")] + part)
  data = {"global_batch_size": 8, "seq_length": 32, "seed": 7}
  override = {
      "task": {"model": TINY_MODEL, "spm_model_file": spm_model_file,
               "train_data": dict(data, input_path=str(tmp_path / "train.csv")),
               "validation_data": dict(data, input_path=str(tmp_path / "dev.csv"), is_training=False,
                                       drop_remainder=False)},
      "trainer": {"train_steps": 6, "steps_per_loop": 2, "checkpoint_interval": 2, "validation_interval": 2,
                  "summary_interval": 2, "validation_steps": -1, "warmup_steps": 0, "learning_rate": 3e-3,
                  "best_checkpoint_metric": "eval_loss"},
      "runtime": {"distribution_strategy": "one_device", "seed": 3}}
  model_dir = str(tmp_path / "model")
  result = train.run("text_classification", "train_and_eval", model_dir, params_override=json.dumps(override))
  history = [(step, r["eval_loss"]) for step, r in result["eval_history"]]
  assert [step for step, _ in history] == [2, 4, 6]
  assert len({loss for _, loss in history}) == 3, history  # distinct, so argmin and argmax differ
  best_step, best_loss = min(history, key=lambda e: (e[1], e[0]))
  best = json.load(open(os.path.join(model_dir, "best_checkpoint.json")))
  assert (best["metric"], best["global_step"], best["value"]) == ("eval_loss", best_step, pytest.approx(best_loss))
  saved = yaml.safe_load(open(os.path.join(model_dir, "params.yaml")))
  assert saved["trainer"]["best_checkpoint_mode"] == "auto"
