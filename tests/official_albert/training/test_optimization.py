"""Tests for official_albert.training.optimization against an independent NumPy version of the reference (§4.4-§4.7)."""

import re

import keras
import numpy as np
import pytest
import tensorflow as tf

from official_albert.training import gradients
from official_albert.training import lr_schedule
from official_albert.training import optimization

EXCLUDE = ["LayerNorm", "layer_norm", "bias"]


# ----------------------------------------------------------------------------------------------------------------------
# Independent NumPy reference (written from lamb_optimizer.py / optimization.py, not from our code)
# ----------------------------------------------------------------------------------------------------------------------
class NumpyReference:
  """The reference LAMB / AdamWeightDecayOptimizer on a dict of float64 arrays, with the reference's clip."""

  def __init__(self, params, lamb, lr_fn, weight_decay_rate, exclude, clip_norm, beta_1=0.9, beta_2=0.999,
               epsilon=1e-6):
    self.params = {k: np.array(v, np.float64) for k, v in params.items()}
    self.m = {k: np.zeros_like(v) for k, v in self.params.items()}
    self.v = {k: np.zeros_like(v) for k, v in self.params.items()}
    self.lamb, self.lr_fn, self.wd, self.exclude, self.clip = lamb, lr_fn, weight_decay_rate, exclude, clip_norm
    self.b1, self.b2, self.eps = beta_1, beta_2, epsilon
    self.step = 0

  def _excluded(self, name):
    return any(re.search(p, name) for p in self.exclude)

  def apply(self, grads):
    grads = {k: np.asarray(g, np.float64) for k, g in grads.items()}
    if self.clip:
      norm = np.sqrt(sum(np.sum(g * g) for g in grads.values()))
      grads = {k: g * self.clip / max(norm, self.clip) for k, g in grads.items()}
    lr = self.lr_fn(self.step)
    for name, g in grads.items():
      w = self.params[name]
      self.m[name] = self.b1 * self.m[name] + (1 - self.b1) * g
      self.v[name] = self.b2 * self.v[name] + (1 - self.b2) * g * g
      u = self.m[name] / (np.sqrt(self.v[name]) + self.eps)
      if self.wd and not self._excluded(name):
        u = u + self.wd * w
      r = 1.0
      if self.lamb and not self._excluded(name):
        w_norm, u_norm = np.linalg.norm(w), np.linalg.norm(u)
        r = w_norm / u_norm if (w_norm > 0 and u_norm > 0) else 1.0
      self.params[name] = w - r * lr * u
    self.step += 1


def reference_lr(step, init, total, warmup, start=0, power=1.0):
  s = step - start
  if warmup and s < warmup:
    return init * s / warmup
  return init * (1.0 - min(step, total) / total) ** power


class _Head(keras.layers.Layer):
  """Weights named like the reference's cls/predictions/output_bias and cls/seq_relationship/output_weights."""

  def build(self, input_shape):
    self.output_weights = self.add_weight(name="output_weights", shape=(2, int(input_shape[-1])),
                                          initializer=keras.initializers.RandomNormal(seed=3))
    self.output_bias = self.add_weight(name="output_bias", shape=(2,), initializer="ones")

  def call(self, x):
    return tf.matmul(x, self.output_weights, transpose_b=True) + self.output_bias


def tiny_model():
  """A model whose real variable paths contain LayerNorm, layer_norm, bias, and a zero-norm kernel."""
  keras.utils.set_random_seed(0)
  inp = keras.Input((6,))
  x = keras.layers.Dense(5, name="dense", kernel_initializer=keras.initializers.GlorotUniform(seed=1),
                         bias_initializer="ones")(inp)
  x = keras.layers.LayerNormalization(name="LayerNorm", epsilon=1e-12)(x)
  x = keras.layers.Dense(4, name="zero_dense", use_bias=False, kernel_initializer="zeros")(x)
  x = keras.layers.LayerNormalization(name="layer_norm", epsilon=1e-12)(x)
  out = _Head(name="seq_relationship")(x)
  return keras.Model(inp, out)


def paths(model):
  return [v.path for v in model.trainable_variables]


def snapshot(model):
  return {v.path: v.numpy().astype(np.float64) for v in model.trainable_variables}


