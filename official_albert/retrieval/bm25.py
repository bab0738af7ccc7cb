"""BM25 over a corpus (bm25s, the `retrieval` extra): the classical first stage and the anchor embedders are judged by.

BEIR's reranking numbers are BM25's top 100 reordered by a cross-encoder, so a reranker can be validated, scored and
given mined negatives without any embedder: `tasks.retrieval_evaluate --first_stage=bm25` ranks with this, and the
retrieval study's BM25 baseline is this index. bm25s' defaults (Lucene's BM25 variant, k1 1.5, b 0.75), its
tokenizer (lower-cased words of two or more word characters) and English stop words.
"""

from __future__ import annotations

from typing import List, Sequence

import numpy as np

from official_albert.extras import install_hint


def _bm25s():
  try:
    import bm25s  # noqa: PLC0415 (optional extra)
  except ImportError as e:
    raise ImportError(f"BM25 needs bm25s: {install_hint('retrieval')}. ({e})") from e
  return bm25s


class Bm25Index:
  """A corpus indexed once; `scores` of one query over every document, `top` of many queries."""

  def __init__(self, corpus: Sequence[str]):
    self._bm25s = _bm25s()
    self.size = len(corpus)
    self._retriever = self._bm25s.BM25()
    self._retriever.index(self._bm25s.tokenize(list(corpus), stopwords="en", show_progress=False),
                          show_progress=False)

  def scores(self, query: str) -> np.ndarray:
    """[corpus size] float64 BM25 scores of `query` (all 0 for a query of stop words or unknown words alone)."""
    tokens = self._bm25s.tokenize([query], stopwords="en", return_ids=False, show_progress=False)[0]
    if not tokens:
      return np.zeros([self.size], np.float64)
    return np.asarray(self._retriever.get_scores(tokens), np.float64)

  def top(self, queries: Sequence[str], depth: int) -> List[List[int]]:
    """Each query's best `depth` corpus indices (bm25s' own top-k: its order among equal scores)."""
    depth = min(depth, self.size)
    indices, _ = self._retriever.retrieve(self._bm25s.tokenize(list(queries), stopwords="en", show_progress=False),
                                          k=depth, show_progress=False, n_threads=1)
    return [[int(i) for i in row] for row in np.asarray(indices)]
