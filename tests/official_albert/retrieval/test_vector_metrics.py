"""`vector_retrieval_metrics` equals `retrieval_metrics` over the score matrix, without the matrix.

The text_embedding task's evaluation built the [queries, corpus] float64 cosine matrix of its validation split (a
split of 50,000 pairs: 20 GB) and sorted every row whole. Rows are now ranked a block at a time, and only the
columns that can reach the top `max(k)` are sorted (`_top`). Exactness is checked on vectors whose cosines are exact
in any summation order (unit vectors of ±0.5 entries: every cosine a multiple of 0.25, so ties everywhere), and on
random vectors; `retrieval_metrics` itself is held to sentence-transformers in test_sentence_transformers_parity.py.
"""

import logging
import math
import tracemalloc

import numpy as np
import pytest

from official_albert.retrieval import metrics


def _exact_unit_vectors(rng, n, dim=12):
  """Unit vectors with four entries ±0.5: their cosines are multiples of 0.25, exact in any order of summation."""
  out = np.zeros([n, dim])
  for row in out:
    row[rng.choice(dim, 4, replace=False)] = rng.choice([-0.5, 0.5], 4)
  return out


def _qrels(rng, queries, documents, graded):
  relevant = {}
  for q in range(queries):
    picks = rng.choice(documents, rng.integers(0, 4), replace=False)
    if graded:
      relevant[str(q)] = {str(d): int(rng.integers(0, 3)) for d in picks}
    else:
      relevant[str(q)] = {str(d) for d in picks}
  relevant["0"] = {"0": 1} if graded else {"0"}  # (at least one query scored)
  return relevant


def _ignore(rng, relevant, queries, documents):
  ignore = {}
  for q in range(0, queries, 3):
    wanted = relevant.get(str(q), {})
    free = [str(d) for d in range(documents) if str(d) not in wanted]
    ignore[str(q)] = set(rng.choice(free, 5, replace=False))
  return ignore


def test_top_is_the_full_rankings_head():
  rng = np.random.default_rng(0)
  for trial in range(300):
    size, k = int(rng.integers(1, 400)), int(rng.integers(1, 60))
    row = rng.integers(0, int(rng.integers(1, 30)), size).astype(np.float64)  # (few values: many ties)
    relevant = list(rng.choice(size, int(rng.integers(0, min(size, 8) + 1)), replace=False))
    dropped = None
    if trial % 2 and size > 10:
      dropped = np.sort(rng.choice([c for c in range(size) if c not in relevant], 5, replace=False))
    for ties in metrics.TIES:
      full = metrics._ranking(row, relevant, ties)
      if dropped is not None:
        full = full[~np.isin(full, dropped)]
      np.testing.assert_array_equal(metrics.top_columns(row, relevant, dropped, ties, k), full[:k])


@pytest.mark.parametrize("graded", [False, True])
@pytest.mark.parametrize("ties", metrics.TIES)
def test_equals_the_matrix_on_exact_cosines(graded, ties):
  rng = np.random.default_rng(1 + graded)
  queries, corpus = _exact_unit_vectors(rng, 70), _exact_unit_vectors(rng, 600)  # (600 > 4 × 100: `_top` selects)
  query_ids, corpus_ids = [str(i) for i in range(70)], [str(i) for i in range(600)]
  relevant = _qrels(rng, 70, 600, graded)
  ignore = _ignore(rng, relevant, 70, 600)
  expected = metrics.retrieval_metrics(metrics.cosine_scores(queries, corpus), query_ids, corpus_ids, relevant,
                                       ignore=ignore, ties=ties)
  for block_bytes in (1, 7 * 600 * 8, 1 << 28):  # (one row, seven rows, every row at once)
    got = metrics.vector_retrieval_metrics(queries, corpus, query_ids, corpus_ids, relevant, ignore=ignore,
                                           ties=ties, block_bytes=block_bytes)
    assert got == expected


def test_equals_the_matrix_on_random_vectors_and_cutoffs():
  rng = np.random.default_rng(3)
  queries, corpus = rng.normal(size=[40, 24]), rng.normal(size=[300, 24]) * 3.0
  query_ids, corpus_ids = [f"q{i}" for i in range(40)], [f"d{i}" for i in range(300)]
  relevant = {f"q{q}": {f"d{d}" for d in rng.choice(300, 3, replace=False)} for q in range(40)}
  cutoffs = dict(accuracy_at=(1, 2), precision_recall_at=(5,), mrr_at=(7,), ndcg_at=(3,), map_at=(20,))
  expected = metrics.retrieval_metrics(metrics.cosine_scores(queries, corpus), query_ids, corpus_ids, relevant,
                                       **cutoffs)
  got = metrics.vector_retrieval_metrics(queries, corpus, query_ids, corpus_ids, relevant, block_bytes=5000,
                                         **cutoffs)
  assert got.keys() == expected.keys()
  assert got == pytest.approx(expected, abs=1e-12)


