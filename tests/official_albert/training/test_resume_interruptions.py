"""A run stopped at the wrong moment resumes without losing work: the only checkpoint without its input position is
resumed (not re-initialised and then rotated away), a kill between an evaluation's best copy and its
eval_results.json leaves the copy made up on restart, a SIGTERM during start-up ends in a preemption (exit 75, not
143), and input positions taken over another training file list are refused with the fix.

The models and data are test_train_lib.py's (TINY: H 32, 2 layers, synthetic "dummy" batches).
"""

import json
import logging
import os
import subprocess
import sys

import pytest
import tensorflow as tf

from official_albert.training import checkpointing
from official_albert.training import train_lib
from tests.official_albert.training.test_train_lib import tiny_params

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
SHORT = {"train_steps": 4, "steps_per_loop": 2, "checkpoint_interval": 2, "validation_interval": 2}


@pytest.mark.slow
def test_the_only_checkpoint_without_its_input_position_is_resumed_by_skipping(tmp_path, caplog):
  """max_to_keep=1 and a kill between the model's save of ckpt-4 and the input position's: the restart used to log
  "starting from step 0", re-initialise, and rotate ckpt-4 away at its first save."""
  model_dir = str(tmp_path / "run")
  trainer = dict(SHORT, max_to_keep=1)
  train_lib.run_experiment(tiny_params(trainer=trainer), model_dir, "train")
  positions = tmp_path / "run" / "input_state" / "worker-0"
  for path in positions.glob("ckpt-4*"):
    path.unlink()
  (positions / "checkpoint").unlink()
  with caplog.at_level(logging.WARNING):
    result = train_lib.run_experiment(tiny_params(trainer=dict(trainer, train_steps=6)), model_dir, "train")
  assert [step for step, _ in result["history"]] == [6]  # resumed at 4, not retrained from 0
  assert "skipping the 4 consumed global batches" in caplog.text
  assert tf.train.latest_checkpoint(model_dir).endswith("ckpt-6")
  assert checkpointing.InputPositions(model_dir, 0, iter(tf.data.Dataset.range(1)), 1, {}).exists(6)


@pytest.mark.slow
def test_a_kill_before_the_best_copy_is_made_up_on_restart(tmp_path, monkeypatch):
  """The best copy of step 4 is made before step 4's eval_results.json, so a kill in between leaves the step
  unevaluated and the restart evaluates it and copies ckpt-4 (the results used to be written first, and the
  restart took the step as done: model.ckpt-best stayed at step 2 for good)."""
  model_dir = str(tmp_path / "run")
  params = tiny_params(trainer=dict(SHORT, best_checkpoint_metric="global_step", best_checkpoint_mode="max",
                                    eval_at_start=False))
  real = checkpointing.CheckpointKeeper.update_best

  def killed_at_4(self, results, metric, higher, **record):  # record: what the best is chosen on (chosen_on, ...)
    if self.step == 4:
      raise KeyboardInterrupt("killed while copying ckpt-4 to model.ckpt-best")
    return real(self, results, metric, higher, **record)

  monkeypatch.setattr(checkpointing.CheckpointKeeper, "update_best", killed_at_4)
  with pytest.raises(KeyboardInterrupt):
    train_lib.run_experiment(params, model_dir, "train_and_eval")
  monkeypatch.setattr(checkpointing.CheckpointKeeper, "update_best", real)
  result = train_lib.run_experiment(params, model_dir, "train_and_eval")
  assert [step for step, _ in result["eval_history"]] == [4]
  assert json.load(open(os.path.join(model_dir, "best_checkpoint.json")))["global_step"] == 4
  assert json.load(open(os.path.join(model_dir, "eval_results.json")))["global_step"] == 4


