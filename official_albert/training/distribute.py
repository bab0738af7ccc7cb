"""tf.distribute strategies from flags, and the chief/worker helpers for collective checkpointing.

`get_distribution_strategy("tpu"|"multi_worker_mirrored"|"mirrored"|"one_device"|"off", ...)` mirrors the Model
Garden's `distribute_utils.get_distribution_strategy`.

Multi-worker checkpointing (MultiWorkerMirroredStrategy): saving is a collective op, so *every* worker must call
`save`; only the chief's files are the real checkpoint. Non-chief workers write to a private temporary directory
that they delete afterwards:

    path = write_dirpath(model_dir, strategy)        # model_dir on the chief, model_dir/workertemp_<id> elsewhere
    manager = tf.train.CheckpointManager(ckpt, path, max_to_keep=5)
    manager.save(step)                               # on every worker
    remove_temp_dirpath(model_dir, strategy)          # no-op on the chief
"""

from __future__ import annotations

import itertools
import json
import logging
import os
import threading
from typing import Callable, List, Optional, Sequence

import tensorflow as tf

from official_albert.training.config_yaml import ConfigError

logger = logging.getLogger(__name__)

STRATEGY_NAMES = ("off", "one_device", "mirrored", "multi_worker_mirrored", "tpu")
# runtime.all_reduce_alg: which names each strategy accepts ("auto" = TensorFlow's choice).
ALL_REDUCE_ALGORITHMS = ("auto", "ring", "nccl", "hierarchical_copy", "reduction_to_one_device")
_ALL_REDUCE = {
    None: None,
    "": None,
    "auto": "AUTO",
    "ring": "RING",
    "nccl": "NCCL",
}
_MIRRORED_CROSS_DEVICE_OPS = {
    None: None,
    "": None,
    "auto": None,
    "nccl": tf.distribute.NcclAllReduce,
    "hierarchical_copy": tf.distribute.HierarchicalCopyAllReduce,
    "reduction_to_one_device": tf.distribute.ReductionToOneDevice,
}
# Each MirroredStrategy made here gets collective group keys of its own (`mirrored_strategy`): n-th strategy of the
# process from group n * COLLECTIVE_KEY_STRIDE + 1 (TensorFlow's default, base 0, stays for strategies made elsewhere).
COLLECTIVE_KEY_STRIDE = 1000
_mirrored_made = itertools.count(1)
_mirrored_lock = threading.Lock()


