"""Loading any ALBERT model directory: format detection, the list of model types, and `load_pretrained`.

Five directory formats are read: Hugging Face (`config.json` with HF keys + `model.safetensors`, or the TensorFlow
classes' `tf_model.h5`: "hf_tf"), our native directory (`config.json` + `model.ckpt` / `ckpt-N`), the original
release (`albert_config.json` + a TF1 checkpoint) and KerasHub presets (`config.json` of an `AlbertBackbone` +
`model.weights.h5`, optionally a task). `MODEL_TYPES` is the one list of heads that conversion, export and the
pipelines share; `build_model(model_type, config)` builds one, `load_model(dir, model_type)` builds and loads it
from any format.

Long because: each format's reader, format-specific allowances (HF heads without a pooler, masked-LM files without
the SOP head) and model-type inference must agree with one another, and are read together.
"""

from __future__ import annotations

import functools
import logging
import os
from typing import Dict, Optional, Sequence, Union

import keras
import numpy as np

from official_albert import file_io
from official_albert import model_directory as md
from official_albert.checkpoints import hf
from official_albert.checkpoints import hf_tf
from official_albert.checkpoints import keras_hub_preset
from official_albert.checkpoints import native
from official_albert.checkpoints.formats import INPUT_FORMATS
from official_albert.checkpoints.formats import MODEL_TYPES
from official_albert.checkpoints.names import CheckpointMismatchError
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
from official_albert.params_file import recorded_experiment
from official_albert.precision import DTYPE_POLICIES
from official_albert.precision import global_dtype_policy

logger = logging.getLogger(__name__)

_POOLER_GLOB = "bert/pooler/*"
_SOP_GLOB = "cls/seq_relationship/*"


def _built_in_load_policy(function):
  """Runs a loader under the policy models are loaded in: the caller's global Keras policy when it is one this
  project builds models in (`DTYPE_POLICIES`: float32, or mixed_bfloat16, under which export builds its bfloat16
  model), else float32.

  Why: layers take their dtype from the global policy, whose default is keras.json's `floatx`. A user's `"floatx":
  "float16"` built float16 variables that the float32 checkpoint could not be restored into (RestoreV2: "expected
  dtype half"), and a notebook's earlier `set_global_policy("mixed_float16")` made `classify` compute in float16,
  silently unlike the export and --mode=predict. The caller's policy is put back afterwards.
  """

  @functools.wraps(function)
  def wrapper(*args, **kwargs):
    policy = keras.config.dtype_policy().name
    if policy not in DTYPE_POLICIES.values():
      logger.info("Building the model in float32, not in the global Keras dtype policy %s (keras.json's floatx or "
                  "keras.mixed_precision.set_global_policy): the checkpoints are float32.", policy)
      policy = "float32"
    with global_dtype_policy(policy):
      return function(*args, **kwargs)

  return wrapper


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
  if input_format in ("tf1", "native") and not file_io.isdir(path):  # (a checkpoint prefix: its folder's files)
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
  config = AlbertConfig.from_json_file(albert_config_file or md.path(input_dir("native", input_path), md.CONFIG_FILE))
  prefix = native.tell_the_best(md.resolve_checkpoint(input_path))
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
# The experiments (params.yaml's `# experiment:` line, labels.json's "task") whose model has a `classifier`-style
# head, by the head's kind; glue/* are sequence classifiers too.
CLASSIFIER_KINDS = ("classifier", "token_classifier", "multiple_choice")
_EXPERIMENT_HEADS = {"text_classification": "classifier", "text_regression": "classifier",
                     "text_ranking": "classifier", "token_classification": "token_classifier",
                     "race": "multiple_choice", "text_multiple_choice": "multiple_choice"}


def recorded_classifier_kind(directory: str) -> Optional[str]:
  """The kind of `classifier` head (classifier / token_classifier / multiple_choice) a model directory's own records
  name: labels.json's "task", a reranker's ranking_training.json, params.yaml's experiment; None when none does."""
  names = []
  labels = md.read_label_file(directory)
  if labels is not None and labels.task:
    names.append(labels.task)
  if file_io.exists(md.path(directory, md.RANKING_TRAINING_FILE)):
    names.append("text_ranking")
  if file_io.exists(md.path(directory, md.PARAMS_FILE)):
    names.append(recorded_experiment(md.path(directory, md.PARAMS_FILE)))
  kinds = {"classifier" if name.startswith("glue") else _EXPERIMENT_HEADS.get(name) for name in names if name}
  kinds.discard(None)
  return kinds.pop() if len(kinds) == 1 else None


