"""`token_classification`: CoNLL / JSONL readers, first-piece alignment, entity F1, and the train binary end to end."""

import dataclasses
import glob
import json
import logging
import os

import numpy as np
import pytest
import tensorflow as tf

from official_albert import train
from official_albert.serving import served_heads
from official_albert.serving import task_pipelines
from official_albert.tokenization import FullTokenizer
from official_albert.tokenization.alignment import whitespace_words
from tasks import text
from tasks.text import data as text_data
from tasks.text import metrics as text_metrics
from tasks.text import tagging
from tests.tasks.test_text_classification import _data
from tests.tasks.test_text_classification import _override
from tests.tasks.test_text_classification import TINY_MODEL

TYPES = {"john": "PER", "mary": "PER", "paris": "LOC", "london": "LOC", "acme": "ORG"}


def _sentences(n):
  names = sorted(TYPES)
  out = []
  for i in range(n):
    a, b = names[i % 5], names[(i * 2 + 1) % 5]
    out.append(([a.capitalize(), "visited", b.capitalize(), "yesterday", "."],
                [f"B-{TYPES[a]}", "O", f"B-{TYPES[b]}", "O", "O"]))
  return out


def _write_conll(path, sentences, with_tags=True):
  lines = ["-DOCSTART- -X- O", ""]
  for tokens, tags in sentences:
    lines += [f"{t} NN {g}" if with_tags else t for t, g in zip(tokens, tags)] + [""]
  path.write_text("\n".join(lines) + "\n")


# --------------------------------------------------------------------------------------------------- alignment
def test_tags_land_on_first_pieces_and_map_back_to_words(spm_model_file):
  tokenizer = FullTokenizer(spm_model_file)
  words = ["Internationalization", "of", "Pythonic", "documentation"]
  pieces = text_data.word_pieces(tokenizer, [text_data.TextExample("f", 1, "1", tokens=words)])[0]
  assert [len(p) for p in pieces][0] > 1 and len(pieces[2]) > 1  # words split into several pieces
  labels = ["B-X", "I-X", "O"]
  example = text_data.TextExample("f", 1, "1", tokens=words, label=["B-X", "O", "B-X", "I-X"])
  record, cut = text_data.token_record(example, pieces, 64, labels)
  assert cut == 0
  starts = np.flatnonzero(record["word_starts"])
  expected = 1 + np.concatenate([[0], np.cumsum([len(p) for p in pieces])[:-1]])
  np.testing.assert_array_equal(starts, expected)
  np.testing.assert_array_equal(record["label_ids"][starts], [0, 2, 0, 1])
  others = np.setdiff1d(np.arange(64), starts)
  assert np.all(record["label_ids"][others] == text.IGNORE_LABEL)
  n = sum(len(p) for p in pieces)
  assert list(record["input_word_ids"][1:1 + n]) == [i for p in pieces for i in p]

  # Cut at seq_length: the words whose first piece does not fit get no position.
  short = len(pieces[0]) + 2 + 1  # [CLS] + word 0 + word 1 ("of": one piece) + [SEP]
  ids, first = text_data.align_words(pieces, short)
  assert first == [1, 1 + len(pieces[0]), None, None] and len(ids) == short - 2
  record, cut = text_data.token_record(example, pieces, short, labels)
  assert cut == 2 and int(record["word_starts"].sum()) == 2
  # The records split such a sentence at word boundaries instead: every word is in one of its sub-sentences.
  assert text_data.sub_sentences(pieces, short) == [(0, 2), (2, 4)]
  parts = text_data.token_records(example, pieces, short, labels, sentence_id=7)
  assert [(int(r["sentence_id"]), int(r["sub_sentence_id"])) for r in parts] == [(7, 0), (7, 1)]
  joined = np.concatenate([r["label_ids"][r["word_starts"] > 0] for r in parts])
  np.testing.assert_array_equal(joined, [0, 2, 0, 1])


