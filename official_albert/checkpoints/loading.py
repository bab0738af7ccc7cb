"""Loading any ALBERT model directory: format detection, the list of model types, and `load_pretrained`.

Five directory formats are read: Hugging Face (`config.json` with HF keys + `model.safetensors`, or the TensorFlow
classes' `tf_model.h5`: "hf_tf"), our native directory (`config.json` + `model.ckpt` / `ckpt-N`), the original
release (`albert_config.json` + a TF1 checkpoint) and KerasHub presets (`config.json` of an `AlbertBackbone` +
`model.weights.h5`, optionally a task). `MODEL_TYPES` is the one list of heads that conversion, export and the
pipelines share; `build_model(model_type, config)` builds one, `load_model(dir, model_type)` builds and loads it
from any format.
"""

from __future__ import annotations

import os
from typing import Optional, Sequence, Union

import numpy as np

from official_albert import file_io
from official_albert import model_directory as md
from official_albert.checkpoints import hf
from official_albert.checkpoints import hf_tf
from official_albert.checkpoints import keras_hub_preset
from official_albert.checkpoints import native
from official_albert.checkpoints.formats import INPUT_FORMATS
from official_albert.checkpoints.formats import MODEL_TYPES
from official_albert.checkpoints.names import EXIT_HEADS_SCOPE
from official_albert.checkpoints.names import matches
from official_albert.checkpoints.names import tf1_variable_map
from official_albert.config import AlbertConfig

# The directory's questions are answered in `official_albert.model_directory`; these two stay importable from here.
from official_albert.model_directory import detect_format  # noqa: F401
from official_albert.model_directory import find_spm_model  # noqa: F401
from official_albert.modeling.early_exit import EXIT_HEAD_PREFIX
from official_albert.modeling.early_exit import EXIT_HEAD_TYPES
from official_albert.modeling.encoder import AlbertEncoder
from official_albert.modeling.models import AlbertClassifier
from official_albert.modeling.models import AlbertMultipleChoice
from official_albert.modeling.models import AlbertPretrainer
from official_albert.modeling.models import AlbertSpanLabeler
from official_albert.modeling.models import AlbertSquadV2Model
from official_albert.modeling.models import AlbertTokenClassifier

_POOLER_GLOB = "bert/pooler/*"
_SOP_GLOB = "cls/seq_relationship/*"


# MODEL_TYPES name → builder(config, num_labels, num_choices, exit_heads).
_BUILDERS = {
    "pretrainer": lambda c, labels, choices, exits: AlbertPretrainer(c),
    "encoder": lambda c, labels, choices, exits: AlbertEncoder(c),
    "classifier": lambda c, labels, choices, exits: AlbertClassifier(c, num_labels=labels, exit_heads=exits),
    "token_classifier": lambda c, labels, choices, exits: AlbertTokenClassifier(c, num_labels=labels),
    "span": lambda c, labels, choices, exits: AlbertSpanLabeler(c),
    "squad_v2": lambda c, labels, choices, exits: AlbertSquadV2Model(c),
    "multiple_choice": lambda c, labels, choices, exits: AlbertMultipleChoice(c, num_choices=choices,
                                                                              exit_heads=exits),
}


def build_model(model_type: str, config: AlbertConfig, num_labels: int = 2, num_choices: int = 4,
                exit_heads: bool = False):
  """One of our models by `MODEL_TYPES` name (the config is kept as is: dropout only acts with training=True)."""
  if model_type not in _BUILDERS:
    raise ValueError(f"--model_type={model_type!r} is not one of {MODEL_TYPES}.")
  if exit_heads and model_type not in EXIT_HEAD_TYPES:
    raise ValueError(f"exit_heads=True is for the {EXIT_HEAD_TYPES} heads, not {model_type!r}.")
  return _BUILDERS[model_type](config, num_labels, num_choices, exit_heads)


def _has_exit_heads(names) -> bool:
  """Whether checkpoint names (TF1, HF or native object paths) hold exit heads."""
  prefixes = (f"{EXIT_HEADS_SCOPE}/", "exit_classifiers.", f"model/{EXIT_HEAD_PREFIX}")
  return any(str(n).startswith(prefixes) for n in names)


def input_dir(input_format: str, path: str) -> str:
  if input_format == "tf1" and not file_io.isdir(path):
    return os.path.dirname(path) or "."
  return path


