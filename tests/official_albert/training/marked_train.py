"""The train binary with a line appended to the file `$STEP_MARKER` after every training step (tests only).

A test that must act while a training loop runs (SIGTERM in the middle of a 1000-step loop) waits for this file
instead of sleeping: once it has a line, a step has completed, however slow or loaded the machine is. The line is
written by a `tf.print` inside the compiled loop, after the step's optimizer update.
"""

import os

import tensorflow as tf

from official_albert import cli
from official_albert import train
from official_albert.training import trainer

STEP_MARKER_ENV = "STEP_MARKER"


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


if __name__ == "__main__":
  mark_steps(os.environ[STEP_MARKER_ENV])
  cli.launch(train.define_flags, train.main)
