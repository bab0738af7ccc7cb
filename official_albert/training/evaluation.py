"""Evaluation and prediction over the whole data, under any strategy: every example scored exactly once.

Both run the model under `strategy.run` on static-shape batches (`input_feed.evaluation_stream`: the global stream,
the last global batch padded with `_valid` = 0 examples, sliced per replica), so TPUs and XLA see one shape and every
worker runs the same number of steps. Each step's per-example outputs are gathered from all replicas and workers
(the replica context's `all_gather`, in global replica order = stream order) and the padding rows dropped, before the
task's `aggregate_logs`. Streaming Keras metrics weight examples by `_valid`, and their results are reduced over all
replicas and workers. So GLUE / SQuAD / RACE metrics under MultiWorkerMirroredStrategy equal the single-process ones,
and predictions come out in record order. Only the chief writes files (`eval_results.json`, the best-checkpoint copy,
prediction files).
"""

from __future__ import annotations

import functools
import logging
import os
from typing import Any, Callable, Dict, Mapping, Optional

import numpy as np
import tensorflow as tf
import yaml

from official_albert import file_io
from official_albert import model_directory as md
from official_albert.data import file_identity
from official_albert.data import input_pipeline
from official_albert.training import base_task
from official_albert.training import checkpointing
from official_albert.training import input_feed
from official_albert.training import run_lock
from official_albert.training.experiment_config import best_checkpoint_higher_is_better
from official_albert.training.experiment_config import loss_like_metric
from official_albert.training.guardrails import init_source

logger = logging.getLogger(__name__)

EVAL_RESULTS_FILE = md.EVAL_RESULTS_FILE
PREDICTIONS_DIR = md.PREDICTIONS_DIR
# What an evaluation that falls back to the training files copies with them: the reader they need (a tokenized
# corpus is read by the dynamic pipeline, `tasks.pretraining_dynamic`) and every setting that pipeline draws with.
TRAIN_DATA_READ_SETTINGS = ("dynamic_masking", "masked_lm_prob", "short_seq_prob", "max_ngram")


def with_training_files(data, train):
  """The evaluation data config `data` (whose input_path is empty) reading the training files of `train`, with the
  settings that say how to read them (`TRAIN_DATA_READ_SETTINGS`, those both configs have): the training files of
  `dynamic_masking=true` are a tokenized corpus, which the static record reader cannot read."""
  return data.replace(input_path=train.input_path, **{
      name: getattr(train, name) for name in TRAIN_DATA_READ_SETTINGS if hasattr(data, name) and hasattr(train, name)})


def input_key(input_path) -> str:
  """One spelling of an input path (a comma list or a list of patterns): each pattern as `input_pipeline.path_key`
  writes it, so `./glue`, `glue/` and its absolute path name one input."""
  patterns = input_path if isinstance(input_path, (list, tuple)) else str(input_path or "").split(",")
  return ",".join(input_pipeline.path_key(p.strip()) for p in patterns if str(p).strip())


def chosen_on(task_name: str, task: Mapping[str, Any],
              canonical: Optional[Callable[[str], str]] = None) -> Dict[str, str]:
  """What an evaluation of the task config `task` (as a dict: `as_dict()`, or params.yaml's task section) scores:
  the task (its registered name, with `task_name` where the config has one: glue/mnli and glue/mnli-mm read one
  folder, as its dev_matched and its dev_mismatched file) and the evaluation input (validation_data's, else
  train_data's, which evaluation falls back to). `model.ckpt-best` is ranked only among evaluations of one such pair
  (`CheckpointKeeper.update_best`). `canonical`: the task's one spelling of a `task_name` (GLUE's `sst2` is
  `sst-2`), so that an alias does not read as another task."""
  data = task.get("validation_data") or {}
  path = data.get("input_path") or (task.get("train_data") or {}).get("input_path") or ""
  sub = task.get("task_name")
  if sub and canonical is not None:
    try:
      sub = canonical(str(sub))
    except ValueError:  # (an unknown name: kept as written; the task itself refuses it)
      pass
  return {"task": f"{task_name}/{sub}" if sub else task_name, "validation_input": input_key(path)}


def recorded_chosen_on(model_dir: str, task_name: str,
                       canonical: Optional[Callable[[str], str]] = None) -> Optional[Dict[str, str]]:
  """`chosen_on` of the task section model_dir's params.yaml records (the training run's: an eval-only run writes
  none where one exists), for a best_checkpoint.json written before it recorded its own; None without one."""
  path = md.path(model_dir, md.PARAMS_FILE)
  if not file_io.exists(path):
    return None
  try:
    with file_io.open_file(path) as f:
      task = (yaml.safe_load(f) or {}).get("task")
  except (yaml.YAMLError, OSError, AttributeError):
    return None
  return chosen_on(task_name, task, canonical) if isinstance(task, dict) else None


