"""The custom distributed training / evaluation loop (no `model.fit`).

`run_experiment(params, model_dir, mode)` drives any registered task:

- the strategy comes from `official_albert.training.distribute` (tpu | multi_worker_mirrored | mirrored | one_device);
  model, optimizer (built before the first step), metrics and checkpoint are created inside `strategy.scope()`;
- `steps_per_loop` steps run inside one `tf.function` call (a `tf.range` loop around `strategy.run`); the replica
  step can be XLA-compiled (`runtime.jit_compile`); mixed precision via the Keras global policy, with a
  `LossScaleOptimizer` for `mixed_float16`;
- gradient accumulation splits each replica batch into `trainer.gradient_accumulation_steps` micro-batches inside
  the step, so one optimizer step still sees `global_batch_size` examples;
- checkpoints (`tf.train.CheckpointManager`, every `checkpoint_interval` steps) hold the model, the optimizer and the
  **tf.data iterator position**; a rerun with the same `model_dir` resumes from the latest checkpoint, falling back
  to the previous one with a warning when the latest cannot be read; a fresh run warm-starts from
  `task.init_checkpoint`;
- SIGTERM (preemption) → checkpoint at the current step and return cleanly; a NaN/inf loss → `NonFiniteLossError`
  naming the step, without saving, so the last good checkpoint stays the latest;
- predict restores `model.ckpt-best` (else the latest checkpoint, or an explicit prefix) without building the
  training dataset, runs the model over `task.predict_data` and lets the task write its prediction files into
  `<model_dir>/predictions/`;
- eval writes `<model_dir>/eval_results.json` (metric names + `global_step`) and keeps the checkpoint with the best
  task metric as `<model_dir>/model.ckpt-best.*` (reference §4.3), with `best_checkpoint.json` describing it;
- `<model_dir>` is also a native model directory (`config.json` + `ckpt-N` with a `model` root) that
  `official_albert.load_pretrained` reads. All file I/O goes through `tf.io.gfile` (gs:// works).

Non-chief workers of a multi-worker job write their (collective) checkpoint saves to a temporary directory and
write no summaries or results.
"""

from __future__ import annotations

import logging
import math
import signal
import threading
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

import keras
import numpy as np
import tensorflow as tf
from tensorflow.core.framework import summary_pb2

from official_albert import compat, file_io
from official_albert.training import checkpointing, distribute
from official_albert.training import gradients, optimization
from official_albert.training.experiment_config import ExperimentConfig, save_params_yaml

logger = logging.getLogger(__name__)

MODES = ("train", "eval", "train_and_eval", "predict")
EVAL_RESULTS_FILE = "eval_results.json"
BEST_CHECKPOINT_PREFIX = checkpointing.BEST_CHECKPOINT_PREFIX
PREDICTIONS_DIR = "predictions"


class NonFiniteLossError(FloatingPointError):
  """The training loss became NaN/inf; `step` is the first optimizer step (1-based) whose loss was non-finite."""

  def __init__(self, step: int, last_checkpoint: Optional[str]):
    self.step = step
    self.last_checkpoint = last_checkpoint
    super().__init__(f"Non-finite training loss at step {step}; training stopped without saving. The last good "
                     f"checkpoint is {last_checkpoint or '(none)'}.")


# ---------------------------------------------------------------------------------------------- preemption
class _PreemptionFlag:
  """Records SIGTERM; the loop checks it at loop boundaries and saves. Restores the old handler on exit."""

  def __init__(self):
    self.requested = False
    self._previous = None

  def __enter__(self):
    if threading.current_thread() is threading.main_thread():
      self._previous = signal.signal(signal.SIGTERM, self._handle)
    return self

  def _handle(self, signum, frame):
    del frame
    logger.warning("Received signal %d: will checkpoint and stop after the current loop.", signum)
    self.requested = True

  def __exit__(self, *exc):
    if self._previous is not None:
      signal.signal(signal.SIGTERM, self._previous)
    return False


