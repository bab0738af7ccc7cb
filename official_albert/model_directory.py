"""The model directory: the names of its files, written once, and the readers that find what it holds.

A model directory is what training writes and what conversion, export, the pipelines and fine-tuning read:

  config.json            the AlbertConfig (ours), Hugging Face's config (HF keys, + model.safetensors, or the
                         TensorFlow classes' tf_model.h5) or a KerasHub preset's backbone config (+ model.weights.h5)
  albert_config.json     the original release's config (beside a TF1 checkpoint)
  model.ckpt / ckpt-N    a TF checkpoint (`save_pretrained` / the trainer; `checkpoint` is TF's state file)
  model.ckpt-best        the trainer's best checkpoint (+ best_checkpoint.json: its step and metric)
  spiece.model           the SentencePiece model (the original release names it 30k-clean.model)
  labels.json            a classifier's label names, multi-label flag and threshold, and the columns it was trained on
  labels.txt             label names, one a line (a hand-written alternative; HF directories use config.json's id2label)
  *_training.json        embedding_ (text_embedding: loss, matryoshka_dims, the widths served), ranking_ (its loss)
  params.yaml            the effective experiment config of the run
  eval_results.json      the last evaluation; predictions/ holds --mode=predict's files
  train/, eval/          TensorBoard summaries
  input_state/           the workers' tf.data iterator checkpoints (+ topology.json)
  records/               the fine-tuning record cache

Every module that reads or writes one of these files names it through this module, and the questions a directory
answers — which format, which checkpoint, which SentencePiece model, which labels — have one answer each, here
(KerasHub's `preset_utils` plays this part for its presets). `ModelDirectory` resolves them once for a caller that
asks several. The module imports no TensorFlow (file_io reaches `tf.io.gfile` only for non-local paths and for TF's
checkpoint state file), so the OpenVINO runtime and the data tools can use it.

Long because: it is the one place where each question about a directory's files is answered (format, the readable
checkpoint and its fall-back, SentencePiece model, labels, the fine-tuning length), as the paragraph above says.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import os
from typing import Any, Dict, List, Optional

import yaml

from official_albert import checkpoint_files
from official_albert import file_io

logger = logging.getLogger(__name__)

CONFIG_FILE = "config.json"
TF1_CONFIG_FILE = "albert_config.json"
HF_WEIGHTS_FILE, HF_TORCH_WEIGHTS_FILE = "model.safetensors", "pytorch_model.bin"
# transformers' TensorFlow classes (TFAlbert*) save their weights as one Keras-2 HDF5 file.
HF_TF_WEIGHTS_FILE = "tf_model.h5"
NATIVE_CHECKPOINT_PREFIX = "model.ckpt"
CHECKPOINT_STATE_FILE = "checkpoint"
BEST_CHECKPOINT_PREFIX = "model.ckpt-best"
BEST_CHECKPOINT_INFO = "best_checkpoint.json"
SPM_FILE = "spiece.model"
# A KerasHub preset's SentencePiece model (its AlbertTokenizer's asset).
KERAS_HUB_SPM_FILE = os.path.join("assets", "tokenizer", "vocabulary.spm")
# SentencePiece model names looked for in a directory: ours, the original release's, a KerasHub preset's.
SPM_FILES = (SPM_FILE, "30k-clean.model", KERAS_HUB_SPM_FILE)
LABELS_FILE, LABELS_TEXT_FILE = "labels.json", "labels.txt"
PARAMS_FILE = "params.yaml"
EVAL_RESULTS_FILE = "eval_results.json"
PREDICTIONS_DIR = "predictions"
CHECKPOINT_NAME = "ckpt"  # the trainer's checkpoints: ckpt-N
INPUT_STATE_DIR = "input_state"
INPUT_TOPOLOGY_FILE = "topology.json"
RECORDS_DIR = "records"
# KerasHub preset folders (`keras_hub.models.*.save_to_preset`): the backbone's config is `config.json`.
KERAS_HUB_WEIGHTS_FILE = "model.weights.h5"
KERAS_HUB_TASK_FILE = "task.json"
KERAS_HUB_TASK_WEIGHTS_FILE = "task.weights.h5"
KERAS_HUB_TOKENIZER_FILE = "tokenizer.json"
KERAS_HUB_PREPROCESSOR_FILE = "preprocessor.json"
KERAS_HUB_METADATA_FILE = "metadata.json"
# Our full AlbertConfig beside a KerasHub preset we write: the fields KerasHub's config has no key for
# (initializer_range, both dropouts, token ids, fields added later) travel through it and back unchanged.
KERAS_HUB_ALBERT_CONFIG_FILE = "official_albert_config.json"
# The weight files an HF or KerasHub config.json is read with (with none of them, the folder holds no such model).
_CONFIG_WEIGHTS = {"hf": (HF_WEIGHTS_FILE, HF_TORCH_WEIGHTS_FILE, HF_TF_WEIGHTS_FILE, HF_WEIGHTS_FILE + ".index.json",
                          HF_TORCH_WEIGHTS_FILE + ".index.json"), "keras_hub": (KERAS_HUB_WEIGHTS_FILE,)}
# sentence-transformers folders: the module list, and the pooling module's settings (in the folder modules.json names).
SENTENCE_TRANSFORMERS_MODULES_FILE = "modules.json"
SENTENCE_TRANSFORMERS_POOLING_CONFIG = CONFIG_FILE
# A trained embedder's training settings (text_embedding: its loss, the Matryoshka widths `embed(..., dim=K)` checks
# K against; a file of its own: sentence-transformers passes its module configs' keys to constructors, so an extra
# key would stop it loading the folder), and a trained reranker's (text_ranking: its loss, for later eval runs);
# the tokenizer's options (do_lower_case: a cased model stays cased).
EMBEDDING_TRAINING_FILE, RANKING_TRAINING_FILE = "embedding_training.json", "ranking_training.json"
TOKENIZER_CONFIG_FILE = "tokenizer_config.json"
# text_classification's default `task.multi_label_threshold`: the probability at which a multi-label model predicts
# a label when labels.json does not say.
MULTI_LABEL_THRESHOLD = 0.5
# The entry an object-based (TF2) checkpoint holds its object graph in; a TF1 name-based checkpoint has none.
_OBJECT_GRAPH_KEY = "_CHECKPOINTABLE_OBJECT_GRAPH"


def path(directory: str, name: str) -> str:
  """`directory/name` (also for `gs://` directories)."""
  return os.path.join(os.fspath(directory), name)


def read_json(file_path: str) -> Any:
  """A JSON file of the directory; a broken one raises naming the file."""
  return file_io.read_json(file_path)


# ------------------------------------------------------------------------------------------------- format
def is_hf_config(config_file: str) -> bool:
  """True when a `config.json` was written by Hugging Face (its keys), False for our `AlbertConfig` file."""
  data = file_io.read_json_object(config_file, "model configuration")
  return "model_type" in data or "architectures" in data or "transformers_version" in data


def is_keras_hub_config(config_file: str) -> bool:
  """True when a `config.json` is a KerasHub preset's (a serialized `keras_hub>...Backbone`)."""
  data = file_io.read_json_object(config_file, "model configuration")
  origin = (str(data.get("registered_name") or ""), str(data.get("module", "")))
  return "class_name" in data and (origin[0].startswith("keras_hub>") or origin[1].startswith("keras_hub"))


