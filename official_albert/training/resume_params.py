"""The params a training run may change when it resumes a model_dir, and the check that refuses the others.

A resume continues the checkpoint's weights and optimizer slots under this run's params and rewrites params.yaml
(which predict and the exports read): a run-defining change (optimizer, rates, seed, task, data, batch) would train on
without a word and leave a record that describes no weights (`check_resume_params`, run before anything is built). A
longer or shorter run is allowed with a warning (`warn_schedule_change`, run once the task resolved its steps).
"""

from __future__ import annotations

import json
import logging
from typing import Any, Dict, List, Set, Tuple

import tensorflow as tf
import yaml

from official_albert import file_io
from official_albert import model_directory as md
from official_albert.config import ATTENTION_FIELDS
from official_albert.training import model_source
from official_albert.training.experiment_config import ExperimentConfig
from official_albert.training.hyperparams import ConfigError

logger = logging.getLogger(__name__)

# The keys a training run may change when it resumes a model_dir (dotted; one ending in "." or "_" is a prefix): how
# often it logs, saves, evaluates or predicts, and where and how it computes — nothing that decides which weights the
# steps produce. Every other key is run-defining (new task fields included, unless listed here).
RESUME_FREE_KEYS = (
    "trainer.steps_per_loop", "trainer.checkpoint_interval", "trainer.max_to_keep", "trainer.validation_steps",
    "trainer.validation_interval", "trainer.summary_interval", "trainer.best_checkpoint_metric",
    "trainer.best_checkpoint_mode", "trainer.eval_at_start",
    # How the effective rates were chosen: the rates themselves (learning_rate, warmup_steps) are compared.
    "trainer.rates_by_model_size", "trainer.paper_recipe",
    # Where and how it computes (a resume on another machine), not what: the seed alone is run-defining.
    "runtime.distribution_strategy", "runtime.tpu", "runtime.num_gpus", "runtime.num_cpu_devices",
    "runtime.all_reduce_alg", "runtime.mixed_precision_dtype", "runtime.jit_compile", "runtime.enable_op_determinism",
    "runtime.input_resume", "runtime.tf_data_service_address",
    # Evaluation and prediction: what they read, how they report, where files go.
    "task.validation_data.", "task.predict_data.", "task.predict_", "task.predictions_dir", "task.records_dir",
    "task.n_best_size", "task.max_answer_length", "task.start_n_top", "task.end_n_top", "task.null_score_threshold",
    "task.multi_label_threshold", "task.id_column", "task.eval_num_negatives", "task.normalize",
    # Kept by their own mechanisms: the recorded init_checkpoint (`keep_recorded_init_checkpoint`; the allow-missing
    # list is read at initialisation only), the SentencePiece copy (`save_spm_model` warns when it differs).
    "task.init_checkpoint", "task.init_checkpoint_allow_missing", "task.spm_model_file",
    # The same loss and gradient computed otherwise: padding, GradCache chunks, bad-row handling, the attention type.
    "task.train_data.pad_to_multiple_of", "task.grad_cache_chunk", "task.skip_bad_rows", "task.input_format",
    # Dropout may be switched on at a resume (its RNG states start fresh, logged; docs/distributed_training.md);
    # SQuAD's train_epochs resolves the steps at start-up, which are compared (warned) themselves.
    "task.classifier_dropout", "task.model.preset", "task.train_epochs") + tuple(
        f"task.model.{name}" for name in ATTENTION_FIELDS + model_source.TRAINING_FIELDS)


def _resume_free(key: str) -> bool:
  return any(key == free or (free.endswith((".", "_")) and key.startswith(free)) for free in RESUME_FREE_KEYS)


# A task's own setting left None or [] means "as the model directory records" (the text / embedding / ranking
# tasks' columns, labels, loss, casing: e.g. task.labels=[] is labels.json's), checked by the task. Nowhere else:
# trainer.exclude_from_weight_decay=[] or task.train_data.seed=None is another run.
_UNSET = (None, [])


def _is_task_setting(key: str) -> bool:
  return key.startswith("task.") and key.count(".") == 1


def _flatten(values: Any, prefix: str = "") -> Dict[str, Any]:
  if not isinstance(values, dict):
    return {prefix[:-1]: values}
  return {k: v for key, value in values.items() for k, v in _flatten(value, f"{prefix}{key}.").items()}


