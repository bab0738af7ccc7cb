"""Tests of the on-the-fly pretraining pipeline (`tasks.pretraining_dynamic`, `dynamic_masking=true`).

Checked against the static generator (`data_prep.create_pretraining_data`) on the same corpus and settings: feature
layout, exact segment packing, and the statistics the model sees; plus whole-word masks, determinism, disjoint
worker shards, resume from an iterator checkpoint and a run of the train binary.

The statistics test uses ~6k examples (seconds on 2 cores) with tolerances from the sample size; the 1%-absolute
comparison on 58k examples per side is in the issue's report (same measurement, `feature_statistics`).
"""

import collections
import json
import math
import os
import random
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from data_prep import create_pretraining_data as cpd
from data_prep import pretraining_instances as pi
from data_prep import pretraining_shards as shards
from data_prep import tokenize_corpus as tc
from official_albert.data import input_pipeline
from tasks import pretraining_dynamic as pd
from tests.conftest import CHILD_PYTHONPATH
from tests.data_prep.test_create_pretraining_data import corpus_docs
from tests.data_prep.test_create_pretraining_data import write_corpus

SEQ, PREDS = 64, 10
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(scope="module")
def corpus(tmp_path_factory, spm_model_file):
  """A 300-document corpus, tokenized (3 shards) and as static records (dupe_factor 12, same settings)."""
  root = tmp_path_factory.mktemp("dynamic")
  path = write_corpus(root / "c.txt", corpus_docs(300, seed=3))
  tc.tokenize_corpus(tc.TokenizeConfig(input_file=path, spm_model_file=spm_model_file, output_dir=str(root / "tok"),
                                       documents_per_shard=100, progress=False))
  static = cpd.create_pretraining_data(cpd.GenerationConfig(
      input_file=path, output_file=str(root / "static"), spm_model_file=spm_model_file,
      options=pi.InstanceOptions(max_seq_length=SEQ, max_predictions_per_seq=PREDS), dupe_factor=12,
      progress=False))
  return {"path": path, "tokens": str(root / "tok" / "tokens-*"), "static": str(root / "static"),
          "records": static["records"], "root": root}


def _dataset(corpus, **kwargs):
  args = dict(seq_length=SEQ, max_predictions_per_seq=PREDS, batch_size=32, is_training=True, seed=5)
  args.update(kwargs)
  return pd.dynamic_pretraining_dataset(corpus["tokens"], **args)


def _arrays(dataset, n):
  return [{k: v.numpy() for k, v in b.items()} for b in dataset.take(n)]


@pytest.mark.slow
def test_features_equal_the_static_records(corpus):
  static = input_pipeline.pretraining_dataset(corpus["static"], SEQ, PREDS, 32, True, seed=1)
  assert _dataset(corpus).element_spec == static.element_spec
  with_boundary = input_pipeline.pretraining_dataset(corpus["static"], SEQ, PREDS, 32, True, seed=1,
                                                     include_token_boundary=True)
  assert _dataset(corpus, include_token_boundary=True).element_spec == with_boundary.element_spec


def test_segment_packing_equals_the_static_generator_per_document(corpus, spm_model_file):
  """Without short targets the packing is deterministic: every document gives the static tool's instance count
  and lengths (SOP split, swap and truncation change neither)."""
  gen = cpd.GenerationConfig(input_file=corpus["path"], output_file="unused", spm_model_file=spm_model_file,
                             options=pi.InstanceOptions(max_seq_length=SEQ, short_seq_prob=0.0))
  tokenizer, vocab = shards.tokenizer_and_vocab(gen)
  raw = [(i, lines) for i, (_, _, lines) in enumerate(shards.iter_documents([corpus["path"]]))]
  counts = collections.defaultdict(int)
  indices, documents = shards.tokenize_documents(raw, tokenizer, gen, counts)
  expected = collections.defaultdict(list)
  for pos, index in enumerate(indices):
    for inst in pi.create_instances_from_document(documents, pos, gen.options, vocab, random.Random(pos)):
      expected[index].append(len(inst.tokens))
  got = collections.defaultdict(list)
  for b in _dataset(corpus, is_training=False, short_seq_prob=0.0, drop_remainder=False, include_document_index=True):
    for d, length in zip(b["doc_index"].numpy(), b["input_mask"].numpy().sum(1)):
      got[int(d)].append(int(length))
  assert {k: sorted(v) for k, v in got.items()} == {k: sorted(v) for k, v in expected.items()}


