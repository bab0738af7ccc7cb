"""An OpenVINO export folder loaded for inference: its tokenizer, its compiled IR, its settings.

  from official_albert.serving.openvino_runtime import OpenVINOExport
  export = OpenVINOExport("/tmp/albert_sst2_ov")            # precision from the folder (bf16 / f32 / int8)
  inputs = export.encode(["a gripping film"])               # FullTokenizer ids, packed like the pipelines
  export(inputs)["logits"]                                  # numpy, the IR's output names

The pipelines (`official_albert.pipelines`) take the folder in place of a model directory and call it like our Keras
models; text is tokenized in Python with `FullTokenizer` built from the folder's `spiece.model` and settings, so the
ids are FullTokenizer's by construction.
"""

from __future__ import annotations

import os
import statistics
import time
from typing import Dict, List, Optional, Sequence

import numpy as np

from official_albert import model_directory as md
from official_albert.serving import openvino_ir as ir


class OpenVINOExport:
  """A folder written by `export_openvino`, compiled once; call it with {input name: int array}.

  Args:
    export_dir: the folder.
    precision: override the folder's precision ("f32" / "bf16" / "int8"; int8 needs an int8 folder).
    num_threads, hint: as `compile_openvino`.

  Attributes:
    head, settings (serving_config.json), config (`AlbertConfig`), labels (or None), tokenizer (a `FullTokenizer`,
    or None for a folder exported without spiece.model), num_labels / num_choices (classifier, multiple choice),
    output_names.
  """

  def __init__(self, export_dir: str, precision: Optional[str] = None, num_threads: Optional[int] = None,
               hint: str = "latency"):
    from official_albert.config import AlbertConfig  # pylint: disable=g-import-not-at-top
    from official_albert.tokenization import FullTokenizer  # pylint: disable=g-import-not-at-top
    self.export_dir = os.fspath(export_dir)
    self.settings = ir.read_export(self.export_dir)
    self.head = self.settings["head"]
    if precision == "int8" and self.settings["precision"] != "int8":
      raise ValueError(f"{self.export_dir} holds a {self.settings['precision']} IR; int8 needs a folder exported "
                       "with --precision=int8.")
    self.precision = precision or self.settings["precision"]
    self.config = AlbertConfig.from_json_file(os.path.join(self.export_dir, ir.MODEL_CONFIG))
    self.compiled = ir.compile_openvino(os.path.join(self.export_dir, ir.XML_NAME), precision=self.precision,
                                         num_threads=num_threads, hint=hint)
    self.output_names = [port.get_any_name() for port in self.compiled.outputs]
    self._input_names = [port.get_any_name() for port in self.compiled.inputs]
    self._request = self.compiled.create_infer_request()
    saved = md.read_label_file(self.export_dir)
    self.labels = saved.labels if saved is not None else None
    spm = os.path.join(self.export_dir, ir.SPM_NAME)
    self.tokenizer = None
    if os.path.exists(spm):
      self.tokenizer = FullTokenizer(spm, do_lower_case=self.settings["do_lower_case"],
                                     mode=self.settings["tokenizer_mode"])
    self.num_choices = self.settings.get("num_choices")
    self.num_labels = None
    if self.head in ("classifier", "token_classifier"):
      self.num_labels = self.compiled.output("logits").get_partial_shape()[-1].get_length()

  def __repr__(self):
    return f"OpenVINOExport({self.export_dir!r}, head={self.head!r}, precision={self.precision!r})"

  def require_outputs(self, names: Sequence[str], purpose: str) -> None:
    """Raises naming the folder's head and outputs when `purpose` needs outputs the IR does not have."""
    missing = [n for n in names if n not in self.output_names]
    if missing:
      raise ValueError(f"{purpose} needs the output(s) {missing}, but {self.export_dir} is a {self.head} export "
                       f"(outputs {self.output_names}); export the model with the matching --head.")

  def __call__(self, inputs: Dict[str, object], training: bool = False) -> Dict[str, np.ndarray]:
    """Runs the IR; missing optional inputs are filled (no [MASK] positions, an all-zero p_mask)."""
    del training  # the IR is the inference graph
    feed = {k: np.asarray(v, np.int32) for k, v in inputs.items() if k in self._input_names}
    ids = feed.get("input_word_ids")
    if ids is None:
      raise KeyError(f"{self.export_dir}: missing input 'input_word_ids' (inputs: {self._input_names}).")
    feed.setdefault("input_mask", np.ones_like(ids))
    feed.setdefault("input_type_ids", np.zeros_like(ids))
    if "masked_lm_positions" in self._input_names:
      feed.setdefault("masked_lm_positions", np.zeros((ids.shape[0], 1), np.int32))
    if "p_mask" in self._input_names:
      feed.setdefault("p_mask", np.zeros_like(ids))
    return ir.run_compiled(self.compiled, feed, self._request)

  def encode(self, texts: Sequence[str], text_pairs: Optional[Sequence[str]] = None,
             seq_length: Optional[int] = None) -> Dict[str, np.ndarray]:
    """Packed inputs `[CLS] A [SEP] (B [SEP])` for `texts`, padded to the longest (cut at the export's seq_length)."""
    from official_albert.tokenization import pack_ids  # pylint: disable=g-import-not-at-top
    if self.tokenizer is None:
      raise ValueError(f"{self.export_dir} has no {ir.SPM_NAME}: it takes token ids only (re-export with "
                       "--spm_model_file for text in).")
    if text_pairs is not None and len(text_pairs) != len(texts):
      raise ValueError(f"text_pairs has {len(text_pairs)} entries but texts has {len(texts)}.")
    ids_a = self.tokenizer.encode_ids_batch(list(texts))
    ids_b = self.tokenizer.encode_ids_batch(list(text_pairs)) if text_pairs is not None else [None] * len(ids_a)
    cap = seq_length or self.settings["seq_length"]
    length = min(cap, max(len(a) + 2 + (0 if b is None else len(b) + 1) for a, b in zip(ids_a, ids_b)))
    rows = [pack_ids(a, b, length) for a, b in zip(ids_a, ids_b)]
    return {k: np.asarray([r[k] for r in rows], np.int32) for k in rows[0]}


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

