"""AlbertEncoder: shapes, sharing, parameter counts, masking, errors, bf16 (XLA, `.keras`: test_model_harness.py)."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from official_albert import AlbertConfig
from official_albert import AlbertEncoder
from official_albert import AlbertPretrainer
from tests import tiny
from tests.official_albert.serving.random_models import perturb_weights

TINY = dict(tiny.GROUPED)


def tiny_config(**changes):
  return AlbertConfig(**{**TINY, **changes})


def make_inputs(batch=2, seq=9, vocab=97, seed=0, pad_from=6):
  rng = np.random.RandomState(seed)
  ids = rng.randint(5, vocab, size=(batch, seq)).astype("int32")
  mask = np.ones((batch, seq), "int32")
  mask[-1, pad_from:] = 0
  types = np.zeros((batch, seq), "int32")
  types[:, seq // 2:] = 1
  return {"input_word_ids": ids, "input_mask": mask, "input_type_ids": types}


def test_output_shapes_and_dtypes():
  config = tiny_config()
  encoder = AlbertEncoder(config)
  out = encoder(make_inputs())
  assert out["sequence_output"].shape == (2, 9, 32)
  assert out["pooled_output"].shape == (2, 32)
  assert len(out["encoder_outputs"]) == config.num_hidden_layers * config.inner_group_num
  np.testing.assert_array_equal(out["encoder_outputs"][-1].numpy(), out["sequence_output"].numpy())
  assert out["sequence_output"].dtype == tf.float32


@pytest.mark.parametrize("preset, encoder_params, pretrainer_params", [
    ("albert-base-v2", 11_683_584, 11_813_810),
    ("albert-large-v2", 17_683_968, 17_847_474),
    ("albert-xlarge-v2", 58_724_864, 59_021_490),
    ("albert-xxlarge-v2", 222_595_584, 223_158_450),
])
def test_parameter_counts_equal_reference(preset, encoder_params, pretrainer_params, monkeypatch):
  # Counting needs shapes only; skip the (slow) truncated-normal draw of 200M values for xxlarge.
  monkeypatch.setattr(keras.initializers.TruncatedNormal, "__call__",
                      lambda self, shape, dtype=None: keras.ops.zeros(shape, dtype=dtype))
  model = AlbertPretrainer(AlbertConfig.from_preset(preset))
  assert model.encoder.count_params() == encoder_params
  assert model.count_params() == pretrainer_params


@pytest.mark.parametrize("layers", [1, 6, 24])
def test_one_set_of_block_variables_per_group_and_inner_group(layers):
  config = tiny_config(num_hidden_layers=layers, num_hidden_groups=1, inner_group_num=2)
  encoder = AlbertEncoder(config)
  block_vars = [v for v in encoder.trainable_variables if "inner_group" in v.path]
  # 2 inner groups × (attention: q,k,v,out kernels+biases, LN gamma+beta = 10; FFN: 2 dense × 2 + LN 2 = 6).
  assert len(block_vars) == 2 * (10 + 6)
  assert not any("layer_" in v.path for v in encoder.trainable_variables)


def test_gradients_reach_every_shared_variable_once():
  config = tiny_config()
  encoder = AlbertEncoder(config)
  inputs = make_inputs()
  with tf.GradientTape() as tape:
    out = encoder(inputs, training=True)
    loss = tf.reduce_sum(out["sequence_output"] ** 2) + tf.reduce_sum(tf.cast(out["pooled_output"], tf.float32))
  grads = tape.gradient(loss, encoder.trainable_variables)
  assert len({id(v) for v in encoder.trainable_variables}) == len(encoder.trainable_variables)
  for variable, grad in zip(encoder.trainable_variables, grads):
    assert grad is not None, variable.path
    # Position rows beyond the sequence length get no gradient; everything else must.
    if "position_embeddings" not in variable.path and "token_type" not in variable.path:
      assert float(tf.reduce_max(tf.abs(grad))) > 0, variable.path


def test_group_routing_applies_blocks_in_reference_order():
  config = tiny_config(num_hidden_layers=4, num_hidden_groups=2, inner_group_num=1)
  encoder = AlbertEncoder(config)
  assert [encoder.block_index("attention", l, 0) for l in range(4)] == [0, 0, 1, 1]
  # Manual application with the same routing reproduces the encoder's output.
  inputs = make_inputs()
  out = encoder(inputs)
  x = encoder.embedding_hidden_mapping_in(encoder.embeddings(inputs["input_word_ids"], inputs["input_type_ids"]))
  for group in (0, 0, 1, 1):
    x = encoder.ffn_layers[group](encoder.attention_layers[group](x, inputs["input_mask"]))
  np.testing.assert_allclose(x.numpy(), out["sequence_output"].numpy(), atol=1e-6)


@pytest.mark.parametrize("layers, groups, routing", [
    (5, 2, [0, 0, 0, 1, 1]),  # issue 12: G does not divide L; `l % G` would give 0,1,0,1,0, round() 0,0,1,1,2
    (7, 3, [0, 0, 0, 1, 1, 2, 2]),
])
def test_group_routing_when_groups_do_not_divide_layers(layers, groups, routing):
  config = tiny_config(num_hidden_layers=layers, num_hidden_groups=groups, inner_group_num=2)
  encoder = AlbertEncoder(config)
  assert len(encoder.attention_layers) == len(encoder.ffn_layers) == groups * 2  # one block per (group, inner)
  assert [encoder.block_index("attention", l, 1) for l in range(layers)] == [2 * g + 1 for g in routing]
  inputs = make_inputs()
  encoder(inputs)  # builds the weights
  perturb_weights(encoder, seed=layers)  # non-uniform attention, LayerNorm γ ≠ 1, β ≠ 0: every weight counts
  out = encoder(inputs)

  def apply(order):
    x = encoder.embedding_hidden_mapping_in(encoder.embeddings(inputs["input_word_ids"], inputs["input_type_ids"]))
    for group in order:
      for inner in range(2):
        x = encoder.ffn_layers[2 * group + inner](encoder.attention_layers[2 * group + inner](x, inputs["input_mask"]))
    return x.numpy()

  np.testing.assert_allclose(apply(routing), out["sequence_output"].numpy(), atol=1e-6)
  # The groups' weights differ, so any other order would give other numbers (the check above can fail).
  assert np.abs(apply([l % groups for l in range(layers)]) - out["sequence_output"].numpy()).max() > 1e-3
  # Every group's weights are used and trained: each gets a gradient well above rounding noise. The loss is a fixed
  # random weighting of the output (audit s29, 2: Σ sequence_output² of a LayerNorm output is nearly constant, and
  # gave the group weights gradients of 1e-9, rounding noise, so `> 0` held whether or not a group was used).
  weighting = tf.constant(np.random.default_rng(0).normal(size=out["sequence_output"].shape).astype(np.float32))
  with tf.GradientTape() as tape:
    loss = tf.reduce_sum(encoder(inputs, training=True)["sequence_output"] * weighting)
  grads = tape.gradient(loss, encoder.trainable_variables)
  for variable, grad in zip(encoder.trainable_variables, grads):
    if "group" in variable.path:
      assert grad is not None, variable.path
      # The key bias's gradient is zero in exact arithmetic (softmax ignores a per-query shift of the scores).
      if not variable.path.endswith("key/bias"):
        assert float(tf.reduce_max(tf.abs(grad))) > 1e-2, variable.path


def test_checkpoint_names_and_parameter_count_when_groups_do_not_divide_layers():
  from official_albert.checkpoints.names import tf1_variable_map  # pylint: disable=g-import-not-at-top
  uneven = AlbertPretrainer(tiny_config(num_hidden_layers=5, num_hidden_groups=2))
  even = AlbertPretrainer(tiny_config(num_hidden_layers=4, num_hidden_groups=2))
  assert uneven.count_params() == even.count_params()  # weights per group; the layer count only changes the routing
  groups = {name.split("/")[3] for name in tf1_variable_map(uneven) if "/transformer/" in name}
  assert groups == {"group_0", "group_1"}


def test_unused_group_is_reported(caplog):
  """L = G = 22: the reference's float routing int(l / L * G) sends layer 15 to group 14; group 15 never runs."""
  config = tiny_config(num_hidden_layers=22, num_hidden_groups=22, inner_group_num=1)
  with caplog.at_level("WARNING"):
    encoder = AlbertEncoder(config, layer_loop=True)
  assert "runs no layer in group(s) [15]" in caplog.text
  inputs = make_inputs()
  looped = encoder(inputs)["sequence_output"]
  encoder.layer_loop = False  # the same weights through the unrolled path (read at call time)
  np.testing.assert_allclose(looped, encoder(inputs)["sequence_output"], atol=1e-5)


