"""How the retrieval study ranks a corpus for each query, and scores the rankings.

Every method gives ranked lists of corpus indices (the best `depth`); the metrics are computed from those lists
alone, so `rankings/<method>.json` is all a reader needs to check a number of the study's table.
"""

from __future__ import annotations

from typing import Dict, List, Sequence

import numpy as np

RANKING_DEPTH = 100


def _bm25():
  try:
    import bm25s  # noqa: PLC0415 (optional extra)
  except ImportError as e:
    raise ImportError("The retrieval study's BM25 baseline needs bm25s: pip install -r requirements-retrieval.txt"
                      ) from e
  return bm25s


def bm25_rankings(corpus: Sequence[str], queries: Sequence[str], depth: int) -> List[List[int]]:
  """Each query's best `depth` corpus indices by BM25 (bm25s' defaults, English stop words)."""
  bm25s = _bm25()
  retriever = bm25s.BM25()
  retriever.index(bm25s.tokenize(list(corpus), stopwords="en", show_progress=False), show_progress=False)
  depth = min(depth, len(corpus))
  indices, _ = retriever.retrieve(bm25s.tokenize(list(queries), stopwords="en", show_progress=False), k=depth,
                                  show_progress=False, n_threads=1)
  return [[int(i) for i in row] for row in np.asarray(indices)]


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
