"""Where a run's `task.model` comes from: the model it starts from or reads, not a second copy of its settings.

A model directory carries its model (`model_directory.model_config_file`: `config.json`, or `albert_config.json`
beside an original release checkpoint), so a run is never told the shape again:

- train / train_and_eval: `model_dir`'s own config when `model_dir` already holds a checkpoint (the run resumes),
  else `task.init_checkpoint`'s (a native, HF or original-release directory, or a checkpoint prefix: the config in its
  folder), else the experiment's default (random initialisation, which `guardrails` warns about);
- eval / predict: `model_dir`'s config, else `task.init_checkpoint`'s, else the experiment's default; the task
  settings that change the model's variables (`MODEL_TASK_FIELDS`: the classifier's dropout, whose seed state is in
  the checkpoint) come from `model_dir`'s params.yaml too.

From `task.init_checkpoint` every field is taken except the fine-tuning recipe's own (`TRAINING_FIELDS`: dropout and
the initializer of new heads), which stay the experiment's; from `model_dir` every field is taken (it is the model the
run wrote). A `task.model.*` key the user sets (`--config_file`, `--params_override`) is applied on top: for a
training field it wins, for any other it must agree with the source, else one `ConfigError` names the key, both values
and the file (the attention type and its settings, `COMPUTE_FIELDS`, are a choice too: the same weights run under
any of them). `task.model.preset` counts as setting every field. A data section's `seq_length` beyond the model's
`max_position_embeddings` is cut to it (logged), unless set explicitly (an error naming both); SQuAD's and RACE's
question caps follow a length too short for the reference's (`fit_question_caps`, logged).

The source is applied *before* the user's overrides (so that `task.model.vocab_size=4000` alone on a tiny model is a
valid combination), which is why `apply_overrides` peeks at the overrides for `task.init_checkpoint` first. The stack
(source, config files, overrides) is validated once, at its end: a later source may complete what an earlier one
starts (`num_attention_heads=12` in one flag, `hidden_size=768` in the next).
"""

from __future__ import annotations

import dataclasses
import logging
import os
from typing import Any, Dict, FrozenSet, Optional, Sequence

from official_albert import file_io
from official_albert import model_directory as md
from official_albert.checkpoints import keras_hub_preset
from official_albert.config import AlbertConfig
from official_albert.config import ATTENTION_FIELDS
from official_albert.data import squad_features
from official_albert.tokenization import choices
from official_albert.training import finetuning_rates
from official_albert.training.experiment_config import ExperimentConfig
from official_albert.training.experiment_config import ModelConfig
from official_albert.training.hyperparams import ConfigError
from official_albert.training.hyperparams import load_file
from official_albert.training.hyperparams import OverrideSource
from official_albert.training.hyperparams import parse_overrides

logger = logging.getLogger(__name__)

# The fields a fine-tuning recipe chooses for itself: regularisation and the initialisation of the new head. Every
# other field (shapes, activation, vocabulary, positions, sharing, ...) belongs to the weights.
TRAINING_FIELDS = ("hidden_dropout_prob", "attention_probs_dropout_prob", "classifier_dropout_prob",
                   "initializer_range")
# How the same weights are computed (docs/long_inputs.md: any checkpoint loads into any attention type): taken from
# the source like the shape, but a user's explicit value is a choice, not a disagreement.
COMPUTE_FIELDS = ATTENTION_FIELDS
READ_MODES = ("eval", "predict")
# Task settings outside task.model that change the model's variables (a dropout layer with a rate keeps a seed
# state in the checkpoint): eval / predict take them from model_dir's params.yaml too, unless set explicitly.
MODEL_TASK_FIELDS = ("classifier_dropout",)


