"""Tests of `data_prep.tokenize_corpus`: the static tool's tokens, shard layout, resume, stale shards, bad input."""

import glob
import json
import os

import numpy as np
import pytest
import tensorflow as tf

from data_prep import create_pretraining_data as cpd
from data_prep import pretraining_shards as shards
from data_prep import tokenize_corpus as tc
from tests.data_prep.test_create_pretraining_data import corpus_docs
from tests.data_prep.test_create_pretraining_data import write_corpus


def _config(tmp_path, spm_model_file, input_file, name="tok", **kwargs):
  kwargs.setdefault("progress", False)
  return tc.TokenizeConfig(input_file=input_file, spm_model_file=spm_model_file,
                           output_dir=str(tmp_path / name), **kwargs)


def _read_shards(output_dir):
  files = sorted(f for f in glob.glob(os.path.join(output_dir, "tokens-*")) if not f.endswith(".json"))
  spec = {"doc_index": tf.io.FixedLenFeature([1], tf.int64), "token_ids": tf.io.VarLenFeature(tf.int64),
          "word_start": tf.io.VarLenFeature(tf.int64), "sentence_lengths": tf.io.VarLenFeature(tf.int64)}
  docs = []
  for record in tf.data.TFRecordDataset(files):
    d = tf.io.parse_single_example(record, spec)
    docs.append((int(d["doc_index"][0]), tf.sparse.to_dense(d["token_ids"]).numpy(),
                 tf.sparse.to_dense(d["word_start"]).numpy(), tf.sparse.to_dense(d["sentence_lengths"]).numpy()))
  return files, docs


def test_shards_hold_the_static_tools_tokens_per_document_and_sentence(tmp_path, spm_model_file):
  docs = corpus_docs(25)
  docs.insert(3, ["", "  "])  # whitespace-only lines are blank: no document
  path = write_corpus(tmp_path / "c.txt", docs)
  config = _config(tmp_path, spm_model_file, path, documents_per_shard=10)
  stats = tc.tokenize_corpus(config)
  files, got = _read_shards(config.output_dir)
  assert [os.path.basename(f) for f in files] == ["tokens-000000", "tokens-000001", "tokens-000002"]
  # What create_pretraining_data tokenizes (its own reading + tokenizing functions, lines whole).
  gen = cpd.GenerationConfig(input_file=path, output_file="unused", spm_model_file=spm_model_file,
                             long_line_policy="keep")
  tokenizer, vocab = shards.tokenizer_and_vocab(gen)
  raw = [(i, lines) for i, (_, _, lines) in enumerate(shards.iter_documents([path]))]
  counts = {k: 0 for k in tc.COUNT_KEYS}
  indices, expected = shards.tokenize_documents(raw, tokenizer, gen, counts)
  assert [g[0] for g in got] == indices
  for (_, ids, ws, lengths), sentences in zip(got, expected):
    np.testing.assert_array_equal(ids, np.concatenate(sentences))
    np.testing.assert_array_equal(lengths, [len(s) for s in sentences])
    np.testing.assert_array_equal(ws, vocab.is_start[ids].astype(np.int64))
  assert stats["documents"] == len(expected) and stats["tokens"] == sum(len(g[1]) for g in got)
  manifest = json.load(open(files[0] + ".manifest.json"))
  assert manifest["vocab"] == {"vocab_size": vocab.vocab_size, "cls_id": 2, "sep_id": 3, "mask_id": 4}
  assert manifest["tokenization"]["long_line_policy"] == "split"
  assert not glob.glob(os.path.join(config.output_dir, "*.tmp-*"))


def test_rerun_skips_finished_shards_regenerates_changed_ones_and_removes_stale(tmp_path, spm_model_file, caplog):
  path = write_corpus(tmp_path / "c.txt", corpus_docs(30))
  config = _config(tmp_path, spm_model_file, path, documents_per_shard=10)
  assert tc.tokenize_corpus(config)["shards_skipped"] == 0
  before = {f: os.path.getmtime(f) for f in glob.glob(os.path.join(config.output_dir, "tokens-0*"))}
  again = tc.tokenize_corpus(config)
  assert again["shards_skipped"] == 3 and again["shards_written"] == 0
  assert {f: os.path.getmtime(f) for f in before} == before
  # A corrupted shard is rewritten; a shorter corpus leaves no stale shard behind.
  with open(tc.shard_path(config.output_dir, 1), "ab") as f:
    f.write(b"x")
  assert tc.tokenize_corpus(config)["shards_skipped"] == 2
  write_corpus(tmp_path / "c.txt", corpus_docs(30)[:15])
  stats = tc.tokenize_corpus(config)
  assert stats["shards"] == 2
  assert sorted(os.path.basename(f) for f in glob.glob(os.path.join(config.output_dir, "tokens-0*"))) == [
      "tokens-000000", "tokens-000000.manifest.json", "tokens-000001", "tokens-000001.manifest.json"]
  assert "past the end of the corpus" in caplog.text


