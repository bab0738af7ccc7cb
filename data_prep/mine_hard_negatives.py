r"""Hard negatives mined from a first stage's ranking: training rows for a reranker or an embedder.

  python -m data_prep.mine_hard_negatives --data_dir=BEIR_FOLDER --split=train --run_file=train.trec \
      --output_file=groups.jsonl [--num_negatives=7] [--skip_top=0] [--depth=100] [--output_format=groups|triplets]

A reranker learns most from the documents a first stage ranks high that are not relevant (sentence-transformers'
`mine_hard_negatives`, the negatives of MS MARCO's and BGE's training sets). `--data_dir` is a BEIR-format folder
(`tasks.embedding.beir`) whose `--split` judges the training queries; `--run_file` a first stage's ranking of them in
TREC's format (`tasks.retrieval_evaluate --run_file` writes an embedder's; BM25's from another tool works alike). Each
judged (query, relevant document) pair becomes one row whose negatives are the query's candidates at run positions
`--skip_top` to `--depth` (best first; places in the run once the query's own id is left out, relevant documents
included) that the split does not judge relevant to it (grade > 0) and that are not the query itself (BEIR's
ignore_identical_ids); a document judged with grade 0 ("judged, not relevant") is a negative like any other. A
candidate whose text is a relevant document's (a duplicate passage under another id: Quora, CQADupStack, MS MARCO)
or an earlier negative's is passed over and counted, compared with case, accents, Unicode form and spaces folded
(sentence-transformers de-duplicates the corpus by text alike): `text_ranking` would drop it (a candidate labelled
both relevant and not) and refuse the row short of negatives. The first `--num_negatives` of them are kept;
`--skip_top` leaves out the very top, where unjudged relevant documents (false negatives) crowd on sets with sparse
judgments.

The run's scores can filter further, as sentence-transformers' options do (none is set by default): `--max_score` /
`--min_score` keep candidates scored at most / at least that; `--margin` keeps those scored at least that much below
the row's positive (`negative <= positive - margin`), `--relative_margin` those at most `(1 - relative_margin)` times
its score (NV-Retriever's TopK-PercPos, 0.05 there; for positive scores such as cosine similarities). With a margin
each (query, positive) row gets its own negatives, measured against that positive's score in the run; a positive the
run does not rank has no score to measure from, so its row is skipped and counted (`positives_without_score`: write a
deeper run). `--sampling=random` draws the negatives at random from all that pass (seeded by `--seed`, the query's and
the positive's ids, so the draw depends on neither line order nor the other queries) instead of taking the first.

`--output_format=groups` writes `text_ranking`'s rows, `{"query", "positive", "negatives": [...]}` (its default
columns); `triplets` writes one `{"anchor", "positive", "negative"}` row per negative, for `text_embedding` with
`task.negative_column=negative` (a (query, positive) pair then repeats once per negative, so one batch may hold it
twice, each copy an in-batch negative of the other: train with `task.mask_false_negatives=true`, or mine
`--num_negatives=1`). Both carry the ids (`query_id`, `positive_id`, `negative_ids` / `negative_id`), so
a row can be traced to the set. Rows are ordered by query id, then document id, so the output does not depend on the
order of the folder's or the run's lines. A document's text is BEIR's (`title + " " + text`). A query whose candidates
leave fewer than `--num_negatives` is skipped and counted (a row short of negatives is one `text_ranking` refuses),
as is a judgment of a document the corpus lacks (a query all of whose judged documents it lacks:
`queries_without_document`); a judged query the run does not rank, or a candidate the corpus
lacks, is an error naming the run (a run of another split or corpus). The output is written atomically
(gzip-compressed when its name ends in `.gz`), and a JSON summary is printed.
"""

from __future__ import annotations

import gzip
import json
import logging
import random
from typing import Dict, List, Optional, Set, Tuple
import unicodedata

from absl import flags

from official_albert import cli
from official_albert import file_io

logger = logging.getLogger(__name__)

FORMATS = ("groups", "triplets")
SAMPLINGS = ("top", "random")


