"""ALBERT's optimizers: LAMB and AdamW exactly as the reference, and `create_optimizer`.

Reference: `optimization.py` and `lamb_optimizer.py` of google-research/albert (reference §4.4-§4.7).

* `LAMB` and `AdamW` reproduce the reference update exactly: no bias correction, weight decay added to the update
  *inside* the trust ratio, trust ratio ‖w‖/‖u‖ with the 1.0 fallbacks, and exclusions matched by regex against the
  **full variable path** (`LayerNorm`, `layer_norm`, `bias` by default in `create_optimizer`). Keras' own
  `keras.optimizers.Lamb` differs on all of these points.
* The schedule (`lr_schedule.AlbertLearningRateSchedule`) and the gradient helpers (`gradients.py`: the reference
  clip, micro-batch accumulation) live beside this module.
* Gradient order per optimizer step (reference §4.5): gradients → (all-reduce across replicas) → global-norm clip at
  `global_clipnorm` (1.0 in `create_optimizer`) → update. Our optimizers all-reduce *before* clipping, so a
  multi-replica run clips the same global gradient a single-device run sees (see `LAMB._backend_apply_gradients`).
  Deliberate deviation: the reference on TPU clipped each shard's gradient and then *summed* the clipped shards
  (`CrossShardOptimizer.apply_gradients`), so its effective norm bound grew with the number of cores; Keras 3's TF
  backend also clips before its cross-replica sum. Ours gives the same result on 1 or N replicas.

What a trainer should call, per replica inside `strategy.run` (loss already divided by the *global* batch size):

    grads = tape.gradient(loss, model.trainable_variables)
    optimizer.apply(grads, model.trainable_variables)   # all-reduce, clip once, update, iterations += 1

With accumulation over k micro-batches of one replica batch (each micro-batch's loss divided by the whole batch's
counts):

    loss, grads = gradients.accumulate_micro_batch_gradients(grad_fn, batch, k)   # summed over the micro-batches
    optimizer.apply(grads, variables)                                              # once: clipped once, one step

The trainer all-reduces the gradients itself before `apply` (so that a `LossScaleOptimizer` decides "finite" on the
same, all-reduced gradients on every replica) and sets `aggregate_gradients = False` so the optimizer does not sum
them a second time.

`optimizer.iterations` is the reference `global_step`: it counts optimizer updates (not micro-steps) and is the step
the schedule is evaluated at. Build the optimizer inside `strategy.scope()` before the first step
(`optimizer.build(model.trainable_variables)`); lazy building inside a replicated step fails under MirroredStrategy.

A step whose global gradient norm is not finite is not applied (weights, slots and `iterations` unchanged; the norm
is still recorded in `global_norm`, on which the trainer stops): see `_AlbertAdamBase._backend_apply_gradients`.

Long because: LAMB and AdamW share one base whose pieces (path exclusions, all-reduce-then-clip, the non-finite
guard, the reference update) must agree with each other, and `create_optimizer` is its reference-shaped front door.
"""

from __future__ import annotations

import logging
import re
from typing import Iterable, List, Optional, Sequence, Tuple, Union

import keras
import tensorflow as tf

from official_albert import compat
from official_albert.training import gradients
from official_albert.training import lr_schedule

logger = logging.getLogger(__name__)

# The reference's `exclude_from_weight_decay` list in create_optimizer (reference §4.6).
DEFAULT_EXCLUDE_FROM_WEIGHT_DECAY = ("LayerNorm", "layer_norm", "bias")
OPTIMIZER_NAMES = ("lamb", "adamw")
_SERIALIZATION_PACKAGE = "official_albert"


# ----------------------------------------------------------------------------------------------------------------------
# Clipping helpers
# ----------------------------------------------------------------------------------------------------------------------


