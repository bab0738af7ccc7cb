"""`run_experiment`: runs a task's train / eval / train_and_eval / predict with the custom distributed loop.

The pieces: `trainer.py` (the Trainer and its training loop), `evaluation.py` (whole-data evaluation and prediction
under any strategy), `input_feed.py` (what each replica reads), `checkpointing.py` (the checkpoint books),
`preemption.py` (SIGTERM → checkpoint), `distribute.py` (strategies). `<model_dir>` is also a native model directory
(`config.json` + `ckpt-N` with a `model` root) that `official_albert.load_pretrained` reads; all file I/O goes
through `tf.io.gfile`, so gs:// works. Multi-device launch commands: docs/distributed_training.md.
"""

from __future__ import annotations

import logging
from typing import Any, Callable, Dict, Optional

import keras
import tensorflow as tf

from official_albert.training import checkpointing, distribute
from official_albert.training.evaluation import EVAL_RESULTS_FILE, PREDICTIONS_DIR  # noqa: F401  (public names)
from official_albert.training.experiment_config import ExperimentConfig, save_params_yaml
from official_albert.training.trainer import NonFiniteLossError, Trainer  # noqa: F401  (public names)

logger = logging.getLogger(__name__)

MODES = ("train", "eval", "train_and_eval", "predict")
BEST_CHECKPOINT_PREFIX = checkpointing.BEST_CHECKPOINT_PREFIX


def resolve_runtime(params: ExperimentConfig, strategy: tf.distribute.Strategy) -> ExperimentConfig:
  """`params` with the automatic runtime choices made: mixed_precision_dtype '' → mixed_bfloat16 on TPU, else float32.

  Also refuses, at start-up, combinations that TensorFlow cannot run.
  """
  runtime = params.runtime
  if not runtime.mixed_precision_dtype:
    params = params.override({"runtime": {"mixed_precision_dtype":
                                          "mixed_bfloat16" if distribute.is_tpu(strategy) else "float32"}})
  if (params.runtime.mixed_precision_dtype == "mixed_float16" and distribute.is_tpu(strategy)):
    raise ValueError("runtime.mixed_precision_dtype=mixed_float16 on TPU: TPUs compute in bfloat16; use "
                     "mixed_bfloat16 (no loss scaling needed).")
  return params


def _apply_runtime(params: ExperimentConfig):
  """Seeds, determinism and the mixed-precision policy. Returns the previous policy name (to restore)."""
  runtime = params.runtime
  keras.utils.set_random_seed(runtime.seed)
  if runtime.enable_op_determinism:
    tf.config.experimental.enable_op_determinism()
  previous = keras.mixed_precision.global_policy().name
  keras.mixed_precision.set_global_policy(runtime.mixed_precision_dtype or "float32")
  if (runtime.jit_compile and "bfloat16" in runtime.mixed_precision_dtype and not runtime.tpu
      and not tf.config.list_physical_devices("GPU")):
    # Measured (make bench): on CPU, XLA lowers bf16 matmuls without oneDNN's AVX-512/AMX bf16 kernels, so an
    # XLA bf16 step is slower than the fp32 one, while the graph path runs bf16 ~2x faster than fp32.
    logger.warning("runtime.jit_compile=True with %s on CPU: XLA:CPU has no fast bf16 matmuls; set "
                   "runtime.jit_compile=false for bf16 on CPU.", runtime.mixed_precision_dtype)
  return previous


def run_experiment(params: ExperimentConfig, model_dir: str, mode: str = "train", strategy=None, task=None,
                   on_loop_end: Optional[Callable[[int, Dict[str, float]], None]] = None,
                   checkpoint: Optional[str] = None) -> Dict[str, Any]:
  """Runs `mode` (train | eval | train_and_eval | predict) for `params` in `model_dir`.

  Writes `params.yaml` (the effective config, automatic choices made) and `config.json` (so model_dir is a native
  model directory) on the chief, except in predict mode, which leaves the training run's files as they are.
  `checkpoint` (a prefix) is read by predict only.

  Returns:
    train: the `Trainer.train` summary plus "best_checkpoint" (best_checkpoint.json or None) and "trainer" (the
    `Trainer`, for callers that want the model); eval: the eval results; train_and_eval: the train summary whose
    "eval_results" holds the final evaluation; predict: `Trainer.predict`'s summary.
  """
  if mode not in MODES:
    raise ValueError(f"--mode={mode!r} is not one of {MODES}.")
  # The strategy first: logical CPU devices (runtime.num_cpu_devices) must exist before TensorFlow runs any op.
  strategy = strategy or distribute.strategy_from_runtime(params.runtime)
  params = resolve_runtime(params, strategy)
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
