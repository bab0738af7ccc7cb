"""Hugging Face checkpoints in and out: `config.json` + `model.safetensors` (or `pytorch_model.bin`).

The weights map through the declarative table in `names.py` (`HF_TABLE`): each of our variables has a TF1 name, each
TF1 name one HF name and a layout rule (dense kernels are transposed). Reading checks that every tensor is consumed,
every variable is set and every shape is exact; writing produces the keys the HF class of the model type stores, so
`transformers.AlbertFor*.from_pretrained` loads the directory with no missing or unexpected keys (with E == H the
identity as transformers' always-present embedding projection). Reading takes sharded checkpoints and bfloat16 too.
"""

from __future__ import annotations

import json
import logging
from typing import Dict, Iterable, Mapping, Optional, Sequence, Tuple

import numpy as np
from safetensors import SafetensorError
from safetensors.numpy import load as load_safetensors
from safetensors.numpy import save as save_safetensors

from official_albert import file_io
from official_albert import model_directory as md
from official_albert.checkpoints.formats import widen_bfloat16
from official_albert.checkpoints.names import CheckpointMismatchError
from official_albert.checkpoints.names import HF_DERIVED_KEYS
from official_albert.checkpoints.names import HF_EMBEDDING_PROJECTION
from official_albert.checkpoints.names import matches
from official_albert.checkpoints.names import raise_if_mismatch
from official_albert.checkpoints.names import tf1_to_hf_name
from official_albert.checkpoints.names import tf1_variable_map
from official_albert.config import check_attention_type
from official_albert.config import DENSE_EQUIVALENT

logger = logging.getLogger(__name__)

# HF class for each model type; the HF classes marked `no_pooler` are built with add_pooling_layer=False.
HF_ARCHITECTURES = {
    "pretrainer": ("AlbertForPreTraining", False),
    "encoder": ("AlbertModel", False),
    "classifier": ("AlbertForSequenceClassification", False),
    "token_classifier": ("AlbertForTokenClassification", True),
    "span": ("AlbertForQuestionAnswering", True),
    "multiple_choice": ("AlbertForMultipleChoice", False),
}



def supports(attention_type: str) -> bool:
  """Whether transformers' ALBERT classes compute `attention_type`'s outputs: they have dense attention only (an HF
  export of another type is written with a warning, its attention keys kept in config.json for the way back)."""
  return check_attention_type(attention_type) in DENSE_EQUIVALENT

# ---------------------------------------------------------------------------------------------------- read
def hf_state_dict(model) -> Dict[str, np.ndarray]:
  """Our model's weights as an HF state dict (numpy, HF names and layouts)."""
  state = {}
  for tf1_name, variable in tf1_variable_map(model).items():
    hf_name, transpose = tf1_to_hf_name(tf1_name)
    value = variable.numpy()
    state[hf_name] = np.ascontiguousarray(value.T if transpose else value)
  return state


def _strip_base_prefix_if_needed(state: Mapping[str, np.ndarray], expected: Iterable[str]) -> Dict[str, np.ndarray]:
  """HF `AlbertModel` files have no `albert.` prefix; the task/pretraining classes do."""
  if any(k.startswith("albert.") for k in state) or not any(e.startswith("albert.") for e in expected):
    return dict(state)
  return {f"albert.{k}": v for k, v in state.items()}


