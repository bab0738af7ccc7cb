"""Our native model directory: `config.json` (AlbertConfig) + a TF2 object-based checkpoint (+ `spiece.model`).

The checkpoint is written with `tf.train.Checkpoint(model=model)` under the prefix `model.ckpt`; the trainer's model
directories hold `ckpt-N` checkpoints with the same `model` root and are read the same way. Restores match by
object-graph path, so a classifier can be restored from a pretrainer's checkpoint (the heads it lacks are ignored),
while every variable of the model must find a value unless it is explicitly allowed to be missing.

Under Keras' other backends (JAX, PyTorch) the same files are read by `_restore_by_path`: TensorFlow's checkpoint
reader gives the values, and each value's object-graph path (`model/encoder/pooler/_kernel`) is followed through the
model's attributes, the rule `tf.train.Checkpoint` itself matches by. That reader is the one place where loading a
native checkpoint needs TensorFlow there (it is imported on first use; an HF directory loads without it). Writing
native checkpoints stays on the TensorFlow backend.
"""

from __future__ import annotations

import logging
import os
import re
from typing import Dict, List, Optional, Sequence, Tuple

import keras
import numpy as np

from official_albert import checkpoint_files
from official_albert import compat
from official_albert import file_io
from official_albert import model_directory as md
from official_albert.checkpoints.names import CheckpointMismatchError
from official_albert.checkpoints.names import matches
from official_albert.checkpoints.names import raise_if_mismatch
from official_albert.checkpoints.names import tf1_variable_map

NATIVE_CHECKPOINT_PREFIX = md.NATIVE_CHECKPOINT_PREFIX
logger = logging.getLogger(__name__)
_VALUE_SUFFIX = "/.ATTRIBUTES/VARIABLE_VALUE"
_BEST_TOLD: set = set()  # the checkpoints `tell_the_best` warned about (once per process each)


def _tf():
  """TensorFlow, imported on first use (the checkpoint files are TensorFlow's)."""
  import tensorflow as tf  # noqa: PLC0415 (TF-free module)
  return tf


def _require_object_based(checkpoint_prefix: str) -> None:
  """Raises a ValueError naming the checkpoint and the flag to use when it is a TF1 name-based checkpoint (which the
  object-based restore would fail on with TensorFlow's internals)."""
  if md.is_name_based_checkpoint(checkpoint_prefix):
    raise ValueError(f"{checkpoint_prefix} is a TF1 name-based checkpoint (the original release's bert/... names), "
                     "not a native object-based one; read it with --input_format=tf1 (and its albert_config.json), "
                     "or remove the stale config.json beside it.")


def tell_the_best(prefix: str) -> str:
  """`prefix`, having warned (once per process and checkpoint) when it is a training run's newest `ckpt-N` read
  for answers while its folder's `model.ckpt-best` holds another step: `--mode=predict` answers with the best, the
  pipelines, exports, conversion and the server (`loading.load_model`) with the newest, as eval_results.json
  reports it, and the two can answer differently. (Not for a warm start: a run starts from the newest.)"""
  folder, name = os.path.split(prefix)
  best = md.path(folder or ".", md.BEST_CHECKPOINT_PREFIX)
  if name == md.BEST_CHECKPOINT_PREFIX or prefix in _BEST_TOLD or not file_io.exists(best + ".index"):
    return prefix
  if os.path.normpath(file_io.latest_checkpoint(folder or ".") or "") != os.path.normpath(prefix):
    return prefix  # (a ckpt-N named by the caller: the choice was made)
  step, best_step = md.checkpoint_step_of(folder, prefix), md.checkpoint_step_of(folder, best)
  if step >= 0 and best_step >= 0 and step != best_step:
    _BEST_TOLD.add(prefix)
    logger.warning("%s: reading %s (step %d, the newest checkpoint, which eval_results.json reports); its "
                   "model.ckpt-best (step %d, the best evaluation) is what --mode=predict answers with, so the two "
                   "can give other answers (docs/recipe.md, Which checkpoint answers).", folder or ".", name, step,
                   best_step)
  return prefix


def restore_native(model, checkpoint_prefix: str, root_attribute: str = "model",
                   allow_missing: Sequence[str] = ()) -> Dict[str, object]:
  """Restores an object-based checkpoint written as `tf.train.Checkpoint(model=...)` (also by the trainer).

  Every variable of `model` must receive a value unless its TF1 name matches `allow_missing` (globs). Values in the
  file that the model does not have (e.g. the MLM/SOP heads when a classifier is warm-started from a pretrainer, or
  optimizer slots of a training checkpoint) are ignored. A TF1 name-based checkpoint raises a ValueError that says
  to read it as tf1.
  """
  _require_object_based(checkpoint_prefix)
  _refuse_blocks_beyond_config(model, checkpoint_prefix)
  if keras.backend.backend() == "tensorflow":
    try:
      status = _tf().train.Checkpoint(**{root_attribute: model}).read(checkpoint_prefix)
    except ValueError as error:
      if "incompatible tensor with shape" not in str(error):
        raise
      raise CheckpointMismatchError(f"Checkpoint {checkpoint_prefix} does not match the model.\n  wrong shape: {error}"
                                    f"\n  {_CONFIG_HINT}") from None
    status.expect_partial()
    # Object-based restores match by object-graph path; list the variables that found no value.
    matched = compat.restored_object_ids(status)
  else:
    matched = _restore_by_path(model, checkpoint_prefix, root_attribute)
  names = tf1_variable_map(model)
  unmatched = [n for n, v in names.items() if id(v) not in matched and not matches(n, allow_missing)]
  raise_if_mismatch(checkpoint_prefix, sorted(unmatched), [], [])
  allowed = sorted(n for n, v in names.items() if id(v) not in matched and matches(n, allow_missing))
  return {"loaded": len(names) - len(allowed), "missing_allowed": allowed, "checkpoint": checkpoint_prefix}


