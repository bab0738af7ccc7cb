"""Output heads, each named after its TF1 checkpoint scope (reference §1.3, §1.5, §1.6, §5).

Every head computes its logits in float32, also under `mixed_bfloat16` (like `layer_norm()`): bfloat16 logits keep 8
significant bits, so near-ties became exact ties (argmax → the lower index), regression / rerank scores collapsed onto
the bfloat16 grid and the early-exit rule compared rounded logits. The heads are float32 layers, so Keras casts their
bfloat16 inputs up on entry; the H-wide hidden layers inside them (`transform_dense`, the SQuAD 2.0 head's `dense_0`s)
are built with the global policy and still run their GEMMs in bfloat16. Under float32 nothing changes (same ops, bit
for bit), and the variables were float32 under every policy, so checkpoints and saved models load as before.
"""

import keras
from keras import ops

from official_albert.modeling.layers.activations import get_activation
from official_albert.modeling.layers.dropout import AlbertDropout
from official_albert.modeling.layers.embeddings import layer_norm
from official_albert.modeling.layers.initializers import kernel_initializer


def _float32_layer(kwargs):
  """A head's `Layer` kwargs with `dtype="float32"` (module docstring: why).

  A `dtype` already in them is replaced: a head's layer config saved before the heads were float32 carries the global
  policy (e.g. `mixed_bfloat16`), and that head now computes in float32 like every other.
  """
  return {**kwargs, "dtype": "float32"}


def gather_positions(sequence, positions):
  """sequence [B,S,H], positions [B,P] → [B,P,H]."""
  return ops.take_along_axis(sequence, ops.cast(positions, "int32")[:, :, None], axis=1)


def top_k_lowest_index_first(values, k: int):
  """`ops.top_k(values, k)` (values, indices) with equal values taken lowest index first, on every backend.

  TensorFlow's and JAX's top_k already order ties so; torch's topk promises no order among equal values, and the SQuAD
  2.0 head's masked positions all tie at −1e30 (fewer answerable tokens than start_n_top: torch then picked other
  indices than TF, and other end candidates). On torch a stable descending sort (argsort of the negated values, exact)
  gives TF's choice; the other backends keep their top_k (the exported graphs are unchanged).
  """
  if keras.backend.backend() != "torch":
    return ops.top_k(values, k=k)
  indices = ops.argsort(-values, axis=-1)[..., :k]
  return ops.take_along_axis(values, indices, axis=-1), indices


@keras.saving.register_keras_serializable(package="official_albert")
class MaskedLMHead(keras.layers.Layer):
  """`cls/predictions`: gather → dense H→E + act → LayerNorm → logits against the tied word table + output_bias.

  A float32 layer (module docstring): the word table arrives unrounded and the vocabulary projection runs in float32;
  `transform_dense` follows the global policy.
  """

  def __init__(self, vocab_size, embedding_size, hidden_size, hidden_act="gelu_new", initializer_range=0.02,
               layer_norm_eps=1e-12, **kwargs):
    super().__init__(**_float32_layer(kwargs))
    self.vocab_size = vocab_size
    self.embedding_size = embedding_size
    self.hidden_size = hidden_size
    self.hidden_act = hidden_act
    self.initializer_range = initializer_range
    self.layer_norm_eps = layer_norm_eps
    self.dense = keras.layers.Dense(embedding_size, activation=get_activation(hidden_act),
                                    kernel_initializer=kernel_initializer(initializer_range), name="transform_dense")
    self.layer_norm = layer_norm(layer_norm_eps, "LayerNorm")

  def build(self, input_shape=None):
    self.dense.build((None, None, self.hidden_size))
    self.layer_norm.build((None, None, self.embedding_size))
    # Not autocast: the bias is added to float32 logits.
    self.output_bias = self.add_weight(name="output_bias", shape=(self.vocab_size,), initializer="zeros",
                                       dtype="float32", autocast=False)

  def call(self, sequence_output, masked_lm_positions, embedding_table):
    # Gather first: the vocab projection runs only at the P masked positions, not all S.
    x = gather_positions(sequence_output, masked_lm_positions)
    x = self.layer_norm(self.dense(x))
    return ops.einsum("bpe,ve->bpv", x, embedding_table) + self.output_bias

  def get_config(self):
    config = super().get_config()
    config.update(vocab_size=self.vocab_size, embedding_size=self.embedding_size, hidden_size=self.hidden_size,
                  hidden_act=self.hidden_act, initializer_range=self.initializer_range,
                  layer_norm_eps=self.layer_norm_eps)
    return config


