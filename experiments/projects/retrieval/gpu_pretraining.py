r"""The retrieval study's encoder pretrained on a GPU host: the arrays to send there, and its model brought back.

    python -m experiments.projects.retrieval.gpu_pretraining --step=arrays --output_dir=out/retrieval_gpu128
    # on the GPU host (PyTorch, no TensorFlow), with the arrays file and the script copied there:
    python experiments/projects/early_exit/pretrain_torch.py --arrays pretrain_arrays.npz --vocab_size 4000 \
        --output_dir pretrained_hf --steps 14000 --max_seconds 480
    # back here, with pretrained_hf copied back:
    python -m experiments.projects.retrieval.gpu_pretraining --step=convert --output_dir=out/retrieval_gpu128 \
        --hf_dir=pretrained_hf
    python -m experiments.projects.retrieval.study --output_dir=out/retrieval_gpu128 --seq_length=128 \
        --pretrained_dir=out/retrieval_gpu128/gpu/pretrained --rerank_learning_rate=5e-5 --rerank_mining=biencoder

Why: a 2-core CPU pretrains the study's encoder too little for a reranker to learn (the README's tables); an H200
pretrains the early-exit study's 12-iteration model (`pretrain_torch.py`) on these records in 8 minutes.

`--step=arrays` makes the study's corpus, vocabulary and pretraining records with the study's own corpus settings
(`StudySettings.full()`, or `--quick`'s) at `--seq_length` pieces with `--dupe_factor` masked copies, in
`<output_dir>/gpu/`, and writes them as `<output_dir>/gpu/pretrain_arrays.npz` (`experiments.pretraining_arrays`).
The corpus and the vocabulary are the ones the study's data stage makes (seeded, single-threaded: the same bytes),
so the study's held-out queries stay unseen; only the records differ from the study's (more masked copies, which a
GPU can afford). `--step=convert` converts pretrain_torch.py's HF directory into a native model directory with that
vocabulary (`<output_dir>/gpu/pretrained`, or `--pretrained_dir`), which the study takes as `--pretrained_dir`.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os

from absl import flags

from experiments import pretraining_arrays
from experiments import study as study_kit
from experiments.projects.retrieval.study import StudySettings
from official_albert import cli
from official_albert import file_io
from official_albert import model_directory

STEPS = ("arrays", "convert")
GPU_DIR = "gpu"  # under --output_dir: the records, the arrays and the converted model
ARRAYS_FILE = "pretrain_arrays.npz"


def settings_for(quick: bool, seq_length: int, dupe_factor: int) -> StudySettings:
  """The study's corpus settings (`full()` or `quick()`) with the GPU route's record layout."""
  settings = StudySettings.quick() if quick else StudySettings.full()
  return dataclasses.replace(settings, seq_length=seq_length, max_predictions_per_seq=math.ceil(0.15 * seq_length),
                             dupe_factor=dupe_factor)


def make_arrays(output_dir: str, settings: StudySettings) -> dict:
  """`<output_dir>/gpu/`: corpus, vocabulary and records of `settings`, and their arrays; returns what was made."""
  gpu_dir = os.path.join(output_dir, GPU_DIR)
  made = study_kit.make_pretraining_data(gpu_dir, settings)
  arrays = pretraining_arrays.export_arrays(made["train_records"].split(","), os.path.join(gpu_dir, ARRAYS_FILE),
                                            settings.seq_length, settings.max_predictions_per_seq)
  import sentencepiece as spm  # noqa: PLC0415 (light, but only here)
  vocab_size = spm.SentencePieceProcessor(model_file=made["spm_model"]).GetPieceSize()
  summary = {"arrays": arrays, "spm_model": made["spm_model"], "vocab_size": vocab_size,
             "instances": made["train_examples"], "seq_length": settings.seq_length,
             "dupe_factor": settings.dupe_factor}
  file_io.atomic_write_json(os.path.join(gpu_dir, "arrays.json"), summary)
  return summary


def convert_model(output_dir: str, hf_dir: str, pretrained_dir: str = "") -> str:
  """pretrain_torch.py's HF directory `hf_dir` as a native model directory with the arrays' vocabulary."""
  from official_albert.checkpoints.convert import convert  # noqa: PLC0415 (binary: TF after launch)
  from official_albert.checkpoints.loading import detect_format  # noqa: PLC0415 (binary: TF after launch)
  spm_model = os.path.join(output_dir, GPU_DIR, "spm", model_directory.SPM_FILE)
  if not os.path.isfile(spm_model):
    raise ValueError(f"{spm_model}: no vocabulary; run --step=arrays with the same --output_dir first (the model's "
                     "pieces are that vocabulary's).")
  if not os.path.isfile(os.path.join(hf_dir, model_directory.CONFIG_FILE)):
    raise ValueError(f"--hf_dir={hf_dir}: no config.json; pass the --output_dir pretrain_torch.py wrote.")
  target = pretrained_dir or os.path.join(output_dir, GPU_DIR, "pretrained")
  convert(detect_format(hf_dir), hf_dir, "native", target, model_type="pretrainer", spm_model_file=spm_model)
  return target


def define_flags(fv: flags.FlagValues = flags.FLAGS) -> None:
  """Defines the binary's flags on `fv` (never at import time)."""
  flags.DEFINE_enum("step", None, list(STEPS), "arrays: records and arrays for pretrain_torch.py; convert: its HF "
                    "directory as the study's --pretrained_dir.", flag_values=fv)
  flags.DEFINE_string("output_dir", "out/retrieval_gpu128", "The study's --output_dir (this writes under gpu/).",
                      flag_values=fv)
  flags.DEFINE_bool("quick", False, "The study's --quick corpus (the tests' size).", flag_values=fv)
  flags.DEFINE_integer("seq_length", 128, "Pieces a pretraining sequence holds (the study's --seq_length).",
                       flag_values=fv)
  flags.DEFINE_integer("dupe_factor", 8, "Masked copies of the training documents (the study's own data stage makes "
                       "2; 8 gave 214,861 instances of 128 pieces, 32 MB of arrays).", flag_values=fv)
  flags.DEFINE_string("hf_dir", None, "--step=convert: the HF directory pretrain_torch.py wrote.", flag_values=fv)
  flags.DEFINE_string("pretrained_dir", None, "--step=convert: where the native model goes (default "
                      "<output_dir>/gpu/pretrained).", flag_values=fv)
  flags.mark_flag_as_required("step", flag_values=fv)


