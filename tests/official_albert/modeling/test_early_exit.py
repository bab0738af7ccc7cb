"""Exit heads, patience-based early exit and static elastic depth (official_albert/modeling/early_exit.py).

Every path is checked against a reference written without the runner: a NumPy replay of PABEE's rule over every
iteration's logits from one full forward pass, each row run alone, and a model built with fewer layers.
"""

import re

import numpy as np
import pytest
import tensorflow as tf

from official_albert import AlbertConfig
from official_albert.modeling import early_exit
from official_albert.modeling.models import AlbertClassifier
from official_albert.modeling.models import AlbertMultipleChoice

LAYERS = 6
TINY = dict(vocab_size=97, embedding_size=16, hidden_size=32, num_hidden_layers=LAYERS, num_attention_heads=4,
            intermediate_size=37, max_position_embeddings=64)


def config(**changes):
  return AlbertConfig(**{**TINY, **changes})


def inputs(batch=16, seq=10, seed=0, shape=None):
  rng = np.random.RandomState(seed)
  ids = rng.randint(5, 97, (batch, seq)).astype("int32")
  mask = np.ones((batch, seq), "int32")
  for row in range(batch):  # every row its own length: padding must not leak between rows
    mask[row, rng.randint(3, seq + 1):] = 0
  types = np.zeros((batch, seq), "int32")
  types[:, seq // 2:] = 1
  out = {"input_word_ids": ids, "input_mask": mask, "input_type_ids": types}
  return {k: v.reshape(shape) for k, v in out.items()} if shape else out


def classifier(num_labels=3, seed=1, **kwargs):
  tf.keras.utils.set_random_seed(seed)
  model = AlbertClassifier(config(), num_labels=num_labels, exit_heads=True, **kwargs)
  # Larger head weights than the 0.02 init: predictions then differ between iterations, so rows leave at different
  # iterations (what the compaction must get right).
  for head in early_exit.exit_heads(model) + [model.classifier]:
    head.output_weights.assign(head.output_weights * 50.0)
  return model


def reference_exits(exit_logits, patience, same):
  """PABEE's rule replayed per row over every iteration's logits [N, L, K] → (exit iteration [N], logits [N, K])."""
  exits, chosen = [], []
  for row in exit_logits:
    unchanged = 0
    for i in range(len(row)):
      if i > 0:
        unchanged = unchanged + 1 if same(row[i - 1], row[i]) else 0
      if unchanged >= patience or i == len(row) - 1:
        exits.append(i + 1)
        chosen.append(row[i])
        break
  return np.asarray(exits), np.asarray(chosen)


def argmax_same(a, b):
  return np.argmax(a) == np.argmax(b)


def test_patience_off_is_the_plain_model_bit_for_bit():
  with_heads = classifier()
  plain = AlbertClassifier(config(), num_labels=3)
  for source, target in zip(with_heads.encoder.weights + with_heads.classifier.weights,
                            plain.encoder.weights + plain.classifier.weights):
    target.assign(source)
  x = inputs()
  expected = plain(x)
  for out in (with_heads(x), with_heads(x, patience=0), with_heads(x, return_exit_logits=True)):
    assert set(out) >= {"logits", "pooled_output"}
    np.testing.assert_array_equal(out["logits"].numpy(), expected["logits"].numpy())
    np.testing.assert_array_equal(out["pooled_output"].numpy(), expected["pooled_output"].numpy())
  # The last iteration's exit logits are the final head's.
  all_logits = with_heads(x, return_exit_logits=True)["exit_logits"].numpy()
  assert all_logits.shape == (16, LAYERS, 3)
  np.testing.assert_array_equal(all_logits[:, -1], expected["logits"].numpy())
  assert "exit_logits" not in with_heads(x)  # inference outputs are today's


def test_exit_logits_match_a_plain_loop_over_the_encoder_outputs():
  model = classifier()
  x = inputs()
  encoder_outputs = model.encoder(x)["encoder_outputs"]
  expected = []
  for layer in range(LAYERS):
    pooled = model.encoder.pooler(encoder_outputs[layer][:, 0, :]).numpy()
    head = model.classifier if layer == LAYERS - 1 else getattr(model, f"exit_classifier_{layer}")
    expected.append(pooled @ head.output_weights.numpy().T + head.output_bias.numpy())
  np.testing.assert_allclose(model(x, return_exit_logits=True)["exit_logits"].numpy(), np.stack(expected, 1),
                             rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("model_seed,input_seed", [(1, 0), (5, 1)])
@pytest.mark.parametrize("patience", [1, 2, 3, LAYERS])
def test_early_exit_matches_the_numpy_replay_of_pabee(patience, model_seed, input_seed):
  """Seeds (5, 1) have rows whose prediction repeats, changes, then repeats before the last iteration (2, 0, 0, 2, 2,
  2), where the count of unchanged iterations must restart at the change (mutation audit 24, m37: a count that kept
  going passed seed 1; here it leaves one iteration early at patience 2 and 3). (The seeds were (2, 2) until each
  weight got its own initializer, which changed every model's initial weights.)"""
  model = classifier(seed=model_seed)
  x = inputs(seed=input_seed)
  all_logits = model(x, return_exit_logits=True)["exit_logits"].numpy()
  if model_seed == 5:
    predictions = ["".join(map(str, row)) for row in all_logits.argmax(-1)]
    assert any(re.search(r"(.)\1(?!\1)(.)\2.", p) for p in predictions), predictions
  exits, chosen = reference_exits(all_logits, patience, argmax_same)
  out = model(x, patience=patience)
  np.testing.assert_array_equal(out["exit_iteration"].numpy(), exits)
  np.testing.assert_allclose(out["logits"].numpy(), chosen, rtol=1e-4, atol=1e-4)
  if patience == 1:
    assert len(set(exits)) >= 3 and exits.min() < LAYERS, exits  # the batch really was compacted


def test_compaction_keeps_every_row_in_its_place():
  model = classifier()
  x = inputs()
  out = model(x, patience=1)
  # Each row alone (nothing to compact) gives the same exit and outputs.
  for row in range(16):
    alone = model({k: v[row:row + 1] for k, v in x.items()}, patience=1)
    assert int(alone["exit_iteration"][0]) == int(out["exit_iteration"][row])
    np.testing.assert_allclose(alone["logits"].numpy()[0], out["logits"].numpy()[row], rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(alone["pooled_output"].numpy()[0], out["pooled_output"].numpy()[row], rtol=1e-4,
                               atol=1e-4)
  # Reordered rows: reordered results.
  order = np.random.RandomState(3).permutation(16)
  shuffled = model({k: v[order] for k, v in x.items()}, patience=1)
  np.testing.assert_array_equal(shuffled["exit_iteration"].numpy(), out["exit_iteration"].numpy()[order])
  np.testing.assert_allclose(shuffled["logits"].numpy(), out["logits"].numpy()[order], rtol=1e-4, atol=1e-4)


def test_pooled_output_is_the_exit_iterations():
  model = classifier()
  x = inputs()
  out = model(x, patience=2)
  encoder_outputs = model.encoder(x)["encoder_outputs"]
  for row, iteration in enumerate(out["exit_iteration"].numpy()):
    expected = model.encoder.pooler(encoder_outputs[iteration - 1][row:row + 1, 0, :]).numpy()[0]
    np.testing.assert_allclose(out["pooled_output"].numpy()[row], expected, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("patience", [1, 2])
def test_graph_mode_equals_eager(patience):
  # patience 2: the first iterations run without a test or a branch, the later ones branch on whether a row leaves.
  model = classifier()
  x = inputs()
  eager = model(x, patience=patience)
  graph = tf.function(lambda features: model(features, patience=patience))(x)
  np.testing.assert_array_equal(graph["exit_iteration"].numpy(), eager["exit_iteration"].numpy())
  np.testing.assert_allclose(graph["logits"].numpy(), eager["logits"].numpy(), rtol=1e-5, atol=1e-5)
  # A batch shape unknown at trace time, and a batch where every row leaves at once.
  fn = tf.function(lambda features: model(features, patience=patience),
                   input_signature=[{k: tf.TensorSpec([None, None], tf.int32) for k in x}])
  np.testing.assert_array_equal(fn(x)["exit_iteration"].numpy(), eager["exit_iteration"].numpy())
  for rows in (0, 1):  # no row; one row (batch 1, the case the cheap check is for)
    one = fn({k: v[:rows] for k, v in x.items()})
    assert one["logits"].shape == (rows, 3) and one["exit_iteration"].shape == (rows,)
    np.testing.assert_array_equal(one["exit_iteration"].numpy(), eager["exit_iteration"].numpy()[:rows])


def test_regression_exits_when_the_score_moves_less_than_the_threshold():
  model = classifier(num_labels=1)
  x = inputs()
  all_logits = model(x, return_exit_logits=True)["exit_logits"].numpy()
  threshold = float(np.median(np.abs(np.diff(all_logits[..., 0], axis=1))))  # some rows stay, some leave
  exits, chosen = reference_exits(all_logits, 1, lambda a, b: bool(np.all(np.abs(b - a) < threshold)))
  out = model(x, patience=1, exit_threshold=threshold)
  np.testing.assert_array_equal(out["exit_iteration"].numpy(), exits)
  np.testing.assert_allclose(out["logits"].numpy(), chosen, rtol=1e-4, atol=1e-4)
  assert len(set(exits)) >= 2


def test_multi_label_exits_when_the_label_set_is_unchanged():
  model = classifier(num_labels=4)
  x = inputs()
  all_logits = model(x, return_exit_logits=True)["exit_logits"].numpy()
  cut = np.log(0.3 / 0.7)
  exits, _ = reference_exits(all_logits, 1, lambda a, b: bool(np.all((a >= cut) == (b >= cut))))
  out = model(x, patience=1, multi_label_threshold=0.3)
  np.testing.assert_array_equal(out["exit_iteration"].numpy(), exits)


def test_multiple_choice_questions_exit_as_one():
  tf.keras.utils.set_random_seed(4)
  model = AlbertMultipleChoice(config(), num_choices=4, exit_heads=True)
  for head in early_exit.exit_heads(model) + [model.classifier]:
    head.output_weights.assign(head.output_weights * 50.0)
  x = inputs(batch=24, shape=(6, 4, 10))
  all_logits = model(x, return_exit_logits=True)["exit_logits"].numpy()
  assert all_logits.shape == (6, LAYERS, 4)
  np.testing.assert_array_equal(all_logits[:, -1], model(x)["logits"].numpy())
  exits, chosen = reference_exits(all_logits, 1, argmax_same)
  out = model(x, patience=1)
  np.testing.assert_array_equal(out["exit_iteration"].numpy(), exits)
  np.testing.assert_allclose(out["logits"].numpy(), chosen, rtol=1e-4, atol=1e-4)
  assert len(set(exits)) >= 2


@pytest.mark.parametrize("depth", [1, 3, LAYERS])
def test_elastic_depth_equals_a_model_built_with_that_many_layers(depth):
  full = AlbertClassifier(config(), num_labels=3)  # trained without exit heads: the final head answers
  shallow = AlbertClassifier(config(num_hidden_layers=depth), num_labels=3)
  for source, target in zip(full.weights, shallow.weights):
    target.assign(source)
  x = inputs()
  expected = shallow(x)
  out = full(x, depth=depth)
  np.testing.assert_array_equal(out["logits"].numpy(), expected["logits"].numpy())
  np.testing.assert_array_equal(out["pooled_output"].numpy(), expected["pooled_output"].numpy())
  looped = AlbertClassifier(config(), num_labels=3, layer_loop=True)
  for source, target in zip(full.weights, looped.weights):
    target.assign(source)
  np.testing.assert_allclose(looped(x, depth=depth)["logits"].numpy(), expected["logits"].numpy(), rtol=1e-5,
                             atol=1e-6)


@pytest.mark.parametrize("layers", [2, 3])
def test_exit_logits_of_a_looped_model_are_every_iterations_heads(layers):
  """layer_loop=True keeps only the last block output; the exit logits must still be each iteration's (unrolled)."""
  x = inputs(batch=4)
  choices = {k: v.reshape(2, 2, -1) for k, v in x.items()}
  for cls, kwargs, data in ((AlbertClassifier, dict(num_labels=3), x),
                            (AlbertMultipleChoice, dict(num_choices=2), choices)):
    tf.keras.utils.set_random_seed(3)
    unrolled = cls(config(num_hidden_layers=layers), exit_heads=True, **kwargs)
    looped = cls(config(num_hidden_layers=layers), exit_heads=True, layer_loop=True, **kwargs)
    for source, target in zip(unrolled.weights, looped.weights):
      target.assign(source)
    expected = unrolled(data, return_exit_logits=True)
    got = looped(data, return_exit_logits=True)
    np.testing.assert_allclose(got["exit_logits"].numpy(), expected["exit_logits"].numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got["logits"].numpy(), looped(data)["logits"].numpy(), rtol=1e-5, atol=1e-6)
    for depth in range(1, layers + 1):
      np.testing.assert_allclose(got["exit_logits"].numpy()[:, depth - 1], looped(data, depth=depth)["logits"].numpy(),
                                 rtol=1e-5, atol=1e-6)


def test_elastic_depth_with_exit_heads_uses_that_iterations_head():
  model = classifier()
  x = inputs()
  all_logits = model(x, return_exit_logits=True)["exit_logits"].numpy()
  for depth in (2, LAYERS):
    np.testing.assert_allclose(model(x, depth=depth)["logits"].numpy(), all_logits[:, depth - 1], rtol=1e-5,
                               atol=1e-5)


def test_bad_options_raise_naming_the_fix():
  plain = AlbertClassifier(config(), num_labels=2)
  x = inputs(batch=2)
  with pytest.raises(ValueError, match="needs exit heads.*depth=k"):
    plain(x, patience=2)
  with pytest.raises(ValueError, match="must be an integer in 1..num_hidden_layers"):
    plain(x, depth=LAYERS + 1)
  with pytest.raises(ValueError, match="must be an integer >= 0"):
    classifier()(x, patience=-1)
  with pytest.raises(ValueError, match="for inference"):
    classifier()(x, patience=1, training=True)
  with pytest.raises(ValueError, match="not both"):
    classifier()(x, patience=1, depth=2)
  # return_exit_logits returned nothing extra, silently, without exit heads or beside patience / depth.
  with pytest.raises(ValueError, match="return_exit_logits=True needs exit heads"):
    plain(x, return_exit_logits=True)
  for options in ({"patience": 2}, {"depth": 2}):
    with pytest.raises(ValueError, match="without patience / depth"):
      classifier()(x, return_exit_logits=True, **options)


def test_exit_heads_are_variables_of_the_model_and_serialize():
  model = classifier()
  names = [v.path for v in model.trainable_variables if "exit_classifier" in v.path]
  assert len(names) == 2 * (LAYERS - 1)
  clone = AlbertClassifier.from_config(model.get_config())
  assert clone.exit_heads and len(early_exit.exit_heads(clone)) == LAYERS - 1
  # Training returns every head's logits (the loss needs them).
  out = model(inputs(batch=2), training=True)
  assert out["exit_logits"].shape == (2, LAYERS, 3)


def test_mixed_bfloat16_early_exit_matches_its_own_full_pass():
  from official_albert.precision import global_dtype_policy
  with global_dtype_policy("mixed_bfloat16"):
    model = classifier()
    x = inputs()
    all_logits = model(x, return_exit_logits=True)["exit_logits"].numpy()
    out = model(x, patience=2)
  assert out["pooled_output"].dtype == tf.bfloat16
  exits, chosen = reference_exits(all_logits, 2, argmax_same)
  # bf16 GEMMs of another batch size round differently: compare where the row's argmax margins are clear.
  agree = np.mean(out["exit_iteration"].numpy() == exits)
  assert agree >= 0.8, (out["exit_iteration"].numpy(), exits)
