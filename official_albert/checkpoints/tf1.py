"""Original TF1 ALBERT checkpoints in and out (reference §1.3, §1.7, §6).

Our canonical variable names ARE the TF1 names of the original release (`checkpoints.tf1_variable_map`), so reading
an original checkpoint is a name lookup with full-consumption and exact-shape checks, and writing one is a
`tf.compat.v1.train.Saver` over the same {name: variable} map (works in eager mode). Checkpoints of TF-Hub modules
carry a `module/` prefix, which is stripped. Optimizer slots (`adam_m`, `adam_v`, `lamb_*`, AdamWeightDecayOptimizer
slots), `global_step` and loss-scale state are skipped and reported, never loaded.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import re
from typing import Dict, Mapping, Optional, Sequence, Tuple

import numpy as np
import tensorflow as tf

from official_albert import checkpoint_files
from official_albert import file_io
from official_albert import model_directory as md
from official_albert.checkpoints import names as checkpoints
from official_albert.config import AlbertConfig

logger = logging.getLogger(__name__)

TF1_CHECKPOINT_PREFIX = md.NATIVE_CHECKPOINT_PREFIX  # the release's name too
HUB_MODULE_PREFIX = "module/"

# (regex over the name after the optional `module/` prefix, why it is not a model weight).
_SKIP_RULES: Tuple[Tuple[re.Pattern, str], ...] = (
    (re.compile(r".*/(adam_m|adam_v)$"), "optimizer slot (AdamW/LAMB moment)"),
    (re.compile(r".*/lamb_[a-z_]+$"), "optimizer slot (LAMB)"),
    (re.compile(r".*/AdamWeightDecayOptimizer(_\d+)?$"), "optimizer slot (AdamWeightDecayOptimizer)"),
    (re.compile(r"(.*/)?global_step$"), "training step counter"),
    (re.compile(r"(.*/)?(current_loss_scale|good_steps|loss_scale)$"), "mixed-precision loss-scale state"),
    (re.compile(r"(.*/)?(beta1_power|beta2_power)$"), "optimizer state (Adam power accumulators)"),
)


def skip_reason(name: str) -> Optional[str]:
  """Why a TF1 checkpoint entry is not a model weight, or None when it is one."""
  for pattern, reason in _SKIP_RULES:
    if pattern.match(name):
      return reason
  return None


def checkpoint_head(path: str) -> Tuple[str, str]:
  """(the head a TF1 checkpoint's names hold, its resolved prefix): the reference scripts' scopes — "squad_v2"
  (`answer_class/`), "span" (`cls/squad/`), "classifier" (`output_weights` at the root: run_classifier's and
  run_race's, the sequence, token and multiple-choice classifiers alike), else "pretrainer"."""
  prefix = md.resolve_checkpoint(path)
  found = {n[len(HUB_MODULE_PREFIX):] if n.startswith(HUB_MODULE_PREFIX) else n
           for n, _ in tf.train.list_variables(prefix)}
  if any(n.startswith("answer_class/") for n in found):
    return "squad_v2", prefix
  if any(n.startswith("cls/squad/") for n in found):
    return "span", prefix
  return ("classifier" if "output_weights" in found else "pretrainer"), prefix


def read_tf1_checkpoint(path: str) -> Tuple[Dict[str, np.ndarray], Dict[str, str], str]:
  """Reads every tensor of an original TF1 checkpoint.

  Args:
    path: a checkpoint prefix (`.../model.ckpt-best`) or a directory holding one.

  Returns:
    (weights {TF1 name without `module/`: array}, skipped {file name: reason}, resolved prefix).

  Raises:
    ValueError: a name appears both with and without the `module/` prefix.
  """
  prefix = md.resolve_checkpoint(path)
  reader = tf.train.load_checkpoint(prefix)
  weights: Dict[str, np.ndarray] = {}
  skipped: Dict[str, str] = {}
  for file_name in sorted(reader.get_variable_to_shape_map()):
    name = file_name[len(HUB_MODULE_PREFIX):] if file_name.startswith(HUB_MODULE_PREFIX) else file_name
    reason = skip_reason(name)
    if reason:
      skipped[file_name] = reason
      continue
    if name in weights:
      raise ValueError(f"{prefix}: {name!r} appears both with and without the {HUB_MODULE_PREFIX!r} prefix.")
    weights[name] = reader.get_tensor(file_name)
  return weights, skipped, prefix


def assign_tf1_weights(model, weights: Mapping[str, np.ndarray], allow_missing: Sequence[str] = (),
                       allow_unused: Sequence[str] = (), source: str = "<weights>") -> Dict[str, object]:
  """Assigns {TF1 name: array} to `model` after checking names and exact shapes (nothing assigned on a mismatch).

  Args:
    model: one of our models (names from `checkpoints.tf1_variable_map`).
    weights: TF1-named arrays (optimizer slots already removed).
    allow_missing: globs of model variables that may be absent from `weights` (they keep their initial values).
    allow_unused: globs of file tensors the model may leave unused (e.g. `cls/*` when a classifier is built from a
      pretraining checkpoint).
    source: the file, for messages.

  Returns:
    Summary dict: `loaded`, `parameters`, `missing_allowed` [names], `unused` {name: reason}.

  Raises:
    checkpoints.CheckpointMismatchError: listing every missing, unexpected and mis-shaped name.
  """
  expected = checkpoints.tf1_variable_map(model)
  missing, unexpected, misshaped, unused, allowed = [], [], [], {}, []
  assignments = []
  for name, value in weights.items():
    variable = expected.get(name)
    if variable is None:
      if checkpoints.matches(name, allow_unused):
        unused[name] = "not used by this model (allowed by allow_unused)"
      else:
        unexpected.append(f"{name} {tuple(np.shape(value))}")
      continue
    array = np.asarray(value)
    if tuple(array.shape) != tuple(variable.shape):
      misshaped.append(f"{name}: file {tuple(array.shape)}, model {tuple(variable.shape)}")
      continue
    assignments.append((variable, array))
  for name, variable in expected.items():
    if name not in weights:
      if checkpoints.matches(name, allow_missing):
        allowed.append(name)
      else:
        missing.append(f"{name} {tuple(variable.shape)}")
  checkpoints.raise_if_mismatch(source, sorted(missing), sorted(unexpected), sorted(misshaped))
  for variable, array in assignments:
    variable.assign(array.astype(variable.dtype.name if hasattr(variable.dtype, "name") else variable.dtype))
  return {"loaded": len(assignments), "parameters": int(sum(a.size for _, a in assignments)),
          "missing_allowed": sorted(allowed), "unused": unused}


def load_tf1_checkpoint(model, path: str, allow_missing: Sequence[str] = (),
                        allow_unused: Sequence[str] = ()) -> Dict[str, object]:
  """Reads an original TF1 checkpoint into `model` (see `read_tf1_checkpoint` and `assign_tf1_weights`).

  Returns:
    The summary of `assign_tf1_weights` plus `skipped` {file name: reason} and `checkpoint` (the prefix).
  """
  weights, skipped, prefix = read_tf1_checkpoint(path)
  summary = assign_tf1_weights(model, weights, allow_missing=allow_missing, allow_unused=allow_unused,
                               source=prefix)
  summary.update(skipped=skipped, checkpoint=prefix)
  logger.info("Loaded %d tensors (%d parameters) from %s; skipped %d optimizer/step entries; allowed missing %s",
              summary["loaded"], summary["parameters"], prefix, len(skipped), summary["missing_allowed"])
  return summary


def save_tf1_checkpoint(model, directory: str, prefix_name: str = TF1_CHECKPOINT_PREFIX,
                        exclude: Sequence[str] = ()) -> Tuple[str, Dict[str, object]]:
  """Writes `model`'s weights under their original TF1 names (readable by `tf.train.load_checkpoint`, the original
  scripts' `init_checkpoint` and HF's `load_tf_weights_in_albert`).

  The files are written under a temporary prefix and renamed (data first, index last), then the `checkpoint` state
  file is written, so a crash never leaves an index pointing at missing data.

  Args:
    model: one of our models.
    directory: output directory (created).
    prefix_name: checkpoint file prefix inside `directory`.
    exclude: globs of TF1 names to leave out (e.g. `bert/pooler/*`).

  Returns:
    (checkpoint prefix, summary dict with `written`, `parameters`, `excluded`).
  """
  names = {n: v for n, v in checkpoints.tf1_variable_map(model).items() if not checkpoints.matches(n, exclude)}
  tf.io.gfile.makedirs(directory)
  prefix = os.path.join(directory, prefix_name)
  # Keras 3 variables are trackables that the Saver would name `<name>VARIABLE_VALUE`; the backing tf.Variable
  # gets exactly the name we give it.
  saver = tf.compat.v1.train.Saver(var_list={n: _tf_variable(v) for n, v in names.items()}, sharded=False)
  written = saver.save(None, checkpoint_files.temporary_checkpoint_prefix(prefix), write_meta_graph=False,
                       write_state=False)
  checkpoint_files.move_checkpoint(written, prefix)
  file_io.atomic_write_text(md.path(directory, md.CHECKPOINT_STATE_FILE),
                    f'model_checkpoint_path: "{prefix_name}"\nall_model_checkpoint_paths: "{prefix_name}"\n')
  excluded = sorted(set(checkpoints.tf1_variable_map(model)) - set(names))
  return prefix, {"written": len(names), "parameters": int(sum(int(np.prod(v.shape)) for v in names.values())),
                  "excluded": excluded}


def _tf_variable(variable):
  return variable if isinstance(variable, tf.Variable) else variable.value


def infer_num_outputs(weights: Mapping[str, np.ndarray], name: str = "output_weights") -> Optional[int]:
  """Rows of a transposed-logits head (`output_weights` [num_labels, H]) in a TF1 weight dict, if present."""
  value = weights.get(name)
  return None if value is None else int(np.shape(value)[0])


# ------------------------------------------------------------------------------------ original config file
# The original albert_config.json keys, in the release's order.
_ORIGINAL_CONFIG_KEYS = ("attention_probs_dropout_prob", "hidden_act", "hidden_dropout_prob", "embedding_size",
                         "hidden_size", "initializer_range", "intermediate_size", "max_position_embeddings",
                         "num_attention_heads", "num_hidden_layers", "num_hidden_groups", "net_structure_type",
                         "gap_size", "num_memory_blocks", "inner_group_num", "down_scale_factor", "type_vocab_size",
                         "vocab_size", "layers_to_keep")
# Fields the original config has no key for, written (as extra keys, which the original code ignores) when they differ
# from AlbertConfig's defaults, so that `AlbertConfig.from_json_file` reads them back.
_EXTRA_CONFIG_KEYS = ("classifier_dropout_prob", "pad_token_id", "bos_token_id", "eos_token_id")
# The epsilon the original modeling.py hard-codes in its layer_norm (not a key of its config).
_ORIGINAL_LAYER_NORM_EPS = 1e-12


def original_config_dict(config: AlbertConfig) -> Dict[str, object]:
  """The config as the original release's `albert_config.json` (its "gelu" is the tanh form)."""
  if config.sharing != "all":
    raise ValueError(f"AlbertConfig.sharing={config.sharing!r} cannot be written as an original albert_config.json "
                     "(the original code always shares attention and FFN per group).")
  act = {"gelu_new": "gelu", "relu": "relu", "tanh": "tanh", "linear": "linear"}.get(config.hidden_act)
  if act is None:
    raise ValueError(f"AlbertConfig.hidden_act={config.hidden_act!r} has no name in the original code (it knows "
                     "gelu [tanh form], relu, tanh, linear).")
  data = config.to_dict()
  out = {k: data[k] for k in _ORIGINAL_CONFIG_KEYS}
  out["hidden_act"] = act
  # The original code ignores keys it does not know; they carry a chunked/block-sparse model's attention back here,
  # and a LayerNorm epsilon other than the original's 1e-12 (an HF model trained with 1e-5), which the original code
  # cannot apply but `AlbertConfig.from_json_file` reads back: dropping it would change every output.
  out.update(config.attention_dict())
  if config.layer_norm_eps != _ORIGINAL_LAYER_NORM_EPS:
    out["layer_norm_eps"] = config.layer_norm_eps
  # Likewise the head's dropout and HF's token ids when not the defaults (an HF model's 0.2 classifier dropout would
  # come back as 0.1 from a file without it).
  defaults = {field.name: field.default for field in dataclasses.fields(AlbertConfig)}
  out.update({key: data[key] for key in _EXTRA_CONFIG_KEYS if data[key] != defaults[key]})
  return out


def write_tf1(model, output_dir: str) -> Dict[str, object]:
  """Writes `model.ckpt` with the original names + `albert_config.json` (original format)."""
  config = original_config_dict(model.config)
  prefix, info = save_tf1_checkpoint(model, output_dir)
  file_io.atomic_write_json(md.path(output_dir, md.TF1_CONFIG_FILE), config, sort_keys=False)
  return {"written": info["written"], "written_parameters": info["parameters"], "excluded": {},
          "files": [os.path.basename(prefix) + ".index", os.path.basename(prefix) + ".data-00000-of-00001",
                    md.CHECKPOINT_STATE_FILE, md.TF1_CONFIG_FILE]}
