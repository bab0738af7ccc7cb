"""A model's dtype policy survives its config: `.keras`, `from_config(get_config())` and `extend_model`.

Our models write their own `get_config` in place of Keras' base one, which is where Keras keeps the `dtype` policy;
without it a model built under `mixed_bfloat16` came back in whatever the global policy was at load time (float32),
with other numbers and no warning. Each test builds under `mixed_bfloat16` and reloads with the global policy back at
float32, so a dropped policy shows as a float32 compute dtype and as different outputs.
"""

import json

import keras
import numpy as np
import pytest

from official_albert import AlbertClassifier
from official_albert import AlbertConfig
from official_albert.checkpoints.extend import extend_model
from official_albert.modeling.embedder import AlbertEmbedder
from official_albert.modeling.encoder import AlbertEncoder
from official_albert.precision import global_dtype_policy

MIXED = "mixed_bfloat16"
TINY = dict(vocab_size=50, embedding_size=8, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
            intermediate_size=32, max_position_embeddings=16)
INPUTS = {"input_word_ids": np.array([[2, 5, 6, 7, 3, 0], [2, 9, 8, 3, 0, 0]], np.int32),
          "input_mask": np.array([[1, 1, 1, 1, 1, 0], [1, 1, 1, 1, 0, 0]], np.int32),
          "input_type_ids": np.zeros((2, 6), np.int32)}
BUILDERS = {
    "encoder": lambda: AlbertEncoder(AlbertConfig(**TINY)),
    "classifier": lambda: AlbertClassifier(AlbertConfig(**TINY), num_labels=3),
    "embedder": lambda: AlbertEmbedder(AlbertConfig(**TINY), pooling=["mean", "cls"]),
}


@pytest.fixture(autouse=True)
def float32_outside():
  """Every test starts and ends under the float32 global policy, whatever it sets inside."""
  with global_dtype_policy("float32"):
    yield


def _encoder(model):
  return model if isinstance(model, AlbertEncoder) else model.encoder


def _outputs(model):
  return {k: np.asarray(v, np.float32) for k, v in model(INPUTS).items() if k != "encoder_outputs"}


def _built_mixed(kind):
  """A tiny model built under mixed_bfloat16 and its outputs (computed under that policy too)."""
  with global_dtype_policy(MIXED):
    keras.utils.set_random_seed(0)
    model = BUILDERS[kind]()
    return model, _outputs(model)


def _assert_mixed(model, want):
  assert keras.config.dtype_policy().name == "float32"
  assert model.dtype_policy.name == MIXED
  encoder = _encoder(model)
  assert encoder.attention_layers[0].compute_dtype == "bfloat16"
  assert encoder.embeddings.compute_dtype == "bfloat16"
  assert encoder.embeddings.variable_dtype == "float32"
  got = _outputs(model)
  assert sorted(got) == sorted(want)
  for key in want:
    np.testing.assert_array_equal(got[key], want[key], err_msg=key)


@pytest.mark.parametrize("kind", sorted(BUILDERS))
def test_keras_file_keeps_the_mixed_policy(kind, tmp_path):
  model, want = _built_mixed(kind)
  path = str(tmp_path / "model.keras")
  model.save(path)
  restored = keras.saving.load_model(path)
  assert type(restored) is type(model)
  assert restored.get_config() == model.get_config()
  _assert_mixed(restored, want)


@pytest.mark.parametrize("kind", sorted(BUILDERS))
def test_config_round_trip_keeps_the_mixed_policy(kind):
  model, want = _built_mixed(kind)
  config = json.loads(json.dumps(model.get_config()))
  clone = type(model).from_config(config)
  clone.set_weights(model.get_weights())
  _assert_mixed(clone, want)


def test_a_config_without_dtype_builds_under_the_current_global_policy():
  """Configs written before the policy was saved still load, in the global policy of the caller (as they did)."""
  model, _ = _built_mixed("classifier")
  config = {k: v for k, v in model.get_config().items() if k != "dtype"}
  assert AlbertClassifier.from_config(config).encoder.attention_layers[0].compute_dtype == "float32"
  with global_dtype_policy(MIXED):
    clone = AlbertClassifier.from_config(config)
  assert clone.encoder.attention_layers[0].compute_dtype == "bfloat16"


def test_a_float32_model_stays_float32_when_loaded_under_a_mixed_policy():
  keras.utils.set_random_seed(0)
  model = BUILDERS["encoder"]()
  with global_dtype_policy(MIXED):
    clone = AlbertEncoder.from_config(model.get_config())
  assert clone.dtype_policy.name == "float32"
  assert clone.attention_layers[0].compute_dtype == "float32"


def test_extend_model_keeps_the_mixed_policy():
  model, _ = _built_mixed("classifier")
  longer = extend_model(model, max_position_embeddings=32)
  assert longer.config.max_position_embeddings == 32
  assert longer.dtype_policy.name == MIXED
  assert longer.encoder.attention_layers[0].compute_dtype == "bfloat16"
  assert keras.config.dtype_policy().name == "float32"


def test_an_embedder_around_a_mixed_encoder_keeps_its_policy_built_outside_the_mixed_block():
  # (What pipelines.embed builds: an AlbertEmbedder wrapped around a loaded encoder.)
  with global_dtype_policy(MIXED):
    keras.utils.set_random_seed(0)
    encoder = AlbertEncoder(AlbertConfig(**TINY))
  embedder = AlbertEmbedder(encoder=encoder, pooling=["mean"])
  assert embedder.dtype_policy.name == MIXED
  want = _outputs(embedder)
  clone = AlbertEmbedder.from_config(json.loads(json.dumps(embedder.get_config())))
  clone.set_weights(embedder.get_weights())
  _assert_mixed(clone, want)
