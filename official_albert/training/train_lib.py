"""`run_experiment`: runs a task's train / eval / train_and_eval / predict with the custom distributed loop.

The pieces: `trainer.py` (the Trainer and its training loop), `evaluation.py` (whole-data evaluation and prediction
under any strategy), `input_feed.py` (what each replica reads), `checkpointing.py` (the checkpoint books),
`preemption.py` (SIGTERM → checkpoint), `distribute.py` (strategies). `<model_dir>` is also a native model directory
(`config.json` + `ckpt-N` with a `model` root) that `official_albert.load_pretrained` reads; all file I/O goes
through `tf.io.gfile`, so gs:// works. Multi-device launch commands: docs/distributed_training.md.

Input checks (beyond the reference; each error names the config key or file and the fix): at start-up every
comma-separated pattern of every split the mode reads must match a file (`check_input_paths`: a validation glob
that matches nothing fails before the model is built, not at the first evaluation); `validate_input=True` first
reads every record of those splits through the task's own decoder and reports every bad file (`validate_inputs`);
and a read that fails during the run is re-raised, same error type, naming the bad files (`explain_read_error`).
A `<model_dir>` holding glob characters (`[ ] * ? \\`) is refused first, in every mode (`file_io.check_checkpoint_path`:
TensorFlow globs checkpoint prefixes, so its checkpoints could be written but never restored).
Before the model is built every split the mode reads is built once (`prepare_inputs`): raw files become their cached
records, so a bad row or an evaluation label that training did not see is an error before the first step, and the
vocabulary checks (`vocabulary.check_vocabulary`: records, SentencePiece model, init checkpoint vs vocab_size) run.

The SentencePiece model the task tokenizes with (the task's `sentencepiece_model_file()` when it has one, else its
config's `spm_model_file`) is copied to `<model_dir>/spiece.model` (`save_spm_model`), so the model directory is
complete for `export_saved_model`, the pipelines and `--mode=predict`.

A training run that resumes a `<model_dir>`'s checkpoint must have the run-defining params params.yaml records
(`resume_params.check_resume_params`: optimizer, schedule, seed, task, training data...; intervals, evaluation, machine
may change).

Long because: the start-up checks of a run (inputs, evaluation settings, a resume's params) sit with the one function
that runs them, `run_experiment`.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import difflib
import logging
import os
import time
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

import keras
import tensorflow as tf
import yaml

from official_albert import compat
from official_albert import file_io
from official_albert import model_directory as md
from official_albert.data import input_pipeline
from official_albert.precision import check_weights_may_change
from official_albert.precision import global_dtype_policy
from official_albert.training import base_task
from official_albert.training import checkpointing
from official_albert.training import distribute
from official_albert.training import evaluation
from official_albert.training import input_feed
from official_albert.training import resume_params
from official_albert.training import vocabulary
from official_albert.training.evaluation import EVAL_RESULTS_FILE  # noqa: F401  (public names)
from official_albert.training.evaluation import PREDICTIONS_DIR  # noqa: F401  (public names)
from official_albert.training.experiment_config import ExperimentConfig
from official_albert.training.experiment_config import save_params_yaml
from official_albert.training.hyperparams import ConfigError
from official_albert.training.resume_params import check_resume_params  # (public name)
from official_albert.training.resume_params import RESUME_FREE_KEYS  # noqa: F401  (public name)
from official_albert.training.trainer import NonFiniteLossError  # noqa: F401  (public names)
from official_albert.training.trainer import Trainer  # noqa: F401  (public names)

logger = logging.getLogger(__name__)

MODES = ("train", "eval", "train_and_eval", "predict")
# mixed_float16 is the GPU recipe (loss scaling for float16 tensor cores); on a CPU it only checks that configuration.
FLOAT16_ON_CPU_WARNING = (
    "runtime.mixed_precision_dtype=mixed_float16 on a CPU-only machine: CPUs have no fast float16 matmuls, so this "
    "runs 2-3x slower than float32 on some CPUs and ~100x slower on others (docs/distributed_training.md, "
    "'Precision on a CPU'). Use it to check a GPU configuration with a few steps; to train on CPU use float32, or "
    "mixed_bfloat16 where the CPU runs bf16 fast.")
BEST_CHECKPOINT_PREFIX = checkpointing.BEST_CHECKPOINT_PREFIX


def resolve_runtime(params: ExperimentConfig, strategy: tf.distribute.Strategy) -> ExperimentConfig:
  """A copy of `params` with the automatic runtime choices made: mixed_precision_dtype '' → mixed_bfloat16 on TPU,
  else float32. Always a copy: the run's start-up resolves more in place (SQuAD's steps from its epochs,
  `prepare_inputs`), which must not reach the caller's config (a notebook's second run from it).

  Also refuses, at start-up, combinations that TensorFlow cannot run.
  """
  params = copy.deepcopy(params)
  runtime = params.runtime
  if not runtime.mixed_precision_dtype:
    params = params.override({"runtime": {"mixed_precision_dtype":
                                          "mixed_bfloat16" if distribute.is_tpu(strategy) else "float32"}})
  if (params.runtime.mixed_precision_dtype == "mixed_float16" and distribute.is_tpu(strategy)):
    raise ValueError("runtime.mixed_precision_dtype=mixed_float16 on TPU: TPUs compute in bfloat16: use mixed_bfloat16")
  return params


@contextlib.contextmanager
def _op_determinism(enable: bool) -> Iterator[None]:
  """TensorFlow's op determinism on inside the block when `enable`; the process's setting restored on exit.

  Why: the setting is global and `tf.config` has no public way back, so one `enable_op_determinism=True` run left
  every later run and pipeline of the session (a notebook) on deterministic kernels: slower, and on a GPU some ops
  refuse to run (UnimplementedError) where a fresh process runs them.
  """
  from tensorflow.python.framework import config as tf_config  # noqa: PLC0415 (the getter / disabler are not public)
  was_enabled = tf_config.is_op_determinism_enabled()
  if enable:
    tf.config.experimental.enable_op_determinism()
  try:
    yield
  finally:
    if not was_enabled:
      tf_config.disable_op_determinism()


@contextlib.contextmanager
def forget_custom_gradients() -> Iterator[None]:
  """Drops, on exit, the gradients that `tf.custom_gradient` registered inside the block.

  Why: traced in a tf.function (every step function of a run), `tf.custom_gradient` registers its gradient in
  TensorFlow's process-wide gradient registry under a new name (`CustomGradient-<uid>`) and never removes it; that
  closure holds the traced graph, so each run of a process (a notebook's sweep) kept its step graphs and their
  functions: +18 registered functions, +42,505 Python objects, ~35 MB RSS per tiny pretraining run (the fused GELU
  gradient, the embeddings' and chunked attention's). A finished trace holds its gradient itself, so those names are
  dead once the block ends; a later trace registers new ones. Not for runs traced at once in threads of one process.
  (TensorFlow has no public way to unregister: `compat.gradient_registrations`.)
  """
  registry = compat.gradient_registrations()
  before = set(registry)
  try:
    yield
  finally:
    for name in [name for name in list(registry) if name not in before and name.startswith("CustomGradient-")]:
      registry.pop(name, None)


@contextlib.contextmanager
def runtime_scope(params: ExperimentConfig) -> Iterator[None]:
  """Runs the block under `params.runtime`: its seeds, op determinism and dtype policy (restored afterwards).

  `run_experiment` trains inside it; code that builds a `Trainer` itself (tests, benchmarks) uses it too, so the
  policy of one run never leaks into the next, even when the block raises, nor do its traced graphs
  (`forget_custom_gradients`). Also warns about bf16 with XLA on CPU, and refuses a process whose oneDNN kernels
  were told the weights never change (`check_weights_may_change`).
  """
  check_weights_may_change("official_albert.train", probe=False)  # (the Trainer probes, its strategy built)
  runtime = params.runtime
  with (global_dtype_policy(runtime.mixed_precision_dtype or "float32"), _op_determinism(runtime.enable_op_determinism),
        forget_custom_gradients()):
    keras.utils.set_random_seed(runtime.seed)
    if (runtime.jit_compile and "bfloat16" in runtime.mixed_precision_dtype and not runtime.tpu
        and not tf.config.list_physical_devices("GPU")):
      # Measured (make bench): on CPU, XLA lowers bf16 matmuls without oneDNN's AVX-512/AMX bf16 kernels, so an
      # XLA bf16 step is slower than the fp32 one, while the graph path runs bf16 ~2x faster than fp32.
      logger.warning("runtime.jit_compile=True with %s on CPU: XLA:CPU has no fast bf16 matmuls; set "
                     "runtime.jit_compile=false for bf16 on CPU.", runtime.mixed_precision_dtype)
    if (runtime.mixed_precision_dtype == "mixed_float16" and not runtime.tpu
        and not tf.config.list_physical_devices("GPU")):
      logger.warning(FLOAT16_ON_CPU_WARNING)
    yield


# ------------------------------------------------------------------------------------------------ input checks
SPLIT_ROLES = {"task.train_data": "train", "task.validation_data": "eval", "task.predict_data": "predict"}


def input_splits(params: ExperimentConfig, mode: str) -> List[Tuple[str, Any]]:
  """(config key, data config) of every split `mode` reads: train_data for training, validation_data for
  evaluation (the training files when its input_path is empty, as the evaluator does), predict_data for predict."""
  task = params.task
  splits = []
  if mode in ("train", "train_and_eval"):
    splits.append(("task.train_data", task.train_data))
  if mode in ("eval", "train_and_eval"):
    data = task.validation_data
    if not data.input_path.strip():
      data = evaluation.with_training_files(data, task.train_data)
    splits.append(("task.validation_data", data))
  if mode == "predict" and getattr(task, "predict_data", None) is not None:
    splits.append(("task.predict_data", task.predict_data))
  return splits


def _patterns(data) -> List[str]:
  path = data.input_path.strip()
  return [] if path in ("", "dummy") else [p.strip() for p in path.split(",") if p.strip()]


def check_input_paths(params: ExperimentConfig, mode: str) -> None:
  """Every comma-separated pattern of every split `mode` reads matches at least one file.

  Raises:
    InputDataError: naming the config key, the pattern and the fix (before any model is built).
  """
  for key, data in input_splits(params, mode):
    if key == "task.train_data" and not data.input_path.strip():
      raise input_pipeline.InputDataError(
          f"{key}.input_path is empty: --mode={mode} trains on it. Set it to the training TFRecords "
          "(a glob such as out/train-* or a comma-separated list).")
    for pattern in _patterns(data):
      # Any file counts here (a task may read raw text files); which of them are records is the reader's business.
      # An existing path counts as written, glob characters and all (`data [v1]/train.tfrecord`), as the reader does.
      if not (input_pipeline.literal_path(pattern) or tf.io.gfile.glob(pattern)):
        when = (f" (evaluated every {params.trainer.validation_interval} steps and at the end)"
                if key == "task.validation_data" and mode == "train_and_eval" else "")
        raise input_pipeline.InputDataError(
            f"{key}.input_path={data.input_path!r}: {pattern!r} matches no file; --mode={mode} reads this "
            f"split{when}. Fix: correct the pattern, or create those files first (data_prep.create_pretraining_data "
            "/ create_finetuning_data).")


def _length_setting(key: str, data, problem: input_pipeline.RecordProblem) -> Tuple[str, Optional[int]]:
  """The config key whose value sets the length TensorFlow expected, and the value that reads these records."""
  try:
    expected, found = int(problem.expected.split(",")[-1] or 0), int(problem.found)
  except ValueError:
    return "", None
  names = [f.name for f in dataclasses.fields(data) if f.name in ("seq_length", "max_predictions_per_seq")]
  for exact in (True, False):
    for name in names:
      value = getattr(data, name)
      if value and (expected == value if exact else expected % value == 0):
        factor = expected // value
        return f"{key}.{name}", (found // factor if found % factor == 0 else None)
  return "", None


def _scan_splits(params: ExperimentConfig, mode: str, task, decode: bool) -> Tuple[List[str], List[str]]:
  """Reads every file of every split `mode` reads: (lines, one per bad file; summary lines)."""
  problems, summary, seen = [], [], set()
  for key, data in input_splits(params, mode):
    if not _patterns(data):
      continue
    with input_pipeline.capture_reads() as reads:
      task.build_inputs(data, role=SPLIT_ROLES[key])
    for read in reads:
      seen_key = (read.files, key) if decode else read.files  # undecoded, a file reads the same for any split
      if seen_key in seen:
        continue
      seen.add(seen_key)
      start = time.monotonic()
      count, found = input_pipeline.scan_files(read.files, read.decode_fn if decode else None, read.compression_type)
      summary.append(f"{key}: {len(read.files)} file(s), {count} good records, {len(found)} bad file(s) "
                     f"({time.monotonic() - start:.1f} s)")
      for problem in found:
        setting, value = _length_setting(key, data, problem) if problem.kind == "length" else ("", None)
        problems.append(f"{key}: " + problem.describe(setting, value))
  return problems, summary


def validate_inputs(params: ExperimentConfig, mode: str, task) -> List[str]:
  """Reads and decodes every record of every split `mode` reads (the train binary's `--validate_input`).

  Returns:
    One summary line per split read.

  Raises:
    InputDataError: listing EVERY bad file (its first bad record, what is wrong, the fix).
  """
  problems, summary = _scan_splits(params, mode, task, decode=True)
  for line in summary:
    logger.info("validate_input: %s", line)
  if problems:
    raise input_pipeline.InputDataError(
        f"--validate_input: {len(problems)} bad input file(s); nothing was trained:\n  " + "\n  ".join(problems))
  return summary


def explain_read_error(error: Exception, params: ExperimentConfig, mode: str, task) -> Optional[Exception]:
  """A read that failed inside tf.data (which names no file) → the same error type naming every bad file.

  Returns None when `error` is no read error or no bad file is found (the caller re-raises the original).
  """
  if task is None or not input_pipeline.is_read_error(error):
    return None
  decode = not isinstance(error, tf.errors.DataLossError)  # a damaged file shows without decoding: faster
  logger.error("Input read failed (%s); reading the input files to find the bad one.",
               input_pipeline.short_message(error.message))
  try:
    problems, _ = _scan_splits(params, mode, task, decode=decode)
  except Exception:  # pylint: disable=broad-except  (the original error matters more than the diagnosis)
    logger.exception("Could not scan the input files.")
    return None
  if not problems:
    return None
  message = (f"{input_pipeline.short_message(error.message)}\nBad input file(s):\n  " + "\n  ".join(problems)
             + "\n(`python -m official_albert.train ... --validate_input` checks every record before training.)")
  return type(error)(error.node_def, error.op, message)


def prepare_inputs(params: ExperimentConfig, mode: str, task, model_dir: Optional[str] = None) -> None:
  """Builds every split `mode` reads once, before the model: raw files become their cached records (a bad row or an
  unseen label is reported now, naming file:line), then `vocabulary.check_vocabulary` and a task's `check_schedule`
  (which may resolve the steps: SQuAD's from its epochs), then, resuming `model_dir`, the steps as resolved against
  params.yaml's (`resume_params.warn_schedule_change`).

  Raises:
    vocabulary.VocabularyError: the inputs, SentencePiece model, checkpoint and `task.model.vocab_size` disagree.
  """
  reads = []
  for key, data in input_splits(params, mode):
    if not _patterns(data):
      continue
    with input_pipeline.capture_reads() as captured:
      task.build_inputs(data, role=SPLIT_ROLES[key])
    reads += [(key, read) for read in captured]
  vocabulary.check_vocabulary(params, mode, task, reads)
  getattr(task, "check_schedule", lambda params, mode: None)(params, mode)  # (SQuAD: its steps vs its epochs)
  if model_dir:
    resume_params.warn_schedule_change(params, model_dir, mode)


# ------------------------------------------------------------------------------------------------ the run
def check_eval_settings(trainer: Trainer, mode: str) -> None:
  """The evaluation settings of a mode that evaluates, checked at start-up rather than at the first evaluation
  (step 5000 of the paper recipes): the task's own checks (`Task.check_eval_settings`), and that
  `trainer.best_checkpoint_metric` names an eval metric (the batch sizes are checked earlier,
  `input_feed.check_global_batches`). Every task states its metric names without an evaluation
  (`Task.eval_metric_names`: its Keras metrics and what its `reduce_aggregated_logs` adds, e.g. GLUE's MCC or
  SQuAD's F1); one that cannot (None) is checked at its first evaluation, as before. A loss ranked by max warns.

  Raises:
    ConfigError: naming the key, the value and the fix.
  """
  if mode not in ("eval", "train_and_eval"):
    return
  params = trainer.params
  trainer.task.check_eval_settings(params.trainer)
  name = evaluation.check_best_checkpoint_mode(params.trainer)
  stated = trainer.task.eval_metric_names(trainer.eval_metrics) if name else None
  if stated is None:
    return
  known = sorted(set(stated) | {"global_step", "eval_steps"})
  if name not in known:
    close = difflib.get_close_matches(name, known, n=1)
    raise ConfigError(f"trainer.best_checkpoint_metric={name!r} is not an eval metric of task "
                      f"{trainer.task.name!r}" + (f" (did you mean {close[0]!r}?)" if close else "")
                      + f"; its eval metrics: {known}.")


def save_spm_model(task, params: ExperimentConfig, model_dir: str) -> Optional[str]:
  """Copies the task's SentencePiece model to `<model_dir>/spiece.model` when absent or different (atomically).

  Returns:
    The path written, or None (no model known, or the same bytes already there).
  """
  hook = getattr(task, "sentencepiece_model_file", None)
  source = hook() if callable(hook) else getattr(params.task, "spm_model_file", "")
  target = f"{model_dir.rstrip('/')}/{md.SPM_FILE}"
  if not source or source == target:
    return None
  with file_io.open_file(source, "rb") as f:
    data = f.read()
  if file_io.exists(target):
    with file_io.open_file(target, "rb") as f:
      if f.read() == data:
        return None
    logger.warning("%s differs from the SentencePiece model this run uses (%s); replacing it.", target, source)
  file_io.atomic_write_bytes(target, data)
  logger.info("Copied the SentencePiece model %s to %s.", source, target)
  return target


def keep_recorded_init_checkpoint(params: ExperimentConfig, model_dir: str,
                                  evaluating: bool = False) -> ExperimentConfig:
  """`params` with the `task.init_checkpoint` that `<model_dir>/params.yaml` records, for a run that resumed there.

  A resume continues model_dir's checkpoint (as Model Garden does), so a new init_checkpoint is unused and must not
  replace the recorded one when params.yaml is re-saved (it would claim the weights came from it); a differing one
  is logged as a WARNING naming both. Without a params.yaml recording one, `params` is returned as is. An evaluation
  of model_dir's own checkpoints (`evaluating`) takes it too: eval_results.json's "init" names where the evaluated
  weights started, not the eval command's config (which said "random" for a fine-tuned model).
  """
  try:
    with file_io.open_file(f"{model_dir.rstrip('/')}/{md.PARAMS_FILE}") as f:
      recorded = (yaml.safe_load(f) or {})["task"]["init_checkpoint"]
  except (OSError, tf.errors.OpError, yaml.YAMLError, KeyError, TypeError):
    return params
  given = params.task.init_checkpoint
  if not isinstance(recorded, str) or file_io.same_location(str(given or ""), recorded):
    return params
  if given and evaluating:
    logger.warning("task.init_checkpoint=%r is NOT used: this evaluation reads the checkpoints of %s, a run started "
                   "from %r (params.yaml), which eval_results.json names.", given, model_dir,
                   recorded or "random weights")
  elif given:
    logger.warning("task.init_checkpoint=%r is NOT used: %s holds checkpoints of a run started from %r (params.yaml "
                   "keeps it) and this run resumes from its latest checkpoint. To start from %r, train into a new "
                   "--model_dir.", given, model_dir, recorded or "random weights", given)
  return params.override({"task": {"init_checkpoint": recorded}})


# Long because: the start-up steps of a run in their one safe order (checks before any write, the restore before
# params.yaml is rewritten, what the old params.yaml tells recorded before that), read top to bottom.
def run_experiment(params: ExperimentConfig, model_dir: str, mode: str = "train", strategy=None, task=None,
                   on_loop_end: Optional[Callable[[int, Dict[str, float]], None]] = None,
                   checkpoint: Optional[str] = None, validate_input: bool = False,
                   allow_params_change: bool = False) -> Dict[str, Any]:
  """Runs `mode` (train | eval | train_and_eval | predict) for `params` in `model_dir`.

  Writes `params.yaml` (the effective config, automatic choices made) and `config.json` (so model_dir is a native
  model directory) on the chief, except in predict mode, which leaves the training run's files as they are; they
  are written once the checkpoint is restored (or the model initialised), so a refused resume changes neither. The
  evaluation settings are checked before that (`check_eval_settings`).
  `checkpoint` (a prefix) is what eval / predict read (default: eval the latest ckpt-N, predict model.ckpt-best);
  the training modes refuse it (they resume from model_dir). An empty `model_dir` is refused. The input patterns of
  the splits `mode` reads are checked first (`check_input_paths`); `validate_input` also reads every record of them
  before the model is built (`validate_inputs`); a read that fails later names its file (`explain_read_error`).
  A training run that resumes `model_dir` with run-defining params other than its params.yaml records is refused
  before anything is built (`check_resume_params`); `allow_params_change=True` continues it deliberately (logged).

  Returns:
    train: the `Trainer.train` summary plus "best_checkpoint" (best_checkpoint.json or None) and "trainer" (the
    `Trainer`, for callers that want the model); eval: the eval results; train_and_eval: the train summary whose
    "eval_results" holds the final evaluation; predict: `Trainer.predict`'s summary.
  """
  if mode not in MODES:
    raise ValueError(f"--mode={mode!r} is not one of {MODES}.")
  if not str(model_dir).strip():
    raise ValueError(f"model_dir={model_dir!r} is empty: the run would be written to the current folder and to '/'.")
  if checkpoint and mode not in ("eval", "predict"):
    raise ValueError(f"checkpoint={checkpoint!r} with --mode={mode}: only eval and predict read a given checkpoint; "
                     "training resumes from model_dir (set task.init_checkpoint to start from other weights).")
  file_io.check_checkpoint_path(model_dir, "--model_dir")  # (every mode, before anything is written)
  # The strategy first: logical CPU devices (runtime.num_cpu_devices) must exist before TensorFlow runs any op.
  strategy = strategy or distribute.strategy_from_runtime(params.runtime)
  params = resolve_runtime(params, strategy)
  check_resume_params(params, model_dir, mode, allow_params_change)  # before params.yaml can be rewritten
  check_input_paths(params, mode)
  with runtime_scope(params), contextlib.ExitStack() as watch:
    trainer = None
    try:
      params.validate()  # then the batch sizes, before model_dir gets a file (the records, params.yaml):
      input_feed.check_global_batches(input_splits(params, mode), strategy.num_replicas_in_sync, params.trainer)
      task = task or base_task.create_task(params.task, logging_dir=model_dir.rstrip("/"))
      task.logging_dir = task.logging_dir if distribute.is_chief(strategy) else None  # (chief-only writes: Trainer)
      if validate_input:
        validate_inputs(params, mode, task)
      prepare_inputs(params, mode, task, model_dir)
      trainer = Trainer(params, model_dir, task=task, strategy=strategy)
      if mode == "predict":
        return trainer.predict(checkpoint)
      if mode != "eval":  # a SIGTERM from here to train() (resume, params.yaml) is kept for train(), not a kill;
        watch.callback(trainer.preemption.clear)  # one after train()'s end (its last save) is dropped with the watcher
        watch.callback(trainer.close)  # (the owner lock: a training run's end in a longer process, run_lock.py)
        watch.enter_context(trainer.preemption)
      check_eval_settings(trainer, mode)
      # The restore (or fresh initialisation) first: a refused resume leaves the run's record as it was (resumable).
      if mode == "eval":
        trainer.restore_for_eval(checkpoint)
        if not checkpoint or file_io.same_location(os.path.dirname(str(checkpoint)), trainer.model_dir):
          trainer.params = keep_recorded_init_checkpoint(params, trainer.model_dir, evaluating=True)
      elif trainer.initialize_or_resume():
        params = keep_recorded_init_checkpoint(params, trainer.model_dir)
        trainer.params = params  # the summary's and eval_results.json's "init" name where the weights came from
      # An eval-only run records its config only in a directory that has none: params.yaml is the training run's record
      # (predict and the exports read it); an eval job beside the trainer would race it (Model Garden: train modes).
      if trainer.is_chief and (mode != "eval" or not tf.io.gfile.exists(f"{trainer.model_dir}/{md.PARAMS_FILE}")):
        tf.io.gfile.makedirs(trainer.model_dir)
        evaluation.record_legacy_chosen_on(trainer)  # (an older best file is judged by the old params.yaml)
        save_params_yaml(params, trainer.model_dir)
        trainer.model.config.to_json_file(f"{trainer.model_dir}/{md.CONFIG_FILE}")
        save_spm_model(trainer.task, params, trainer.model_dir)
      if mode == "eval":
        return trainer.evaluate()
      eval_every = params.trainer.validation_interval if mode == "train_and_eval" else None
      summary = trainer.train(eval_every=eval_every, on_loop_end=on_loop_end)
      summary["best_checkpoint"] = checkpointing.read_best(trainer.model_dir)
      summary["trainer"] = trainer
      return summary
    except (tf.errors.DataLossError, tf.errors.InvalidArgumentError) as error:
      named = explain_read_error(error, params, mode, trainer.task if trainer is not None else task)
      if named is None:
        raise
      raise named from error