def mine(data_dir: str, split: str, run_file: str, num_negatives: int = 7, skip_top: int = 0,
         depth: int = 100, output_format: str = "groups", max_score: Optional[float] = None,
         min_score: Optional[float] = None, margin: Optional[float] = None, relative_margin: Optional[float] = None,
         sampling: str = "top", seed: int = 0) -> Dict[str, object]:
  """{"rows": [...], "summary": {...}}: the rows of the module docstring and their counts.

  Raises:
    ValueError: a setting out of range, a judged query the run does not rank, or a candidate the corpus lacks.
  """
  from official_albert.retrieval.run_files import read_run  # noqa: PLC0415 (binary: imports after launch)
  from tasks.embedding.beir import read_beir  # noqa: PLC0415
  _check_settings(num_negatives, skip_top, depth, output_format, max_score, min_score, margin, relative_margin,
                  sampling)
  data, run = read_beir(data_dir, split), read_run(run_file)
  judged = sorted(data.scored_query_ids())
  candidates = data.run_candidates(run, run_file, judged, depth)
  rows: List[dict] = []
  short, absent, without_document, unscored = [], 0, 0, 0
  passed_over = {"equal_to_a_positive": 0, "repeated": 0, "outside_score_range": 0, "within_margin": 0}
  per_positive = margin is not None or relative_margin is not None
  filters = _Filters(min_score, max_score, margin, relative_margin, sampling, seed, num_negatives)
  for q in judged:
    relevant = {d for d, grade in data.qrels[q].items() if grade > 0}
    positives = sorted(d for d in relevant if d in data.corpus)
    absent += len(relevant) - len(positives)
    if not positives:  # (every judged document missing from the corpus: no row to write)
      without_document += 1
      continue
    scores = dict(run[q])
    ranked = [(d, scores[d]) for d in candidates[q][skip_top:depth]]
    query_rows, query_short = [], False
    for p in positives if per_positive else [None]:
      if p is not None and p not in scores:
        unscored += 1
        continue
      negatives = filters.negatives(data, q, p, scores.get(p), ranked, relevant, positives, passed_over)
      if len(negatives) < num_negatives:
        query_short = True
        continue
      for positive in [p] if per_positive else positives:
        query_rows.extend(_rows(data, q, positive, negatives, output_format))
    short += [q] if query_short else []
    rows.extend(query_rows)
  _log(short, len(judged), num_negatives, skip_top, depth, absent, unscored, passed_over)
  summary = {"rows": len(rows), "queries": len({r["query_id"] for r in rows}),
             "skipped_queries": len(short), "queries_without_document": without_document,
             "judgments_without_document": absent, "negatives_equal_to_a_positive": passed_over["equal_to_a_positive"],
             "repeated_negatives": passed_over["repeated"], "split": split, "output_format": output_format}
  if max_score is not None or min_score is not None:
    summary["candidates_outside_score_range"] = passed_over["outside_score_range"]
  if per_positive:
    summary.update(candidates_within_margin=passed_over["within_margin"], positives_without_score=unscored)
  return {"rows": rows, "summary": summary}


def _check_settings(num_negatives, skip_top, depth, output_format, max_score, min_score, margin, relative_margin,
                    sampling) -> None:
  if output_format not in FORMATS:
    raise ValueError(f"--output_format={output_format!r}: use one of {FORMATS}.")
  if sampling not in SAMPLINGS:
    raise ValueError(f"--sampling={sampling!r}: use one of {SAMPLINGS}.")
  if num_negatives < 1 or skip_top < 0 or depth - skip_top < num_negatives:
    raise ValueError(f"--num_negatives={num_negatives}, --skip_top={skip_top}, --depth={depth}: need "
                     "num_negatives >= 1 and 0 <= skip_top, with depth - skip_top >= num_negatives (negatives come "
                     "from run positions skip_top to depth: no query could give that many).")
  if max_score is not None and min_score is not None and min_score > max_score:
    raise ValueError(f"--min_score={min_score} is above --max_score={max_score}: no candidate could pass.")
  if margin is not None and margin < 0:
    raise ValueError(f"--margin={margin}: a margin below the positive's score is >= 0 (0 keeps candidates scored "
                     "at most the positive's).")
  if relative_margin is not None and not 0 <= relative_margin < 1:
    raise ValueError(f"--relative_margin={relative_margin}: a fraction of the positive's score in [0, 1) "
                     "(0.05 keeps candidates scored at most 95% of it).")