def detect_format(directory: str) -> str:
  """"hf", "keras_hub" or "native" (a `config.json`), or "tf1" (an `albert_config.json` beside a checkpoint).

  An HF directory may hold `model.safetensors`, `pytorch_model.bin` or only the TensorFlow classes' `tf_model.h5`:
  the format is "hf" for all three (the reader picks the file; `--input_format=hf_tf` asks for tf_model.h5).
  """
  config_file = path(directory, CONFIG_FILE)
  if file_io.exists(config_file):
    found = "hf" if is_hf_config(config_file) else "keras_hub" if is_keras_hub_config(config_file) else "native"
    # A folder that held another model and then a TF1 one (convert_checkpoint into the same folder) may keep a stale
    # config.json beside the TF1 checkpoint and its albert_config.json: the checkpoint decides when the config.json
    # cannot be what is meant (a native one never reads a name-based checkpoint; an HF or KerasHub one lacks weights).
    if (not any(file_io.exists(path(directory, name)) for name in _CONFIG_WEIGHTS.get(found, ()))
        and file_io.exists(path(directory, TF1_CONFIG_FILE)) and _holds_name_based_checkpoint(directory)):
      return "tf1"
    return found
  if file_io.exists(path(directory, TF1_CONFIG_FILE)):
    return "tf1"
  raise FileNotFoundError(f"{directory}: no {CONFIG_FILE} (HF or native model directory) or {TF1_CONFIG_FILE} "
                          "(original release directory).")