def test_an_interrupted_rerun_leaves_no_stats_file(tmp_path, spm_model_file, monkeypatch):
  """Only a finished run has `tokens.stats.json`: a re-run on another corpus killed mid-way left the earlier run's
  stats beside the mix of new and old shards, so the folder looked complete with two corpora in it."""
  config = _config(tmp_path, spm_model_file, write_corpus(tmp_path / "a.txt", corpus_docs(30)), documents_per_shard=10)
  tc.tokenize_corpus(config)
  stats_path = os.path.join(config.output_dir, tc.STATS_NAME)
  assert os.path.exists(stats_path)
  real = tc.tokenize_shard

  def killed_at_shard_1(job):
    if job.index == 1:
      raise KeyboardInterrupt("killed during shard 1")
    return real(job)
  monkeypatch.setattr(tc, "tokenize_shard", killed_at_shard_1)
  changed = _config(tmp_path, spm_model_file, write_corpus(tmp_path / "b.txt", corpus_docs(30, seed=9)),
                    documents_per_shard=10)
  with pytest.raises(KeyboardInterrupt):
    tc.tokenize_corpus(changed)
  assert not os.path.exists(stats_path)


def test_bad_input_is_named_or_counted(tmp_path, spm_model_file):
  path = write_corpus(tmp_path / "bad.txt", corpus_docs(3), raw_suffix=b"caf\xe9 au lait\n")
  with pytest.raises(shards.InputError, match=r"bad.txt:\d+: invalid UTF-8.*--errors=replace"):
    tc.tokenize_corpus(_config(tmp_path, spm_model_file, path))
  stats = tc.tokenize_corpus(_config(tmp_path, spm_model_file, path, name="replaced", errors="replace"))
  assert stats["lines_with_decode_errors"] == 1
  empty = tmp_path / "empty.txt"
  empty.write_text("\n \n\n")
  with pytest.raises(shards.InputError, match="no token in --input_file"):
    tc.tokenize_corpus(_config(tmp_path, spm_model_file, str(empty), name="empty"))
  with pytest.raises(shards.InputError, match="matches no file"):
    tc.tokenize_corpus(_config(tmp_path, spm_model_file, str(tmp_path / "missing-*.txt"), name="missing"))


@pytest.mark.slow
def test_workers_write_the_same_bytes_as_one_process(tmp_path, spm_model_file):
  path = write_corpus(tmp_path / "c.txt", corpus_docs(40))
  one = _config(tmp_path, spm_model_file, path, name="one", documents_per_shard=7)
  two = _config(tmp_path, spm_model_file, path, name="two", documents_per_shard=7, num_workers=2)
  tc.tokenize_corpus(one)
  tc.tokenize_corpus(two)
  for a in sorted(glob.glob(os.path.join(one.output_dir, "tokens-0*[0-9]"))):
    b = os.path.join(two.output_dir, os.path.basename(a))
    assert open(a, "rb").read() == open(b, "rb").read(), a


def test_a_cased_vocabulary_with_lower_cased_text_is_warned_about_once(tmp_path, spm_model_file, caplog):
  """As create_pretraining_data: --do_lower_case=true (the default) with upper-case pieces warns once, naming the
  vocabulary; the uncased fixture and --do_lower_case=false do not."""
  from data_prep import train_sentencepiece as tsp
  path = write_corpus(tmp_path / "c.txt", corpus_docs(30))
  cased = tsp.train_sentencepiece([path], str(tmp_path / "cased"), vocab_size=70, do_lower_case=False,
                                  hard_vocab_limit=False)
  caplog.set_level("WARNING")
  tc.tokenize_corpus(_config(tmp_path, cased, path))
  warnings = [r.getMessage() for r in caplog.records if "upper-case letters" in r.getMessage()]
  assert len(warnings) == 1 and cased in warnings[0], caplog.text
  caplog.clear()
  tc.tokenize_corpus(_config(tmp_path, cased, path, name="cased", do_lower_case=False))
  tc.tokenize_corpus(_config(tmp_path, spm_model_file, path, name="uncased"))
  assert "upper-case letters" not in caplog.text
