"""Tests of the pretraining-data creator (reference §3): sampler statistics, SOP, records, determinism, bad input."""

import collections
import dataclasses
import glob
import gzip
import hashlib
import json
import os
import random
import subprocess
import sys
import time

import numpy as np
import pytest
import tensorflow as tf

from data_prep import create_pretraining_data as cpd
from data_prep import pretraining_instances as pi
from data_prep import pretraining_records

CLS, SEP, MASK = 2, 3, 4
SEQ = 64
PREDS = 10

REFERENCE_SPEC = {
    "input_ids": (tf.int64, SEQ), "input_mask": (tf.int64, SEQ), "segment_ids": (tf.int64, SEQ),
    "token_boundary": (tf.int64, SEQ), "masked_lm_positions": (tf.int64, PREDS),
    "masked_lm_ids": (tf.int64, PREDS), "masked_lm_weights": (tf.float32, PREDS),
    "next_sentence_labels": (tf.int64, 1),
}


# ------------------------------------------------------------------------------------------------------ helpers
def synthetic_vocab(size=1000, start_fraction=0.6, seed=0):
  """ids 0..4 = <pad> <unk> [CLS] [SEP] [MASK]; other ids are start pieces with probability start_fraction."""
  rng = np.random.default_rng(seed)
  is_start = rng.random(size) < start_fraction
  is_start[:5] = [True, True, False, False, False]
  return pi.VocabInfo(is_start=is_start, cls_id=CLS, sep_id=SEP, mask_id=MASK)


def random_pair(rng, vocab, length):
  """[CLS] A [SEP] B [SEP] of `length` tokens with random ids >= 5."""
  body = rng.integers(5, vocab.vocab_size, size=length - 3).astype(np.int32)
  cut = int(rng.integers(1, length - 3))
  return np.concatenate([[CLS], body[:cut], [SEP], body[cut:], [SEP]]).astype(np.int32)


def word_groups(tokens, vocab):
  """Candidate groups per the reference: a non-start piece joins the previous group; [CLS]/[SEP] are skipped."""
  groups = []
  for i, t in enumerate(tokens.tolist()):
    if t in (CLS, SEP):
      continue
    if groups and not vocab.is_start[t]:
      groups[-1].append(i)
    else:
      groups.append([i])
  return groups


def write_corpus(path, docs, raw_suffix=b""):
  text = "\n\n".join("\n".join(sentences) for sentences in docs) + "\n"
  with open(path, "wb") as f:
    f.write(text.encode("utf-8") + raw_suffix)
  return str(path)


def corpus_docs(num_docs=40, seed=7):
  """Documents of plain English-like sentences (varied lengths; some one-sentence documents)."""
  rng = random.Random(seed)
  words = ("the module returns a value when the function is called with arguments and the result is cached for "
           "later use by other threads in the process while errors are raised as exceptions").split()
  docs = []
  for d in range(num_docs):
    n = 1 if d % 7 == 0 else rng.randint(2, 9)
    docs.append([" ".join(rng.choice(words) for _ in range(rng.randint(3, 18))).capitalize() + "."
                 for _ in range(n)])
  return docs


def make_config(tmp_path, spm_model_file, input_file, name="out", **kwargs):
  option_names = {f.name for f in dataclasses.fields(pi.InstanceOptions)}
  options = pi.InstanceOptions(max_seq_length=SEQ, max_predictions_per_seq=PREDS,
                               **{k: kwargs.pop(k) for k in list(kwargs) if k in option_names})
  defaults = dict(input_file=input_file, output_file=str(tmp_path / name), spm_model_file=spm_model_file,
                  options=options, dupe_factor=2, random_seed=3, progress=False, shuffle_buffer_size=50)
  defaults.update(kwargs)
  return cpd.GenerationConfig(**defaults)


def read_bytes(paths):
  out = []
  for p in paths:
    with open(p, "rb") as f:
      out.append(f.read())
  return out


def parse_records(path):
  return [tf.train.Example.FromString(r.numpy()) for r in tf.data.TFRecordDataset(path)]


@pytest.fixture(scope="module")
def corpus_file(tmp_path_factory):
  return write_corpus(tmp_path_factory.mktemp("corpus") / "corpus.txt", corpus_docs())


# ----------------------------------------------------------------------------------------------- start pieces
@pytest.mark.parametrize("piece,expected", [
    ("▁the", True), ("ing", False), ("ING", False), ("<unk>", True), (",", True), ("'s", True), ("s'", True),
    ("é", True), ("1", True), ("ab1", True), ("€", True), ("£", True), ("(", True), ("a.b", False), ("=", True),
])
def test_start_piece_rule(piece, expected):
  assert pi.is_start_piece_sp(piece) is expected


# ----------------------------------------------------------------------------------------------- serialisation
def test_encode_examples_equals_protobuf_serialization():
  rng = np.random.default_rng(0)
  features = {
      "input_ids": rng.integers(0, 30000, size=(6, 17)),
      "input_mask": rng.integers(0, 2, size=(6, 17)),
      "big": np.array([[0, 127, 128, 16383, 16384, 2 ** 21, 2 ** 28, 2 ** 35, 2 ** 62]] * 6),
      "masked_lm_weights": rng.random((6, 5)).astype(np.float32),
      "next_sentence_labels": rng.integers(0, 2, size=(6, 1)),
      "empty_ints": np.zeros((6, 0), np.int64),
      "empty_floats": np.zeros((6, 0), np.float32),
  }
  ours = pretraining_records.encode_examples(features)
  for r in range(6):
    feats = {}
    for k, v in features.items():
      if v.dtype.kind == "f":
        feats[k] = tf.train.Feature(float_list=tf.train.FloatList(value=v[r].tolist()))
      else:
        feats[k] = tf.train.Feature(int64_list=tf.train.Int64List(value=v[r].tolist()))
    expected = tf.train.Example(features=tf.train.Features(feature=feats)).SerializeToString(deterministic=True)
    assert ours[r] == expected
  with pytest.raises(ValueError, match="negative"):
    pretraining_records.encode_examples({"x": np.array([[-1]])})


