"""One writer per model_dir: the training run's owner lock, and a short lock around the best-checkpoint update.

Two trainers in one `model_dir` (a relaunched job whose old copy still runs) both save `ckpt-N`, each rewrites TF's
`checkpoint` state file and prunes by its own list, and a later resume mixes them. So the chief of a training run
holds an exclusive `fcntl.flock` on `<model_dir>/.run.lock` (`hold_owner_lock`) until its training ends
(`release_owner_lock`) or its process dies: the kernel drops a dead process's flock, so a killed run leaves no stale
lock. The file holds the owner's pid, host and start time, which a refused second trainer names. Within one process
the lock is the process's (a notebook re-running a cell, a test resuming with a new Trainer): flock guards against
other processes. Eval-only jobs beside a live trainer (docs/distributed_training.md) take no owner lock; they and the
trainer serialize their best-checkpoint updates through `<model_dir>/.best.lock` (`exclusive`), which waits.

A multi-worker job claims the folder together (`claim_for_workers`): the chief alone takes the lock, and a vote every
worker joins tells all of them whether it was refused, so that every worker raises the same `ModelDirBusyError` at
once; a chief that raised alone left the others waiting in their next collective (then failing with an unrelated
collective error, or waiting on while the chief's process lived on). The Trainer (`ModelDirOwner`) claims it this way
at each start of training and gives it back when `train()` ends and at `close()` / the end of a `with` block, so a
Python session that trained in a folder does not keep another process (the train binary) out of it until it exits.

Limitations: remote folders (gs://, any `scheme://`) have no flock: there the lock is skipped (logged once per
folder); a file system without locks (some fuse mounts) is skipped with a warning. A child process created by
`fork` shares the lock until it exits.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import logging
import os
import socket
import threading
from typing import Callable, Dict, Iterator, Optional

from official_albert import file_io

try:
  import fcntl  # pylint: disable=g-import-not-at-top
except ImportError:  # not POSIX: no locks
  fcntl = None

logger = logging.getLogger(__name__)

OWNER_LOCK_FILE = ".run.lock"
BEST_LOCK_FILE = ".best.lock"

_GUARD = threading.Lock()
_HELD: Dict[str, int] = {}  # lock file (real path) -> the open fd that holds its flock in this process
_SKIPPED: set = set()  # folders whose lock was skipped (logged once each)


class ModelDirBusyError(RuntimeError):
  """Another live process owns the model_dir (its training run holds `OWNER_LOCK_FILE`)."""


def _holder(fd: int) -> str:
  """The holder written into a lock file, in words ("pid 12 on host-a since ..."); "unknown" when unwritten."""
  try:
    os.lseek(fd, 0, os.SEEK_SET)
    info = json.loads(os.read(fd, 4096).decode("utf-8") or "{}")
  except (OSError, ValueError):
    info = {}
  if not info.get("pid"):
    return "an unknown process (it has not written its pid yet)"
  return f"pid {info['pid']} on host {info.get('host', '?')} (since {info.get('started', '?')})"


def _write_holder(fd: int, purpose: str) -> None:
  started = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
  data = json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "started": started, "purpose": purpose})
  try:
    os.ftruncate(fd, 0)
    os.pwrite(fd, (data + "\n").encode("utf-8"), 0)
  except OSError:  # (a read-only fd of another user's lock file: held all the same, only not named)
    pass


def _open_lock(folder: str, name: str) -> Optional[int]:
  """An fd of `<folder>/<name>` (created), or None where no flock can be taken (remote folder, no fcntl)."""
  if fcntl is None or not file_io.is_local(folder):
    if folder not in _SKIPPED:
      _SKIPPED.add(folder)
      logger.info("%s: no file lock on %s; nothing stops a second training run from writing it: make sure only one "
                  "runs.", folder, "a remote folder" if fcntl is not None else "this platform")
    return None
  os.makedirs(folder, exist_ok=True)
  path = os.path.join(folder, name)
  try:  # 0o666 less the umask, as every other file there: a group's shared model_dir stays the group's
    return os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
  except PermissionError:  # another user's lock file (an older 0644 one): a read-only fd takes an flock as well
    return os.open(path, os.O_RDONLY)


def _try_flock(fd: int, folder: str) -> Optional[bool]:
  """True = taken, False = held by another open file (another process), None = this file system has no locks."""
  try:
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    return True
  except BlockingIOError:
    return False
  except OSError as e:
    if folder not in _SKIPPED:
      _SKIPPED.add(folder)
      logger.warning("%s: the file system takes no locks (%s); nothing stops a second training run from writing it: "
                     "make sure only one runs.", folder, e)
    return None


def busy_message(folder: str, holder: str) -> str:
  """The refusal of a training run in `folder`, whose owner lock `holder` (in words: `_holder`) holds."""
  return (f"{folder} is owned by another training run: {os.path.join(folder, OWNER_LOCK_FILE)} is locked by "
          f"{holder}. Two trainers in one model_dir overwrite each other's ckpt-N and `checkpoint` file. Stop that "
          "process first (a relaunched job whose old copy still runs: end the old copy; a Python session that "
          "finished its run: call close() on its Trainer, or official_albert.training.run_lock.release_owner_lock "
          "there, or end it), or train into another --model_dir. An evaluation job (--mode=eval) beside a live "
          "trainer needs no lock and is not refused.")


def recorded_holder(folder: str) -> str:
  """The holder that `<folder>/.run.lock` names, read without locking it (a worker whose chief was refused)."""
  path = os.path.join(folder, OWNER_LOCK_FILE)
  try:
    fd = os.open(path, os.O_RDONLY)
  except OSError:  # (a remote folder, or one this machine does not see: the chief's log names the holder)
    return "another process (named in the chief's log)"
  try:
    return _holder(fd)
  finally:
    os.close(fd)


def hold_owner_lock(folder: str) -> bool:
  """Makes this process the owner of training run folder `folder` (idempotent); True when a lock is held.

  Raises:
    ModelDirBusyError: another live process holds it; the message names the folder, the holder and the fix.
  """
  folder = str(folder).rstrip("/") or "/"
  key = os.path.realpath(os.path.join(folder, OWNER_LOCK_FILE)) if file_io.is_local(folder) else folder
  with _GUARD:
    if key in _HELD:
      return True
    fd = _open_lock(folder, OWNER_LOCK_FILE)
    if fd is None:
      return False
    taken = _try_flock(fd, folder)
    if taken is False:
      holder = _holder(fd)
      os.close(fd)
      raise ModelDirBusyError(busy_message(folder, holder))
    if taken is None:
      os.close(fd)
      return False
    _write_holder(fd, "training run")
    _HELD[key] = fd
    return True


def release_owner_lock(folder: str) -> bool:
  """Gives up this process's ownership of `folder` (a run that ended in a longer-lived process); True if it held it."""
  folder = str(folder).rstrip("/") or "/"
  key = os.path.realpath(os.path.join(folder, OWNER_LOCK_FILE)) if file_io.is_local(folder) else folder
  with _GUARD:
    fd = _HELD.pop(key, None)
    if fd is None:
      return False
    with contextlib.suppress(OSError):  # (a read-only fd: nothing was written)
      os.ftruncate(fd, 0)  # (no stale holder for the next reader; the file stays: unlinking it races a new opener)
    fcntl.flock(fd, fcntl.LOCK_UN)
    os.close(fd)
    return True