def is_name_based_checkpoint(prefix: str) -> bool:
  """Whether a TF checkpoint is a TF1 name-based one (the original release's `bert/...` layout): it has no object
  graph, so an object-based restore cannot read it. TensorFlow reads the checkpoint (imported on first use)."""
  import tensorflow as tf  # noqa: PLC0415 (TF-free module)
  return _OBJECT_GRAPH_KEY not in tf.train.load_checkpoint(prefix).get_variable_to_shape_map()


def _holds_name_based_checkpoint(directory: str) -> bool:
  """Whether the directory's checkpoint is a TF1 name-based one (asked only when albert_config.json lies beside a
  native config.json)."""
  try:
    return is_name_based_checkpoint(resolve_checkpoint(directory))
  except (ImportError, OSError, ValueError):  # no TensorFlow, or no readable checkpoint: the native reader says so
    return False


def config_file(directory: str, model_format: Optional[str] = None) -> str:
  """The directory's config file: `albert_config.json` for the original release, else `config.json`."""
  model_format = model_format or detect_format(directory)
  return path(directory, TF1_CONFIG_FILE if model_format == "tf1" else CONFIG_FILE)


def model_config_file(location: str) -> Optional[str]:
  """The config file of the model stored at `location`, None when there is none.

  `location` is a model directory (native or HF: `config.json`; the original release: `albert_config.json`) or a
  checkpoint prefix (`runs/x/ckpt-1200`, `release/model.ckpt-best`), whose config is the one in its folder. This is
  what fine-tuning reads `task.model` from (`task.init_checkpoint`), and eval / predict (`model_dir`).
  """
  location = os.fspath(location).rstrip("/")
  folder = location if file_io.isdir(location) else os.path.dirname(location)
  for name in (CONFIG_FILE, TF1_CONFIG_FILE):
    candidate = path(folder or ".", name)
    if file_io.exists(candidate):
      return candidate
  return None


# --------------------------------------------------------------------------------------------- checkpoint
_FALLBACKS_WARNED: set = set()


class UnreadableCheckpointError(ValueError):
  """No checkpoint of a location can be read; the message names each one's files and the reason."""


def checkpoint_step_of(directory: str, prefix: str) -> int:
  """How new `prefix` is: N of `ckpt-N`, `best_checkpoint.json`'s step for `model.ckpt-best`, else -1."""
  name = os.path.basename(prefix)
  if name == BEST_CHECKPOINT_PREFIX:
    info = path(directory, BEST_CHECKPOINT_INFO)
    try:
      return int(read_json(info).get("global_step", -1)) if file_io.exists(info) else -1
    except (ValueError, TypeError, AttributeError):
      return -1
  try:
    return int(name.rsplit("-", 1)[-1])
  except ValueError:
    return -1


def _preferred_checkpoint(location: str, what: str, prefer_best: bool) -> str:
  if file_io.exists(location + ".index"):
    return location
  if file_io.isdir(location):
    best = path(location, BEST_CHECKPOINT_PREFIX)
    if prefer_best and file_io.exists(best + ".index"):
      return best
    native = path(location, NATIVE_CHECKPOINT_PREFIX)
    if file_io.exists(native + ".index"):
      return native
    latest = file_io.latest_checkpoint(location) if file_io.exists(path(location, CHECKPOINT_STATE_FILE)) else None
    if latest:
      return latest
    hub = path(location, os.path.join("variables", "variables"))
    if file_io.exists(hub + ".index"):
      return hub
    indexes = checkpoint_files.checkpoint_indexes(path(location, "*.index"))
    if len(indexes) == 1:
      return indexes[0][:-len(".index")]
    if len(indexes) > 1:
      raise ValueError(f"{what} {location}: several checkpoints ({', '.join(os.path.basename(i) for i in indexes)}); "
                       "pass the prefix of the one to read.")
  raise FileNotFoundError(f"{what} {location}: no TF checkpoint (neither {location}.index nor a directory holding "
                          f"{NATIVE_CHECKPOINT_PREFIX}, a `{CHECKPOINT_STATE_FILE}` file, variables/ or one .index).")