# ------------------------------------------------------------------------------------------------ the sampler
def test_masking_budget_exact_without_whole_word():
  vocab = synthetic_vocab()
  rng = np.random.default_rng(1)
  for length, prob, max_pred in [(7, 0.15, 20), (10, 0.15, 20), (17, 0.15, 20), (30, 0.15, 20), (128, 0.15, 20),
                                 (128, 0.15, 5), (512, 0.15, 20), (64, 0.5, 40), (5, 0.01, 20)]:
    opts = pi.InstanceOptions(max_seq_length=max(length, 5), max_predictions_per_seq=max_pred,
                              masked_lm_prob=prob, do_whole_word_mask=False)
    expected = min(max_pred, max(1, int(round(length * prob))))
    for s in range(5):
      tokens = random_pair(rng, vocab, length)
      positions, _ = pi.create_masked_lm_predictions(tokens, opts, vocab, random.Random(s))
      assert len(positions) == expected, (length, prob, max_pred)
  assert min(20, max(1, int(round(512 * 0.15)))) == 20


def test_sampler_statistics_and_invariants():
  """Many synthetic sequences: p(n) ∝ 1/n, 80/10/10, budget, sorted in-range positions, words never split."""
  vocab = synthetic_vocab()
  opts = pi.InstanceOptions(max_seq_length=128, max_predictions_per_seq=20)
  stats = pi.InstanceStats(opts.ngram)
  data_rng = np.random.default_rng(2)
  rng = random.Random(5)
  replaced = collections.Counter()
  for _ in range(3000):
    length = int(data_rng.integers(20, 129))
    tokens = random_pair(data_rng, vocab, length)
    positions, replacements = pi.create_masked_lm_predictions(tokens, opts, vocab, rng, stats)
    budget = min(20, max(1, int(round(length * 0.15))))
    assert 1 <= len(positions) <= budget
    assert positions == sorted(set(positions))
    assert all(0 < p < length and tokens[p] not in (CLS, SEP) for p in positions)
    masked = set(positions)
    for group in word_groups(tokens, vocab):
      inside = [p in masked for p in group]
      assert all(inside) or not any(inside), "a whole-word group was split"
    for p, r in zip(positions, replacements):
      assert 0 <= r < vocab.vocab_size
      replaced["mask" if r == MASK else "keep" if r == tokens[p] else "random"] += 1
  drawn = np.array(stats.ngram_drawn, float)
  np.testing.assert_allclose(drawn / drawn.sum(), [6 / 11, 3 / 11, 2 / 11], atol=0.012)
  masked_hist = np.array(stats.ngram_masked, float)
  assert masked_hist[0] > masked_hist[1] > masked_hist[2] > 0
  total = sum(replaced.values())
  assert total > 30000
  # A random id equal to the original counts as "keep" here (probability 1/1000 of the 10%).
  assert abs(replaced["mask"] / total - 0.8) < 0.01
  assert abs(replaced["keep"] / total - 0.1) < 0.01
  assert abs(replaced["random"] / total - 0.1) < 0.01
  assert stats.counts["replaced_mask"] + stats.counts["replaced_keep"] + stats.counts["replaced_random"] == total


def test_ngram_probabilities_reversed_without_favor_shorter():
  vocab = synthetic_vocab()
  opts = pi.InstanceOptions(max_seq_length=128, favor_shorter_ngram=False)
  stats = pi.InstanceStats(3)
  data_rng = np.random.default_rng(3)
  rng = random.Random(3)
  for _ in range(1500):
    pi.create_masked_lm_predictions(random_pair(data_rng, vocab, 128), opts, vocab, rng, stats)
  drawn = np.array(stats.ngram_drawn, float)
  np.testing.assert_allclose(drawn / drawn.sum(), [2 / 11, 3 / 11, 6 / 11], atol=0.02)


def test_permutation_targets_are_disjoint_and_doubled():
  vocab = synthetic_vocab()
  opts = pi.InstanceOptions(max_seq_length=64, max_predictions_per_seq=8, do_permutation=True,
                            do_whole_word_mask=False)
  plain = pi.InstanceOptions(max_seq_length=64, max_predictions_per_seq=8, do_whole_word_mask=False)
  data_rng = np.random.default_rng(4)
  for seed in range(20):
    tokens = random_pair(data_rng, vocab, 64)
    positions, replacements = pi.create_masked_lm_predictions(tokens, opts, vocab, random.Random(seed))
    # The masking draws come first, so the same seed without permutation gives the masked subset.
    masked, masked_repl = pi.create_masked_lm_predictions(tokens, plain, vocab, random.Random(seed))
    assert len(masked) == 8 and len(positions) == 16 and positions == sorted(set(positions))
    got = dict(zip(positions, replacements))
    assert all(got[p] == r for p, r in zip(masked, masked_repl))
    permuted = [p for p in positions if p not in set(masked)]
    assert len(permuted) == 8
    assert sorted(got[p] for p in permuted) == sorted(int(tokens[p]) for p in permuted)


def test_truncate_pair_randomly_matches_reference_loop():
  rng = random.Random(0)
  fronts = []
  for la, lb, max_tokens in [(50, 10, 40), (30, 30, 41), (30, 31, 40), (5, 100, 60), (70, 69, 125), (3, 3, 10)]:
    # The reference loop's lengths (which side loses how many tokens).
    ra, rb = la, lb
    while ra + rb > max_tokens:
      if ra > rb:
        ra -= 1
      else:
        rb -= 1
    for _ in range(200):
      a = np.arange(la)
      b = np.arange(1000, 1000 + lb)
      ta, tb, removed = pi.truncate_pair_randomly(a, b, max_tokens, rng)
      assert (len(ta), len(tb)) == (ra, rb)
      assert removed == max(0, la + lb - max_tokens)
      # Each side is a contiguous window of the original.
      assert ta.size == 0 or np.array_equal(ta, np.arange(ta[0], ta[0] + len(ta)))
      if la - ra:
        fronts.append(int(ta[0]) / (la - ra))
  assert abs(np.mean(fronts) - 0.5) < 0.05


def _sequential_document(start, sentence_lengths):
  sentences, next_id = [], start
  for n in sentence_lengths:
    sentences.append(np.arange(next_id, next_id + n, dtype=np.int32))
    next_id += n
  return sentences


