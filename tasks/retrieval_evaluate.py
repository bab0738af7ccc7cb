r"""Retrieval metrics of an embedder (or BM25) on a BEIR-format folder, the field's benchmark format (BEIR, MTEB).

  python -m tasks.retrieval_evaluate --model_dir=DIR --data_dir=BEIR_FOLDER [--split=test] [--dim=K | --dims=K1,K2]
      [--output_file=results.json] [--run_file=run.trec [--run_depth=100]]
  python -m tasks.retrieval_evaluate --first_stage=bm25 --data_dir=BEIR_FOLDER [--rerank_model_dir=RERANKER] ...
  python -m tasks.retrieval_evaluate --model_dir=DIR --data_dir=BEIR_FOLDER --rank_only --run_file=run.trec

`--model_dir` is anything `pipelines.embed` reads: a `text_embedding` model directory, a sentence-transformers or HF
folder, an encoder export (SavedModel, OpenVINO, LiteRT). The queries and the whole corpus are embedded (the texts
longest first, so that each batch pads little; the vectors do not depend on the order) and every query ranks the
whole corpus by cosine, a block of queries at a time (`vector_retrieval_metrics`: the numbers of sentence-transformers'
InformationRetrievalEvaluator on the same vectors, without a [queries × corpus] matrix in memory). A document whose
id is the query's own is left out of that query's ranking unless judged relevant to it (`--ignore_identical_ids`, as
BEIR's evaluation does by default, for sets such as Quora where queries are documents too).

`--first_stage=bm25` ranks by BM25 instead (`official_albert.retrieval.bm25`, the `retrieval` extra's bm25s; no
`--model_dir`): each query's scores over the whole corpus, ranked as the embedder's cosines are (a query of stop words
alone scores every document 0, and equal scores rank relevant documents last). It is the classical anchor and the
first stage of BEIR's reranking numbers (BM25's top 100 reordered by a cross-encoder). `--first_stage=run
--candidates=run.trec` takes any retriever's ranking from a TREC run file instead (Pyserini's, a search engine's):
its documents in its order, one it does not list not retrieved (`ranking_metrics`), reranked as `text_ranking`
validates on the folder (`tasks.ranking.beir_evaluation`) where `--rerank_model_dir` is given. Several run files,
comma-separated, are fused first by reciprocal rank fusion (`run_files.fuse`, k = 60): a hybrid first stage, e.g.
`--candidates=bm25.trec,dense.trec`.

With `--rerank_model_dir` (a reranker: `--experiment=text_ranking`'s model directory, any one-output sentence-pair
classifier) the first stage's top `--rerank_depth` documents of each query are reordered by the reranker
(`pipelines.rerank`) and the rest stay below them in the first stage's order, the retrieve-then-rerank pipeline the
field reports; the metrics are then over that ranking, against the same qrels.

With `--run_file` the ranking scored is also written as a TREC run file (`official_albert.retrieval.run_files`): each
scored query's first `--run_depth` documents with their scores (cosines or BM25's; a reranked head scored above them
in the reranker's order), equal scores in the order the metrics rank them (relevant documents last, the pessimistic
order of `official_albert.retrieval.metrics`; the reranker's head is cut from that order too). It is the candidate
list a reranker's training run validates on (`text_ranking` with a BEIR-format folder), and what trec_eval, ranx or a
second stage elsewhere read.

`--rank_only` ranks every query of `queries.jsonl`, judged or not, without reading any qrels, and writes the run
(`--run_file`, required): a hidden test split's first stage (a leaderboard submission, or the candidates `text_ranking
--mode=predict` reranks), or a search of one's own queries. Each query's documents are those the metrics would rank
on a judged split, in the same order where no two scores are equal (without judgments, equal scores keep the corpus
order); it prints the counts, no metric.

Prints one JSON object (and writes it atomically to `--output_file`): `recall@1/3/5/10`, `precision@…`,
`accuracy@…`, `mrr@10`, `ndcg@10`, `map@100`, the `queries` scored and the `corpus` size, with the `split`,
`dim` and `model_dir` (or `first_stage`: "bm25"; and `rerank_model_dir`, `rerank_depth`; with `--dims`, `by_dim`:
width → its metrics). The folder's reading rules: tasks/embedding/beir.py.

`--metric_convention=beir` computes nDCG and MAP as BEIR's own evaluation (pytrec_eval) does: graded linear gains
over the ideal of the grades, MAP over all relevant documents (`official_albert.retrieval.query_metrics`); the default,
`sentence_transformers`, is the InformationRetrievalEvaluator's binary gains. They differ on graded sets (TREC-COVID,
NFCorpus) and where a query has more relevant documents than the cut-off; compare with published BEIR / MTEB numbers
under `beir`. The output records `metric_convention`.
"""

