"""BigBird ITC block-sparse attention (Zaheer et al. 2020) and its seeded random-block layout.

The sequence is cut into blocks of `block_size` tokens (padded with masked keys to a whole number of blocks). The
first and the last block are global: their queries attend to every key, and every query attends to their keys. Each
other query block i attends to the blocks of a sliding window (i−1, i, i+1), the two global blocks and
`num_random_blocks` random blocks, chosen among the blocks 1..nb−2 outside the window: 5 + r blocks, so
(5 + r)·block_size keys per query instead of S (512 at BigBird's block 64 and r = 3). For the second and the
second-to-last block the window reaches a global block; that duplicate is masked, so every query attends to a set of
keys, each key once (what HF's BigBirdBlockSparseAttention computes, with its five separate parts).

The random layout is a function of (seed, layer, table size, number of blocks) only: per (seed, layer) a table of
random priorities [heads, max_blocks, max_blocks] is built once, and row i takes the r allowed blocks of highest
priority. So a model rebuilt from its config attends to the same blocks, and the same layout comes out of NumPy
(when the sequence length is known while tracing) and out of `ops.top_k` in the graph (when it is not).

The table's square [:T, :T] is one draw of shape [heads, T, T] from the (seed, layer) stream, T = `table_blocks`
(AlbertConfig.block_sparse_layout_blocks, by default the model's own max_blocks: the layout every block_sparse model
has had). An entry outside that square (a model with more positions than T blocks) comes from its own stream per
(seed, layer, head, row), drawn column by column, so it does not depend on max_blocks either. A model extended to
more positions (checkpoints/extend.py keeps T) therefore computes the original's layout, and outputs, for every
sequence the original could take.
"""

from __future__ import annotations

import functools
from typing import Optional

from keras import ops
import numpy as np

from official_albert.modeling.layers.chunked_attention import pad_to

# Blocks every middle query block attends to besides the random ones: first, window (3), last.
FIXED_BLOCKS = 5


def sparse_min_length(block_size: int, num_random_blocks: int) -> int:
  """Sequences up to this length run dense attention (HF BigBird's rule: (5 + 2r)·block, 704 at 64 and 3)."""
  return (FIXED_BLOCKS + 2 * num_random_blocks) * block_size


@functools.lru_cache(maxsize=256)
def _priorities(num_heads: int, max_blocks: int, seed: int, layer: int, table_blocks: Optional[int] = None):
  """float32 [heads, max_blocks, max_blocks] priorities: the [T, T] draw, rows/columns beyond it per (head, row).

  Cached (read-only): an extended model's table takes heads·max_blocks small draws, rebuilt otherwise on every call.
  """
  table_blocks = max_blocks if table_blocks is None else table_blocks
  square = np.random.default_rng([seed, layer]).random((num_heads, table_blocks, table_blocks), dtype=np.float32)
  if max_blocks <= table_blocks:
    table = np.ascontiguousarray(square[:, :max_blocks, :max_blocks])
  else:
    table = np.empty((num_heads, max_blocks, max_blocks), np.float32)
    for head in range(num_heads):
      for row in range(max_blocks):
        table[head, row] = np.random.default_rng([seed, layer, head, row]).random(max_blocks, dtype=np.float32)
    table[:, :table_blocks, :table_blocks] = square
  table.flags.writeable = False
  return table


def _allowed(num_blocks):
  """[nb−2, nb] bool: block j may be a random block of query block i+1 (a middle block outside i's window)."""
  rows = np.arange(1, num_blocks - 1)[:, None]
  cols = np.arange(num_blocks)[None, :]
  return (cols >= 1) & (cols <= num_blocks - 2) & (np.abs(cols - rows) > 1)


def random_block_layout(num_blocks: int, num_heads: int, num_random_blocks: int, seed: int, layer: int,
                        max_blocks: Optional[int] = None, table_blocks: Optional[int] = None) -> np.ndarray:
  """The random blocks of query blocks 1..nb−2: int32 [heads, nb−2, r], block indices into 0..nb−1.

  Args:
    num_blocks: nb, blocks in the (padded) sequence; at least 5 + r + 1 (see `sparse_min_length`).
    num_heads, num_random_blocks: N and r.
    seed, layer: the layout's identity (the config's block_sparse_seed and the layer application's index).
    max_blocks: size of the priority table (blocks of the longest sequence the model takes).
    table_blocks: T, the size of the square drawn at once (AlbertConfig.block_sparse_layout_blocks; None =
      max_blocks). The layout of nb blocks depends on T but not on max_blocks (see the module docstring).
  """
  max_blocks = max(max_blocks or num_blocks, num_blocks)
  table_blocks = table_blocks or max_blocks
  if num_blocks - FIXED_BLOCKS < num_random_blocks:
    raise ValueError(f"{num_blocks} blocks leave fewer than num_random_blocks={num_random_blocks} blocks outside "
                     "the window and the global blocks.")
  priorities = _priorities(num_heads, max_blocks, seed, layer, table_blocks)[:, 1:num_blocks - 1, :num_blocks]
  priorities = np.where(_allowed(num_blocks)[None], priorities, -1.0)
  return np.argsort(-priorities, axis=-1, kind="stable")[..., :num_random_blocks].astype(np.int32)


def random_block_layout_in_graph(num_blocks, num_heads: int, num_random_blocks: int, seed: int, layer: int,
                                 max_blocks: int, table_blocks: Optional[int] = None):
  """`random_block_layout` for a number of blocks known only at run time (a scalar tensor): same indices."""
  priorities = ops.convert_to_tensor(_priorities(num_heads, max_blocks, seed, layer, table_blocks or max_blocks))
  priorities = priorities[:, 1:num_blocks - 1, :num_blocks]
  rows = ops.arange(1, num_blocks - 1)[:, None]
  cols = ops.arange(num_blocks)[None, :]
  allowed = (cols >= 1) & (cols <= num_blocks - 2) & (ops.abs(cols - rows) > 1)
  _, indices = ops.top_k(ops.where(allowed[None], priorities, -1.0), num_random_blocks, sorted=True)
  return ops.cast(indices, "int32")


