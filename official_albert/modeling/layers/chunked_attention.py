"""Exact attention over query/key tiles with an online softmax, and a backward pass that recomputes the tiles.

softmax(Q·Kᵀ/√D + bias)·V, the same function as the dense path, without an [S,S] tensor: the forward pass walks the
keys in chunks of `key_chunk_size`, keeping per query the running maximum m, the running normaliser l and the running
weighted sum of values (rescaled by exp(m_old − m_new) when the maximum grows), for each tile of `query_chunk_size`
queries (Rabe & Staats 2021, "Self-attention does not need O(n²) memory"). It keeps only the output and the log-sum-exp
per query (lse = m + log l) for the backward pass, which recomputes each tile's probabilities as exp(s − lse) and
forms dV, dS = P ∘ (dO·Vᵀ − rowsum(dO ∘ O)), dQ and dK tile by tile (FlashAttention's backward pass). Training memory
is O(S·chunk) per layer instead of the dense path's O(S²) per layer.

Sequences that are not a multiple of a chunk are padded inside the function: padded keys get a bias of −1e30 (their
probability is exactly 0, so a row whose real keys are all masked still averages over exactly the S real keys, as the
dense path does) and padded queries are dropped. Written with `keras.ops` only, so it runs under every Keras backend;
the loops are `ops.map` / `ops.fori_loop`, so the sequence length may be unknown when a TensorFlow graph is traced.

First derivatives only inside a TensorFlow graph: a nested `GradientTape` (Hessian-vector products, gradient
penalties, MAML-style meta-gradients) differentiates the hand-written backward pass exactly when run eagerly, but
inside `tf.function` its dK/dV updates (`ops.slice_update`, TensorFlow's `XlaDynamicUpdateSlice` in a while loop)
have no gradient, and tracing fails with TensorFlow's `LookupError: No gradient defined for operation
'.../XlaDynamicUpdateSlice'` (never a silent zero). Use `attention_type="dense"` for second-order training in graphs
(docs/long_inputs.md).
"""

from __future__ import annotations

import math

from keras import ops

# Bias of the keys that pad the last chunk: exp(s − 1e30 − m) is exactly 0 in float32.
_ABSENT = -1e30


def _min(a, b):
  return min(a, b) if isinstance(a, int) and isinstance(b, int) else ops.minimum(a, b)


def pad_to(x, multiple, axis, value=0.0):
  """Pads `axis` of x up to a multiple of `multiple` (a Python int or a scalar tensor)."""
  length = ops.shape(x)[axis]
  pad = (multiple - length % multiple) % multiple
  widths = [[0, 0] for _ in x.shape]
  widths[axis] = [0, pad]
  return ops.pad(x, widths, constant_values=value)


def _after(index, value):
  """`index` (an int scalar), made to depend on `value`, a tensor of the previous loop iteration.

  TensorFlow runs up to 10 iterations of a while loop at once when nothing ties them together, and the tiles of
  each would then be in memory together (4× the memory of one tile at a time, measured on an s4096 backward pass);
  `|x| < 0` is always False (also for NaN), so the index is unchanged, and no graph rewrite removes the tie.
  """
  return index + ops.cast(ops.abs(ops.reshape(value, (-1,))[0]) < 0, "int32")


def _chunks(x, chunk):
  """[B,N,S,D] → [C,B,N,chunk,D] (S padded with zeros to a multiple of chunk)."""
  batch, heads, _, depth = ops.shape(x)
  x = ops.reshape(pad_to(x, chunk, axis=2), (batch, heads, -1, chunk, depth))
  return ops.transpose(x, (2, 0, 1, 3, 4))


def _unchunk(x, length):
  """[C,B,N,chunk,...] → [B,N,length,...]: the inverse of `_chunks` (padding dropped)."""
  shape = ops.shape(x)
  x = ops.transpose(x, (1, 2, 0) + tuple(range(3, len(x.shape))))
  x = ops.reshape(x, (shape[1], shape[2], -1) + tuple(shape[4:]))
  return x[:, :, :length]