from __future__ import annotations

import json
from typing import Dict, Optional, Sequence

from absl import flags
import numpy as np

from official_albert import cli
from official_albert import file_io

FIRST_STAGES = ("embedder", "bm25", "run")


def evaluate(model_dir: Optional[str], data_dir: str, split: str = "test", dim: Optional[int] = None,
             force_dim: bool = False, batch_size: int = 32, seq_length: Optional[int] = None,
             query_prompt_name: Optional[str] = None, corpus_prompt_name: Optional[str] = None,
             ignore_identical_ids: bool = True, rerank_model_dir: Optional[str] = None, rerank_depth: int = 100,
             dims: Sequence[int] = (), run_file: Optional[str] = None, run_depth: int = 100,
             first_stage: str = "embedder", candidates: Optional[str] = None,
             rank_only: bool = False, metric_convention: str = "sentence_transformers") -> Dict[str, object]:
  """The metrics of the module docstring for `model_dir` on `data_dir`'s `split`; with `dims`, also `by_dim`: the
  metrics of each Matryoshka width (the vectors embedded once, each width's prefix re-normalised, as `embed(...,
  dim=K)` gives it; `force_dim` as there); with `run_file`, the ranking scored (reranked where a reranker is
  given) is written there, each query's first `run_depth` documents (`official_albert.retrieval.run_files`).
  `first_stage="bm25"` ranks by BM25 instead of an embedder (`model_dir` None); `first_stage="run"` takes the
  ranking of the run file `candidates`. `rank_only`: every query of the folder ranked and written to `run_file`,
  no qrels read (the counts returned, no metric). `metric_convention`: "sentence_transformers" or "beir"
  (`official_albert.retrieval.query_metrics`)."""
  from official_albert.retrieval.matryoshka import check_dim  # noqa: PLC0415
  from official_albert.retrieval.matryoshka import truncate  # noqa: PLC0415
  from official_albert.retrieval.query_metrics import check_convention  # noqa: PLC0415
  from official_albert.serving.embedding import embed_queries_and_corpus  # noqa: PLC0415 (binary: TF after launch)
  from tasks.embedding.beir import read_beir  # noqa: PLC0415
  from tasks.embedding.beir import read_texts  # noqa: PLC0415
  _check_settings(model_dir, first_stage, dim, dims, query_prompt_name, corpus_prompt_name, run_file, run_depth,
                  rerank_model_dir, rerank_depth, candidates, rank_only)
  check_convention(metric_convention)
  try:
    data = read_texts(data_dir) if rank_only else read_beir(data_dir, split)
  except FileNotFoundError as e:
    raise FileNotFoundError(f"{e} To rank the queries without judgments, pass --rank_only --run_file=run.trec."
                            if not rank_only and "qrels" in str(e) else str(e)) from None
  query_ids = list(data.queries) if rank_only else data.scored_query_ids()
  corpus_ids = list(data.corpus)
  ignore = (data.identical_ids(query_ids) if ignore_identical_ids else None) or {}
  run: Optional[Dict[str, list]] = {} if run_file else None
  stage = dict(data=data, query_ids=query_ids, corpus_ids=corpus_ids, ignore=ignore, rank_only=rank_only,
               convention=metric_convention)
  results: Dict[str, object] = {}
  if first_stage == "run":
    metrics = _run_metrics(data, candidates, rerank_model_dir, rerank_depth, batch_size, ignore_identical_ids, run,
                           run_depth, rank_only, metric_convention)
    results.update(first_stage="run", candidates=candidates)
  elif first_stage == "bm25":
    metrics = _bm25_metrics(stage, _second_stage(stage, rerank_model_dir, rerank_depth, batch_size, run, run_depth))
    results.update(first_stage="bm25")
  else:
    options = dict(batch_size=batch_size, seq_length=seq_length, dim=dim, force=force_dim)
    query_texts, corpus_texts = [data.queries[q] for q in query_ids], [data.corpus[c] for c in corpus_ids]
    queries, corpus = embed_queries_and_corpus(model_dir, query_texts, corpus_texts, query_prompt_name,
                                               corpus_prompt_name, **options)
    metrics = _vector_metrics(stage, queries, corpus,
                              _second_stage(stage, rerank_model_dir, rerank_depth, batch_size, run, run_depth))
    results.update(dim=int(corpus.shape[1]), model_dir=model_dir)
    if dims:
      widths = [check_dim(model_dir, k, int(corpus.shape[1]), force_dim, "--dims") for k in dims]
      results["by_dim"] = {str(k): _reported(_vector_metrics(stage, truncate(queries, k), truncate(corpus, k),
                                                             _second_stage(stage, rerank_model_dir, rerank_depth,
                                                                           batch_size)))
                           for k in widths}
  if run_file:
    _write_run(run_file, run, query_ids)
  results.update(_reported(metrics), queries=int(metrics["queries"]), corpus=len(corpus_ids), data_dir=data_dir,
                 **(dict(rank_only=True) if rank_only else dict(split=split, metric_convention=metric_convention)))
  if rerank_model_dir:
    results.update(rerank_model_dir=rerank_model_dir, rerank_depth=rerank_depth)
  if run_file:
    results.update(run_file=run_file, run_depth=run_depth)
  return results