def test_sop_labels_balanced_and_swapped_halves_of_one_chunk():
  """Sequential ids make order visible: label 0 → A before B; label 1 → B‖A is one contiguous chunk."""
  vocab = pi.VocabInfo(is_start=np.ones(60000, bool), cls_id=CLS, sep_id=SEP, mask_id=MASK)
  opts = pi.InstanceOptions(max_seq_length=512, masked_lm_prob=0.0, short_seq_prob=0.0)
  doc_rng = np.random.default_rng(0)
  documents = [_sequential_document(5 + 400 * d, doc_rng.integers(3, 30, size=int(doc_rng.integers(1, 12))))
               for d in range(120)]
  labels = collections.Counter()
  stats = pi.InstanceStats(3)
  for dupe in range(10):
    for d in range(len(documents)):
      for inst in pi.create_instances_from_document(documents, d, opts, vocab, random.Random(dupe * 1000 + d),
                                                    stats):
        tokens = inst.tokens
        assert tokens[0] == CLS and tokens[-1] == SEP and tokens[inst.len_a + 1] == SEP
        a, b = tokens[1:inst.len_a + 1], tokens[inst.len_a + 2:-1]
        assert len(a) >= 1 and len(b) >= 1
        doc_lo, doc_hi = 5 + 400 * d, 5 + 400 * (d + 1)
        assert a.min() >= doc_lo and a.max() < doc_hi and b.min() >= doc_lo and b.max() < doc_hi
        first, second = (a, b) if inst.sop_label == 0 else (b, a)
        joined = np.concatenate([first, second])
        np.testing.assert_array_equal(joined, np.arange(joined[0], joined[0] + len(joined)))
        labels[inst.sop_label] += 1
  total = labels[0] + labels[1]
  assert total > 1000
  assert abs(labels[1] / total - 0.5) < 0.04
  assert stats.counts["single_sentence_chunks_split"] > 0
  assert stats.counts["single_sentence_chunks_random_document"] == 0


def test_reference_compat_single_sentence_takes_random_document():
  vocab = pi.VocabInfo(is_start=np.ones(20000, bool), cls_id=CLS, sep_id=SEP, mask_id=MASK)
  opts = pi.InstanceOptions(max_seq_length=128, masked_lm_prob=0.0, short_seq_prob=0.0,
                            sop_random_document_for_single_sentence=True)
  documents = [_sequential_document(5 + 300 * d, [20] if d == 0 else [10, 12, 9]) for d in range(5)]
  for seed in range(20):
    insts = pi.create_instances_from_document(documents, 0, opts, vocab, random.Random(seed))
    assert len(insts) == 1 and insts[0].sop_label == 1
    b = insts[0].tokens[insts[0].len_a + 2:-1]
    assert b.min() >= 305, "B must come from another document"


def test_nsp_mode_labels():
  vocab = pi.VocabInfo(is_start=np.ones(20000, bool), cls_id=CLS, sep_id=SEP, mask_id=MASK)
  opts = pi.InstanceOptions(max_seq_length=64, masked_lm_prob=0.0, short_seq_prob=0.0, random_next_sentence=True)
  documents = [_sequential_document(5 + 300 * d, [8] * 12) for d in range(10)]
  labels = collections.Counter()
  for seed in range(40):
    for inst in pi.create_instances_from_document(documents, seed % 10, opts, vocab, random.Random(seed)):
      a, b = inst.tokens[1:inst.len_a + 1], inst.tokens[inst.len_a + 2:-1]
      same_doc = (a.min() - 5) // 300 == (b.min() - 5) // 300
      assert same_doc == (inst.sop_label == 0)
      if inst.sop_label == 0:
        assert a.max() < b.min()  # never swapped in NSP mode
      labels[inst.sop_label] += 1
  assert labels[0] > 0 and labels[1] > 0


# --------------------------------------------------------------------------------------------- end to end
def test_records_have_reference_features(tmp_path, spm_model_file, corpus_file):
  config = make_config(tmp_path, spm_model_file, corpus_file)
  stats = cpd.create_pretraining_data(config)
  out = str(tmp_path / "out")
  examples = parse_records(out)
  assert len(examples) == stats["records"] == stats["instances"] > 50
  from official_albert import tokenization
  tok = tokenization.FullTokenizer(spm_model_file, mode="reference")
  budget_hits = 0
  for ex in examples:
    feats = ex.features.feature
    assert set(feats) == set(REFERENCE_SPEC)
    for name, (dtype, length) in REFERENCE_SPEC.items():
      kind = "float_list" if dtype == tf.float32 else "int64_list"
      assert feats[name].WhichOneof("kind") == kind, name
      assert len(getattr(feats[name], kind).value) == length, name
    ids = np.array(feats["input_ids"].int64_list.value)
    mask = np.array(feats["input_mask"].int64_list.value)
    seg = np.array(feats["segment_ids"].int64_list.value)
    boundary = np.array(feats["token_boundary"].int64_list.value)
    pos = np.array(feats["masked_lm_positions"].int64_list.value)
    labels = np.array(feats["masked_lm_ids"].int64_list.value)
    weights = np.array(feats["masked_lm_weights"].float_list.value)
    n = int(mask.sum())
    assert np.all(mask[:n] == 1) and np.all(mask[n:] == 0) and np.all(ids[n:] == 0) and np.all(seg[n:] == 0)
    m = int(weights.sum())
    assert np.all(weights[:m] == 1.0) and np.all(weights[m:] == 0.0) and np.all(pos[m:] == 0)
    assert np.all(labels[m:] == 0)
    real_pos = pos[:m]
    assert np.all(np.diff(real_pos) > 0) and real_pos.min() > 0 and real_pos.max() < n
    original = ids.copy()
    original[real_pos] = labels[:m]
    assert original[0] == CLS and original[n - 1] == SEP and np.count_nonzero(original[:n] == SEP) == 2
    assert not np.isin(labels[:m], [CLS, SEP]).any()
    sep_a = int(np.flatnonzero(original == SEP)[0])
    assert np.all(seg[:sep_a + 1] == 0) and np.all(seg[sep_a + 1:n] == 1)
    pieces = tok.convert_ids_to_tokens(original[:n])
    expected_boundary = [1 if p in ("[CLS]", "[SEP]") or pi.is_start_piece_sp(p) else 0 for p in pieces]
    assert boundary[:n].tolist() == expected_boundary and np.all(boundary[n:] == 0)
    budget = min(PREDS, max(1, int(round(n * 0.15))))
    assert m <= budget
    budget_hits += m == budget
    assert ex.features.feature["next_sentence_labels"].int64_list.value[0] in (0, 1)
  assert budget_hits > len(examples) // 2
  with open(f"{out}.stats.json") as f:
    written = json.load(f)
  assert written["records"] == len(examples)
  assert 0.05 < written["masked_fraction"] <= 0.16
  assert abs(written["sop_label_1_fraction"] - 0.5) < 0.15
  assert set(written["ngram_drawn_histogram"]) == {"1", "2", "3"}
  assert written["replaced_mask"] + written["replaced_keep"] + written["replaced_random"] == written["masked_tokens"]
  # The SentencePiece model is recorded, so the pretraining task can refuse records of two models of one size.
  with open(spm_model_file, "rb") as f:
    assert written["generation"]["spm_model_sha256"] == hashlib.sha256(f.read()).hexdigest()