# Long because: one custom-gradient op: the forward tile loop and the backward pass that recomputes it share their
# tiling and their closures, and must change together.
def chunked_attention(query, key, value, key_bias, query_chunk_size: int = 1024, key_chunk_size: int = 512):
  """softmax(query·keyᵀ/√D + key_bias)·value, exactly, in O(S·chunk) memory (forward and backward).

  Args:
    query, key, value: [B,N,S,D] in the compute dtype (float32, or bfloat16 under mixed precision: the matmuls run
      in it, the softmax statistics and accumulators in float32).
    key_bias: float32 [B,S] added to every query's scores (the dense path's −10000 at padding).
    query_chunk_size, key_chunk_size: the tile; each is capped at S.

  Returns:
    [B,N,S,D] in the compute dtype. Differentiable once everywhere; twice only eagerly (inside `tf.function` a
    second derivative raises TensorFlow's LookupError naming `XlaDynamicUpdateSlice`; the module docstring).
  """
  dtype = query.dtype
  seq = ops.shape(query)[2]
  query_chunk, key_chunk = _min(query_chunk_size, seq), _min(key_chunk_size, seq)
  scale = 1.0 / math.sqrt(query.shape[-1])

  def tiles(k, v, key_bias):
    """Key chunks [C,B,N,kc,D] and their biases [C,B,1,1,kc] (−1e30 on the padding that completes the last one)."""
    bias = pad_to(ops.cast(key_bias, "float32"), key_chunk, axis=1, value=_ABSENT)
    bias = ops.transpose(ops.reshape(bias, (ops.shape(bias)[0], -1, key_chunk)), (1, 0, 2))
    return _chunks(k, key_chunk), _chunks(v, key_chunk), bias[:, :, None, None, :]

  def scores(q, k, bias):
    return ops.cast(ops.einsum("bnqd,bnkd->bnqk", q, k), "float32") * scale + bias

  @ops.custom_gradient
  def attend(q, k, v, key_bias):
    key_tiles, value_tiles, bias_tiles = tiles(k, v, key_bias)
    num_key_chunks = ops.shape(key_tiles)[0]

    def query_tile(q_tile):
      shape = ops.shape(q_tile)

      def key_step(j, carry):
        m, l, acc = carry
        j = _after(j, l)
        s = scores(q_tile, ops.take(key_tiles, j, axis=0), ops.take(bias_tiles, j, axis=0))
        m_new = ops.maximum(m, ops.max(s, axis=-1))
        p = ops.exp(s - m_new[..., None])
        rescale = ops.exp(m - m_new)
        l = l * rescale + ops.sum(p, axis=-1)
        pv = ops.matmul(ops.cast(p, dtype), ops.take(value_tiles, j, axis=0))
        return m_new, l, acc * rescale[..., None] + ops.cast(pv, "float32")

      init = (ops.full(shape[:3], _ABSENT, "float32"), ops.zeros(shape[:3], "float32"),
              ops.zeros(shape, "float32"))
      m, l, acc = ops.fori_loop(0, num_key_chunks, key_step, init)
      return ops.cast(acc / l[..., None], dtype), m + ops.log(l)

    out_tiles, lse_tiles = ops.map(query_tile, _chunks(q, query_chunk))
    out, lse = _unchunk(out_tiles, seq), _unchunk(lse_tiles, seq)

    def grad(*args, upstream=None):
      d_out = args[0] if upstream is None else upstream
      d_out = ops.cast(d_out, dtype)
      # rowsum(dO ∘ O) = Σ_k P·dP: the softmax's Jacobian term, once per query.
      delta = ops.sum(ops.cast(d_out, "float32") * ops.cast(out, "float32"), axis=-1)
      padded = ops.shape(key_tiles)[0] * key_chunk

      def pad_keys(x):
        return pad_to(x, key_chunk, axis=2)

      def key_step(j, carry):
        # All queries against key chunk j: the tile is [S, key_chunk] (dK_j and dV_j are complete after one step).
        d_q, d_k, d_v = carry
        start = (0, 0, j * key_chunk, 0)
        j = _after(j, d_q)
        k_j, v_j = ops.take(key_tiles, j, axis=0), ops.take(value_tiles, j, axis=0)
        p = ops.exp(scores(q, k_j, ops.take(bias_tiles, j, axis=0)) - lse[..., None])
        p_c = ops.cast(p, dtype)
        d_v_j = ops.einsum("bnqk,bnqd->bnkd", p_c, d_out)
        d_p = ops.cast(ops.einsum("bnqd,bnkd->bnqk", d_out, v_j), "float32")
        d_s = ops.cast(p * (d_p - delta[..., None]) * scale, dtype)
        d_q = d_q + ops.cast(ops.matmul(d_s, k_j), "float32")
        d_k_j = ops.einsum("bnqk,bnqd->bnkd", d_s, q)
        d_k = ops.slice_update(d_k, start, ops.cast(d_k_j, "float32"))
        d_v = ops.slice_update(d_v, start, ops.cast(d_v_j, "float32"))
        return d_q, d_k, d_v

      batch, heads, _, depth = ops.shape(q)
      zeros = ops.zeros((batch, heads, padded, depth), "float32")
      d_q, d_k, d_v = ops.fori_loop(0, num_key_chunks, key_step, (ops.zeros(ops.shape(q), "float32"), zeros, zeros))
      return (ops.cast(d_q, q.dtype), ops.cast(d_k[:, :, :seq], k.dtype), ops.cast(d_v[:, :, :seq], v.dtype),
              ops.zeros_like(key_bias))

    return out, grad

  return attend(query, key, value, ops.cast(key_bias, "float32"))
