"""`task.exit_heads=true`: PABEE's weighted loss over every iteration's head, heads that learn (GLUE, RACE, text)."""

import json
import os

import keras
import numpy as np
import pytest
import tensorflow as tf

from official_albert import train
from official_albert.checkpoints.loading import load_model
from official_albert.training.experiment_config import ConfigError
from official_albert.training.experiment_config import DataConfig
from official_albert.training.experiment_config import ModelConfig
from tasks import glue
from tasks import race
from tasks.classification import exit_heads_loss
from tasks.text.task import TokenClassificationConfig
from tests.tasks import task_steps

LAYERS = 3


def _tiny_model():
  return ModelConfig().replace(vocab_size=200, embedding_size=16, hidden_size=32, num_hidden_layers=LAYERS,
                               num_attention_heads=2, intermediate_size=64, max_position_embeddings=64,
                               hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)


def _cross_entropy(logits, labels):
  logits = logits - logits.max(-1, keepdims=True)
  log_probs = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
  return -log_probs[np.arange(len(labels)), labels]


def test_exit_heads_loss_is_pabees_weighted_mean():
  rng = np.random.RandomState(0)
  exit_logits = rng.normal(size=(5, 4, 3)).astype("float32")
  labels = rng.randint(0, 3, 5)
  per_head = [_cross_entropy(exit_logits[:, i], labels).mean() for i in range(4)]
  expected = sum((i + 1) * l for i, l in enumerate(per_head)) / (1 + 2 + 3 + 4)
  loss = exit_heads_loss(tf.constant(exit_logits), lambda logits: tf.reduce_mean(
      tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits)))
  assert float(loss) == pytest.approx(expected, rel=1e-6)


@pytest.mark.slow
def test_glue_exit_heads_every_iteration_learns():
  params = glue.GlueTaskConfig(
      task_name="sst-2", model=_tiny_model(), classifier_dropout=0.0, exit_heads=True,
      train_data=DataConfig(input_path="dummy", global_batch_size=8, seq_length=12, seed=0))
  task = glue.GlueTask(params)
  keras.utils.set_random_seed(0)
  model = task.build_model()
  assert model.exit_heads
  optimizer = keras.optimizers.Adam(1e-2)
  batch = next(iter(task.build_inputs(params.train_data)))
  features, labels = task.split_inputs(batch)
  step = tf.function(lambda b: task_steps.train_step(task, b, model, optimizer, []))
  first = float(step(batch)["loss"])
  # The step's loss is the PABEE mean of the heads' cross-entropies.
  outputs = model(task.model_inputs(features), training=True)
  label_ids = labels["label_ids"].numpy()
  per_head = [_cross_entropy(outputs["exit_logits"].numpy()[:, i], label_ids).mean() for i in range(LAYERS)]
  expected = sum((i + 1) * l for i, l in enumerate(per_head)) / sum(range(1, LAYERS + 1))
  assert float(task.build_losses(labels, outputs)) == pytest.approx(expected, rel=1e-5)
  for _ in range(40):
    last = float(step(batch)["loss"])
  assert last < 0.2 * first
  # Every iteration's head reproduces the labels it was trained on (random ids, random labels: memorised).
  exit_logits = model(task.model_inputs(features), return_exit_logits=True)["exit_logits"].numpy()
  for i in range(LAYERS):
    assert (np.argmax(exit_logits[:, i], -1) == label_ids).all(), i
  # And the early exit answers them too.
  out = model(task.model_inputs(features), patience=1)
  assert (np.argmax(out["logits"].numpy(), -1) == label_ids).all()
  assert out["exit_iteration"].numpy().min() == 2  # all heads agree: every row leaves after 2 iterations


def test_race_exit_heads_build_and_weight_the_loss():
  params = race.RaceTaskConfig(model=_tiny_model(), classifier_dropout=0.0, exit_heads=True,
                               train_data=DataConfig(global_batch_size=2, seq_length=12))
  task = race.RaceTask(params)
  model = task.build_model()
  rng = np.random.RandomState(1)
  features = {"input_word_ids": rng.randint(5, 200, (2, race.NUM_CHOICES, 12)).astype("int32"),
              "input_mask": np.ones((2, race.NUM_CHOICES, 12), "int32"),
              "input_type_ids": np.zeros((2, race.NUM_CHOICES, 12), "int32")}
  labels = {"label_ids": tf.constant([1, 3])}
  outputs = model(features, training=True)
  assert outputs["exit_logits"].shape == (2, LAYERS, race.NUM_CHOICES)
  per_head = [_cross_entropy(outputs["exit_logits"].numpy()[:, i], np.array([1, 3])).mean() for i in range(LAYERS)]
  expected = sum((i + 1) * l for i, l in enumerate(per_head)) / sum(range(1, LAYERS + 1))
  assert float(task.build_losses(labels, outputs)) == pytest.approx(expected, rel=1e-5)


def test_token_classification_refuses_exit_heads():
  with pytest.raises(ConfigError, match="exit_heads=true is for the sequence-level tasks"):
    TokenClassificationConfig(exit_heads=True).validate()


@pytest.mark.slow
def test_text_classification_exit_heads_through_the_train_binary(tmp_path, spm_model_file):
  """The contract key `task.exit_heads=true`: the model directory holds the exit heads and serves with them."""
  rows = [("a good and fine film", "pos"), ("a bad and dull film", "neg")] * 4
  (tmp_path / "train.csv").write_text("text,label\n" + "".join(f"{t},{l}\n" for t, l in rows))
  model_config = {k: v for k, v in _tiny_model().__dict__.items()}
  model_config.update(preset="", vocab_size=1000)
  data = {"input_path": str(tmp_path / "train.csv"), "global_batch_size": 8, "seq_length": 16, "seed": 1}
  override = {"task": {"model": model_config, "classifier_dropout": 0.0, "exit_heads": True,
                       "spm_model_file": spm_model_file,
                       "train_data": dict(data, is_training=True, drop_remainder=True),
                       "validation_data": dict(data, is_training=False)},
              "trainer": {"train_steps": 2, "steps_per_loop": 2, "checkpoint_interval": 2, "validation_interval": 2,
                          "summary_interval": 2, "validation_steps": -1, "warmup_steps": 0, "learning_rate": 1e-3},
              "runtime": {"distribution_strategy": "one_device", "seed": 3}}
  model_dir = str(tmp_path / "model")
  result = train.run("text_classification", "train_and_eval", model_dir, params_override=json.dumps(override))
  assert "eval_accuracy" in result["eval_results"]
  assert os.path.exists(os.path.join(model_dir, "config.json"))
  model, _ = load_model(model_dir, "classifier")
  assert model.exit_heads and model.num_labels == 2
