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


def _first_sop_label_per_document(dataset):
  """{(corpus rank in read order, doc_index): SOP label of its first instance}; corpora are read one after the other
  in file order (evaluation), so a corpus starts where doc_index drops."""
  labels, corpus, previous = {}, 0, -1
  for b in dataset:
    for d, label in zip(b["doc_index"].numpy(), b["next_sentence_labels"].numpy()[:, 0]):
      corpus += int(d < previous)
      previous = d
      labels.setdefault((corpus, int(d)), int(label))
  return labels


@pytest.mark.slow
def test_corpora_read_together_draw_independently(corpus, spm_model_file, tmp_path):
  """doc_index counts from 0 in every tokenize_corpus run: read together (`a/tokens-*,b/tokens-*`), document k of each
  corpus had the same key, so the same SOP swaps, segments and masks (agreement 1.0, not ~0.5). The key folds in a
  per-corpus id, also for a copy of a corpus in another folder."""
  import shutil
  other = write_corpus(tmp_path / "b.txt", corpus_docs(120, seed=11))
  tc.tokenize_corpus(tc.TokenizeConfig(input_file=other, spm_model_file=spm_model_file,
                                       output_dir=str(tmp_path / "b"), documents_per_shard=200, progress=False))
  shutil.copytree(os.path.dirname(corpus["tokens"]), tmp_path / "copy")
  for second in (tmp_path / "b", tmp_path / "copy"):
    ds = pd.dynamic_pretraining_dataset(f"{corpus['tokens']},{second}/tokens-*", SEQ, PREDS, 64, is_training=False,
                                        seed=5, drop_remainder=False, include_document_index=True)
    labels = _first_sop_label_per_document(ds)
    common = sorted(d for c, d in labels if c == 1 and (0, d) in labels)
    assert len(common) >= 100, second
    agree = np.mean([labels[(0, d)] == labels[(1, d)] for d in common])
    assert agree < 0.75, (second, agree)


# SHA-256 of the first 4 batches (every feature, doc_index and epoch included) of the `corpus` fixture read alone,
# seed 5, global seed 1, as the pipeline gave them before the per-corpus key (6244e15; the same digests there and
# here): one corpus keeps its stream (and its checkpoints' data order) exactly.
SINGLE_CORPUS_DIGESTS = {True: "c4d269fb0d7034c39ac1cb9e9b2d390b332479b10ae16e787ab4912fe907326a",
                         False: "6a862fa88d7722059bfc8e99da2d62a1721c452e51a231a3735b7fc37e7a1641"}


@pytest.mark.parametrize("is_training", [True, False])
def test_one_corpus_keeps_the_stream_it_had(corpus, is_training):
  import hashlib
  # The training stream's shuffle reads the global seed with its op seed (the run sets it from runtime.seed): set
  # here, so that the digest does not depend on what an earlier test in this worker set (the CI run had seed 1).
  tf.random.set_seed(1)
  digest = hashlib.sha256()
  for b in _dataset(corpus, is_training=is_training, include_document_index=True,
                    include_token_boundary=True).take(4):
    for k in sorted(b):
      digest.update(k.encode())
      digest.update(b[k].numpy().tobytes())
  assert digest.hexdigest() == SINGLE_CORPUS_DIGESTS[is_training]


