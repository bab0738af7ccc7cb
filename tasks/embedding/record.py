"""What a trained model directory records of its training settings, and how a later run there reads it back.

A `text_embedding` directory serves its vectors from the settings it was trained with: `embedding_training.json`
(loss, scale, symmetric, Matryoshka widths and weights, pooling, normalize, the columns read), the sentence-
transformers pooling files `pipelines.embed` reads (`modules.json`, `1_Pooling/`, `2_Normalize/`) and the tokenizer's
casing (`tokenizer_config.json`; a `text_ranking` directory records only that). The run that trains there first
writes them (`TextEmbeddingTask.initialize`: a fresh training start, never `--mode=predict` / `eval`, whose own config
would otherwise replace the trained model's record). Every run in the directory reads them back (`resolve`): a
setting the run leaves unset (None) takes the recorded value, so predict and eval compute what the trained model's
pipelines compute with none of its settings repeated (as the text tasks' labels.json, docs/recipe.md); a setting
given explicitly that contradicts the record is an error naming the key, both values and the file, because the
checkpoints were trained with the recorded one and another would silently give other vectors (scores). The casing
of task.init_checkpoint's folder (a fresh run: model_dir records none) is a default only (`FolderDefault`): an
explicit task.do_lower_case that differs is used and warned about, as the text, GLUE, SQuAD and RACE tasks do
(docs/conversion.md: the folder's options apply where task.do_lower_case is not set). A record that is no valid
setting (a hand edit: not JSON, not an object, a value of the wrong type or not allowed) is an error naming the
file, the key, the value and the fix, where the run leaves the key unset (`checked_record`, `resolve`).
"""

from __future__ import annotations

import logging
from typing import Any, Callable, Dict, Mapping, Optional, Tuple

from official_albert import file_io
from official_albert import model_directory as md
from official_albert.checkpoints.sentence_transformers_folder import EmbeddingSettings
from official_albert.checkpoints.sentence_transformers_folder import finetuning_tokenizer_record
from official_albert.checkpoints.sentence_transformers_folder import model_tokenizer_options
from official_albert.checkpoints.sentence_transformers_folder import read_embedding_settings
from official_albert.checkpoints.sentence_transformers_folder import recorded_tokenizer_options
from official_albert.checkpoints.sentence_transformers_folder import write_embedding_settings
from official_albert.checkpoints.sentence_transformers_folder import write_tokenizer_options
from official_albert.modeling.layers.pooling import check_pooling_modes
from official_albert.training.experiment_config import ConfigError
from official_albert.training.hyperparams import override

logger = logging.getLogger(__name__)

# task key -> (the value a model directory records, the file recording it)
Recorded = Dict[str, Tuple[Any, str]]
# embedding_training.json's "columns" keys -> the task keys naming those columns
COLUMN_KEYS = {"anchor": "anchor_column", "positive": "positive_column", "negative": "negative_column",
               "score": "score_column"}
# embedding_training.json's keys read back as the task keys of the same name
TRAINING_KEYS = ("loss", "scale", "symmetric", "matryoshka_dims", "matryoshka_weights", "normalize")


class FolderDefault(tuple):
  """A recorded (value, file) that is a default only: task.init_checkpoint's folder's record, which a fresh run starts
  from but was not trained with, so an explicit setting that differs is used (with a warning), not refused."""


def casing_record(model_dir: Optional[str], init_checkpoint: str = "") -> Recorded:
  """The do_lower_case the model was trained with: model_dir's tokenizer_config.json, else its params.yaml's
  task.do_lower_case (a directory that predates the file), else — model_dir records none: a fresh run — the same of
  `init_checkpoint`'s folder (`finetuning_tokenizer_record`: a cased model converted there is fine-tuned cased);
  {} when none records one. The init folder's is a `FolderDefault`."""
  own = recorded_tokenizer_options(model_dir).get("do_lower_case")
  if own is not None:
    return {"do_lower_case": own}
  recorded = finetuning_tokenizer_record(model_dir, init_checkpoint).get("do_lower_case")
  return {} if recorded is None else {"do_lower_case": FolderDefault(recorded)}


