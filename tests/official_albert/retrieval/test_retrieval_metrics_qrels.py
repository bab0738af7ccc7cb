"""`retrieval_metrics`' qrels: graded (BEIR / pytrec_eval) or sets, each id and each query once; `ignore`.

- Graded qrels {query: {document: grade}} were iterated for their keys, so a grade-0 ("judged, not relevant")
  document counted as relevant: the example below scored mrr@10 1.0 instead of 0.75.
- A relevant id listed twice counted twice in recall's and nDCG's denominators (recall@1 0.5 for a perfect ranking),
  and a repeated query id weighed that query twice in every mean.
- `ignore` leaves a document out of one query's ranking (BEIR's ignore_identical_ids).
"""

import numpy as np
import pytest

from official_albert.retrieval.metrics import retrieval_metrics

QUERIES, CORPUS = ["q0", "q1"], ["d0", "d1", "d2", "d3"]
SCORES = np.array([[0.9, 0.8, 0.1, 0.0], [0.0, 0.1, 0.9, 0.8]])
KEYS = ("recall@1", "mrr@10", "ndcg@10", "map@100")


def _some(metrics, keys=KEYS):
  return {k: metrics[k] for k in keys}


def test_graded_qrels_count_only_grades_above_zero_as_relevant():
  """BEIR's qrels for q0: d0 judged not relevant (0), d1 relevant; q1: d2 relevant (grade 2), d3 not (0). The same
  judgments as sets give the same numbers, and a grade of 2 gains what a grade of 1 does (binary gains)."""
  graded = retrieval_metrics(SCORES, QUERIES, CORPUS, {"q0": {"d0": 0, "d1": 1}, "q1": {"d2": 2, "d3": 0}})
  sets = retrieval_metrics(SCORES, QUERIES, CORPUS, {"q0": {"d1"}, "q1": {"d2"}})
  assert graded == sets
  assert _some(sets, ("mrr@10", "ndcg@10", "map@100")) == pytest.approx({"mrr@10": 0.75, "ndcg@10": 0.8154648767857288,
                                                                         "map@100": 0.75})
  # A query whose documents are all judged not relevant is not scored, as a query with none.
  only_q1 = retrieval_metrics(SCORES, QUERIES, CORPUS, {"q0": {"d0": 0}, "q1": {"d2": 2}})
  assert only_q1["queries"] == 1 and only_q1["mrr@10"] == 1.0
  with pytest.raises(ValueError, match=r"relevant\['q0'\]\['d1'\] is 'yes': graded qrels map a document id to a"):
    retrieval_metrics(SCORES, QUERIES, CORPUS, {"q0": {"d1": "yes"}, "q1": {"d2"}})


def test_a_relevant_id_listed_twice_counts_once():
  """["d0", "d0"] is one relevant document, found first: recall@1 1.0 (was 0.75 over the two queries, as q0 counted
  two relevant documents of which it found 'one')."""
  listed = retrieval_metrics(SCORES, QUERIES, CORPUS, {"q0": ["d0", "d0"], "q1": ["d2"]})
  assert _some(listed) == _some(retrieval_metrics(SCORES, QUERIES, CORPUS, {"q0": {"d0"}, "q1": {"d2"}}))
  assert _some(listed) == {k: 1.0 for k in KEYS}


def test_a_repeated_query_id_is_refused():
  """Three rows, q0 twice: q0 would weigh two thirds of every mean (was accepted: queries 3)."""
  with pytest.raises(ValueError, match=r"query_ids name 1 query\(ies\) more than once \(e.g. \['q0'\]\)"):
    retrieval_metrics(SCORES[[0, 0, 1]], ["q0", "q0", "q1"], CORPUS, {"q0": {"d1"}, "q1": {"d2"}})


def test_ignore_leaves_a_document_out_of_one_querys_ranking():
  """q0's d0 (not relevant) ranks first; left out of q0's ranking, d1 is first: as if d0 were not in the corpus for
  q0, and still there for q1. Naming a relevant document, or one the corpus lacks, is refused."""
  qrels = {"q0": {"d1"}, "q1": {"d0"}}
  scores = np.array([[0.9, 0.8, 0.1, 0.0], [0.9, 0.1, 0.2, 0.0]])
  ignored = retrieval_metrics(scores, QUERIES, CORPUS, qrels, ignore={"q0": {"d0"}})
  assert _some(ignored) == {k: 1.0 for k in KEYS}
  assert retrieval_metrics(scores, QUERIES, CORPUS, qrels)["recall@1"] == 0.5
  with pytest.raises(ValueError, match=r"ignore\['q0'\] names \['d1'\], relevant to that query"):
    retrieval_metrics(scores, QUERIES, CORPUS, qrels, ignore={"q0": {"d1"}})
  with pytest.raises(ValueError, match=r"ignore\['q0'\] names \['d9'\], not in corpus_ids"):
    retrieval_metrics(scores, QUERIES, CORPUS, qrels, ignore={"q0": {"d9"}})