def resolve_checkpoint(location: str, what: str = "checkpoint", prefer_best: bool = False) -> str:
  """The readable TF checkpoint prefix that `location` names: the prefix itself, or the checkpoint of a directory.

  Every mode reads a model directory's checkpoint through this function (training's resume keeps its own restore
  loop, `training.checkpointing`, which also needs each worker's input state). A directory gives, in this order:
  `model.ckpt-best` when `prefer_best` (--mode=predict), `model.ckpt` (`save_pretrained`, `convert_checkpoint`), the
  newest checkpoint of TF's `checkpoint` state file (the trainer's `ckpt-N`), a TF-Hub module's `variables/variables`,
  or its only `*.index` (a release tarball's `model.ckpt-best`: no state file). `what` names the setting in errors.

  The chosen checkpoint is read through once (`checkpoint_files.checkpoint_read_error`): a damaged one makes a directory
  fall back to its newest readable checkpoint by step, with a warning; a prefix passed as such is kept (error names it).

  Raises:
    FileNotFoundError: no checkpoint there.
    ValueError: a directory with several checkpoints and no state file to choose; a location with glob characters
      (`file_io.check_checkpoint_path`: TensorFlow globs it, so `run[1]` read a sibling `run1/`'s checkpoint).
    UnreadableCheckpointError: no checkpoint there can be read (the message names each one's files).
  """
  location = os.fspath(location).rstrip("/") or "/"
  file_io.check_checkpoint_path(location, what)
  chosen = _preferred_checkpoint(location, what, prefer_best)
  error = checkpoint_files.checkpoint_read_error(chosen)
  if error is None:
    return chosen
  if chosen == location:
    raise UnreadableCheckpointError(f"{what}: {error}. Pass another checkpoint (e.g. an earlier ckpt-N beside it).")
  others = [p[:-len(".index")] for p in checkpoint_files.checkpoint_indexes(path(location, "*.index"))]
  others += [p[:-len(".index")] for p in file_io.glob(path(location, os.path.join("variables", "variables.index")))]
  others = sorted({os.path.normpath(p) for p in others} - {os.path.normpath(chosen)},
                  key=lambda p: checkpoint_step_of(location, p), reverse=True)
  errors = [error]
  for prefix in others:
    other_error = checkpoint_files.checkpoint_read_error(prefix)
    if other_error is None:
      # Warned once per process and change of files; the later reads of the same load say it at INFO.
      key = (location, chosen, prefix, checkpoint_files.checkpoint_read_error(chosen))
      log = logger.info if key in _FALLBACKS_WARNED else logger.warning
      _FALLBACKS_WARNED.add(key)
      log("%s %s: %s; using %s instead (the newest readable checkpoint there).", what, location, error, prefix)
      return prefix
    errors.append(other_error)
  raise UnreadableCheckpointError(f"{what} {location}: no checkpoint can be read: {'; '.join(errors)}.")


# ------------------------------------------------------------------------------------------ SentencePiece
def find_spm_model(directory: str) -> Optional[str]:
  """The directory's SentencePiece model (`spiece.model`, else `30k-clean.model`), None without one."""
  for name in SPM_FILES:
    candidate = path(directory, name)
    if file_io.exists(candidate):
      return candidate
  return None


def require_spm_model(directory: str, purpose: str) -> str:
  """`find_spm_model`, or a FileNotFoundError that says who needs it and how to put it there."""
  found = find_spm_model(directory)
  if found is None:
    raise FileNotFoundError(f"{directory}: no {SPM_FILES[0]} (or {', '.join(SPM_FILES[1:])}); {purpose} needs it "
                            "next to the checkpoint (convert_checkpoint copies it when given --spm_model_file).")
  return found


def resolve_spm_model(explicit: str, model_dir: Optional[str], init_checkpoint: str) -> Optional[str]:
  """Fine-tuning's SentencePiece model: `explicit`, else model_dir's, else the one beside `init_checkpoint` (in it,
  for a directory; in its folder, for a checkpoint prefix such as `runs/pretrain/ckpt-500`)."""
  if explicit:
    return explicit
  found = find_spm_model(model_dir) if model_dir else None
  if found is None and init_checkpoint:
    found = find_spm_model(checkpoint_folder(init_checkpoint))
  return found


def checkpoint_folder(init_checkpoint: str) -> str:
  """The folder of `init_checkpoint` whose files (SentencePiece model, tokenizer options) go with its weights: the
  directory itself, or a checkpoint prefix's folder (`runs/pretrain/ckpt-500` -> `runs/pretrain`)."""
  init_checkpoint = os.fspath(init_checkpoint).rstrip("/")
  return init_checkpoint if file_io.isdir(init_checkpoint) else os.path.dirname(init_checkpoint) or "."


