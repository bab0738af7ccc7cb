"""The models against an independent NumPy forward written from docs/reference.md: dropout placement, SQuAD v2 head.

Dropout placement (reference §1.2, §5.1–§5.3): after the embedding LayerNorm, on the attention probabilities, on the
attention output projection before its residual, on the FFN output projection before its residual, on the pooled
output of the classifier and multiple-choice heads, after `answer_class/dense_0` of the SQuAD v2 head; nowhere else
(not after the E→H projection, the FFN activation, the MLM/SOP heads or the v1 span head). Keras' `Dropout.call` is
replaced by a deterministic one that draws its mask from a counter, so a train-mode forward can be replayed in NumPy
with the same masks at the reference's places: a dropout that is removed, added or moved changes either the list of
dropout sites or the numbers.

The SQuAD v2 head (reference §5.2, XLNet-style) is re-implemented in NumPy, so swapped inputs (e.g. [h_start; h_t]
instead of [h_t; h_start]), a missing LayerNorm or a misplaced mask fail here; before, it was checked only against
itself.
"""

import keras
import numpy as np
import pytest
import tensorflow as tf

from official_albert import AlbertClassifier
from official_albert import AlbertConfig
from official_albert import AlbertMultipleChoice
from official_albert import AlbertPretrainer
from official_albert import AlbertSpanLabeler
from official_albert.modeling.models import AlbertSquadV2Model

# E != H and F != H so that every dropout site has its own shape; distinct rates tell the sites apart too.
HIDDEN_DROPOUT, ATTENTION_DROPOUT, CLASSIFIER_DROPOUT, ANSWER_DROPOUT = 0.3, 0.2, 0.25, 0.15
CONFIG = dict(vocab_size=61, embedding_size=12, hidden_size=16, num_hidden_layers=2, num_hidden_groups=1,
              num_attention_heads=2, intermediate_size=24, max_position_embeddings=32, hidden_act="gelu_new",
              hidden_dropout_prob=HIDDEN_DROPOUT, attention_probs_dropout_prob=ATTENTION_DROPOUT,
              classifier_dropout_prob=CLASSIFIER_DROPOUT)
EPS = 1e-12


# ------------------------------------------------------------------------------------------- deterministic masks
class Masks:
  """Dropout masks by call number: the i-th dropout applied (Keras or NumPy) gets mask i."""

  def __init__(self):
    self.sites = []

  def next(self, shape, rate):
    index = len(self.sites)
    self.sites.append((tuple(int(d) for d in shape), rate))
    keep = np.random.RandomState(1000 + index).uniform(size=shape) >= rate
    return keep.astype(np.float32) / (1.0 - rate)


@pytest.fixture
def keras_masks(monkeypatch):
  """Replaces `keras.layers.Dropout.call` by the counter-driven masks (training only, rate > 0, as Keras does)."""
  masks = Masks()

  def call(self, inputs, training=False):
    if not training or self.rate == 0:
      return inputs
    mask = masks.next(inputs.shape, float(self.rate))
    return inputs * tf.constant(mask, dtype=inputs.dtype)

  monkeypatch.setattr(keras.layers.Dropout, "call", call)
  return masks


# ------------------------------------------------------------------------------------------- NumPy reference
def _w(variable):
  return np.asarray(variable.numpy(), np.float64)


def _dense(x, layer):
  return x @ _w(layer.kernel) + (_w(layer.bias) if layer.use_bias else 0.0)


def _layer_norm(x, layer):
  mean = x.mean(-1, keepdims=True)
  var = ((x - mean) ** 2).mean(-1, keepdims=True)
  return (x - mean) / np.sqrt(var + EPS) * _w(layer.gamma) + _w(layer.beta)


def _gelu_tanh(x):
  return 0.5 * x * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (x + 0.044715 * x ** 3)))


def _softmax(x, axis=-1):
  e = np.exp(x - x.max(axis, keepdims=True))
  return e / e.sum(axis, keepdims=True)


def _log_softmax(x, axis=-1):
  shifted = x - x.max(axis, keepdims=True)
  return shifted - np.log(np.exp(shifted).sum(axis, keepdims=True))


def _drop(x, masks, rate):
  return x if masks is None else x * masks.next(x.shape, rate)


