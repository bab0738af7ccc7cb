"""Input positions after a `runtime.input_resume=skip` run (s33 fixC item 3).

`input_state/topology.json` records the split and the digest of the training file list the saved iterator positions
index, so that a position is never restored over other files. A skip run writes no positions and leaves topology.json
as the last iterator-mode run wrote it; the positions it describes then no longer resume the run. Before: an `auto`
(iterator) restart after a skip run over new files — what the digest's own error tells to do — was refused for the
old digest although no position would be restored, and when the old positions' checkpoints were still kept it
restored one of them, rolling back the skip run's steps with only a "lacks the input state" warning.
"""

import pytest
import tensorflow as tf

from official_albert.training import checkpointing

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
  _model_saves(model_dir, [6, 8])  # the skip run over B: checkpoints 4, 6, 8 are kept, no positions
  restart = _positions(model_dir, b)
  restart.check_topology()  # (was: refused for A's digest)
  assert restart.current_steps() == []
  assert not restart.exists(4)  # (was: True, and the trainer rolled the run back from step 8 to 4)


def test_the_only_checkpoint_of_a_skip_run_resumes_by_skipping_over_its_files(iterator_run):
  model_dir, _, b = iterator_run
  _model_saves(model_dir, [6], max_to_keep=1)  # a skip run over B with max_to_keep=1: only ckpt-6
  restart = _positions(model_dir, b)
  restart.check_topology()  # (was: refused for A's digest; the trainer then resumes ckpt-6 by skipping)
  assert not restart.exists(6)
  restart.save(8, is_chief=True)  # its first save records B's digest
  assert restart.saved_topology() == restart.topology


def test_a_kill_between_the_two_saves_still_falls_back_and_files_are_still_checked(iterator_run):
  """One checkpoint newer than the newest position is a kill between the model's save and the position's: the
  previous step resumes exactly, and a changed file list is still refused."""
  model_dir, a, b = iterator_run
  _model_saves(model_dir, [6])
  assert _positions(model_dir, a).current_steps() == [2, 4]
  assert _positions(model_dir, a).exists(4) and not _positions(model_dir, a).exists(6)
  with pytest.raises(ValueError, match=r"other list of training files[\s\S]*input_resume=skip"):
    _positions(model_dir, b).check_topology()
