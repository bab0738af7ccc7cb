"""data_prep.mine_hard_negatives: a first stage's run of a BEIR split → training rows with hard negatives.

A hand-made set and run, so that every row is known: the negatives are the run's best candidates that are not
judged relevant (grade 0 is a negative like any other) and are not the query itself, from --skip_top to --depth; a
query short of negatives is skipped and counted; rows do not depend on the order of the folder's or the run's lines;
the groups train `text_ranking` as written (tests/tasks/test_ranking_beir_validation.py mines its training rows).
"""

import gzip
import json
import logging
import random

import pytest

from data_prep import mine_hard_negatives as mhn
from official_albert.retrieval import run_files

CORPUS = {f"d{i}": f"document {i}" for i in range(8)}
CORPUS["q2"] = "a query that is a document"
QUERIES = {"q1": "first query", "q2": "second query", "q3": "third query", "q4": "judged only with grade 0"}
QRELS = [("q1", "d1", 1), ("q1", "d4", 2), ("q1", "d2", 0), ("q2", "d5", 1), ("q2", "d_missing", 1),
         ("q3", "d0", 1), ("q4", "d3", 0)]
RUN = {"q1": ["d4", "d2", "d1", "d3", "d0", "d6"], "q2": ["q2", "d5", "d6", "d7", "d0", "d1"],
       "q3": ["d0", "d1"], "q5": ["d1"]}


def _write(folder, rng=None):
  corpus = [{"_id": d, "title": "T" if d == "d6" else "", "text": t} for d, t in CORPUS.items()]
  queries = [{"_id": q, "text": t} for q, t in QUERIES.items()]
  qrels = [f"{q}\t{d}\t{g}" for q, d, g in QRELS]
  run = [f"{q} Q0 {d} {r + 1} {1.0 - r / 10} first" for q, ds in RUN.items() for r, d in enumerate(ds)]
  if rng:
    for lines in (corpus, queries, qrels, run):
      rng.shuffle(lines)
  (folder / "qrels").mkdir(parents=True, exist_ok=True)
  (folder / "corpus.jsonl").write_text("".join(json.dumps(r) + "\n" for r in corpus), encoding="utf-8")
  (folder / "queries.jsonl").write_text("".join(json.dumps(r) + "\n" for r in queries), encoding="utf-8")
  (folder / "qrels" / "train.tsv").write_text("query-id\tcorpus-id\tscore\n" + "".join(f"{line}\n" for line in qrels),
                                              encoding="utf-8")
  (folder / "run.trec").write_text("".join(f"{line}\n" for line in run), encoding="utf-8")
  return str(folder), str(folder / "run.trec")


def test_negatives_are_the_runs_best_unjudged_candidates(tmp_path, caplog):
  folder, run = _write(tmp_path / "set")
  with caplog.at_level(logging.WARNING, logger=mhn.__name__):
    mined = mhn.mine(folder, "train", run, num_negatives=2)
  groups = [(r["query_id"], r["positive_id"], r["negative_ids"]) for r in mined["rows"]]
  # q1: d4 and d1 relevant (grade 2 counts as relevant), d2 judged grade 0: a negative. q2: its own id left out;
  # its judgment of a missing document has no row. q3: one candidate left, short of 2: skipped. q4: nothing to find.
  assert groups == [("q1", "d1", ["d2", "d3"]), ("q1", "d4", ["d2", "d3"]), ("q2", "d5", ["d6", "d7"])]
  assert mined["summary"] == {"rows": 3, "queries": 2, "skipped_queries": 1, "judgments_without_document": 1,
                              "queries_without_document": 0, "negatives_equal_to_a_positive": 0,
                              "repeated_negatives": 0, "split": "train", "output_format": "groups"}
  assert "1 of 3 judged queries skipped" in caplog.text and "['q3']" in caplog.text
  first = mined["rows"][0]
  assert (first["query"], first["positive"], first["negatives"]) == ("first query", "document 1",
                                                                     ["document 2", "document 3"])
  assert mined["rows"][2]["negatives"] == ["T document 6", "document 7"]  # (BEIR's title + " " + text)
  skipped = mhn.mine(folder, "train", run, num_negatives=2, skip_top=2, depth=6)
  # (places once the query's own id is left out: q2's positive and d6 are places 0 and 1)
  assert [r["negative_ids"] for r in skipped["rows"]] == [["d3", "d0"], ["d3", "d0"], ["d7", "d0"]]
  triplets = mhn.mine(folder, "train", run, num_negatives=2, output_format="triplets")["rows"]
  assert [(r["anchor"], r["positive_id"], r["negative_id"]) for r in triplets][:2] == [
      ("first query", "d1", "d2"), ("first query", "d1", "d3")] and len(triplets) == 6