def load_hf_state_dict(model, state: Mapping[str, np.ndarray], allow_missing: Sequence[str] = (),
                       source: str = "<state dict>") -> Dict[str, object]:
  """Assigns an HF state dict (numpy arrays) to `model`; every tensor consumed, every variable set, exact shapes.

  Args:
    model: one of our models.
    state: {HF name: array}.
    allow_missing: globs over TF1 *or* HF names of model variables that may be absent from the file (they keep their
      initial values and are reported in the summary).
    source: the file name for messages.

  Returns:
    A summary dict: `loaded` (count), `parameters`, `skipped` {name: reason}, `missing_allowed` [names].
  """
  expected = {}
  for tf1_name, variable in tf1_variable_map(model).items():
    hf_name, transpose = tf1_to_hf_name(tf1_name)
    expected[hf_name] = (tf1_name, variable, transpose)
  state = _strip_base_prefix_if_needed(state, expected)
  skipped = _drop_identity_projection(state, expected, source)
  missing, unexpected, misshaped, allowed = [], [], [], []
  assignments = []
  for key, value in state.items():
    if key in expected:
      tf1_name, variable, transpose = expected[key]
      array = np.asarray(value)
      array = array.T if transpose else array
      if tuple(array.shape) != tuple(variable.shape):
        misshaped.append(f"{key} (= {tf1_name}): file {tuple(np.asarray(value).shape)}"
                         f"{' transposed' if transpose else ''} → {tuple(array.shape)}, model {tuple(variable.shape)}")
      else:
        assignments.append((variable, array))
    elif key in HF_DERIVED_KEYS:
      skipped[key] = HF_DERIVED_KEYS[key]
    elif key.startswith("albert.pooler.") and "albert.pooler.weight" not in expected:
      unexpected.append(key)
    else:
      unexpected.append(key)
  for hf_name, (tf1_name, _, _) in expected.items():
    if hf_name not in state:
      if matches(tf1_name, allow_missing) or matches(hf_name, allow_missing):
        allowed.append(tf1_name)
      else:
        missing.append(f"{hf_name} (= {tf1_name})")
  raise_if_mismatch(source, sorted(missing), sorted(unexpected), sorted(misshaped))
  _check_tied(state, source)
  for variable, array in assignments:
    variable.assign(array.astype(variable.dtype if isinstance(variable.dtype, str) else variable.dtype.name))
  summary = {"loaded": len(assignments), "parameters": int(sum(a.size for _, a in assignments)),
             "skipped": skipped, "missing_allowed": sorted(allowed)}
  logger.info("Loaded %d tensors (%d parameters) from %s; skipped %s; allowed missing %s", summary["loaded"],
              summary["parameters"], source, sorted(skipped), summary["missing_allowed"])
  return summary


def _drop_identity_projection(state: Dict[str, np.ndarray], expected: Mapping[str, object],
                              source: str) -> Dict[str, str]:
  """Pops the E→H projection from `state` when the model has none (E == H), returning it as skipped {name: why}.

  transformers always has the projection; with E == H ours (like the reference) has none, so only the identity
  (what our HF export writes) can be dropped without changing the outputs. A trained projection cannot be held.
  """
  weight_key, bias_key = HF_EMBEDDING_PROJECTION
  if weight_key in expected or not any(k in state for k in HF_EMBEDDING_PROJECTION):
    return {}
  weight, bias = state.pop(weight_key, None), state.pop(bias_key, None)
  not_identity = []
  if weight is not None:
    weight = np.asarray(weight)
    if weight.ndim != 2 or weight.shape[0] != weight.shape[1] or not np.array_equal(
        weight, np.eye(weight.shape[0], dtype=weight.dtype)):
      not_identity.append(f"{weight_key} {tuple(weight.shape)} is not the identity")
  if bias is not None and np.any(np.asarray(bias)):
    not_identity.append(f"{bias_key} is not zero")
  if not_identity:
    raise CheckpointMismatchError(
        f"Checkpoint {source}: embedding_size == hidden_size and {' and '.join(not_identity)}; ALBERT (like the "
        "reference) has no embedding projection when E == H, so a trained projection (it follows the embedding "
        "LayerNorm and cannot be folded into the tables) cannot be represented by this model.")
  reason = "identity (E == H: ALBERT has no projection)"
  return {key: reason for key, value in ((weight_key, weight), (bias_key, bias)) if value is not None}


def _check_tied(state: Mapping[str, np.ndarray], source: str) -> None:
  pairs = (("predictions.decoder.weight", "albert.embeddings.word_embeddings.weight"),
           ("predictions.decoder.bias", "predictions.bias"))
  for derived, original in pairs:
    if derived in state and original in state and not np.array_equal(np.asarray(state[derived]),
                                                                     np.asarray(state[original])):
      raise CheckpointMismatchError(f"Checkpoint {source}: {derived} should be tied to {original} but differs; "
                                    "ALBERT ties the MLM output projection to the input table.")


