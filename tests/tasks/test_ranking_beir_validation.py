"""`text_ranking` validated on a BEIR-format folder and a first stage's run file (issue 46 item 3, for rerankers).

A reranker's checkpoint should be chosen on what it does to a first stage's ranking: evaluation on a folder with
`task.validation_candidates` (the run `tasks.retrieval_evaluate --run_file` writes for an embedder) must give exactly
what `tasks.retrieval_evaluate --rerank_model_dir` gives for the trained reranker over that embedder (real text: the
standard library's docstrings, with a grade-0 judgment, a missing document, a query that is itself a document and two
documents whose vectors tie), whatever the order of the run's lines; a run that misses a query or names a document the
corpus lacks, a folder without a run and a cut evaluation are errors naming the fix.
"""

import json
import math
import os
import random
import shutil

import numpy as np
import pytest

from data_prep import mine_hard_negatives
from official_albert.retrieval import run_files
from official_albert.retrieval.run_files import RunFileError
from official_albert.training import checkpointing
from official_albert.training.experiment_config import ConfigError
from tasks import retrieval_evaluate
from tasks.embedding.beir_evaluation import BeirEvaluation
from tasks.ranking.beir_evaluation import RerankEvaluation
from tests import tiny
from tests.tasks import test_retrieval_evaluate as beir_case
from tests.tasks.test_retrieval_evaluate import _write

