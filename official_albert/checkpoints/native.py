"""Our native model directory: `config.json` (AlbertConfig) + a TF2 object-based checkpoint (+ `spiece.model`).

The checkpoint is written with `tf.train.Checkpoint(model=model)` under the prefix `model.ckpt`; the trainer's model
directories hold `ckpt-N` checkpoints with the same `model` root and are read the same way. Restores match by
object-graph path, so a classifier can be restored from a pretrainer's checkpoint (the heads it lacks are ignored),
while every variable of the model must find a value unless it is explicitly allowed to be missing.
"""

from __future__ import annotations

from typing import Dict, Optional, Sequence

import numpy as np
import tensorflow as tf

from official_albert import compat, file_io
from official_albert import model_directory as md
from official_albert.checkpoints.names import matches, raise_if_mismatch, tf1_variable_map

NATIVE_CHECKPOINT_PREFIX = md.NATIVE_CHECKPOINT_PREFIX


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
  matched = compat.restored_object_ids(status)
  names = tf1_variable_map(model)
  unmatched = [n for n, v in names.items() if id(v) not in matched and not matches(n, allow_missing)]
  raise_if_mismatch(checkpoint_prefix, sorted(unmatched), [], [])
  allowed = sorted(n for n, v in names.items() if id(v) not in matched and matches(n, allow_missing))
  return {"loaded": len(names) - len(allowed), "missing_allowed": allowed, "checkpoint": checkpoint_prefix}


def save_pretrained(model, directory: str, spm_model_file: Optional[str] = None) -> str:
  """Writes a native model directory: config.json + `model.ckpt` (+ spiece.model). Returns the checkpoint prefix."""
  tf.io.gfile.makedirs(directory)
  model.config.to_json_file(md.path(directory, md.CONFIG_FILE))
  prefix = md.path(directory, NATIVE_CHECKPOINT_PREFIX)
  written = tf.train.Checkpoint(model=model).write(file_io.temporary_checkpoint_prefix(prefix))
  file_io.move_checkpoint(written, prefix)
  if spm_model_file:
    file_io.atomic_copy(spm_model_file, md.path(directory, md.SPM_FILE))
  return prefix


def write_native(model, output_dir: str) -> Dict[str, object]:
  save_pretrained(model, output_dir)
  names = tf1_variable_map(model)
  return {"written": len(names), "written_parameters": int(sum(int(np.prod(v.shape)) for v in names.values())),
          "excluded": {}, "files": [md.CONFIG_FILE, NATIVE_CHECKPOINT_PREFIX + ".*"]}


def infer_num_outputs(directory: str) -> Optional[int]:
  """A classifier head's number of outputs in a native directory (or checkpoint prefix), None without one."""
  prefix = md.resolve_checkpoint(directory)
  for name, shape in tf.train.list_variables(prefix):
    if name.startswith("model/classifier/output_weights/"):
      return int(shape[0])
  return None


def skipped_entries(prefix: str, loaded: int) -> Dict[str, str]:
  """What an object-based checkpoint holds beyond the restored model weights, with the reason."""
  skipped = {}
  model_values = 0
  for name, _ in tf.train.list_variables(prefix):
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


def has_submodule(model_dir: str, attribute: str) -> bool:
  prefix = md.resolve_checkpoint(model_dir)
  return any(name.startswith(f"model/{attribute}/") for name, _ in tf.train.list_variables(prefix))