def test_words_without_a_piece_are_counted_logged_and_written_as_unk(tmp_path, caplog, spm_model_file):
  """Before: a word that tokenizes to no piece (a lone zero-width space, a BOM) lost its tag (gold B-LOC gone from the
  records and the entity recall's denominator). As the reference, it is written as <unk>, so its tag is scored."""
  path = tmp_path / "ner.conll"
  path.write_text("Ann B-PER\n\u200b B-LOC\nParis B-LOC\n\nBob B-PER\n\ufeff O\n\n", encoding="utf-8")
  options = text_data.ReadOptions(input_format="conll", label_kind="tags")
  examples = text_data.read_token_examples(str(path), options)
  assert [e.tokens for e in examples] == [["Ann", "\u200b", "Paris"], ["Bob", "\ufeff"]]
  tokenizer = FullTokenizer(spm_model_file)
  assert text_data.word_pieces(tokenizer, examples)[0][1] == []
  with caplog.at_level(logging.WARNING):
    records = list(text_data.records(examples, tokenizer, 16, "tags", ["B-LOC", "B-PER", "O"]))
  assert [int(r["word_starts"].sum()) for r in records] == [3, 2]
  position = np.flatnonzero(records[0]["word_starts"])[1]
  assert records[0]["input_word_ids"][position] == tokenizer.convert_tokens_to_ids(["<unk>"])[0]
  assert records[0]["label_ids"][position] == 0  # B-LOC
  assert f"2 words have no SentencePiece piece (e.g. '\\u200b' at {path}:1): each is written as <unk>" in caplog.text
  assert "were split" not in caplog.text  # (they are not words beyond max_seq_length)


def test_a_no_break_space_is_inside_a_conll_token_but_splits_the_pipelines_words(tmp_path):
  """What docs/recipe.md and `alignment.whitespace_words` say: the two word splits differ at U+00A0 / U+3000."""
  path = tmp_path / "ner.conll"
  path.write_text("10\u00a0000 B-NUM\nParis\u3000Nord B-LOC\n\n", encoding="utf-8")
  options = text_data.ReadOptions(input_format="conll", label_kind="tags")
  assert text_data.read_token_examples(str(path), options)[0].tokens == ["10\u00a0000", "Paris\u3000Nord"]
  assert [w for w, _, _ in whitespace_words("10\u00a0000 Paris\u3000Nord")] == ["10", "000", "Paris", "Nord"]


def test_predictions_give_every_word_of_a_long_sentence_a_tag(spm_model_file):
  """Before: words past seq_length were in no record and got the tag None (CoNLL `_`)."""
  params = train.build_params("token_classification", params_override=json.dumps({"task": {
      "model": TINY_MODEL, "labels": ["B-X", "O"], "spm_model_file": spm_model_file,
      "predict_data": _data("", batch=2) | {"seq_length": 6}}}))
  task = text.TokenClassificationTask(params.task)
  example = text_data.TextExample("f", 1, "1", tokens=["a", "Internationalization", "b", "c", "\u200b"])
  records = list(text_data.records([example], task.tokenizer, 6, "tags", []))
  assert len(records) > 1 and {int(r["sentence_id"]) for r in records} == {0}
  assert sum(int(r["word_starts"].sum()) for r in records) == 5
  tags, scores = task.word_predictions(example, np.arange(5) % 2, np.full(5, 0.5))
  assert tags == ["B-X", "O", "B-X", "O", "B-X"] and scores == [0.5] * 5
  with pytest.raises(ValueError, match="stale"):
    task.word_predictions(example, np.zeros(4, int), np.zeros(4))
  # Predict outputs arriving in another order (replicas) are put back by their ids.
  outputs = {"word_starts": np.stack([r["word_starts"] for r in records])[::-1],
             "pred_ids": np.stack([r["word_starts"] * 0 + i for i, r in enumerate(records)])[::-1],
             "pred_scores": np.ones([len(records), 6], np.float32),
             **{k: np.stack([r[k] for r in records])[::-1] for k in ("sentence_id", "sub_sentence_id")}}
  ids, joined = tagging.join_sub_sentences(task.aggregate_logs(None, outputs), ("pred", "scores"))
  assert ids == [0] and list(joined["pred"][0]) == sorted(joined["pred"][0]) and len(joined["pred"][0]) == 5
  # Records made before the split (sentence id -1, a TFRecord given as input_path) are each a sentence, in order.
  old = {"sentence_id": [-1, -1], "sub_sentence_id": [-1, -1], "pred": [np.array([1]), np.array([2, 3])]}
  assert tagging.join_sub_sentences(old, ("pred",))[0] == [-1, -1]
  assert [list(p) for p in tagging.join_sub_sentences(old, ("pred",))[1]["pred"]] == [[1], [2, 3]]