def _read(input_format, input_path, albert_config_file, model_type, num_labels, num_choices, allow_missing,
          allow_unused, exit_heads=None):
  """Builds the model, loads the input into it; returns (model, summary of the read).

  `exit_heads`: None = as the file (a classifier / multiple-choice file with exit heads gives a model with them);
  True for a file without them reports them missing (as any missing head), False leaves the file's unused.
  """
  allow_missing, allow_unused = list(allow_missing), list(allow_unused)

  def exits(names):
    """Whether to build exit heads; a file's exit heads that the model does not take are left unused."""
    names = list(names)
    wanted = (_has_exit_heads(names) if exit_heads is None else exit_heads) and model_type in EXIT_HEAD_TYPES
    if not wanted:
      allow_unused.extend([f"{EXIT_HEADS_SCOPE}/*", "exit_classifiers.*"])
    return wanted

  if model_type in ("span", "token_classifier") and input_format in ("hf", "hf_tf"):
    # HF builds these with add_pooling_layer=False, so their files have no pooler; ours keeps its initial one.
    allow_missing.append(_POOLER_GLOB)
  readers = {"tf1": _read_tf1, "hf": _read_hf, "hf_tf": _read_hf, "keras_hub": _read_keras_hub,
             "native": _read_native}
  if input_format not in readers:
    raise ValueError(f"--input_format={input_format!r} is not one of {INPUT_FORMATS}.")
  return readers[input_format](input_format, input_path, albert_config_file, model_type, num_labels, num_choices,
                               allow_missing, allow_unused, exits)


def _read_tf1(input_format, input_path, albert_config_file, model_type, num_labels, num_choices, allow_missing,
              allow_unused, exits):
  # Original TF1 checkpoints are read with TensorFlow's reader (imported here: HF directories load without it).
  from official_albert.checkpoints import tf1  # noqa: PLC0415 (TF-free module)
  weights, skipped, prefix = tf1.read_tf1_checkpoint(input_path)
  config_file = albert_config_file or md.path(input_dir(input_format, input_path), md.TF1_CONFIG_FILE)
  if not file_io.exists(config_file):
    raise FileNotFoundError(f"--albert_config_file is required for --input_format=tf1 ({config_file} not found).")
  config = AlbertConfig.from_json_file(config_file)
  if num_labels is None:
    num_labels = tf1.infer_num_outputs(weights) or 2
  model = build_model(model_type, config, num_labels, num_choices, exits(weights))
  return model, _assign_by_tf1_name(model, weights, skipped, prefix, allow_missing, allow_unused)


def _assign_by_tf1_name(model, weights, skipped, source, allow_missing, allow_unused):
  """The summary of assigning {TF1 name: value} (TF1 checkpoints, KerasHub presets) with the file's own skips."""
  from official_albert.checkpoints import tf1  # noqa: PLC0415 (TF-free module)
  summary = tf1.assign_tf1_weights(model, weights, allow_missing, allow_unused, source=source)
  summary["skipped"] = {**skipped, **summary.pop("unused")}
  summary["source"] = source
  return summary


def _read_hf(input_format, input_path, albert_config_file, model_type, num_labels, num_choices, allow_missing,
             allow_unused, exits):
  config_path = md.path(input_path, md.CONFIG_FILE)
  config = AlbertConfig.from_json_file(albert_config_file or config_path)
  state, source, file_skipped = _read_hf_family(input_format, input_path)
  if num_labels is None:
    num_labels = hf.infer_num_outputs(state, config_path) or 2
  if model_type == "pretrainer" and file_io.exists(config_path) and _is_masked_lm(config_path):
    allow_missing += [_SOP_GLOB, _POOLER_GLOB]  # (TF)AlbertForMaskedLM: no SOP head, no pooler
  model = build_model(model_type, config, num_labels, num_choices, exits(state))
  unused = {k: "not used by this model (allowed by allow_unused)" for k in state if matches(k, allow_unused)}
  state = {k: v for k, v in state.items() if k not in unused}
  summary = hf.load_hf_state_dict(model, state, allow_missing=allow_missing, source=source)
  summary["skipped"] = {**summary["skipped"], **unused, **file_skipped}
  summary["source"] = source
  return model, summary


