"""A multi-worker cluster on 127.0.0.1 for tests: free ports and each worker's `TF_CONFIG`.

Test-only (the library never starts local clusters): it moved here from `official_albert/training/distribute.py`.
"""

import contextlib
import json
import socket
from typing import List, Sequence


def find_free_port() -> int:
  """A TCP port on 127.0.0.1 that is free right now (callers must still retry on a clash: it can be taken)."""
  with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
    s.bind(("127.0.0.1", 0))
    return s.getsockname()[1]


def free_ports(n: int) -> List[int]:
  """`n` distinct TCP ports on 127.0.0.1, free right now (held open together while picked: two `find_free_port`
  calls in a row may return the same port)."""
  with contextlib.ExitStack() as stack:
    sockets = [stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) for _ in range(n)]
    for s in sockets:
      s.bind(("127.0.0.1", 0))
    return sorted(s.getsockname()[1] for s in sockets)


def local_tf_config(num_local_workers: int, task_index: int, ports: Sequence[int]) -> str:
  """The `TF_CONFIG` JSON for worker `task_index` of a local cluster on 127.0.0.1."""
  if len(ports) != num_local_workers:
    raise ValueError(f"Need {num_local_workers} ports, got {list(ports)}.")
  if not 0 <= task_index < num_local_workers:
    raise ValueError(f"task_index={task_index} outside [0, {num_local_workers}).")
  return json.dumps({
      "cluster": {"worker": [f"127.0.0.1:{p}" for p in ports]},
      "task": {"type": "worker", "index": task_index},
  })
