"""Initializers (reference §1.2 item 8: truncated normal cut at 2σ, stddev = initializer_range; zero biases)."""

import keras


def kernel_initializer(initializer_range: float, seed=None):
  """A new truncated-normal initializer: call it once per weight, never share the object between weights.

  Keras 3's random initializers are stateless: one made with `seed=None` draws a seed when it is made (from the
  global Keras seed, so runs stay reproducible) and returns the same numbers for the same shape on every later call.
  One object handed to several weights gives them identical (or, for other shapes, reshaped) starting values, where
  the reference draws each table and kernel independently. The same holds for an int `seed`.

  Args:
    initializer_range: the standard deviation (`AlbertConfig.initializer_range`).
    seed: None (drawn from the global Keras seed), an int, or a `keras.random.SeedGenerator`.

  Returns:
    A `keras.initializers.TruncatedNormal`; like `tf.truncated_normal`, it redraws values beyond two standard
    deviations.
  """
  return keras.initializers.TruncatedNormal(stddev=initializer_range, seed=seed)