# ------------------------------------------------------------------------------------------------- labels
@dataclasses.dataclass(frozen=True)
class LabelFile:
  """A directory's `labels.json`, as the text tasks write it (a bare list of names is read too).

  Attributes:
    labels: the label names in output order.
    multi_label: the labels are independent sigmoids (several per example), not one softmax.
    threshold: the probability at which a multi-label model predicts a label.
    columns: the input columns training read (text_column, ...): later runs reuse those they leave unset.
    task: the task that wrote the file ('' when unknown).
  """
  labels: List[str]
  multi_label: bool = False
  threshold: float = MULTI_LABEL_THRESHOLD
  columns: Dict[str, Any] = dataclasses.field(default_factory=dict)
  task: str = ""

  @property
  def single_label_names(self) -> Optional[List[str]]:
    """The names when one label is predicted per example (its argmax); None for a multi-label model."""
    return None if self.multi_label else (self.labels or None)

  def to_json(self) -> Dict[str, Any]:
    data: Dict[str, Any] = {"task": self.task} if self.task else {}
    data.update(labels=list(self.labels), multi_label=self.multi_label)
    if self.multi_label:  # what the exports and `pipelines.classify` predict at
      data["multi_label_threshold"] = self.threshold
    if self.columns:
      data["columns"] = dict(self.columns)
    return data


def read_label_file(directory: str) -> Optional[LabelFile]:
  """`directory/labels.json` as a `LabelFile`, None without the file; a malformed one raises naming the fix."""
  file_path = path(directory, LABELS_FILE)
  if not file_io.exists(file_path):
    return None
  data = file_io.read_json(file_path, fix='Rewrite it as {"labels": [...]} or delete it.')
  settings = data if isinstance(data, dict) else {}
  names = settings.get("labels") if isinstance(data, dict) else data
  if not isinstance(names, list) or not all(isinstance(x, str) for x in names):
    raise ValueError(f"{file_path}: expected a list of label strings (or {{\"labels\": [...]}}), got "
                     f"{type(names).__name__}.")
  threshold = settings.get("multi_label_threshold", MULTI_LABEL_THRESHOLD)
  if not isinstance(threshold, (int, float)) or not 0 < threshold < 1:
    raise ValueError(f"{file_path}: multi_label_threshold must be a probability in (0, 1), got {threshold!r}.")
  if not isinstance(settings.get("multi_label", False), bool):  # ("false" in quotes was True: served as multi-label)
    raise ValueError(f'{file_path}: "multi_label" must be true or false (unquoted), got {settings["multi_label"]!r}.')
  return LabelFile(names, settings.get("multi_label", False), float(threshold), dict(settings.get("columns") or {}),
                   str(settings.get("task", "")))


def write_label_file(directory: str, label_file: LabelFile) -> str:
  """Writes `directory/labels.json` atomically (keys in the order of `LabelFile.to_json`); returns its path."""
  file_path = path(directory, LABELS_FILE)
  file_io.atomic_write_json(file_path, label_file.to_json(), sort_keys=False)
  return file_path


def recorded_task(directory: Optional[str]) -> Dict[str, Any]:
  """`params.yaml`'s task section of a trainer's model directory; {} without a readable one."""
  file_path = path(directory, PARAMS_FILE) if directory else ""
  if not file_path or not file_io.exists(file_path):
    return {}
  try:
    with file_io.open_file(file_path) as f:
      task = yaml.safe_load(f)["task"]
  except (yaml.YAMLError, KeyError, TypeError, OSError):
    return {}
  return task if isinstance(task, dict) else {}


def recorded_seq_length(directory: Optional[str]) -> Optional[int]:
  """The sequence length a trainer's model directory packs texts at: `params.yaml`'s task.predict_data.seq_length
  (what --mode=predict uses, so the pipelines answer as its files do), else validation_data's, else train_data's;
  None without one (converted directories carry no params.yaml: their length is the model's positions)."""
  task = recorded_task(directory)
  for section in ("predict_data", "validation_data", "train_data"):
    length = (task.get(section) or {}).get("seq_length")
    if isinstance(length, int) and length > 0:
      return length
  return None


def recorded_task_int(directory: Optional[str], key: str) -> Optional[int]:
  """A positive integer setting of the run that wrote `directory` (`params.yaml`'s task.<key>: SQuAD's doc_stride and
  max_query_length, RACE's max_qa_length), so a pipeline packs as that run's --mode=predict does; None without."""
  value = recorded_task(directory).get(key)
  return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def recorded_task_bool(directory: Optional[str], key: str) -> Optional[bool]:
  """A true/false setting of the run that wrote `directory` (`params.yaml`'s task.<key>: the do_lower_case a GLUE,
  SQuAD or RACE run tokenized with, which those runs record nowhere else); None without."""
  value = recorded_task(directory).get(key)
  return value if isinstance(value, bool) else None


