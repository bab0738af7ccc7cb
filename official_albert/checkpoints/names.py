"""Checkpoint names and conversion: one declarative table between our variables, TF1 names and Hugging Face names.

Our canonical name for every variable is its name in the original TF1 release (reference §1.3), e.g.
`bert/encoder/transformer/group_0/inner_group_0/attention_1/self/query/kernel`. `tf1_variable_map(model)` walks a
model and returns {TF1 name: variable}; `HF_TABLE` maps TF1 prefixes to HF prefixes with the tensor layout rule, so
converting is a table lookup, not code. Every load checks that each tensor is consumed and each variable is set,
with exact shapes; anything missing, unexpected or mis-shaped raises an error that lists the names.

Native model directory: `config.json` (our AlbertConfig) + a TF2 object-based checkpoint written with
`tf.train.Checkpoint(model=model)` (prefix `model.ckpt`; training directories written by the trainer hold `ckpt-N`
checkpoints with the same `model` root and are read the same way) + optional `spiece.model`.
"""

from __future__ import annotations

import fnmatch
import logging
import os
import re
from typing import Dict, Iterable, Mapping, Optional, Sequence, Tuple

import numpy as np
import tensorflow as tf

from official_albert import file_io
from official_albert.config import AlbertConfig
from official_albert.modeling.models import (AlbertClassifier, AlbertMultipleChoice, AlbertPretrainer, AlbertSpanLabeler,
                                    AlbertSquadV2Model, AlbertTokenClassifier)

logger = logging.getLogger(__name__)

NATIVE_CHECKPOINT_PREFIX = "model.ckpt"
_TRANSFORMER = "bert/encoder/transformer"

# ------------------------------------------------------------------------------------------------- TF1 names
# (layer kind, leaf names): how a Keras sublayer's variables are named in TF1.
_DENSE = (("kernel", "kernel"), ("bias", "bias"))
_LAYER_NORM = (("gamma", "gamma"), ("beta", "beta"))


def _layer_vars(prefix: str, layer, leaves) -> Dict[str, tf.Variable]:
  return {f"{prefix}/{tf1_leaf}": getattr(layer, attr) for attr, tf1_leaf in leaves}


def _block_prefix(encoder, part: str, index: int) -> str:
  c = encoder.config
  if encoder._shared(part):
    group, inner = divmod(index, c.inner_group_num)
    return f"{_TRANSFORMER}/group_{group}/inner_group_{inner}"
  layer, inner = divmod(index, c.inner_group_num)
  # Beyond the reference (sharing ablation): per-layer blocks get a layer index instead of a group index.
  return f"{_TRANSFORMER}/layer_{layer}/inner_group_{inner}"


def encoder_variable_map(encoder) -> Dict[str, tf.Variable]:
  """{TF1 name: variable} for an `AlbertEncoder` (the `bert/*` scope)."""
  names: Dict[str, tf.Variable] = {}
  emb = encoder.embeddings
  names["bert/embeddings/word_embeddings"] = emb.word_embeddings
  names["bert/embeddings/token_type_embeddings"] = emb.token_type_embeddings
  names["bert/embeddings/position_embeddings"] = emb.position_embeddings
  names.update(_layer_vars("bert/embeddings/LayerNorm", emb.layer_norm, _LAYER_NORM))
  if encoder.embedding_hidden_mapping_in is not None:
    names.update(_layer_vars("bert/encoder/embedding_hidden_mapping_in", encoder.embedding_hidden_mapping_in, _DENSE))
  for index, attention in enumerate(encoder.attention_layers):
    prefix = _block_prefix(encoder, "attention", index)
    for proj in ("query", "key", "value"):
      names.update(_layer_vars(f"{prefix}/attention_1/self/{proj}", getattr(attention, proj), _DENSE))
    names.update(_layer_vars(f"{prefix}/attention_1/output/dense", attention.output_dense, _DENSE))
    names.update(_layer_vars(f"{prefix}/LayerNorm", attention.layer_norm, _LAYER_NORM))
  for index, ffn in enumerate(encoder.ffn_layers):
    prefix = _block_prefix(encoder, "ffn", index)
    names.update(_layer_vars(f"{prefix}/ffn_1/intermediate/dense", ffn.intermediate, _DENSE))
    names.update(_layer_vars(f"{prefix}/ffn_1/intermediate/output/dense", ffn.output_dense, _DENSE))
    names.update(_layer_vars(f"{prefix}/LayerNorm_1", ffn.layer_norm, _LAYER_NORM))
  names.update(_layer_vars("bert/pooler/dense", encoder.pooler, _DENSE))
  return names


