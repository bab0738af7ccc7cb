"""The train binary with a line appended to the file `$STEP_MARKER` after every training step (tests only), or
held for good once its checkpoint of step `$HOLD_AFTER_SAVE` (and that step's input position) has been saved.

A test that must act while a training loop runs (SIGTERM in the middle of a 1000-step loop) waits for this file
instead of sleeping: once it has a line, a step has completed, however slow or loaded the machine is. The line is
written by a `tf.print` inside the compiled loop, after the step's optimizer update. A test that must kill a run
after a given checkpoint (and before the run could finish) holds it there instead of racing it.
"""

import os
import time

import tensorflow as tf

from official_albert import cli
from official_albert import train
from official_albert.training import trainer

STEP_MARKER_ENV = "STEP_MARKER"
HOLD_AFTER_SAVE_ENV = "HOLD_AFTER_SAVE"


def mark_steps(path: str) -> None:
  """Makes every Trainer's replica step append "step" to `path` after its update."""
  original = trainer.Trainer._replica_train_step  # pylint: disable=protected-access

  def marked(self, inputs, grad_fn):
    loss = original(self, inputs, grad_fn)
    with tf.control_dependencies([loss]):
      written = tf.print("step", output_stream=f"file://{path}")
    with tf.control_dependencies([written]):
      return tf.identity(loss)

  trainer.Trainer._replica_train_step = marked  # pylint: disable=protected-access


def hold_after_save(step: int) -> None:
  """Makes every Trainer wait for good (until killed) once its checkpoint of `step` or later is saved, the worker's
  input position included (`Trainer.save_checkpoint` saves it second)."""
  original = trainer.Trainer.save_checkpoint

  def save_then_hold(self):
    path = original(self)
    while self.step >= step:
      time.sleep(0.5)
    return path

  trainer.Trainer.save_checkpoint = save_then_hold


if __name__ == "__main__":
  if os.environ.get(STEP_MARKER_ENV):
    mark_steps(os.environ[STEP_MARKER_ENV])
  if os.environ.get(HOLD_AFTER_SAVE_ENV):
    hold_after_save(int(os.environ[HOLD_AFTER_SAVE_ENV]))
  cli.launch(train.define_flags, train.main)