def _read_keras_hub(input_format, input_path, albert_config_file, model_type, num_labels, num_choices,
                    allow_missing, allow_unused, exits):
  del input_format  # one reader per format
  config = (AlbertConfig.from_json_file(albert_config_file) if albert_config_file
            else keras_hub_preset.preset_config(input_path))
  if num_labels is None:
    num_labels = keras_hub_preset.preset_num_labels(input_path) or 2
  if model_type == "pretrainer" and keras_hub_preset.preset_model_type(input_path) == "pretrainer":
    allow_missing.append(_SOP_GLOB)  # AlbertMaskedLM has no sentence-order head
  weights, skipped, source = keras_hub_preset.read_preset_weights(input_path, model_type, config)
  model = build_model(model_type, config, num_labels, num_choices, exits(weights))
  return model, _assign_by_tf1_name(model, weights, skipped, source, allow_missing, allow_unused)


def _read_native(input_format, input_path, albert_config_file, model_type, num_labels, num_choices, allow_missing,
                 allow_unused, exits):
  del input_format, allow_unused  # a native checkpoint's extra entries are reported as skipped, never an error
  config = AlbertConfig.from_json_file(albert_config_file or md.path(input_path, md.CONFIG_FILE))
  prefix = md.resolve_checkpoint(input_path)
  if num_labels is None:
    num_labels = native.infer_num_outputs(prefix) or 2
  model = build_model(model_type, config, num_labels, num_choices, exits(native.variable_names(prefix)))
  summary = native.restore_native(model, prefix, allow_missing=allow_missing)
  summary.update(parameters=int(sum(int(np.prod(v.shape)) for n, v in tf1_variable_map(model).items()
                                    if n not in summary["missing_allowed"])),
                 skipped=native.skipped_entries(prefix, summary["loaded"]), source=summary.pop("checkpoint"))
  return model, summary


def _read_hf_family(input_format, input_path):
  """(HF state dict, source file, skipped {name: reason}) of an HF directory: `tf_model.h5` for "hf_tf", and for
  "hf" when the directory has neither model.safetensors nor pytorch_model.bin (nor a sharded one)."""
  has_torch_weights = any(file_io.exists(md.path(input_path, name)) for name in hf.HF_WEIGHT_FILES)
  if input_format == "hf_tf" or (not has_torch_weights and file_io.exists(md.path(input_path, md.HF_TF_WEIGHTS_FILE))):
    return hf_tf.read_hf_tf_weights(input_path)
  state, source = hf.read_hf_weights(input_path)
  return state, source, {}


def _is_masked_lm(config_path: str) -> bool:
  return any(str(a).endswith("AlbertForMaskedLM") for a in md.read_json(config_path).get("architectures") or [])


# A native checkpoint's head attribute → model type (the classifier-style heads share one attribute: see below).
_NATIVE_HEADS = (("mlm_head", "pretrainer"), ("span_head", "span"), ("squad_head", "squad_v2"))


def infer_model_type(input_format: str, input_path: str) -> str:
  """The head an input holds, for a conversion that names none.

  HF (also TFAlbert*) directories: their `architectures` entry; KerasHub presets: their task; native directories:
  the head in the checkpoint (a bare encoder, the pretrainer's MLM head, the span or SQuAD 2.0 head; a `classifier`
  head is the sequence, token or multiple-choice classifier alike, so it must be named); else "pretrainer" (TF1
  files carry no record of their head).
  """
  if input_format in ("hf", "hf_tf"):
    config_path = md.path(input_path, md.CONFIG_FILE)
    found = hf_tf.architecture_model_type(config_path) if file_io.exists(config_path) else None
    return found or "pretrainer"
  if input_format == "keras_hub":
    return keras_hub_preset.preset_model_type(input_path)
  if input_format == "native":
    attributes = native.model_attributes(input_path)
    for attribute, model_type in _NATIVE_HEADS:
      if attribute in attributes:
        return model_type
    if "classifier" in attributes:
      raise ValueError(f"{input_path}: a classifier-style head (sequence, token or multiple-choice classification "
                       "store the same variables); pass --model_type=classifier, token_classifier or "
                       "multiple_choice.")
    if attributes and "encoder" not in attributes:
      return "encoder"  # a bare AlbertEncoder was saved (its embeddings, blocks and pooler at the root)
  return "pretrainer"


# Head tensors, for taking the bare encoder out of any HF / TF1 file.
_HF_HEAD_GLOBS = ("predictions.*", "sop_classifier.*", "classifier.*", "qa_outputs.*")