def _transposed_logits_vars(prefix: str, layer) -> Dict[str, tf.Variable]:
  sep = "/" if prefix else ""
  return {f"{prefix}{sep}output_weights": layer.output_weights, f"{prefix}{sep}output_bias": layer.output_bias}


def tf1_variable_map(model) -> Dict[str, tf.Variable]:
  """{TF1 name: variable} for any of our models (reference §1.3; task heads as the original scripts name them)."""
  from official_albert.modeling.encoder import AlbertEncoder  # local: avoid a cycle in type checks only
  if isinstance(model, AlbertEncoder):
    return encoder_variable_map(model)
  names = encoder_variable_map(model.encoder)
  if isinstance(model, AlbertPretrainer):
    head = model.mlm_head
    names.update(_layer_vars("cls/predictions/transform/dense", head.dense, _DENSE))
    names.update(_layer_vars("cls/predictions/transform/LayerNorm", head.layer_norm, _LAYER_NORM))
    names["cls/predictions/output_bias"] = head.output_bias
    names.update(_transposed_logits_vars("cls/seq_relationship", model.sop_head))
  elif isinstance(model, (AlbertClassifier, AlbertTokenClassifier, AlbertMultipleChoice)):
    # run_classifier.py / run_race.py create `output_weights` / `output_bias` at the root scope.
    names.update(_transposed_logits_vars("", model.classifier))
  elif isinstance(model, AlbertSpanLabeler):
    names.update(_transposed_logits_vars("cls/squad", model.span_head))
  elif isinstance(model, AlbertSquadV2Model):
    head = model.squad_head
    names.update(_layer_vars("start_logits/dense", head.start_dense, _DENSE))
    names.update(_layer_vars("end_logits/dense_0", head.end_dense_0, _DENSE))
    names.update(_layer_vars("end_logits/LayerNorm", head.end_layer_norm, _LAYER_NORM))
    names.update(_layer_vars("end_logits/dense_1", head.end_dense_1, _DENSE))
    names.update(_layer_vars("answer_class/dense_0", head.answer_dense_0, _DENSE))
    names["answer_class/dense_1/kernel"] = head.answer_dense_1.kernel
  else:
    raise TypeError(f"No checkpoint name table for {type(model).__name__}.")
  return names


# -------------------------------------------------------------------------------------------- the HF table
# Rows: (TF1 prefix regex, HF prefix template, kind). Kinds: "dense" (kernel [in,out] ↔ weight [out,in] transposed,
# bias ↔ bias), "layer_norm" (gamma ↔ weight, beta ↔ bias), "tensor" (same array, same layout).
_G = r"(?P<g>\d+)"
_I = r"(?P<i>\d+)"
_LAYER = f"albert.encoder.albert_layer_groups.{{g}}.albert_layers.{{i}}"
HF_TABLE: Tuple[Tuple[str, str, str], ...] = (
    ("bert/embeddings/word_embeddings", "albert.embeddings.word_embeddings.weight", "tensor"),
    ("bert/embeddings/token_type_embeddings", "albert.embeddings.token_type_embeddings.weight", "tensor"),
    ("bert/embeddings/position_embeddings", "albert.embeddings.position_embeddings.weight", "tensor"),
    ("bert/embeddings/LayerNorm", "albert.embeddings.LayerNorm", "layer_norm"),
    ("bert/encoder/embedding_hidden_mapping_in", "albert.encoder.embedding_hidden_mapping_in", "dense"),
    (f"{_TRANSFORMER}/group_{_G}/inner_group_{_I}/attention_1/self/(?P<p>query|key|value)",
     f"{_LAYER}.attention.{{p}}", "dense"),
    (f"{_TRANSFORMER}/group_{_G}/inner_group_{_I}/attention_1/output/dense", f"{_LAYER}.attention.dense", "dense"),
    (f"{_TRANSFORMER}/group_{_G}/inner_group_{_I}/LayerNorm", f"{_LAYER}.attention.LayerNorm", "layer_norm"),
    (f"{_TRANSFORMER}/group_{_G}/inner_group_{_I}/ffn_1/intermediate/dense", f"{_LAYER}.ffn", "dense"),
    (f"{_TRANSFORMER}/group_{_G}/inner_group_{_I}/ffn_1/intermediate/output/dense", f"{_LAYER}.ffn_output",
     "dense"),
    (f"{_TRANSFORMER}/group_{_G}/inner_group_{_I}/LayerNorm_1", f"{_LAYER}.full_layer_layer_norm", "layer_norm"),
    ("bert/pooler/dense", "albert.pooler", "dense"),
    ("cls/predictions/transform/dense", "predictions.dense", "dense"),
    ("cls/predictions/transform/LayerNorm", "predictions.LayerNorm", "layer_norm"),
    ("cls/predictions/output_bias", "predictions.bias", "tensor"),
    ("cls/seq_relationship/output_weights", "sop_classifier.classifier.weight", "tensor"),
    ("cls/seq_relationship/output_bias", "sop_classifier.classifier.bias", "tensor"),
    ("output_weights", "classifier.weight", "tensor"),
    ("output_bias", "classifier.bias", "tensor"),
    ("cls/squad/output_weights", "qa_outputs.weight", "tensor"),
    ("cls/squad/output_bias", "qa_outputs.bias", "tensor"),
)
_LEAVES = {
    "dense": (("kernel", "weight", True), ("bias", "bias", False)),
    "layer_norm": (("gamma", "weight", False), ("beta", "bias", False)),
    "tensor": (("", "", False),),
}
# HF keys that hold no independent value: buffers and tied copies (checked for consistency, not loaded).
HF_DERIVED_KEYS = {
    "albert.embeddings.position_ids": "position-id buffer (arange), not a weight",
    "predictions.decoder.weight": "tied to albert.embeddings.word_embeddings.weight",
    "predictions.decoder.bias": "tied to predictions.bias",
}