def trainable_variables_excluding(variables: Iterable, excluded_patterns: Optional[Sequence[str]]) -> list:
  """The reference's `excluded_tvars`, done with a filter (its loop removed items while iterating over the list).

  Args:
    variables: Candidate variables (e.g. `model.trainable_variables`).
    excluded_patterns: Regexes searched in each variable's full path; matching variables are dropped.

  Returns:
    The variables that match none of the patterns, in their original order.
  """
  if not excluded_patterns:
    return list(variables)
  compiled = [re.compile(p) for p in excluded_patterns]
  kept, dropped = [], []
  for v in variables:
    (dropped if any(c.search(variable_path(v)) for c in compiled) else kept).append(v)
  if dropped:
    logger.info("Excluded %d variables from training: %s", len(dropped), [variable_path(v) for v in dropped])
  return kept


def variable_path(variable) -> str:
  """The full path of a Keras variable (`encoder/transformer/LayerNorm/gamma`); `name` without `:0` otherwise."""
  path = getattr(variable, "path", None)
  if path:
    return str(path)
  name = str(getattr(variable, "name", ""))
  return name[:-2] if name.endswith(":0") else name


# ----------------------------------------------------------------------------------------------------------------------
# Optimizers
# ----------------------------------------------------------------------------------------------------------------------
def _patterns(value) -> List[str]:
  """A list of path regexes; a single string is one regex (`list("bias")` made b, i, a, s: nearly every path)."""
  return [value] if isinstance(value, str) else list(value)