@dataclasses.dataclass(frozen=True)
class ModelSource:
  """The config file a run's model comes from.

  Attributes:
    config_file: the file read (`config.json` or `albert_config.json`).
    key: the setting that names it ("model_dir" or "task.init_checkpoint").
    location: that setting's value.
    whole: every field comes from the file (model_dir); else the TRAINING_FIELDS stay the experiment's.
  """
  config_file: str
  key: str
  location: str
  whole: bool

  def describe(self) -> str:
    return f"{self.key}={self.location} ({self.config_file})"


def find_model_source(mode: str, model_dir: Optional[str], init_checkpoint: str) -> Optional[ModelSource]:
  """The source of `task.model` for `mode` (see the module docstring), None when the experiment's default stands."""
  if model_dir:
    own = md.path(model_dir, md.CONFIG_FILE)
    resumes = file_io.exists(md.path(model_dir, md.CHECKPOINT_STATE_FILE))
    if file_io.exists(own) and (mode in READ_MODES or resumes):
      return ModelSource(own, "model_dir", model_dir, whole=True)
  if init_checkpoint:
    found = md.model_config_file(init_checkpoint)
    if found:
      return ModelSource(found, "task.init_checkpoint", init_checkpoint, whole=False)
  return None


def explicit_model_keys(sources: Sequence[OverrideSource]) -> FrozenSet[str]:
  """The `task.model` fields the overrides set (all of them when one sets `preset`)."""
  keys = set()
  for source in sources:
    model = parse_overrides(source).get("task", {})
    model = model.get("model", {}) if isinstance(model, dict) else {}
    if isinstance(model, dict):
      keys.update(model)
  if "preset" in keys:
    keys.update(f.name for f in dataclasses.fields(AlbertConfig))
  return frozenset(keys - {"preset"})


def _explicit_seq_lengths(sources: Sequence[OverrideSource]) -> FrozenSet[str]:
  """The data sections (`train_data`, ...) whose `seq_length` the overrides set."""
  names = set()
  for source in sources:
    task = parse_overrides(source).get("task", {})
    for name, section in (task.items() if isinstance(task, dict) else ()):
      if isinstance(section, dict) and "seq_length" in section:
        names.add(name)
  return frozenset(names)


def fit_seq_lengths(params: ExperimentConfig, source: Optional[ModelSource],
                    explicit: FrozenSet[str]) -> ExperimentConfig:
  """Data sections longer than the model's positions (of `source`, or of `task.model` when None): cut to
  `max_position_embeddings` (logged) unless set explicitly, which is an error naming the key and both values."""
  limit = params.task.model.max_position_embeddings
  origin = source.describe() if source is not None else "task.model"
  changes, problems = {}, []
  for field in dataclasses.fields(params.task):
    section = getattr(params.task, field.name)
    length = getattr(section, "seq_length", None)
    if not isinstance(length, int) or length <= limit:
      continue
    if field.name in explicit:
      problems.append(f"task.{field.name}.seq_length={length}")
    else:
      changes[field.name] = {"seq_length": limit}
      logger.info("task.%s.seq_length %d -> %d: the model (%s) has max_position_embeddings %d.", field.name, length,
                  limit, origin, limit)
  if problems:
    raise ConfigError(f"{', '.join(problems)} exceeds max_position_embeddings={limit} of the model of "
                      f"{origin}: set seq_length to at most {limit}.")
  return params.override({"task": changes}) if changes else params


def _explicit_task_keys(sources: Sequence[OverrideSource]) -> FrozenSet[str]:
  """The top-level `task.*` keys the overrides set."""
  names = set()
  for source in sources:
    task = parse_overrides(source).get("task", {})
    names.update(task if isinstance(task, dict) else ())
  return frozenset(names)


