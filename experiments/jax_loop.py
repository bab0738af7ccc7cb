"""The experiments' one training loop on Keras' JAX backend, for hosts with JAX and no TensorFlow.

The train binary (`official_albert.train`) needs TensorFlow (docs/backends.md), so the studies that run on a JAX-only
accelerator host — the long-input pretraining and the long-range fine-tuning (`experiments.projects.long_inputs`:
`pretrain_jax`, `finetune_jax`) and the backend check (`experiments.backend_check`) — train here instead. They used to
write the same skeleton three times; its parts, in the order a run uses them:

- `use_jax_backend()`: selects Keras' JAX backend before Keras is imported (or refuses a Keras on another one).
- `warmup_linear_decay(peak, steps)` and `adamw(...)`: the train binary's schedule and optimizer, as Keras objects.
- `train_step(loss_fn, optimizer)`: the jitted stateless step — `jax.value_and_grad` of the caller's loss (built on
  `stateless_call`) and the optimizer's `stateless_apply` — over (trainable, non_trainable, optimizer variables).
- `run(...)`: the steps over the caller's batches, evaluating at step 0, every `every` steps and at the end, with the
  losses kept on the device (no host sync per step) and the first step's and the evaluations' times apart.
- `state(model)` / `write_back(model, ...)`: the model's values in, the trained values written back (before saving).

Keras and JAX are imported inside the functions: the backend is chosen by `use_jax_backend()` before the first import.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import time
from typing import Any, Callable, Iterator, List, Optional, Sequence, Tuple


def use_jax_backend() -> None:
  """Selects Keras' JAX backend; raises when Keras already runs another one (KERAS_BACKEND is read at its import)."""
  requested = os.environ.setdefault("KERAS_BACKEND", "jax")
  if requested != "jax":
    raise ValueError(f"KERAS_BACKEND={requested!r}: this runs the JAX backend (unset it or set it to jax).")
  if "keras" in sys.modules:
    import keras  # noqa: PLC0415 (only to read the backend of a Keras already imported)
    if keras.backend.backend() != "jax":
      raise RuntimeError(f"Keras was imported with the {keras.backend.backend()!r} backend before this ran.")