class _AlbertAdamBase(keras.optimizers.Optimizer):
  """Shared machinery of LAMB and AdamW: path-based exclusions, reference moments, all-reduce-then-clip.

  Subclasses set `_use_layer_adaptation`.
  """

  _use_layer_adaptation = False

  def __init__(self,
               learning_rate=0.001,
               weight_decay_rate: float = 0.0,
               beta_1: float = 0.9,
               beta_2: float = 0.999,
               epsilon: float = 1e-6,
               exclude_from_weight_decay: Optional[Sequence[str]] = None,
               exclude_from_layer_adaptation: Optional[Sequence[str]] = None,
               name: Optional[str] = None,
               **kwargs):
    for unsupported, why in (
        ("weight_decay", "use weight_decay_rate (reference decay inside the update, with path exclusions)"),
        ("gradient_accumulation_steps", "set trainer.gradient_accumulation_steps (the trainer splits each batch into "
         "micro-batches, official_albert.training.gradients.accumulate_micro_batch_gradients)"),
    ):
      if kwargs.get(unsupported) is not None:
        raise ValueError(f"{type(self).__name__}: argument {unsupported}={kwargs[unsupported]!r} is not supported; "
                         f"{why}.")
      kwargs.pop(unsupported, None)
    if isinstance(learning_rate, int):
      learning_rate = float(learning_rate)
    super().__init__(learning_rate=learning_rate, name=name or type(self).__name__, **kwargs)
    self.weight_decay_rate = float(weight_decay_rate)
    self.beta_1 = float(beta_1)
    self.beta_2 = float(beta_2)
    self.epsilon = float(epsilon)
    # Not `self.exclude_from_weight_decay`: that is Keras' documented method (defined below), which an attribute of
    # the same name would shadow ("'list' object is not callable").
    self.weight_decay_exclusions = _patterns(exclude_from_weight_decay) if exclude_from_weight_decay else None
    self.exclude_from_layer_adaptation = (_patterns(exclude_from_layer_adaptation)
                                          if exclude_from_layer_adaptation is not None else None)
    # Sum the replicas' gradients in `apply` (True), or take them as already all-reduced (the trainer's setting).
    self.aggregate_gradients = True

  # -- exclusions (decided once per variable, in Python, at build time) ------------------------------------------------
  def _do_use_weight_decay(self, path: str) -> bool:
    if not self.weight_decay_rate:
      return False
    return not any(re.search(p, path) for p in (self.weight_decay_exclusions or ()))

  def _do_layer_adaptation(self, path: str) -> bool:
    # The reference falls back to the weight-decay list when no adaptation list is given.
    patterns = (self.exclude_from_layer_adaptation
                if self.exclude_from_layer_adaptation is not None else self.weight_decay_exclusions)
    return not any(re.search(p, path) for p in (patterns or ()))

  def build(self, var_list):
    if self.built:
      return
    super().build(var_list)
    # The pre-clip global norm of the last applied (all-reduced) gradient, for TensorBoard; the same on every replica.
    self._global_norm = self.add_variable(shape=(), dtype="float32", aggregation="only_first_replica",
                                          name="global_norm")
    # Slot names end in adam_m / adam_v (the reference's slot names), prefixed by the variable path.
    self._adam_m, self._adam_v = self.add_optimizer_variables(var_list, ["adam_m", "adam_v"])
    # update_step may receive the backend tf.Variable (no `.path`), so paths and decisions are recorded here, by index.
    paths = [variable_path(v) for v in var_list]
    self._variable_paths = tuple(paths)
    self._decay_flags = tuple(self._do_use_weight_decay(p) for p in paths)
    self._adapt_flags = tuple(self._use_layer_adaptation and self._do_layer_adaptation(p) for p in paths)

  def exclude_from_weight_decay(self, var_list=None, var_names=None) -> None:
    """Keras' method, by path regex: adds `var_names` to the `exclude_from_weight_decay` patterns (before `build`).

    Args:
      var_list: Refused: this optimizer decides by regexes over full variable paths, not by variable objects.
      var_names: Regexes searched in each variable's full path (e.g. ["LayerNorm", "bias"]; a string is one regex).
        LAMB also leaves these variables out of the trust ratio unless `exclude_from_layer_adaptation` was given (the
        reference's fallback, as for the constructor argument).

    Raises:
      ValueError: For `var_list`, or after `build` (the decisions are taken once, at build time).
    """
    if var_list is not None:
      raise ValueError(f"{self.name}.exclude_from_weight_decay: var_list is not supported; this optimizer matches "
                       "regexes against full variable paths: pass var_names=[regex, ...] (e.g. the variable's path), "
                       "or the constructor argument exclude_from_weight_decay.")
    if self.built:
      raise ValueError(f"{self.name}.exclude_from_weight_decay: the optimizer is already built, its weight-decay "
                       "decisions are fixed; pass the patterns as the constructor argument exclude_from_weight_decay "
                       "(or call this before build).")
    if var_names:
      names = [var_names] if isinstance(var_names, (str, bytes)) else var_names  # one regex, not its letters
      self.weight_decay_exclusions = list(self.weight_decay_exclusions or ()) + [str(n) for n in names]

  def variable_decisions(self) -> List[Tuple[str, bool, bool]]:
    """(path, weight decay?, layer adaptation?) per built variable: lets callers check the exclusions took effect."""
    if not self.built:
      raise ValueError(f"{self.name}: call build(variables) before variable_decisions().")
    return list(zip(self._variable_paths, self._decay_flags, self._adapt_flags))

  def slot_variables(self) -> dict:
    """{"<variable path>/adam_m": slot, "<variable path>/adam_v": slot}: the reference's slot names.

    Checkpoint keys of `tf.train.Checkpoint(optimizer=...)` are object-graph positions (`optimizer/_variables/N`);
    this mapping lets converters write or filter the TF1-style `<name>/adam_m` / `<name>/adam_v` names.
    """
    if not self.built:
      raise ValueError(f"{self.name}: call build(variables) before slot_variables().")
    slots = {}
    for path, m, v in zip(self._variable_paths, self._adam_m, self._adam_v):
      if m is not None:
        slots[f"{path}/adam_m"] = m
        slots[f"{path}/adam_v"] = v
    return slots

  # -- all-reduce, then clip, then update ------------------------------------------------------------------------------
  def _backend_apply_gradients(self, grads, trainable_variables):
    # Keras' TF backend clips each replica's *local* gradient and only then sums across replicas. ALBERT clips the
    # gradient of the whole batch, so we sum first (identity without a strategy) and clip the result once.
    grads = [gradients.densify(g) for g in grads]
    replica_context = tf.distribute.get_replica_context()
    if self.aggregate_gradients and replica_context is not None and replica_context.num_replicas_in_sync > 1:
      grads = replica_context.all_reduce(tf.distribute.ReduceOp.SUM, grads)
    if self.global_clipnorm and self.global_clipnorm > 0:
      grads, norm = gradients.clip_by_global_norm(grads, self.global_clipnorm)
    else:
      norm = tf.linalg.global_norm([g for g in grads if g is not None])
      grads = compat.keras_clip_gradients(self, grads)  # clipnorm / clipvalue, if the caller asked for them
    self.assign(self._global_norm, tf.cast(norm, tf.float32))  # recorded even when not finite: the trainer stops on it
    # A non-finite norm (an inf/NaN anywhere in the gradient, even with a finite loss) would make every clipped
    # gradient NaN and poison every weight and slot. Such a step is not applied (weights, slots, EMA unchanged) and
    # `iterations` is taken back by the 1 Keras' `apply` adds after us. The norm is that of the all-reduced gradient,
    # so every replica decides alike. A LossScaleOptimizer passes only finite gradients: its own skip is unchanged.
    finite = tf.math.is_finite(norm)
    self._iterations.assign_sub(tf.cast(tf.logical_not(finite), self._iterations.dtype))
    tf_vars = [v.value if isinstance(v, keras.Variable) else v for v in trainable_variables]
    args = (finite, list(zip(grads, tf_vars)), self.learning_rate)
    if replica_context is None:  # already in cross-replica context
      self._apply_if_finite(tf.distribute.get_strategy(), *args)
    elif tf.__internal__.distribute.strategy_supports_no_merge_call():
      # No strategy, or one whose replica functions may not merge_call (XLA on all-GPU Mirrored): the cond in replica
      # context, as Keras' LossScaleOptimizer does there.
      tf.cond(finite, lambda: self._update(*args[1:]), lambda: None)
    else:
      replica_context.merge_call(self._apply_if_finite, args=args)

  def _update(self, grads_and_vars, learning_rate) -> None:
    compat.distributed_update(self, grads_and_vars, learning_rate)
    if self.use_ema:
      compat.apply_ema(self)

  def _apply_if_finite(self, strategy, finite, grads_and_vars, learning_rate) -> None:
    """The update on every replica when `finite`, else nothing; runs in cross-replica context.

    As in Keras' LossScaleOptimizer: a `tf.cond` whose branch merge_calls (Keras' distributed update does) is only
    supported in cross-replica context under MirroredStrategy. A cond, not a select inside `update_step`, so that a
    finite step computes exactly what it did before (bit-identical, also under XLA).
    """
    finite = strategy.experimental_local_results(finite)[0]  # the same on every replica
    tf.cond(finite, lambda: strategy.extended.call_for_each_replica(self._update, args=(grads_and_vars,
                                                                                         learning_rate)),
            lambda: None)

  @property
  def global_norm(self) -> tf.Tensor:
    """Global norm of the last applied gradient before clipping (after the cross-replica sum)."""
    if not self.built:
      raise ValueError(f"{self.name}: the optimizer is not built yet.")
    return tf.convert_to_tensor(self._global_norm)

  def update_step(self, gradient, variable, learning_rate):
    index = compat.variable_index(self, variable)
    dtype = variable.dtype
    lr = tf.cast(learning_rate, dtype)
    grad = tf.cast(gradients.densify(gradient), dtype)
    m = self._adam_m[index]
    v = self._adam_v[index]
    # Written exactly as the reference: β·m + (1−β)·g, no bias correction.
    next_m = self.beta_1 * m + (1.0 - self.beta_1) * grad
    next_v = self.beta_2 * v + (1.0 - self.beta_2) * tf.square(grad)
    update = next_m / (tf.sqrt(next_v) + self.epsilon)
    param = tf.convert_to_tensor(variable)
    if self._decay_flags[index]:
      update += self.weight_decay_rate * param
    ratio = tf.constant(1.0, dtype)
    if self._adapt_flags[index]:
      w_norm = tf.norm(param, ord=2)
      u_norm = tf.norm(update, ord=2)
      ratio = tf.where(w_norm > 0, tf.where(u_norm > 0, w_norm / u_norm, 1.0), 1.0)
    self.assign(m, next_m)
    self.assign(v, next_v)
    self.assign_sub(variable, ratio * lr * update)

  def get_config(self):
    config = super().get_config()
    for key in ("weight_decay", "gradient_accumulation_steps"):
      config.pop(key, None)
    config.update({
        "weight_decay_rate": self.weight_decay_rate,
        "beta_1": self.beta_1,
        "beta_2": self.beta_2,
        "epsilon": self.epsilon,
        "exclude_from_weight_decay": self.weight_decay_exclusions,
        "exclude_from_layer_adaptation": self.exclude_from_layer_adaptation,
    })
    return config