@pytest.mark.slow
def test_evaluation_on_the_training_files_reads_them_with_dynamic_masking(corpus, tmp_path):
  """`task.train_data.dynamic_masking=true` on a plain experiment, validation input_path empty: evaluation falls back
  to the training files and must read them as training does (it kept dynamic_masking=false and the static reader
  failed at the first evaluation on the tokenized shards, naming create_pretraining_data as the fix)."""
  from official_albert import train
  from official_albert.training import evaluation
  data = {"global_batch_size": 8, "seq_length": SEQ, "max_predictions_per_seq": PREDS}
  override = {
      "task": {"model": {"vocab_size": 1000, "embedding_size": 16, "hidden_size": 32, "num_hidden_layers": 2,
                         "num_attention_heads": 2, "intermediate_size": 64, "max_position_embeddings": SEQ},
               "train_data": dict(data, input_path=corpus["tokens"], dynamic_masking=True, masked_lm_prob=0.2,
                                  max_ngram=2),
               "validation_data": dict(data, input_path="")},
      "trainer": {"train_steps": 2, "steps_per_loop": 2, "checkpoint_interval": 2, "validation_interval": 2,
                  "validation_steps": 2, "summary_interval": 2, "warmup_steps": 1},
  }
  # validate_input: the start-up scan reads the same fallback (train_lib.input_splits) and must not refuse it.
  result = train.run("albert_tiny_pretrain", "train_and_eval", str(tmp_path / "run"),
                     params_override=json.dumps(override), validate_input=True)
  assert result["global_step"] == 2 and math.isfinite(result["eval_results"]["masked_lm_loss"])
  params = train.build_params("albert_tiny_pretrain", params_override=json.dumps(override))
  fallback = evaluation.with_training_files(params.task.validation_data, params.task.train_data)
  assert (fallback.input_path, fallback.dynamic_masking, fallback.masked_lm_prob, fallback.max_ngram) == (
      corpus["tokens"], True, 0.2, 2)


def _reference_chunks(lengths, target):
  """create_instances_from_document's packing: (first, last) sentence of each chunk, closed once it holds >= target
  tokens or at the document's last sentence."""
  chunks, first, total = [], 0, 0
  for i, n in enumerate(lengths):
    total += n
    if i == len(lengths) - 1 or total >= target:
      chunks.append((first, i))
      first, total = i + 1, 0
  return chunks


def test_chunk_bounds_eagerly_and_in_a_graph_equal_the_reference_packing():
  """Eagerly (as the SOP test above calls document_instances) and in a graph (as tf.data runs it), on random sentence
  lengths. One TensorArray passed as both loop variables made every eager chunk (e, e): eager TensorArrays are
  mutable, so the end writes overwrote the starts and dropped the sentences before e."""
  graph = tf.function(pd._chunk_bounds, input_signature=[tf.TensorSpec([None], tf.int32)] * 2 + [
      tf.TensorSpec([], tf.int32)])
  rng = np.random.default_rng(0)
  multi_sentence = 0
  for _ in range(40):
    lengths = rng.integers(1, 30, size=int(rng.integers(1, 12))).astype(np.int32)
    target = int(rng.integers(2, 62))
    ends = tf.cumsum(tf.constant(lengths))
    want = _reference_chunks(lengths.tolist(), target)
    multi_sentence += any(first < last for first, last in want)
    for name, run in (("eager", pd._chunk_bounds), ("graph", graph)):
      starts, lasts = run(ends - lengths, ends, tf.constant(target))
      assert list(zip(starts.numpy().tolist(), lasts.numpy().tolist())) == want, (name, lengths.tolist(), target)
  assert multi_sentence >= 20


def _two_sentence_document(d, lengths):
  from tests.data_prep.test_create_pretraining_data import _sequential_document
  sentences = _sequential_document(10 + 100 * d, lengths)
  ids = np.concatenate(sentences)
  return sentences, {"token_ids": tf.constant(ids), "word_start": tf.ones(ids.shape, tf.bool),
                     "sentence_lengths": tf.constant(lengths, tf.int32), "doc_index": tf.constant(d, tf.int64)}


