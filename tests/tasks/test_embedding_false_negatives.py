"""`task.mask_false_negatives`: mnrl without the in-batch "negatives" that repeat a text of their row.

With repeated texts in a batch (an anchor on two rows, a positive shared by two anchors, another row's hard negative
that is this row's positive) sentence-transformers' mnrl scores the repeat as a negative, so even a perfect model
keeps a loss of ln 2 per affected row (docs/retrieval.md). The masks are checked against a loop written from the
rule, the loss against a numpy softmax over the unmasked columns, and the task's loss (keys from token ids, GradCache
too) against both.
"""

import json

import numpy as np
import pytest
import tensorflow as tf

from official_albert import train
from official_albert.retrieval import losses
from official_albert.training.experiment_config import ConfigError
from tasks.embedding import data as pair_data
from tasks.embedding.data import text_keys
from tests.tasks.test_text_embedding import make_task
from tests.tasks.test_text_embedding import MODEL
from tests.tasks.test_text_embedding import override
from tests.tasks.test_text_embedding import stdlib_pairs
from tests.tasks.test_text_embedding import write_pairs


def rule_masks(anchor, positive, negative=()):
  """The masks by the rule's words, one (row, column) at a time."""
  count = len(anchor)
  candidates = list(positive) + list(negative)
  forward = np.zeros((count, len(candidates)), bool)
  for r in range(count):
    for c, key in enumerate(candidates):
      other_rows_positive = c < count and anchor[c] == anchor[r]
      forward[r, c] = c != r and (key in (anchor[r], positive[r]) or other_rows_positive)
  backward = np.array([[j != r and (anchor[j] in (anchor[r], positive[r]) or positive[j] == positive[r])
                        for j in range(count)] for r in range(count)])
  return forward, backward


def numpy_mnrl(a, p, n, scale, symmetric, forward_mask, backward_mask):
  def unit(x):
    return x / np.linalg.norm(x, axis=1, keepdims=True)

  def lse(row, mask):
    kept = row[~mask]
    return np.log(np.exp(kept - kept.max()).sum()) + kept.max()

  candidates = np.concatenate([p, *n]) if n else p
  forward = unit(a) @ unit(candidates).T * scale
  backward = unit(p) @ unit(a).T * scale
  out = []
  for r in range(len(a)):
    log_z = lse(forward[r], forward_mask[r])
    if symmetric:
      log_z = (log_z + lse(backward[r], backward_mask[r])) / 2
    out.append(log_z - forward[r, r])
  return float(np.mean(out))


# Six rows: row 1 repeats row 0's anchor, row 2 has row 0's positive, row 3's anchor is row 4's positive, row 5's
# hard negative is row 4's positive and row 4's negative is its own anchor.
ANCHOR = [1, 1, 2, 3, 4, 5]
POSITIVE = [10, 11, 10, 12, 3, 13]
NEGATIVE = [20, 21, 22, 23, 4, 3]


def test_the_masks_follow_the_rule():
  got = losses.in_batch_false_negatives(tf.constant(ANCHOR), tf.constant(POSITIVE), [tf.constant(NEGATIVE)])
  want = rule_masks(ANCHOR, POSITIVE, NEGATIVE)
  np.testing.assert_array_equal(np.asarray(got[0]), want[0])
  np.testing.assert_array_equal(np.asarray(got[1]), want[1])
  assert want[0].sum() >= 6 and want[1].sum() >= 4  # (the rows above do repeat)


@pytest.mark.parametrize("symmetric", [False, True])
def test_the_masked_loss_is_the_softmax_over_the_unmasked_candidates(symmetric):
  rng = np.random.default_rng(0)
  a, p, n = (rng.normal(size=(6, 8)).astype(np.float32) for _ in range(3))
  masks = losses.in_batch_false_negatives(tf.constant(ANCHOR), tf.constant(POSITIVE), [tf.constant(NEGATIVE)])
  got = float(losses.mnrl_loss(a, p, [n], scale=20.0, symmetric=symmetric, false_negatives=masks))
  want = numpy_mnrl(a, p, [n], 20.0, symmetric, *rule_masks(ANCHOR, POSITIVE, NEGATIVE))
  assert got == pytest.approx(want, rel=1e-5)
  # Replicas: rows [0, 3) and [3, 6) at their offsets against the whole batch average to the one-device loss.
  shares = [float(losses.mnrl_loss(a[i:i + 3], p, [n], scale=20.0, symmetric=symmetric, all_anchors=a, offset=i,
                                   false_negatives=masks)) for i in (0, 3)]
  assert np.mean(shares) == pytest.approx(got, rel=1e-5)