@pytest.mark.slow
def test_deterministic_bytes_and_worker_independence(tmp_path, spm_model_file, corpus_file):
  a = make_config(tmp_path, spm_model_file, corpus_file, name="a", num_output_shards=2)
  b = make_config(tmp_path, spm_model_file, corpus_file, name="b", num_output_shards=2, num_workers=2)
  c = make_config(tmp_path, spm_model_file, corpus_file, name="c", num_output_shards=2, random_seed=4)
  d = make_config(tmp_path, spm_model_file, corpus_file, name="d", num_output_shards=2)
  outs = {k: cpd.create_pretraining_data(cfg)["output_files"] for k, cfg in zip("abcd", (a, b, c, d))}
  assert read_bytes(outs["a"]) == read_bytes(outs["d"])
  assert read_bytes(outs["a"]) == read_bytes(outs["b"])  # 2 worker processes
  assert all(x != y for x, y in zip(read_bytes(outs["a"]), read_bytes(outs["c"])))


def test_same_records_for_any_shard_count(tmp_path, spm_model_file, corpus_file):
  """Per-document seeds: in SOP mode the multiset of records does not depend on --num_output_shards."""
  one = cpd.create_pretraining_data(make_config(tmp_path, spm_model_file, corpus_file, name="one"))
  three = cpd.create_pretraining_data(make_config(tmp_path, spm_model_file, corpus_file, name="three",
                                                  num_output_shards=3))
  assert len(three["output_files"]) == 3 and three["output_files"][0].endswith("three-00000-of-00003")
  recs_one = sorted(r.numpy() for r in tf.data.TFRecordDataset(one["output_files"]))
  recs_three = sorted(r.numpy() for r in tf.data.TFRecordDataset(three["output_files"]))
  assert recs_one == recs_three


def test_rerun_skips_finished_shards_and_repairs_changed_ones(tmp_path, spm_model_file, corpus_file):
  config = make_config(tmp_path, spm_model_file, corpus_file, num_output_shards=3)
  first = cpd.create_pretraining_data(config)
  files = first["output_files"]
  original = read_bytes(files)
  mtimes = [os.stat(f).st_mtime_ns for f in files]
  second = cpd.create_pretraining_data(config)
  assert (second["shards_skipped"], second["shards_generated"]) == (3, 0)
  assert [os.stat(f).st_mtime_ns for f in files] == mtimes
  assert second["records"] == first["records"]
  with open(files[1], "ab") as f:  # a damaged shard (same name, wrong content) is regenerated
    f.write(b"garbage")
  third = cpd.create_pretraining_data(config)
  assert (third["shards_skipped"], third["shards_generated"]) == (2, 1)
  assert read_bytes(files) == original
  changed = make_config(tmp_path, spm_model_file, corpus_file, num_output_shards=3, masked_lm_prob=0.2)
  assert cpd.create_pretraining_data(changed)["shards_generated"] == 3


def test_one_input_file_under_two_spellings_is_read_once(tmp_path, monkeypatch):
  """`a.txt,./a.txt,/abs/a.txt` is one file: reading it three times would put every document three times in."""
  write_corpus(tmp_path / "a.txt", corpus_docs(2))
  monkeypatch.chdir(tmp_path)
  assert cpd.resolve_input_files(f"a.txt,./a.txt,{tmp_path / 'a.txt'}") == ["a.txt"]
  write_corpus(tmp_path / "notes [v1].txt", corpus_docs(2))  # an existing name is no pattern ("matched no file")
  assert cpd.resolve_input_files("notes [v1].txt,a.txt") == ["notes [v1].txt", "a.txt"]


@pytest.mark.parametrize("outputs", ["out/x,out/x", "out/x,./out/x"])
def test_one_output_file_named_twice_is_refused(outputs):
  """The second shard would overwrite the first, and its records would be lost while the stats counted them."""
  with pytest.raises(ValueError, match=r"--output_file names .*out/x.* twice"):
    cpd.resolve_output_files(outputs, 0)


def test_rerun_with_other_shard_count_removes_the_earlier_shards(tmp_path, spm_model_file):
  """The documented glob `<prefix>-*` must read the new run's records only, not the earlier run's as well."""
  path = write_corpus(tmp_path / "c.txt", corpus_docs(8))
  cpd.create_pretraining_data(make_config(tmp_path, spm_model_file, path, dupe_factor=1, num_output_shards=3))
  open(tmp_path / "out-00001-of-00003.tmp-1-0-x", "w").close()  # a killed earlier run's temporary
  open(tmp_path / "out-extra.txt", "w").close()  # not a shard name: kept
  second = cpd.create_pretraining_data(make_config(tmp_path, spm_model_file, path, dupe_factor=1,
                                                   num_output_shards=2))
  assert sorted(os.listdir(tmp_path)) == sorted(["c.txt", "out.stats.json", "out-extra.txt"] + [
      f"out-{i:05d}-of-00002{suffix}" for i in range(2) for suffix in ("", ".manifest.json")])
  shard_files = glob.glob(str(tmp_path / "out-*-of-?????"))
  assert sum(len(parse_records(f)) for f in shard_files) == second["records"]