@pytest.mark.parametrize("sharing, attention_blocks, ffn_blocks", [
    ("all", 1, 1), ("attention", 1, 4), ("ffn", 4, 1), ("none", 4, 4)])
def test_sharing_ablation_block_counts(sharing, attention_blocks, ffn_blocks):
  config = tiny_config(num_hidden_layers=4, num_hidden_groups=1, inner_group_num=1, sharing=sharing)
  encoder = AlbertEncoder(config)
  assert len(encoder.attention_layers) == attention_blocks
  assert len(encoder.ffn_layers) == ffn_blocks
  out = encoder(make_inputs())
  assert out["sequence_output"].shape == (2, 9, 32)


def test_padding_does_not_change_real_positions():
  encoder = AlbertEncoder(tiny_config())
  inputs = make_inputs(pad_from=5)
  changed = {k: v.copy() for k, v in inputs.items()}
  changed["input_word_ids"][-1, 5:] = 7
  a = encoder(inputs)["sequence_output"].numpy()
  b = encoder(changed)["sequence_output"].numpy()
  np.testing.assert_allclose(a[-1, :5], b[-1, :5], atol=1e-5)
  assert np.abs(a[-1, 5:] - b[-1, 5:]).max() > 1e-3


def test_dropout_only_in_training():
  encoder = AlbertEncoder(tiny_config(hidden_dropout_prob=0.3, attention_probs_dropout_prob=0.3))
  inputs = make_inputs()
  eval_a = encoder(inputs, training=False)["sequence_output"].numpy()
  eval_b = encoder(inputs, training=False)["sequence_output"].numpy()
  train = encoder(inputs, training=True)["sequence_output"].numpy()
  np.testing.assert_array_equal(eval_a, eval_b)
  assert np.abs(train - eval_a).max() > 1e-3


