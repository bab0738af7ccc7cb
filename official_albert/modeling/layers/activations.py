"""Activations by their config name (reference §1.2 item 6)."""

import math
import os

import keras
from keras import ops

_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)


def gelu_new(x):
  """The tanh GELU of the original ALBERT/BERT ("gelu" there, "gelu_new" in HF): 0.5x(1+tanh(√(2/π)(x+0.044715x³))).

  Computed by `tf.nn.gelu(approximate=True)` (the same formula): TF's oneDNN graph rewrite recognises that op after a
  Dense and fuses MatMul + bias + GELU into one kernel, which the hand-written formula does not get.
  """
  return keras.activations.gelu(x, approximate=True)


FUSED_GELU_GRAD_ENV = "OFFICIAL_ALBERT_FUSED_GELU_GRAD"


def fused_gelu_grad_enabled() -> bool:
  """Whether training steps take `gelu_new_training`'s fused gradient: yes unless `FUSED_GELU_GRAD_ENV` is 0 / false /
  no (autodiff of the plain op: no XLA cluster in the training graph, e.g. to debug or where XLA is unavailable)."""
  return os.environ.get(FUSED_GELU_GRAD_ENV, "").strip().lower() not in ("0", "false", "no")


def gelu_new_training(x):
  """`gelu_new` with its gradient as one fused kernel, for training steps on the TensorFlow backend.

  The forward is `gelu_new`'s own op (the same values). Autodiff of that composite leaves a dozen elementwise ops per
  FFN call in the backward (Mul, Pow, TanhGrad, AddV2 over [tokens, F]), each a pass over memory and, under bf16, a
  convert per element; here the derivative is one XLA-compiled function (one pass, computed in float32; compiled
  once per input shape), the rest of the graph unchanged. Other backends get `gelu_new` (JAX fuses the autodiff graph
  itself), and so does TensorFlow with `FUSED_GELU_GRAD_ENV=0`.
  """
  if keras.backend.backend() != "tensorflow" or not fused_gelu_grad_enabled():
    return gelu_new(x)
  from official_albert.modeling.layers import fused_gelu_grad  # noqa: PLC0415 (TensorFlow only: not on other backends)
  return fused_gelu_grad.gelu_new_fused_grad(x)


def gelu_new_formula(x):
  """`gelu_new` written out (kept as the reference the fused op is tested against)."""
  return 0.5 * x * (1.0 + ops.tanh(_SQRT_2_OVER_PI * (x + 0.044715 * ops.power(x, 3))))


def gelu_exact(x):
  """The erf GELU (HF's "gelu"); not used by any released ALBERT model."""
  return keras.activations.gelu(x, approximate=False)


_ACTIVATIONS = {
    "gelu_new": gelu_new,
    "gelu": gelu_exact,
    "relu": keras.activations.relu,
    "tanh": keras.activations.tanh,
    "silu": keras.activations.silu,
    "linear": keras.activations.linear,
}


def get_activation(name: str):
  """Returns the activation function for a canonical `AlbertConfig.hidden_act` name."""
  try:
    return _ACTIVATIONS[name]
  except KeyError:
    raise ValueError(f"Unknown activation {name!r}; expected one of {sorted(_ACTIVATIONS)}.") from None