def test_killed_rerun_leaves_no_stats_file(tmp_path, spm_model_file, monkeypatch):
  """A re-run that dies mid-way leaves shards of two runs; the earlier run's stats would make them look complete."""
  path = write_corpus(tmp_path / "c.txt", corpus_docs(8))
  cpd.create_pretraining_data(make_config(tmp_path, spm_model_file, path, dupe_factor=1, num_output_shards=2))
  assert os.path.exists(tmp_path / "out.stats.json")

  def killed(tasks, config):
    assert len(tasks) == 2 and not os.path.exists(tmp_path / "out.stats.json")
    raise KeyboardInterrupt

  monkeypatch.setattr(cpd, "_run_tasks", killed)
  with pytest.raises(KeyboardInterrupt):
    cpd.create_pretraining_data(make_config(tmp_path, spm_model_file, path, dupe_factor=1, num_output_shards=2,
                                            random_seed=4))
  assert not os.path.exists(tmp_path / "out.stats.json")


def test_bad_input_missing_and_empty(tmp_path, spm_model_file):
  with pytest.raises(cpd.InputError, match="matches no file"):
    cpd.create_pretraining_data(make_config(tmp_path, spm_model_file, str(tmp_path / "nope*.txt")))
  empty = write_corpus(tmp_path / "empty.txt", [["   "], [""]])
  with pytest.raises(cpd.InputError, match="no text"):
    cpd.create_pretraining_data(make_config(tmp_path, spm_model_file, empty))
  assert not glob.glob(str(tmp_path / "out*"))


def test_bad_input_non_utf8(tmp_path, spm_model_file):
  bad = write_corpus(tmp_path / "bad.txt", corpus_docs(6), raw_suffix=b"\n\nGood line.\nBad \xff\xfe line.\n")
  with open(bad, "rb") as f:
    expected_line = [i for i, line in enumerate(f, start=1) if b"\xff" in line][0]
  with pytest.raises(cpd.InputError, match=f"bad.txt:{expected_line}: invalid UTF-8"):
    cpd.create_pretraining_data(make_config(tmp_path, spm_model_file, bad))
  assert not glob.glob(str(tmp_path / "out*"))
  stats = cpd.create_pretraining_data(make_config(tmp_path, spm_model_file, bad, errors="replace"))
  assert stats["lines_with_decode_errors"] == 1 and stats["records"] > 0


def test_one_sentence_documents_and_long_lines(tmp_path, spm_model_file):
  long_line = " ".join(["word"] * 400) + "."
  docs = [["Only one sentence here, and that is all."], ["Another single sentence."], [long_line],
          ["A normal document.", "It has two sentences."]]
  path = write_corpus(tmp_path / "odd.txt", docs)
  stats = cpd.create_pretraining_data(make_config(tmp_path, spm_model_file, path, dupe_factor=3))
  assert stats["long_lines_split"] == 1
  assert stats["single_sentence_chunks_split"] > 0
  assert stats["single_sentence_chunks_random_document"] == 0
  assert stats["records"] > 6
  for ex in parse_records(stats["output_files"][0]):
    assert sum(ex.features.feature["input_mask"].int64_list.value) <= SEQ
  truncated = cpd.create_pretraining_data(make_config(tmp_path, spm_model_file, path, name="t",
                                                      long_line_policy="truncate"))
  assert truncated["long_lines_truncated"] == 1 and truncated["long_line_tokens_dropped"] > 300


def test_failure_leaves_no_partial_shard(tmp_path, spm_model_file, corpus_file, monkeypatch):
  real = pretraining_records.serialize_instances
  calls = []

  def failing(instances, opts, vocab):
    calls.append(1)
    if len(calls) > 1:
      raise RuntimeError("disk full")
    return real(instances, opts, vocab)

  monkeypatch.setattr(pretraining_records, "serialize_instances", failing)
  config = make_config(tmp_path, spm_model_file, corpus_file, dupe_factor=12)
  with pytest.raises(RuntimeError, match="disk full"):
    cpd.create_pretraining_data(config)
  assert len(calls) == 2
  assert not glob.glob(str(tmp_path / "out*"))


@pytest.mark.slow
def test_command_line(tmp_path, spm_model_file, corpus_file):
  out = tmp_path / "cli"
  repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
  proc = subprocess.run(
      [sys.executable, "-m", "data_prep.create_pretraining_data", f"--input_file={corpus_file}",
       f"--output_file={out}", f"--spm_model_file={spm_model_file}", "--max_seq_length=64",
       "--max_predictions_per_seq=10", "--dupe_factor=1", "--random_seed=3", "--shuffle_buffer_size=50",
       "--noprogress"],
      cwd=repo, capture_output=True, text=True, timeout=300,
      env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "CUDA_VISIBLE_DEVICES": ""})
  assert proc.returncode == 0, proc.stderr[-2000:]
  summary = json.loads(proc.stdout[proc.stdout.index("{"):])
  assert summary["records"] == len(parse_records(str(out))) > 0
  assert os.path.exists(f"{out}.stats.json") and os.path.exists(f"{out}.manifest.json")


def test_beam_pipeline_matches_local_mode(tmp_path, spm_model_file, corpus_file):
  pytest.importorskip("apache_beam", reason="optional: pip install -r requirements-beam.txt")
  from data_prep import beam_pipeline
  local = cpd.create_pretraining_data(make_config(tmp_path, spm_model_file, corpus_file, name="local",
                                                  num_output_shards=3))
  config = make_config(tmp_path, spm_model_file, corpus_file, name="beam", num_output_shards=3)
  beam = beam_pipeline.run(config)
  assert read_bytes(beam["output_files"]) == read_bytes(local["output_files"])
  assert beam["records"] == local["records"] and beam["documents_read"] == local["documents_read"]
  assert beam["generation"] == local["generation"]  # the SentencePiece model's hash included
  assert beam_pipeline.run(config)["shards_skipped"] == 3


def _eager_pipeline(config, input_files, outputs, spm_hash, summary_path, started, pipeline_args, runner):
  """`beam_pipeline.run_pipeline` without Beam: its own steps (count, key, group, generate, summarise), eagerly."""
  from data_prep import beam_pipeline
  files = list(enumerate(input_files))
  counts = [beam_pipeline.count_documents(f, config.errors) for f in files]
  groups = collections.defaultdict(list)
  for f in files:
    for shard, doc in beam_pipeline.keyed_documents(f, dict(counts), config.errors, len(outputs)):
      groups[shard].append(doc)
  manifests = [beam_pipeline.generate(s, groups[s], config, outputs, spm_hash) for s in range(len(outputs))]
  beam_pipeline.write_summary([manifests, counts], summary_path, input_files, outputs, config, started, spm_hash)


