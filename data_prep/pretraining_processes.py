"""Process hygiene of the pretraining-data tool: workers that die with their parent, spill folders that do not outlive
their run.

`create_pretraining_data` runs its shards in worker processes and copies the corpus into a spill folder beside the
output. Killed with SIGKILL, the tool can neither stop its workers nor remove the folder; so each worker watches a
lifeline pipe and exits when the tool is gone (`die_with_parent`), and each run removes the spill folders whose owner
process is dead before it starts (`spill_directory`, `remove_stale_spill_dirs`).
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
from typing import Iterator, List, Optional

logger = logging.getLogger(__name__)

ORPHANED_WORKER_EXIT_CODE = 75  # a worker that outlived its parent exits with this code (EX_TEMPFAIL)
_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def die_with_parent(lifeline) -> None:
  """Makes this process exit as soon as the process holding the write end of `lifeline` is gone.

  Why a pipe and not only `prctl(PR_SET_PDEATHSIG)`: the workers are forked by multiprocessing's forkserver (never by
  the TensorFlow-loaded parent, see `create_pretraining_data._mp_context`), so their parent process is the
  forkserver — and the forkserver stays alive as long as any worker does. A parent death signal therefore never
  fires when the *tool* is killed; the kernel closing the tool's write end of the lifeline pipe (on exit, crash or
  SIGKILL alike) is what every worker can see. A daemon thread blocks on the read end and calls `os._exit` on EOF:
  no cleanup handlers run (the rerun removes the worker's `<shard>.tmp-*` file). The parent death signal (SIGKILL)
  is still set on Linux, as a kernel-level backstop for a worker whose direct parent dies (the forkserver, or the
  tool itself under the spawn start method) while its Python thread cannot run.
  """
  _set_parent_death_signal(signal.SIGKILL)

  def watch() -> None:
    try:
      while True:
        lifeline.recv_bytes()  # the parent never writes; this returns only by EOF (raised) or error
    except (EOFError, OSError):
      pass
    os._exit(ORPHANED_WORKER_EXIT_CODE)  # pylint: disable=protected-access

  threading.Thread(target=watch, name="albert-parent-watchdog", daemon=True).start()


def _set_parent_death_signal(signum: int) -> bool:
  """`prctl(PR_SET_PDEATHSIG, signum)` on Linux; False elsewhere or when the call fails (the pipe still works)."""
  if not sys.platform.startswith("linux"):
    return False
  try:
    libc = ctypes.CDLL(None, use_errno=True)
    return libc.prctl(_PR_SET_PDEATHSIG, int(signum), 0, 0, 0) == 0
  except (OSError, AttributeError):
    return False


# ------------------------------------------------------------------------------------------------- spill folders
SPILL_PREFIX = ".partition-"  # `<output dir>/.partition-<pid>-<random>/`: the spill files of a running partition
_STAGING_PREFIX = ".new-partition-"  # the same folder before it is locked and renamed
SPILL_LOCK_NAME = "owner.lock"
# A `.partition-*` folder without a lock file was made by a version of this tool that had none (or is being removed
# by another run); it is removed once it is this old.
UNLOCKED_SPILL_MAX_AGE_SECONDS = 3600

try:
  import fcntl  # pylint: disable=g-import-not-at-top
except ImportError:  # not POSIX: no lock, so killed runs' folders are never removed automatically
  fcntl = None


def _try_lock(fd: int) -> Optional[bool]:
  """Takes an exclusive flock on `fd` without waiting: True = taken, False = held by a live process, None = the file
  system or platform has no locks."""
  if fcntl is None:
    return None
  try:
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    return True
  except BlockingIOError:
    return False
  except OSError:
    return None


@contextlib.contextmanager
def spill_directory(parent: Optional[str]) -> Iterator[str]:
  """A private folder in `parent` (None: the system temp dir) for the partition's spill files; removed at the end.

  The folder holds a copy of the whole corpus, and a run killed with SIGKILL cannot remove it. So the folder
  carries proof of life: `owner.lock`, flocked by the run for as long as it lives (the kernel drops the lock when the
  process dies, however it dies; worker processes do not inherit it). The folder appears under its
  `.partition-<pid>-<random>` name only once locked (it is created under a staging name, locked, then renamed), and
  each run first removes the `.partition-*` folders of `parent` whose lock it can take, i.e. whose owner is dead
  (`remove_stale_spill_dirs`). A folder of a run that is still alive, also one writing the same output, is kept.
  """
  parent = parent or tempfile.gettempdir()
  staging = tempfile.mkdtemp(prefix=f"{_STAGING_PREFIX}{os.getpid()}-", dir=parent)
  path = staging
  lock_fd = None
  try:
    lock_fd = os.open(os.path.join(staging, SPILL_LOCK_NAME), os.O_RDWR | os.O_CREAT, 0o600)
    if not _try_lock(lock_fd):
      logger.warning("Cannot lock %s (no file locks here): if this run is killed, remove its spill folder by hand.",
                     staging)
    path = os.path.join(parent, SPILL_PREFIX + os.path.basename(staging)[len(_STAGING_PREFIX):])
    os.rename(staging, path)
    remove_stale_spill_dirs(parent, keep=path)
    yield path
  finally:
    shutil.rmtree(path, ignore_errors=True)
    if lock_fd is not None:
      os.close(lock_fd)


def remove_stale_spill_dirs(parent: str, keep: Optional[str] = None) -> List[str]:
  """Removes the spill folders in `parent` left by killed runs (see `spill_directory`); returns their paths.

  Only folders of this user whose `owner.lock` nobody holds are removed (and lock-less ones older than
  `UNLOCKED_SPILL_MAX_AGE_SECONDS`); a live run's folder, `keep`, and anything else are left alone.
  """
  removed: List[str] = []
  try:
    names = sorted(os.listdir(parent))
  except OSError:
    return removed
  for name in names:
    if not name.startswith((SPILL_PREFIX, _STAGING_PREFIX)):
      continue
    path = os.path.join(parent, name)
    try:
      st = os.lstat(path)
    except OSError:
      continue
    if path == keep or not os.path.isdir(path) or os.path.islink(path):
      continue
    if hasattr(os, "getuid") and st.st_uid != os.getuid():
      continue  # another user's run (a shared temp dir)
    try:
      fd = os.open(os.path.join(path, SPILL_LOCK_NAME), os.O_RDWR)
    except FileNotFoundError:
      if time.time() - st.st_mtime > UNLOCKED_SPILL_MAX_AGE_SECONDS:
        shutil.rmtree(path, ignore_errors=True)
        removed.append(path)
      continue
    except OSError:
      continue
    try:
      if _try_lock(fd):  # the owner is dead; holding its lock, no other run removes or uses the folder meanwhile
        shutil.rmtree(path, ignore_errors=True)
        removed.append(path)
    finally:
      os.close(fd)
  if removed:
    logger.warning("Removed %d spill folder(s) left by killed runs: %s", len(removed), ", ".join(removed))
  return removed
