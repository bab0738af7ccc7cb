"""A native directory's `classifier` head is a sequence, token or multiple-choice classifier alike (the same variable
names), so a conversion that named no `--model_type` was refused; the directory's own records now tell which:
labels.json's "task" (the text tasks and GLUE write it), a reranker's ranking_training.json, params.yaml's
`# experiment:` line. Records that disagree, or none, still need the flag."""

import json
import pathlib

import keras
import numpy as np
import pytest

from official_albert import AlbertConfig
from official_albert import model_directory as md
from official_albert.checkpoints import convert as convert_lib
from official_albert.checkpoints.loading import build_model
from official_albert.checkpoints.loading import infer_model_type
from official_albert.checkpoints.native import save_pretrained
from tests import tiny


@pytest.fixture(scope="module")
def classifier_dir(tmp_path_factory):
  """A native directory with a 3-output `classifier` head and no records."""
  directory = str(tmp_path_factory.mktemp("kind") / "plain")
  keras.utils.set_random_seed(4)
  model = build_model("token_classifier", AlbertConfig(**tiny.MODEL), num_labels=3)
  model({k: np.ones((1, 8), np.int32) for k in ("input_word_ids", "input_mask", "input_type_ids")})
  save_pretrained(model, directory)
  return directory


def _copy(source, target):
  target.mkdir()
  for name in ("config.json", "model.ckpt.index", "model.ckpt.data-00000-of-00001"):
    (target / name).write_bytes((pathlib.Path(source) / name).read_bytes())
  return target


@pytest.mark.parametrize("records,kind", [
    ({md.LABELS_FILE: {"task": "token_classification", "labels": ["O", "B", "I"]}}, "token_classifier"),
    ({md.LABELS_FILE: {"task": "glue/mnli", "labels": ["a", "b", "c"]}}, "classifier"),
    ({md.RANKING_TRAINING_FILE: {"loss": "bce"}}, "classifier"),
    ({md.PARAMS_FILE: "# experiment: race\ntask: {}\n"}, "multiple_choice"),
    ({md.PARAMS_FILE: "# experiment: token_classification\ntask: {}\n",
      md.LABELS_FILE: {"task": "token_classification", "labels": ["O", "B", "I"]}}, "token_classifier"),
])
def test_the_directory_records_name_the_head(classifier_dir, tmp_path, records, kind):
  directory = _copy(classifier_dir, tmp_path / "d")
  for name, content in records.items():
    (directory / name).write_text(content if isinstance(content, str) else json.dumps(content))
  assert infer_model_type("native", str(directory)) == kind


@pytest.mark.parametrize("records", [
    {},
    {md.LABELS_FILE: {"labels": ["a", "b", "c"]}},  # (a bare labels file: no task)
    {md.PARAMS_FILE: "# experiment: race\ntask: {}\n",
     md.LABELS_FILE: {"task": "token_classification", "labels": ["O", "B", "I"]}},  # (they disagree)
])
def test_without_one_answer_the_flag_is_still_asked_for(classifier_dir, tmp_path, records):
  directory = _copy(classifier_dir, tmp_path / "d")
  for name, content in records.items():
    (directory / name).write_text(content if isinstance(content, str) else json.dumps(content))
  with pytest.raises(ValueError, match="pass --model_type=classifier, token_classifier or multiple_choice"):
    infer_model_type("native", str(directory))


def test_a_conversion_without_model_type_reads_the_record(classifier_dir, tmp_path):
  directory = _copy(classifier_dir, tmp_path / "d")
  (directory / md.LABELS_FILE).write_text(json.dumps({"task": "token_classification", "labels": ["O", "B", "I"]}))
  summary = convert_lib.convert("native", str(directory), "hf", str(tmp_path / "hf"))
  config = json.loads((tmp_path / "hf" / "config.json").read_text())
  assert config["architectures"] == ["AlbertForTokenClassification"], (summary, config["architectures"])