def test_beam_mode_starts_and_ends_its_run_as_local_mode(tmp_path, spm_model_file, corpus_file, monkeypatch):
  """Beam mode shares local mode's first and last steps: a re-run with another --num_output_shards removed no shard
  of the earlier run (`<output>-*` read both), the old stats file and a killed run's temporaries stayed during the
  run, and a corpus with no instance wrote empty shards and a stats file instead of raising InputError."""
  from data_prep import beam_pipeline
  monkeypatch.setattr(beam_pipeline, "run_pipeline", _eager_pipeline)
  monkeypatch.setattr(beam_pipeline, "require_beam", lambda: None)  # (the eager pipeline stands in for Beam)
  local = cpd.create_pretraining_data(make_config(tmp_path, spm_model_file, corpus_file, name="local",
                                                  num_output_shards=2))
  beam_pipeline.run(make_config(tmp_path, spm_model_file, corpus_file, name="train", num_output_shards=3))
  config = make_config(tmp_path, spm_model_file, corpus_file, name="train", num_output_shards=2)
  stats_path = str(tmp_path / "train.stats.json")
  with open(str(tmp_path / "train-00000-of-00002.tmp-999999999-x"), "w") as f:
    f.write("left by a killed run")

  def checked(*args):
    assert not os.path.exists(stats_path) and not glob.glob(str(tmp_path / "*.tmp-*"))  # gone before the pipeline
    _eager_pipeline(*args)
  monkeypatch.setattr(beam_pipeline, "run_pipeline", checked)
  beam = beam_pipeline.run(config)
  assert read_bytes(beam["output_files"]) == read_bytes(local["output_files"]) and beam["records"] == local["records"]
  assert sorted(os.path.basename(p) for p in glob.glob(str(tmp_path / "train-*")) if "manifest" not in p) == [
      "train-00000-of-00002", "train-00001-of-00002"]
  assert json.load(open(stats_path))["records"] == local["records"]
  # the stats record the SentencePiece model's hash as local mode's (the pretraining task refuses records of two
  # models by it; Beam-made stats had none)
  assert json.load(open(stats_path))["generation"] == json.load(open(str(tmp_path / "local.stats.json")))["generation"]
  assert "spm_model_sha256" in beam["generation"]
  assert not glob.glob(str(tmp_path / "train.stats.json.*"))
  monkeypatch.setattr(beam_pipeline, "run_pipeline", _eager_pipeline)
  path = write_corpus(tmp_path / "tiny.txt", [["a"], ["b"]])  # one-token documents: no pair can be made
  with pytest.raises(cpd.InputError, match="no instance could be made"):
    beam_pipeline.run(make_config(tmp_path, spm_model_file, path, name="empty", num_output_shards=2))
  assert not glob.glob(str(tmp_path / "empty*"))


def test_permutation_records_have_doubled_targets(tmp_path, spm_model_file, corpus_file):
  stats = cpd.create_pretraining_data(make_config(tmp_path, spm_model_file, corpus_file, do_permutation=True,
                                                  dupe_factor=1))
  examples = parse_records(stats["output_files"][0])
  assert stats["permuted_tokens"] > 0
  for ex in examples:
    feats = ex.features.feature
    assert len(feats["masked_lm_positions"].int64_list.value) == 2 * PREDS
    assert len(feats["masked_lm_weights"].float_list.value) == 2 * PREDS
    m = int(sum(feats["masked_lm_weights"].float_list.value))
    pos = list(feats["masked_lm_positions"].int64_list.value)[:m]
    assert pos == sorted(set(pos))


def test_spm_model_without_albert_specials_is_rejected(tmp_path, corpus_file):
  import sentencepiece as spm
  prefix = str(tmp_path / "plain")
  spm.SentencePieceTrainer.train(input=corpus_file, model_prefix=prefix, vocab_size=60, num_threads=1,
                                 minloglevel=2)  # default ids: <unk>=0 <s>=1 </s>=2, no [CLS]/[SEP]/[MASK]
  with pytest.raises(ValueError, match="plain.model.*<pad>=0"):
    cpd.create_pretraining_data(make_config(tmp_path, f"{prefix}.model", corpus_file))
  assert not glob.glob(str(tmp_path / "out*"))


def test_corpus_without_usable_text_leaves_nothing(tmp_path, spm_model_file):
  path = write_corpus(tmp_path / "tiny.txt", [["a"], ["b"]])  # one-token documents: no pair can be made
  with pytest.raises(cpd.InputError, match="no instance could be made"):
    cpd.create_pretraining_data(make_config(tmp_path, spm_model_file, path, num_output_shards=2))
  assert not glob.glob(str(tmp_path / "out*"))


