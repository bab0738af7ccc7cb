"""OpenVINO export: every head as an OpenVINO IR with `from_ids`'s inputs and outputs, in bf16, f32 or int8.

The TF SavedModel (`serving/export.py`) stays the primary export (TF Serving). This is the fast CPU path beside it:

  python -m official_albert.export_saved_model --model_dir=DIR --export_dir=OUT --head=classifier \
      --format=openvino --precision=bf16            # or f32, or int8 --calibration_file=texts.txt

The export folder (see `export_openvino`):

  openvino_model.xml / .bin   the IR: inputs `input_word_ids`, `input_mask`, `input_type_ids` int32 [B, S]
                              (multiple choice [B, C, S]; + pretrainer `masked_lm_positions` [B, P]; squad_v2
                              `p_mask` [B, S]), dynamic B, S and P; outputs named as `from_ids`'s.
  spiece.model                the SentencePiece model (text in through `FullTokenizer`, identical ids).
  serving_config.json         head, precision, tokenizer settings (do_lower_case, tokenizer_mode, seq_length), the
                              input/output names, the weight storage, and for int8 the gate's numbers.
  model_config.json           the AlbertConfig.
  labels.json                 label names, when the model directory has them (and for a multi-label classifier
                              `multi_label` and its `multi_label_threshold`: its outputs are per-label sigmoids).

Precision is OpenVINO's inference precision (`INFERENCE_PRECISION_HINT`): it is a compile-time setting, so the IR
stays float32 (f32 / bf16) and the precision is stored twice: in the IR's runtime info (`runtime_options`, which
OpenVINO applies when the IR is compiled as it is, e.g. by OpenVINO Model Server) and in serving_config.json (read by
`compile_openvino` and the pipelines). Weights are stored as float32 for every precision: fp16 storage halves the
file but rounds the f32 weights (an f32 export must be the model itself) and the bf16 path gains nothing at run time.

OpenVINO and NNCF are an optional extra (`requirements-openvino.txt`); nothing here imports them before a function
that needs them runs.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
from typing import Dict, List, Optional, Sequence

import numpy as np

from official_albert import file_io
from official_albert import model_directory as md
from official_albert.checkpoints.formats import MODEL_TYPES

logger = logging.getLogger(__name__)

INSTALL_HINT = ("pip install -r requirements-openvino.txt (in a checkout) or pip install 'official-albert[openvino]' "
                "(the `openvino` extra)")
XML_NAME = "openvino_model.xml"
BIN_NAME = "openvino_model.bin"
SERVING_CONFIG = "serving_config.json"
MODEL_CONFIG = "model_config.json"
LABELS_FILE = md.LABELS_FILE
SPM_NAME = md.SPM_FILE
FORMAT_TAG = "official_albert.openvino/1"
PRECISIONS = ("f32", "bf16", "int8")
HINTS = ("latency", "throughput")
ID_NAMES = ("input_word_ids", "input_mask", "input_type_ids")

# The raw outputs of each head, as `from_ids` of the SavedModel returns them.
OUTPUT_NAMES = {
    "encoder": ("sequence_output", "pooled_output"),
    "pretrainer": ("mlm_logits", "sop_logits", "sequence_output", "pooled_output"),
    "classifier": ("logits", "pooled_output"),
    "token_classifier": ("logits",),
    "span": ("start_logits", "end_logits"),
    "squad_v2": ("start_log_probs", "start_top_log_probs", "start_top_index", "end_top_log_probs", "end_top_index",
                 "cls_logits"),
    "multiple_choice": ("logits",),
}


def require_openvino():
  """The `openvino` module, or an ImportError that names the extra to install."""
  try:
    import openvino  # pylint: disable=g-import-not-at-top
  except ImportError as e:
    raise ImportError(f"OpenVINO is not installed; the OpenVINO export and runtime need it: {INSTALL_HINT}. "
                      f"({e})") from e
  return openvino


def require_nncf():
  """The `nncf` module (int8 post-training quantization), or an ImportError that names the extra to install."""
  require_openvino()
  try:
    import nncf  # pylint: disable=g-import-not-at-top
  except ImportError as e:
    raise ImportError(f"NNCF is not installed; --precision=int8 needs it: {INSTALL_HINT}. ({e})") from e
  return nncf


def input_names(head: str) -> List[str]:
  """The IR's input names for `head` (those of the SavedModel's `from_ids`)."""
  names = list(ID_NAMES)
  if head == "pretrainer":
    names.append("masked_lm_positions")
  if head == "squad_v2":
    names.append("p_mask")
  return names


def _check_head(head: str) -> None:
  if head not in MODEL_TYPES:
    raise ValueError(f"head={head!r} is not one of {MODEL_TYPES}.")


# ------------------------------------------------------------------------------------------ graph shaping
def _mvn_layer_norm(layer):
  """LayerNorm written as OpenVINO's MVN pattern: (x − mean) / sqrt(mean((x − mean)²) + ε) · γ + β.

  Keras' TF LayerNorm lowers to moments + a batch-norm rewrite that OpenVINO leaves as seven small element-wise ops
  per LayerNorm; this form is fused into one MVN node (the form of HF's ONNX graph). Same numbers within float32
  round-off.
  """
  import tensorflow as tf  # pylint: disable=g-import-not-at-top

  def call(inputs, **unused_options):  # e.g. `closed_form=`: a training-time choice, moot in an inference graph
    x = tf.cast(inputs, tf.float32)
    axes = tf.constant([-1])  # a 1-D axes tensor: MVN takes no scalar axes
    centered = x - tf.reduce_mean(x, axis=axes, keepdims=True)
    variance = tf.reduce_mean(tf.pow(centered, 2.0), axis=axes, keepdims=True)
    y = centered / tf.sqrt(variance + layer.epsilon)
    return y * tf.cast(layer.gamma, tf.float32) + tf.cast(layer.beta, tf.float32)

  return call


@contextlib.contextmanager
def _shaped_for_openvino(model, layer_norm: str, fused_qkv: Optional[bool]):
  """While tracing: LayerNorms in MVN form and Q/K/V as one or three matmuls; the model is restored afterwards."""
  import keras  # pylint: disable=g-import-not-at-top
  from official_albert.modeling.layers.attention import AlbertAttention  # pylint: disable=g-import-not-at-top
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
                      fused_qkv: Optional[bool] = False):
  """Converts one of our Keras models (weights loaded) to an in-memory float32 `openvino.Model`.

  Args:
    model: an `AlbertEncoder`, `AlbertPretrainer` or task model.
    head: one of `MODEL_TYPES`, matching `model`.
    num_choices: multiple choice only (default: the model's `num_choices`).
    layer_norm: "mvn" (LayerNorm in the form OpenVINO fuses into one MVN op; default) or "keras" (as traced).
    fused_qkv: Q/K/V as one [H,3H] matmul (True), three (False; default: OpenVINO's CPU plugin runs the three
      FullyConnected nodes without the Split the fused form needs) or as the model is (None).

  Returns:
    The model with `from_ids`'s input names (dynamic batch, sequence and [MASK] axes) and output names
    (`OUTPUT_NAMES[head]`); `official_albert` runtime info names the head.
  """
  _check_head(head)
  if layer_norm not in ("mvn", "keras"):
    raise ValueError(f"layer_norm={layer_norm!r} is not one of ('mvn', 'keras').")
  ov = require_openvino()
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  if head == "multiple_choice":
    num_choices = num_choices or getattr(model, "num_choices", None)
    if not num_choices:
      raise ValueError("head='multiple_choice' needs num_choices (the model's, or pass num_choices=).")
  shape = [None, int(num_choices), None] if head == "multiple_choice" else [None, None]
  names = input_names(head)
  specs = [tf.TensorSpec(shape if n in ID_NAMES else [None, None], tf.int32, name=n) for n in names]
  wanted = OUTPUT_NAMES[head]

  @tf.function(input_signature=specs, autograph=False)
  def from_ids(*args):
    out = model(dict(zip(names, args)), training=False)
    missing = [k for k in wanted if k not in out]
    if missing:
      raise ValueError(f"head={head!r}: the model returned {sorted(out)} without {missing}; is it a {head} model?")
    return {k: out[k] for k in wanted}

  with _shaped_for_openvino(model, layer_norm, fused_qkv):
    concrete = from_ids.get_concrete_function()
  ov_model = ov.convert_model(concrete)
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


# ------------------------------------------------------------------------------------------------- compile
def _read_precision(ov_model) -> Optional[str]:
  for path in (["official_albert", "precision"],):
    if ov_model.has_rt_info(path):
      return str(ov_model.get_rt_info(path))
  return None


def compile_openvino(ov_model_or_xml_path, precision: Optional[str] = "bf16", num_threads: Optional[int] = None,
                     hint: str = "latency", device: str = "CPU"):
  """Compiles an IR (an `openvino.Model` or the path of an .xml / of an export folder) for inference.

  Args:
    ov_model_or_xml_path: the model, its .xml, or an export folder.
    precision: "f32", "bf16" (OpenVINO's bf16 inference precision; a CPU without bf16 support runs f32 and a
      warning says so) or "int8" (a quantized IR; the layers NNCF left in float run in bf16 where the CPU has it).
      None: the precision the export stored in the IR.
    num_threads: inference threads (default: OpenVINO's, all cores).
    hint: "latency" (one request at a time, the lowest time per call) or "throughput" (streams for parallel
      requests).
  """
  ov = require_openvino()
  if hint not in HINTS:
    raise ValueError(f"hint={hint!r} is not one of {HINTS}.")
  core = ov.Core()
  model = ov_model_or_xml_path
  if isinstance(model, (str, os.PathLike)):
    path = os.fspath(model)
    if os.path.isdir(path):
      path = os.path.join(path, XML_NAME)
    if not os.path.exists(path):
      raise FileNotFoundError(f"{path}: no OpenVINO IR here (export one with --format=openvino).")
    model = core.read_model(path)
  if precision is None:
    precision = _read_precision(model) or "f32"
  if precision not in PRECISIONS:
    raise ValueError(f"precision={precision!r} is not one of {PRECISIONS}.")
  config = {"PERFORMANCE_HINT": hint.upper()}
  if num_threads:
    config["INFERENCE_NUM_THREADS"] = int(num_threads)
  if precision == "f32":
    config["INFERENCE_PRECISION_HINT"] = "f32"
  elif device == "CPU" and "BF16" not in core.get_property("CPU", "OPTIMIZATION_CAPABILITIES"):
    logger.warning("This CPU has no bf16 support: precision=%s runs its float layers in f32.", precision)
    config["INFERENCE_PRECISION_HINT"] = "f32"
  else:
    config["INFERENCE_PRECISION_HINT"] = "bf16"
  return core.compile_model(model, device, config)


def run_compiled(compiled, inputs: Dict[str, np.ndarray], request=None) -> Dict[str, np.ndarray]:
  """Runs `compiled` on numpy inputs (by name); returns {output name: numpy array} (copies)."""
  request = request or compiled.create_infer_request()
  request.infer({k: np.ascontiguousarray(v, dtype=np.int32) for k, v in inputs.items()})
  return {port.get_any_name(): np.array(request.get_tensor(port).data) for port in compiled.outputs}


# -------------------------------------------------------------------------------------------------- export
def _serving_config(head, precision, seq_length, do_lower_case, tokenizer_mode, num_choices,
                    max_predictions_per_seq, text_pair, gate) -> Dict[str, object]:
  config = {"format": FORMAT_TAG, "head": head, "precision": precision, "weights": "f32",
            "seq_length": int(seq_length), "do_lower_case": bool(do_lower_case), "tokenizer_mode": tokenizer_mode,
            "text_pair": bool(text_pair), "inputs": input_names(head), "outputs": list(OUTPUT_NAMES[head]),
            "max_predictions_per_seq": int(max_predictions_per_seq)}
  if head == "multiple_choice":
    config["num_choices"] = int(num_choices)
  if gate is not None:
    config["int8_gate"] = gate
  return config


def export_openvino(model_dir: str, export_dir: str, head: str = "pretrainer", precision: str = "bf16",
                    seq_length: int = 128, spm_model_file: Optional[str] = None, calibration_file: Optional[str] = None,
                    max_accuracy_drop: float = 0.01, overwrite: bool = False, num_labels: Optional[int] = None,
                    num_choices: int = 4, do_lower_case: bool = True, tokenizer_mode: str = "hf",
                    max_predictions_per_seq: int = 20, text_pair: bool = False, heldout_file: Optional[str] = None,
                    layer_norm: str = "mvn", fused_qkv: Optional[bool] = False) -> str:
  """Loads `model_dir` (native, HF or original release) and writes an OpenVINO export folder (module docstring).

  Args:
    model_dir, head, num_labels, num_choices: as the SavedModel export (`load_model`).
    export_dir: the folder to write; written beside it under a temporary name, then renamed into place.
    precision: "bf16" (default), "f32" or "int8" (needs `calibration_file`; see `openvino_quantize`).
    seq_length: the packed length text is cut to (stored for text in).
    spm_model_file: default `model_dir/spiece.model`; without one the folder takes ids only.
    calibration_file: int8: one text per line (a tab separates text and text_b; multiple choice: context and the
      choices), a few hundred lines. Every fifth line is held out to score the int8 model against f32.
    max_accuracy_drop: int8: refuse when the gate's metric drops by more than this.
    heldout_file: int8: held-out lines for the gate instead of every fifth calibration line. Classifier /
      regression / multiple choice: labelled, `label<TAB>text[<TAB>text_b...]`, and the gate scores accuracy
      (Pearson r for regression) against the labels; other heads: unlabelled lines as in `calibration_file`.
    do_lower_case, tokenizer_mode, max_predictions_per_seq, text_pair: text-in settings (as the SavedModel's).
    layer_norm, fused_qkv: graph shaping (`to_openvino_model`).

  Returns:
    `export_dir`.
  """
  _check_head(head)
  if precision not in PRECISIONS:
    raise ValueError(f"precision={precision!r} is not one of {PRECISIONS}.")
  if precision == "int8" and not calibration_file:
    raise ValueError("--precision=int8 needs --calibration_file (one text per line, a few hundred lines of the "
                     "task's kind of text): NNCF calibrates the int8 ranges on it and the accuracy gate scores "
                     "held-out lines of it.")
  if file_io.exists(export_dir) and not overwrite:
    raise FileExistsError(f"{export_dir} exists; pass overwrite=True (--overwrite) to replace it.")
  ov = require_openvino()
  if precision == "int8":
    require_nncf()
  from official_albert.checkpoints.loading import load_model  # pylint: disable=g-import-not-at-top
  from official_albert.serving import openvino_quantize  # pylint: disable=g-import-not-at-top
  from official_albert.tokenization import FullTokenizer  # pylint: disable=g-import-not-at-top

  directory = md.ModelDirectory(model_dir)
  model, summary = load_model(directory, head, num_labels=num_labels, num_choices=num_choices)
  logger.info("Loaded %s: %s", model_dir, {k: summary[k] for k in ("loaded", "parameters")})
  config = model.config
  if seq_length > config.max_position_embeddings:
    raise ValueError(f"seq_length={seq_length} exceeds the model's max_position_embeddings "
                     f"({config.max_position_embeddings}).")
  spm_model_file = spm_model_file or directory.spm_model
  tokenizer = None
  if spm_model_file:
    tokenizer = FullTokenizer(spm_model_file, do_lower_case=do_lower_case, mode=tokenizer_mode)
    if tokenizer.vocab_size != config.vocab_size:
      raise ValueError(f"{spm_model_file} has {tokenizer.vocab_size} pieces but the model's vocab_size is "
                       f"{config.vocab_size}.")
  else:
    logger.warning("%s has no spiece.model: the export folder takes token ids only (no text in).", model_dir)
  saved = directory.label_file if head in ("classifier", "token_classifier") else None
  labels = _labels_of(model_dir, model, head, saved)
  multi_label = (head == "classifier" and bool(saved and saved.multi_label)
                 and int(model.classifier.output_weights.shape[0]) > 1)
  ov_model = to_openvino_model(model, head, num_choices=num_choices, layer_norm=layer_norm, fused_qkv=fused_qkv)
  gate = None
  if precision == "int8":
    if tokenizer is None:
      raise ValueError(f"{model_dir}: --precision=int8 tokenizes --calibration_file and needs spiece.model "
                       "(pass --spm_model_file).")
    ov_model, gate = openvino_quantize.quantize_with_gate(
        ov_model, head, tokenizer, calibration_file, seq_length=seq_length, max_accuracy_drop=max_accuracy_drop,
        num_choices=num_choices if head == "multiple_choice" else None, heldout_file=heldout_file, labels=labels,
        max_predictions_per_seq=max_predictions_per_seq)
  ov_model.set_rt_info(precision, ["official_albert", "precision"])
  ov_model.set_rt_info("f32" if precision == "f32" else "bf16", ["runtime_options", "INFERENCE_PRECISION_HINT"])

  export_dir = os.fspath(export_dir).rstrip("/")
  parent = os.path.dirname(os.path.abspath(export_dir))
  os.makedirs(parent, exist_ok=True)
  tmp = f"{export_dir}.tmp-{os.getpid()}"
  if os.path.exists(tmp):
    shutil.rmtree(tmp)
  os.makedirs(tmp)
  try:
    ov.save_model(ov_model, os.path.join(tmp, XML_NAME), compress_to_fp16=False)
    if spm_model_file:
      file_io.atomic_copy(spm_model_file, os.path.join(tmp, SPM_NAME))
    file_io.atomic_write_json(os.path.join(tmp, MODEL_CONFIG), config.to_dict())
    if multi_label:  # the names, that the outputs are per-label sigmoids, and the threshold (classify reads them)
      md.write_label_file(tmp, md.LabelFile(saved.labels, True, saved.threshold))
    elif labels is not None:
      md.write_label_file(tmp, md.LabelFile(labels))
    file_io.atomic_write_json(os.path.join(tmp, SERVING_CONFIG), _serving_config(
        head, precision, seq_length, do_lower_case, tokenizer_mode, num_choices, max_predictions_per_seq, text_pair,
        gate))
    file_io.replace_directory(tmp, export_dir)
  except BaseException:
    shutil.rmtree(tmp, ignore_errors=True)
    raise
  return export_dir


def _labels_of(model_dir: str, model, head: str, saved) -> Optional[List[str]]:
  """Label names for the folder: labels.json (`saved`, as the text tasks write it), else HF `id2label` /
  labels.txt; regression and multi-label: none (their argmax is no answer)."""
  if head not in ("classifier", "token_classifier"):
    return None
  outputs = int(model.classifier.output_weights.shape[0])
  if head == "classifier" and outputs == 1:
    return None
  labels = saved.single_label_names if saved else None
  if labels is None:
    names = md.fallback_label_names(model_dir, outputs)
    labels = None if names == [f"LABEL_{i}" for i in range(outputs)] else names
  if labels is not None and len(labels) != outputs:
    raise ValueError(f"{model_dir}: {len(labels)} labels but the {head} has {outputs} outputs.")
  return labels


def read_export(export_dir: str) -> Dict[str, object]:
  """serving_config.json of an export folder, checked; raises naming the folder when it is not one."""
  path = os.path.join(export_dir, SERVING_CONFIG)
  if not os.path.exists(os.path.join(export_dir, XML_NAME)):
    raise FileNotFoundError(f"{export_dir}: no {XML_NAME} (not an OpenVINO export folder; write one with "
                            "`python -m official_albert.export_saved_model --format=openvino`).")
  if not os.path.exists(path):
    raise FileNotFoundError(f"{export_dir}: {XML_NAME} without {SERVING_CONFIG}; re-export the folder with "
                            "`--format=openvino` (text in needs the tokenizer settings).")
  with open(path, encoding="utf-8") as f:
    try:
      data = json.load(f)
    except json.JSONDecodeError as e:
      raise ValueError(f"{path}: not valid JSON ({e}); re-export the folder.") from e
  if data.get("format") != FORMAT_TAG:
    raise ValueError(f"{path}: format {data.get('format')!r}, expected {FORMAT_TAG!r}; re-export the folder.")
  return data


def is_openvino_export(path) -> bool:
  """True for a folder holding openvino_model.xml (an OpenVINO export of this module)."""
  return isinstance(path, (str, os.PathLike)) and os.path.isfile(os.path.join(os.fspath(path), XML_NAME))


def quantize_int8(ov_model, calibration_inputs: Sequence[Dict[str, np.ndarray]], **options):
  """NNCF post-training int8 quantization of an IR on calibration batches (see `openvino_quantize.quantize_int8`)."""
  from official_albert.serving import openvino_quantize  # pylint: disable=g-import-not-at-top
  return openvino_quantize.quantize_int8(ov_model, calibration_inputs, **options)