def test_without_repeats_nothing_changes():
  rng = np.random.default_rng(1)
  a, p, n = (rng.normal(size=(5, 8)).astype(np.float32) for _ in range(3))
  masks = losses.in_batch_false_negatives(tf.range(5), tf.range(10, 15), [tf.range(20, 25)])
  assert not np.any(np.asarray(masks[0])) and not np.any(np.asarray(masks[1]))
  for symmetric in (False, True):
    assert float(losses.mnrl_loss(a, p, [n], symmetric=symmetric, false_negatives=masks)) == float(
        losses.mnrl_loss(a, p, [n], symmetric=symmetric))


def test_a_perfect_model_keeps_ln2_per_repeated_row_only_without_the_mask():
  """Two rows with one anchor and two passages that both answer it (a perfect model puts all three together)."""
  same = np.array([[1.0, 0.0], [1.0, 0.0]], np.float32)
  other = np.array([[0.0, 1.0]], np.float32)
  a = p = np.concatenate([same, other])
  masks = losses.in_batch_false_negatives(tf.constant([1, 1, 2]), tf.constant([10, 11, 12]))
  plain = float(losses.mnrl_loss(a, p, scale=20.0))
  masked = float(losses.mnrl_loss(a, p, scale=20.0, false_negatives=masks))
  assert plain == pytest.approx(2 * np.log(2) / 3, abs=1e-6) and masked == pytest.approx(0.0, abs=1e-6)


def _task_and_batch(tmp_path, spm_model_file, **options):
  """A task on 64 real pairs where every anchor is on two rows (its own positive and the next row's) and each hard
  negative is another row's positive; one batch of 8 of them and the model (seed 5)."""
  pairs = stdlib_pairs()[:32]
  rows = [(pairs[i][0], pairs[(i + k) % 32][1], pairs[(i + 3) % 32][1]) for i in range(32) for k in (0, 1)]
  path = write_pairs(tmp_path / "pairs.csv", rows, ("anchor", "positive", "negative"))
  config = override(path, path, spm_model_file, 1, batch=8, negative_column="negative", symmetric=True, **options)
  config["task"]["model"] = MODEL
  task = make_task(config, str(tmp_path / "m"))
  tf.keras.utils.set_random_seed(5)
  model = task.build_model()
  return task, model, next(iter(task.build_inputs(task.params.train_data)))


@pytest.mark.slow
def test_the_task_masks_texts_with_equal_token_ids_and_grad_cache_agrees(tmp_path, spm_model_file):
  task, model, batch = _task_and_batch(tmp_path, spm_model_file, mask_false_negatives=True)
  ids = {s: [tuple(r) for r in np.asarray(batch[pair_data.side_key(s, "input_word_ids")])]
         for s in ("anchor", "positive", "negative")}
  keys = text_keys(batch, ("anchor", "positive", "negative"))
  for side, rows in ids.items():  # (equal keys exactly where the ids are equal)
    same = np.array([[x == y for y in rows] for x in rows])
    np.testing.assert_array_equal(np.equal.outer(np.asarray(keys[side]), np.asarray(keys[side])), same)
  outputs = model(task.model_inputs(batch), training=False)
  got = float(task.build_losses(batch, outputs))
  vectors = [np.asarray(outputs[f"{s}_embedding"]) for s in ("anchor", "positive", "negative")]
  forward, backward = rule_masks(*(ids[s] for s in ("anchor", "positive", "negative")))
  assert forward.sum() > 0, "the batch has no repeats to mask"
  assert got == pytest.approx(numpy_mnrl(vectors[0], vectors[1], [vectors[2]], 20.0, True, forward, backward),
                              rel=1e-4)
  task.params.mask_false_negatives = False
  assert float(task.build_losses(batch, outputs)) > got  # (the repeats were negatives)
  task.params.mask_false_negatives = True
  want_loss, want = task.compute_gradients(batch, model, None, [])
  task.params.grad_cache_chunk = 3
  loss, grads = tf.function(lambda b: task.compute_gradients(b, model, None, []))(batch)
  assert float(loss) == pytest.approx(float(want_loss), abs=1e-5)
  for g, w in zip(grads, want):
    w = np.asarray(tf.convert_to_tensor(w))
    np.testing.assert_allclose(np.asarray(g), w, atol=1e-5 * max(1.0, float(np.max(np.abs(w)))))


