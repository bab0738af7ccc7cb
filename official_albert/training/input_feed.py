"""What each replica reads: one global stream of batches, sliced per worker and replica.

Every input pipeline (a worker process, or a TPU host) builds the same *global stream*: the task's dataset batched
at the global batch size B with the same seed. Global batch k is examples [k·B, (k+1)·B) of that stream, and replica
r of R (global replica order: worker 0's replicas first) gets slice r of it, B/R examples. Consequences:

- one device, Mirrored ×N and N workers see the same global batches, so they train the same model (up to float
  reduction order), and a run can resume on another number of workers;
- resuming without a checkpointed iterator (TPU, tf.data service: `runtime.input_resume=skip`) is exact: the stream
  is rebuilt and the global batches already consumed (one per optimizer step) are skipped;
- evaluation and prediction score every example exactly once: the stream is read once, in order, the last global
  batch is padded to B with zero examples whose `_valid` weight is 0 (static shapes, so TPU and XLA work and every
  worker runs the same number of steps), and the outputs gathered in global replica order are the stream's order.

The cost of this design: every pipeline reads (and decodes) the whole stream and keeps its slice. Decoding is cheap
next to a training step (37k records/s on 2 cores, see the input_pipeline benchmark), and `runtime.
tf_data_service_address` moves the reading to tf.data service workers when it is not (`service_stream`): the global
stream is sharded by global batch over the W service workers (`ShardingPolicy.HINT`: worker w makes batches w, w+W,
...), each global batch is cut into one slice per consumer (input pipeline), and coordinated reads hand consumer c
slice c of each round's batch, the rounds visiting the workers in turn. So every trainer worker takes its slice of
the same global batch every step and every global batch is used once; with one service worker the order is the local
stream's (bit-identical training), with W the W batches of each window of W steps come in the order the service
visits its workers, which it does not fix (0,1,... or 1,0,...). All pipelines of one attempt of a run join one job,
named from the model directory (a digest, not Python's per-process salted `hash()`), the global batch the stream
starts at and an id of the attempt that the chief draws and every worker receives (`service_job_name`,
`attempt_id`): a run killed before its next checkpoint restarts at the same global batch, and must not join the dead
attempt's job. HINT sharding needs the dispatcher to know its workers: start it with
`DispatcherConfig(worker_addresses=[...])` (docs/distributed_training.md).
"""

from __future__ import annotations

import dataclasses
import hashlib
import secrets
from typing import Any, Callable, Optional, Sequence, Tuple

import tensorflow as tf

from official_albert import compat
from official_albert.data.input_pipeline import dataset_options
from official_albert.data.input_pipeline import trim_to_longest
from official_albert.training.base_task import VALID_KEY
from official_albert.training.config_yaml import ConfigError
from official_albert.training.experiment_config import INPUT_RESUME_MODES


@dataclasses.dataclass(frozen=True)
class Topology:
  """Where this input pipeline sits: replicas per global batch, and which of them it feeds.

  Attributes:
    num_replicas: replicas in sync (R).
    first_replica: global index of this pipeline's first replica.
    num_local_replicas: replicas this pipeline feeds (L); its slice is [first·b, (first+L)·b) of each global batch.
  """
  num_replicas: int = 1
  first_replica: int = 0
  num_local_replicas: int = 1

  def per_replica(self, global_batch_size: int) -> int:
    if global_batch_size % self.num_replicas:
      raise ValueError(f"global_batch_size={global_batch_size} is not divisible by the {self.num_replicas} replicas "
                       "in sync; choose a multiple.")
    return global_batch_size // self.num_replicas


def check_global_batches(splits: Sequence[Tuple[str, Any]], num_replicas: int, trainer: Any = None) -> None:
  """Start-up check that each global batch splits evenly: the training one over replicas × micro-batches, the
  evaluation and prediction ones over the replicas. Run before anything is written to model_dir, so a bad batch size
  is reported with its key instead of while the first step traces (after the resume, params.yaml and the records).

  Args:
    splits: (config key, data config) of every split the mode reads, e.g. ("task.train_data", train_data).
    num_replicas: replicas in sync (all workers).
    trainer: the run's `TrainerConfig`: its `gradient_accumulation_steps` splits each replica batch of the training
      data into micro-batches. None = no accumulation.

  Raises:
    ConfigError: naming the key, the replica count and the fix.
  """
  for key, data in splits:
    batch = data.global_batch_size
    training = key == "task.train_data"
    k = trainer.gradient_accumulation_steps if training and trainer is not None else 1
    if batch % (num_replicas * k) == 0:
      continue
    if k > 1:
      raise ConfigError(f"{key}.global_batch_size={batch} is not divisible by the {num_replicas} replicas in sync × "
                        f"trainer.gradient_accumulation_steps={k} = {num_replicas * k} (each replica batch is split "
                        f"into {k} micro-batches). Choose a multiple of {num_replicas * k}, or change "
                        "trainer.gradient_accumulation_steps.")
    raise ConfigError(f"{key}.global_batch_size={batch} is not divisible by the {num_replicas} replicas in sync. "
                      f"Choose a multiple of {num_replicas}.")


