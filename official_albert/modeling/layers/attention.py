"""ALBERT self-attention sub-block (reference §1.2 step 4, first half).

Q/K/V dense (2-D [H,H] kernels, as in the TF1 checkpoint) → scores·1/√D + additive mask → softmax (float32) → dropout
→ ·V → output dense → dropout → residual → LayerNorm (post-LN). TF1 scope: `.../attention_1/{self,output}` and the
post-attention `LayerNorm`.
"""

import math

import keras
from keras import ops

from official_albert.modeling.layers.embeddings import layer_norm
from official_albert.modeling.layers.initializers import kernel_initializer


def attention_bias_from_mask(input_mask):
  """[B,S] 1/0 mask → additive float32 bias [B,1,1,S] with −10000 at padding (the reference's value, not −inf)."""
  mask = ops.cast(input_mask, "float32")
  return (1.0 - mask)[:, None, None, :] * -10000.0


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
  """

  def __init__(self, hidden_size, num_attention_heads, attention_probs_dropout_prob=0.0, hidden_dropout_prob=0.0,
               initializer_range=0.02, layer_norm_eps=1e-12, fused_qkv=True, **kwargs):
    super().__init__(**kwargs)
    if hidden_size % num_attention_heads:
      raise ValueError(f"hidden_size ({hidden_size}) is not divisible by num_attention_heads ({num_attention_heads}).")
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
    self.attention_dropout = keras.layers.Dropout(attention_probs_dropout_prob, name="attention_dropout")
    self.output_dropout = keras.layers.Dropout(hidden_dropout_prob, name="output_dropout")

  def build(self, input_shape=None):
    for sublayer in (self.query, self.key, self.value, self.output_dense):
      sublayer.build((None, None, self.hidden_size))
    self.layer_norm.build((None, None, self.hidden_size))

  def _split_heads(self, x):
    batch, seq = ops.shape(x)[0], ops.shape(x)[1]
    return ops.reshape(x, (batch, seq, self.num_attention_heads, self.head_size))

  def call(self, hidden_states, attention_mask, training=False):
    """hidden_states [B,S,H]; attention_mask [B,S] int (1 = attend, 0 = padding)."""
    x = hidden_states
    # The mask stays integer so Keras' mixed-precision autocast cannot round the −10000 bias to bfloat16.
    attention_bias = attention_bias_from_mask(attention_mask)
    if self.fused_qkv:
      kernel = ops.concatenate([self.query.kernel, self.key.kernel, self.value.kernel], axis=1)
      bias = ops.concatenate([self.query.bias, self.key.bias, self.value.bias], axis=0)
      qkv = ops.matmul(ops.cast(x, self.compute_dtype), ops.cast(kernel, self.compute_dtype))
      qkv = qkv + ops.cast(bias, self.compute_dtype)
      q, k, v = ops.split(qkv, 3, axis=-1)
    else:
      q, k, v = self.query(x), self.key(x), self.value(x)
    q = self._split_heads(q)
    k = self._split_heads(k)
    v = self._split_heads(v)
    scores = ops.einsum("bqnd,bknd->bnqk", q, k)
    # Softmax in float32 (also under mixed precision): the −10000 mask and the normaliser need the range.
    scores = ops.cast(scores, "float32") * (1.0 / math.sqrt(self.head_size)) + attention_bias
    probs = ops.softmax(scores, axis=-1)
    probs = self.attention_dropout(ops.cast(probs, self.compute_dtype), training=training)
    context = ops.einsum("bnqk,bknd->bqnd", probs, v)
    batch, seq = ops.shape(context)[0], ops.shape(context)[1]
    context = ops.reshape(context, (batch, seq, self.hidden_size))
    output = self.output_dropout(self.output_dense(context), training=training)
    return self.layer_norm(ops.cast(output, "float32") + ops.cast(hidden_states, "float32"))

  def get_config(self):
    config = super().get_config()
    config.update(hidden_size=self.hidden_size, num_attention_heads=self.num_attention_heads,
                  attention_probs_dropout_prob=self.attention_probs_dropout_prob,
                  hidden_dropout_prob=self.hidden_dropout_prob, initializer_range=self.initializer_range,
                  layer_norm_eps=self.layer_norm_eps, fused_qkv=self.fused_qkv)
    return config
