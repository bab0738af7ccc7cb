r"""Converts ALBERT checkpoints between the original TF1 release, Hugging Face and our native model directory.

  python -m official_albert.convert_checkpoint --input_format=tf1 --input=albert_base/model.ckpt-best \
      --albert_config_file=albert_base/albert_config.json --output_format=hf --output_dir=/tmp/albert_base_hf

Formats:
  tf1     original checkpoint (`bert/...`, `cls/...`, optional TF-Hub `module/` prefix; optimizer slots and
          `global_step` are skipped and reported). Needs `--albert_config_file` unless `albert_config.json` lies
          beside the checkpoint. Output: `model.ckpt` + `checkpoint` + `albert_config.json` (original format).
  hf      Hugging Face directory: `config.json` + `model.safetensors` (input also `pytorch_model.bin`, read with
          `torch.load(weights_only=True)`). Output loads in `transformers.AlbertFor*.from_pretrained` with no missing
          or unexpected keys.
  native  our model directory (`config.json` + `model.ckpt`), as written by `checkpoints.save_pretrained`.

Every direction checks full consumption and exact shapes (an error lists the offending names) and prints a summary:
tensors, parameters, and what was skipped and why. A `spiece.model` (or the release's `30k-clean.model`) next to
the input is copied to the output directory as `spiece.model`.
"""

from __future__ import annotations

import fnmatch
import json
import os
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

from absl import app, flags
import numpy as np
import tensorflow as tf

from official_albert.checkpoints import names as checkpoints
from official_albert.checkpoints import tf1 as tf1_checkpoints
from official_albert import file_io
from official_albert.config import AlbertConfig
from official_albert.modeling.models import (AlbertClassifier, AlbertMultipleChoice, AlbertPretrainer, AlbertSpanLabeler,
                                    AlbertSquadV2Model, AlbertTokenClassifier)

FORMATS = ("tf1", "hf", "native")
MODEL_TYPES = ("pretrainer", "encoder", "classifier", "token_classifier", "span", "squad_v2", "multiple_choice")
# HF class for each model type; the HF classes marked `no_pooler` are built with add_pooling_layer=False.
HF_ARCHITECTURES = {
    "pretrainer": ("AlbertForPreTraining", False),
    "encoder": ("AlbertModel", False),
    "classifier": ("AlbertForSequenceClassification", False),
    "token_classifier": ("AlbertForTokenClassification", True),
    "span": ("AlbertForQuestionAnswering", True),
    "multiple_choice": ("AlbertForMultipleChoice", False),
}
_POOLER_GLOB = "bert/pooler/*"
SPM_NAMES = ("spiece.model", "30k-clean.model")
# The original albert_config.json keys, in the release's order.
_ORIGINAL_CONFIG_KEYS = ("attention_probs_dropout_prob", "hidden_act", "hidden_dropout_prob", "embedding_size",
                         "hidden_size", "initializer_range", "intermediate_size", "max_position_embeddings",
                         "num_attention_heads", "num_hidden_layers", "num_hidden_groups", "net_structure_type",
                         "gap_size", "num_memory_blocks", "inner_group_num", "down_scale_factor", "type_vocab_size",
                         "vocab_size", "layers_to_keep")


# ------------------------------------------------------------------------------------------------ helpers
def build_model(model_type: str, config: AlbertConfig, num_labels: int = 2, num_choices: int = 4):
  """One of our models by `MODEL_TYPES` name (the config is kept as is: dropout only acts with training=True)."""
  from official_albert.modeling.encoder import AlbertEncoder
  if model_type == "pretrainer":
    return AlbertPretrainer(config)
  if model_type == "encoder":
    return AlbertEncoder(config)
  if model_type == "classifier":
    return AlbertClassifier(config, num_labels=num_labels)
  if model_type == "token_classifier":
    return AlbertTokenClassifier(config, num_labels=num_labels)
  if model_type == "span":
    return AlbertSpanLabeler(config)
  if model_type == "squad_v2":
    return AlbertSquadV2Model(config)
  if model_type == "multiple_choice":
    return AlbertMultipleChoice(config, num_choices=num_choices)
  raise ValueError(f"--model_type={model_type!r} is not one of {MODEL_TYPES}.")


def _matches(name: str, patterns: Sequence[str]) -> bool:
  return any(fnmatch.fnmatchcase(name, p) for p in patterns)


def _input_dir(input_format: str, path: str) -> str:
  if input_format == "tf1" and not tf.io.gfile.isdir(path):
    return os.path.dirname(path) or "."
  return path


def find_spm_model(directory: str) -> Optional[str]:
  for name in SPM_NAMES:
    candidate = os.path.join(directory, name)
    if tf.io.gfile.exists(candidate):
      return candidate
  return None


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
  return out