def check_recorded_kind(directory: str, model_type: str) -> None:
  """Refuses to read a native directory's classifier-style head as another kind than its run's records name: the
  sequence, token and multiple-choice classifiers store the same `classifier` variables, so a tagger read as a
  sequence classifier loads without an error and labels whole texts with its tags.

  Raises:
    ValueError: naming the directory, both kinds and the one to read it as.
  """
  if model_type not in CLASSIFIER_KINDS:
    return
  recorded = recorded_classifier_kind(directory)
  if recorded and recorded != model_type:
    raise ValueError(f"{directory}: its run's records (labels.json's task, params.yaml's experiment) say it was "
                     f"trained as a {recorded}, but it is read as a {model_type}: the two store the same variables, "
                     f"so it would load without an error and compute another task. Read it as a {recorded}.")


def infer_model_type(input_format: str, input_path: str) -> str:
  """The head an input holds, for a conversion that names none.

  HF (also TFAlbert*) directories: their `architectures` entry; KerasHub presets: their task; native directories and
  TF1 checkpoints: the head in the checkpoint (a bare encoder, the MLM head, the span or SQuAD 2.0 head; a
  classifier-style head is the sequence, token or multiple-choice classifier alike: the folder's records tell which,
  `recorded_classifier_kind`, else it must be named); else "pretrainer".
  """
  if input_format in ("hf", "hf_tf"):
    config_path = md.path(input_path, md.CONFIG_FILE)
    found = hf_tf.architecture_model_type(config_path) if file_io.exists(config_path) else None
    return found or "pretrainer"
  if input_format == "keras_hub":
    return keras_hub_preset.preset_model_type(input_path)
  if input_format == "tf1":
    return _tf1_head(input_path)
  if input_format == "native":
    attributes = native.model_attributes(input_path)
    for attribute, model_type in _NATIVE_HEADS:
      if attribute in attributes:
        return model_type
    if "classifier" in attributes:
      return _classifier_kind(input_dir("native", input_path), input_path)
    if attributes and "encoder" not in attributes:
      return "encoder"  # a bare AlbertEncoder was saved (its embeddings, blocks and pooler at the root)
  return "pretrainer"


def _tf1_head(input_path: str) -> str:
  """The head a TF1 checkpoint's names hold (`tf1.checkpoint_head`; each was read as a pretrainer's)."""
  from official_albert.checkpoints import tf1  # noqa: PLC0415 (TF-free module)
  head, prefix = tf1.checkpoint_head(input_path)
  return _classifier_kind(os.path.dirname(prefix) or ".", prefix) if head == "classifier" else head


def _classifier_kind(directory: str, where: str) -> str:
  """The kind of a classifier-style head as `directory`'s records name it, else a ValueError asking for it."""
  if recorded_classifier_kind(directory):
    return recorded_classifier_kind(directory)
  raise ValueError(f"{where}: a classifier-style head (sequence, token or multiple-choice classification store the "
                   "same variables); pass --model_type=classifier, token_classifier or multiple_choice.")


def _warn_if_architecture_differs(input_path: str, model_type: str) -> None:
  """Warns when an HF directory's `architectures` names another head than `model_type`: some such pairs load without
  a shape error (a sequence classifier's head read as a token classifier's, a multiple-choice head as a one-output
  regression) and then compute another task than the file was trained for."""
  config_path = md.path(input_path, md.CONFIG_FILE)
  found = hf_tf.architecture_model_type(config_path) if file_io.exists(config_path) else None
  if found is not None and found != model_type:
    logger.warning("%s: architectures %s is a %s, read here as --model_type=%s; the head's weights then compute "
                   "another task than they were trained for (omit --model_type to read the file's own head).",
                   config_path, md.read_json(config_path).get("architectures"), found, model_type)


# Head tensors, for taking the bare encoder out of any HF / TF1 file.
_HF_HEAD_GLOBS = ("predictions.*", "sop_classifier.*", "classifier.*", "qa_outputs.*")

