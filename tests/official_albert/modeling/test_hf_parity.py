"""Parity with Hugging Face transformers: same random weights, every output compared.

Tiny config with 2 groups and 2 inner groups for every head; the albert-large-v2 shape for the pretrainer.
"""

import numpy as np
import pytest

from official_albert import AlbertClassifier
from official_albert import AlbertConfig
from official_albert import AlbertMultipleChoice
from official_albert import AlbertPretrainer
from official_albert import AlbertSpanLabeler
from official_albert import AlbertTokenClassifier
from official_albert import load_pretrained
from tests.official_albert.oracle import hf_config
from tests.official_albert.oracle import make_hf_model
from tests.official_albert.oracle import save_hf
from tests.official_albert.oracle import to_torch
from tests.official_albert.oracle import torch

TINY_HF = dict(vocab_size=99, embedding_size=16, hidden_size=36, num_hidden_layers=4, num_hidden_groups=2,
               num_attention_heads=6, intermediate_size=37, inner_group_num=2, max_position_embeddings=64,
               type_vocab_size=2)
ATOL = 1e-4


def make_inputs(batch, seq, vocab, seed=0):
  rng = np.random.RandomState(seed)
  ids = rng.randint(0, vocab, size=(batch, seq)).astype("int32")
  mask = np.ones((batch, seq), "int32")
  mask[0, seq - 3:] = 0  # padding in the mask
  mask[-1, seq // 2:] = 0
  types = np.zeros((batch, seq), "int32")
  types[:, seq // 3:] = 1
  return {"input_word_ids": ids, "input_mask": mask, "input_type_ids": types}


def load_ours(hf_model, tmp_path, model):
  return load_pretrained(save_hf(hf_model, tmp_path), model=model)


def assert_close(ours, theirs, name, mask=None):
  ours = np.asarray(ours)
  theirs = theirs.detach().numpy() if hasattr(theirs, "detach") else np.asarray(theirs)
  assert ours.shape == theirs.shape, f"{name}: {ours.shape} vs {theirs.shape}"
  diff = np.abs(ours - theirs)
  if mask is not None:  # compare real (non-padding) positions only
    diff = diff[mask.astype(bool)]
  assert diff.max() <= ATOL, f"{name}: max abs diff {diff.max():.3g}"
  return float(diff.max())


@pytest.mark.parametrize("activation", ["gelu_new", "relu"])
def test_pretrainer_tiny_groups_and_inner_groups(tmp_path, activation):
  hf = make_hf_model("AlbertForPreTraining", hf_config(**TINY_HF, hidden_act=activation))
  ours = load_pretrained(save_hf(hf, tmp_path))
  assert ours.load_summary["skipped"] == {} or set(ours.load_summary["skipped"]) <= {
      "albert.embeddings.position_ids", "predictions.decoder.weight", "predictions.decoder.bias"}
  inputs = make_inputs(3, 11, 99)
  with torch.no_grad():
    expected = hf(**to_torch(inputs), output_hidden_states=True)
    base = hf.albert(**to_torch(inputs))
  got = ours(inputs)
  # HF's hidden_states hold one entry per layer (inner-group outputs are internal); ours per block.
  assert_close(got["sequence_output"], base.last_hidden_state, "sequence_output")
  assert_close(got["pooled_output"], base.pooler_output, "pooled_output")
  assert_close(got["mlm_logits"], expected.prediction_logits, "mlm_logits")
  assert_close(got["sop_logits"], expected.sop_logits, "sop_logits")


@pytest.mark.parametrize("layer_loop", [False, True])
def test_pretrainer_when_groups_do_not_divide_layers(tmp_path, layer_loop):
  """L=5, G=2 (issue 12: rejected before): HF routes layers 0-2 to group 0 and 3-4 to group 1, as the reference."""
  shape = dict(TINY_HF, num_hidden_layers=5, num_hidden_groups=2)
  hf = make_hf_model("AlbertForPreTraining", hf_config(**shape))
  assert len(hf.albert.encoder.albert_layer_groups) == 2
  ours = load_pretrained(save_hf(hf, tmp_path), model=AlbertPretrainer(AlbertConfig(**shape), layer_loop=layer_loop))
  assert ours.load_summary["parameters"] == sum(p.numel() for n, p in hf.named_parameters()
                                                if n != "predictions.decoder.weight")  # tied to the word table
  inputs = make_inputs(3, 11, 99, seed=5)
  with torch.no_grad():
    expected = hf(**to_torch(inputs))
    base = hf.albert(**to_torch(inputs), output_hidden_states=True)
  got = ours(inputs)
  assert_close(got["sequence_output"], base.last_hidden_state, "sequence_output")
  assert_close(got["pooled_output"], base.pooler_output, "pooled_output")
  assert_close(got["mlm_logits"], expected.prediction_logits, "mlm_logits")
  assert_close(got["sop_logits"], expected.sop_logits, "sop_logits")
  if not layer_loop:  # HF keeps one hidden state per layer, ours one per block (2 inner groups): every 2nd is HF's
    blocks = ours.encoder(inputs)["encoder_outputs"]
    assert len(blocks) == 10
    for layer in range(5):
      assert_close(blocks[2 * layer + 1], base.hidden_states[layer + 1], f"layer {layer}")


def test_classifier_and_regression(tmp_path):
  for num_labels in (3, 1):
    hf = make_hf_model("AlbertForSequenceClassification", hf_config(**TINY_HF, num_labels=num_labels))
    ours = load_ours(hf, tmp_path / str(num_labels),
                     AlbertClassifier(AlbertConfig(**TINY_HF), num_labels=num_labels))
    inputs = make_inputs(2, 10, 99, seed=num_labels)
    with torch.no_grad():
      expected = hf(**to_torch(inputs)).logits
    assert_close(ours(inputs)["logits"], expected, f"logits[{num_labels}]")


def test_token_classifier(tmp_path):
  hf = make_hf_model("AlbertForTokenClassification", hf_config(**TINY_HF, num_labels=5))
  # HF token classification has no pooler; ours keeps one (unused by this head) and allows it to be absent.
  ours = load_pretrained(save_hf(hf, tmp_path), model=AlbertTokenClassifier(AlbertConfig(**TINY_HF), num_labels=5),
                         allow_missing=["bert/pooler/*"])
  assert ours.load_summary["missing_allowed"] == ["bert/pooler/dense/bias", "bert/pooler/dense/kernel"]
  inputs = make_inputs(2, 10, 99)
  with torch.no_grad():
    expected = hf(**to_torch(inputs)).logits
  assert_close(ours(inputs)["logits"], expected, "token logits", mask=inputs["input_mask"])


def test_span_labeler(tmp_path):
  hf = make_hf_model("AlbertForQuestionAnswering", hf_config(**TINY_HF))
  ours = load_pretrained(save_hf(hf, tmp_path), model=AlbertSpanLabeler(AlbertConfig(**TINY_HF)),
                         allow_missing=["bert/pooler/*"])
  inputs = make_inputs(2, 12, 99)
  with torch.no_grad():
    expected = hf(**to_torch(inputs))
  got = ours(inputs)
  assert_close(got["start_logits"], expected.start_logits, "start_logits")
  assert_close(got["end_logits"], expected.end_logits, "end_logits")


def test_multiple_choice(tmp_path):
  hf = make_hf_model("AlbertForMultipleChoice", hf_config(**TINY_HF))
  ours = load_ours(hf, tmp_path, AlbertMultipleChoice(AlbertConfig(**TINY_HF), num_choices=4))
  flat = make_inputs(8, 10, 99)
  inputs = {k: v.reshape(2, 4, 10) for k, v in flat.items()}
  with torch.no_grad():
    expected = hf(**{k: v.reshape(2, 4, 10) for k, v in to_torch(flat).items()}).logits
  assert_close(ours(inputs)["logits"], expected, "choice logits")


@pytest.mark.parity
def test_pretrainer_parity_at_albert_large_v2_shape(tmp_path):
  """The issue's bar: albert-large-v2 shape, fp32, batch ≥ 2 with padding, every output within 1e-4."""
  shape = dict(vocab_size=30000, embedding_size=128, hidden_size=1024, num_hidden_layers=24,
               num_attention_heads=16, intermediate_size=4096, max_position_embeddings=512)
  hf = make_hf_model("AlbertForPreTraining", hf_config(**shape))
  ours = load_pretrained(save_hf(hf, tmp_path))
  assert ours.config == AlbertConfig.from_preset("albert-large-v2")
  assert ours.load_summary["parameters"] == 17_847_474
  inputs = make_inputs(2, 24, 30000)
  with torch.no_grad():
    expected = hf(**to_torch(inputs))
    base = hf.albert(**to_torch(inputs))
  got = ours(inputs)
  diffs = {
      "sequence_output": assert_close(got["sequence_output"], base.last_hidden_state, "sequence_output"),
      "pooled_output": assert_close(got["pooled_output"], base.pooler_output, "pooled_output"),
      "mlm_logits": assert_close(got["mlm_logits"], expected.prediction_logits, "mlm_logits"),
      "sop_logits": assert_close(got["sop_logits"], expected.sop_logits, "sop_logits"),
  }
  print("albert-large-v2 parity max-abs:", diffs)