def test_initializers_truncated_normal_and_zero_bias():
  encoder = AlbertEncoder(AlbertConfig.from_preset("albert-base-v2", vocab_size=2000))
  table = encoder.embeddings.word_embeddings.numpy()
  assert np.abs(table).max() <= 2 * 0.02 + 1e-7
  assert abs(table.std() - 0.02 * 0.88) < 0.002  # stddev of a 2σ-truncated normal is 0.88σ
  for variable in encoder.weights:
    if variable.path.endswith("bias") or variable.path.endswith("beta"):
      assert not np.any(variable.numpy()), variable.path
    if variable.path.endswith("gamma"):
      assert np.all(variable.numpy() == 1.0), variable.path


def test_no_projection_when_embedding_equals_hidden():
  encoder = AlbertEncoder(tiny_config(embedding_size=32))
  assert encoder.embedding_hidden_mapping_in is None
  assert not any("embedding_hidden_mapping_in" in v.path for v in encoder.weights)


def test_fused_qkv_matches_separate_projections():
  config = tiny_config()
  fused = AlbertEncoder(config, fused_qkv=True)
  separate = AlbertEncoder(config, fused_qkv=False)
  separate.set_weights(fused.get_weights())
  inputs = make_inputs()
  np.testing.assert_allclose(fused(inputs)["sequence_output"].numpy(),
                             separate(inputs)["sequence_output"].numpy(), atol=1e-5)