MODEL = {"preset": "", "vocab_size": 1000, "embedding_size": 16, "hidden_size": 32, "num_hidden_layers": 1,
         "num_attention_heads": 2, "intermediate_size": 64, "max_position_embeddings": 64,
         "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0}
DATA = {"global_batch_size": 8, "seq_length": 64, "seed": 7}
KEYS = ("recall@1", "mrr@10", "ndcg@10", "map@100")
DEPTH = 5


@pytest.fixture(scope="module")
def trained(tmp_path_factory, spm_model_file, tiny_model_dirs):
  """The set's dev split, the tiny encoder's run of it (every document), and a reranker trained 3 steps on groups
  mined from that run and validated on the folder: (root, embedder, run file, model_dir, eval results)."""
  root = tmp_path_factory.mktemp("rerank_validation")
  corpus, queries, qrels = beir_case._case()
  _write(root / "set", corpus, queries, qrels, split="dev")
  embedder, run_file = tiny_model_dirs["encoder"], str(root / "candidates.trec")
  retrieval_evaluate.evaluate(embedder, str(root / "set"), split="dev", run_file=run_file, run_depth=len(corpus))
  # Training groups mined from the same run (its judgments copied as a train split): the journey as documented.
  shutil.copy(root / "set" / "qrels" / "dev.tsv", root / "set" / "qrels" / "train.tsv")
  groups = str(root / "groups.jsonl")
  mine_hard_negatives.write_rows(groups, mine_hard_negatives.mine(str(root / "set"), "train", run_file, 2)["rows"])
  config = tiny.finetune_override(MODEL, groups, str(root / "set"), spm_model_file, 3, 1e-3, DATA,
                                  num_negatives=2, validation_candidates=run_file, rerank_depth=DEPTH)
  results = tiny.train_run("text_ranking", root / "m", config)["eval_results"]
  return root, embedder, run_file, str(root / "m"), results


def _eval(model_dir, folder, validation_steps=-1, **task):
  config = {"task": {"validation_data": dict(DATA, input_path=str(folder), is_training=False, drop_remainder=False),
                     **task},
            "trainer": {"validation_steps": validation_steps}, "runtime": {"distribution_strategy": "one_device"}}
  return tiny.train_run("text_ranking", model_dir, config, mode="eval")


def test_evaluation_on_a_folder_is_retrieve_then_rerank_of_the_trained_reranker(trained):
  root, embedder, run_file, model_dir, results = trained
  want = retrieval_evaluate.evaluate(embedder, str(root / "set"), split="dev", rerank_model_dir=model_dir,
                                     rerank_depth=DEPTH)
  plain = retrieval_evaluate.evaluate(embedder, str(root / "set"), split="dev")
  assert results["queries"] == want["queries"] == 11 and "eval_loss" not in results  # (no groups: no loss)
  for key in KEYS:
    assert results[key] == pytest.approx(want[key], abs=1e-6), (key, results, want)
  assert any(results[k] != pytest.approx(plain[k]) for k in KEYS)  # (the reranker reordered the heads)
  best = checkpointing.read_best(model_dir)
  assert best["metric"] == "ndcg@10" and best["value"] == pytest.approx(results["ndcg@10"]), best
  # Chosen on the folder's dev split, these candidates and this depth: each gives another number.
  assert best["chosen_on"]["validation_input"] == (f"{os.path.normpath(str(root / 'set'))}#dev,"
                                                   f"{os.path.normpath(run_file)}#top{DEPTH}"), best


def test_any_runs_reranking_is_retrieval_evaluate_of_that_run(trained, tmp_path):
  """Another first stage (the embedder's ranking upside down, each query's 8 last documents): evaluation equals
  `retrieval_evaluate --first_stage=run --candidates=RUN --rerank_model_dir` on it, and differs from the first run's."""
  root, _, run_file, model_dir, results = trained
  upside_down = {q: [(d, -score) for d, score in reversed(ranking)][:8]
                 for q, ranking in run_files.read_run(run_file).items()}
  other = str(tmp_path / "other.trec")
  run_files.write_run(other, upside_down)
  got = _eval(model_dir, root / "set", validation_candidates=other, rerank_depth=DEPTH,
              records_dir=str(tmp_path / "records"))
  want = retrieval_evaluate.evaluate(None, str(root / "set"), split="dev", first_stage="run", candidates=other,
                                     rerank_model_dir=model_dir, rerank_depth=DEPTH)
  for key in KEYS + ("queries",):
    assert got[key] == pytest.approx(want[key], abs=1e-6), key
  assert got["ndcg@10"] < results["ndcg@10"]


def test_task_metric_convention_beir_is_retrieval_evaluates(trained, tmp_path):
  """task.metric_convention=beir: the reranked folder's numbers are `retrieval_evaluate --metric_convention=beir`'s
  on the same run and depth."""
  root, _, run_file, model_dir, results = trained
  shutil.copytree(model_dir, tmp_path / "m")
  got = _eval(tmp_path / "m", root / "set", validation_candidates=run_file, rerank_depth=DEPTH,
              metric_convention="beir", records_dir=str(tmp_path / "records"))
  assert got["ndcg@10"] != pytest.approx(results["ndcg@10"], abs=1e-6)  # (q5's grades 1 and 2 tell them apart)
  want = retrieval_evaluate.evaluate(None, str(root / "set"), split="dev", first_stage="run", candidates=run_file,
                                     rerank_model_dir=model_dir, rerank_depth=DEPTH, metric_convention="beir")
  for key in KEYS + ("queries",):
    assert got[key] == pytest.approx(want[key], abs=1e-6), key


def test_the_runs_line_order_and_a_query_ranked_against_itself_change_no_number(trained, tmp_path):
  root, _, run_file, model_dir, results = trained
  lines = open(run_file, encoding="utf-8").read().splitlines(keepends=True)
  random.Random(4).shuffle(lines)
  shuffled = tmp_path / "shuffled.trec"
  shuffled.write_text("".join(lines), encoding="utf-8")
  assert run_files.read_run(str(shuffled)) == run_files.read_run(run_file)
  # A run from elsewhere that ranks the query that is a document first against itself: left out, as BEIR does.
  shuffled.write_text("".join(lines) + "d7 Q0 d7 0 99.0 other\n", encoding="utf-8")
  heads = RerankEvaluation.read(str(root / "set"), "dev", str(shuffled), DEPTH).heads
  assert "d7" not in heads["d7"] and len(heads["d7"]) == DEPTH
  again = _eval(model_dir, root / "set", validation_candidates=str(shuffled), rerank_depth=DEPTH,
                records_dir=str(tmp_path / "records"))
  for key in KEYS:
    assert again[key] == pytest.approx(results[key], abs=1e-6), key


def test_a_run_of_another_split_or_corpus_and_a_folder_without_one_are_named(trained, tmp_path):
  root, _, run_file, model_dir, _ = trained
  lines = open(run_file, encoding="utf-8").read().splitlines(keepends=True)
  without_q3 = tmp_path / "without_q3.trec"
  without_q3.write_text("".join(line for line in lines if not line.startswith("q3 ")), encoding="utf-8")
  with pytest.raises(ValueError, match=r"no candidate for 1 of the 11 queries.*\['q3'\].*--run_file="):
    _eval(model_dir, root / "set", validation_candidates=str(without_q3), records_dir=str(tmp_path / "r1"))
  other = tmp_path / "other.trec"
  other.write_text("".join(lines) + "q0 Q0 d_elsewhere 99 -5.0 x\n", encoding="utf-8")
  with pytest.raises(ValueError, match=r"1 document id\(s\) that .* lacks .*'d_elsewhere'"):
    _eval(model_dir, root / "set", validation_candidates=str(other), records_dir=str(tmp_path / "r2"))
  with pytest.raises(ConfigError, match=r"task.validation_candidates.*--run_file="):
    _eval(model_dir, root / "set")
  with pytest.raises(ConfigError, match="trainer.validation_steps=2.*Set trainer.validation_steps=-1"):
    _eval(model_dir, root / "set", validation_steps=2, validation_candidates=run_file)


@pytest.mark.parametrize("text,words", [
    ("q1 Q0 d1 1 0.5\n", ["bad.trec:1", "5 field(s)", "query_id Q0 doc_id rank score run_name"]),
    ("q1 Q0 d1 1 0.5 r\n\nq1 Q0 d2 one 0.4 r\n", ["bad.trec:3", "rank 'one'"]),
    ("q1 Q0 d1 1 nan r\n", ["bad.trec:1", "not a finite number"]),
    ("q1 Q0 d1 1 0.5 r\nq1 Q0 d1 2 0.4 r\n", ["bad.trec:2", "lists document 'd1' again (line 1)"]),
    ("\n", ["no ranking in the file"]),
])
def test_bad_run_lines_are_named_by_file_and_line(tmp_path, text, words):
  (tmp_path / "bad.trec").write_text(text, encoding="utf-8")
  with pytest.raises(RunFileError) as raised:
    run_files.read_run(str(tmp_path / "bad.trec"))
  for word in words:
    assert word in str(raised.value), (word, str(raised.value))


def test_a_run_reads_by_score_then_rank_and_writes_back_the_same(tmp_path, caplog):
  """By score, then rank; a rank column that the scores contradict (distances written as scores) is said."""
  (tmp_path / "run.trec").write_text("q2 Q0 b 2 0.5 r\nq1 Q0 x 1 3 r\nq2 Q0 a 1 0.5 r\nq2 Q0 c 3 0.9 r\n",
                                     encoding="utf-8")
  run = run_files.read_run(str(tmp_path / "run.trec"))
  assert run == {"q2": [("c", 0.9), ("a", 0.5), ("b", 0.5)], "q1": [("x", 3.0)]}
  assert "1 of 2 queries (the first: 'q2') rank documents in an order their scores contradict" in caplog.text
  caplog.clear()
  run_files.write_run(str(tmp_path / "again.trec.gz"), run)
  assert run_files.read_run(str(tmp_path / "again.trec.gz")) == run
  assert "contradict" not in caplog.text
  with pytest.raises(ValueError, match="above the one before it"):
    run_files.write_run(str(tmp_path / "up.trec"), {"q": [("a", 0.1), ("b", 0.2)]})
  with pytest.raises(ValueError, match="document id 'a b'"):
    run_files.write_run(str(tmp_path / "space.trec"), {"q": [("a b", 0.1)]})


@pytest.mark.large
@pytest.mark.timing
def test_two_workers_evaluate_the_folder_as_one_device(trained, tmp_path):
  """The pairs are split over 2 MultiWorkerMirroredStrategy workers, gathered and put back by `example_index` (the
  last, short batch padded with filler rows, which are dropped). Bounded by the harness's process waits and
  timeout."""
  from tests.official_albert.training import scale_out_harness as H
  root, _, run_file, model_dir, results = trained
  shutil.copytree(model_dir, tmp_path / "m")
  override = {"task": {"validation_data": dict(DATA, input_path=str(root / "set"), is_training=False,
                                               drop_remainder=False),
                       "validation_candidates": run_file, "rerank_depth": DEPTH},
              "trainer": {"validation_steps": -1}, "runtime": {"distribution_strategy": ""}}
  logs = [tmp_path / f"w{i}.log" for i in range(2)]
  workers = H.start_workers(tmp_path / "m", override, H.free_ports(2), logs, experiment="text_ranking", mode="eval")
  try:
    H.finish(workers, logs)
  finally:
    H.kill(workers)
  two = json.loads((tmp_path / "m" / "eval_results.json").read_text(encoding="utf-8"))
  for key in KEYS + ("queries",):
    assert two[key] == pytest.approx(results[key], abs=1e-6), key


def test_a_reranked_run_keeps_logits_whose_sigmoid_is_one_apart():
  """Logits 45 > 40 > 38 (a listwise reranker's level is free) were all written 1.0, the sigmoid's float64 limit,
  and a tool that orders a run by its scores alone (trec_eval) put them in document-id order."""
  from tasks.ranking.beir_evaluation import reranked_run
  evaluation = type("Evaluation", (), {"heads": {"q": ["dA", "dB", "dC"]}})()
  got = reranked_run(evaluation, np.array([45.0, 40.0, 38.0]))
  assert got == {"q": [("dA", 45.0), ("dB", 40.0), ("dC", 38.0)]}
  assert sorted(got["q"], key=lambda pair: -pair[1]) == got["q"]  # (the scores alone give the order)


def test_predict_writes_the_reranked_run_as_pipelines_rerank_orders_it(trained, tmp_path):
  """`--mode=predict` on a folder without judgments (a leaderboard's test split) and a run: each query's first
  DEPTH candidates (its own id left out) in the order `pipelines.rerank` gives them, scored by the logits whose
  sigmoid is its score."""
  from official_albert.serving.pipeline_inputs import default_seq_length
  from official_albert.serving.rerank import load_reranker
  from official_albert.serving.rerank import rerank
  root, _, run_file, model_dir, _ = trained
  shutil.copytree(model_dir, tmp_path / "m")
  (tmp_path / "hidden").mkdir()
  for name in ("corpus.jsonl", "queries.jsonl"):
    shutil.copy(root / "set" / name, tmp_path / "hidden" / name)
  config = {"task": {"predict_data": dict(DATA, input_path=str(tmp_path / "hidden"), is_training=False,
                                          drop_remainder=False),
                     "predict_candidates": run_file, "rerank_depth": DEPTH},
            "runtime": {"distribution_strategy": "one_device"}}
  result = tiny.train_run("text_ranking", tmp_path / "m", config, mode="predict")
  assert result["files"]["run"].endswith("hidden.reranked.trec")
  got = run_files.read_run(result["files"]["run"])
  data = BeirEvaluation.read(str(root / "set"), "dev").data  # (the texts as BEIR joins them)
  first = run_files.read_run(run_file)
  assert list(got) == list(first)
  model, tokenizer, _ = load_reranker(str(tmp_path / "m"))  # (once: `pipelines.rerank(dir, ...)` loads per call)
  seq_length = default_seq_length(model, str(tmp_path / "m"))
  for q, ranking in first.items():
    head = [d for d, _ in ranking if d != q][:DEPTH]
    want = rerank(model, data.queries[q], [data.corpus[d] for d in head], tokenizer=tokenizer, seq_length=seq_length)
    assert [d for d, _ in got[q]] == [head[a["index"]] for a in want], q
    assert [1 / (1 + math.exp(-s)) for _, s in got[q]] == pytest.approx([a["score"] for a in want], abs=1e-5), q
  with pytest.raises(ConfigError, match="task.predict_candidates to the run file"):
    tiny.train_run("text_ranking", tmp_path / "m", dict(config, task=dict(config["task"], predict_candidates="")),
                   mode="predict")
  # Group files are no predict input: refused before they are read and predicted (review s50: after the pass).
  (tmp_path / "groups.jsonl").write_text('{"not": "a group"}\n', encoding="utf-8")
  groups = dict(config["task"]["predict_data"], input_path=str(tmp_path / "groups.jsonl"))
  with pytest.raises(ConfigError, match=r"set task.predict_data.input_path to the folder \(got '.*groups.jsonl'\)"):
    tiny.train_run("text_ranking", tmp_path / "m", dict(config, task=dict(config["task"], predict_data=groups)),
                   mode="predict")