def _eval_outputs(records, predict):
  """What the trainer hands `aggregate_logs` for `records` (shuffled, as replicas may gather them), the model's tag
  at each labelled position given by `predict(label_ids)`."""
  order = np.random.default_rng(0).permutation(len(records))
  gold = np.stack([records[i]["label_ids"] for i in order])
  return {"label_ids": gold, "pred_ids": predict(gold),
          **{k: np.stack([records[i][k] for i in order]) for k in tagging.SENTENCE_KEYS}}


def test_a_sentence_longer_than_seq_length_is_scored_whole(spm_model_file):
  """Before: only the words of the first seq_length pieces were scored (entity recall 1.0 with two gold entities
  never seen) and a partly cut entity counted as a correct one-word entity."""
  labels = ["B-LOC", "B-PER", "I-PER", "O"]
  params = train.build_params("token_classification", params_override=json.dumps({"task": {
      "model": TINY_MODEL, "labels": labels, "spm_model_file": spm_model_file}}))
  task = text.TokenClassificationTask(params.task)
  tokens = ["Ann", "Smith", "met"] + ["x"] * 6 + ["Bob", "Jones", "in", "Paris"]
  gold = ["B-PER", "I-PER", "O"] + ["O"] * 6 + ["B-PER", "I-PER", "O", "B-LOC"]
  short = ["Bob", "in", "Paris"], ["B-PER", "O", "B-LOC"]
  examples = [text_data.TextExample("dev.conll", 1, "1", tokens=tokens, label=gold),
              text_data.TextExample("dev.conll", 20, "20", tokens=short[0], label=short[1])]
  records = list(text_data.records(examples, task.tokenizer, 12, "tags", labels))
  assert len(records) > 3 and [int(r["sentence_id"]) for r in records].count(0) == len(records) - 1
  perfect = task.reduce_aggregated_logs(task.aggregate_logs(None, _eval_outputs(records, lambda g: np.maximum(g, 0))))
  assert perfect == text_metrics.entity_scores([gold, short[1]], [gold, short[1]])
  assert perfect["entity_recall"] == 1.0 and perfect["entity_f1"] == 1.0
  # A model that tags everything past the long sentence's first record "O" misses Bob Jones and Paris there.
  seen = int((records[0]["label_ids"] >= 0).sum())
  assert seen < len(tokens)
  outputs = _eval_outputs(records, lambda g: np.maximum(g, 0))
  blind = (outputs["sentence_id"] == 0) & (outputs["sub_sentence_id"] > 0)
  outputs["pred_ids"][blind] = labels.index("O")
  scores = task.reduce_aggregated_logs(task.aggregate_logs(None, outputs))
  assert scores == text_metrics.entity_scores([gold, short[1]], [gold[:seen] + ["O"] * (len(tokens) - seen), short[1]])
  assert scores["entity_recall"] == 3 / 5 and scores["entity_f1"] < 1.0
  # Streamed in two steps (eval batches), the result is the same.
  half = len(records) // 2
  state = task.aggregate_logs(None, {k: v[:half] for k, v in outputs.items()})
  state = task.aggregate_logs(state, {k: v[half:] for k, v in outputs.items()})
  assert task.reduce_aggregated_logs(state) == scores
  # An entity across the cut: B-PER ends the first sub-sentence, I-PER starts the next. A model that tags that I-PER
  # B-PER finds two entities where there is one (F1 0). Scored per record, the join skipped, each part reads as an
  # entity of its own, both "found" (F1 1.0): micro scores are sums, so only such an entity tells the join is done.
  across = ["O"] * len(tokens)
  across[seen - 1], across[seen] = "B-PER", "I-PER"
  records = list(text_data.records([dataclasses.replace(examples[0], label=across)], task.tokenizer, 12, "tags",
                                   labels))
  outputs = _eval_outputs(records, lambda g: np.maximum(g, 0))
  second = np.flatnonzero(outputs["sub_sentence_id"] == 1)[0]
  outputs["pred_ids"][second, np.flatnonzero(outputs["label_ids"][second] >= 0)[0]] = labels.index("B-PER")
  predicted = across[:seen] + ["B-PER"] + across[seen + 1:]
  scores = task.reduce_aggregated_logs(task.aggregate_logs(None, outputs))
  assert scores == text_metrics.entity_scores([across], [predicted]) and scores["entity_f1"] == 0.0