def _log(short, judged, num_negatives, skip_top, depth, absent, unscored, passed_over) -> None:
  if short:
    logger.warning("%d of %d judged queries skipped or left short of a row: fewer than --num_negatives=%d "
                   "candidates at run positions %d-%d are not relevant and pass the score filters (e.g. %s); lower "
                   "--num_negatives or --skip_top, loosen the filters, or write a deeper run.",
                   len(short), judged, num_negatives, skip_top, depth, short[:3])
  if absent:
    logger.warning("%d judgment(s) name documents the corpus lacks: no row for them.", absent)
  if unscored:
    logger.warning("%d relevant document(s) are not in the run: no score to measure a margin from, no row for them "
                   "(write a deeper run).", unscored)
  if passed_over["equal_to_a_positive"] or passed_over["repeated"]:
    logger.warning("passed over %d candidate(s) whose text is a relevant document's and %d that repeat an earlier "
                   "negative's text (duplicate passages under other ids).", passed_over["equal_to_a_positive"],
                   passed_over["repeated"])


class _Filters:
  """Which ranked candidates become a row's negatives: the score range, the margin below the positive, the text
  checks (`_text_key`), then the first `num_negatives` or a seeded draw of them."""

  def __init__(self, min_score, max_score, margin, relative_margin, sampling, seed, num_negatives):
    self.min_score, self.max_score = min_score, max_score
    self.margin, self.relative_margin = margin, relative_margin
    self.sampling, self.seed, self.num_negatives = sampling, seed, num_negatives

  def _ceiling(self, positive_score: Optional[float]) -> float:
    ceiling = float("inf") if self.max_score is None else self.max_score
    if self.margin is not None:
      ceiling = min(ceiling, positive_score - self.margin)
    if self.relative_margin is not None:
      ceiling = min(ceiling, positive_score * (1 - self.relative_margin))
    return ceiling

  def negatives(self, data, query: str, positive: Optional[str], positive_score: Optional[float],
                ranked: List[Tuple[str, float]], relevant: Set[str], positives: List[str],
                passed_over: Dict[str, int]) -> List[str]:
    """The row's negatives, best first (or in the draw's order); counts what it passes over in `passed_over`."""
    positive_texts = {_text_key(data.corpus[p]) for p in positives}
    ceiling, floor = self._ceiling(positive_score), -float("inf") if self.min_score is None else self.min_score
    take_all = self.sampling == "random"
    negatives: List[str] = []
    seen: Set[str] = set()
    for d, score in ranked:
      if len(negatives) == self.num_negatives and not take_all:
        break
      if d in relevant:
        continue
      if score < floor or (self.max_score is not None and score > self.max_score):
        passed_over["outside_score_range"] += 1
        continue
      if score > ceiling:
        passed_over["within_margin"] += 1
        continue
      key = _text_key(data.corpus[d])
      if key in positive_texts:
        passed_over["equal_to_a_positive"] += 1
      elif key in seen:
        passed_over["repeated"] += 1
      else:
        seen.add(key)
        negatives.append(d)
    if take_all and len(negatives) > self.num_negatives:
      drawn = random.Random(f"{self.seed}\t{query}\t{positive or ''}").sample(range(len(negatives)),
                                                                             self.num_negatives)
      negatives = [negatives[i] for i in drawn]
    return negatives


def _text_key(text: str) -> str:
  """A text with what any tokenizer setting may fold folded: Unicode form, case, accents, spaces (wider than
  `text_ranking`'s `comparison_text`, so that no negative kept here is one it would drop)."""
  decomposed = unicodedata.normalize("NFKD", text.casefold())
  return " ".join("".join(c for c in decomposed if not unicodedata.combining(c)).split())


def _rows(data, query: str, positive: str, negatives: List[str], output_format: str) -> List[dict]:
  texts = {"query": data.queries[query], "positive": data.corpus[positive]}
  if output_format == "groups":
    return [{**texts, "negatives": [data.corpus[n] for n in negatives], "query_id": query, "positive_id": positive,
             "negative_ids": negatives}]
  return [{"anchor": texts["query"], "positive": texts["positive"], "negative": data.corpus[n], "query_id": query,
           "positive_id": positive, "negative_id": n} for n in negatives]


