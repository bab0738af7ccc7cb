"""The train binary's learning-rate schedule as a Keras schedule, for the experiments' own loops on Keras' JAX backend.

`official_albert.training` builds its schedule in TensorFlow; the accelerator host of `experiments.long_range_jax`
and `experiments.long_pretrain_jax` has neither TensorFlow nor SentencePiece, so this module imports nothing but
Keras (when called).
"""


def warmup_linear_decay(peak: float, steps: int):
  """Linear warmup over a tenth of `steps` to `peak`, then linear decay to 0 at `steps` (a function of the optimizer's
  iteration count, as the train binary's)."""
  import keras  # noqa: PLC0415 (Keras' backend is chosen by the caller before the first import)
  warmup = max(steps // 10, 1)

  class WarmupLinearDecay(keras.optimizers.schedules.LearningRateSchedule):

    def __call__(self, step):
      step = keras.ops.cast(step, "float32")
      rise = peak * (step + 1.0) / warmup
      fall = peak * keras.ops.maximum(0.0, (steps - step) / max(steps - warmup, 1))
      return keras.ops.where(step < warmup, rise, fall)

  return WarmupLinearDecay()
