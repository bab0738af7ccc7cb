"""Retrieval metrics over a corpus, computed as sentence-transformers' `InformationRetrievalEvaluator` computes them.

For each query with at least one relevant document (others are left out, as there), the corpus is ranked by score and
the top `max(k)` kept; then, averaged over the queries:

- accuracy@k: 1 if a relevant document is in the top k;
- precision@k: relevant documents in the top k / k; recall@k: the same / the query's relevant documents;
- MRR@k: 1 / the rank of the first relevant document in the top k (0 if none);
- nDCG@k: binary gains, DCG of the top k over the DCG of an ideal top k (all relevant first);
- MAP@k: Σ precision at each relevant hit in the top k, over min(k, relevant documents).

`convention="beir"` computes nDCG and MAP as BEIR / pytrec_eval do instead (graded linear gains with the ideal over
the grades sorted; MAP over all relevant documents): `retrieval.query_metrics`, which scores each ranked query.

Keys are `<metric>@<k>` ("recall@10", "ndcg@10", "mrr@10", "map@100"). Equal scores rank the relevant documents
after the others (`ties="relevant_last"`): a collapsed model (every score equal) then scores its worst, where corpus
order scored a number that reads as a weak model, not a broken one (each query's positive at its own row of an
evaluation corpus: mrr@10 0.29 over ten queries; candidates listed positive first: 1.0; a shuffled group: a random
ranking's). `ties="given"` breaks them by corpus order (a stable
sort); the oracle's top-k heap orders exact ties its own way, which real embeddings do not produce.

A NaN or ±inf score in a scored query's row makes every metric NaN (logged), as `tasks.metrics.pearson` is NaN for
non-finite input: ranked as given, a diverged model's all-NaN scores left the corpus in its own order and scored
plausible numbers (recall@3 1.0 over three documents) in eval_results.json. NaN rather than an error, so that the
validation of a training run that diverged reports it instead of crashing; the best-checkpoint choice never prefers
NaN to a number (`training.checkpointing.CheckpointKeeper.update_best`). Leave a document out of a ranking with
`ignore`, not with a -inf score.

The qrels are sets of relevant ids per query, or BEIR / pytrec_eval's graded form {query: {document: grade}}, where a
grade of 0 means "judged, not relevant": only grades > 0 are relevant, and the gains stay binary (grade 2 counts as
1, as in the evaluator) unless `convention="beir"`. A document can be left out of one query's ranking (`ignore`:
BEIR's ignore_identical_ids, for a query that is itself a document of the corpus).

`vector_retrieval_metrics` gives the same metrics from the embeddings, a block of cosines at a time, for corpora
whose [Q, C] score matrix does not fit in memory; `row_retrieval_metrics` from a row of scores computed per query
(BM25's); `ranking_metrics` from ranked lists of ids (a run file's).

Long because: the matrix, vector, ranked-list and rerank entry points share one plan of checked ids and qrels, one
ranking rule and one loop over the ranked queries (each scored by `retrieval.query_metrics`); split, each would
repeat the checks that make them agree.
"""

from __future__ import annotations

import collections
import logging
import numbers
from typing import Callable, Collection, Dict, Mapping, Optional, Sequence, Union

import numpy as np

from official_albert.retrieval.query_metrics import ACCURACY_AT
from official_albert.retrieval.query_metrics import add_query_metrics
from official_albert.retrieval.query_metrics import check_convention
from official_albert.retrieval.query_metrics import MAP_AT
from official_albert.retrieval.query_metrics import metric_keys
from official_albert.retrieval.query_metrics import MRR_AT
from official_albert.retrieval.query_metrics import NDCG_AT
from official_albert.retrieval.query_metrics import PRECISION_RECALL_AT

TIES = ("relevant_last", "given")

logger = logging.getLogger(__name__)


