"""`Task.check_gradients`: a training step in which a trainable variable gets no gradient is refused, naming it.

A head or layer cut off from the loss would otherwise train silently without it (its weights stay at their init while
the run looks healthy); the base train step and the embedding task's GradCache step both call the one check.
"""

import keras
import numpy as np
import pytest
import tensorflow as tf

from official_albert.training.base_task import Task


class _TwoHeads(Task):
  """A stand-in task: its loss reads the outputs named in `used` (no config, no data pipeline)."""

  model_input_keys = ("x",)

  def __init__(self, used):  # pylint: disable=super-init-not-called
    self.used = used

  def build_losses(self, labels, model_outputs, denominators=None):
    return tf.add_n([tf.reduce_mean(tf.square(model_outputs[name])) for name in self.used])

  def process_metrics(self, metrics, labels, model_outputs):
    pass


def _model():
  x = keras.Input((4,), name="x")
  return keras.Model({"x": x}, {"kept": keras.layers.Dense(2, name="kept_head")(x),
                         "cut": keras.layers.Dense(2, name="cut_off_head")(x)})


def test_a_variable_without_gradient_is_refused_by_name():
  model = _model()
  batch = {"x": np.ones((3, 4), np.float32)}
  loss, grads = _TwoHeads(("kept", "cut")).compute_gradients(batch, model, None, [])
  assert len(grads) == 4 and all(g is not None for g in grads) and float(loss) > 0
  with pytest.raises(ValueError, match=r"_TwoHeads: no gradient for trainable variables \['cut_off_head/kernel', "
                                       r"'cut_off_head/bias'\]"):
    _TwoHeads(("kept",)).compute_gradients(batch, model, None, [])


def test_the_message_lists_five_and_says_there_are_more():
  task = _TwoHeads(())
  tvars = [keras.Variable(0.0, name=f"v{i}") for i in range(7)]
  with pytest.raises(ValueError, match=r"\['v0', 'v1', 'v2', 'v3', 'v4'\] \.\.\.\.$"):
    task.check_gradients(tvars, [None] * 7)
  task.check_gradients(tvars, [tf.constant(1.0)] * 7)  # all present: no error