def _close(a, b, n, what, floor=0.01):
  """|a - b| within max(floor, 5 standard errors of a difference of two proportions over n samples each)."""
  p = (a + b) / 2
  tol = max(floor, 5 * math.sqrt(max(p * (1 - p), 1e-6) * 2 / n))
  assert abs(a - b) <= tol, f"{what}: static {a:.4f} vs dynamic {b:.4f} (tolerance {tol:.4f})"


@pytest.mark.slow
def test_statistics_equal_the_static_generator(corpus):
  n_batches = corpus["records"] // 256
  static = pd.feature_statistics(input_pipeline.pretraining_dataset(
      corpus["static"], SEQ, PREDS, 256, False, include_token_boundary=True).take(n_batches))
  dynamic = pd.feature_statistics(_dataset(corpus, batch_size=256, include_token_boundary=True).take(n_batches))
  n = static["examples"]
  assert n >= 5000 and dynamic["examples"] == n
  masked = int(static["predictions_per_sequence"] * n)
  for key in ("mask", "keep", "random"):
    _close(static["replacement_fractions"][key], dynamic["replacement_fractions"][key], masked, key)
  _close(static["sop_label_1_fraction"], dynamic["sop_label_1_fraction"], n, "SOP label 1")
  runs = sum(static["masked_run_histogram"].values())
  for length in ("1", "2", "3", "4"):
    _close(static["masked_run_fractions"][length], dynamic["masked_run_fractions"].get(length, 0.0), runs,
           f"masked {length}-word runs")
  # Predictions per sequence: relative difference within 1% (at most PREDS per sequence).
  a, b = static["predictions_per_sequence"], dynamic["predictions_per_sequence"]
  assert abs(a - b) / a <= 0.01 + 5 * 0.5 * PREDS / math.sqrt(n) / a, (a, b)


@pytest.mark.slow
def test_masks_fall_on_whole_words(corpus):
  batches = _arrays(_dataset(corpus, include_token_boundary=True), 40)
  stats = pd.feature_statistics(batches)
  assert stats["partially_masked_words"] == 0 and stats["predictions_per_sequence"] > 3
  # The check can fail: unmask the last piece of one masked multi-piece word.
  broken = False
  for b in batches:
    for row in range(b["input_word_ids"].shape[0]):
      pos = b["masked_lm_positions"][row][b["masked_lm_weights"][row] > 0]
      for p in pos:
        if p + 1 in pos and not b["token_boundary"][row, p + 1] and not broken:
          slot = int(np.flatnonzero(b["masked_lm_positions"][row] == p + 1)[0])
          b["masked_lm_weights"][row, slot] = 0
          broken = True
  assert broken and pd.feature_statistics(batches)["partially_masked_words"] > 0


@pytest.mark.slow
def test_same_seed_gives_identical_examples_and_another_seed_does_not(corpus):
  a = _arrays(_dataset(corpus), 6)
  b = _arrays(_dataset(corpus, block_size=7), 6)  # blocking is vectorisation only
  c = _arrays(_dataset(corpus, seed=6), 6)
  for x, y in zip(a, b):
    assert x.keys() == y.keys()
    for k in x:
      assert x[k].tobytes() == y[k].tobytes(), k
  assert any(x["input_word_ids"].tobytes() != z["input_word_ids"].tobytes() for x, z in zip(a, c))


def test_epochs_draw_new_masks(corpus):
  """Epoch e of a document is keyed by (seed, e, document): the same document gets other segments / masks."""
  seen = collections.defaultdict(set)
  for b in _arrays(_dataset(corpus, include_document_index=True, shuffle_buffer_size=1), 120):
    for d, e, ids in zip(b["doc_index"], b["epoch"], b["input_word_ids"]):
      seen[int(d)].add((int(e), ids.tobytes()))
  doc, views = max(seen.items(), key=lambda kv: len({e for e, _ in kv[1]}))
  epochs = {e for e, _ in views}
  assert len(epochs) >= 2, doc
  by_epoch = collections.defaultdict(set)
  for e, ids in views:
    by_epoch[e].add(ids)
  first, second = sorted(epochs)[:2]
  assert by_epoch[first] != by_epoch[second]


