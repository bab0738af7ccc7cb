"""Fine-tuning rates that fit the model (issue 44, item 1): the text experiments choose the learning rate by the
model's hidden size and the warm-up as 10% of the run's steps when the run sets neither, log the choice, and keep
what the user sets."""

import json
import logging

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
  # Reading modes and the experiments without the marker (pretraining, the GLUE recipes) are left alone.
  assert _params(tmp_path, mode="eval").trainer.learning_rate == 2e-5
  glue = train.build_params("glue/sst-2", params_override=json.dumps({"task": {"model": TINY}}), mode="train",
                            model_dir=str(tmp_path / "glue"))
  assert not glue.trainer.rates_by_model_size and glue.trainer.learning_rate not in (1e-4, 5e-5)
  assert finetuning_rates.explicit_trainer_keys(["trainer.learning_rate=1e-4,task.x=1"]) == {"learning_rate"}