def test_truncation_equals_the_reference_truncate_seq_pair():
  """Two-sentence documents (sequential ids, each sentence under the target, so one chunk A | B) through
  document_instances in a graph, as tf.data runs it: (len A, len B) are the reference pop loop's (the longer side
  loses a token, B on a tie: 20 + 20 at max_tokens 21 is 11 + 10), each side is a contiguous piece of its sentence,
  and each removed token is a front one with p = 1/2 (the reference's coin per pop), so front cuts ~ Binomial(cuts,
  1/2) in total."""
  opts = pd.DynamicOptions(max_seq_length=24, short_seq_prob=0.0, vocab_size=100000)
  max_tokens = opts.max_seq_length - 3
  spec = {"token_ids": tf.TensorSpec([None], tf.int32), "word_start": tf.TensorSpec([None], tf.bool),
          "sentence_lengths": tf.TensorSpec([2], tf.int32), "doc_index": tf.TensorSpec([], tf.int64)}
  graph = tf.function(lambda doc: pd.document_instances(doc, tf.constant(0, tf.int64), 7, opts),
                      input_signature=[spec])
  rng = np.random.default_rng(1)
  cuts = fronts = 0
  for d in range(250):
    lengths = [20, 20] if d < 20 else rng.integers(3, 21, size=2).tolist()
    sentences, doc = _two_sentence_document(d, lengths)
    out = {k: v.numpy() for k, v in graph(doc).items()}
    assert out["length"].shape == (1,), (lengths, out["length"])
    length, label, tokens = int(out["length"][0]), int(out["next_sentence_labels"][0]), out["tokens"][0]
    len_a = int((~out["segment_ids"][0][:length]).sum()) - 2  # [CLS] A [SEP] carry segment 0
    source_a, source_b = sentences if label == 0 else sentences[::-1]
    want_a, want_b = len(source_a), len(source_b)
    while want_a + want_b > max_tokens:  # truncate_seq_pair's lengths
      if want_a > want_b:
        want_a -= 1
      else:
        want_b -= 1
    assert (len_a, length - len_a - 3) == (want_a, want_b), (lengths, label)
    for got, source in ((tokens[1:len_a + 1], source_a), (tokens[len_a + 2:length - 1], source_b)):
      front = int(got[0] - source[0])
      np.testing.assert_array_equal(got, source[front:front + len(got)])
      cuts += len(source) - len(got)
      fronts += front
  assert cuts >= 800 and abs(fronts - cuts / 2) <= 5 * math.sqrt(cuts / 4), (fronts, cuts)


def test_a_leading_continuation_piece_is_a_word_of_its_own_as_in_the_static_generator():
  """mask_block on rows whose first candidate is a continuation piece (token_boundary 0, A cut at its front): as in
  the static tool (tests/data_prep: the same row and oracle), it opens a word of its own, masked whole and sometimes
  without the next word. Merged into the next word, the fragment was only ever masked with it."""
  from tests.data_prep.test_create_pretraining_data import leading_fragment_pair
  from tests.data_prep.test_create_pretraining_data import masked_group_counts
  from tests.data_prep.test_create_pretraining_data import word_groups
  tokens, vocab = leading_fragment_pair()
  seq, n = 16, 1000
  real = np.arange(seq) < len(tokens)
  padded = np.zeros(seq, np.int32)
  padded[:len(tokens)] = tokens
  boundary = real & (vocab.is_start[padded] | (padded == vocab.cls_id) | (padded == vocab.sep_id))
  assert not boundary[1]
  rows = {"tokens": np.tile(padded, (n, 1)), "token_boundary": np.tile(boundary, (n, 1)),
          "input_mask": np.tile(real, (n, 1)), "segment_ids": np.tile((np.arange(seq) >= 7) & real, (n, 1)),
          "length": np.full([n], len(tokens), np.int32), "next_sentence_labels": np.zeros([n], np.int32),
          "doc_index": np.arange(n, dtype=np.int64), "epoch": np.zeros([n], np.int64),
          "uniforms": tf.random.stateless_uniform([n, 3, seq], [1, 2]).numpy(),
          "random_ids": np.full([n, seq], 15, np.int32)}
  opts = pd.DynamicOptions(max_seq_length=seq, max_predictions_per_seq=5, masked_lm_prob=0.3, vocab_size=20,
                           cls_id=vocab.cls_id, sep_id=vocab.sep_id, mask_id=vocab.mask_id)
  out = tf.function(lambda r: pd.mask_block(r, opts))({k: tf.constant(v) for k, v in rows.items()})
  masked_sets = [set(pos[w > 0].tolist()) for pos, w in zip(out["masked_lm_positions"].numpy(),
                                                               out["masked_lm_weights"].numpy())]
  counts = masked_group_counts(masked_sets, word_groups(tokens, vocab))
  assert min(counts) > 0, counts
  alone = sum({1, 2} <= m and 3 not in m for m in masked_sets)
  assert alone > n // 10, (alone, counts)