@pytest.mark.parametrize("documents_per_shard", [100, 1000])
def test_workers_read_disjoint_documents(corpus, spm_model_file, documents_per_shard):
  pattern = corpus["tokens"]
  if documents_per_shard == 1000:  # one file: documents are split by index
    out = corpus["root"] / "one_file"
    tc.tokenize_corpus(tc.TokenizeConfig(input_file=corpus["path"], spm_model_file=spm_model_file,
                                         output_dir=str(out), documents_per_shard=1000, progress=False))
    pattern = str(out / "tokens-*")
  per_worker = []
  for worker in range(2):
    ctx = tf.distribute.InputContext(num_input_pipelines=2, input_pipeline_id=worker, num_replicas_in_sync=2)
    ds = pd.dynamic_pretraining_dataset(pattern, SEQ, PREDS, 16, is_training=False, input_context=ctx, seed=5,
                                        drop_remainder=False, include_document_index=True)
    per_worker.append({int(d) for b in ds for d in b["doc_index"].numpy()})
  assert per_worker[0] and per_worker[1] and not per_worker[0] & per_worker[1]
  everything = pd.dynamic_pretraining_dataset(pattern, SEQ, PREDS, 16, is_training=False, seed=5,
                                              drop_remainder=False, include_document_index=True)
  assert per_worker[0] | per_worker[1] == {int(d) for b in everything for d in b["doc_index"].numpy()}


def test_resume_mid_epoch_from_an_iterator_checkpoint_gives_the_same_remaining_stream(corpus, tmp_path):
  it = iter(_dataset(corpus, include_document_index=True))
  for _ in range(7):
    next(it)
  prefix = tf.train.Checkpoint(iterator=it).write(str(tmp_path / "input"))
  expected = [next(it) for _ in range(5)]
  assert int(expected[0]["epoch"].numpy().min()) == 0  # still inside the first epoch
  restored = iter(_dataset(corpus, include_document_index=True))
  tf.train.Checkpoint(iterator=restored).read(prefix).assert_consumed()
  for want in expected:
    got = next(restored)
    for k in want:
      assert want[k].numpy().tobytes() == got[k].numpy().tobytes(), k


def test_bad_inputs_are_named(corpus):
  with pytest.raises(ValueError, match=r"static: its manifest .* not a shard of .*data_prep.tokenize_corpus"):
    pd.dynamic_pretraining_dataset(corpus["static"], SEQ, PREDS, 8, True)
  with pytest.raises(ValueError, match=r"stats.json: no \.manifest\.json beside it"):
    pd.dynamic_pretraining_dataset(corpus["static"] + ".stats.json", SEQ, PREDS, 8, True)
  with pytest.raises(ValueError, match="max_predictions_per_seq"):
    pd.dynamic_pretraining_dataset(corpus["tokens"], SEQ, SEQ + 1, 8, True)


@pytest.mark.large
@pytest.mark.slow
def test_train_binary_runs_with_dynamic_masking(corpus, tmp_path):
  override = {
      "task": {"model": {"vocab_size": 1000, "embedding_size": 16, "hidden_size": 32, "num_hidden_layers": 2,
                         "num_attention_heads": 2, "intermediate_size": 64, "max_position_embeddings": SEQ},
               "train_data": {"input_path": corpus["tokens"], "global_batch_size": 8, "seq_length": SEQ,
                              "max_predictions_per_seq": PREDS},
               "validation_data": {"input_path": corpus["tokens"], "global_batch_size": 8, "seq_length": SEQ,
                                   "max_predictions_per_seq": PREDS}},
      "trainer": {"train_steps": 4, "steps_per_loop": 2, "checkpoint_interval": 2, "validation_interval": 4,
                  "validation_steps": 2, "summary_interval": 2, "warmup_steps": 1},
  }
  model_dir = tmp_path / "model"
  cmd = [sys.executable, "-m", "official_albert.train", "--experiment=albert_tiny_pretrain_dynamic",
         "--mode=train_and_eval", f"--model_dir={model_dir}", f"--params_override={json.dumps(override)}"]
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=CHILD_PYTHONPATH)
  result = subprocess.run(cmd, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=600, check=False)
  assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
  metrics = json.loads((model_dir / "eval_results.json").read_text())
  assert metrics["global_step"] == 4 and math.isfinite(metrics["loss"])
  assert "dynamic_masking: true" in (model_dir / "params.yaml").read_text()