_CONFIG_HINT = ("(the model's config — the directory's config.json or --albert_config_file — does not describe this "
                "checkpoint: an edited config.json, or another model's config; use the config it was saved with)")
_BLOCK = re.compile(r"(?:group|layer)_\d+_inner_group_\d+_(?:attention|ffn)$")  # (layer_*: sharing other than all)


def _refuse_blocks_beyond_config(model, checkpoint_prefix: str) -> None:
  """Raises when the checkpoint holds transformer blocks (`group_G_inner_group_I_*`, or `layer_L_...` unshared) the
  model lacks: a config with fewer groups, layers or inner blocks than the checkpoint's restored the blocks it named
  and dropped the rest, which changed every output with no error (a restore ignores values it has no variable
  for)."""
  from tensorflow.core.protobuf import trackable_object_graph_pb2  # noqa: PLC0415 (TF-free module)
  graph = trackable_object_graph_pb2.TrackableObjectGraph()
  graph.ParseFromString(_tf().train.load_checkpoint(checkpoint_prefix).get_tensor("_CHECKPOINTABLE_OBJECT_GRAPH"))
  in_file = {c.local_name for node in graph.nodes for c in node.children if _BLOCK.match(c.local_name)}
  in_model = {part for v in model.weights for part in v.path.split("/") if _BLOCK.match(part)}
  extra = sorted(in_file - in_model)
  if extra:
    config = getattr(model, "config", None)
    said = (f" (num_hidden_groups={config.num_hidden_groups}, inner_group_num={config.inner_group_num})"
            if config is not None else "")
    raise CheckpointMismatchError(
        f"Checkpoint {checkpoint_prefix} does not match the model: it holds {len(extra)} transformer blocks the "
        f"model{said} lacks: {', '.join(extra[:8])}{' ...' if len(extra) > 8 else ''}\n  {_CONFIG_HINT}")


def check_can_save(directory: str, writer: str = "save_pretrained") -> None:
  """Raises what a TensorFlow checkpoint written into `directory` would meet before anything is written: another
  Keras backend, or glob characters in the path (`file_io.check_checkpoint_path`)."""
  if keras.backend.backend() != "tensorflow":
    raise RuntimeError(f"{writer}({directory!r}) writes a TensorFlow checkpoint and needs "
                       f"KERAS_BACKEND=tensorflow (this process runs {keras.backend.backend()!r}); write an HF "
                       "directory with official_albert.checkpoints.hf.write_hf(model, model_type, directory) instead.")
  file_io.check_checkpoint_path(directory, f"{writer} directory")


def save_pretrained(model, directory: str, spm_model_file: Optional[str] = None) -> str:
  """Writes a native model directory: config.json + `model.ckpt` (+ spiece.model). Returns the checkpoint prefix.

  TensorFlow backend only (the checkpoint is TensorFlow's object graph); under JAX or PyTorch write an HF directory
  (`hf.write_hf`), which every backend reads.

  Raises:
    ValueError: `directory` holds a glob character (`[ ] * ? \\`): TensorFlow reads a checkpoint prefix as a glob,
      so `load_pretrained` could never find the checkpoint (`file_io.check_checkpoint_path`); nothing is written.
  """
  check_can_save(directory)
  tf = _tf()
  file_io.makedirs(directory)
  prefix = md.path(directory, NATIVE_CHECKPOINT_PREFIX)
  # The config goes in last, after the checkpoint, both written aside first: a save that fails (a full disk) leaves
  # the folder's previous model whole; the config first paired a new config with the old weights, which loaded
  # without an error where the shapes matched.
  with file_io.atomic_path(md.path(directory, md.CONFIG_FILE)) as config_tmp:
    with file_io.open_file(config_tmp, "w") as f:  # (the temporary is the atomic write: no second one)
      f.write(model.config.to_json_string())
    written = tf.train.Checkpoint(model=model).write(checkpoint_files.temporary_checkpoint_prefix(prefix))
    checkpoint_files.move_checkpoint(written, prefix)
  if spm_model_file:
    file_io.atomic_copy(spm_model_file, md.path(directory, md.SPM_FILE))
  return prefix


def write_native(model, output_dir: str) -> Dict[str, object]:
  save_pretrained(model, output_dir)
  names = tf1_variable_map(model)
  return {"written": len(names), "written_parameters": int(sum(int(np.prod(v.shape)) for v in names.values())),
          "excluded": {}, "files": [md.CONFIG_FILE, NATIVE_CHECKPOINT_PREFIX + ".*"]}


