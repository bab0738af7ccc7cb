"""ALBERT self-attention sub-block (reference §1.2 step 4, first half).

Q/K/V dense (2-D [H,H] kernels, as in the TF1 checkpoint) → scores·1/√D + additive mask → softmax (float32) → dropout
→ ·V → output dense → dropout → residual → LayerNorm (post-LN). TF1 scope: `.../attention_1/{self,output}` and the
post-attention `LayerNorm`.

The softmax(QKᵀ)V in the middle is one of three (`AlbertConfig.attention_type`): "dense" (above, the reference),
"chunked" (the same function over tiles, chunked_attention.py) or "block_sparse" (BigBird, block_sparse_attention.py).
The weights are the same in all three, so a checkpoint loads into any of them.
"""

import math

import keras
from keras import ops

from official_albert.config import ATTENTION_TYPES
from official_albert.modeling.layers.block_sparse_attention import block_sparse_attention
from official_albert.modeling.layers.block_sparse_attention import random_block_layout
from official_albert.modeling.layers.block_sparse_attention import random_block_layout_in_graph
from official_albert.modeling.layers.block_sparse_attention import sparse_min_length
from official_albert.modeling.layers.chunked_attention import chunked_attention
from official_albert.modeling.layers.dropout import AlbertDropout
from official_albert.modeling.layers.embeddings import layer_norm
from official_albert.modeling.layers.initializers import kernel_initializer


def attention_bias_from_mask(input_mask):
  """[B,S] 1/0 mask → additive float32 bias [B,1,1,S] with −10000 at padding (the reference's value, not −inf)."""
  mask = ops.cast(input_mask, "float32")
  # expand_dims, not [:, None, None, :]: a strided slice with new axes is no LiteRT builtin (serving/litert_export.py).
  return ops.expand_dims(ops.expand_dims(1.0 - mask, 1), 1) * -10000.0