def get_distribution_strategy(distribution_strategy: str = "mirrored",
                              num_gpus: int = 0,
                              all_reduce_alg: Optional[str] = None,
                              num_packs: int = 1,
                              tpu_address: Optional[str] = None,
                              devices: Optional[Sequence[str]] = None) -> tf.distribute.Strategy:
  """Builds a `tf.distribute.Strategy` from flag values.

  Args:
    distribution_strategy: "one_device", "mirrored", "multi_worker_mirrored", "tpu", or "off" (the default strategy:
      no distribution). Case-insensitive.
    num_gpus: GPUs to use on this host for one_device (0 → CPU, 1 → GPU 0) and mirrored (0 → CPU).
    all_reduce_alg: mirrored: "nccl" | "hierarchical_copy" | "reduction_to_one_device" (None → TF's choice);
      multi_worker_mirrored: "auto" | "ring" | "nccl".
    num_packs: Gradient packing for mirrored's nccl/hierarchical_copy all-reduce.
    tpu_address: TPU name or grpc address for "tpu" ("" or "local" for a TPU VM's local chips).
    devices: Explicit device list for mirrored (e.g. ["/cpu:0", "/cpu:1"] over logical CPUs); overrides num_gpus.

  Returns:
    The strategy. For "tpu" the TPU system is initialised first.

  Raises:
    ValueError: For an unknown strategy or all-reduce name, or inconsistent arguments.
  """
  if not isinstance(distribution_strategy, str):
    raise ValueError(f"distribution_strategy must be a string, got {distribution_strategy!r}.")
  name = distribution_strategy.strip().lower()
  if num_gpus < 0:
    raise ValueError(f"num_gpus must be >= 0, got num_gpus={num_gpus}.")

  if name in ("off", "default"):
    if num_gpus > 1:
      raise ValueError(f"distribution_strategy='off' cannot use num_gpus={num_gpus} > 1.")
    return tf.distribute.get_strategy()

  if name == "one_device":
    if num_gpus > 1:
      raise ValueError(f"distribution_strategy='one_device' needs num_gpus <= 1, got num_gpus={num_gpus}; "
                       "use 'mirrored' for several GPUs.")
    return tf.distribute.OneDeviceStrategy("/gpu:0" if num_gpus == 1 else "/cpu:0")

  if name == "mirrored":
    if devices:
      device_list = list(devices)
    elif num_gpus == 0:
      device_list = ["/cpu:0"]
    else:
      device_list = [f"/gpu:{i}" for i in range(num_gpus)]
    key = all_reduce_alg.lower() if all_reduce_alg else all_reduce_alg
    if key not in _MIRRORED_CROSS_DEVICE_OPS:
      raise ValueError(f"Unknown all_reduce_alg={all_reduce_alg!r} for mirrored; expected one of "
                       f"{[k for k in _MIRRORED_CROSS_DEVICE_OPS if k]}.")
    ops_cls = _MIRRORED_CROSS_DEVICE_OPS[key]
    cross_device_ops = None
    if ops_cls is tf.distribute.ReductionToOneDevice:
      cross_device_ops = ops_cls()
    elif ops_cls is not None:
      cross_device_ops = ops_cls(num_packs=num_packs)
    return mirrored_strategy(device_list, cross_device_ops)

  if name == "multi_worker_mirrored":
    key = all_reduce_alg.lower() if all_reduce_alg else all_reduce_alg
    if key not in _ALL_REDUCE:
      raise ValueError(f"Unknown all_reduce_alg={all_reduce_alg!r} for multi_worker_mirrored; expected one of "
                       f"{[k for k in _ALL_REDUCE if k]}.")
    implementation = getattr(tf.distribute.experimental.CommunicationImplementation, _ALL_REDUCE[key] or "AUTO")
    options = tf.distribute.experimental.CommunicationOptions(implementation=implementation)
    return tf.distribute.MultiWorkerMirroredStrategy(communication_options=options)

  if name == "tpu":
    resolver = tpu_initialize(tpu_address)
    return tf.distribute.TPUStrategy(resolver)

  raise ValueError(f"Unknown distribution_strategy={distribution_strategy!r}; expected one of {list(STRATEGY_NAMES)}.")


def mirrored_strategy(devices: Sequence[str], cross_device_ops=None) -> tf.distribute.MirroredStrategy:
  """A MirroredStrategy over `devices` whose collectives use group keys no earlier strategy of this process used.

  Why: TensorFlow starts every MirroredStrategy's collective keys at group 1, instance 100, and the runtime keeps
  what it resolved for a (group, instance) pair (op type, dtype, shape) for the life of the process. A second
  strategy in one process (`train.run` of train_and_eval or eval, then of predict; a notebook's second Trainer) so
  met the first one's records: its prediction all-gather failed with "Shape mismatch in the collective instance 101"
  or "Collective instance 100 expected type 0 ... but got type 2", and the error aborted every later collective.
  TensorFlow's own tests shift `MirroredStrategy._collective_key_base` per strategy for the same reason; it is read
  once, in the constructor, so it is set for that call only (under a lock).
  """
  cls = tf.distribute.MirroredStrategy
  if "_collective_key_base" not in vars(cls):  # (a TensorFlow without it: its default keys, as before)
    return cls(devices=list(devices), cross_device_ops=cross_device_ops)
  with _mirrored_lock:
    default = cls._collective_key_base
    cls._collective_key_base = default + next(_mirrored_made) * COLLECTIVE_KEY_STRIDE
    try:
      return cls(devices=list(devices), cross_device_ops=cross_device_ops)
    finally:
      cls._collective_key_base = default