HF_WEIGHTS_INDEX_FILE = "model.safetensors.index.json"
HF_TORCH_WEIGHTS_INDEX_FILE = "pytorch_model.bin.index.json"
# The weight files of an HF directory in transformers' order of preference: one file before its sharded form (an
# index whose `weight_map` names the shard of every tensor: what `save_pretrained(max_shard_size=...)` writes),
# safetensors before the PyTorch pickle.
HF_WEIGHT_FILES = (md.HF_WEIGHTS_FILE, HF_WEIGHTS_INDEX_FILE, md.HF_TORCH_WEIGHTS_FILE, HF_TORCH_WEIGHTS_INDEX_FILE)


def read_hf_weights(directory: str) -> Tuple[Dict[str, np.ndarray], str]:
  """Reads `model.safetensors` (numpy API, no torch) or, when torch is installed, `pytorch_model.bin`; either one
  sharded (all shards of its index, merged). Returns (state, the file read: the index for a sharded checkpoint)."""
  for name in HF_WEIGHT_FILES:
    path = md.path(directory, name)
    if file_io.exists(path):
      return (_read_shards(directory, path) if name.endswith(".index.json") else _read_weights_file(path)), path
  raise FileNotFoundError(f"{directory}: no {md.HF_WEIGHTS_FILE} or {md.HF_TORCH_WEIGHTS_FILE}, and no sharded "
                          f"checkpoint ({HF_WEIGHTS_INDEX_FILE} or {HF_TORCH_WEIGHTS_INDEX_FILE} with its shards).")


def _read_weights_file(path: str) -> Dict[str, np.ndarray]:
  """One safetensors file (numpy, no torch) or PyTorch pickle (torch); bfloat16 comes back as float32."""
  if path.endswith(".safetensors"):
    with file_io.open_file(path, "rb") as f:
      return _load_safetensors(f.read(), path)
  try:
    import torch  # noqa: PLC0415 (optional extra)
  except ImportError:
    raise ImportError(f"{path} is a PyTorch pickle; install torch to read it, or convert it to "
                      f"{md.HF_WEIGHTS_FILE}.") from None
  state = torch.load(path, map_location="cpu", weights_only=True)
  return {k: v.float().numpy() if v.is_floating_point() else v.numpy() for k, v in state.items()}


def _read_shards(directory: str, index_path: str) -> Dict[str, np.ndarray]:
  """Every shard an index's `weight_map` names, merged; a shard file or a listed tensor that is absent is named."""
  index = file_io.read_json(index_path, "sharded checkpoint index")
  weight_map = index.get("weight_map") if isinstance(index, dict) else None
  if not isinstance(weight_map, dict) or not weight_map:
    raise ValueError(f"{index_path}: no \"weight_map\" ({{tensor name: shard file}}); a sharded checkpoint's index "
                     "as transformers' save_pretrained writes it is expected.")
  state = {}
  for shard in sorted(set(weight_map.values())):
    shard_path = md.path(directory, str(shard))
    if not file_io.exists(shard_path):
      raise FileNotFoundError(f"{index_path} names the shard {shard}, which is not in {directory}; copy every shard.")
    state.update(_read_weights_file(shard_path))
  absent = sorted(name for name in weight_map if name not in state)
  if absent:
    raise CheckpointMismatchError(f"{index_path}: {len(absent)} tensor(s) of its weight_map are in none of the "
                                  f"shards: {', '.join(absent[:10])}{' ...' if len(absent) > 10 else ''}.")
  return state


# safetensors dtype → numpy dtype, for the files safetensors' numpy API cannot read (those with bfloat16 tensors).
_SAFETENSORS_DTYPES = {"F64": "<f8", "F32": "<f4", "F16": "<f2", "I64": "<i8", "I32": "<i4", "I16": "<i2",
                       "I8": "i1", "U8": "u1", "BOOL": "?"}


