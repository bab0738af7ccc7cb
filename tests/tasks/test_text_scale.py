"""The text tasks at many labels and rows: the same results as the simple formulas, without their cost.

Nothing here is timed: each test checks the behaviour the fast path must keep (equal values, equal files) and the
shape that makes it fast (one label index per label set, one row held while a prediction file is written).
"""

import csv
import io
import json
import os
import types
import weakref

import numpy as np
import pytest

from tasks.text import data as text_data
from tasks.text import label_lookup
from tasks.text import metrics as text_metrics
from tasks.text import predictions
from tasks.text.task import TextTask


def _macro_f1_per_class(labels, preds, num_labels):
  """The formula before bincount: four passes per class."""
  labels, preds = np.asarray(labels), np.asarray(preds)
  present = [k for k in range(num_labels) if np.any(labels == k) or np.any(preds == k)]
  scores = []
  for k in present:
    tp = float(np.sum((labels == k) & (preds == k)))
    denom = float(np.sum(labels == k) + np.sum(preds == k))
    scores.append(2 * tp / denom if denom else 0.0)
  return float(np.mean(scores)) if scores else 0.0


@pytest.mark.parametrize("seed", range(6))
def test_bincount_macro_f1_equals_the_per_class_formula(seed):
  """Classes never predicted, never present, both, -1 (unlabelled) rows, float arrays and empty ones."""
  rng = np.random.default_rng(seed)
  num_labels = int(rng.integers(1, 60))
  n = int(rng.integers(0, 400))
  labels = rng.integers(-1, max(1, num_labels // 2), n)  # (the upper classes never in the labels)
  preds = rng.choice(np.arange(0, num_labels, 3), n)  # (most classes never predicted)
  for gold, guess in ((labels, preds), (labels.astype(np.float32), preds), (labels, preds + 0.5), (preds, labels)):
    assert text_metrics.macro_f1(gold, guess, num_labels) == _macro_f1_per_class(gold, guess, num_labels)
  assert text_metrics.macro_f1([], [], num_labels) == 0.0
  assert text_metrics.macro_f1([num_labels + 3, np.nan], [np.inf, 0.0], num_labels) == _macro_f1_per_class(
      [num_labels + 3, np.nan], [np.inf, 0.0], num_labels)


def test_a_label_set_is_indexed_once_however_many_rows_are_looked_up(monkeypatch):
  """(Each lookup copied and hashed the whole label list: O(labels) per row's label.)"""
  labels = [f"cat_{i}" for i in range(5000)] + ["1.0"]
  built = []
  real = label_lookup._known
  monkeypatch.setattr(label_lookup, "_known", lambda names: built.append(len(names)) or real(names))
  values = [f"cat_{(i * 7) % 5000}" for i in range(2000)] + [1, 1.0, "1", "unseen"]
  found, unknown = text_data.resolve_labels(values, labels)
  assert found == values[:2000] + ["1.0", "1.0", "1.0"] and unknown == ["unseen"]
  record = text_data.text_record(text_data.TextExample("f", 1, "1", "t", None, ["cat_3", "1"]), [5], None, 8,
                                 "multi", labels)
  assert np.flatnonzero(record["label_ids"]).tolist() == [3, 5000]
  assert built == [len(labels)]
  labels.append("new")  # (a list that grew is indexed again: its new label is found)
  assert label_lookup.lookup(labels, "new") == 5001 and built == [len(labels) - 1, len(labels)]
  assert label_lookup.lookup(("cat_0", "cat_1"), "cat_1") == 1  # (another set, its own index)


def _rows(n, labels, probs):
  for i in range(n):
    yield {"id": str(i), "text": f"text {i}, with a comma", "prediction": labels[int(np.argmax(probs[i]))],
           "score": float(np.max(probs[i])), "scores": {lab: float(q) for lab, q in zip(labels, probs[i])}}


def _expected_csv(rows, labels):
  out = io.StringIO()
  writer = csv.writer(out, lineterminator="\n")
  writer.writerow(["id", "text", "prediction", "score"] + [f"score_{lab}" for lab in labels])
  for r in rows:
    writer.writerow([r["id"], r["text"], r["prediction"], f"{r['score']:.6f}"]
                    + [f"{r['scores'][lab]:.6f}" for lab in labels])
  return out.getvalue()


@pytest.mark.parametrize("fmt", ["csv", "jsonl"])
def test_a_300_label_models_prediction_files_are_the_same_streamed_or_listed(tmp_path, fmt):
  labels = [f"label_{i}" for i in range(300)]
  probs = np.random.default_rng(0).random((40, 300))
  a, b = str(tmp_path / "a.csv"), str(tmp_path / "b.csv")
  examples = [text_data.TextExample(a if i < 25 else b, i, str(i), "t") for i in range(40)]
  listed = predictions.write_rows(examples, list(_rows(40, labels, probs)), str(tmp_path / "listed"), "", fmt)
  streamed = predictions.write_rows(examples, _rows(40, labels, probs), str(tmp_path / "streamed"), "", fmt)
  rows = list(_rows(40, labels, probs))
  for path, part in ((a, rows[:25]), (b, rows[25:])):
    with open(listed[path], "rb") as f, open(streamed[path], "rb") as g:
      text = f.read()
      assert g.read() == text
    want = _expected_csv(part, labels) if fmt == "csv" else "".join(json.dumps(r) + "\n" for r in part)
    assert text == want.encode("utf-8")
  assert sorted(os.listdir(tmp_path / "streamed")) == [f"a.predictions.{fmt}", f"b.predictions.{fmt}"]


class _Row(dict):
  """A row that can be watched (weakref): whether the writer still holds it."""


def test_rows_are_written_as_they_come_and_let_go(tmp_path):
  """(Every row — a dict of all the labels' scores — was held until the whole file's text was built.)"""
  path = str(tmp_path / "in.csv")
  examples = [text_data.TextExample(path, i, str(i), "t") for i in range(50)]
  made = []

  def rows():
    for i in range(50):
      assert sum(ref() is not None for ref in made) <= 1  # (the row just written, at most)
      row = _Row(id=str(i), prediction=["a"], scores={"a": 0.75, "b": 0.25})
      made.append(weakref.ref(row))
      yield row
  written = predictions.write_rows(examples, rows(), str(tmp_path / "out"), "", "csv")
  with open(written[path], encoding="utf-8") as f:
    assert f.read().splitlines()[:2] == ["id,prediction,score_a,score_b", "0,a,0.750000,0.250000"]


def test_a_failed_stream_leaves_no_file_and_a_streamed_row_may_not_add_columns(tmp_path):
  path = str(tmp_path / "in.csv")
  examples = [text_data.TextExample(path, i, str(i), "t") for i in range(3)]

  def broken():
    yield {"id": "0", "prediction": "a"}
    raise RuntimeError("model failed")
  with pytest.raises(RuntimeError):
    predictions.write_rows(examples, broken(), str(tmp_path / "out"), "", "jsonl")
  assert os.listdir(tmp_path / "out") == []
  extra = iter([{"id": "0", "prediction": "a"}, {"id": "1", "prediction": "b", "score": 0.5}])
  with pytest.raises(ValueError, match=r"row 2 has the column\(s\) \['score'\], which its header"):
    predictions.write_rows(examples, extra, str(tmp_path / "out"), "", "csv")
  assert os.listdir(tmp_path / "out") == []


def test_the_task_makes_its_prediction_rows_as_they_are_written(tmp_path, monkeypatch):
  """`TextTask.write_prediction_files` hands the rows over as a generator; the file is as the rows say."""
  path = str(tmp_path / "in.csv")
  examples = [text_data.TextExample(path, i, str(i), f"text {i}") for i in range(4)]
  labels = [f"label_{i}" for i in range(300)]
  task = types.SimpleNamespace(
      predict_examples=lambda: examples, columns=lambda: {"text_pair_column": None, "input_format": ""},
      is_regression=False, label_kind="single", labels=labels, multi_label_threshold=0.5,
      params=types.SimpleNamespace(predict_data=types.SimpleNamespace(input_path=path), predict_output_format=""))
  task.probabilities = lambda logits: TextTask.probabilities(task, logits)
  logits = np.random.default_rng(1).standard_normal((4, 300))
  given = []
  real = predictions.write_rows

  def watched(examples, rows, *args):
    given.append(type(rows))
    return real(examples, rows, *args)
  monkeypatch.setattr(predictions, "write_rows", watched)
  written = TextTask.write_prediction_files(task, {"logits": [logits]}, str(tmp_path / "out"))
  assert given and not issubclass(given[0], (list, tuple))
  probs = TextTask.probabilities(task, logits)
  want = [{"id": e.guid, "text": e.text, "prediction": labels[int(np.argmax(p))], "score": float(np.max(p)),
           "scores": dict(zip(labels, map(float, p)))} for e, p in zip(examples, probs)]
  with open(written[path], encoding="utf-8") as f:
    assert f.read() == _expected_csv(want, labels)
