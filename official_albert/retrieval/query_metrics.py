"""One query's retrieval metrics from its ranking, under one of two conventions.

`retrieval.metrics` ranks; this module scores one ranked query. The two conventions differ only where the qrels are
graded or the cut-off is shorter than the query's relevant documents:

- "sentence_transformers" (the default): `InformationRetrievalEvaluator`'s. Gains are binary (a grade-2 document
  counts as 1), the ideal DCG is that of all relevant documents first, and MAP@k divides by min(k, relevant).
- "beir": BEIR's `EvaluateRetrieval.evaluate`, i.e. pytrec_eval's `ndcg_cut` and `map_cut` (trec_eval's). A
  document's gain is its grade (linear gain), the ideal DCG is that of the relevant documents sorted by grade, best
  first, and MAP@k divides by the query's relevant documents (R), so that a query with more relevant documents than k
  cannot reach 1.

With binary qrels and k ≥ R the two give the same numbers. Accuracy, precision, recall and MRR are the same under
both (pytrec_eval's `recall_k` and `P_k`, BEIR's top-k MRR). Papers that report BEIR numbers (MTEB's retrieval tasks
among them) use the "beir" convention; a graded set (TREC-COVID, NFCorpus) then reads lower nDCG@10 than under the
default (e.g. grades {d1: 2, d2: 1} ranked d2, d1: 1.0 binary, 0.860 graded).
"""

from __future__ import annotations

from typing import Callable, Mapping, Sequence

import numpy as np

CONVENTIONS = ("sentence_transformers", "beir")
ACCURACY_AT = (1, 3, 5, 10)
PRECISION_RECALL_AT = (1, 3, 5, 10)
MRR_AT = (10,)
NDCG_AT = (10,)
MAP_AT = (100,)


def check_convention(convention: str) -> None:
  if convention not in CONVENTIONS:
    raise ValueError(f"convention={convention!r}: use one of {CONVENTIONS} (retrieval.query_metrics).")


def dcg(gains: Sequence[float], k: int) -> float:
  """Σ gain / log2(rank + 1) over the first `k` ranks (rank 1 first): trec_eval's and the evaluator's discount."""
  return float(sum(g / np.log2(i + 2) for i, g in enumerate(gains[:k])))


def add_query_metrics(gains: Sequence[float], relevant_gains: Sequence[float],
                      cutoffs: Mapping[str, Sequence[int]], add: Callable[[str, float], None],
                      convention: str = "sentence_transformers") -> None:
  """`add(name, value)` for each metric of one query.

  Args:
    gains: the grade of each ranked document (0 for one not relevant), best first, at least the deepest cut-off
      long or the whole ranking.
    relevant_gains: the grades (> 0) of all the query's relevant documents, ranked or not.
    cutoffs: {"accuracy_at": (…), "precision_recall_at", "mrr_at", "ndcg_at", "map_at"}.
    add: called with each metric's key ("ndcg@10") and this query's value.
    convention: one of `CONVENTIONS` (the module docstring).
  """
  hits = [1 if g > 0 else 0 for g in gains]
  relevant = len(relevant_gains)
  for k in cutoffs["accuracy_at"]:
    add(f"accuracy@{k}", float(any(hits[:k])))
  for k in cutoffs["precision_recall_at"]:
    add(f"precision@{k}", sum(hits[:k]) / k)
    add(f"recall@{k}", sum(hits[:k]) / relevant)
  for k in cutoffs["mrr_at"]:
    first = next((rank for rank, h in enumerate(hits[:k]) if h), None)
    add(f"mrr@{k}", 0.0 if first is None else 1.0 / (first + 1))
  for k in cutoffs["ndcg_at"]:
    if convention == "beir":
      add(f"ndcg@{k}", dcg([float(g) if g > 0 else 0.0 for g in gains], k)
          / dcg(sorted(relevant_gains, reverse=True), k))
    else:
      add(f"ndcg@{k}", dcg(hits, k) / dcg([1] * relevant, k))
  for k in cutoffs["map_at"]:
    found, total = 0, 0.0
    for rank, h in enumerate(hits[:k]):
      if h:
        found += 1
        total += found / (rank + 1)
    add(f"map@{k}", total / (relevant if convention == "beir" else min(k, relevant)))


def metric_keys(accuracy_at: Sequence[int] = ACCURACY_AT, precision_recall_at: Sequence[int] = PRECISION_RECALL_AT,
                mrr_at: Sequence[int] = MRR_AT, ndcg_at: Sequence[int] = NDCG_AT,
                map_at: Sequence[int] = MAP_AT) -> list:
  """The metric keys of these cut-offs, in the order the metrics functions return them ("queries" aside)."""
  return ([f"accuracy@{k}" for k in accuracy_at]
          + [f"{m}@{k}" for k in precision_recall_at for m in ("precision", "recall")]
          + [f"mrr@{k}" for k in mrr_at] + [f"ndcg@{k}" for k in ndcg_at] + [f"map@{k}" for k in map_at])