# ------------------------------------------------------------------------------------------------ bad input
def test_float_ids_are_rejected():
  encoder = AlbertEncoder(tiny_config())
  inputs = make_inputs()
  inputs["input_word_ids"] = inputs["input_word_ids"].astype("float32")
  with pytest.raises(TypeError, match="input_word_ids.*integer"):
    encoder(inputs)


def test_wrong_rank_and_mismatched_shapes_are_rejected():
  encoder = AlbertEncoder(tiny_config())
  inputs = make_inputs()
  with pytest.raises(ValueError, match=r"\[batch, seq_length\]"):
    encoder({**inputs, "input_word_ids": inputs["input_word_ids"][None]})
  with pytest.raises(ValueError, match="input_mask"):
    encoder({**inputs, "input_mask": inputs["input_mask"][:, :4]})


def test_sequence_longer_than_max_positions_is_rejected():
  encoder = AlbertEncoder(tiny_config(max_position_embeddings=8))
  with pytest.raises(ValueError, match="exceeds max_position_embeddings"):
    encoder(make_inputs(seq=9))


@pytest.mark.skipif(keras.backend.backend() != "tensorflow", reason="a None sequence axis is a TensorFlow graph's")
def test_a_dynamic_length_longer_than_max_positions_names_the_key():
  """In a graph traced with an unknown length the check runs at run time (else "Incompatible shapes [1,9,16] vs
  [1,8,16]" deep inside the embeddings, naming no key)."""
  encoder = AlbertEncoder(tiny_config(max_position_embeddings=8))
  run = tf.function(lambda ids: encoder({"input_word_ids": ids})["pooled_output"],
                    input_signature=[tf.TensorSpec([None, None], tf.int32)])
  assert run(make_inputs(seq=8)["input_word_ids"]).shape[0] == 2
  with pytest.raises(tf.errors.InvalidArgumentError, match="exceeds max_position_embeddings \\(8\\)"):
    run(make_inputs(seq=9)["input_word_ids"])


def test_misnamed_input_gets_a_hint():
  encoder = AlbertEncoder(tiny_config())
  with pytest.raises(KeyError, match="input_word_ids"):
    encoder({"input_ids": make_inputs()["input_word_ids"]})


def test_a_mask_or_type_ids_under_another_name_is_refused_not_defaulted():
  """Review s51: HF's `attention_mask` / `token_type_ids` or a typo (`input_masks`) were dropped and the default
  all-ones mask attended the padding, changing the answers without a word."""
  from official_albert import AlbertClassifier  # noqa: PLC0415
  x = make_inputs()
  encoder, classifier = AlbertEncoder(tiny_config()), AlbertClassifier(tiny_config(), num_labels=2)
  for other, name in [("attention_mask", "input_mask"), ("input_masks", "input_mask"),
                      ("token_type_ids", "input_type_ids"), ("input_type_id", "input_type_ids")]:
    inputs = {"input_word_ids": x["input_word_ids"], other: x[name]}
    for model in (encoder, classifier):
      with pytest.raises(KeyError, match=rf"input '{other}' is not read .*pass it as '{name}'"):
        model(inputs)
  # (the contract names beside other keys a record carries stay fine; so does an HF name beside ours)
  mask = x["input_mask"]
  classifier({**x, "p_mask": mask, "masked_lm_positions": mask, "attention_mask": mask})