# ------------------------------------------------------------------------------------------------ helpers
def _apply_runtime(params: ExperimentConfig):
  """Seeds, determinism and the mixed-precision policy. Returns the previous policy name (to restore)."""
  runtime = params.runtime
  keras.utils.set_random_seed(runtime.seed)
  if runtime.enable_op_determinism:
    tf.config.experimental.enable_op_determinism()
  previous = keras.mixed_precision.global_policy().name
  keras.mixed_precision.set_global_policy(runtime.mixed_precision_dtype)
  if (runtime.jit_compile and "bfloat16" in runtime.mixed_precision_dtype and not runtime.tpu
      and not tf.config.list_physical_devices("GPU")):
    # Measured (make bench): on CPU, XLA lowers bf16 matmuls without oneDNN's AVX-512/AMX bf16 kernels, so an
    # XLA bf16 step is slower than the fp32 one, while the graph path runs bf16 ~2x faster than fp32.
    logger.warning("runtime.jit_compile=True with %s on CPU: XLA:CPU has no fast bf16 matmuls; set "
                   "runtime.jit_compile=false for bf16 on CPU.", runtime.mixed_precision_dtype)
  return previous


def make_strategy(runtime) -> tf.distribute.Strategy:
  """The strategy for `runtime` ('' = auto: tpu if runtime.tpu is set, mirrored over >1 GPU, else one device)."""
  name = runtime.distribution_strategy
  gpus = len(tf.config.list_physical_devices("GPU"))
  num_gpus = gpus if runtime.num_gpus < 0 else runtime.num_gpus
  if not name:
    name = "tpu" if runtime.tpu else ("mirrored" if num_gpus > 1 else "one_device")
  if name == "one_device":
    num_gpus = min(num_gpus, 1)
  return distribute.get_distribution_strategy(name, num_gpus=num_gpus, tpu_address=runtime.tpu or None)


def _build_optimizer(params: ExperimentConfig):
  trainer = params.trainer
  optimizer = optimization.create_optimizer(
      trainer.optimizer, learning_rate=trainer.learning_rate, num_train_steps=trainer.train_steps,
      num_warmup_steps=trainer.warmup_steps, start_warmup_step=trainer.start_warmup_step,
      poly_power=trainer.poly_power, weight_decay_rate=trainer.weight_decay_rate, beta_1=trainer.beta_1,
      beta_2=trainer.beta_2, epsilon=trainer.epsilon, clip_norm=trainer.clip_norm,
      exclude_from_weight_decay=trainer.exclude_from_weight_decay)
  if params.runtime.mixed_precision_dtype == "mixed_float16":
    optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
  return optimizer


def _inner_optimizer(optimizer):
  return getattr(optimizer, "inner_optimizer", optimizer)


def _metric_results(metrics) -> Dict[str, float]:
  return {m.name: float(np.asarray(m.result())) for m in metrics}


def _reset_metrics(metrics) -> None:
  for m in metrics:
    m.reset_state()


def _to_numpy_local(strategy, value):
  """Per-replica values → numpy, local replicas concatenated along axis 0 (scalars stacked)."""
  parts = strategy.experimental_local_results(value)
  arrays = [np.asarray(p) for p in parts]
  if arrays[0].ndim == 0:
    return np.stack(arrays)
  return np.concatenate(arrays, axis=0)


