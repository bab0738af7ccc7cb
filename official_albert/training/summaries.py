"""TensorBoard summaries of a run: `<model_dir>/train` and `<model_dir>/eval`, written by the chief only.

One writer per folder, created on first use; the trainer's loop and the evaluator both write through `Summaries`.
Scalars are written as `tf.summary.scalar` writes them, without needing the `tensorboard` package.

A run resumed after a kill writes the steps between its checkpoint and the kill again (a second event file). No
`SessionLog.START` marks the restart: TF2's summary API writes `Summary` values only (`tf.summary.write`,
`experimental.write_raw_pb`); an `Event.session_log` needs TF1's `tf.compat.v1.summary.FileWriter` (a second writer
and file) or private ops, so TensorBoard may show the overlap as a second segment of the curve.
"""

from __future__ import annotations

from typing import Dict

import tensorflow as tf
from tensorflow.core.framework import summary_pb2


class Summaries:
  """The run's summary writers.

  Args:
    model_dir: the run's directory.
    enabled: False on the non-chief workers of a multi-worker job (they write nothing).
  """

  def __init__(self, model_dir: str, enabled: bool):
    self.model_dir = model_dir
    self.enabled = enabled
    self._writers: Dict[str, tf.summary.SummaryWriter] = {}

  def write(self, name: str, scalars: Dict[str, float], step: int) -> None:
    """Writes `scalars` at `step` under `<model_dir>/<name>` ("train" / "eval") and flushes."""
    if not self.enabled:
      return
    if name not in self._writers:
      self._writers[name] = tf.summary.create_file_writer(f"{self.model_dir}/{name}")
    writer = self._writers[name]
    with writer.as_default(step=step):
      for key, value in scalars.items():
        write_scalar(key, value, step)
    writer.flush()


def write_scalar(tag: str, value: float, step: int) -> None:
  """A TensorBoard scalar event (what `tf.summary.scalar` writes)."""
  metadata = summary_pb2.SummaryMetadata(
      plugin_data=summary_pb2.SummaryMetadata.PluginData(plugin_name="scalars"),
      data_class=summary_pb2.DATA_CLASS_SCALAR)
  tf.summary.write(tag, tf.constant(float(value), tf.float32), step=step, metadata=metadata)
