"""The Trainer: model, optimizer, data and checkpoints of one run, and the distributed training loop (no model.fit).

One optimizer step, on every replica inside `strategy.run`:
1. the task's loss denominators of this replica's batch (Σ of MLM weights, number of examples) are summed over all
   replicas and workers, so every loss is a mean over the *global* batch (`trainer.loss_normalization`);
2. forward and backward over `gradient_accumulation_steps` micro-batches, each contributing its share — the only part
   that is XLA-compiled with `runtime.jit_compile` (no collective inside, so it works with any number of replicas);
3. the gradients are all-reduced (sum) — before any loss-scale check, so a `mixed_float16` LossScaleOptimizer sees
   the same gradients on every replica and all of them skip a non-finite step and halve the scale together;
4. the optimizer clips the global norm once (the norm of the all-reduced gradient is what gets logged) and updates.

`steps_per_loop` steps run inside one `tf.function` call; before each step the loop reads the preemption flag
(`preemption.py`), so SIGTERM leads to a checkpoint after the step in flight. Data comes from `input_feed.py` (the
global stream, sliced per replica); evaluation and prediction from `evaluation.py`; checkpoints from
`checkpointing.py`; what happens between loops (summaries, preemption, checkpoints, evaluation) from `actions.py`;
the logged numbers of a summary interval from `loop_metrics.py`; TensorBoard writers from `summaries.py`. Non-chief
workers of a multi-worker job write no summaries, results or prediction files.

Guardrails (the upstream "I get SQuAD F1 16" and "accuracy stuck at 50%" reports): a fine-tuning run without
`task.init_checkpoint` logs a WARNING before its first step and its `eval_results.json` says `"init": "random"`; a
run whose training loss sits at the chance level for the first 30% of its steps says so in the log (`guardrails.py`).

Long because: the Trainer is the one object whose state (strategy, model, optimizer, iterators, checkpoints, step)
every duty reads; the duties themselves live in actions.py, checkpointing.py, evaluation.py and input_feed.py, and
what stays here is that state and the step functions built on it, methods so that a test can patch one
(tests/official_albert/training/marked_train.py marks each step).
"""

from __future__ import annotations

import functools
import logging
import time
from typing import Any, Callable, Dict, Optional

import keras
import tensorflow as tf

from official_albert import compat
from official_albert import precision
from official_albert.training import actions
from official_albert.training import base_task
from official_albert.training import checkpointing
from official_albert.training import distribute
from official_albert.training import evaluation
from official_albert.training import gradients
from official_albert.training import guardrails
from official_albert.training import input_feed
from official_albert.training import loop_metrics
from official_albert.training import optimization
from official_albert.training import preemption
from official_albert.training import run_lock
from official_albert.training import summaries
from official_albert.training.experiment_config import ExperimentConfig
from official_albert.training.hyperparams import ConfigError

logger = logging.getLogger(__name__)


class NonFiniteLossError(FloatingPointError):
  """The training loss or the gradient's global norm became NaN/inf at optimizer step `step` (1-based).

  Nothing was saved after it, so `last_checkpoint` holds finite weights; a step whose gradient norm is not finite was
  not applied either (the optimizer skips it). `what` is "loss" or "gradient norm".
  """

  def __init__(self, step: int, last_checkpoint: Optional[str], what: str = "loss"):
    self.step = step
    self.last_checkpoint = last_checkpoint
    self.what = what
    skipped = " (with a finite loss; the step was not applied)" if what == "gradient norm" else ""
    super().__init__(f"Non-finite training {what} at step {step}{skipped}; training stopped without saving. The last "
                     f"good checkpoint is {last_checkpoint or '(none)'}.")


def build_optimizer(params: ExperimentConfig):
  """The trainer's optimizer (a LossScaleOptimizer around it for mixed_float16); it receives all-reduced gradients."""
  trainer = params.trainer
  optimizer = optimization.create_optimizer(
      trainer.optimizer, learning_rate=trainer.learning_rate, num_train_steps=trainer.train_steps,
      num_warmup_steps=trainer.warmup_steps, start_warmup_step=trainer.start_warmup_step,
      poly_power=trainer.poly_power, weight_decay_rate=trainer.weight_decay_rate, beta_1=trainer.beta_1,
      beta_2=trainer.beta_2, epsilon=trainer.epsilon, clip_norm=trainer.clip_norm,
      exclude_from_weight_decay=trainer.exclude_from_weight_decay)
  optimizer.aggregate_gradients = False  # the trainer all-reduces (step 3 of the module docstring)
  if params.runtime.mixed_precision_dtype == "mixed_float16":
    optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
  return optimizer


