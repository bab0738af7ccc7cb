"""`text_embedding` evaluated on a BEIR-format folder: `task.validation_data.input_path` names the folder.

The validation pairs rank their own positives; a benchmark ranks a whole corpus with its distractors. With a folder
(`tasks.embedding.beir`: corpus.jsonl, queries.jsonl, qrels/<task.validation_split>.tsv) evaluation embeds the
queries BEIR scores (those with a judgment of grade > 0) and every document, each text one record of the anchor side
(queries first, then the corpus, in file order: `example_index` names them), through the ordinary evaluation loop,
so sharding over replicas and workers and the record cache work as for pairs. The metrics are those
`tasks.retrieval_evaluate` computes on the same folder (`vector_retrieval_metrics`, BEIR's ignore_identical_ids),
so the number a checkpoint is chosen on is the benchmark's number.

A retrieval set is scored on its whole corpus or not at all: a corpus cut by trainer.validation_steps would score
against whichever documents came first, so trainer.validation_steps other than -1 is refused at start-up
(`cut_corpus_error`), and records that do not cover the set at evaluation.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Dict, List

import numpy as np

from official_albert.retrieval.metrics import vector_retrieval_metrics
from official_albert.training.experiment_config import ConfigError
from tasks.embedding import beir
from tasks.embedding.data import PairExample


@dataclasses.dataclass
class BeirEvaluation:
  """One split of a folder and the order its texts are evaluated in (`read`)."""
  data: beir.RetrievalSet
  query_ids: List[str]
  corpus_ids: List[str]

  @classmethod
  def read(cls, folder: str, split: str) -> "BeirEvaluation":
    data = beir.read_beir(folder, split)
    return cls(data, data.scored_query_ids(), list(data.corpus))

  def examples(self) -> List[PairExample]:
    """The texts to embed as one-sided rows: the scored queries, then every document (`example_index` order)."""
    corpus_file, queries_file, _ = self.data.files()
    return ([PairExample(queries_file, 0, self.data.queries[q], None) for q in self.query_ids] +
            [PairExample(corpus_file, 0, self.data.corpus[c], None) for c in self.corpus_ids])

  def results(self, vectors: np.ndarray, index: np.ndarray, batch_size: int, reported,
              convention: str = "sentence_transformers") -> Dict[str, float]:
    """The `reported` metrics, `queries` and `corpus` of the evaluated texts' `vectors` (row i: `example_index`
    index[i]), under the metrics `convention` (task.metric_convention); an evaluation that did not reach every text
    is refused (the module docstring)."""
    texts = len(self.query_ids) + len(self.corpus_ids)
    check_covered(index, texts, "text_embedding", f"{texts} texts of {self.data.folder} ({self.data.split}: "
                  f"{len(self.query_ids)} queries, {len(self.corpus_ids)} documents)",
                  "a retrieval set is scored on its whole corpus", batch_size)
    vectors = vectors[np.argsort(index, kind="stable")]
    queries, corpus = vectors[:len(self.query_ids)], vectors[len(self.query_ids):]
    metrics = vector_retrieval_metrics(queries, corpus, self.query_ids, self.corpus_ids, self.data.qrels,
                                       ignore=self.data.identical_ids(self.query_ids) or None, convention=convention)
    out = {k: float(metrics[k]) for k in reported}
    out.update(queries=len(self.query_ids), corpus=len(self.corpus_ids))
    return out


def check_covered(index: np.ndarray, expected: int, task: str, what: str, scored_on: str, batch_size: int) -> None:
  """Refuses an evaluation whose records' `example_index`es are not each of the `expected` once (`what` names
  them): cut short by trainer.validation_steps (the fix: -1, or enough batches), or stale (a cache of other inputs:
  delete task.records_dir). `scored_on` says why the whole set is needed."""
  if len(index) == expected and len(np.unique(index)) == expected:
    return
  if len(index) < expected and len(np.unique(index)) == len(index) and index.max(initial=-1) < expected:
    raise ValueError(f"{task} eval: evaluated {len(index)} of the {what}; {scored_on}. Set "
                     f"trainer.validation_steps=-1 (or at least {math.ceil(expected / max(batch_size, 1))} batches "
                     f"of {batch_size}).")
  raise ValueError(f"{task} eval: {len(index)} evaluated records for the {what}; the records are stale — delete "
                   "task.records_dir.")


def cut_corpus_error(folder: str, validation_steps: int) -> ConfigError:
  """The start-up error of a folder evaluated with trainer.validation_steps != -1 (the module docstring)."""
  return ConfigError(f"task.validation_data.input_path={folder} is a BEIR-format folder, and a retrieval set is "
                     f"scored on its whole corpus: trainer.validation_steps={validation_steps} would stop evaluation "
                     "after that many batches and rank the queries against whichever documents came first. Set "
                     "trainer.validation_steps=-1.")