# -------------------------------------------------------------------------------------------- process hygiene
def _process_table():
  """{pid: (parent pid, state)} of every process, from /proc (state "Z" = a zombie: dead, not yet reaped)."""
  table = {}
  for name in os.listdir("/proc"):
    if not name.isdigit():
      continue
    try:
      with open(f"/proc/{name}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
      continue
    table[int(name)] = (int(fields[1]), fields[0])
  return table


def _descendants(pid):
  """{pid: depth} of the live descendants of `pid` (depth 1 = children)."""
  table = _process_table()
  found, frontier, depth = {}, [pid], 0
  while frontier:
    depth += 1
    frontier = [p for p, (ppid, state) in table.items() if ppid in frontier and state != "Z"]
    found.update({p: depth for p in frontier})
  return found


def _alive(pids):
  table = _process_table()
  return sorted(p for p in pids if p in table and table[p][1] != "Z")


def _hidden_leftovers(directory):
  return sorted(n for n in os.listdir(directory) if n.startswith((".partition-", ".new-partition-")) or ".tmp-" in n)


@pytest.mark.large
@pytest.mark.timing
@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_kill_9_of_the_tool_kills_its_workers_and_a_rerun_leaves_no_spill_folder(tmp_path, spm_model_file):
  """kill -9 of `create_pretraining_data --num_workers=2` mid-generation: the workers (children of the forkserver,
  not of the tool) are gone within seconds; the killed run's `.partition-*` copy of the corpus is removed by the
  rerun, whose shards equal a clean run's byte for byte."""
  corpus = write_corpus(tmp_path / "corpus.txt", corpus_docs(num_docs=2000, seed=11))
  out_dir = tmp_path / "out"
  flags_ = [f"--input_file={corpus}", f"--output_file={out_dir / 'train'}", f"--spm_model_file={spm_model_file}",
            "--max_seq_length=64", "--max_predictions_per_seq=10", "--dupe_factor=15", "--random_seed=3",
            "--shuffle_buffer_size=50", "--num_output_shards=2", "--num_workers=2", "--noprogress"]
  repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
  with open(tmp_path / "killed.log", "wb") as log:
    proc = subprocess.Popen([sys.executable, "-m", "data_prep.create_pretraining_data"] + flags_, cwd=repo,
                            stdout=log, stderr=subprocess.STDOUT,
                            env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "CUDA_VISIBLE_DEVICES": ""})
  try:
    deadline = time.time() + 120
    while not len(glob.glob(str(out_dir / "train-*.tmp-*"))) == 2:  # both workers are writing their shard
      assert proc.poll() is None and time.time() < deadline, open(tmp_path / "killed.log").read()[-3000:]
      time.sleep(0.05)
    family = _descendants(proc.pid)
    workers = [p for p, depth in family.items() if depth == 2]  # tool → forkserver → workers
    assert len(workers) == 2 and _alive(workers) == sorted(workers), family
    assert not glob.glob(str(out_dir / "*.manifest.json"))  # killed mid-run, no shard finished
    proc.kill()
    proc.wait(timeout=30)
    deadline = time.time() + 30  # they die with the tool; the margin is for a loaded machine
    while _alive(workers) and time.time() < deadline:
      time.sleep(0.1)
    assert not _alive(workers), "the workers outlived the killed tool"
    # Orphaned workers that ran on would finish their shards (manifests appear); ones that died with the tool cannot.
    assert not glob.glob(str(out_dir / "*.manifest.json")), "orphaned workers went on writing shards"
    deadline = time.time() + 30  # the forkserver and resource tracker exit once no worker holds their pipes
    while _alive(family) and time.time() < deadline:
      time.sleep(0.2)
    assert not _alive(family), "helper processes outlived the killed tool"
  finally:
    if proc.poll() is None:
      proc.kill()
      proc.wait()
  left = _hidden_leftovers(out_dir)
  assert any(n.startswith(".partition-") for n in left), left  # what the rerun must clean up

  config = make_config(tmp_path, spm_model_file, corpus, name="out/train", dupe_factor=15, num_output_shards=2)
  rerun = cpd.create_pretraining_data(config)
  assert _hidden_leftovers(out_dir) == []
  assert rerun["shards_generated"] == 2
  clean = cpd.create_pretraining_data(make_config(tmp_path, spm_model_file, corpus, name="clean/train",
                                                  dupe_factor=15, num_output_shards=2))
  assert read_bytes(rerun["output_files"]) == read_bytes(clean["output_files"])


@pytest.mark.timing
def test_stale_spill_folders_are_removed_only_when_their_owner_is_dead(tmp_path):
  from data_prep import pretraining_processes as processes
  holder = subprocess.Popen([sys.executable, "-c", (
      "import fcntl, os, sys, time\n"
      "os.makedirs(sys.argv[1])\n"
      "fd = os.open(os.path.join(sys.argv[1], 'owner.lock'), os.O_RDWR | os.O_CREAT)\n"
      "fcntl.flock(fd, fcntl.LOCK_EX)\n"
      "print('locked', flush=True)\n"
      "time.sleep(60)\n"), str(tmp_path / ".partition-live")], stdout=subprocess.PIPE, text=True)
  try:
    assert holder.stdout.readline().strip() == "locked"
    old, recent = tmp_path / ".partition-old-unlocked", tmp_path / ".partition-recent-unlocked"
    for d in (old, recent):
      d.mkdir()
      (d / "shard-00000.txt").write_text("a copy of the corpus")
    os.utime(old, (time.time() - 2 * processes.UNLOCKED_SPILL_MAX_AGE_SECONDS,) * 2)
    unrelated = tmp_path / "partition-not-hidden"
    unrelated.mkdir()
    with processes.spill_directory(str(tmp_path)) as mine:
      assert os.path.basename(mine).startswith(f".partition-{os.getpid()}-")
      assert os.path.exists(os.path.join(mine, processes.SPILL_LOCK_NAME))
      # A live owner (the holder, or this run) keeps its folder; an old lock-less one (an older version's) goes.
      assert sorted(os.listdir(tmp_path)) == sorted([".partition-live", ".partition-recent-unlocked",
                                                     os.path.basename(mine), "partition-not-hidden"])
      assert processes.remove_stale_spill_dirs(str(tmp_path)) == []
  finally:
    holder.kill()
    holder.wait()
  assert not os.path.exists(mine)
  assert processes.remove_stale_spill_dirs(str(tmp_path)) == [str(tmp_path / ".partition-live")]
  assert sorted(os.listdir(tmp_path)) == [".partition-recent-unlocked", "partition-not-hidden"]


def test_special_token_text_is_counted_in_the_default_hf_mode(tmp_path, spm_model_file):
  """The recipe's default mode ("hf") maps a "[SEP]" written in the corpus to the [SEP] id, like HF; the data tool
  counts such lines (and warns) instead of changing them silently; "reference" keeps the text plain."""
  docs = corpus_docs(12) + [["The pair layout is [CLS] A [SEP] B [SEP] in every record.", "Nothing special here."]]
  path = write_corpus(tmp_path / "special.txt", docs)
  hf = cpd.create_pretraining_data(make_config(tmp_path, spm_model_file, path, name="hf"))
  assert hf["generation"]["tokenizer_mode"] == "hf" and hf["lines_with_special_token_text"] == 1
  reference = cpd.create_pretraining_data(make_config(tmp_path, spm_model_file, path, name="reference",
                                                      tokenizer_mode="reference"))
  assert reference.get("lines_with_special_token_text", 0) == 0