def inner_optimizer(optimizer):
  return getattr(optimizer, "inner_optimizer", optimizer)


class Trainer(run_lock.ModelDirOwner):
  """Holds the strategy, task, model, optimizer, metrics, data and checkpointing of one run.

  Most users call `train_lib.run_experiment`; tests and notebooks use the pieces (`train`, `evaluate`, `close`, ...).

  Args:
    params: the experiment config.
    model_dir: the run's directory.
    task: the task (the train binary builds it); None = created from the registry for `params.task`.
    strategy: None = the one `params.runtime` asks for.
  """

  def __init__(self, params: ExperimentConfig, model_dir: str, task=None, strategy=None):
    params.validate()
    self.params = params
    self.model_dir = model_dir.rstrip("/")
    runtime = params.runtime
    self.strategy = strategy or distribute.strategy_from_runtime(runtime)
    precision.check_weights_may_change("official_albert.train")  # (after the strategy: the probe fixes devices)
    self.is_chief = distribute.is_chief(self.strategy)
    self.is_tpu = distribute.is_tpu(self.strategy)
    self.task = task or base_task.create_task(params.task, logging_dir=self.model_dir)
    if not self.is_chief:
      self.task.logging_dir = None  # only the chief writes task files (SQuAD predictions)
    self.num_replicas = self.strategy.num_replicas_in_sync
    self.num_workers = 1 if self.is_tpu else distribute.num_workers(self.strategy)
    self.worker_index = distribute.worker_index(self.strategy)
    self.num_local_replicas = max(1, self.num_replicas // self.num_workers)
    self.input_resume = input_feed.resolve_input_resume(runtime.input_resume, self.is_tpu,
                                                        runtime.tf_data_service_address)
    if self.input_resume == "skip" and runtime.mixed_precision_dtype == "mixed_float16":
      logger.warning("runtime.input_resume=skip under runtime.mixed_precision_dtype=mixed_float16 resumes the input "
                     "only approximately: each step skipped by the loss scaler (a gradient overflow) read a global "
                     "batch without counting a step, so a resume re-reads that many batches. For an exact resume use "
                     "mixed_bfloat16 (no loss scaling) or input_resume=iterator (CPU/GPU without tf.data service).")
    # Weight initialisation depends only on runtime.seed, however the Trainer is reached.
    keras.utils.set_random_seed(runtime.seed)
    with self.strategy.scope():
      self.model = self.task.build_model()
      self.optimizer = build_optimizer(params)
      self.optimizer.build(self.model.trainable_variables)
      self.train_metrics = self.task.build_metrics(training=True)
      self.eval_metrics = self.task.build_metrics(training=False)
    self.preemption = preemption.PreemptionWatcher()
    self._train_iterator = self._train_fn = None
    self._keeper: Optional[checkpointing.CheckpointKeeper] = None
    self._input_positions: Optional[checkpointing.InputPositions] = None
    self.summaries = summaries.Summaries(self.model_dir, self.is_chief)
    self._vote_fn = None
    self._started, self._restored = False, None
    self.first_step_end: Optional[tuple] = None  # (time, step) after this Trainer's first step (loop_metrics.py)
    self.evaluator = evaluation.Evaluator(self)

  # ------------------------------------------------------------------------------------ properties
  @property
  def global_step(self) -> tf.Variable:
    return inner_optimizer(self.optimizer).iterations

  @property
  def step(self) -> int:
    return int(self.global_step.numpy())

  def topology(self) -> input_feed.Topology:
    """This worker's replicas in the global batch (off TPU; TPU hosts get theirs from their input context)."""
    return input_feed.Topology(self.num_replicas, self.worker_index * self.num_local_replicas, self.num_local_replicas)

  # ------------------------------------------------------------------------------------ data
  def _train_data_config(self):
    data = self.params.task.train_data
    return data.replace(seed=self.params.runtime.seed) if data.seed is None else data

  def _make_train_iterator(self, skip_global_batches: int = 0):
    data = self._train_data_config()
    service = self.params.runtime.tf_data_service_address
    # A new job per attempt (a restart at the same step must not join the dead attempt's job): a collective under
    # MultiWorkerMirroredStrategy, so only where a service is used.
    job = input_feed.service_job_name(self.model_dir, skip_global_batches,
                                      input_feed.attempt_id(self.strategy)) if service else ""

    def stream(topology):
      return input_feed.training_stream(functools.partial(self.task.build_inputs, role="train"), data, topology,
                                        skip_global_batches, service, job)

    if self.is_tpu:
      def dataset_fn(ctx):
        local = ctx.num_replicas_in_sync // ctx.num_input_pipelines
        return stream(input_feed.Topology(ctx.num_replicas_in_sync, ctx.input_pipeline_id * local, local))
      return iter(self.strategy.distribute_datasets_from_function(dataset_fn))
    return iter(stream(self.topology()))

  @property
  def train_iterator(self):
    """This worker's training iterator: per-replica batches of its slice of the global stream.

    Off TPU it is a plain (checkpointable) tf.data iterator from which each step pulls one batch per local replica;
    on TPU a distributed iterator.
    """
    if self._train_iterator is None:
      skip = self.step if self.input_resume == "skip" else 0
      if skip:
        logger.info("Resuming the input at global batch %d (runtime.input_resume=skip: the consumed batches are read "
                    "again and dropped).", skip)
      self._train_iterator = self._make_train_iterator(skip)
    return self._train_iterator

  def next_replica_batches(self, iterator):
    """One step's input, as `strategy.run` takes it (called inside the loop function)."""
    if self.is_tpu:
      return next(iterator)
    local = self.num_local_replicas
    if local == 1:
      return next(iterator)
    batches = [next(iterator) for _ in range(local)]
    return self.strategy.experimental_distribute_values_from_function(
        lambda ctx: batches[ctx.replica_id_in_sync_group % local])

  # ------------------------------------------------------------------------------------ checkpoints
  def checkpoint_keeper(self, with_iterator: bool = True) -> checkpointing.CheckpointKeeper:
    """The run's checkpoint books (created once; `with_iterator=False` for eval/predict, which need no input)."""
    if self._keeper is None:
      items = dict(model=self.model, optimizer=self.optimizer)
      rng_states = compat.seed_generator_states(self.model)
      if rng_states:
        items["rng_states"] = rng_states
      self._keeper = checkpointing.CheckpointKeeper(self.model_dir, self.strategy, items, self.global_step,
                                                    self.params.trainer.max_to_keep)
      if with_iterator and self.input_resume == "iterator":
        self._input_positions = checkpointing.InputPositions(
            self.model_dir, self.worker_index, self.train_iterator, self.params.trainer.max_to_keep,
            {"num_workers": self.num_workers, "num_replicas": self.num_replicas,
             "global_batch_size": self.params.task.train_data.global_batch_size,
             **checkpointing.train_input_identity(self._train_data_config().input_path)})
    return self._keeper

  def latest_checkpoint(self) -> Optional[str]:
    return tf.train.latest_checkpoint(self.model_dir)

  def restore_latest(self) -> Optional[str]:
    """Restores the newest checkpoint that every worker can resume from; returns its prefix (None when there is none).

    In iterator mode each worker also restores its own input position of that step; a step whose input state some
    worker lacks (killed between the model save and its own input save) is skipped by all workers alike. When the
    only checkpoint lacks it (max_to_keep=1, or a run that used input_resume=skip), it is restored and the input
    resumed by skipping its `step` global batches, warned: starting over would rotate it away at the first save.
    """
    self.claim_model_dir()  # (before anything is read or written: another live trainer's folder is refused here)
    keeper = self.checkpoint_keeper()
    positions = self._input_positions
    if positions is None:
      return keeper.restore_latest()
    candidates = keeper.candidates()
    if not candidates:
      return None
    distribute.raise_together(positions.check_topology, lambda failed: self.all_workers(failed, require_all=False),
                              f"{self.model_dir}: another worker's input positions do not fit this run (its log "
                              "names why); resume with runtime.input_resume=skip, or train into an empty --model_dir.")
    accept = lambda prefix: self.all_workers(positions.exists(checkpointing.checkpoint_step(prefix)))  # noqa: E731
    prefix = keeper.restore_latest(accept=accept)
    if prefix is None and len(candidates) > 1:
      # A kill between the two saves leaves only the newest checkpoint incomplete; none complete means the input
      # states were never written here (a run with input_resume=skip, or with other workers): never start over.
      raise ValueError(
          f"{self.model_dir} has checkpoints up to {candidates[0]} but no step with the input position of every "
          f"worker (input_state/worker-<i>/ckpt-N). Resume with runtime.input_resume=skip, or train into an empty "
          "--model_dir.")
    if prefix is None:  # never start over (the first save would rotate the only checkpoint away): skip instead
      prefix = keeper.restore_latest()
      if prefix:
        logger.warning("The only checkpoint, %s, lacks the input position of some worker: resumed from it, the input "
                       "by skipping the %d consumed global batches.", prefix, self.step)
        positions.track(self._make_train_iterator(self.step))
        self._train_iterator = positions.iterator
    elif prefix:
      positions.restore(checkpointing.checkpoint_step(prefix))
    return prefix

  def all_workers(self, value: bool, require_all: bool = True) -> bool:
    """`value` agreed by every worker: True on all of them, or (require_all=False) on any; a collective under MWMS."""
    if not compat.in_multi_worker_mode(self.strategy):
      return value
    if self._vote_fn is None:
      strategy = self.strategy
      self._vote_fn = tf.function(lambda v: strategy.reduce(
          tf.distribute.ReduceOp.SUM, strategy.run(lambda: tf.identity(v)), axis=None), autograph=False)
    total = int(self._vote_fn(tf.constant(1 if value else 0, tf.int32)).numpy())
    return total == self.num_replicas if require_all else total > 0

  def save_checkpoint(self) -> str:
    """Saves `ckpt-<step>` (collectively), then this worker's input position of it (`save_input_positions`)."""
    path = self.checkpoint_keeper().save()
    checkpointing.save_input_positions(self._input_positions, self.model_dir, self.step, self.is_chief)
    return path

  # ------------------------------------------------------------------------------------ step functions
  def _replica_train_step(self, inputs, grad_fn):
    """Steps 1–4 of the module docstring, on one replica."""
    task = self.task
    ctx = tf.distribute.get_replica_context()
    _, labels = task.split_inputs(inputs)
    denominators = task.loss_denominators(labels)
    if self.params.trainer.loss_normalization == "global_batch":
      denominators = ctx.all_reduce(tf.distribute.ReduceOp.SUM, denominators)
    loss, grads = grad_fn(inputs, denominators)
    grads = ctx.all_reduce(tf.distribute.ReduceOp.SUM, list(grads))
    self.optimizer.apply(grads, self.model.trainable_variables)
    return tf.cast(loss, tf.float32)

  def _make_grad_fn(self):
    """Forward + backward over the micro-batches of one replica batch: (loss share, gradient shares)."""
    task, model, optimizer, metrics = self.task, self.model, self.optimizer, self.train_metrics
    k = self.params.trainer.gradient_accumulation_steps
    share = 1.0 if self.params.trainer.loss_normalization == "global_batch" else 1.0 / self.num_replicas
    aux_share = 1.0 / (self.num_replicas * k)

    def grad_fn(inputs, denominators):
      def micro_batch(batch):
        return task.compute_gradients(batch, model, optimizer, metrics, denominators, share, aux_share)
      return gradients.accumulate_micro_batch_gradients(micro_batch, inputs, k)

    if self.params.runtime.jit_compile and not self.is_tpu:
      return tf.function(grad_fn, jit_compile=True, autograph=False)  # no tensor control flow: not converted
    return grad_fn

  def _make_train_fn(self):
    strategy = self.strategy
    grad_fn = self._make_grad_fn()
    plain = tf.autograph.experimental.do_not_convert  # AutoGraph converts train_loop only (docs/design.md)
    replica_step = plain(lambda inputs: self._replica_train_step(inputs, grad_fn))
    multi_worker = compat.in_multi_worker_mode(strategy)
    stop_variable = self.preemption.stop_requested
    optimizer = inner_optimizer(self.optimizer)

    @plain
    def stop_requested():
      stop = tf.cast(stop_variable.read_value(), tf.int32)
      if multi_worker:  # every worker leaves the loop at the same step
        stop = strategy.reduce(tf.distribute.ReduceOp.SUM, strategy.run(lambda: tf.identity(stop)), axis=None)
      return stop > 0

    @tf.function
    def train_loop(iterator, num_steps):
      loss_sum = norm_sum = tf.constant(0.0)
      learning_rate = tf.constant(0.0)
      bad_step = tf.constant(-1, tf.int64)
      bad_norm = tf.constant(False)
      done = applied = tf.constant(0, tf.int32)
      for _ in tf.range(num_steps):
        if stop_requested():
          break
        step_before = tf.cast(self.global_step, tf.int64)
        learning_rate = tf.cast(optimizer.learning_rate, tf.float32)  # before the update: the rate this step applies
        loss = strategy.run(replica_step, args=(plain(self.next_replica_batches)(iterator),))
        loss = strategy.reduce(tf.distribute.ReduceOp.SUM, loss, axis=None)  # the replicas' shares
        done += 1
        # A non-finite gradient norm with a finite loss: the optimizer skipped the step; stop as for a bad loss.
        norm = optimizer.global_norm
        if not (tf.math.is_finite(loss) and tf.math.is_finite(norm)):
          bad_step = step_before + 1
          bad_norm = tf.math.is_finite(loss)
          break
        loss_sum += loss
        # A step the mixed_float16 loss scaler skipped leaves the step count, and the previous step's norm, as they
        # were: its norm is not averaged in (loop_metrics.py).
        if tf.cast(self.global_step, tf.int64) > step_before:
          applied += 1
          norm_sum += norm
      return loss_sum, norm_sum, done, applied, learning_rate, bad_step, bad_norm

    return train_loop

  # ------------------------------------------------------------------------------------ train
  def initialize_or_resume(self) -> Optional[str]:
    """Restores the latest checkpoint, or initialises the model (`task.initialize`) when there is none; once.

    `train` calls it; `run_experiment` calls it first, so that a refused resume (another split, a checkpoint that
    does not fit) fails before the run's params.yaml / config.json are rewritten. Returns the restored prefix.
    """
    with self.preemption:  # a SIGTERM now is kept for train() (preemption.py), not the default handler's kill
      self.claim_model_dir()  # (every start: train() gave it back at its end; workers vote, `run_lock`)
      if not self._started:
        self._restored = self.restore_latest()
        if self._restored:
          logger.info("Resumed from %s (step %d).", self._restored, self.step)
        else:
          self.task.initialize(self.model)
        self.summaries.drop_after(self.step)  # the killed run's summaries past it: written again (summaries.py)
        self._started = True
    return self._restored
  _initialize_or_resume = initialize_or_resume  # the name existing tests and scripts call

  def _ensure_train_fn(self) -> None:
    if self._train_fn is None:
      self._train_fn = self._make_train_fn()
      trace_start = time.time()
      self._train_fn.get_concrete_function(self.train_iterator, tf.constant(1))  # trace (and compile) up front
      logger.info("Started the first training loop (traced in %.1f s).", time.time() - trace_start)

  def train(self, eval_every: Optional[int] = None,
            on_loop_end: Optional[Callable[[int, Dict[str, float]], None]] = None) -> Dict[str, Any]:
    """Trains to `trainer.train_steps` (resuming when model_dir has checkpoints).

    Each round runs the compiled loop to the nearest boundary of its actions (`actions.py`: logs and summaries,
    preemption, checkpoints, evaluation, `on_loop_end`), then runs them in that order. A run resumed at an evaluation
    step whose evaluation was lost (killed during it, preempted before it) evaluates it first
    (`Evaluator.evaluate_if_missed`). A preemption notice anywhere in it, start-up included, stops before the next step.

    Args:
      eval_every: evaluate (and track the best checkpoint) every this many steps and at the end; None = never.
      on_loop_end: optional callback(step, logs) after every loop (the demo records its curves this way).

    Returns:
      {"global_step", "status" ("completed" | "preempted"), "train_logs" (the last summary window, up to the
       last loop: `loop_metrics.py`), "eval_results" (last eval),
       "history": [(step, train logs), ...] and "eval_history": [(step, eval results), ...] of this call,
       "init" (`task.init_checkpoint` or "random"), "stuck_at_chance" (the log keys `ChanceLevelMonitor` found at
       chance level) and "chance_level_warnings" (its messages)}.
    """
    config = self.params.trainer
    with self.releasing_model_dir():  # (owned from the start of training to its end: `run_lock`)
      with self.preemption:  # all of it: a notice during start-up (resume, trace, evaluations) stops before step 1
        self.initialize_or_resume()
        guardrails.warn_if_random_init(self.params, self.model, self.task.name)
        self._ensure_train_fn()
        loop_log = actions.LoopLog(self, config.summary_interval, self.step)
        state = actions.LoopState(total=config.train_steps, step=self.step,
                                  last_saved=self.step if self.latest_checkpoint() else None)
        duties = actions.training_actions(self, loop_log, eval_every, on_loop_end)
        actions.Preemption(self)(state)  # a notice during the resume or the trace: checkpoint, stop (all workers agree)
        if eval_every and config.eval_at_start and self.step == 0 and not state.stop:
          # The untrained model's numbers, so that curves start at step 0 (not written as eval_results.json).
          state.eval_history.append((0, self.evaluate(write_results=False)))
          metric = config.best_checkpoint_metric
          if metric and metric not in state.eval_history[-1][1]:  # a name train_lib could not check: before step 1
            raise ConfigError(f"trainer.best_checkpoint_metric={metric!r} is not among the eval results "
                              f"{sorted(state.eval_history[-1][1])}; name one of them.")
        if not state.stop:
          self.evaluator.evaluate_if_missed(state, eval_every)
        while self.step < state.total and not state.stop:
          self._run_loop(actions.steps_to_boundary(self.step, state.total, config.steps_per_loop, duties), state)
          for duty in duties:
            if not state.stop:
              duty(state)
      self.preemption.clear()  # acted on (or arrived after the last chance to): a later train() of this trainer runs
      if state.status == "completed" and self.step >= state.total and state.last_saved != self.step:
        self.save_checkpoint()
    return {"global_step": self.step, "status": state.status, "train_logs": state.logs,
            "eval_results": state.eval_results, "history": state.history, "eval_history": state.eval_history,
            "init": guardrails.init_source(self.params), "stuck_at_chance": list(loop_log.monitor.stuck_keys),
            "chance_level_warnings": state.chance_warnings}

  def _run_loop(self, num_steps: int, state: actions.LoopState) -> None:
    """One round of the compiled loop (`num_steps` steps, fewer after a preemption notice), added to `state.window`.

    A Trainer's first step runs as a call of its own, timed apart (`loop_metrics.py`: `first_step_seconds`), so that
    its one-time costs stay out of the throughput; the steps run are the same either way.
    """
    if not state.window.steps:
      loop_metrics.reset_metrics(self.train_metrics)  # a new summary window
    done = 0
    if self.first_step_end is None:
      first = self._call_loop(1)
      state.window.add(first, first_step=True)
      done, num_steps = (1, num_steps) if first.steps else (0, 0)  # (0, 0): a preemption notice came before it
      self.first_step_end = (time.time(), self.step) if first.steps else None
      if first.steps:
        logger.info("The first step took %.1f s (compile, input start-up: not counted as throughput).", first.seconds)
    if num_steps > done:
      rest = self._call_loop(num_steps - done)
      state.window.add(rest)
      done += rest.steps
    loss_scale = self._check_loss_scale()
    state.done, state.step = done, self.step
    if done:
      state.logs = state.window.logs(loop_metrics.metric_results(self.train_metrics),
                                     self.params.task.train_data.global_batch_size, loss_scale)

  def _call_loop(self, num_steps: int) -> loop_metrics.LoopResult:
    """One call of the compiled loop; a non-finite loss or gradient norm raises `NonFiniteLossError`."""
    start = time.time()
    loss_sum, norm_sum, done, applied, learning_rate, bad_step, bad_norm = self._train_fn(
        self.train_iterator, tf.constant(num_steps))
    bad_step = int(bad_step.numpy())
    if bad_step >= 0:
      raise NonFiniteLossError(bad_step, self.latest_checkpoint(),
                               "gradient norm" if bool(bad_norm.numpy()) else "loss")
    return loop_metrics.LoopResult(int(done.numpy()), int(applied.numpy()), float(loss_sum.numpy()),
                                   float(norm_sum.numpy()), float(learning_rate.numpy()), time.time() - start)

  def _check_loss_scale(self) -> Optional[float]:
    """See `loop_metrics.check_loss_scale`."""
    return loop_metrics.check_loss_scale(self.optimizer, self.step, self.latest_checkpoint)

  # ------------------------------------------------------------------------------------ eval / predict
  def evaluate(self, steps: Optional[int] = None, write_results: bool = True) -> Dict[str, Any]:
    """See `evaluation.Evaluator.evaluate`."""
    return self.evaluator.evaluate(steps, write_results)

  def restore_for_eval(self, checkpoint: Optional[str] = None) -> str:
    return self.evaluator.restore_for_eval(checkpoint)

  def restore_for_predict(self, checkpoint: Optional[str] = None) -> str:
    return self.evaluator.restore_for_predict(checkpoint)

  def predict(self, checkpoint: Optional[str] = None, output_dir: Optional[str] = None) -> Dict[str, Any]:
    """See `evaluation.Evaluator.predict`."""
    return self.evaluator.predict(checkpoint, output_dir)
