"""Multi-label cells as users' tools write them (`tasks.text.label_cells`): a cell written as a list is that list;
labels joined by another character than task.label_separator are named in a warning."""

import json
import logging

from tasks.text import data as text_data

MULTI = text_data.ReadOptions(label_kind="multi")


def _labels(path, options=MULTI):
  examples = text_data.read_examples([str(path)], options)
  return [e.label for e in examples], text_data.label_set(examples)


def test_a_label_cell_written_as_a_list_is_that_list(tmp_path):
  """pandas' to_csv of a list column (Python's repr), a JSON list in a CSV cell and a JSONL string holding a list
  were each one class, the cell's text ("['sports', 'politics']" beside "['sports']")."""
  pandas = tmp_path / "pandas.csv"
  pandas.write_text("text,label\nmatch and vote,\"['sports', 'politics']\"\nthe match,['sports']\nnone,[]\n",
                    encoding="utf-8")
  assert _labels(pandas) == ([["sports", "politics"], ["sports"], []], ["politics", "sports"])
  cell = tmp_path / "json_cell.csv"
  cell.write_text('text,label\nmatch and vote,"[""sports"", ""politics""]"\nthe vote,"[""politics""]"\n',
                  encoding="utf-8")
  assert _labels(cell) == ([["sports", "politics"], ["politics"]], ["politics", "sports"])
  rows = [{"text": "match and vote", "label": "['sports', 'politics']"}, {"text": "the match", "label": ["sports"]},
          {"text": "a note", "label": "[draft]|memo"},  # (not a list: split at | as any string)
          {"text": "a code", "label": "[2]"}, {"text": "two codes", "label": "[1]|[2]"}]  # (unquoted: names)
  jsonl = tmp_path / "rows.jsonl"
  jsonl.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
  assert _labels(jsonl) == ([["sports", "politics"], ["sports"], ["[draft]", "memo"], ["[2]"], ["[1]", "[2]"]],
                            ["[1]", "[2]", "[draft]", "memo", "politics", "sports"])


def test_labels_joined_by_another_character_are_named(tmp_path, caplog):
  path = tmp_path / "comma.csv"
  path.write_text('text,label\nmatch and vote,"sports, politics"\nthe match,sports\nthe vote,politics\n'
                  'a show,"Arts, Culture"\n', encoding="utf-8")
  with caplog.at_level(logging.WARNING):
    labels, names = _labels(path)
  assert names == ["Arts, Culture", "politics", "sports", "sports, politics"]  # (read as written: a warning only)
  assert ("1 row(s) hold 1 label(s) that are other labels joined by ',', not by task.label_separator='|' (e.g. "
          f"'sports, politics' at {path}:2)") in caplog.text
  assert "set task.label_separator=','" in caplog.text
  caplog.clear()
  with caplog.at_level(logging.WARNING):
    labels, names = _labels(path, text_data.ReadOptions(label_kind="multi", label_separator=","))
  assert labels[0] == ["sports", "politics"] and "joined by" not in caplog.text