def test_a_live_runs_temporary_shard_is_kept_and_a_dead_ones_removed(tmp_path, caplog):
  """A second run on the same --output_file removed the first, live run's temporary shard, which then failed at its
  rename after all its work; a killed run's leftover is still removed."""
  from data_prep import pretraining_files  # noqa: PLC0415
  out = str(tmp_path / "train")
  done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True,
                        check=True)
  child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])  # (not getppid: 0 under PID 1)
  live, dead = f"{out}.tmp-{child.pid}-0-abc", f"{out}.tmp-{int(done.stdout)}-0-def"
  for name in (live, dead):
    open(name, "w").close()
  try:
    pretraining_files.remove_temporaries([out])
  finally:
    child.kill()
    child.wait()
  assert os.path.exists(live) and not os.path.exists(dead)
  assert "is being written by a live process" in caplog.text


def leading_fragment_pair():
  """`[CLS] cont cont start cont start [SEP] start cont start [SEP]` and its vocabulary (ids 5..9 continuation pieces,
  10..19 start pieces): A begins with the tail of a word, as a cut at A's front leaves it. Reference word groups:
  [1, 2] [3, 4] [5] [7, 8] [9]."""
  is_start = np.zeros(20, bool)
  is_start[:2] = True
  is_start[10:] = True
  vocab = pi.VocabInfo(is_start=is_start, cls_id=CLS, sep_id=SEP, mask_id=MASK)
  return np.array([CLS, 5, 6, 10, 7, 11, SEP, 12, 8, 13, SEP], np.int32), vocab


def masked_group_counts(masked_sets, groups):
  """Per group, how many of the masked position sets hold it; each set must be a union of whole groups."""
  counts = [0] * len(groups)
  for masked in masked_sets:
    assert masked <= set().union(*groups), sorted(masked)
    for i, group in enumerate(groups):
      inside = [p in masked for p in group]
      assert all(inside) or not any(inside), f"word {group} split: masked {sorted(masked)}"
      counts[i] += all(inside)
  return counts


def test_a_leading_continuation_piece_is_a_word_of_its_own():
  """The reference's first candidate always opens a group (its group list is empty), even a continuation piece, so a
  fragment left at A's front is masked like any word: alone and whole. Without that rule it was never masked, which
  the split-word check of test_sampler_statistics_and_invariants cannot see."""
  tokens, vocab = leading_fragment_pair()
  groups = word_groups(tokens, vocab)
  assert groups == [[1, 2], [3, 4], [5], [7, 8], [9]]
  opts = pi.InstanceOptions(max_seq_length=16, max_predictions_per_seq=5, masked_lm_prob=0.3)
  masked_sets = [set(pi.create_masked_lm_predictions(tokens, opts, vocab, random.Random(seed))[0])
                 for seed in range(500)]
  counts = masked_group_counts(masked_sets, groups)
  assert min(counts) > 0, counts
  # Its own word: masked without the next word in a share like any 2-piece word's (~1/4 here).
  alone = sum({1, 2} <= m and 3 not in m for m in masked_sets)
  assert alone > 50, (alone, counts)


@pytest.fixture(scope="module")
def cased_spm_model_file(tmp_path_factory):
  """A small vocabulary trained cased (`train_sentencepiece --do_lower_case=false`): pieces like '▁Paris'."""
  from data_prep import train_sentencepiece as tsp
  folder = tmp_path_factory.mktemp("cased_spm")
  text = "\n".join(" ".join(s for s in doc) for doc in corpus_docs(60, seed=1)).replace("the", "The Paris")
  (folder / "corpus.txt").write_text(text + "\n", encoding="utf-8")
  return tsp.train_sentencepiece([str(folder / "corpus.txt")], str(folder / "cased"), vocab_size=80,
                                 do_lower_case=False, hard_vocab_limit=False)


def test_a_cased_vocabulary_with_lower_cased_data_is_warned_about_once(tmp_path, spm_model_file, corpus_file,
                                                                        cased_spm_model_file, caplog):
  """The documented command (`--do_lower_case` default true) on a cased vocabulary left every upper-case piece
  unused, silently; the warning names the file and a few pieces. The fixture (uncased, as ALBERT's released
  vocabularies) and --do_lower_case=false do not warn."""
  caplog.set_level("WARNING")
  cpd.create_pretraining_data(make_config(tmp_path, cased_spm_model_file, corpus_file, dupe_factor=1))
  warnings = [r.getMessage() for r in caplog.records if "upper-case letters" in r.getMessage()]
  assert len(warnings) == 1, caplog.text
  assert cased_spm_model_file in warnings[0] and "'▁Paris'" in warnings[0] and "--do_lower_case=false" in warnings[0]
  caplog.clear()
  cpd.create_pretraining_data(make_config(tmp_path, cased_spm_model_file, corpus_file, name="cased", dupe_factor=1,
                                          do_lower_case=False))
  cpd.create_pretraining_data(make_config(tmp_path, spm_model_file, corpus_file, name="uncased", dupe_factor=1))
  assert "upper-case letters" not in caplog.text


def test_a_gzip_corpus_gives_the_records_of_the_plain_one(tmp_path, spm_model_file, corpus_file):
  """`corpus.txt.gz` is read as it decompresses: the same records, byte for byte; a cut one names the file."""
  with open(corpus_file, "rb") as f:
    packed = gzip.compress(f.read())
  (tmp_path / "corpus.txt.gz").write_bytes(packed)
  plain = cpd.create_pretraining_data(make_config(tmp_path, spm_model_file, corpus_file, name="plain"))
  compressed = cpd.create_pretraining_data(make_config(tmp_path, spm_model_file, str(tmp_path / "corpus.txt.gz"),
                                                       name="gz"))
  assert read_bytes(compressed["output_files"]) == read_bytes(plain["output_files"]) and plain["records"] > 0
  (tmp_path / "cut.txt.gz").write_bytes(packed[:len(packed) // 2])
  with pytest.raises(cpd.InputError, match=r"cut\.txt\.gz: not a readable gzip file after line \d+ \(EOFError"):
    cpd.create_pretraining_data(make_config(tmp_path, spm_model_file, str(tmp_path / "cut.txt.gz"), name="cut"))
  assert not glob.glob(str(tmp_path / "cut-*"))
