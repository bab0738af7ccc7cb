"""File I/O for the whole project: atomic writes and gfile access, in one place.

Every file the project writes goes through a temporary name beside its destination and one rename, so a crash or a
kill never leaves a truncated file under the final name (a rerun sees either the old file or the new one); locally
the data and the rename are fsynced, so a power loss or a preempted VM does not leave one either (`atomic_path`).
Checkpoints are several files (`prefix.data-*`, `prefix.index`): `official_albert.checkpoint_files` moves and copies
them on top of these writes.

Local paths use the `os` module and never import TensorFlow (data-prep workers and the Python tokenizer run without
it); other schemes (`gs://`, `s3://`, ...) go through `tf.io.gfile`, imported on first use. Object stores cannot
rename atomically; there a rename is a copy then a delete, which still never exposes a partial file under the final
name (a folder replaced whole: `official_albert.directory_io`). What a killed process left under a temporary name is
removed by the next run writing the same target (`remove_dead_temporaries`: the data tools, the exports, the
fine-tuning record cache).

Long because: every path rule the project has (local vs remote, literal names with glob characters, `~`, temporaries
and their leftovers) lives here once, so that no caller writes its own.
"""

from __future__ import annotations

import contextlib
import gzip
import itertools
import json
import logging
import os
import re
import shutil
import tempfile
import threading
import time
from typing import Any, BinaryIO, Iterator, List, Optional, Tuple
import uuid
import zlib

logger = logging.getLogger(__name__)
_COUNTER = itertools.count()
# This process's temporaries being written now (`location_key`s), which `remove_dead_temporaries` keeps: a pid alone
# tells them from no killed run's (every run in a container is pid 1; the threads of one process share its pid).
_IN_USE: set = set()
_IN_USE_LOCK = threading.Lock()


def gfile():
  """`tf.io.gfile`, imported on first use (only non-local paths and callers that already use TensorFlow need it)."""
  import tensorflow as tf  # noqa: PLC0415 (TF-free module)
  return tf.io.gfile


def is_local(path: str) -> bool:
  """True for plain file system paths; False for `scheme://` paths (gs://, s3://, hdfs://, ...)."""
  return "://" not in str(path)


def open_file(path: str, mode: str = "r"):
  """`open(path, mode)` for local paths (UTF-8 in text mode), `tf.io.gfile.GFile` otherwise."""
  if is_local(path):
    return open(path, mode, encoding=None if "b" in mode else "utf-8")
  return gfile().GFile(path, mode)


def read_json(path: str, what: str = "", fix: str = "", error: type = ValueError) -> Any:
  """The parsed JSON file at `path` (UTF-8, a byte-order mark allowed); a syntax or encoding error raises `error`
  naming the file and the place.

  json's own message has only the line and column, so every reader of a user's or a model directory's JSON file
  comes here. `what` names the file's role ("the {what} is not valid JSON"); `fix` is appended as the next step. A
  name ending in `.gz` is gzip-decompressed (`open_bytes`: `train-v2.0.json.gz`).
  """
  fix = f" {fix}" if fix else ""
  try:
    with open_bytes(path) as f:
      # utf-8-sig: a leading byte-order mark (Windows editors, some exports) is dropped, as JSON allows a parser to.
      return json.loads(f.read().decode("utf-8-sig"))
  except GZIP_ERRORS as e:
    raise error(gzip_error(path, e) + fix) from None
  except json.JSONDecodeError as e:
    subject = f"the {what} is not" if what else "not"
    raise error(f"{path}: {subject} valid JSON: {e.msg} at line {e.lineno}, column {e.colno}.{fix}") from None
  except UnicodeDecodeError as e:
    raise error(f"{path}: not UTF-8 text (byte {e.start}: {e.reason}).{fix}") from None


def read_json_object(path: str, what: str = "", fix: str = "") -> dict:
  """`read_json` of a file that holds one JSON object (a model's config.json): anything else (`null`, a number, a
  list) raises a ValueError naming the file, where the caller's `"key" in data` raised a bare TypeError naming none."""
  data = read_json(path, what, fix)
  if not isinstance(data, dict):
    role = f" (the {what})" if what else ""
    raise ValueError(f"{path}: expected a JSON object ({{\"key\": value, ...}}){role}, got {type(data).__name__}."
                     f"{' ' + fix if fix else ''}")
  return data


