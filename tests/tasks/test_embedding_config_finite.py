"""text_embedding's float settings must be finite: `task.scale` and `task.matryoshka_weights`.

`scale <= 0` was the only check, so NaN and ±inf (YAML's `.nan` / `.inf` parse to floats) passed: the run started,
recorded the scale, and stopped at step 1 with "Non-finite training loss", which reads as a divergence and names no
setting. An infinite Matryoshka weight passed `w > 0` the same way.
"""

import json

import pytest

from official_albert import train
from official_albert.training.experiment_config import ConfigError
from tasks.embedding.config import TextEmbeddingConfig

MODEL = {"preset": "", "vocab_size": 1000, "embedding_size": 16, "hidden_size": 32, "num_hidden_layers": 1,
         "num_attention_heads": 2, "intermediate_size": 64, "max_position_embeddings": 32}


@pytest.mark.parametrize("scale", [float("nan"), float("inf"), -float("inf"), 0.0])
def test_a_non_finite_or_non_positive_scale_is_refused_by_name(scale):
  with pytest.raises(ConfigError, match=r"task\.scale=.* must be finite and > 0"):
    TextEmbeddingConfig(scale=scale).validate()


def test_a_nan_scale_in_an_override_is_refused_before_training():
  """As `--params_override` / YAML give it (`.nan`, JSON's NaN), through the binary's own config build."""
  with pytest.raises(ConfigError, match=r"task\.scale=nan must be finite and > 0"):
    train.build_params("text_embedding", params_override=json.dumps({"task": {"model": MODEL, "scale": float("nan")}}))


def test_a_finite_positive_scale_passes():
  TextEmbeddingConfig(scale=0.5).validate()


@pytest.mark.parametrize("weight", [float("inf"), float("nan")])
def test_a_non_finite_matryoshka_weight_is_refused_by_name(weight):
  config = TextEmbeddingConfig(matryoshka_dims=[16, 8], matryoshka_weights=[1.0, weight])
  with pytest.raises(ConfigError, match=r"task\.matryoshka_weights=.*not > 0 or not finite"):
    config.validate()