def read_embedding_training_file(directory: str) -> Optional[Dict[str, Any]]:
  """`directory/embedding_training.json` (None without it): {"loss", "matryoshka_dims", "embedding_dimension", ...}."""
  file_path = path(directory, EMBEDDING_TRAINING_FILE)
  return read_json(file_path) if file_io.exists(file_path) else None


def write_embedding_training_file(directory: str, settings: Dict[str, Any]) -> str:
  """Writes `directory/embedding_training.json` atomically; returns its path."""
  file_path = path(directory, EMBEDDING_TRAINING_FILE)
  file_io.atomic_write_json(file_path, settings, sort_keys=False)
  return file_path


def fallback_label_names(directory: Optional[str], num_labels: int) -> List[str]:
  """Names without labels.json: HF `id2label` of config.json, else `labels.txt` (one a line, a name at most once),
  else LABEL_i."""
  if directory:
    config = path(directory, CONFIG_FILE)
    if file_io.exists(config):
      id2label = file_io.read_json_object(config, "model configuration").get("id2label")
      names = [id2label.get(str(i)) for i in range(num_labels)] if isinstance(id2label, dict) else None
      if id2label is not None and (names is None or len(id2label) == num_labels and None in names):
        raise ValueError(f"{config}: id2label must map \"0\" .. \"{num_labels - 1}\" to the label names, as "
                         f"transformers writes it (transformers refuses a list too), got {id2label!r}.")
      if id2label and len(id2label) == num_labels:
        return [str(name) for name in names]
    text_file = path(directory, LABELS_TEXT_FILE)
    if file_io.exists(text_file):
      with file_io.open_file(text_file, "rb") as f:  # utf-8-sig: Notepad's BOM would stick to the first name
        lines = [line.strip() for line in f.read().decode("utf-8-sig").splitlines()]
      names = [name for name in lines if name]
      again = [i for i, name in enumerate(lines) if name and name in lines[:i]]
      if again:  # (the names key classify's probabilities: one of the two outputs would vanish)
        raise ValueError(f"{text_file}:{again[0] + 1}: label {lines[again[0]]!r} is named again (first on line "
                         f"{lines.index(lines[again[0]]) + 1}); give each output (line) its own name.")
      if len(names) != num_labels:
        raise ValueError(f"{text_file}: {len(names)} labels but the classifier has {num_labels} outputs.")
      return names
  return [f"LABEL_{i}" for i in range(num_labels)]


def label_names(directory: Optional[str], num_labels: int) -> List[str]:
  """The names of a classifier's outputs: labels.json's, else `fallback_label_names`."""
  saved = read_label_file(directory) if directory else None
  if saved is not None and saved.labels:
    if len(saved.labels) != num_labels:
      raise ValueError(f"{path(directory, LABELS_FILE)}: {len(saved.labels)} labels but the model has {num_labels} "
                       "outputs; the labels file belongs to another model.")
    return list(saved.labels)
  return fallback_label_names(directory, num_labels)


# -------------------------------------------------------------------------------------- the whole directory
class ModelDirectory:
  """One model directory with its answers resolved on first use and kept: a reader that asks for the format, the
  config, the checkpoint, the SentencePiece model and the labels visits each file once.

  Example:
    directory = ModelDirectory("runs/sst2")
    directory.model_format, directory.checkpoint, directory.spm_model, directory.label_file
  """

  def __init__(self, location: str):
    self.path = os.fspath(location)

  def __repr__(self) -> str:
    return f"ModelDirectory({self.path!r})"

  def file(self, name: str) -> str:
    return path(self.path, name)

  @functools.cached_property
  def model_format(self) -> str:
    """"native", "hf", "keras_hub" or "tf1" (`detect_format`)."""
    return detect_format(self.path)

  @functools.cached_property
  def config_file(self) -> str:
    return config_file(self.path, self.model_format)

  @functools.cached_property
  def checkpoint(self) -> str:
    """The TF checkpoint prefix (native and TF1 directories; `resolve_checkpoint`)."""
    return resolve_checkpoint(self.path)

  @functools.cached_property
  def spm_model(self) -> Optional[str]:
    return find_spm_model(self.path)

  @functools.cached_property
  def label_file(self) -> Optional[LabelFile]:
    return read_label_file(self.path)