def main(argv, fv: flags.FlagValues = flags.FLAGS) -> None:
  del argv
  if fv.step == "arrays":
    if not 8 <= fv.seq_length <= 256:
      raise ValueError(f"--seq_length={fv.seq_length}: give 8 to 256 pieces (the arrays store positions as uint8).")
    if fv.dupe_factor < 1:
      raise ValueError(f"--dupe_factor={fv.dupe_factor}: give 1 or more masked copies.")
    summary = make_arrays(fv.output_dir, settings_for(fv.quick, fv.seq_length, fv.dupe_factor))
    print(json.dumps(summary, indent=1))
    print(f"next, on the GPU host: python experiments/projects/early_exit/pretrain_torch.py --arrays "
          f"{os.path.basename(summary['arrays'])} --vocab_size {summary['vocab_size']} --output_dir pretrained_hf")
  else:
    if not fv.hf_dir:
      raise ValueError("--step=convert needs --hf_dir: the folder pretrain_torch.py wrote (config.json, "
                       "model.safetensors).")
    target = convert_model(fv.output_dir, fv.hf_dir, fv.pretrained_dir or "")
    print(f"wrote {target}: pass it to the study as --pretrained_dir={target} with --seq_length={fv.seq_length}")


def console_main() -> None:
  """The `albert-retrieval-gpu-pretraining` console script (pyproject.toml)."""
  cli.launch(define_flags, main)


if __name__ == "__main__":
  console_main()