_TF1_HEAD_GLOBS = ("cls/*", "output_*", "start_logits/*", "end_logits/*", "answer_class/*")


def load_model_from(input_format, input_path, albert_config_file, model_type, num_labels, num_choices, allow_missing,
          allow_unused, exit_heads=None):
  """`_read`, plus `model_type="encoder"` from any file: read as a pretrainer whose heads may be absent, keep the
  encoder (the heads in the file are reported as unused)."""
  if (model_type != "encoder" or input_format == "keras_hub"
      or (input_format == "native" and not native.has_submodule(input_path, "encoder"))):
    # (A native directory saved from a bare AlbertEncoder has the encoder as the checkpoint's root.)
    return _read(input_format, input_path, albert_config_file, model_type, num_labels, num_choices, allow_missing,
                 allow_unused, exit_heads)
  head_globs = _HF_HEAD_GLOBS if input_format in ("hf", "hf_tf") else _TF1_HEAD_GLOBS
  allow_missing = list(allow_missing) + ["cls/*"]
  if input_format in ("hf", "hf_tf") and infer_model_type(input_format, input_path) in ("span", "token_classifier"):
    # AlbertForQuestionAnswering / AlbertForTokenClassification are saved without a pooler (add_pooling_layer=False):
    # the encoder keeps its initial one, reported in missing_allowed.
    allow_missing.append(_POOLER_GLOB)
  model, summary = _read(input_format, input_path, albert_config_file, "pretrainer", num_labels, num_choices,
                         allow_missing, list(allow_unused) + list(head_globs))
  summary["missing_allowed"] = [n for n in summary["missing_allowed"] if not n.startswith("cls/")]
  return model.encoder, summary


def load_model(model_dir: Union[str, md.ModelDirectory], model_type: str = "pretrainer",
               num_labels: Optional[int] = None, num_choices: int = 4, allow_missing: Sequence[str] = (),
               exit_heads: Optional[bool] = None):
  """Builds and loads a model of `model_type` from a native, HF, KerasHub or original-release directory (format
  detected).

  `model_dir` is a path or a `ModelDirectory` (whose format is then read once for the caller and the load).
  `model_type="encoder"` takes the encoder out of any of them (heads in the file are ignored). `exit_heads`
  (classifier, multiple_choice): None = the model has exit heads when the file has them; True asks for them (a file
  without them is then a mismatch naming them, unless `allow_missing` covers `exit_heads/*`); False ignores them.
  Returns (model, summary).
  """
  directory = model_dir if isinstance(model_dir, md.ModelDirectory) else md.ModelDirectory(model_dir)
  return load_model_from(directory.model_format, directory.path, None, model_type, num_labels, num_choices,
                         allow_missing, (), exit_heads)


def load_pretrained(path: str, model=None, allow_missing: Sequence[str] = ()):
  """Loads an HF directory (config.json + model.safetensors, pytorch_model.bin, either sharded, or only
  tf_model.h5: the files `load_model` reads) or a native model directory.

  Args:
    path: the directory.
    model: optional model to load into (e.g. an `AlbertClassifier` built from the same config). Default: a new
      `AlbertPretrainer` built from the directory's config.
    allow_missing: globs over TF1 or HF names of model variables that may be absent (e.g. `cls/seq_relationship/*`
      for Hub checkpoints without the SOP head).

  Returns:
    The model, with `model.load_summary` describing what was loaded and skipped.
  """
  config_path = md.path(path, md.CONFIG_FILE)
  if not file_io.exists(config_path):
    raise FileNotFoundError(f"{path}: no {md.CONFIG_FILE} (expected an HF or native ALBERT model directory).")
  config = AlbertConfig.from_json_file(config_path)
  if model is None:
    model = AlbertPretrainer(config)
  elif model.config != config:
    raise ValueError(f"{path}: the model's config differs from {config_path}.")
  if md.is_hf_config(config_path):
    # The reader load_model uses: also an HF folder with only the TensorFlow classes' tf_model.h5.
    state, source, file_skipped = _read_hf_family("hf", path)
    model.load_summary = hf.load_hf_state_dict(model, state, allow_missing=allow_missing, source=source)
    model.load_summary["skipped"] = {**model.load_summary["skipped"], **file_skipped}
  else:
    model.load_summary = native.restore_native(model, md.resolve_checkpoint(path), allow_missing=allow_missing)
  return model