def tpu_initialize(tpu_address: Optional[str]):
  """Connects to and initialises a TPU system; returns its `TPUClusterResolver`.

  Args:
    tpu_address: TPU name, `grpc://` address, or ""/"local"/None for the chips of a TPU VM.
  """
  tpu = "local" if tpu_address in (None, "", "local") else tpu_address
  resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu=tpu)
  if tpu != "local":
    # A remote TPU (TPU node) needs the cluster connection; TPU VMs talk to their local chips directly.
    tf.config.experimental_connect_to_cluster(resolver)
  tf.tpu.experimental.initialize_tpu_system(resolver)
  logger.info("Initialised TPU system at %s", tpu)
  return resolver


def configure_logical_cpus(num_devices: int) -> List[str]:
  """Splits the host CPU into `num_devices` logical devices (multi-replica training on one machine).

  Must run before TensorFlow initialises its devices (before the first op of the process); calling it again with the
  same number once they exist is fine.

  Returns:
    The logical CPU device names, e.g. ["/cpu:0", "/cpu:1"].
  """
  cpus = tf.config.list_physical_devices("CPU")
  try:
    tf.config.set_logical_device_configuration(cpus[0], [tf.config.LogicalDeviceConfiguration()] * num_devices)
  except RuntimeError as e:
    existing = len(tf.config.list_logical_devices("CPU"))
    if existing != num_devices:
      raise RuntimeError(f"runtime.num_cpu_devices={num_devices}: TensorFlow already initialised {existing} CPU "
                         "device(s) in this process; the logical devices must be configured before the first op "
                         f"(start a new process). ({e})") from e
  return [f"/cpu:{i}" for i in range(num_devices)]


def check_tf_config(distribution_strategy: str, tpu: str = "") -> None:
  """Refuses a `TF_CONFIG` that lists several workers when the strategy is not multi_worker_mirrored.

  Only MultiWorkerMirroredStrategy reads `TF_CONFIG`; under any other strategy (auto '' included: it never picks
  MWMS) every machine would train alone, believe it is the chief, and write the same model_dir — N runs overwriting
  each other's checkpoints at 1/N of the global batch, without an error. An evaluator task (a side-car evaluation
  job beside the workers) runs on one machine and is allowed. A TPU run (`tpu`: `runtime.tpu`, or the strategy
  'tpu') is not checked: TPUStrategy finds its workers through `runtime.tpu`; managed platforms may set a TF_CONFIG.

  Raises:
    ConfigError: naming TF_CONFIG, the strategy and the fix.
  """
  text = os.environ.get("TF_CONFIG", "").strip()
  if not text or tpu or (distribution_strategy or "").strip().lower() in ("multi_worker_mirrored", "tpu"):
    return
  try:
    config = json.loads(text)
    cluster, task = config.get("cluster") or {}, config.get("task") or {}
    workers = sum(len(cluster.get(kind) or []) for kind in ("chief", "worker"))
  except (ValueError, AttributeError, TypeError) as e:
    raise ConfigError(f"TF_CONFIG is not a JSON object with a 'cluster' mapping ({e}): fix it, or unset TF_CONFIG "
                      "for a single-machine run.") from e
  if workers > 1 and task.get("type") != "evaluator":
    raise ConfigError(f"TF_CONFIG lists {workers} chief/worker tasks but runtime.distribution_strategy="
                      f"{distribution_strategy!r} (--distribution_strategy) does not read it: every machine would "
                      "train alone into the same model_dir. Set --distribution_strategy=multi_worker_mirrored for a "
                      "multi-worker run, or unset TF_CONFIG for a single-machine run.")


def strategy_from_runtime(runtime) -> tf.distribute.Strategy:
  """The strategy a `RuntimeConfig` asks for.

  '' (auto) means: tpu when `runtime.tpu` is set, mirrored over logical CPUs when `runtime.num_cpu_devices` > 1,
  mirrored over more than one GPU, else one device; never multi_worker_mirrored, so a `TF_CONFIG` listing several
  workers with any other strategy is refused (`check_tf_config`).
  """
  name = runtime.distribution_strategy
  check_tf_config(name, runtime.tpu)
  if runtime.num_cpu_devices:
    devices = configure_logical_cpus(runtime.num_cpu_devices)
    return get_distribution_strategy("mirrored", devices=devices, all_reduce_alg=runtime.all_reduce_alg)
  gpus = len(tf.config.list_physical_devices("GPU"))
  num_gpus = gpus if runtime.num_gpus < 0 else runtime.num_gpus
  if not name:
    name = "tpu" if runtime.tpu else ("mirrored" if num_gpus > 1 else "one_device")
  if name == "one_device":
    num_gpus = min(num_gpus, 1)
  all_reduce = runtime.all_reduce_alg if name in ("mirrored", "multi_worker_mirrored") else None
  return get_distribution_strategy(name, num_gpus=num_gpus, all_reduce_alg=all_reduce,
                                   tpu_address=runtime.tpu or None)


