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
    return sum(jnp.sum(w * g) for w, g in zip(trainable, batch["grads"])), non_trainable

  step = jax_loop.train_step(loss_fn, optimizer)
  trainable, non_trainable = jax_loop.state(net)
  optimizer_vars = [v.value for v in optimizer.variables]
  arrays = {"learning_rates": np.asarray([float(schedule(s)) for s in SCHEDULE_STEPS], np.float32)}
  for i, grads in enumerate(steps):
    trainable, non_trainable, optimizer_vars, _ = step(trainable, non_trainable, optimizer_vars,
                                                       {"grads": [jnp.asarray(g) for g in grads]})
    for variable, value in zip(net.trainable_variables, trainable):
      arrays[f"step{i + 1}/{variable.path}"] = np.asarray(value)
  np.savez(out, **arrays)


if __name__ == "__main__":
  main(sys.argv[1])
