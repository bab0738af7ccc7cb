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


def _groups(mined):
  return [(r["query_id"], r["positive_id"], r["negative_ids"]) for r in mined["rows"]]


def test_score_range_and_margins_filter_on_the_runs_scores(tmp_path, caplog):
  """sentence-transformers' max_score / min_score / margin / relative_margin on the run's scores (1.0, 0.9, ... by
  run position): with a margin each positive gets its own negatives, measured from its own score in the run."""
  folder, run = _write(tmp_path / "set")
  capped = mhn.mine(folder, "train", run, num_negatives=2, max_score=0.75)
  assert _groups(capped) == [("q1", "d1", ["d3", "d0"]), ("q1", "d4", ["d3", "d0"]), ("q2", "d5", ["d7", "d0"])]
  # (d2 at 0.9 for q1, d6 at 0.8 for q2, d1 at 0.9 for q3)
  assert capped["summary"]["candidates_outside_score_range"] == 3
  assert "candidates_within_margin" not in capped["summary"]
  narrow = mhn.mine(folder, "train", run, num_negatives=2, min_score=0.65, max_score=0.85)
  assert _groups(narrow) == [("q2", "d5", ["d6", "d7"])]  # (q1 keeps d3 alone: short)
  # q1: d1 scores 0.8 (ceiling 0.65: d0, d6), d4 1.0 (ceiling 0.85: d3, d0); q2: d5 0.9 (ceiling 0.75: d7, d0).
  expected = [("q1", "d1", ["d0", "d6"]), ("q1", "d4", ["d3", "d0"]), ("q2", "d5", ["d7", "d0"])]
  margin = mhn.mine(folder, "train", run, num_negatives=2, margin=0.15)
  assert _groups(margin) == expected
  # (within the margin: d2 and d3 for d1, d2 for d4, d6 for d5, d1 for q3's d0)
  assert (margin["summary"]["candidates_within_margin"], margin["summary"]["positives_without_score"]) == (5, 0)
  assert _groups(mhn.mine(folder, "train", run, num_negatives=2, relative_margin=0.2)) == expected
  triplets = mhn.mine(folder, "train", run, num_negatives=2, margin=0.15, output_format="triplets")["rows"]
  assert [(r["positive_id"], r["negative_id"]) for r in triplets][:4] == [("d1", "d0"), ("d1", "d6"), ("d4", "d3"),
                                                                         ("d4", "d0")]
  lines = (tmp_path / "set" / "run.trec").read_text(encoding="utf-8").splitlines(keepends=True)
  (tmp_path / "no_d4.trec").write_text("".join(line for line in lines if not line.startswith("q1 Q0 d4 ")),
                                       encoding="utf-8")
  with caplog.at_level(logging.WARNING, logger=mhn.__name__):
    unscored = mhn.mine(folder, "train", str(tmp_path / "no_d4.trec"), num_negatives=2, margin=0.15)
  assert _groups(unscored) == [("q1", "d1", ["d0", "d6"]), ("q2", "d5", ["d7", "d0"])]
  assert unscored["summary"]["positives_without_score"] == 1 and "1 relevant document(s) are not in the run" in (
      caplog.text)
  for bad, message in [({"margin": -0.1}, "--margin=-0.1"), ({"relative_margin": 1.0}, "--relative_margin=1.0"),
                       ({"min_score": 2.0, "max_score": 1.0}, "--min_score=2.0 is above --max_score=1.0"),
                       ({"sampling": "uniform"}, "--sampling='uniform'")]:
    with pytest.raises(ValueError, match=message):
      mhn.mine(folder, "train", run, **bad)


def test_random_sampling_draws_from_all_that_pass_whatever_the_line_order(tmp_path):
  folder, run = _write(tmp_path / "set")
  shuffled_folder, shuffled_run = _write(tmp_path / "shuffled", random.Random(5))
  draws = set()
  for seed in range(8):
    mined = mhn.mine(folder, "train", run, num_negatives=2, sampling="random", seed=seed)
    assert mhn.mine(shuffled_folder, "train", shuffled_run, num_negatives=2, sampling="random", seed=seed) == mined
    q1 = [r["negative_ids"] for r in mined["rows"] if r["query_id"] == "q1"]
    assert len(q1) == 2 and q1[0] == q1[1]  # (without a margin the query's rows share their negatives)
    assert len(set(q1[0])) == 2 and set(q1[0]) <= {"d2", "d3", "d0", "d6"}
    draws.add(tuple(q1[0]))
  assert len(draws) > 1  # (the seed changes the draw; the top two, d2 and d3, are not always taken)


def test_the_binary_passes_its_filters_on(tmp_path, capsys):
  from absl import flags  # noqa: PLC0415
  folder, run = _write(tmp_path / "set")
  fv = flags.FlagValues()
  mhn.define_flags(fv)
  output = tmp_path / "groups.jsonl"
  fv([f"x --data_dir={folder} --run_file={run} --output_file={output} --num_negatives=2 --margin=0.15 "
      "--sampling=random --seed=3"][0].split())
  mhn.main([], fv)
  expected = mhn.mine(folder, "train", run, num_negatives=2, margin=0.15, sampling="random", seed=3)
  assert [json.loads(line) for line in output.read_text(encoding="utf-8").splitlines()] == expected["rows"]
  assert json.loads(capsys.readouterr().out)["candidates_within_margin"] == 5