def record_legacy_chosen_on(trainer) -> None:
  """Writes into a best_checkpoint.json kept without `chosen_on` (written before it was recorded) what model_dir's
  params.yaml says it was chosen on, before a run rewrites params.yaml with its own params (chief only; an eval-only
  run writes params.yaml only where there is none, and then finds nothing to record).

  Why: such a best is judged by `recorded_chosen_on`, read from params.yaml at each evaluation; a resume rewrites the
  file first, so a resume evaluating on another file (validation_data is no run-defining key) ranked its numbers
  against the best chosen on the old dev set, and could replace it, as if both scored one evaluation.
  """
  model_dir = trainer.model_dir
  if not trainer.is_chief or not file_io.exists(md.path(model_dir, checkpointing.BEST_CHECKPOINT_INFO)):
    return
  task_name = trainer.task.name or type(trainer.task).__name__
  legacy = recorded_chosen_on(model_dir, task_name, getattr(trainer.task, "canonical_task_name", None))
  if legacy is None:
    return
  with run_lock.exclusive(model_dir, run_lock.BEST_LOCK_FILE, "best-checkpoint update"):
    best = checkpointing.read_best(model_dir)
    if isinstance(best, dict) and checkpointing.CHOSEN_ON_KEY not in best:
      file_io.atomic_write_json(md.path(model_dir, checkpointing.BEST_CHECKPOINT_INFO),
                                dict(best, **{checkpointing.CHOSEN_ON_KEY: legacy}))
      logger.info("%s/%s: recorded the evaluation its best was chosen on, %s (from params.yaml, before this run "
                  "rewrites it).", model_dir, checkpointing.BEST_CHECKPOINT_INFO, legacy)


def check_best_checkpoint_mode(config) -> str:
  """`config.best_checkpoint_metric` (of a `TrainerConfig`), after a warning when an explicit
  `best_checkpoint_mode=max` ranks a loss-like metric: allowed (a params.yaml written before `auto` existed records
  max, and means it), but it keeps the checkpoint with the highest loss as `model.ckpt-best`."""
  name = config.best_checkpoint_metric
  if name and config.best_checkpoint_mode == "max" and loss_like_metric(name):
    logger.warning("trainer.best_checkpoint_metric=%r reads as a loss, but trainer.best_checkpoint_mode=max keeps "
                   "the checkpoint with the HIGHEST %s as model.ckpt-best. Set trainer.best_checkpoint_mode=min, or "
                   "auto (the default: min for a loss-like name).", name, name)
  return name


