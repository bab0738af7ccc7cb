"""`ranking_metrics`: the metrics of ranked id lists (a run file's) are `retrieval_metrics` of scores that rank each
query's documents in its list's order; a relevant document absent from a list is not retrieved (counted missed)."""

import numpy as np
import pytest

from official_albert.retrieval import metrics


def test_full_lists_equal_the_matrix_of_their_order():
  rng = np.random.default_rng(0)
  corpus = [f"d{i}" for i in range(150)]
  queries = [f"q{i}" for i in range(12)]
  relevant = {q: {corpus[j]: int(rng.integers(0, 3)) for j in rng.choice(150, 4, replace=False)} for q in queries}
  relevant["q0"] = {"d1": 0}  # (judged, none relevant: not scored either way)
  scores = np.zeros([len(queries), len(corpus)])
  rankings = {}
  for i, q in enumerate(queries):
    order = rng.permutation(len(corpus))
    scores[i, order] = -np.arange(len(corpus))  # (distinct: the list's order)
    rankings[q] = [corpus[j] for j in order]
  want = metrics.retrieval_metrics(scores, queries, corpus, relevant)
  got = metrics.ranking_metrics(rankings, relevant)
  assert got["queries"] == want["queries"] == 11
  assert got.keys() == want.keys()
  for key in want:
    assert got[key] == pytest.approx(want[key], abs=1e-12), key


def test_a_short_list_misses_what_it_does_not_hold():
  got = metrics.ranking_metrics({"q": ["a", "x", "b"]}, {"q": {"a": 1, "b": 1, "c": 2}}, precision_recall_at=(1, 10),
                                ndcg_at=(10,), map_at=(100,))
  assert got["recall@10"] == pytest.approx(2 / 3) and got["mrr@10"] == 1.0
  assert got["ndcg@10"] == pytest.approx((1 + 1 / np.log2(4)) / (1 + 1 / np.log2(3) + 1 / np.log2(4)))
  assert got["map@100"] == pytest.approx((1 + 2 / 3) / 3)
  with pytest.raises(ValueError, match="list each document once"):
    metrics.ranking_metrics({"q": ["a", "a"]}, {"q": {"a"}})
  with pytest.raises(ValueError, match="no query of the rankings has a relevant document"):
    metrics.ranking_metrics({"q": ["a"]}, {"other": {"a"}})
  with pytest.raises(TypeError, match="unknown cut-off"):
    metrics.ranking_metrics({"q": ["a"]}, {"q": {"a"}}, mrr=(10,))
