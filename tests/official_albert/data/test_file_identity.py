"""What identifies an input's files by their bytes (official_albert/data/file_identity.py): the training positions'
and the best checkpoint's key (review s56). A raw text file is hashed whole at any size (a label flipped in an 80 MB
MNLI train.tsv is a change); a large binary input by its files' sizes and ends (a start does not read a corpus
through); a path that cannot be read now gives no digest (nothing compared), never an error."""

import numpy as np

from official_albert.data import file_identity


def _write(path, data):
  path.write_bytes(data)
  return str(path)


def test_raw_text_is_hashed_whole_and_large_binary_inputs_by_their_ends(tmp_path, monkeypatch):
  monkeypatch.setattr(file_identity, "FULL_HASH_TOTAL", 1 << 20)  # (256 MiB in the library)
  middle = (1 << 21) // 2
  body = np.random.default_rng(0).bytes(1 << 21)  # 2 MiB: above the budget
  flipped = body[:middle] + bytes([body[middle] ^ 1]) + body[middle + 1:]
  for name, whole in (("train.csv", True), ("train.tsv.gz", True), ("shard-0.tfrecord", False)):
    path = tmp_path / name
    before = file_identity.content_digest(_write(path, body))
    after = file_identity.content_digest(_write(path, flipped))
    assert (before != after) == whole, name
  # The same bytes under another name and folder are the same input; an input within the budget is read whole.
  (tmp_path / "copy").mkdir()
  small = b"x" * 1000 + b"y" * 1000
  assert file_identity.content_digest(_write(tmp_path / "a.tfrecord", small)) == file_identity.content_digest(
      _write(tmp_path / "copy" / "b.tfrecord", small))
  assert file_identity.content_digest(str(tmp_path / "a.tfrecord")) != file_identity.content_digest(
      _write(tmp_path / "c.tfrecord", small[:999] + b"z" + small[1000:]))


def test_inputs_that_cannot_be_read_now_give_no_digest(tmp_path):
  for path in ("", None, "dummy", str(tmp_path / "missing.csv"), "hdfs://nowhere/dev.csv", "s3://bucket/dev.csv",
               str(tmp_path)):
    assert file_identity.content_digest(path) is None, path
  assert file_identity.evaluation_content("hdfs://nowhere/dev.csv") == {}