def _infer_num_outputs_native(directory: str) -> Optional[int]:
  prefix = checkpoints.find_native_checkpoint(directory)
  for name, shape in tf.train.list_variables(prefix):
    if name.startswith("model/classifier/output_weights/"):
      return int(shape[0])
  return None


def _infer_num_outputs_hf(state: Mapping[str, np.ndarray], config_path: str) -> Optional[int]:
  if "classifier.weight" in state:
    return int(np.shape(state["classifier.weight"])[0])
  with tf.io.gfile.GFile(config_path) as f:
    data = json.load(f)
  if "id2label" in data:
    return len(data["id2label"])
  return data.get("num_labels")


def _native_skipped(prefix: str, loaded: int) -> Dict[str, str]:
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


# ------------------------------------------------------------------------------------------------ readers
def _read(input_format, input_path, albert_config_file, model_type, num_labels, num_choices, allow_missing,
          allow_unused):
  """Builds the model, loads the input into it; returns (model, summary of the read)."""
  allow_missing = list(allow_missing)
  if model_type in ("span", "token_classifier") and input_format == "hf":
    # HF builds these with add_pooling_layer=False, so their files have no pooler; ours keeps its initial one.
    allow_missing.append(_POOLER_GLOB)
  if input_format == "tf1":
    weights, skipped, prefix = tf1_checkpoints.read_tf1_checkpoint(input_path)
    config_file = albert_config_file or os.path.join(_input_dir("tf1", input_path), "albert_config.json")
    if not tf.io.gfile.exists(config_file):
      raise FileNotFoundError(f"--albert_config_file is required for --input_format=tf1 ({config_file} not found).")
    config = AlbertConfig.from_json_file(config_file)
    if num_labels is None:
      num_labels = tf1_checkpoints.infer_num_outputs(weights) or 2
    model = build_model(model_type, config, num_labels, num_choices)
    summary = tf1_checkpoints.assign_tf1_weights(model, weights, allow_missing, allow_unused, source=prefix)
    summary["skipped"] = {**skipped, **summary.pop("unused")}
    summary["source"] = prefix
    return model, summary
  if input_format == "hf":
    config_file = albert_config_file or os.path.join(input_path, "config.json")
    config = AlbertConfig.from_json_file(config_file)
    state, source = checkpoints.read_hf_weights(input_path)
    if num_labels is None:
      num_labels = _infer_num_outputs_hf(state, os.path.join(input_path, "config.json")) or 2
    model = build_model(model_type, config, num_labels, num_choices)
    unused = {k: "not used by this model (allowed by allow_unused)" for k in state if _matches(k, allow_unused)}
    state = {k: v for k, v in state.items() if k not in unused}
    summary = checkpoints.load_hf_state_dict(model, state, allow_missing=allow_missing, source=source)
    summary["skipped"] = {**summary["skipped"], **unused}
    summary["source"] = source
    return model, summary
  if input_format == "native":
    config = AlbertConfig.from_json_file(albert_config_file or os.path.join(input_path, "config.json"))
    if num_labels is None:
      num_labels = _infer_num_outputs_native(input_path) or 2
    model = build_model(model_type, config, num_labels, num_choices)
    prefix = checkpoints.find_native_checkpoint(input_path)
    summary = checkpoints.restore_native(model, prefix, allow_missing=allow_missing)
    summary.update(parameters=int(sum(int(np.prod(v.shape)) for n, v in checkpoints.tf1_variable_map(model).items()
                                      if n not in summary["missing_allowed"])),
                   skipped=_native_skipped(prefix, summary["loaded"]), source=summary.pop("checkpoint"))
    return model, summary
  raise ValueError(f"--input_format={input_format!r} is not one of {FORMATS}.")


def detect_format(model_dir: str) -> str:
  """"hf" or "native" (a `config.json`), or "tf1" (an `albert_config.json` beside a checkpoint, as released)."""
  config_path = os.path.join(model_dir, "config.json")
  if tf.io.gfile.exists(config_path):
    return "hf" if checkpoints.is_hf_config(config_path) else "native"
  if tf.io.gfile.exists(os.path.join(model_dir, "albert_config.json")):
    return "tf1"
  raise FileNotFoundError(f"{model_dir}: no config.json (HF or native model directory) or albert_config.json "
                          "(original release directory).")


def _native_has_submodule(model_dir: str, attribute: str) -> bool:
  prefix = checkpoints.find_native_checkpoint(model_dir)
  return any(name.startswith(f"model/{attribute}/") for name, _ in tf.train.list_variables(prefix))


# Head tensors, for taking the bare encoder out of any HF / TF1 file.
_HF_HEAD_GLOBS = ("predictions.*", "sop_classifier.*", "classifier.*", "qa_outputs.*")
_TF1_HEAD_GLOBS = ("cls/*", "output_*", "start_logits/*", "end_logits/*", "answer_class/*")