def _compiled_table():
  rows = []
  for tf1_prefix, hf_prefix, kind in HF_TABLE:
    for tf1_leaf, hf_leaf, transpose in _LEAVES[kind]:
      tf1_pattern = tf1_prefix + (f"/{tf1_leaf}" if tf1_leaf else "")
      hf_template = hf_prefix + (f".{hf_leaf}" if hf_leaf else "")
      rows.append((re.compile(tf1_pattern + "$"), hf_template, transpose))
  return rows


_COMPILED = _compiled_table()


def tf1_to_hf_name(tf1_name: str) -> Tuple[str, bool]:
  """TF1 name → (HF name, transpose?). Raises KeyError when the table has no row for it."""
  for pattern, template, transpose in _COMPILED:
    match = pattern.match(tf1_name)
    if match:
      return template.format(**match.groupdict()), transpose
  raise KeyError(f"No Hugging Face name for TF1 variable {tf1_name!r} (the HF format cannot hold it).")


# ---------------------------------------------------------------------------------------------- assignment
class CheckpointMismatchError(ValueError):
  """A checkpoint does not match the model: lists missing, unexpected and mis-shaped names."""


def _matches(name: str, patterns: Iterable[str]) -> bool:
  return any(fnmatch.fnmatchcase(name, p) for p in patterns)


def raise_if_mismatch(source: str, missing: Sequence[str], unexpected: Sequence[str],
                      misshaped: Sequence[str]) -> None:
  if not (missing or unexpected or misshaped):
    return
  parts = [f"Checkpoint {source} does not match the model."]
  for title, items in (("missing (in the model, not in the file)", missing),
                       ("unexpected (in the file, not in the model)", unexpected), ("wrong shape", misshaped)):
    if items:
      shown = "\n    ".join(items[:50]) + (f"\n    ... and {len(items) - 50} more" if len(items) > 50 else "")
      parts.append(f"  {len(items)} {title}:\n    {shown}")
  parts.append("  (pass allow_missing=[glob, ...] for heads the file is known not to have, e.g. "
               "'cls/seq_relationship/*' for Hub checkpoints without the SOP head)")
  raise CheckpointMismatchError("\n".join(parts))


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
      if _matches(tf1_name, allow_missing) or _matches(hf_name, allow_missing):
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


# ------------------------------------------------------------------------------------------------- files
def read_hf_weights(directory: str) -> Tuple[Dict[str, np.ndarray], str]:
  """Reads `model.safetensors` (numpy API, no torch) or, when torch is installed, `pytorch_model.bin`."""
  safetensors_path = os.path.join(directory, "model.safetensors")
  if tf.io.gfile.exists(safetensors_path):
    from safetensors.numpy import load as load_safetensors
    with tf.io.gfile.GFile(safetensors_path, "rb") as f:
      return load_safetensors(f.read()), safetensors_path
  bin_path = os.path.join(directory, "pytorch_model.bin")
  if tf.io.gfile.exists(bin_path):
    try:
      import torch
    except ImportError:
      raise ImportError(f"{bin_path} is a PyTorch pickle; install torch to read it, or convert it to "
                        "model.safetensors.") from None
    state = torch.load(bin_path, map_location="cpu", weights_only=True)
    return {k: v.float().numpy() if v.is_floating_point() else v.numpy() for k, v in state.items()}, bin_path
  raise FileNotFoundError(f"{directory}: no model.safetensors or pytorch_model.bin.")