def _reported(metrics: Dict[str, float]) -> Dict[str, float]:
  return {name: float(value) for name, value in metrics.items() if name != "queries"}


def _check_settings(model_dir, first_stage, dim, dims, query_prompt_name, corpus_prompt_name, run_file, run_depth,
                    rerank_model_dir, rerank_depth, candidates, rank_only=False) -> None:
  if first_stage not in FIRST_STAGES:
    raise ValueError(f"--first_stage={first_stage!r}: use one of {FIRST_STAGES}.")
  if (first_stage == "run") != bool(candidates):
    raise ValueError(f"--first_stage={first_stage} with --candidates={candidates!r}: --candidates (a TREC run file) "
                     "is the first stage's ranking, given with --first_stage=run and only then.")
  if first_stage != "embedder":
    given = [name for name, value in (("--model_dir", model_dir), ("--dim", dim), ("--dims", list(dims)),
                                      ("--query_prompt_name", query_prompt_name),
                                      ("--corpus_prompt_name", corpus_prompt_name)) if value]
    if given:
      raise ValueError(f"--first_stage={first_stage} ranks without an embedder: leave out {', '.join(given)}.")
  elif not model_dir:
    raise ValueError("--model_dir is required: the embedder that ranks the corpus (or --first_stage=bm25).")
  if dims and dim is not None:
    raise ValueError(f"--dim={dim} and --dims={list(dims)}: pass one (--dims scores every width of one embedding).")
  if rank_only and not run_file:
    raise ValueError("--rank_only writes the rankings and scores none: give --run_file=run.trec.")
  if rank_only and dims:
    raise ValueError(f"--rank_only with --dims={list(dims)}: one run is written; rank at one width with --dim.")
  if run_file and run_depth < 1:
    raise ValueError(f"--run_depth={run_depth}: write at least each query's first document.")
  if rerank_model_dir and rerank_depth < 1:
    raise ValueError(f"--rerank_depth={rerank_depth}: rerank at least the first document of each ranking.")


