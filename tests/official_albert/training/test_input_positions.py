"""`checkpointing.InputPositions`: a position counts as saved only once its save has finished. A worker killed while
TF merged the index of its position left a truncated `ckpt-N.index`; the resume took it as saved and failed with
"file is too short to be an sstable" (seen in test_scale_out's kill -9 test)."""

import tensorflow as tf

from official_albert.training import checkpointing


def test_a_position_cut_short_is_not_taken_as_saved(tmp_path):
  iterator = iter(tf.data.Dataset.range(100))
  positions = checkpointing.InputPositions(str(tmp_path), 0, iterator, max_to_keep=3,
                                           topology={"num_workers": 1, "num_replicas": 1, "global_batch_size": 1})
  for _ in range(5):
    next(iterator)
  positions.save(5, is_chief=True)
  (tmp_path / "input_state" / "worker-0" / "ckpt-7.index").write_bytes(b"\x00" * 7)  # a merge cut short by a kill
  assert positions.exists(5) and not positions.exists(7) and not positions.exists(6)
  next(iterator)
  positions.restore(5)
  assert int(next(iterator)) == 5  # back where step 5 left it
