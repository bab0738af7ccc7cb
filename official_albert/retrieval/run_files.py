"""Run files: each query's ranked documents in TREC's format, the form rankings travel in between retrieval tools.

One line per (query, document): `query_id Q0 doc_id rank score run_name`, whitespace-separated (trec_eval,
pytrec_eval, ranx, Pyserini and BEIR's result files read and write it). A first stage writes its top k per query
(`tasks.retrieval_evaluate --run_file`) and a reranker's evaluation reorders them (`text_ranking` validated on a
BEIR-format folder), so the two stages can run apart and the candidates stay the same from one evaluation to the next.

A query's documents are ranked by score, highest first, and equal scores by the rank column, then the line order
(trec_eval sorts by score alone and breaks ties by document id, an order that carries no information), so a run
reads the same whatever the order of its lines. Reading is strict, as the row tasks read users' files: a line
without six fields, a rank that is not a whole number or a score that is not a finite number, and a (query,
document) pair given twice are errors naming file:line and the fix. A name ending in `.gz` is gzip-compressed
(`file_io.open_bytes`), as BEIR folders and row files may be.
"""

from __future__ import annotations

import gzip
import logging
import math
from typing import Dict, List, Mapping, Sequence, Tuple

from official_albert import file_io

logger = logging.getLogger(__name__)

Ranking = List[Tuple[str, float]]


class RunFileError(ValueError):
  """A run file that cannot be read as one (the message names file:line and the fix)."""


def read_run(path: str) -> Dict[str, Ranking]:
  """query id → [(document id, score)] best first (the module docstring), queries in the order they first appear.

  Raises:
    RunFileError: a malformed line, a pair given twice, an unreadable gzip file, or no line at all.
  """
  found: Dict[str, Dict[str, Tuple[float, int, int]]] = {}
  line_number = 0
  try:
    with file_io.open_bytes(path) as f:
      for line_number, raw in enumerate(f, 1):
        _add(found, path, line_number, raw)
  except file_io.GZIP_ERRORS as error:
    raise RunFileError(file_io.gzip_error(path, error, line_number)) from error
  if not found:
    raise RunFileError(f"{path}: no ranking in the file (a run file holds lines `query_id Q0 doc_id rank score "
                       "run_name`); write the first stage's run again.")
  rankings = {q: [(d, score) for d, (score, _, _) in sorted(documents.items(), key=lambda item: (-item[1][0],
                                                                                                  item[1][1],
                                                                                                  item[1][2]))]
              for q, documents in found.items()}
  contradicted = [q for q, documents in found.items()
                  if [d for d, _ in rankings[q]] != sorted(documents, key=lambda d: documents[d][1:])]
  if contradicted:  # (read by score all the same: trec_eval does, and the rank column is often written carelessly)
    logger.warning("%s: %d of %d queries (the first: %r) rank documents in an order their scores contradict (a "
                   "lower score at a better rank); they are read by score, highest first, as trec_eval reads a run. "
                   "If the scores are distances (lower = closer), write their negatives.", path, len(contradicted),
                   len(found), contradicted[0])
  return rankings


def _add(found: Dict[str, Dict[str, Tuple[float, int, int]]], path: str, line_number: int, raw: bytes) -> None:
  try:  # (a byte-order mark at the top joined the first query id: that line, the best candidate, was lost)
    fields = raw.decode("utf-8-sig" if line_number == 1 else "utf-8").split()
  except UnicodeDecodeError as error:
    raise RunFileError(f"{path}:{line_number}: not UTF-8 ({error}); save the run file as UTF-8.") from error
  if not fields:
    return
  where = f"{path}:{line_number}"
  if len(fields) != 6:
    raise RunFileError(f"{where}: {len(fields)} field(s) in {raw.decode('utf-8').strip()!r:.120}; a run file's line "
                       "is `query_id Q0 doc_id rank score run_name` (six fields, ids without spaces).")
  query, _, document, rank, score = fields[:5]
  try:
    rank_value, score_value = int(rank), float(score)
  except ValueError:
    raise RunFileError(f"{where}: rank {rank!r} and score {score!r} must be a whole number and a number (`query_id "
                       "Q0 doc_id rank score run_name`).") from None
  if not math.isfinite(score_value):
    raise RunFileError(f"{where}: score {score!r} is not a finite number; a ranking needs comparable scores.")
  documents = found.setdefault(query, {})
  if document in documents:
    raise RunFileError(f"{where}: query {query!r} lists document {document!r} again (line {documents[document][2]}); "
                       "a run ranks each document once per query: remove the repeated line.")
  documents[document] = (score_value, rank_value, line_number)


def write_run(path: str, rankings: Mapping[str, Sequence[Tuple[str, float]]],
              run_name: str = "official_albert") -> None:
  """Writes `rankings` (query id → [(document id, score)] best first) as a run file, atomically (gzip-compressed
  where `path` ends in `.gz`); each query's scores must not increase down its list, so that the file reads back in
  the same order (`read_run`).

  Raises:
    ValueError: an id or the run name holds whitespace (the format has no quoting), or a list's scores increase.
  """
  lines = []
  for query, ranking in rankings.items():
    previous = math.inf
    for rank, (document, score) in enumerate(ranking, 1):
      for name, value in (("query id", query), ("document id", document), ("run name", run_name)):
        if not value or any(c.isspace() for c in value):
          raise ValueError(f"{name} {value!r} (query {query!r}): a run file's fields are separated by whitespace, "
                           "so an id must be non-empty and hold none; rename it in the retrieval set.")
      if not score <= previous:
        raise ValueError(f"query {query!r}: document {document!r} at rank {rank} scores {score!r}, above the one "
                         f"before it ({previous!r}); a run lists each query's documents best first.")
      previous = score
      lines.append(f"{query} Q0 {document} {rank} {float(score)!r} {run_name}\n")
  data = "".join(lines).encode("utf-8")
  file_io.atomic_write_bytes(path, gzip.compress(data, mtime=0) if path.endswith(".gz") else data)


# Reciprocal rank fusion's constant (Cormack, Clarke and Buettcher 2009): a document's fused score is the sum over the
# runs of 1 / (RRF_K + its rank there), so no run's first places dominate and no weight needs tuning.
RRF_K = 60


def fuse(runs: Sequence[Mapping[str, Ranking]], k: int = RRF_K) -> Dict[str, Ranking]:
  """Reciprocal rank fusion of `runs` (each query id → [(document id, score)] best first): each query of any run,
  its documents ranked by Σ over the runs listing them of 1 / (k + rank), equal sums by their best rank in any run,
  then their id; the fused score is that sum. A hybrid first stage (BM25's run and an embedder's, fused) finds what
  either finds.

  Raises:
    ValueError: no run, or k < 1.
  """
  if not runs or k < 1:
    raise ValueError(f"fuse: {len(runs)} run(s) with k={k}; give at least one run and k >= 1 (60, the usual).")
  fused: Dict[str, Dict[str, List[float]]] = {}
  for run in runs:
    for query, ranking in run.items():
      documents = fused.setdefault(query, {})
      for rank, (document, _) in enumerate(ranking, 1):
        total, best = documents.get(document, [0.0, math.inf])
        documents[document] = [total + 1.0 / (k + rank), min(best, rank)]
  return {q: [(d, total) for d, (total, _) in sorted(documents.items(), key=lambda item: (-item[1][0], item[1][1],
                                                                                          item[0]))]
          for q, documents in fused.items()}
