"""ALBERT feed-forward sub-block (reference §1.2 step 4, second half).

H→F dense with the configured activation (TF1 `ffn_1/intermediate/dense`) → F→H dense (`ffn_1/intermediate/output/
dense`) → dropout → residual → `LayerNorm_1`. No dropout after the activation.
"""

import keras
from keras import ops

from official_albert.modeling.layers.activations import gelu_new_training
from official_albert.modeling.layers.activations import get_activation
from official_albert.modeling.layers.dropout import AlbertDropout
from official_albert.modeling.layers.embeddings import layer_norm
from official_albert.modeling.layers.initializers import kernel_initializer


@keras.saving.register_keras_serializable(package="official_albert")
class AlbertFeedForward(keras.layers.Layer):
  """Position-wise FFN + residual + LayerNorm."""

  def __init__(self, hidden_size, intermediate_size, hidden_act="gelu_new", hidden_dropout_prob=0.0,
               initializer_range=0.02, layer_norm_eps=1e-12, **kwargs):
    super().__init__(**kwargs)
    self.hidden_size = hidden_size
    self.intermediate_size = intermediate_size
    self.hidden_act = hidden_act
    self.hidden_dropout_prob = hidden_dropout_prob
    self.initializer_range = initializer_range
    self.layer_norm_eps = layer_norm_eps
    # A new initializer per kernel: one shared object would give both the same numbers (kernel_initializer).
    self.intermediate = keras.layers.Dense(intermediate_size, activation=get_activation(hidden_act),
                                           kernel_initializer=kernel_initializer(initializer_range),
                                           name="intermediate")
    self.output_dense = keras.layers.Dense(hidden_size, kernel_initializer=kernel_initializer(initializer_range),
                                           name="output_dense")
    self.output_dropout = AlbertDropout(hidden_dropout_prob, name="output_dropout")
    self.layer_norm = layer_norm(layer_norm_eps, "LayerNorm_1")

  def build(self, input_shape=None):
    self.intermediate.build((None, None, self.hidden_size))
    self.output_dense.build((None, None, self.intermediate_size))
    self.layer_norm.build((None, None, self.hidden_size))

  def prepared_weights(self):
    """The two kernels and biases, once per encoder call (see `AlbertAttention.prepared_weights`)."""
    weights = {"intermediate_kernel": self.intermediate.kernel, "intermediate_bias": self.intermediate.bias,
               "output_kernel": self.output_dense.kernel, "output_bias": self.output_dense.bias}
    return {k: ops.cast(v, self.compute_dtype) for k, v in weights.items()}

  def call(self, hidden_states, training=False, weights=None):
    """hidden_states [..., H]; `weights`: `prepared_weights()` (computed here when absent)."""
    if weights is None:
      weights = self.prepared_weights()
    compute = self.compute_dtype
    w = weights
    x = ops.cast(hidden_states, compute)
    # `ops.add` (BiasAdd) and a 2-D input: TF's oneDNN remapper fuses MatMul + BiasAdd + GELU into one kernel. A
    # training step keeps GELU's input for the backward, so nothing fuses there: the GELU's gradient is one fused pass.
    fused_grad = training is True and self.hidden_act == "gelu_new"
    activation = gelu_new_training if fused_grad else self.intermediate.activation
    x = activation(ops.add(ops.matmul(x, w["intermediate_kernel"]), w["intermediate_bias"]))
    x = ops.add(ops.matmul(x, w["output_kernel"]), w["output_bias"])
    x = self.output_dropout(x, training=training)
    return self.layer_norm(ops.cast(x, "float32") + ops.cast(hidden_states, "float32"),
                           closed_form=compute != "float32", training=training)

  def get_config(self):
    config = super().get_config()
    config.update(hidden_size=self.hidden_size, intermediate_size=self.intermediate_size,
                  hidden_act=self.hidden_act, hidden_dropout_prob=self.hidden_dropout_prob,
                  initializer_range=self.initializer_range, layer_norm_eps=self.layer_norm_eps)
    return config
