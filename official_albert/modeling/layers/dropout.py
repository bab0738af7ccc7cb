"""Dropout whose masks differ across replicas and workers (every dropout the modeling code builds).

Keras' `Dropout` draws its seed from a `SeedGenerator` whose state is one variable with `aggregation="none"`. Built
in a `MirroredStrategy` / `MultiWorkerMirroredStrategy` scope, that variable is mirrored: every replica (and, since
the initial values are broadcast from worker 0, every worker) starts from the same state and advances it in
lockstep, so all replicas draw the same masks, and row i of every replica's slice of the global batch gets the same
one. A run on R replicas then sees B/R distinct masks per global batch of B instead of B, with no error.

`AlbertDropout` is Keras' `Dropout` (same seed generator, same variables, same config), except that on the
TensorFlow backend, inside a replica context with more than one replica in sync, it folds the global replica id
(`replica_id_in_sync_group`, which counts across workers under MWMS) into the drawn seed. The seed state stays the
one checkpointed variable, so a resume is still bit-exact, and on one device the layer is `keras.layers.Dropout`
call for call (the same numbers). JAX backend: unchanged.
"""

import keras


def _replica_id_to_fold():
  """The global replica id (an int32 scalar tensor), or None where Keras' own draw is already right.

  None: another backend than TensorFlow, a cross-replica context (no replica to tell apart), or one replica in sync.
  """
  if keras.backend.backend() != "tensorflow":
    return None
  import tensorflow as tf  # noqa: PLC0415  (TensorFlow backend only: the modeling code also runs under JAX)
  context = tf.distribute.get_replica_context()
  if context is None or context.num_replicas_in_sync <= 1:
    return None
  return tf.cast(context.replica_id_in_sync_group, tf.int32)


@keras.saving.register_keras_serializable(package="official_albert")
class AlbertDropout(keras.layers.Dropout):
  """`keras.layers.Dropout` with one independent mask stream per replica (module docstring: why).

  With several replicas the masks are what one device would draw statistically (independent per replica and per
  row), not bit-identical to a one-device run of the same global batch.
  """

  def call(self, inputs, training=False):
    replica_id = _replica_id_to_fold() if training and 0 < self.rate < 1 else None
    if replica_id is None:
      # Keras' own call (looked up at call time, so a test that patches `keras.layers.Dropout.call` still applies).
      return super().call(inputs, training=training)
    import tensorflow as tf  # noqa: PLC0415  (reached on the TensorFlow backend only)
    seed = self.seed_generator.next()
    # As keras' TF `random.dropout` casts its int64 seed state: the stateless ops take int32 seeds under XLA.
    if seed.dtype != tf.int32:
      seed = tf.cast(tf.math.floormod(seed, tf.int32.max - 1), tf.int32)
    seed = tf.random.experimental.stateless_fold_in(seed, replica_id)
    noise_shape = tf.shape(inputs)
    if self.noise_shape is not None:
      noise_shape = [noise_shape[i] if dim is None else dim for i, dim in enumerate(self.noise_shape)]
    return tf.nn.experimental.stateless_dropout(inputs, rate=self.rate, noise_shape=noise_shape, seed=seed)
