"""The OpenVINO export folder and the IR's runtime: names, the optional extra, compiling and running an IR.

The folder that `openvino_export.export_openvino` writes (`OpenVINOExport` in `openvino_runtime` serves it):

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
`compile_openvino` and the pipelines).

This module is the bottom of the OpenVINO modules (the exporter, the int8 quantizer and the runtime import it, it
imports none of them) and imports neither TensorFlow nor, before a function needs it, OpenVINO: serving an IR needs
only the `openvino` extra (`requirements-openvino.txt`).
"""

from __future__ import annotations

import logging
import os
from typing import Dict, List, Optional

import numpy as np

from official_albert import model_directory as md
from official_albert.checkpoints.formats import MODEL_TYPES
from official_albert.serving.export_folder import import_extra
from official_albert.serving.export_folder import install_hint
from official_albert.serving.export_folder import MODEL_CONFIG  # noqa: F401 (re-exported)
from official_albert.serving.export_folder import MODEL_FILES  # noqa: F401 (re-exported)
from official_albert.serving.export_folder import read_serving_config  # noqa: F401 (re-exported)
from official_albert.serving.export_folder import SERVING_CONFIG  # noqa: F401 (re-exported)

logger = logging.getLogger(__name__)

INSTALL_HINT = install_hint("openvino")
XML_NAME = MODEL_FILES["openvino"]
BIN_NAME = "openvino_model.bin"
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
    "classifier": ("logits", "pooled_output", "exit_iteration"),
    "token_classifier": ("logits",),
    "span": ("start_logits", "end_logits"),
    "squad_v2": ("start_log_probs", "start_top_log_probs", "start_top_index", "end_top_log_probs", "end_top_index",
                 "cls_logits"),
    "multiple_choice": ("logits", "exit_iteration"),
}


def require_openvino():
  """The `openvino` module, or an ImportError that names the extra to install."""
  return import_extra("openvino", "OpenVINO", "the OpenVINO export and runtime need it", "openvino")


def require_nncf():
  """The `nncf` module (int8 post-training quantization), or an ImportError that names the extra to install."""
  require_openvino()
  return import_extra("nncf", "NNCF", "--precision=int8 needs it", "openvino")


def input_names(head: str) -> List[str]:
  """The IR's input names for `head` (those of the SavedModel's `from_ids`)."""
  names = list(ID_NAMES)
  if head == "pretrainer":
    names.append("masked_lm_positions")
  if head == "squad_v2":
    names.append("p_mask")
  return names


def check_head(head: str) -> None:
  if head not in MODEL_TYPES:
    raise ValueError(f"head={head!r} is not one of {MODEL_TYPES}.")


# ------------------------------------------------------------------------------------------------- compile
def read_precision(ov_model) -> Optional[str]:
  for path in (["official_albert", "precision"],):
    if ov_model.has_rt_info(path):
      return ov_model.get_rt_info(path).astype(str)  # (str() of the OVAny gave '<OVAny class>')
  return None


def compile_openvino(ov_model_or_xml_path, precision: Optional[str] = None, num_threads: Optional[int] = None,
                     hint: str = "latency", device: str = "CPU"):
  """Compiles an IR (an `openvino.Model` or the path of an .xml / of an export folder) for inference.

  Args:
    ov_model_or_xml_path: the model, its .xml, or an export folder.
    precision: "f32", "bf16" (OpenVINO's bf16 inference precision; a CPU without bf16 support runs f32 and a
      warning says so) or "int8" (a quantized IR; the layers NNCF left in float run in bf16 where the CPU has it).
      None (the default): the precision the export stored in the IR, f32 for an IR that stores none (an f32 export
      folder compiled at bf16 by default answered up to 4e-3 off its Keras model).
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
    try:
      model = core.read_model(path)
    except RuntimeError as error:  # (OpenVINO's messages name neither file: "Incorrect weights in bin file!")
      raise ValueError(f"{path}: OpenVINO cannot read this IR or its .bin (damaged or cut short: "
                       f"{str(error).strip().splitlines()[-1][:300]}); re-export the folder.") from error
  if precision is None:
    precision = read_precision(model) or "f32"
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
  """Runs `compiled` on numpy inputs (by name); returns {output name: numpy array} (copies).

  `request` (default: a new one) must not be used by another thread meanwhile: an infer request is not thread-safe,
  and its output tensors are overwritten by its next infer (`OpenVINOExport` keeps one per thread).
  """
  request = request or compiled.create_infer_request()
  request.infer({k: np.ascontiguousarray(v, dtype=np.int32) for k, v in inputs.items()})
  return {port.get_any_name(): np.array(request.get_tensor(port).data) for port in compiled.outputs}


# ---------------------------------------------------------------------------------------------- the folder
def read_export(export_dir: str) -> Dict[str, object]:
  """serving_config.json of an export folder, checked; raises naming the folder when it is not one."""
  return read_serving_config(export_dir, FORMAT_TAG, XML_NAME)