def location_key(path: str) -> str:
  """What spellings of one file or folder have in common (`pre`, `./pre/`, `/abs/pre`, `~/pre`, a symlink): the
  resolved absolute path of a local one; a `scheme://` path as written (no cheap way to resolve those)."""
  path = os.path.expanduser(path).rstrip("/")
  return os.path.realpath(path) if path and is_local(path) else path


def same_location(a: str, b: str) -> bool:
  """Whether `a` and `b` name one file or folder (`location_key`)."""
  return location_key(a) == location_key(b)


def is_within(path: str, folder: str) -> bool:
  """Whether `path` is `folder` or lies inside it, however either is spelled (`location_key`)."""
  inner, outer = location_key(path), location_key(folder)
  sep = "/" if "://" in outer else os.sep
  return inner == outer or inner.startswith(outer.rstrip(sep) + sep)


def expand_home(value: str, what: str) -> str:
  """`value` with a leading `~` / `~user` expanded in each comma-separated part (`os.path.expanduser`); a part that
  does not start with `~` (gs://..., a relative path) is kept as it is.

  bash expands `~` only at the start of a word, so in `--params_override=task.init_checkpoint=~/models/pre` it stays,
  and the run looked for a folder literally named `~`.

  Raises:
    ValueError: a `~user` naming no user of this machine (named with `what`, the setting that holds `value`).
  """
  # A part's leading spaces ("a.tfrecord, ~/b.tfrecord", as people type a list) are kept, and its `~` expanded.
  parts = [part[:len(part) - len(part.lstrip())] + os.path.expanduser(part.lstrip()) if part.lstrip().startswith("~")
           else part for part in value.split(",")]
  unknown = [part.lstrip().split("/", 1)[0] for part in parts if part.lstrip().startswith("~")]
  if unknown:
    raise ValueError(f"{what}={value}: no user {unknown[0][1:]!r} on this machine to expand {unknown[0]!r} for "
                     "(the run would look for a folder literally named '~...'); write the full path.")
  return ",".join(parts)


def exists(path: str) -> bool:
  return os.path.exists(path) if is_local(path) else gfile().exists(path)


# What reading a `.gz` file that is not gzip (BadGzipFile), or is cut short (EOFError) or corrupt (zlib.error), raises.
GZIP_ERRORS = (gzip.BadGzipFile, EOFError, zlib.error)


@contextlib.contextmanager
def open_bytes(path: str) -> Iterator[BinaryIO]:
  """`path` open for reading bytes; a name ending in `.gz` is gzip-decompressed as it is read (constant memory), so
  every reader of users' text (the corpus tools, the row tasks, retrieval folders) takes compressed files alike.
  Reading raises one of `GZIP_ERRORS` where the data is not gzip (`gzip_error` words it)."""
  with open_file(path, "rb") as f:
    if not path.lower().endswith(".gz"):
      yield f
      return
    with gzip.GzipFile(fileobj=f, mode="rb") as stream:
      yield stream


def gzip_error(path: str, error: BaseException, line: Optional[int] = None) -> str:
  """The message of a `GZIP_ERRORS` error raised reading `path` (after its `line`-th line, when read by lines)."""
  after = "" if line is None else f" after line {line}"
  return (f"{path}: not a readable gzip file{after} ({type(error).__name__}: {error}); a name ending in .gz is read "
          "as gzip-compressed: recompress the file (gzip -k), or rename it without .gz if it is plain text.")


def literal_path(path: str) -> bool:
  """Whether `path` names an existing file or directory as written, so it is no glob whatever it holds
  (`data [v1]/train.tsv`: as a glob, `[v1]` is a character class and matches nothing).

  The one place for "an existing path is literal": a remote file system may raise for a pattern that is no valid
  object name (`tf.errors.OpError`); that is "not an existing path" here, and the caller then globs it.
  """
  if is_local(path):
    return os.path.exists(path)
  import tensorflow as tf  # noqa: PLC0415 (TF-free module)
  try:
    return bool(gfile().exists(path))
  except tf.errors.OpError:  # a pattern that is no valid path for its file system
    return False