def test_the_rows_do_not_depend_on_line_order_and_write_as_json_lines(tmp_path):
  folder, run = _write(tmp_path / "set")
  rows = mhn.mine(folder, "train", run, num_negatives=2)["rows"]
  shuffled_folder, shuffled_run = _write(tmp_path / "shuffled", random.Random(2))
  assert mhn.mine(shuffled_folder, "train", shuffled_run, num_negatives=2)["rows"] == rows
  mhn.write_rows(str(tmp_path / "groups.jsonl.gz"), rows)
  with gzip.open(tmp_path / "groups.jsonl.gz", "rt", encoding="utf-8") as f:
    assert [json.loads(line) for line in f] == rows


def test_a_run_of_another_split_or_corpus_and_bad_settings_are_named(tmp_path):
  folder, run = _write(tmp_path / "set")
  lines = (tmp_path / "set" / "run.trec").read_text(encoding="utf-8").splitlines(keepends=True)
  (tmp_path / "no_q3.trec").write_text("".join(line for line in lines if not line.startswith("q3 ")),
                                       encoding="utf-8")
  with pytest.raises(ValueError, match=r"no candidate for 1 of the 3 queries .*\['q3'\].*--run_file="):
    mhn.mine(folder, "train", str(tmp_path / "no_q3.trec"))
  (tmp_path / "other.trec").write_text("".join(lines) + "q1 Q0 elsewhere 9 0.0 x\n", encoding="utf-8")
  with pytest.raises(ValueError, match=r"1 document id\(s\) .*'elsewhere'.*another corpus"):
    mhn.mine(folder, "train", str(tmp_path / "other.trec"))
  with pytest.raises(ValueError, match="depth - skip_top >= num_negatives"):
    mhn.mine(folder, "train", run, skip_top=5, depth=5)
  with pytest.raises(ValueError, match=r"--num_negatives=3, --skip_top=5, --depth=7: .*no query could give that"):
    mhn.mine(folder, "train", run, num_negatives=3, skip_top=5, depth=7)  # (wrote an empty file, exit 0)
  with pytest.raises(ValueError, match="--output_format='pairs'"):
    mhn.mine(folder, "train", run, output_format="pairs")
  assert run_files.read_run(run)["q1"][0] == ("d4", 1.0)


def test_duplicate_passages_are_no_negatives_and_a_query_without_documents_is_counted_apart(tmp_path, caplog):
  """Review s50: a passage repeated under another id (Quora, MS MARCO) was mined as a negative of its own positive
  (or twice), and `text_ranking` then refused the row; a query all of whose judged documents the corpus lacks counted
  as a query with rows."""
  folder = tmp_path / "dup"
  (folder / "qrels").mkdir(parents=True)
  corpus = {"d1": "ALBERT is a lite BERT.", "d1dup": "albert is a  LITE bert.", "d2": "Bert is a muppet.",
            "d3": "Bert is a muppet.", "d4": "Ernie is a muppet.", "d5": "Élan vital.", "d6": "elan vital."}
  (folder / "corpus.jsonl").write_text("".join(json.dumps({"_id": d, "text": t}) + "\n" for d, t in corpus.items()),
                                       encoding="utf-8")
  (folder / "queries.jsonl").write_text('{"_id": "q1", "text": "what is albert"}\n{"_id": "q2", "text": "who"}\n',
                                        encoding="utf-8")
  (folder / "qrels" / "train.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\nq2\tdX\t1\n",
                                              encoding="utf-8")
  (folder / "run.trec").write_text("".join(f"q1 Q0 {d} {r + 1} {9 - r} x\n" for r, d in enumerate(
      ["d1dup", "d2", "d3", "d1", "d5", "d6", "d4"])) + "q2 Q0 d2 1 1 x\n", encoding="utf-8")
  with caplog.at_level(logging.WARNING, logger=mhn.__name__):
    mined = mhn.mine(str(folder), "train", str(folder / "run.trec"), num_negatives=3)
  assert [r["negative_ids"] for r in mined["rows"]] == [["d2", "d5", "d4"]]
  summary = mined["summary"]
  assert (summary["rows"], summary["queries"], summary["queries_without_document"]) == (1, 1, 1)
  assert (summary["negatives_equal_to_a_positive"], summary["repeated_negatives"]) == (1, 2)
  assert "passed over 1 candidate(s) whose text is a relevant document's and 2 that repeat" in caplog.text
