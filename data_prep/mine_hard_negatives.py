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
from typing import Dict, List, Set
import unicodedata

from absl import flags

from official_albert import cli
from official_albert import file_io

logger = logging.getLogger(__name__)

FORMATS = ("groups", "triplets")


def mine(data_dir: str, split: str, run_file: str, num_negatives: int = 7, skip_top: int = 0,
         depth: int = 100, output_format: str = "groups") -> Dict[str, object]:
  """{"rows": [...], "summary": {...}}: the rows of the module docstring and their counts.

  Raises:
    ValueError: a setting out of range, a judged query the run does not rank, or a candidate the corpus lacks.
  """
  from official_albert.retrieval.run_files import read_run  # noqa: PLC0415 (binary: imports after launch)
  from tasks.embedding.beir import read_beir  # noqa: PLC0415
  if output_format not in FORMATS:
    raise ValueError(f"--output_format={output_format!r}: use one of {FORMATS}.")
  if num_negatives < 1 or skip_top < 0 or depth - skip_top < num_negatives:
    raise ValueError(f"--num_negatives={num_negatives}, --skip_top={skip_top}, --depth={depth}: need "
                     "num_negatives >= 1 and 0 <= skip_top, with depth - skip_top >= num_negatives (negatives come "
                     "from run positions skip_top to depth: no query could give that many).")
  data, run = read_beir(data_dir, split), read_run(run_file)
  judged = sorted(data.scored_query_ids())
  candidates = data.run_candidates(run, run_file, judged, depth)
  rows: List[dict] = []
  short, absent, without_document, passed_over = [], 0, 0, {"equal_to_a_positive": 0, "repeated": 0}
  for q in judged:
    relevant = {d for d, grade in data.qrels[q].items() if grade > 0}
    positives = sorted(d for d in relevant if d in data.corpus)
    absent += len(relevant) - len(positives)
    if not positives:  # (every judged document missing from the corpus: no row to write)
      without_document += 1
      continue
    negatives = _negatives(data, candidates[q][skip_top:depth], relevant, positives, num_negatives, passed_over)
    if len(negatives) < num_negatives:
      short.append(q)
      continue
    for p in positives:
      rows.extend(_rows(data, q, p, negatives, output_format))
  if short:
    logger.warning("%d of %d judged queries skipped: fewer than --num_negatives=%d candidates at run positions "
                   "%d-%d are not relevant (e.g. %s); lower --num_negatives or --skip_top, or write a deeper run.",
                   len(short), len(judged), num_negatives, skip_top, depth, short[:3])
  if absent:
    logger.warning("%d judgment(s) name documents the corpus lacks: no row for them.", absent)
  if passed_over["equal_to_a_positive"] or passed_over["repeated"]:
    logger.warning("passed over %d candidate(s) whose text is a relevant document's and %d that repeat an earlier "
                   "negative's text (duplicate passages under other ids).", passed_over["equal_to_a_positive"],
                   passed_over["repeated"])
  summary = {"rows": len(rows), "queries": len(judged) - len(short) - without_document,
             "skipped_queries": len(short), "queries_without_document": without_document,
             "judgments_without_document": absent, "negatives_equal_to_a_positive": passed_over["equal_to_a_positive"],
             "repeated_negatives": passed_over["repeated"], "split": split, "output_format": output_format}
  return {"rows": rows, "summary": summary}


def _negatives(data, ranked: List[str], relevant: Set[str], positives: List[str], num_negatives: int,
               passed_over: Dict[str, int]) -> List[str]:
  """The first `num_negatives` of `ranked` that are not relevant, whose text is neither a positive's nor an earlier
  negative's (`_text_key`); counts what it passes over in `passed_over`."""
  positive_texts = {_text_key(data.corpus[p]) for p in positives}
  negatives: List[str] = []
  seen: Set[str] = set()
  for d in ranked:
    if len(negatives) == num_negatives:
      break
    if d in relevant:
      continue
    key = _text_key(data.corpus[d])
    if key in positive_texts:
      passed_over["equal_to_a_positive"] += 1
    elif key in seen:
      passed_over["repeated"] += 1
    else:
      seen.add(key)
      negatives.append(d)
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
  flags.mark_flags_as_required(["data_dir", "run_file", "output_file"], flag_values=fv)


def main(argv, fv: flags.FlagValues = flags.FLAGS) -> None:
  del argv
  mined = mine(fv.data_dir, fv.split, fv.run_file, fv.num_negatives, fv.skip_top, fv.depth, fv.output_format)
  write_rows(fv.output_file, mined["rows"])
  print(json.dumps(dict(mined["summary"], output_file=fv.output_file), sort_keys=True))


def console_main() -> None:
  """The `albert-mine-hard-negatives` console script (pyproject.toml)."""
  cli.launch(define_flags, main)


if __name__ == "__main__":
  console_main()