def numpy_encoder(encoder, ids, mask, types, masks=None):
  """Reference §1.2: embeddings → LN → dropout → E→H → L × (attention block, FFN block) → pooler."""
  c = encoder.config
  emb = encoder.embeddings
  x = _w(emb.word_embeddings)[ids] + _w(emb.token_type_embeddings)[types] + _w(emb.position_embeddings)[
      :ids.shape[1]][None]
  x = _drop(_layer_norm(x, emb.layer_norm), masks, c.hidden_dropout_prob)
  x = _dense(x, encoder.embedding_hidden_mapping_in)  # no dropout after the projection
  batch, seq = ids.shape
  heads, size = c.num_attention_heads, c.hidden_size // c.num_attention_heads
  bias = (1.0 - mask[:, None, None, :]) * -10000.0
  # The reference runs the layers on [B·S, H] matrices (reshape_to_matrix): hidden dropout draws its mask there.
  drop_2d = lambda t, rate: _drop(t.reshape(batch * seq, -1), masks, rate).reshape(t.shape)  # noqa: E731
  for layer in range(c.num_hidden_layers):
    att = encoder.attention_layers[encoder.block_index("attention", layer, 0)]
    split = lambda t: t.reshape(batch, seq, heads, size).transpose(0, 2, 1, 3)  # noqa: E731
    q, k, v = split(_dense(x, att.query)), split(_dense(x, att.key)), split(_dense(x, att.value))
    probs = _softmax(q @ k.transpose(0, 1, 3, 2) / np.sqrt(size) + bias)
    probs = _drop(probs, masks, c.attention_probs_dropout_prob)
    context = (probs @ v).transpose(0, 2, 1, 3).reshape(batch, seq, c.hidden_size)
    x = _layer_norm(drop_2d(_dense(context, att.output_dense), c.hidden_dropout_prob) + x, att.layer_norm)
    ffn = encoder.ffn_layers[encoder.block_index("ffn", layer, 0)]
    inner = _gelu_tanh(_dense(x, ffn.intermediate))  # no dropout after the activation
    x = _layer_norm(drop_2d(_dense(inner, ffn.output_dense), c.hidden_dropout_prob) + x, ffn.layer_norm)
  pooled = np.tanh(_dense(x[:, 0], encoder.pooler))
  return x, pooled


def numpy_logits(head, x, masks, rate):
  """`output_weights` [n, H] / `output_bias` [n] after dropout on the input (reference §5.1, §5.3)."""
  return _drop(x, masks, rate) @ _w(head.output_weights).T + _w(head.output_bias)


def numpy_squad_v2_head(head, seq, p_mask, start_positions=None, masks=None, rate=0.0, start_n_top=3, end_n_top=2):
  """Reference §5.2 v2 head, from its description (not from our Keras code)."""
  p = p_mask.astype(np.float64)
  start_logits = _dense(seq, head.start_dense)[..., 0]
  start_masked = start_logits * (1 - p) - 1e30 * p
  out = {"start_log_probs": _log_softmax(start_masked)}
  start_feature = np.einsum("bs,bsh->bh", _softmax(start_masked), seq)
  answer = np.tanh(_dense(np.concatenate([start_feature, seq[:, 0]], -1), head.answer_dense_0))
  answer = _drop(answer, masks, rate)
  out["cls_logits"] = (answer @ _w(head.answer_dense_1.kernel))[:, 0]

  def end_log_probs(start_states):  # [B, K, H] → [B, K, S]
    batch, k = start_states.shape[:2]
    hidden = np.broadcast_to(seq[:, None], (batch, k) + seq.shape[1:])
    starts = np.broadcast_to(start_states[:, :, None], hidden.shape)
    x = np.tanh(_dense(np.concatenate([hidden, starts], -1), head.end_dense_0))
    logits = _dense(_layer_norm(x, head.end_layer_norm), head.end_dense_1)[..., 0]
    return _log_softmax(logits * (1 - p[:, None]) - 1e30 * p[:, None])

  rows = np.arange(seq.shape[0])
  if start_positions is not None:
    out["end_log_probs"] = end_log_probs(seq[rows, start_positions][:, None])[:, 0]
    return out
  start_index = np.argsort(-out["start_log_probs"], axis=-1, kind="stable")[:, :start_n_top]
  out["start_top_index"] = start_index
  out["start_top_log_probs"] = np.take_along_axis(out["start_log_probs"], start_index, -1)
  ends = end_log_probs(seq[rows[:, None], start_index])  # [B, k1, S]
  end_index = np.argsort(-ends, axis=-1, kind="stable")[..., :end_n_top]
  out["end_top_index"] = end_index.reshape(len(rows), -1)  # entry i·k2 + j: start i, end j
  out["end_top_log_probs"] = np.take_along_axis(ends, end_index, -1).reshape(len(rows), -1)
  return out


