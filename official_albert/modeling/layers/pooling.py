"""Sentence pooling: one vector per text from the encoder's token vectors, as sentence-transformers pools them.

Each mode (sentence-transformers' names, `POOLING_MODES`) reduces the [B,S,H] sequence output over the tokens the
input mask keeps; several modes are concatenated in the order given, as sentence-transformers' Pooling module does
(its legacy `pooling_mode_*` files give them in `POOLING_MODES` order), so a model that pools "cls" and "mean" gives
[B, 2H] in the layout `SentenceTransformer.encode` gives. The arithmetic is theirs too (the mean divides by
max(count, 1e-9), the weighted mean weighs token i by i + 1, the L2 normalisation divides by max(norm, 1e-12)), so
that an imported model gives the same vectors, not merely similar ones. (Max pooling fills padding with -1e9 where
theirs uses -inf: the same result for any text with a token.)
"""

from typing import Sequence, Tuple

import keras
from keras import ops

# sentence-transformers' pooling modes (their names), in the order of its legacy `pooling_mode_*` keys.
POOLING_MODES = ("cls", "max", "mean", "mean_sqrt_len_tokens", "weightedmean", "lasttoken")


def check_pooling_modes(modes) -> Tuple[str, ...]:
  """`modes` (a name, or names in concatenation order) as a tuple; a ValueError naming an unknown or repeated one."""
  if not isinstance(modes, (str, list, tuple)):
    raise ValueError(f"pooling={modes!r}: expected a mode's name or a list of them, of {POOLING_MODES}.")
  modes = (modes,) if isinstance(modes, str) else tuple(modes)
  unknown = [m for m in modes if m not in POOLING_MODES]
  if unknown or not modes or len(set(modes)) != len(modes):
    raise ValueError(f"pooling={list(modes)!r}: expected one or more distinct modes of {POOLING_MODES}.")
  return modes


@keras.saving.register_keras_serializable(package="official_albert")
class SentencePooling(keras.layers.Layer):
  """[B,S,H] token vectors + [B,S] mask → [B, H·len(modes)] float32, optionally L2-normalised.

  Args:
    modes: pooling modes (`POOLING_MODES`), concatenated in the order given.
    normalize: divide each vector by its L2 norm (sentence-transformers' Normalize module).
  """

  def __init__(self, modes: Sequence[str] = ("mean",), normalize: bool = False, **kwargs):
    kwargs.setdefault("dtype", "float32")
    super().__init__(**kwargs)
    self.modes = check_pooling_modes(modes)
    self.normalize = bool(normalize)

  def call(self, sequence_output, input_mask):
    x = ops.cast(sequence_output, "float32")
    mask = ops.expand_dims(ops.cast(input_mask, "float32"), -1)  # (no [:, :, None]: LiteRT has no such slice)
    count = ops.sum(mask, axis=1)
    pooled = []
    for mode in self.modes:
      if mode == "cls":
        pooled.append(x[:, 0, :])
      elif mode == "max":
        pooled.append(ops.max(ops.where(mask > 0, x, -1e9), axis=1))
      elif mode == "mean":
        pooled.append(ops.sum(x * mask, axis=1) / ops.maximum(count, 1e-9))
      elif mode == "mean_sqrt_len_tokens":
        pooled.append(ops.sum(x * mask, axis=1) / ops.sqrt(ops.maximum(count, 1e-9)))
      elif mode == "weightedmean":
        positions = ops.reshape(ops.cast(ops.arange(1, ops.shape(x)[1] + 1), "float32"), (1, -1, 1))
        weights = mask * positions
        pooled.append(ops.sum(x * weights, axis=1) / ops.maximum(ops.sum(weights, axis=1), 1e-9))
      else:  # lasttoken: the last kept token of each row (inputs are padded on the right)
        last = ops.maximum(ops.cast(count[:, 0], "int32") - 1, 0)
        pooled.append(ops.take_along_axis(x, ops.reshape(last, (-1, 1, 1)), axis=1)[:, 0, :])
    vector = pooled[0] if len(pooled) == 1 else ops.concatenate(pooled, axis=-1)
    if self.normalize:
      vector = vector / ops.maximum(ops.sqrt(ops.sum(ops.square(vector), axis=-1, keepdims=True)), 1e-12)
    return vector

  def get_config(self):
    config = super().get_config()
    config.update(modes=list(self.modes), normalize=self.normalize)
    return config
