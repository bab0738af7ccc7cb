"""The int8 gate refuses a held-out set it cannot measure on as such, not as an int8 drop of "nan".

A pretrainer's held-out lines with no [MASK] position (held-out line k masks from its (k mod 7)-th token: short
lines get none) made the MLM top-1 agreement the mean of nothing, and a regression's Pearson r over fewer than 2 rows
or constant labels (or constant f32 scores) was NaN; either way the gate refused with "1.0000 in f32 and nan in int8
(drop nan > ...). Fix: calibrate on more and more representative text", though no int8 model could have passed.
These checks run before any model does (`quantize_with_gate` gets no model here: it must refuse first).
"""

import numpy as np
import pytest

from official_albert.serving import openvino_quantize
from official_albert.tokenization import FullTokenizer
from tests import tiny

SENTENCES = [f"The library had {n} modules and about {n * 7} files in its first public release." for n in range(12)]


@pytest.fixture(scope="module")
def tokenizer():
  return FullTokenizer(str(tiny.SPM_MODEL_FILE))


def _lines(path, lines):
  path.write_text("\n".join(lines) + "\n", encoding="utf-8")
  return str(path)


class _RegressionIR:
  """What `quantize_with_gate` asks of an IR before it runs one: its logits' width (1: a regression head)."""

  def output(self, name):
    assert name == "logits"
    return self

  def get_partial_shape(self):
    return [self]

  def get_length(self):
    return 1


def _refusal(error):
  message = str(error.value)
  assert not isinstance(error.value, openvino_quantize.AccuracyGateError), message
  assert "nan" not in message.lower(), message
  return message


def test_a_pretrainer_heldout_set_without_a_mask_position_is_refused(tmp_path, tokenizer):
  # Line 0 tokenizes to nothing (a zero-width space); lines 1-6 are one token each, shorter than their offsets.
  heldout = _lines(tmp_path / "heldout.txt", ["\u200b", "a", "b", "c", "d", "e", "f"])
  with pytest.raises(ValueError) as error:
    openvino_quantize.quantize_with_gate(None, "pretrainer", tokenizer, _lines(tmp_path / "cal.txt", SENTENCES), 32,
                                         heldout_file=heldout)
  message = _refusal(error)
  for words in (f"--heldout_file {heldout}", "none of the held-out lines", "[MASK] position", "MLM top-1 agreement",
                "sentence or more"):
    assert words in message, (words, message)


@pytest.mark.parametrize("labels,words", [
    (["3.5"] * 6, "the held-out labels are all 3.5"),
    (["3.5"], "the held-out labels cover 1 row(s)"),
    (["1.0", "nan", "2.0"], "the held-out labels hold a non-finite value (row 2)"),
])
def test_a_regression_heldout_set_pearson_cannot_measure_is_refused(tmp_path, tokenizer, labels, words):
  heldout = _lines(tmp_path / "heldout.tsv", [f"{label}\t{SENTENCES[i % 12]}" for i, label in enumerate(labels)])
  with pytest.raises(ValueError) as error:
    openvino_quantize.quantize_with_gate(_RegressionIR(), "classifier", tokenizer,
                                         _lines(tmp_path / "cal.txt", SENTENCES), 32, heldout_file=heldout)
  message = _refusal(error)
  for expected in (f"--heldout_file {heldout}", words, "Pearson r is undefined", "scores and texts vary"):
    assert expected in message, (expected, message)


def test_gate_metrics_refuse_constant_f32_scores_for_every_export(tokenizer):
  """`gate_metrics` (LiteRT's gate too) checks the f32 side: one score for every row gives no Pearson r."""
  batches = openvino_quantize.pack_batches(tokenizer, [([s], None) for s in SENTENCES[:4]], "classifier", 32)
  f32_out = [{"logits": np.full((4, 1), 0.25, np.float32)}]
  int8_out = [{"logits": np.array([[0.1], [0.2], [0.3], [0.4]], np.float32)}]
  with pytest.raises(ValueError) as error:
    openvino_quantize.gate_metrics("classifier", batches, f32_out, int8_out)
  message = _refusal(error)
  assert "the held-out lines: the held-out f32 scores are all 0.25 (the same text on every line" in message
  # Varied scores are measured as before; constant labels are refused here too (the gate gave NaN for both).
  f32_out = [{"logits": np.array([[0.1], [0.2], [0.3], [0.5]], np.float32)}]
  with pytest.raises(ValueError) as error:
    openvino_quantize.gate_metrics("classifier", batches, f32_out, int8_out, labels=np.full(4, 3.5))
  assert "the held-out labels are all 3.5" in _refusal(error)
  metrics = openvino_quantize.gate_metrics("classifier", batches, f32_out, int8_out)
  assert metrics["Pearson r with f32"][0] == 1.0 and 0.9 < metrics["Pearson r with f32"][1] <= 1.0


def test_a_measurable_heldout_set_passes_the_checks(tokenizer):
  batches = openvino_quantize.pack_batches(tokenizer, [([s], None) for s in SENTENCES[:8]], "pretrainer", 32)
  openvino_quantize.check_heldout("pretrainer", batches)
  openvino_quantize.check_heldout("classifier", batches, np.arange(8.0), regression=True)