def _evaluate(task, input_path, predict):
  """Metrics of `input_path` through the task's input pipeline, the model's tag at each labelled position
  `predict(gold)`: what the trainer's evaluation hands `aggregate_logs`, records decoded as the run decodes them."""
  state = None
  for batch in task.build_inputs(task.params.validation_data.replace(input_path=input_path)):
    gold = batch["label_ids"].numpy()
    logits = tf.one_hot(predict(np.maximum(gold, 0)), len(task.labels))
    outputs = task.eval_outputs(batch, batch, {"logits": logits})
    state = task.aggregate_logs(state, {k: v.numpy() for k, v in outputs.items()})
  return task.reduce_aggregated_logs(state)


def test_records_files_evaluated_together_score_as_their_raw_files(tmp_path, spm_model_file):
  """Before: sentence ids count from 0 in each records file, so two cached records files listed in
  validation_data.input_path joined sentence k of each into one (other entity scores than the raw files)."""
  labels = ["B-PER", "I-PER", "O"]
  a, b = tmp_path / "a.conll", tmp_path / "b.conll"
  a.write_text("Ann B-PER\n\nx O\ny O\n\n")
  b.write_text("Smith I-PER\nz O\n\nBob B-PER\nJones I-PER\n\n")
  params = train.build_params("token_classification", params_override=json.dumps({"task": {
      "model": TINY_MODEL, "labels": labels, "spm_model_file": spm_model_file, "records_dir": str(tmp_path / "rec"),
      "validation_data": _data("", batch=3)}}))
  task = text.TokenClassificationTask(params.task)

  def b_tagged(gold):  # a model that tags every I-PER B-PER
    return np.where(gold == 1, 0, gold)

  raw = _evaluate(task, f"{a},{b}", b_tagged)
  gold = [["B-PER"], ["O", "O"], ["I-PER", "O"], ["B-PER", "I-PER"]]
  pred = [["B-PER"], ["O", "O"], ["B-PER", "O"], ["B-PER", "B-PER"]]
  assert raw == text_metrics.entity_scores(gold, pred) and raw["entity_f1"] == pytest.approx(4 / 7)
  cached = [task.record_path(task.params.validation_data.replace(input_path=str(p))) for p in (a, b)]
  assert _evaluate(task, ",".join(cached), b_tagged) == raw
  # Records made before records_id (-1), two files listed together: their sentences cannot be told apart.
  old = {"sentence_id": [0, 0], "sub_sentence_id": [0, 0], "pred": [np.array([1]), np.array([2])]}
  with pytest.raises(ValueError, match=r"sub-sentence 0 of sentence 0 \(records_id -1\) was met 2 times.*List the "
                                       r"raw CoNLL / JSONL files in input_path"):
    tagging.join_sub_sentences(old, ("pred",))


# --------------------------------------------------------------------------------------------------- entity F1
def test_entity_f1_follows_conlleval_chunks():
  gold = [["O", "O", "O", "B-MISC", "I-MISC", "I-MISC", "O"], ["B-PER", "I-PER", "O"]]
  pred = [["O", "O", "B-MISC", "I-MISC", "I-MISC", "I-MISC", "O"], ["B-PER", "I-PER", "O"]]
  scores = text_metrics.entity_scores(gold, pred)  # the seqeval README example: P = R = F1 = 0.5
  assert (scores["entity_precision"], scores["entity_recall"], scores["entity_f1"]) == (0.5, 0.5, 0.5)
  assert text_metrics.entities(["I-PER", "I-PER", "O", "I-LOC"]) == [("PER", 0, 1), ("LOC", 3, 3)]  # IOB1
  assert text_metrics.entities(["O", "I-PER", "B-PER", "B-PER"]) == [("PER", 1, 1), ("PER", 2, 2), ("PER", 3, 3)]
  assert text_metrics.entities(["B-PER", "I-LOC"]) == [("PER", 0, 0), ("LOC", 1, 1)]  # a type change splits
  assert text_metrics.entities(["S-LOC", "B-ORG", "I-ORG", "E-ORG", "E-ORG"]) == [
      ("LOC", 0, 0), ("ORG", 1, 3), ("ORG", 4, 4)]  # IOBES
  assert text_metrics.entities(["PER", "PER", "O"]) == [("PER", 0, 1)]  # no prefix: IO tags
  perfect = text_metrics.entity_scores([["B-A", "O"]], [["B-A", "O"]])
  assert perfect["entity_f1"] == 1.0 and perfect["token_accuracy"] == 1.0
  # Untyped BIO (keyphrase sets): a bare B / I is that prefix with an empty type, as seqeval reads it (a bare B was
  # an I of type "B": `B I I` made two entities and `B B` one).
  assert text_metrics.entities(["B", "I", "I", "O", "B", "B"]) == [("", 0, 2), ("", 4, 4), ("", 5, 5)]
  untyped = text_metrics.entity_scores([["B", "I", "O", "O"], ["B", "B", "O"]], [["B", "O", "O", "O"], ["B", "O", "O"]])
  assert (untyped["entity_precision"], untyped["entity_recall"]) == (0.5, 1 / 3)
  # Lower-case tags: `o` is outside, as `b-` is B (each run of `o` words was an entity of type "o": a model that
  # found no person scored entity F1 0.57).
  assert text_metrics.entities(["b-per", "i-per", "o", "o", "b-loc"]) == [("per", 0, 1), ("loc", 4, 4)]
  lower = text_metrics.entity_scores([["b-per", "o", "o"]], [["o", "o", "o"]])
  assert lower["entity_f1"] == 0.0