@keras.saving.register_keras_serializable(package="official_albert")
class TransposedLogits(keras.layers.Layer):
  """logits = x · Wᵀ + b with W stored [num_outputs, H], the TF1 `output_weights` layout (SOP, classifier, SQuAD v1).

  HF stores the same layout (`sop_classifier.classifier.weight`, `classifier.weight`, `qa_outputs.weight`), so weights
  convert without a transpose. A float32 layer (module docstring), its dropout too: the matmul + bias run in float32.
  """

  def __init__(self, num_outputs, hidden_size, initializer_range=0.02, dropout_rate=0.0, **kwargs):
    super().__init__(**_float32_layer(kwargs))
    self.num_outputs = num_outputs
    self.hidden_size = hidden_size
    self.initializer_range = initializer_range
    self.dropout_rate = dropout_rate
    self.dropout = AlbertDropout(dropout_rate, dtype="float32", name="dropout")

  def build(self, input_shape=None):
    self.output_weights = self.add_weight(name="output_weights", shape=(self.num_outputs, self.hidden_size),
                                          initializer=kernel_initializer(self.initializer_range))
    self.output_bias = self.add_weight(name="output_bias", shape=(self.num_outputs,), initializer="zeros")

  def call(self, x, training=False):
    x = self.dropout(x, training=training)
    return ops.matmul(x, ops.transpose(self.output_weights)) + self.output_bias

  def get_config(self):
    config = super().get_config()
    config.update(num_outputs=self.num_outputs, hidden_size=self.hidden_size,
                  initializer_range=self.initializer_range, dropout_rate=self.dropout_rate)
    return config


