"""Fine-tuning TFRecords: one `tf.train.Example` per record, written atomically, cached on what changes them.

A record is a dict of arrays; float arrays become `float_list` features, everything else `int64_list` (flattened:
RACE's [4, L] inputs are stored row-major as [4·L]). The cache fixes reference bug §8 #25 (stale records reused): a
record file is reused only when the `cache_key` stored in its `.meta.json` equals the new one, and the key holds the
input files' sizes and SHA-256s, the tokenizer model's SHA-256 and every setting that changes the records.
The meta also records the record file it was written with (`RECORD_FILE_KEY`: its size and a SHA-256 of its first
and last MiB): two builds with other settings into one folder could leave one's meta beside the other's records (the
meta is written after the records' rename), which then passed as matching. Not its modification time: a rename on a
FUSE object-store mount (gcsfuse) or a copied cache gets a new one, and the cache would never be reused there.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from official_albert import file_io

logger = logging.getLogger(__name__)
# A record-cache temporary younger than this may be a live build on another host (see `build_or_reuse`).
TEMPORARY_IDLE_SECONDS = 600
# Part of every record cache's key: changed when a reader turns the same files into other records, so caches built
# by the earlier readers are rebuilt, not reused ("2026-11-30": labels compared in NFC, a JSONL null pair read as an
# empty one, ranking / embedding negatives compared as the tokenizer sees them; "2026-12-01": those negatives compared
# under the run's SentencePiece model's own normalisation rule; "2026-12-05": a ranking row's repeated negatives
# dropped, a JSONL string written as a list read as that list; multiple-choice answers numbered from 1 refused).
READERS_VERSION = "2026-12-05"
RECORD_FILE_KEY = "record_file"  # of .meta.json: the record file the meta was written with (`record_file_stamp`)


def _versioned(cache_key: Mapping[str, Any]) -> Dict[str, Any]:
  return {**cache_key, "readers": READERS_VERSION}


def serialize_example(record: Mapping[str, Any]) -> bytes:
  """One record (name → array) as a serialized `tf.train.Example`."""
  import tensorflow as tf  # noqa: PLC0415 (binary: TF after launch)
  features = {}
  for key, value in record.items():
    flat = np.asarray(value).reshape(-1)
    if flat.dtype.kind == "f":
      features[key] = tf.train.Feature(float_list=tf.train.FloatList(value=[float(v) for v in flat]))
    else:
      features[key] = tf.train.Feature(int64_list=tf.train.Int64List(value=[int(v) for v in flat]))
  return tf.train.Example(features=tf.train.Features(feature=features)).SerializeToString()


def write_tfrecord(path: str, records: Iterable[Mapping[str, Any]]) -> int:
  """Writes `records` to `path` through a temporary name; returns how many were written."""
  return _write_stamped(path, records)[0]


def _write_stamped(path: str, records: Iterable[Mapping[str, Any]]) -> Tuple[int, Dict[str, int]]:
  """`write_tfrecord`, also returning the written file's `record_file_stamp`, taken before the rename puts it at
  `path` (taken after it, another build's file renamed there meanwhile would be stamped as ours)."""
  import tensorflow as tf  # noqa: PLC0415 (binary: TF after launch)
  count = 0
  with file_io.atomic_path(path) as tmp:
    with tf.io.TFRecordWriter(tmp) as writer:
      for record in records:
        writer.write(serialize_example(record))
        count += 1
    stamp = record_file_stamp(tmp)
  return count, stamp


def record_file_stamp(path: str) -> Dict[str, Any]:
  """What identifies a written record file, wherever it is copied or renamed: its size and the SHA-256 of its first
  and last MiB (the whole file's would read a large SQuAD cache on every reuse)."""
  with file_io.open_file(path, "rb") as f:
    head = f.read(_STAMP_BYTES)
    f.seek(0, 2)
    size = f.tell()
    f.seek(max(size - _STAMP_BYTES, len(head)))
    tail = f.read(_STAMP_BYTES)
  return {"size": int(size), "ends_sha256": hashlib.sha256(head + b"|" + tail).hexdigest()}


_STAMP_BYTES = 1 << 20


def file_sha256(path: str) -> str:
  digest = hashlib.sha256()
  with file_io.open_file(path, "rb") as f:
    for block in iter(lambda: f.read(1 << 20), b""):
      digest.update(block)
  return digest.hexdigest()


def input_fingerprint(paths: Sequence[str]) -> List[Dict[str, object]]:
  """Path, size and SHA-256 of every input file, in the order given: a changed input, or the same files in another
  order (records are numbered in file order, and predictions are matched to rows by that number), rebuilds the
  records. The content's hash, not the modification time: an edit that keeps the size and restores the time
  (`cp -p`, `rsync -t`, `touch -r`, a tar extraction) reused the old records, and the predictions paired the old
  logits with the new rows; and a copied or re-downloaded file with the same bytes keeps its cache."""
  return [{"path": path, "size": _size_and_mtime(path)[0], "sha256": file_sha256(path)} for path in paths]


def _size_and_mtime(path: str) -> Tuple[int, int]:
  """(size, modification time in ns): a local file's time to the nanosecond (TF's stat rounds to whole seconds)."""
  if file_io.is_local(path):
    stat = os.stat(path)
    return int(stat.st_size), int(stat.st_mtime_ns)
  stat = file_io.gfile().stat(path)
  return int(stat.length), int(stat.mtime_nsec)


def unchanged_input(entry: Mapping[str, Any]) -> bool:
  """Whether the file an `input_fingerprint` entry describes is still the same. An entry written before the key held
  the content's hash (path, size, `mtime_nsec`) is compared as it was written, so records made then keep their
  source (their GLUE predict ids) until the file changes."""
  path = str(entry.get("path", ""))
  if "sha256" in entry or "mtime_nsec" not in entry:
    return input_fingerprint([path])[0] == dict(entry)
  size, mtime = _size_and_mtime(path)
  return {"path": path, "size": size, "mtime_nsec": mtime} == dict(entry)


def cached_meta(meta_path: str, record_path: str, cache_key: Mapping[str, Any]) -> Optional[Dict[str, Any]]:
  """The `.meta.json` of `record_path` when both files exist, its cache key equals `cache_key` (with
  READERS_VERSION) and the record file is the one it was written with (`RECORD_FILE_KEY`), else None.

  A meta without that record (written before it was kept) is trusted as before: a read-only or shared cache of an
  older version stays usable.
  """
  if not (file_io.exists(meta_path) and file_io.exists(record_path)):
    return None
  try:
    with file_io.open_file(meta_path, "r") as f:
      meta = json.load(f)
  except json.JSONDecodeError:
    return None
  if meta.get("cache_key") != _versioned(cache_key):
    return None
  written = meta.get(RECORD_FILE_KEY)
  now = record_file_stamp(record_path) if written is not None else None
  if written is not None and (not isinstance(written, dict) or written != now):
    logger.info("%s: %s was written with another record file (%s; now %s): not reused.", record_path, meta_path,
                written, now)
    return None
  return meta


def build_or_reuse(record_path: str, meta_path: str, cache_key: Mapping[str, Any],
                   build: Callable[[], Tuple[Iterable[Mapping[str, Any]], Dict[str, Any]]],
                   overwrite: bool = False) -> Dict[str, Any]:
  """Reuses `record_path` when its cache key matches, else writes `build()`'s records and their meta.

  Args:
    record_path, meta_path: the TFRecord file and its `.meta.json`.
    cache_key: everything that changes the records.
    build: () -> (records, meta fields); called only when the cache cannot be used.
    overwrite: rebuild even when the cache key matches.

  Returns:
    The meta dict (with `num_records`, `cache_key`, `record_path` and `reused_cache`).

  First the partial files of a killed build (`<record_path>.tmp-<pid>-...`, its process gone; each can be a whole
  split's size) are removed (`file_io.remove_dead_temporaries`): nothing else would. Only those idle for
  TEMPORARY_IDLE_SECONDS: every worker of a multi-worker run builds the cache, maybe on a filesystem shared across
  hosts, where another host's live build has a pid this host does not know.
  """
  for path in (record_path, meta_path):
    file_io.remove_dead_temporaries(path, idle_seconds=TEMPORARY_IDLE_SECONDS)
  meta = None if overwrite else cached_meta(meta_path, record_path, cache_key)
  if meta is not None:
    logger.info("Reusing %s (cache key matches).", record_path)
    return dict(meta, reused_cache=True)
  records, meta = build()
  meta = dict(meta, record_path=record_path)
  # The old meta goes first: a run killed after the new records replace the old ones but before the new meta is
  # written must leave no meta (a rebuild next time), not the old key beside the new records (reused as valid).
  if file_io.exists(meta_path):
    file_io.remove(meta_path)
  meta["num_records"], meta[RECORD_FILE_KEY] = _write_stamped(record_path, records)
  meta["cache_key"] = _versioned(cache_key)
  file_io.atomic_write_json(meta_path, meta, sort_keys=False)
  logger.info("Wrote %d records to %s.", meta["num_records"], record_path)
  return dict(meta, reused_cache=False)