def test_ids_outside_the_tables_are_refused_in_an_eager_call():
  """Review s51: id -1 took the last row of the table (type id -1 the last segment), an id past the table raised an
  unclear gather error on TensorFlow and gave NaN rows under JAX."""
  config = tiny_config()
  encoder = AlbertEncoder(config)
  x = make_inputs()
  for name, value, limit in [("input_word_ids", -1, config.vocab_size),
                             ("input_word_ids", config.vocab_size, config.vocab_size),
                             ("input_type_ids", -1, config.type_vocab_size),
                             ("input_type_ids", config.type_vocab_size, config.type_vocab_size)]:
    bad = {k: v.copy() for k, v in x.items()}
    bad[name][1, 3] = value
    with pytest.raises(ValueError, match=rf"{name}\[1, 3\] is {value}, outside \[0, {limit}\)"):
      encoder(bad)
  encoder(x)  # (the edges themselves are fine)
  run = tf.function(lambda ids: encoder({"input_word_ids": ids})["pooled_output"])  # (traced: not checked here)
  assert run(tf.constant(x["input_word_ids"])).shape == (2, config.hidden_size)


# ------------------------------------------------------------------------------------------------ dtypes
def test_mixed_bfloat16_keeps_layer_norm_and_logits_in_float32():
  """Which sublayers compute in bfloat16; outputs close to float32's for every model: test_model_harness.py."""
  keras.mixed_precision.set_global_policy("mixed_bfloat16")
  try:
    model = AlbertPretrainer(tiny_config())
  finally:
    keras.mixed_precision.set_global_policy("float32")
  assert model.encoder.attention_layers[0].query.compute_dtype == "bfloat16"
  assert model.encoder.attention_layers[0].layer_norm.compute_dtype == "float32"
  assert model.encoder.embeddings.layer_norm.compute_dtype == "float32"
  # The heads compute their logits in float32 (test_bf16_heads.py); the MLM transform stays bfloat16.
  assert model.mlm_head.compute_dtype == "float32" and model.sop_head.compute_dtype == "float32"
  assert model.mlm_head.dense.compute_dtype == "bfloat16"


def _bf16_copy(reference, cls=AlbertEncoder):
  keras.mixed_precision.set_global_policy("mixed_bfloat16")
  try:
    model = cls(reference.config)
  finally:
    keras.mixed_precision.set_global_policy("float32")
  model.set_weights(reference.get_weights())
  return model


def _cosine(a, b):
  a, b = np.ravel(a), np.ravel(b)
  return float(np.dot(a, b) / (np.linalg.norm(a) * np.linalg.norm(b)))


@pytest.mark.parametrize("layer_loop", [False, True])
def test_bfloat16_inference_softmax_masks_padding(layer_loop):
  """bfloat16 inference runs the softmax in bfloat16 (−10000 becomes −9984): padding must still be invisible."""
  config = tiny_config(num_hidden_groups=1, inner_group_num=1)
  model = _bf16_copy(AlbertEncoder(config), cls=lambda c: AlbertEncoder(c, layer_loop=layer_loop))
  inputs = make_inputs(batch=1, pad_from=9)
  padded = {k: np.concatenate([v, np.zeros((1, 5), "int32")], axis=1) for k, v in inputs.items()}
  padded["input_word_ids"][0, 9:] = np.arange(10, 15)  # real ids behind the mask: they must not leak
  short = model(inputs)["sequence_output"].numpy()
  long = model(padded)["sequence_output"].numpy()[:, :9]
  np.testing.assert_allclose(long, short, atol=2e-2)
  assert _cosine(long, short) > 0.9999


def test_bfloat16_training_gradients_agree_with_float32():
  """Training under mixed_bfloat16 (per-layer weight casts, float32 softmax): every gradient near float32's."""
  config = tiny_config()
  reference = AlbertEncoder(config)
  model = _bf16_copy(reference)
  inputs = make_inputs()
  grads = []
  for m in (reference, model):
    with tf.GradientTape() as tape:
      out = m(inputs, training=True)
      loss = tf.reduce_sum(tf.square(out["sequence_output"])) + tf.reduce_sum(tf.cast(out["pooled_output"], tf.float32))
    grads.append([tf.convert_to_tensor(g).numpy() for g in tape.gradient(loss, m.trainable_variables)])
  assert all(g.dtype == np.float32 for g in grads[1])
  for want, got, variable in zip(grads[0], grads[1], reference.trainable_variables):
    if np.linalg.norm(want) < 1e-6:  # the key bias: softmax is invariant to it, its gradient is rounding noise
      assert np.linalg.norm(got) < 1e-4, variable.name
      continue
    assert _cosine(want, got) > 0.99, variable.name


