"""load_model / load_pretrained build in float32 whatever the caller's Keras default: a keras.json `"floatx":
"float16"` (float16 variables: the float32 checkpoint failed in RestoreV2) or a notebook's global mixed_float16 policy
(a classifier silently computing in float16) gave another model than export and --mode=predict. An export's own
mixed_bfloat16 (export_spec builds its bfloat16 model under it) is still honoured."""

import contextlib

import keras
import numpy as np
import pytest

from official_albert.checkpoints import loading
from official_albert.precision import global_dtype_policy
from tests import tiny

IDS = np.array([[2, 15, 27, 3, 0, 0]], "int32")
INPUTS = {"input_word_ids": IDS, "input_mask": (IDS > 0).astype("int32"), "input_type_ids": np.zeros_like(IDS)}


@contextlib.contextmanager
def _floatx(name):
  previous = keras.config.floatx()
  keras.config.set_floatx(name)
  try:
    with global_dtype_policy(name):  # (the default policy follows floatx only when the policy was never set)
      yield
  finally:
    keras.config.set_floatx(previous)


@pytest.fixture(scope="module")
def classifier_dir(tmp_path_factory):
  directory = tmp_path_factory.mktemp("load_dtype") / "clf"
  tiny.save_model_dir(directory, "classifier", tiny.NUM_LABELS, num_hidden_layers=1)
  model, _ = loading.load_model(str(directory), "classifier")
  return str(directory), np.asarray(model(INPUTS)["logits"])


@pytest.mark.parametrize("setting", ["floatx_float16", "mixed_float16"])
def test_load_model_builds_in_float32_under_the_callers_default(classifier_dir, setting):
  directory, expected = classifier_dir
  scope = _floatx("float16") if setting == "floatx_float16" else global_dtype_policy("mixed_float16")
  with scope:
    model, _ = loading.load_model(directory, "classifier")
    logits = np.asarray(model(INPUTS)["logits"])
    policy_after = keras.config.dtype_policy().name
  assert {v.dtype for v in model.weights} == {"float32"}
  assert logits.dtype == np.float32
  np.testing.assert_allclose(logits, expected, atol=1e-6)
  assert policy_after == ("float16" if setting == "floatx_float16" else "mixed_float16")  # the caller's, put back


def test_load_pretrained_builds_in_float32_under_floatx_float16(tmp_path):
  directory = tmp_path / "pre"
  tiny.save_model_dir(directory, "pretrainer", num_hidden_layers=1)
  with _floatx("float16"):
    model = loading.load_pretrained(str(directory))
  assert {v.dtype for v in model.weights} == {"float32"}


def test_an_exports_mixed_bfloat16_is_honoured(classifier_dir):
  with global_dtype_policy("mixed_bfloat16"):
    model, _ = loading.load_model(classifier_dir[0], "classifier")
  assert model.encoder.dtype_policy.name == "mixed_bfloat16"
