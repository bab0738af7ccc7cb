"""LiteRT (TFLite) export: the encoder and the sequence-level heads as one `.tflite` file, token ids in.

  python -m official_albert.export_saved_model --model_dir=DIR --export_dir=OUT --head=classifier --format=litert
      [--precision=f32|int8 --calibration_file=texts.txt]

The folder (`export_folder`): `model.tflite` with one signature, `serving_default`, whose inputs are `from_ids`'s
(`input_word_ids`, `input_mask`, `input_type_ids` int32 [B, S], multiple choice [B, C, S]; B and S dynamic) and whose
outputs are the head's raw outputs (the encoder's with `sentence_embedding`), plus spiece.model, serving_config.json,
model_config.json and labels.json as for OpenVINO; `litert_runtime.LiteRTExport` runs it with the `ai-edge-litert`
interpreter and the pipelines take the folder like a model directory.

"Lite" is ALBERT's promise, so the file holds each weight once: the converter freezes variables into constant
buffers, one per variable, and the L applications of a shared block read the same buffers (albert-base: 11.7 M
parameters, a 46.8 MB f32 file, 1.002 × 4 bytes × parameters; tests/official_albert/serving/test_litert_export.py).
The variables are handed to the converter as the TensorFlow variables under Keras' (`_FrozenWeights`): given the
Keras model itself, TF 2.21's converter keeps Keras 3 variables as resource variables that nothing initializes,
and the file computes NaN.

int8 is dynamic-range quantization: every matmul weight is stored as int8 with a per-channel scale and the
activations stay float (quantized on the fly by the kernels), so no calibration statistics are needed. The
embedding policy: the word table is int8 as well (the gather reads int8 rows and dequantizes only the rows it
gathered), the small position and token-type tables stay float32; so the file is ≈ 1 byte × parameters
(albert-base: 12.1 MB). An int8 export passes the OpenVINO export's accuracy gate first (`openvino_quantize`:
held-out lines of `--calibration_file` or `--heldout_file`, the head's metric, refused with both numbers when it
drops by more than `--max_accuracy_drop`).

The converter is TensorFlow's own (`tf.lite.TFLiteConverter`, in TF 2.21); running needs only the `litert` extra
(`requirements-litert.txt`: ai-edge-litert).
"""

from __future__ import annotations

import logging
import os
from typing import Optional, Sequence

import tensorflow as tf

from official_albert.config import check_attention_type
from official_albert.serving import openvino_quantize
from official_albert.serving.export_folder import check_int8_files
from official_albert.serving.export_folder import MODEL_FILES
from official_albert.serving.export_spec import check_precision
from official_albert.serving.export_spec import ExportSpec
from official_albert.serving.export_spec import ids_function
from official_albert.serving.export_spec import load_for_export
from official_albert.serving.litert_runtime import FORMAT_TAG
from official_albert.serving.litert_runtime import require_litert
from official_albert.serving.openvino_export import export_outputs
from official_albert.serving.openvino_export import serving_config
from official_albert.serving.openvino_export import write_folder

logger = logging.getLogger(__name__)

MODEL_FILE = MODEL_FILES["litert"]
# The heads a LiteRT file serves: the encoder (its sentence embedding too) and the sequence-level heads.
HEADS = ("encoder", "classifier", "multiple_choice")


def supports(attention_type: str) -> bool:
  """Whether the LiteRT file computes `attention_type`: it traces dense attention only (the chunked and block-sparse
  kernels use ops LiteRT's builtins do not have)."""
  return check_attention_type(attention_type) == "dense"


def check_head(head: str) -> None:
  if head not in HEADS:
    raise ValueError(f"--format=litert exports --head={' | '.join(HEADS)} (the encoder and the sequence-level "
                     f"heads), not {head!r}; export it as a SavedModel or with --format=openvino.")


class _FrozenWeights:
  """A trackable that holds the model's TensorFlow variables, for the converter to freeze into constants."""

  def __init__(self, model):
    self.module = tf.Module()
    self.module.weights = [getattr(v, "value", v) for v in model.weights]


def to_litert(model, head: str, num_choices: Optional[int] = None, outputs: Optional[Sequence[str]] = None,
              quantize: bool = False) -> bytes:
  """One of our Keras models (weights loaded) as a LiteRT flatbuffer with `from_ids`'s inputs and `outputs`.

  Args:
    model: an `AlbertEncoder` / `AlbertEmbedder`, `AlbertClassifier` or `AlbertMultipleChoice`.
    head: one of `HEADS`, matching `model`.
    num_choices: multiple choice only (default: the model's).
    outputs: output names (default `OUTPUT_NAMES[head]`).
    quantize: int8 weights (dynamic-range quantization; see the module docstring).
  """
  check_head(head)
  from_ids, _, _ = ids_function(model, head, num_choices, outputs, float32_outputs=True)
  converter = tf.lite.TFLiteConverter.from_concrete_functions([from_ids.get_concrete_function()],
                                                              _FrozenWeights(model).module)
  converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]  # no TF-Select: the plain interpreter
  if quantize:
    converter.optimizations = [tf.lite.Optimize.DEFAULT]
  return converter.convert()


