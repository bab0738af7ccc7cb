"""An export folder loaded for inference, whatever runs its graph: the settings, tokenizer and labels around it.

The OpenVINO and LiteRT exports write the same folder around their model file (`openvino_model.xml` / `.bin`, or
`model.tflite`): `spiece.model`, `serving_config.json` (head, precision, tokenizer settings, input/output names, the
sentence-embedding settings of an encoder, the int8 gate's numbers), `model_config.json` and `labels.json`. This
module reads that folder once (`ExportFolder`): the runtimes (`openvino_runtime.OpenVINOExport`,
`litert_runtime.LiteRTExport`, both above this module) only compile and run their model file, and the pipelines call
either like our Keras models (numpy outputs); `pipelines.open_export_folder` picks the runtime from the model file
(`export_format`).

Imports neither TensorFlow nor a runtime: serving a folder needs only its runtime's extra, which the runtimes
import through `import_extra` (one error naming the extra to install).
"""

from __future__ import annotations

import os
from typing import Dict, Optional, Sequence

import numpy as np

from official_albert import file_io
from official_albert import model_directory as md
from official_albert.config import AlbertConfig
from official_albert.extras import import_extra  # noqa: F401 (the runtimes' name for it: export_folder.import_extra)
from official_albert.extras import install_hint  # noqa: F401 (likewise)
from official_albert.input_contract import check_array_ranges
from official_albert.input_contract import check_optional_names
from official_albert.tokenization import FullTokenizer
from official_albert.tokenization import pack_ids

SERVING_CONFIG = "serving_config.json"
MODEL_CONFIG = "model_config.json"
# The model file of each export format (the runtime that serves it is named in `open_export_folder`).
MODEL_FILES = {"openvino": "openvino_model.xml", "litert": "model.tflite"}


def check_int8_files(format_name: str, precision: str, calibration_file: Optional[str],
                     heldout_file: Optional[str]) -> None:
  """Refuses int8 without a calibration file, and a calibration / held-out file given to another precision (it was
  accepted and not read: the export looked gated). Here, with no framework imported, so the export binary checks its
  flags before anything loads."""
  if precision == "int8" and not calibration_file:
    raise ValueError(f"--format={format_name} --precision=int8 needs --calibration_file (one text per line, a few "
                     "hundred lines of the task's kind of text): the int8 ranges are calibrated on it and the "
                     "accuracy gate scores held-out lines of it.")
  if precision != "int8" and (calibration_file or heldout_file):
    raise ValueError(f"calibration_file={calibration_file!r}, heldout_file={heldout_file!r} with precision="
                     f"{precision!r}: they apply to precision='int8' only (nothing would read them).")


def export_format(path) -> Optional[str]:
  """"openvino" or "litert" for an export folder (by its model file), None for anything else."""
  if not isinstance(path, (str, os.PathLike)):
    return None
  for name, model_file in MODEL_FILES.items():
    if os.path.isfile(os.path.join(os.fspath(path), model_file)):
      return name
  return None


def read_serving_config(export_dir: str, format_tag: str, model_file: str) -> Dict[str, object]:
  """serving_config.json of an export folder, checked; raises naming the folder and the fix when it is not one."""
  path = os.path.join(export_dir, SERVING_CONFIG)
  if not os.path.exists(os.path.join(export_dir, model_file)):
    raise FileNotFoundError(f"{export_dir}: no {model_file} (not an export folder of this format; write one with "
                            "`python -m official_albert.export_saved_model --format=...`).")
  if not os.path.exists(path):
    raise FileNotFoundError(f"{export_dir}: {model_file} without {SERVING_CONFIG}; re-export the folder (text in "
                            "needs the tokenizer settings).")
  data = file_io.read_json(path, fix="Re-export the folder.")
  if not isinstance(data, dict) or data.get("format") != format_tag:
    found = data.get("format") if isinstance(data, dict) else type(data).__name__
    raise ValueError(f"{path}: format {found!r}, expected {format_tag!r}; re-export the folder.")
  needed = ["head"] + (["do_lower_case", "tokenizer_mode"] if os.path.exists(os.path.join(export_dir, md.SPM_FILE))
                       else [])
  missing = [key for key in needed if key not in data]
  if missing:
    raise ValueError(f"{path}: no {missing} (the folder's head / tokenizer settings); re-export the folder.")
  return data


def read_model_config(export_dir: str) -> AlbertConfig:
  """model_config.json of an export folder: always our native config (`AlbertConfig.to_json_file`; folders written
  before it carried the native marker hold the bare `to_dict()`), so it is read as native. Read by key detection, a
  marker-less one passed for an original-release `albert_config.json`, whose "gelu" means the tanh form: an HF
  model's exact-erf "gelu" came back as "gelu_new" and the served config differed from the exported model's."""
  return AlbertConfig.from_json_file(os.path.join(export_dir, MODEL_CONFIG), source="native")


