"""TensorBoard summaries of a run: `<model_dir>/train` and `<model_dir>/eval`, written by the chief only.

One writer per folder, created on first use; the trainer's loop and the evaluator both write through `Summaries`.
Scalars are written as `tf.summary.scalar` writes them, without needing the `tensorboard` package.

A run killed after its last checkpoint (step C) but after summaries of steps C+1..K resumes from C and writes
C+1..K again. So that every reader sees each step once, with the values of the run that reached the end, the chief
drops the events past C from the folders' event files when the run starts (`Summaries.drop_after`, from
`Trainer.initialize_or_resume`, before the first new summary): each file that holds such events is rewritten with
the records it keeps, byte for byte (TFRecord framing, CRCs recomputed by `tf.io.TFRecordWriter`), into a temporary
file of the same folder whose name holds no "tfevents" (TensorBoard never reads it half-written), fsynced, then
`os.replace`d over the original (`tf.io.gfile.rename` on gs://). Rewriting rather than marking the restart with
a `SessionLog.START`: TF2's summary API cannot write an `Event.session_log` (it needs TF1's `FileWriter` or private
ops); only TensorBoard's Python `EventAccumulator` (purge_orphaned_data) honours it, the Rust data server's run
loader ignores session logs, and `summary_iterator` / `TFRecordDataset` readers (ours, a user's pandas export) see
every record. Left alone, the killed run's last step written again showed twice even in `EventAccumulator` (its
purge acts on a step going back, not on one written again; a kill/resume read with tensorboard 2.21). A file with
nothing past C is only read (bytes and mtime unchanged); a file that is not an event file is never opened; a damaged
event file (a bad CRC, a partial record) is logged and left as it is. A TensorBoard already watching the folder may
keep the points it had loaded until it is restarted.
"""

from __future__ import annotations

import logging
import os
from typing import Dict, List, Optional
import uuid

import tensorflow as tf
from tensorflow.core.framework import summary_pb2
from tensorflow.core.util import event_pb2

logger = logging.getLogger(__name__)

FOLDERS = ("train", "eval")  # every folder `Summaries` writes


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
    self._resumed_at: Optional[int] = None

  def write(self, name: str, scalars: Dict[str, float], step: int) -> None:
    """Writes `scalars` at `step` under `<model_dir>/<name>` ("train" / "eval") and flushes."""
    if not self.enabled:
      return
    if name not in self._writers:
      if self._resumed_at is not None and step <= self._resumed_at:
        # The restored step written again (its evaluation, lost with eval_results.json, made up): its old events go.
        drop_events_after(f"{self.model_dir}/{name}", step - 1)
      self._writers[name] = tf.summary.create_file_writer(f"{self.model_dir}/{name}")
    writer = self._writers[name]
    with writer.as_default(step=step):
      for key, value in scalars.items():
        write_scalar(key, value, step)
    writer.flush()

  def drop_after(self, step: int) -> List[str]:
    """Drops the events past `step` (the step the run resumes from) from the event files of every folder, so that
    the steps the run writes again appear once; returns the files rewritten. The chief only; before any write of
    this run (an open writer is closed first: its file must not be replaced under it)."""
    if not self.enabled:
      return []
    self.close()
    self._resumed_at = step
    return [path for name in FOLDERS for path in drop_events_after(f"{self.model_dir}/{name}", step)]

  def close(self) -> None:
    """Closes the open writers (a later `write` opens a new file)."""
    for writer in self._writers.values():
      writer.close()
    self._writers.clear()


def write_scalar(tag: str, value: float, step: int) -> None:
  """A TensorBoard scalar event (what `tf.summary.scalar` writes)."""
  metadata = summary_pb2.SummaryMetadata(
      plugin_data=summary_pb2.SummaryMetadata.PluginData(plugin_name="scalars"),
      data_class=summary_pb2.DATA_CLASS_SCALAR)
  tf.summary.write(tag, tf.constant(float(value), tf.float32), step=step, metadata=metadata)


def is_event_file(name: str) -> bool:
  """What TensorBoard reads as an event file (`io_wrapper.IsSummaryEventsFile`: "tfevents" in the name)."""
  return "tfevents" in os.path.basename(name)


def drop_events_after(folder: str, step: int) -> List[str]:
  """Rewrites each event file of `folder` that holds events past `step` without them; returns the files rewritten.

  A missing folder, a file with no event past `step` and a file that is not an event file are left untouched; a
  damaged event file is logged and left as it is.
  """
  if not tf.io.gfile.isdir(folder):
    return []
  rewritten = []
  for name in sorted(tf.io.gfile.listdir(folder)):
    path = f"{folder.rstrip('/')}/{name.rstrip('/')}"
    if not is_event_file(name) or tf.io.gfile.isdir(path):
      continue
    kept = _records_up_to(path, step)
    if kept is None:
      continue
    try:
      _replace_atomically(path, kept)
    except (OSError, tf.errors.OpError) as error:  # (a read-only folder...: the run goes on, with the overlap)
      logger.warning("Could not rewrite the event file %s without its events past step %d (%s); TensorBoard may "
                     "show those steps twice.", path, step, error)
      continue
    logger.info("Dropped the events past step %d from %s: the run resumes from step %d and writes them again.",
                step, path, step)
    rewritten.append(path)
  return rewritten


def _records_up_to(path: str, step: int) -> Optional[List[bytes]]:
  """The raw records of `path` whose event is at `step` or before (None: none is past it, or the file is damaged)."""
  kept, dropped = [], 0
  try:
    # In batches: one record per iterator step costs ~0.2 ms each (36 s of CPU for a 10 MB file, 160k scalars).
    for batch in tf.data.TFRecordDataset(path, buffer_size=1 << 20).batch(8192).as_numpy_iterator():
      for record in batch.tolist():
        if event_pb2.Event.FromString(record).step > step:
          dropped += 1
        else:
          kept.append(record)
  except Exception as error:  # pylint: disable=broad-except  (DataLossError, DecodeError: any damage)
    logger.warning("Left the event file %s as it is: it is damaged (%s: %s), so its events past step %d (if any) "
                   "were not dropped and TensorBoard may show those steps twice.", path, type(error).__name__,
                   str(error).splitlines()[0] if str(error) else "", step)
    return None
  return kept if dropped else None


def _replace_atomically(path: str, records: List[bytes]) -> None:
  """Writes `records` to a temporary file beside `path` (no "tfevents" in its name), syncs it, and replaces `path`."""
  folder = os.path.dirname(path)
  temporary = f"{folder}/.summaries-rewrite-{uuid.uuid4().hex}.tmp"
  try:
    with tf.io.TFRecordWriter(temporary) as writer:
      for record in records:
        writer.write(record)
    if "://" in path:
      tf.io.gfile.rename(temporary, path, overwrite=True)  # (an object store: the upload is whole or absent)
      return
    descriptor = os.open(temporary, os.O_RDONLY)
    try:
      os.fsync(descriptor)
    finally:
      os.close(descriptor)
    os.replace(temporary, path)
    directory = os.open(folder, os.O_RDONLY)
    try:
      os.fsync(directory)  # (the rename itself survives a crash)
    finally:
      os.close(directory)
  finally:
    if tf.io.gfile.exists(temporary):
      tf.io.gfile.remove(temporary)
