"""A longer model from a trained one: the position table extended by copying its trained rows (Longformer's recipe).

Beltagy et al. (2020) built Longformer's 4096-position table by copying RoBERTa's 512 trained rows over and over
(row 512·k + i = row i), which kept the model's local position structure at every offset; continued pretraining
then adapts it in a few thousand steps. `extend_model` does the same for any of our models: every other variable is
copied unchanged, the first rows of the new table are the old rows bit for bit, and the new config may also switch
the attention type (the weights of dense, chunked and block-sparse attention are the same). A block_sparse model
keeps its random-block layout (`kept_layout_blocks`), so the extended model computes the original's outputs on
every input the original could take.
"""

from __future__ import annotations

from typing import Dict, Optional

import numpy as np

from official_albert.checkpoints.names import tf1_variable_map

_POSITIONS = "bert/embeddings/position_embeddings"


def tiled_positions(table: np.ndarray, num_positions: int) -> np.ndarray:
  """[P,E] → [num_positions,E] with row j = table[j mod P] (a shorter target keeps the first rows)."""
  table = np.asarray(table)
  reps = -(-num_positions // table.shape[0])
  return np.tile(table, (reps, 1))[:num_positions]


def kept_layout_blocks(old, new) -> Optional[int]:
  """`new.block_sparse_layout_blocks` that keeps `old`'s block-sparse random layout (both AlbertConfigs).

  The layout's table square is ceil(max_position_embeddings / block_size) blocks unless the config records another
  size; a block_sparse model given more (or fewer) positions keeps its original's size, so it attends to the same
  random blocks, and computes the same outputs, at every length the original took. None when that is the new
  config's own default, or when there is no layout to keep (the original is not block_sparse, or the block size
  changes).
  """
  if old.attention_type != "block_sparse" or new.block_size != old.block_size:
    return new.block_sparse_layout_blocks
  size = old.block_sparse_layout_blocks or -(-old.max_position_embeddings // old.block_size)
  return None if size == -(-new.max_position_embeddings // new.block_size) else size


def extend_model(model, max_position_embeddings: Optional[int] = None, attention: Optional[Dict] = None):
  """A copy of `model` (any of ours) with `max_position_embeddings` rows and the attention fields in `attention`.

  Args:
    model: an AlbertEncoder, AlbertPretrainer or task model.
    max_position_embeddings: rows of the new table (None keeps the model's).
    attention: AlbertConfig attention fields to set (`attention_type`, `block_size`, `num_random_blocks`, ...).

  Returns:
    The new model (same class and options, every variable assigned).
  """
  changes = dict(attention or {})
  if max_position_embeddings is not None:
    changes["max_position_embeddings"] = int(max_position_embeddings)
  config = model.config.replace(**changes)
  layout_blocks = kept_layout_blocks(model.config, config)
  if layout_blocks != config.block_sparse_layout_blocks and "block_sparse_layout_blocks" not in changes:
    config = config.replace(block_sparse_layout_blocks=layout_blocks)
  new = type(model).from_config({**model.get_config(), "config": config.to_dict()})
  old_vars, new_vars = tf1_variable_map(model), tf1_variable_map(new)
  if sorted(old_vars) != sorted(new_vars):
    raise ValueError(f"extend_model: variables differ between the {type(model).__name__}s "
                     f"({sorted(set(old_vars) ^ set(new_vars))[:5]}).")
  for name, variable in new_vars.items():
    value = old_vars[name].numpy()
    if name == _POSITIONS:
      value = tiled_positions(value, config.max_position_embeddings)
    variable.assign(value)
  return new
