"""Chunked and block-sparse attention against dense attention (and block-sparse against HF BigBird).

chunked == dense (outputs and gradients, float32, padding, lengths that are not multiples of the chunks); block_sparse
== dense attention restricted to the same 0/1 block pattern; the encoder with either matches the dense encoder where
it must (chunked: always; block_sparse: below its dense-fallback length), for every sharing mode, groups and inner
groups, the layer loop, graph mode and XLA, and under mixed_bfloat16 it stays as close to float32 as dense does.
Gradients traced with an unknown sequence length equal the static ones; chunked's second derivative is exact eagerly
and refused by name inside tf.function (documented).

Long because: both long-attention kernels are checked against the one dense reference and the encoder helpers here.
"""

import json

import keras
import numpy as np
import pytest
import tensorflow as tf

from official_albert import AlbertConfig
from official_albert import AlbertEncoder
from official_albert.modeling.layers import block_sparse_attention as bsa
from official_albert.modeling.layers.chunked_attention import chunked_attention
from tests import tiny
from tests.conftest import CHILD_PYTHONPATH

TINY = dict(tiny.GROUPED, max_position_embeddings=256)


def dense_reference(q, k, v, bias):
  s = np.einsum("bnqd,bnkd->bnqk", q.astype(np.float64), k) / np.sqrt(q.shape[-1]) + bias
  p = np.exp(s - s.max(-1, keepdims=True))
  return (p / p.sum(-1, keepdims=True)) @ v