def test_macro_f1_averages_the_classes_that_occur_as_scikit_learn():
  """A class of the model absent from both labels and predictions is left out (it counted as 0)."""
  labels, preds = np.array([0, 0, 1, 1]), np.array([0, 1, 1, 1])
  f1_0, f1_1 = 2 / 3, 0.8
  assert text_metrics.macro_f1(labels, preds, 3) == pytest.approx((f1_0 + f1_1) / 2)
  assert text_metrics.macro_f1(labels, np.array([0, 0, 1, 2]), 3) == pytest.approx((1 + 2 / 3 + 0) / 3)


def test_multi_label_accuracy_is_at_the_models_threshold():
  """label_accuracy counted at 0.5 while micro_f1 and subset_accuracy used the model's threshold."""
  labels = np.array([[1, 0], [0, 1]], np.float32)
  preds = np.array([[0.4, 0.1], [0.2, 0.35]]) >= 0.3
  scores = text_metrics.multi_label_scores(labels, preds)
  assert scores == {"micro_f1": 1.0, "subset_accuracy": 1.0, "label_accuracy": 1.0}


# --------------------------------------------------------------------------------------------------- bad rows
def test_token_bad_rows_are_named(tmp_path):
  conll = tmp_path / "a.conll"
  conll.write_text("John B-PER\nvisited O\n\nMary\nran O\n")
  options = text_data.ReadOptions(label_kind="tags", text_column="tokens", label_column="tags")
  with pytest.raises(text.TextDataError, match=r"a\.conll:4: no tag column -1 \(the line has 1 columns\)"):
    text_data.read_token_examples(str(conll), options)
  jsonl = tmp_path / "a.jsonl"
  jsonl.write_text('{"tokens": ["a", "b"], "tags": ["O"]}\n')
  with pytest.raises(text.TextDataError, match=r"a\.jsonl:1: 2 tokens but 1 tags"):
    text_data.read_token_examples(str(jsonl), options)
  # A named id key null or missing (a null id was the id "None", a missing one the line number).
  with_id = text_data.ReadOptions(label_kind="tags", text_column="tokens", label_column="tags", id_column="id")
  for row, message in (('{"id": null, "tokens": ["a"], "tags": ["O"]}', "key 'id' is null"),
                       ('{"tokens": ["a"], "tags": ["O"]}', "no 'id' key")):
    jsonl.write_text(row + "\n")
    with pytest.raises(text.TextDataError, match=rf"a\.jsonl:1: {message}"):
      text_data.read_token_examples(str(jsonl), with_id)
  # A lone surrogate escape (an emoji cut in half) is named with its key: it failed deep in SentencePiece.
  jsonl.write_text('{"tokens": ["great", "\\ud83d"], "tags": ["O", "O"]}\n')
  with pytest.raises(text.TextDataError, match=r"a\.jsonl:1: item 1 of key 'tokens' holds a lone UTF-16 surrogate"):
    text_data.read_token_examples(str(jsonl), options)
  jsonl.write_text('{"tokens": ["a"], "tags": ["B-NEW"]}\n{"tokens": ["b"], "tags": ["O"]}\n')
  with pytest.raises(text.TextDataError, match=r"a\.jsonl:1: tag 'B-NEW' was not seen in training"):
    text_data.read_token_examples(str(jsonl), text_data.ReadOptions(label_kind="tags", text_column="tokens",
                                                                    label_column="tags", labels=("O",)))
  skipped = text_data.read_token_examples(str(jsonl), text_data.ReadOptions(
      label_kind="tags", text_column="tokens", label_column="tags", labels=("O",), skip_bad_rows=True))
  assert [e.tokens for e in skipped] == [["b"]]



