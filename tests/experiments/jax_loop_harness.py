"""The JAX half of tests/experiments/test_jax_loop.py: experiments.jax_loop's schedule and optimizer on Keras' JAX
backend, with TensorFlow absent (a JAX-only host's situation), written to an .npz the test compares with the train
binary's TensorFlow schedule and AdamW on the same values.

    KERAS_BACKEND=jax python -m tests.experiments.jax_loop_harness OUT.npz

`model()` and `gradients()` are shared by both halves: the same seeded weights and per-step gradients (large enough
that the global-norm clip at 1.0 bites), on variables named so that some are decayed and some excluded.
"""

import sys

import numpy as np

PEAK, TOTAL_STEPS = 1e-3, 20  # W = 2 warmup steps
WARMUP = max(TOTAL_STEPS // 10, 1)
SCHEDULE_STEPS = (0, 1, WARMUP - 1, WARMUP, WARMUP + 1, TOTAL_STEPS // 2, TOTAL_STEPS - 1, TOTAL_STEPS,
                  TOTAL_STEPS + 5)
TRAIN_STEPS = 4


def model():
  """A small functional model: `dense/kernel`, `dense/bias`, `LayerNorm/gamma`, `LayerNorm/beta`, `output/...`."""
  import keras  # pylint: disable=g-import-not-at-top
  inputs = keras.Input((6,))
  hidden = keras.layers.LayerNormalization(name="LayerNorm")(keras.layers.Dense(5, name="dense")(inputs))
  net = keras.Model(inputs, keras.layers.Dense(3, name="output")(hidden), name="net")
  rng = np.random.default_rng(0)
  for variable in net.trainable_variables:
    variable.assign(rng.normal(size=variable.shape).astype(np.float32))
  return net


def gradients(variables):
  """[step][variable] float32 gradients, global norm ~8 (the clip scales them to 1)."""
  rng = np.random.default_rng(1)
  return [[rng.normal(size=v.shape).astype(np.float32) for v in variables] for _ in range(TRAIN_STEPS)]


def batch_of(grads):
  """The step's batch of one step's gradients: {"g0": ..., "g1": ...} on the device."""
  import jax.numpy as jnp  # pylint: disable=g-import-not-at-top
  return {f"g{i}": jnp.asarray(g) for i, g in enumerate(grads)}


def main(out: str) -> None:
  for name in ("tensorflow", "tensorflow_text", "tf_keras"):
    sys.modules[name] = None  # Python's mark of an absent module
  from experiments import jax_loop  # pylint: disable=g-import-not-at-top
  jax_loop.use_jax_backend()
  import jax.numpy as jnp  # pylint: disable=g-import-not-at-top

  net = model()
  schedule = jax_loop.warmup_linear_decay(PEAK, TOTAL_STEPS)
  optimizer = jax_loop.adamw(net, schedule)
  steps = gradients(net.trainable_variables)

  def loss_fn(trainable, non_trainable, batch):  # d loss / d trainable = the batch's fixed gradients
    return sum(jnp.sum(w * batch[f"g{i}"]) for i, w in enumerate(trainable)), non_trainable

  step = jax_loop.train_step(loss_fn, optimizer)
  trainable, non_trainable = jax_loop.state(net)
  optimizer_vars = [v.value for v in optimizer.variables]
  arrays = {"learning_rates": np.asarray([float(schedule(s)) for s in SCHEDULE_STEPS], np.float32)}
  for i, grads in enumerate(steps):
    trainable, non_trainable, optimizer_vars, _ = step(trainable, non_trainable, optimizer_vars, batch_of(grads))
    for variable, value in zip(net.trainable_variables, trainable):
      arrays[f"step{i + 1}/{variable.path}"] = np.asarray(value)
  arrays.update(non_finite_step(net, optimizer, step, trainable, non_trainable, optimizer_vars, steps[0]))
  np.savez(out, **arrays)


def non_finite_step(net, optimizer, step, trainable, non_trainable, optimizer_vars, grads):
  """A step with one inf gradient is not applied (every state as before, loss NaN), and `run` raises naming it."""
  from experiments import jax_loop  # pylint: disable=g-import-not-at-top

  bad = [g.copy() for g in grads]
  bad[0].flat[0] = np.inf
  after = step(trainable, non_trainable, optimizer_vars, batch_of(bad))
  unchanged = all(np.array_equal(np.asarray(a), np.asarray(b))
                  for a, b in zip([*after[0], *after[1], *after[2]], [*trainable, *non_trainable, *optimizer_vars]))
  batches = iter([{f"g{i}": g for i, g in enumerate(gs)} for gs in (grads, grads, bad, grads)])
  try:
    jax_loop.run(step, net, optimizer, batches, 4, lambda state: None, every=2)
    error = ""
  except FloatingPointError as e:
    error = str(e)
  return {"skipped_step_unchanged": np.asarray(unchanged), "skipped_step_loss": np.asarray(after[3]),
          "run_error": np.asarray(error)}


if __name__ == "__main__":
  main(sys.argv[1])