def fit_question_caps(params: ExperimentConfig, sources: Sequence[OverrideSource]) -> ExperimentConfig:
  """SQuAD's `doc_stride` / `max_query_length` and RACE's `max_qa_length` fitted to the shortest data section
  (`squad_features.fit_windows`, `choices.fit_qa_length`), logged, when the reference's leave no room there (a
  model of 64 positions: its windows cannot hold a 64-piece question; of 128: its rows a 128-piece question+option)
  and the run does not set them; wherever the reference's fit they are kept, so records made by
  `create_finetuning_data` with its defaults still match. A value the run sets is kept (and refused later, naming
  itself, if it does not fit)."""
  task = params.task
  lengths = [getattr(getattr(task, f.name), "seq_length", None) for f in dataclasses.fields(task)]
  lengths = [n for n in lengths if isinstance(n, int) and n > 0]
  if not lengths:
    return params
  shortest, explicit, changes = min(lengths), _explicit_task_keys(sources), {}

  def unset(key: str, reference: int) -> Optional[int]:  # None: the reference's, the run's to fit
    value = getattr(task, key)
    return None if key not in explicit and value == reference else value

  if hasattr(task, "doc_stride") and hasattr(task, "max_query_length"):
    fitted = squad_features.fit_windows(shortest, unset("doc_stride", squad_features.REFERENCE_DOC_STRIDE),
                                        unset("max_query_length", squad_features.REFERENCE_QUERY_LENGTH))
    changes.update({k: v for k, v in zip(("doc_stride", "max_query_length"), fitted) if getattr(task, k) != v})
  if hasattr(task, "max_qa_length"):
    qa = choices.fit_qa_length(shortest, unset("max_qa_length", choices.REFERENCE_QA_LENGTH))
    if qa != task.max_qa_length:
      changes["max_qa_length"] = qa
  if not changes:
    return params
  logger.info("%s: the data's %d-piece sequences leave no room for the reference's value (set the key to choose "
              "another).", ", ".join(f"task.{k} {getattr(task, k)} -> {v}" for k, v in changes.items()), shortest)
  return params.override({"task": changes})


def task_settings_of(model_dir: str, params: ExperimentConfig, sources: Sequence[OverrideSource]) -> Dict[str, Any]:
  """The MODEL_TASK_FIELDS of model_dir's params.yaml that the task has and the overrides do not set."""
  saved_file = md.path(model_dir, md.PARAMS_FILE)
  if not file_io.exists(saved_file):
    return {}
  saved = load_file(saved_file).get("task", {})  # a file always: `runs/lr=1e-4/params.yaml` is no override
  explicit = set()
  for source in sources:
    task = parse_overrides(source).get("task", {})
    explicit.update(task if isinstance(task, dict) else ())
  return {name: saved[name] for name in MODEL_TASK_FIELDS
          if isinstance(saved, dict) and name in saved and name not in explicit and hasattr(params.task, name)}


def _init_checkpoint(params: ExperimentConfig, sources: Sequence[OverrideSource]) -> str:
  """The `task.init_checkpoint` the sources leave, read as the config reads a string key: with its text kept (a folder
  `20241130_1`, `0755` or `1.10` is that folder, not the number YAML types it as, which the restore never reads) and
  a leading `~` expanded, as the config expands it (`~/models/pre` read as written gave the run the experiment's
  default shape, which the weights of the expanded path did not fit)."""
  value = getattr(params.task, "init_checkpoint", "")
  for source in sources:
    task = parse_overrides(source, keep_text=True).get("task", {})
    if isinstance(task, dict) and "init_checkpoint" in task:
      value = task["init_checkpoint"] or ""
  return file_io.expand_home(str(value), "task.init_checkpoint")


def model_from(source: ModelSource, current: ModelConfig) -> ModelConfig:
  """The model of `source`, with `current`'s TRAINING_FIELDS unless the source gives the whole model.

  A KerasHub preset's config.json is a serialized AlbertBackbone, not an AlbertConfig: it is read as the converter
  reads it (`keras_hub_preset.preset_config`), or the run failed with "unknown AlbertConfig key(s) ...".
  """
  if md.is_keras_hub_config(source.config_file):
    found = keras_hub_preset.preset_config(os.path.dirname(source.config_file)).to_dict()
  else:
    found = AlbertConfig.from_json_file(source.config_file).to_dict()
  if not source.whole:
    found.update({name: getattr(current, name) for name in TRAINING_FIELDS})
  return ModelConfig.from_albert_config(AlbertConfig(**found))