def test_jsonl_tags_are_read_as_labels_are(tmp_path):
  """JSONL tags went through str(): 1 and 1.0 were two tags, null the tag 'None', 'B-LOC ' kept its space. They are
  read as labels are (`label_text`: a whole number one tag however written, stripped, NFC); null / true / false are
  refused naming file:line, as in multi-label lists."""
  options = text_data.ReadOptions(label_kind="tags", text_column="tokens", label_column="tags")
  jsonl = tmp_path / "a.jsonl"
  jsonl.write_text('{"tokens": ["Paris", "is"], "tags": [1, 0]}\n{"tokens": ["Rome", "too"], "tags": [1.0, 0.0]}\n'
                   '{"tokens": ["Oslo", "!"], "tags": ["B-LOC ", "O"]}\n')
  examples = text_data.read_token_examples(str(jsonl), options)
  assert [e.label for e in examples] == [["1", "0"], ["1", "0"], ["B-LOC", "O"]]
  assert text_data.label_set(examples) == ["0", "1", "B-LOC", "O"]
  for value in ("null", "true", '["O"]', '" "'):
    jsonl.write_text('{"tokens": ["a"], "tags": ["O"]}\n{"tokens": ["Oslo"], "tags": [%s]}\n' % value)
    with pytest.raises(text.TextDataError, match=r"a\.jsonl:2: key 'tags': tag .* is not a tag"):
      text_data.read_token_examples(str(jsonl), options)
  # A CoNLL tag in NFD (e + combining accent) is labels.json's NFC tag, in either spelling of the fixed set.
  nfc, nfd = "B-\u00c9TAT", "B-E\u0301TAT"
  conll = tmp_path / "a.conll"
  conll.write_text(f"France {nfd}\n\n", encoding="utf-8")
  for fixed in (("O", nfc), ("O", nfd)):
    (example,) = text_data.read_token_examples(str(conll), text_data.ReadOptions(label_kind="tags", labels=fixed))
    assert example.label == [fixed[1]]  # (the fixed set's own spelling, so that records use its output)
    record, _ = text_data.token_record(example, [[7]], 8, list(fixed))
    assert record["label_ids"][1] == 1



def test_float_tags_of_a_model_trained_when_they_were_read_as_str_keep_their_outputs(tmp_path):
  """JSONL tags 1.0 / 0.0 (pandas writes an int column with a gap so) were read as str(t), so a model trained then
  has labels.json ['0.0', '1.0']; now read as '1' / '0', its own eval file was refused ("tag '1' was not seen in
  training") and so was resuming its training ("added" labels). A row's tag is looked up by its old spelling too."""
  jsonl = tmp_path / "eval.jsonl"
  jsonl.write_text('{"tokens": ["John", "runs", "fast"], "tags": [1.0, 0.0, 1]}\n')
  saved = ("0.0", "1.0")
  options = text_data.ReadOptions(label_kind="tags", text_column="tokens", label_column="tags", labels=saved)
  (example,) = text_data.read_token_examples(str(jsonl), options)
  record, _ = text_data.token_record(example, [[7], [8], [9]], 8, list(saved))
  assert record["label_ids"][1:4].tolist() == [1, 0, 1]
  found = text_data.label_set(text_data.read_token_examples(str(jsonl), dataclasses.replace(options, labels=())))
  assert found == ["0", "1"] and text_data.unknown_labels(found, saved) == []
  assert text_data.unknown_labels(["0", "1", "2"], saved) == ["2"]

