"""One training writer per model_dir, and a best-checkpoint copy that is never a mixed prefix (audit s32 finding 3).

A relaunched job whose old copy still ran wrote the same model_dir: both saved ckpt-N, each rewrote TF's `checkpoint`
file and pruned by its own list. The chief of a training run now owns model_dir (`run_lock.hold_owner_lock`, taken
by `CheckpointKeeper` at a training resume and at every save); a second process fails fast naming the first, while
eval-only jobs beside it work as before. `update_best` copied ckpt-N's files over model.ckpt-best one by one, so a
kill or a second evaluator in between left one step's data under another's index: it now copies to a temporary
prefix, moves that in, and runs under `.best.lock`.
"""

import os
import socket
import subprocess
import sys
import threading

import pytest
import tensorflow as tf

from official_albert.training import checkpointing
from official_albert.training import run_lock

_HOLDER = """
import sys
from official_albert.training import run_lock
run_lock.hold_owner_lock(sys.argv[1])
print("held", flush=True)
sys.stdin.read()
"""


@pytest.fixture(autouse=True)
def _released(tmp_path):
  """The lock this process took on tmp_path/run is given back after each test (the pytest process lives on)."""
  yield
  run_lock.release_owner_lock(str(tmp_path / "run"))


@pytest.fixture
def other_owner(tmp_path):
  """Another process that owns tmp_path/run as a training run would; ended by the test (or at teardown)."""
  model_dir = str(tmp_path / "run")
  proc = subprocess.Popen([sys.executable, "-c", _HOLDER, model_dir], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                          text=True)
  try:
    assert proc.stdout.readline().strip() == "held"
    yield model_dir, proc
  finally:
    if proc.poll() is None:
      proc.stdin.close()
      proc.wait(timeout=30)


def _end(proc):
  proc.stdin.close()
  assert proc.wait(timeout=30) == 0


def _keeper(model_dir):
  weights = tf.Variable(0.0)
  step = tf.Variable(0, dtype=tf.int64)
  keeper = checkpointing.CheckpointKeeper(model_dir, tf.distribute.get_strategy(),
                                          {"model": tf.train.Checkpoint(w=weights)}, step, max_to_keep=5)
  return keeper, weights, step


def _save(keeper, weights, step, n):
  step.assign(n)
  weights.assign(float(n))
  return keeper.save()


def _best_weight(model_dir):
  return float(tf.train.load_checkpoint(os.path.join(model_dir, "model.ckpt-best")).get_tensor(
      "model/w/.ATTRIBUTES/VARIABLE_VALUE"))


@pytest.mark.timing
def test_a_second_training_process_fails_fast_naming_the_first(other_owner):
  model_dir, proc = other_owner
  with pytest.raises(run_lock.ModelDirBusyError) as error:
    run_lock.hold_owner_lock(model_dir)
  message = str(error.value)
  assert model_dir in message and f"pid {proc.pid}" in message and socket.gethostname() in message
  assert "--model_dir" in message  # (the fix)
  _end(proc)
  assert run_lock.hold_owner_lock(model_dir)  # the first is gone: a new run starts
  assert run_lock.hold_owner_lock(model_dir)  # (idempotent in its own process)
  assert run_lock.release_owner_lock(model_dir)


@pytest.mark.timing
def test_the_keeper_claims_model_dir_for_training_only(other_owner):
  """A trainer's resume and save are refused while another process owns model_dir; an eval job's restore and best
  update beside a live trainer are not (the documented layout)."""
  model_dir, proc = other_owner
  keeper, weights, step = _keeper(model_dir)
  with pytest.raises(run_lock.ModelDirBusyError, match=f"pid {proc.pid}"):
    keeper.restore_latest()
  with pytest.raises(run_lock.ModelDirBusyError, match=f"pid {proc.pid}"):
    _save(keeper, weights, step, 1)
  assert tf.train.latest_checkpoint(model_dir) is None  # refused before writing
  assert keeper.restore_latest(weights_only=True) is None  # eval: no lock
  _end(proc)
  _save(keeper, weights, step, 1)
  run_lock.release_owner_lock(model_dir)
  eval_job, _, _ = _keeper(model_dir)
  eval_job.step_counter.assign(1)
  assert eval_job.update_best({"acc": 0.5}, "acc", True)


