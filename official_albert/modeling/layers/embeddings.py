"""Factorized ALBERT embeddings (reference §1.2 step 1).

word [V,E] + token type [T,E] + position [P,E] → LayerNorm → dropout.
"""

import keras
from keras import ops

from official_albert.modeling.layers.dropout import AlbertDropout
from official_albert.modeling.layers.initializers import kernel_initializer


def layer_norm(epsilon: float, name: str = "LayerNorm") -> "AlbertLayerNorm":
  """LayerNorm over the last axis, always computed in float32 (also under mixed precision)."""
  return AlbertLayerNorm(axis=-1, epsilon=epsilon, dtype="float32", name=name)


def _normalize(x, gamma, beta, epsilon: float):
  """(x − mean) · rstd · γ + β over the last axis; also returns x̂ = (x − mean) · rstd and rstd."""
  mean = ops.mean(x, axis=-1, keepdims=True)
  centered = x - mean
  rstd = ops.rsqrt(ops.mean(ops.square(centered), axis=-1, keepdims=True) + epsilon)
  x_hat = centered * rstd
  return x_hat * gamma + beta, x_hat, rstd


def closed_form_layer_norm(x, gamma, beta, epsilon: float, training: bool = False):
  """LayerNorm over the last axis as (x − mean) · rstd · γ + β, with the closed-form backward pass when training.

  Keras' formulation, `x · (rsqrt(var + ε) · γ) + (β − mean · rsqrt(var + ε) · γ)`, makes the broadcast products
  full [N,H] tensors, and autodiff of it adds their gradients and broadcast reductions: 30 math ops per LayerNorm,
  forward and backward. Written out, dx = rstd · (dx̂ − mean(dx̂) − x̂ · mean(dx̂ · x̂)) with dx̂ = dy · γ,
  dγ = Σ dy · x̂, dβ = Σ dy, it takes 20.
  Same function, different rounding (relative 1e-7 in float32): the encoder uses it only under mixed precision,
  so float32 models keep Keras' LayerNorm bit for bit.
  """
  if not training:
    return _normalize(x, gamma, beta, epsilon)[0]
  leading = tuple(range(len(x.shape) - 1))

  @ops.custom_gradient
  def normalize(x, gamma, beta):
    y, x_hat, rstd = _normalize(x, gamma, beta, epsilon)

    def grad(*args, upstream=None):
      dy = args[0] if upstream is None else upstream
      dx_hat = dy * gamma
      dx = rstd * (dx_hat - ops.mean(dx_hat, axis=-1, keepdims=True)
                   - x_hat * ops.mean(dx_hat * x_hat, axis=-1, keepdims=True))
      return dx, ops.sum(dy * x_hat, axis=leading), ops.sum(dy, axis=leading)

    return y, grad

  return normalize(x, gamma, beta)


@keras.saving.register_keras_serializable(package="official_albert")
class AlbertLayerNorm(keras.layers.LayerNormalization):
  """Keras' LayerNormalization (same variables, same config), with `closed_form_layer_norm` on request.

  The encoder's blocks ask for `closed_form=True` under mixed precision (bfloat16 compute, float32 LayerNorm):
  fewer full-size elementwise ops in the forward pass and far fewer in the backward pass. Same-process A/B,
  albert-base b8×s128 on a 2-core AVX-512-BF16 CPU: pretraining step +1.5–3%, bfloat16 inference +2–3%, outputs
  and gradients as close to float32 as before. `closed_form=False` (the default, and every float32 model) is Keras'
  LayerNorm unchanged.
  """

  def call(self, inputs, closed_form=False, training=False):
    axes = list(self.axis) if isinstance(self.axis, (list, tuple)) else [self.axis]
    last_axis = axes in ([-1], [len(inputs.shape) - 1])
    if not closed_form or self.rms_scaling or not (self.center and self.scale and last_axis):
      return super().call(inputs)
    # The variables' values are read here (`copy`: a tensor, not the variable), so that the custom gradient returns
    # their gradients as those of plain inputs.
    gamma, beta = ops.copy(self.gamma), ops.copy(self.beta)
    return closed_form_layer_norm(ops.cast(inputs, self.compute_dtype), gamma, beta, self.epsilon, bool(training))


@keras.saving.register_keras_serializable(package="official_albert")
class AlbertEmbeddings(keras.layers.Layer):
  """Embeddings of width E (`bert/embeddings/*`). The output has width E; projection to H happens in the encoder."""

  def __init__(self, vocab_size, embedding_size, max_position_embeddings, type_vocab_size, initializer_range=0.02,
               layer_norm_eps=1e-12, dropout_rate=0.0, **kwargs):
    super().__init__(**kwargs)
    self.vocab_size = vocab_size
    self.embedding_size = embedding_size
    self.max_position_embeddings = max_position_embeddings
    self.type_vocab_size = type_vocab_size
    self.initializer_range = initializer_range
    self.layer_norm_eps = layer_norm_eps
    self.dropout_rate = dropout_rate
    self.layer_norm = layer_norm(layer_norm_eps)
    self.dropout = AlbertDropout(dropout_rate, name="dropout")

  def build(self, input_shape=None):
    # A new initializer per table: one shared object would give all three the same values (kernel_initializer).
    def init():
      return kernel_initializer(self.initializer_range)

    # Tables stay float32 under mixed precision (no autocast): lookups are cheap and the sum feeds a float32 LN.
    self.word_embeddings = self.add_weight(
        name="word_embeddings", shape=(self.vocab_size, self.embedding_size), initializer=init(), dtype="float32",
        autocast=False)
    self.token_type_embeddings = self.add_weight(
        name="token_type_embeddings", shape=(self.type_vocab_size, self.embedding_size), initializer=init(),
        dtype="float32", autocast=False)
    self.position_embeddings = self.add_weight(
        name="position_embeddings", shape=(self.max_position_embeddings, self.embedding_size), initializer=init(),
        dtype="float32", autocast=False)
    self.layer_norm.build((None, None, self.embedding_size))

  def call(self, input_word_ids, input_type_ids, training=False):
    seq_length = ops.shape(input_word_ids)[1]
    words = ops.take(self.word_embeddings, input_word_ids, axis=0)
    types = ops.take(self.token_type_embeddings, input_type_ids, axis=0)
    positions = self.position_embeddings[:seq_length]
    x = words + types + positions[None, :, :]
    x = self.layer_norm(x)
    return self.dropout(x, training=training)

  def compute_output_spec(self, input_word_ids, input_type_ids, training=False):
    return keras.KerasTensor(tuple(input_word_ids.shape) + (self.embedding_size,), dtype="float32")

  def get_config(self):
    config = super().get_config()
    config.update(vocab_size=self.vocab_size, embedding_size=self.embedding_size,
                  max_position_embeddings=self.max_position_embeddings, type_vocab_size=self.type_vocab_size,
                  initializer_range=self.initializer_range, layer_norm_eps=self.layer_norm_eps,
                  dropout_rate=self.dropout_rate)
    return config
