"""A warm `python` for the tests that run documented shell commands: TensorFlow imported once, each `python -m MODULE`
then forked from that process instead of paying the import again (5-6 s in the test venv, most of a tiny command).

  with warm_python.serving(env) as env:   # env: the commands' environment (conftest.docs_shell_env)
    subprocess.run(["bash", "-c", "python -m tasks.squad_evaluate ..."], env=env)

`serving` starts the server (`python tests/warm_python.py SOCKET`, in `env`) and returns `env` with `python` on PATH
replaced by this file's client (a server that does not start is warned about, and the commands run cold); at its end
the server is stopped, and with it every call still running, each forked into a process group of its own. The client
forwards a call to the server only when it is `python -m MODULE ...` and its environment is the server's (any other
variable set, changed or unset — `KERAS_BACKEND=jax python -m ...`, a `PYTHONPATH` of its own — and it execs the real
interpreter, as do `python -c`, `python FILE` and a server that cannot be reached). A forwarded call runs as `python
-m` runs it: a child forked from the server takes the caller's stdin, stdout and stderr, working directory,
environment and arguments, runs the module as `__main__` in a fresh `__main__` module with `sys.path[0]` the working
directory (NumPy's global random state reseeded) and ends through the interpreter's own exit; its exit status is the
client's (a call killed by signal N kills the client with N); SIGTERM, SIGINT and SIGHUP sent to the client are sent
on to the child, and a client that dies (SIGKILL) takes the call with it. A call with TF_CONFIG runs cold (`_PER_CALL`
says why). Only TensorFlow (and what it imports itself: Keras, NumPy) is loaded before the fork, nothing of this
repository and no op run, so a module that forgot an import of its own (TF Text's ops, for one) still fails here.
tests/test_packaging.py still runs the installed console scripts in fresh interpreters.
"""

import contextlib
import json
import os
import pathlib
import select
import shlex
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
import warnings

# Variables that differ from call to call without touching what an import does: the client may differ in these.
# (Not TF_CONFIG: a multi-worker call runs cold, since workers forked from one server would share one string-hash
# seed, and so one set and dict order of strings, which separate machines never do: an agreement between workers
# that rests on it would pass here and hang or diverge there.)
_PER_CALL = ("PWD", "OLDPWD", "SHLVL", "_")
_SERVER_ENV = "ALBERT_WARM_PYTHON"  # the socket's path; the server's environment is saved beside it (.env.json)


def _frame(payload: bytes) -> bytes:
  return struct.pack("!I", len(payload)) + payload


def _read_frame(conn: socket.socket) -> bytes:
  head = b""
  while len(head) < 4:
    chunk = conn.recv(4 - len(head))
    if not chunk:
      raise EOFError
    head += chunk
  size, = struct.unpack("!I", head)
  body = b""
  while len(body) < size:
    chunk = conn.recv(size - len(body))
    if not chunk:
      raise EOFError
    body += chunk
  return body


def _comparable(env) -> dict:
  return {k: v for k, v in env.items() if k not in _PER_CALL}


# ------------------------------------------------------------------------------------------------- the client
def client(argv) -> None:
  """`python ARGS`: forwarded to the warm server when it can run them as a fresh interpreter would, else exec'd."""
  real = os.environ.get("ALBERT_WARM_PYTHON_REAL") or sys.executable
  path = os.environ.get(_SERVER_ENV, "")
  if len(argv) >= 2 and argv[0] == "-m" and path:
    try:
      with open(path + ".env.json", encoding="utf-8") as f:
        same = json.load(f) == _comparable(os.environ)
      if same:
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        conn.connect(path)
      else:
        conn = None
    except OSError:
      conn = None
    if conn is not None:
      code = _forward(conn, argv)
      if code is not None:
        sys.exit(code)
  os.execv(real, [real] + list(argv))