# ------------------------------------------------------------------------------------------- fixtures
def _randomize(model, seed):
  """Weights far from the initializer's (LayerNorm gains ≠ 1, biases ≠ 0), so that no term can hide."""
  rng = np.random.RandomState(seed)
  for variable in model.weights:
    value = rng.normal(0.0, 0.3, variable.shape)
    if "gamma" in variable.path:
      value += 1.0
    variable.assign(value.astype(np.float32))


def _inputs(batch=3, seq=9, seed=0):
  rng = np.random.RandomState(seed)
  ids = rng.randint(5, CONFIG["vocab_size"], (batch, seq)).astype(np.int32)
  mask = np.ones((batch, seq), np.int32)
  mask[-1, seq - 3:] = 0
  types = np.zeros((batch, seq), np.int32)
  types[:, seq // 2:] = 1
  return {"input_word_ids": ids, "input_mask": mask, "input_type_ids": types}


def _encoder_sites(batch, seq):
  """The dropout sites of the encoder in call order, per the reference."""
  c = AlbertConfig(**CONFIG)
  # Inside the layers activations are [B·S, H], as the reference's reshape_to_matrix keeps them.
  per_layer = [((batch, c.num_attention_heads, seq, seq), ATTENTION_DROPOUT),
               ((batch * seq, c.hidden_size), HIDDEN_DROPOUT), ((batch * seq, c.hidden_size), HIDDEN_DROPOUT)]
  return [((batch, seq, c.embedding_size), HIDDEN_DROPOUT)] + per_layer * c.num_hidden_layers


# ------------------------------------------------------------------------------------------- dropout placement
def test_eval_forward_matches_numpy():
  """The NumPy forward is right without dropout first (so that the train-mode tests below test dropout only)."""
  model = AlbertClassifier(AlbertConfig(**CONFIG), num_labels=3)
  _randomize(model, 1)
  inputs = _inputs()
  got = model(inputs, training=False)
  seq, pooled = numpy_encoder(model.encoder, *(inputs[k] for k in ("input_word_ids", "input_mask",
                                                                   "input_type_ids")))
  np.testing.assert_allclose(got["pooled_output"], pooled, atol=2e-5)
  np.testing.assert_allclose(got["logits"], numpy_logits(model.classifier, pooled, None, 0.0), atol=2e-5)
  np.testing.assert_allclose(model.encoder(inputs)["sequence_output"], seq, atol=2e-5)


def test_classifier_dropout_placement(keras_masks):
  model = AlbertClassifier(AlbertConfig(**CONFIG), num_labels=3)
  _randomize(model, 2)
  inputs = _inputs()
  got = model(inputs, training=True)["logits"].numpy()
  keras_sites = list(keras_masks.sites)
  assert keras_sites == _encoder_sites(3, 9) + [((3, 16), CLASSIFIER_DROPOUT)]
  reference = Masks()
  _, pooled = numpy_encoder(model.encoder, inputs["input_word_ids"], inputs["input_mask"], inputs["input_type_ids"],
                            reference)
  want = numpy_logits(model.classifier, pooled, reference, CLASSIFIER_DROPOUT)
  assert reference.sites == keras_sites
  np.testing.assert_allclose(got, want, atol=5e-5)
  # The masks matter: the same forward without dropout is far off (so the comparison above can fail).
  assert np.abs(model(inputs, training=False)["logits"].numpy() - want).max() > 1e-2


def test_multiple_choice_dropout_placement(keras_masks):
  model = AlbertMultipleChoice(AlbertConfig(**CONFIG), num_choices=2)
  _randomize(model, 3)
  flat = _inputs(batch=4, seq=7, seed=3)
  got = model({k: v.reshape(2, 2, 7) for k, v in flat.items()}, training=True)["logits"].numpy()
  assert keras_masks.sites == _encoder_sites(4, 7) + [((4, 16), CLASSIFIER_DROPOUT)]
  reference = Masks()
  _, pooled = numpy_encoder(model.encoder, flat["input_word_ids"], flat["input_mask"], flat["input_type_ids"],
                            reference)
  want = numpy_logits(model.classifier, pooled, reference, CLASSIFIER_DROPOUT).reshape(2, 2)
  np.testing.assert_allclose(got, want, atol=5e-5)


def test_pretrainer_and_span_heads_add_no_dropout(keras_masks):
  """Reference §1.5/§1.6/§5.2: the MLM, SOP and v1 span heads run without dropout of their own."""
  inputs = _inputs()
  for model in (AlbertPretrainer(AlbertConfig(**CONFIG)), AlbertSpanLabeler(AlbertConfig(**CONFIG))):
    _randomize(model, 4)
    del keras_masks.sites[:]
    out = model(inputs, training=True)
    assert keras_masks.sites == _encoder_sites(3, 9), type(model).__name__
    reference = Masks()
    seq, pooled = numpy_encoder(model.encoder, inputs["input_word_ids"], inputs["input_mask"],
                                inputs["input_type_ids"], reference)
    if isinstance(model, AlbertPretrainer):
      np.testing.assert_allclose(out["sop_logits"], numpy_logits(model.sop_head, pooled, None, 0.0), atol=5e-5)
    else:
      logits = numpy_logits(model.span_head, seq, None, 0.0)
      np.testing.assert_allclose(out["start_logits"], logits[..., 0], atol=5e-5)
      np.testing.assert_allclose(out["end_logits"], logits[..., 1], atol=5e-5)


# ------------------------------------------------------------------------------------------- SQuAD v2 head
def _v2_model():
  model = AlbertSquadV2Model(AlbertConfig(**CONFIG), start_n_top=3, end_n_top=2, dropout_rate=ANSWER_DROPOUT)
  _randomize(model, 5)
  return model


def _v2_inputs():
  inputs = _inputs(batch=3, seq=10, seed=6)
  p_mask = np.zeros((3, 10), np.int32)
  p_mask[:, 1:4] = 1  # question and first [SEP]
  p_mask[:, -1] = 1  # last [SEP]
  p_mask[2, 7:] = 1  # padding
  inputs["p_mask"] = p_mask
  return inputs


def test_squad_v2_head_inference_matches_numpy():
  model = _v2_model()
  inputs = _v2_inputs()
  got = model(inputs, training=False)
  seq, _ = numpy_encoder(model.encoder, inputs["input_word_ids"], inputs["input_mask"], inputs["input_type_ids"])
  want = numpy_squad_v2_head(model.squad_head, seq, inputs["p_mask"])
  for key in ("start_top_index", "end_top_index"):
    np.testing.assert_array_equal(got[key], want[key], err_msg=key)
  valid = inputs["p_mask"] == 0  # masked positions hold ≈ −1e30 in both
  np.testing.assert_allclose(got["start_log_probs"].numpy()[valid], want["start_log_probs"][valid], atol=5e-5)
  for key in ("start_top_log_probs", "end_top_log_probs", "cls_logits"):
    np.testing.assert_allclose(got[key], want[key], atol=5e-5, err_msg=key)


def test_squad_v2_head_training_matches_numpy(keras_masks):
  """Gold-start conditioning of the end, and the answer-class dropout (after dense_0, before dense_1)."""
  model = _v2_model()
  inputs = _v2_inputs()
  inputs["start_positions"] = np.array([5, 0, 6], np.int32)
  got = model(inputs, training=True)
  keras_sites = list(keras_masks.sites)
  assert keras_sites == _encoder_sites(3, 10) + [((3, 16), ANSWER_DROPOUT)]
  reference = Masks()
  seq, _ = numpy_encoder(model.encoder, inputs["input_word_ids"], inputs["input_mask"], inputs["input_type_ids"],
                         reference)
  want = numpy_squad_v2_head(model.squad_head, seq, inputs["p_mask"], inputs["start_positions"], reference,
                             ANSWER_DROPOUT)
  assert reference.sites == keras_sites
  valid = inputs["p_mask"] == 0
  for key in ("start_log_probs", "end_log_probs"):
    np.testing.assert_allclose(got[key].numpy()[valid], want[key][valid], atol=5e-5, err_msg=key)
  np.testing.assert_allclose(got["cls_logits"], want["cls_logits"], atol=5e-5)