def test_conll_columns_split_at_spaces_and_tabs_only_and_a_missing_token_column_is_named(tmp_path):
  """A no-break space inside a token stays in it (str.split() cut "10\u00a0000" in two: "000" was dropped, or read
  as the tag); a token column a line lacks is a bad row (it was read as an empty token, silently tagged)."""
  conll = tmp_path / "a.conll"
  conll.write_text("Il\tPRON\tO\npaie\tVERB\tO\n10\u00a0000\tNUM\tB-MONEY\neuros NOUN I-MONEY\n\n", encoding="utf-8")
  (example,) = text_data.read_token_examples(str(conll), text_data.ReadOptions(label_kind="tags"))
  assert example.tokens == ["Il", "paie", "10\u00a0000", "euros"] and example.label == ["O", "O", "B-MONEY", "I-MONEY"]
  (example,) = text_data.read_token_examples(str(conll), text_data.ReadOptions(label_kind="tags", conll_tag_column=1))
  assert example.label == ["PRON", "VERB", "NUM", "NOUN"]
  new = tmp_path / "new.conll"
  new.write_text("Hello\nworld\n\n", encoding="utf-8")
  with pytest.raises(text.TextDataError, match=r"new\.conll:1: no token column 1 \(the line has 1 columns\); set "
                                               "task.conll_token_column"):
    text_data.read_token_examples(str(new), text_data.ReadOptions(label_kind="tags", with_labels=False,
                                                                  conll_token_column=1))


def test_conll_tab_lines_keep_spaces_comments_are_skipped_and_an_unseen_tag_names_its_own_line(tmp_path, caplog):
  """A token of a tab-separated line keeps its space ("Hà Nội" lost "Nội", or shifted the tag column onto it); a
  "#" line holding "=" before a sentence is a comment (CoNLL-U, MultiCoNER: it was a "#" word tagged "domain=en"),
  while a "#" token stays one; an unseen tag's error names the tag's line, not the sentence's first."""
  conll = tmp_path / "vi.conll"
  conll.write_text("# id 3bd\tdomain=vi\nTôi\tP\tO\nở\tE\tO\nHà Nội\tNp\tB-LOC\n#\tCH\tO\n\n"
                   "# text = Ok .\nOk\tI\tO\n.\tCH\tO\n\n", encoding="utf-8")
  with caplog.at_level(logging.INFO):
    first, second = text_data.read_token_examples(str(conll), text_data.ReadOptions(label_kind="tags"))
  assert first.tokens == ["Tôi", "ở", "Hà Nội", "#"] and first.label == ["O", "O", "B-LOC", "O"]
  assert second.tokens == ["Ok", "."] and second.label == ["O", "O"]
  assert "skipped 2 comment lines" in caplog.text
  (pos, _) = text_data.read_token_examples(str(conll), text_data.ReadOptions(label_kind="tags", conll_tag_column=1))
  assert pos.label == ["P", "E", "Np", "CH"]
  mixed = tmp_path / "mixed.conll"  # (space-separated with one tab before the tag: four columns, not a "EU NNP" token)
  mixed.write_text("EU NNP B-NP\tB-ORG\nrejects VBZ B-VP\tO\n\n", encoding="utf-8")
  (example,) = text_data.read_token_examples(str(mixed), text_data.ReadOptions(label_kind="tags"))
  assert example.tokens == ["EU", "rejects"] and example.label == ["B-ORG", "O"]
  germeval = tmp_path / "germeval.tsv.conll"  # (comments without "=", a "#" token, "#=" too)
  germeval.write_text("#\thttp://x.de [2009-10-17]\n1\tSchartau\tB-PER\tO\n2\t#\tO\tO\n\n"
                      "# newdoc\n1\t#=\tO\tO\n\n", encoding="utf-8")
  first, second = text_data.read_token_examples(str(germeval), text_data.ReadOptions(label_kind="tags",
                                                                                      conll_token_column=1,
                                                                                      conll_tag_column=2))
  assert (first.tokens, first.label, second.tokens) == (["Schartau", "#"], ["B-PER", "O"], ["#="])
  dev = tmp_path / "dev.conll"
  dev.write_text("A\tO\nB\tO\nC\tB-GPE\n\n", encoding="utf-8")
  with pytest.raises(text.TextDataError, match=r"dev\.conll:3: tag 'B-GPE' was not seen in training"):
    text_data.read_token_examples(str(dev), text_data.ReadOptions(label_kind="tags", labels=("O", "B-LOC")))


