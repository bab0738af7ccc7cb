"""A Trainer used directly (a notebook, a script) gives model_dir back when its training ends (s33 fix A).

The owner lock (`run_lock`) was given back only by `train_lib.run_experiment`: a Trainer built by hand kept it until
its process ended, so the train binary (or another kernel) was refused on that folder while a notebook that had
finished training sat idle. A Trainer now owns model_dir from the start of its training to the end of `train()`, and
gives it back at `close()` or at the end of a `with` block; another live process is still refused.

"Another process" is played by another open of the lock file: flock locks belong to open files, so a second open in
this process is refused exactly as another process would be.
"""

import fcntl
import os

import pytest

from official_albert.training import run_lock
from official_albert.training import train_lib
from tests.official_albert.training.test_train_lib import tiny_params


def _params(train_steps):
  return tiny_params(trainer={"train_steps": train_steps, "steps_per_loop": 1, "checkpoint_interval": 1,
                              "summary_interval": 1, "warmup_steps": 1})


def _other_process_may_train(model_dir) -> bool:
  """Whether another process would get model_dir's owner lock now (tried with another open of the file)."""
  fd = os.open(os.path.join(model_dir, run_lock.OWNER_LOCK_FILE), os.O_RDWR | os.O_CREAT)
  try:
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    return True
  except BlockingIOError:
    return False
  finally:
    os.close(fd)


@pytest.fixture
def model_dir(tmp_path):
  folder = str(tmp_path / "run")
  yield folder
  run_lock.release_owner_lock(folder)  # (the pytest process lives on: nothing held for the next test)


@pytest.mark.slow
def test_a_notebook_trains_twice_in_one_folder_and_gives_it_back(model_dir):
  trainer = train_lib.Trainer(_params(2), model_dir)
  held = []
  summary = trainer.train(on_loop_end=lambda step, logs: held.append(not _other_process_may_train(model_dir)))
  assert summary["global_step"] == 2 and held == [True, True]  # owned while it trained
  assert _other_process_may_train(model_dir)  # given back when train() ended: the train binary may resume it
  # The cell run again with more steps: a new Trainer on the same folder, in the same process, resumes it.
  with train_lib.Trainer(_params(4), model_dir) as again:
    again.initialize_or_resume()  # (as run_experiment does before train: claimed from here on)
    assert again.step == 2 and not _other_process_may_train(model_dir)
    assert again.train()["global_step"] == 4
    assert _other_process_may_train(model_dir)
    again.initialize_or_resume()  # a later start claims it again (the object stays usable)
    assert not _other_process_may_train(model_dir)
  assert _other_process_may_train(model_dir)  # the end of the `with` block gave it back
  trainer.initialize_or_resume()
  assert not _other_process_may_train(model_dir)
  trainer.close()
  assert _other_process_may_train(model_dir)


@pytest.mark.slow
def test_a_trainer_is_still_refused_beside_another_live_run(model_dir):
  os.makedirs(model_dir)
  fd = os.open(os.path.join(model_dir, run_lock.OWNER_LOCK_FILE), os.O_RDWR | os.O_CREAT)
  try:  # another live run owns the folder
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    os.write(fd, b'{"pid": 4242, "host": "host-a", "started": "then"}')
    trainer = train_lib.Trainer(_params(2), model_dir)
    with pytest.raises(run_lock.ModelDirBusyError, match=r"pid 4242 on host host-a.*close\(\)"):
      trainer.train()
    with pytest.raises(run_lock.ModelDirBusyError, match="pid 4242"):
      with trainer:
        trainer.initialize_or_resume()
    assert not os.path.exists(os.path.join(model_dir, "checkpoint"))  # refused before writing
  finally:
    os.close(fd)
  assert trainer.train()["global_step"] == 2  # the other run ended: this one trains