def test_gelu_new_is_the_tanh_formula():
  """The fused-op GELU equals the written-out formula (and HF's gelu_new) on a wide range."""
  from official_albert.modeling.layers import activations
  x = np.linspace(-12.0, 12.0, 20001).astype(np.float32)
  got = np.asarray(activations.gelu_new(x))
  want = np.asarray(activations.gelu_new_formula(x))
  np.testing.assert_allclose(got, want, atol=2e-6, rtol=1e-5)
  hf = 0.5 * x.astype(np.float64) * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (x + 0.044715 * x.astype(np.float64) ** 3)))
  np.testing.assert_allclose(got, hf, atol=2e-6, rtol=1e-5)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_the_training_gelu_has_gelu_news_values_and_gradient(dtype):
  """`gelu_new_training` (a training step's FFN activation on TensorFlow: the derivative as one XLA-fused pass) gives
  `gelu_new`'s values exactly and its gradient: within float32 rounding of autodiff, and in bfloat16 no farther from
  the float64 derivative than autodiff's own bfloat16 gradient (the fused pass computes in float32)."""
  from official_albert.modeling.layers import activations
  x64 = np.concatenate([np.linspace(-12.0, 12.0, 4000), np.random.default_rng(0).normal(size=3000) * 3])
  dy64 = np.random.default_rng(1).normal(size=x64.shape)
  x, dy = tf.constant(x64.reshape(7, -1), dtype), tf.constant(dy64.reshape(7, -1), dtype)

  def value_and_grad(fn):
    with tf.GradientTape() as tape:
      tape.watch(x)
      y = fn(x)
    return np.asarray(tf.cast(y, tf.float64)), np.asarray(tf.cast(tape.gradient(y, x, dy), tf.float64)).ravel()
  y_fused, g_fused = value_and_grad(activations.gelu_new_training)
  y_auto, g_auto = value_and_grad(activations.gelu_new)
  np.testing.assert_array_equal(y_fused, y_auto)
  xr = np.asarray(tf.cast(x, tf.float64)).ravel()
  t = np.tanh(np.sqrt(2 / np.pi) * (xr + 0.044715 * xr ** 3))
  exact = (0.5 * (1 + t) + 0.5 * xr * (1 - t * t) * np.sqrt(2 / np.pi) * (1 + 3 * 0.044715 * xr ** 2)) * np.asarray(
      tf.cast(dy, tf.float64)).ravel()
  if dtype == "float32":
    np.testing.assert_allclose(g_fused, g_auto, atol=2e-5, rtol=1e-5)
    # (tanh rounds to ±1 in float32 beyond |x| ≈ 5, where the true derivative is a few 1e-6: both give 0 there)
    np.testing.assert_allclose(g_fused, exact, atol=1e-5, rtol=1e-5)
  else:
    assert np.abs(g_fused - exact).max() <= np.abs(g_auto - exact).max()


def test_the_fused_gelu_gradient_can_be_turned_off(monkeypatch):
  """OFFICIAL_ALBERT_FUSED_GELU_GRAD=0: a training step's GELU is autodiff of the plain op (no XLA function)."""
  from official_albert.modeling.layers import activations
  from official_albert.modeling.layers import fused_gelu_grad

  def compiled(*args):
    raise AssertionError("the fused gradient ran")
  monkeypatch.setattr(fused_gelu_grad, "_gelu_new_derivative_times", compiled)
  x = tf.constant([[-1.0, 0.5, 2.0]])
  monkeypatch.setenv(activations.FUSED_GELU_GRAD_ENV, "0")
  with tf.GradientTape() as tape:
    tape.watch(x)
    y = activations.gelu_new_training(x)
  tape.gradient(y, x)
  monkeypatch.setenv(activations.FUSED_GELU_GRAD_ENV, "1")
  with pytest.raises(AssertionError, match="the fused gradient ran"):
    with tf.GradientTape() as tape:
      tape.watch(x)
      y = activations.gelu_new_training(x)
    tape.gradient(y, x)