def _normalized(name: str, value: Any) -> Any:
  return AlbertConfig(hidden_act=value).hidden_act if name == "hidden_act" else value


def check_agreement(model: ModelConfig, source: ModelSource, source_model: ModelConfig, explicit: FrozenSet[str],
                    preset: str = "") -> None:
  """Raises one ConfigError listing every explicitly set field (not a training field) that disagrees with `source`."""
  problems = []
  for name in sorted(explicit - set(TRAINING_FIELDS) - set(COMPUTE_FIELDS)):
    value, expected = _normalized(name, getattr(model, name)), _normalized(name, getattr(source_model, name))
    if value != expected:
      how = f"task.model.preset={preset} sets {name}={value!r}" if preset else f"task.model.{name}={value!r}"
      problems.append(f"{how}, but {source.describe()} has {name}={expected!r}")
  if problems:
    raise ConfigError(
        "task.model disagrees with the model the run " + ("reads" if source.whole else "starts from") + ":\n  "
        + "\n  ".join(problems) + f"\nThe model's shape comes from {source.key}: remove those task.model settings "
        f"(or set them to the values of {source.config_file}), or point {source.key} at a model of that shape.")


def apply_overrides(params: ExperimentConfig, sources: Sequence[OverrideSource], mode: Optional[str] = None,
                    model_dir: Optional[str] = None) -> ExperimentConfig:
  """`params` with `sources` applied in order; with a `mode`, `task.model` first comes from the run's model source.

  Args:
    params: the experiment's default config.
    sources: config files and override strings, applied in order (`hyperparams.override`).
    mode: the train binary's --mode; None applies the overrides only (the model stays the experiment's).
    model_dir: the run's model directory.

  Raises:
    ConfigError: the stacked config is invalid (naming the key), or an explicit `task.model` setting disagrees with
      the source (naming both values and the key).
  """
  source = None
  if mode is not None and hasattr(params.task, "model"):
    source = find_model_source(mode, model_dir, _init_checkpoint(params, sources))
  if source is not None:
    source_model = model_from(source, params.task.model)
    task = {"model": source_model.as_dict()}
    if source.whole and mode in READ_MODES:
      task.update(task_settings_of(model_dir, params, sources))
    params = params.override({"task": task}, validate=False)
  for item in sources:
    params = params.override(item, validate=False)
  params.validate()  # once, on the whole stack: each source alone may leave it half-changed
  if mode is not None and mode not in READ_MODES:
    params = finetuning_rates.fit_rates(params, sources)
  if source is not None:
    explicit = explicit_model_keys(sources)
    preset = params.task.model.preset if params.task.model.preset else ""
    check_agreement(params.task.model, source, source_model, explicit, preset)
    params = fit_seq_lengths(params, source, _explicit_seq_lengths(sources))
    logger.info("task.model from %s: vocab_size %d, hidden_size %d, %d layers, %d heads, embedding_size %d, "
                "max_position_embeddings %d%s.", source.describe(), params.task.model.vocab_size,
                params.task.model.hidden_size, params.task.model.num_hidden_layers,
                params.task.model.num_attention_heads, params.task.model.embedding_size,
                params.task.model.max_position_embeddings,
                f" (set explicitly: {', '.join(sorted(explicit))})" if explicit else "")
  elif mode is not None and hasattr(params.task, "model"):  # (a random-init run, or task.model set: too long a
    params = fit_seq_lengths(params, None, _explicit_seq_lengths(sources))  # batch failed in the encoder, no key named)
  if mode is not None:
    params = fit_question_caps(params, sources)
  return params