_TF1_HEAD_GLOBS = ("cls/*", "output_*", "start_logits/*", "end_logits/*", "answer_class/*")


@_built_in_load_policy
def load_model_from(input_format, input_path, albert_config_file, model_type, num_labels, num_choices, allow_missing,
          allow_unused, exit_heads=None):
  """`_read`, plus `model_type="encoder"` from any file: read as a pretrainer whose heads may be absent, keep the
  encoder (the heads in the file are reported as unused)."""
  if input_format in ("hf", "hf_tf") and model_type != "encoder":  # (the encoder is taken out of any head's file)
    _warn_if_architecture_differs(input_path, model_type)
  if input_format == "native":
    check_recorded_kind(input_dir(input_format, input_path), model_type)
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
  Built in float32 whatever keras.json's floatx or a global float16 policy say (`_built_in_load_policy`).
  Returns (model, summary).
  """
  directory = model_dir if isinstance(model_dir, md.ModelDirectory) else md.ModelDirectory(model_dir)
  return load_model_from(directory.model_format, directory.path, None, model_type, num_labels, num_choices,
                         allow_missing, (), exit_heads)


@_built_in_load_policy
def load_pretrained(path: str, model=None, allow_missing: Sequence[str] = ()):
  """Loads an HF directory (config.json + model.safetensors, pytorch_model.bin, either sharded, or only
  tf_model.h5: the files `load_model` reads) or a native model directory.

  Args:
    path: the directory.
    model: optional model to load into (e.g. an `AlbertClassifier` built from the same config). Default: a new
      `AlbertPretrainer` built from the directory's config.
    allow_missing: globs over TF1 or HF names of model variables that may be absent (e.g. `cls/seq_relationship/*`
      for a checkpoint without the SOP head). Without `model`, an HF AlbertForMaskedLM folder (the Hub's
      albert-base-v2) needs none: its absent SOP head and pooler are allowed, as `load_model` allows them; into a
      given model they must be named here.

  Returns:
    The model, with `model.load_summary` describing what was loaded and skipped; its "unused" {name: reason} lists
    the file's model variables the model does not take (a native checkpoint's other head).

  Raises:
    CheckpointMismatchError: without `model`, a directory that holds a fine-tuned head (classifier, span, ...: its
      checkpoint, HF `architectures` or labels.json say so), naming the `load_model(path, model_type=...)` that reads
      it; and any mismatch, naming the missing variables and the file's unused ones.
  """
  config_path = md.path(path, md.CONFIG_FILE)
  if not file_io.exists(config_path):
    raise FileNotFoundError(f"{path}: no {md.CONFIG_FILE} (expected an HF or native ALBERT model directory).")
  config = AlbertConfig.from_json_file(config_path)
  is_hf = md.is_hf_config(config_path)
  own_model = model is None
  if own_model:
    _refuse_fine_tuned_head(path, is_hf)
    model = AlbertPretrainer(config)
  elif model.config != config:
    raise ValueError(f"{path}: the model's config differs from {config_path}.")
  if is_hf:
    # The reader load_model uses: also an HF folder with only the TensorFlow classes' tf_model.h5.
    state, source, file_skipped = _read_hf_family("hf", path)
    allow_missing = list(allow_missing)
    if own_model and _is_masked_lm(config_path):
      # (TF)AlbertForMaskedLM (the Hub's albert-base-v2) saves no SOP head and no pooler: as `_read_hf` does for
      # load_model, they keep their initial values and are reported in load_summary["missing_allowed"]. Not into a
      # caller's model (continued pretraining's restore_pretrainer): it names what may start random itself.
      allow_missing += [_SOP_GLOB, _POOLER_GLOB]
    model.load_summary = hf.load_hf_state_dict(model, state, allow_missing=allow_missing, source=source)
    model.load_summary["skipped"] = {**model.load_summary["skipped"], **file_skipped}
    model.load_summary["unused"] = {}  # (an HF tensor the model lacks is a mismatch error, named there)
    return model
  prefix = md.resolve_checkpoint(path)
  unused = unused_native_variables(model, prefix)
  try:
    model.load_summary = native.restore_native(model, prefix, allow_missing=allow_missing)
  except CheckpointMismatchError as error:
    raise CheckpointMismatchError(f"{error}\n{_unused_lines(unused)}" if unused else str(error)) from None
  model.load_summary["unused"] = unused
  return model


# The fine-tuned heads `load_pretrained` (an AlbertPretrainer) cannot give; labels.json's task → the head, where the
# checkpoint's classifier variables (shared by three heads) leave it open.
_FINE_TUNED_TYPES = ("classifier", "token_classifier", "span", "squad_v2", "multiple_choice")
_LABELS_TASK_HEADS = {"text_classification": "classifier", "text_regression": "classifier",
                      "token_classification": "token_classifier"}


def unused_native_variables(model, prefix: str) -> Dict[str, str]:
  """{object path: reason} of the model variables in native checkpoint `prefix` under a head `model` does not have
  (a fine-tuned classifier's `model/classifier/...` read into a pretrainer): what a load leaves unread.

  Read from the checkpoint's object graph (a trainer's checkpoint may key a variable by its optimizer path)."""
  import tensorflow as tf  # noqa: PLC0415 (HF directories load without TensorFlow)
  from tensorflow.core.protobuf import trackable_object_graph_pb2  # noqa: PLC0415
  graph = trackable_object_graph_pb2.TrackableObjectGraph()
  graph.ParseFromString(tf.train.load_checkpoint(prefix).get_tensor("_CHECKPOINTABLE_OBJECT_GRAPH"))
  roots = [c.node_id for c in graph.nodes[0].children if c.local_name == "model"]
  unused: Dict[str, str] = {}
  for head in graph.nodes[roots[0]].children if roots else ():
    if getattr(model, head.local_name, None) is not None:
      continue
    stack, seen = [(head.node_id, f"model/{head.local_name}")], set()
    while stack:
      node_id, name = stack.pop()
      if node_id not in seen:
        seen.add(node_id)
        if any(a.name == "VARIABLE_VALUE" for a in graph.nodes[node_id].attributes):
          unused[name] = f"the file's {head.local_name!r}, which {type(model).__name__} does not have"
        stack.extend((c.node_id, f"{name}/{c.local_name}") for c in graph.nodes[node_id].children)
  return dict(sorted(unused.items()))


def _unused_lines(unused: Dict[str, str]) -> str:
  names = list(unused)
  return f"  {len(names)} unused (in the file, not in the model):\n    " + "\n    ".join(names[:50])


def _refuse_fine_tuned_head(path: str, is_hf: bool) -> None:
  """Raises when `path` holds a fine-tuned head (its checkpoint's variables or HF `architectures` say so;
  labels.json's task tells the classifier-style heads apart), naming the `load_model` call that reads it: read as a
  pretrainer, the MLM/SOP heads are missing and `allow_missing` gave random ones while the trained head was dropped."""
  if is_hf:
    model_type, head = infer_model_type("hf", path), f"{md.CONFIG_FILE}'s architectures"
  else:
    attributes = native.model_attributes(path)
    found = [(t, a) for a, t in _NATIVE_HEADS + (("classifier", "classifier"),) if a in attributes]
    model_type, head = found[0] if found else ("pretrainer", "")
    head = f"checkpoint's {head!r} head"
  if model_type not in _FINE_TUNED_TYPES:
    return
  labels = md.read_label_file(path) if file_io.exists(md.path(path, md.LABELS_FILE)) else None
  said = f" and {md.LABELS_FILE} (task {labels.task!r})" if labels is not None and labels.task else ""
  other = ""
  if not is_hf and model_type == "classifier":
    model_type = _LABELS_TASK_HEADS.get(labels.task if labels is not None else "", "")
    other = "" if model_type else " (or 'token_classifier' / 'multiple_choice': the three store the same variables)"
    model_type = model_type or "classifier"
  unused = "" if is_hf else "\n" + _unused_lines(unused_native_variables(AlbertPretrainer(
      AlbertConfig.from_json_file(md.path(path, md.CONFIG_FILE))), md.resolve_checkpoint(path)))
  raise CheckpointMismatchError(
      f"{path} holds a fine-tuned {model_type} model (its {head}{said}), not a pretraining run: load_pretrained "
      f"builds an AlbertPretrainer, whose MLM/SOP heads the file lacks (allow_missing would give random ones and drop "
      f"the trained head). Use load_model({path!r}, model_type={model_type!r}){other}, or model_type='encoder' for "
      f"its encoder alone.{unused}")
