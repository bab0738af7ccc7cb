"""`text_embedding` validated on a BEIR-format folder (`task.validation_data.input_path` = the folder; issue 46 item 3).

The checkpoint a run keeps should be chosen on the benchmark's number: evaluation on a folder must give exactly what
`tasks.retrieval_evaluate` gives for the trained model directory on the same split (real text: this repository's
docs, with titles, a grade-0 judgment, a judgment of a missing document and a query that is itself a document),
whatever the order of the folder's lines, on one device and on 2 workers; a corpus cut short by
trainer.validation_steps, a split the folder lacks and a folder given as training data are errors naming the fix.
"""

import json
import os
import random
import shutil

import numpy as np
import pytest

from official_albert.training import checkpointing
from official_albert.training.experiment_config import ConfigError
from tasks import retrieval_evaluate
from tasks.embedding.beir_evaluation import BeirEvaluation
from tests import tiny
from tests.tasks import test_retrieval_evaluate as beir_case
from tests.tasks.test_retrieval_evaluate import _write

MODEL = {"preset": "", "vocab_size": 1000, "embedding_size": 16, "hidden_size": 32, "num_hidden_layers": 1,
         "num_attention_heads": 2, "intermediate_size": 64, "max_position_embeddings": 64,
         "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0}
DATA = {"global_batch_size": 8, "seq_length": 64, "seed": 7}
KEYS = ("recall@1", "recall@10", "mrr@10", "ndcg@10", "map@100")


def _case():
  """test_retrieval_evaluate's set with its `d7_start` made of paragraph 7's last words: its first words are cut
  at seq_length 64 exactly as d7 is, so the two tied (one vector), and a tie's order is the corpus's line order."""
  corpus, queries, qrels = beir_case._case()
  d7 = next(row["text"] for row in corpus if row["_id"] == "d7")
  next(row for row in corpus if row["_id"] == "d7_start")["text"] = " ".join(d7.split()[-30:])
  return corpus, queries, qrels


@pytest.fixture(scope="module")
def trained(tmp_path_factory, spm_model_file):
  """3 steps on (query, document) pairs of the set, validated on its `dev` split: (root, model_dir, eval results)."""
  root = tmp_path_factory.mktemp("beir_validation")
  corpus, queries, qrels = _case()
  _write(root / "set", corpus, queries, qrels, split="dev")
  texts = {row["_id"]: row["text"] for row in corpus}
  pairs = root / "pairs.jsonl"
  pairs.write_text("".join(json.dumps({"anchor": q["text"], "positive": texts[f"d{i}"]}) + "\n"
                           for i, q in enumerate(queries[:10])), encoding="utf-8")
  config = tiny.finetune_override(MODEL, str(pairs), str(root / "set"), spm_model_file, 3, 1e-3, DATA)
  results = tiny.train_run("text_embedding", root / "m", config)["eval_results"]
  return root, str(root / "m"), results


def _eval(model_dir, folder, validation_steps=-1, **task):
  config = {"task": {"validation_data": dict(DATA, input_path=str(folder), is_training=False, drop_remainder=False),
                     **task},
            "trainer": {"validation_steps": validation_steps}, "runtime": {"distribution_strategy": "one_device"}}
  return tiny.train_run("text_embedding", model_dir, config, mode="eval")


def test_evaluation_on_a_folder_is_retrieval_evaluate_on_the_trained_model(trained):
  root, model_dir, results = trained
  want = retrieval_evaluate.evaluate(model_dir, str(root / "set"), split="dev", seq_length=DATA["seq_length"])
  assert (results["queries"], results["corpus"]) == (want["queries"], want["corpus"]) == (11, len(_case()[0]))
  for key in KEYS:
    assert results[key] == pytest.approx(want[key], abs=1e-6), (key, results, want)
  assert 0.0 < results["ndcg@10"] < 1.0 and "eval_loss" not in results  # (no pairs: no loss over them)
  best = checkpointing.read_best(model_dir)
  assert best["metric"] == "ndcg@10" and best["value"] == pytest.approx(results["ndcg@10"]), best
  # Chosen on the folder's dev split: an evaluation of its test split is another evaluation (it never replaces it).
  assert best["chosen_on"]["validation_input"] == os.path.normpath(str(root / "set")) + "#dev", best


def test_the_folders_line_order_changes_no_number(trained, tmp_path):
  root, model_dir, results = trained
  corpus, queries, qrels = _case()
  rng = random.Random(5)
  corpus = corpus + [corpus[2]]  # (a document line repeated, as a dump joined twice: read once)
  body = qrels[1:]
  for rows in (corpus, queries, body):
    rng.shuffle(rows)
  _write(tmp_path / "shuffled", corpus, queries, [qrels[0]] + body, split="dev")
  shutil.copytree(model_dir, tmp_path / "m")
  again = _eval(tmp_path / "m", tmp_path / "shuffled")
  for key in KEYS + ("queries", "corpus"):
    assert again[key] == pytest.approx(results[key], abs=1e-6), key


def test_task_metric_convention_beir_is_retrieval_evaluates(trained, tmp_path):
  """task.metric_convention=beir: the folder's numbers are `retrieval_evaluate --metric_convention=beir`'s (graded
  nDCG, MAP over all relevant documents: BEIR's pytrec_eval); another name is refused naming the two."""
  root, model_dir, results = trained
  shutil.copytree(model_dir, tmp_path / "m")
  got = _eval(tmp_path / "m", root / "set", metric_convention="beir")
  assert got["ndcg@10"] != pytest.approx(results["ndcg@10"], abs=1e-6)  # (q5's grades 1 and 2 tell them apart)
  want = retrieval_evaluate.evaluate(model_dir, str(root / "set"), split="dev", seq_length=DATA["seq_length"],
                                     metric_convention="beir")
  for key in KEYS:
    assert got[key] == pytest.approx(want[key], abs=1e-6), key
  with pytest.raises(ConfigError, match=r"task.metric_convention='trec': use one of \['sentence_transformers', "):
    _eval(tmp_path / "m", root / "set", metric_convention="trec")


def test_a_cut_corpus_a_missing_split_and_a_folder_to_train_on_are_errors_naming_the_fix(trained, tmp_path):
  root, model_dir, _ = trained
  shutil.copytree(model_dir, tmp_path / "m")
  with pytest.raises(ConfigError, match=r"set is a BEIR-format folder, and a retrieval set is scored on its whole "
                                        r"corpus: trainer\.validation_steps=1 would stop .* Set "
                                        r"trainer\.validation_steps=-1\."):
    _eval(tmp_path / "m", root / "set", validation_steps=1)  # (at start-up, not after training)
  texts = 11 + len(_case()[0])  # (records that do not cover the set: stale ones, or evaluation cut short)
  evaluation = BeirEvaluation.read(str(root / "set"), "dev")
  with pytest.raises(ValueError, match=rf"evaluated 8 of the {texts} texts of .*set \(dev: 11 queries, .*whole "
                                       rf"corpus\. Set trainer\.validation_steps=-1 \(or at least "
                                       rf"{-(-texts // 8)} batches of 8\)"):
    evaluation.results(np.zeros((8, 4), np.float32), np.arange(8), 8, KEYS)
  with pytest.raises(ValueError, match=r"records are stale"):
    evaluation.results(np.zeros((texts, 4), np.float32), np.arange(texts) % 5, 8, KEYS)
  with pytest.raises(FileNotFoundError, match=r"qrels/test\.tsv does not exist.*splits: \['dev'\]"):
    _eval(tmp_path / "m", root / "set", validation_split="test")
  config = tiny.finetune_override(MODEL, str(root / "set"), "", "", 1, 1e-3, DATA)
  with pytest.raises(ValueError, match="is a folder .*only task.validation_data reads; train and predict on CSV"):
    tiny.train_run("text_embedding", tmp_path / "t", dict(config, task=dict(config["task"], init_checkpoint=model_dir)))


def test_triplets_mined_from_its_own_run_train_the_embedder_on(trained, tmp_path):
  """The embedder's journey with hard negatives: its run of a train split, triplets mined from it
  (`data_prep.mine_hard_negatives --output_format=triplets`), 2 more steps from it on them with repeated pairs
  masked, validated on the folder as before."""
  from data_prep import mine_hard_negatives
  root, model_dir, _ = trained
  shutil.copytree(root / "set", tmp_path / "set")
  shutil.copy(tmp_path / "set" / "qrels" / "dev.tsv", tmp_path / "set" / "qrels" / "train.tsv")
  run_file = str(tmp_path / "train.trec")
  retrieval_evaluate.evaluate(model_dir, str(tmp_path / "set"), split="train", run_file=run_file)
  mined = mine_hard_negatives.mine(str(tmp_path / "set"), "train", run_file, num_negatives=2,
                                   output_format="triplets")
  assert mined["summary"]["rows"] == 2 * 12  # (12 judged pairs whose document is in the corpus, 2 negatives each)
  triplets = str(tmp_path / "triplets.jsonl")
  mine_hard_negatives.write_rows(triplets, mined["rows"])
  config = tiny.finetune_override(MODEL, triplets, str(tmp_path / "set"), "", 2, 1e-3, DATA,
                                  init_checkpoint=model_dir, negative_column="negative", mask_false_negatives=True)
  results = tiny.train_run("text_embedding", tmp_path / "m", config)["eval_results"]
  assert results["queries"] == 11 and 0.0 < results["ndcg@10"] <= 1.0


@pytest.mark.large
@pytest.mark.timing
def test_two_workers_evaluate_the_folder_as_one_device(trained, tmp_path):
  """The texts are split over 2 MultiWorkerMirroredStrategy workers, gathered and put back by `example_index`; the
  last, short batch is padded with filler rows, which are dropped. Bounded by the harness's process waits and
  timeout."""
  from tests.official_albert.training import scale_out_harness as H
  root, model_dir, results = trained
  shutil.copytree(model_dir, tmp_path / "m")
  override = {"task": {"validation_data": dict(DATA, input_path=str(root / "set"), is_training=False,
                                               drop_remainder=False)},
              "trainer": {"validation_steps": -1}, "runtime": {"distribution_strategy": ""}}
  logs = [tmp_path / f"w{i}.log" for i in range(2)]
  workers = H.start_workers(tmp_path / "m", override, H.free_ports(2), logs, experiment="text_embedding",
                            mode="eval")
  try:
    H.finish(workers, logs)
  finally:
    H.kill(workers)
  two = json.loads((tmp_path / "m" / "eval_results.json").read_text(encoding="utf-8"))
  for key in KEYS + ("queries", "corpus"):
    assert two[key] == pytest.approx(results[key], abs=1e-6), key