def random_qkv(batch=2, heads=3, seq=37, depth=8, seed=0):
  rng = np.random.default_rng(seed)
  q, k, v = (rng.normal(size=(batch, heads, seq, depth)).astype(np.float32) for _ in range(3))
  mask = np.ones((batch, seq), np.float32)
  mask[-1, seq * 2 // 3:] = 0  # padding at the end
  # Keys masked at the start and in the middle of a row too (a left-padded or packed row): a kernel that dropped the
  # mask of its first key chunk, or of one inside, passed when padding only ever came last.
  run = max(1, seq // 10)
  mask[0, :run] = 0
  mask[0, seq // 2:seq // 2 + run] = 0
  return q, k, v, mask


def dense_attention(q, k, v, bias):
  s = tf.einsum("bnqd,bnkd->bnqk", q, k) / np.sqrt(q.shape[-1]) + bias
  return tf.matmul(tf.nn.softmax(s, -1), v)


# ---------------------------------------------------------------------------------------------- chunked kernel
@pytest.mark.parametrize("seq, query_chunk, key_chunk", [(37, 16, 8), (37, 64, 64), (48, 16, 16), (5, 2, 3)])
@pytest.mark.parametrize("mode", ["eager", "graph", "xla"])
def test_chunked_equals_dense_outputs_and_gradients(seq, query_chunk, key_chunk, mode):
  q, k, v, mask = random_qkv(seq=seq)
  bias = (1.0 - mask) * -10000.0
  weight = np.random.default_rng(1).normal(size=q.shape).astype(np.float32)

  def loss_and_grads(attend):
    def run(q, k, v):
      with tf.GradientTape() as tape:
        tape.watch([q, k, v])
        out = attend(q, k, v)
        loss = tf.reduce_sum(out * weight)
      return out, tape.gradient(loss, [q, k, v])
    if mode != "eager":
      run = tf.function(run, jit_compile=mode == "xla")
    out, grads = run(*map(tf.constant, (q, k, v)))
    return [out.numpy()] + [g.numpy() for g in grads]

  dense = loss_and_grads(lambda q, k, v: dense_attention(q, k, v, bias[:, None, None, :]))
  chunked = loss_and_grads(lambda q, k, v: chunked_attention(q, k, v, bias, query_chunk, key_chunk))
  np.testing.assert_allclose(dense[0], dense_reference(q, k, v, bias[:, None, None, :]), atol=1e-5)
  for name, a, b in zip(("output", "dq", "dk", "dv"), dense, chunked):
    np.testing.assert_allclose(b, a, atol=1e-5, err_msg=name)


def test_chunked_fully_masked_row_equals_dense():
  q, k, v, mask = random_qkv(seq=10)
  # An all-padding example: dense attends over its 10 keys as if unmasked (the −10000 cancels), rounded in float32
  # at the scale of 10000; the padding of the chunks (here 10 → 12 keys) must not enter the softmax.
  mask[0] = 0
  bias = (1.0 - mask) * -10000.0
  out = chunked_attention(q, k, v, bias, 4, 4).numpy()
  np.testing.assert_allclose(out, dense_attention(q, k, v, bias[:, None, None, :]).numpy(), atol=1e-5)


def test_chunked_runs_with_an_unknown_sequence_length():
  q, k, v, mask = random_qkv(seq=23)
  bias = (1.0 - mask) * -10000.0
  spec = tf.TensorSpec([2, 3, None, 8], tf.float32)
  fn = tf.function(lambda q, k, v, b: chunked_attention(q, k, v, b, 8, 5),
                   input_signature=[spec, spec, spec, tf.TensorSpec([2, None], tf.float32)])
  np.testing.assert_allclose(fn(q, k, v, bias).numpy(), dense_reference(q, k, v, bias[:, None, None, :]), atol=1e-5)


@pytest.mark.parametrize("seq, query_chunk, key_chunk", [(23, 8, 5), (37, 16, 8)])
def test_chunked_gradients_with_an_unknown_sequence_length_equal_dense(seq, query_chunk, key_chunk):
  # Traced with S = None (a fine-tuning step under dynamic padding), the backward pass takes its other path: the
  # key chunk, the padded length and the slice starts are tensors, and dK/dV are cut back to S with a tensor.
  q, k, v, mask = random_qkv(seq=seq)
  bias = (1.0 - mask) * -10000.0
  weight = np.random.default_rng(1).normal(size=q.shape).astype(np.float32)

  def grads(attend):
    def run(q, k, v, bias):
      with tf.GradientTape() as tape:
        tape.watch([q, k, v])
        loss = tf.reduce_sum(attend(q, k, v, bias) * weight)
      return tape.gradient(loss, [q, k, v])
    return run

  dense = grads(lambda q, k, v, b: dense_attention(q, k, v, b[:, None, None, :]))(*map(tf.constant, (q, k, v, bias)))
  spec = tf.TensorSpec([2, 3, None, 8], tf.float32)
  dynamic = tf.function(grads(lambda q, k, v, b: chunked_attention(q, k, v, b, query_chunk, key_chunk)),
                        input_signature=[spec, spec, spec, tf.TensorSpec([2, None], tf.float32)])
  assert dynamic.get_concrete_function().structured_outputs[0].shape.as_list() == [2, 3, None, 8]
  for name, a, b in zip(("dq", "dk", "dv"), dense, dynamic(q, k, v, bias)):
    a = a.numpy()
    np.testing.assert_allclose(b.numpy(), a, atol=1e-5 * max(1.0, np.abs(a).max()), err_msg=name)


def hessian_vector_product(attend, q, direction, weight):
  """(∂L/∂q, ∂(∂L/∂q · direction)/∂q) for L = Σ attend(q)·weight: second order through a nested tape."""
  with tf.GradientTape() as outer:
    outer.watch(q)
    with tf.GradientTape() as inner:
      inner.watch(q)
      loss = tf.reduce_sum(attend(q) * weight)
    grad = inner.gradient(loss, q)
    projected = tf.reduce_sum(grad * direction)
  return grad, outer.gradient(projected, q)


@pytest.mark.parametrize("mode", ["eager", pytest.param("graph", marks=pytest.mark.slow)])
def test_chunked_second_derivative_is_exact_eagerly_and_refused_by_name_in_a_graph(mode):
  # Documented (the layer's docstring, docs/long_inputs.md): eagerly a nested tape differentiates the hand-written
  # backward pass; inside tf.function its dK/dV updates (XlaDynamicUpdateSlice) have no gradient and tracing fails
  # with TF's LookupError naming that op (tf.function reports it as a StagingError). Never a silent zero. If TF
  # adds the gradient, the graph case must then be exact.
  q, k, v, mask = random_qkv(batch=1, heads=2, seq=9, depth=4)
  bias = (1.0 - mask) * -10000.0
  rng = np.random.default_rng(2)
  direction, weight = (tf.constant(rng.normal(size=q.shape).astype(np.float32)) for _ in range(2))
  chunked = lambda q: chunked_attention(q, k, v, bias, 4, 4)  # noqa: E731
  dense = lambda q: dense_attention(q, k, v, bias[:, None, None, :])  # noqa: E731
  run = hessian_vector_product if mode == "eager" else tf.function(hessian_vector_product)
  expected = hessian_vector_product(dense, tf.constant(q), direction, weight)
  try:
    got = run(chunked, tf.constant(q), direction, weight)
  except Exception as e:  # noqa: BLE001 (the documented error, whatever class tf.function wraps it in)
    assert mode == "graph" and "LookupError: No gradient defined for operation" in str(e), e
    assert "(op type: XlaDynamicUpdateSlice)" in str(e), e
    return
  for name, a, b in zip(("grad", "hvp"), expected, got):
    a = a.numpy()
    np.testing.assert_allclose(b.numpy(), a, atol=1e-5 * max(1.0, np.abs(a).max()), err_msg=name)


# ------------------------------------------------------------------------------------------ block-sparse kernel
@pytest.mark.parametrize("seq", [48, 45, 61])
def test_block_sparse_equals_dense_restricted_to_its_block_pattern(seq):
  block, heads, random_blocks = 4, 3, 2
  q, k, v, mask = random_qkv(heads=heads, seq=seq)
  num_blocks = -(-seq // block)
  layout = bsa.random_block_layout(num_blocks, heads, random_blocks, seed=0, layer=1, max_blocks=20)
  out = bsa.block_sparse_attention(q, k, v, mask, block, layout).numpy()
  pattern = bsa.block_pattern(num_blocks, layout)
  # Distinct key blocks per query block: all (global rows), 5 + r, and 4 + r where the window reaches a global block.
  counts = pattern.sum(-1)
  assert (counts[:, [0, -1]] == num_blocks).all() and (counts[:, 2:-2] == 5 + random_blocks).all()
  assert (counts[:, [1, -2]] == 4 + random_blocks).all()
  tokens = np.repeat(np.repeat(pattern, block, 1), block, 2)[:, :seq, :seq]
  bias = (1.0 - mask)[:, None, None, :] * -10000.0 + np.where(tokens[None] > 0, 0.0, -1e30)
  np.testing.assert_allclose(out, dense_reference(q, k, v, bias), atol=1e-5)


def test_random_layout_is_seeded_legal_and_the_same_in_numpy_and_in_the_graph():
  layout = bsa.random_block_layout(12, 4, 3, seed=7, layer=2, max_blocks=32)
  np.testing.assert_array_equal(layout, bsa.random_block_layout(12, 4, 3, seed=7, layer=2, max_blocks=32))
  assert not np.array_equal(layout, bsa.random_block_layout(12, 4, 3, seed=7, layer=3, max_blocks=32))
  assert not np.array_equal(layout, bsa.random_block_layout(12, 4, 3, seed=8, layer=2, max_blocks=32))
  rows = np.arange(1, 11)[None, :, None]
  assert ((layout >= 1) & (layout <= 10) & (np.abs(layout - rows) > 1)).all()
  assert all(len(set(r)) == 3 for r in layout.reshape(-1, 3))
  graph = tf.function(lambda n: bsa.random_block_layout_in_graph(n, 4, 3, 7, 2, 32))(tf.constant(12))
  np.testing.assert_array_equal(graph.numpy(), layout)


def test_block_sparse_matches_hf_bigbird(monkeypatch):
  """HF's BigBirdAttention (block_sparse, same weights, our random layout) within 1e-4 at the unpadded tokens."""
  torch = pytest.importorskip("torch")
  transformers = pytest.importorskip("transformers")
  from transformers.models.big_bird import modeling_big_bird as hf_bigbird

  from official_albert.modeling.layers import AlbertAttention
  hidden, heads, block, random_blocks, seq, batch = 32, 4, 8, 2, 128, 2
  num_blocks = seq // block
  hf_config = transformers.BigBirdConfig(hidden_size=hidden, num_attention_heads=heads, block_size=block,
                                         num_random_blocks=random_blocks, attention_type="block_sparse",
                                         max_position_embeddings=seq, hidden_dropout_prob=0.0,
                                         attention_probs_dropout_prob=0.0, layer_norm_eps=1e-12)
  layer_index = 3
  torch.manual_seed(0)
  # train(): in eval mode HF replaces the random blocks by block 0.
  hf = hf_bigbird.BigBirdAttention(hf_config, seed=layer_index).train()
  with torch.no_grad():
    for param in hf.parameters():
      param.add_(0.05 * torch.randn_like(param))
  ours = AlbertAttention(hidden, heads, attention_type="block_sparse", block_size=block,
                         num_random_blocks=random_blocks, block_sparse_seed=5, max_position_embeddings=seq,
                         num_layers=4)
  ours.build()
  layout = ours._layout(num_blocks, layer_index).numpy()
  monkeypatch.setattr(hf_bigbird.BigBirdBlockSparseAttention, "_bigbird_block_rand_mask_with_head",
                      lambda self, **kwargs: [layout[h] for h in range(heads)])
  for name in ("query", "key", "value"):
    getattr(ours, name).set_weights([getattr(hf.self, name).weight.detach().numpy().T,
                                     getattr(hf.self, name).bias.detach().numpy()])
  ours.output_dense.set_weights([hf.output.dense.weight.detach().numpy().T, hf.output.dense.bias.detach().numpy()])
  ours.layer_norm.set_weights([hf.output.LayerNorm.weight.detach().numpy(), hf.output.LayerNorm.bias.detach().numpy()])
  rng = np.random.default_rng(0)
  x = rng.normal(size=(batch, seq, hidden)).astype(np.float32)
  mask = np.ones((batch, seq), np.int64)
  mask[1, 100:] = 0
  torch_mask = torch.tensor(mask)
  blocked, band, from_mask, to_mask = hf_bigbird.BigBirdModel.create_masks_for_block_sparse_attn(torch_mask, block)
  with torch.no_grad():
    expected = hf(torch.tensor(x), band_mask=band, from_mask=from_mask, to_mask=to_mask,
                  from_blocked_mask=blocked, to_blocked_mask=blocked)[0].numpy()
  got = ours(x, mask.astype(np.int32), layer_index=layer_index).numpy()
  np.testing.assert_allclose(got[0], expected[0], atol=1e-4)
  np.testing.assert_allclose(got[1, :100], expected[1, :100], atol=1e-4)


# ------------------------------------------------------------------------------------------------------ encoder
def make_inputs(batch=2, seq=45, seed=0):
  rng = np.random.RandomState(seed)
  mask = np.ones((batch, seq), "int32")
  mask[-1, seq - 7:] = 0
  mask[0, 2:4] = 0  # keys masked at the start (after [CLS]) ...
  mask[0, seq // 2:seq // 2 + 3] = 0  # ... and in the middle of a row
  return {"input_word_ids": rng.randint(5, 97, size=(batch, seq)).astype("int32"), "input_mask": mask,
          "input_type_ids": np.zeros((batch, seq), "int32")}


def outputs_and_grads(encoder, inputs, jit=None):
  def run(inputs):
    with tf.GradientTape() as tape:
      out = encoder(inputs, training=True)["sequence_output"]
      loss = tf.reduce_sum(tf.sin(out))
    return out, tape.gradient(loss, encoder.trainable_variables)
  if jit is not None:
    run = tf.function(run, jit_compile=jit)
  out, grads = run(inputs)
  # (The pooler does not feed sequence_output: its gradients are None, kept as zeros.)
  return out.numpy(), [np.zeros(v.shape) if g is None else tf.convert_to_tensor(g).numpy()
                       for v, g in zip(encoder.trainable_variables, grads)]


def assert_grads_close(expected, got, names=None, tol=1e-5):
  """Within `tol` of the gradient's own scale (sums over a whole batch reach |g| ~ 40 in float32)."""
  for i, (a, b) in enumerate(zip(expected, got)):
    np.testing.assert_allclose(b, a, rtol=tol, atol=tol * max(1.0, np.abs(a).max()),
                               err_msg=names[i] if names else str(i))


def copy_of(encoder, **changes):
  other = AlbertEncoder(encoder.config.replace(**changes), layer_loop=encoder.layer_loop)
  other.set_weights(encoder.get_weights())
  return other


@pytest.mark.parametrize("overrides", [
    {}, dict(sharing="none", num_hidden_groups=1), dict(sharing="attention", num_hidden_groups=1),
    dict(sharing="ffn", num_hidden_groups=1), dict(num_hidden_groups=1, inner_group_num=1),
])
def test_chunked_encoder_equals_dense_encoder(overrides):
  dense = AlbertEncoder(AlbertConfig(**{**TINY, **overrides}))
  chunked = copy_of(dense, attention_type="chunked", query_chunk_size=16, key_chunk_size=8)
  inputs = make_inputs()
  out_d, grads_d = outputs_and_grads(dense, inputs)
  out_c, grads_c = outputs_and_grads(chunked, inputs)
  np.testing.assert_allclose(out_c, out_d, atol=1e-5)
  assert_grads_close(grads_d, grads_c, [v.path for v in dense.trainable_variables])


@pytest.mark.slow
@pytest.mark.parametrize("jit", [False, True])
def test_chunked_layer_loop_under_graph_and_xla_equals_dense(jit):
  dense = AlbertEncoder(AlbertConfig(**{**TINY, "num_hidden_groups": 1}), layer_loop=True)
  chunked = copy_of(dense, attention_type="chunked", query_chunk_size=16, key_chunk_size=8)
  out_d, grads_d = outputs_and_grads(dense, make_inputs(), jit=jit)
  out_c, grads_c = outputs_and_grads(chunked, make_inputs(), jit=jit)
  np.testing.assert_allclose(out_c, out_d, atol=1e-5)
  assert_grads_close(grads_d, grads_c)


def test_block_sparse_encoder_falls_back_to_dense_when_short():
  dense = AlbertEncoder(AlbertConfig(**TINY))
  sparse = copy_of(dense, attention_type="block_sparse", block_size=8, num_random_blocks=2)
  inputs = make_inputs(seq=72)  # 72 <= (5 + 2·2)·8: dense, as HF does
  np.testing.assert_array_equal(sparse(inputs)["sequence_output"].numpy(), dense(inputs)["sequence_output"].numpy())


@pytest.mark.slow
def test_block_sparse_encoder_layer_loop_graph_xla_and_unknown_length_agree():
  config = AlbertConfig(**{**TINY, "num_hidden_groups": 1, "attention_type": "block_sparse", "block_size": 8,
                           "num_random_blocks": 2})
  unrolled = AlbertEncoder(config)
  looped = AlbertEncoder(config, layer_loop=True)
  looped.set_weights(unrolled.get_weights())
  inputs = make_inputs(seq=117)
  eager = unrolled(inputs)["sequence_output"].numpy()
  dense = copy_of(unrolled, attention_type="dense")(inputs)["sequence_output"].numpy()
  assert np.abs(eager - dense).max() > 1e-3  # sparse really is sparse at 117 tokens
  np.testing.assert_allclose(looped(inputs)["sequence_output"].numpy(), eager, atol=1e-5)
  xla = tf.function(lambda x: looped(x)["sequence_output"], jit_compile=True)
  np.testing.assert_allclose(xla(inputs).numpy(), eager, atol=1e-5)
  spec = {k: tf.TensorSpec([None, None], tf.int32) for k in inputs}
  for encoder in (unrolled, looped):
    dynamic = tf.function(lambda x, e=encoder: e(x)["sequence_output"], input_signature=[spec])
    np.testing.assert_allclose(dynamic(inputs).numpy(), eager, atol=1e-5)
    short = make_inputs(seq=40)
    np.testing.assert_allclose(dynamic(short).numpy(), dense_copy(unrolled)(short)["sequence_output"].numpy(),
                               atol=1e-5)
  _, grads = outputs_and_grads(unrolled, inputs)
  assert all(np.isfinite(g).all() for g in grads)


def dense_copy(encoder):
  return copy_of(encoder, attention_type="dense")


@pytest.mark.slow
@pytest.mark.parametrize("attention_type", ["chunked", "block_sparse"])
def test_training_step_gradients_with_an_unknown_sequence_length_equal_the_static_ones(attention_type):
  # A training step traced with [None, None] ids (dynamic padding) runs the chunked backward pass's tensor-length
  # path and block-sparse's run-time choice between its sparse and its dense branch under the gradient. Its
  # gradients must be the eager fixed-length step's (and, for chunked, the dense encoder's): within 1e-5 of the
  # gradient's scale (float32 sums in another order, |g| ~ 10-100).
  if attention_type == "chunked":
    fields, seq = dict(attention_type="chunked", query_chunk_size=16, key_chunk_size=8), 45
  else:
    fields, seq = dict(attention_type="block_sparse", block_size=8, num_random_blocks=2), 117  # sparse at 117
  dense = AlbertEncoder(AlbertConfig(**{**TINY, "num_hidden_layers": 2, "num_hidden_groups": 1, "inner_group_num": 1}))
  encoder = copy_of(dense, **fields)
  inputs = make_inputs(seq=seq)
  out_static, grads_static = outputs_and_grads(encoder, inputs)
  spec = [{name: tf.TensorSpec([None, None], tf.int32) for name in inputs}]

  def step(inputs):
    with tf.GradientTape() as tape:
      out = encoder(inputs, training=True)["sequence_output"]
      loss = tf.reduce_sum(tf.sin(out))
    return out, tape.gradient(loss, encoder.trainable_variables)

  out, grads = tf.function(step, input_signature=spec)(inputs)
  grads = [np.zeros(v.shape) if g is None else tf.convert_to_tensor(g).numpy()
           for v, g in zip(encoder.trainable_variables, grads)]
  names = [v.path for v in encoder.trainable_variables]
  np.testing.assert_allclose(out.numpy(), out_static, atol=1e-5)
  assert_grads_close(grads_static, grads, names)
  if attention_type == "chunked":
    assert_grads_close(outputs_and_grads(dense, inputs)[1], grads, names)


@pytest.mark.slow
@pytest.mark.cpu_kind
@pytest.mark.parametrize("attention_type", ["chunked", "block_sparse"])
def test_mixed_bfloat16_stays_close_to_float32(attention_type):
  config = AlbertConfig(**{**TINY, "attention_type": attention_type, "block_size": 8, "num_random_blocks": 2,
                           "query_chunk_size": 32, "key_chunk_size": 16})
  fp32 = AlbertEncoder(config)
  inputs = make_inputs(seq=117)
  reference = fp32(inputs)["sequence_output"].numpy()
  keras.config.set_dtype_policy("mixed_bfloat16")
  try:
    bf16 = AlbertEncoder(config)
    bf16.set_weights(fp32.get_weights())
    out, grads = outputs_and_grads(bf16, inputs)
    inference = bf16(inputs)["sequence_output"].numpy()
  finally:
    keras.config.set_dtype_policy("float32")
  for got in (out, inference):
    cosine = (got * reference).sum() / np.linalg.norm(got) / np.linalg.norm(reference)
    assert cosine > 0.999, cosine
  assert all(np.isfinite(g).all() for g in grads)


def test_chunked_training_refuses_attention_dropout_with_a_clear_error():
  encoder = AlbertEncoder(AlbertConfig(**{**TINY, "attention_type": "chunked", "attention_probs_dropout_prob": 0.1}))
  encoder(make_inputs())  # inference: no dropout, fine
  with pytest.raises(ValueError, match="attention_probs_dropout_prob"):
    encoder(make_inputs(), training=True)


_MIRRORED_CHECK = """
import numpy as np, tensorflow as tf
tf.config.set_logical_device_configuration(tf.config.list_physical_devices("CPU")[0],
                                           [tf.config.LogicalDeviceConfiguration()] * 2)
from tests.official_albert.modeling.test_long_attention import TINY, assert_grads_close, make_inputs, outputs_and_grads
from official_albert import AlbertConfig, AlbertEncoder
strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
inputs = make_inputs(batch=4, seq=117)
for attention_type in ("chunked", "block_sparse"):
  config = AlbertConfig(**{**TINY, "attention_type": attention_type, "block_size": 8, "num_random_blocks": 2,
                           "query_chunk_size": 32, "key_chunk_size": 16})
  single = AlbertEncoder(config)
  _, expected = outputs_and_grads(single, inputs)
  with strategy.scope():
    replicated = AlbertEncoder(config)
  replicated.set_weights(single.get_weights())
  batch = next(iter(strategy.experimental_distribute_dataset(tf.data.Dataset.from_tensors(inputs))))

  @tf.function
  def step(batch):
    def replica(x):
      with tf.GradientTape() as tape:
        loss = tf.reduce_sum(tf.sin(replicated(x, training=True)["sequence_output"]))
      grads = tape.gradient(loss, replicated.trainable_variables)
      return [tf.zeros_like(v) if g is None else tf.convert_to_tensor(g)
              for v, g in zip(replicated.trainable_variables, grads)]
    return [strategy.reduce("SUM", g, axis=None) for g in strategy.run(replica, args=(batch,))]

  assert strategy.num_replicas_in_sync == 2
  assert_grads_close(expected, [g.numpy() for g in step(batch)])
print("MIRRORED_OK")
"""


@pytest.mark.large
def test_under_mirrored_strategy_two_replicas_equal_one_device():
  """tf.distribute over 2 logical CPUs (own process: they must be set before TensorFlow starts)."""
  import os
  import subprocess
  import sys
  root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
  done = subprocess.run([sys.executable, "-c", _MIRRORED_CHECK], cwd=root, capture_output=True, text=True,
                        env={**os.environ, "PYTHONPATH": CHILD_PYTHONPATH, "KERAS_BACKEND": "tensorflow"})
  assert "MIRRORED_OK" in done.stdout, done.stderr[-3000:]


# ------------------------------------------------------------------------------------------------------- config
def test_attention_fields_round_trip_and_absent_means_dense(tmp_path):
  dense = AlbertConfig(**TINY)
  assert "attention_type" not in dense.to_dict()  # dense configs keep exactly the keys they had
  long = dense.replace(attention_type="block_sparse", block_size=32, num_random_blocks=2, block_sparse_seed=3)
  path = str(tmp_path / "config.json")
  long.to_json_file(path)
  data = json.loads(open(path).read())
  assert (data["attention_type"], data["block_size"], data["num_random_blocks"]) == ("block_sparse", 32, 2)
  assert AlbertConfig.from_json_file(path) == long
  assert AlbertConfig(**TINY, attention_type="original_full").attention_type == "dense"  # HF BigBird's name
  with pytest.raises(ValueError, match="did you mean 'chunked'|Did you mean 'chunked'"):
    AlbertConfig(attention_type="chunkd")
  with pytest.raises(ValueError, match="block_size"):
    AlbertConfig(attention_type="block_sparse", block_size=0)


def test_attention_fields_travel_through_hf_and_original_config_dicts():
  from official_albert.checkpoints.tf1 import original_config_dict
  config = AlbertConfig.from_preset("albert-base-v2", attention_type="chunked", key_chunk_size=256)
  hf = config.to_hf_dict()
  assert hf["attention_type"] == "chunked" and hf["key_chunk_size"] == 256
  assert AlbertConfig.from_dict(hf) == config
  original = original_config_dict(config)
  assert AlbertConfig.from_dict(original) == config
  assert "attention_type" not in original_config_dict(AlbertConfig.from_preset("albert-base-v2"))


def test_experiment_override_sets_the_attention_type():
  from official_albert.training.experiment_config import ModelConfig
  model = ModelConfig.from_preset("albert-base-v2")
  model.attention_type = "block_sparse"
  model.block_size = 32
  assert model.to_albert_config().attention_type == "block_sparse"
