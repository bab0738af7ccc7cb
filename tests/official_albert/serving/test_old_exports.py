"""SavedModels exported before exports carried labels.json (commit 2eb83f0), stood for by a current export whose
labels.json is deleted: their graphs say what the file would. A multi-label classifier was answered as a softmax
over LABEL_i (0.5004 where its own sigmoid said 0.5149) and served so; a single-label classifier and a tagger
answered LABEL_i although their `labels` output gathers the real names from a constant in the graph."""

import json
import logging
import math
import os

import keras
import numpy as np
import pytest

from official_albert import AlbertConfig
from official_albert.checkpoints.loading import build_model
from official_albert.checkpoints.native import save_pretrained
from official_albert.serving import export
from official_albert.serving import pipelines
from official_albert.serving import task_pipelines
from official_albert.serving.saved_model_runtime import SavedModelRuntime
from official_albert.serving.served_heads import ModelLoadError
from official_albert.serving.served_model import ServedModel

pytestmark = pytest.mark.slow  # (three exports)

SPM = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(__file__))), "fixtures", "test_spm.model")
TINY = dict(vocab_size=1000, embedding_size=16, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
            intermediate_size=64, max_position_embeddings=32)
LABELS = ["billing", "bug", "praise"]
TAGS = ["B-LOC", "B-PER", "O"]
TEXTS = ["the invoice is wrong", "it crashes on start"]


def _old_export(root, name, head, bias, labels_json):
  """An export of a model whose logits are `bias` for every input (zero weights), its labels.json then deleted."""
  keras.utils.set_random_seed(1)
  model = build_model(head, AlbertConfig(**TINY), num_labels=len(bias))
  model.classifier.output_weights.assign(np.zeros(model.classifier.output_weights.shape, np.float32))
  model.classifier.output_bias.assign(np.asarray(bias, np.float32))
  directory = str(root / name)
  save_pretrained(model, directory, spm_model_file=SPM)
  with open(os.path.join(directory, "labels.json"), "w", encoding="utf-8") as f:
    json.dump(labels_json, f)
  folder = str(root / f"{name}_export")
  export.export_from_model_dir(directory, folder, head=head, seq_length=16)
  os.remove(os.path.join(folder, "labels.json"))  # (what an export made before 2eb83f0 lacks)
  return folder


def _logit(p):
  return math.log(p / (1 - p))


@pytest.fixture(scope="module")
def old_exports(tmp_path_factory):
  root = tmp_path_factory.mktemp("old_exports")
  return {
      # sigmoids 0.6, 0.8, 0.1 at a 0.7 threshold: label 0 is predicted at 0.5, not at the run's 0.7
      "multi": _old_export(root, "multi", "classifier", [_logit(0.6), _logit(0.8), _logit(0.1)],
                           {"task": "text_classification", "labels": LABELS, "multi_label": True,
                            "multi_label_threshold": 0.7}),
      "single": _old_export(root, "single", "classifier", [0.0, 2.0, 1.0],
                            {"task": "text_classification", "labels": LABELS, "multi_label": False}),
      "tagger": _old_export(root, "tagger", "token_classifier", [0.0, 2.0, 1.0], {"labels": TAGS}),
  }


def test_an_old_multi_label_export_is_answered_with_its_sigmoids_at_its_threshold(old_exports, caplog):
  with caplog.at_level(logging.WARNING):
    results = pipelines.classify(old_exports["multi"], TEXTS)
  for result in results:
    np.testing.assert_allclose(list(result["probabilities"].values()), [0.6, 0.8, 0.1], atol=1e-5)
    assert result["labels"] == ["LABEL_1"]  # the graph's 0.7, not 0.5
  # (its graph has no `labels` output: the names are unknown, and the fix is named)
  assert "no labels.json" in caplog.text and "Copy labels.json" in caplog.text


def test_old_single_label_and_tagger_exports_answer_their_graphs_label_names(old_exports):
  results = pipelines.classify(old_exports["single"], TEXTS)
  assert [r["label"] for r in results] == ["bug", "bug"]
  assert list(results[0]["probabilities"]) == LABELS
  assert SavedModelRuntime(old_exports["tagger"]).labels == TAGS
  words = task_pipelines.token_classification(old_exports["tagger"], "Ann lives in Paris")
  assert [w["label"] for w in words] == ["B-PER"] * 4


def test_the_server_refuses_an_old_multi_label_export_and_names_the_others_labels(old_exports):
  with pytest.raises(ModelLoadError, match="a multi-label classifier is not served"):
    ServedModel("m", old_exports["multi"])  # (it was served as a softmax classifier)
  assert ServedModel("s", old_exports["single"]).labels == LABELS
  assert ServedModel("t", old_exports["tagger"]).labels == TAGS
