"""TensorBoard summaries of a run: `<model_dir>/train` and `<model_dir>/eval`, written by the chief only.

One writer per folder, created on first use; the trainer's loop and the evaluator both write through `Summaries`.
Scalars are written as `tf.summary.scalar` writes them, without needing the `tensorboard` package.

A run killed after its last checkpoint (step C) but after summaries of steps C+1..K resumes from C and writes
C+1..K again. So that every reader sees each step once, with the values of the run that reached the end, the chief
drops the events past C from the folders' event files when the run starts (`Summaries.drop_after`, from
`Trainer.initialize_or_resume`, before the first new summary): each file that holds such events is rewritten with
the records it keeps, byte for byte (TFRecord framing, CRCs recomputed by `tf.io.TFRecordWriter`), through
`file_io.atomic_path(hide_name=True)`: a `.tmp-<pid>-...` file of the same folder, whose name holds no "tfevents"
(TensorBoard never reads it half-written), fsynced, then renamed over the original (`tf.io.gfile.rename` on gs://);
the next resume removes one a killed rewrite left. Rewriting rather than marking the restart with
a `SessionLog.START`: TF2's summary API cannot write an `Event.session_log` (it needs TF1's `FileWriter` or private
ops); only TensorBoard's Python `EventAccumulator` (purge_orphaned_data) honours it, the Rust data server's run
loader ignores session logs, and `summary_iterator` / `TFRecordDataset` readers (ours, a user's pandas export) see
every record. Left alone, the killed run's last step written again showed twice even in `EventAccumulator` (its
purge acts on a step going back, not on one written again; a kill/resume read with tensorboard 2.21). A file with
nothing past C is only read (bytes and mtime unchanged); a file that is not an event file is never opened. A file
whose last record is cut short (a kill in the middle of a write) ends at its last complete record: that partial
tail goes with the events past C (`_records_up_to`); a damaged event file (a bad CRC anywhere, an undecodable event)
is logged and left as it is. An evaluation job beside the trainer (`--mode=eval`, docs/distributed_training.md)
appends to its own file in `eval/`, which holds events past C only when it evaluated a checkpoint the trainer no
longer resumes from (one given by --checkpoint, or a model_dir restarted from an older one); such a file is left
alone while its writer (named by the file: host and pid) lives on this host, since a rewrite would send that
writer's next events to a deleted file; another host's writer cannot be checked from here (on gs:// its next flush
uploads its whole file again, so nothing is lost, but the dropped events come back). A TensorBoard already watching
the folder may keep the points it had loaded until it is restarted.
"""

from __future__ import annotations

import logging
import os
import re
import socket
import struct
import time
from typing import Dict, List, Optional

import tensorflow as tf
from tensorflow.core.framework import summary_pb2
from tensorflow.core.util import event_pb2

