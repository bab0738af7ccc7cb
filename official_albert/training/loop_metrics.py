"""The training numbers of a summary window: what `train/` TensorBoard scalars, the log line and `history` say.

A window is every optimizer step since the previous `trainer.summary_interval` write (or since this `train()` call
began: after a resume, from the resume step). Loops are cut at every action's boundary (checkpoint, evaluation,
`steps_per_loop`), so one compiled loop is often only part of a summary interval; the window adds the loops up, so
the scalar written at step N covers all the steps since the write before it, not just the last loop (a loss point
that was one step's loss after a checkpoint cut looked like a noisy curve). The task's metrics are reset only when a
window starts, for the same reason.

Per window:
  loss                 mean of the steps' global-batch losses;
  global_norm          mean pre-clip gradient norm over the steps the optimizer applied (a `mixed_float16` step the
                       loss scaler skipped leaves the previous norm behind, which is not this step's; absent when
                       the scaler skipped every step of the window);
  skipped_steps        attempted steps the loss scaler skipped (only under `mixed_float16`, next to `loss_scale`);
  learning_rate        the rate the window's last step applied (`schedule(iterations - 1)`, read before the update:
                       read after it, it was the next step's, one step late: 0 at the last step of every run);
  examples_per_second  timed steps × global batch / their loop time, leaving out the first step of a Trainer
                       (absent when that step is the window's only one);
  first_step_seconds   in the window holding a Trainer's first step: that step's time — XLA compile, input start-up
                       (shuffle buffer fill) and, with `runtime.input_resume=skip`, the re-reading of consumed
                       batches after a resume: one-time costs that would make the first throughput and ETA many
                       times too low.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Callable, Dict, Optional

import keras
import numpy as np


def metric_results(metrics) -> Dict[str, float]:
  """The task's Keras metrics as Python floats."""
  return {m.name: float(np.asarray(m.result())) for m in metrics}


def reset_metrics(metrics) -> None:
  """Empties the task's Keras metrics: a window starts (they accumulate across the window's loops)."""
  for m in metrics:
    m.reset_state()


@dataclasses.dataclass
class LoopResult:
  """What one call of the compiled loop returns, as Python numbers.

  Attributes:
    steps: optimizer steps attempted (fewer than asked after a preemption notice).
    applied: steps the optimizer applied (`steps` minus the loss scaler's skips).
    loss_sum: sum of the steps' global-batch losses.
    norm_sum: sum of the applied steps' pre-clip gradient norms.
    learning_rate: the rate of the call's last step (meaningless when `steps` is 0).
    seconds: wall time of the call.
  """
  steps: int
  applied: int
  loss_sum: float
  norm_sum: float
  learning_rate: float
  seconds: float


@dataclasses.dataclass
class Window:
  """The steps since the previous summary write (module docstring); `Trainer._run_loop` adds, `LoopLog` clears."""
  steps: int = 0
  applied: int = 0
  loss_sum: float = 0.0
  norm_sum: float = 0.0
  learning_rate: float = 0.0
  timed_steps: int = 0
  timed_seconds: float = 0.0
  first_step_seconds: Optional[float] = None

  def add(self, loop: LoopResult, first_step: bool = False) -> None:
    """Adds one loop call; `first_step`: the call ran a Trainer's first step only, timed apart (not throughput)."""
    if not loop.steps:
      return
    self.steps += loop.steps
    self.applied += loop.applied
    self.loss_sum += loop.loss_sum
    self.norm_sum += loop.norm_sum
    self.learning_rate = loop.learning_rate
    if first_step:
      self.first_step_seconds = loop.seconds
    else:
      self.timed_steps += loop.steps
      self.timed_seconds += loop.seconds

  def clear(self) -> None:
    """Starts the next window (after a summary write)."""
    for field in dataclasses.fields(self):
      setattr(self, field.name, field.default)

  def logs(self, metrics: Dict[str, float], global_batch_size: int,
           loss_scale: Optional[float] = None) -> Dict[str, float]:
    """The window's logs: the task's `metrics` (accumulated over the window) and the numbers of the module docstring.

    Raises:
      ValueError: for an empty window (no step ran: there is nothing to log).
    """
    if not self.steps:
      raise ValueError("loop_metrics.Window.logs: the window holds no step yet; log after a loop that ran steps.")
    logs = dict(metrics)
    logs["loss"] = self.loss_sum / self.steps
    if self.applied:  # of the all-reduced gradient, before clipping
      logs["global_norm"] = self.norm_sum / self.applied
    logs["learning_rate"] = self.learning_rate
    if self.timed_steps:
      logs["examples_per_second"] = self.timed_steps * global_batch_size / max(self.timed_seconds, 1e-9)
    if self.first_step_seconds is not None:
      logs["first_step_seconds"] = self.first_step_seconds
    if loss_scale is not None:
      logs["loss_scale"] = loss_scale
      logs["skipped_steps"] = float(self.steps - self.applied)
    return logs


def eta_seconds(step: int, total: int, now: float, clock_start: float, clock_step: int) -> float:
  """Time left at `step` of `total`, at the pace of the steps since (`clock_start`, `clock_step`); inf when unknown.

  The clock starts after a Trainer's first step (`LoopLog`): from before it, the one-time start-up costs would
  stretch the estimate as they do the first throughput.
  """
  rate = (step - clock_step) / max(now - clock_start, 1e-9)
  return (total - step) / rate if rate > 0 else math.inf


def check_loss_scale(optimizer, step: int, last_checkpoint: Callable[[], Optional[str]]) -> Optional[float]:
  """The loss scale of a mixed_float16 `optimizer` (None for another); raises when it fell below 1.

  A scale halved below 1 means every recent gradient was non-finite: stop instead of looping on skipped steps.

  Raises:
    FloatingPointError: naming the step, how many steps were skipped, the fix and the last good checkpoint.
  """
  if not isinstance(optimizer, keras.optimizers.LossScaleOptimizer):
    return None
  scale = float(optimizer.dynamic_scale.numpy())
  if scale < 1.0:
    raise FloatingPointError(
        f"mixed_float16: the loss scale fell to {scale:g} at step {step}: the gradients of the last "
        f"{int(round(math.log2(float(optimizer.initial_scale) / max(scale, 1e-30))))} attempted steps were "
        "not finite, so none was applied. The model diverged or float16 cannot hold its gradients: use "
        f"mixed_bfloat16, or a lower learning rate. The last good checkpoint is {last_checkpoint()}.")
  return scale
