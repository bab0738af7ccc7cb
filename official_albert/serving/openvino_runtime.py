"""An OpenVINO export folder loaded for inference: its tokenizer, its compiled IR, its settings.

  from official_albert.serving.openvino_runtime import OpenVINOExport
  export = OpenVINOExport("/tmp/albert_sst2_ov")            # precision from the folder (bf16 / f32 / int8)
  inputs = export.encode(["a gripping film"])               # FullTokenizer ids, packed like the pipelines
  export(inputs)["logits"]                                  # numpy, the IR's output names

The pipelines (`official_albert.pipelines`) take the folder in place of a model directory and call it like our Keras
models; text is tokenized in Python with `FullTokenizer` built from the folder's `spiece.model` and settings, so the
ids are FullTokenizer's by construction.

One object may be called from several threads at once (a web app's or a notebook's thread pool): each thread runs
its own infer request on the one compiled model, so the calls run in parallel and each gets its own outputs.
"""

from __future__ import annotations

import os
import statistics
import threading
import time
from typing import Dict, List, Optional, Sequence

import numpy as np

from official_albert.serving import openvino_ir as ir
from official_albert.serving.export_folder import ExportFolder


class OpenVINOExport(ExportFolder):
  """A folder written by `export_openvino`, compiled once; call it with {input name: int array}.

  Args:
    export_dir: the folder.
    precision: override the folder's precision ("f32" / "bf16" / "int8"; int8 needs an int8 folder).
    num_threads, hint: as `compile_openvino`.

  Attributes: those of `ExportFolder` (head, settings, config, labels, tokenizer, num_labels / num_choices,
  input_names, output_names), and `compiled`.

  Thread-safe: an OpenVINO infer request is not (a call while another thread's is computing raised "Infer Request is
  busy", and one landing between another's infer and its output copy handed that caller its answers), so each
  thread gets its own request (`threading.local`) and copies its outputs before returning.
  """

  format_name = "openvino"

  def __init__(self, export_dir: str, precision: Optional[str] = None, num_threads: Optional[int] = None,
               hint: str = "latency"):
    super().__init__(export_dir, ir.read_export(os.fspath(export_dir)))
    if precision == "int8" and self.settings["precision"] != "int8":
      raise ValueError(f"{self.export_dir} holds a {self.settings['precision']} IR; int8 needs a folder exported "
                       "with --precision=int8.")
    self.precision = precision or self.settings["precision"]
    self.compiled = ir.compile_openvino(os.path.join(self.export_dir, ir.XML_NAME), precision=self.precision,
                                         num_threads=num_threads, hint=hint)
    self.output_names = [port.get_any_name() for port in self.compiled.outputs]
    self.input_names = [port.get_any_name() for port in self.compiled.inputs]
    self._local = threading.local()  # .request: this thread's infer request
    if self.head in ("classifier", "token_classifier"):
      self.num_labels = self.compiled.output("logits").get_partial_shape()[-1].get_length()

  def _run(self, feed: Dict[str, np.ndarray]) -> Dict[str, np.ndarray]:
    request = getattr(self._local, "request", None)
    if request is None:
      request = self._local.request = self.compiled.create_infer_request()
    return ir.run_compiled(self.compiled, feed, request)


def dummy_inputs(export: OpenVINOExport, batch_size: int = 1,
                 seq_length: Optional[int] = None) -> Dict[str, np.ndarray]:
  """A full batch of the folder's input shape (every row `seq_length` pieces long, default the export's)."""
  seq = int(seq_length or export.settings["seq_length"])
  shape = (batch_size, export.num_choices, seq) if export.num_choices else (batch_size, seq)
  ids = np.full(shape, 5, np.int32)  # an ordinary piece: the time does not depend on which
  return {"input_word_ids": ids, "input_mask": np.ones_like(ids), "input_type_ids": np.zeros_like(ids)}


def time_precisions(export_dir: str, precisions: Sequence[str] = ("f32", "bf16"), batch_size: int = 1,
                    repeats: int = 5, num_threads: Optional[int] = None) -> Dict[str, float]:
  """Median milliseconds per call of the folder's IR compiled at each precision, on this machine.

  Why: whether OpenVINO's bf16 beats f32 depends on the CPU that serves, not on its flags (on a Xeon with
  AVX512-BF16 and no AMX the bf16 IR ran below f32), and the precision is a compile-time choice: run this on the
  serving machine and pass the faster one as `OpenVINOExport(export_dir, precision=...)`. Calls alternate between the
  precisions (after one warm-up call each) so that load from other processes hits both alike.
  """
  exports = {p: OpenVINOExport(export_dir, precision=p, num_threads=num_threads) for p in precisions}
  inputs = dummy_inputs(next(iter(exports.values())), batch_size)
  for export in exports.values():
    export(inputs)
  times: Dict[str, List[float]] = {p: [] for p in exports}
  for _ in range(max(1, repeats)):
    for p, export in exports.items():
      start = time.perf_counter()
      export(inputs)
      times[p].append(time.perf_counter() - start)
  return {p: 1000.0 * statistics.median(t) for p, t in times.items()}

