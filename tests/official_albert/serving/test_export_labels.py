"""The exported classifier returns label strings (argmax names from model_dir/labels.json) beside its scores, and a
multi-label model (labels.json `multi_label`) per-label sigmoids with 0/1 predictions, not a softmax."""

import json
import os

import keras
import numpy as np
import pytest
import tensorflow as tf

from official_albert import AlbertConfig
from official_albert.checkpoints.loading import build_model
from official_albert.checkpoints.native import save_pretrained
from official_albert.serving import export

SPM = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(__file__))), "fixtures", "test_spm.model")
TINY = dict(vocab_size=1000, embedding_size=16, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
            intermediate_size=64, max_position_embeddings=32)
LABELS = ["billing", "bug", "praise"]


def _model_dir(tmp_path, labels_json):
  # The encoder's weights too: the texts below must not all get label 0 (seed 26 since each weight got its own
  # initializer: the tiny encoder's pooled outputs barely differ between texts, so all four share one argmax).
  keras.utils.set_random_seed(26)
  model = build_model("classifier", AlbertConfig(**TINY), num_labels=3)
  rng = np.random.default_rng(3)  # spread the logits so the argmax differs between texts
  model.classifier.output_weights.assign(200 * rng.normal(size=model.classifier.output_weights.shape).astype("float32"))
  directory = str(tmp_path / "model")
  save_pretrained(model, directory, spm_model_file=SPM)
  if labels_json is not None:
    with open(os.path.join(directory, "labels.json"), "w", encoding="utf-8") as f:
      json.dump(labels_json, f)
  return directory


@pytest.mark.slow
def test_exported_classifier_returns_label_strings(tmp_path):
  directory = _model_dir(tmp_path, {"task": "text_classification", "labels": LABELS, "multi_label": False})
  export.export_from_model_dir(directory, str(tmp_path / "export"), head="classifier", seq_length=16)
  served = tf.saved_model.load(str(tmp_path / "export"))
  texts = ["the invoice is wrong", "it crashes on start", "great work", "a"]
  out = served.signatures["serving_default"](text=tf.constant(texts))
  predictions = out["predictions"].numpy()
  assert predictions.any()  # not all label 0, so a gather that ignores the prediction fails
  assert out["labels"].dtype == tf.string and out["labels"].shape == (4,)
  assert [s.decode() for s in out["labels"].numpy()] == [LABELS[i] for i in predictions]
  assert "probabilities" in out


@pytest.mark.slow
def test_no_labels_output_without_labels_file(tmp_path):
  """(A multi-label model has no `labels` output either: the next test.)"""
  directory = _model_dir(tmp_path, None)
  export.export_from_model_dir(directory, str(tmp_path / "export"), head="classifier", seq_length=16)
  out = tf.saved_model.load(str(tmp_path / "export")).signatures["serving_default"](text=tf.constant(["a"]))
  assert "labels" not in out and "predictions" in out


def test_multi_label_export_returns_sigmoids_and_multi_hot_predictions(tmp_path):
  """No `labels` output (a row has several or none), per-label sigmoids and 0/1 predictions at the 0.5 default."""
  directory = _model_dir(tmp_path, {"task": "text_classification", "labels": LABELS, "multi_label": True})
  export.export_from_model_dir(directory, str(tmp_path / "export"), head="classifier", seq_length=16)
  texts = tf.constant(["the invoice is wrong", "it crashes on start", "great work", "a"])
  out = tf.saved_model.load(str(tmp_path / "export")).signatures["serving_default"](text=texts)
  assert "labels" not in out and "predictions" in out
  logits = out["logits"].numpy()
  np.testing.assert_allclose(out["probabilities"].numpy(), 1 / (1 + np.exp(-logits)), atol=1e-6)
  assert out["predictions"].dtype == tf.int32
  np.testing.assert_array_equal(out["predictions"].numpy(), (logits >= 0).astype(np.int32))
  assert 0 < out["predictions"].numpy().sum() < logits.size  # both decisions occur: the threshold is exercised


def test_labels_file_of_another_model_is_named(tmp_path):
  directory = _model_dir(tmp_path, {"labels": ["a", "b"]})
  with pytest.raises(ValueError, match=r"2 labels .* but the classifier has 3 outputs"):
    export.export_from_model_dir(directory, str(tmp_path / "export"), head="classifier", seq_length=16)
  (tmp_path / "model" / "labels.json").write_text("{not json", encoding="utf-8")
  with pytest.raises(ValueError, match="labels.json: not valid JSON"):
    export.export_from_model_dir(directory, str(tmp_path / "export"), head="classifier", seq_length=16)
