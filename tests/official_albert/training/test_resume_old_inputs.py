"""An input position saved by another input pipeline (an older official_albert's, or other train_data settings) is
refused naming runtime.input_resume=skip, not with tf.data's raw "Failed to restore dataset iterator ... FlatMap:
Argument 7 is out of range" (a token_classification run resumed across versions failed so)."""

import pytest
import tensorflow as tf

from official_albert.training import checkpointing

TOPOLOGY = {"num_workers": 1, "num_replicas": 1, "global_batch_size": 1}


def _stream(columns: int):
  """Rows of `columns` cells, each expanded by a flat_map (whose saved position holds the row being expanded)."""
  rows = tf.data.Dataset.from_tensor_slices(tuple(tf.range(10, dtype=tf.int64) for _ in range(columns)))
  return iter(rows.flat_map(lambda *cells: tf.data.Dataset.from_tensors(tf.add_n(list(cells))).repeat(2)))


def _saved_at_step_3(directory, columns: int) -> None:
  """Saves the position of a `columns` stream read 3 rows into `directory` (as step 3)."""
  stream = _stream(columns)
  positions = checkpointing.InputPositions(directory, 0, stream, max_to_keep=3, topology=TOPOLOGY)
  for _ in range(3):
    next(stream)
  positions.save(3, is_chief=True)


def test_a_position_of_another_pipeline_names_input_resume_skip(tmp_path):
  _saved_at_step_3(str(tmp_path), 1)
  new = checkpointing.InputPositions(str(tmp_path), 0, _stream(2), max_to_keep=3, topology=TOPOLOGY)
  with pytest.raises(ValueError, match=r"does not fit this run's input pipeline.*runtime\.input_resume=skip") as e:
    new.restore(3)
  assert "worker-0/ckpt-3" in str(e.value) and "first 3 global batches" in str(e.value)
  assert isinstance(e.value.__cause__, tf.errors.InvalidArgumentError)


def test_a_position_of_the_same_pipeline_still_resumes(tmp_path):
  _saved_at_step_3(str(tmp_path), 2)
  again = _stream(2)
  checkpointing.InputPositions(str(tmp_path), 0, again, max_to_keep=3, topology=TOPOLOGY).restore(3)
  assert int(next(again)) == 2 * 1  # row 1's second copy: where the saved stream stood