def test_sop_order_label_1_is_the_two_segments_swapped_as_in_the_static_generator():
  """The static generator's rule (tests/data_prep: label 0 → A before B; label 1 → B‖A is one contiguous chunk of the
  document) on the tf.data path: documents of sequential ids make order visible, and about half the labels are 1.
  Masking statistics alone would not see a label 1 drawn without its swap."""
  from tests.data_prep.test_create_pretraining_data import _sequential_document
  opts = pd.DynamicOptions(max_seq_length=512, short_seq_prob=0.0, vocab_size=60000)
  doc_rng = np.random.default_rng(0)
  labels = collections.Counter()
  for d in range(150):
    sentences = _sequential_document(5 + 400 * d, doc_rng.integers(3, 30, size=int(doc_rng.integers(1, 12))))
    ids = np.concatenate(sentences)
    doc = {"token_ids": tf.constant(ids, tf.int32), "word_start": tf.ones_like(ids, tf.bool),
           "sentence_lengths": tf.constant([len(s) for s in sentences], tf.int32),
           "doc_index": tf.constant(d, tf.int64)}
    out = pd.document_instances(doc, tf.constant(0, tf.int64), 11, opts)
    lengths, segments = out["length"].numpy(), out["segment_ids"].numpy()
    for tokens, length, segment, label in zip(out["tokens"].numpy(), lengths, segments,
                                              out["next_sentence_labels"].numpy()):
      len_a = int((~segment[:length]).sum()) - 2  # [CLS] A [SEP] carry segment 0
      a, b = tokens[1:len_a + 1], tokens[len_a + 2:length - 1]
      assert len(a) >= 1 and len(b) >= 1 and tokens[length - 1] == opts.sep_id
      first, second = (a, b) if label == 0 else (b, a)
      joined = np.concatenate([first, second])
      np.testing.assert_array_equal(joined, np.arange(joined[0], joined[0] + len(joined)))
      labels[int(label)] += 1
  total = labels[0] + labels[1]
  assert total >= 150 and abs(labels[1] / total - 0.5) < 0.1, labels  # one instance per document here


def test_masked_lm_prob_zero_masks_nothing_on_both_paths(corpus):
  """One rule for both paths: at masked_lm_prob 0 the static tool masks no token, and the dynamic one masked 1 per
  sequence (its budget had a floor of 1 with no zero case)."""
  assert pi.create_masked_lm_predictions(np.array([2, 10, 11, 3], np.int32), pi.InstanceOptions(masked_lm_prob=0.0),
                                         None, random.Random(0)) == ([], [])
  for b in _dataset(corpus, masked_lm_prob=0.0).take(2):
    assert float(tf.reduce_sum(b["masked_lm_weights"])) == 0.0
  assert float(tf.reduce_sum(next(iter(_dataset(corpus, masked_lm_prob=0.01)))["masked_lm_weights"])) >= 32


def test_shards_without_the_tokenizers_stats_file_are_warned_about(corpus, tmp_path, caplog):
  """tokenize_corpus removes its stats file first and writes it last: a folder without one is an unfinished (maybe
  interrupted re-)run whose shards can hold two corpora, which the pipeline says."""
  import glob
  import shutil
  for path in glob.glob(corpus["tokens"]):
    shutil.copy(path, tmp_path)
  with caplog.at_level("WARNING"):
    pd.dynamic_pretraining_dataset(corpus["tokens"], SEQ, PREDS, 8, False)
  assert pd.TOKENS_STATS_NAME == tc.STATS_NAME and "did not finish" not in caplog.text
  with caplog.at_level("WARNING"):
    pd.dynamic_pretraining_dataset(str(tmp_path / "tokens-*"), SEQ, PREDS, 8, False)
  assert f"{tmp_path} has no tokens.stats.json: tokenize_corpus did not finish" in caplog.text