def random_grads(model, step, scale):
  rng = np.random.default_rng(100 + step)
  grads = {v.path: (rng.standard_normal(v.shape) * scale).astype(np.float32) for v in model.trainable_variables}
  # A gradient that is exactly zero for one variable (with decay on: u = λw; with decay off: ‖u‖ = 0).
  grads["seq_relationship/output_bias"] = np.zeros(2, np.float32)
  return grads


def test_model_paths_are_the_real_ones():
  assert paths(tiny_model()) == [
      "dense/kernel", "dense/bias", "LayerNorm/gamma", "LayerNorm/beta", "zero_dense/kernel", "layer_norm/gamma",
      "layer_norm/beta", "seq_relationship/output_weights", "seq_relationship/output_bias"]


def test_exclusions_follow_full_paths():
  model = tiny_model()
  opt = optimization.create_optimizer("lamb", 1e-3)
  opt.build(model.trainable_variables)
  decisions = {p: (d, a) for p, d, a in opt.variable_decisions()}
  for p in ("dense/kernel", "zero_dense/kernel", "seq_relationship/output_weights"):
    assert decisions[p] == (True, True), p
  for p in ("dense/bias", "LayerNorm/gamma", "LayerNorm/beta", "layer_norm/gamma", "layer_norm/beta",
            "seq_relationship/output_bias"):
    assert decisions[p] == (False, False), p
  # Separate adaptation list (no fallback) and AdamW (never adapts).
  opt2 = optimization.LAMB(1e-3, weight_decay_rate=0.01, exclude_from_weight_decay=["bias"],
                           exclude_from_layer_adaptation=["LayerNorm"])
  opt2.build(model.trainable_variables)
  d2 = {p: (d, a) for p, d, a in opt2.variable_decisions()}
  assert d2["dense/bias"] == (False, True)
  assert d2["LayerNorm/gamma"] == (True, False)
  opt3 = optimization.create_optimizer("adamw", 1e-3)
  opt3.build(model.trainable_variables)
  assert not any(a for _, _, a in opt3.variable_decisions())


def _run_against_numpy(name, jit, steps=5, clip=1.0, wd=0.01, lr_kwargs=None):
  model = tiny_model()
  lr_kwargs = lr_kwargs or dict(num_train_steps=20, num_warmup_steps=2)
  init = 0.05
  opt = optimization.create_optimizer(name, init, weight_decay_rate=wd, clip_norm=clip, **lr_kwargs)
  opt.build(model.trainable_variables)
  ref = NumpyReference(snapshot(model), lamb=(name == "lamb"), weight_decay_rate=wd, exclude=EXCLUDE,
                       clip_norm=clip,
                       lr_fn=lambda s: reference_lr(s, init, lr_kwargs["num_train_steps"],
                                                    lr_kwargs["num_warmup_steps"]))
  variables = model.trainable_variables

  def apply(grads):
    opt.apply(grads, variables)

  if jit:
    apply = tf.function(apply, jit_compile=True)
  for step in range(steps):
    # Alternate small and large gradients so the global-norm clip is both inactive and active.
    g = random_grads(model, step, scale=0.01 if step % 2 else 3.0)
    apply([tf.constant(g[p]) for p in paths(model)])
    ref.apply(g)
  assert int(opt.iterations.numpy()) == steps
  got = snapshot(model)
  for p in paths(model):
    np.testing.assert_allclose(got[p], ref.params[p], rtol=2e-5, atol=2e-6, err_msg=p)
  for p, slot in opt.slot_variables().items():
    base, kind = p.rsplit("/", 1)
    want = ref.m[base] if kind == "adam_m" else ref.v[base]
    np.testing.assert_allclose(slot.numpy(), want, rtol=2e-5, atol=1e-9, err_msg=p)
  return got, ref


@pytest.mark.parametrize("name", ["lamb", "adamw"])
@pytest.mark.parametrize("jit", [False, True], ids=["eager", "xla"])
def test_matches_numpy_reference(name, jit):
  got, ref = _run_against_numpy(name, jit)
  # The run must have moved the variables (lr(0) = 0 only freezes the first step).
  start = snapshot(tiny_model())
  assert np.abs(got["dense/kernel"] - start["dense/kernel"]).max() > 1e-3
  # Zero-norm kernel: LAMB falls back to r = 1 and it leaves zero.
  assert np.abs(got["zero_dense/kernel"]).max() > 0


