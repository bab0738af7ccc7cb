"""Which process writes SQuAD's evaluation prediction files: the chief only, `task.predictions_dir` set or not.

The trainer marks every worker but the chief by clearing the task's `logging_dir` (`Trainer.__init__`); the files go
to `predictions_dir`, else `logging_dir`. Tested at the task's level (no multi-worker run): the same calls the trainer
makes, on a v1 and a v2 task whose post-processing is scripted.
"""

import os

import pytest

from tasks import squad

CONTEXT = "Paris is in France."
ANSWERED = {"id": "a1", "question": "?", "answers": [{"text": "Paris", "answer_start": 0}]}
UNANSWERABLE = {"id": "n1", "question": "?", "answers": [], "is_impossible": True}  # v2 only
PREDICTIONS = {"a1": "Paris", "n1": "France"}
NULL_ODDS = {"a1": -1.0, "n1": 1.0}


def _task(v2, predictions_dir, logging_dir):
  task = squad.SquadTask(squad.SquadTaskConfig(version_2_with_negative=v2, predictions_dir=predictions_dir),
                         logging_dir=logging_dir)
  questions = [ANSWERED, UNANSWERABLE] if v2 else [ANSWERED]
  dataset = [{"title": "t", "paragraphs": [{"context": CONTEXT, "qas": questions}]}]
  task._eval_data = (None, None, dataset)  # pylint: disable=protected-access
  keep = {q["id"] for q in questions}
  task.postprocess = lambda logs: (None, {k: v for k, v in PREDICTIONS.items() if k in keep}, {},
                                   {k: v for k, v in NULL_ODDS.items() if k in keep} if v2 else None)
  return task


def _written(directory):
  return sorted(os.listdir(directory)) if os.path.isdir(directory) else []


@pytest.mark.parametrize("v2", [False, True], ids=["v1", "v2"])
def test_only_the_chief_writes_the_prediction_files(tmp_path, v2):
  """Before: `out_dir = predictions_dir or logging_dir`, so with task.predictions_dir set every worker of a
  multi-worker evaluation wrote the same files (the non-chief mark, logging_dir=None, was read only without it)."""
  files = ["nbest_predictions.json", "null_odds.json", "predictions.json"] if v2 else [
      "nbest_predictions.json", "predictions.json"]
  for predictions_dir in (str(tmp_path / "preds"), ""):
    model_dir = tmp_path / f"model_{bool(predictions_dir)}"
    out_dir = predictions_dir or str(model_dir)
    worker = _task(v2, predictions_dir, str(model_dir))
    worker.logging_dir = None  # what the trainer does on every worker but the chief
    results = worker.reduce_aggregated_logs({"logs": [1]})
    assert "f1" in results  # the metrics are still computed on every worker
    assert _written(out_dir) == [], (predictions_dir, _written(out_dir))
    chief = _task(v2, predictions_dir, str(model_dir))
    assert chief.reduce_aggregated_logs({"logs": [1]}) == results
    assert _written(out_dir) == files


def test_a_task_built_without_a_trainer_still_writes_to_predictions_dir(tmp_path):
  """A task made directly (no logging_dir, nothing cleared) writes to its predictions_dir, as before."""
  task = _task(False, str(tmp_path / "preds"), None)
  task.reduce_aggregated_logs({"logs": [1]})
  assert _written(tmp_path / "preds") == ["nbest_predictions.json", "predictions.json"]
  assert _written(tmp_path) == ["preds"]
