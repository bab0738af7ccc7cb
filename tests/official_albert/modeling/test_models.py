"""Task models have the contract output shapes and heads; the SQuAD v2 head's inference layout.

What every model type promises alike (config round trip, `.keras`, XLA, bf16, checkpoint names) is checked once
for all of them in test_model_harness.py.
"""

import numpy as np
import pytest
import tensorflow as tf

from official_albert import AlbertClassifier
from official_albert import AlbertConfig
from official_albert import AlbertMultipleChoice
from official_albert import AlbertPretrainer
from official_albert import AlbertSpanLabeler
from official_albert import AlbertSquadV2Model
from official_albert import AlbertTokenClassifier
from tests.official_albert.modeling.test_encoder import make_inputs
from tests.official_albert.modeling.test_encoder import tiny_config


def test_pretrainer_outputs_and_tied_embeddings():
  model = AlbertPretrainer(tiny_config())
  inputs = make_inputs()
  inputs["masked_lm_positions"] = np.array([[1, 2, 0], [3, 4, 0]], "int32")
  out = model(inputs)
  assert out["mlm_logits"].shape == (2, 3, 97) and out["sop_logits"].shape == (2, 2)
  # Tied output projection: the MLM head owns no [V,E] matrix of its own.
  assert not any(tuple(v.shape) == (97, 16) for v in model.mlm_head.weights)
  everywhere = model({k: v for k, v in inputs.items() if k != "masked_lm_positions"})["mlm_logits"]
  np.testing.assert_allclose(everywhere.numpy()[0, 1], out["mlm_logits"].numpy()[0, 0], atol=1e-5)
  # MLM logits = transform(h) · Eᵀ + b, computed by hand.
  head = model.mlm_head
  h = out["sequence_output"].numpy()[0, 1][None, None]
  x = head.layer_norm(head.dense(tf.constant(h))).numpy()[0, 0]
  manual = x @ model.encoder.embedding_table.numpy().T + head.output_bias.numpy()
  np.testing.assert_allclose(manual, out["mlm_logits"].numpy()[0, 0], atol=1e-4)


@pytest.mark.parametrize("factory, key, shape", [
    (lambda c: AlbertClassifier(c, num_labels=3), "logits", (2, 3)),
    (lambda c: AlbertClassifier(c, num_labels=1), "logits", (2, 1)),
    (lambda c: AlbertTokenClassifier(c, num_labels=5), "logits", (2, 9, 5)),
    (AlbertSpanLabeler, "start_logits", (2, 9)),
])
def test_task_model_output_shapes(factory, key, shape):
  """The contract shapes; config round trip, `.keras`, XLA, bf16 and names: test_model_harness.py."""
  out = factory(tiny_config())(make_inputs())
  assert out[key].shape == shape and out[key].dtype == tf.float32


def test_multiple_choice_shapes_and_errors():
  model = AlbertMultipleChoice(tiny_config(), num_choices=4)
  flat = make_inputs(batch=8)
  inputs = {k: v.reshape(2, 4, 9) for k, v in flat.items()}
  assert model(inputs)["logits"].shape == (2, 4)
  with pytest.raises(ValueError, match="num_choices"):
    model(flat)
  with pytest.raises(ValueError, match="expected 4 choices"):
    model({k: v.reshape(4, 2, 9) for k, v in flat.items()})


def test_squad_v2_head_layout_and_consistency():
  config = tiny_config()
  model = AlbertSquadV2Model(config, start_n_top=3, end_n_top=2)
  inputs = make_inputs(seq=12)
  p_mask = np.zeros((2, 12), "float32")
  p_mask[:, 1:4] = 1.0  # question tokens and [SEP]s may not be answers
  out = model({**inputs, "p_mask": p_mask})
  assert out["start_top_log_probs"].shape == (2, 3) and out["start_top_index"].shape == (2, 3)
  assert out["end_top_log_probs"].shape == (2, 6) and out["end_top_index"].shape == (2, 6)
  assert out["cls_logits"].shape == (2,)
  starts = out["start_top_index"].numpy()
  assert not np.isin(starts, [1, 2, 3]).any(), "masked positions must not be chosen as starts"
  # Start log-probs are a distribution over the unmasked positions.
  np.testing.assert_allclose(np.exp(out["start_log_probs"].numpy()).sum(-1), 1.0, atol=1e-5)
  # Entry i*end_n_top + j is end j for start i: equal to the training-mode end distribution given start i.
  for i in range(3):
    gold = starts[:, i]
    train = model({**inputs, "p_mask": p_mask, "start_positions": gold})
    end_log_probs = train["end_log_probs"].numpy()
    for b in range(2):
      for j in range(2):
        index = out["end_top_index"].numpy()[b, i * 2 + j]
        np.testing.assert_allclose(end_log_probs[b, index], out["end_top_log_probs"].numpy()[b, i * 2 + j],
                                   atol=1e-5)
  with pytest.raises(KeyError, match="p_mask"):
    model(inputs)


def test_squad_v2_answer_class_has_no_bias():
  model = AlbertSquadV2Model(tiny_config())
  assert model.squad_head.answer_dense_1.bias is None
  assert {v.path.split("/")[-2] for v in model.squad_head.weights} >= {
      "start_logits_dense", "end_logits_dense_0", "end_logits_LayerNorm", "end_logits_dense_1",
      "answer_class_dense_0", "answer_class_dense_1"}


def test_invalid_num_labels():
  with pytest.raises(ValueError, match="num_labels"):
    AlbertClassifier(AlbertConfig(), num_labels=0)