def _run_metrics(data, candidates: str, rerank_model_dir: Optional[str], depth: int, batch_size: int,
                 ignore_identical_ids: bool, run: Optional[Dict], run_depth: int,
                 rank_only: bool = False, convention: str = "sentence_transformers") -> Dict[str, float]:
  """The metrics of the run file `candidates` (several, comma-separated: their reciprocal rank fusion,
  `run_files.fuse`) (`ranking_metrics`: a document it does not list is not retrieved),
  each query's first `depth` reordered by the reranker where one is given, as `text_ranking`'s validation on the
  folder reorders them (`tasks.ranking.beir_evaluation`); with `run`, the rankings are kept there (scores: their
  order, n down to 1). `rank_only`: every query the run ranks, no metric (`queries` alone)."""
  from official_albert.retrieval.metrics import ranking_metrics  # noqa: PLC0415
  from official_albert.retrieval.run_files import fuse  # noqa: PLC0415
  from official_albert.retrieval.run_files import read_run  # noqa: PLC0415
  from tasks.ranking.beir_evaluation import RerankEvaluation  # noqa: PLC0415
  files = [f.strip() for f in candidates.split(",") if f.strip()]
  fused = fuse([read_run(f) for f in files]) if len(files) > 1 else None  # (a hybrid first stage)
  evaluation = RerankEvaluation.of(data, candidates, depth if rerank_model_dir else 0, ignore_identical_ids,
                                   predict=rank_only, run=fused)
  scores = np.zeros([evaluation.pairs()])
  if rerank_model_dir:
    order_of, start = _loaded_reranker(rerank_model_dir, batch_size), 0
    for q, head in evaluation.heads.items():
      order = order_of(data.queries[q], [data.corpus[d] for d in head])
      for r, answer in enumerate(order):
        scores[start + answer["index"]] = len(order) - r  # (the reranker's order; its ties by the run's)
      start += len(head)
  rankings = evaluation.rankings(scores)
  if run is not None:
    run.update({q: [(d, float(len(ranking) - p)) for p, d in enumerate(ranking[:run_depth])]
                for q, ranking in rankings.items()})
  return {"queries": len(rankings)} if rank_only else ranking_metrics(rankings, data.qrels, convention=convention)


def _vector_metrics(stage: Dict, queries: np.ndarray, corpus: np.ndarray, rescore) -> Dict[str, float]:
  """The embedder's metrics: cosines a block of queries at a time (`vector_retrieval_metrics`); with
  `stage["rank_only"]`, every query's row ranked by `rescore` (which records it) and no metric."""
  from official_albert.retrieval.metrics import cosine_rows  # noqa: PLC0415
  from official_albert.retrieval.metrics import vector_retrieval_metrics  # noqa: PLC0415
  if stage["rank_only"]:
    if not (np.isfinite(queries).all() and np.isfinite(corpus).all()):
      raise ValueError("the embeddings hold non-finite values (NaN / inf): no ranking is defined, so no run is "
                       "written. Likely a diverged model (check its training loss).")
    return _ranked(rescore, cosine_rows(queries, corpus))  # (no [Q, C] matrix held)
  return vector_retrieval_metrics(queries, corpus, stage["query_ids"], stage["corpus_ids"], stage["data"].qrels,
                                  ignore=stage["ignore"] or None, rescore=rescore, convention=stage["convention"])


def _bm25_metrics(stage: Dict, rescore) -> Dict[str, float]:
  """BM25's metrics: each query's scores over the corpus as it is ranked (`official_albert.retrieval.bm25`)."""
  from official_albert.retrieval.bm25 import Bm25Index  # noqa: PLC0415 (optional extra)
  from official_albert.retrieval.metrics import row_retrieval_metrics  # noqa: PLC0415
  data, query_ids, corpus_ids = stage["data"], stage["query_ids"], stage["corpus_ids"]
  index = Bm25Index([data.corpus[c] for c in corpus_ids])
  if stage["rank_only"]:
    return _ranked(rescore, ((i, index.scores(data.queries[q])) for i, q in enumerate(query_ids)))
  return row_retrieval_metrics(lambda i: index.scores(data.queries[query_ids[i]]), query_ids, corpus_ids,
                               data.qrels, ignore=stage["ignore"] or None, rescore=rescore,
                               convention=stage["convention"])


def _ranked(record, rows) -> Dict[str, float]:
  """Each (query number, scores) of `rows` given to `record` (`_recording`, which keeps its ranking): `rank_only`'s
  pass over every query, in place of the metrics'."""
  count = 0
  for i, row in rows:
    record(i, np.asarray(row, np.float64))
    count += 1
  return {"queries": count}


def _second_stage(stage: Dict, rerank_model_dir: Optional[str], depth: int, batch_size: int,
                  run: Optional[Dict] = None, run_depth: int = 100):
  """The `rescore` of the first stage's scores (None: none): each query's top `depth` reordered by the reranker,
  given scores above every first-stage score in the reranker's order, so the rest keeps the first stage's order
  below it; with `run`, each query's ranking is kept there too (`_recording`)."""
  first = _first_stage(stage["data"], stage["query_ids"], stage["corpus_ids"], stage["ignore"])
  rescore = _reranker(stage, first, rerank_model_dir, depth, batch_size) if rerank_model_dir else None
  return rescore if run is None else _recording(rescore, run, run_depth, first, stage["query_ids"],
                                                stage["corpus_ids"])


