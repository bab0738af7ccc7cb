"""One checkpoint reader for every mode (issue 44, item 2): a model directory whose `model.ckpt-best` and newest
`ckpt-N` are truncated still answers in predict, eval, export, convert and `pipelines.classify`, each saying which
checkpoint it used; with no readable checkpoint left the error names the files."""

import json
import logging
import os
import shutil

import pytest

from official_albert import model_directory as md
from official_albert import pipelines
from official_albert import train
from official_albert.checkpoints import convert
from official_albert.serving import export
from tests.tasks import test_text_classification as tc


def _truncate(prefix):
  with open(prefix + ".data-00000-of-00001", "r+b") as f:
    f.truncate(100)


@pytest.fixture(scope="module")
def damaged(tmp_path_factory, spm_model_file):
  """A 4-step text_classification run (ckpt-2, ckpt-4, model.ckpt-best) whose best and ckpt-4 are truncated."""
  root = tmp_path_factory.mktemp("fallback")
  tc._write_csv(root / "train.csv", ["id", "text", "label"], tc._rows())
  task = tc._task(spm_model_file, root / "train.csv", root / "train.csv")
  model_dir = str(root / "model")
  override = json.loads(tc._override(task, steps=4))
  override["trainer"].update(checkpoint_interval=2, validation_interval=2, steps_per_loop=2)
  train.run("text_classification", "train_and_eval", model_dir, params_override=json.dumps(override))
  assert os.path.exists(os.path.join(model_dir, md.BEST_CHECKPOINT_PREFIX + ".index"))
  for name in (md.BEST_CHECKPOINT_PREFIX, "ckpt-4"):
    _truncate(os.path.join(model_dir, name))
  return {"model_dir": model_dir, "override": json.dumps(override), "root": root}


@pytest.mark.slow
def test_every_mode_falls_back_to_the_newest_readable_checkpoint(damaged, caplog, tmp_path):
  model_dir = damaged["model_dir"]
  ckpt2 = os.path.join(model_dir, "ckpt-2")
  with caplog.at_level(logging.INFO):
    result = train.run("text_classification", "predict", model_dir, params_override=damaged["override"])
  assert result["checkpoint"] == ckpt2 and result["global_step"] == 2
  assert f"using {ckpt2} instead" in caplog.text and "model.ckpt-best.data-00000-of-00001" in caplog.text

  caplog.clear()
  with caplog.at_level(logging.INFO):
    results = train.run("text_classification", "eval", model_dir, params_override=damaged["override"])
  assert results["global_step"] == 2 and "ckpt-4 could not be restored" in caplog.text

  caplog.clear()
  with caplog.at_level(logging.INFO):
    answers = pipelines.classify(model_dir, ["a good and fine film"], seq_length=32)
  assert answers[0]["label"] in ("neg", "pos")
  assert f"using {ckpt2} instead" in caplog.text and "ckpt-4.data-00000-of-00001" in caplog.text

  caplog.clear()
  with caplog.at_level(logging.INFO):
    export.export_from_model_dir(model_dir, str(tmp_path / "export"), head="classifier", seq_length=32)
  assert os.path.exists(tmp_path / "export" / "saved_model.pb") and f"using {ckpt2} instead" in caplog.text

  caplog.clear()
  with caplog.at_level(logging.INFO):
    summary = convert.convert("native", model_dir, "native", str(tmp_path / "converted"), model_type="classifier")
  assert summary["source"].endswith("ckpt-2") and f"using {ckpt2} instead" in caplog.text
  assert json.load(open(tmp_path / "converted" / md.LABELS_FILE))["labels"] == ["neg", "pos"]


def test_no_readable_checkpoint_names_the_files(damaged, tmp_path):
  model_dir = str(tmp_path / "model")
  shutil.copytree(damaged["model_dir"], model_dir)
  _truncate(os.path.join(model_dir, "ckpt-2"))
  with pytest.raises(md.UnreadableCheckpointError, match=r"ckpt-2 \(ckpt-2.data-00000-of-00001, ckpt-2.index\) "
                                                         r"cannot be read: IndexError"):
    pipelines.classify(model_dir, ["a text"], seq_length=32)
  with pytest.raises(md.UnreadableCheckpointError, match=r"model.ckpt-best.data-00000-of-00001"):
    train.run("text_classification", "predict", model_dir, params_override=damaged["override"])
  # A prefix named as such is not replaced by another: its error names its files.
  with pytest.raises(md.UnreadableCheckpointError, match=r"ckpt-4 \(ckpt-4.data"):
    md.resolve_checkpoint(os.path.join(model_dir, "ckpt-4"))