def is_hf_config(path: str) -> bool:
  import json
  with tf.io.gfile.GFile(path, "r") as f:
    data = json.load(f)
  return "model_type" in data or "architectures" in data or "transformers_version" in data


def find_native_checkpoint(directory: str) -> str:
  """The checkpoint prefix in a native model directory (`model.ckpt`, else the latest `ckpt-N`)."""
  prefix = os.path.join(directory, NATIVE_CHECKPOINT_PREFIX)
  if tf.io.gfile.exists(prefix + ".index"):
    return prefix
  latest = tf.train.latest_checkpoint(directory)
  if latest:
    return latest
  raise FileNotFoundError(f"{directory}: no TF checkpoint ({NATIVE_CHECKPOINT_PREFIX}.index or a `checkpoint` file).")


def restore_native(model, checkpoint_prefix: str, root_attribute: str = "model",
                   allow_missing: Sequence[str] = ()) -> Dict[str, object]:
  """Restores an object-based checkpoint written as `tf.train.Checkpoint(model=...)` (also by the trainer).

  Every variable of `model` must receive a value unless its TF1 name matches `allow_missing` (globs). Values in the
  file that the model does not have (e.g. the MLM/SOP heads when a classifier is warm-started from a pretrainer, or
  optimizer slots of a training checkpoint) are ignored.
  """
  status = tf.train.Checkpoint(**{root_attribute: model}).read(checkpoint_prefix)
  status.expect_partial()
  # Object-based restores match by object-graph path; list the variables that found no value.
  matched = {id(obj) for obj in status._checkpoint.object_by_proto_id.values()}  # pylint: disable=protected-access
  names = tf1_variable_map(model)
  unmatched = [n for n, v in names.items() if id(v) not in matched and not _matches(n, allow_missing)]
  raise_if_mismatch(checkpoint_prefix, sorted(unmatched), [], [])
  allowed = sorted(n for n, v in names.items() if id(v) not in matched and _matches(n, allow_missing))
  return {"loaded": len(names) - len(allowed), "missing_allowed": allowed, "checkpoint": checkpoint_prefix}


def save_pretrained(model, directory: str, spm_model_file: Optional[str] = None) -> str:
  """Writes a native model directory: config.json + `model.ckpt` (+ spiece.model). Returns the checkpoint prefix."""
  tf.io.gfile.makedirs(directory)
  model.config.to_json_file(os.path.join(directory, "config.json"))
  prefix = os.path.join(directory, NATIVE_CHECKPOINT_PREFIX)
  written = tf.train.Checkpoint(model=model).write(file_io.temporary_checkpoint_prefix(prefix))
  file_io.move_checkpoint(written, prefix)
  if spm_model_file:
    file_io.atomic_copy(spm_model_file, os.path.join(directory, "spiece.model"))
  return prefix


def load_pretrained(path: str, model=None, allow_missing: Sequence[str] = ()):
  """Loads an HF directory (config.json + model.safetensors) or a native model directory.

  Args:
    path: the directory.
    model: optional model to load into (e.g. an `AlbertClassifier` built from the same config). Default: a new
      `AlbertPretrainer` built from the directory's config.
    allow_missing: globs over TF1 or HF names of model variables that may be absent (e.g. `cls/seq_relationship/*`
      for Hub checkpoints without the SOP head).

  Returns:
    The model, with `model.load_summary` describing what was loaded and skipped.
  """
  config_path = os.path.join(path, "config.json")
  if not tf.io.gfile.exists(config_path):
    raise FileNotFoundError(f"{path}: no config.json (expected an HF or native ALBERT model directory).")
  config = AlbertConfig.from_json_file(config_path)
  if model is None:
    model = AlbertPretrainer(config)
  elif model.config != config:
    raise ValueError(f"{path}: the model's config differs from {config_path}.")
  if is_hf_config(config_path):
    state, source = read_hf_weights(path)
    model.load_summary = load_hf_state_dict(model, state, allow_missing=allow_missing, source=source)
  else:
    model.load_summary = restore_native(model, find_native_checkpoint(path), allow_missing=allow_missing)
  return model
