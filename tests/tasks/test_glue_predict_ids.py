"""A QQP submission's index is the test file's own id column, also when `task.predict_file` is ''.

Before: predict records made by create_finetuning_data from one's own QQP test TSV (ids shuffled, with gaps), read
with `task.predict_file=''`, gave submission rows numbered 0..N-1 in record order — right only for the standard
GLUE file, whose ids are 0..N-1. The records' `.meta.json` names the file they were written from; its ids are used.
"""

import logging
import os

import numpy as np
import pytest

from data_prep import create_finetuning_data as cfd
from official_albert.training.experiment_config import DataConfig
from tasks import glue

SEQ = 32
IDS = ["17", "3", "250", "9", "1000"]  # shuffled, with gaps: not 0..N-1


def _write_qqp(folder, ids):
  (folder / "QQP").mkdir(parents=True)
  rows = [f"{i}\twhat is a cat number {n}\twhat is a dog {n}" for n, i in enumerate(ids)]
  (folder / "QQP" / "test.tsv").write_text("id\tquestion1\tquestion2\n" + "\n".join(rows) + "\n", encoding="utf-8")
  return str(folder / "QQP" / "test.tsv")


def _task(input_path, predict_file=""):
  data = DataConfig(input_path=input_path, global_batch_size=2, seq_length=SEQ, is_training=False,
                    drop_remainder=False)
  return glue.GlueTask(glue.GlueTaskConfig(task_name="qqp", predict_data=data, predict_file=predict_file))


def _submission_ids(task, tmp_path, n):
  logits = np.tile(np.array([[0.2, 0.8]], np.float32), (n, 1))
  path = task.write_prediction_files({"logits": [logits]}, str(tmp_path / "out"))["submission"]
  lines = open(path, encoding="utf-8").read().splitlines()
  assert lines[0] == "index\tprediction"
  return [line.split("\t")[0] for line in lines[1:]]


@pytest.fixture()
def qqp_records(tmp_path, spm_model_file):
  test_file = _write_qqp(tmp_path / "glue", IDS)
  meta = cfd.create_finetuning_data("glue/qqp", str(tmp_path / "records"), spm_model_file, splits=["test"],
                                    input_dir=str(tmp_path / "glue"), max_seq_length=SEQ)["test"]
  assert meta["num_records"] == len(IDS)
  return test_file, meta["record_path"]


def test_records_of_ones_own_file_keep_its_ids(tmp_path, qqp_records, caplog):
  test_file, records = qqp_records
  with caplog.at_level(logging.INFO):
    assert _submission_ids(_task(records), tmp_path, len(IDS)) == IDS
  assert f"take the index column of {test_file}" in caplog.text
  assert _submission_ids(_task(records, predict_file=test_file), tmp_path, len(IDS)) == IDS  # (as before)
  assert _submission_ids(_task(test_file), tmp_path, len(IDS)) == IDS  # the raw TSV itself (as before)


def test_without_the_source_file_rows_are_numbered(tmp_path, qqp_records, caplog):
  test_file, records = qqp_records
  os.remove(test_file)
  with caplog.at_level(logging.WARNING):
    assert _submission_ids(_task(records), tmp_path, len(IDS)) == [str(i) for i in range(len(IDS))]
  assert "numbered 0..4 in record order" in caplog.text


def test_a_file_changed_since_the_records_is_not_read(tmp_path, qqp_records, caplog):
  """The same number of rows, other ids (a re-download, another sample): the records' predictions are not paired
  with them (review of 4399b8f: they were, at INFO)."""
  test_file, records = qqp_records
  os.remove(test_file)
  _write_qqp(tmp_path / "other", ["900", "901", "902", "903", "904"])
  os.replace(str(tmp_path / "other" / "QQP" / "test.tsv"), test_file)
  with caplog.at_level(logging.WARNING):
    assert _submission_ids(_task(records), tmp_path, len(IDS)) == [str(i) for i in range(len(IDS))]
  assert f"{test_file} changed since the predict records" in caplog.text


def test_the_standard_files_ids_stay_0_to_n(tmp_path, spm_model_file):
  ids = [str(i) for i in range(4)]
  _write_qqp(tmp_path / "glue", ids)
  records = cfd.create_finetuning_data("glue/qqp", str(tmp_path / "records"), spm_model_file, splits=["test"],
                                       input_dir=str(tmp_path / "glue"), max_seq_length=SEQ)["test"]["record_path"]
  assert _submission_ids(_task(records), tmp_path, 4) == ids
  assert glue.records_source(records, "glue/mrpc") is None  # another task's records name no file of this one