_CHILD = r"""
import json, os, signal, sys
from tests.official_albert.training.test_train_lib import TINY, _deep_merge
from official_albert import train
from official_albert.training import train_lib as L
from official_albert.training import trainer as T
owner, name = {"trace": (T.Trainer, "_ensure_train_fn"), "params": (L, "save_params_yaml")}[sys.argv[2]]
real = getattr(owner, name)
def with_a_notice(*args, **kwargs):
  os.kill(os.getpid(), signal.SIGTERM)  # the preemption notice arrives during this start-up step
  return real(*args, **kwargs)
setattr(owner, name, with_a_notice)
over = _deep_merge(TINY, {"trainer": {"train_steps": 4}})
r = train.run("albert_tiny_pretrain", "train", sys.argv[1], params_override=json.dumps(over))
print("RESULT", r["status"], r["global_step"])
sys.exit(75 if r["status"] == "preempted" else 0)
"""


@pytest.mark.slow
@pytest.mark.parametrize("when", ["trace", "params"])
def test_sigterm_during_start_up_stops_before_the_first_step_with_exit_75(tmp_path, when):
  """The notice is sent by the child itself while it traces its training loop, or while run_experiment writes
  params.yaml between the resume and train() (an event, not a timer). Outside the watcher it used to kill the process
  (143 in a shell: the default SIGTERM action)."""
  proc = subprocess.run([sys.executable, "-c", _CHILD, str(tmp_path / "run"), when], capture_output=True, text=True,
                        cwd=REPO_ROOT, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"), timeout=300)
  assert proc.returncode == 75, (proc.returncode, proc.stderr[-3000:])
  assert "RESULT preempted 0" in proc.stdout


def _records(path, n):
  with tf.io.TFRecordWriter(str(path)) as writer:
    for i in range(n):
      writer.write(f"{path.name}:{i}".encode())
  return str(path)


def test_input_positions_over_another_training_file_list_are_refused(tmp_path, monkeypatch):
  """A tf.data position indexes the file list it was taken over: restored over a longer list it never reads the new
  shards, over a list without an old shard it fails with an unexplained NotFoundError. The file list's digest is
  recorded with the split, and a change is refused naming input_resume=skip; positions saved before it was recorded
  (no digest) still resume, and the same files named another way are the same list."""
  a, b, c = (_records(tmp_path / name, 4) for name in ("a", "b", "c"))
  split = {"num_workers": 1, "num_replicas": 1, "global_batch_size": 2}
  model_dir = str(tmp_path / "run")

  def positions(files):
    topology = dict(split, **{checkpointing.TRAIN_FILES_KEY: checkpointing.train_files_digest(files)})
    return checkpointing.InputPositions(model_dir, 0, iter(tf.data.TFRecordDataset(files.split(","))), 3, topology)

  step = tf.Variable(0, dtype=tf.int64)  # (the model's checkpoints the positions go with, as a trainer saves them)
  models = tf.train.CheckpointManager(tf.train.Checkpoint(step=step), model_dir, max_to_keep=3,
                                      checkpoint_name=checkpointing.CHECKPOINT_NAME)
  models.save(checkpoint_number=2)
  positions(f"{a},{b}").save(2, is_chief=True)
  positions(f"{b},{a}").check_topology()  # the same files, another order
  monkeypatch.chdir(tmp_path)
  positions("./b,a").check_topology()  # ... and relative spellings
  with pytest.raises(ValueError, match=r"other list of training files[\s\S]*input_resume=skip"):
    positions(f"{a},{b},{c}").check_topology()
  with pytest.raises(ValueError, match="input_resume=skip"):
    positions(c).check_topology()
  # A run from before the digest was recorded: resumable, and its next save records the list.
  topology_file = tmp_path / "run" / "input_state" / "topology.json"
  topology_file.write_text(json.dumps(split))
  old = positions(f"{a},{b}")
  old.check_topology()
  models.save(checkpoint_number=4)
  old.save(4, is_chief=True)
  assert checkpointing.TRAIN_FILES_KEY in json.loads(topology_file.read_text())
  assert checkpointing.train_files_digest("dummy") is None  # the synthetic input names no files


def test_input_positions_over_training_files_changed_in_place_are_refused(tmp_path):
  """Review s56 (the journey): a training CSV corrected in place (same name, labels flipped) was resumed as the same
  input: a finished run exited 0 keeping the model of the old labels, a longer one drew the old rows from the
  restored shuffle buffer. The files' bytes are recorded beside their names, and a change is refused naming a new
  model_dir and input_resume=skip; the same bytes written again resume, and so do positions saved before the bytes
  were recorded."""
  a = _records(tmp_path / "a", 4)
  split = {"num_workers": 1, "num_replicas": 1, "global_batch_size": 2}
  model_dir = str(tmp_path / "run")

  def positions():
    topology = dict(split, **checkpointing.train_input_identity(a))
    return checkpointing.InputPositions(model_dir, 0, iter(tf.data.TFRecordDataset([a])), 3, topology)

  step = tf.Variable(0, dtype=tf.int64)
  models = tf.train.CheckpointManager(tf.train.Checkpoint(step=step), model_dir, max_to_keep=3,
                                      checkpoint_name=checkpointing.CHECKPOINT_NAME)
  models.save(checkpoint_number=2)
  positions().save(2, is_chief=True)
  topology_file = tmp_path / "run" / "input_state" / "topology.json"
  assert json.loads(topology_file.read_text())[checkpointing.TRAIN_CONTENT_KEY]
  _records(tmp_path / "a", 4)  # the same bytes, written again
  positions().check_topology()
  _records(tmp_path / "a", 5)  # ... and other bytes under the same name
  with pytest.raises(ValueError, match=r"training files changed[\s\S]*new --model_dir[\s\S]*input_resume=skip"):
    positions().check_topology()
  topology_file.write_text(json.dumps(dict(split, **{checkpointing.TRAIN_FILES_KEY: checkpointing.train_files_digest(
      a)})))  # (as a run before 2026-12-05 recorded it)
  positions().check_topology()


def test_a_notice_after_the_last_check_does_not_stop_the_trainers_next_train(tmp_path):
  """A SIGTERM that arrives after the last preemption check (here: in the last round's `on_loop_end`) ends that
  train() as completed, and train() clears it: a second train() of the same trainer (extended steps) trains instead of
  stopping at once for a notice already behind it."""
  trainer = train_lib.Trainer(tiny_params(trainer=dict(SHORT, max_to_keep=2)), str(tmp_path / "run"))

  def notice_at_the_end(step, logs):
    del logs
    if step == SHORT["train_steps"]:
      trainer.preemption.request()

  first = trainer.train(on_loop_end=notice_at_the_end)
  assert (first["status"], first["global_step"]) == ("completed", 4)
  assert not trainer.preemption.requested
  trainer.params = tiny_params(trainer=dict(SHORT, max_to_keep=2, train_steps=6))
  second = trainer.train()
  assert (second["status"], second["global_step"]) == ("completed", 6)


def test_a_notice_after_train_ends_in_run_experiment_does_not_stop_the_returned_trainer(tmp_path, monkeypatch):
  """run_experiment's watcher spans the resume to the end of the run; a notice after train() (here: as train()
  returns, before the summary's best checkpoint is read) finds training finished, and is dropped with the watcher
  instead of stopping the returned trainer's next train() at once. (The notice is recorded as the watcher's handler
  records a SIGTERM: a real signal would kill a pytest-xdist worker, where the handler is not installed.)"""
  real = train_lib.Trainer.train

  def train_then_a_notice(self, *args, **kwargs):
    result = real(self, *args, **kwargs)
    self.preemption.request()
    return result

  monkeypatch.setattr(train_lib.Trainer, "train", train_then_a_notice)
  result = train_lib.run_experiment(tiny_params(trainer=SHORT), str(tmp_path / "run"), "train")
  monkeypatch.setattr(train_lib.Trainer, "train", real)
  trainer = result["trainer"]
  assert (result["status"], result["global_step"]) == ("completed", 4)
  assert not trainer.preemption.requested
  trainer.params = tiny_params(trainer=dict(SHORT, train_steps=6))
  assert trainer.train()["status"] == "completed"