def warmup_linear_decay(peak: float, steps: int):
  """Linear warmup over a tenth of `steps` to `peak`, then linear decay to 0 at `steps` (a function of the optimizer's
  iteration count, as the train binary's, whose schedule is built in TensorFlow)."""
  import keras  # noqa: PLC0415 (Keras' backend is chosen by the caller before the first import)
  warmup = max(steps // 10, 1)

  class WarmupLinearDecay(keras.optimizers.schedules.LearningRateSchedule):

    def __call__(self, step):
      step = keras.ops.cast(step, "float32")
      rise = peak * (step + 1.0) / warmup
      fall = peak * keras.ops.maximum(0.0, (steps - step) / max(steps - warmup, 1))
      return keras.ops.where(step < warmup, rise, fall)

  return WarmupLinearDecay()


def adamw(model, learning_rate, global_clipnorm: Optional[float] = None):
  """The train binary's AdamW (weight decay 0.01, epsilon 1e-6), built for `model`'s trainable variables."""
  import keras  # noqa: PLC0415
  optimizer = keras.optimizers.AdamW(learning_rate=learning_rate, weight_decay=0.01, epsilon=1e-6,
                                     global_clipnorm=global_clipnorm)
  optimizer.build(model.trainable_variables)
  return optimizer


def state(model) -> Tuple[list, list]:
  """(trainable, non_trainable): the values of `model`'s variables, in their order (the stateless calls' state)."""
  return [v.value for v in model.trainable_variables], [v.value for v in model.non_trainable_variables]


def write_back(model, trainable: Sequence, non_trainable: Sequence) -> None:
  """Writes the stateless loop's `trainable` / `non_trainable` values into `model`'s variables, in their order."""
  for variable, value in zip(model.trainable_variables, trainable):
    variable.assign(value)
  for variable, value in zip(model.non_trainable_variables, non_trainable):
    variable.assign(value)


def train_step(loss_fn: Callable, optimizer, donate: bool = False) -> Callable:
  """jit(trainable, non_trainable, optimizer_vars, batch) → (trainable, non_trainable, optimizer_vars, loss).

  Args:
    loss_fn: (trainable, non_trainable, batch) → (scalar loss, non_trainable), usually around `model.stateless_call(
      ..., training=True)`; differentiated with respect to `trainable`.
    optimizer: a built Keras optimizer (`adamw`); its `stateless_apply` makes the update.
    donate: donate the three states' buffers to the step (the caller keeps no other reference to them): the backend
      check's timed rows, where the copies would be measured too.
  """
  import jax  # noqa: PLC0415

  def step(trainable, non_trainable, optimizer_vars, batch):
    (loss, non_trainable), grads = jax.value_and_grad(loss_fn, has_aux=True)(trainable, non_trainable, batch)
    trainable, optimizer_vars = optimizer.stateless_apply(optimizer_vars, grads, trainable)
    return trainable, non_trainable, optimizer_vars, loss

  return jax.jit(step, donate_argnums=(0, 1, 2) if donate else ())


@dataclasses.dataclass
class LoopResult:
  """What `run` returns: the trained state, the per-step losses (device scalars) and the evaluations with times."""
  trainable: list
  non_trainable: list
  optimizer_vars: list
  losses: List[Any]
  history: List[Tuple[int, Any]]  # (step, evaluate's result): step 0 before training, then every `every` and the end
  started: float  # time.time() after the first evaluation, when the first step was dispatched
  first_step_s: Optional[float]  # compilation included
  train_s: float
  eval_s: float  # the evaluations after step 0

  @property
  def state(self) -> Tuple[list, list]:
    return self.trainable, self.non_trainable

  @property
  def step_s(self) -> Optional[float]:
    """Seconds per step after the first (compiled) one, evaluations left out; the batches' making included."""
    steps = len(self.losses)
    return (self.train_s - self.first_step_s - self.eval_s) / (steps - 1) if steps > 1 else None


def run(step: Callable, model, optimizer, batches: Iterator, steps: int, evaluate: Callable[[Tuple[list, list]], Any],
        every: int, on_evaluation: Callable[[int, Any, Any], None] = lambda *_: None) -> LoopResult:
  """Runs `steps` steps of `step` (`train_step`) from `model`'s and `optimizer`'s values over `batches`.

  Args:
    step: the jitted step.
    model: the Keras model whose values the state starts from (not written back: `write_back` when wanted).
    optimizer: the built optimizer whose variables start the optimizer state.
    batches: an iterator of {name: numpy array}; each batch is moved to the device before its step.
    steps: how many steps.
    evaluate: (trainable, non_trainable) → any result; called at step 0, every `every` steps and after the last.
    every: the evaluation cadence, in steps.
    on_evaluation: (step, last loss or None at step 0, result) after every evaluation (e.g. a log line).

  Returns:
    The trained state and the record (`LoopResult`).
  """
  import jax.numpy as jnp  # noqa: PLC0415
  trainable, non_trainable = state(model)
  optimizer_vars = [v.value for v in optimizer.variables]
  history = [(0, evaluate((trainable, non_trainable)))]
  on_evaluation(0, None, history[0][1])
  losses: List[Any] = []
  started, first_step_s, eval_s = time.time(), None, 0.0
  for i in range(1, steps + 1):
    batch = {k: jnp.asarray(v) for k, v in next(batches).items()}
    trainable, non_trainable, optimizer_vars, loss = step(trainable, non_trainable, optimizer_vars, batch)
    losses.append(loss)  # kept on the device: no host sync per step
    if i == 1:
      loss.block_until_ready()
      first_step_s = time.time() - started
    if i % every == 0 or i == steps:
      loss.block_until_ready()  # the steps dispatched so far count as training time, not evaluation time
      eval_start = time.time()
      history.append((i, evaluate((trainable, non_trainable))))
      eval_s += time.time() - eval_start
      on_evaluation(i, loss, history[-1][1])
  return LoopResult(trainable, non_trainable, optimizer_vars, losses, history, started, first_step_s,
                    time.time() - started, eval_s)
