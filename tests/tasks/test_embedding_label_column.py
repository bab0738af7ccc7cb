"""text_embedding on a labelled pairs file (Quora duplicates / PAWS / MRPC: sentence1, sentence2, label 0/1).

Review s58: with loss=mnrl (no task.score_column) the unread label column was ignored without a word, so the label-0
rows (NOT matches) were trained as (anchor, positive) pairs; the one warning suggested mask_false_negatives. Now such
a column with 0 / false on some rows is refused (naming the file, column, count and fixes), all-1 is logged as
ignored, and task.ignore_label_column=true opts out.
"""

import json
import logging

import pytest

from tasks.embedding import data as pair_data
from tasks.embedding.unused_labels import value_kind
from tasks.row_files import TextDataError
from tests.tasks.test_text_embedding import make_task
from tests.tasks.test_text_embedding import override
from tests.tasks.test_text_embedding import write_pairs

COLUMNS = {"anchor": "sentence1", "positive": "sentence2"}
ROWS = [("How do I learn Python?", "What is the best way to learn Python?", 1),
        ("How do I learn Python?", "How do I cook rice?", 0),
        ("Is the earth flat?", "Is the earth round or flat?", 1),
        ("Is the earth flat?", "Where is Paris?", 0)]


def _quora(tmp_path, rows=ROWS, header=("sentence1", "sentence2", "label")):
  return write_pairs(tmp_path / "pairs.csv", rows, header)


def test_label_zero_rows_are_refused_naming_file_column_count_and_fixes(tmp_path):
  path = _quora(tmp_path)
  with pytest.raises(TextDataError) as error:
    pair_data.read_pairs(path, COLUMNS)
  message = str(error.value)
  for words in (path, "column 'label'", "2 of 4 rows", "line 3", "Drop those rows", "task.score_column=label",
                "task.loss=cosent", "task.ignore_label_column=true"):
    assert words in message, (words, message)
  assert "mask_false_negatives" not in message


@pytest.mark.parametrize("header", [("sentence1", "sentence2", "Label"), ("sentence1", "sentence2", "is_duplicate"),
                                    ("sentence1", "sentence2", "Similarity")])
def test_label_like_names_are_matched_case_insensitively(tmp_path, header):
  with pytest.raises(TextDataError, match=f"column '{header[2]}'"):
    pair_data.read_pairs(_quora(tmp_path, header=header), COLUMNS)


def test_jsonl_false_is_a_negative_class(tmp_path):
  path = tmp_path / "pairs.jsonl"
  path.write_text("".join(json.dumps({"q1": a, "q2": b, "is_duplicate": bool(y)}) + "\n" for a, b, y in ROWS))
  with pytest.raises(TextDataError, match="2 of 4 rows"):
    pair_data.read_pairs(str(path), {"anchor": "q1", "positive": "q2"})


def test_all_positive_labels_are_logged_as_ignored(tmp_path, caplog):
  path = _quora(tmp_path, [r for r in ROWS if r[2] == 1])
  with caplog.at_level(logging.INFO):
    assert len(pair_data.read_pairs(path, COLUMNS)) == 2
  assert "column 'label' ('1' on every row) is not read" in caplog.text


def test_a_class_column_names_its_classes_and_one_value_on_every_row_is_not_refused(tmp_path, caplog):
  """SNLI / MultiNLI write entailment as 0: "drop the 0 rows" kept neutral and contradiction as matches, and a file
  already filtered to entailment (0 on every row) was refused; a text class is no score for cosent."""
  nli = [("A man plays.", "A man makes music.", 0), ("A man plays.", "A man sleeps.", 2),
         ("A dog runs.", "An animal moves.", 0), ("A dog runs.", "A dog is indoors.", 1)]
  with pytest.raises(TextDataError) as error:
    pair_data.read_pairs(_quora(tmp_path, nli), COLUMNS)
  assert "It holds classes ('0', '2', '1'): keep only the rows of the class that means a match" in str(error.value)
  assert "entailment as 0" in str(error.value) and "Drop those rows" not in str(error.value)
  words = [(a, b, "entailment" if c == 0 else "contradiction") for a, b, c in nli]
  with pytest.raises(TextDataError) as error:
    pair_data.read_pairs(_quora(tmp_path, words), COLUMNS)
  assert "task.score_column=label" not in str(error.value)
  with caplog.at_level(logging.INFO):
    assert len(pair_data.read_pairs(_quora(tmp_path, [r for r in nli if r[2] == 0]), COLUMNS)) == 2
  assert "column 'label' ('0' on every row) is not read" in caplog.text