def embedding_record(model_dir: Optional[str], init_checkpoint: str = "") -> Recorded:
  """The `text_embedding` settings `model_dir` records (see the module docstring); {} for a directory without. The
  casing comes from `init_checkpoint`'s folder where model_dir records none (`casing_record`), also without a
  model_dir (a run in hand: all three tokenizer options then come from that folder, never a mix with defaults)."""
  if not model_dir:
    return casing_record(None, init_checkpoint)
  out: Recorded = {}
  settings = read_embedding_settings(model_dir)  # (modules.json: pooling and normalize, for a folder without the rest)
  if settings is not None:
    modules = md.path(model_dir, md.SENTENCE_TRANSFORMERS_MODULES_FILE)
    out.update(pooling=(",".join(settings.pooling), modules), normalize=(settings.normalize, modules))
  source = md.path(model_dir, md.EMBEDDING_TRAINING_FILE)
  if file_io.exists(source):
    fix = ("It records the settings the embedder was trained with (TextEmbeddingTask writes it): correct it, or "
           f"delete it (a run there then takes them from task.*, else the defaults: {list(TRAINING_KEYS)}, pooling "
           "and the columns).")
    training = file_io.read_json_object(source, "text_embedding training record", fix)
    out.update({key: (training[key], source) for key in TRAINING_KEYS if key in training})
    pooling, columns = training.get("pooling"), training.get("columns")
    if pooling:
      if not isinstance(pooling, list) or not all(isinstance(mode, str) for mode in pooling):
        raise ConfigError(f"{source}: \"pooling\" is {pooling!r}, expected a list of pooling modes (e.g. "
                          f"[\"mean\"]). {fix}")
      out["pooling"] = (",".join(pooling), source)
    if columns is not None and not isinstance(columns, dict):
      raise ConfigError(f"{source}: \"columns\" is {columns!r}, expected an object {{side: column}} of the sides "
                        f"{list(COLUMN_KEYS)}. {fix}")
    if columns:  # (the training sides' columns: no "negative" = trained without hard negatives)
      out.update({key: (columns.get(side) or "", source) for side, key in COLUMN_KEYS.items()})
  out.update(casing_record(model_dir, init_checkpoint))
  return out


def write_embedding_record(model_dir: str, p, task_name: str, columns: Dict[str, str]) -> None:
  """What `pipelines.embed` reads to make the vectors training made (the pooling files, the tokenizer's options:
  `model_tokenizer_options`, init_checkpoint's folder's where model_dir records none) and `embedding_training.json`,
  from the resolved config `p` of the run that trains in `model_dir` (`columns`: side -> the column it read)."""
  file_io.makedirs(model_dir)
  settings = EmbeddingSettings(p.pooling_modes, p.normalize, p.train_data.seq_length)
  write_embedding_settings(model_dir, settings, p.embedding_width())
  write_tokenizer_options(model_dir, model_tokenizer_options(model_dir, p.do_lower_case, p.init_checkpoint))
  md.write_embedding_training_file(model_dir, {
      "task": task_name, "loss": p.loss, "matryoshka_dims": [int(d) for d in p.matryoshka_dims],
      "matryoshka_weights": [float(w) for w in p.matryoshka_weights], "scale": float(p.scale),
      "symmetric": bool(p.symmetric), "embedding_dimension": p.embedding_width(), "pooling": list(p.pooling_modes),
      "normalize": p.normalize, "columns": {**columns, "score": p.score_column}})


def comparable(key: str, value: Any) -> Any:
  """`value` of task.`key` in the form two settings of it compare in (pooling modes, widths, floats)."""
  if key == "pooling":
    return tuple(check_pooling_modes([m.strip() for m in str(value).split(",") if m.strip()]))
  if key == "matryoshka_dims":
    return [int(d) for d in value or ()]
  if key == "matryoshka_weights":
    return [float(w) for w in value or ()]
  if key == "scale":
    return float(value)
  return value


