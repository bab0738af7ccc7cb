"""`--mode=predict` of the train binary: a tiny fine-tune, then prediction files from the restored checkpoint."""

import json
import os

import pytest
import tensorflow as tf

from data_prep import create_finetuning_data as cfd
from official_albert import train
from official_albert.training import train_lib
from tasks import glue
from tasks import race
from tests import tiny
from tests.tasks import task_steps

SEQ = 32
TINY_MODEL = dict(tiny.TRAIN_MODEL)
TRAINER = {"train_steps": 4, "steps_per_loop": 2, "checkpoint_interval": 2, "validation_interval": 2,
           "summary_interval": 2, "validation_steps": -1, "warmup_steps": 0, "learning_rate": 1e-3}
RUNTIME = {"distribution_strategy": "one_device", "seed": 3}


def _override(task, **trainer):
  return json.dumps({"task": task, "trainer": dict(TRAINER, **trainer), "runtime": RUNTIME})


def _data(path, seq=SEQ, batch=4, training=False):
  return {"input_path": path, "global_batch_size": batch, "seq_length": seq, "is_training": training,
          "drop_remainder": training, "seed": 1}


@pytest.fixture(scope="module")
def sst2(tmp_path_factory, spm_model_file):
  """An SST-2-like task (train.tsv, test.tsv with an index column), its records and a 4-step train_and_eval run."""
  root = tmp_path_factory.mktemp("sst2")
  glue_dir = root / "SST-2"
  glue_dir.mkdir()
  good, bad = ["a good and fine film", "great fun"], ["a bad and dull film", "awful mess"]
  train_rows = [f"{t}\t{y}" for i in range(8) for t, y in ((good[i % 2], 1), (bad[i % 2], 0))]
  (glue_dir / "train.tsv").write_text("sentence\tlabel\n" + "\n".join(train_rows) + "\n")
  # Indices deliberately not 0..N-1: the submission must carry the file's own index column.
  test_rows = [f"{100 + i}\t{(good + bad)[i % 4]} {i}" for i in range(11)]
  (glue_dir / "test.tsv").write_text("index\tsentence\n" + "\n".join(test_rows) + "\n")
  recs = cfd.create_finetuning_data("glue/sst-2", str(root / "records"), spm_model_file, splits=["train", "test"],
                                    input_dir=str(root), max_seq_length=SEQ)
  task = {"model": TINY_MODEL, "classifier_dropout": 0.0,
          "train_data": _data(recs["train"]["record_path"], batch=8, training=True),
          "validation_data": _data(recs["train"]["record_path"], batch=16),
          "predict_data": _data(recs["test"]["record_path"], batch=4),
          "predict_file": str(glue_dir / "test.tsv")}
  model_dir = str(root / "model")
  result = train.run("glue/sst-2", "train_and_eval", model_dir, params_override=_override(task))
  assert result["global_step"] == 4 and result["best_checkpoint"] is not None
  return {"root": root, "task": task, "model_dir": model_dir, "best": result["best_checkpoint"]}


@pytest.mark.slow
def test_glue_predict_writes_submission_from_best_checkpoint(sst2):
  task = dict(sst2["task"])
  # Predict-only must not need the training files (reference bug #30).
  task["train_data"] = dict(task["train_data"], input_path=str(sst2["root"] / "missing" / "*.tf_record"))
  result = train.run("glue/sst-2", "predict", sst2["model_dir"], params_override=_override(task))
  assert result["checkpoint"] == f"{sst2['model_dir']}/{train_lib.BEST_CHECKPOINT_PREFIX}"
  assert result["global_step"] == sst2["best"]["global_step"]
  path = result["files"]["submission"]
  assert path == os.path.join(sst2["model_dir"], "predictions", "SST-2.tsv")
  lines = open(path).read().splitlines()
  assert lines[0] == "index\tprediction" and len(lines) == 12  # 11 test rows; batch 4 leaves a partial batch.
  rows = [line.split("\t") for line in lines[1:]]
  assert [r[0] for r in rows] == [str(100 + i) for i in range(11)]
  assert {r[1] for r in rows} <= {"0", "1"}

  # The same predictions as the model restored by hand from model.ckpt-best.
  params = train.build_params("glue/sst-2", params_override=_override(sst2["task"]))
  gtask = glue.GlueTask(params.task)
  model = gtask.build_model()
  tf.train.Checkpoint(model=model).read(result["checkpoint"]).expect_partial()
  examples = glue.read_examples("sst-2", "", "test", path=params.task.predict_file)
  expected = task_steps.predict_submission(gtask, model, params.task.predict_data, examples,
                                           str(sst2["root"] / "by_hand"))
  assert open(expected).read() == open(path).read()


