"""The JAX training loops' state written back into a Keras model (before saving it)."""

from __future__ import annotations

from typing import Sequence


def assign_state(model, trainable: Sequence, non_trainable: Sequence) -> None:
  """Writes the stateless loop's `trainable` / `non_trainable` values into `model`'s variables, in their order."""
  for variable, value in zip(model.trainable_variables, trainable):
    variable.assign(value)
  for variable, value in zip(model.non_trainable_variables, non_trainable):
    variable.assign(value)
