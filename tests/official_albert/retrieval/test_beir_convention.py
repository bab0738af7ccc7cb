"""`convention="beir"`: nDCG@k with graded linear gains over the ideal of the grades sorted, and MAP@k over all the
query's relevant documents, as BEIR computes them through pytrec_eval — checked by hand and against pytrec_eval
itself (its maintained build, pytrec-eval-terrier, in the test requirements) through every metrics entry point; the
default convention stays sentence-transformers' (binary gains, MAP over min(k, R))."""

import logging

import numpy as np
import pytest

from official_albert.retrieval import metrics
from official_albert.retrieval import query_metrics

# One query: d1 grade 2, d2 grade 1, d4 judged not relevant; ranked d2, d1, d3, d4.
CORPUS = ["d1", "d2", "d3", "d4"]
QRELS = {"q": {"d1": 2, "d2": 1, "d4": 0}}
SCORES = np.array([[2.0, 3.0, 1.0, 0.5]])
GRADED_NDCG = (1 + 2 / np.log2(3)) / (2 + 1 / np.log2(3))  # 0.8597: DCG (1, 2) over the ideal (2, 1)


def test_graded_ndcg_and_map_over_r_by_hand():
  cutoffs = dict(ndcg_at=(10,), map_at=(1, 100))
  default = metrics.retrieval_metrics(SCORES, ["q"], CORPUS, QRELS, **cutoffs)
  beir = metrics.retrieval_metrics(SCORES, ["q"], CORPUS, QRELS, convention="beir", **cutoffs)
  assert (default["ndcg@10"], default["map@1"], default["map@100"]) == (1.0, 1.0, 1.0)
  assert beir["ndcg@10"] == pytest.approx(GRADED_NDCG, abs=1e-15) and round(beir["ndcg@10"], 3) == 0.860
  assert (beir["map@1"], beir["map@100"]) == (0.5, 1.0)  # one relevant in the top 1, of R = 2
  for key in ("accuracy@1", "precision@3", "recall@1", "recall@10", "mrr@10"):
    assert beir[key] == default[key], key
  # Binary qrels with k >= R: the two conventions agree.
  binary = {"q": {"d1", "d3"}}
  assert (metrics.retrieval_metrics(SCORES, ["q"], CORPUS, binary, convention="beir")
          == metrics.retrieval_metrics(SCORES, ["q"], CORPUS, binary))
  with pytest.raises(ValueError, match=r"convention='trec': use one of \('sentence_transformers', 'beir'\)"):
    metrics.retrieval_metrics(SCORES, ["q"], CORPUS, QRELS, convention="trec")


def test_every_entry_point_takes_the_convention():
  cutoffs = dict(ndcg_at=(10,), map_at=(1,))
  want = metrics.retrieval_metrics(SCORES, ["q"], CORPUS, QRELS, convention="beir", **cutoffs)
  vectors = np.eye(4)  # (documents one-hot: the query vector below ranks d2, d1, d3, d4)
  query = np.array([[0.6, 0.7, 0.3, 0.1]])
  got = {
      "vector": metrics.vector_retrieval_metrics(query, vectors, ["q"], CORPUS, QRELS, convention="beir", **cutoffs),
      "row": metrics.row_retrieval_metrics(lambda i: SCORES[i], ["q"], CORPUS, QRELS, convention="beir", **cutoffs),
      "ranking": metrics.ranking_metrics({"q": ["d2", "d1", "d3", "d4"]}, QRELS, convention="beir", **cutoffs),
      "rerank": metrics.rerank_metrics(SCORES, np.array([[2, 1, 0, 0]]), convention="beir", **cutoffs)}
  for name, out in got.items():
    assert out["ndcg@10"] == pytest.approx(GRADED_NDCG, abs=1e-12) and out["map@1"] == 0.5, name
    assert out.keys() == want.keys(), name


def test_a_judged_query_without_a_ranking_is_left_out_and_logged(caplog):
  qrels = {"q": {"d1"}, "lost": {"d2"}, "unjudged": {"d3": 0}}
  with caplog.at_level(logging.WARNING, logger=metrics.logger.name):
    out = metrics.ranking_metrics({"q": ["d1"]}, qrels)
  assert out["queries"] == 1 and out["mrr@10"] == 1.0
  assert "1 judged query of the qrels (e.g. ['lost']) has no ranking" in caplog.text, caplog.text


def test_beir_convention_equals_pytrec_eval():
  """Random graded qrels (grades 0-3, some queries with more relevant documents than a cut-off) and distinct scores
  (pytrec_eval breaks ties by document id): nDCG@k, MAP@k, recall@k and P@k equal trec_eval's to 1e-12, through the
  matrix and ranked-list entry points."""
  pytrec_eval = pytest.importorskip("pytrec_eval")
  rng = np.random.default_rng(7)
  corpus = [f"d{i}" for i in range(60)]
  queries = [f"q{i}" for i in range(25)]
  qrels = {q: {corpus[j]: int(rng.integers(0, 4)) for j in rng.choice(60, int(rng.integers(1, 15)), replace=False)}
           for q in queries}
  qrels = {q: judged for q, judged in qrels.items() if any(g > 0 for g in judged.values())}
  scores = rng.permutation(len(queries) * len(corpus)).reshape(len(queries), len(corpus)).astype(np.float64)
  cut = (1, 3, 5, 10)
  cutoffs = dict(accuracy_at=(1,), precision_recall_at=cut, mrr_at=(10,), ndcg_at=cut, map_at=cut + (100,))
  ours = metrics.retrieval_metrics(scores, queries, corpus, qrels, convention="beir", **cutoffs)
  rankings = {q: [corpus[j] for j in np.argsort(-scores[i])] for i, q in enumerate(queries) if q in qrels}
  ranked = metrics.ranking_metrics(rankings, qrels, convention="beir", **cutoffs)
  run = {q: {corpus[j]: float(scores[i, j]) for j in range(len(corpus))} for i, q in enumerate(queries) if q in qrels}
  measures = {f"ndcg_cut.{','.join(map(str, cut))}", "map_cut.1,3,5,10,100", f"recall.{','.join(map(str, cut))}",
              f"P.{','.join(map(str, cut))}"}
  per_query = pytrec_eval.RelevanceEvaluator(qrels, measures).evaluate(run)
  assert ours["queries"] == ranked["queries"] == len(per_query) == len(qrels)
  names = {**{f"ndcg@{k}": f"ndcg_cut_{k}" for k in cut}, **{f"map@{k}": f"map_cut_{k}" for k in cut + (100,)},
           **{f"recall@{k}": f"recall_{k}" for k in cut}, **{f"precision@{k}": f"P_{k}" for k in cut}}
  for ours_key, trec_key in names.items():
    want = np.mean([values[trec_key] for values in per_query.values()])
    assert ours[ours_key] == pytest.approx(want, abs=1e-12), ours_key
    assert ranked[ours_key] == pytest.approx(want, abs=1e-12), ours_key
  default = metrics.retrieval_metrics(scores, queries, corpus, qrels, **cutoffs)
  assert default["ndcg@10"] != pytest.approx(ours["ndcg@10"], abs=1e-6)  # (the graded set tells them apart)
  assert query_metrics.CONVENTIONS == ("sentence_transformers", "beir")
