"""Under `mixed_bfloat16` every head computes its logits in float32 (official_albert/modeling/layers/heads.py).

The heads used to run their last matmul in bfloat16 and cast the result to float32 afterwards: the logits kept 8
significant bits, so near-ties became exact ties (argmax → the lower index), a regression head's scores collapsed
onto the bfloat16 grid (2 distinct scores for 512 texts at a score of ~4) and the early-exit rule compared rounded
logits. Each test checks a head against the float32 computation on the bf16 model's own features, and that the
values are not all bfloat16-representable (a float32 whose low 16 bits are all zero is a bfloat16 value).
"""

import keras
import numpy as np
import pytest

from official_albert import AlbertConfig
from official_albert.modeling.layers.heads import TransposedLogits
from official_albert.modeling.models import AlbertClassifier
from official_albert.modeling.models import AlbertPretrainer
from official_albert.modeling.models import AlbertSquadV2Model
from official_albert.precision import global_dtype_policy
from tests.tiny import MODEL

MIXED = "mixed_bfloat16"


def _inputs(batch, seq=12, seed=0):
  ids = np.random.default_rng(seed).integers(5, MODEL["vocab_size"], size=(batch, seq)).astype("int32")
  return {"input_word_ids": ids, "input_mask": np.ones_like(ids), "input_type_ids": np.zeros_like(ids)}


def _all_bf16(values) -> bool:
  """Whether every value is a bfloat16 value (what a bfloat16 result cast to float32 always is)."""
  bits = np.ascontiguousarray(values, np.float32).view(np.uint32)
  return bool(np.all((bits & 0xFFFF) == 0))


def _mixed(build, seed=0):
  """`build()` under float32 and under mixed_bfloat16 with the same weights: (float32 model, bf16 model)."""
  keras.utils.set_random_seed(seed)
  reference = build()
  with global_dtype_policy(MIXED):
    model = build()
  model.set_weights(reference.get_weights())
  return reference, model


@pytest.fixture(autouse=True)
def float32_outside():
  with global_dtype_policy("float32"):
    yield


def test_classifier_logits_are_the_float32_head_on_the_bf16_pooled_output():
  _, model = _mixed(lambda: AlbertClassifier(AlbertConfig(**MODEL), num_labels=3))
  # A trained classifier's logits are several units large, where the bfloat16 grid is coarse (0.0156 at 3).
  model.classifier.output_bias.assign(np.full((3,), 3.0, np.float32))
  out = model(_inputs(64), training=False)
  logits = out["logits"].numpy()
  assert logits.dtype == np.float32 and model.classifier.compute_dtype == "float32"
  pooled = np.asarray(out["pooled_output"], np.float32)
  head = model.classifier
  want = pooled @ head.output_weights.numpy().T + head.output_bias.numpy()
  np.testing.assert_allclose(logits, want, rtol=0, atol=1e-6)
  assert not _all_bf16(logits), "the classifier's logits were computed in bfloat16"


def test_regression_scores_stay_distinct_under_bf16():
  _, model = _mixed(lambda: AlbertClassifier(AlbertConfig(**MODEL), num_labels=1), seed=1)
  model.classifier.output_bias.assign(np.array([4.0], np.float32))
  scores = model(_inputs(256), training=False)["logits"].numpy()[:, 0]
  # In bfloat16 the 256 scores near 4 fell onto 2 grid points (4.0 and 4.03125).
  assert len(np.unique(scores)) >= 250, np.unique(scores)


def test_exit_heads_logits_are_float32_under_bf16():
  _, model = _mixed(lambda: AlbertClassifier(AlbertConfig(**MODEL), num_labels=3, exit_heads=True))
  exit_logits = model(_inputs(16), training=False, return_exit_logits=True)["exit_logits"].numpy()
  for i in range(exit_logits.shape[1]):
    assert not _all_bf16(exit_logits[:, i]), f"iteration {i + 1}'s logits were computed in bfloat16"


def test_mlm_logits_are_the_float32_projection_of_the_bf16_features():
  _, model = _mixed(lambda: AlbertPretrainer(AlbertConfig(**MODEL)), seed=2)
  positions = np.tile(np.arange(4, dtype=np.int32), (8, 1))
  out = model({**_inputs(8), "masked_lm_positions": positions}, training=False)
  mlm = out["mlm_logits"].numpy()
  head = model.mlm_head
  features = np.asarray(head.layer_norm(head.dense(out["sequence_output"][:, :4])), np.float32)
  table = model.encoder.embedding_table.numpy()
  want = np.einsum("bpe,ve->bpv", features, table) + head.output_bias.numpy()
  np.testing.assert_allclose(mlm, want, rtol=1e-5, atol=1e-6)
  assert not _all_bf16(mlm) and not _all_bf16(out["sop_logits"].numpy())


def test_squad_v2_logits_are_float32_under_bf16():
  _, model = _mixed(lambda: AlbertSquadV2Model(AlbertConfig(**MODEL), start_n_top=2, end_n_top=2), seed=3)
  inputs = _inputs(8)
  p_mask = np.zeros((8, 12), np.float32)
  p_mask[:, -3:] = 1.0
  out = model({**inputs, "p_mask": p_mask}, training=False)
  sequence = np.asarray(model.encoder(inputs)["sequence_output"], np.float32)
  dense = model.squad_head.start_dense
  start = (sequence @ dense.kernel.numpy() + dense.bias.numpy())[..., 0]
  shifted = start[:, :-3] - start[:, :-3].max(-1, keepdims=True)  # (the masked positions add exp(-1e30) = 0)
  want = shifted - np.log(np.sum(np.exp(shifted), -1, keepdims=True))
  np.testing.assert_allclose(out["start_log_probs"].numpy()[:, :-3], want, rtol=0, atol=2e-6)
  assert not _all_bf16(out["cls_logits"].numpy()), "cls_logits were computed in bfloat16"


def test_a_head_config_saved_under_the_global_policy_still_loads_in_float32():
  """Layer configs written before the fix carry the global policy as `dtype`: the head is float32 regardless."""
  with global_dtype_policy(MIXED):
    head = TransposedLogits(2, 8, name="classifier")
    config = head.get_config()
  config["dtype"] = keras.dtype_policies.serialize(keras.dtype_policies.get(MIXED))
  restored = TransposedLogits.from_config(config)
  assert restored.compute_dtype == "float32" and restored.name == "classifier"


def test_squad_v2_end_features_are_tiled_in_bfloat16():
  # The [B,K,S,2H] concatenation of the end logits is the head's largest tensor: built in end_dense_0's bfloat16,
  # not in the float32 the head layer computes in (same values, half the memory).
  import tensorflow as tf

  from official_albert.modeling.layers.heads import SquadV2Head
  with global_dtype_policy(MIXED):
    head = SquadV2Head(hidden_size=8, start_n_top=2, end_n_top=2)
    head.build()
  sequence = tf.random.normal((1, 5, 8))
  graph = tf.function(lambda s: head(s, tf.zeros((1, 5)))).get_concrete_function(sequence).graph
  concats = [op for op in graph.get_operations() if op.type == "ConcatV2" and op.outputs[0].shape.rank == 4]
  assert concats and all(op.outputs[0].dtype == tf.bfloat16 for op in concats), [
      (op.name, op.outputs[0].dtype) for op in concats]
