"""`global_dtype_policy`: the policy holds inside the block and the previous one is back afterwards, raise or not."""

import keras
import pytest

from official_albert import precision


def test_policy_is_set_inside_and_restored_even_when_the_block_raises():
  before = keras.config.dtype_policy().name
  with pytest.raises(RuntimeError, match="boom"):
    with precision.global_dtype_policy("mixed_bfloat16"):
      assert keras.config.dtype_policy().name == "mixed_bfloat16"
      assert keras.layers.Dense(2).compute_dtype == "bfloat16"  # what layers built in the block get
      raise RuntimeError("boom")
  assert keras.config.dtype_policy().name == before
  assert keras.layers.Dense(2).compute_dtype == "float32"


def test_policy_for_dtype_maps_the_shorthands_and_names_the_accepted_ones():
  assert precision.policy_for_dtype("bfloat16") == "mixed_bfloat16"
  assert precision.policy_for_dtype("float32") == "float32"
  with pytest.raises(ValueError, match=r"dtype='float16' is not one of \('float32', 'bfloat16'\)"):
    precision.policy_for_dtype("float16")
