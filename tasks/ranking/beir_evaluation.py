"""`text_ranking` evaluated on a BEIR-format folder: a first stage's candidates reranked, scored as the benchmark is.

A reranker is judged by what it does to a first stage's ranking, not by groups of one positive and a few negatives:
with `task.validation_data.input_path` naming a BEIR-format folder (`tasks.embedding.beir`) and
`task.validation_candidates` a run file of that split (`official_albert.retrieval.run_files`: each query's candidates,
e.g. a bi-encoder's top 100 that `tasks.retrieval_evaluate --run_file` writes), evaluation scores each scored query's
first `task.rerank_depth` candidates with the reranker, each (query, document) pair one record (`example_index`
names it: the queries in the queries file's order, each query's candidates in the run's order), through the
ordinary evaluation loop (replicas, workers, the record cache). The ranking scored is the reranked head followed by
the rest of the run in its order; a document the run does not list is not retrieved. The metrics are
`ranking_metrics` over it, which equal `tasks.retrieval_evaluate --rerank_model_dir --rerank_depth` on the run's
first stage wherever the run holds each query's first 100 documents (the deepest cut-off) or the whole corpus.

As there, a document whose id is the query's own is left out of its candidates unless judged relevant to it (BEIR's
ignore_identical_ids), and equal reranker scores keep the run's order. A scored query the run does not rank, and a
candidate the corpus lacks, are errors naming the run file and the fix (a run of another split or corpus); queries
the run ranks that the split does not score are left out. The whole set is scored or nothing: see
`cut_candidates_error`.
"""

from __future__ import annotations

import dataclasses
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from official_albert.retrieval.metrics import ranking_metrics
from official_albert.retrieval.run_files import read_run
from official_albert.training.experiment_config import ConfigError
from tasks.embedding import beir
from tasks.embedding.beir_evaluation import check_covered
from tasks.ranking.data import RankingExample


@dataclasses.dataclass
class RerankEvaluation:
  """One split of a folder, the run's candidates of its scored queries, and the pairs the reranker scores."""
  data: beir.RetrievalSet
  run_file: str
  heads: Dict[str, List[str]]  # query → the candidates the reranker reorders (the run's first `depth`)
  tails: Dict[str, List[str]]  # query → the rest of the run's candidates, kept in the run's order

  @classmethod
  def read(cls, folder: str, split: str, run_file: str, depth: int,
           ignore_identical_ids: bool = True) -> "RerankEvaluation":
    return cls.of(beir.read_beir(folder, split), run_file, depth, ignore_identical_ids)

  @classmethod
  def of(cls, data: beir.RetrievalSet, run_file: str, depth: int, ignore_identical_ids: bool = True,
         predict: bool = False, run: Optional[Dict[str, List[Tuple[str, float]]]] = None) -> "RerankEvaluation":
    """`read` of a split already read; with `predict`, of every query the run ranks (`data` without judgments:
    `beir.read_texts`), each an error where the queries file lacks it. `run`: the rankings, where they are not
    `run_file`'s own (several runs fused; `run_file` then names them in messages)."""
    run = read_run(run_file) if run is None else run
    query_ids = data.scored_query_ids()
    if predict:
      query_ids = list(run)
      unknown = [q for q in query_ids if q not in data.queries]
      if unknown:
        raise ValueError(f"{run_file} ranks {len(unknown)} query id(s) that {data.folder}'s queries file lacks (e.g. "
                         f"{unknown[:3]}): the run was written for another set; write it again on this folder.")
    candidates = data.run_candidates(run, run_file, query_ids, ignore_identical_ids=ignore_identical_ids)
    heads = {q: ranking[:depth] for q, ranking in candidates.items()}
    tails = {q: ranking[depth:] for q, ranking in candidates.items()}
    return cls(data, run_file, heads, tails)

  def examples(self) -> List[RankingExample]:
    """The (query, candidate) pairs to score, one group of one each, in `example_index` order."""
    _, queries_file, _ = self.data.files()
    return [RankingExample(queries_file, 0, self.data.queries[q], self.data.corpus[d], [])
            for q, head in self.heads.items() for d in head]

  def pairs(self) -> int:
    return sum(len(head) for head in self.heads.values())

  def rankings(self, scores: np.ndarray) -> Dict[str, List[str]]:
    """Each query's ranking: its head by the pairs' `scores` (in `example_index` order; equal scores keep the run's
    order), then its tail."""
    out, start = {}, 0
    for q, head in self.heads.items():
      order = np.argsort(-scores[start:start + len(head)], kind="stable")
      out[q] = [head[i] for i in order] + self.tails[q]
      start += len(head)
    return out

  def results(self, scores: np.ndarray, index: np.ndarray, batch_size: int, reported: Sequence[str],
              convention: str = "sentence_transformers") -> Dict[str, float]:
    """The `reported` metrics and `queries` of the pairs' reranker `scores` (row i: `example_index` index[i]), under
    the metrics `convention` (task.metric_convention); an evaluation that did not score every pair is refused
    (`cut_candidates_error`'s reason)."""
    pairs = self.pairs()
    check_covered(index, pairs, "text_ranking", f"{pairs} (query, candidate) pairs of {self.data.folder} "
                  f"({self.data.split}) with {self.run_file}", "a reranking is scored on every query's candidates",
                  batch_size)
    metrics = ranking_metrics(self.rankings(np.asarray(scores)[np.argsort(index, kind="stable")]), self.data.qrels,
                              convention=convention)
    out = {k: float(metrics[k]) for k in reported}
    out["queries"] = int(metrics["queries"])
    return out