def _loaded_reranker(rerank_model_dir: str, batch_size: int):
  """`serving.rerank.loaded_reranker` (imported here: a binary imports TensorFlow after launch)."""
  from official_albert.serving.rerank import loaded_reranker  # noqa: PLC0415
  return loaded_reranker(rerank_model_dir, batch_size)


def _reranker(stage: Dict, first, rerank_model_dir: str, depth: int, batch_size: int):
  """`rescore(i, scores)`: query i's first-stage head (`first`) reordered by the reranker (loaded once per `stage`,
  which `--dims`' widths share)."""
  if "order_of" not in stage:
    stage["order_of"] = _loaded_reranker(rerank_model_dir, batch_size)
  order_of = stage["order_of"]
  data, query_ids, corpus_ids = stage["data"], stage["query_ids"], stage["corpus_ids"]

  def reranked(i: int, first_scores: np.ndarray) -> np.ndarray:
    q = query_ids[i]
    head = first(i, first_scores, depth)  # (an ignored document takes no place in the head)
    order = order_of(data.queries[q], [data.corpus[corpus_ids[j]] for j in head])
    scores = first_scores.copy()
    above = float(np.max(first_scores)) + 1.0
    for r, answer in enumerate(order):
      scores[head[answer["index"]]] = above + len(order) - r  # (above every first-stage score, reranker's order)
    return scores

  return reranked


def _first_stage(data, query_ids: Sequence[str], corpus_ids: Sequence[str], ignore: Dict[str, set]):
  """`first(i, scores, k)`: query i's first `k` corpus columns by `scores`, ranked as the metrics rank them
  (`metrics.top_columns`: equal scores put relevant documents last, then corpus order), its ignored documents left
  out."""
  from official_albert.retrieval.metrics import top_columns  # noqa: PLC0415
  column = {c: j for j, c in enumerate(corpus_ids)}

  def first(i: int, scores: np.ndarray, k: int) -> np.ndarray:
    q = query_ids[i]
    relevant = [column[d] for d, grade in data.qrels.get(q, {}).items() if grade > 0 and d in column]
    left_out = np.array(sorted(column[d] for d in ignore.get(q, ())), np.int64)
    return top_columns(np.asarray(scores, np.float64), relevant, left_out if len(left_out) else None,
                       "relevant_last", k)

  return first


def _recording(rescore, run: Dict[str, list], depth: int, first, query_ids: Sequence[str],
               corpus_ids: Sequence[str]):
  """A `rescore` for the metrics that scores as `rescore` does (None: the first stage's scores) and keeps each
  query's first `depth` (document id, score) in `run`, in the order the metrics rank them (`first`)."""

  def call(i: int, first_scores: np.ndarray) -> np.ndarray:
    scores = first_scores if rescore is None else rescore(i, first_scores)
    run[query_ids[i]] = [(corpus_ids[j], float(scores[j])) for j in first(i, scores, depth)]
    return scores

  return call


def _write_run(path: str, run: Dict[str, list], query_ids: Sequence[str]) -> None:
  """`run` as a run file, the queries in the queries file's order (none: the scores were not finite, nothing ran)."""
  from official_albert.retrieval.run_files import write_run  # noqa: PLC0415
  if not run:
    raise ValueError(f"--run_file={path}: no query was ranked (the embeddings are not finite: every metric is NaN); "
                     "no run is written.")
  write_run(path, {q: run[q] for q in query_ids if q in run})