# The stream's map functions have no tensor control flow: not AutoGraph-converted (docs/design.md, "AutoGraph").
_plain = tf.autograph.experimental.do_not_convert


def _valid_weights(batch: Any) -> tf.Tensor:
  first = tf.nest.flatten(batch)[0]
  return tf.ones(tf.shape(first)[:1], tf.float32)


def _with_valid(batch: Any) -> Any:
  """Adds `_valid` = 1 per example to the label side of a batch (a dict, or (features, labels) dicts)."""
  valid = _valid_weights(batch)
  if isinstance(batch, dict):
    return dict(batch, **{VALID_KEY: valid})
  if isinstance(batch, (tuple, list)) and len(batch) == 2 and all(isinstance(p, dict) for p in batch):
    return type(batch)(dict(part, **{VALID_KEY: valid}) for part in batch)
  raise TypeError(f"Evaluation batches must be a dict or a (features, labels) pair of dicts, got {type(batch)}.")


def _pad_to(batch: Any, size: int) -> Any:
  """Pads every tensor of a (possibly partial) batch with zero rows up to `size` examples (`_valid` becomes 0)."""

  def pad(t):
    missing = size - tf.shape(t)[0]
    paddings = tf.concat([[[0, missing]], tf.zeros([tf.rank(t) - 1, 2], tf.int32)], axis=0)
    padded = tf.pad(t, paddings)
    return tf.ensure_shape(padded, [size] + t.shape.as_list()[1:])

  return tf.nest.map_structure(pad, batch)


def _trim(batch: Any, multiple: int) -> Any:
  """Dynamic padding of a whole global batch (its features; labels have no sequence axis to cut)."""
  if isinstance(batch, dict):
    return trim_to_longest(batch, multiple)
  features, labels = batch
  return type(batch)((trim_to_longest(features, multiple), labels))


def _slice_for(batch: Any, topology: Topology, per_replica: int) -> tf.data.Dataset:
  """This pipeline's slice of one global batch, as `num_local_replicas` per-replica batches."""
  start = topology.first_replica * per_replica
  count = topology.num_local_replicas

  def cut(t):
    part = t[start:start + count * per_replica]
    return tf.reshape(part, tf.concat([[count, per_replica], tf.shape(t)[1:]], axis=0))

  return tf.data.Dataset.from_tensor_slices(tf.nest.map_structure(cut, batch))


def attempt_id(strategy: Optional[tf.distribute.Strategy] = None) -> int:
  """A fresh id of this attempt of a run (this start of the command), the same in every process of the attempt.

  A run restarted at the step it had reached (killed before its next checkpoint, restarted twice from one checkpoint,
  or dead before its first) starts its stream at the same global batch as the dead attempt, whose job the dispatcher
  keeps for minutes; joining that job again fails ("consumer was restarted with the same iteration name"). The id is
  drawn from the OS (`secrets`: Python's `random` is seeded alike in every attempt by `keras.utils.set_random_seed`).
  Under MultiWorkerMirroredStrategy global replica 0 (the chief's first) adds its draw and every other replica 0 in a
  SUM all-reduce, so every worker gets the chief's draw: a collective, called by every worker at the same point.

  Args:
    strategy: the run's strategy; None = `tf.distribute.get_strategy()`.
  """
  strategy = strategy or tf.distribute.get_strategy()
  drawn = secrets.randbits(31)  # int32: the all-reduce dtype `Trainer.all_workers` already uses on every device
  if not compat.in_multi_worker_mode(strategy):
    return drawn

  def contribute():
    first = tf.equal(tf.distribute.get_replica_context().replica_id_in_sync_group, 0)
    return tf.where(first, tf.constant(drawn, tf.int32), tf.constant(0, tf.int32))

  broadcast = tf.function(lambda: strategy.reduce(tf.distribute.ReduceOp.SUM, strategy.run(contribute), axis=None),
                          autograph=False)
  return int(broadcast().numpy())


def service_job_name(model_dir: str, start_global_batch: int, attempt: Optional[int] = None) -> str:
  """The tf.data service job of one attempt's training stream: the same in every process of the attempt (a digest of
  the model directory, not the salted `hash()`, and the attempt id), new in every attempt.

  Args:
    model_dir: the run's directory.
    start_global_batch: the global batch the stream starts at (the resume step under `input_resume=skip`).
    attempt: the attempt's id (`attempt_id(strategy)`, drawn once and shared by the workers); None draws one with
      `attempt_id()` (the current strategy's).
  """
  if attempt is None:
    attempt = attempt_id()
  digest = hashlib.sha256(model_dir.rstrip("/").encode("utf-8")).hexdigest()[:16]
  return f"albert_train_{digest}_from_{start_global_batch}_attempt_{attempt:08x}"


