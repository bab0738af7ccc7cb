"""Hugging Face TensorFlow checkpoints in: the `tf_model.h5` that transformers' `TFAlbert*` classes save.

transformers 5 dropped TensorFlow, so fine-tunes saved by `TFAlbertFor*.save_pretrained` (`config.json` +
`tf_model.h5`) can no longer be opened by the library that wrote them. The file is a Keras-2 HDF5 weights file:
a root attribute `layer_names` (the model's top-level layers: `albert`, `predictions`, `sop_classifier`,
`classifier`, `qa_outputs`), and per layer a `weight_names` attribute whose names (`tf_albert_for_..._/albert/
encoder/albert_layer_groups_._0/albert_layers_._0/attention/query/kernel:0`) are the datasets' paths. It is read
with h5py alone — no tf-keras, no transformers.

Each TF name becomes the PyTorch class's state-dict key by transformers' own rule (drop the model scope and `:0`,
`_._N` → `.N`, `kernel` → `weight` transposed, `gamma`/`beta` → `weight`/`bias`, an embedding's `embeddings` →
`weight`), so the load is `hf.load_hf_state_dict`'s: every tensor consumed, every variable set, exact shapes, the
same named errors. One TF-only detail: `TFAlbertMLMHead` adds `decoder/bias` to the MLM logits and never uses its
`bias` (PyTorch ties the two), so a model trained in TensorFlow has its trained output bias in `decoder/bias`; that
one is read, `bias` is reported as skipped.
"""

from __future__ import annotations

import re
from typing import Dict, Tuple

import h5py
import numpy as np

from official_albert import file_io
from official_albert import model_directory as md
from official_albert.checkpoints.names import CheckpointMismatchError

# The PyTorch architecture names that `TFAlbert*.save_pretrained` writes into config.json (it drops the "TF"), and
# the TF class each one was saved from, → our model type. (TF)AlbertForMaskedLM has no SOP head and no pooler: it
# loads into the pretrainer with those reported as not in the input.
ARCHITECTURE_MODEL_TYPES = {
    "AlbertModel": "encoder",
    "AlbertForPreTraining": "pretrainer",
    "AlbertForMaskedLM": "pretrainer",
    "AlbertForSequenceClassification": "classifier",
    "AlbertForTokenClassification": "token_classifier",
    "AlbertForQuestionAnswering": "span",
    "AlbertForMultipleChoice": "multiple_choice",
}
# The top-level layers a TFAlbert* model can have.
_KNOWN_LAYERS = ("albert", "predictions", "sop_classifier", "classifier", "qa_outputs")
_MLM_UNUSED_BIAS = "predictions.unused_bias"


class HFTFCheckpointError(CheckpointMismatchError):
  """A `tf_model.h5` that cannot be read: not HDF5, truncated, or not written by a TFAlbert* class."""


def _tf_name_to_hf(name: str, ndim: int) -> Tuple[str, bool]:
  """`tf_albert_x/albert/encoder/albert_layer_groups_._0/.../kernel:0` → (`albert.encoder.albert_layer_groups.0
  .....weight`, transpose?)."""
  parts = name.split("/")[1:]  # the model's own scope (tf_albert_for_...) is not part of the weight's name
  parts[-1] = parts[-1].split(":")[0]
  parts = [re.sub(r"_\._(\d+)$", r".\1", p) for p in parts]
  leaf, transpose = parts[-1], False
  if leaf == "kernel":
    leaf, transpose = "weight", ndim == 2
  elif leaf == "gamma":
    leaf = "weight"
  elif leaf == "beta":
    leaf = "bias"
  elif leaf == "embeddings":
    leaf = "weight"
  key = ".".join(parts[:-1] + [leaf])
  if key == "predictions.decoder.bias":
    key = "predictions.bias"  # what TFAlbertMLMHead adds to the logits
  elif key == "predictions.bias":
    key = _MLM_UNUSED_BIAS
  return key, transpose


