"""tests/warm_python.py: a `python -m` forked from the warm server behaves as a fresh interpreter's — the same output,
exit status, arguments, `sys.path[0]`, working directory, stdin and environment — and what it cannot take runs cold."""

import os
import signal
import subprocess
import time

import pytest

from tests import warm_python
from tests.conftest import docs_shell_env

pytestmark = pytest.mark.timing  # (processes and signals)

PROBE = '''
import json, os, sys
import __main__
if len(sys.argv) > 1 and sys.argv[1] == "raise":
  raise ValueError("raised on purpose")
if len(sys.argv) > 1 and sys.argv[1] == "wait":
  print("waiting", os.getpid(), flush=True)
  import time
  time.sleep(600)
if len(sys.argv) > 1 and sys.argv[1] == "interrupt":
  raise KeyboardInterrupt
if len(sys.argv) > 1 and sys.argv[1] == "unclosed":  # (written at the interpreter's exit, when the file is freed)
  open("unclosed.txt", "w").write("flushed at exit")
  class Finalised:
    def __del__(self):
      print("finalised")
  kept = Finalised()
if len(sys.argv) > 1 and sys.argv[1] == "numpy":
  import numpy
  print(numpy.random.randint(1 << 30))
  sys.exit()
print(json.dumps({
    "argv": sys.argv[1:], "argv0": os.path.basename(sys.argv[0]), "path0": sys.path[0], "cwd": os.getcwd(),
    "name": __name__, "main": __main__.__dict__.get("MARK"), "spec": __spec__.name, "stdin": sys.stdin.read(),
    "env": os.environ.get("PROBE_VALUE"), "tf_config": os.environ.get("TF_CONFIG"),
}))
print("to stderr", file=sys.stderr)
MARK = "set by the probe"
sys.exit(int(sys.argv[2]) if sys.argv[1:2] == ["exit"] else None)
'''


@pytest.fixture(scope="module")
def warm(tmp_path_factory):
  tmp = tmp_path_factory.mktemp("warm")
  (tmp / "work").mkdir()
  (tmp / "work" / "probe.py").write_text(PROBE, encoding="utf-8")
  cold = docs_shell_env(tmp)
  with warm_python.serving(cold) as env:
    assert env is not cold, "the server did not start"
    yield tmp / "work", cold, env


def _bash(command, cwd, env, **kwargs):
  return subprocess.run(["bash", "-c", command], cwd=cwd, env=env, capture_output=True, text=True, timeout=120,
                        **kwargs)


@pytest.mark.parametrize("command", [
    "python -m probe a 'b c' <<< 'some input'",
    "TF_CONFIG=x python -m probe exit 3 < /dev/null",  # (a multi-worker call: runs cold)
    "python -m probe interrupt",  # (KeyboardInterrupt: the interpreter dies of SIGINT)
    "python -m probe unclosed < /dev/null; cat unclosed.txt",  # (the interpreter's exit: finalizers, freed files)
    "mkdir -p sub && cd sub && python -m probe --flag=1 < /dev/null",
    "python -m probe raise",
    "python -m no_such_module",
    "PROBE_VALUE=changed python -m probe < /dev/null",  # (a variable of its own: runs cold)
])
def test_a_forwarded_call_answers_as_a_fresh_interpreter(warm, command):
  work, cold, env = warm
  want = _bash(command, work, cold)
  got = _bash(command, work, env)
  assert got.returncode == want.returncode
  assert got.stdout == want.stdout
  # (the interpreter's own path in "No module named" and tracebacks is the same real interpreter in both)
  assert got.stderr.splitlines()[-1:] == want.stderr.splitlines()[-1:], (got.stderr, want.stderr)


def test_each_call_draws_its_own_numpy_numbers(warm):
  work, _, env = warm
  draws = {_bash("python -m probe numpy", work, env).stdout for _ in range(3)}
  assert len(draws) == 3, draws


def test_calls_are_forwarded_and_others_run_cold(warm):
  """The forwarded call finds TensorFlow imported (the point) and the variables its import sets; `-c`, a file, and a
  call with an environment of its own run in a fresh interpreter (TensorFlow not imported)."""
  work, _, env = warm
  check = "import sys, os; print('tensorflow' in sys.modules, os.environ.get('TF2_BEHAVIOR'))"
  (work / "check.py").write_text(check, encoding="utf-8")
  (work / "check_module.py").write_text(check, encoding="utf-8")
  assert _bash("python -m check_module", work, env).stdout.split() == ["True", "1"]
  for command in (f'python -c "{check}"', "python check.py", "KERAS_BACKEND=jax python -m check_module",
                  "env -u HOME python -m check_module", "TF_CONFIG='{}' python -m check_module"):
    # (TF2_BEHAVIOR: whatever the caller's environment holds — a pytest process that imported TensorFlow has it)
    assert _bash(command, work, env).stdout.split()[0] == "False", command


def test_a_signal_to_the_client_reaches_the_call(warm):
  work, _, env = warm
  wrapper = os.path.join(env["PATH"].split(os.pathsep)[0], "python")
  client = subprocess.Popen([wrapper, "-m", "probe", "wait"], cwd=work, env=env, stdout=subprocess.PIPE, text=True)
  try:
    assert client.stdout.readline().split()[0] == "waiting"  # (the call runs: event, not a sleep)
    client.send_signal(signal.SIGTERM)
    assert client.wait(timeout=60) == -signal.SIGTERM  # (as a cold interpreter killed by it)
  finally:
    client.kill()
    client.stdout.close()


def test_a_client_killed_outright_takes_its_call_with_it(warm):
  work, _, env = warm
  wrapper = os.path.join(env["PATH"].split(os.pathsep)[0], "python")
  client = subprocess.Popen([wrapper, "-m", "probe", "wait"], cwd=work, env=env, stdout=subprocess.PIPE, text=True)
  try:
    word, pid = client.stdout.readline().split()
    assert word == "waiting" and int(pid) != client.pid  # (forwarded: the call is the server's child)
    client.kill()
    client.wait(timeout=60)
    deadline = time.monotonic() + 60
    while _alive(int(pid)) and time.monotonic() < deadline:
      time.sleep(0.1)
    assert not _alive(int(pid))
  finally:
    client.kill()
    client.stdout.close()


def _alive(pid):
  try:
    os.kill(pid, 0)
  except ProcessLookupError:
    return False
  try:  # (a zombie not yet reaped by the server counts as gone)
    with open(f"/proc/{pid}/stat", encoding="utf-8") as f:
      return f.read().rsplit(")", 1)[1].split()[0] != "Z"
  except FileNotFoundError:
    return False


def test_the_end_of_serving_stops_a_call_still_running(tmp_path):
  """(A test that timed out leaves no command running: its call is killed with the server, the client fails.)"""
  (tmp_path / "work").mkdir()
  (tmp_path / "work" / "probe.py").write_text(PROBE, encoding="utf-8")
  with warm_python.serving(docs_shell_env(tmp_path)) as env:
    client = subprocess.Popen(["bash", "-c", "python -m probe wait"], cwd=tmp_path / "work", env=env,
                              stdout=subprocess.PIPE, text=True)
    assert client.stdout.readline().split()[0] == "waiting"
  deadline = time.monotonic() + 60
  while client.poll() is None and time.monotonic() < deadline:  # (the client sees its call end)
    time.sleep(0.1)
  assert client.returncode not in (None, 0)
  client.stdout.close()