def _changes(params: ExperimentConfig, model_dir: str, mode: str) -> Tuple[List[Tuple[str, Any, Any]], Set[str]]:
  """(every key whose value differs from params.yaml's: (key, recorded, given), the schedule keys among those that may
  change); nothing when `mode` does not train or `model_dir` holds no checkpoint or no readable params.yaml."""
  if mode not in ("train", "train_and_eval") or not tf.train.latest_checkpoint(model_dir):
    return [], set()
  try:
    with file_io.open_file(f"{model_dir}/{md.PARAMS_FILE}") as f:
      recorded = _flatten(yaml.safe_load(f) or {})
  except (OSError, tf.errors.OpError, yaml.YAMLError):
    return [], set()
  given = _flatten(yaml.safe_load(params.to_yaml()))
  changed = [(key, recorded[key], value) for key, value in given.items()
             if key in recorded and value != recorded[key] and not (
                 _is_task_setting(key) and (value in _UNSET or recorded[key] in _UNSET))]
  # A longer (or shorter) run: the warm-up that `finetuning_rates.fit_rates` derives from train_steps (10%) moves too.
  steps_changed = "trainer.train_steps" in {c[0] for c in changed}
  return changed, ({"trainer.train_steps", "trainer.warmup_steps"} if steps_changed else set())


def check_resume_params(params: ExperimentConfig, model_dir: str, mode: str, allow_change: bool = False) -> None:
  """Refuses a training run that resumes `model_dir` with run-defining params other than its params.yaml records.

  A resume continues the checkpoint's weights and optimizer slots, and params.yaml (which predict and the exports
  read) is rewritten with this run's params: another optimizer (lamb and adamw share a slot layout, so the moments
  load into the other), learning rate, warm-up, seed, task, training data, batch size (under input_resume=skip it
  skips step x the new batch) or loss normalisation would train on without a word and leave a record that describes
  no weights. The keys that may change are `RESUME_FREE_KEYS` (intervals, evaluation / prediction settings, where it
  computes); `trainer.train_steps` may change with a warning (`warn_schedule_change`, once the task resolved its
  steps: the schedule decays to 0 at the new total), and with it `trainer.warmup_steps` (which the fine-tuning
  recipes derive from it). A task setting (`task.<name>`) None or [] on either side is not compared (the text /
  embedding tasks' "as the model directory records", e.g. task.labels=[]; checked by the task); elsewhere they are.
  Checked only when the mode trains and `model_dir` holds a checkpoint and a readable params.yaml.

  Raises:
    ConfigError: naming every changed key with its recorded and new value, and the fix.
  """
  model_dir = model_dir.rstrip("/")
  changed, extended = _changes(params, model_dir, mode)
  refused = [c for c in changed if c[0] not in extended and not _resume_free(c[0])]
  if not refused:
    return
  lines = "\n  ".join(f"{key}: {old!r} (params.yaml) -> {new!r} (this run)" for key, old, new in refused)
  recorded = ",".join(f"{key}={json.dumps(old)}" for key, old, _ in refused)
  if allow_change:
    logger.warning("Resuming %s with changed run-defining params (allow_params_change):\n  %s", model_dir, lines)
    return
  raise ConfigError(
      f"{model_dir} holds a checkpoint of a run with other params; resuming it would continue those weights and "
      f"optimizer slots under these, and rewrite its params.yaml:\n  {lines}\nFix: train into a new --model_dir "
      f"(task.init_checkpoint={model_dir} starts it from these weights), or rerun with the recorded values "
      f"(--params_override='{recorded}'; a value this command does not set is this version's default, which may "
      "have changed since the directory was trained); to continue this model_dir with the new values deliberately, "
      "pass allow_params_change=True to train_lib.run_experiment.")


def warn_schedule_change(params: ExperimentConfig, model_dir: str, mode: str) -> None:
  """Warns when a resumed training run trains to another `trainer.train_steps` (and warm-up) than params.yaml records.

  Called once the inputs are built (`train_lib.prepare_inputs`), after a task has resolved its own steps (SQuAD's
  `check_schedule`: steps from its epochs), so a resume of a run whose steps were resolved compares them as trained,
  not as its recipe writes them.
  """
  changed, extended = _changes(params, model_dir.rstrip("/"), mode)
  for key, old, new in (c for c in changed if c[0] in extended):
    logger.warning("%s %s -> %s in %s: the run resumes at its checkpoint's step and the learning-rate schedule "
                   "(warm-up, then decay to 0 at train_steps) continues on the new one's curve.", key, old, new,
                   model_dir.rstrip("/"))