def write_rows(path: str, rows: List[dict]) -> None:
  """The rows as JSON lines (UTF-8), atomically; gzip-compressed where `path` ends in `.gz`."""
  data = "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows).encode("utf-8")
  file_io.atomic_write_bytes(path, gzip.compress(data, mtime=0) if path.endswith(".gz") else data)


def define_flags(fv: flags.FlagValues = flags.FLAGS) -> None:
  """Defines the binary's flags (in a function, so that importing the module never clashes with other binaries)."""
  flags.DEFINE_string("data_dir", None, "A BEIR-format folder: corpus.jsonl, queries.jsonl, qrels/<split>.tsv.",
                      flag_values=fv)
  flags.DEFINE_string("split", "train", "The qrels file whose judged queries become rows.", flag_values=fv)
  flags.DEFINE_string("run_file", None, "A first stage's ranking of those queries (TREC run format).",
                      flag_values=fv)
  flags.DEFINE_string("output_file", None, "Where to write the rows (JSON lines; .gz to compress).", flag_values=fv)
  flags.DEFINE_integer("num_negatives", 7, "Negatives per row (groups) or rows per positive (triplets).",
                       flag_values=fv)
  flags.DEFINE_integer("skip_top", 0, "Run positions skipped before the negatives are taken (positions count the "
                       "relevant documents too, where sentence-transformers' range_min counts only the others).",
                       flag_values=fv)
  flags.DEFINE_integer("depth", 100, "The deepest run position a negative is taken from.", flag_values=fv)
  flags.DEFINE_enum("output_format", "groups", list(FORMATS), "groups (text_ranking) or triplets (text_embedding).",
                    flag_values=fv)
  flags.DEFINE_float("max_score", None, "Keep candidates the run scores at most this.", flag_values=fv)
  flags.DEFINE_float("min_score", None, "Keep candidates the run scores at least this.", flag_values=fv)
  flags.DEFINE_float("margin", None, "Keep candidates scored at least this much below the row's positive's run "
                     "score (each positive then gets its own negatives).", flag_values=fv)
  flags.DEFINE_float("relative_margin", None, "Keep candidates scored at most (1 - this) times the row's positive's "
                     "run score (0.05: NV-Retriever's 95%).", flag_values=fv)
  flags.DEFINE_enum("sampling", "top", list(SAMPLINGS), "top: the first negatives that pass; random: a seeded draw "
                    "from all that pass.", flag_values=fv)
  flags.DEFINE_integer("seed", 0, "The --sampling=random draw's seed.", flag_values=fv)
  flags.mark_flags_as_required(["data_dir", "run_file", "output_file"], flag_values=fv)


def check_output_apart(output_file: str, run_file: str, data_dir: str, split: str) -> None:
  """Refuses an `--output_file` that is the run file or a file of the BEIR folder (it was replaced by the rows)."""
  from tasks.embedding.beir import split_files  # noqa: PLC0415
  for flag, path in [("--run_file", run_file)] + [("--data_dir", p) for p in split_files(data_dir, split)]:
    if file_io.same_location(output_file, path):
      raise ValueError(f"--output_file={output_file} is {flag}'s {path}: write the mined rows to another file.")


def main(argv, fv: flags.FlagValues = flags.FLAGS) -> None:
  del argv
  check_output_apart(fv.output_file, fv.run_file, fv.data_dir, fv.split)
  mined = mine(fv.data_dir, fv.split, fv.run_file, fv.num_negatives, fv.skip_top, fv.depth, fv.output_format,
               max_score=fv.max_score, min_score=fv.min_score, margin=fv.margin, relative_margin=fv.relative_margin,
               sampling=fv.sampling, seed=fv.seed)
  write_rows(fv.output_file, mined["rows"])
  print(json.dumps(dict(mined["summary"], output_file=fv.output_file), sort_keys=True))


def console_main() -> None:
  """The `albert-mine-hard-negatives` console script (pyproject.toml)."""
  cli.launch(define_flags, main)


if __name__ == "__main__":
  console_main()