def test_it_is_an_mnrl_setting():
  with pytest.raises(ConfigError, match="task.mask_false_negatives=true masks mnrl"):
    train.build_params("text_embedding", params_override=json.dumps(
        {"task": {"model": MODEL, "loss": "cosent", "score_column": "s", "mask_false_negatives": True}}))


@pytest.mark.slow
def test_a_run_masks_its_eval_loss_too(tmp_path, spm_model_file):
  """train_and_eval with the mask, then `--mode=eval` there without it: the validation file holds each anchor on two
  adjacent rows, so its batches (file order) repeat anchors; the masked eval_loss is the lower, the rank metrics are
  the same (the mask is a loss setting)."""
  pairs = stdlib_pairs()[:16]
  rows = [(pairs[i][0], pairs[(i + k) % 16][1]) for i in range(16) for k in (0, 1)]
  path = write_pairs(tmp_path / "pairs.csv", rows)
  config = override(path, path, spm_model_file, 2, batch=8, mask_false_negatives=True)
  config["task"]["model"] = MODEL
  masked = train.run("text_embedding", "train_and_eval", str(tmp_path / "m"),
                     params_override=json.dumps(config))["eval_results"]
  config["task"]["mask_false_negatives"] = False
  plain = train.run("text_embedding", "eval", str(tmp_path / "m"), params_override=json.dumps(config))
  assert masked["eval_loss"] < plain["eval_loss"] - 0.1, (masked, plain)
  assert masked["mrr@10"] == pytest.approx(plain["mrr@10"], abs=1e-6)


def test_the_keys_and_masks_compile_under_xla():
  """runtime.jit_compile compiles the loss: the keys are a hash XLA has (tf.fingerprint is not an XLA op)."""
  ids = tf.constant([[5, 6, 7, 0], [5, 6, 7, 0], [5, 6, 0, 0], [7, 6, 5, 0]], tf.int32)
  features = {pair_data.side_key(s, "input_word_ids"): ids for s in ("anchor", "positive")}

  @tf.function(jit_compile=True)
  def masks(f):
    keys = text_keys(f, ("anchor", "positive"))
    return keys["anchor"], losses.in_batch_false_negatives(keys["anchor"], keys["positive"])

  keys, (forward, _) = masks(features)
  keys = np.asarray(keys)
  assert keys[0] == keys[1] and len(set(keys[1:].tolist())) == 3
  np.testing.assert_array_equal(np.asarray(keys), np.asarray(text_keys(features, ("anchor",))["anchor"]))
  assert bool(forward[0, 1]) and not bool(forward[0, 2])



def test_training_rows_that_repeat_a_text_are_said_when_the_mask_is_off(tmp_path, spm_model_file, caplog):
  """Mined triplets (one row per negative) repeat their anchor and positive: without the mask, reading them for
  training says how many rows do and names the setting; with the mask, or on rows that repeat nothing, it is quiet."""
  pairs = stdlib_pairs()[:8]
  rows = [(a, p, pairs[(i + k + 1) % 8][1]) for i, (a, p) in enumerate(pairs) for k in range(3)]
  path = write_pairs(tmp_path / "triplets.csv", rows, ("anchor", "positive", "negative"))
  distinct = write_pairs(tmp_path / "pairs.csv", pairs)
  sides = ("anchor", "positive", "negative")
  for mask, file, said in ((False, path, True), (True, path, False), (False, distinct, False)):
    caplog.clear()
    options = {"negative_column": "negative"} if file == path else {}
    task = make_task(override(file, file, spm_model_file, 1, mask_false_negatives=mask, **options))
    task.read(task.params.train_data, sides if file == path else sides[:2], "train")
    assert ("16 of 24 training rows repeat the anchor or positive of another row" in caplog.text) == said, caplog.text
    assert ("task.mask_false_negatives=true" in caplog.text) == said
  # A pair written both ways repeats a text on the other side: (a, b) beside (b, a) trains a's own text as a's
  # negative (the texts were keyed by side).
  both_ways = write_pairs(tmp_path / "both_ways.csv", pairs[:4] + [(p, a) for a, p in pairs[:2]])
  caplog.clear()
  task = make_task(override(both_ways, both_ways, spm_model_file, 1))
  task.read(task.params.train_data, sides[:2], "train")
  assert "2 of 6 training rows repeat the anchor or positive of another row" in caplog.text, caplog.text
