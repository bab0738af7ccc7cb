"""`text_embedding`'s retrieval evaluation over the rows it evaluated, with texts told apart as the tokenizer sees them.

- trainer.validation_steps ending evaluation early (its default stops at 100 batches) scores the rows evaluated,
  with a warning, instead of refusing them as "stale records"; records naming rows the file lacks still are refused.
- Two positives the model reads as one input (case under lower-casing, accents, spaces, Unicode form, a cut at
  seq_length, characters that become <unk>) are one corpus document: as two, with one vector, the second could never
  rank first (recall@1 0.5 for a perfect model).
- The texts are read again with the records when the dev file changes; scored pairs warn of a cut too.
- A query whose text is another row's positive (paraphrases written both ways, chains) does not rank that
  document, which it matches exactly, unless it is relevant to it (BEIR's ignore_identical_ids).
"""

import csv
import functools

import numpy as np
import pytest

from tasks.embedding import data as pair_data
from tasks.embedding import TextEmbeddingTask
from tests import tiny

MODEL = {"preset": "", "vocab_size": 1000, "embedding_size": 16, "hidden_size": 32, "num_hidden_layers": 1,
         "num_attention_heads": 2, "intermediate_size": 64, "max_position_embeddings": 32,
         "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0}
WORDS = "alpha beta gamma delta epsilon zeta theta iota kappa lambda sigma omega river stone cloud field".split()
make_task = functools.partial(tiny.build_task, TextEmbeddingTask, "text_embedding")


def write_pairs(path, rows):
  with open(path, "w", newline="", encoding="utf-8") as f:
    writer = csv.writer(f)
    writer.writerow(("anchor", "positive"))
    writer.writerows(rows)
  return str(path)


def sentences(count, seed):
  rng = np.random.RandomState(seed)
  return [(" ".join(rng.choice(WORDS, 5)), " ".join(rng.choice(WORDS, 6))) for _ in range(count)]


def config(train_file, dev_file, spm_model_file, validation_steps=-1, **task):
  data = {"global_batch_size": 8, "seq_length": 16, "seed": 7}
  out = tiny.finetune_override(MODEL, train_file, dev_file, spm_model_file, 1, 1e-3, data, **task)
  out["trainer"]["validation_steps"] = validation_steps
  return out


def test_validation_steps_scores_the_rows_evaluated_with_a_warning(tmp_path, spm_model_file, caplog):
  """A 20-row dev file is 3 batches of 8; validation_steps=1 evaluates the first 8 rows: 8 queries against their 8
  positives (before: "8 evaluated pairs for 20 rows ...; the records are stale — delete task.records_dir")."""
  train_file = write_pairs(tmp_path / "train.csv", sentences(16, 0))
  dev = write_pairs(tmp_path / "dev.csv", sentences(20, 1))
  with caplog.at_level("WARNING"):
    results = tiny.train_run("text_embedding", tmp_path / "m", config(train_file, dev, spm_model_file, 1))
  results = results["eval_results"]
  assert (results["queries"], results["corpus"]) == (8, 8), results
  assert 0 <= results["recall@1"] <= results["recall@10"] == 1.0 and np.isfinite(results["eval_loss"]), results
  assert f"evaluated 8 of 20 rows of {dev} (trainer.validation_steps" in caplog.text


def test_records_naming_rows_the_file_lacks_are_still_stale(tmp_path, spm_model_file):
  dev = write_pairs(tmp_path / "dev.csv", sentences(3, 1))
  task = make_task(config(dev, dev, spm_model_file))
  task.build_inputs(task.params.validation_data)
  vectors = np.eye(3)
  for index in ([0, 1, 3], [0, 1, 1]):
    with pytest.raises(ValueError, match=r"has 3 rows; the records are stale — delete task.records_dir"):
      task.retrieval_results(vectors, vectors, np.array(index))


@pytest.mark.parametrize("lower, corpus, recall", [(True, 4, 1.0), (False, 5, 5 / 7)])
def test_positives_the_tokenizer_reads_alike_are_one_document(tmp_path, spm_model_file, lower, corpus, recall):
  """Pairs of positives the model reads as one input: rows 0 and 1 differ in case, accents and spaces only; rows 2 and
  3 only after seq_length (16) cuts them; rows 4 and 5 only in characters that both become <unk>. Row 6's is another.
  Given the vectors the model gives them (one per pair), each pair is one document and a perfect model scores 1.0;
  a tokenizer that keeps case reads rows 0 and 1 as two texts, two documents with one vector: each of their queries
  finds the other's document tied with its own, and equal scores rank the relevant last (`retrieval_metrics`'
  ties), so both miss at rank 1 (by corpus order, row 0's query hit and row 1's missed: 6/7).
  Keyed by a normalised text (before), the cut and the <unk> pairs were two documents each, whatever the tokenizer."""
  dev = tmp_path / "dev.csv"
  long = " ".join(WORDS[:14])
  write_pairs(dev, [("where is the big stone", "The café stone is big."),
                    ("which stone is large", " the cafe\u0301  stone is BIG. "),
                    ("a long one", long + " river stone"), ("a longer one", long + " cloud field"),
                    ("a sunny stone", "the stone \u263a"), ("a rainy stone", "the stone \u2602"),
                    ("what is a river", "A river is water.")])
  task = make_task(config(str(dev), str(dev), spm_model_file, do_lower_case=lower))
  task.build_inputs(task.params.validation_data)
  positives = np.eye(4)[[0, 0, 1, 1, 2, 2, 3]]
  results = task.retrieval_results(positives, positives, np.arange(7))
  assert (results["queries"], results["corpus"], results["recall@1"]) == (7, corpus, pytest.approx(recall)), results


def test_a_rewritten_dev_file_is_scored_with_its_new_rows(tmp_path, spm_model_file, caplog):
  """The dev file rewritten between evaluations (2 rows for 3): its records are rebuilt, and so are the texts that
  name queries and documents. Before, the first read's 3 rows stayed: "evaluated 2 of 3 rows" and 2 queries, where
  the new file has one anchor with two positives."""
  dev = tmp_path / "dev.csv"
  write_pairs(dev, [("q river", "river water"), ("q stone", "stone rock"), ("q cloud", "cloud sky")])
  task = make_task(config(str(dev), str(dev), spm_model_file))
  task.build_inputs(task.params.validation_data)
  assert task.retrieval_results(np.eye(3), np.eye(3), np.arange(3))["queries"] == 3
  write_pairs(dev, [("q cloud", "cloud sky"), ("q cloud", "cloud sky again")])
  task.build_inputs(task.params.validation_data)
  with caplog.at_level("WARNING"):
    results = task.retrieval_results(np.eye(2), np.eye(2), np.arange(2))
  assert (results["queries"], results["corpus"], results["recall@10"]) == (1, 2, 1.0), results
  assert "evaluated" not in caplog.text


def test_scored_pairs_cut_by_validation_steps_warn_too(tmp_path, spm_model_file, caplog):
  """Spearman / Pearson over 8 of 20 scored pairs (trainer.validation_steps=1, batches of 8) say so, as the retrieval
  metrics do (before: no word of it)."""
  dev = tmp_path / "dev.csv"
  with open(dev, "w", newline="", encoding="utf-8") as f:
    csv.writer(f).writerows([("anchor", "positive", "score")] + [(a, p, i / 20) for i, (a, p) in
                                                                 enumerate(sentences(20, 1))])
  task = make_task(config(str(dev), str(dev), spm_model_file, 1, score_column="score", loss="cosent"))
  task.build_inputs(task.params.validation_data)
  vectors = np.random.RandomState(0).normal(size=(8, 4)).astype(np.float32)
  logs = {"anchor_embedding": [vectors], "positive_embedding": [vectors[::-1].copy()],
          "example_index": [np.arange(8)], "score": [np.arange(8, dtype=np.float32) / 20]}
  with caplog.at_level("WARNING"):
    results = task.reduce_aggregated_logs(logs)
  assert np.isfinite(results["spearman"]) and np.isfinite(results["eval_loss"]), results
  assert f"evaluated 8 of 20 rows of {dev} (trainer.validation_steps ended evaluation early); spearman" in caplog.text


def test_a_query_does_not_rank_its_own_text_when_that_is_another_rows_positive(tmp_path, spm_model_file):
  """Paraphrases written both ways, (A, B), (B, A), (C, D), (D, C): each anchor is also a document, which, the same
  input, scores cosine 1.0 and ranked first though not relevant. Left out of its own query's ranking (BEIR's
  ignore_identical_ids), an ideal embedder (each text next to its paraphrase) scores 1.0 (was recall@1 0.0, mrr@10
  0.5, ndcg@10 0.631, whatever the model)."""
  texts = {"A": "the river runs to the sea", "B": "a river flows into the ocean", "C": "clouds bring the rain",
           "D": "rain falls from the clouds"}
  rows = [("A", "B"), ("B", "A"), ("C", "D"), ("D", "C")]
  dev = write_pairs(tmp_path / "dev.csv", [(texts[a], texts[p]) for a, p in rows])
  task = make_task(config(dev, dev, spm_model_file))
  task.build_inputs(task.params.validation_data)
  vector = {"A": [1, 0.1, 0, 0], "B": [1, 0, 0.1, 0], "C": [0, 0, 1, 0.1], "D": [0, 0.1, 1, 0]}
  anchors = np.array([vector[a] for a, _ in rows], np.float64)
  positives = np.array([vector[p] for _, p in rows], np.float64)
  results = task.retrieval_results(anchors, positives, np.arange(4))
  assert (results["queries"], results["corpus"]) == (4, 4), results
  assert {k: results[k] for k in ("recall@1", "mrr@10", "ndcg@10")} == pytest.approx(
      {"recall@1": 1.0, "mrr@10": 1.0, "ndcg@10": 1.0}), results


def test_evaluation_sets_ignore_a_querys_own_text_unless_relevant():
  """A chain (a, b), (b, c): query b is document 0's text, left out of its ranking; a row (d, d), whose anchor is its
  own positive, keeps that document: it is relevant."""
  query_rows, documents, relevant, ignore = pair_data.evaluation_sets([("a", "b"), ("b", "c"), ("d", "d")])
  assert (query_rows, documents) == ([0, 1, 2], [0, 1, 2])
  assert relevant == {"0": {"0"}, "1": {"1"}, "2": {"2"}}
  assert ignore == {"1": {"0"}}