def service_stream(stream: tf.data.Dataset, topology: Topology, per_replica: int, service_address: str,
                   job_name: str) -> tf.data.Dataset:
  """This pipeline's slices of the global batches of `stream` (infinite), produced by the tf.data service.

  The service workers each make every W-th global batch (HINT sharding at the global-batch level) and cut it into
  one slice per consumer; coordinated reads (`num_consumers`, `consumer_index`) give consumer c slice c of the batch
  of each round, so all consumers step through the same global batches (in `stream`'s order within each worker's
  share; see the module docstring for the order across workers).
  """
  consumers = topology.num_replicas // topology.num_local_replicas
  index = topology.first_replica // topology.num_local_replicas
  local = topology.num_local_replicas

  def slices(batch):
    def cut(t):
      return tf.reshape(t, tf.concat([[consumers, local, per_replica], tf.shape(t)[1:]], axis=0))
    return tf.data.Dataset.from_tensor_slices(tf.nest.map_structure(cut, batch))

  sharded = stream.shard(tf.data.experimental.SHARD_HINT, tf.data.experimental.SHARD_HINT).flat_map(_plain(slices))
  return sharded.apply(tf.data.experimental.service.distribute(
      processing_mode=tf.data.experimental.service.ShardingPolicy.HINT, service=service_address, job_name=job_name,
      consumer_index=index, num_consumers=consumers))


def _prefetched(per_pipeline: tf.data.Dataset) -> tf.data.Dataset:
  """The stream as the trainer reads it: prefetched, with the project's pipeline options (`dataset_options`)."""
  return per_pipeline.prefetch(tf.data.AUTOTUNE).with_options(dataset_options())


def training_stream(build_inputs: Callable[[Any], tf.data.Dataset], data_config, topology: Topology,
                    skip_global_batches: int = 0, service_address: str = "",
                    service_job: str = "albert_train") -> tf.data.Dataset:
  """Per-replica training batches of this pipeline (infinite).

  Args:
    build_inputs: `task.build_inputs` (called without an input context: the global stream).
    data_config: the training DataConfig (global_batch_size = B).
    topology: this pipeline's replicas.
    skip_global_batches: global batches already consumed (resume without a checkpointed iterator).
    service_address: a tf.data service dispatcher ("grpc://host:port") that produces the stream (`service_stream`:
      the same global batches, each pipeline receiving only its slice).
    service_job: the job name the pipelines of one attempt share on the service (`service_job_name`).
  """
  per_replica = topology.per_replica(data_config.global_batch_size)
  stream = build_inputs(data_config)
  if skip_global_batches:
    stream = stream.skip(skip_global_batches)
  if service_address:
    mine = service_stream(stream, topology, per_replica, service_address, service_job)
    return _prefetched(mine.flat_map(tf.data.Dataset.from_tensor_slices))
  per_pipeline = stream.flat_map(_plain(lambda batch: _slice_for(batch, topology, per_replica)))
  return _prefetched(per_pipeline)


def evaluation_stream(build_inputs: Callable[[Any], tf.data.Dataset], data_config, topology: Topology,
                      max_global_batches: int = -1) -> tf.data.Dataset:
  """Per-replica evaluation / prediction batches of this pipeline: one ordered pass, padded, with `_valid`.

  Args:
    build_inputs: `task.build_inputs`.
    data_config: an evaluation DataConfig (read once, in order; `pad_to_multiple_of` is applied here, after the
      last batch is padded, so every replica of a step gets the same sequence length).
    topology: this pipeline's replicas.
    max_global_batches: stop after this many global batches (-1: the whole data).

  Returns:
    A finite dataset of per-replica batches; every pipeline of a run yields the same number of them.
  """
  global_batch = data_config.global_batch_size
  per_replica = topology.per_replica(global_batch)
  stream = build_inputs(data_config.replace(is_training=False, drop_remainder=False, pad_to_multiple_of=0,
                                            length_bucket_window=0))
  stream = stream.map(_plain(_with_valid))
  if max_global_batches >= 0:
    stream = stream.take(max_global_batches)
  stream = stream.map(_plain(lambda batch: _pad_to(batch, global_batch)))
  if data_config.pad_to_multiple_of:
    stream = stream.map(_plain(lambda batch: _trim(batch, data_config.pad_to_multiple_of)))
  per_pipeline = stream.flat_map(_plain(lambda batch: _slice_for(batch, topology, per_replica)))
  return _prefetched(per_pipeline)


def resolve_input_resume(mode: str, is_tpu: bool, service_address: str) -> str:
  """`iterator` (checkpoint the tf.data iterator: exact, O(1)) or `skip` (rebuild the stream, skip the consumed
  global batches: exact, reads them again); `auto` picks iterator unless the iterator cannot be checkpointed."""
  if mode not in INPUT_RESUME_MODES:
    raise ValueError(f"runtime.input_resume={mode!r} is not one of {INPUT_RESUME_MODES}.")
  if mode != "auto":
    if mode == "iterator" and (is_tpu or service_address):
      raise ValueError("runtime.input_resume=iterator: a TPU or tf.data service iterator cannot be checkpointed; use "
                       "skip (or auto).")
    return mode
  return "skip" if is_tpu or service_address else "iterator"
