r"""Exports a model directory as a TF-Serving-ready SavedModel (signatures: see `official_albert.serving.export`),
with `--format=openvino` as an OpenVINO IR folder (`official_albert.serving.openvino_export`; needs the `openvino`
extra: pip install -r requirements-openvino.txt), or with `--format=litert` as a LiteRT folder for on-device use
(`official_albert.serving.litert_export`: the encoder and the sequence-level heads; running it needs the `litert`
extra: pip install -r requirements-litert.txt).

  python -m official_albert.export_saved_model --model_dir=/tmp/albert_base --export_dir=/tmp/albert_base_sm \
      --head=pretrainer --seq_length=128
  python -m official_albert.export_saved_model --model_dir=/tmp/albert_sst2 --export_dir=/tmp/albert_sst2_ov \
      --head=classifier --format=openvino --precision=int8 --calibration_file=sst2_texts.txt
"""

from absl import app
from absl import flags

from official_albert import cli
from official_albert.checkpoints.formats import MODEL_TYPES
from official_albert.serving import export_folder
from official_albert.serving import litert_runtime
from official_albert.serving import openvino_ir
from official_albert.serving import openvino_runtime


# Long because: one statement per flag, and the binary serves every head and format through its flags.
def define_flags(fv: flags.FlagValues = flags.FLAGS) -> None:
  """Defines the binary's flags (in a function, so that importing the module never clashes with other binaries)."""
  flags.DEFINE_string("model_dir", None, "Native, HF or original-release model directory.", flag_values=fv)
  flags.DEFINE_string("export_dir", None, "Where to write the SavedModel.", flag_values=fv)
  flags.DEFINE_enum("head", None, MODEL_TYPES, "Which model/head the directory holds (default: the one its files "
                    "record: an HF architecture, a native checkpoint's head and the task its run's records name; "
                    "pretrainer for an original release).", flag_values=fv)
  flags.DEFINE_integer("seq_length", None, "Packed sequence length of the text and example signatures (default: 128, "
                       "cut to the model's max_position_embeddings when it has fewer, logged; a warning when the run's "
                       "params.yaml records a longer predict length; a value beyond them is refused).", flag_values=fv)
  flags.DEFINE_string("spm_model_file", None, "SentencePiece model (default: spiece.model in --model_dir).",
                      flag_values=fv)
  flags.DEFINE_integer("num_labels", None, "Classifier outputs (default: from the checkpoint).", flag_values=fv)
  flags.DEFINE_integer("num_choices", 4, "Choices for --head=multiple_choice.", flag_values=fv)
  flags.DEFINE_integer("max_qa_length", None, "--head=multiple_choice: the question+option pieces each row of the "
                       "text signatures keeps (RACE's packing; at least 1, at most --seq_length - 4). Default: the "
                       "run's recorded task.max_qa_length, else RACE's 128 fitted to --seq_length (32 at 128), as "
                       "pipelines.multiple_choice packs the model directory.", flag_values=fv)
  flags.DEFINE_bool("do_lower_case", None, "Lower-case text (default: as --model_dir was trained).", flag_values=fv)
  flags.DEFINE_enum("tokenizer_mode", "hf", ["hf", "reference", "upstream_py3"], "FullTokenizer mode.",
                    flag_values=fv)
  flags.DEFINE_integer("max_predictions_per_seq", 20, "[MASK] slots of the pretrainer's text/example signatures.",
                       flag_values=fv)
  flags.DEFINE_integer("top_k", 5, "Predictions per [MASK] in the pretrainer's text outputs.", flag_values=fv)
  flags.DEFINE_bool("text_pair", False, "serving_default takes `text` and `text_b`.", flag_values=fv)
  flags.DEFINE_list("pooling", None, "--head=encoder: the sentence embedding's pooling (cls, max, mean, "
                    "mean_sqrt_len_tokens, weightedmean, lasttoken; several are concatenated). Default: the model "
                    "directory's sentence-transformers settings (modules.json), else mean.", flag_values=fv)
  flags.DEFINE_bool("normalize_embeddings", None, "--head=encoder: L2-normalise the sentence embedding (default: "
                    "as the directory's modules.json says, else no).", flag_values=fv)
  flags.DEFINE_integer("dim", None, "--head=encoder: serve the sentence embedding's first DIM dimensions, "
                       "re-normalised (a Matryoshka width the model was trained at: task.matryoshka_dims, recorded in "
                       "the directory's embedding_training.json). Default: the whole vector.", flag_values=fv)
  flags.DEFINE_bool("force_dim", False, "--dim: allow a width the directory records no training at.",
                    flag_values=fv)
  flags.DEFINE_bool("overwrite", False, "Replace an existing --export_dir.", flag_values=fv)
  flags.DEFINE_integer("pad_to_multiple_of", 16, "classifier / multiple_choice heads: cut each request batch to its "
                       "longest sequence rounded up to this multiple (dynamic padding; 0 = off).", flag_values=fv)
  flags.DEFINE_enum("dtype", "float32", ["float32", "bfloat16"], "--format=saved_model: bfloat16 runs the GEMMs in "
                    "bfloat16 (mixed_bfloat16: LayerNorm and logits float32; same signatures and output dtypes).",
                    flag_values=fv)
  flags.DEFINE_enum("format", "saved_model", ["saved_model", "openvino", "litert"], "saved_model: TF SavedModel "
                    "with in-graph tokenization (TF Serving); openvino: OpenVINO IR folder (needs the openvino "
                    "extra); litert: LiteRT (.tflite) folder, token ids in (encoder, classifier, multiple_choice).",
                    flag_values=fv)
  flags.DEFINE_enum("precision", None, ["f32", "bf16", "int8"], "--format=openvino: inference precision "
                    "(default bf16); int8 = NNCF post-training quantization on --calibration_file, gated. "
                    "--format=litert: f32 (default) or int8 (int8 weights, gated on --calibration_file).",
                    flag_values=fv)
  flags.DEFINE_bool("time_precisions", True, "--format=openvino (f32 / bf16): time the exported IR at both "
                    "precisions on this machine and say which is faster (a few calls).", flag_values=fv)
  flags.DEFINE_string("calibration_file", None, "--precision=int8: one text per line (text<TAB>text_b for pairs), "
                      "a few hundred lines; every fifth line is held out for the accuracy gate.", flag_values=fv)
  flags.DEFINE_float("max_accuracy_drop", 0.01, "--precision=int8: refuse the export when the held-out metric "
                     "drops by more than this (int8 vs f32).", flag_values=fv)
  flags.DEFINE_string("heldout_file", None, "--precision=int8: held-out lines for the gate (default: every fifth "
                      "calibration line). classifier / regression / multiple_choice: labelled, "
                      "`label<TAB>text[<TAB>text_b]`, scored by accuracy (Pearson r); other heads: as calibration "
                      "lines.", flag_values=fv)
  flags.DEFINE_integer("patience", 0, "classifier / multiple_choice with exit heads (task.exit_heads=true): each row "
                       "leaves after this many iterations with an unchanged prediction (early exit; 0 = full "
                       "depth). Fixed at export; every classifier / multiple_choice export returns exit_iteration.",
                       flag_values=fv)
  flags.DEFINE_integer("depth", None, "classifier / multiple_choice: run this many iterations of the shared block "
                       "(static elastic depth; default: all).", flag_values=fv)
  flags.DEFINE_float("exit_threshold", None, "--patience on a regression head: a score that moved less than this "
                     "counts as unchanged (default: modeling.early_exit.DEFAULT_EXIT_THRESHOLD).", flag_values=fv)
  flags.mark_flags_as_required(["model_dir", "export_dir"], flag_values=fv)