def makedirs(path: str) -> None:
  if not path:
    return
  if is_local(path):
    os.makedirs(path, exist_ok=True)
  else:
    gfile().makedirs(path)


def isdir(path: str) -> bool:
  return os.path.isdir(path) if is_local(path) else gfile().isdir(path)


def glob(pattern: str) -> List[str]:
  """Matching paths, sorted (TensorFlow's glob semantics, also for local paths)."""
  return sorted(gfile().glob(pattern))


def glob_visible(pattern: str) -> Tuple[List[str], List[str]]:
  """(matching paths, the hidden ones left out), sorted: `glob` less the names starting with "." unless the
  pattern's own last part does, as a shell's `*` reads them (TensorFlow's glob matched `.hidden.txt`, macOS's `._a.txt`
  resource forks and a killed run's `.partition-*` folder)."""
  matched = glob(pattern)
  if os.path.basename(pattern.rstrip("/")).startswith("."):
    return matched, []
  hidden = [os.path.basename(p.rstrip("/")).startswith(".") for p in matched]
  return [p for p, h in zip(matched, hidden) if not h], [p for p, h in zip(matched, hidden) if h]


# TensorFlow finds a checkpoint by globbing its prefix (TensorSliceReader, `*?[\` are pattern characters), so a
# checkpoint under a path holding one is written but never found again (`v[1]/ckpt-2` matches nothing; `*` / `?`
# may match another folder). `]` goes with `[`.
CHECKPOINT_GLOB_CHARS = "[]*?\\"


def check_checkpoint_path(path: str, flag: str) -> None:
  """Refuses a folder TensorFlow could not read checkpoints back from (local or gs://), before anything is written.

  Raises:
    ValueError: naming `flag`, the glob characters `path` holds and the fix (a folder name without them).
  """
  found = [c for c in CHECKPOINT_GLOB_CHARS if c in str(path)]
  if found:
    renamed = str(path).translate({ord(c): None for c in found})
    raise ValueError(f"{flag}={path!r} contains the glob character(s) {' '.join(found)}: TensorFlow reads checkpoint "
                     "paths (a SavedModel's variables too) as glob patterns, so a checkpoint written there could "
                     "never be read back (resume, --mode=eval / predict, export, convert_checkpoint). Fix: rename the "
                     f"folder without them (e.g. {renamed!r}).")


def latest_checkpoint(directory: str) -> Optional[str]:
  """`tf.train.latest_checkpoint`: the newest prefix named by TF's checkpoint state file in `directory`, else None."""
  import tensorflow as tf  # noqa: PLC0415 (TF-free module)
  return tf.train.latest_checkpoint(directory)


def remove(path: str) -> None:
  if is_local(path):
    os.remove(path)
  else:
    gfile().remove(path)


def rename(src: str, dst: str) -> None:
  """Moves `src` over `dst` (replacing it)."""
  if is_local(src) and is_local(dst):
    os.replace(src, dst)
  else:
    gfile().rename(src, dst, overwrite=True)


def _default_permissions(path: str) -> None:
  # mkstemp creates files with mode 0600; give the file what a plain open() would have (the umask applied).
  umask = os.umask(0)
  os.umask(umask)
  os.chmod(path, 0o666 & ~umask)


def _fsync(path: str, folder: bool = False) -> None:
  """Flushes a file's data (a failure raises) or a folder's entries, a rename (best effort: Windows cannot open a
  folder, some fuse mounts cannot sync one)."""
  try:
    descriptor = os.open(path, os.O_RDONLY)
    try:
      os.fsync(descriptor)
    finally:
      os.close(descriptor)
  except OSError:
    if not folder:
      raise


