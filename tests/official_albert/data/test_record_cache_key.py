"""The raw-file record cache's key (`official_albert.data.records.input_fingerprint`) sees what changes the records.

Records are numbered in the order of the input files, and predictions are matched to rows by that number, so the same
files in another order must rebuild (a sorted key reused the first order's records and put predictions on the wrong
rows); and a same-size rewrite of a file must rebuild too, within one second (TF's stat gives whole seconds) or with
its modification time restored (`cp -p`, `rsync -t`, `touch -r`).
"""

import json
import os

import numpy as np
import pytest

from official_albert.data import records


def test_the_order_of_the_files_is_part_of_the_key(tmp_path):
  a, b = tmp_path / "test.csv", tmp_path / "test.jsonl"
  a.write_text("id,text\n1,a good film\n", encoding="utf-8")
  b.write_text('{"id": 2, "text": "a dull one"}\n', encoding="utf-8")
  assert records.input_fingerprint([str(a), str(b)]) != records.input_fingerprint([str(b), str(a)])
  assert [f["path"] for f in records.input_fingerprint([str(b), str(a)])] == [str(b), str(a)]


def test_a_same_size_rewrite_within_a_second_changes_the_key(tmp_path):
  path = tmp_path / "rows.csv"
  path.write_text("id,text\n1,good film\n", encoding="utf-8")
  os.utime(path, ns=(1_700_000_000_100_000_000, 1_700_000_000_100_000_000))
  before = records.input_fingerprint([str(path)])
  path.write_text("id,text\n2,awful one\n", encoding="utf-8")  # (same size)
  os.utime(path, ns=(1_700_000_000_600_000_000, 1_700_000_000_600_000_000))  # (same second)
  assert records.input_fingerprint([str(path)]) != before


def test_a_same_size_edit_with_its_time_restored_changes_the_key(tmp_path):
  """The key is the content's: a multiple-choice row with its choices swapped (same size, `touch -r` back to the old
  time) reused the old records, and the predictions named the new first choice with the old one's logit."""
  path = tmp_path / "rows.jsonl"
  path.write_text('{"question": "Where?", "choices": ["on the mat", "in a tree"]}\n', encoding="utf-8")
  before, stat = records.input_fingerprint([str(path)]), os.stat(path)
  path.write_text('{"question": "Where?", "choices": ["in a tree", "on the mat"]}\n', encoding="utf-8")
  os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
  assert os.stat(path).st_size == stat.st_size
  assert records.input_fingerprint([str(path)]) != before
  copy = tmp_path / "copy.jsonl"
  copy.write_bytes(path.read_bytes())
  assert records.input_fingerprint([str(copy)])[0]["sha256"] == records.input_fingerprint([str(path)])[0]["sha256"]


def test_an_entry_written_before_the_hash_is_compared_as_written(tmp_path):
  """Records made before the key held the content's hash (path, size, mtime_nsec: GLUE predict records, whose meta
  names the TSV whose ids they take) keep their source until it changes, instead of reading as changed."""
  path = tmp_path / "test.tsv"
  path.write_text("id\tsentence\n907\ta film\n", encoding="utf-8")
  stat = os.stat(path)
  legacy = {"path": str(path), "size": stat.st_size, "mtime_nsec": stat.st_mtime_ns}
  assert records.unchanged_input(legacy) and records.unchanged_input(records.input_fingerprint([str(path)])[0])
  path.write_text("id\tsentence\n908\ta film\n", encoding="utf-8")
  os.utime(path, ns=(stat.st_atime_ns + 10**9, stat.st_mtime_ns + 10**9))
  assert not records.unchanged_input(legacy)


def test_a_run_killed_before_its_meta_is_written_leaves_no_reusable_cache(tmp_path, monkeypatch):
  """The old meta is removed before the new records replace the old ones: a run killed between the two writes left
  the old key beside the new records, and the next run with the old settings reused the wrong records."""
  record_path, meta_path = str(tmp_path / "dev.tf_record"), str(tmp_path / "dev.meta.json")
  build = lambda n: (lambda: ([{"input_word_ids": np.zeros([n], np.int64)}], {"length": n}))  # noqa: E731
  records.build_or_reuse(record_path, meta_path, {"max_seq_length": 32}, build(32))

  def killed(*args, **kwargs):
    raise KeyboardInterrupt("killed before the meta write")
  monkeypatch.setattr(records.file_io, "atomic_write_json", killed)
  with pytest.raises(KeyboardInterrupt):
    records.build_or_reuse(record_path, meta_path, {"max_seq_length": 64}, build(64))
  monkeypatch.undo()
  meta = records.build_or_reuse(record_path, meta_path, {"max_seq_length": 32}, build(32))
  assert not meta["reused_cache"]
  assert meta["length"] == 32