def main(argv, fv: flags.FlagValues = flags.FLAGS):
  del argv
  if fv.format in ("openvino", "litert"):
    if fv["dtype"].present:
      raise app.UsageError(f"--dtype applies to --format=saved_model; --format={fv.format} takes --precision.")
    for name in ("top_k", "pad_to_multiple_of"):  # (the SavedModel's serving signatures; a folder has none)
      if fv[name].present:
        raise app.UsageError(f"--{name} applies to --format=saved_model (its serving signatures); --format="
                             f"{fv.format} folders return the raw outputs and take the batch as it comes.")
    (_export_openvino if fv.format == "openvino" else _export_litert)(fv)
    return
  for name in ("precision", "calibration_file", "heldout_file"):
    if fv[name].present:
      raise app.UsageError(f"--{name} applies to --format=openvino / litert only.")
  _resolve_head(fv)
  from official_albert.serving import export  # noqa: PLC0415 (binary: TF after launch)
  path = export.export_from_model_dir(fv.model_dir, fv.export_dir, fv.head, dtype=fv.dtype, top_k=fv.top_k,
                                      pad_to_multiple_of=fv.pad_to_multiple_of, **_spec_options(fv))
  print(f"Exported {fv.head} SavedModel ({fv.dtype}) to {path}")


