"""The tanh GELU with its derivative as one XLA-compiled pass (TensorFlow backend, training steps).

In a training step TF's oneDNN remapper cannot fuse MatMul + BiasAdd + GELU (the GELU's input is kept for the
backward), and autodiff of the tanh formula leaves about a dozen elementwise ops over [tokens, F] in the backward,
each a full pass over memory (and under bfloat16 a convert per element). Writing the derivative out and compiling it
with XLA makes it one pass; the forward stays TF's own GELU op, so the values are `gelu_new`'s exactly.
Measurements: docs/performance.md ("The fused GELU gradient").
"""

import math

import tensorflow as tf

_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_CUBIC = 0.044715


@tf.function(jit_compile=True, reduce_retracing=True, autograph=False)  # no control flow to convert
def _gelu_new_derivative_times(x, dy):
  """d gelu_new / dx · dy, computed in float32 and returned in x's dtype.

  d/dx [0.5 x (1 + tanh(u))] = 0.5 (1 + t) + 0.5 x (1 - t²) u', with u = √(2/π)(x + 0.044715 x³), t = tanh(u) and
  u' = √(2/π)(1 + 3 · 0.044715 x²).
  """
  xf = tf.cast(x, tf.float32)
  x2 = xf * xf
  t = tf.tanh(_SQRT_2_OVER_PI * xf * (1.0 + _CUBIC * x2))
  derivative = 0.5 * (1.0 + t) + 0.5 * xf * (1.0 - t * t) * _SQRT_2_OVER_PI * (1.0 + 3.0 * _CUBIC * x2)
  return tf.cast(derivative * tf.cast(dy, tf.float32), x.dtype)


@tf.custom_gradient
def gelu_new_fused_grad(x):
  """`tf.nn.gelu(x, approximate=True)` whose gradient is `_gelu_new_derivative_times` (one fused pass)."""

  def grad(dy):
    return _gelu_new_derivative_times(x, dy)

  return tf.nn.gelu(x, approximate=True), grad
