"""Preemption: SIGTERM → a checkpoint within one training step, whatever `steps_per_loop` is.

A loop of `steps_per_loop` steps runs inside one `tf.function` call, during which the main thread is in C++ and a
Python signal handler would only run once the call returns (1000 steps later on a TPU recipe: longer than a
preemption grace period). So the notice travels another way: Python's C-level handler writes the signal number to a
wakeup pipe as soon as the signal arrives (`signal.set_wakeup_fd`), a watcher thread reading that pipe sets
`stop_requested`, a `tf.Variable` that the in-graph loop reads before every step — the loop ends after the step in
flight and the trainer checkpoints. Under MultiWorkerMirroredStrategy the workers agree on the flag every step (an
all-reduce of one integer), so a notice on any worker stops all of them at the same step.

The train binary exits with `PREEMPTED_EXIT_CODE` (75, EX_TEMPFAIL: "try again") after a preemption checkpoint and
with 0 when training finished, so a job scheduler can tell the two apart and restart only the former.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
from typing import Optional

import tensorflow as tf

logger = logging.getLogger(__name__)

PREEMPTED_EXIT_CODE = 75


class PreemptionWatcher:
  """Context manager: while active, SIGTERM sets `stop_requested` (a tf.Variable) at once.

  Usable only from the main thread (Python's rule for signal handlers); elsewhere it does nothing but hold the flag.
  The previous SIGTERM handler and wakeup fd are restored on exit. Nested `with` blocks share one installation (the
  trainer covers its resume, which `run_experiment` also calls on its own, and the whole of `train`). A notice stays
  recorded until `clear()` (the trainer clears it once it has stopped for it): one received during a resume that
  ran before `train` still stops that `train` before its first step, instead of being dropped.
  """

  def __init__(self, signum: int = signal.SIGTERM):
    self.signum = signum
    self.stop_requested = tf.Variable(False, trainable=False, name="preemption_requested")
    self.requested = False
    self._previous_handler = None
    self._previous_fd = None
    self._pipe = None
    self._thread: Optional[threading.Thread] = None
    self._depth = 0

  def clear(self) -> None:
    """Forgets a notice that has been acted on (the run checkpointed and stopped), so a later `train` runs."""
    self.requested = False
    self.stop_requested.assign(False)

  def request(self) -> None:
    """Records a preemption notice (from the handler, the watcher thread or a test)."""
    if not self.requested:
      self.requested = True
      logger.warning("Received signal %d: will checkpoint after the current step and stop.", self.signum)
    self.stop_requested.assign(True)

  def _handle(self, signum, frame):
    del signum, frame
    self.request()

  def _watch(self, read_fd: int) -> None:
    while True:
      try:
        data = os.read(read_fd, 512)
      except OSError:
        return
      if not data:
        return
      if self.signum in data:
        self.request()

  def __enter__(self) -> "PreemptionWatcher":
    self._depth += 1
    if self._depth > 1 or threading.current_thread() is not threading.main_thread():
      return self
    read_fd, write_fd = os.pipe()
    os.set_blocking(write_fd, False)
    self._pipe = (read_fd, write_fd)
    self._previous_handler = signal.signal(self.signum, self._handle)
    self._previous_fd = signal.set_wakeup_fd(write_fd, warn_on_full_buffer=False)
    self._thread = threading.Thread(target=self._watch, args=(read_fd,), name="preemption-watcher", daemon=True)
    self._thread.start()
    return self

  def __exit__(self, *exc) -> bool:
    self._depth -= 1
    if self._depth > 0 or self._pipe is None:
      return False
    signal.set_wakeup_fd(self._previous_fd if self._previous_fd is not None else -1)
    signal.signal(self.signum, self._previous_handler)
    read_fd, write_fd = self._pipe
    os.close(write_fd)  # the watcher's read returns b"" and the thread ends
    self._thread.join(timeout=5)
    os.close(read_fd)
    self._pipe = None
    return False
