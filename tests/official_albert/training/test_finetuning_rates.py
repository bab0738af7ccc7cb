"""Fine-tuning rates that fit the model (issue 44, item 1): the text experiments choose the learning rate by the
model's hidden size and the warm-up as 10% of the run's steps when the run sets neither, log the choice, and keep
what the user sets. The paper's recipes (GLUE, SQuAD, RACE) stay exactly for the paper's sizes; one's own small model
gets the size-based rates there too."""

import json
import logging

from experiments.registry import get_experiment
from official_albert import train
from official_albert.training import finetuning_rates

TINY = {"preset": "", "vocab_size": 1000, "embedding_size": 16, "hidden_size": 128, "num_hidden_layers": 2,
        "num_attention_heads": 2, "intermediate_size": 256, "max_position_embeddings": 64}


def _params(tmp_path, model=TINY, mode="train", **trainer):
  override = {"task": {"model": model}, "trainer": dict({"train_steps": 150}, **trainer)}
  return train.build_params("text_classification", params_override=json.dumps(override), mode=mode,
                            model_dir=str(tmp_path / "run"))


def test_a_small_model_gets_its_rates_when_none_are_set(tmp_path, caplog):
  with caplog.at_level(logging.INFO):
    params = _params(tmp_path)
  assert (params.trainer.learning_rate, params.trainer.warmup_steps) == (1e-4, 15)
  assert "Fine-tuning rates for hidden_size 128: learning_rate 0.0001, warmup_steps 15" in caplog.text
  assert _params(tmp_path, model=dict(TINY, hidden_size=384, intermediate_size=512)).trainer.learning_rate == 5e-5


def test_set_rates_and_base_models_keep_theirs(tmp_path, caplog):
  with caplog.at_level(logging.INFO):
    params = _params(tmp_path, learning_rate=3e-4)
  assert (params.trainer.learning_rate, params.trainer.warmup_steps) == (3e-4, 15)
  assert "learning_rate 0.0003 (set), warmup_steps 15" in caplog.text
  params = _params(tmp_path, learning_rate=3e-4, warmup_steps=0)
  assert (params.trainer.learning_rate, params.trainer.warmup_steps) == (3e-4, 0)
  base = dict(TINY, hidden_size=768, intermediate_size=3072, num_attention_heads=12)
  params = _params(tmp_path, model=base, train_steps=1000)
  assert (params.trainer.learning_rate, params.trainer.warmup_steps) == (2e-5, 100)  # the reference's recipe
  # Reading modes are left alone.
  assert _params(tmp_path, mode="eval").trainer.learning_rate == 2e-5
  assert finetuning_rates.explicit_trainer_keys(["trainer.learning_rate=1e-4,task.x=1"]) == {"learning_rate"}


def _paper(tmp_path, experiment, model=None, **trainer):
  override = {"task": {"model": model} if model else {}, "trainer": trainer}
  return train.build_params(experiment, params_override=json.dumps(override), mode="train",
                            model_dir=str(tmp_path / experiment.replace("/", "_")))


def test_the_paper_recipes_stay_for_the_paper_sizes(tmp_path, caplog):
  """GLUE / SQuAD / RACE keep the paper's per-task rates, exactly, for a model of the paper's shapes."""
  large = {"hidden_size": 1024, "num_hidden_layers": 24, "num_attention_heads": 16, "intermediate_size": 4096}
  for experiment, model in (("glue/sst-2", None), ("squad_v1", None), ("race", None), ("glue/rte", large)):
    recipe = get_experiment(experiment).trainer
    with caplog.at_level(logging.INFO):
      params = _paper(tmp_path, experiment, model)
    assert params.trainer == recipe, experiment
  assert "Fine-tuning rates: the paper's recipe for albert-large (learning_rate 3e-05, warmup_steps 200)" in caplog.text


def test_a_small_own_model_gets_size_based_rates_on_the_paper_tasks(tmp_path, caplog):
  with caplog.at_level(logging.INFO):
    params = _paper(tmp_path, "glue/sst-2", TINY, train_steps=150)
  assert (params.trainer.learning_rate, params.trainer.warmup_steps) == (1e-4, 15)  # the recipe's: 1e-5, 1,256
  assert ("learning_rate 0.0001, warmup_steps 15 (chosen by the model's size and the run's 150 steps where not set; "
          "the experiment's own rates are the paper's recipe for albert-base and larger") in caplog.text
  wider = dict(TINY, hidden_size=384, intermediate_size=512)
  assert _paper(tmp_path, "race", wider).trainer.learning_rate == 5e-5  # RACE's own: 1e-5
  assert _paper(tmp_path, "squad_v2", TINY).trainer.learning_rate == 1e-4  # SQuAD's own: 5e-5


def test_a_rate_the_user_sets_is_never_overridden(tmp_path):
  params = _paper(tmp_path, "glue/sst-2", TINY, train_steps=150, learning_rate=3e-5)
  assert (params.trainer.learning_rate, params.trainer.warmup_steps) == (3e-5, 15)
  params = _paper(tmp_path, "squad_v1", TINY, learning_rate=3e-5, warmup_steps=7)
  assert (params.trainer.learning_rate, params.trainer.warmup_steps) == (3e-5, 7)
  params = _paper(tmp_path, "glue/sst-2", None, learning_rate=4e-5)  # albert-base: the set rate, the recipe's warm-up
  assert (params.trainer.learning_rate, params.trainer.warmup_steps) == (4e-5, 1256)
