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
from typing import Dict, List, Sequence

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
  def read(cls, folder: str, split: str, run_file: str, depth: int) -> "RerankEvaluation":
    data = beir.read_beir(folder, split)
    candidates = data.run_candidates(read_run(run_file), run_file, data.scored_query_ids())
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

  def results(self, scores: np.ndarray, index: np.ndarray, batch_size: int, reported: Sequence[str]
              ) -> Dict[str, float]:
    """The `reported` metrics and `queries` of the pairs' reranker `scores` (row i: `example_index` index[i]); an
    evaluation that did not score every pair is refused (`cut_candidates_error`'s reason)."""
    pairs = self.pairs()
    check_covered(index, pairs, "text_ranking", f"{pairs} (query, candidate) pairs of {self.data.folder} "
                  f"({self.data.split}) with {self.run_file}", "a reranking is scored on every query's candidates",
                  batch_size)
    metrics = ranking_metrics(self.rankings(np.asarray(scores)[np.argsort(index, kind="stable")]), self.data.qrels)
    out = {k: float(metrics[k]) for k in reported}
    out["queries"] = int(metrics["queries"])
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