def test_constant_lr_and_no_clip_match_numpy():
  model = tiny_model()
  opt = optimization.LAMB(0.01, weight_decay_rate=0.1, exclude_from_weight_decay=EXCLUDE)
  ref = NumpyReference(snapshot(model), lamb=True, lr_fn=lambda s: 0.01, weight_decay_rate=0.1, exclude=EXCLUDE,
                       clip_norm=None)
  for step in range(3):
    g = random_grads(model, step, scale=2.0)
    opt.apply([tf.constant(g[p]) for p in paths(model)], model.trainable_variables)
    ref.apply(g)
  for p, w in snapshot(model).items():
    np.testing.assert_allclose(w, ref.params[p], rtol=2e-5, atol=2e-6, err_msg=p)


def test_zero_gradients_decay_only_non_excluded():
  """With g = 0 the moments stay 0, so u = λw where decay applies and u = 0 (no move) where it is excluded."""
  for name in ("adamw", "lamb"):
    model = tiny_model()
    before = snapshot(model)
    opt = optimization.create_optimizer(name, 0.1, weight_decay_rate=0.5, clip_norm=None)
    opt.apply([tf.zeros_like(v) for v in model.trainable_variables], model.trainable_variables)
    after = snapshot(model)
    # AdamW: w ← w − lr·λ·w.  LAMB: r = ‖w‖/‖λw‖ = 1/λ, so w ← w − lr·w.
    factor = (1 - 0.1 * 0.5) if name == "adamw" else (1 - 0.1)
    for p in ("dense/kernel", "seq_relationship/output_weights"):
      np.testing.assert_allclose(after[p], before[p] * factor, rtol=1e-6, err_msg=f"{name} {p}")
    for p in ("dense/bias", "LayerNorm/gamma", "LayerNorm/beta", "layer_norm/gamma", "seq_relationship/output_bias",
              "zero_dense/kernel"):
      np.testing.assert_array_equal(after[p], before[p], err_msg=f"{name} {p}")


def test_lamb_trust_ratio_fallbacks():
  """‖w‖ = 0 → r = 1 (plain Adam step of size lr); excluded variables never get r ≠ 1."""
  w_zero = keras.Variable(np.zeros(3, np.float32), name="kernel")
  w_bias = keras.Variable(np.full(3, 10.0, np.float32), name="bias")
  opt = optimization.LAMB(0.5, weight_decay_rate=0.01, exclude_from_weight_decay=EXCLUDE)
  g = tf.constant([1.0, -2.0, 0.5])
  opt.apply([g, g], [w_zero, w_bias])
  # First step without bias correction: u = 0.1·g / (√(0.001·g²) + ε).
  u = 0.1 * g.numpy() / (np.sqrt(0.001 * g.numpy() ** 2) + 1e-6)
  np.testing.assert_allclose(w_zero.numpy(), -0.5 * u, rtol=1e-5)
  np.testing.assert_allclose(w_bias.numpy(), 10.0 - 0.5 * u, rtol=1e-5)
  # Keras' bias-corrected Lamb would have taken a step of ~lr·sign(g) (≈ 0.5); ours is ≈ 0.5·3.16.
  assert abs(w_zero.numpy()[0]) > 1.0


def test_adamw_reference_sanity():
  """Upstream optimization_test: λ = 0, lr 0.2, 100 steps moves w to the target."""
  w = keras.Variable(np.array([0.1, -0.2, -0.1], np.float32), name="x")
  target = tf.constant([0.4, 0.2, -0.5])
  opt = optimization.AdamW(learning_rate=0.2)

  @tf.function
  def step():
    with tf.GradientTape() as tape:
      loss = tf.reduce_mean(tf.square(target - w.value))
    opt.apply(tape.gradient(loss, [w.value]), [w])

  for _ in range(100):
    step()
  np.testing.assert_allclose(w.numpy(), [0.4, 0.2, -0.5], rtol=1e-2, atol=1e-2)
  assert int(opt.iterations.numpy()) == 100


