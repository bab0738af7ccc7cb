"""`ALBERT_TEST_LOAD=N` (tests/conftest.py, `make test-under-load`): N busy processes run beside the session."""

import os
import subprocess
import sys
import textwrap

from tests.conftest import CHILD_PYTHONPATH
from tests.conftest import LOAD_ENV
from tests.conftest import LONGEST_FIRST
from tests.conftest import REPO_ROOT

_INNER = textwrap.dedent("""
    def test_burners_compete_for_the_cpu(background_load):
      import os
      assert background_load == int(os.environ["ALBERT_TEST_LOAD"])
      print("BURNERS", background_load, os.getloadavg()[0])
""")


def test_the_load_switch_starts_busy_processes_and_stops_them_with_the_session(tmp_path):
  (tmp_path / "test_inner.py").write_text(_INNER)
  (tmp_path / "conftest.py").write_text("from tests.conftest import background_load  # noqa: F401\n")
  # The inner session is not an xdist worker, even when this test runs in one (PYTEST_XDIST_WORKER would be inherited).
  env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_XDIST")}
  env.update(PYTHONPATH=CHILD_PYTHONPATH, **{LOAD_ENV: "2"})
  proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider", str(tmp_path)],
                        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
  assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
  assert "BURNERS 2" in proc.stdout
  # No burner outlives the session (this session's own burners, under ALBERT_TEST_LOAD, are its children).
  pids = subprocess.run(["pgrep", "-f", "while os.getppid"], capture_output=True, text=True).stdout.split()
  # Under pytest-xdist the run's own burners may belong to a sibling worker (a child of this worker's parent).
  parents = {None, os.getpid()}
  if "PYTEST_XDIST_WORKER" in os.environ:
    parents |= {p for p in map(_parent, pids) if p and _parent(p) == os.getppid()}
  assert not [pid for pid in pids if _parent(pid) not in parents], pids


def _parent(pid):
  try:
    with open(f"/proc/{pid}/stat") as f:
      return int(f.read().rsplit(")", 1)[1].split()[1])
  except OSError:  # exited meanwhile
    return None


def test_longest_first_names_existing_files():
  """A renamed or deleted test file in conftest.LONGEST_FIRST would silently stop being scheduled early."""
  missing = [path for path in LONGEST_FIRST if not (REPO_ROOT / path).is_file()]
  assert not missing, f"tests/conftest.py LONGEST_FIRST names files that do not exist: {missing}"