@keras.saving.register_keras_serializable(package="official_albert")
class AlbertAttention(keras.layers.Layer):
  """Multi-head self-attention + output projection + residual + LayerNorm.

  Args:
    hidden_size: H.
    num_attention_heads: N (H % N == 0).
    attention_probs_dropout_prob: dropout on the attention probabilities.
    hidden_dropout_prob: dropout on the output projection, before the residual.
    initializer_range: truncated-normal stddev.
    layer_norm_eps: LayerNorm epsilon.
    fused_qkv: compute Q, K and V with one [H,3H] matmul (the kernels stay three variables with the checkpoint
      names; concatenation happens in the graph). Numerically equivalent; faster on most devices.
    attention_type, block_size, num_random_blocks, block_sparse_seed, query_chunk_size, key_chunk_size: the
      `AlbertConfig` fields of the same names.
    max_position_embeddings: the longest sequence (sizes block_sparse's layout table).
    layout_blocks: `AlbertConfig.block_sparse_layout_blocks` (None: ceil(max_position_embeddings / block_size)),
      the square of the layout table drawn at once; an extended model keeps its original's (see
      block_sparse_attention).
    num_layers: layer applications that call this block with a run-time `layer_index` (the encoder's layer loop).
  """

  def __init__(self, hidden_size, num_attention_heads, attention_probs_dropout_prob=0.0, hidden_dropout_prob=0.0,
               initializer_range=0.02, layer_norm_eps=1e-12, fused_qkv=True, attention_type="dense", block_size=64,
               num_random_blocks=3, block_sparse_seed=0, query_chunk_size=1024, key_chunk_size=512,
               max_position_embeddings=512, num_layers=1, layout_blocks=None, **kwargs):
    super().__init__(**kwargs)
    if hidden_size % num_attention_heads:
      raise ValueError(f"hidden_size ({hidden_size}) is not divisible by num_attention_heads ({num_attention_heads}).")
    if attention_type not in ATTENTION_TYPES:
      raise ValueError(f"attention_type={attention_type!r} is not one of {ATTENTION_TYPES}.")
    self.attention_type = attention_type
    self.block_size = block_size
    self.num_random_blocks = num_random_blocks
    self.block_sparse_seed = block_sparse_seed
    self.query_chunk_size = query_chunk_size
    self.key_chunk_size = key_chunk_size
    self.max_position_embeddings = max_position_embeddings
    self.num_layers = num_layers
    if layout_blocks is not None and (isinstance(layout_blocks, bool) or not isinstance(layout_blocks, int)
                                      or layout_blocks <= 0):
      raise ValueError(f"{self.name}: block_sparse_layout_blocks must be None or a positive integer, got "
                       f"{layout_blocks!r}.")
    self.layout_blocks = layout_blocks
    self.hidden_size = hidden_size
    self.num_attention_heads = num_attention_heads
    self.head_size = hidden_size // num_attention_heads
    self.attention_probs_dropout_prob = attention_probs_dropout_prob
    self.hidden_dropout_prob = hidden_dropout_prob
    self.initializer_range = initializer_range
    self.layer_norm_eps = layer_norm_eps
    self.fused_qkv = fused_qkv

    def dense(name):
      return keras.layers.Dense(hidden_size, kernel_initializer=kernel_initializer(initializer_range),
                                bias_initializer="zeros", name=name)

    self.query = dense("query")
    self.key = dense("key")
    self.value = dense("value")
    self.output_dense = dense("output_dense")
    self.layer_norm = layer_norm(layer_norm_eps, "LayerNorm")
    self.attention_dropout = AlbertDropout(attention_probs_dropout_prob, name="attention_dropout")
    self.output_dropout = AlbertDropout(hidden_dropout_prob, name="output_dropout")

  def build(self, input_shape=None):
    for sublayer in (self.query, self.key, self.value, self.output_dense):
      sublayer.build((None, None, self.hidden_size))
    self.layer_norm.build((None, None, self.hidden_size))

  def prepared_weights(self):
    """The block's matmul operands, built once per encoder call and shared by every layer routed to this block.

    ALBERT applies one block L times; reading, concatenating (fused Q/K/V) and casting its kernels to bfloat16 on
    every application cost a third of the bfloat16 forward pass. The encoder shares them at inference only: in
    training each layer casts its own copy, so each layer's gradient returns to float32 before the L of them are
    summed (one shared cast would sum them in bfloat16). (One cast per step with a float32-summing custom gradient
    was measured and not kept: docs/performance.md.)
    """
    if self.fused_qkv:
      qkv_kernel = ops.concatenate([self.query.kernel, self.key.kernel, self.value.kernel], axis=1)
      qkv_bias = ops.concatenate([self.query.bias, self.key.bias, self.value.bias], axis=0)
      weights = {"qkv_kernel": qkv_kernel, "qkv_bias": qkv_bias}
    else:
      weights = {f"{name}_{part}": getattr(getattr(self, name), part)
                 for name in ("query", "key", "value") for part in ("kernel", "bias")}
    weights["output_kernel"], weights["output_bias"] = self.output_dense.kernel, self.output_dense.bias
    return {k: ops.cast(v, self.compute_dtype) for k, v in weights.items()}

  def call(self, hidden_states, attention_mask, training=False, weights=None, layer_index=0):
    """hidden_states [B,S,H] or [B·S,H] (the encoder's flat layout); attention_mask [B,S] int (1 = attend, 0 = pad).

    `weights`: `prepared_weights()` of this block (the encoder passes them so that the L layers sharing this block
    prepare them once); computed here when absent. `layer_index`: which layer application this is (an int, or a
    scalar tensor below `num_layers`); block_sparse draws each layer's random blocks from it.
    """
    if weights is None:
      weights = self.prepared_weights()
    compute = self.compute_dtype
    w = weights
    flat = len(hidden_states.shape) == 2
    batch, seq = ops.shape(attention_mask)[0], ops.shape(attention_mask)[1]
    # Every matmul below is 2-D ([B·S,H] × [H,·]) and adds its bias with `ops.add` (TF: BiasAdd, not AddV2): that is
    # the pattern TF's oneDNN remapper fuses into one GEMM kernel (with the GELU in the FFN); a 3-D input or `+` is not.
    x = ops.reshape(hidden_states, (-1, self.hidden_size))
    x_compute = ops.cast(x, compute)
    # The mask stays integer so Keras' mixed-precision autocast cannot round the −10000 bias to bfloat16.
    attention_bias = attention_bias_from_mask(attention_mask)
    heads = (batch, seq, self.num_attention_heads, self.head_size)
    if self.fused_qkv:
      qkv = ops.add(ops.matmul(x_compute, w["qkv_kernel"]), w["qkv_bias"])
      # [B·S, 3H] → [3, B, N, S, D] in one transpose (instead of one per Q, K, V).
      qkv = ops.transpose(ops.reshape(qkv, (batch, seq, 3, self.num_attention_heads, self.head_size)),
                          (2, 0, 3, 1, 4))
      q, k, v = ops.unstack(qkv, 3, axis=0)  # (not qkv[i]: the gradient of a slice is a zero-filled full tensor)
    else:
      projections = (ops.add(ops.matmul(x_compute, w[f"{name}_kernel"]), w[f"{name}_bias"])
                     for name in ("query", "key", "value"))
      q, k, v = (ops.transpose(ops.reshape(p, heads), (0, 2, 1, 3)) for p in projections)
    if self.attention_type == "dense":
      context = self._dense_context(q, k, v, attention_bias, training)
    elif self.attention_type == "chunked":
      context = self._chunked_context(q, k, v, attention_bias, training)
    else:
      context = self._block_sparse_context(q, k, v, attention_mask, attention_bias, training, layer_index)
    context = ops.reshape(ops.transpose(context, (0, 2, 1, 3)), (-1, self.hidden_size))
    output = ops.add(ops.matmul(context, w["output_kernel"]), w["output_bias"])
    output = self.output_dropout(output, training=training)
    # Under mixed precision the closed-form LayerNorm (cheaper forward and backward, see AlbertLayerNorm); float32
    # models keep Keras' LayerNorm bit for bit.
    output = self.layer_norm(ops.cast(output, "float32") + ops.cast(x, "float32"),
                             closed_form=compute != "float32", training=training)
    return output if flat else ops.reshape(output, (batch, seq, self.hidden_size))

  def _dense_context(self, q, k, v, attention_bias, training):
    """softmax(QKᵀ/√D + bias)·V with the [B,N,S,S] scores in memory (the reference's computation)."""
    compute = self.compute_dtype
    scores = ops.einsum("bnqd,bnkd->bnqk", q, k)
    if training or compute != "bfloat16" or keras.backend.backend() != "tensorflow":
      # Softmax in float32 (and under mixed precision in training): the −10000 mask and the normaliser need the range.
      # (Under JAX a bfloat16 softmax sums in bfloat16: rows off by up to 0.3% at S=4096, docs/performance.md.)
      scores = ops.cast(scores, "float32") * (1.0 / math.sqrt(self.head_size)) + attention_bias
      probs = ops.cast(ops.softmax(scores, axis=-1), compute)
    else:
      # bfloat16 inference on TensorFlow: oneDNN's softmax accumulates in float32 internally, and −10000 rounds to
      # −9984 (still exp(·) = 0), so the two [B,N,S,S] casts around a float32 softmax buy nothing (docs/performance.md).
      scores = scores * ops.cast(1.0 / math.sqrt(self.head_size), compute) + ops.cast(attention_bias, compute)
      probs = ops.softmax(scores, axis=-1)
    probs = self.attention_dropout(probs, training=training)
    return ops.matmul(probs, v)  # [B, N, S, D]

  def _chunked_context(self, q, k, v, attention_bias, training):
    if training and self.attention_probs_dropout_prob > 0:
      # The tiles are recomputed in the backward pass, so a dropout mask would have to be drawn twice alike.
      raise ValueError(
          f"{self.name}: attention_type='chunked' does not apply attention_probs_dropout_prob "
          f"({self.attention_probs_dropout_prob}) in training; set attention_probs_dropout_prob=0 (as the v2 models "
          "were trained) or use attention_type='dense' or 'block_sparse'.")
    return chunked_attention(q, k, v, attention_bias[:, 0, 0, :], self.query_chunk_size, self.key_chunk_size)

  def _layout(self, num_blocks, layer_index):
    """The random blocks [N, nb−2, r] of layer application `layer_index` (see block_sparse_attention)."""
    max_blocks = -(-self.max_position_embeddings // self.block_size)
    table_blocks = self.layout_blocks or max_blocks
    args = (self.num_attention_heads, self.num_random_blocks, self.block_sparse_seed)
    static = isinstance(num_blocks, int)

    def one(layer):
      if static:
        return ops.convert_to_tensor(random_block_layout(num_blocks, *args, layer, max_blocks, table_blocks))
      return random_block_layout_in_graph(num_blocks, *args, layer, max_blocks, table_blocks)

    if isinstance(layer_index, int):
      return one(layer_index)
    return ops.take(ops.stack([one(layer) for layer in range(self.num_layers)]), layer_index, axis=0)

  def _block_sparse_context(self, q, k, v, attention_mask, attention_bias, training, layer_index):
    seq = ops.shape(q)[2]
    threshold = sparse_min_length(self.block_size, self.num_random_blocks)

    def sparse():
      num_blocks = (seq + self.block_size - 1) // self.block_size
      return block_sparse_attention(q, k, v, attention_mask, self.block_size, self._layout(num_blocks, layer_index),
                                    dropout=self.attention_dropout, training=training)

    if isinstance(seq, int):  # Known while tracing (always under JAX): one branch in the graph.
      return self._dense_context(q, k, v, attention_bias, training) if seq <= threshold else sparse()
    return ops.cond(seq <= threshold, lambda: self._dense_context(q, k, v, attention_bias, training), sparse)

  def get_config(self):
    config = super().get_config()
    config.update(hidden_size=self.hidden_size, num_attention_heads=self.num_attention_heads,
                  attention_probs_dropout_prob=self.attention_probs_dropout_prob,
                  hidden_dropout_prob=self.hidden_dropout_prob, initializer_range=self.initializer_range,
                  layer_norm_eps=self.layer_norm_eps, fused_qkv=self.fused_qkv)
    if self.attention_type != "dense":
      config.update(attention_type=self.attention_type, block_size=self.block_size,
                    num_random_blocks=self.num_random_blocks, block_sparse_seed=self.block_sparse_seed,
                    query_chunk_size=self.query_chunk_size, key_chunk_size=self.key_chunk_size,
                    max_position_embeddings=self.max_position_embeddings, num_layers=self.num_layers)
      if self.layout_blocks is not None:
        config.update(layout_blocks=self.layout_blocks)
    return config
