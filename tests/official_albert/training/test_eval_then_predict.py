"""Evaluation, then prediction, in one process on 2 replicas (logical CPUs): the predictions of predict alone.

Each `train.run` makes its own MirroredStrategy. TensorFlow starts every one's collective keys at group 1, instance
100, and the runtime keeps what it resolved for a key for the life of the process, so the predict run's all-gather
met the eval run's records ("Shape mismatch in the collective instance 101" where the per-replica batches differ)
until `distribute.mirrored_strategy` gave each strategy group keys of its own.
"""

import csv
import json
import os
import subprocess
import sys

import pytest

from official_albert import train
from tests.conftest import CHILD_PYTHONPATH
from tests.tiny import TRAIN_MODEL

TEXTS = ["a good and fine film", "great fun", "lovely, warm story", "a bad and dull film", "awful mess"]

# The child: eval, then predict, each a run of its own (a strategy each) on 2 logical CPUs; prints the predict file.
_EVAL_THEN_PREDICT = """
import json, sys
from official_albert import train
model_dir, override = sys.argv[1], sys.argv[2]
train.run("text_classification", "eval", model_dir, params_override=override)
result = train.run("text_classification", "predict", model_dir, params_override=override)
print(json.dumps(open(next(iter(result["files"].values())), encoding="utf-8").read()))
"""


def _write(path, rows):
  with open(path, "w", newline="", encoding="utf-8") as f:
    writer = csv.writer(f, lineterminator="\n")
    writer.writerow(["id", "text", "label"])
    writer.writerows(rows)
  return str(path)


def _override(root, spm_model_file, runtime):
  def data(name, batch, training=False):
    return {"input_path": str(root / name), "global_batch_size": batch, "seq_length": 32, "is_training": training,
            "drop_remainder": training, "seed": 1}
  # Evaluation: 2 rows per replica; prediction: 1 (the shapes that collided), 5 rows (the last batch padded).
  task = {"model": TRAIN_MODEL, "classifier_dropout": 0.0, "spm_model_file": spm_model_file, "id_column": "id",
          "train_data": data("train.csv", 8, True), "validation_data": data("train.csv", 4),
          "predict_data": data("test.csv", 2)}
  return json.dumps({"task": task, "runtime": dict(runtime, seed=3),
                     "trainer": {"train_steps": 2, "steps_per_loop": 2, "checkpoint_interval": 2,
                                 "summary_interval": 2, "warmup_steps": 0, "learning_rate": 1e-3}})


def _rows(text):
  return list(csv.DictReader(text.splitlines()))


@pytest.mark.large
def test_eval_then_predict_on_two_replicas_gives_the_one_replica_predictions(tmp_path, spm_model_file):
  _write(tmp_path / "train.csv", [(f"r{i}", TEXTS[i % 5], "pos" if i % 2 else "neg") for i in range(8)])
  _write(tmp_path / "test.csv", [(f"t{i}", TEXTS[(i + 2) % 5], "") for i in range(5)])
  model_dir = str(tmp_path / "model")
  one = _override(tmp_path, spm_model_file, {"distribution_strategy": "one_device"})
  train.run("text_classification", "train", model_dir, params_override=one)
  alone = train.run("text_classification", "predict", model_dir, params_override=one)
  with open(next(iter(alone["files"].values())), encoding="utf-8") as f:
    expected = _rows(f.read())

  env = dict(os.environ, PYTHONPATH=CHILD_PYTHONPATH, TF_CPP_MIN_LOG_LEVEL="2")
  two = _override(tmp_path, spm_model_file, {"num_cpu_devices": 2})
  done = subprocess.run([sys.executable, "-c", _EVAL_THEN_PREDICT, model_dir, two], env=env, capture_output=True,
                        text=True, timeout=600, check=False)
  assert done.returncode == 0, done.stderr[-3000:]
  got = _rows(json.loads(done.stdout.strip().splitlines()[-1]))

  assert [r["id"] for r in got] == [r["id"] for r in expected] == [f"t{i}" for i in range(5)]
  assert [r["prediction"] for r in got] == [r["prediction"] for r in expected]
  for mine, theirs in zip(got, expected):
    for key in ("score", "score_neg", "score_pos"):
      assert float(mine[key]) == pytest.approx(float(theirs[key]), abs=1e-5), (mine, theirs)
