r"""Retrieval metrics of an embedder on a BEIR-format folder: the field's benchmark format (BEIR, MTEB retrieval).

  python -m tasks.retrieval_evaluate --model_dir=DIR --data_dir=BEIR_FOLDER [--split=test] [--dim=K | --dims=K1,K2]
      [--output_file=results.json] [--run_file=run.trec [--run_depth=100]]

`--model_dir` is anything `pipelines.embed` reads: a `text_embedding` model directory, a sentence-transformers or HF
folder, an encoder export (SavedModel, OpenVINO, LiteRT). The queries and the whole corpus are embedded (the texts
longest first, so that each batch pads little; the vectors do not depend on the order) and every query ranks the
whole corpus by cosine, a block of queries at a time (`vector_retrieval_metrics`: the numbers of sentence-transformers'
InformationRetrievalEvaluator on the same vectors, without a [queries × corpus] matrix in memory). A document whose
id is the query's own is left out of that query's ranking unless judged relevant to it (`--ignore_identical_ids`, as
BEIR's evaluation does by default, for sets such as Quora where queries are documents too).

With `--rerank_model_dir` (a reranker: `--experiment=text_ranking`'s model directory, any one-output sentence-pair
classifier) the bi-encoder's top `--rerank_depth` documents of each query are reordered by the reranker
(`pipelines.rerank`) and the rest stay below them in the bi-encoder's order, the retrieve-then-rerank pipeline the
field reports; the metrics are then over that ranking, against the same qrels.

With `--run_file` the ranking scored is also written as a TREC run file (`official_albert.retrieval.run_files`): each
scored query's first `--run_depth` documents with their scores (cosines; a reranked head scored above them in the
reranker's order), equal scores in the order the metrics rank them (relevant documents last, the pessimistic order of
`official_albert.retrieval.metrics`; the reranker's head is cut from that order too). It is the candidate list a
reranker's training run validates on (`text_ranking` with a BEIR-format folder), and what trec_eval, ranx or a second
stage elsewhere read.

Prints one JSON object (and writes it atomically to `--output_file`): `recall@1/3/5/10`, `precision@…`,
`accuracy@…`, `mrr@10`, `ndcg@10`, `map@100`, the `queries` scored and the `corpus` size, with the `split`,
`dim` and `model_dir` (and `rerank_model_dir`, `rerank_depth`; with `--dims`, `by_dim`: width → its metrics). The
folder's reading rules: tasks/embedding/beir.py.
"""

from __future__ import annotations

import json
from typing import Dict, Optional, Sequence

from absl import flags
import numpy as np

from official_albert import cli
from official_albert import file_io


def _embed_in_length_order(model_dir: str, texts: Sequence[str], **options) -> np.ndarray:
  """`embed(model_dir, texts)` with the texts batched longest first (little padding per batch), rows in text order."""
  from official_albert.serving.embedding import embed  # noqa: PLC0415 (binary: TF after launch)
  order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))  # (stable: equal lengths keep their order)
  vectors = embed(model_dir, [texts[i] for i in order], **options)
  result = np.empty_like(vectors)
  result[order] = vectors
  return result


