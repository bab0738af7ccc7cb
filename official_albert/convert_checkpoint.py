r"""Converts ALBERT checkpoints between the original TF1 release, Hugging Face, KerasHub and our native model directory.

  python -m official_albert.convert_checkpoint --input_format=tf1 --input=albert_base/model.ckpt-best \
      --albert_config_file=albert_base/albert_config.json --output_format=hf --output_dir=/tmp/albert_base_hf

Formats:
  tf1     original checkpoint (`bert/...`, `cls/...`, optional TF-Hub `module/` prefix; optimizer slots and
          `global_step` are skipped and reported). Needs `--albert_config_file` unless `albert_config.json` lies
          beside the checkpoint. Output: `model.ckpt` + `checkpoint` + `albert_config.json` (original format).
  hf      Hugging Face directory: `config.json` + `model.safetensors` (input also `pytorch_model.bin`, read with
          `torch.load(weights_only=True)`). Output loads in `transformers.AlbertFor*.from_pretrained` with no missing
          or unexpected keys.
  hf_tf   (input only) an HF directory saved by transformers' TensorFlow classes: `config.json` + `tf_model.h5`,
          read with h5py (no tf-keras); every TFAlbert* class. An `hf` directory holding only tf_model.h5 is read
          the same way.
  keras_hub  KerasHub preset folder: `AlbertBackbone` (--model_type=encoder), `AlbertTextClassifier` (classifier),
          `AlbertMaskedLM` (pretrainer; no SOP head); the SentencePiece model is its tokenizer asset. Reading needs
          h5py only; writing needs keras-hub (requirements-keras-hub.txt).
  native  our model directory (`config.json` + `model.ckpt`), as written by `official_albert.save_pretrained`.

Without --model_type the input's record of its head decides (HF `architectures`, a KerasHub preset's task), else
the pretrainer. docs/conversion.md has the table of formats, heads and what each direction checks.

A longer model from any of them (Longformer's recipe: the trained position rows repeated to fill a longer table,
then continued pretraining; docs/long_inputs.md):

  python -m official_albert.convert_checkpoint --input_format=hf --input=albert_base_hf --output_format=native \
      --output_dir=/tmp/albert_base_4096 --max_position_embeddings=4096 --attention_type=block_sparse

A sentence embedder (a folder with `modules.json`: a sentence-transformers folder, or a `text_embedding` model
directory) converts as the encoder with its pooling, normalisation, length, tokenizer options and Matryoshka widths;
`--output_format=hf` makes it a folder that `SentenceTransformer(folder)` loads and that gives `pipelines.embed`'s
vectors (docs/retrieval.md):

  python -m official_albert.convert_checkpoint --input_format=native --input=runs/embedder --output_format=hf \
      --output_dir=runs/embedder_st

Every direction checks full consumption and exact shapes (an error lists the offending names) and prints a summary:
tensors, parameters, and what was skipped and why. A `spiece.model` (or the release's `30k-clean.model`) next to
the input is copied to the output directory as `spiece.model`; the label names and multi-label flag (labels.json,
labels.txt, an HF config's id2label / problem_type) and the tokenizer's options (tokenizer_config.json) travel too.
Into a folder that held another converted model, that model's side files this conversion does not write (labels,
spiece.model, tokenizer and sentence-transformers files; a KerasHub preset's task files) are removed and listed.
"""

from __future__ import annotations

from typing import List

from absl import flags

from official_albert import cli
from official_albert import file_io
from official_albert.checkpoints.formats import FORMATS
from official_albert.checkpoints.formats import INPUT_FORMATS
from official_albert.checkpoints.formats import MODEL_TYPES
from official_albert.config import ATTENTION_TYPES


def define_flags(fv: flags.FlagValues = flags.FLAGS) -> None:
  """Defines the binary's flags (in a function, so that importing the module never clashes with other binaries)."""
  flags.DEFINE_enum("input_format", None, INPUT_FORMATS, "Format of --input.", flag_values=fv)
  flags.DEFINE_string("input", None, "TF1 checkpoint prefix/directory, or HF/KerasHub/native model directory.",
                      flag_values=fv)
  flags.DEFINE_string("albert_config_file", None, "Config JSON (default: the one beside the input).", flag_values=fv)
  flags.DEFINE_enum("output_format", "native", FORMATS, "Format to write.", flag_values=fv)
  flags.DEFINE_string("output_dir", None, "Output directory.", flag_values=fv)
  flags.DEFINE_enum("model_type", None, MODEL_TYPES, "Which model/head the checkpoint holds (default: the HF "
                    "architecture or KerasHub task recorded in the input, else pretrainer).", flag_values=fv)
  flags.DEFINE_integer("num_labels", None, "Classifier outputs (default: from the checkpoint).", flag_values=fv)
  flags.DEFINE_integer("num_choices", 4, "Choices for --model_type=multiple_choice.", flag_values=fv)
  flags.DEFINE_list("allow_missing", [], "Globs of model variables the input may lack (e.g. "
                    "'cls/seq_relationship/*').", flag_values=fv)
  flags.DEFINE_list("allow_unused", [], "Globs of input tensors the model may ignore (e.g. 'cls/*').", flag_values=fv)
  flags.DEFINE_string("spm_model_file", None, "SentencePiece model to copy as spiece.model.", flag_values=fv)
  flags.DEFINE_integer("max_position_embeddings", None, "Extend the position table to this many rows by repeating the "
                       "trained rows (old rows bit-identical); default: keep.", flag_values=fv)
  flags.DEFINE_enum("attention_type", None, list(ATTENTION_TYPES), "Attention of the output model "
                    "(written to its config); default: keep.", flag_values=fv)
  flags.DEFINE_integer("block_size", None, "block_sparse: tokens per block (default 64).", flag_values=fv)
  flags.DEFINE_integer("num_random_blocks", None, "block_sparse: random blocks per query block (default 3).",
                       flag_values=fv)
  flags.mark_flags_as_required(["input_format", "input", "output_dir"], flag_values=fv)


# The formats held in a TF checkpoint, whose prefix TensorFlow reads as a glob (`file_io.check_checkpoint_path`).
TF_CHECKPOINT_FORMATS = ("tf1", "native")


def main(argv: List[str], fv: flags.FlagValues = flags.FLAGS) -> None:
  del argv
  # Before anything is read or written: a TF checkpoint under a path with glob characters cannot be read back.
  if fv.input_format in TF_CHECKPOINT_FORMATS:
    file_io.check_checkpoint_path(fv.input, "--input")
  if fv.output_format in TF_CHECKPOINT_FORMATS:
    file_io.check_checkpoint_path(fv.output_dir, "--output_dir")
  from official_albert.checkpoints.convert import convert  # noqa: PLC0415 (binary: TF after launch)
  from official_albert.checkpoints.convert import format_summary  # noqa: PLC0415 (binary: TF after launch)
  summary = convert(fv.input_format, fv.input, fv.output_format, fv.output_dir,
                    albert_config_file=fv.albert_config_file, model_type=fv.model_type, num_labels=fv.num_labels,
                    num_choices=fv.num_choices, allow_missing=fv.allow_missing, allow_unused=fv.allow_unused,
                    spm_model_file=fv.spm_model_file, max_position_embeddings=fv.max_position_embeddings,
                    attention={k: getattr(fv, k) for k in ("attention_type", "block_size", "num_random_blocks")
                               if getattr(fv, k) is not None})
  print(format_summary(summary))


def console_main() -> None:
  """The `albert-convert-checkpoint` console script (pyproject.toml)."""
  cli.launch(define_flags, main)


if __name__ == "__main__":
  console_main()