def _load_safetensors(data: bytes, path: str) -> Dict[str, np.ndarray]:
  """safetensors' numpy `load`, except for files holding bfloat16 (numpy has no such type, so that API raises
  KeyError 'BF16'): those are parsed here (8-byte header size, JSON header, raw little-endian data) and each bfloat16
  widened exactly to float32 (a bfloat16 is the top 16 bits of a float32).

  Every error is a ValueError naming `path` (safetensors' own says "Error while deserializing header" and no file,
  and a crafted header's negative offset read header bytes as weights without one).
  """
  try:
    header_size = int.from_bytes(data[:8], "little")
    header = json.loads(data[8:8 + header_size])
  except (ValueError, UnicodeDecodeError):
    header = None  # not a safetensors file: safetensors' own error says so
  if not isinstance(header, dict) or not any(isinstance(v, dict) and v.get("dtype") == "BF16"
                                             for v in header.values()):
    try:
      return load_safetensors(data)
    except (SafetensorError, KeyError, ValueError, TypeError) as e:  # (KeyError: a dtype numpy has no type for)
      raise ValueError(f"{path}: not a readable safetensors file ({type(e).__name__}: {e}); the file is truncated "
                       "or damaged: copy or download it again.") from None
  start, state = 8 + header_size, {}
  for name, info in header.items():
    if name == "__metadata__":
      continue
    dtype, shape, begin, end = _bf16_file_entry(info, name, path, len(data) - start)
    numpy_dtype = np.dtype("<u2" if dtype == "BF16" else _SAFETENSORS_DTYPES[dtype])
    count = int(np.prod(shape, dtype=np.int64))
    if end - begin != count * numpy_dtype.itemsize:
      raise ValueError(f"{path}: tensor {name} ({dtype} {tuple(shape)}) does not fit its data_offsets "
                       f"[{begin}, {end}) in a file of {len(data)} bytes: the file is truncated or damaged.")
    array = np.frombuffer(data, numpy_dtype, count, start + begin)
    if dtype == "BF16":
      array = widen_bfloat16(array)
    state[name] = array.reshape(shape).copy()
  return state


def _bf16_file_entry(info: object, name: str, path: str, data_size: int) -> Tuple[str, list, int, int]:
  """(dtype, shape, begin, end) of one header entry of a bfloat16 safetensors file, checked as safetensors checks
  them: a known dtype, dims >= 0, 0 <= begin <= end <= the data's size (`data_size` bytes after the header).

  Raises:
    ValueError: naming `path`, the tensor and what is wrong (a key missing, a negative dim or offset, ...).
  """
  def damaged(what):
    return ValueError(f"{path}: tensor {name}: {what}; the file is damaged (not as safetensors writes it): copy or "
                      "download it again.")

  if not isinstance(info, dict):
    raise damaged(f"its header entry is {info!r}, not an object")
  missing = [key for key in ("dtype", "shape", "data_offsets") if key not in info]
  if missing:
    raise damaged(f"its header entry has no {', '.join(repr(key) for key in missing)}")
  dtype, shape, offsets = info["dtype"], info["shape"], info["data_offsets"]
  if not isinstance(dtype, str) or (dtype != "BF16" and dtype not in _SAFETENSORS_DTYPES):
    raise ValueError(f"{path}: tensor {name} has dtype {dtype}, which numpy cannot hold; save the checkpoint "
                     "in float32, float16 or bfloat16.")
  if not isinstance(shape, list) or not all(isinstance(d, int) and d >= 0 for d in shape):
    raise damaged(f"shape {shape!r} is not a list of integers >= 0")
  if (not isinstance(offsets, list) or len(offsets) != 2 or not all(isinstance(o, int) for o in offsets)
      or not 0 <= offsets[0] <= offsets[1] <= data_size):
    raise damaged(f"data_offsets {offsets!r} are not [begin, end] with 0 <= begin <= end <= {data_size} (the bytes "
                  "after the header)")
  return dtype, shape, offsets[0], offsets[1]


def infer_num_outputs(state: Mapping[str, np.ndarray], config_path: str) -> Optional[int]:
  if "classifier.weight" in state:
    return int(np.shape(state["classifier.weight"])[0])
  data = md.read_json(config_path)
  if "id2label" in data:
    return len(data["id2label"])
  return data.get("num_labels")