@keras.saving.register_keras_serializable(package="official_albert")
class SquadV2Head(keras.layers.Layer):
  """The original SQuAD 2.0 head (XLNet-style; reference §5.2 "v2 head").

  Start: `start_logits/dense` [H,1], p_mask-masked log-softmax. End: conditioned on a start (the gold one in
  training, each of the top `start_n_top` at inference): concat[h_t; h_start] → `end_logits/dense_0` (2H→H, tanh) →
  `end_logits/LayerNorm` → `end_logits/dense_1` (H→1) → masked log-softmax. Answer class: concat[Σ softmax(start)·h,
  h_CLS] → `answer_class/dense_0` (tanh) → dropout → `answer_class/dense_1` (no bias) → `cls_logits`.

  A float32 layer (module docstring), and so are its three logit layers (`start_logits/dense`, `end_logits/dense_1`,
  `answer_class/dense_1`): the sequence output arrives unrounded; `dense_0`s and the dropout follow the global policy.
  """

  def __init__(self, hidden_size, start_n_top=5, end_n_top=5, dropout_rate=0.1, initializer_range=0.02,
               layer_norm_eps=1e-12, **kwargs):
    super().__init__(**_float32_layer(kwargs))
    self.hidden_size = hidden_size
    self.start_n_top = start_n_top
    self.end_n_top = end_n_top
    self.dropout_rate = dropout_rate
    self.initializer_range = initializer_range
    self.layer_norm_eps = layer_norm_eps
    # A new initializer per kernel: one shared object would give same-shaped kernels the same values
    # (kernel_initializer).
    def init():
      return kernel_initializer(initializer_range)

    self.start_dense = keras.layers.Dense(1, kernel_initializer=init(), dtype="float32", name="start_logits_dense")
    self.end_dense_0 = keras.layers.Dense(hidden_size, activation="tanh", kernel_initializer=init(),
                                          name="end_logits_dense_0")
    self.end_layer_norm = layer_norm(layer_norm_eps, "end_logits_LayerNorm")
    self.end_dense_1 = keras.layers.Dense(1, kernel_initializer=init(), dtype="float32", name="end_logits_dense_1")
    self.answer_dense_0 = keras.layers.Dense(hidden_size, activation="tanh", kernel_initializer=init(),
                                             name="answer_class_dense_0")
    self.answer_dropout = AlbertDropout(dropout_rate, name="answer_class_dropout")
    self.answer_dense_1 = keras.layers.Dense(1, use_bias=False, kernel_initializer=init(), dtype="float32",
                                             name="answer_class_dense_1")

  def build(self, input_shape=None):
    self.start_dense.build((None, None, self.hidden_size))
    self.end_dense_0.build((None, None, 2 * self.hidden_size))
    self.end_layer_norm.build((None, None, self.hidden_size))
    self.end_dense_1.build((None, None, self.hidden_size))
    self.answer_dense_0.build((None, 2 * self.hidden_size))
    self.answer_dense_1.build((None, self.hidden_size))

  @staticmethod
  def _masked_log_softmax(logits, p_mask, axis):
    masked = logits * (1.0 - p_mask) - 1e30 * p_mask
    return masked, ops.log_softmax(masked, axis=axis)

  def _end_log_probs(self, sequence, start_features, p_mask):
    """sequence [B,S,H], start_features [B,K,H], p_mask [B,S] → end log-probs [B,K,S]."""
    # In end_dense_0's compute dtype before tiling: the [B,K,S,2H] concatenation is this head's largest tensor, and
    # end_dense_0 would round it to that dtype anyway (bfloat16 under mixed precision; same values, half the memory).
    sequence = ops.cast(sequence, self.end_dense_0.compute_dtype)
    start_features = ops.cast(start_features, self.end_dense_0.compute_dtype)
    seq_len = ops.shape(sequence)[1]
    k = ops.shape(start_features)[1]
    tiled_seq = ops.broadcast_to(sequence[:, None, :, :],
                                 (ops.shape(sequence)[0], k, seq_len, self.hidden_size))
    tiled_start = ops.broadcast_to(start_features[:, :, None, :],
                                   (ops.shape(sequence)[0], k, seq_len, self.hidden_size))
    x = self.end_dense_0(ops.concatenate([tiled_seq, ops.cast(tiled_start, tiled_seq.dtype)], axis=-1))
    x = self.end_layer_norm(x)
    end_logits = ops.squeeze(self.end_dense_1(x), -1)
    _, log_probs = self._masked_log_softmax(end_logits, p_mask[:, None, :], axis=-1)
    return log_probs

  def call(self, sequence_output, p_mask, start_positions=None, training=False):
    p_mask = ops.cast(p_mask, "float32")
    start_logits = ops.squeeze(self.start_dense(sequence_output), -1)
    start_masked, start_log_probs = self._masked_log_softmax(start_logits, p_mask, axis=-1)
    seq_f32 = ops.cast(sequence_output, "float32")

    start_p = ops.softmax(start_masked, axis=-1)
    start_summary = ops.einsum("bs,bsh->bh", start_p, seq_f32)
    cls_feature = seq_f32[:, 0]
    answer = self.answer_dense_0(ops.concatenate([start_summary, cls_feature], axis=-1))
    answer = self.answer_dropout(answer, training=training)
    cls_logits = ops.squeeze(self.answer_dense_1(answer), -1)

    outputs = {"start_log_probs": start_log_probs, "cls_logits": cls_logits}
    if start_positions is not None:
      # Training: the end distribution is conditioned on the gold start.
      gold = gather_positions(sequence_output, ops.reshape(start_positions, (-1, 1)))
      outputs["end_log_probs"] = self._end_log_probs(sequence_output, gold, p_mask)[:, 0, :]
      return outputs
    start_top_log_probs, start_top_index = top_k_lowest_index_first(start_log_probs, self.start_n_top)
    start_features = gather_positions(sequence_output, start_top_index)
    end_log_probs = self._end_log_probs(sequence_output, start_features, p_mask)  # [B, start_n_top, S]
    end_top_log_probs, end_top_index = top_k_lowest_index_first(end_log_probs, self.end_n_top)
    batch = ops.shape(sequence_output)[0]
    outputs.update(
        start_top_log_probs=start_top_log_probs,
        start_top_index=ops.cast(start_top_index, "int32"),
        # Index i*end_n_top + j = start i, end j (the reference's [B, 25] layout).
        end_top_log_probs=ops.reshape(end_top_log_probs, (batch, self.start_n_top * self.end_n_top)),
        end_top_index=ops.reshape(ops.cast(end_top_index, "int32"), (batch, self.start_n_top * self.end_n_top)))
    return outputs

  def get_config(self):
    config = super().get_config()
    config.update(hidden_size=self.hidden_size, start_n_top=self.start_n_top, end_n_top=self.end_n_top,
                  dropout_rate=self.dropout_rate, initializer_range=self.initializer_range,
                  layer_norm_eps=self.layer_norm_eps)
    return config
