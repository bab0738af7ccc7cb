"""Retrieval metrics over a corpus, computed as sentence-transformers' `InformationRetrievalEvaluator` computes them.

For each query with at least one relevant document (others are left out, as there), the corpus is ranked by score and
the top `max(k)` kept; then, averaged over the queries:

- accuracy@k: 1 if a relevant document is in the top k;
- precision@k: relevant documents in the top k / k; recall@k: the same / the query's relevant documents;
- MRR@k: 1 / the rank of the first relevant document in the top k (0 if none);
- nDCG@k: binary gains, DCG of the top k over the DCG of an ideal top k (all relevant first);
- MAP@k: Σ precision at each relevant hit in the top k, over min(k, relevant documents).

Keys are `<metric>@<k>` ("recall@10", "ndcg@10", "mrr@10", "map@100"). The ranking breaks equal scores by corpus
order (a stable sort); the oracle's top-k heap orders exact ties otherwise, which real embeddings do not produce.
"""

from __future__ import annotations

import collections
from typing import Dict, Mapping, Sequence, Set

import numpy as np

ACCURACY_AT = (1, 3, 5, 10)
PRECISION_RECALL_AT = (1, 3, 5, 10)
MRR_AT = (10,)
NDCG_AT = (10,)
MAP_AT = (100,)


def _unit(vectors: np.ndarray) -> np.ndarray:
  v = np.asarray(vectors, np.float64)
  return v / np.maximum(np.linalg.norm(v, axis=-1, keepdims=True), 1e-12)


def cosine_scores(queries: np.ndarray, corpus: np.ndarray) -> np.ndarray:
  """[Q, C] cosine similarities (float64) of query and document embeddings."""
  return _unit(queries) @ _unit(corpus).T


def pair_cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
  """[N] cosine similarities (float64) of row i of `a` with row i of `b` (memory O(N), not the [N, N] matrix)."""
  return np.sum(_unit(a) * _unit(b), axis=-1)


def _dcg(relevances: Sequence[int], k: int) -> float:
  return float(sum(r / np.log2(i + 2) for i, r in enumerate(relevances[:k])))