def variable_names(directory: str) -> List[str]:
  """The names in a native directory's (or checkpoint prefix's) checkpoint (a TF1 one raises, naming the flag)."""
  prefix = md.resolve_checkpoint(directory)
  _require_object_based(prefix)
  return [name for name, _ in _tf().train.list_variables(prefix)]


def infer_num_outputs(directory: str) -> Optional[int]:
  """A classifier head's number of outputs in a native directory (or checkpoint prefix), None without one."""
  prefix = md.resolve_checkpoint(directory)
  for name, shape in _tf().train.list_variables(prefix):
    if name.startswith("model/classifier/output_weights/"):
      return int(shape[0])
  return None


def skipped_entries(prefix: str, loaded: int) -> Dict[str, str]:
  """What an object-based checkpoint holds beyond the restored model weights, with the reason."""
  skipped = {}
  model_values = 0
  for name, _ in _tf().train.list_variables(prefix):
    if name == "_CHECKPOINTABLE_OBJECT_GRAPH":
      continue
    if not name.startswith("model/"):
      skipped[name] = "training state (optimizer, step counters), not a model weight"
    elif "/.OPTIMIZER_SLOT/" in name:
      skipped[name] = "optimizer slot"
    elif name.endswith("/.ATTRIBUTES/VARIABLE_VALUE"):
      model_values += 1
  if model_values > loaded:
    # Object-based restores match by object path; the leftovers are other heads (e.g. MLM/SOP for a classifier).
    skipped[f"{model_values - loaded} model tensors"] = "not part of this model type (another head)"
  return skipped


def model_attributes(model_dir: str, root_attribute: str = "model") -> List[str]:
  """The attributes under the checkpoint's `model` object (`encoder`, `mlm_head`, `classifier`, ... or, for a bare
  encoder, `embeddings`, `pooler`, ...), read from its object graph.

  The graph, not the value names: a trainer's checkpoint saves each variable once, under the first path that reaches
  it, which may be the optimizer's (`optimizer/_trainable_variables/3`), so `model/encoder/...` need not appear.
  """
  from tensorflow.core.protobuf import trackable_object_graph_pb2  # noqa: PLC0415 (TF-free module)
  prefix = md.resolve_checkpoint(model_dir)
  _require_object_based(prefix)
  reader = _tf().train.load_checkpoint(prefix)
  graph = trackable_object_graph_pb2.TrackableObjectGraph()
  graph.ParseFromString(reader.get_tensor("_CHECKPOINTABLE_OBJECT_GRAPH"))
  roots = [c.node_id for c in graph.nodes[0].children if c.local_name == root_attribute]
  return [c.local_name for c in graph.nodes[roots[0]].children] if roots else []


def has_submodule(model_dir: str, attribute: str) -> bool:
  return attribute in model_attributes(model_dir)


def _unescape(local_name: str) -> str:
  """An object-graph path component as the attribute name (TensorFlow writes "." as ".." and "/" as ".S")."""
  return re.sub(r"\.(.)", lambda m: "/" if m.group(1) == "S" else m.group(1), local_name)


def _child(obj, local_name: str):
  if isinstance(obj, (list, tuple)):
    return obj[int(local_name)] if local_name.isdigit() and int(local_name) < len(obj) else None
  if isinstance(obj, dict):
    return obj.get(local_name)
  return getattr(obj, local_name, None)


def _restore_by_path(model, checkpoint_prefix: str, root_attribute: str) -> set:
  """Assigns each saved `root_attribute/...` value to the variable at its path in `model` (JAX / PyTorch backends).

  Values whose path leads nowhere in this model (another head, optimizer slots, training state) are left, as the
  TensorFlow restore's `expect_partial` leaves them; a shape mismatch raises with the names and nothing is assigned.
  Returns the `id()`s of the variables that received a value.
  """
  reader = _tf().train.load_checkpoint(checkpoint_prefix)
  root = root_attribute + "/"
  assignments: List[Tuple[keras.Variable, str]] = []
  misshaped = []
  for key, shape in sorted(reader.get_variable_to_shape_map().items()):
    if not (key.startswith(root) and key.endswith(_VALUE_SUFFIX)) or "/.OPTIMIZER_SLOT/" in key:
      continue
    target = model
    for local_name in key[len(root):-len(_VALUE_SUFFIX)].split("/"):
      target = _child(target, _unescape(local_name))
      if target is None:
        break
    if not isinstance(target, keras.Variable):
      continue
    if tuple(shape) != tuple(target.shape):
      misshaped.append(f"{key}: file {tuple(shape)}, model {tuple(target.shape)} ({target.path})")
    else:
      assignments.append((target, key))
  raise_if_mismatch(checkpoint_prefix, [], [], misshaped)
  for variable, key in assignments:
    variable.assign(np.asarray(reader.get_tensor(key)).astype(keras.backend.standardize_dtype(variable.dtype)))
  return {id(variable) for variable, _ in assignments}
