"""Input positions after a `runtime.input_resume=skip` run (s33 fixC item 3).

`input_state/topology.json` records the split and the digest of the training file list the saved iterator positions
index, so that a position is never restored over other files. A skip run writes no positions and leaves topology.json
as the last iterator-mode run wrote it; the positions it describes then no longer resume the run. Before: an `auto`
(iterator) restart after a skip run over new files — what the digest's own error tells to do — was refused for the
old digest although no position would be restored, and when the old positions' checkpoints were still kept it
restored one of them, rolling back the skip run's steps with only a "lacks the input state" warning.

s33 fixE: a run that saves no positions marks, at its saves, the step from which the positions are superseded
(`input_state/superseded.json`, `checkpointing.save_input_positions`). Before, "more than one checkpoint newer than
the newest position" stood for a skip run: two kills between the two saves were refused as one, and a skip run of
one checkpoint was restored over as a kill.
"""

import pytest
import tensorflow as tf

from official_albert.training import checkpointing
from official_albert.training import train_lib
from tests.official_albert.training.test_train_lib import tiny_params

SPLIT = {"num_workers": 1, "num_replicas": 1, "global_batch_size": 2}


def _records(path, n=4):
  with tf.io.TFRecordWriter(str(path)) as writer:
    for i in range(n):
      writer.write(f"{path.name}:{i}".encode())
  return str(path)


def _positions(model_dir, files):
  topology = dict(SPLIT, **{checkpointing.TRAIN_FILES_KEY: checkpointing.train_files_digest(files)})
  return checkpointing.InputPositions(model_dir, 0, iter(tf.data.TFRecordDataset([files])), 3, topology)


def _model_saves(model_dir, steps, max_to_keep=3):
  step = tf.Variable(0, dtype=tf.int64)
  manager = tf.train.CheckpointManager(tf.train.Checkpoint(step=step), model_dir, max_to_keep=max_to_keep,
                                       checkpoint_name=checkpointing.CHECKPOINT_NAME)
  for s in steps:
    step.assign(s)
    manager.save(checkpoint_number=s)


def _skip_saves(model_dir, steps, max_to_keep=3, is_chief=True):
  """A run with `runtime.input_resume=skip` saving `steps`: the model's checkpoint, then the trainer's call."""
  for s in steps:
    _model_saves(model_dir, [s], max_to_keep)
    checkpointing.save_input_positions(None, model_dir, s, is_chief)


@pytest.fixture
def iterator_run(tmp_path):
  """An iterator-mode run over files A: ckpt-2 and ckpt-4, with their positions and A's digest."""
  a, b = _records(tmp_path / "a"), _records(tmp_path / "b")
  model_dir = str(tmp_path / "run")
  _model_saves(model_dir, [2, 4])
  for step in (2, 4):
    _positions(model_dir, a).save(step, is_chief=True)
  return model_dir, a, b


def test_after_a_skip_run_over_new_files_no_old_position_is_restored_or_checked(iterator_run):
  model_dir, _, b = iterator_run
  _skip_saves(model_dir, [6, 8])  # the skip run over B: checkpoints 4, 6, 8 are kept, no positions
  restart = _positions(model_dir, b)
  restart.check_topology()  # (was: refused for A's digest)
  assert restart.current_steps() == []
  assert not restart.exists(4)  # (was: True, and the trainer rolled the run back from step 8 to 4)


def test_the_only_checkpoint_of_a_skip_run_resumes_by_skipping_over_its_files(iterator_run):
  model_dir, _, b = iterator_run
  _skip_saves(model_dir, [6], max_to_keep=1)  # a skip run over B with max_to_keep=1: only ckpt-6
  restart = _positions(model_dir, b)
  restart.check_topology()  # (was: refused for A's digest; the trainer then resumes ckpt-6 by skipping)
  assert not restart.exists(6)
  restart.save(8, is_chief=True)  # its first save records B's digest
  assert restart.saved_topology() == restart.topology