from official_albert import file_io

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

  A missing folder, a file with no event past `step`, a file that is not an event file and one a live process of
  this host appends to are left untouched; a damaged event file is logged and left as it is. First the temporaries
  of a rewrite killed midway are removed (`_remove_killed_rewrites`).
  """
  if not tf.io.gfile.isdir(folder):
    return []
  folder = folder.rstrip("/")
  _remove_killed_rewrites(folder)
  rewritten = []
  for name in sorted(tf.io.gfile.listdir(folder)):
    path = f"{folder}/{name.rstrip('/')}"
    if not is_event_file(name) or tf.io.gfile.isdir(path):
      continue
    kept = _records_up_to(path, step)
    if kept is None:
      continue
    writer = _live_writer(name)
    if writer:
      logger.warning("Left the event file %s as it is: process %d of this host still appends to it (an evaluation "
                     "job beside this run?), and a rewrite would send its next events to a deleted file; its events "
                     "past step %d stay, so TensorBoard may show those steps twice.", path, writer, step)
      continue
    try:
      with file_io.atomic_path(path, hide_name=True) as temporary:  # (no "tfevents" in the temporary's name)
        with tf.io.TFRecordWriter(temporary) as out:
          for record in kept:
            out.write(record)
    except (OSError, tf.errors.OpError) as error:  # (a read-only folder...: the run goes on, with the overlap)
      logger.warning("Could not rewrite the event file %s without its events past step %d (%s); TensorBoard may "
                     "show those steps twice.", path, step, error)
      continue
    logger.info("Dropped the events past step %d from %s: the run writes those steps again.", step, path)
    rewritten.append(path)
  return rewritten


# The temporary name of this module's earlier rewrite (no pid in it) and how long one stays untouched before it is
# taken for a killed rewrite's (a rewrite takes seconds).
_OLD_TEMPORARY = re.compile(r"^\.summaries-rewrite-[0-9a-f]{32}\.tmp$")
_OLD_TEMPORARY_IDLE_S = 600
# `tf.summary.create_file_writer`'s names: events.out.tfevents.<time>.<host>.<pid>.<n>.v2 (C++ EventsWriter).
_WRITER_NAME = re.compile(r"tfevents\.\d+\.(?P<host>.+)\.(?P<pid>\d+)\.\d+\.v2$")


def _remove_killed_rewrites(folder: str) -> None:
  """Removes the temporaries a rewrite killed midway left in `folder`: atomic_path's `.tmp-<pid>-...` whose process
  is gone (`file_io.remove_dead_temporaries`; a remote one names no process this host can check: kept), and the
  earlier `.summaries-rewrite-<uuid>.tmp` once untouched for `_OLD_TEMPORARY_IDLE_S`. A failure is logged only."""
  try:
    file_io.remove_dead_temporaries(f"{folder}/events", hidden=True)  # (the folder's `.tmp-<pid>-...`, any target's)
    for name in tf.io.gfile.listdir(folder):
      path = f"{folder}/{name}"
      if _OLD_TEMPORARY.match(name) and time.time() - tf.io.gfile.stat(path).mtime_nsec / 1e9 > _OLD_TEMPORARY_IDLE_S:
        tf.io.gfile.remove(path)
        logger.info("Removed %s, the temporary of a killed summaries rewrite.", path)
  except (OSError, tf.errors.OpError) as error:  # (a read-only folder...: harmless leftovers, no "tfevents" in them)
    logger.warning("Could not remove the leftovers of a killed summaries rewrite from %s: %s", folder, error)


def _live_writer(name: str) -> Optional[int]:
  """The pid of the live process of this host that writes the event file `name` (its name says which), else None.

  This process's own files count as dead (its writers are closed before a rewrite; a killed run's in a container was
  pid 1 too). Another host's processes cannot be checked from here.
  """
  match = _WRITER_NAME.search(name)
  if not match or match.group("host") != socket.gethostname():
    return None
  pid = int(match.group("pid"))
  return pid if file_io.process_alive(pid) else None


def _records_up_to(path: str, step: int) -> Optional[List[bytes]]:
  """The raw records of `path` whose event is at `step` or before (None: none is past it, or the file is damaged).

  A truncated last record (the file ends inside it: a kill in the middle of a write) ends the file: the complete
  records before it count, the partial one is dropped with the events past `step`. TensorFlow's readers see it the
  same way: `TFRecordDataset` / `summary_iterator` raise DataLossError "truncated record at <offset>" after the last
  complete record (a file ending inside a record's 12-byte header reads as a plain end), and TensorBoard's loaders
  stop there and wait for the rest. A bad CRC ("corrupted record at"), wherever it is, is damage.
  """
  records = []
  try:
    try:
      # In batches: one record per iterator step costs ~0.2 ms each (36 s of CPU for a 10 MB file, 160k scalars).
      for batch in tf.data.TFRecordDataset(path, buffer_size=1 << 20).batch(8192).as_numpy_iterator():
        records += batch.tolist()
    except tf.errors.DataLossError as error:
      truncated = _TRUNCATED.search(str(error))
      if not truncated:
        raise
      # The batch it ended was lost: the complete records, their CRCs checked, are the bytes before the offset.
      with tf.io.gfile.GFile(path, "rb") as f:
        records = _split_records(f.read(int(truncated.group(1))))
    steps = [event_pb2.Event.FromString(record).step for record in records]
  except Exception as error:  # pylint: disable=broad-except  (DataLossError, DecodeError: any damage)
    logger.warning("Left the event file %s as it is: it is damaged (%s: %s), so its events past step %d (if any) "
                   "were not dropped and TensorBoard may show those steps twice.", path, type(error).__name__,
                   str(error).splitlines()[0] if str(error) else "", step)
    return None
  kept = [record for record, at in zip(records, steps) if at <= step]
  return kept if len(kept) < len(records) else None


_TRUNCATED = re.compile(r"truncated record at (\d+)")


def _split_records(data: bytes) -> List[bytes]:
  """The records of TFRecord bytes whose CRCs TensorFlow has checked: (8-byte length, 4-byte CRC, data, 4-byte CRC)."""
  records, offset = [], 0
  while offset < len(data):
    (length,) = struct.unpack_from("<Q", data, offset)
    records.append(data[offset + 12:offset + 12 + length])
    offset += 16 + length
  return records
