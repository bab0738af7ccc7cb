"""Which checkpoint of a training run's model_dir answers (review s56, the journey): `--mode=predict` reads
`model.ckpt-best`, the pipelines, exports, conversion and the server the newest `ckpt-N` (as eval_results.json reports
it). The same folder gave two answers for one text and nothing said which checkpoint answered. A reader of the newest
now warns, once, when the best holds another step; and conversion takes the best's prefix (with its folder's config,
labels and tokenizer), so the best can be exported and served as a model directory of its own."""

import glob
import json
import logging
import os
import shutil

import keras
import numpy as np
import tensorflow as tf

from official_albert import AlbertConfig
from official_albert import model_directory as md
from official_albert.checkpoints import convert as convert_lib
from official_albert.checkpoints.loading import build_model
from official_albert.checkpoints.native import save_pretrained
from official_albert.serving import pipelines
from tests.official_albert.serving.random_models import perturb_weights

TINY = dict(vocab_size=1000, embedding_size=16, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
            intermediate_size=64, max_position_embeddings=32)
TEXTS = ["the invoice is wrong", "great work"]


def _run_dir(root, spm_model_file):
  """A trainer-like model_dir: ckpt-2, and ckpt-3 and ckpt-4 (other weights), model.ckpt-best = ckpt-2; and `at_2`,
  a model directory of the step-2 weights."""
  keras.utils.set_random_seed(1)
  model = build_model("classifier", AlbertConfig(**TINY), 2)
  run = root / "run"
  save_pretrained(model, str(run), spm_model_file=spm_model_file)
  save_pretrained(model, str(root / "at_2"), spm_model_file=spm_model_file)
  for name in glob.glob(str(run / "model.ckpt.*")):  # (a trainer's folder holds ckpt-N, not model.ckpt)
    os.remove(name)
  manager = tf.train.CheckpointManager(tf.train.Checkpoint(model=model), str(run), max_to_keep=3,
                                      checkpoint_name="ckpt")
  manager.save(checkpoint_number=2)
  perturb_weights(model, seed=3)
  manager.save(checkpoint_number=3)
  manager.save(checkpoint_number=4)
  for name in glob.glob(str(run / "ckpt-2.*")):
    shutil.copy(name, str(run / os.path.basename(name).replace("ckpt-2", md.BEST_CHECKPOINT_PREFIX)))
  (run / md.BEST_CHECKPOINT_INFO).write_text(json.dumps({"global_step": 2, "metric": "eval_accuracy", "value": 1.0}))
  for folder in (run, root / "at_2"):
    md.write_label_file(str(folder), md.LabelFile(["neg", "pos"], task="text_classification"))
  return run


def _probabilities(folder):
  return np.asarray([[r["probabilities"][n] for n in ("neg", "pos")] for r in pipelines.classify(str(folder), TEXTS)])


def test_the_newest_is_read_with_a_warning_and_the_best_converts_to_a_directory(tmp_path, spm_model_file, caplog):
  run = _run_dir(tmp_path, spm_model_file)
  with caplog.at_level(logging.WARNING):
    newest = _probabilities(run)
    _probabilities(run)
  told = [r.getMessage() for r in caplog.records if "model.ckpt-best" in r.getMessage()]
  assert len(told) == 1 and "reading ckpt-4 (step 4" in told[0] and "(step 2, the best evaluation)" in told[0]
  caplog.clear()
  with caplog.at_level(logging.WARNING):  # (an older ckpt-N named by the caller: no word)
    convert_lib.convert("native", str(run / "ckpt-3"), "native", str(tmp_path / "at_3"))
  assert "model.ckpt-best" not in caplog.text
  best_dir = tmp_path / "best"
  convert_lib.convert("native", str(run / md.BEST_CHECKPOINT_PREFIX), "native", str(best_dir))
  assert json.loads((best_dir / md.LABELS_FILE).read_text())["labels"] == ["neg", "pos"]
  best = _probabilities(best_dir)
  np.testing.assert_allclose(best, _probabilities(tmp_path / "at_2"), atol=1e-6)
  assert np.abs(best - newest).max() > 1e-3  # (the two checkpoints answer differently)