def export_litert(model_dir: str, export_dir: str, head: str = "encoder", precision: str = "f32", *,
                  calibration_file: Optional[str] = None, max_accuracy_drop: float = 0.01,
                  heldout_file: Optional[str] = None, **options) -> str:
  """Loads `model_dir` and writes a LiteRT export folder (module docstring); returns `export_dir`.

  Args:
    model_dir, export_dir, head, **options: the `ExportSpec` every export shares (seq_length, spm_model_file,
      num_labels, num_choices, do_lower_case, keep_accents, remove_space, tokenizer_mode, text_pair, pooling,
      normalize, overwrite).
    precision: "f32" or "int8" (int8 needs `calibration_file`: its held-out lines feed the accuracy gate).
    calibration_file, max_accuracy_drop, heldout_file: the gate's data and threshold, as for OpenVINO's int8.
  """
  spec = ExportSpec(model_dir, export_dir, head, **options)
  check_precision("litert", precision)
  check_head(head)
  check_int8_files("litert", precision, calibration_file, heldout_file)
  spec.check()
  if spec.patience or spec.depth is not None:
    raise ValueError(f"patience={spec.patience}, depth={spec.depth}: the LiteRT export runs every row at full depth "
                     "(the early exit and static depth are not converted to LiteRT); export them with "
                     "--format=saved_model or --format=openvino.")
  require_litert()
  loaded = load_for_export(spec)
  spec = loaded.at_length(spec)  # (seq_length: the flag's, else 128 cut to the model's positions)
  attention_type = getattr(loaded.model.config, "attention_type", "dense")
  if not supports(attention_type):
    raise ValueError(f"{model_dir}: attention_type={attention_type!r}; the LiteRT export traces dense attention "
                     "(the chunked and block-sparse kernels use ops LiteRT's builtins do not have). Convert the "
                     "checkpoint with `convert_checkpoint --attention_type=dense` first (the weights are the same; "
                     "chunked attention computes the same function as dense).")
  outputs = export_outputs(head, loaded)
  num_choices = spec.num_choices if head == "multiple_choice" else None
  flat = to_litert(loaded.model, head, num_choices, outputs)
  gate = None
  if precision == "int8":
    if loaded.tokenizer is None:
      raise ValueError(f"{model_dir}: --precision=int8 tokenizes --calibration_file and needs spiece.model (pass "
                       "--spm_model_file).")
    quantized = to_litert(loaded.model, head, num_choices, outputs, quantize=True)
    gate = gate_int8(flat, quantized, head, loaded, spec, calibration_file, heldout_file, max_accuracy_drop)
    flat = quantized

  def save_model(tmp_dir):
    with open(os.path.join(tmp_dir, MODEL_FILE), "wb") as f:
      f.write(flat)

  write_folder(spec, loaded, save_model, serving_config(spec, loaded, FORMAT_TAG, precision, gate,
                                                        weights="int8" if precision == "int8" else "f32"))
  return export_dir


def gate_int8(f32_flat: bytes, int8_flat: bytes, head: str, loaded, spec: ExportSpec, calibration_file: str,
              heldout_file: Optional[str], max_accuracy_drop: float):
  """OpenVINO's int8 accuracy gate on the two LiteRT files; returns its record or raises `AccuracyGateError`."""
  _, heldout, label_values, regression, source = openvino_quantize.gate_rows(
      calibration_file, heldout_file, head, spec.num_choices, openvino_quantize.gate_labels(loaded),
      lambda: spec.num_choices if head == "multiple_choice" else loaded.model.num_labels)
  threshold = loaded.threshold if loaded.multi_label else None
  batches = openvino_quantize.pack_batches(loaded.tokenizer, heldout, head, spec.seq_length,
                                           spec.num_choices if head == "multiple_choice" else None)
  openvino_quantize.check_heldout(head, batches, label_values if threshold is None else None, source=source,
                                  regression=regression)
  run = {name: _runner(flat) for name, flat in (("f32", f32_flat), ("int8", int8_flat))}
  f32_out = [run["f32"](batch) for batch in batches]
  int8_out = [run["int8"](batch) for batch in batches]
  metrics = openvino_quantize.gate_metrics(head, batches, f32_out, int8_out, label_values, threshold, source=source)
  record = openvino_quantize.check_gate(metrics, max_accuracy_drop, len(heldout), label_values is not None)
  logger.info("LiteRT int8 gate passed on %d held-out examples: %s", len(heldout), record["metrics"])
  return record


def _runner(flat: bytes):
  interpreter = require_litert().Interpreter(model_content=flat)
  runner = interpreter.get_signature_runner()
  return lambda batch: {k: v.copy() for k, v in runner(**batch).items()}