def test_the_opt_out_a_score_column_and_predict_reads_are_not_refused(tmp_path):
  path = _quora(tmp_path)
  assert len(pair_data.read_pairs(path, COLUMNS, check_label_columns=False)) == 4  # task.ignore_label_column=true
  scored = pair_data.read_pairs(path, COLUMNS, score_column="label")  # (cosent / cosine read the labels)
  assert [e.score for e in scored] == [1.0, 0.0, 1.0, 0.0]
  assert len(pair_data.read_pairs(path, {"anchor": "sentence1"})) == 4  # (--mode=predict: texts to embed, no pairs)


def test_value_kinds():
  assert [value_kind(v) for v in (1, "1", "1.0", True, "yes", "entailment")] == ["positive"] * 6
  assert [value_kind(v) for v in (0, "0", -1, False, "false", "no", "contradiction", "not_duplicate")] == \
      ["negative"] * 8
  assert [value_kind(v) for v in (3.8, "0.5", "maybe")] == ["other"] * 3
  assert value_kind("") is None and value_kind(None) is None


def test_the_task_refuses_and_honours_ignore_label_column(tmp_path, spm_model_file):
  path = _quora(tmp_path)
  columns = {"anchor_column": "sentence1", "positive_column": "sentence2"}
  task = make_task(override(path, path, spm_model_file, 1, batch=2, **columns), str(tmp_path / "a"))
  with pytest.raises(TextDataError, match="task.ignore_label_column=true"):
    task.read(task.params.train_data)
  task = make_task(override(path, path, spm_model_file, 1, batch=2, ignore_label_column=True, **columns),
                   str(tmp_path / "b"))
  assert len(task.read(task.params.train_data)) == 4


def test_records_built_with_the_label_column_ignored_are_not_reused_without(tmp_path):
  """task.ignore_label_column is in the records' cache key (records built with it true were reused with it false,
  and the refusal never ran), as the row reader's version is."""
  from tasks.embedding.task import TextEmbeddingTask  # noqa: PLC0415
  from tasks.row_task import ROW_READER  # noqa: PLC0415
  from tests import tiny  # noqa: PLC0415
  train = tmp_path / "train.csv"
  train.write_text("sentence1,sentence2,label\nA man plays.,A man makes music.,1\nA dog runs.,A cat sleeps.,0\n",
                   encoding="utf-8")

  def task(ignore):
    config = tiny.finetune_override(dict(tiny.TRAIN_MODEL), str(train), str(train), str(tiny.SPM_MODEL_FILE), 1,
                                    1e-3, {"global_batch_size": 2, "seq_length": 32, "seed": 7},
                                    anchor_column="sentence1", positive_column="sentence2",
                                    ignore_label_column=ignore)
    return tiny.build_task(TextEmbeddingTask, "text_embedding", config, str(tmp_path / "model"))

  built = task(True)
  path = built.record_path(built.params.train_data, "train")
  with open(path[:-len(".tf_record")] + ".meta.json", encoding="utf-8") as f:
    assert json.load(f)["cache_key"]["row_reader"] == ROW_READER
  again = task(False)
  with pytest.raises(ValueError, match="label"):
    again.record_path(again.params.train_data, "train")