def test_non_finite_embeddings_give_nan_as_the_matrix_does(caplog):
  rng = np.random.default_rng(4)
  queries, corpus = rng.normal(size=[6, 8]), rng.normal(size=[9, 8])
  query_ids, corpus_ids = [str(i) for i in range(6)], [str(i) for i in range(9)]
  relevant = {"0": {"1"}, "1": {"2"}}  # queries 2-5 are not scored
  unscored_nan = queries.copy()
  unscored_nan[4, 3] = np.nan
  expected = metrics.retrieval_metrics(metrics.cosine_scores(unscored_nan, corpus), query_ids, corpus_ids, relevant)
  assert metrics.vector_retrieval_metrics(unscored_nan, corpus, query_ids, corpus_ids, relevant) == expected
  assert not any(math.isnan(v) for v in expected.values())
  for vectors, name in ((queries.copy(), "query '1'"), (corpus.copy(), "document '5'")):
    vectors[int(name[-2]), 0] = np.inf
    pair = (vectors, corpus) if name.startswith("query") else (queries, vectors)
    with caplog.at_level(logging.WARNING, logger=metrics.__name__):
      got = metrics.vector_retrieval_metrics(*pair, query_ids, corpus_ids, relevant)
    with np.errstate(invalid="ignore"):  # (inf / inf in the matrix's normalisation: NaN, as meant)
      dense = metrics.retrieval_metrics(metrics.cosine_scores(*pair), query_ids, corpus_ids, relevant)
    assert got.keys() == dense.keys() and got["queries"] == dense["queries"] == 2
    assert all(math.isnan(v) for k, v in got.items() if k != "queries")
    assert all(math.isnan(v) for k, v in dense.items() if k != "queries")
    assert name in caplog.text


def test_memory_is_a_block_not_the_matrix():
  rng = np.random.default_rng(5)
  n = 800
  queries, corpus = rng.normal(size=[n, 8]), rng.normal(size=[n, 8])
  ids = [str(i) for i in range(n)]
  relevant = {str(i): {str(i)} for i in range(n)}
  matrix_bytes = n * n * 8
  tracemalloc.start()
  try:
    result = metrics.vector_retrieval_metrics(queries, corpus, ids, ids, relevant, block_bytes=1 << 16)
    _, peak = tracemalloc.get_traced_memory()
  finally:
    tracemalloc.stop()
  assert result["queries"] == n
  assert peak < matrix_bytes / 4, f"peak {peak} bytes; the score matrix is {matrix_bytes}"


def test_shapes_must_match_the_ids():
  with pytest.raises(ValueError, match=r"\[Q, D\] and \[C, D\] embeddings of the 2 query ids and 3 corpus ids"):
    metrics.vector_retrieval_metrics(np.ones([2, 4]), np.ones([4, 4]), ["a", "b"], ["x", "y", "z"], {"a": {"x"}})
  with pytest.raises(ValueError, match="ties="):
    metrics.vector_retrieval_metrics(np.ones([1, 4]), np.ones([1, 4]), ["a"], ["x"], {"a": {"x"}}, ties="first")
  with pytest.raises(TypeError, match=r"unknown cut-off argument\(s\) \['ndcg'\]"):
    metrics.vector_retrieval_metrics(np.ones([1, 4]), np.ones([1, 4]), ["a"], ["x"], {"a": {"x"}}, ndcg=(10,))


def test_rescore_ranks_each_row_by_what_it_returns():
  """A second stage (`rescore`) equals the matrix of its scores: here each query's row reversed for the even
  queries (numbers told apart by query), and its shape and finiteness are checked."""
  rng = np.random.default_rng(5)
  queries, corpus = rng.normal(size=[30, 16]), rng.normal(size=[200, 16])
  query_ids, corpus_ids = [f"q{i}" for i in range(30)], [f"d{i}" for i in range(200)]
  relevant = {f"q{q}": {f"d{d}" for d in rng.choice(200, 2, replace=False)} for q in range(30)}
  seen = []

  def rescore(i, row):
    seen.append(i)
    return -row if i % 2 == 0 else row

  cosines = metrics.cosine_scores(queries, corpus)
  expected = metrics.retrieval_metrics(np.where((np.arange(30) % 2 == 0)[:, None], -cosines, cosines), query_ids,
                                       corpus_ids, relevant)
  got = metrics.vector_retrieval_metrics(queries, corpus, query_ids, corpus_ids, relevant, block_bytes=3000,
                                         rescore=rescore)
  assert sorted(seen) == list(range(30))
  assert got == pytest.approx(expected, abs=1e-12)
  assert got != pytest.approx(metrics.vector_retrieval_metrics(queries, corpus, query_ids, corpus_ids, relevant))
  for bad in (lambda i, row: row[:-1], lambda i, row: np.where(row > 0, np.nan, row)):
    with pytest.raises(ValueError, match="rescore gave query 'q0'"):
      metrics.vector_retrieval_metrics(queries, corpus, query_ids, corpus_ids, relevant, rescore=bad)