def reranked_run(evaluation: RerankEvaluation, logits: np.ndarray) -> Dict[str, List[Tuple[str, float]]]:
  """Each query's head in the reranker's order (`logits`: the pairs', in `example_index` order; equal logits keep
  the run's order) scored by its logit: a run file's rankings.

  The logit, not `pipelines.rerank`'s sigmoid(logit): a listwise reranker's logits have no fixed level, and the
  sigmoid of logits above ~37 is 1.0 even in float64 (above ~17 in float32), so the file's scores tied where the
  reranker did not, and trec_eval, pytrec_eval and ranx, which order a run by its scores alone, put those documents
  in document-id order. sigmoid(score) is `pipelines.rerank`'s score."""
  out, start = {}, 0
  for q, head in evaluation.heads.items():
    part = np.asarray(logits[start:start + len(head)], np.float64)
    order = np.argsort(-part, kind="stable")
    out[q] = [(head[i], float(part[i])) for i in order]
    start += len(head)
  return out


def cut_candidates_error(folder: str, validation_steps: int) -> ConfigError:
  """The start-up error of a folder evaluated with trainer.validation_steps != -1."""
  return ConfigError(f"task.validation_data.input_path={folder} is a BEIR-format folder, whose queries are scored "
                     f"together: trainer.validation_steps={validation_steps} would stop evaluation after that many "
                     "batches and score only the queries whose candidates came first. Set "
                     "trainer.validation_steps=-1.")


def missing_candidates_error(folder: str, split: str) -> ConfigError:
  """The start-up error of a folder given without task.validation_candidates."""
  return ConfigError(f"task.validation_data.input_path={folder} is a BEIR-format folder: a reranker is evaluated on "
                     "a first stage's candidates, which task.validation_candidates names (a TREC run file of the "
                     f"{split!r} split). Write one with `python -m tasks.retrieval_evaluate --model_dir=EMBEDDER "
                     f"--data_dir={folder} --split={split} --run_file=candidates.trec` and set "
                     "task.validation_candidates=candidates.trec.")


def missing_predict_candidates_error(folder: str) -> ConfigError:
  """The error of `--mode=predict` on a folder without task.predict_candidates (or on group files)."""
  return ConfigError(f"text_ranking --mode=predict reranks a first stage's run of a BEIR-format folder: set "
                     f"task.predict_data.input_path to the folder (got {folder!r}) and task.predict_candidates to the "
                     "run file (TREC format; `python -m tasks.retrieval_evaluate --model_dir=EMBEDDER "
                     f"--data_dir={folder} --rank_only --run_file=candidates.trec` writes one).")
