"""OpenVINO export: every head as an OpenVINO IR with `from_ids`'s inputs and outputs, in bf16, f32 or int8.

The TF SavedModel (`serving/export.py`) stays the primary export (TF Serving). This is the fast CPU path beside it:

  python -m official_albert.export_saved_model --model_dir=DIR --export_dir=OUT --head=classifier \
      --format=openvino --precision=bf16            # or f32, or int8 --calibration_file=texts.txt

The export folder and its precision are described in `openvino_ir` (the names, compiling, reading a folder back).
Here: shaping the Keras graph for OpenVINO (`to_openvino_model`) and writing the folder (`export_openvino`, from the
`export_spec.ExportSpec` that the SavedModel export shares). Weights are stored as float32 for every precision: fp16
storage halves the file but rounds the f32 weights (an f32 export must be the model itself) and the bf16 path gains
nothing at run time.

OpenVINO and NNCF are an optional extra (`requirements-openvino.txt`); nothing here imports them before a function
that needs them runs.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
from typing import Dict, Optional, Sequence

import keras
import tensorflow as tf

from official_albert import custom_gradients
from official_albert import directory_io
from official_albert import file_io
from official_albert import model_directory as md
from official_albert.checkpoints.sentence_transformers_folder import settings_record
from official_albert.config import ATTENTION_TYPES
from official_albert.config import check_attention_type
from official_albert.modeling.early_exit import DEFAULT_EXIT_THRESHOLD
from official_albert.modeling.early_exit import EXIT_HEAD_TYPES
from official_albert.modeling.layers.attention import AlbertAttention
from official_albert.serving import openvino_ir as ir
from official_albert.serving import openvino_quantize
from official_albert.serving.export_folder import check_int8_files
from official_albert.serving.export_spec import check_precision
from official_albert.serving.export_spec import ExportSpec
from official_albert.serving.export_spec import ids_function
from official_albert.serving.export_spec import load_for_export
from official_albert.serving.export_spec import LoadedExport

# The folder's names and the runtime's functions, importable from the exporter too.
from official_albert.serving.openvino_ir import BIN_NAME  # noqa: F401
from official_albert.serving.openvino_ir import compile_openvino  # noqa: F401
from official_albert.serving.openvino_ir import ID_NAMES  # noqa: F401
from official_albert.serving.openvino_ir import input_names  # noqa: F401
from official_albert.serving.openvino_ir import LABELS_FILE  # noqa: F401
from official_albert.serving.openvino_ir import MODEL_CONFIG  # noqa: F401
from official_albert.serving.openvino_ir import OUTPUT_NAMES  # noqa: F401
from official_albert.serving.openvino_ir import read_export  # noqa: F401
from official_albert.serving.openvino_ir import require_nncf  # noqa: F401
from official_albert.serving.openvino_ir import require_openvino  # noqa: F401
from official_albert.serving.openvino_ir import run_compiled  # noqa: F401
from official_albert.serving.openvino_ir import SERVING_CONFIG  # noqa: F401
from official_albert.serving.openvino_ir import SPM_NAME  # noqa: F401
from official_albert.serving.openvino_ir import XML_NAME  # noqa: F401
from official_albert.serving.openvino_quantize import quantize_int8  # noqa: F401
from official_albert.serving.pipeline_inputs import warn_patience

logger = logging.getLogger(__name__)


# ------------------------------------------------------------------------------------------ graph shaping
def _mvn_layer_norm(layer):
  """LayerNorm written as OpenVINO's MVN pattern: (x − mean) / sqrt(mean((x − mean)²) + ε) · γ + β.

  Keras' TF LayerNorm lowers to moments + a batch-norm rewrite that OpenVINO leaves as seven small element-wise ops
  per LayerNorm; this form is fused into one MVN node (the form of HF's ONNX graph). Same numbers within float32
  round-off.
  """

  def call(inputs, **unused_options):  # e.g. `closed_form=`: a training-time choice, moot in an inference graph
    x = tf.cast(inputs, tf.float32)
    axes = tf.constant([-1])  # a 1-D axes tensor: MVN takes no scalar axes
    centered = x - tf.reduce_mean(x, axis=axes, keepdims=True)
    variance = tf.reduce_mean(tf.pow(centered, 2.0), axis=axes, keepdims=True)
    y = centered / tf.sqrt(variance + layer.epsilon)
    return y * tf.cast(layer.gamma, tf.float32) + tf.cast(layer.beta, tf.float32)

  return call


@contextlib.contextmanager
def shaped_for_openvino(model, layer_norm: str, fused_qkv: Optional[bool]):
  """While tracing: LayerNorms in MVN form and Q/K/V as one or three matmuls; the model is restored afterwards."""

  patched, qkv = [], []
  try:
    for layer in model._flatten_layers(include_self=False, recursive=True):  # pylint: disable=protected-access
      if layer_norm == "mvn" and isinstance(layer, keras.layers.LayerNormalization):
        if layer.center and layer.scale and tuple(layer.axis) in ((-1,), (len(layer.gamma.shape) - 1,)):
          layer.call = _mvn_layer_norm(layer)
          patched.append(layer)
      if fused_qkv is not None and isinstance(layer, AlbertAttention):
        qkv.append((layer, layer.fused_qkv))
        layer.fused_qkv = fused_qkv
    yield
  finally:
    for layer in patched:
      del layer.call
    for layer, value in qkv:
      layer.fused_qkv = value


def to_openvino_model(model, head: str, num_choices: Optional[int] = None, layer_norm: str = "mvn",
                      fused_qkv: Optional[bool] = False, outputs: Optional[Sequence[str]] = None,
                      patience: int = 0, depth: Optional[int] = None, exit_threshold: float = DEFAULT_EXIT_THRESHOLD,
                      multi_label_threshold: Optional[float] = None):
  """Converts one of our Keras models (weights loaded) to an in-memory float32 `openvino.Model`.

  Args:
    model: an `AlbertEncoder`, `AlbertPretrainer` or task model.
    head: one of `MODEL_TYPES`, matching `model`.
    num_choices: multiple choice only (default: the model's `num_choices`).
    layer_norm: "mvn" (LayerNorm in the form OpenVINO fuses into one MVN op; default) or "keras" (as traced).
    fused_qkv: Q/K/V as one [H,3H] matmul (True), three (False; default: OpenVINO's CPU plugin runs the three
      FullyConnected nodes without the Split the fused form needs) or as the model is (None).
    outputs: the output names (default `OUTPUT_NAMES[head]`; `export_outputs` adds an embedder's
      `sentence_embedding`).
    patience, depth, exit_threshold, multi_label_threshold: classifier / multiple choice (`ExportSpec`). The early
      exit converts as it is traced: one If per iteration (the iterations after the last row left are skipped),
      NonZero, Gather and ScatterNDUpdate for the compaction. A patience that can never end a row early
      (`early_exit.unreachable_patience`) is converted, with a warning.

  Returns:
    The model with `from_ids`'s input names (dynamic batch, sequence and [MASK] axes) and output names;
    `official_albert` runtime info names the head.
  """
  ir.check_head(head)
  if layer_norm not in ("mvn", "keras"):
    raise ValueError(f"layer_norm={layer_norm!r} is not one of ('mvn', 'keras').")
  ov = ir.require_openvino()
  # As the SavedModel export: a patience no row can reach converts and serves every row at full depth, so say so.
  warn_patience(patience, model.config.num_hidden_layers, "export")
  from_ids, names, wanted = ids_function(model, head, num_choices, outputs, patience=patience, depth=depth,
                                         exit_threshold=exit_threshold, multi_label_threshold=multi_label_threshold)

  with shaped_for_openvino(model, layer_norm, fused_qkv):
    concrete = from_ids.get_concrete_function()
  ov_model = ov.convert_model(concrete)
  custom_gradients.release(concrete.graph)  # (converted: the trace is dropped with its custom gradients)
  _name_ports(ov_model, names, wanted)
  ov_model.set_rt_info(head, ["official_albert", "head"])
  ov_model.set_rt_info(",".join(wanted), ["official_albert", "outputs"])
  return ov_model


def _name_ports(ov_model, names: Sequence[str], wanted: Sequence[str]) -> None:
  """Leaves exactly the contract's names on the IR's inputs and outputs (the converter adds TF tensor names)."""
  got_inputs = [p.get_any_name() for p in ov_model.inputs]
  if sorted(got_inputs) != sorted(names):
    raise RuntimeError(f"The converted model has inputs {got_inputs}, expected {list(names)}.")
  for port in ov_model.outputs:
    match = [n for n in port.get_names() if n in wanted]
    if len(match) != 1:
      raise RuntimeError(f"Cannot tell which output {sorted(port.get_names())} is (expected one of {list(wanted)}).")
    port.get_tensor().set_names({match[0]})


# -------------------------------------------------------------------------------------------------- export
def export_outputs(head: str, loaded: LoadedExport) -> tuple:
  """The outputs an export of `loaded` gives: the head's raw ones, + `sentence_embedding` for an encoder."""
  return tuple(ir.OUTPUT_NAMES[head]) + (("sentence_embedding",) if loaded.embedding is not None else ())


def serving_config(spec: ExportSpec, loaded: LoadedExport, format_tag: str, precision: str, gate,
                   **extra) -> Dict[str, object]:
  """serving_config.json of an export folder (OpenVINO's, and LiteRT's with its own format tag)."""
  config = {"format": format_tag, "head": spec.head, "precision": precision,
            "seq_length": int(spec.seq_length), **spec.tokenizer_options(),
            "tokenizer_mode": spec.tokenizer_mode, "text_pair": bool(spec.text_pair),
            "inputs": ir.input_names(spec.head), "outputs": list(export_outputs(spec.head, loaded)),
            "max_predictions_per_seq": int(spec.max_predictions_per_seq), **extra}
  if spec.head == "multiple_choice":  # (+ the question+option cap the pipelines pack with: the run's, not a default)
    config.update(num_choices=int(spec.num_choices), max_qa_length=spec.qa_length(int(spec.seq_length)))
  config.update(spec.qa_settings())  # (a SQuAD run's windows and post-processing)
  if loaded.embedding is not None:
    config["embedding"] = settings_record(loaded.embedding, spec.seq_length)
    if getattr(loaded.model, "dim", None) is not None:  # (the Matryoshka width the graph cuts to)
      config["embedding"]["dim"] = int(loaded.model.dim)
  if spec.head in EXIT_HEAD_TYPES:
    config.update(patience=int(spec.patience), depth=spec.depth)
    if spec.patience and spec.head == "classifier":  # (a regression head's exit rule; `exit_runner` checks it)
      config["exit_threshold"] = float(spec.exit_threshold)
  if gate is not None:
    config["int8_gate"] = gate
  return config


def supports(attention_type: str, precision: str = "bf16") -> bool:
  """Whether the IR computes `attention_type`: it is traced from our Keras layers, so every type (its numbers within
  the harness's tolerance: tests/official_albert/serving/export_harness.py), except block-sparse at int8 (NNCF finds
  no calibration input in the block-sparse graph and fails inside its calibration)."""
  return check_attention_type(attention_type) in ATTENTION_TYPES and not (
      precision == "int8" and attention_type == "block_sparse")


def export_openvino(model_dir: str, export_dir: str, head: str = "pretrainer", precision: str = "bf16", *,
                    calibration_file: Optional[str] = None, max_accuracy_drop: float = 0.01,
                    heldout_file: Optional[str] = None, layer_norm: str = "mvn", fused_qkv: Optional[bool] = False,
                    **options) -> str:
  """Loads `model_dir` (native, HF or original release) and writes an OpenVINO export folder (`openvino_ir`).

  Args:
    model_dir, export_dir, head, **options: the `ExportSpec` the SavedModel export shares (seq_length,
      spm_model_file, num_labels, num_choices, do_lower_case, keep_accents, remove_space, tokenizer_mode,
      max_predictions_per_seq, text_pair, overwrite).
    precision: "bf16" (default), "f32" or "int8" (needs `calibration_file`; see `openvino_quantize`).
    calibration_file: int8: one text per line (a tab separates text and text_b; multiple choice: context and the
      choices), a few hundred lines. Every fifth line is held out to score the int8 model against f32.
    max_accuracy_drop: int8: refuse when the gate's metric drops by more than this.
    heldout_file: int8: held-out lines for the gate instead of every fifth calibration line. Classifier /
      regression / multiple choice: labelled, `label<TAB>text[<TAB>text_b...]`, and the gate scores accuracy
      (Pearson r for regression) against the labels; other heads: unlabelled lines as in `calibration_file`.
    layer_norm, fused_qkv: graph shaping (`to_openvino_model`).

  Returns:
    `export_dir`.
  """
  spec = ExportSpec(model_dir, export_dir, head, **options)
  check_precision("openvino", precision)
  check_int8_files("openvino", precision, calibration_file, heldout_file)
  spec.check()
  ov = ir.require_openvino()
  if precision == "int8":
    ir.require_nncf()
  loaded = load_for_export(spec)
  spec = loaded.at_length(spec)  # (seq_length: the flag's, else 128 cut to the model's positions)
  if not supports(loaded.model.config.attention_type, precision):
    raise ValueError(f"{model_dir}: --precision=int8 of attention_type='block_sparse' is not supported (NNCF cannot "
                     "calibrate the block-sparse graph); export it with --precision=f32 or bf16, or convert the "
                     "checkpoint with `convert_checkpoint --attention_type=chunked` first (the same weights).")
  ov_model = to_openvino_model(loaded.model, head, num_choices=spec.num_choices, layer_norm=layer_norm,
                               fused_qkv=fused_qkv, outputs=export_outputs(head, loaded), patience=spec.patience,
                               depth=spec.depth, exit_threshold=spec.exit_threshold,
                               multi_label_threshold=loaded.threshold if loaded.multi_label else None)
  gate = None
  if precision == "int8":
    if loaded.tokenizer is None:
      raise ValueError(f"{model_dir}: --precision=int8 tokenizes --calibration_file and needs {md.SPM_FILE} "
                       "(pass --spm_model_file).")
    ov_model, gate = openvino_quantize.quantize_with_gate(
        ov_model, head, loaded.tokenizer, calibration_file, seq_length=spec.seq_length,
        max_accuracy_drop=max_accuracy_drop, num_choices=spec.num_choices if head == "multiple_choice" else None,
        heldout_file=heldout_file, labels=openvino_quantize.gate_labels(loaded),
        max_predictions_per_seq=spec.max_predictions_per_seq)
  ov_model.set_rt_info(precision, ["official_albert", "precision"])
  ov_model.set_rt_info("f32" if precision == "f32" else "bf16", ["runtime_options", "INFERENCE_PRECISION_HINT"])
  save_ir = lambda tmp: ov.save_model(ov_model, os.path.join(tmp, ir.XML_NAME), compress_to_fp16=False)
  write_folder(spec, loaded, save_ir, serving_config(spec, loaded, ir.FORMAT_TAG, precision, gate, weights="f32"))
  return export_dir


def write_folder(spec: ExportSpec, loaded: LoadedExport, save_model, config: Dict[str, object]) -> None:
  """The folder under a temporary name beside `export_dir`, renamed into place when complete: the model
  (`save_model(tmp_dir)`), spiece.model, model_config.json, labels.json and serving_config.json (`config`). A killed
  export's `<export_dir>.tmp-<pid>-...-export` (its process gone) is removed first; each call writes its own
  temporary (`file_io.export_temporary`), so two exports to one folder from threads of a process both finish."""
  export_dir = os.fspath(spec.export_dir).rstrip("/")
  os.makedirs(os.path.dirname(os.path.abspath(export_dir)), exist_ok=True)
  tmp = file_io.export_temporary(export_dir)
  file_io.remove_dead_temporaries(export_dir)  # a killed export's <export_dir>.tmp-<pid>-...-export (a model)
  os.makedirs(tmp)
  try:
    save_model(tmp)
    if loaded.spm_model_file:
      file_io.atomic_copy(loaded.spm_model_file, md.path(tmp, md.SPM_FILE))
    # The native form (with its marker): to_dict() alone read back as an original-release config, whose "gelu"
    # is the tanh form, so an HF model's exact-erf "gelu" came back as "gelu_new".
    loaded.model.config.to_json_file(os.path.join(tmp, ir.MODEL_CONFIG))
    if loaded.export_label_file() is not None:  # names (+ multi-label and threshold): classify reads them
      md.write_label_file(tmp, loaded.export_label_file())
    trained = md.read_embedding_training_file(spec.model_dir) if spec.head == "encoder" else None
    if trained:  # the trained Matryoshka widths: embed(folder, dim=K) and the server's `dimensions` check them
      md.write_embedding_training_file(tmp, trained)
    file_io.atomic_write_json(os.path.join(tmp, ir.SERVING_CONFIG), config)
    directory_io.replace_directory(tmp, export_dir)
  except BaseException:
    shutil.rmtree(tmp, ignore_errors=True)
    raise