def _forward(conn: socket.socket, argv):
  """The forwarded call's exit status; None when the server started none (then the caller runs it cold)."""
  child = []  # (its pid, once known: a signal that comes before is held, then sent on)
  held = []

  def pass_on(signum, frame):
    del frame
    if not child:
      held.append(signum)
      return
    with contextlib.suppress(ProcessLookupError):
      os.kill(child[0], signum)

  for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
    signal.signal(signum, pass_on)
  request = json.dumps({"argv": list(argv), "cwd": os.getcwd(), "env": dict(os.environ)}).encode()
  try:
    socket.send_fds(conn, [_frame(request)], [0, 1, 2])
    child.append(int(_read_frame(conn)))
  except (OSError, EOFError, ValueError):
    conn.close()
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
      signal.signal(signum, signal.SIG_DFL)
    for signum in held:  # (no call started: the signal is the client's own, as before it asked)
      os.kill(os.getpid(), signum)
    return None
  for signum in held:
    pass_on(signum, None)
  try:
    code = int(_read_frame(conn))
  except EOFError:  # the server went away with the child running: nothing to report but a failure
    print("warm_python: the server went away during the call; its exit status is unknown", file=sys.stderr)
    return 1
  if code < 0:  # (killed by signal -code: the client dies of it too, as the cold process would have)
    signal.signal(-code, signal.SIG_DFL)
    os.kill(os.getpid(), -code)
    return 128 - code
  return code


# ------------------------------------------------------------------------------------------------- the server
def serve(path: str) -> None:
  """Imports TensorFlow, listens on `path`, forks a child per call and reports each child's exit status."""
  _die_with_parent(signal.SIGTERM)  # (a pytest killed outright leaves no server behind)
  before = dict(os.environ)
  import tensorflow  # noqa: F401  (the point of this process: imported once, before every fork)
  # The import sets variables of its own (TF2_BEHAVIOR=1, ...): a forked call gets them as its own import would.
  set_by_import = {k: v for k, v in os.environ.items() if before.get(k) != v}
  listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
  listener.bind(path)
  listener.listen(64)
  tmp = path + ".env.json.tmp"
  with open(tmp, "w", encoding="utf-8") as f:
    json.dump(_comparable(before), f)
  os.replace(tmp, path + ".env.json")
  running = {}  # child pid -> the client's connection

  def stop(signum, frame):  # (the test's end: no call outlives it, a timed-out one included)
    del signum, frame
    for pid in running:
      with contextlib.suppress(OSError):
        os.killpg(pid, signal.SIGKILL)
    os._exit(0)

  signal.signal(signal.SIGTERM, stop)
  print("ready", flush=True)
  while True:
    readable, _, _ = select.select([listener, *running.values()], [], [], 0.05)
    for pid, conn in list(running.items()):
      if conn in readable:  # (the client is gone, SIGKILL among the ways: a cold process would be gone with it)
        with contextlib.suppress(OSError):
          os.killpg(pid, signal.SIGKILL)
    if listener in readable:
      conn, _ = listener.accept()
      pid = _start(listener, conn, running.values(), set_by_import)
      if pid is None:
        conn.close()
      else:
        running[pid] = conn
        with contextlib.suppress(OSError):
          conn.sendall(_frame(str(pid).encode()))
    while running:
      pid, status = os.waitpid(-1, os.WNOHANG)
      if pid == 0:
        break
      conn = running.pop(pid, None)
      if conn is not None:
        code = os.waitstatus_to_exitcode(status)
        with contextlib.suppress(OSError):
          conn.sendall(_frame(str(code).encode()))
        conn.close()


def _start(listener: socket.socket, conn: socket.socket, others, set_by_import):
  try:
    message, fds, _, _ = socket.recv_fds(conn, 1 << 22, 3)
    request = json.loads(message[4:])
  except (OSError, ValueError):
    return None
  pid = os.fork()
  if pid:
    with contextlib.suppress(OSError):  # (also in the child: whichever runs first, the group exists for stop())
      os.setpgid(pid, pid)
    for fd in fds:
      os.close(fd)
    return pid
  for sock in (listener, conn, *others):  # (the other calls' connections belong to the server)
    sock.close()
  _run_as_main(request, fds, set_by_import)  # (never returns: its SystemExit ends this forked process)
  return None