@keras.saving.register_keras_serializable(package=_SERIALIZATION_PACKAGE)
class LAMB(_AlbertAdamBase):
  """ALBERT's LAMB (reference §4.6), not Keras' `Lamb`.

  For each variable w with gradient g (after the global-norm clip):
    m ← β1·m + (1−β1)·g;   v ← β2·v + (1−β2)·g²;   u ← m/(√v + ε)        (no bias correction)
    u ← u + λ·w                       if decay(path)
    r ← ‖w‖/‖u‖ if adapt(path), ‖w‖ > 0 and ‖u‖ > 0, else 1
    w ← w − r·lr·u

  `decay(path)` is False when `weight_decay_rate` is 0 or any `exclude_from_weight_decay` regex is found in the
  variable's full path; `adapt(path)` is False when any `exclude_from_layer_adaptation` regex is found (that list
  falls back to `exclude_from_weight_decay` when None, as in the reference).

  Args:
    learning_rate: Float or `LearningRateSchedule` (evaluated at `iterations`, i.e. the reference global_step).
    weight_decay_rate: λ (0.01 in `create_optimizer`).
    beta_1, beta_2, epsilon: Moment constants (reference 0.9, 0.999, 1e-6).
    exclude_from_weight_decay: Regexes over full variable paths.
    exclude_from_layer_adaptation: Regexes over full variable paths; None → `exclude_from_weight_decay`.
    name: Optimizer name.
    **kwargs: Keras optimizer kwargs (`global_clipnorm`, `clipnorm`, `clipvalue`, `use_ema`, `loss_scale_factor`).
      `weight_decay` and `gradient_accumulation_steps` are rejected (see the module docstring).
  """

  _use_layer_adaptation = True


