"""The `layer_loop` option of `AlbertEncoder`: a while_loop over the shared block gives the unrolled numbers."""

import numpy as np
import pytest
import tensorflow as tf

from official_albert import AlbertConfig
from official_albert import AlbertEncoder
from tests.official_albert.inputs import padded_pair_inputs
from tests.official_albert.serving.random_models import perturb_weights


def _tiny_config(**overrides):
  fields = dict(vocab_size=97, embedding_size=16, hidden_size=32, num_hidden_layers=4, num_attention_heads=4,
                intermediate_size=64, max_position_embeddings=64, hidden_dropout_prob=0.0,
                attention_probs_dropout_prob=0.0)
  fields.update(overrides)
  return AlbertConfig.from_preset("albert-base-v2", **fields)


def _inputs():
  return padded_pair_inputs(seed=3, low=0)


def _pair(config):
  """An unrolled encoder and a looped one holding the same weights, perturbed N(0, 0.1).

  Why perturbed: at the initial weights (σ 0.02, LayerNorm γ=1, β=0, zero biases) attention is nearly uniform and
  the query / key paths barely move the outputs, so a bug there would hide under the tolerance (audit s29, 2).
  """
  unrolled = AlbertEncoder(config, name="unrolled")
  perturb_weights(unrolled, seed=0)
  looped = AlbertEncoder(config, layer_loop=True, name="looped")
  looped.set_weights(unrolled.get_weights())
  return unrolled, looped


@pytest.mark.parametrize("overrides", [
    {},  # The released layout: one group, one inner block, applied L times.
    {"num_hidden_groups": 2, "inner_group_num": 2},  # Two loops (one per group) with two blocks per iteration.
    {"num_hidden_layers": 5, "num_hidden_groups": 2},  # Unequal loops: 3 iterations of group 0, 2 of group 1.
    {"num_hidden_layers": 7, "num_hidden_groups": 3, "inner_group_num": 2},  # 3, 2, 2 iterations.
])
def test_loop_matches_unrolled(overrides):
  unrolled, looped = _pair(_tiny_config(**overrides))
  inputs = _inputs()
  want = unrolled(inputs)
  got = looped(inputs)
  np.testing.assert_allclose(got["sequence_output"], want["sequence_output"], atol=1e-5, rtol=1e-5)
  np.testing.assert_allclose(got["pooled_output"], want["pooled_output"], atol=1e-5, rtol=1e-5)
  # Only the last layer's output is kept on the loop path.
  assert len(got["encoder_outputs"]) == 1
  np.testing.assert_allclose(got["encoder_outputs"][0], want["encoder_outputs"][-1], atol=1e-5, rtol=1e-5)


@pytest.mark.slow
def test_loop_matches_unrolled_under_xla_with_gradients():
  """Loss = a fixed random weighting of both outputs, on perturbed weights, so that every gradient is large.

  Before (audit s29, 2): Σ sequence_output² of a LayerNorm output with γ=1 is a constant, and Σ pooled flows through
  [CLS] only: the query / key kernels' gradients were ~7e-4 at atol 1e-4, so a 13% error there passed.
  """
  unrolled, looped = _pair(_tiny_config())
  inputs = {k: tf.constant(v) for k, v in _inputs().items()}
  shapes = {k: v.shape for k, v in unrolled(inputs).items() if k != "encoder_outputs"}
  rng = np.random.default_rng(5)
  weighting = {k: tf.constant(rng.normal(size=shape).astype(np.float32)) for k, shape in shapes.items()}

  def grads_of(model):
    @tf.function(jit_compile=True)
    def step(batch):
      with tf.GradientTape() as tape:
        outputs = model(batch)
        loss = sum(tf.reduce_sum(outputs[k] * w) for k, w in weighting.items())
      grads = tape.gradient(loss, model.trainable_variables)
      return loss, [tf.convert_to_tensor(g) for g in grads]  # Embedding gradients come as IndexedSlices.
    return step(inputs)

  want_loss, want_grads = grads_of(unrolled)
  got_loss, got_grads = grads_of(looped)
  np.testing.assert_allclose(got_loss, want_loss, rtol=1e-5)
  assert len(got_grads) == len(want_grads)
  for got, want, var in zip(got_grads, want_grads, unrolled.trainable_variables):
    if var.path.endswith("key/bias"):
      # Exactly zero in exact arithmetic: q·(k + b) shifts a query's scores by one constant, which softmax ignores.
      assert np.abs(want).max() < 1e-5, var.path
    else:  # the check can fail: every compared gradient is far above the tolerance (measured: max|g| ≥ 1 each)
      assert np.abs(want).max() > 0.1, (var.path, np.abs(want).max())
    # The loop's backward pass sums the shared weights' gradient in another order: float32 rounding, ~1e-5.
    np.testing.assert_allclose(got, want, atol=1e-4, rtol=1e-4, err_msg=var.path)


@pytest.mark.slow
def test_loop_is_one_block_in_the_graph():
  """The point of the option: the traced graph does not grow with the number of layers."""
  def graph_size(num_layers, layer_loop):
    encoder = AlbertEncoder(_tiny_config(num_hidden_layers=num_layers), layer_loop=layer_loop)
    spec = {k: tf.TensorSpec([2, 12], tf.int32) for k in ("input_word_ids", "input_mask", "input_type_ids")}
    graph = tf.function(lambda batch: encoder(batch)["sequence_output"]).get_concrete_function(spec).graph
    return len(graph.as_graph_def().node) + sum(len(f.node_def) for f in graph.as_graph_def().library.function)

  assert graph_size(8, True) == graph_size(2, True)
  assert graph_size(8, False) > 2 * graph_size(2, False)


def test_loop_needs_full_sharing():
  with pytest.raises(ValueError, match="layer_loop=True needs sharing='all'"):
    AlbertEncoder(_tiny_config(sharing="ffn"), layer_loop=True)
