"""`dtype="bfloat16"` SavedModel export: the signatures, names and dtypes of float32, outputs within cosine 0.999."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from official_albert import AlbertConfig
from official_albert.checkpoints.loading import build_model
from official_albert.checkpoints.native import save_pretrained
from official_albert.serving import export
from tests.official_albert.serving import export_harness

TINY = dict(vocab_size=1000, embedding_size=16, hidden_size=32, num_hidden_layers=3, num_attention_heads=2,
            intermediate_size=64, max_position_embeddings=64)
TEXTS = ["Hello I'm a [MASK] model.", "a gripping, funny film " * 3, "Naïve café — 日本語 Straße ✓ déjà vu", ""]


def _cosine(a, b):
  a, b = np.ravel(a).astype(np.float64), np.ravel(b).astype(np.float64)
  return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


@pytest.mark.slow
@pytest.mark.parametrize("head,compared", [("classifier", ("logits", "probabilities")),
                                           ("pretrainer", ("mlm_logits", "sequence_output", "sop_logits"))])
def test_bfloat16_export_matches_float32(tmp_path, tiny_exports, head, compared):
  """Against the export harness's float32 SavedModel of the same model directory (written once per run)."""
  path = export.export_from_model_dir(tiny_exports.models.dir(head), str(tmp_path / "bfloat16"), head=head,
                                      dtype="bfloat16", **export_harness.export_options("saved_model", head))
  loaded = {"float32": tf.saved_model.load(tiny_exports.folder("saved_model", head)),
            "bfloat16": tf.saved_model.load(path)}
  assert keras.config.dtype_policy().name == "float32"  # the export restores the global policy
  f32, bf16 = loaded["float32"], loaded["bfloat16"]
  assert set(f32.signatures) == set(bf16.signatures)
  text = tf.constant(TEXTS)
  want, got = f32.signatures["serve_text"](text=text), bf16.signatures["serve_text"](text=text)
  assert set(want) == set(got)
  for key in want:
    assert want[key].dtype == got[key].dtype, key
  np.testing.assert_array_equal(got["input_word_ids"].numpy(), want["input_word_ids"].numpy())
  for key in compared:
    assert _cosine(got[key].numpy(), want[key].numpy()) > 0.999, key
  # bfloat16 really ran: the outputs differ from float32 (so the comparison above is not trivially true).
  assert np.abs(got[compared[0]].numpy() - want[compared[0]].numpy()).max() > 1e-6


@pytest.mark.slow
def test_binary_dtype_flag(tmp_path, spm_model_file):
  from absl import flags

  from official_albert import export_saved_model
  keras.utils.set_random_seed(6)
  save_pretrained(build_model("encoder", AlbertConfig(**TINY)), str(tmp_path / "model"), spm_model_file=spm_model_file)
  outputs = {}
  for dtype in ("float32", "bfloat16"):
    fv = flags.FlagValues()
    export_saved_model.define_flags(fv)
    fv(["export", f"--model_dir={tmp_path / 'model'}", f"--export_dir={tmp_path / dtype}", "--head=encoder",
        "--seq_length=16", f"--dtype={dtype}"])
    export_saved_model.main([], fv)
    signature = tf.saved_model.load(str(tmp_path / dtype)).signatures["serving_default"]
    outputs[dtype] = signature(text=tf.constant(TEXTS))["sequence_output"].numpy()
  assert outputs["bfloat16"].dtype == np.float32
  assert _cosine(outputs["bfloat16"], outputs["float32"]) > 0.999
  assert np.abs(outputs["bfloat16"] - outputs["float32"]).max() > 1e-6  # the flag reached the model


def test_unknown_dtype_is_refused(tmp_path):
  with pytest.raises(ValueError, match="dtype='float16' is not one of"):
    export.export_from_model_dir(str(tmp_path), str(tmp_path / "out"), dtype="float16")
