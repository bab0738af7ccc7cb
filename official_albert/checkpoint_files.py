"""Checkpoint file sets: listed, moved, copied and read through, never half-visible.

A checkpoint is several files (`prefix.data-*`, `prefix.index`); TensorFlow finds it through its index, so the data
files are renamed or copied first and the index last: a crash in between leaves data files without an index, which
TensorFlow ignores, never an index whose data is missing. Each file goes through `file_io`'s atomic writes; the folder
is listed, not globbed (a folder named `run[1]` is not a pattern).
"""

from __future__ import annotations

import itertools
import os
import re
from typing import List, Optional

from official_albert import file_io

_COUNTER = itertools.count()
# The names `temporary_checkpoint_prefix` gives: `.tmp-<pid>-<n>-<name>`.
_TEMPORARY_NAME = re.compile(r"^\.tmp-\d+-\d+-")


def _checkpoint_files(prefix: str) -> List[str]:
  """The files of checkpoint `prefix` (`.data-*` and `.index`), data files first and the index last.

  Found by listing the folder, not by globbing `prefix.*`: a glob reads `[`, `*`, `?` of the folder's own name as
  pattern characters (`run[1]/model.ckpt.*` matches nothing, so `save_pretrained` lost its own checkpoint).
  """
  directory, name = os.path.split(prefix)
  if not file_io.isdir(directory or "."):
    return []
  listed = os.listdir(directory or ".") if file_io.is_local(prefix) else file_io.gfile().listdir(directory)
  files = [os.path.join(directory, f.rstrip("/")) for f in listed if f.startswith((name + ".data-", name + ".index"))]
  return sorted(files, key=lambda p: (p.endswith(".index"), p))


def move_checkpoint(src_prefix: str, dst_prefix: str) -> None:
  """Renames checkpoint `src_prefix` to `dst_prefix`: an index already there removed first, then the data files,
  the index last.

  A crash in between leaves data files without an index, which TensorFlow ignores and readers refuse as no
  checkpoint, never an index whose data is missing or another checkpoint's (a save over an existing model left the
  old index over the new data, which no reader could open).
  """
  files = _checkpoint_files(src_prefix)
  if not files:
    raise FileNotFoundError(f"No checkpoint files for {src_prefix} (expected {src_prefix}.index and .data-*).")
  if file_io.exists(dst_prefix + ".index"):
    file_io.remove(dst_prefix + ".index")
  for path in files:
    file_io.rename(path, dst_prefix + path[len(src_prefix):])


def copy_checkpoint(src_prefix: str, dst_prefix: str) -> None:
  """Copies checkpoint `src_prefix` to `dst_prefix` (each file atomically, the index last)."""
  files = _checkpoint_files(src_prefix)
  if not files:
    raise FileNotFoundError(f"No checkpoint files for {src_prefix} (expected {src_prefix}.index and .data-*).")
  for path in files:
    file_io.atomic_copy(path, dst_prefix + path[len(src_prefix):])


_READ_CHECKED: dict = {}


def _checkpoint_signature(prefix: str):
  """The files of `prefix` with their sizes and modification times (gs:// too: its objects' `gfile.stat`), so that a
  checked checkpoint rewritten in place (`model.ckpt-best`) is checked again; None when a file went away meanwhile."""
  import tensorflow as tf  # noqa: PLC0415 (TF-free module)
  try:
    if file_io.is_local(prefix):
      return tuple((p, os.stat(p).st_size, os.stat(p).st_mtime_ns) for p in _checkpoint_files(prefix))
    return tuple((p, s.length, s.mtime_nsec) for p in _checkpoint_files(prefix) for s in [file_io.gfile().stat(p)])
  except (OSError, tf.errors.OpError):  # (a ckpt-N pruned between the listing and the stat)
    return None


def checkpoint_read_error(prefix: str) -> Optional[str]:
  """None when every tensor of checkpoint `prefix` can be read (TensorFlow checks each one's length and checksum),
  else the reason in one line, naming the files (a truncated data file raises a bare `IndexError: Read less bytes
  than requested` that names none). A readable checkpoint is read once per process while its files are unchanged, a
  failed one only when local: a remote one seen mid-copy (`update_best`) or on a network error is read again next
  time (it stayed "damaged" for the process's life, and `resolve_checkpoint` fell back to an older checkpoint)."""
  import tensorflow as tf  # noqa: PLC0415 (TF-free module)
  key = (prefix, _checkpoint_signature(prefix))
  if key not in _READ_CHECKED:
    try:
      reader = tf.train.load_checkpoint(prefix)
      for name in reader.get_variable_to_shape_map():
        reader.get_tensor(name)
      result = None
    except Exception as e:  # pylint: disable=broad-except  (truncated files raise IndexError, OpError, ...)
      message = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
      files = ", ".join(os.path.basename(p) for p in _checkpoint_files(prefix)) or f"{prefix}.index"
      result = f"{prefix} ({files}) cannot be read: {type(e).__name__}: {message}"
    if key[1] is not None and (result is None or file_io.is_local(prefix)):
      _READ_CHECKED[key] = result
    return result
  return _READ_CHECKED[key]


def temporary_checkpoint_prefix(prefix: str) -> str:
  """A prefix beside `prefix` to write a checkpoint to before `move_checkpoint` puts it in place."""
  directory, name = os.path.split(prefix)
  return os.path.join(directory, f".tmp-{os.getpid()}-{next(_COUNTER)}-{name}")


def is_temporary_checkpoint(prefix: str) -> bool:
  """Whether `prefix` is a `temporary_checkpoint_prefix`: a save or copy not yet moved into place, or the leftover of
  one whose process was killed (a best copy's `.tmp-<pid>-<n>-model.ckpt-best`), which is no checkpoint of the
  folder."""
  return _TEMPORARY_NAME.match(os.path.basename(prefix)) is not None


def checkpoint_indexes(pattern: str) -> List[str]:
  """The `.index` files `pattern` matches (`file_io.glob`), sorted, without those of temporaries
  (`is_temporary_checkpoint`).

  Why: TensorFlow's glob matches dot-files locally and on gs:// alike, so a directory's `*.index` listing also found a
  killed best copy's `.tmp-…-model.ckpt-best.index`: "several checkpoints" where there was one, or that copy read as
  the folder's checkpoint when its own could not be.
  """
  return [p for p in file_io.glob(pattern) if not is_temporary_checkpoint(p[:-len(".index")])]