@pytest.mark.slow
def test_schedule_reference_values():
  sched = lr_schedule.AlbertLearningRateSchedule(0.00176, num_train_steps=125000, num_warmup_steps=3125)
  lr = lambda s: float(sched(s).numpy())  # noqa: E731
  assert lr(0) == 0.0
  np.testing.assert_allclose(lr(3124), 0.00176 * 3124 / 3125, rtol=1e-6)
  np.testing.assert_allclose(lr(3125), 0.00176 * (1 - 3125 / 125000), rtol=1e-6)
  np.testing.assert_allclose(lr(3125), 0.001716, rtol=1e-6)
  np.testing.assert_allclose(lr(62500), 0.00088, rtol=1e-6)
  assert lr(125000) == 0.0
  assert lr(200000) == 0.0
  # The jump at W (here down, from init·(W−1)/W to init·(1−W/T)): decay is measured from step 0.
  assert lr(3125) < lr(3124)
  # Polynomial power and end rate.
  sq = lr_schedule.AlbertLearningRateSchedule(1.0, num_train_steps=10, poly_power=2.0, end_learning_rate=0.1)
  np.testing.assert_allclose(float(sq(5)), 0.9 * 0.25 + 0.1, rtol=1e-6)
  # Works on a tensor step inside a compiled function.
  np.testing.assert_allclose(
      tf.function(sched, jit_compile=True)(tf.constant(62500, tf.int64)).numpy(), 0.00088, rtol=1e-6)


def test_schedule_start_warmup_step_clamp_flag():
  fixed = lr_schedule.AlbertLearningRateSchedule(1.0, num_train_steps=100, num_warmup_steps=10, start_warmup_step=5)
  compat = lr_schedule.AlbertLearningRateSchedule(1.0, num_train_steps=100, num_warmup_steps=10, start_warmup_step=5,
                                                   clamp_before_warmup=False)
  assert float(fixed(0)) == 0.0 and float(fixed(4)) == 0.0
  np.testing.assert_allclose(float(compat(0)), -0.5, rtol=1e-6)  # the reference's negative lr
  for s in (5, 9, 14, 15, 50):
    np.testing.assert_allclose(float(fixed(s)), reference_lr(s, 1.0, 100, 10, start=5), rtol=1e-6)
    np.testing.assert_allclose(float(compat(s)), float(fixed(s)), rtol=1e-6)


def test_schedule_and_optimizer_config_round_trip():
  sched = lr_schedule.AlbertLearningRateSchedule(0.1, 100, 10, start_warmup_step=2, poly_power=0.5,
                                                  clamp_before_warmup=False)
  again = keras.optimizers.schedules.deserialize(keras.optimizers.schedules.serialize(sched))
  assert isinstance(again, lr_schedule.AlbertLearningRateSchedule)
  assert again.get_config() == sched.get_config()
  for name in ("lamb", "adamw"):
    opt = optimization.create_optimizer(name, sched, weight_decay_rate=0.02, clip_norm=1.0,
                                        exclude_from_layer_adaptation=["LayerNorm"] if name == "lamb" else None)
    clone = keras.optimizers.deserialize(keras.optimizers.serialize(opt))
    assert type(clone) is type(opt)
    assert clone.get_config() == opt.get_config()
    assert clone.get_config()["exclude_from_weight_decay"] == EXCLUDE
    assert clone.global_clipnorm == 1.0 and clone.weight_decay_rate == 0.02


def test_create_optimizer_refuses_schedule_arguments_beside_a_ready_schedule():
  # They were dropped silently: a warmup of 100 steps asked for beside the schedule never happened.
  sched = keras.optimizers.schedules.ExponentialDecay(1e-3, 100, 0.5)
  with pytest.raises(ValueError, match=r"num_train_steps=1000, num_warmup_steps=100 would be ignored"):
    optimization.create_optimizer("lamb", sched, num_train_steps=1000, num_warmup_steps=100)
  with pytest.raises(ValueError, match=r"num_warmup_steps=10 would be ignored"):
    optimization.create_optimizer("adamw", sched, num_warmup_steps=10)
  assert optimization.create_optimizer("lamb", sched)._learning_rate is sched