def test_a_best_copy_cut_short_leaves_the_previous_best_whole(tmp_path, monkeypatch):
  model_dir = str(tmp_path / "run")
  keeper, weights, step = _keeper(model_dir)
  _save(keeper, weights, step, 1)
  assert keeper.update_best({"acc": 0.5}, "acc", True)
  _save(keeper, weights, step, 2)
  copied_to = []
  real_copy = checkpointing.file_io.atomic_copy

  def killed_at_the_index(src, dst):
    copied_to.append(dst)
    if dst.endswith(".index"):
      raise OSError("killed during the best copy")
    real_copy(src, dst)
  monkeypatch.setattr(checkpointing.file_io, "atomic_copy", killed_at_the_index)
  with pytest.raises(OSError, match="killed"):
    keeper.update_best({"acc": 0.9}, "acc", True)
  assert copied_to and not any(os.path.basename(p).startswith("model.ckpt-best") for p in copied_to)
  assert _best_weight(model_dir) == 1.0  # the old best, whole (its data beside its own index)
  assert sorted(f for f in os.listdir(model_dir) if "model.ckpt-best" in f) == [
      "model.ckpt-best.data-00000-of-00001", "model.ckpt-best.index"]  # (the temporary removed)
  monkeypatch.undo()
  assert keeper.update_best({"acc": 0.9}, "acc", True)
  assert _best_weight(model_dir) == 2.0 and checkpointing.read_best(model_dir)["global_step"] == 2


def test_a_killed_copys_temporary_is_removed_and_a_missing_best_is_made_anew(tmp_path):
  model_dir = str(tmp_path / "run")
  keeper, weights, step = _keeper(model_dir)
  _save(keeper, weights, step, 1)
  assert keeper.update_best({"acc": 0.9}, "acc", True)
  stale = os.path.join(model_dir, ".tmp-4000000-3-model.ckpt-best.data-00000-of-00001")
  stale_index = os.path.join(model_dir, ".tmp-4000000-3-model.ckpt-best.index.tmp-4000000-4-0a1b2c3d")  # atomic_copy's
  for path in (stale, stale_index):
    open(path, "wb").close()
  for name in ("model.ckpt-best.index", "model.ckpt-best.data-00000-of-00001"):  # killed between index and move
    os.remove(os.path.join(model_dir, name))
  _save(keeper, weights, step, 2)
  assert keeper.update_best({"acc": 0.5}, "acc", True)  # worse than the recorded 0.9, whose files are gone
  assert _best_weight(model_dir) == 2.0 and not os.path.exists(stale) and not os.path.exists(stale_index)


def test_best_updates_take_turns(tmp_path):
  """Another evaluator (a process, or here a second open of the lock file) holding `.best.lock` makes
  update_best wait until it is done."""
  model_dir = str(tmp_path / "run")
  keeper, weights, step = _keeper(model_dir)
  _save(keeper, weights, step, 1)
  done = threading.Event()
  with run_lock.exclusive(model_dir, run_lock.BEST_LOCK_FILE, "test") as locked:
    assert locked
    thread = threading.Thread(target=lambda: (keeper.update_best({"acc": 0.5}, "acc", True), done.set()))
    thread.start()
    assert not done.wait(0.5)
  thread.join(timeout=30)
  assert done.is_set() and _best_weight(model_dir) == 1.0


def test_remote_folders_skip_the_lock(caplog):
  assert run_lock.hold_owner_lock("gs://bucket/run") is False
  with run_lock.exclusive("gs://bucket/run", run_lock.BEST_LOCK_FILE, "test") as locked:
    assert locked is False


def test_lock_files_follow_the_umask_and_a_read_only_one_still_locks(tmp_path, monkeypatch):
  """A group's shared model_dir (umask 002): the lock files are group-writable as every other file there, and a lock
  file this user cannot write (another user's, an older 0644 one) is still taken (flock on a read-only fd)."""
  folder = str(tmp_path / "run")
  old = os.umask(0o002)
  try:
    with run_lock.exclusive(folder, run_lock.BEST_LOCK_FILE, "test") as locked:
      assert locked
  finally:
    os.umask(old)
  assert os.stat(os.path.join(folder, run_lock.BEST_LOCK_FILE)).st_mode & 0o777 == 0o664
  owner = os.path.join(folder, run_lock.OWNER_LOCK_FILE)
  open(owner, "w").close()
  real_open = os.open

  def not_writable(path, flags, *mode):  # (as another user's 0644 file; chmod alone does not stop root)
    if path == owner and flags & os.O_RDWR:
      raise PermissionError(13, "Permission denied", path)
    return real_open(path, flags, *mode)

  monkeypatch.setattr(os, "open", not_writable)
  assert run_lock.hold_owner_lock(folder)
  holder = subprocess.run([sys.executable, "-c", _HOLDER, folder], input="", capture_output=True, text=True,
                          env=dict(os.environ, PYTHONPATH=os.getcwd()))
  assert holder.returncode != 0 and "ModelDirBusyError" in holder.stderr  # held through the read-only fd
  assert run_lock.release_owner_lock(folder)
