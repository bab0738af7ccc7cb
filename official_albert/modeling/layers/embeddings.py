"""Factorized ALBERT embeddings (reference §1.2 step 1).

word [V,E] + token type [T,E] + position [P,E] → LayerNorm → dropout.
"""

import keras
from keras import ops

from official_albert.modeling.layers.initializers import kernel_initializer


def layer_norm(epsilon: float, name: str = "LayerNorm") -> keras.layers.LayerNormalization:
  """LayerNorm over the last axis, always computed in float32 (also under mixed precision)."""
  return keras.layers.LayerNormalization(axis=-1, epsilon=epsilon, dtype="float32", name=name)


@keras.saving.register_keras_serializable(package="official_albert")
class AlbertEmbeddings(keras.layers.Layer):
  """Embeddings of width E (`bert/embeddings/*`). The output has width E; projection to H happens in the encoder."""

  def __init__(self, vocab_size, embedding_size, max_position_embeddings, type_vocab_size, initializer_range=0.02,
               layer_norm_eps=1e-12, dropout_rate=0.0, **kwargs):
    super().__init__(**kwargs)
    self.vocab_size = vocab_size
    self.embedding_size = embedding_size
    self.max_position_embeddings = max_position_embeddings
    self.type_vocab_size = type_vocab_size
    self.initializer_range = initializer_range
    self.layer_norm_eps = layer_norm_eps
    self.dropout_rate = dropout_rate
    self.layer_norm = layer_norm(layer_norm_eps)
    self.dropout = keras.layers.Dropout(dropout_rate, name="dropout")

  def build(self, input_shape=None):
    init = kernel_initializer(self.initializer_range)
    # Tables stay float32 under mixed precision (no autocast): lookups are cheap and the sum feeds a float32 LN.
    self.word_embeddings = self.add_weight(
        name="word_embeddings", shape=(self.vocab_size, self.embedding_size), initializer=init, dtype="float32",
        autocast=False)
    self.token_type_embeddings = self.add_weight(
        name="token_type_embeddings", shape=(self.type_vocab_size, self.embedding_size), initializer=init,
        dtype="float32", autocast=False)
    self.position_embeddings = self.add_weight(
        name="position_embeddings", shape=(self.max_position_embeddings, self.embedding_size), initializer=init,
        dtype="float32", autocast=False)
    self.layer_norm.build((None, None, self.embedding_size))

  def call(self, input_word_ids, input_type_ids, training=False):
    seq_length = ops.shape(input_word_ids)[1]
    words = ops.take(self.word_embeddings, input_word_ids, axis=0)
    types = ops.take(self.token_type_embeddings, input_type_ids, axis=0)
    positions = self.position_embeddings[:seq_length]
    x = words + types + positions[None, :, :]
    x = self.layer_norm(x)
    return self.dropout(x, training=training)

  def compute_output_spec(self, input_word_ids, input_type_ids, training=False):
    return keras.KerasTensor(tuple(input_word_ids.shape) + (self.embedding_size,), dtype="float32")

  def get_config(self):
    config = super().get_config()
    config.update(vocab_size=self.vocab_size, embedding_size=self.embedding_size,
                  max_position_embeddings=self.max_position_embeddings, type_vocab_size=self.type_vocab_size,
                  initializer_range=self.initializer_range, layer_norm_eps=self.layer_norm_eps,
                  dropout_rate=self.dropout_rate)
    return config