class ExportFolder:
  """What every export folder holds beside its model file; subclasses run the model (`_run`).

  Attributes:
    export_dir, head, settings (serving_config.json), precision, config (`AlbertConfig`), labels (or None),
    tokenizer (a `FullTokenizer`, or None for a folder exported without spiece.model), num_choices (multiple
    choice), num_labels (classifier, token classifier; set by the subclass from its model's output shape),
    input_names, output_names.
  """

  format_name = ""  # the --format value that writes this kind of folder

  def __init__(self, export_dir: str, settings: Dict[str, object]):
    self.export_dir = os.fspath(export_dir)
    self.settings = settings
    self.head = settings["head"]
    self.precision = settings.get("precision")
    self.config = read_model_config(self.export_dir)
    saved = md.read_label_file(self.export_dir)
    self.labels = saved.labels if saved is not None else None
    spm = os.path.join(self.export_dir, md.SPM_FILE)
    self.tokenizer = None
    if os.path.exists(spm):
      # (folders exported before keep_accents / remove_space were recorded tokenized at FullTokenizer's defaults)
      self.tokenizer = FullTokenizer(spm, do_lower_case=settings["do_lower_case"], mode=settings["tokenizer_mode"],
                                     keep_accents=bool(settings.get("keep_accents", False)),
                                     remove_space=bool(settings.get("remove_space", True)))
    self.num_choices = settings.get("num_choices")
    self.num_labels = None
    self.input_names = list(settings.get("inputs") or [])
    self.output_names = list(settings.get("outputs") or [])

  def __repr__(self):
    return f"{type(self).__name__}({self.export_dir!r}, head={self.head!r}, precision={self.precision!r})"

  def require_outputs(self, names: Sequence[str], purpose: str) -> None:
    """Raises naming the folder's head and outputs when `purpose` needs outputs the model does not have."""
    missing = [n for n in names if n not in self.output_names]
    if missing:
      raise ValueError(f"{purpose} needs the output(s) {missing}, but {self.export_dir} is a {self.head} export "
                       f"(outputs {self.output_names}); export the model with the matching --head.")

  def _run(self, feed: Dict[str, np.ndarray]) -> Dict[str, np.ndarray]:
    raise NotImplementedError

  def __call__(self, inputs: Dict[str, object], training: bool = False) -> Dict[str, np.ndarray]:
    """Runs the model with the Keras models' input contract (`official_albert.input_contract`): the mask and type
    ids default to all ones / zeros, a mask or type ids under another name, ids outside the tables, a sequence longer
    than the position table and a squad_v2 head's missing `p_mask` are refused (the runtimes answered them: OpenVINO
    gathers a zero row for an id past the table); no [MASK] positions default to one at position 0."""
    del training  # the model file is the inference graph
    check_optional_names(inputs, self.export_dir)
    feed = {k: np.asarray(v, np.int32) for k, v in inputs.items() if k in self.input_names}
    ids = feed.get("input_word_ids")
    if ids is None:
      raise KeyError(f"{self.export_dir}: missing input 'input_word_ids' (inputs: {self.input_names}).")
    if "p_mask" in self.input_names and "p_mask" not in feed:
      raise KeyError(f"{self.export_dir}: missing input 'p_mask' [batch, seq_length] (a {self.head} export: 1 marks "
                     "the tokens that cannot be in an answer).")
    if isinstance(self.config, AlbertConfig):  # (a SavedModel keeps no config; its graph refuses a bad id itself)
      if ids.ndim and ids.shape[-1] > self.config.max_position_embeddings:
        raise ValueError(f"{self.export_dir}: sequence length {ids.shape[-1]} exceeds max_position_embeddings "
                         f"({self.config.max_position_embeddings}); cut the inputs to at most that many tokens.")
      check_array_ranges(ids, feed.get("input_type_ids"), self.config.vocab_size, self.config.type_vocab_size,
                         self.export_dir)
    feed.setdefault("input_mask", np.ones_like(ids))
    feed.setdefault("input_type_ids", np.zeros_like(ids))
    if "masked_lm_positions" in self.input_names:
      feed.setdefault("masked_lm_positions", np.zeros((ids.shape[0], 1), np.int32))
    return self._run(feed)

  def encode(self, texts: Sequence[str], text_pairs: Optional[Sequence[str]] = None,
             seq_length: Optional[int] = None) -> Dict[str, np.ndarray]:
    """Packed inputs `[CLS] A [SEP] (B [SEP])` for `texts`, packed like the pipelines: padded to the longest (cut at
    the export's seq_length), a block_sparse model's to that seq_length (its attention pattern follows the padded
    length, so a text's answer would otherwise change with its batch-mates and differ from the model directory's)."""
    if self.tokenizer is None:
      raise ValueError(f"{self.export_dir} has no {md.SPM_FILE}: it takes token ids only (re-export with "
                       "--spm_model_file for text in).")
    if text_pairs is not None and len(text_pairs) != len(texts):
      raise ValueError(f"text_pairs has {len(text_pairs)} entries but texts has {len(texts)}.")
    ids_a = self.tokenizer.encode_ids_batch(list(texts))
    ids_b = self.tokenizer.encode_ids_batch(list(text_pairs)) if text_pairs is not None else [None] * len(ids_a)
    ids_b = [b or None for b in ids_b]  # a pair with no pieces: one segment, as the pipelines pack it
    cap = seq_length or self.settings["seq_length"]
    # (an empty batch: [0, 2] arrays, the length of an empty text's `[CLS] [SEP]`)
    length = min(cap, max((len(a) + 2 + (0 if b is None else len(b) + 1) for a, b in zip(ids_a, ids_b)), default=2))
    # (`pipeline_inputs.pads_to_cap`'s rule, not imported: it would load Keras; None = a SavedModel not recording it)
    if getattr(self.config, "attention_type", "dense") in ("block_sparse", None):
      length = cap
    rows = [pack_ids(a, b, length) for a, b in zip(ids_a, ids_b)]
    names = pack_ids([], None, length)  # (the keys, for an empty batch too)
    return {k: np.asarray([r[k] for r in rows], np.int32).reshape(len(rows), length) for k in names}