def evaluate(model_dir: str, data_dir: str, split: str = "test", dim: Optional[int] = None, force_dim: bool = False,
             batch_size: int = 32, seq_length: Optional[int] = None, query_prompt_name: Optional[str] = None,
             corpus_prompt_name: Optional[str] = None, ignore_identical_ids: bool = True,
             rerank_model_dir: Optional[str] = None, rerank_depth: int = 100,
             dims: Sequence[int] = (), run_file: Optional[str] = None, run_depth: int = 100) -> Dict[str, object]:
  """The metrics of the module docstring for `model_dir` on `data_dir`'s `split`; with `dims`, also `by_dim`: the
  metrics of each Matryoshka width (the vectors embedded once, each width's prefix re-normalised, as `embed(...,
  dim=K)` gives it; `force_dim` as there); with `run_file`, the ranking scored (reranked where a reranker is
  given) is written there, each query's first `run_depth` documents (`official_albert.retrieval.run_files`)."""
  from official_albert.retrieval.matryoshka import check_dim  # noqa: PLC0415
  from official_albert.retrieval.matryoshka import truncate  # noqa: PLC0415
  from official_albert.retrieval.metrics import vector_retrieval_metrics  # noqa: PLC0415
  from tasks.embedding.beir import read_beir  # noqa: PLC0415
  if dims and dim is not None:
    raise ValueError(f"--dim={dim} and --dims={list(dims)}: pass one (--dims scores every width of one embedding).")
  if run_file and run_depth < 1:
    raise ValueError(f"--run_depth={run_depth}: write at least each query's first document.")
  data = read_beir(data_dir, split)
  query_ids = data.scored_query_ids()
  corpus_ids = list(data.corpus)
  options = dict(batch_size=batch_size, seq_length=seq_length, dim=dim, force=force_dim)
  queries = _embed_in_length_order(model_dir, [data.queries[q] for q in query_ids], prompt_name=query_prompt_name,
                                   **options)
  corpus = _embed_in_length_order(model_dir, [data.corpus[c] for c in corpus_ids], prompt_name=corpus_prompt_name,
                                  **options)
  ignore = data.identical_ids(query_ids) if ignore_identical_ids else None

  def scored(q_vectors: np.ndarray, c_vectors: np.ndarray, run: Optional[Dict] = None) -> Dict[str, float]:
    if rerank_model_dir:
      return _reranked_metrics(rerank_model_dir, rerank_depth, data, q_vectors, c_vectors, query_ids, corpus_ids,
                               ignore or {}, batch_size, run, run_depth)
    return vector_retrieval_metrics(
        q_vectors, c_vectors, query_ids, corpus_ids, data.qrels, ignore=ignore or None,
        rescore=None if run is None else _recording(None, run, run_depth,
                                                    _first_stage(data, query_ids, corpus_ids, ignore or {}),
                                                    query_ids, corpus_ids))

  run: Optional[Dict[str, list]] = {} if run_file else None
  metrics = scored(queries, corpus, run)
  if run_file:
    _write_run(run_file, run, query_ids)
  results: Dict[str, object] = {k: float(v) for k, v in metrics.items() if k != "queries"}
  results.update(queries=int(metrics["queries"]), corpus=len(corpus_ids), split=split, dim=int(corpus.shape[1]),
                 model_dir=model_dir, data_dir=data_dir)
  if rerank_model_dir:
    results.update(rerank_model_dir=rerank_model_dir, rerank_depth=rerank_depth)
  if run_file:
    results.update(run_file=run_file, run_depth=run_depth)
  if dims:
    width = int(corpus.shape[1])
    widths = [check_dim(model_dir, k, width, force_dim, "--dims") for k in dims]
    by_dim = {k: scored(truncate(queries, k), truncate(corpus, k)) for k in widths}
    results["by_dim"] = {str(k): {name: float(v) for name, v in m.items() if name != "queries"}
                         for k, m in by_dim.items()}
  return results


def _reranked_metrics(rerank_model_dir: str, depth: int, data, queries: np.ndarray, corpus: np.ndarray,
                      query_ids: Sequence[str], corpus_ids: Sequence[str], ignore: Dict[str, set],
                      batch_size: int, run: Optional[Dict] = None, run_depth: int = 100) -> Dict[str, float]:
  """`vector_retrieval_metrics` of the bi-encoder's ranking with each query's top `depth` reordered by the reranker:
  the reranked head gets scores above every cosine, in the reranker's order, so the rest keeps the bi-encoder's order
  below it (`rescore`; the cosines still a block of queries at a time)."""
  from official_albert.retrieval.metrics import vector_retrieval_metrics  # noqa: PLC0415
  from official_albert.serving.pipeline_inputs import default_seq_length  # noqa: PLC0415
  from official_albert.serving.rerank import load_reranker  # noqa: PLC0415
  from official_albert.serving.rerank import rerank  # noqa: PLC0415
  if depth < 1:
    raise ValueError(f"--rerank_depth={depth}: rerank at least the first document of each ranking.")
  model, tokenizer, _ = load_reranker(rerank_model_dir)  # once (rerank(model_dir, ...) would load it per query)
  seq_length = default_seq_length(model, rerank_model_dir)
  first = _first_stage(data, query_ids, corpus_ids, ignore)

  def reranked(i: int, cosines: np.ndarray) -> np.ndarray:
    q = query_ids[i]
    head = first(i, cosines, depth)  # (an ignored document takes no place in the head)
    order = rerank(model, data.queries[q], [data.corpus[corpus_ids[j]] for j in head], tokenizer=tokenizer,
                   seq_length=seq_length, batch_size=batch_size)
    scores = cosines.copy()
    for r, answer in enumerate(order):
      scores[head[answer["index"]]] = 2.0 + len(order) - r  # (above every cosine, in the reranker's order)
    return scores

  return vector_retrieval_metrics(queries, corpus, query_ids, corpus_ids, data.qrels, ignore=ignore or None,
                                  rescore=reranked if run is None else _recording(reranked, run, run_depth, first,
                                                                                  query_ids, corpus_ids))