def test_integer_or_untyped_tags_are_warned_about_for_entity_f1(caplog):
  """Integer tags (a `datasets` export) made every run of the outside "0" an entity: entity_f1 meant nothing."""
  assert text_metrics.untyped_tag_set(["0", "3", "7"]) and text_metrics.untyped_tag_set(["NN", "VB"])
  assert not text_metrics.untyped_tag_set(["O", "B-PER"]) and not text_metrics.untyped_tag_set(["B", "I", "O"])
  assert not text_metrics.untyped_tag_set([])
  with caplog.at_level(logging.WARNING):
    text_metrics.warn_untyped_tags("the tags of train.jsonl", ["0", "3"])
  assert "no outside tag \"O\"" in caplog.text and "write the tag names instead" in caplog.text


# --------------------------------------------------------------------------------------------------- end to end
def test_conll_and_jsonl_end_to_end(tmp_path, spm_model_file):
  sentences = _sentences(12)
  _write_conll(tmp_path / "train.conll", sentences)
  # A sentence of more than seq_length (32) pieces: evaluated and predicted in sub-sentences, every word tagged.
  long = ["Mary", "visited", "Paris", "and"] * 9, ["B-PER", "O", "B-LOC", "O"] * 9
  (tmp_path / "dev.jsonl").write_text("".join(json.dumps({"tokens": t, "tags": g}) + "\n"
                                              for t, g in sentences[:5] + [long]))
  (tmp_path / "new.jsonl").write_text(json.dumps({"tokens": ["Mary", "visited", "Acme"]}) + "\n"
                                      + json.dumps({"tokens": long[0]}) + "\n")
  _write_conll(tmp_path / "new.conll", sentences[:2], with_tags=False)
  task = {"model": TINY_MODEL, "classifier_dropout": 0.0, "spm_model_file": spm_model_file,
          "train_data": _data(tmp_path / "train.conll", batch=4, training=True) | {"pad_to_multiple_of": 8},
          "validation_data": _data(tmp_path / "dev.jsonl", batch=4) | {"pad_to_multiple_of": 8},
          "predict_data": _data(f"{tmp_path / 'new.jsonl'},{tmp_path / 'new.conll'}", batch=2)}
  model_dir = str(tmp_path / "m")
  result = train.run("token_classification", "train_and_eval", model_dir, params_override=_override(task))
  assert {"entity_f1", "entity_precision", "entity_recall", "token_accuracy"} <= set(result["eval_results"])
  assert json.load(open(os.path.join(model_dir, text.LABELS_FILE)))["labels"] == ["B-LOC", "B-ORG", "B-PER", "O"]
  # The records' cache key names the sub-sentence layout, so records cached before it are rebuilt.
  metas = [json.load(open(m)) for m in glob.glob(os.path.join(model_dir, "records", "*.meta.json"))]
  assert metas and all(m["cache_key"]["long_sentences"] == "sub_sentences" for m in metas)

  out = train.run("token_classification", "predict", model_dir, params_override=_override(task))
  rows = [json.loads(x) for x in open(out["files"][str(tmp_path / "new.jsonl")])]
  assert rows[0]["tokens"] == ["Mary", "visited", "Acme"] and len(rows[0]["tags"]) == 3
  assert set(rows[0]["tags"]) <= {"B-LOC", "B-ORG", "B-PER", "O"}
  assert rows[1]["tokens"] == long[0] and set(rows[1]["tags"]) <= {"B-LOC", "B-ORG", "B-PER", "O"}
  assert len(rows[1]["tags"]) == len(rows[1]["scores"]) == 36 and None not in rows[1]["scores"]
  # The run's directory serves as a tagger (its records name the task; the variables are a classifier's), and the
  # tagging pipeline on it gives --mode=predict's tags.
  assert served_heads.directory_head(model_dir) == served_heads.TOKEN_CLASSIFIER
  assert [w["label"] for w in task_pipelines.token_classification(model_dir, "Mary visited Acme")] == rows[0]["tags"]
  conll = open(out["files"][str(tmp_path / "new.conll")]).read().split("\n\n")
  assert [[line.split("\t")[0] for line in block.splitlines()] for block in conll if block.strip()] == [
      s[0] for s in sentences[:2]]
