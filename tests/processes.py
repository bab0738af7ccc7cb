"""Process ids for tests of what a killed process leaves behind."""

import subprocess
import sys


def dead_pid() -> int:
  """The pid of a process that has exited (and been reaped)."""
  done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True,
                        check=True)
  return int(done.stdout)