def _first_stage(data, query_ids: Sequence[str], corpus_ids: Sequence[str], ignore: Dict[str, set]):
  """`first(i, scores, k)`: query i's first `k` corpus columns by `scores`, ranked as the metrics rank them (equal
  scores: relevant documents last, then corpus order; `official_albert.retrieval.metrics`), its ignored documents
  left out. Only the columns scoring at least the k-th best are sorted (a corpus of millions is not)."""
  column = {c: j for j, c in enumerate(corpus_ids)}

  def first(i: int, scores: np.ndarray, k: int) -> np.ndarray:
    q = query_ids[i]
    ranked = np.array(scores, np.float64)
    left_out = [column[d] for d in ignore.get(q, ())]
    ranked[left_out] = -np.inf
    k = min(k, len(ranked) - len(left_out))
    if k < 1:
      return np.zeros([0], np.int64)
    candidates = np.flatnonzero(ranked >= np.partition(ranked, len(ranked) - k)[len(ranked) - k])
    relevant = np.array([corpus_ids[j] in data.qrels.get(q, {}) and data.qrels[q][corpus_ids[j]] > 0
                         for j in candidates])
    return candidates[np.lexsort((candidates, relevant, -ranked[candidates]))][:k]

  return first


def _recording(rescore, run: Dict[str, list], depth: int, first, query_ids: Sequence[str],
               corpus_ids: Sequence[str]):
  """A `rescore` for `vector_retrieval_metrics` that scores as `rescore` does (None: the cosines) and keeps each
  query's first `depth` (document id, score) in `run`, in the order the metrics rank them (`first`)."""

  def call(i: int, cosines: np.ndarray) -> np.ndarray:
    scores = cosines if rescore is None else rescore(i, cosines)
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
                      "reads).", flag_values=fv)
  flags.DEFINE_string("data_dir", None, "A BEIR-format folder: corpus.jsonl, queries.jsonl, qrels/<split>.tsv.",
                      flag_values=fv)
  flags.DEFINE_string("split", "test", "The qrels file to score: qrels/<split>.tsv.", flag_values=fv)
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
  flags.mark_flags_as_required(["model_dir", "data_dir"], flag_values=fv)


def main(argv, fv: flags.FlagValues = flags.FLAGS):
  del argv
  try:
    dims = [int(k) for k in fv.dims]
  except ValueError:
    raise ValueError(f"--dims={','.join(fv.dims)}: give widths as whole numbers, e.g. --dims=384,192.") from None
  results = evaluate(fv.model_dir, fv.data_dir, fv.split, fv.dim, fv.force_dim, fv.batch_size, fv.seq_length,
                     fv.query_prompt_name, fv.corpus_prompt_name, fv.ignore_identical_ids, fv.rerank_model_dir,
                     fv.rerank_depth, dims, fv.run_file, fv.run_depth)
  if fv.output_file:
    file_io.atomic_write_json(fv.output_file, results)
  print(json.dumps(results, sort_keys=True))


def console_main() -> None:
  """The `albert-retrieval-evaluate` console script (pyproject.toml)."""
  cli.launch(define_flags, main)


if __name__ == "__main__":
  console_main()