def _run_as_main(request, fds, set_by_import) -> None:
  """In the child: becomes `python -m MODULE ARGS` in the caller's folder, environment and stdio. It returns only by
  raising: the SystemExit (or uncaught exception) leaves `serve`, and the interpreter then ends as `python -m` ends —
  threads joined, exit functions, finalizers and `sys.excepthook` run, the streams flushed, KeyboardInterrupt's
  status — which a hand-made exit missed (an unclosed file stayed empty, a failing flush passed)."""
  import runpy
  import types
  signal.signal(signal.SIGTERM, signal.SIG_DFL)
  os.setpgid(0, 0)  # (its own group, which the server kills at the end with whatever the call started)
  _die_with_parent(signal.SIGKILL)
  for target, fd in enumerate(fds):
    os.dup2(fd, target)
    os.close(fd)
  os.chdir(request["cwd"])
  os.environ.clear()
  os.environ.update(request["env"])
  os.environ.update(set_by_import)
  if "numpy.random" in sys.modules:  # (NumPy's global RandomState is copied by the fork; a fresh import seeds it)
    sys.modules["numpy.random"].seed()
  module, args = request["argv"][1], request["argv"][2:]
  sys.argv = ["-m"] + args
  if not sys.flags.safe_path:  # (PYTHONSAFEPATH: `python -m` puts no folder first)
    sys.path[0] = os.getcwd()
  sys.modules["__main__"] = types.ModuleType("__main__")
  runpy._run_module_as_main(module, alter_argv=True)  # what `python -m` itself calls
  sys.exit()


def _die_with_parent(signum) -> None:
  """Linux's PR_SET_PDEATHSIG: this process gets `signum` when its parent dies (best effort elsewhere)."""
  import ctypes
  with contextlib.suppress(OSError, AttributeError):
    ctypes.CDLL(None, use_errno=True).prctl(1, int(signum), 0, 0, 0)


@contextlib.contextmanager
def serving(env: dict, timeout_s: float = 300.0):
  """Starts a warm server in `env`; yields `env` with `python` its client (see the module docstring). A server that
  does not start is warned about and the calls run cold (`env` as given)."""
  folder = pathlib.Path(tempfile.mkdtemp(prefix="albert-warm-python-"))  # (short: a socket's path ≤ 107 bytes)
  path = str(folder / "socket")
  warm_env = dict(env, **{_SERVER_ENV: path, "ALBERT_WARM_PYTHON_REAL": sys.executable})
  bin_dir = folder / "bin"
  bin_dir.mkdir()
  wrapper = bin_dir / "python"
  # (`sh` first: a shebang naming a deep venv's interpreter could pass the kernel's line limit)
  wrapper.write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} -I {shlex.quote(__file__)} --client "$@"\n')
  wrapper.chmod(0o755)
  warm_env["PATH"] = f"{bin_dir}{os.pathsep}{env['PATH']}"
  server = subprocess.Popen([sys.executable, __file__, path], env=warm_env, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True)
  try:
    deadline = time.monotonic() + timeout_s
    line = ""
    while time.monotonic() < deadline and server.poll() is None and not line:
      ready, _, _ = select.select([server.stdout], [], [], 1.0)
      if ready:
        line = server.stdout.readline().strip() or "(closed)"
    if line == "ready":
      yield warm_env
    else:
      warnings.warn(f"the warm python server did not start (exit {server.poll()}): the commands run cold")
      yield env
  finally:
    server.terminate()
    try:
      server.wait(timeout=30)
    except subprocess.TimeoutExpired:
      server.kill()
      server.wait()
    server.stdout.close()
    shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
  if sys.argv[1] == "--client":
    client(sys.argv[2:])
  else:
    serve(sys.argv[1])
