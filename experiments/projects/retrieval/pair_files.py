"""The files of the retrieval study's data stage: the embedder's pairs, the reranker's groups, the held-out queries.

Written once by `study.stage_data`, read by the fine-tuning runs (through `--experiment=text_embedding` and
`text_ranking`) and by the evaluation (`read_heldout`).
"""

from __future__ import annotations

import csv
import io
import json
import os
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from experiments.projects.retrieval import pairs as pairs_lib
from experiments.projects.retrieval import rankers
from official_albert import file_io


def write_pair_files(output_dir: str, built: Dict[str, List[pairs_lib.Pair]], negatives: int, hard_negatives: int,
                     seed: int) -> Dict[str, str]:
  """pairs/train.csv (anchor, positive, negative), pairs/heldout.jsonl, pairs/rerank_train.jsonl; their paths.

  train.csv's negative is BM25's best passage for the query other than its own (a hard negative: it shares the
  query's words). A reranker group takes BM25's best `hard_negatives` and random passages for the rest: with BM25's
  three best alone the first measured run's reranker stayed near chance (listwise loss 1.17 against ln 4 = 1.39
  after 600 steps; nDCG@10 over the bi-encoder's top 20 fell from 0.17 to 0.07).
  """
  train = built["train"]
  passages = [p for _, p in train]
  ranked = rankers.bm25_rankings(passages, [q for q, _ in train], max(hard_negatives, 1) + 1)
  hard = [[j for j in row if j != i] for i, row in enumerate(ranked)]
  groups = choose_negatives(ranked, negatives, hard_negatives, len(passages), seed)
  out = io.StringIO()
  writer = csv.writer(out, lineterminator="\n")
  writer.writerow(["anchor", "positive", "negative"])
  for (query, passage), negs in zip(train, hard):
    writer.writerow([query, passage, passages[negs[0]]])
  paths = {"train_pairs_file": os.path.join(output_dir, "pairs", "train.csv"),
           "heldout_pairs_file": os.path.join(output_dir, "pairs", "heldout.jsonl"),
           "rerank_train_file": os.path.join(output_dir, "pairs", "rerank_train.jsonl")}
  file_io.atomic_write_text(paths["train_pairs_file"], out.getvalue())
  file_io.atomic_write_text(paths["heldout_pairs_file"], "".join(
      json.dumps({"query": q, "passage": p}) + "\n" for q, p in built["heldout"]))
  write_groups(paths["rerank_train_file"], train, groups)
  return paths


def choose_negatives(ranked: Sequence[Sequence[int]], negatives: int, hard_negatives: int, num_passages: int,
                     seed: int, sample_from: int = 0, own: Optional[Sequence[int]] = None) -> List[List[int]]:
  """Each training query's `negatives` passage indices: `hard_negatives` of its ranking's wrong passages, random
  passages for the rest (query i's own passage is passage `own[i]`, by default i, never a negative).

  `sample_from=0` takes the ranking's best wrong passages; `sample_from=k` draws them at random among its best k
  wrong ones (a reranker meets all of a first stage's top k, not only its best wrong one).
  """
  rng = np.random.default_rng(seed)
  groups = []
  for i, row in zip(own if own is not None else range(len(ranked)), ranked):
    wrong = [int(j) for j in row if j != i]
    if sample_from:
      pool = wrong[:sample_from]
      group = [pool[k] for k in rng.permutation(len(pool))[:hard_negatives]]
    else:
      group = wrong[:hard_negatives]
    while len(group) < negatives:
      j = int(rng.integers(num_passages))
      if j != i and j not in group:
        group.append(j)
    groups.append(group)
  return groups


def write_groups(path: str, train: Sequence[pairs_lib.Pair], groups: Sequence[Sequence[int]],
                 rows: Sequence[pairs_lib.Pair] = ()) -> None:
  """A `text_ranking` JSONL file: each training pair's query, passage and the training passages `groups` names;
  then each of `rows` (query, positive: the Inverse Cloze rows) with the groups that follow."""
  passages = [p for _, p in train]
  file_io.atomic_write_text(path, "".join(
      json.dumps({"query": q, "positive": p, "negatives": [passages[j] for j in negs]}) + "\n"
      for (q, p), negs in zip(list(train) + list(rows), groups)))


def read_train(data: Dict[str, Any]) -> List[pairs_lib.Pair]:
  """The training pairs (query, passage) of pairs/train.csv, in its order (passage i is query i's)."""
  with open(data["train_pairs_file"], newline="", encoding="utf-8") as f:
    return [(row["anchor"], row["positive"]) for row in csv.DictReader(f)]


def read_heldout(data: Dict[str, Any]) -> Tuple[List[str], List[str]]:
  """(queries, corpus): the held-out queries, and the held-out passages followed by every training passage (the
  distractors: a search index holds the documents a model was trained on too). Query i's one relevant passage is
  corpus[i]."""
  with open(data["heldout_pairs_file"], encoding="utf-8") as f:
    rows = [json.loads(line) for line in f if line.strip()]
  train = [p for _, p in read_train(data)]
  return [r["query"] for r in rows], [r["passage"] for r in rows] + train
