"""Checkpoints with and without exit heads load into each other; every format holds them; missing ones are named."""

import numpy as np
import pytest
import tensorflow as tf

from official_albert import AlbertConfig
from official_albert.checkpoints import native
from official_albert.checkpoints.convert import convert
from official_albert.checkpoints.loading import load_model
from official_albert.checkpoints.names import CheckpointMismatchError
from official_albert.checkpoints.names import tf1_variable_map
from official_albert.modeling import early_exit
from official_albert.modeling.models import AlbertClassifier
from official_albert.modeling.models import AlbertMultipleChoice

CONFIG = AlbertConfig(vocab_size=97, embedding_size=16, hidden_size=32, num_hidden_layers=3, num_attention_heads=4,
                      intermediate_size=37, max_position_embeddings=64)
X = {"input_word_ids": np.arange(5, 25, dtype="int32").reshape(2, 10), "input_mask": np.ones((2, 10), "int32")}


def _weights(model):
  return {name: v.numpy() for name, v in tf1_variable_map(model).items()}


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
  root = tmp_path_factory.mktemp("exit_ckpt")
  tf.keras.utils.set_random_seed(2)
  with_heads = AlbertClassifier(CONFIG, num_labels=3, exit_heads=True)
  without = AlbertClassifier(CONFIG, num_labels=3)
  native.save_pretrained(with_heads, str(root / "with"))
  native.save_pretrained(without, str(root / "without"))
  return {"root": root, "with": with_heads, "without": without}


def test_tf1_names_of_the_exit_heads(saved):
  names = sorted(n for n in tf1_variable_map(saved["with"]) if n.startswith("exit_heads/"))
  assert names == [f"exit_heads/layer_{l}/output_{leaf}" for l in range(2) for leaf in ("bias", "weights")]


def test_a_directory_with_exit_heads_loads_with_them(saved):
  model, summary = load_model(str(saved["root"] / "with"), "classifier")
  assert model.exit_heads and summary["missing_allowed"] == []
  expected = _weights(saved["with"])
  for name, value in _weights(model).items():
    np.testing.assert_array_equal(value, expected[name])
  np.testing.assert_array_equal(model(X, patience=1)["logits"].numpy(), saved["with"](X, patience=1)["logits"].numpy())


def test_exit_heads_off_skips_them_and_keeps_the_final_head(saved):
  model, summary = load_model(str(saved["root"] / "with"), "classifier", exit_heads=False)
  assert not model.exit_heads
  assert any("another head" in reason for reason in summary["skipped"].values())
  np.testing.assert_array_equal(model(X)["logits"].numpy(), saved["with"](X)["logits"].numpy())


def test_asking_for_exit_heads_a_directory_lacks_names_them(saved):
  without_dir = str(saved["root"] / "without")
  model, _ = load_model(without_dir, "classifier")
  assert not model.exit_heads
  with pytest.raises(CheckpointMismatchError, match=r"missing.*\n.*exit_heads/layer_0/output_bias"):
    load_model(without_dir, "classifier", exit_heads=True)
  model, summary = load_model(without_dir, "classifier", exit_heads=True, allow_missing=["exit_heads/*"])
  assert model.exit_heads and len(summary["missing_allowed"]) == 4
  np.testing.assert_array_equal(model(X)["logits"].numpy(), saved["without"](X)["logits"].numpy())


@pytest.mark.parametrize("output_format", ["tf1", "hf"])
def test_exit_heads_round_trip_through_tf1_and_hf(saved, tmp_path, output_format):
  out = str(tmp_path / output_format)
  convert("native", str(saved["root"] / "with"), output_format, out, model_type="classifier")
  back = str(tmp_path / "back")
  convert(output_format, out, "native", back, model_type="classifier")
  model, _ = load_model(back, "classifier")
  assert model.exit_heads
  expected = _weights(saved["with"])
  for name, value in _weights(model).items():
    np.testing.assert_array_equal(value, expected[name])
  # And the same file read without them.
  plain, summary = load_model(out, "classifier", exit_heads=False)
  assert not plain.exit_heads and sum("exit" in k for k in summary["skipped"]) == (4 if output_format == "hf" else 4)


def test_multiple_choice_exit_heads_load(tmp_path):
  model = AlbertMultipleChoice(CONFIG, num_choices=2, exit_heads=True)
  native.save_pretrained(model, str(tmp_path / "mc"))
  loaded, _ = load_model(str(tmp_path / "mc"), "multiple_choice", num_choices=2)
  assert len(early_exit.exit_heads(loaded)) == 2
  x = {k: v.reshape(1, 2, 10) for k, v in X.items()}
  np.testing.assert_array_equal(loaded(x, patience=1)["exit_iteration"].numpy(),
                                model(x, patience=1)["exit_iteration"].numpy())
