"""Hugging Face checkpoints in and out: `config.json` + `model.safetensors` (or `pytorch_model.bin`).

The weights map through the declarative table in `names.py` (`HF_TABLE`): each of our variables has a TF1 name, each
TF1 name one HF name and a layout rule (dense kernels are transposed). Reading checks that every tensor is consumed,
every variable is set and every shape is exact; writing produces the keys the HF class of the model type stores, so
`transformers.AlbertFor*.from_pretrained` loads the directory with no missing or unexpected keys.
"""

from __future__ import annotations

import logging
from typing import Dict, Iterable, Mapping, Optional, Sequence, Tuple

import numpy as np
from safetensors.numpy import load as load_safetensors
from safetensors.numpy import save as save_safetensors

from official_albert import file_io
from official_albert import model_directory as md
from official_albert.checkpoints.names import CheckpointMismatchError
from official_albert.checkpoints.names import HF_DERIVED_KEYS
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
  missing, unexpected, misshaped, skipped, allowed = [], [], [], {}, []
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


def _check_tied(state: Mapping[str, np.ndarray], source: str) -> None:
  pairs = (("predictions.decoder.weight", "albert.embeddings.word_embeddings.weight"),
           ("predictions.decoder.bias", "predictions.bias"))
  for derived, original in pairs:
    if derived in state and original in state and not np.array_equal(np.asarray(state[derived]),
                                                                     np.asarray(state[original])):
      raise CheckpointMismatchError(f"Checkpoint {source}: {derived} should be tied to {original} but differs; "
                                    "ALBERT ties the MLM output projection to the input table.")


def read_hf_weights(directory: str) -> Tuple[Dict[str, np.ndarray], str]:
  """Reads `model.safetensors` (numpy API, no torch) or, when torch is installed, `pytorch_model.bin`."""
  safetensors_path = md.path(directory, md.HF_WEIGHTS_FILE)
  if file_io.exists(safetensors_path):
    with file_io.open_file(safetensors_path, "rb") as f:
      return load_safetensors(f.read()), safetensors_path
  bin_path = md.path(directory, md.HF_TORCH_WEIGHTS_FILE)
  if file_io.exists(bin_path):
    try:
      import torch  # noqa: PLC0415 (optional extra)
    except ImportError:
      raise ImportError(f"{bin_path} is a PyTorch pickle; install torch to read it, or convert it to "
                        f"{md.HF_WEIGHTS_FILE}.") from None
    state = torch.load(bin_path, map_location="cpu", weights_only=True)
    return {k: v.float().numpy() if v.is_floating_point() else v.numpy() for k, v in state.items()}, bin_path
  raise FileNotFoundError(f"{directory}: no {md.HF_WEIGHTS_FILE} or {md.HF_TORCH_WEIGHTS_FILE}.")


def infer_num_outputs(state: Mapping[str, np.ndarray], config_path: str) -> Optional[int]:
  if "classifier.weight" in state:
    return int(np.shape(state["classifier.weight"])[0])
  data = md.read_json(config_path)
  if "id2label" in data:
    return len(data["id2label"])
  return data.get("num_labels")


# --------------------------------------------------------------------------------------------------- write
def hf_config_dict(model, model_type: str) -> Dict[str, object]:
  """HF `config.json` for `model` (architecture of the model type, labels for the classification heads)."""
  if model_type not in HF_ARCHITECTURES:
    raise ValueError(f"--model_type={model_type} has no Hugging Face class (HF has no ALBERT SQuAD 2.0 beam head); "
                     "use --output_format=native or tf1.")
  data = model.config.to_hf_dict()
  data["architectures"] = [HF_ARCHITECTURES[model_type][0]]
  if model_type in ("classifier", "token_classifier"):
    data["id2label"] = {str(i): f"LABEL_{i}" for i in range(model.num_labels)}
    data["label2id"] = {f"LABEL_{i}": i for i in range(model.num_labels)}
    if model_type == "classifier" and model.num_labels == 1:
      data["problem_type"] = "regression"
  return data


def hf_output_state(model, model_type: str) -> Tuple[Dict[str, np.ndarray], Dict[str, str]]:
  """Our weights under the names the HF class of `model_type` stores (and the names left out, with reasons)."""
  state = hf_state_dict(model)
  excluded = {}
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