def is_tpu(strategy: Optional[tf.distribute.Strategy]) -> bool:
  return isinstance(strategy, (tf.distribute.TPUStrategy, tf.distribute.experimental.TPUStrategy))


# ----------------------------------------------------------------------------------------------------------------------
# Chief / worker helpers
# ----------------------------------------------------------------------------------------------------------------------
def _task_info(strategy: Optional[tf.distribute.Strategy]):
  """(task_type, task_id, cluster_spec dict) of this process; (None, None, {}) when there is no cluster."""
  resolver = getattr(strategy, "cluster_resolver", None) if strategy is not None else None
  if resolver is None:
    return None, None, {}
  spec = resolver.cluster_spec()
  return resolver.task_type, resolver.task_id, (spec.as_dict() if spec else {})


def is_chief(strategy: Optional[tf.distribute.Strategy] = None) -> bool:
  """True on the process that owns `model_dir`: the chief, or worker 0 when the cluster has no chief.

  Single-process strategies (default, one_device, mirrored) are always chief. TPUStrategy has one client: chief.
  """
  if isinstance(strategy, tf.distribute.TPUStrategy):
    return True
  task_type, task_id, cluster = _task_info(strategy)
  return (task_type is None or task_type == "chief" or
          (task_type == "worker" and task_id == 0 and "chief" not in cluster))


def write_dirpath(dirpath: str, strategy: Optional[tf.distribute.Strategy] = None) -> str:
  """Where this worker writes a collective save: `dirpath` on the chief, `dirpath/workertemp_<id>` elsewhere."""
  if is_chief(strategy):
    return dirpath
  _, task_id, _ = _task_info(strategy)
  return os.path.join(dirpath, f"workertemp_{task_id}")


def remove_temp_dirpath(dirpath: str, strategy: Optional[tf.distribute.Strategy] = None) -> None:
  """Deletes a non-chief worker's temporary save directory (no-op on the chief)."""
  if is_chief(strategy):
    return
  temp = write_dirpath(dirpath, strategy)
  if tf.io.gfile.exists(temp):
    tf.io.gfile.rmtree(temp)


def worker_index(strategy: Optional[tf.distribute.Strategy] = None) -> int:
  """This process's index among the workers (the chief is 0, then the workers in order); 0 without a cluster."""
  task_type, task_id, cluster = _task_info(strategy)
  if task_type is None or is_tpu(strategy) or task_type == "chief":
    return 0
  return int(task_id) + (1 if "chief" in cluster else 0)


def num_workers(strategy: Optional[tf.distribute.Strategy] = None) -> int:
  """Number of worker processes (chief included) in this strategy's cluster; 1 without a cluster."""
  _, _, cluster = _task_info(strategy)
  return max(1, sum(len(cluster.get(k, [])) for k in ("chief", "worker")))


def raise_together(check: Callable[[], None], any_worker: Callable[[bool], bool], others_error: str) -> None:
  """Runs `check` on every worker of a job and raises on all of them when it raised on any.

  Why: a check that reads a worker's own files (its input positions) can fail on one worker only; that worker
  leaving alone would leave the others waiting in their next collective until its timeout.

  Args:
    check: raises ValueError when this worker's state does not fit the run.
    any_worker: a vote every worker joins (a collective, called by all in the same order): True on all of them when
      any passed True; identity in a one-process job.
    others_error: the ValueError message of the workers whose own check passed (the failing one's log names why).
  """
  try:
    check()
    failed = None
  except ValueError as error:
    failed = error
  if any_worker(failed is not None):
    raise failed if failed is not None else ValueError(others_error)