@contextlib.contextmanager
def atomic_path(path: str, durable: bool = True, hide_name: bool = False) -> Iterator[str]:
  """Yields a temporary path beside `path`; renamed over `path` when the block succeeds, removed when it raises.

  The temporary name is `<path>.tmp-<pid>-<n>-<random>`, so a tool can find and remove the leftovers of a killed run
  (`remove_dead_temporaries(path)`).

  Args:
    path: the destination.
    durable: (local paths) fsync the temporary before the rename and the folder after it: without it a power loss
      or a preempted VM could keep the rename but not the data (an empty params.yaml). An object store's upload is
      whole or absent anyway.
    hide_name: name the temporary `<folder>/.tmp-<pid>-<n>-<random>`, without the target's name, for a folder whose
      reader picks files by a substring of the name (TensorBoard reads any "*tfevents*", a half-written one too);
      `remove_dead_temporaries(path, hidden=True)` removes a killed run's.

  Example:
    with file_io.atomic_path(record_path) as tmp:
      with tf.io.TFRecordWriter(tmp) as writer:
        ...
  """
  directory = os.path.dirname(path) or "."
  makedirs(directory)
  stem = f"{'' if hide_name else os.path.basename(path)}.tmp-{os.getpid()}-{next(_COUNTER)}"
  if is_local(path):
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=stem + "-")
    os.close(fd)
    _default_permissions(tmp)
  else:
    # Random like mkstemp's: every worker of a multi-worker run writes the same target (the record cache), with the
    # same counter and, in containers, often the same pid (1), so `<pid>-<n>` alone named one object for all of them.
    tmp = f"{directory}/{stem}-{uuid.uuid4().hex[:8]}"
  mark_in_use(tmp, True)
  try:
    yield tmp
    if durable and is_local(path):
      _fsync(tmp)
    rename(tmp, path)
    if durable and is_local(path):
      _fsync(directory, folder=True)
  except BaseException:
    if exists(tmp):
      remove(tmp)
    raise
  finally:
    mark_in_use(tmp, False)


def atomic_write_bytes(path: str, data: bytes) -> None:
  """Writes `data` to `path` through a temporary name and a rename (local paths and gs://)."""
  with atomic_path(path) as tmp:
    with open_file(tmp, "wb") as f:
      f.write(data)


def atomic_write_text(path: str, text: str) -> None:
  """Writes `text` (UTF-8) to `path` through a temporary name and a rename (local paths and gs://)."""
  atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_json(path: str, data: Any, indent: int = 2, sort_keys: bool = True) -> None:
  """`data` as JSON (with a final newline), written atomically."""
  atomic_write_text(path, json.dumps(data, indent=indent, sort_keys=sort_keys) + "\n")


def atomic_copy(src: str, dst: str) -> None:
  """Copies the file `src` to `dst` through a temporary name beside `dst`."""
  with atomic_path(dst) as tmp:
    if is_local(src) and is_local(tmp):
      shutil.copyfile(src, tmp)
    else:
      gfile().copy(src, tmp, overwrite=True)


# ------------------------------------------------------------------------------------- leftovers of killed runs
# The temporaries this project writes, exactly: `atomic_path`'s `.tmp-<pid>-<n>-<random>` (earlier remote ones had no
# `-<random>`) and the exports' `.tmp-<pid>-<n>-<random>-export` (earlier ones `.tmp-<pid>-export`). A user's own
# `model.tmp-20241130` backup matches none and is never touched.
_TEMPORARY_PID = re.compile(r"\.tmp-(\d+)-(?:\d+(?:-[A-Za-z0-9_]+)?(?:-export)?|export)$")
_PID_MAX = 4194304  # Linux's upper bound (PID_MAX_LIMIT): a larger number is no process's


def mark_in_use(tmp: str, in_use: bool) -> None:
  """Marks a temporary as written by this process now (or no longer), so `remove_dead_temporaries` keeps it."""
  with _IN_USE_LOCK:
    (_IN_USE.add if in_use else _IN_USE.discard)(location_key(tmp))


def _in_use(tmp: str) -> bool:
  with _IN_USE_LOCK:
    return location_key(tmp) in _IN_USE


def export_temporary(export_dir: str) -> str:
  """A new temporary folder (`<export_dir>.tmp-<pid>-<n>-<random>-export`) for an export to write before
  `directory_io.replace_directory` moves it to `export_dir`: one per call, so two exports to one folder (threads of a
  notebook, or containers all running as pid 1) never share one, and in use until moved: a concurrent export keeps
  it."""
  tmp = f"{str(export_dir).rstrip('/')}.tmp-{os.getpid()}-{next(_COUNTER)}-{uuid.uuid4().hex[:8]}-export"
  mark_in_use(tmp, True)
  return tmp


