"""Long models at their length (issue 44, item 3): a classifier extended to 1,024 positions by convert_checkpoint
keeps its label names (labels.json travels with every conversion) and `classify` reads a 600+-piece text whole by
default (the model's max_position_embeddings, or the length a trainer's directory was fine-tuned at), logging cuts."""

import json
import logging
import shutil

import numpy as np
import pytest

from official_albert import model_directory as md
from official_albert import pipelines as pipelines_api
from official_albert.checkpoints import convert as convert_lib
from official_albert.serving import pipelines
from official_albert.tokenization import FullTokenizer

LABELS = {"task": "text_classification", "labels": ["billing", "bug", "praise"], "columns": {"text_column": "body"}}
LONG = " ".join(f"the invoice {i} was wrong again, and the app crashed on start" for i in range(22))


@pytest.fixture(scope="module")
def long_dir(tmp_path_factory, tiny_model_dirs):
  """The session's 64-position 3-label classifier (tests/tiny.py) with labels.json, converted (native → native) to
  1,024 positions."""
  root = tmp_path_factory.mktemp("long_classify")
  tiny_model_dirs.copy("classifier", root / "short")
  (root / "short" / md.LABELS_FILE).write_text(json.dumps(LABELS))
  convert_lib.convert("native", str(root / "short"), "native", str(root / "long"), model_type="classifier",
                      max_position_embeddings=1024)
  return root


def test_conversions_keep_labels_json(long_dir, tmp_path):
  assert json.loads((long_dir / "long" / md.LABELS_FILE).read_text()) == LABELS
  convert_lib.convert("native", str(long_dir / "long"), "hf", str(tmp_path / "hf"), model_type="classifier")
  assert json.loads((tmp_path / "hf" / md.LABELS_FILE).read_text()) == LABELS
  assert pipelines.classify(str(tmp_path / "hf"), ["a text"])[0]["label"] in LABELS["labels"]


def test_a_1024_position_classifier_reads_a_long_text_whole(long_dir, spm_model_file, caplog):
  pieces = len(FullTokenizer(spm_model_file).encode_ids(LONG))
  assert 600 < pieces < 1022
  with caplog.at_level(logging.INFO):
    default = pipelines.classify(str(long_dir / "long"), [LONG])[0]
  assert "cut" not in caplog.text
  whole = pipelines.classify(str(long_dir / "long"), [LONG], seq_length=1024)[0]
  short = pipelines.classify(str(long_dir / "long"), [LONG], seq_length=128)[0]
  assert default["label"] in LABELS["labels"]
  assert list(default["probabilities"]) == LABELS["labels"]
  np.testing.assert_allclose(list(default["probabilities"].values()), list(whole["probabilities"].values()),
                             atol=1e-6)
  assert np.abs(np.subtract(list(default["probabilities"].values()),
                            list(short["probabilities"].values()))).max() > 1e-6
  assert f"1 of 1 texts are longer than seq_length=128 and were cut (the longest has {pieces + 2} tokens)" in (
      caplog.text)


def test_a_trainers_directory_is_read_at_its_predict_length(long_dir, tmp_path, caplog):
  shutil.copytree(long_dir / "long", tmp_path / "run")
  (tmp_path / "run" / md.PARAMS_FILE).write_text("task:\n  train_data:\n    seq_length: 32\n"
                                                  "  predict_data:\n    seq_length: 256\n")
  assert md.recorded_seq_length(str(tmp_path / "run")) == 256
  with caplog.at_level(logging.INFO):
    default = pipelines.classify(str(tmp_path / "run"), [LONG])[0]
  assert "seq_length=256: the length" in caplog.text and "longer than seq_length=256 and were cut" in caplog.text
  at_256 = pipelines.classify(str(tmp_path / "run"), [LONG], seq_length=256)[0]
  np.testing.assert_allclose(list(default["probabilities"].values()), list(at_256["probabilities"].values()),
                             atol=1e-6)


def test_token_classification_defaults_to_the_models_length(tiny_model_dirs):
  """Before: the default seq_length 128 was refused by a 64-position model (`max_seq_length=128 exceeds ...`)."""
  tagger = tiny_model_dirs["token_classifier"]
  default = pipelines_api.token_classification(tagger, LONG)
  at_64 = pipelines_api.token_classification(tagger, LONG, seq_length=64)
  # Every word labelled: past 64 pieces the text runs in more sequences, split at word boundaries (it was cut).
  assert default == at_64 and all(w["label"] is not None for w in default)
  assert pipelines_api.token_classification(tagger, LONG, seq_length=32) != at_64
