"""Initializers (reference §1.2 item 8: truncated normal cut at 2σ, stddev = initializer_range; zero biases)."""

import keras


def kernel_initializer(initializer_range: float, seed=None):
  # keras.initializers.TruncatedNormal redraws values beyond two standard deviations, like tf.truncated_normal.
  return keras.initializers.TruncatedNormal(stddev=initializer_range, seed=seed)
