"""`metrics._unit` normalises one float64 copy in place: the same bits as `v / norm(v)`, in about half the memory.

Before: `np.asarray(v, float64) / np.maximum(np.linalg.norm(v, ...), 1e-12)` held the float64 copy, `norm`'s squares
and the quotient at once: ~4x a float32 corpus in extra memory (1.2 GiB for 100k x 768, on top of the corpus), for
`cosine_rows` / `vector_retrieval_metrics`. Memory is measured with tracemalloc (numpy reports its buffers there);
nothing is timed.
"""

import tracemalloc

import numpy as np
import pytest

from official_albert.retrieval import metrics


def previous_unit(vectors):
  v = np.asarray(vectors, np.float64)
  return v / np.maximum(np.linalg.norm(v, axis=-1, keepdims=True), 1e-12)


@pytest.mark.parametrize("shape", [(300, 64), (7, 3), (5,), (0, 4), (3, 0), (2, 3, 5), (1, 1)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("block_bytes", [1 << 24, 8, 1000])
def test_unit_vectors_are_the_previous_bits(shape, dtype, block_bytes):
  vectors = np.random.default_rng(0).standard_normal(shape).astype(dtype)
  if vectors.size:
    vectors.reshape(-1, shape[-1])[0] = 0  # (a zero vector stays zero: the 1e-12 floor)
  before = vectors.copy()
  unit = metrics._unit(vectors, block_bytes)
  expected = previous_unit(vectors)
  assert unit.dtype == expected.dtype and unit.shape == expected.shape and np.array_equal(unit, expected)
  assert np.array_equal(vectors, before)  # (the caller's array is left as it is, float64 too)


def test_unit_vectors_take_one_float64_copy():
  corpus = np.random.default_rng(0).standard_normal((4000, 256)).astype(np.float32)  # 4 MB; its float64 copy 8 MB
  copy_bytes = corpus.size * 8
  tracemalloc.start()
  try:
    unit = metrics._unit(corpus, block_bytes=1 << 20)
    peak = tracemalloc.get_traced_memory()[1]
  finally:
    tracemalloc.stop()
  assert unit.nbytes == copy_bytes
  assert peak < copy_bytes + (1 << 21), (peak, copy_bytes)  # (before: ~2x the copy)


def test_cosines_are_the_previous_ones():
  rng = np.random.default_rng(1)
  queries, corpus = rng.standard_normal((9, 16)).astype(np.float32), rng.standard_normal((40, 16)).astype(np.float32)
  expected = previous_unit(queries) @ previous_unit(corpus).T
  assert np.array_equal(metrics.cosine_scores(queries, corpus), expected)
  in_blocks = np.concatenate([previous_unit(queries[b:b + 2]) @ previous_unit(corpus).T for b in range(0, 9, 2)])
  assert np.array_equal(np.stack([row for _, row in metrics.cosine_rows(queries, corpus, block_bytes=8 * 40 * 2)]),
                        in_blocks)  # (two queries a block)