def _resolve_head(fv: flags.FlagValues) -> None:
  """--head, read from the directory when left out (printed), and refused where the run's records contradict it (in
  --head's words; every load refuses it too). After each format's flag checks: it imports TensorFlow."""
  from official_albert.serving import export_heads  # noqa: PLC0415 (binary: TF after launch)
  if fv.head is None:
    try:
      fv.head = export_heads.export_head(fv.model_dir)
    except ValueError as error:
      raise app.UsageError(str(error)) from None
    print(f"--head={fv.head} (read from {fv.model_dir})")
  export_heads.check_recorded_head(fv.model_dir, fv.head)


# The flags that fill the `ExportSpec` every format shares (beside model_dir, export_dir and head), by field name.
_SPEC_FLAGS = {name: name for name in ("seq_length", "spm_model_file", "num_labels", "num_choices", "max_qa_length",
                                       "do_lower_case", "tokenizer_mode", "max_predictions_per_seq", "text_pair",
                                       "pooling", "overwrite", "patience", "depth", "exit_threshold", "dim",
                                       "force_dim")}
_SPEC_FLAGS["normalize"] = "normalize_embeddings"


def _spec_options(fv: flags.FlagValues):
  # (--exit_threshold unset: the ExportSpec's default.)
  return {field: fv[flag].value for field, flag in _SPEC_FLAGS.items()
          if not (field == "exit_threshold" and fv[flag].value is None)}


def _check_int8_files(format_name: str, precision: str, fv: flags.FlagValues) -> None:
  try:
    export_folder.check_int8_files(format_name, precision, fv.calibration_file, fv.heldout_file)
  except ValueError as error:
    raise app.UsageError(str(error)) from None


def _export_openvino(fv: flags.FlagValues) -> None:
  # Checked before anything loads (openvino_ir imports no TensorFlow): a missing extra fails at once, naming what to
  # install.
  precision = fv.precision or "bf16"
  openvino_ir.require_openvino()
  _check_int8_files("openvino", precision, fv)
  if precision == "int8":
    openvino_ir.require_nncf()
  _resolve_head(fv)
  from official_albert.serving import openvino_export  # noqa: PLC0415 (binary: TF after launch)
  path = openvino_export.export_openvino(
      fv.model_dir, fv.export_dir, fv.head, precision, calibration_file=fv.calibration_file,
      max_accuracy_drop=fv.max_accuracy_drop, heldout_file=fv.heldout_file, **_spec_options(fv))
  print(f"Exported {fv.head} OpenVINO IR ({precision}) to {path}")
  if precision != "int8" and fv.time_precisions:
    _advise_precision(path, precision)


def _export_litert(fv: flags.FlagValues) -> None:
  # Checked before anything loads: a missing extra or a precision LiteRT does not have fails at once.
  precision = fv.precision or "f32"
  if precision not in ("f32", "int8"):
    raise app.UsageError(f"--format=litert --precision={precision}: LiteRT files are f32 or int8.")
  _check_int8_files("litert", precision, fv)
  litert_runtime.require_litert()
  _resolve_head(fv)
  from official_albert.serving import litert_export  # noqa: PLC0415 (binary: TF after launch)
  path = litert_export.export_litert(fv.model_dir, fv.export_dir, fv.head, precision,
                                     calibration_file=fv.calibration_file, max_accuracy_drop=fv.max_accuracy_drop,
                                     heldout_file=fv.heldout_file, **_spec_options(fv))
  print(f"Exported {fv.head} LiteRT model ({precision}) to {path}")


def _advise_precision(export_dir: str, precision: str) -> None:
  """Times the exported IR at f32 and bf16 here and says which to serve with (the serving machine may differ)."""
  ms = openvino_runtime.time_precisions(export_dir)
  faster = min(ms, key=ms.get)
  print(f"On this machine a batch-1 call takes f32 {ms['f32']:.1f} ms, bf16 {ms['bf16']:.1f} ms: {faster} is faster"
        + ("." if faster == precision else f", but the folder stores {precision}: serve it with "
           f"OpenVINOExport(dir, precision={faster!r}) or re-export with --precision={faster}.")
        + " Measure on the machine that serves: official_albert.serving.openvino_runtime.time_precisions(dir).")


def console_main() -> None:
  """The `albert-export-saved-model` console script (pyproject.toml)."""
  cli.launch(define_flags, main)


if __name__ == "__main__":
  console_main()
