"""The closed-form LayerNorm of the mixed-precision blocks: Keras' function and gradients; float32 left alone."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from official_albert import AlbertConfig
from official_albert import AlbertEncoder
from official_albert import AlbertPretrainer
from official_albert.modeling.layers import embeddings

TINY = dict(vocab_size=97, embedding_size=16, hidden_size=32, num_hidden_layers=3, num_hidden_groups=1,
            num_attention_heads=4, intermediate_size=37, max_position_embeddings=64)


def _inputs(batch=2, seq=9, seed=0):
  rng = np.random.RandomState(seed)
  mask = np.ones((batch, seq), "int32")
  mask[-1, 6:] = 0
  return {"input_word_ids": rng.randint(5, 97, size=(batch, seq)).astype("int32"), "input_mask": mask,
          "input_type_ids": np.zeros((batch, seq), "int32")}


def _cosine(a, b):
  a, b = np.ravel(a).astype(np.float64), np.ravel(b).astype(np.float64)
  return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


@pytest.mark.parametrize("shape", [(7, 16), (2, 5, 16)])
def test_closed_form_matches_keras_layer_norm_and_its_gradients(shape):
  """Forward and the hand-written backward (dx, dγ, dβ) against autodiff of Keras' LayerNorm, in float64."""
  rng = np.random.default_rng(0)
  x = tf.constant(rng.normal(2.0, 3.0, shape))  # a mean and a scale to remove, as after a residual add
  upstream = tf.constant(rng.normal(size=shape))  # a non-uniform dy: with dy = 1 some terms of dx vanish
  reference = keras.layers.LayerNormalization(epsilon=1e-6, dtype="float64")
  reference.build(shape)
  reference.gamma.assign(rng.normal(1.0, 0.5, shape[-1]))
  reference.beta.assign(rng.normal(0.0, 0.5, shape[-1]))
  gamma, beta = tf.constant(reference.gamma.numpy()), tf.constant(reference.beta.numpy())
  results = []
  for fn in (lambda x, g, b: reference(x),
             lambda x, g, b: embeddings.closed_form_layer_norm(x, g, b, 1e-6, training=True)):
    with tf.GradientTape() as tape:
      tape.watch([x, gamma, beta])
      y = fn(x, gamma, beta)
    wrt = [x] + ([reference.gamma.value, reference.beta.value] if not results else [gamma, beta])
    results.append([y] + tape.gradient(y, wrt, output_gradients=upstream))
  for name, want, got in zip(("y", "dx", "dgamma", "dbeta"), *results):
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-9, atol=1e-9, err_msg=name)
  # Inference (no custom gradient) computes the same function.
  np.testing.assert_allclose(embeddings.closed_form_layer_norm(x, gamma, beta, 1e-6).numpy(), results[0][0].numpy(),
                             rtol=1e-9, atol=1e-9)


def _count_closed_form_calls(monkeypatch):
  calls = []
  original = embeddings.closed_form_layer_norm

  def spy(*args, **kwargs):
    calls.append(kwargs.get("training", args[4] if len(args) > 4 else False))
    return original(*args, **kwargs)

  monkeypatch.setattr(embeddings, "closed_form_layer_norm", spy)
  return calls


def _policy_model(policy, cls=AlbertEncoder):
  keras.mixed_precision.set_global_policy(policy)
  try:
    keras.utils.set_random_seed(1)
    return cls(AlbertConfig(**TINY))
  finally:
    keras.mixed_precision.set_global_policy("float32")


def test_float32_blocks_keep_keras_layer_norm(monkeypatch):
  """float32 numerics are unchanged: the blocks run Keras' LayerNorm, bit for bit, in training and inference."""
  calls = _count_closed_form_calls(monkeypatch)
  model = _policy_model("float32")
  inputs = _inputs()
  for training in (False, True):
    with tf.GradientTape() as tape:
      got = model(inputs, training=training)["sequence_output"]
    grads = tape.gradient(tf.reduce_sum(got * got), model.trainable_variables)
    with monkeypatch.context() as patch:  # the blocks with closed_form forced off: Keras' LayerNorm everywhere
      patch.setattr(embeddings.AlbertLayerNorm, "call",
                    lambda self, inputs, closed_form=False, training=False: keras.layers.LayerNormalization.call(
                        self, inputs))
      with tf.GradientTape() as tape:
        want = model(inputs, training=training)["sequence_output"]
      want_grads = tape.gradient(tf.reduce_sum(want * want), model.trainable_variables)
    np.testing.assert_array_equal(got.numpy(), want.numpy())
    for g, w in zip(grads, want_grads):
      if w is None:  # the pooler: not in the loss
        assert g is None
        continue
      np.testing.assert_array_equal(tf.convert_to_tensor(g).numpy(), tf.convert_to_tensor(w).numpy())
  assert calls == []


def test_mixed_bfloat16_blocks_use_the_closed_form_and_stay_close_to_float32(monkeypatch):
  """Under mixed_bfloat16 every block LayerNorm takes the closed form (with its custom gradient in training); the
  outputs stay within cosine 0.999 of float32 and every LayerNorm gradient (γ, β: the custom ones) within 0.99."""
  calls = _count_closed_form_calls(monkeypatch)
  reference = _policy_model("float32", AlbertPretrainer)
  rng = np.random.default_rng(2)
  for variable in reference.weights:  # γ ≠ 1, β ≠ 0: the LayerNorm gradients then depend on them
    if "LayerNorm" in variable.path:
      variable.assign(rng.normal(1.0 if variable.name == "gamma" else 0.0, 0.3, variable.shape))
  model = _policy_model("mixed_bfloat16", AlbertPretrainer)
  model.set_weights(reference.get_weights())
  inputs = dict(_inputs(), masked_lm_positions=np.array([[1, 2], [3, 4]], "int32"))
  blocks = 2 * TINY["num_hidden_layers"]  # attention + FFN LayerNorm per layer
  assert _cosine(model(inputs)["sequence_output"], reference(inputs)["sequence_output"]) > 0.999
  assert calls == [False] * blocks
  grads = []
  for m in (reference, model):
    with tf.GradientTape() as tape:
      out = m(inputs, training=True)
      loss = tf.reduce_sum(tf.square(out["sequence_output"])) + tf.reduce_sum(out["mlm_logits"] * 1e-2)
    grads.append(tape.gradient(loss, m.trainable_variables))  # (None for the SOP head: not in the loss)
  assert calls == [False] * blocks + [True] * blocks
  checked = 0
  for variable, want, got in zip(reference.trainable_variables, *grads):
    if "LayerNorm" in variable.path and "/encoder/" in f"/{variable.path}":
      assert tf.convert_to_tensor(got).dtype == tf.float32, variable.path
      assert _cosine(tf.convert_to_tensor(want), tf.convert_to_tensor(got)) > 0.99, variable.path
      checked += 1
  assert checked >= 4  # γ and β of both block LayerNorms