def process_alive(pid: int) -> bool:
  """Whether process `pid` runs on this machine (a zombie, dead but not reaped — a killed run's worker in a
  container whose init does not reap — does not; nor does this process's own pid: in a container it names a killed
  run's leftovers too, every run being pid 1; `remove_dead_temporaries` keeps our own writes in progress apart)."""
  if pid == os.getpid():
    return False
  try:
    with open(f"/proc/{pid}/stat", encoding="utf-8") as f:
      return f.read().rsplit(")", 1)[1].split()[0] != "Z"
  except FileNotFoundError:
    return False
  except (OSError, IndexError):  # (no /proc: ask the kernel)
    pass
  try:
    os.kill(pid, 0)
  except ProcessLookupError:
    return False
  except PermissionError:  # (alive, another user's)
    return True
  return True


def remove_dead_temporaries(path: str, owned: bool = False, idle_seconds: float = 0.0,
                            hidden: bool = False) -> List[str]:
  """Removes the `<path>.tmp-<pid>-...` files or folders (`atomic_path`'s and the exports' temporaries, by their exact
  names) that a killed process left, logging each; returns them. Found by listing `path`'s folder, not by a glob
  (`[` `*` `?` in a name). `hidden`: the folder's `.tmp-<pid>-<n>-<random>` (`atomic_path(hide_name=True)`) instead.

  One this process is writing now (another thread's `atomic_path` or export of the same target) is kept; so is a
  local one whose process is alive (`process_alive`): it belongs to a run writing the same target now
  (removing it failed that run at its rename, after all its work). One whose process this machine cannot check (a
  `scheme://` path, or no pid in the name) is removed only with `owned=True` (the data tools: one run owns an
  --output_file); else kept. With `idle_seconds`, one modified more recently is kept too: on a filesystem shared by
  several hosts (every worker of a multi-worker run builds the same record cache) a pid says nothing about another
  host's process, but a file being written keeps changing.
  """
  path = str(path).rstrip("/")
  directory, stem = os.path.split(path)
  directory = directory or "."
  path, stem = (f"{directory}/", "") if hidden else (path, stem)
  if not isdir(directory):
    return []
  lister = os.listdir if is_local(path) else gfile().listdir
  removed = []
  for name in sorted(n.rstrip("/") for n in lister(directory)):
    if not name.startswith(f"{stem}.tmp-") or (hidden and not _TEMPORARY_PID.match(name)):  # (not a checkpoint's)
      continue
    tmp, pid = f"{path}{name[len(stem):]}", _TEMPORARY_PID.match(name[len(stem):])
    if pid and int(pid.group(1)) > _PID_MAX:
      pid = None
    if _in_use(tmp):
      logger.info("%s is being written by this process (another write of the same target, now): kept.", tmp)
      continue
    if is_local(tmp) and pid and process_alive(int(pid.group(1))):
      logger.warning("%s is being written by a live process (pid %s): another run writes the same output; kept. "
                     "Give each run its own output.", tmp, pid.group(1))
      continue
    if not (is_local(tmp) and pid) and not owned:
      continue
    if idle_seconds and is_local(tmp) and time.time() - os.path.getmtime(tmp) < idle_seconds:
      logger.info("%s may be another host's run writing it now (modified in the last %d s): kept.", tmp, idle_seconds)
      continue
    if not isdir(tmp):
      remove(tmp)
    elif is_local(tmp):
      shutil.rmtree(tmp)
    else:
      gfile().rmtree(tmp)
    logger.info("Removed %s, the temporary of a killed run%s.", tmp, f" (pid {pid.group(1)})" if pid else "")
    removed.append(tmp)
  return removed


def local_file_version(path: str) -> Optional[Tuple[int, int, int]]:
  """(inode, size, mtime in ns) of a local file, None for none, a missing one or a remote one (a stat there is a
  request): a cache key part that tells a file rewritten at the same path from the one read before."""
  if not path or not is_local(path):
    return None
  try:
    stat = os.stat(path)
  except OSError:
    return None
  return stat.st_ino, stat.st_size, stat.st_mtime_ns
