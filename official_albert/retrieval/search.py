"""Semantic search over embeddings: each query's best documents by cosine, in sentence-transformers' answer shape.

`semantic_search(query_embeddings, corpus_embeddings, top_k)` returns what `sentence_transformers.util.semantic_search`
returns for the same vectors — per query, `[{"corpus_id": j, "score": cosine}]`, best first — computed a block of
queries at a time (`metrics.cosine_rows`), so a corpus of millions of documents needs no [Q, C] matrix; equal scores
keep the corpus order (torch's top-k leaves their order unspecified). `pipelines.search` is the same over texts,
embedded by `pipelines.embed`; for a corpus searched again and again, embed it once and keep the vectors.
"""

from __future__ import annotations

from typing import Dict, List

import numpy as np

from official_albert.retrieval.metrics import cosine_rows
from official_albert.retrieval.metrics import top_columns


def semantic_search(query_embeddings: np.ndarray, corpus_embeddings: np.ndarray, top_k: int = 10,
                    block_bytes: int = 1 << 28) -> List[List[Dict[str, float]]]:
  """Each query's `top_k` documents by cosine (all of them when the corpus is smaller).

  Args:
    query_embeddings, corpus_embeddings: [Q, D] and [C, D] vectors (need not be normalised).
    top_k: documents per query.
    block_bytes: the most memory one block of float64 scores takes (at least one query's row).

  Returns:
    Per query, `[{"corpus_id": int, "score": float}]` best first; equal scores in corpus order.

  Raises:
    ValueError: the shapes do not match, the corpus is empty, `top_k` < 1, or a vector holds NaN / inf (its
      cosines would, and no order is defined).
  """
  queries, corpus = np.asarray(query_embeddings), np.asarray(corpus_embeddings)
  if queries.ndim != 2 or corpus.ndim != 2 or queries.shape[1] != corpus.shape[1] or not len(corpus):
    raise ValueError(f"query_embeddings {queries.shape} and corpus_embeddings {corpus.shape} must be [Q, D] and a "
                     "non-empty [C, D] of the same width D.")
  if top_k < 1:
    raise ValueError(f"top_k={top_k}: ask for at least 1 document per query.")
  for name, vectors in (("query", queries), ("corpus", corpus)):
    finite = np.isfinite(vectors).all(axis=1)
    if not finite.all():
      raise ValueError(f"{name} embedding {int(np.argmin(finite))} holds NaN or inf: no cosine order is defined "
                       "(a diverged model? check its training loss).")
  k = min(int(top_k), len(corpus))
  return [[{"corpus_id": int(j), "score": float(row[j])} for j in top_columns(row, (), None, "given", k)]
          for _, row in cosine_rows(queries, corpus, block_bytes)]