def define_flags(fv: flags.FlagValues = flags.FLAGS) -> None:
  """Defines the binary's flags (in a function, so that importing the module never clashes with other binaries)."""
  flags.DEFINE_string("model_dir", None, "An embedder: a model directory or an encoder export (what pipelines.embed "
                      "reads); not with --first_stage=bm25.", flag_values=fv)
  flags.DEFINE_enum("first_stage", "embedder", list(FIRST_STAGES), "What ranks the corpus: the --model_dir "
                    "embedder, BM25 (the retrieval extra's bm25s; no model), or the run file --candidates.",
                    flag_values=fv)
  flags.DEFINE_string("candidates", None, "With --first_stage=run: a TREC run file of the split's queries (any "
                      "retriever's), scored as given or reranked; several, comma-separated, are fused (RRF, k=60).",
                      flag_values=fv)
  flags.DEFINE_string("data_dir", None, "A BEIR-format folder: corpus.jsonl, queries.jsonl, qrels/<split>.tsv.",
                      flag_values=fv)
  flags.DEFINE_string("split", "test", "The qrels file to score: qrels/<split>.tsv (none with --rank_only).",
                      flag_values=fv)
  flags.DEFINE_integer("dim", None, "Score the first K dimensions, re-normalised (a Matryoshka width the model was "
                       "trained at; see --force_dim).", flag_values=fv)
  flags.DEFINE_list("dims", [], "Also score each of these Matryoshka widths (by_dim in the output), the texts "
                    "embedded once.", flag_values=fv)
  flags.DEFINE_bool("force_dim", False, "Allow a --dim the model directory records no training for.", flag_values=fv)
  flags.DEFINE_integer("batch_size", 32, "Texts per forward pass.", flag_values=fv)
  flags.DEFINE_integer("seq_length", None, "Tokens per text (default: the model's max_seq_length).", flag_values=fv)
  flags.DEFINE_string("query_prompt_name", None, "The folder's prompt prepended to queries (default: its default "
                      "prompt, as pipelines.embed).", flag_values=fv)
  flags.DEFINE_string("corpus_prompt_name", None, "The folder's prompt prepended to documents.", flag_values=fv)
  flags.DEFINE_bool("ignore_identical_ids", True, "Leave a document out of the ranking of the query with its id "
                    "(unless judged relevant), as BEIR's evaluation does.", flag_values=fv)
  flags.DEFINE_string("rerank_model_dir", None, "A reranker (a one-output sentence-pair classifier, e.g. "
                      "--experiment=text_ranking's model_dir) that reorders each query's first --rerank_depth "
                      "documents.", flag_values=fv)
  flags.DEFINE_integer("rerank_depth", 100, "How many of the bi-encoder's best documents the reranker reorders.",
                       flag_values=fv)
  flags.DEFINE_string("output_file", None, "Also write the JSON here (atomically).", flag_values=fv)
  flags.DEFINE_string("run_file", None, "Also write the ranking scored, each query's first --run_depth documents, "
                      "as a TREC run file (the candidates text_ranking's validation on this folder reranks).",
                      flag_values=fv)
  flags.DEFINE_integer("run_depth", 100, "Documents per query in --run_file.", flag_values=fv)
  flags.DEFINE_bool("rank_only", False, "Rank every query of queries.jsonl, judged or not, and only write the run "
                    "(--run_file): no qrels are read, no metric printed (a hidden split's first stage).",
                    flag_values=fv)
  flags.DEFINE_enum("metric_convention", "sentence_transformers", ["sentence_transformers", "beir"],
                    "How nDCG and MAP are computed: sentence-transformers' evaluator (binary gains, MAP over min(k, "
                    "relevant)) or BEIR's pytrec_eval (graded gains, MAP over all relevant documents).",
                    flag_values=fv)
  flags.mark_flags_as_required(["data_dir"], flag_values=fv)


def main(argv, fv: flags.FlagValues = flags.FLAGS):
  del argv
  try:
    dims = [int(k) for k in fv.dims]
  except ValueError:
    raise ValueError(f"--dims={','.join(fv.dims)}: give widths as whole numbers, e.g. --dims=384,192.") from None
  if fv.rank_only and fv["split"].present:
    raise ValueError(f"--rank_only with --split={fv.split}: --rank_only ranks every query of queries.jsonl and "
                     "reads no qrels; leave out --split (or --rank_only, to score that split).")
  results = evaluate(fv.model_dir, fv.data_dir, fv.split, fv.dim, fv.force_dim, fv.batch_size, fv.seq_length,
                     fv.query_prompt_name, fv.corpus_prompt_name, fv.ignore_identical_ids, fv.rerank_model_dir,
                     fv.rerank_depth, dims, fv.run_file, fv.run_depth, fv.first_stage, fv.candidates, fv.rank_only,
                     fv.metric_convention)
  if fv.output_file:
    file_io.atomic_write_json(fv.output_file, results)
  print(json.dumps(results, sort_keys=True))


def console_main() -> None:
  """The `albert-retrieval-evaluate` console script (pyproject.toml)."""
  cli.launch(define_flags, main)


if __name__ == "__main__":
  console_main()
