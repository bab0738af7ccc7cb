"""A LiteRT export folder loaded for inference: the `ai-edge-litert` interpreter around its `model.tflite`.

  from official_albert.serving.litert_runtime import LiteRTExport
  export = LiteRTExport("/tmp/albert_sst2_litert")
  export(export.encode(["a gripping film"]))["logits"]     # numpy, the signature's output names

The folder's settings, tokenizer and labels are read by `export_folder.ExportFolder`; the pipelines take the folder
in place of a model directory. Needs only the `litert` extra (no TensorFlow).

One object may be called from several threads at once: the calls take turns on its one interpreter (a lock).
"""

from __future__ import annotations

import os
import threading
from typing import Dict, Optional

import numpy as np

from official_albert.serving.export_folder import ExportFolder
from official_albert.serving.export_folder import import_extra
from official_albert.serving.export_folder import install_hint
from official_albert.serving.export_folder import MODEL_FILES
from official_albert.serving.export_folder import read_serving_config

FORMAT_TAG = "official_albert.litert/1"
INSTALL_HINT = install_hint("litert")


def require_litert():
  """The `ai_edge_litert.interpreter` module, or an ImportError that names the extra to install."""
  return import_extra("ai_edge_litert.interpreter", "ai-edge-litert", "running a LiteRT export needs it", "litert")


class LiteRTExport(ExportFolder):
  """A folder written by `litert_export.export_litert`; call it with {input name: int array}.

  Args:
    export_dir: the folder.
    num_threads: interpreter threads (default: the interpreter's).

  Attributes: those of `ExportFolder` (head, settings, config, labels, tokenizer, num_labels / num_choices,
  input_names, output_names), and `interpreter`.

  Thread-safe by a lock: the interpreter is not (each call resizes its inputs to the batch's shape, reallocates and
  invokes without the GIL; two threads at once crashed the process with a segfault, or handed one the other's
  outputs), so resize, invoke and the output copy run under `self._lock`, one call at a time. For parallel calls,
  open one `LiteRTExport` per thread.
  """

  format_name = "litert"

  def __init__(self, export_dir: str, num_threads: Optional[int] = None):
    model_file = MODEL_FILES["litert"]
    super().__init__(export_dir, read_serving_config(os.fspath(export_dir), FORMAT_TAG, model_file))
    path = os.path.join(self.export_dir, model_file)
    try:
      self.interpreter = require_litert().Interpreter(model_path=path, num_threads=num_threads)
    except (ValueError, RuntimeError) as error:  # (the interpreter's messages name no file: "mmap of size 0")
      raise ValueError(f"{path}: LiteRT cannot read this model file (damaged or cut short: "
                       f"{str(error).strip().splitlines()[-1][:300]}); re-export the folder.") from error
    self._runner = self.interpreter.get_signature_runner()
    self._lock = threading.Lock()
    signature = self.interpreter.get_signature_list()["serving_default"]
    self.input_names, self.output_names = list(signature["inputs"]), list(signature["outputs"])
    if self.head == "classifier":
      self.num_labels = int(self._runner.get_output_details()["logits"]["shape_signature"][-1])

  def _run(self, feed: Dict[str, np.ndarray]) -> Dict[str, np.ndarray]:
    with self._lock:
      return {k: np.array(v) for k, v in self._runner(**feed).items()}