def test_glue_predict_checkpoint_choice_and_errors(sst2, tmp_path):
  task = dict(sst2["task"], predict_file="")
  result = train_lib.run_experiment(train.build_params("glue/sst-2", params_override=_override(task)),
                                    sst2["model_dir"], "predict", checkpoint=f"{sst2['model_dir']}/ckpt-2")
  assert result["global_step"] == 2
  rows = open(result["files"]["submission"]).read().splitlines()[1:]
  # No predict_file: the index column of the file the records' .meta.json names (100.., not 0..N-1).
  assert [r.split("\t")[0] for r in rows] == [str(100 + i) for i in range(11)]

  with pytest.raises(ValueError, match="predict_data.input_path"):
    train.run("glue/sst-2", "predict", sst2["model_dir"],
              params_override=_override(dict(task, predict_data=_data(""))))
  with pytest.raises(FileNotFoundError, match="no checkpoint"):
    train.run("glue/sst-2", "predict", str(tmp_path / "empty"), params_override=_override(task))
  with pytest.raises(FileNotFoundError, match="ckpt-99"):
    train.run("glue/sst-2", "predict", sst2["model_dir"], params_override=_override(task),
              checkpoint=f"{sst2['model_dir']}/ckpt-99")
  # A predict_file that does not match the records is an error, not a misaligned submission.
  short = tmp_path / "test.tsv"
  short.write_text("index\tsentence\n0\tgood\n")
  with pytest.raises(ValueError, match="1 examples but"):
    train.run("glue/sst-2", "predict", sst2["model_dir"],
              params_override=_override(dict(task, predict_file=str(short))))


def test_squad_v2_predict_files(shared_data_dir, spm_model_file, tmp_path):
  data_file = str(shared_data_dir / "squad" / "dev-v2.0.json")
  common = dict(input_file=data_file, max_seq_length=48, doc_stride=16, max_query_length=16)
  train_rec = cfd.create_finetuning_data("squad_v2", str(tmp_path / "train"), spm_model_file, splits=["train"],
                                         **common)["train"]["record_path"]
  test_rec = cfd.create_finetuning_data("squad_v2", str(tmp_path / "test"), spm_model_file, splits=["test"],
                                        **common)["test"]["record_path"]
  task = {"version_2_with_negative": True, "predict_file": data_file, "spm_model_file": spm_model_file,
          "doc_stride": 16, "max_query_length": 16, "model": TINY_MODEL,
          "train_data": _data(train_rec, seq=48, batch=8, training=True),
          "predict_data": _data(test_rec, seq=48, batch=16)}
  model_dir = str(tmp_path / "model")
  train.run("squad_v2", "train", model_dir, params_override=_override(task, train_steps=2))
  result = train.run("squad_v2", "predict", model_dir, params_override=_override(task))
  assert result["checkpoint"].endswith("ckpt-2")  # No evaluation ran: the latest checkpoint.
  out = tmp_path / "model" / "predictions"
  preds = json.load(open(out / "predictions.json"))
  nbest = json.load(open(out / "nbest_predictions.json"))
  null_odds = json.load(open(out / "null_odds.json"))
  qids = [qa["id"] for a in json.load(open(data_file))["data"] for p in a["paragraphs"] for qa in p["qas"]]
  assert list(preds) == qids and set(nbest) == set(qids) and set(null_odds) == set(qids)
  assert all(isinstance(v, str) for v in preds.values())
  # predictions.json applies the fixed threshold (0.0) to null_odds.json's scores.
  assert all(preds[q] == ("" if null_odds[q] > 0.0 else nbest[q][0]["text"]) for q in qids)


@pytest.mark.slow
def test_race_predict_file(spm_model_file, tmp_path):
  words = ["school", "war", "food", "sea"]
  for split in ("train", "test"):
    for level in race.LEVELS:
      d = tmp_path / "RACE" / split / level
      d.mkdir(parents=True)
      for i in range(2):
        (d / f"{i}.txt").write_text(json.dumps({
            "article": f"Article {i} about {level} school life .", "id": f"{level}{i}.txt",
            "questions": ["The story is about _ .", "Which is true ?"],
            "options": [words, words[::-1]], "answers": ["A", "D"]}))
  recs = cfd.create_finetuning_data("race", str(tmp_path / "records"), spm_model_file, splits=["train", "test"],
                                    input_dir=str(tmp_path), max_seq_length=SEQ, max_qa_length=16)
  task = {"model": TINY_MODEL, "classifier_dropout": 0.0,
          "train_data": _data(recs["train"]["record_path"], batch=4, training=True),
          "predict_data": _data(recs["test"]["record_path"], batch=3),
          "predict_input_dir": str(tmp_path), "predict_split": "test"}
  model_dir = str(tmp_path / "model")
  train.run("race", "train", model_dir, params_override=_override(task, train_steps=2))
  result = train.run("race", "predict", model_dir, params_override=_override(task))
  preds = json.load(open(result["files"]["predictions"]))
  expected_ids = [e.example_id for e in race.read_examples(str(tmp_path), "test")]
  assert list(preds) == expected_ids and len(preds) == 8
  assert set(preds.values()) <= set("ABCD")
