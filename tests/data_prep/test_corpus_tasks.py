"""data_prep.corpus_tasks: the labelled tasks made from the demo corpus (prose lines, word order, topic families,
the long-range task's sentence pools). Seeded, so the same seed writes the same files."""

import csv

import pytest

from data_prep import corpus_tasks


def test_prose_lines_keep_unique_sentences_only():
  lines = ["Return the number of items in the container.", "x = f(a, b)  # not prose at all here",
           "Return the number of items in the container.", "too short.", "lower case start of a long sentence here.",
           "Open   the file and  return a stream object."]
  assert corpus_tasks.prose_lines(lines) == ["Return the number of items in the container.",
                                             "Open the file and return a stream object."]


def _corpus_file(path, count, offset):
  words = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota", "kappa"]
  lines = [" ".join(["Sentence"] + [words[(i + j) % 10] for j in range(offset % 3 + 6)]) + f" number{i}." for i in
           range(offset, offset + count)]
  path.write_text("\n".join(lines) + "\n", encoding="utf-8")
  return str(path)


def test_order_task_holds_each_sentence_in_order_and_shuffled(tmp_path):
  train, heldout = _corpus_file(tmp_path / "train.txt", 80, 0), _corpus_file(tmp_path / "heldout.txt", 40, 500)
  made = corpus_tasks.make_order_task(str(tmp_path / "out"), train, heldout, seed=3, max_train=60, max_dev=200)
  assert made["counts"]["train"]["sentences"] == 30 and made["counts"]["dev"]["sentences"] == 40
  for split in ("train", "dev"):
    with open(made["files"][split], encoding="utf-8") as f:
      rows = list(csv.DictReader(f))
    for first, second in zip(rows[::2], rows[1::2]):  # each sentence's two rows side by side: the same words
      assert (first["label"], second["label"]) == (corpus_tasks.ORIGINAL, corpus_tasks.SHUFFLED)
      assert sorted(first["text"].split()) == sorted(second["text"].split()) and first["text"] != second["text"]
      assert first["text"] == first["text"].lower() and not first["text"].endswith(".")
  again = corpus_tasks.make_order_task(str(tmp_path / "again"), train, heldout, seed=3, max_train=60, max_dev=200)
  assert open(again["files"]["train"]).read() == open(made["files"]["train"]).read()  # seeded
  with pytest.raises(ValueError, match="Too few prose sentences"):
    corpus_tasks.make_order_task(str(tmp_path / "few"), train, _corpus_file(tmp_path / "few.txt", 5, 0), 0, 60, 60)


def test_topic_task_is_balanced_and_splits_by_document(tmp_path):
  made = corpus_tasks.make_topic_task(str(tmp_path), seed=0, max_train=100)
  assert made["families"] == ["files", "networking"]
  assert made["counts"]["train"] == {"examples": 100, "per_class": 50, "majority_accuracy": 0.5}
  rows = {}
  for split in ("train", "dev"):
    with open(tmp_path / "finetune" / "data" / "SST-2" / f"{split}.tsv", encoding="utf-8") as f:
      rows[split] = list(csv.DictReader(f, delimiter="\t"))
    labels = [r["label"] for r in rows[split]]
    assert labels.count("0") == labels.count("1") == made["counts"][split]["per_class"]
  assert made["counts"]["dev"]["per_class"] >= 20


def test_topic_task_dev_rows_are_never_training_rows(tmp_path):
  """The split is by document, but one docstring sentence sits in several documents: with the whole training pool
  (max_train as in early_exit/study.py) 6 of 298 dev rows were also training rows."""
  corpus_tasks.make_topic_task(str(tmp_path), seed=0, max_train=4000)
  sentences = {}
  for split in ("train", "dev"):
    with open(tmp_path / "finetune" / "data" / "SST-2" / f"{split}.tsv", encoding="utf-8") as f:
      sentences[split] = {r["sentence"] for r in csv.DictReader(f, delimiter="\t")}
  assert sentences["dev"] and not sentences["dev"] & sentences["train"]


def test_order_task_dev_leaves_out_sentences_of_the_pretraining_text(tmp_path):
  """Held out by document, yet a held-out sentence can be a line of the pretraining text (the same docstring sentence
  in several documents): such a sentence, compared lower-cased without its stop, is not a dev sentence."""
  train = _corpus_file(tmp_path / "train.txt", 80, 0)
  with open(train, encoding="utf-8") as f:
    lines = f.read().splitlines()
  heldout = _corpus_file(tmp_path / "heldout.txt", 40, 500)
  with open(heldout, "a", encoding="utf-8") as f:  # 10 training lines, one with another case and spacing
    f.write("\n".join(lines[:9] + [lines[9].upper().replace(" ", "  ")]) + "\n")
  made = corpus_tasks.make_order_task(str(tmp_path / "out"), train, heldout, seed=3, max_train=60, max_dev=200)
  assert made["counts"]["dev"]["sentences"] == 40
  trained = {" ".join(line.lower().rstrip(".").split()) for line in lines}
  with open(made["files"]["dev"], encoding="utf-8") as f:
    assert not {r["text"] for r in csv.DictReader(f) if r["label"] == corpus_tasks.ORIGINAL} & trained


@pytest.fixture(scope="module")
def pools():
  return corpus_tasks.sentence_pools()


def test_marked_keys_name_their_family_and_the_filler_names_none(pools):
  marked = corpus_tasks.sentence_pools(keys="marked")
  families = corpus_tasks.marker_families
  assert families("Copy the file to the socket.") == {0, 1} and families("Return the profile.") == set()
  assert marked["filler"] and all(not families(x) for x in marked["filler"])
  assert set(marked["filler"]) <= set(pools["filler"])
  for split in ("train", "dev"):
    for label in (0, 1):
      keys = marked[split][label]
      assert len(keys) >= 50 and set(keys) <= set(pools[split][label])  # a subset of the topic keys
      assert all(families(x) == {label} for x in keys), split
  with pytest.raises(ValueError, match="keys='names' is not one of"):
    corpus_tasks.sentence_pools(keys="names")


def test_pools_keep_dev_keys_apart_from_training_keys_and_filler(pools):
  train = set(pools["train"][0]) | set(pools["train"][1])
  for label in (0, 1):
    dev = set(pools["dev"][label])
    assert dev and not dev & train and not dev & set(pools["filler"])
    assert not set(pools["dev"][label]) & set(pools["dev"][1 - label])
