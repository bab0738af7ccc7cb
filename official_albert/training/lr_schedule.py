"""ALBERT's learning-rate schedule (reference §4.4): linear warmup, then polynomial decay measured from step 0."""

from __future__ import annotations

import keras
import tensorflow as tf

_SERIALIZATION_PACKAGE = "official_albert"



@keras.saving.register_keras_serializable(package=_SERIALIZATION_PACKAGE)
class AlbertLearningRateSchedule(keras.optimizers.schedules.LearningRateSchedule):
  """The reference learning rate (reference §4.4): linear warmup, then polynomial decay from step 0.

    decayed(step) = (init − end)·(1 − min(step, T)/T)^poly_power + end,   T = num_train_steps
    s = step − start_warmup_step
    lr(step) = init·s/W  if W > 0 and s < W,  else decayed(step)

  Reproduced on purpose: lr(0) = 0 (the first update moves nothing but the moments), the jump at step W from
  init·(W−1)/W to decayed(W), and decay measured from step 0 rather than from the end of warmup.

  Deliberate fix (flag `clamp_before_warmup`, default True): for step < start_warmup_step the reference formula
  gives s < 0 and a *negative* learning rate; we clamp s at 0 (lr = 0). `clamp_before_warmup=False` restores the
  reference's negative values.

  Args:
    initial_learning_rate: Peak learning rate (`--learning_rate`, 0.00176 for pretraining).
    num_train_steps: T, the step at which the decayed rate reaches `end_learning_rate`.
    num_warmup_steps: W; 0 disables warmup.
    start_warmup_step: Offset of the warmup ramp.
    poly_power: Exponent of the polynomial decay.
    end_learning_rate: Rate at and after step T (the reference uses 0).
    clamp_before_warmup: Clamp s = step − start_warmup_step at 0 (see above).
    name: Name scope of the ops.
  """

  def __init__(self,
               initial_learning_rate: float,
               num_train_steps: int,
               num_warmup_steps: int = 0,
               start_warmup_step: int = 0,
               poly_power: float = 1.0,
               end_learning_rate: float = 0.0,
               clamp_before_warmup: bool = True,
               name: str = "albert_lr"):
    super().__init__()
    if num_train_steps is None or int(num_train_steps) <= 0:
      raise ValueError(f"num_train_steps must be a positive integer, got num_train_steps={num_train_steps!r}.")
    if int(num_warmup_steps) < 0:
      raise ValueError(f"num_warmup_steps must be >= 0, got num_warmup_steps={num_warmup_steps!r}.")
    self.initial_learning_rate = float(initial_learning_rate)
    self.num_train_steps = int(num_train_steps)
    self.num_warmup_steps = int(num_warmup_steps)
    self.start_warmup_step = int(start_warmup_step)
    self.poly_power = float(poly_power)
    self.end_learning_rate = float(end_learning_rate)
    self.clamp_before_warmup = bool(clamp_before_warmup)
    self.name = name

  def __call__(self, step):
    with tf.name_scope(self.name):
      # The reference computes in float32 from an int global_step; so do we.
      step = tf.cast(step, tf.float32)
      init = tf.constant(self.initial_learning_rate, tf.float32)
      end = tf.constant(self.end_learning_rate, tf.float32)
      total = tf.constant(float(self.num_train_steps), tf.float32)
      frac = 1.0 - tf.minimum(step, total) / total
      decayed = (init - end) * tf.pow(frac, self.poly_power) + end
      if self.num_warmup_steps <= 0:
        return decayed
      s = step - float(self.start_warmup_step)
      if self.clamp_before_warmup:
        s = tf.maximum(s, 0.0)
      warmup = init * s / float(self.num_warmup_steps)
      return tf.where(s < float(self.num_warmup_steps), warmup, decayed)

  def get_config(self):
    return {
        "initial_learning_rate": self.initial_learning_rate,
        "num_train_steps": self.num_train_steps,
        "num_warmup_steps": self.num_warmup_steps,
        "start_warmup_step": self.start_warmup_step,
        "poly_power": self.poly_power,
        "end_learning_rate": self.end_learning_rate,
        "clamp_before_warmup": self.clamp_before_warmup,
        "name": self.name,
    }