def _load(input_format, input_path, albert_config_file, model_type, num_labels, num_choices, allow_missing,
          allow_unused):
  """`_read`, plus `model_type="encoder"` from any file: read as a pretrainer whose heads may be absent, keep the
  encoder (the heads in the file are reported as unused)."""
  if model_type != "encoder" or (input_format == "native" and not _native_has_submodule(input_path, "encoder")):
    # (A native directory saved from a bare AlbertEncoder has the encoder as the checkpoint's root.)
    return _read(input_format, input_path, albert_config_file, model_type, num_labels, num_choices, allow_missing,
                 allow_unused)
  head_globs = _HF_HEAD_GLOBS if input_format == "hf" else _TF1_HEAD_GLOBS
  model, summary = _read(input_format, input_path, albert_config_file, "pretrainer", num_labels, num_choices,
                         list(allow_missing) + ["cls/*"], list(allow_unused) + list(head_globs))
  summary["missing_allowed"] = [n for n in summary["missing_allowed"] if not n.startswith("cls/")]
  return model.encoder, summary


def load_model(model_dir: str, model_type: str = "pretrainer", num_labels: Optional[int] = None,
               num_choices: int = 4, allow_missing: Sequence[str] = ()):
  """Builds and loads a model of `model_type` from a native, HF or original-release directory (format detected).

  `model_type="encoder"` takes the encoder out of any of them (heads in the file are ignored). Returns
  (model, summary).
  """
  return _load(detect_format(model_dir), model_dir, None, model_type, num_labels, num_choices, allow_missing, ())


# ------------------------------------------------------------------------------------------------ writers
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
  state = checkpoints.hf_state_dict(model)
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
  from safetensors.numpy import save as save_safetensors
  config = hf_config_dict(model, model_type)
  state, excluded = hf_output_state(model, model_type)
  tf.io.gfile.makedirs(output_dir)
  file_io.atomic_write_bytes(os.path.join(output_dir, "model.safetensors"),
                      save_safetensors({k: np.ascontiguousarray(v, dtype=np.float32) for k, v in state.items()},
                                       metadata={"format": "pt"}))
  file_io.atomic_write_json(os.path.join(output_dir, "config.json"), config)
  return {"written": len(state), "written_parameters": int(sum(v.size for v in state.values())),
          "excluded": excluded, "files": ["config.json", "model.safetensors"]}


def write_tf1(model, output_dir: str) -> Dict[str, object]:
  """Writes `model.ckpt` with the original names + `albert_config.json` (original format)."""
  config = original_config_dict(model.config)
  prefix, info = tf1_checkpoints.save_tf1_checkpoint(model, output_dir)
  file_io.atomic_write_json(os.path.join(output_dir, "albert_config.json"), config, sort_keys=False)
  return {"written": info["written"], "written_parameters": info["parameters"], "excluded": {},
          "files": [os.path.basename(prefix) + ".index", os.path.basename(prefix) + ".data-00000-of-00001",
                    "checkpoint", "albert_config.json"]}


def write_native(model, output_dir: str) -> Dict[str, object]:
  checkpoints.save_pretrained(model, output_dir)
  names = checkpoints.tf1_variable_map(model)
  return {"written": len(names), "written_parameters": int(sum(int(np.prod(v.shape)) for v in names.values())),
          "excluded": {}, "files": ["config.json", checkpoints.NATIVE_CHECKPOINT_PREFIX + ".*"]}