@contextlib.contextmanager
def exclusive(folder: str, name: str, purpose: str) -> Iterator[bool]:
  """Holds `<folder>/<name>` exclusively for the block, waiting for another process (or thread) that holds it;
  yields whether a lock is held.

  For short updates several processes make to one folder (the best-checkpoint copy of a trainer and an eval job).
  Remote folders and lock-less file systems run the block unlocked (logged once; yields False).
  """
  folder = str(folder).rstrip("/") or "/"
  fd = _open_lock(folder, name)
  if fd is None:
    yield False
    return
  try:
    taken = _try_flock(fd, folder)
    if taken is False:
      logger.info("%s: waiting for %s to finish its %s (%s).", folder, _holder(fd), purpose, name)
      fcntl.flock(fd, fcntl.LOCK_EX)
      taken = True
    if taken:
      _write_holder(fd, purpose)
    yield bool(taken)
  finally:
    os.close(fd)  # (closing the last fd of the open file releases its flock)


def claim_for_workers(folder: str, is_chief: bool, any_worker: Callable[[bool], bool]) -> None:
  """`hold_owner_lock` on the chief, with its outcome shared: every worker of the job raises when the chief is refused.

  Args:
    folder: the run's model_dir.
    is_chief: whether this process owns `folder` for its job (it alone takes the lock).
    any_worker: a vote that every worker of the job joins (a collective: all workers call this together, in the same
      order as their other collectives): True on all of them when any worker passed True. Identity in a one-process
      job.

  Raises:
    ModelDirBusyError: on every worker, when another live process owns `folder`; the chief's names the holder, a
      worker's too when it can read `folder`'s lock file.
    Exception: the chief's own error when it failed otherwise (an unwritable folder); RuntimeError on the others.
  """
  refused = None
  if is_chief:
    try:
      hold_owner_lock(folder)
    except Exception as error:  # pylint: disable=broad-except  (any failure: the others must not wait for the chief)
      refused = error
  if not any_worker(refused is not None):
    return
  busy = any_worker(isinstance(refused, ModelDirBusyError))  # (a second vote: every worker is here, as the first)
  if refused is not None:
    raise refused
  folder = str(folder).rstrip("/") or "/"
  if not busy:
    raise RuntimeError(f"This job's chief could not take the owner lock of {folder} ({OWNER_LOCK_FILE}; the "
                       "chief's log names the error, e.g. a read-only or permission-denied folder); every worker stops "
                       "with it.")
  raise ModelDirBusyError(busy_message(folder, recorded_holder(folder)) + " (This job's chief was refused; every "
                          "worker stops with it.)")


class ModelDirOwner:
  """The owner lock of a training object (the Trainer) in its `model_dir`: claimed by its workers together, given back
  when its training ends, at `close()`, or at the end of a `with` block.

  A subclass has `model_dir`, `is_chief` and `all_workers(value, require_all)` (a vote every worker joins). Giving the
  lock back leaves the object usable: its next training (or save) claims the folder again. The lock is the process's
  (see the module docstring): one Trainer's `close()` gives it back for every Trainer of that folder in the process.
  """

  model_dir: str
  is_chief: bool
  all_workers: Callable[..., bool]

  def claim_model_dir(self) -> None:
    """Makes this job the owner of model_dir (`claim_for_workers`); a collective under MultiWorkerMirroredStrategy.

    Raises:
      ModelDirBusyError: on every worker, when another live process owns model_dir.
    """
    claim_for_workers(self.model_dir, self.is_chief, lambda refused: self.all_workers(refused, require_all=False))

  def close(self) -> None:
    """Gives model_dir's owner lock back (another process may train there now); a no-op when this process holds none."""
    release_owner_lock(self.model_dir)

  @contextlib.contextmanager
  def releasing_model_dir(self) -> Iterator[None]:
    """Gives the owner lock back when the block ends, however it ends (a training run's duration)."""
    try:
      yield
    finally:
      self.close()

  def __enter__(self):
    return self

  def __exit__(self, *exc_info) -> None:
    self.close()