def attended_blocks(num_blocks, random_blocks):
  """Key blocks of query blocks 1..nb−2: int32 [heads, nb−2, 5 + r] = (first, i−1, i, i+1, last, random...)."""
  rows = ops.arange(1, num_blocks - 1, dtype="int32")
  fixed = ops.stack([ops.zeros_like(rows), rows - 1, rows, rows + 1, ops.zeros_like(rows) + num_blocks - 1], axis=-1)
  heads = ops.shape(random_blocks)[0]
  fixed = ops.broadcast_to(fixed[None], (heads, num_blocks - 2, FIXED_BLOCKS))
  return ops.concatenate([fixed, ops.cast(random_blocks, "int32")], axis=-1)


def block_pattern(num_blocks: int, random_blocks: np.ndarray) -> np.ndarray:
  """The 0/1 block mask [heads, nb, nb] that block-sparse attention computes (for tests and pictures)."""
  heads = random_blocks.shape[0]
  pattern = np.zeros((heads, num_blocks, num_blocks), np.float32)
  pattern[:, 0, :] = pattern[:, -1, :] = 1.0
  blocks = np.asarray(attended_blocks(num_blocks, random_blocks))
  for h in range(heads):
    for i in range(num_blocks - 2):
      pattern[h, i + 1, blocks[h, i]] = 1.0
  return pattern


def block_sparse_attention(query, key, value, key_mask, block_size: int, random_blocks, dropout=None,
                           training: bool = False):
  """BigBird ITC attention: [B,N,S,D] query/key/value → [B,N,S,D] context (compute dtype).

  Args:
    query, key, value: [B,N,S,D]; S need not be a multiple of block_size (keys are padded, masked, and the padded
      queries dropped), but must span more than 5 + r blocks.
    key_mask: [B,S], 1 = attend, 0 = padding (−10000 on the scores, as in the dense path).
    block_size: tokens per block.
    random_blocks: int32 [N, nb−2, r] (`random_block_layout`) for nb = ceil(S / block_size).
    dropout: a callable applied to the attention probabilities (the layer's Dropout), or None.
    training: passed to `dropout`.
  """
  dtype = query.dtype
  batch, heads, seq, depth = ops.shape(query)
  scale = 1.0 / float(np.sqrt(query.shape[-1]))
  mask = pad_to(ops.cast(key_mask, "float32"), block_size, axis=1)
  query, key, value = (pad_to(x, block_size, axis=2) for x in (query, key, value))
  padded = ops.shape(query)[2]
  num_blocks = padded // block_size
  key_bias = (1.0 - mask) * -10000.0  # [B, S']

  def softmax(scores):
    probs = ops.softmax(scores, axis=-1)
    if dropout is not None:
      probs = dropout(probs, training=training)
    return ops.cast(probs, dtype)

  # Global query blocks (first, last): every key.
  blocked_query = ops.reshape(query, (batch, heads, num_blocks, block_size, depth))
  global_query = ops.concatenate([blocked_query[:, :, 0], blocked_query[:, :, -1]], axis=2)
  scores = ops.cast(ops.einsum("bnqd,bnkd->bnqk", global_query, key), "float32") * scale + key_bias[:, None, None]
  global_context = ops.matmul(softmax(scores), value)  # [B, N, 2·block, D]

  # Middle query blocks: gather their 5 + r key blocks (per head: the random ones differ between heads).
  blocks = attended_blocks(num_blocks, random_blocks)  # [N, nb−2, 5+r]
  width = ops.shape(blocks)[-1]
  flat_blocks = ops.reshape(blocks + ops.arange(heads, dtype="int32")[:, None, None] * num_blocks, (-1,))

  def gather(x):  # [B,N,S',D] → [B, N, nb−2, (5+r)·block, D]
    x = ops.reshape(x, (batch, heads * num_blocks, block_size, depth))
    return ops.reshape(ops.take(x, flat_blocks, axis=1), (batch, heads, num_blocks - 2, width * block_size, depth))

  gathered_bias = ops.take(ops.reshape(key_bias, (batch, num_blocks, block_size)), ops.reshape(blocks, (-1,)), axis=1)
  gathered_bias = ops.reshape(gathered_bias, (batch, heads, num_blocks - 2, 1, width * block_size))
  # The window of query block 1 starts at the first (global) block, that of block nb−2 ends at the last one: their
  # slots 1 and 3 repeat a global block, so they are left out (each key counted once).
  rows = ops.arange(num_blocks - 2)[:, None]
  slot = ops.arange(width * block_size)[None, :] // block_size
  repeated = ((rows == 0) & (slot == 1)) | ((rows == num_blocks - 3) & (slot == 3))
  gathered_bias = gathered_bias + ops.where(repeated, -1e30, 0.0)[None, None, :, None, :]
  middle_query = blocked_query[:, :, 1:-1]
  scores = ops.cast(ops.einsum("bnlqd,bnlkd->bnlqk", middle_query, gather(key)), "float32") * scale + gathered_bias
  middle_context = ops.einsum("bnlqk,bnlkd->bnlqd", softmax(scores), gather(value))
  middle_context = ops.reshape(middle_context, (batch, heads, (num_blocks - 2) * block_size, depth))
  context = ops.concatenate([global_context[:, :, :block_size], middle_context, global_context[:, :, block_size:]],
                            axis=2)
  return context[:, :, :seq]