def test_a_skip_run_of_one_checkpoint_is_not_rolled_back_and_later_positions_count(iterator_run):
  """ckpt-2, 4, 6 kept, 6 the skip run's only one: positions 2 and 4 are not restored over it (before: exists(4), and
  the iterator restart rolled step 6 back to 4). An iterator run's later positions resume; a second skip run
  supersedes them in turn; a worker other than the chief writes no mark."""
  model_dir, a, b = iterator_run
  _skip_saves(model_dir, [6], is_chief=False)
  assert _positions(model_dir, a).exists(4)  # (no mark: as a kill between the two saves)
  _skip_saves(model_dir, [6])
  restart = _positions(model_dir, b)
  restart.check_topology()
  assert restart.current_steps() == [] and not restart.exists(4)
  _model_saves(model_dir, [8])  # the iterator restart (resumed ckpt-6 by skipping) saves step 8 with its position
  restart.save(8, is_chief=True)
  assert _positions(model_dir, b).current_steps() == [8] and _positions(model_dir, b).exists(8)
  with pytest.raises(ValueError, match="other list of training files"):
    _positions(model_dir, a).check_topology()  # topology.json is the iterator run's over B again
  _skip_saves(model_dir, [10, 12])
  assert _positions(model_dir, b).current_steps() == [] and not _positions(model_dir, b).exists(8)


def test_two_kills_between_the_two_saves_resume_the_last_position(iterator_run):
  """ckpt-6 saved, killed before its position; the restart from ckpt-4 is killed again at step 5 between the two
  saves (or trainer.checkpoint_interval changed, so ckpt-6 is never saved over): ckpt-4 resumes exactly (before:
  current_steps() was [] and the restart was refused with "no step with the input position of every worker")."""
  model_dir, a, b = iterator_run
  _model_saves(model_dir, [6])
  _model_saves(model_dir, [5])
  positions = _positions(model_dir, a)
  assert positions.current_steps() == [2, 4]
  assert positions.exists(4) and not positions.exists(5) and not positions.exists(6)
  positions.check_topology()
  with pytest.raises(ValueError, match="other list of training files"):
    _positions(model_dir, b).check_topology()


def test_a_kill_between_the_two_saves_still_falls_back_and_files_are_still_checked(iterator_run):
  """One checkpoint newer than the newest position is a kill between the model's save and the position's: the
  previous step resumes exactly, and a changed file list is still refused."""
  model_dir, a, b = iterator_run
  _model_saves(model_dir, [6])
  assert _positions(model_dir, a).current_steps() == [2, 4]
  assert _positions(model_dir, a).exists(4) and not _positions(model_dir, a).exists(6)
  with pytest.raises(ValueError, match=r"other list of training files[\s\S]*input_resume=skip"):
    _positions(model_dir, b).check_topology()


@pytest.mark.slow
def test_a_trainer_under_input_resume_skip_marks_the_positions_it_supersedes(tmp_path):
  """Through the trainer: iterator run to step 4 (ckpt-2, 4 and their positions), a skip run to 6 (its one
  checkpoint), then an `auto` restart: refused, naming input_resume=skip (before: ckpt-4 and its position were
  restored, rolling the skip run's steps back with only a warning)."""
  model_dir = str(tmp_path / "run")
  short = {"train_steps": 4, "steps_per_loop": 2, "checkpoint_interval": 2, "validation_interval": 2}
  train_lib.run_experiment(tiny_params(trainer=short), model_dir, "train")
  train_lib.run_experiment(tiny_params(trainer=dict(short, train_steps=6), runtime={"input_resume": "skip"}),
                           model_dir, "train")
  with pytest.raises(ValueError, match=r"no step with the input position[\s\S]*input_resume=skip"):
    train_lib.run_experiment(tiny_params(trainer=dict(short, train_steps=8)), model_dir, "train")
  assert checkpointing.superseded_step(model_dir) == 6


def test_positions_of_rotated_checkpoints_do_not_refuse_a_skip_resume(tmp_path):
  """max_to_keep=1, a kill between ckpt-4's save and its position's, a restart over other files: no position has a
  checkpoint left, so the run resumes ckpt-4 by skipping (docs/distributed_training.md) — the topology check guards
  nothing here and must not refuse it (review of 4d3e282: it did, on position 2's old file list)."""
  first, other, model_dir = _records(tmp_path / "a"), _records(tmp_path / "b"), str(tmp_path / "run")

  def positions(files):
    topology = dict(SPLIT, **{checkpointing.TRAIN_FILES_KEY: checkpointing.train_files_digest(files)})
    return checkpointing.InputPositions(model_dir, 0, iter(tf.data.TFRecordDataset([files])), 1, topology)
  _model_saves(model_dir, [2], 1)
  positions(first).save(2, True)
  _model_saves(model_dir, [4], 1)  # (killed before position 4; ckpt-2 rotated away)
  restarted = positions(other)
  assert not restarted.exists(4)
  restarted.check_topology()  # (no raise)
