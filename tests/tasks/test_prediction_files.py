"""Prediction files (`tasks.text.predictions.write_rows`): every input's rows in a file of their own, as given."""

import json
import logging

from tasks.text import data as text_data
from tasks.text import predictions


def _examples(*paths):
  return [text_data.TextExample(path, line, str(line), f"text {line}", None, None) for path, line in paths]


def test_inputs_of_the_same_name_in_two_folders_get_a_file_each(tmp_path, caplog):
  """(Both went to test.predictions.csv, which then held b's rows only.)"""
  a, b = str(tmp_path / "a" / "test.csv"), str(tmp_path / "b" / "test.csv")
  examples = _examples((a, 1), (a, 2), (a, 3), (b, 1), (b, 2))
  rows = [{"id": e.guid, "text": e.text, "prediction": f"{e.path[-10]}{e.line}"} for e in examples]
  with caplog.at_level(logging.WARNING):
    written = predictions.write_rows(examples, rows, str(tmp_path / "out"), "", "jsonl")
  assert len(set(written.values())) == 2 and "other inputs also have the name 'test.csv'" in caplog.text
  for path, want in ((a, ["a1", "a2", "a3"]), (b, ["b1", "b2"])):
    with open(written[path], encoding="utf-8") as f:
      assert [json.loads(line)["prediction"] for line in f] == want
  one = predictions.write_rows(examples[:3], rows[:3], str(tmp_path / "one"), "", "jsonl")
  assert one[a].endswith("test.predictions.jsonl")  # (no suffix when the name is not shared)


def test_tsv_predictions_keep_backslashes_and_count_what_a_tsv_field_cannot_hold(tmp_path, caplog):
  """(The csv module's escapechar wrote C:\\dir as C:\\\\dir.)"""
  path = str(tmp_path / "in.tsv")
  examples = _examples((path, 1), (path, 2))
  rows = [{"id": "1", "text": "C:\\dir", "prediction": "pos"},
          {"id": "2", "text": "two\tcells\nlines", "prediction": "neg"}]
  with caplog.at_level(logging.WARNING):
    written = predictions.write_rows(examples, rows, str(tmp_path / "out"), "", "")
  with open(written[path], encoding="utf-8") as f:
    assert f.read() == "id\ttext\tprediction\n1\tC:\\dir\tpos\n2\ttwo cells lines\tneg\n"
  assert "1 value(s) held a tab or a line break" in caplog.text