def test_a_training_step_of_the_ffn_gets_autodiffs_gradients():
  """The FFN with training=True (fused GELU gradient) and training=False (autodiff; no dropout, so the same
  function) give the same loss and gradients."""
  from official_albert.modeling.layers import AlbertFeedForward
  keras.utils.set_random_seed(3)
  ffn = AlbertFeedForward(16, 64, hidden_dropout_prob=0.0)
  x = tf.random.normal([2, 5, 16], seed=1) * 2
  # A weighted sum: the sum of squares of a LayerNorm's output is constant (H per row), its gradients all ~0.
  w = tf.random.normal([2, 5, 16], seed=2)

  def loss_and_grads(training):
    with tf.GradientTape() as tape:
      loss = tf.reduce_sum(ffn(x, training=training) * w)
    return loss, tape.gradient(loss, ffn.trainable_variables)
  (loss_t, grads_t), (loss_f, grads_f) = loss_and_grads(True), loss_and_grads(False)
  assert float(loss_t) == float(loss_f)
  for got, want in zip(grads_t, grads_f):
    np.testing.assert_allclose(got, want, atol=1e-5, rtol=1e-5)


def test_an_unused_group_is_frozen_and_a_train_step_gets_every_gradient(tmp_path):
  """L = G = 22: group 15 never runs. Its blocks are trainable=False (before, every task's `check_gradients` refused
  step 1: "no gradient for trainable variables [...group_15...]"); an AdamW step with weight decay leaves them as
  they were, and they stay in the weights (checkpoints, conversions), through `from_config`, `.keras` and unfreezing."""
  config = tiny_config(vocab_size=11, embedding_size=8, hidden_size=8, num_hidden_layers=22, num_hidden_groups=22,
                       inner_group_num=1, num_attention_heads=1, intermediate_size=8, max_position_embeddings=8)
  encoder = AlbertEncoder(config)
  unused = [v for v in encoder.weights if "group_15_" in v.path]
  assert unused and not any(v.trainable for v in unused)
  from official_albert.checkpoints.names import tf1_variable_map  # pylint: disable=g-import-not-at-top
  assert {id(v) for v in unused} <= {id(v) for v in tf1_variable_map(encoder).values()}  # (conversions keep them)
  assert {v.path for v in encoder.trainable_variables} == {v.path for v in encoder.weights} - {v.path for v in unused}
  inputs = make_inputs(batch=2, seq=6, vocab=11, pad_from=4)
  with tf.GradientTape() as tape:
    loss = tf.reduce_sum(encoder(inputs, training=True)["pooled_output"])
  grads = tape.gradient(loss, encoder.trainable_variables)
  assert [v.path for v, g in zip(encoder.trainable_variables, grads) if g is None] == []
  before = [v.numpy().copy() for v in unused]
  keras.optimizers.AdamW(learning_rate=0.1, weight_decay=0.5).apply_gradients(zip(grads, encoder.trainable_variables))
  for value, variable in zip(before, unused):
    np.testing.assert_array_equal(value, variable.numpy())
  encoder.trainable = False
  encoder.trainable = True  # (Keras' setter reaches every sub-layer; the unused group is frozen again)
  assert not any(v.trainable for v in unused)
  path = str(tmp_path / "encoder.keras")
  encoder.save(path)
  for copy in (AlbertEncoder.from_config(encoder.get_config()), keras.saving.load_model(path)):
    frozen = [v.path for v in copy.weights if not v.trainable]
    assert frozen == [v.path for v in unused], frozen
  loaded = {v.path: v.numpy() for v in keras.saving.load_model(path).weights}
  for variable in unused:  # (saved and loaded with the rest)
    np.testing.assert_array_equal(loaded[variable.path], variable.numpy())