def checked_record(params, recorded: Recorded, task_name: str, same: Callable[[str, Any], Any]) -> Recorded:
  """`recorded` with each value checked as the run's task.`key` would be (its type: a hand-edited file); the
  settings' allowed values and how they go together are `resolve`'s check of the whole.

  Raises:
    ConfigError: a recorded value is not a valid setting of its key where the run leaves that key unset (naming the
      file, the key, the value, why, and the fix); a run that sets the key is warned and the value is dropped.
  """
  out = dict(recorded)
  for key, saved in recorded.items():
    try:
      same(key, saved[0])
      override(params, {key: saved[0]}, validate=False)
    except (ConfigError, ValueError, TypeError) as error:
      message = (f"{saved[1]}: {key}={saved[0]!r} is not a valid task.{key}: {error} Correct or delete that file (a "
                 f"run there then takes task.{key}, else its default), or set task.{key} to what the model was "
                 "trained with.")
      if getattr(params, key) is None:
        raise ConfigError(f"{task_name}: {message}") from None
      logger.warning("%s: %s task.%s=%r is used.", task_name, message, key, getattr(params, key))
      del out[key]
  return out


def resolve(params, model_dir: Optional[str], defaults: Mapping[str, Any], recorded: Recorded, task_name: str,
            same: Callable[[str, Any], Any] = comparable):
  """`params` with every key of `defaults` the run left unset (None) taken from `recorded`, else the default.

  Args:
    params: the task config (its fields named in `defaults` are None when not set).
    model_dir: the run's model directory (for the messages).
    defaults: task key -> the value of a run that neither sets it nor finds it recorded.
    recorded: what `model_dir` records (`embedding_record`, `casing_record`); a `FolderDefault` entry only fills an
      unset key (an explicit value that differs is warned about).
    task_name: the task, for the messages.
    same: (key, value) -> the form in which a setting and the record are compared.

  Returns:
    A validated copy of `params` with every key of `defaults` set.

  Raises:
    ConfigError: settings given explicitly contradict the record (one line each: the key, both values, the file).
  """
  changes, problems = {}, []
  recorded = checked_record(params, recorded, task_name, same)
  for key, default in defaults.items():
    value, saved = getattr(params, key), recorded.get(key)
    if value is None:
      changes[key] = default if saved is None else saved[0]
      if saved is not None and same(key, saved[0]) != same(key, default):
        logger.info("%s: task.%s=%r as the model in %s was trained (%s; set task.%s to change it).", task_name, key,
                    saved[0], model_dir, saved[1], key)
    elif saved is not None and same(key, value) != same(key, saved[0]) and isinstance(saved, FolderDefault):
      logger.warning("%s: task.%s=%r, but %s records %s=%r: the texts are tokenized otherwise than that model was "
                     "(leave task.%s unset to use the folder's).", task_name, key, value, saved[1], key, saved[0], key)
    elif saved is not None and same(key, value) != same(key, saved[0]):
      problems.append(f"task.{key}={value!r}, but {saved[1]} records {key}={saved[0]!r}")
  if problems:
    raise ConfigError(
        f"{task_name}: settings given explicitly contradict the model trained in {model_dir}:\n  "
        + "\n  ".join(problems) + "\nIts checkpoints were trained with the recorded values, which a run there "
        "reads when the settings are left unset: remove those settings, or train in a new --model_dir.")
  try:
    return params.replace(**changes) if changes else params
  except ConfigError as error:
    taken = {key: recorded[key] for key in changes if recorded.get(key) is not None}
    if not taken:
      raise
    raise ConfigError(
        f"{task_name}: {error}\n  with the recorded settings: "
        + ", ".join(f"{key}={value!r} ({file})" for key, (value, file) in taken.items())
        + ".\nCorrect or delete the file (a run there then takes task.*, else the defaults), or set those task.* "
        "keys to what the model was trained with.") from None