def test_create_optimizer_errors_and_defaults():
  with pytest.raises(ValueError, match="Unknown optimizer name='sgd'"):
    optimization.create_optimizer("sgd")
  with pytest.raises(ValueError, match="weight_decay_rate"):
    optimization.LAMB(0.1, weight_decay=0.01)
  with pytest.raises(ValueError, match="trainer.gradient_accumulation_steps"):
    optimization.AdamW(0.1, gradient_accumulation_steps=4)
  with pytest.raises(ValueError, match="num_train_steps"):
    lr_schedule.AlbertLearningRateSchedule(0.1, num_train_steps=0)
  opt = optimization.create_optimizer("LAMB", 0.00176, num_train_steps=125000, num_warmup_steps=3125)
  assert isinstance(opt, optimization.LAMB)
  assert (opt.beta_1, opt.beta_2, opt.epsilon, opt.weight_decay_rate) == (0.9, 0.999, 1e-6, 0.01)
  assert opt.global_clipnorm == 1.0
  assert isinstance(opt._learning_rate, lr_schedule.AlbertLearningRateSchedule)
  const = optimization.create_optimizer("adamw", 3e-5, clip_norm=None)
  assert const.global_clipnorm is None and float(const.learning_rate.numpy()) == pytest.approx(3e-5)


def test_clip_by_global_norm_helper():
  clipped, norm = gradients.clip_by_global_norm([tf.constant([3.0]), None, tf.constant([4.0])], 1.0)
  assert float(norm) == pytest.approx(5.0)
  assert clipped[1] is None
  np.testing.assert_allclose([float(clipped[0][0]), float(clipped[2][0])], [0.6, 0.8], rtol=1e-6)
  small, _ = gradients.clip_by_global_norm([tf.constant([0.3, 0.4])], 1.0)
  np.testing.assert_allclose(small[0].numpy(), [0.3, 0.4])
  # Sparse (embedding) gradients are clipped and applied densely, as the reference does.
  table = keras.Variable(np.ones((4, 2), np.float32), name="word_embeddings")
  opt = optimization.AdamW(0.1, clipnorm=None, global_clipnorm=1.0)
  sparse = tf.IndexedSlices(tf.constant([[30.0, 40.0]]), tf.constant([2]), tf.constant([4, 2]))
  opt.apply([sparse], [table])
  m = opt.slot_variables()["word_embeddings/adam_m"].numpy()
  np.testing.assert_allclose(m[2], [0.1 * 0.6, 0.1 * 0.8], rtol=1e-5)
  np.testing.assert_array_equal(m[[0, 1, 3]], 0.0)
  assert float(opt.global_norm) == pytest.approx(50.0)  # logged norm is the pre-clip one


def test_loss_scale_optimizer_wraps_lamb():
  """mixed_float16 training wraps the optimizer; a non-finite step is skipped, a finite one matches LAMB."""
  w = keras.Variable(np.array([1.0, -2.0], np.float32), name="kernel")
  w_ref = keras.Variable(np.array([1.0, -2.0], np.float32), name="kernel")
  scaled = keras.optimizers.LossScaleOptimizer(optimization.LAMB(0.1, weight_decay_rate=0.01),
                                               initial_scale=8.0, dynamic_growth_steps=1000)
  plain = optimization.LAMB(0.1, weight_decay_rate=0.01)
  scaled.apply([tf.constant([np.inf, 1.0])], [w])
  np.testing.assert_array_equal(w.numpy(), [1.0, -2.0])
  scaled.apply([tf.constant([4.0, 2.0])], [w])  # the inf step halved the scale to 4
  plain.apply([tf.constant([1.0, 0.5])], [w_ref])
  np.testing.assert_allclose(w.numpy(), w_ref.numpy(), rtol=1e-6)
  assert not np.allclose(w.numpy(), [1.0, -2.0])


def test_trainable_variables_excluding():
  model = tiny_model()
  kept = optimization.trainable_variables_excluding(model.trainable_variables, ["LayerNorm", "^seq_relationship/"])
  assert [v.path for v in kept] == ["dense/kernel", "dense/bias", "zero_dense/kernel", "layer_norm/gamma",
                                    "layer_norm/beta"]
  assert len(optimization.trainable_variables_excluding(model.trainable_variables, None)) == 9


# ----------------------------------------------------------------------------------------------------------------------
# Accumulation
# ----------------------------------------------------------------------------------------------------------------------
def _linear_problem():
  rng = np.random.default_rng(7)
  x = rng.standard_normal((8, 3)).astype(np.float32)
  y = rng.standard_normal((8, 2)).astype(np.float32)
  return tf.constant(x), tf.constant(y)


