"""Dynamic padding and length bucketing (input_pipeline.pad_to_multiple_of / length_bucket_window)."""

import collections
import json

import keras
import numpy as np
import pytest
import tensorflow as tf

from official_albert.config import AlbertConfig
from official_albert.data import input_pipeline
from official_albert.modeling.models import AlbertClassifier
from tests.official_albert.serving.random_models import perturb_weights

SEQ = 48
NUM_RECORDS = 60


def _length(uid):
  return 3 + (uid * 7) % (SEQ - 3)  # 3..47 real tokens, every length different enough to bucket.


def _record(uid):
  n = _length(uid)
  ints = lambda v: tf.train.Feature(int64_list=tf.train.Int64List(value=[int(x) for x in v]))
  rng = np.random.default_rng(uid)
  features = collections.OrderedDict(
      input_word_ids=ints([uid] + rng.integers(5, 500, n - 1).tolist() + [0] * (SEQ - n)),
      input_mask=ints([1] * n + [0] * (SEQ - n)),
      input_type_ids=ints([0] * (n // 2) + [1] * (n - n // 2) + [0] * (SEQ - n)),
      label_ids=ints([uid % 2]))
  return tf.train.Example(features=tf.train.Features(feature=features)).SerializeToString()


@pytest.fixture(scope="module")
def records(tmp_path_factory):
  path = str(tmp_path_factory.mktemp("dyn") / "train.tf_record")
  with tf.io.TFRecordWriter(path) as writer:
    for uid in range(NUM_RECORDS):
      writer.write(_record(uid))
  return path


SPEC = {k: tf.io.FixedLenFeature([SEQ], tf.int64) for k in ("input_word_ids", "input_mask", "input_type_ids")}
SPEC["label_ids"] = tf.io.FixedLenFeature([], tf.int64)


def _dataset(path, **kwargs):
  kwargs.setdefault("is_training", False)
  kwargs.setdefault("drop_remainder", False)
  return input_pipeline.make_dataset(path, lambda r: input_pipeline.decode_record(r, SPEC), **kwargs)


def test_trim_to_longest_rounds_up_clips_and_handles_choices():
  mask = tf.constant([[1, 1, 1, 0, 0, 0, 0, 0, 0, 0], [1, 1, 1, 1, 1, 0, 0, 0, 0, 0]])
  out = input_pipeline.trim_to_longest(
      {"input_mask": mask, "input_word_ids": mask * 7, "label_ids": tf.constant([1, 0])}, pad_to_multiple_of=4)
  assert out["input_mask"].shape == (2, 8) and out["input_word_ids"].shape == (2, 8)
  assert out["label_ids"].numpy().tolist() == [1, 0]  # Not a sequence feature: untouched.
  assert input_pipeline.trim_to_longest({"input_mask": mask}, 16)["input_mask"].shape == (2, 10)  # Never longer.
  choices = tf.reshape(tf.concat([mask, tf.constant([[1] * 7 + [0] * 3, [1] + [0] * 9])], 0), [2, 2, 10])
  assert input_pipeline.trim_to_longest({"input_mask": choices}, 1)["input_mask"].shape == (2, 2, 7)
  with pytest.raises(ValueError, match="pad_to_multiple_of"):
    input_pipeline.trim_to_longest({"input_mask": mask}, 0)


def test_dynamic_padding_keeps_order_and_every_real_token(records):
  full = list(_dataset(records, batch_size=16))
  trimmed = list(_dataset(records, batch_size=16, pad_to_multiple_of=8))
  assert len(full) == len(trimmed) == 4  # 60 records: 3 full batches and a partial one, in file order.
  for f, t in zip(full, trimmed):
    longest = int(tf.reduce_max(tf.reduce_sum(f["input_mask"], -1)))
    length = t["input_word_ids"].shape[1]
    assert length % 8 == 0 and longest <= length < longest + 8
    for key in ("input_word_ids", "input_mask", "input_type_ids"):
      np.testing.assert_array_equal(t[key].numpy(), f[key].numpy()[:, :length])
      assert not f[key].numpy()[:, length:].any()  # Only padding was cut.
    np.testing.assert_array_equal(t["label_ids"].numpy(), f["label_ids"].numpy())


def test_bucket_by_length_partitions_a_window_into_length_sorted_batches():
  lengths = np.array([9, 2, 7, 4, 8, 1, 3, 6, 5, 10, 12, 11])
  mask = (np.arange(12)[None, :] < lengths[:, None]).astype(np.int32)
  big_batch = {"input_mask": tf.constant(mask), "uid": tf.range(12)}
  out = list(input_pipeline.bucket_by_length(tf.data.Dataset.from_tensors(big_batch), batch_size=3, window=4, seed=0))
  assert len(out) == 4 and all(b["uid"].shape == (3,) for b in out)
  uids = [b["uid"].numpy() for b in out]
  assert sorted(np.concatenate(uids).tolist()) == list(range(12))  # Every example once.
  spans = sorted((lengths[u].min(), lengths[u].max()) for u in uids)
  assert spans == [(1, 3), (4, 6), (7, 9), (10, 12)]  # Batches of neighbouring lengths.
  for b, u in zip(out, uids):
    np.testing.assert_array_equal(b["input_mask"].numpy(), mask[u])  # Features stay with their example.


def test_length_bucketing_in_the_training_pipeline(records):
  kwargs = dict(batch_size=5, is_training=True, drop_remainder=True, seed=4, shuffle_buffer_size=NUM_RECORDS)
  window = 4
  plain = [b["input_word_ids"][:, 0].numpy() for b in _dataset(records, **kwargs).take(2 * window)]
  bucketed = list(_dataset(records, length_bucket_window=window, pad_to_multiple_of=1, **kwargs).take(window))
  uids = [b["input_word_ids"][:, 0].numpy() for b in bucketed]
  # Drawn from the same seeded record stream (the batch shuffle may pull a batch of the next window forward).
  assert set(np.concatenate(uids).tolist()) <= set(np.concatenate(plain).tolist())
  for batch, u in zip(bucketed, uids):
    assert batch["input_mask"].shape[1] == max(map(_length, u))  # Each batch padded to its own longest.
  spread = np.mean([np.ptp([_length(x) for x in u]) for u in uids])
  plain_spread = np.mean([np.ptp([_length(x) for x in u]) for u in plain])
  assert spread < 0.5 * plain_spread  # Similar lengths per batch.
  with pytest.raises(ValueError, match="training data only"):
    _dataset(records, batch_size=5, length_bucket_window=2)


@pytest.mark.slow
def test_classifier_logits_do_not_depend_on_trailing_padding():
  config = AlbertConfig.from_preset("albert-base-v2", vocab_size=300, embedding_size=16, hidden_size=32,
                                    num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                                    max_position_embeddings=64)
  keras.utils.set_random_seed(0)
  model = AlbertClassifier(config.inference_copy(), num_labels=3)
  rng = np.random.default_rng(0)
  lengths = np.array([5, 17, 9])
  mask = (np.arange(64)[None, :] < lengths[:, None]).astype(np.int32)
  full = {"input_word_ids": rng.integers(5, 300, (3, 64)).astype(np.int32) * mask, "input_mask": mask,
          "input_type_ids": np.zeros((3, 64), np.int32)}
  trimmed = input_pipeline.trim_to_longest({k: tf.constant(v) for k, v in full.items()}, 8)
  assert trimmed["input_mask"].shape == (3, 24)
  for jit in (False, True):
    fn = tf.function(lambda x: model(x, training=False)["logits"], jit_compile=jit, reduce_retracing=True)
    np.testing.assert_allclose(fn(trimmed).numpy(), fn(full).numpy(), atol=2e-5)


@pytest.mark.large
@pytest.mark.slow
def test_glue_train_and_eval_with_dynamic_padding_and_buckets(records, tmp_path):
  """Dynamic padding only cuts padding, so the same run with full padding must give the same model and the same
  eval numbers (to 1e-5), under XLA, with length buckets (which pick batches by length, not by padding)."""
  from official_albert import train
  model = {"preset": "", "vocab_size": 500, "embedding_size": 16, "hidden_size": 32, "num_hidden_layers": 2,
           "num_attention_heads": 2, "intermediate_size": 64, "max_position_embeddings": 64,
           "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0}
  data = {"input_path": records, "seq_length": SEQ, "seed": 1}
  runs = {}
  for name, multiple in (("dynamic", 16), ("full", 0)):
    override = {
        "task": {"model": model, "classifier_dropout": 0.0,
                 "train_data": dict(data, global_batch_size=4, is_training=True, pad_to_multiple_of=multiple,
                                    length_bucket_window=3),
                 "validation_data": dict(data, global_batch_size=16, is_training=False, drop_remainder=False,
                                         pad_to_multiple_of=multiple)},
        "trainer": {"train_steps": 6, "steps_per_loop": 3, "checkpoint_interval": 3, "validation_interval": 3,
                    "summary_interval": 3, "validation_steps": -1, "warmup_steps": 0, "learning_rate": 1e-3},
        "runtime": {"distribution_strategy": "one_device", "seed": 3, "jit_compile": True}}
    result = train.run("glue/sst-2", "train_and_eval", str(tmp_path / name), params_override=json.dumps(override))
    assert result["global_step"] == 6
    runs[name] = (json.load(open(tmp_path / name / "eval_results.json")),
                  [v.numpy() for v in result["trainer"].model.trainable_variables])
  (dynamic, dynamic_weights), (full, full_weights) = runs["dynamic"], runs["full"]
  assert dynamic["global_step"] == full["global_step"] == 6 and dynamic["eval_steps"] == full["eval_steps"] == 4
  for key in ("eval_loss", "eval_accuracy", "cls_accuracy"):
    assert dynamic[key] == pytest.approx(full[key], rel=1e-5, abs=1e-6), key
  assert len(dynamic_weights) == len(full_weights) > 0
  assert max(float(np.abs(a - b).max()) for a, b in zip(dynamic_weights, full_weights)) < 1e-5


def test_bucketing_without_dynamic_padding_is_warned_about(records, caplog):
  with caplog.at_level("WARNING", logger=input_pipeline.logger.name):
    _dataset(records, batch_size=5, is_training=True, drop_remainder=True, seed=0, length_bucket_window=2)
  assert any("without pad_to_multiple_of" in r.getMessage() for r in caplog.records)
  caplog.clear()
  with caplog.at_level("WARNING", logger=input_pipeline.logger.name):
    _dataset(records, batch_size=5, is_training=True, drop_remainder=True, seed=0, length_bucket_window=2,
             pad_to_multiple_of=8)
  assert not caplog.records


def test_trim_to_longest_cuts_left_padded_and_holed_rows_after_their_last_real_token():
  """The cut is at the last real position, not the count of real tokens (audit s29, 4: the only left-padding test
  ran through the serving module on initial weights, where dropping real tokens moved the logits by 6e-5)."""
  mask = np.zeros((3, 12), np.int32)
  mask[0, 5:8] = 1  # left padding: 3 real tokens, the last at position 7
  mask[1, [0, 1, 4]] = 1  # a hole: the last real token at position 4
  mask[2, 2] = 1  # one real token
  features = {"input_mask": tf.constant(mask), "input_word_ids": tf.constant(np.arange(36).reshape(3, 12) * mask),
              "label_ids": tf.constant([0, 1, 2])}
  for multiple, length in ((1, 8), (3, 9), (4, 8), (5, 10), (16, 12)):  # a count-based cut: 3, 3, 4, 5, 12
    out = input_pipeline.trim_to_longest(features, multiple)
    assert out["input_mask"].shape == out["input_word_ids"].shape == (3, length), multiple
    for key in ("input_mask", "input_word_ids"):
      np.testing.assert_array_equal(out[key].numpy(), features[key].numpy()[:, :length])
    assert not mask[:, length:].any()  # only padding was cut
    assert int(out["input_mask"].numpy().sum()) == int(mask.sum()) == 7  # every real token kept
    assert out["label_ids"].numpy().tolist() == [0, 1, 2]


def test_classifier_logits_are_kept_on_left_padded_rows_with_a_margin():
  """Left-padded and holed rows, trimmed, give the full-padding logits; on weights perturbed N(0, 0.1) (non-uniform
  attention, as in export_harness.Models) so that dropping even one real token moves the logits far past atol."""
  config = AlbertConfig.from_preset("albert-base-v2", vocab_size=300, embedding_size=16, hidden_size=32,
                                    num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                                    max_position_embeddings=64)
  keras.utils.set_random_seed(1)
  model = AlbertClassifier(config.inference_copy(), num_labels=3)
  mask = np.zeros((2, 16), np.int32)
  mask[0, 6:12] = 1  # left padding (a client's ids, HF's padding_side="left"), then trailing padding
  mask[1, [0, 1, 2, 9, 10]] = 1  # a hole
  rng = np.random.default_rng(3)
  full = {"input_word_ids": rng.integers(5, 300, (2, 16)).astype(np.int32) * mask, "input_mask": mask,
          "input_type_ids": np.zeros((2, 16), np.int32)}
  model(full)  # builds the weights
  perturb_weights(model, seed=4)
  logits = tf.function(lambda x: model(x, training=False)["logits"], reduce_retracing=True)
  want = logits(full).numpy()
  trimmed = input_pipeline.trim_to_longest({k: tf.constant(v) for k, v in full.items()}, 4)
  assert trimmed["input_mask"].shape == (2, 12)
  np.testing.assert_allclose(logits(trimmed).numpy(), want, atol=1e-5)
  # The check can fail: each row without its last real token gives logits far from `want` (measured: > 1e-2).
  for row, last in ((0, 11), (1, 10)):
    dropped = dict(full, input_mask=mask.copy())
    dropped["input_mask"][row, last] = 0
    assert np.abs(logits(dropped).numpy()[row] - want[row]).max() > 100 * 1e-5, row
