"""Prediction files (`tasks.text.predictions.write_rows`): every input's rows in a file of their own, as given."""

import csv
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


def test_csv_predictions_quote_a_lone_carriage_return_and_conll_tokens_lose_no_column(tmp_path, caplog):
  """(A text with a bare \r split its CSV row in two; a token with a space or line break split the CoNLL line.)"""
  path = str(tmp_path / "in.csv")
  examples = _examples((path, 1), (path, 2), (path, 3))
  rows = [{"id": "1", "text": "first", "prediction": "pos"}, {"id": "2", "text": "old mac\rline", "prediction": "neg"},
          {"id": "3", "text": "third", "prediction": "pos"}]
  written = predictions.write_rows(examples, rows, str(tmp_path / "out"), "", "")
  read = text_data.read_examples([written[path]], text_data.ReadOptions(text_column="text", label_column="prediction",
                                                                         id_column="id"))
  assert [(e.guid, e.text, e.label) for e in read] == [("1", "first", "pos"), ("2", "old mac\rline", "neg"),
                                                       ("3", "third", "pos")]
  conll = str(tmp_path / "tokens.jsonl")
  with caplog.at_level(logging.WARNING):
    written = predictions.write_rows(_examples((conll, 1), (conll, 2)),
                                     [{"tokens": ["Hi", "New York"], "tags": ["O", "B-LOC"]},
                                      {"tokens": ["a\nb"], "tags": [None]}], str(tmp_path / "out"), "", "conll")
  with open(written[conll], encoding="utf-8") as f:
    assert f.read() == "Hi\tO\nNew York\tB-LOC\n\na_b\t_\n\n"  # (tab-separated: a token keeps its spaces)
  assert "1 token(s) held a tab or a line break" in caplog.text


def test_an_input_file_named_twice_is_read_once(tmp_path, caplog):
  for name in ("train.csv", "test.csv"):
    (tmp_path / name).write_text("text,label\na,pos\nb,neg\n", encoding="utf-8")
  with caplog.at_level(logging.WARNING):
    files = text_data.expand_paths(f"{tmp_path}/*.csv,{tmp_path}/test.csv,{tmp_path}/./train.csv")
  assert files == [str(tmp_path / "test.csv"), str(tmp_path / "train.csv")]
  assert "names 2 file(s) more than once" in caplog.text


def test_a_gzip_inputs_predictions_are_named_and_written_as_the_plain_files(tmp_path):
  """`reviews.csv.gz` → `reviews.predictions.csv` (plain CSV, the format of the name without .gz)."""
  path = str(tmp_path / "reviews.csv.gz")
  examples = _examples((path, 1), (path, 2))
  rows = [{"id": e.guid, "text": e.text, "prediction": "pos"} for e in examples]
  written = predictions.write_rows(examples, rows, str(tmp_path / "out"), "", "")
  assert written[path].endswith("/reviews.predictions.csv")
  with open(written[path], encoding="utf-8") as f:
    assert f.read().splitlines() == ["id,text,prediction", "1,text 1,pos", "2,text 2,pos"]


def test_csv_cells_keep_small_regression_values_and_multi_label_sets(tmp_path, caplog):
  """(A regression's 3.2e-07 was written 0.000000; several labels joined by an empty separator, or a label holding
  the separator, made a cell that read back as other labels.)"""
  path = str(tmp_path / "in.csv")
  examples = _examples((path, 1), (path, 2), (path, 3))
  rows = [{"id": "1", "prediction": 3.2e-07}, {"id": "2", "prediction": -12.5}, {"id": "3", "prediction": 0.1}]
  written = predictions.write_rows(examples, rows, str(tmp_path / "reg"), "", "")
  read = text_data.read_examples([written[path]], text_data.ReadOptions(
      text_column="id", label_column="prediction", id_column="id", label_kind="float"))
  assert [e.label for e in read] == [3.2e-07, -12.5, 0.1]
  rows = [{"id": "1", "prediction": ["sports", "politics"], "scores": {"politics": 0.9, "sports": 0.8}},
          {"id": "2", "prediction": ["a|b", "c"], "scores": {"a|b": 0.9, "c": 0.8}},
          {"id": "3", "prediction": ["c"], "scores": {"a|b": 0.1, "c": 0.8}}]
  for separator, want in (("", ['["sports", "politics"]', '["a|b", "c"]', "c"]),
                          ("|", ["sports|politics", '["a|b", "c"]', "c"])):
    caplog.clear()
    with caplog.at_level(logging.WARNING):
      written = predictions.write_rows(examples, rows, str(tmp_path / f"multi{len(separator)}"), "", "", separator)
    with open(written[path], encoding="utf-8") as f:
      assert [row["prediction"] for row in csv.DictReader(f)] == want
    assert f"{2 - len(separator)} multi-label prediction(s) were written as a JSON list" in caplog.text
