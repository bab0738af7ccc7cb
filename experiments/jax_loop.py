"""The experiments' one training loop on Keras' JAX backend, for hosts with JAX and no TensorFlow.

The train binary (`official_albert.train`) needs TensorFlow (docs/backends.md), so the studies that run on a JAX-only
accelerator host — the long-input pretraining and the long-range fine-tuning (`experiments.projects.long_inputs`:
`pretrain_jax`, `finetune_jax`) and the backend check (`experiments.backend_check`) — train here instead. They used to
write the same skeleton three times; its parts, in the order a run uses them:

- `use_jax_backend()`: selects Keras' JAX backend before Keras is imported (or refuses a Keras on another one).
- `warmup_linear_decay(peak, steps)` and `adamw(...)`: the train binary's schedule (`AlbertLearningRateSchedule`:
  lr(step) = peak·step/W during the warmup, then peak·(1 − step/T), decay measured from step 0) and optimizer (its
  `AdamW`, reference §4.7: no bias correction, weight decay 0.01 except on LayerNorm and bias, gradients clipped at
  global norm 1.0), rewritten with Keras ops: official_albert.training.optimization imports TensorFlow, which a
  JAX-only host does not have. tests/experiments/test_jax_loop.py holds both to the train binary's, on JAX. (Until
  this was fixed they were Keras' AdamW, bias-corrected and decaying every variable, with a warmup of (step+1)/W
  and a decay from the end of the warmup: the long-input JAX results measured before say so in their README.)
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
import re
import sys
import time
from typing import Any, Callable, Iterator, List, Optional, Sequence, Tuple

from official_albert import extras

# The train binary's AdamW (official_albert.training.optimization.create_optimizer, reference §4.6-§4.7), restated here
# because that module imports TensorFlow; tests/experiments/test_jax_loop.py checks they agree.
WEIGHT_DECAY_RATE = 0.01
EPSILON = 1e-6
BETA_1, BETA_2 = 0.9, 0.999
EXCLUDE_FROM_WEIGHT_DECAY = ("LayerNorm", "layer_norm", "bias")
CLIP_NORM = 1.0


def use_jax_backend() -> None:
  """Selects Keras' JAX backend; raises when Keras already runs another one (KERAS_BACKEND is read at its import).

  Raises:
    ImportError: JAX is not installed, naming the `jax` extra (every JAX binary calls this first, so a pip user sees
      how to install it instead of a bare "No module named 'jax'").
  """
  extras.import_extra("jax", "JAX", "the JAX backend needs it", "jax")
  requested = os.environ.setdefault("KERAS_BACKEND", "jax")
  if requested != "jax":
    raise ValueError(f"KERAS_BACKEND={requested!r}: this runs the JAX backend (unset it or set it to jax).")
  if "keras" in sys.modules:
    import keras  # noqa: PLC0415 (only to read the backend of a Keras already imported)
    if keras.backend.backend() != "jax":
      raise RuntimeError(f"Keras was imported with the {keras.backend.backend()!r} backend before this ran.")


def warmup_steps(steps: int) -> int:
  """W for `steps` steps: a tenth of them, at least 1 (the long-input study's setting, study.py)."""
  return max(steps // 10, 1)


def warmup_linear_decay(peak: float, steps: int):
  """The train binary's schedule (`AlbertLearningRateSchedule(peak, steps, num_warmup_steps=warmup_steps(steps))`)
  as a Keras schedule of the optimizer's iteration count, computed in float32 in the same order:

    lr(step) = peak·step/W   for step < W,   else   peak·(1 − min(step, T)/T)

  so lr(0) = 0 (the first update moves only the moments) and the decay is measured from step 0, not from W.
  """
  import keras  # noqa: PLC0415 (Keras' backend is chosen by the caller before the first import)
  # (steps = 0: a run that only evaluates; the train binary would refuse it, here no step reads the rate.)
  warmup, total = warmup_steps(steps), max(int(steps), 1)

  class WarmupLinearDecay(keras.optimizers.schedules.LearningRateSchedule):

    def __call__(self, step):
      ops = keras.ops
      step = ops.cast(step, "float32")
      init = ops.convert_to_tensor(peak, "float32")
      decayed = init * (1.0 - ops.minimum(step, float(total)) / float(total))
      rise = init * ops.maximum(step, 0.0) / float(warmup)
      return ops.where(step < float(warmup), rise, decayed)

  return WarmupLinearDecay()


def adamw(model, learning_rate, global_clipnorm: Optional[float] = CLIP_NORM):
  """The train binary's AdamW (`AlbertAdamW`, below), built for `model`'s trainable variables, clipping the gradient
  at global norm `global_clipnorm` (the train binary's 1.0; None: no clipping)."""
  optimizer = albert_adamw_class()(learning_rate=learning_rate, global_clipnorm=global_clipnorm)
  optimizer.build(model.trainable_variables)
  return optimizer


def albert_adamw_class():
  """`AlbertAdamW`, a Keras optimizer defined on first use (Keras is imported after the backend is chosen).

  The reference's AdamWeightDecayOptimizer (reference §4.7), as official_albert.training.optimization.AdamW:
    m ← β1·m + (1−β1)·g;  v ← β2·v + (1−β2)·g²;  w ← w − lr·(m/(√v + ε) + λ·w)
  with no bias correction, λ = 0.01 except on variables whose path contains LayerNorm, layer_norm or bias, and the
  gradient clipped at the global norm first (Keras' `global_clipnorm`: tf.clip_by_global_norm's formula).
  """
  import keras  # noqa: PLC0415

  class AlbertAdamW(keras.optimizers.Optimizer):
    """The train binary's AdamW in Keras ops (any backend); see `albert_adamw_class`."""

    def __init__(self, learning_rate, weight_decay_rate: float = WEIGHT_DECAY_RATE,
                 exclude_from_weight_decay: Sequence[str] = EXCLUDE_FROM_WEIGHT_DECAY, **kwargs):
      super().__init__(learning_rate=learning_rate, name="AlbertAdamW", **kwargs)
      self.weight_decay_rate = float(weight_decay_rate)
      self.weight_decay_exclusions = tuple(exclude_from_weight_decay)  # (not Keras' method name)

    def exclude_from_weight_decay(self, var_list=None, var_names=None):
      """Keras' method, by path regex as the train binary's AdamW (before build; var_list refused)."""
      if var_list is not None or self.built:
        raise ValueError("AlbertAdamW.exclude_from_weight_decay: pass var_names=[regex, ...] before build (this "
                         "optimizer decides by regexes over variable paths, once, at build).")
      names = [var_names] if isinstance(var_names, str) else list(var_names or ())
      self.weight_decay_exclusions += tuple(str(n) for n in names)

    def build(self, var_list):
      if self.built:
        return
      super().build(var_list)
      self._adam_m, self._adam_v = self.add_optimizer_variables(var_list, ["adam_m", "adam_v"])
      # Decided once, by path, as the train binary does (update_step may see a backend variable without a path).
      self._decay_flags = tuple(bool(self.weight_decay_rate) and not any(
          re.search(p, v.path) for p in self.weight_decay_exclusions) for v in var_list)

    def decayed_paths(self) -> List[str]:
      """The paths of the variables that get weight decay."""
      return [v.path for v, decay in zip(self._trainable_variables, self._decay_flags) if decay]

    def update_step(self, gradient, variable, learning_rate):
      ops = keras.ops
      index = self._get_variable_index(variable)
      lr = ops.cast(learning_rate, variable.dtype)
      grad = ops.cast(gradient, variable.dtype)
      m, v = self._adam_m[index], self._adam_v[index]
      next_m = BETA_1 * m + (1.0 - BETA_1) * grad
      next_v = BETA_2 * v + (1.0 - BETA_2) * ops.square(grad)
      update = next_m / (ops.sqrt(next_v) + EPSILON)
      if self._decay_flags[index]:
        update = update + self.weight_decay_rate * ops.convert_to_tensor(variable)
      self.assign(m, next_m)
      self.assign(v, next_v)
      self.assign_sub(variable, lr * update)

  return AlbertAdamW


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
    optimizer: a built Keras optimizer (`adamw`); its `stateless_apply` makes the update (the clip included).
    donate: donate the three states' buffers to the step (the caller keeps no other reference to them): the backend
      check's timed rows, where the copies would be measured too.
  """
  import jax  # noqa: PLC0415
  import jax.numpy as jnp  # noqa: PLC0415

  def step(trainable, non_trainable, optimizer_vars, batch):
    (loss, new_non_trainable), grads = jax.value_and_grad(loss_fn, has_aux=True)(trainable, non_trainable, batch)
    new_trainable, new_optimizer_vars = optimizer.stateless_apply(optimizer_vars, grads, trainable)
    # The train binary's rule (official_albert.training.optimization): a step whose loss or gradient is not finite is
    # not applied — an inf anywhere would turn every clipped gradient, and so every weight, into NaN — and its loss
    # is reported as NaN, which `run` raises on.
    finite = jnp.logical_and(jnp.isfinite(loss), jnp.all(jnp.stack([jnp.all(jnp.isfinite(g)) for g in grads])))
    keep = lambda new, old: jax.tree_util.tree_map(lambda a, b: jnp.where(finite, a, b), new, old)  # noqa: E731
    return (keep(new_trainable, trainable), keep(new_non_trainable, non_trainable),
            keep(new_optimizer_vars, optimizer_vars), jnp.where(finite, loss, jnp.nan))

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


def _check_finite(losses: List[Any], checked: int) -> int:
  """Raises on the first non-finite loss in `losses[checked:]` (one host transfer); returns len(losses)."""
  import jax.numpy as jnp  # noqa: PLC0415
  import numpy as np  # noqa: PLC0415
  if len(losses) > checked:
    bad = np.flatnonzero(~np.isfinite(np.asarray(jnp.stack(losses[checked:]))))
    if bad.size:
      raise FloatingPointError(
          f"step {checked + int(bad[0]) + 1}: the loss or a gradient is not finite ({bad.size} such step(s) in "
          f"steps {checked + 1}-{len(losses)}), so the step was not applied. The model diverged: lower the learning "
          "rate, or look for an inf / NaN in that step's batch.")
  return len(losses)


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

  Raises:
    FloatingPointError: at the first evaluation after a step whose loss or gradient was not finite (`train_step` did
      not apply it), naming that step: the run stops as the train binary's does (NonFiniteLossError).
  """
  import jax.numpy as jnp  # noqa: PLC0415
  trainable, non_trainable = state(model)
  optimizer_vars = [v.value for v in optimizer.variables]
  history = [(0, evaluate((trainable, non_trainable)))]
  on_evaluation(0, None, history[0][1])
  losses: List[Any] = []
  started, first_step_s, eval_s, checked = time.time(), None, 0.0, 0
  for i in range(1, steps + 1):
    batch = {k: jnp.asarray(v) for k, v in next(batches).items()}
    trainable, non_trainable, optimizer_vars, loss = step(trainable, non_trainable, optimizer_vars, batch)
    losses.append(loss)  # kept on the device: no host sync per step
    if i == 1:
      loss.block_until_ready()
      first_step_s = time.time() - started
    if i % every == 0 or i == steps:
      loss.block_until_ready()  # the steps dispatched so far count as training time, not evaluation time
      checked = _check_finite(losses, checked)
      eval_start = time.time()
      history.append((i, evaluate((trainable, non_trainable))))
      eval_s += time.time() - eval_start
      on_evaluation(i, loss, history[-1][1])
  return LoopResult(trainable, non_trainable, optimizer_vars, losses, history, started, first_step_s,
                    time.time() - started, eval_s)