def _unit(vectors: np.ndarray, block_bytes: int = 1 << 24) -> np.ndarray:
  """`vectors` over their norms in float64: one copy normalised in place by blocks of rows, not ~4x a float32
  corpus in temporaries (1.2 GiB for 100k x 768); each row's operations, hence its bits, are those of `v / norm(v)`."""
  v = np.array(vectors, np.float64, order="C")  # (always a copy, so the caller's array is left as it is)
  rows = v.reshape(int(np.prod(v.shape[:-1])), v.shape[-1])  # (a view: the copy is C-ordered)
  step = max(1, int(block_bytes) // (8 * max(rows.shape[-1], 1)))
  for begin in range(0, len(rows), step):
    block = rows[begin:begin + step]
    block /= np.maximum(np.linalg.norm(block, axis=-1, keepdims=True), 1e-12)
  return v


def cosine_scores(queries: np.ndarray, corpus: np.ndarray) -> np.ndarray:
  """[Q, C] cosine similarities (float64) of query and document embeddings."""
  return _unit(queries) @ _unit(corpus).T


def pair_cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
  """[N] cosine similarities (float64) of row i of `a` with row i of `b` (memory O(N), not the [N, N] matrix)."""
  return np.sum(_unit(a) * _unit(b), axis=-1)


Qrels = Mapping[str, Union[Collection[str], Mapping[str, float]]]


def _refuse_repeated(ids: Sequence[str], name: str, noun: str, fix: str) -> None:
  repeated = [i for i, n in collections.Counter(ids).items() if n > 1]
  if repeated:
    raise ValueError(f"{name} name {len(repeated)} {noun} more than once (e.g. {repeated[:3]}); {fix}")


def _relevant_ids(query: str, wanted) -> Dict[str, float]:
  """One query's relevant ids with their grades: graded qrels ({id: grade}) keep the grades > 0, a collection its
  ids once each at grade 1 (a repeated id would count one document as two in recall's and nDCG's denominators)."""
  if isinstance(wanted, (str, bytes)):
    raise ValueError(f"relevant[{query!r}] is the string {wanted!r}, not a collection of document ids; write "
                     f"{{{wanted!r}}}.")
  if isinstance(wanted, Mapping):  # (a dict's iteration gives its keys: grade-0 "not relevant" ones too)
    bad = [(d, g) for d, g in wanted.items() if not isinstance(g, numbers.Real)]
    if bad:
      raise ValueError(f"relevant[{query!r}][{bad[0][0]!r}] is {bad[0][1]!r}: graded qrels map a document id to a "
                       "number (> 0 = relevant, 0 = judged not relevant); give a set of ids for ungraded qrels.")
    return {d: float(grade) for d, grade in wanted.items() if grade > 0}
  return dict.fromkeys(wanted or (), 1.0)


def retrieval_metrics(scores: np.ndarray, query_ids: Sequence[str], corpus_ids: Sequence[str], relevant: Qrels,
                      accuracy_at: Sequence[int] = ACCURACY_AT,
                      precision_recall_at: Sequence[int] = PRECISION_RECALL_AT, mrr_at: Sequence[int] = MRR_AT,
                      ndcg_at: Sequence[int] = NDCG_AT, map_at: Sequence[int] = MAP_AT,
                      ignore: Optional[Mapping[str, Collection[str]]] = None,
                      ties: str = "relevant_last", convention: str = "sentence_transformers") -> Dict[str, float]:
  """The metrics of the module docstring from a [Q, C] score matrix.

  Args:
    scores: [len(query_ids), len(corpus_ids)], higher = more similar (e.g. `cosine_scores`).
    query_ids, corpus_ids: the ids of the rows and columns, each id once.
    relevant: the qrels: query id → the ids of its relevant documents (a set; a repeated id counts once), or BEIR /
      pytrec_eval's graded {document id: grade}, relevant where grade > 0 (0 = judged not relevant), the gains
      binary whatever the grade; a query absent or with none relevant is not scored.
    accuracy_at, precision_recall_at, mrr_at, ndcg_at, map_at: the cut-offs (sentence-transformers' defaults).
    ignore: query id → documents left out of that query's ranking, as if not in the corpus (BEIR's
      ignore_identical_ids: a query text that is also a document scores itself first, though not relevant to
      itself); None = none.
    ties: "relevant_last" or "given" (the module docstring).
    convention: "sentence_transformers" (the evaluator's binary gains) or "beir" (pytrec_eval's graded nDCG and MAP
      over all relevant documents): `retrieval.query_metrics`.

  Returns:
    {"accuracy@1": …, "recall@10": …, "ndcg@10": …, "mrr@10": …, "map@100": …, "queries": number scored}; every
    metric NaN (logged) when a scored query's row holds a NaN or ±inf (a diverged model), as `pearson` is.

  Raises:
    ValueError: the score matrix's shape is not (queries, documents); the corpus is empty or names a document twice;
      a query id is repeated (it would weigh twice in the means); a query's relevant ids are one string, not a
      collection, or its graded qrels hold a grade that is not a number; no query has a relevant document; no
      relevant id is in the corpus at all (ids of another type or spelling: every metric would be 0); or `ignore`
      names a document the corpus lacks or one relevant to that query.
  """
  scores = _checked_scores(scores, query_ids, corpus_ids, ties)
  plan = _plan(query_ids, corpus_ids, relevant, ignore, dict(
      accuracy_at=accuracy_at, precision_recall_at=precision_recall_at, mrr_at=mrr_at, ndcg_at=ndcg_at, map_at=map_at),
      convention)
  if _unrankable(scores, plan.scored, [f"query {query_ids[i]!r}" for i in plan.scored], "retrieval_metrics"):
    return plan.nan_metrics()
  return _mean_metrics(((i, scores[i]) for i in plan.scored), plan, query_ids, corpus_ids, ties)


def vector_retrieval_metrics(queries: np.ndarray, corpus: np.ndarray, query_ids: Sequence[str],
                             corpus_ids: Sequence[str], relevant: Qrels,
                             ignore: Optional[Mapping[str, Collection[str]]] = None, ties: str = "relevant_last",
                             block_bytes: int = 1 << 28,
                             rescore: Optional[Callable[[int, np.ndarray], np.ndarray]] = None,
                             convention: str = "sentence_transformers", **cutoffs) -> Dict[str, float]:
  """`retrieval_metrics(cosine_scores(queries, corpus), ...)` without the [Q, C] score matrix in memory.

  Cosines come a block of queries at a time (`cosine_rows`), each row ranked as it comes: memory O((Q + C) × D +
  block), not the 20 GB matrix of 50,000 validation pairs. The same metrics up to the last bits of a product of
  another shape (tests/official_albert/retrieval/test_vector_metrics.py).

  Args:
    queries, corpus: [Q, D] and [C, D] embeddings (need not be normalised).
    query_ids, corpus_ids, relevant, ignore, ties, convention, **cutoffs: as `retrieval_metrics`.
    block_bytes: the most memory one block of scores takes.
    rescore: `rescore(query number, its cosines over the corpus)` → the scores that query is ranked by (finite, one
      per document): a second stage, e.g. a reranker's order given to the first stage's best documents. None: the
      cosines.

  Returns:
    `retrieval_metrics`' dict; every metric NaN (logged) when a scored query's vector or a document's holds a NaN
    or ±inf (their cosines would).

  Raises:
    ValueError: as `retrieval_metrics`, when the vectors' shapes do not match the ids, and when `rescore` returns
      another shape or a non-finite score.
  """
  queries, corpus = np.asarray(queries), np.asarray(corpus)
  _check_ties(ties)
  if (queries.ndim != 2 or corpus.ndim != 2 or queries.shape[1] != corpus.shape[1]
      or (len(queries), len(corpus)) != (len(query_ids), len(corpus_ids))):
    raise ValueError(f"queries {queries.shape} and corpus {corpus.shape} must be [Q, D] and [C, D] embeddings of "
                     f"the {len(query_ids)} query ids and {len(corpus_ids)} corpus ids.")
  _check_ids(query_ids, corpus_ids)
  plan = _plan(query_ids, corpus_ids, relevant, ignore, cutoffs, convention)
  rows = queries[plan.scored]
  finite_rows, finite_documents = np.isfinite(rows).all(axis=1), np.isfinite(corpus).all(axis=1)
  if not (finite_rows.all() and finite_documents.all()):
    where = (f"query {query_ids[plan.scored[int(np.argmin(finite_rows))]]!r}" if not finite_rows.all() else
             f"document {corpus_ids[int(np.argmin(finite_documents))]!r}")
    logger.warning("vector_retrieval_metrics: the embeddings hold non-finite values (NaN / inf), the first in %s: "
                   "no ranking is defined, so every metric is NaN. Likely a diverged model (check its training "
                   "loss).", where)
    return plan.nan_metrics()

  def scored_rows():
    for n, row in cosine_rows(rows, corpus, block_bytes):
      i = plan.scored[n]
      yield i, row if rescore is None else _rescored(rescore, i, row, query_ids[i])

  return _mean_metrics(scored_rows(), plan, query_ids, corpus_ids, ties)


def cosine_rows(queries: np.ndarray, corpus: np.ndarray, block_bytes: int = 1 << 28):
  """(row number, its [C] cosines over `corpus`) of each of `queries`, a block of rows at a time (`block_bytes` of
  float64 scores, at least one row): the rows of `cosine_scores` without the [Q, C] matrix in memory."""
  documents = _unit(corpus).T
  block = max(1, int(block_bytes) // (8 * max(len(corpus), 1)))
  for begin in range(0, len(queries), block):
    yield from enumerate(_unit(queries[begin:begin + block]) @ documents, begin)


def row_retrieval_metrics(score_row: Callable[[int], np.ndarray], query_ids: Sequence[str],
                          corpus_ids: Sequence[str], relevant: Qrels,
                          ignore: Optional[Mapping[str, Collection[str]]] = None, ties: str = "relevant_last",
                          rescore: Optional[Callable[[int, np.ndarray], np.ndarray]] = None,
                          convention: str = "sentence_transformers", **cutoffs) -> Dict[str, float]:
  """`retrieval_metrics` with each scored query's scores computed as it is ranked: `score_row(query number)` gives
  its finite scores over the corpus (BM25's, say), so no [Q, C] matrix is held. `rescore` as in
  `vector_retrieval_metrics`; `convention` as in `retrieval_metrics`.

  Raises:
    ValueError: as `retrieval_metrics`, and when a row has another shape or a non-finite score.
  """
  _check_ties(ties)
  _check_ids(query_ids, corpus_ids)
  plan = _plan(query_ids, corpus_ids, relevant, ignore, cutoffs, convention)

  def scored_rows():
    for i in plan.scored:
      row = np.asarray(score_row(i), np.float64)
      if row.shape != (len(corpus_ids),) or not np.isfinite(row).all():
        raise ValueError(f"score_row gave query {query_ids[i]!r} scores of shape {row.shape}; it must give "
                         f"{len(corpus_ids)} finite scores, one per document.")
      yield i, row if rescore is None else _rescored(rescore, i, row, query_ids[i])

  return _mean_metrics(scored_rows(), plan, query_ids, corpus_ids, ties)


def _rescored(rescore: Callable[[int, np.ndarray], np.ndarray], i: int, row: np.ndarray, query: str) -> np.ndarray:
  scores = np.asarray(rescore(i, row), np.float64)
  if scores.shape != row.shape or not np.isfinite(scores).all():
    raise ValueError(f"rescore gave query {query!r} scores of shape {scores.shape}, "
                     f"{int(np.sum(~np.isfinite(scores)))} of them not finite; it must give {row.shape[0]} finite "
                     "scores, one per document.")
  return scores


class _Plan:
  """What `retrieval_metrics` needs besides the scores, checked: each query's relevant ids, the scored queries'
  rows, the columns left out of a query's ranking, the cut-offs and the depth `max_k` every metric reads."""

  def __init__(self, wanted_of, scored, dropped, cutoffs, convention):
    self.wanted_of, self.scored, self.dropped, self.cutoffs = wanted_of, scored, dropped, cutoffs
    self.convention = convention
    self.max_k = max(k for ks in cutoffs.values() for k in ks)

  def nan_metrics(self) -> Dict[str, float]:
    return dict(dict.fromkeys(metric_keys(**self.cutoffs), float("nan")), queries=len(self.scored))


def _cutoffs(cutoffs: Mapping[str, Sequence[int]]) -> Dict[str, Sequence[int]]:
  """Every cut-off list: the defaults where `cutoffs` gives none."""
  defaults = dict(accuracy_at=ACCURACY_AT, precision_recall_at=PRECISION_RECALL_AT, mrr_at=MRR_AT, ndcg_at=NDCG_AT,
                  map_at=MAP_AT)
  unknown = sorted(set(cutoffs) - set(defaults))
  if unknown:
    raise TypeError(f"unknown cut-off argument(s) {unknown}: the cut-offs are {sorted(defaults)}.")
  return {**defaults, **cutoffs}


def _plan(query_ids: Sequence[str], corpus_ids: Sequence[str], relevant: Qrels,
          ignore: Optional[Mapping[str, Collection[str]]], cutoffs: Mapping[str, Sequence[int]],
          convention: str) -> _Plan:
  cutoffs = _cutoffs(cutoffs)
  check_convention(convention)
  wanted_of = {q: _relevant_ids(q, relevant.get(q)) for q in query_ids}
  scored = [i for i, q in enumerate(query_ids) if wanted_of[q]]
  if not scored:
    raise ValueError("no query has a relevant document in the qrels: nothing to score (check the query ids).")
  in_corpus = set(corpus_ids)
  if not any(in_corpus.intersection(wanted_of[query_ids[i]]) for i in scored):
    example = next(iter(wanted_of[query_ids[scored[0]]]))
    raise ValueError(f"none of the relevant documents is in the corpus (e.g. {example!r}, while the corpus ids are "
                     f"like {corpus_ids[0]!r}): check that the qrels and the corpus use the same ids, of one type.")
  return _Plan(wanted_of, scored, _ignored_columns(ignore, corpus_ids, wanted_of), cutoffs, convention)


def _mean_metrics(rows, plan: _Plan, query_ids: Sequence[str], corpus_ids: Sequence[str],
                  ties: str) -> Dict[str, float]:
  """The metrics averaged over `rows`: (query row, its finite scores over the corpus) of every scored query."""
  sums: Dict[str, float] = {}

  def add(name, value):
    sums[name] = sums.get(name, 0.0) + value

  column_of = {c: j for j, c in enumerate(corpus_ids)}
  for i, row in rows:
    wanted = plan.wanted_of[query_ids[i]]
    order = top_columns(row, [column_of[d] for d in wanted if d in column_of], plan.dropped.get(query_ids[i]), ties,
                 plan.max_k)
    add_query_metrics([wanted.get(corpus_ids[j], 0.0) for j in order], list(wanted.values()), plan.cutoffs, add,
                      plan.convention)
  out = {name: value / len(plan.scored) for name, value in sums.items()}
  out["queries"] = len(plan.scored)
  return out


def ranking_metrics(rankings: Mapping[str, Sequence[str]], relevant: Qrels,
                    convention: str = "sentence_transformers", **cutoffs) -> Dict[str, float]:
  """The metrics of `retrieval_metrics` from ranked lists of document ids (a run: a first stage's top k, reranked or
  not), each query's documents best first; a document absent from its query's list is not retrieved.

  Every query of `rankings` with a relevant document is scored (its relevant documents counted whether listed or
  not, as in `retrieval_metrics`); the others are left out. A judged query that `rankings` does not list is left out
  of the means too, as BEIR and trec_eval (without -c) leave it, and counted in a logged warning: a run that lost
  queries would otherwise read as a better one. Equal to `retrieval_metrics` on scores that rank each query's
  documents in its list's order wherever the lists hold at least the deepest cut-off (100 by default) or the whole
  corpus. `convention` as in `retrieval_metrics`.

  Raises:
    ValueError: a list names a document twice, a query's relevant ids are malformed (`retrieval_metrics`), or no
      query of `rankings` has a relevant document.
  """
  plan_cutoffs = _cutoffs(cutoffs)
  check_convention(convention)
  max_k = max(k for ks in plan_cutoffs.values() for k in ks)
  sums: Dict[str, float] = {}
  scored = 0

  def add(name, value):
    sums[name] = sums.get(name, 0.0) + value

  for query, ranking in rankings.items():
    _refuse_repeated(list(ranking), f"rankings[{query!r}]", "document(s)", "list each document once.")
    wanted = _relevant_ids(query, relevant.get(query))
    if wanted:
      scored += 1
      add_query_metrics([wanted.get(d, 0.0) for d in list(ranking)[:max_k]], list(wanted.values()), plan_cutoffs,
                        add, convention)
  if not scored:
    raise ValueError("no query of the rankings has a relevant document in the qrels: nothing to score (check the "
                     "query ids).")
  unranked = [q for q in relevant if q not in rankings and _relevant_ids(q, relevant[q])]
  if unranked:
    logger.warning("ranking_metrics: %d judged quer%s of the qrels (e.g. %s) %s no ranking: left out of the means, "
                   "as BEIR and trec_eval leave them (the metrics are over the %d ranked ones). A run that dropped "
                   "queries reads better than it is; rank every query.", len(unranked),
                   "y" if len(unranked) == 1 else "ies", unranked[:3], "has" if len(unranked) == 1 else "have", scored)
  out = {name: value / scored for name, value in sums.items()}
  out["queries"] = scored
  return out


def top_columns(row: np.ndarray, relevant_columns: Sequence[int], dropped: Optional[np.ndarray], ties: str,
                k: int) -> np.ndarray:
  """The first `k` columns of `_ranking(row)` less the `dropped` ones, sorting only the columns that can be there.

  Those are the columns scoring at least the k-th highest score (every tie at that score included), taken in
  column order, so the stable sort orders them as it orders the whole row: a full sort of each row cost
  O(C log C) per query.
  """
  keep = len(row) - (0 if dropped is None else len(dropped))
  if keep <= 4 * k:
    order = _ranking(row, relevant_columns, ties)
    return (order if dropped is None else order[~np.isin(order, dropped)])[:k]
  masked = row
  if dropped is not None:
    masked = row.copy()
    masked[dropped] = -np.inf  # (finite rows only reach here: no real score is -inf)
  threshold = np.partition(masked, len(row) - k)[len(row) - k]
  candidates = np.flatnonzero(masked >= threshold)
  relevant = np.flatnonzero(np.isin(candidates, np.asarray(list(relevant_columns), np.int64)))
  return candidates[_ranking(row[candidates], relevant, ties)][:k]


def _checked_scores(scores, query_ids: Sequence[str], corpus_ids: Sequence[str], ties: str) -> np.ndarray:
  """`scores` as an array, once `retrieval_metrics`' shape, id and `ties` checks pass (its Raises)."""
  scores = np.asarray(scores)
  _check_ties(ties)
  if scores.shape != (len(query_ids), len(corpus_ids)):
    raise ValueError(f"scores has shape {scores.shape}, not ({len(query_ids)} queries, {len(corpus_ids)} documents).")
  _check_ids(query_ids, corpus_ids)
  return scores


def _check_ties(ties: str) -> None:
  if ties not in TIES:
    raise ValueError(f"ties={ties!r}: use one of {TIES}.")


def _check_ids(query_ids: Sequence[str], corpus_ids: Sequence[str]) -> None:
  if not len(corpus_ids):
    raise ValueError("the corpus is empty: there is nothing to retrieve.")
  _refuse_repeated(corpus_ids, "corpus_ids", "document(s)", "give each document one id.")  # (else 1 hit counts 2)
  _refuse_repeated(query_ids, "query_ids", "query(ies)",  # (else that query counts twice in every mean)
                   "give each query one id (one row of scores), its relevant documents all in its qrels.")


def _ranking(row: np.ndarray, relevant_columns: Sequence[int], ties: str) -> np.ndarray:
  """The corpus columns best first; equal scores as `ties` says (the module docstring)."""
  if ties == "given":
    return np.argsort(-row, kind="stable")
  is_relevant = np.zeros(len(row), bool)
  is_relevant[list(relevant_columns)] = True
  return np.lexsort((is_relevant, -row))  # (the last key first: among equal scores, not relevant (0) first)


def _unrankable(scores: np.ndarray, rows: Sequence[int], row_names: Sequence[str], function: str) -> bool:
  """True (and a warning that says why) when a NaN or ±inf is among the scores of `rows`: no ranking is defined
  (a stable sort leaves NaN in corpus order), so the caller reports NaN for every metric."""
  finite = np.isfinite(scores[list(rows)])
  if finite.all():
    return False
  first = int(np.flatnonzero(~finite.all(axis=1))[0])
  logger.warning("%s: the scores hold %d non-finite value(s) (NaN / inf), the first in the row of %s: no "
                 "ranking is defined, so every metric is NaN. Likely a diverged model (NaN or inf weights or "
                 "logits: check its training loss) or cosines divided by a zero norm (compute them with "
                 "`cosine_scores`).", function, int(finite.size - finite.sum()), row_names[first])
  return True


def _ignored_columns(ignore: Optional[Mapping[str, Collection[str]]], corpus_ids: Sequence[str],
                     wanted_of: Mapping[str, Mapping[str, float]]) -> Dict[str, np.ndarray]:
  """`ignore` as query id → the corpus columns left out of its ranking, once checked: each id in the corpus (a
  misspelt one would leave the document in silently) and none relevant to the query (it could never be found)."""
  column = {c: j for j, c in enumerate(corpus_ids)}
  out: Dict[str, np.ndarray] = {}
  for q, documents in (ignore or {}).items():
    if isinstance(documents, (str, bytes)):
      raise ValueError(f"ignore[{q!r}] is the string {documents!r}, not a collection of document ids; write "
                       f"{{{documents!r}}}.")
    missing = [d for d in documents if d not in column]
    if missing:
      raise ValueError(f"ignore[{q!r}] names {missing[:3]}, not in corpus_ids: use the corpus' ids.")
    both = sorted(set(documents) & set(wanted_of.get(q, ())))
    if both:
      raise ValueError(f"ignore[{q!r}] names {both[:3]}, relevant to that query: a relevant document left out of "
                       "its ranking could never be found; leave it out of `ignore`.")
    if documents:
      out[q] = np.array(sorted(column[d] for d in documents), np.int64)
  return out


def rerank_metrics(scores: np.ndarray, relevance: np.ndarray, ties: str = "relevant_last",
                   convention: str = "sentence_transformers", **cutoffs) -> Dict[str, float]:
  """The metrics of `retrieval_metrics` for reranking: each query ranks only its own candidates.

  A reranker scores a short candidate list per query (a first-stage retriever's top k), not a shared corpus, so the
  metrics are computed query by query over its row and averaged over the queries that have a relevant candidate
  (as `retrieval_metrics` averages).

  Equal scores rank relevant candidates after the others (`ties`, as in `retrieval_metrics`): candidate lists are
  often listed positive first (`text_ranking` shuffles its groups' candidates; many rerank files do not), and breaking
  ties by position scored a collapsed reranker, whose scores are all equal, as perfect there (mrr@10 1.0) and as a
  random ranking on shuffled groups (0.52 for groups of 4).

  Args:
    scores: [Q, G] the score of each query's G candidates, higher = more relevant.
    relevance: [Q, G] > 0 where a candidate is relevant (0 or below: not relevant, as graded qrels read); its
      grade under `convention="beir"`.
    ties: "relevant_last" or "given" (see above). convention: as in `retrieval_metrics`.
    **cutoffs: `retrieval_metrics`' cut-off lists (accuracy_at, ..., map_at).

  Returns:
    {"mrr@10": …, "ndcg@10": …, ..., "queries": number scored}; every metric NaN (logged) when a scored query's row
    holds a NaN or ±inf (a diverged reranker), as in `retrieval_metrics`.

  Raises:
    ValueError: shapes differ, or no query has a relevant candidate.
  """
  scores, relevance = np.asarray(scores), np.asarray(relevance)
  if scores.ndim != 2 or scores.shape != relevance.shape:
    raise ValueError(f"scores {scores.shape} and relevance {relevance.shape} must both be [queries, candidates].")
  if ties not in TIES:
    raise ValueError(f"ties={ties!r}: use one of {TIES}.")
  candidates = [str(j) for j in range(scores.shape[1])]
  rows = [i for i in range(len(relevance)) if np.any(relevance[i] > 0)]
  if rows and _unrankable(scores, rows, [f"query {i} (row {i} of scores)" for i in rows], "rerank_metrics"):
    return dict(dict.fromkeys(metric_keys(**cutoffs), float("nan")), queries=len(rows))
  sums: Dict[str, float] = {}
  scored = 0
  for row, rel in zip(scores, relevance):
    wanted = {candidates[j]: float(rel[j]) for j in np.flatnonzero(rel > 0)}
    if not wanted:
      continue
    scored += 1
    for name, value in retrieval_metrics(row[None], ["q"], candidates, {"q": wanted}, ties=ties,
                                         convention=convention, **cutoffs).items():
      if name != "queries":
        sums[name] = sums.get(name, 0.0) + value
  if not scored:
    raise ValueError("no query has a relevant candidate: nothing to score.")
  out = {name: value / scored for name, value in sums.items()}
  out["queries"] = scored
  return out