def retrieval_metrics(scores: np.ndarray, query_ids: Sequence[str], corpus_ids: Sequence[str],
                      relevant: Mapping[str, Set[str]], accuracy_at: Sequence[int] = ACCURACY_AT,
                      precision_recall_at: Sequence[int] = PRECISION_RECALL_AT, mrr_at: Sequence[int] = MRR_AT,
                      ndcg_at: Sequence[int] = NDCG_AT, map_at: Sequence[int] = MAP_AT) -> Dict[str, float]:
  """The metrics of the module docstring from a [Q, C] score matrix.

  Args:
    scores: [len(query_ids), len(corpus_ids)], higher = more similar (e.g. `cosine_scores`).
    query_ids, corpus_ids: the ids of the rows and columns.
    relevant: query id → the ids of its relevant documents (qrels); a query absent or with none is not scored.
    accuracy_at, precision_recall_at, mrr_at, ndcg_at, map_at: the cut-offs (sentence-transformers' defaults).

  Returns:
    {"accuracy@1": …, "recall@10": …, "ndcg@10": …, "mrr@10": …, "map@100": …, "queries": number scored}.

  Raises:
    ValueError: the score matrix's shape is not (queries, documents); the corpus is empty or names a document twice;
      a query's relevant ids are one string, not a collection; no query has a relevant document; or no relevant id
      is in the corpus at all (ids of another type or spelling: every metric would be 0).
  """
  scores = np.asarray(scores)
  if scores.shape != (len(query_ids), len(corpus_ids)):
    raise ValueError(f"scores has shape {scores.shape}, not ({len(query_ids)} queries, {len(corpus_ids)} documents).")
  if not len(corpus_ids):
    raise ValueError("the corpus is empty: there is nothing to retrieve.")
  repeated = [c for c, n in collections.Counter(corpus_ids).items() if n > 1]
  if repeated:  # (one relevant document would be counted as two hits)
    raise ValueError(f"corpus_ids name {len(repeated)} document(s) more than once (e.g. {repeated[:3]}); give each "
                     "document one id.")
  for q in query_ids:
    if isinstance(relevant.get(q), (str, bytes)):
      raise ValueError(f"relevant[{q!r}] is the string {relevant[q]!r}, not a collection of document ids; write "
                       f"{{{relevant[q]!r}}}.")
  scored = [i for i, q in enumerate(query_ids) if relevant.get(q)]
  if not scored:
    raise ValueError("no query has a relevant document in the qrels: nothing to score (check the query ids).")
  in_corpus = set(corpus_ids)
  if not any(in_corpus.intersection(relevant[query_ids[i]]) for i in scored):
    example = next(iter(relevant[query_ids[scored[0]]]))
    raise ValueError(f"none of the relevant documents is in the corpus (e.g. {example!r}, while the corpus ids are "
                     f"like {corpus_ids[0]!r}): check that the qrels and the corpus use the same ids, of one type.")
  max_k = max([*accuracy_at, *precision_recall_at, *mrr_at, *ndcg_at, *map_at])
  sums: Dict[str, float] = {}

  def add(name, value):
    sums[name] = sums.get(name, 0.0) + value

  for i in scored:
    wanted = relevant[query_ids[i]]
    order = np.argsort(-scores[i], kind="stable")[:max_k]
    hits = [1 if corpus_ids[j] in wanted else 0 for j in order]
    for k in accuracy_at:
      add(f"accuracy@{k}", float(any(hits[:k])))
    for k in precision_recall_at:
      add(f"precision@{k}", sum(hits[:k]) / k)
      add(f"recall@{k}", sum(hits[:k]) / len(wanted))
    for k in mrr_at:
      first = next((rank for rank, h in enumerate(hits[:k]) if h), None)
      add(f"mrr@{k}", 0.0 if first is None else 1.0 / (first + 1))
    for k in ndcg_at:
      add(f"ndcg@{k}", _dcg(hits, k) / _dcg([1] * len(wanted), k))
    for k in map_at:
      found, total = 0, 0.0
      for rank, h in enumerate(hits[:k]):
        if h:
          found += 1
          total += found / (rank + 1)
      add(f"map@{k}", total / min(k, len(wanted)))
  out = {name: value / len(scored) for name, value in sums.items()}
  out["queries"] = len(scored)
  return out


def rerank_metrics(scores: np.ndarray, relevance: np.ndarray, **cutoffs) -> Dict[str, float]:
  """The metrics of `retrieval_metrics` for reranking: each query ranks only its own candidates.

  A reranker scores a short candidate list per query (a first-stage retriever's top k), not a shared corpus, so the
  metrics are computed query by query over its row and averaged over the queries that have a relevant candidate
  (as `retrieval_metrics` averages).

  Args:
    scores: [Q, G] the score of each query's G candidates, higher = more relevant.
    relevance: [Q, G] nonzero where a candidate is relevant.
    **cutoffs: `retrieval_metrics`' cut-off lists (accuracy_at, ..., map_at).

  Returns:
    {"mrr@10": …, "ndcg@10": …, ..., "queries": number scored}.

  Raises:
    ValueError: shapes differ, or no query has a relevant candidate.
  """
  scores, relevance = np.asarray(scores), np.asarray(relevance)
  if scores.ndim != 2 or scores.shape != relevance.shape:
    raise ValueError(f"scores {scores.shape} and relevance {relevance.shape} must both be [queries, candidates].")
  candidates = [str(j) for j in range(scores.shape[1])]
  sums: Dict[str, float] = {}
  scored = 0
  for row, rel in zip(scores, relevance):
    wanted = {candidates[j] for j in np.flatnonzero(rel)}
    if not wanted:
      continue
    scored += 1
    for name, value in retrieval_metrics(row[None], ["q"], candidates, {"q": wanted}, **cutoffs).items():
      if name != "queries":
        sums[name] = sums.get(name, 0.0) + value
  if not scored:
    raise ValueError("no query has a relevant candidate: nothing to score.")
  out = {name: value / scored for name, value in sums.items()}
  out["queries"] = scored
  return out
