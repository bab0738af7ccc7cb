"""How the retrieval study ranks a corpus for each query, and scores the rankings.

Every method gives ranked lists of corpus indices (the best `depth`); the metrics are computed from those lists
alone, so `rankings/<method>.json` is all a reader needs to check a number of the study's table.
"""

from __future__ import annotations

from typing import Dict, List, Sequence

import numpy as np

from official_albert.retrieval.run_files import RRF_K  # (reciprocal rank fusion's constant)

RANKING_DEPTH = 100


def bm25_rankings(corpus: Sequence[str], queries: Sequence[str], depth: int) -> List[List[int]]:
  """Each query's best `depth` corpus indices by BM25 (`official_albert.retrieval.bm25`: bm25s' defaults, English
  stop words)."""
  from official_albert.retrieval.bm25 import Bm25Index  # noqa: PLC0415 (optional extra)
  return Bm25Index(corpus).top(queries, depth)


def dense_rankings(queries: np.ndarray, corpus: np.ndarray, depth: int) -> List[List[int]]:
  """Each query's best `depth` corpus indices by cosine (ties by corpus order)."""
  from official_albert.retrieval.metrics import cosine_scores  # noqa: PLC0415
  scores = cosine_scores(queries, corpus)
  return [[int(j) for j in np.argsort(-row, kind="stable")[:depth]] for row in scores]


def ranking_metrics(rankings: Sequence[Sequence[int]], relevant: Sequence[Sequence[int]],
                    corpus_size: int) -> Dict[str, float]:
  """`official_albert.retrieval.metrics.retrieval_metrics` of ranked lists (a listed document scores above every
  unlisted one, in list order)."""
  from official_albert.retrieval.metrics import retrieval_metrics  # noqa: PLC0415
  scores = np.full((len(rankings), corpus_size), -1.0)
  for i, ranking in enumerate(rankings):
    scores[i, list(ranking)] = np.arange(len(ranking), 0, -1, dtype=np.float64)
  query_ids = [f"q{i}" for i in range(len(rankings))]
  corpus_ids = [f"d{j}" for j in range(corpus_size)]
  qrels = {f"q{i}": {f"d{j}" for j in rel} for i, rel in enumerate(relevant)}
  return retrieval_metrics(scores, query_ids, corpus_ids, qrels)


def rerank_rankings(model_dir: str, queries: Sequence[str], corpus: Sequence[str],
                    first_stage: Sequence[Sequence[int]], depth: int) -> List[List[int]]:
  """The first stage's top `depth` reordered by the reranker (`pipelines.rerank`), the rest kept below them."""
  from official_albert import pipelines  # noqa: PLC0415 (binary: TF after launch)
  from official_albert.serving.pipeline_inputs import default_seq_length  # noqa: PLC0415
  from official_albert.serving.rerank import load_reranker  # noqa: PLC0415 (binary: TF after launch)
  model, tokenizer, _ = load_reranker(model_dir)  # once: pipelines.rerank(model_dir, ...) would load per query
  seq_length = default_seq_length(model, model_dir)
  out = []
  for query, ranking in zip(queries, first_stage):
    head = list(ranking[:depth])
    order = pipelines.rerank(model, query, [corpus[j] for j in head], tokenizer=tokenizer, seq_length=seq_length)
    out.append([head[r["index"]] for r in order] + list(ranking[depth:]))
  return out


def rank_fusion(first_stage: Sequence[Sequence[int]], reranked: Sequence[Sequence[int]], depth: int,
                k: int = RRF_K) -> List[List[int]]:
  """The first stage's top `depth` reordered by the reciprocal-rank fusion of its order and the reranker's (both
  rankings hold the same top `depth`), the rest kept below them; ties keep the first stage's order.

  Why: a reranker and the bi-encoder that chose its candidates err differently, and RRF, which needs no weight to
  tune (the held-out queries are the test set), is the field's usual way to combine two rankings.
  """
  out = []
  for first, second in zip(first_stage, reranked):
    head = list(first[:depth])
    if sorted(head) != sorted(second[:depth]):
      raise ValueError("rank_fusion: the reranked list does not hold the first stage's top "
                       f"{depth} ({head[:5]}... against {list(second[:5])}...).")
    place = {doc: r for r, doc in enumerate(second[:depth], 1)}
    scores = {doc: 1.0 / (k + r) + 1.0 / (k + place[doc]) for r, doc in enumerate(head, 1)}
    out.append(sorted(head, key=lambda doc: -scores[doc]) + list(first[depth:]))
  return out