@keras.saving.register_keras_serializable(package=_SERIALIZATION_PACKAGE)
class AdamW(_AlbertAdamBase):
  """ALBERT's/BERT's `AdamWeightDecayOptimizer` (reference §4.7): LAMB without the trust ratio.

    w ← w − lr·(m/(√v + ε) + λ·w)     (λ term only where decay(path); no bias correction)

  Takes the same arguments as `LAMB`; `exclude_from_layer_adaptation` is accepted for a uniform signature and has no
  effect.

  Without bias correction the first updates are ≈ 3.2·lr per element (m = 0.1·g, √v ≈ 0.03·|g|), so the reference
  fine-tuning learning rates (1e-5 … 5e-5, with warmup) are the right scale; rates ≥ 1e-3 that suit bias-corrected
  Adam make small models diverge or stall (measured: a warm-started tiny classifier stays at chance with 1e-3 and
  learns with 1e-4).
  """

  _use_layer_adaptation = False


# create_optimizer's schedule arguments unset: with a ready schedule, any other value would be silently dropped.
_SCHEDULE_DEFAULTS = {"num_train_steps": None, "num_warmup_steps": 0, "start_warmup_step": 0, "poly_power": 1.0,
                      "clamp_before_warmup": True}


def create_optimizer(name: str = "lamb",
                     learning_rate: Union[float, keras.optimizers.schedules.LearningRateSchedule] = 0.00176,
                     num_train_steps: Optional[int] = None,
                     num_warmup_steps: int = 0,
                     start_warmup_step: int = 0,
                     poly_power: float = 1.0,
                     weight_decay_rate: float = 0.01,
                     beta_1: float = 0.9,
                     beta_2: float = 0.999,
                     epsilon: float = 1e-6,
                     clip_norm: Optional[float] = 1.0,
                     exclude_from_weight_decay: Optional[Sequence[str]] = DEFAULT_EXCLUDE_FROM_WEIGHT_DECAY,
                     exclude_from_layer_adaptation: Optional[Sequence[str]] = None,
                     clamp_before_warmup: bool = True,
                     **kwargs) -> _AlbertAdamBase:
  """The reference `create_optimizer` (reference §4.4-§4.7), minus the training op.

  Args:
    name: "lamb" (pretraining default) or "adamw" (fine-tuning default); case-insensitive.
    learning_rate: Peak rate (float) or a ready `LearningRateSchedule`. A float with `num_train_steps` becomes an
      `AlbertLearningRateSchedule`; a float without it stays constant (and then the other schedule arguments must
      keep their defaults).
    num_train_steps, num_warmup_steps, start_warmup_step, poly_power, clamp_before_warmup: Schedule arguments.
    weight_decay_rate, beta_1, beta_2, epsilon: Reference constants.
    clip_norm: Global-norm clip applied to the (all-reduced) gradient before the update; None or 0 disables it.
    exclude_from_weight_decay: Regexes over full variable paths (reference: LayerNorm, layer_norm, bias).
    exclude_from_layer_adaptation: LAMB only; None falls back to `exclude_from_weight_decay`.
    **kwargs: Further Keras optimizer kwargs (e.g. `name` of the optimizer object via `optimizer_name`).

  Returns:
    A `LAMB` or `AdamW` instance (unbuilt: build it inside the strategy scope).

  Raises:
    ValueError: For an unknown optimizer name, a schedule passed together with `num_train_steps`,
      `num_warmup_steps` or another schedule argument other than its default (it would be ignored), or a float rate
      with a schedule argument other than its default but no `num_train_steps` (the rate would stay constant).
  """
  key = str(name).strip().lower()
  if key not in OPTIMIZER_NAMES:
    raise ValueError(f"Unknown optimizer name={name!r}; expected one of {list(OPTIMIZER_NAMES)}.")
  if isinstance(learning_rate, keras.optimizers.schedules.LearningRateSchedule) or callable(learning_rate):
    given = {"num_train_steps": num_train_steps, "num_warmup_steps": num_warmup_steps,
             "start_warmup_step": start_warmup_step, "poly_power": poly_power,
             "clamp_before_warmup": clamp_before_warmup}
    ignored = [f"{k}={v!r}" for k, v in given.items() if v != _SCHEDULE_DEFAULTS[k]]
    if ignored:  # the schedule already fixes the rate of every step: a warmup asked for here would be dropped
      raise ValueError(f"create_optimizer: learning_rate is a ready schedule ({type(learning_rate).__name__}), so "
                       f"{', '.join(ignored)} would be ignored. Pass a float learning_rate with them, or build the "
                       "warmup/decay into the schedule and leave them unset.")
    schedule = learning_rate
  elif not num_train_steps:
    given = {"num_warmup_steps": num_warmup_steps, "start_warmup_step": start_warmup_step, "poly_power": poly_power,
             "clamp_before_warmup": clamp_before_warmup}
    ignored = [f"{k}={v!r}" for k, v in given.items() if v != _SCHEDULE_DEFAULTS[k]]
    if ignored:  # without a step count there is no schedule: the warmup/decay asked for would be silently dropped
      raise ValueError(f"create_optimizer: {', '.join(ignored)} given without num_train_steps, so the learning rate "
                       f"would stay constant at {learning_rate!r} and they would be ignored. Pass num_train_steps "
                       "(the step the rate decays to 0 at), or leave them unset for a constant rate.")
    schedule = float(learning_rate)
  else:
    schedule = lr_schedule.AlbertLearningRateSchedule(
        float(learning_rate), num_train_steps, num_warmup_steps=num_warmup_steps, start_warmup_step=start_warmup_step,
        poly_power=poly_power, clamp_before_warmup=clamp_before_warmup)
  optimizer_name = kwargs.pop("optimizer_name", None)
  cls = LAMB if key == "lamb" else AdamW
  if optimizer_name:
    kwargs["name"] = optimizer_name
  return cls(learning_rate=schedule, weight_decay_rate=weight_decay_rate, beta_1=beta_1, beta_2=beta_2,
             epsilon=epsilon, exclude_from_weight_decay=exclude_from_weight_decay,
             exclude_from_layer_adaptation=exclude_from_layer_adaptation,
             global_clipnorm=(float(clip_norm) if clip_norm else None), **kwargs)