def test_records_cached_by_earlier_readers_are_rebuilt(tmp_path, monkeypatch):
  """A reader that turns the same files into other records (labels compared in NFC, 2026-11-30) must not reuse the
  caches the earlier reader built: READERS_VERSION is part of every key (they were reused as they were)."""
  record_path, meta_path = str(tmp_path / "train.tf_record"), str(tmp_path / "train.meta.json")
  build = lambda: ([{"input_word_ids": np.zeros([4], np.int64)}], {})  # noqa: E731
  assert records.build_or_reuse(record_path, meta_path, {"k": 1}, build)["reused_cache"] is False
  assert records.build_or_reuse(record_path, meta_path, {"k": 1}, build)["reused_cache"] is True
  assert records.cached_meta(meta_path, record_path, {"k": 1}) is not None
  monkeypatch.setattr(records, "READERS_VERSION", "a later reader")
  assert records.cached_meta(meta_path, record_path, {"k": 1}) is None
  assert records.build_or_reuse(record_path, meta_path, {"k": 1}, build)["reused_cache"] is False


def test_a_meta_beside_another_builds_records_is_not_reused(tmp_path):
  """Two builds with other settings into one folder (fixed names: create_finetuning_data's `<task>_<split>`) could
  leave run A's meta beside run B's records (A's meta written just after B's rename): the meta now records the record
  file it was written with, and one that does not match it is not reused."""
  record_path, meta_path = str(tmp_path / "glue_mrpc_dev.tf_record"), str(tmp_path / "glue_mrpc_dev.meta.json")
  build = lambda n: (lambda: ([{"input_word_ids": np.zeros([n], np.int64)}], {"length": n}))  # noqa: E731
  records.build_or_reuse(record_path, meta_path, {"do_lower_case": True}, build(32))
  assert records.cached_meta(meta_path, record_path, {"do_lower_case": True}) is not None
  records.write_tfrecord(record_path, [{"input_word_ids": np.ones([32], np.int64)}])  # B's records, A's meta
  assert records.cached_meta(meta_path, record_path, {"do_lower_case": True}) is None
  meta = records.build_or_reuse(record_path, meta_path, {"do_lower_case": True}, build(32))
  assert not meta["reused_cache"]
  assert records.build_or_reuse(record_path, meta_path, {"do_lower_case": True}, build(32))["reused_cache"]


def test_a_meta_written_before_the_record_file_was_kept_is_still_reused(tmp_path):
  """An older version's cache (no record-file stamp) stays usable: a read-only or another user's cache folder could
  not be rebuilt."""
  record_path, meta_path = str(tmp_path / "train.tf_record"), str(tmp_path / "train.meta.json")
  build = lambda: ([{"input_word_ids": np.zeros([4], np.int64)}], {})  # noqa: E731
  records.build_or_reuse(record_path, meta_path, {"k": 1}, build)
  meta = json.load(open(meta_path))
  del meta[records.RECORD_FILE_KEY]
  json.dump(meta, open(meta_path, "w"))
  assert records.build_or_reuse(record_path, meta_path, {"k": 1}, build)["reused_cache"] is True


def test_a_record_file_copied_or_renamed_elsewhere_keeps_its_stamp(tmp_path):
  """A FUSE object-store mount renames by copying (a new modification time): the stamp is the content's."""
  record_path, meta_path = str(tmp_path / "train.tf_record"), str(tmp_path / "train.meta.json")
  build = lambda: ([{"input_word_ids": np.arange(4, dtype=np.int64)}], {})  # noqa: E731
  records.build_or_reuse(record_path, meta_path, {"k": 1}, build)
  os.utime(record_path, ns=(1, 1))
  assert records.build_or_reuse(record_path, meta_path, {"k": 1}, build)["reused_cache"] is True
