"""The periodic duties of the training loop, one small object each (Model Garden's `actions.py`, Orbit's controller).

After every `steps_per_loop` call of the compiled loop, `Trainer.train` runs its actions in a fixed order:

  LoopLog      the loop's logs: log line, TensorBoard `train/` every `summary_interval`, history, chance monitor
  Preemption   a notice on any worker: save (unless this step is saved) and stop, all workers at the same step
  Checkpoint   `ckpt-N` every `checkpoint_interval` steps and at the last step
  Evaluation   every `eval_every` steps and at the last step: a checkpoint of this step first, then the evaluation
               (eval_results.json, `model.ckpt-best`)
  Callback     the caller's `on_loop_end(step, logs)`

An action with an interval names its next boundary (`next_boundary`); the loop runs to the nearest boundary of all
of them (and of `steps_per_loop` and `train_steps`), so every duty falls on a step the loop ends at. The actions share
one `LoopState` (what the run returns), and nothing else: the order above is the order of the original hand-written
cadence, so the checkpoints, summaries and resumes are the same bytes.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import time
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from official_albert.training import guardrails
from official_albert.training import loop_metrics

logger = logging.getLogger(__name__)


def next_multiple(step: int, interval: int) -> int:
  """The first multiple of `interval` after `step`."""
  return (step // interval + 1) * interval


@dataclasses.dataclass
class LoopState:
  """What the loop and its actions share within one `Trainer.train` call.

  Attributes:
    total: `trainer.train_steps`.
    step: the global step after the last loop.
    done: optimizer steps the last loop ran (0 when a preemption notice stopped it before any).
    window: the steps since the previous summary write (`loop_metrics.Window`); `LoopLog` starts the next one.
    logs: the window's logs up to the last loop (kept from an earlier loop when the last one ran no step).
    last_saved: the step of the newest checkpoint (None: none yet).
    status: "completed" or "preempted".
    stop: an action asks the loop to stop after this round.
    history, eval_history, eval_results, chance_warnings: what `train` returns.
  """
  total: int
  step: int
  last_saved: Optional[int]
  done: int = 0
  logs: Dict[str, float] = dataclasses.field(default_factory=dict)
  window: loop_metrics.Window = dataclasses.field(default_factory=loop_metrics.Window)
  status: str = "completed"
  stop: bool = False
  history: List[Tuple[int, Dict[str, float]]] = dataclasses.field(default_factory=list)
  eval_history: List[Tuple[int, Dict[str, Any]]] = dataclasses.field(default_factory=list)
  eval_results: Dict[str, Any] = dataclasses.field(default_factory=dict)
  chance_warnings: List[str] = dataclasses.field(default_factory=list)

  def due(self, interval: int) -> bool:
    """A duty of period `interval` falls on this step (its multiples, and the last step)."""
    return self.step % interval == 0 or self.step >= self.total


class Action:
  """One duty of the loop; `interval` (None: every loop, no boundary of its own) sets when it falls."""
  interval: Optional[int] = None

  def next_boundary(self, step: int) -> Optional[int]:
    return next_multiple(step, self.interval) if self.interval else None

  def __call__(self, state: LoopState) -> None:
    raise NotImplementedError


class LoopLog(Action):
  """After a loop that ran steps: the log line, the `train/` summaries (every `interval` steps and at the last
  step), the history, and the chance-level monitor's verdict.

  Every number is its summary window's (`loop_metrics.py`): the steps since the previous write, however many loops
  the other actions cut them into; after a write the next window starts. The ETA's clock starts after the Trainer's
  first step (`Trainer.first_step_end`), which pays the one-time start-up costs.
  """

  def __init__(self, trainer, interval: int, start_step: int):
    self.trainer = trainer
    self.interval = interval
    self.start_step = start_step
    self.run_start = time.time()
    train_steps = trainer.params.trainer.train_steps
    # (the training labels are read for a classifier's chance level only when the run will be judged)
    judged = guardrails.ChanceLevelMonitor.judges(train_steps, start_step)
    train_data = trainer.params.task.train_data if judged else None
    self.monitor = guardrails.ChanceLevelMonitor(guardrails.chance_losses(trainer.task, trainer.model, train_data),
                                                 train_steps, start_step)

  def __call__(self, state: LoopState) -> None:
    if not state.done:
      return
    step, total, logs = state.step, state.total, state.logs
    clock_start, clock_step = max((self.run_start, self.start_step), self.trainer.first_step_end or (0.0, 0))
    eta = loop_metrics.eta_seconds(step, total, time.time(), clock_start, clock_step)
    logger.info("step %d/%d  loss %.4f  %s  %.1f examples/s  ETA %s", step, total, logs["loss"],
                "  ".join(f"{k} {v:.4f}" for k, v in logs.items()
                          if k not in ("loss", "examples_per_second", "learning_rate")),
                logs.get("examples_per_second", math.nan), format_eta(eta))
    if state.due(self.interval):
      self.trainer.summaries.write("train", logs, step)
      state.window.clear()  # on every worker alike, writing or not
    state.history.append((step, dict(logs)))
    for message in self.monitor.update(step, logs):
      logger.warning("%s", message)
      state.chance_warnings.append(message)


class Preemption(Action):
  """A preemption notice on any worker stops all of them here, at the same step (they must join the same
  collectives), after a checkpoint of this step and the `train/` summary of the steps since the last one."""

  def __init__(self, trainer):
    self.trainer = trainer

  def __call__(self, state: LoopState) -> None:
    if not self.trainer.all_workers(self.trainer.preemption.requested, require_all=False):
      return
    state.status, state.stop = "preempted", True
    if state.window.steps:  # the steps since the last train/ write: the restart starts a new window, so write them
      self.trainer.summaries.write("train", state.logs, state.step)
      state.window.clear()
    if state.last_saved != state.step:
      self.trainer.save_checkpoint()
    logger.warning("Preempted: saved a checkpoint at step %d and stopped.", state.step)


class Checkpoint(Action):
  """`ckpt-N` every `interval` steps and at the last step."""

  def __init__(self, trainer, interval: int):
    self.trainer = trainer
    self.interval = interval

  def __call__(self, state: LoopState) -> None:
    if state.due(self.interval):
      self.trainer.save_checkpoint()
      state.last_saved = state.step


class Evaluation(Action):
  """Every `interval` steps and at the last step: the weights evaluated are a checkpoint's (saved first when this
  step has none), so `model.ckpt-best` can copy it."""

  def __init__(self, trainer, interval: int):
    self.trainer = trainer
    self.interval = interval

  def __call__(self, state: LoopState) -> None:
    if not state.due(self.interval):
      return
    if state.last_saved != state.step:
      self.trainer.save_checkpoint()
      state.last_saved = state.step
    state.eval_results = self.trainer.evaluate()
    state.eval_history.append((state.step, state.eval_results))


class Callback(Action):
  """The caller's `on_loop_end(step, logs)` after every loop (the demo records its curves this way)."""

  def __init__(self, function: Callable[[int, Dict[str, float]], None]):
    self.function = function

  def __call__(self, state: LoopState) -> None:
    self.function(state.step, state.logs)


def training_actions(trainer, loop_log: LoopLog, eval_every: Optional[int], on_loop_end) -> List[Action]:
  """The actions of one `train` call, in the order they run after each loop (`loop_log` first)."""
  interval = trainer.params.trainer.checkpoint_interval
  actions: List[Action] = [loop_log, Preemption(trainer), Checkpoint(trainer, interval)]
  if eval_every:
    actions.append(Evaluation(trainer, eval_every))
  if on_loop_end is not None:
    actions.append(Callback(on_loop_end))
  return actions


def steps_to_boundary(step: int, total: int, steps_per_loop: int, actions: Sequence[Action]) -> int:
  """How many steps the next loop runs: to the nearest of `total`, the next `steps_per_loop` multiple and every
  action's next boundary."""
  boundaries = [total, next_multiple(step, steps_per_loop)]
  boundaries += [b for b in (a.next_boundary(step) for a in actions) if b is not None]
  return min(b for b in boundaries if b > step) - step


def format_eta(seconds: float) -> str:
  if not math.isfinite(seconds):
    return "?"
  seconds = int(seconds)
  return f"{seconds // 3600:d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"
