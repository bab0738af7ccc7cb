"""Equal scores count against the model: ties broken by position scored a collapsed reranker (every score equal) as
perfect, mrr@10 1.0, on candidates listed positive first (and as a random ranking on `text_ranking`'s shuffled
groups); `text_embedding`'s
evaluation corpus holds each query's positive at the query's own row, so a collapsed embedder scored mrr@10 0.29 over
ten queries, a number that reads as a weak model, not a broken one."""

import numpy as np
import pytest

from official_albert.retrieval.metrics import rerank_metrics
from official_albert.retrieval.metrics import retrieval_metrics


def test_a_collapsed_reranker_scores_worst_not_best():
  scores = np.zeros((3, 4))
  relevance = np.zeros((3, 4))
  relevance[:, 0] = 1  # the positive listed first
  worst = rerank_metrics(scores, relevance)
  assert worst["mrr@10"] == pytest.approx(0.25) and worst["recall@1"] == 0.0
  assert rerank_metrics(scores, relevance, ties="given")["mrr@10"] == 1.0  # (position decided it)


def test_ties_only_move_relevant_candidates_behind_equal_scores():
  # Row 0: the positive (1.0) ties with one negative and beats two: rank 2, not 1. Row 1: the two relevant (0.5, 0.5)
  # tie with nothing else below them: ranks 2 and 3 behind 0.9 whatever the tie rule.
  scores = np.array([[1.0, 1.0, 0.0, -1.0], [0.5, 0.9, 0.5, 0.1]])
  relevance = np.array([[1, 0, 0, 0], [1, 0, 1, 0]])
  assert rerank_metrics(scores[:1], relevance[:1])["mrr@10"] == pytest.approx(0.5)
  assert rerank_metrics(scores[1:], relevance[1:]) == rerank_metrics(scores[1:], relevance[1:], ties="given")


def test_distinct_scores_give_the_same_numbers_either_way():
  rng = np.random.default_rng(0)
  scores = rng.normal(size=(16, 6))
  relevance = (rng.random((16, 6)) < 0.3).astype(np.float32)
  relevance[:, 1] = 1
  assert rerank_metrics(scores, relevance) == rerank_metrics(scores, relevance, ties="given")


def test_a_collapsed_embedder_scores_worst_over_a_corpus():
  queries, corpus = [f"q{i}" for i in range(10)], [f"d{i}" for i in range(10)]
  qrels = {f"q{i}": {f"d{i}"} for i in range(10)}
  scores = np.ones((10, 10))
  assert retrieval_metrics(scores, queries, corpus, qrels)["mrr@10"] == pytest.approx(0.1)
  assert retrieval_metrics(scores, queries, corpus, qrels, ties="given")["mrr@10"] == pytest.approx(
      np.mean([1 / (i + 1) for i in range(10)]))
  # Distinct scores: the rule changes nothing (graded qrels, a document left out of one query's ranking too).
  rng = np.random.default_rng(2)
  scores = rng.normal(size=(10, 10))
  graded = {f"q{i}": {f"d{i}": 2, f"d{(i + 3) % 10}": 0, f"d{(i + 5) % 10}": 1} for i in range(10)}
  ignore = {"q0": {"d1"}}
  assert retrieval_metrics(scores, queries, corpus, graded, ignore=ignore) == retrieval_metrics(
      scores, queries, corpus, graded, ignore=ignore, ties="given")


def test_an_unknown_tie_rule_is_refused():
  with pytest.raises(ValueError, match="relevant_last"):
    rerank_metrics(np.zeros((1, 2)), np.ones((1, 2)), ties="random")
  with pytest.raises(ValueError, match="relevant_last"):
    retrieval_metrics(np.zeros((1, 2)), ["q"], ["a", "b"], {"q": {"a"}}, ties="random")
