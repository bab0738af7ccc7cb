"""RACE predictions.json keys each record by a question of its own level (audit s31 item 3).

Records built with `--race_levels=high,middle` hold the high questions first; predict re-read the ids in
`task.predict_levels` order (middle, high) and checked only the count, so every answer went to another question.
Each record's level now comes from its `level_ids` (collected at predict), else from the records' `.meta.json`.
"""

import json
import os

import numpy as np
import pytest
import tensorflow as tf

from data_prep.create_finetuning_data import create_finetuning_data
from experiments.registry import get_experiment
from official_albert.training import base_task

TRUTH = {"middle1.txt-0": "A", "middle2.txt-0": "B", "high1.txt-0": "C", "high2.txt-0": "D"}


def _article(path, answer, file_id):
  os.makedirs(os.path.dirname(path), exist_ok=True)
  with open(path, "w") as f:
    json.dump({"article": "text " + file_id, "questions": ["q?"], "options": [["a", "b", "c", "d"]],
               "answers": [answer], "id": file_id}, f)


@pytest.fixture(scope="module")
def high_first(tmp_path_factory, spm_model_file):
  """(RACE folder, test records made with race_levels=(high, middle), their labels, their level ids)."""
  root = str(tmp_path_factory.mktemp("race"))
  for file_id, answer in TRUTH.items():
    level, number = file_id[:-len("1.txt-0")], file_id[-len("1.txt-0")]
    _article(f"{root}/RACE/test/{level}/{number}.txt", answer, file_id[:-2])
  meta = create_finetuning_data("race", f"{root}/rec", spm_model_file, splits=["test"], input_dir=root,
                                max_seq_length=32, race_levels=("high", "middle"))
  record = meta["test"]["record_path"]
  spec = {"label_ids": tf.io.FixedLenFeature([], tf.int64), "level_ids": tf.io.FixedLenFeature([], tf.int64)}
  parsed = [tf.io.parse_single_example(r, spec) for r in tf.data.TFRecordDataset(record)]
  return root, record, [int(p["label_ids"]) for p in parsed], [int(p["level_ids"]) for p in parsed]


def _task(root, record, tmp_path, **changes):
  params = get_experiment("race").task.replace(predict_input_dir=root, **changes)
  params = params.replace(predict_data=params.predict_data.replace(input_path=record, seq_length=32))
  return base_task.create_task(params, logging_dir=str(tmp_path / "model"))


def _predictions(task, logs, tmp_path):
  out = tmp_path / "out"
  out.mkdir(exist_ok=True)
  task.write_prediction_files(logs, str(out))
  return json.loads((out / "predictions.json").read_text())


def test_records_in_another_level_order_are_keyed_by_the_meta(high_first, tmp_path):
  root, record, labels, _ = high_first
  perfect = np.eye(4)[labels]  # a model that answers every record right
  assert _predictions(_task(root, record, tmp_path), {"logits": [perfect]}, tmp_path) == TRUTH


def test_records_are_keyed_by_their_own_level_ids(high_first, tmp_path):
  root, record, labels, levels = high_first
  logs = {"logits": [np.eye(4)[labels][:3], np.eye(4)[labels][3:]],
          "level_ids": [np.asarray(levels[:3]), np.asarray(levels[3:])]}
  assert _predictions(_task(root, record, tmp_path), logs, tmp_path) == TRUTH


def test_levels_that_cannot_be_matched_are_an_error_naming_both(high_first, tmp_path):
  root, record, labels, _ = high_first
  with pytest.raises(ValueError, match=r"hold the levels \{'high': 2, 'middle': 2\} \(in record order\) but .* read "
                                       r"with task.predict_levels=\['middle'\] has \{'middle': 2\}"):
    _predictions(_task(root, record, tmp_path, predict_levels=["middle"]), {"logits": [np.eye(4)[labels]]}, tmp_path)