# --------------------------------------------------------------------------------------------------- write
def hf_label_config(model_type: str, num_labels: int, label_names: Optional[Sequence[str]] = None,
                    multi_label: bool = False) -> Dict[str, object]:
  """The label keys of an HF `config.json` for a classification head: `id2label` / `label2id` (the given names, HF's
  LABEL_i without them) and `problem_type` (multi_label_classification for independent sigmoids, one output
  included: transformers' pipeline then applies a sigmoid, not a softmax; else regression for one output). {} for
  the other heads.

  Raises:
    ValueError: as many names as outputs are needed (the names belong to another model otherwise).
  """
  if model_type not in ("classifier", "token_classifier"):
    return {}
  names = list(label_names) if label_names else [f"LABEL_{i}" for i in range(num_labels)]
  if len(names) != num_labels:
    raise ValueError(f"{len(names)} label names {names[:5]} for a {model_type} with {num_labels} outputs; the label "
                     "file belongs to another model (fix or remove it).")
  data: Dict[str, object] = {"id2label": {str(i): name for i, name in enumerate(names)},
                             "label2id": {name: i for i, name in enumerate(names)}}
  # (multi-label first: a one-output multi-label head is a sigmoid, not a regression.)
  if model_type == "classifier" and multi_label:
    data["problem_type"] = "multi_label_classification"
  elif model_type == "classifier" and num_labels == 1:
    data["problem_type"] = "regression"
  return data


def hf_config_dict(model, model_type: str, label_names: Optional[Sequence[str]] = None,
                   multi_label: bool = False) -> Dict[str, object]:
  """HF `config.json` for `model` (architecture of the model type, labels for the classification heads:
  `hf_label_config`)."""
  if model_type not in HF_ARCHITECTURES:
    raise ValueError(f"--model_type={model_type} has no Hugging Face class (HF has no ALBERT SQuAD 2.0 beam head); "
                     "use --output_format=native or tf1.")
  data = model.config.to_hf_dict()
  data["architectures"] = [HF_ARCHITECTURES[model_type][0]]
  data.update(hf_label_config(model_type, getattr(model, "num_labels", 0), label_names, multi_label))
  return data


def hf_output_state(model, model_type: str) -> Tuple[Dict[str, np.ndarray], Dict[str, str]]:
  """Our weights under the names the HF class of `model_type` stores (and the names left out, with reasons)."""
  state = hf_state_dict(model)
  excluded = {}
  weight_key, bias_key = HF_EMBEDDING_PROJECTION
  if weight_key not in state:
    # E == H: transformers still builds the projection; the identity makes it compute what ours does.
    width = state["albert.embeddings.word_embeddings.weight"].shape[1]
    state[weight_key], state[bias_key] = np.eye(width, dtype=np.float32), np.zeros(width, np.float32)
  if HF_ARCHITECTURES[model_type][1]:
    for key in [k for k in state if k.startswith("albert.pooler.")]:
      state.pop(key)
      excluded[key] = f"{HF_ARCHITECTURES[model_type][0]} has no pooler (add_pooling_layer=False)"
  if model_type == "encoder":
    # AlbertModel is the base model itself: its keys have no `albert.` prefix.
    state = {k[len("albert."):]: v for k, v in state.items()}
  return state, excluded


def write_hf(model, model_type: str, output_dir: str) -> Dict[str, object]:
  """Writes `config.json` + `model.safetensors` (tied/derived HF keys are not stored, as HF itself saves them)."""
  config = hf_config_dict(model, model_type)
  state, excluded = hf_output_state(model, model_type)
  file_io.makedirs(output_dir)
  file_io.atomic_write_bytes(md.path(output_dir, md.HF_WEIGHTS_FILE),
                      save_safetensors({k: np.ascontiguousarray(v, dtype=np.float32) for k, v in state.items()},
                                       metadata={"format": "pt"}))
  file_io.atomic_write_json(md.path(output_dir, md.CONFIG_FILE), config)
  return {"written": len(state), "written_parameters": int(sum(v.size for v in state.values())),
          "excluded": excluded, "files": [md.CONFIG_FILE, md.HF_WEIGHTS_FILE]}
