"""The raw-file record cache's key (`official_albert.data.records.input_fingerprint`) sees what changes the records.

Records are numbered in the order of the input files, and predictions are matched to rows by that number, so the same
files in another order must rebuild (a sorted key reused the first order's records and put predictions on the wrong
rows); and a same-size rewrite of a file within one second must rebuild too (TF's stat gives whole seconds).
"""

import os

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