# ------------------------------------------------------------------------------------------------- trainer
class Trainer:
  """Holds the strategy, task, model, optimizer, metrics, datasets and checkpointing of one run.

  Most users call `run_experiment`; tests use the pieces (`train`, `evaluate`, `model`).
  """

  def __init__(self, params: ExperimentConfig, model_dir: str, task=None, strategy=None):
    from official_albert.training import base_task as task_base  # pylint: disable=g-import-not-at-top
    params.validate()
    self.params = params
    self.model_dir = model_dir.rstrip("/")
    self.strategy = strategy or make_strategy(params.runtime)
    self.is_chief = distribute.is_chief(self.strategy)
    self.task = task or task_base.create_task(params.task, logging_dir=self.model_dir)
    self.num_replicas = self.strategy.num_replicas_in_sync
    trainer = params.trainer
    if trainer.gradient_accumulation_steps > 1 and params.runtime.mixed_precision_dtype == "mixed_float16":
      raise ValueError("trainer.gradient_accumulation_steps > 1 is not supported with mixed_float16 loss scaling; "
                       "use mixed_bfloat16 or float32.")
    # Weight initialisation depends only on runtime.seed, however the Trainer is reached.
    keras.utils.set_random_seed(params.runtime.seed)
    with self.strategy.scope():
      self.model = self.task.build_model()
      self.optimizer = _build_optimizer(params)
      self.optimizer.build(self.model.trainable_variables)
      self.train_metrics = self.task.build_metrics(training=True)
      self.eval_metrics = self.task.build_metrics(training=False)
    self._train_iterator = None
    self._train_fn = None
    self._eval_fn = None
    self._keeper: Optional[checkpointing.CheckpointKeeper] = None
    self._summary_writers: Dict[str, Any] = {}

  # ------------------------------------------------------------------------------------ properties
  @property
  def global_step(self) -> tf.Variable:
    return _inner_optimizer(self.optimizer).iterations

  @property
  def step(self) -> int:
    return int(self.global_step.numpy())

  # ------------------------------------------------------------------------------------ data
  def _distributed_dataset(self, data_config):
    def dataset_fn(input_context):
      return self.task.build_inputs(data_config, input_context)
    return self.strategy.distribute_datasets_from_function(dataset_fn)

  def _train_data_config(self):
    data = self.params.task.train_data
    if data.seed is None:
      data = data.replace(seed=self.params.runtime.seed)
    return data

  def _eval_data_config(self):
    data = self.params.task.validation_data
    if not data.input_path:
      # Like the reference (§4.2), evaluation falls back to the training files, read without shuffling.
      logger.warning("task.validation_data.input_path is empty: evaluating on task.train_data.input_path.")
      data = data.replace(input_path=self.params.task.train_data.input_path)
    if data.seed is None:
      data = data.replace(seed=self.params.runtime.seed)
    return data

  @property
  def _is_tpu(self) -> bool:
    return isinstance(self.strategy, (tf.distribute.TPUStrategy, tf.distribute.experimental.TPUStrategy))

  def _worker_index(self) -> int:
    resolver = getattr(self.strategy, "cluster_resolver", None)
    if resolver is None or not resolver.task_type or self._is_tpu:
      return 0
    spec = resolver.cluster_spec().as_dict()
    if resolver.task_type == "chief":
      return 0
    return int(resolver.task_id) + (1 if "chief" in spec else 0)

  @property
  def num_local_replicas(self) -> int:
    return max(1, self.num_replicas // distribute.num_workers(self.strategy))

  @property
  def train_iterator(self):
    """This worker's training iterator.

    Off TPU it is a plain `tf.data` iterator over this worker's shard (per-replica batches), which is trackable, so
    the checkpoint stores its exact position; each step pulls one batch per local replica. On TPU it is a
    distributed iterator, which TF cannot checkpoint: a resumed TPU job restarts the input pipeline (as the
    reference TPUEstimator does) and a warning says so.
    """
    if self._train_iterator is None:
      data = self._train_data_config()
      if self._is_tpu:
        self._train_iterator = iter(self._distributed_dataset(data))
      else:
        context = tf.distribute.InputContext(num_input_pipelines=distribute.num_workers(self.strategy),
                                             input_pipeline_id=self._worker_index(),
                                             num_replicas_in_sync=self.num_replicas)
        self._train_iterator = iter(self.task.build_inputs(data, context))
    return self._train_iterator

  def _next_train_batch(self, iterator):
    """One step's input, as `strategy.run` takes it (called inside the loop function)."""
    if self._is_tpu:
      return next(iterator)
    local = self.num_local_replicas
    if local == 1:
      return next(iterator)  # each replica (one per worker) gets its worker's batch
    batches = [next(iterator) for _ in range(local)]
    return self.strategy.experimental_distribute_values_from_function(
        lambda ctx: batches[ctx.replica_id_in_sync_group % local])

  # ------------------------------------------------------------------------------------ checkpoints
  def checkpoint_keeper(self, with_iterator: bool = True) -> checkpointing.CheckpointKeeper:
    """The run's checkpoint books (created once; `with_iterator=False` for eval/predict, which need no input)."""
    if self._keeper is None:
      items = dict(model=self.model, optimizer=self.optimizer)
      if with_iterator and not self._is_tpu:
        items["train_iterator"] = self.train_iterator
      rng_states = compat.seed_generator_states(self.model)
      if rng_states:
        items["rng_states"] = rng_states
      self._keeper = checkpointing.CheckpointKeeper(self.model_dir, self.strategy, items, self.global_step,
                                                    self.params.trainer.max_to_keep)
    return self._keeper

  def latest_checkpoint(self) -> Optional[str]:
    return tf.train.latest_checkpoint(self.model_dir)

  def restore_latest(self) -> Optional[str]:
    """Restores the newest readable checkpoint of model_dir (falling back on unreadable ones); returns its prefix."""
    return self.checkpoint_keeper().restore_latest()

  def save_checkpoint(self) -> str:
    return self.checkpoint_keeper().save()

  # ------------------------------------------------------------------------------------ step functions
  def _replica_train_step(self, inputs):
    task, model, optimizer = self.task, self.model, self.optimizer
    k = self.params.trainer.gradient_accumulation_steps

    def grad_fn(batch):
      return task.compute_gradients(batch, model, optimizer, self.train_metrics)

    if k > 1:
      loss, grads = gradients.accumulate_micro_batch_gradients(grad_fn, inputs, k)
    else:
      loss, grads = grad_fn(inputs)
    # Norm of this replica's contribution (exact before clipping with one replica; see docs for several).
    grad_norm = tf.linalg.global_norm([g for g in grads if g is not None]) * self.num_replicas
    if isinstance(optimizer, keras.optimizers.LossScaleOptimizer):
      grad_norm = grad_norm / tf.cast(optimizer.dynamic_scale, grad_norm.dtype)
    optimizer.apply(grads, model.trainable_variables)
    return tf.cast(loss, tf.float32), grad_norm

  def _make_train_fn(self):
    strategy = self.strategy
    replica_step = self._replica_train_step
    if self.params.runtime.jit_compile and not isinstance(strategy, tf.distribute.TPUStrategy):
      replica_step = tf.function(replica_step, jit_compile=True)

    @tf.function
    def train_loop(iterator, num_steps):
      loss_sum = tf.constant(0.0)
      norm_sum = tf.constant(0.0)
      bad_step = tf.constant(-1, tf.int64)
      done = tf.constant(0, tf.int32)
      for _ in tf.range(num_steps):
        step_before = tf.cast(self.global_step, tf.int64)
        loss, norm = strategy.run(replica_step, args=(self._next_train_batch(iterator),))
        loss = strategy.reduce(tf.distribute.ReduceOp.MEAN, loss, axis=None)
        norm = strategy.reduce(tf.distribute.ReduceOp.MEAN, norm, axis=None)
        done += 1
        if not tf.math.is_finite(loss):
          bad_step = step_before + 1
          break
        loss_sum += loss
        norm_sum += norm
      return loss_sum, norm_sum, done, bad_step

    return train_loop

  def _make_eval_fn(self):
    strategy = self.strategy
    task, model, metrics = self.task, self.model, self.eval_metrics
    step = lambda batch: task.validation_step(batch, model, metrics)  # noqa: E731
    if self.params.runtime.jit_compile and not isinstance(strategy, tf.distribute.TPUStrategy):
      step = tf.function(step, jit_compile=True)

    # reduce_retracing: with dynamic padding (DataConfig.pad_to_multiple_of) batches differ in length; one
    # shape-generic trace serves them all (the jit-compiled step still compiles once per distinct length).
    @tf.function(reduce_retracing=True)
    def eval_step(batch):
      return strategy.run(step, args=(batch,))

    return eval_step

  # ------------------------------------------------------------------------------------ summaries
  def _writer(self, name: str):
    if not self.is_chief:
      return None
    if name not in self._summary_writers:
      self._summary_writers[name] = tf.summary.create_file_writer(f"{self.model_dir}/{name}")
    return self._summary_writers[name]

  def _write_summaries(self, name: str, scalars: Dict[str, float], step: int) -> None:
    writer = self._writer(name)
    if writer is None:
      return
    with writer.as_default(step=step):
      for key, value in scalars.items():
        _write_scalar(key, value, step)
    writer.flush()

  # ------------------------------------------------------------------------------------ train
  def _initialize_or_resume(self) -> Optional[str]:
    restored = self.checkpoint_keeper(with_iterator=True).restore_latest()
    if restored:
      logger.info("Resumed from %s (step %d).", restored, self.step)
      if self._is_tpu:
        logger.warning("TPU: the input pipeline restarts from its beginning (distributed iterators cannot be "
                       "checkpointed); the model and optimizer state are exact.")
    else:
      self.task.initialize(self.model)
    return restored

  def _preemption_requested(self, flag: _PreemptionFlag) -> bool:
    if compat.in_multi_worker_mode(self.strategy):
      # Every worker must join the collective save, so they agree on the flag first.
      value = self.strategy.run(lambda: tf.constant(1.0 if flag.requested else 0.0))
      return bool(self.strategy.reduce(tf.distribute.ReduceOp.SUM, value, axis=None).numpy() > 0)
    return flag.requested

  def train(self, eval_every: Optional[int] = None,
            on_loop_end: Optional[Callable[[int, Dict[str, float]], None]] = None) -> Dict[str, Any]:
    """Trains to `trainer.train_steps` (resuming when model_dir has checkpoints).

    Args:
      eval_every: evaluate (and track the best checkpoint) every this many steps and at the end; None = never.
      on_loop_end: optional callback(step, logs) after every loop (the demo records its curves this way).

    Returns:
      {"global_step", "status" ("completed" | "preempted"), "train_logs" (last loop), "eval_results" (last eval),
       "history": [(step, train logs), ...] and "eval_history": [(step, eval results), ...] of this call}.
    """
    trainer = self.params.trainer
    self._initialize_or_resume()
    if self._train_fn is None:
      self._train_fn = self._make_train_fn()
    history: List[Tuple[int, Dict[str, float]]] = []
    eval_history: List[Tuple[int, Dict[str, Any]]] = []
    logs: Dict[str, float] = {}
    eval_results: Dict[str, Any] = {}
    total = trainer.train_steps
    start_step = self.step
    batch = self.params.task.train_data.global_batch_size
    status = "completed"
    last_saved = self.step if self.latest_checkpoint() else None
    run_start = time.time()
    if eval_every and trainer.eval_at_start and self.step == 0:
      # The untrained model's numbers, so that curves start at step 0 (not written as eval_results.json).
      eval_history.append((0, self.evaluate(write_results=False)))
    with _PreemptionFlag() as flag:
      while self.step < total:
        step = self.step
        boundaries = [total, _next_multiple(step, trainer.steps_per_loop),
                      _next_multiple(step, trainer.checkpoint_interval), _next_multiple(step, trainer.summary_interval)]
        if eval_every:
          boundaries.append(_next_multiple(step, eval_every))
        num_steps = min(b for b in boundaries if b > step) - step
        _reset_metrics(self.train_metrics)
        loop_start = time.time()
        loss_sum, norm_sum, done, bad_step = self._train_fn(self.train_iterator, tf.constant(num_steps))
        bad_step = int(bad_step.numpy())
        if bad_step >= 0:
          raise NonFiniteLossError(bad_step, self.latest_checkpoint())
        elapsed = max(time.time() - loop_start, 1e-9)
        done = int(done.numpy())
        step = self.step
        logs = _metric_results(self.train_metrics)
        logs["loss"] = float(loss_sum.numpy()) / max(done, 1)
        logs["global_norm"] = float(norm_sum.numpy()) / max(done, 1)
        logs["learning_rate"] = compat.current_learning_rate(self.optimizer)
        logs["examples_per_second"] = done * batch / elapsed
        steps_per_sec = (step - start_step) / max(time.time() - run_start, 1e-9)
        eta = (total - step) / steps_per_sec if steps_per_sec > 0 else float("inf")
        logger.info("step %d/%d  loss %.4f  %s  %.1f examples/s  ETA %s", step, total, logs["loss"],
                    "  ".join(f"{k} {v:.4f}" for k, v in logs.items()
                              if k not in ("loss", "examples_per_second", "learning_rate")),
                    logs["examples_per_second"], _format_eta(eta))
        if step % trainer.summary_interval == 0 or step >= total:
          self._write_summaries("train", logs, step)
        history.append((step, dict(logs)))
        if step % trainer.checkpoint_interval == 0 or step >= total:
          self.save_checkpoint()
          last_saved = step
        if eval_every and (step % eval_every == 0 or step >= total):
          if last_saved != step:
            self.save_checkpoint()
            last_saved = step
          eval_results = self.evaluate()
          eval_history.append((step, eval_results))
        if on_loop_end is not None:
          on_loop_end(step, logs)
        if self._preemption_requested(flag):
          if last_saved != step:
            self.save_checkpoint()
          logger.warning("Preempted: saved a checkpoint at step %d and stopped.", step)
          status = "preempted"
          break
    if status == "completed" and self.step >= total and last_saved != self.step:
      self.save_checkpoint()
    return {"global_step": self.step, "status": status, "train_logs": logs, "eval_results": eval_results,
            "history": history, "eval_history": eval_history}

  # ------------------------------------------------------------------------------------ eval
  def evaluate(self, steps: Optional[int] = None, write_results: bool = True) -> Dict[str, Any]:
    """Evaluates the current weights on `task.validation_data` for `steps` batches (-1: the whole set).

    Writes `<model_dir>/eval_results.json` (chief) and updates `model.ckpt-best` when the task metric improved.
    """
    steps = self.params.trainer.validation_steps if steps is None else steps
    if self._eval_fn is None:
      self._eval_fn = self._make_eval_fn()
    _reset_metrics(self.eval_metrics)
    iterator = iter(self._distributed_dataset(self._eval_data_config()))
    state = None
    done = 0
    while steps < 0 or done < steps:
      batch = iterator.get_next_as_optional()
      if not batch.has_value():
        break
      outputs = self._eval_fn(batch.get_value())
      extras = {k: v for k, v in outputs.items() if k != "loss"}
      if extras:
        state = self.task.aggregate_logs(state, {k: _to_numpy_local(self.strategy, v) for k, v in extras.items()})
      done += 1
    if done == 0:
      raise ValueError(f"Evaluation read no batches from {self._eval_data_config().input_path!r}.")
    results: Dict[str, Any] = _metric_results(self.eval_metrics)
    results.update(self.task.reduce_aggregated_logs(state, global_step=self.step))
    results["global_step"] = self.step
    results["eval_steps"] = done
    logger.info("eval at step %d: %s", self.step,
                "  ".join(f"{k} {v:.4f}" if isinstance(v, float) else f"{k} {v}" for k, v in results.items()))
    self._write_summaries("eval", {k: v for k, v in results.items() if isinstance(v, float)}, self.step)
    if write_results and self.is_chief:
      file_io.atomic_write_json(f"{self.model_dir}/{EVAL_RESULTS_FILE}", results)
      name, higher = self._best_metric()
      if name:
        self.checkpoint_keeper().update_best(results, name, higher)
    return results

  def _best_metric(self) -> Tuple[str, bool]:
    trainer = self.params.trainer
    name = trainer.best_checkpoint_metric or self.task.best_metric
    higher = (trainer.best_checkpoint_mode == "max") if trainer.best_checkpoint_metric else (
        self.task.best_metric_higher_is_better)
    return name, higher

  def restore_for_eval(self, checkpoint: Optional[str] = None) -> str:
    """Restores model weights (and the step) from `checkpoint` or the latest one, for evaluation."""
    keeper = self.checkpoint_keeper(with_iterator=False)
    if checkpoint:
      return keeper.restore(checkpoint)
    restored = keeper.restore_latest()
    if not restored:
      raise FileNotFoundError(f"--mode=eval: no checkpoint in {self.model_dir}.")
    return restored


  # ------------------------------------------------------------------------------------ predict
  def restore_for_predict(self, checkpoint: Optional[str] = None) -> str:
    """Restores model weights from `checkpoint`, else `model.ckpt-best`, else the latest checkpoint; returns it.

    The training iterator is not part of the restored objects (`expect_partial`), so no training data is needed.
    """
    keeper = self.checkpoint_keeper(with_iterator=False)
    if not checkpoint:
      best = keeper.best_prefix
      checkpoint = best if tf.io.gfile.exists(best + ".index") else keeper.latest()
      if not checkpoint:
        raise FileNotFoundError(f"--mode=predict: no checkpoint in {self.model_dir} (neither "
                                f"{BEST_CHECKPOINT_PREFIX} nor ckpt-N); train first or pass --checkpoint=PREFIX.")
    elif not tf.io.gfile.exists(checkpoint + ".index"):
      raise FileNotFoundError(f"--mode=predict: checkpoint {checkpoint} not found ({checkpoint}.index is missing).")
    keeper.restore(checkpoint)
    logger.info("predict: restored %s (step %d).", checkpoint, self.step)
    return checkpoint

  def predict(self, checkpoint: Optional[str] = None, output_dir: Optional[str] = None) -> Dict[str, Any]:
    """Runs the restored model over `task.predict_data` (file order) and writes the task's prediction files.

    Args:
      checkpoint: a checkpoint prefix; None = `model.ckpt-best`, else the latest `ckpt-N` of model_dir.
      output_dir: where the files go; None = `<model_dir>/predictions`.

    Returns:
      {"checkpoint", "global_step", "predict_batches", "output_dir", "files": {kind: path}} (files: chief only).
    """
    data = getattr(self.params.task, "predict_data", None)
    if data is None:
      raise ValueError(f"--mode=predict: task {self.task.name!r} has no predict_data config.")
    if not data.input_path:
      raise ValueError("--mode=predict needs task.predict_data.input_path: the feature TFRecords of the data to "
                       "predict, made by `python -m data_prep.create_finetuning_data`.")
    restored = self.restore_for_predict(checkpoint)
    # One pipeline in file order (no sharding over replicas), so row i of every output is record i.
    data = data.replace(is_training=False, drop_remainder=False)
    task, model = self.task, self.model

    @tf.function(reduce_retracing=True)  # Dynamic padding gives batches of several lengths.
    def predict_step(batch):
      features, _ = task.split_inputs(batch)
      return task.predict_outputs(features, model(task.model_inputs(features), training=False))

    state, batches = None, 0
    for batch in task.build_inputs(data):
      state = task.aggregate_logs(state, {k: np.asarray(v) for k, v in predict_step(batch).items()})
      batches += 1
    if batches == 0:
      raise ValueError(f"--mode=predict read no records from {data.input_path!r}.")
    output_dir = (output_dir or f"{self.model_dir}/{PREDICTIONS_DIR}").rstrip("/")
    files: Dict[str, str] = {}
    if self.is_chief:
      tf.io.gfile.makedirs(output_dir)
      files = task.write_prediction_files(state, output_dir)
      logger.info("predict: wrote %s.", ", ".join(sorted(files.values())))
    return {"checkpoint": restored, "global_step": self.step, "predict_batches": batches,
            "output_dir": output_dir, "files": files}


def _write_scalar(tag: str, value: float, step: int) -> None:
  """A TensorBoard scalar event, without needing the `tensorboard` package (what `tf.summary.scalar` writes)."""
  metadata = summary_pb2.SummaryMetadata(
      plugin_data=summary_pb2.SummaryMetadata.PluginData(plugin_name="scalars"),
      data_class=summary_pb2.DATA_CLASS_SCALAR)
  tf.summary.write(tag, tf.constant(float(value), tf.float32), step=step, metadata=metadata)


def _next_multiple(step: int, interval: int) -> int:
  return (step // interval + 1) * interval


def _format_eta(seconds: float) -> str:
  if not math.isfinite(seconds):
    return "?"
  seconds = int(seconds)
  return f"{seconds // 3600:d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


# --------------------------------------------------------------------------------------------- entry point
def run_experiment(params: ExperimentConfig, model_dir: str, mode: str = "train", strategy=None, task=None,
                   on_loop_end: Optional[Callable[[int, Dict[str, float]], None]] = None,
                   checkpoint: Optional[str] = None) -> Dict[str, Any]:
  """Runs `mode` (train | eval | train_and_eval | predict) for `params` in `model_dir`.

  Writes `params.yaml` and `config.json` (so model_dir is a native model directory) on the chief, except in predict
  mode, which leaves the training run's files as they are. `checkpoint` (a prefix) is read by predict only.

  Returns:
    train: the `Trainer.train` summary plus "best_checkpoint" (best_checkpoint.json or None) and "trainer" (the
    `Trainer`, for callers that want the model); eval: the eval results; train_and_eval: the train summary whose
    "eval_results" holds the final evaluation; predict: `Trainer.predict`'s summary.
  """
  if mode not in MODES:
    raise ValueError(f"--mode={mode!r} is not one of {MODES}.")
  previous_policy = _apply_runtime(params)
  try:
    trainer = Trainer(params, model_dir, task=task, strategy=strategy)
    if mode == "predict":
      return trainer.predict(checkpoint)
    if trainer.is_chief:
      tf.io.gfile.makedirs(trainer.model_dir)
      save_params_yaml(params, trainer.model_dir)
      trainer.model.config.to_json_file(f"{trainer.model_dir}/config.json")
    if mode == "eval":
      trainer.restore_for_eval()
      return trainer.evaluate()
    eval_every = params.trainer.validation_interval if mode == "train_and_eval" else None
    summary = trainer.train(eval_every=eval_every, on_loop_end=on_loop_end)
    summary["best_checkpoint"] = checkpointing.read_best(trainer.model_dir)
    summary["trainer"] = trainer
    return summary
  finally:
    keras.mixed_precision.set_global_policy(previous_policy)