def read_h5_weights(file_path: str) -> Dict[str, np.ndarray]:
  """{TF weight name: array} of a Keras-2 HDF5 weights file, in the file's order.

  Raises:
    FileNotFoundError: no file.
    HFTFCheckpointError: not an HDF5 file or truncated (naming the file and, for a broken dataset, the weight), or
      an HDF5 file without Keras' `layer_names` / `weight_names` attributes.
  """
  if not file_io.exists(file_path):
    raise FileNotFoundError(f"{file_path}: not found.")
  try:
    handle = h5py.File(file_io.open_file(file_path, "rb") if not file_io.is_local(file_path) else file_path, "r")
  except OSError as e:
    raise HFTFCheckpointError(f"{file_path}: not a readable HDF5 file ({e}). The file is truncated or is not a "
                              f"{md.HF_TF_WEIGHTS_FILE}; download or save it again.") from None
  weights: Dict[str, np.ndarray] = {}
  with handle:
    if "layer_names" not in handle.attrs:
      raise HFTFCheckpointError(
          f"{file_path}: an HDF5 file without Keras' `layer_names` attribute, so not a {md.HF_TF_WEIGHTS_FILE} "
          "saved by transformers' TFAlbert* classes (a KerasHub preset's model.weights.h5 is read with "
          "--input_format=keras_hub).")
    for layer in handle.attrs["layer_names"]:
      layer = layer.decode() if isinstance(layer, bytes) else str(layer)
      group = handle.get(layer)
      if group is None or "weight_names" not in group.attrs:
        raise HFTFCheckpointError(f"{file_path}: layer {layer!r} is listed in `layer_names` but has no "
                                  "`weight_names`; the file is damaged or not a Keras-2 weights file.")
      for weight_name in group.attrs["weight_names"]:
        weight_name = weight_name.decode() if isinstance(weight_name, bytes) else str(weight_name)
        try:
          weights[weight_name] = np.asarray(group[weight_name])
        except (KeyError, OSError) as e:
          raise HFTFCheckpointError(f"{file_path}: weight {weight_name!r} of layer {layer!r} cannot be read ({e}); "
                                    "the file is truncated or damaged.") from None
  return weights


def read_hf_tf_weights(directory: str) -> Tuple[Dict[str, np.ndarray], Dict[str, str], str]:
  """Reads `directory/tf_model.h5` as a PyTorch-named HF state dict.

  Returns:
    (state {HF key: array in PyTorch layout}, the file's path, skipped {TF name: reason}).

  Raises:
    HFTFCheckpointError: the file is unreadable (see `read_h5_weights`) or holds no ALBERT weights (a BERT or
      other model's tf_model.h5: its top-level layers are named).
  """
  file_path = md.path(directory, md.HF_TF_WEIGHTS_FILE) if file_io.isdir(directory) else directory
  weights = read_h5_weights(file_path)
  scopes = sorted({name.split("/")[1] for name in weights if "/" in name})
  if "albert" not in scopes:
    raise HFTFCheckpointError(f"{file_path}: no ALBERT weights (top-level layers {scopes or 'none'}; a TFAlbert* "
                              f"model has {', '.join(_KNOWN_LAYERS[:1])} and its head). Is this another model's "
                              f"{md.HF_TF_WEIGHTS_FILE}?")
  state, skipped = {}, {}
  for name, value in weights.items():
    key, transpose = _tf_name_to_hf(name, value.ndim)
    if key == _MLM_UNUSED_BIAS:
      skipped[name] = ("TFAlbertMLMHead adds predictions/decoder/bias to the logits and never uses this one "
                       "(read decoder/bias instead)")
      continue
    state[key] = np.ascontiguousarray(value.T) if transpose else value
  return state, file_path, skipped


def architecture_model_type(config_file: str):
  """Our model type for the first known `architectures` entry of an HF config.json (None without one)."""
  architectures = md.read_json(config_file).get("architectures") or []
  for name in architectures:
    name = name[2:] if name.startswith("TF") else name
    if name in ARCHITECTURE_MODEL_TYPES:
      return ARCHITECTURE_MODEL_TYPES[name]
  return None