# ------------------------------------------------------------------------------------------------ entry point
def convert(input_format: str, input_path: str, output_format: str, output_dir: str,
            albert_config_file: Optional[str] = None, model_type: str = "pretrainer",
            num_labels: Optional[int] = None, num_choices: int = 4, allow_missing: Sequence[str] = (),
            allow_unused: Sequence[str] = (), spm_model_file: Optional[str] = None) -> Dict[str, object]:
  """Converts one checkpoint; returns the summary dict (also printed by the binary).

  Args:
    input_format, output_format: one of `FORMATS`.
    input_path: TF1 checkpoint prefix or directory; HF or native model directory.
    output_dir: created if absent.
    albert_config_file: config JSON (original, HF or native form); default: the one beside the input.
    model_type: one of `MODEL_TYPES` (which head the checkpoint holds).
    num_labels: classifier outputs; default: read from the checkpoint's head (else 2).
    num_choices: for `multiple_choice`.
    allow_missing: globs (TF1 or HF names) of model variables the input may lack; they keep their initial values.
    allow_unused: globs of input tensors the model may ignore (e.g. `cls/*` when taking the encoder out of a
      pretraining checkpoint).
    spm_model_file: SentencePiece model to copy as `spiece.model`; default: one found beside the input.

  Returns:
    dict with `input`, `output_dir`, `model_type`, `loaded`, `parameters`, `skipped` {name: reason},
    `missing_allowed`, `written`, `written_parameters`, `excluded` {name: reason}, `spm_model`.
  """
  for flag, value in (("input_format", input_format), ("output_format", output_format)):
    if value not in FORMATS:
      raise ValueError(f"--{flag}={value!r} is not one of {FORMATS}.")
  if model_type not in MODEL_TYPES:
    raise ValueError(f"--model_type={model_type!r} is not one of {MODEL_TYPES}.")
  if output_format == "hf":
    if model_type not in HF_ARCHITECTURES:
      raise ValueError(f"--model_type={model_type} has no Hugging Face class; use --output_format=native or tf1.")
  model, summary = _load(input_format, input_path, albert_config_file, model_type, num_labels, num_choices,
                         allow_missing, allow_unused)
  writer = {"hf": lambda: write_hf(model, model_type, output_dir), "tf1": lambda: write_tf1(model, output_dir),
            "native": lambda: write_native(model, output_dir)}[output_format]
  summary.update(writer())
  spm_model = spm_model_file or find_spm_model(_input_dir(input_format, input_path))
  if spm_model:
    tf.io.gfile.copy(spm_model, os.path.join(output_dir, "spiece.model"), overwrite=True)
  summary.update(input=input_path, input_format=input_format, output_dir=output_dir, output_format=output_format,
                 model_type=model_type, spm_model=spm_model)
  return summary


def format_summary(summary: Mapping[str, object]) -> str:
  """Human-readable lines for the binary's output."""
  lines = [f"Converted {summary['input_format']}:{summary['input']} -> {summary['output_format']}:"
           f"{summary['output_dir']} (model_type={summary['model_type']})",
           f"  read    {summary['loaded']} tensors, {summary['parameters']:,} parameters from {summary['source']}",
           f"  wrote   {summary['written']} tensors, {summary['written_parameters']:,} parameters"]
  skipped: Mapping[str, str] = summary.get("skipped") or {}
  if skipped:
    lines.append(f"  skipped (not model weights, or not used by this model type): {len(skipped)}")
    lines += [f"    {name}: {reason}" for name, reason in sorted(skipped.items())]
  for name in summary.get("missing_allowed") or []:
    lines.append(f"  not in the input (allowed; kept initial values): {name}")
  for name, reason in sorted((summary.get("excluded") or {}).items()):
    lines.append(f"  not written: {name}: {reason}")
  lines.append(f"  spiece.model: {'copied from ' + summary['spm_model'] if summary.get('spm_model') else 'none found'}")
  return "\n".join(lines)


def define_flags(fv: flags.FlagValues = flags.FLAGS) -> None:
  """Defines the binary's flags (in a function, so that importing the module never clashes with other binaries)."""
  flags.DEFINE_enum("input_format", None, FORMATS, "Format of --input.", flag_values=fv)
  flags.DEFINE_string("input", None, "TF1 checkpoint prefix/directory, or HF/native model directory.", flag_values=fv)
  flags.DEFINE_string("albert_config_file", None, "Config JSON (default: the one beside the input).", flag_values=fv)
  flags.DEFINE_enum("output_format", "native", FORMATS, "Format to write.", flag_values=fv)
  flags.DEFINE_string("output_dir", None, "Output directory.", flag_values=fv)
  flags.DEFINE_enum("model_type", "pretrainer", MODEL_TYPES, "Which model/head the checkpoint holds.", flag_values=fv)
  flags.DEFINE_integer("num_labels", None, "Classifier outputs (default: from the checkpoint).", flag_values=fv)
  flags.DEFINE_integer("num_choices", 4, "Choices for --model_type=multiple_choice.", flag_values=fv)
  flags.DEFINE_list("allow_missing", [], "Globs of model variables the input may lack (e.g. "
                    "'cls/seq_relationship/*').", flag_values=fv)
  flags.DEFINE_list("allow_unused", [], "Globs of input tensors the model may ignore (e.g. 'cls/*').", flag_values=fv)
  flags.DEFINE_string("spm_model_file", None, "SentencePiece model to copy as spiece.model.", flag_values=fv)
  flags.mark_flags_as_required(["input_format", "input", "output_dir"], flag_values=fv)


def main(argv: List[str], fv: flags.FlagValues = flags.FLAGS) -> None:
  del argv
  summary = convert(fv.input_format, fv.input, fv.output_format, fv.output_dir,
                    albert_config_file=fv.albert_config_file, model_type=fv.model_type, num_labels=fv.num_labels,
                    num_choices=fv.num_choices, allow_missing=fv.allow_missing, allow_unused=fv.allow_unused,
                    spm_model_file=fv.spm_model_file)
  print(format_summary(summary))


if __name__ == "__main__":
  define_flags()
  app.run(main)