def _linear_model():
  keras.utils.set_random_seed(1)
  inp = keras.Input((3,))
  return keras.Model(inp, keras.layers.Dense(2, name="dense",
                                             kernel_initializer=keras.initializers.RandomNormal(seed=2))(inp))


def _grad_fn(model, batch_size):
  """The gradient of the mean squared error over a batch of `batch_size`, for any part of that batch: its share."""
  def fn(batch):
    x, y = batch
    with tf.GradientTape() as tape:
      loss = tf.reduce_sum(tf.square(model(x) - y)) / (batch_size * 2)
    return loss, tape.gradient(loss, model.trainable_variables)
  return fn


def test_micro_batch_while_loop_equals_big_batch_under_xla():
  x, y = _linear_problem()
  model = _linear_model()
  fn = _grad_fn(model, len(x))  # micro-batches divide by the whole batch: their shares sum to the batch loss
  want_loss, want = fn((x, y))
  got_loss, got = tf.function(lambda b: gradients.accumulate_micro_batch_gradients(fn, b, 4),
                              jit_compile=True)((x, y))
  np.testing.assert_allclose(got_loss.numpy(), want_loss.numpy(), rtol=1e-5)
  for a, b in zip(got, want):
    np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-7)
  with pytest.raises(ValueError, match="not divisible"):
    gradients.accumulate_micro_batch_gradients(fn, (x, y), 3)


# ----------------------------------------------------------------------------------------------------------------------
# Checkpointing
# ----------------------------------------------------------------------------------------------------------------------
def test_checkpoint_round_trip_restores_slots_and_step(tmp_path):
  def train(model, opt, steps, start):
    for s in range(start, start + steps):
      g = random_grads(model, s, scale=0.5)
      opt.apply([tf.constant(g[p]) for p in paths(model)], model.trainable_variables)

  model = tiny_model()
  opt = optimization.create_optimizer("lamb", 0.01, num_train_steps=50, num_warmup_steps=1)
  opt.build(model.trainable_variables)
  train(model, opt, 3, 0)
  path = tf.train.Checkpoint(model=model, optimizer=opt).save(str(tmp_path / "ckpt"))

  model2 = tiny_model()
  opt2 = optimization.create_optimizer("lamb", 0.01, num_train_steps=50, num_warmup_steps=1)
  # Deferred restore: the slots are created by build() after restore() was called.
  status = tf.train.Checkpoint(model=model2, optimizer=opt2).restore(path)
  opt2.build(model2.trainable_variables)
  status.assert_existing_objects_matched()
  assert int(opt2.iterations.numpy()) == 3
  slots, slots2 = opt.slot_variables(), opt2.slot_variables()
  assert set(slots) == set(slots2) and "dense/kernel/adam_m" in slots
  for k in slots:
    np.testing.assert_array_equal(slots[k].numpy(), slots2[k].numpy(), err_msg=k)
    assert np.any(slots[k].numpy() != 0) or k.startswith("seq_relationship/output_bias")
  # Continuing both gives identical weights.
  train(model, opt, 2, 3)
  train(model2, opt2, 2, 3)
  for a, b in zip(model.trainable_variables, model2.trainable_variables):
    np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_exclusions_on_the_real_pretrainer():
  """On AlbertPretrainer's real paths: LayerNorm and every bias get neither decay nor adaptation (reference §4.6)."""
  from official_albert import AlbertConfig
  from official_albert import AlbertPretrainer
  config = AlbertConfig(vocab_size=50, embedding_size=8, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=32, max_position_embeddings=16)
  model = AlbertPretrainer(config)
  ids = tf.ones((1, 4), tf.int32)
  model({"input_word_ids": ids, "input_mask": ids, "input_type_ids": tf.zeros_like(ids),
         "masked_lm_positions": tf.zeros((1, 2), tf.int32)})
  opt = optimization.create_optimizer("lamb", 1e-3)
  opt.build(model.trainable_variables)
  decisions = opt.variable_decisions()
  assert len(decisions) == len(model.trainable_variables)
  for path, decay, adapt in decisions:
    excluded = "LayerNorm" in path or path.endswith("bias")
    assert (decay, adapt) == (not excluded, not excluded), path
  joined = " ".join(p for p, _, _ in decisions)
  for name in ("LayerNorm/gamma", "output_bias", "word_embeddings", "seq_relationship/output_weights"):
    assert name in joined
