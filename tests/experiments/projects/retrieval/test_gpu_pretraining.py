"""experiments/projects/retrieval/gpu_pretraining.py: the arrays a GPU host pretrains on hold the study's corpus and
vocabulary (so its held-out queries stay unseen) in what pretrain_torch.py reads, and its HF directory comes back
as a model directory the study takes."""

import hashlib
import os

from absl import flags
import numpy as np
import pytest

from experiments.projects.early_exit import pretrain_torch
from experiments.projects.retrieval import gpu_pretraining
from experiments.projects.retrieval import study


def _sha(path):
  with open(path, "rb") as f:
    return hashlib.sha256(f.read()).hexdigest()


def _run(*args):
  fv = flags.FlagValues()
  gpu_pretraining.define_flags(fv)
  fv(["prog", *args])
  gpu_pretraining.main([], fv)


@pytest.fixture(scope="module")
def arrays_dir(tmp_path_factory):
  out = tmp_path_factory.mktemp("gpu_route")
  _run("--step=arrays", f"--output_dir={out}", "--quick", "--seq_length=32", "--dupe_factor=1")
  return out


def test_arrays_hold_the_studys_corpus_and_vocabulary_as_pretrain_torch_reads_them(arrays_dir, tmp_path):
  gpu = arrays_dir / gpu_pretraining.GPU_DIR
  data = study.stage_data(str(tmp_path), study.StudySettings.quick())  # the study's own data stage
  assert _sha(gpu / "spm" / "spiece.model") == _sha(data["spm_model"])
  for part in ("train.txt", "heldout.txt"):
    assert _sha(gpu / "corpus" / part) == _sha(tmp_path / "corpus" / part), part
  inputs = pretrain_torch.load_arrays(str(gpu / gpu_pretraining.ARRAYS_FILE))
  ids = inputs["input_ids"]
  assert ids.shape[1] == 32 and ids.max() < 800 and len(ids) > 100
  masked = inputs["labels"] != -100
  # ceil(0.15 * 32) = 5 masked at most; a few short instances whose words are all longer than what they may mask
  # have none (the reference's whole-word rule skips a word that does not fit).
  assert masked.any(axis=1).mean() > 0.95 and (masked.sum(axis=1) <= 5).all()
  assert set(np.unique(inputs["sentence_order_label"])) == {0, 1}
  assert pretrain_torch.hf_config(800, ids.shape[1])["max_position_embeddings"] == 64  # narrower: the study's 64


def test_narrow_types_refuse_what_they_cannot_hold():
  from experiments import pretraining_arrays
  arrays = {name: np.zeros((2, 4), np.int32) for name in pretraining_arrays.ARRAY_TYPES}
  arrays["input_word_ids"][0, 0] = 70000
  with pytest.raises(ValueError, match=r"input_word_ids: values from 0 to 70000 do not fit uint16"):
    pretraining_arrays.narrow(arrays)
  assert set(pretraining_arrays.ARRAY_TYPES) == set(pretrain_torch.ARRAY_NAMES)
  # Mutation audit 24 F5: a negative value (a padding id of -1) wrapped silently to 65535; each type's largest value
  # fits and comes back unchanged.
  arrays["input_word_ids"][0, 0] = 0
  arrays["masked_lm_ids"][1, 2] = -1
  with pytest.raises(ValueError, match=r"masked_lm_ids: values from -1 to 0 do not fit uint16"):
    pretraining_arrays.narrow(arrays)
  arrays["masked_lm_ids"][1, 2] = 0
  arrays["input_word_ids"][0, 0], arrays["input_mask"][1, 3] = 65535, 255
  narrow = pretraining_arrays.narrow(arrays)
  assert (narrow["input_word_ids"][0, 0], narrow["input_mask"][1, 3]) == (65535, 255)
  assert narrow["input_word_ids"].dtype == np.uint16 and narrow["input_mask"].dtype == np.uint8


def test_convert_needs_the_arrays_step_and_pretrain_torchs_folder(tmp_path):
  with pytest.raises(ValueError, match=r"no vocabulary; run --step=arrays with the same --output_dir first"):
    _run("--step=convert", f"--output_dir={tmp_path}", f"--hf_dir={tmp_path}")
  with pytest.raises(ValueError, match=r"--step=convert needs --hf_dir"):
    _run("--step=convert", f"--output_dir={tmp_path}")


@pytest.mark.slow
def test_pretrain_torchs_folder_comes_back_as_the_studys_pretrained_dir(arrays_dir, tmp_path):
  pytest.importorskip("torch")
  pytest.importorskip("transformers")
  import subprocess
  import sys
  hf_dir = tmp_path / "pretrained_hf"
  subprocess.run([sys.executable, pretrain_torch.__file__,
                  f"--arrays={arrays_dir / gpu_pretraining.GPU_DIR / gpu_pretraining.ARRAYS_FILE}",
                  "--vocab_size=800", f"--output_dir={hf_dir}", "--steps=2", "--batch_size=4", "--warmup_steps=1"],
                 check=True, timeout=600)
  target = str(tmp_path / "native")
  _run("--step=convert", f"--output_dir={arrays_dir}", f"--hf_dir={hf_dir}", f"--pretrained_dir={target}")
  from official_albert import model_directory
  from official_albert.checkpoints.loading import load_model
  model_directory.require_spm_model(target, "the retrieval study's --pretrained_dir")  # what the study checks
  assert _sha(os.path.join(target, "spiece.model")) == _sha(arrays_dir / "gpu" / "spm" / "spiece.model")
  model, summary = load_model(target, "pretrainer")
  assert model.config.num_hidden_layers == 12 and summary["missing_allowed"] == []