class Evaluator:
  """Evaluation and prediction of a `Trainer` (uses its strategy, task, model and metrics)."""

  def __init__(self, trainer):
    self.trainer = trainer
    self._step_fns: Dict[str, Any] = {}
    self._given_checkpoint: Optional[str] = None  # the prefix `restore_for_eval` was given (--checkpoint)

  # ------------------------------------------------------------------------------------------------ data
  def _eval_data_config(self):
    params = self.trainer.params
    data = params.task.validation_data
    if not data.input_path:
      # Like the reference (§4.2), evaluation falls back to the training files, read without shuffling.
      logger.warning("task.validation_data.input_path is empty: evaluating on task.train_data.input_path.")
      data = with_training_files(data, params.task.train_data)
    return data.replace(seed=params.runtime.seed) if data.seed is None else data

  def _batches(self, data_config, max_global_batches: int, role: str):
    """Yields one step's distributed input at a time, until the (padded) stream ends; `role`: eval | predict."""
    trainer = self.trainer
    build = functools.partial(trainer.task.build_inputs, role=role)
    if trainer.is_tpu:
      def dataset_fn(ctx):
        local = ctx.num_replicas_in_sync // ctx.num_input_pipelines
        topology = input_feed.Topology(ctx.num_replicas_in_sync, ctx.input_pipeline_id * local, local)
        return input_feed.evaluation_stream(build, data_config, topology, max_global_batches)
      yield from trainer.strategy.distribute_datasets_from_function(dataset_fn)
      return
    iterator = iter(input_feed.evaluation_stream(build, data_config, trainer.topology(), max_global_batches))
    local = trainer.num_local_replicas
    while True:
      batches = []
      for _ in range(local):
        batch = next(iterator, None)
        if batch is None:
          if batches:
            raise RuntimeError("The evaluation stream ended inside a global batch.")
          return
        batches.append(batch)
      yield batches[0] if local == 1 else trainer.strategy.experimental_distribute_values_from_function(
          lambda ctx, b=batches: b[ctx.replica_id_in_sync_group % local])

  def _step_fn(self, kind: str):
    """tf.function: one step of `kind` ("eval" | "predict") under strategy.run, outputs gathered in replica order."""
    if kind in self._step_fns:
      return self._step_fns[kind]
    trainer = self.trainer
    strategy, task, model, metrics = trainer.strategy, trainer.task, trainer.model, trainer.eval_metrics

    def replica_fn(batch):
      features, labels = task.split_inputs(batch)
      if kind == "eval":
        outputs = task.validation_step(batch, model, metrics)
      else:
        outputs = task.predict_outputs(features, model(task.model_inputs(features), training=False))
      outputs = dict(outputs)
      outputs[base_task.VALID_KEY] = labels[base_task.VALID_KEY] if isinstance(labels, dict) else (
          features[base_task.VALID_KEY])
      return outputs

    if trainer.params.runtime.jit_compile and not trainer.is_tpu:
      replica_fn = tf.function(replica_fn, jit_compile=True, autograph=False)

    def gathered_fn(batch):
      # The replica context's all_gather (outside XLA, like the training all-reduce), not `strategy.gather`: on TF
      # 2.21 MirroredStrategy.gather over logical CPUs returns replica 0's rows only, and inside a tf.function
      # under MultiWorkerMirroredStrategy it fails to trace. Every replica gets the global rows in replica order.
      # tf.identity places each output on this replica's device: an input passed straight through (`_valid`) has
      # no device in the graph, and the collective needs one.
      outputs = tf.nest.map_structure(tf.identity, replica_fn(batch))
      return tf.distribute.get_replica_context().all_gather(outputs, axis=0)

    # reduce_retracing: with dynamic padding batches differ in length; one shape-generic trace serves them all.
    # autograph=False: no tensor control flow in the step, nor in what it calls (docs/design.md, "AutoGraph").
    @tf.function(reduce_retracing=True, autograph=False)
    def step(batch):
      return tf.nest.map_structure(lambda v: strategy.experimental_local_results(v)[0],
                                   strategy.run(gathered_fn, args=(batch,)))

    self._step_fns[kind] = step
    return step

  def _run(self, kind: str, data_config, max_global_batches: int = -1):
    """Runs every step; returns (the task's aggregated state or None, number of global batches)."""
    task, step_fn = self.trainer.task, self._step_fn(kind)
    state, steps = None, 0
    for batch in self._batches(data_config, max_global_batches, role=kind):
      gathered = {k: np.asarray(v) for k, v in step_fn(batch).items()}
      keep = gathered.pop(base_task.VALID_KEY) > 0
      if gathered:
        state = task.aggregate_logs(state, {k: v[keep] for k, v in gathered.items()})
      steps += 1
    return state, steps

  # ------------------------------------------------------------------------------------------------ evaluate
  def evaluate(self, steps: Optional[int] = None, write_results: bool = True) -> Dict[str, Any]:
    """Evaluates the current weights on `task.validation_data`: `steps` global batches (-1: the whole set).

    Writes `<model_dir>/eval_results.json` (chief; the results plus `"init"`: `task.init_checkpoint`, or "random",
    and `"checkpoint"` after `restore_for_eval(checkpoint)`) and updates `model.ckpt-best` when the task metric
    improved, unless the weights came from a given checkpoint that is not model_dir's `ckpt-<step>` (the best copy
    is made from that file, which would hold other weights), or the best was chosen on another task or evaluation
    input (`chosen_on`).
    """
    trainer = self.trainer
    steps = trainer.params.trainer.validation_steps if steps is None else steps
    data = self._eval_data_config()
    for metric in trainer.eval_metrics:
      metric.reset_state()
    state, done = self._run("eval", data, steps)
    if done == 0:
      raise ValueError(f"Evaluation read no batches from {data.input_path!r}.")
    results: Dict[str, Any] = {m.name: float(np.asarray(m.result())) for m in trainer.eval_metrics}
    results.update(trainer.task.reduce_aggregated_logs(state, global_step=trainer.step))
    results["global_step"] = trainer.step
    results["eval_steps"] = done
    logger.info("eval at step %d: %s", trainer.step,
                "  ".join(f"{k} {v:.4f}" if isinstance(v, float) else f"{k} {v}" for k, v in results.items()))
    trainer.summaries.write("eval", {k: v for k, v in results.items() if isinstance(v, float)}, trainer.step)
    if write_results and trainer.is_chief:
      # The best copy first, eval_results.json last: a restart takes a step whose eval_results.json exists as fully
      # evaluated (`evaluate_if_missed`), so a kill between the two must leave the results unwritten, not the copy.
      name, higher = self.best_metric()
      own = os.path.normpath(f"{trainer.model_dir}/{checkpointing.CHECKPOINT_NAME}-{trainer.step}")
      if name and (not self._given_checkpoint or os.path.normpath(self._given_checkpoint) == own):
        # Ranked only against a best chosen on this task and data (a glue/mnli-mm eval of a glue/mnli model_dir
        # scores dev_mismatched: it must not replace the checkpoint chosen on dev_matched).
        task_name = trainer.task.name or type(trainer.task).__name__
        canonical = getattr(trainer.task, "canonical_task_name", None)
        evaluated = trainer.task.evaluation_input(data)
        ours = chosen_on(task_name, {"task_name": getattr(trainer.params.task, "task_name", None),
                                     "validation_data": {"input_path": evaluated}}, canonical)
        ours.update(file_identity.evaluation_content(evaluated))  # (a dev file corrected in place is other data)
        trainer.checkpoint_keeper().update_best(
            results, name, higher, chosen_on=ours,
            legacy_chosen_on=recorded_chosen_on(trainer.model_dir, task_name, canonical))
      # "init": where the weights started (task.init_checkpoint, or "random"): a fine-tuning result from random
      # weights must not pass for a pretrained model's (the returned dict stays numeric).
      given = {"checkpoint": self._given_checkpoint} if self._given_checkpoint else {}
      file_io.atomic_write_json(f"{trainer.model_dir}/{EVAL_RESULTS_FILE}",
                                dict(results, init=init_source(trainer.params), **given))
    return results

  def evaluate_if_missed(self, state, eval_every: Optional[int]) -> None:
    """Evaluates this step when it is an evaluation step that has no results: a run killed during its evaluation
    (or before its best copy, which precedes eval_results.json), or preempted at an evaluation step, evaluates on
    restart (for the last step: a rerun of a finished run). `state` is the trainer's `actions.LoopState`."""
    trainer = self.trainer
    step = trainer.step
    if not eval_every or step == 0 or not (step % eval_every == 0 or step >= state.total):
      return
    missed = False
    if trainer.is_chief:  # the chief's eval_results.json decides, for every worker (the evaluation is collective)
      results = checkpointing.read_eval_results(trainer.model_dir)
      missed = results is None or results.get("global_step") != step
    if not trainer.all_workers(missed, require_all=False):
      return
    logger.info("Step %d is an evaluation step without results (the run stopped before its evaluation): "
                "evaluating it now.", step)
    # Called right after the resume: the weights are those of the restored ckpt-<step>, which model.ckpt-best copies.
    state.eval_results = self.evaluate()
    state.eval_history.append((step, state.eval_results))

  def best_metric(self):
    """(metric name, higher is better) that selects `model.ckpt-best`: `trainer.best_checkpoint_metric` in the
    direction of `trainer.best_checkpoint_mode` (auto: lower is better for a loss-like name), else the task's."""
    trainer = self.trainer
    config = trainer.params.trainer
    if config.best_checkpoint_metric:
      return config.best_checkpoint_metric, best_checkpoint_higher_is_better(config.best_checkpoint_metric,
                                                                             config.best_checkpoint_mode)
    return trainer.task.best_metric, trainer.task.best_metric_higher_is_better

  def restore_for_eval(self, checkpoint: Optional[str] = None) -> str:
    """Restores model weights (and the step) from `checkpoint` (a prefix: `--mode=eval --checkpoint`) or the latest
    one, for evaluation; returns the prefix restored. Without a `ckpt-N` in model_dir, the checkpoint
    `md.resolve_checkpoint` finds there (a conversion's `model.ckpt`) is evaluated as a given one.

    Raises:
      FileNotFoundError: `checkpoint` has no `.index` file, or model_dir has no checkpoint.
    """
    keeper = self.trainer.checkpoint_keeper(with_iterator=False)
    if checkpoint:
      if not tf.io.gfile.exists(checkpoint + ".index"):
        raise FileNotFoundError(f"--mode=eval: checkpoint {checkpoint} not found ({checkpoint}.index is missing); "
                                "pass a checkpoint prefix such as <model_dir>/ckpt-N, or leave --checkpoint out to "
                                "evaluate the latest.")
      checkpoint = md.resolve_checkpoint(checkpoint, "--mode=eval --checkpoint")
      keeper.restore(checkpoint)
      self._given_checkpoint = checkpoint
      logger.info("eval: restored %s (step %d).", checkpoint, self.trainer.step)
      return self._restored(checkpoint)
    restored = keeper.restore_latest(weights_only=True)
    if restored:
      return self._restored(restored)
    # No ckpt-N of a training run: a `convert_checkpoint` / `save_pretrained` folder holds `model.ckpt` (a release
    # tarball, its only `*.index`), which predict and serving already read. It is evaluated as a given checkpoint
    # would be: it holds no step (global_step stays 0) and never becomes model.ckpt-best.
    try:
      found = md.resolve_checkpoint(self.trainer.model_dir, "--mode=eval")
    except FileNotFoundError:
      raise FileNotFoundError(f"--mode=eval: no checkpoint in {self.trainer.model_dir} (no ckpt-N of a training run, "
                              "no model.ckpt of a conversion); pass --checkpoint=PREFIX.") from None
    keeper.restore(found)
    self._given_checkpoint = found
    logger.info("eval: restored %s (no training checkpoint in model_dir; a converted checkpoint holds no step).", found)
    return self._restored(found)

  def _restored(self, prefix: str) -> str:
    """Hands the weights just restored from `prefix` to the task's `after_restore(model, prefix)` where it has one
    (GLUE puts a converted classifier's outputs into its label order: `GlueTask.after_restore`); returns `prefix`."""
    hook = getattr(self.trainer.task, "after_restore", None)
    if hook is not None:
      hook(self.trainer.model, prefix)
    return prefix

  # ------------------------------------------------------------------------------------------------ predict
  def restore_for_predict(self, checkpoint: Optional[str] = None) -> str:
    """Restores model weights from `checkpoint`, else `model.ckpt-best`, else the latest checkpoint; returns it.

    The training iterator is not part of the restored objects, so no training data is needed.
    """
    trainer = self.trainer
    keeper = trainer.checkpoint_keeper(with_iterator=False)
    if not checkpoint:
      try:
        checkpoint = md.resolve_checkpoint(trainer.model_dir, "--mode=predict", prefer_best=True)
      except FileNotFoundError:
        raise FileNotFoundError(f"--mode=predict: no checkpoint in {trainer.model_dir} (neither "
                                f"{checkpointing.BEST_CHECKPOINT_PREFIX} nor ckpt-N); train first or pass "
                                "--checkpoint=PREFIX.") from None
    elif not tf.io.gfile.exists(checkpoint + ".index"):
      raise FileNotFoundError(f"--mode=predict: checkpoint {checkpoint} not found ({checkpoint}.index is missing).")
    else:
      checkpoint = md.resolve_checkpoint(checkpoint, "--mode=predict --checkpoint")
    keeper.restore(checkpoint)
    logger.info("predict: restored %s (step %d).", checkpoint, trainer.step)
    return self._restored(checkpoint)

  def predict(self, checkpoint: Optional[str] = None, output_dir: Optional[str] = None) -> Dict[str, Any]:
    """Runs the restored model over `task.predict_data` (record order) and writes the task's prediction files.

    Args:
      checkpoint: a checkpoint prefix; None = `model.ckpt-best`, else the latest `ckpt-N` of model_dir.
      output_dir: where the files go; None = `<model_dir>/predictions`.

    Returns:
      {"checkpoint", "global_step", "predict_batches", "output_dir", "files": {kind: path}} (files: chief only).
    """
    trainer = self.trainer
    data = getattr(trainer.params.task, "predict_data", None)
    if data is None:
      raise ValueError(f"--mode=predict: task {trainer.task.name!r} has no predict_data config.")
    if not data.input_path:
      raise ValueError("--mode=predict needs task.predict_data.input_path: the feature TFRecords of the data to "
                       "predict, made by `python -m data_prep.create_finetuning_data`.")
    restored = self.restore_for_predict(checkpoint)
    state, batches = self._run("predict", data)
    if batches == 0 or state is None:
      raise ValueError(f"--mode=predict read no records from {data.input_path!r}.")
    output_dir = (output_dir or f"{trainer.model_dir}/{PREDICTIONS_DIR}").rstrip("/")
    files: Dict[str, str] = {}
    if trainer.is_chief:
      tf.io.gfile.makedirs(output_dir)
      files = trainer.task.write_prediction_files(state, output_dir)
      logger.info("predict: wrote %s.", ", ".join(sorted(files.values())))
    return {"checkpoint": restored, "global_step": trainer.step, "predict_batches": batches,
            "output_dir": output_dir, "files": files}
