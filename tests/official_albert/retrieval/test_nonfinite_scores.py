"""`retrieval_metrics` / `rerank_metrics` on NaN or ±inf scores: every metric NaN, and a warning that says why.

A stable argsort leaves NaN in corpus order, so an all-NaN score matrix (a diverged model under --mode=eval, cosines
divided by a zero norm) scored recall@3 1.0 and mrr@10 0.417 over three documents, and a reranker's NaN logits
ndcg@10 0.5: plausible numbers in eval_results.json and in the best-checkpoint ranking. NaN, as `pearson` gives for
non-finite input, rather than an error: the validation of a training run that diverged reports it.
"""

import logging
import math

import numpy as np
import pytest

from official_albert.retrieval.metrics import rerank_metrics
from official_albert.retrieval.metrics import retrieval_metrics
from tasks.ranking import TextRankingTask
from tests import tiny

QUERIES, CORPUS = ["q0", "q1"], ["d0", "d1", "d2"]
QRELS = {"q0": {"d2"}, "q1": {"d1"}}
NAN = float("nan")


def _all_nan(metrics):
  return all(math.isnan(v) for k, v in metrics.items() if k != "queries")


@pytest.mark.parametrize("bad", [NAN, float("inf"), -float("inf")])
def test_a_non_finite_score_makes_every_retrieval_metric_nan(bad, caplog):
  scores = np.array([[0.1, 0.2, 0.3], [0.3, 0.2, 0.1]])
  scores[1, 2] = bad
  with caplog.at_level(logging.WARNING):
    metrics = retrieval_metrics(scores, QUERIES, CORPUS, QRELS)
  assert _all_nan(metrics) and metrics["queries"] == 2
  assert set(metrics) == set(retrieval_metrics(np.zeros((2, 3)), QUERIES, CORPUS, QRELS))  # the same keys
  for words in ("1 non-finite value", "query 'q1'", "diverged model", "zero norm"):
    assert words in caplog.text, (words, caplog.text)


def test_all_nan_scores_no_longer_score_plausible_numbers():
  """The audit's case: recall@3 1.0, mrr@10 0.417 before."""
  assert _all_nan(retrieval_metrics(np.full((2, 3), NAN), QUERIES, CORPUS, QRELS))


def test_a_non_finite_score_of_an_unscored_query_is_not_counted():
  """A query without relevant documents is left out of the metrics, its row too."""
  scores = np.array([[0.1, 0.2, 0.3], [NAN, NAN, NAN]])
  metrics = retrieval_metrics(scores, QUERIES, CORPUS, {"q0": {"d2"}})
  assert metrics["queries"] == 1 and metrics["mrr@10"] == 1.0


def test_rerank_metrics_of_nan_logits_are_nan(caplog):
  with caplog.at_level(logging.WARNING):
    metrics = rerank_metrics([[0.0, 1.0, 2.0], [NAN, NAN, NAN], [NAN, 0.0, 0.0]], [[0, 0, 1], [0, 0, 1], [0, 0, 0]])
  assert _all_nan(metrics) and metrics["queries"] == 2
  assert "3 non-finite value(s)" in caplog.text and "query 1 (row 1 of scores)" in caplog.text
  # The unscored third group's NaN alone changes nothing.
  clean = rerank_metrics([[0.0, 1.0, 2.0], [NAN, 0.0, 0.0]], [[0, 0, 1], [0, 0, 0]])
  assert clean["ndcg@10"] == 1.0 and clean["queries"] == 1


def test_a_text_ranking_eval_of_nan_logits_reports_no_finite_ndcg():
  task = tiny.build_task(TextRankingTask, "text_ranking", {"task": {"model": dict(tiny.MODEL, preset="")}})
  labels = np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]], np.float32)
  logs = {"scores": [np.full((2, 3), NAN, np.float32)], "labels": [labels], "example_index": [np.arange(2)]}
  results = task.reduce_aggregated_logs(logs)
  assert math.isnan(results["ndcg@10"]) and math.isnan(results["mrr@10"]) and results["queries"] == 2
