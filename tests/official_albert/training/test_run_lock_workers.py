"""A multi-worker job refused by the owner lock stops on every worker at once, with the same clear error (s33 fix A).

The chief alone takes `<model_dir>/.run.lock`, after the strategy's first collectives (its start-up barrier, the
variables' broadcast). A refused chief used to raise alone: the other workers went on to their next collective and
failed seconds to minutes later with an unrelated error ("Collective ops is aborted by: Failed to send RPC to
coordination service"), or waited for good while the chief's process lived on. The claim is now a vote every worker
joins (`run_lock.claim_for_workers`), so each raises `ModelDirBusyError` naming the folder, the owner and the fix.
"""

import fcntl
import os
import subprocess
import sys

import pytest

from official_albert.training import run_lock
from tests.conftest import CHILD_PYTHONPATH
from tests.official_albert.training import scale_out_harness as H

# A guard against a hang (two TensorFlow processes start, build the model and vote; ~25 s on an idle 2-core machine),
# far below "for good", the wait of a worker whose refused chief lives on.
REFUSAL_TIMEOUT = 300

_HOLDER = """
import sys
from official_albert.training import run_lock
run_lock.hold_owner_lock(sys.argv[1])
print("held", flush=True)
sys.stdin.read()
"""


@pytest.fixture
def owner(tmp_path):
  """Another live training run's process owning tmp_path/run (as a relaunched job's old copy); ended at teardown."""
  model_dir = str(tmp_path / "run")
  proc = subprocess.Popen([sys.executable, "-c", _HOLDER, model_dir], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                          text=True, env=dict(os.environ, PYTHONPATH=CHILD_PYTHONPATH))
  try:
    assert proc.stdout.readline().strip() == "held"
    yield model_dir, proc
  finally:
    proc.stdin.close()
    proc.wait(timeout=60)


@pytest.mark.large
@pytest.mark.slow
@pytest.mark.timing
def test_every_worker_of_a_refused_job_stops_at_once_naming_the_owner(tmp_path, owner):
  model_dir, proc = owner
  config = H.deep_merge(H.TINY, {"task": {"train_data": {"input_path": "dummy", "dummy_vocab_size": 1000}}})
  logs = [tmp_path / f"w{i}.log" for i in range(2)]
  workers = H.start_workers(model_dir, config, H.free_ports(2), logs)
  try:
    ended = H.wait_for(lambda: all(w.poll() is not None for w in workers), REFUSAL_TIMEOUT)
  finally:
    H.kill(workers)
  texts = [open(log).read() for log in logs]
  assert ended, "a worker of the refused job hung:\n" + "\n----\n".join(t[-3000:] for t in texts)
  for i, (worker, text) in enumerate(zip(workers, texts)):
    assert worker.returncode != 0, (i, text[-3000:])
    assert f"{model_dir} is owned by another training run" in text, (i, text[-3000:])
    assert f"pid {proc.pid}" in text and "--model_dir" in text, (i, text[-3000:])  # the owner, and the fix
    assert "Collective ops is aborted" not in text and "UnavailableError" not in text, (i, text[-3000:])
  assert "chief was refused" in texts[1]
  assert not [f for f in os.listdir(model_dir) if f.startswith("ckpt-") or f == "params.yaml"]  # nothing written


def test_a_refusal_is_every_workers_and_a_worker_names_the_owner(tmp_path):
  """`claim_for_workers` in one process, the job's vote played by a function: the chief's refusal reaches a worker
  (which names the owner from the lock file), and a free folder is claimed by the chief alone."""
  model_dir = str(tmp_path / "run")
  os.makedirs(model_dir)
  votes = []
  fd = os.open(os.path.join(model_dir, run_lock.OWNER_LOCK_FILE), os.O_RDWR | os.O_CREAT)
  try:  # another open of the file (as another process's) holds it, and names its holder
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    os.write(fd, b'{"pid": 4242, "host": "host-a", "started": "then"}')
    with pytest.raises(run_lock.ModelDirBusyError, match=r"run is owned.*pid 4242 on host host-a.*chief was refused"):
      run_lock.claim_for_workers(model_dir, False, lambda refused: votes.append(refused) or True)  # the chief's vote
    with pytest.raises(run_lock.ModelDirBusyError, match="pid 4242") as chief:
      run_lock.claim_for_workers(model_dir, True, lambda refused: votes.append(refused) or refused)
    assert votes == [False, False, True, True]  # a worker takes no lock and votes; the refused chief votes "refused"
    assert "chief was refused" not in str(chief.value)
  finally:
    os.close(fd)
  run_lock.claim_for_workers(model_dir, False, lambda refused: refused)  # a worker alone takes nothing
  assert not run_lock.release_owner_lock(model_dir)
  run_lock.claim_for_workers(model_dir, True, lambda refused: votes.append(refused) or refused)
  assert votes[-1] is False and run_lock.release_owner_lock(model_dir)  # the chief held it


def test_a_chief_that_fails_otherwise_stops_every_worker_too(tmp_path):
  """A chief whose lock fails for another reason (here model_dir is a file; a read-only folder alike) votes too, so
  the workers do not wait for it in their next collective (review of 48d95e6): it raises its own error, they a
  RuntimeError that sends to its log."""
  model_dir = tmp_path / "not_a_folder"
  model_dir.write_text("")
  votes = []
  with pytest.raises(OSError):
    run_lock.claim_for_workers(str(model_dir), True, lambda refused: votes.append(refused) or refused)
  assert votes == [True, False]  # failed, not busy
  answers = iter([True, False])  # the job's two votes as the chief cast them
  with pytest.raises(RuntimeError, match="chief could not take the owner lock.*chief's log"):
    run_lock.claim_for_workers(str(model_dir), False, lambda refused: next(answers))
