"""Evaluation rows that are training rows, compared as the model sees them (`tasks.overlap`).

Review s58: the text tasks' check compared raw strings, so `great film ` / `AWFUL MESS` / an NFD `Café` — the same
ids as training's `Great film` / `Awful mess` / `Café` for a lower-casing tokenizer — were not counted; and
text_multiple_choice, text_ranking and text_embedding had no train / dev overlap check at all. A warning, never an
error.
"""

import json
import logging

import pytest

from tasks import overlap
from tasks.choice import TextMultipleChoiceTask
from tasks.embedding.task import TextEmbeddingTask
from tasks.ranking.task import TextRankingTask
from tasks.text import data as text_data
from tasks.text import repeated_rows
from tests import tiny

TRAIN = ["Great film", "Awful mess", "Café review"]
DEV = ["great film ", "AWFUL MESS", "Cafe\u0301 review", "Something new"]  # (3 are training rows to the model)


def test_text_tasks_count_case_space_and_unicode_variants_as_training_rows(tmp_path, caplog):
  train, dev = tmp_path / "train.csv", tmp_path / "dev.csv"
  train.write_text("text,label\n" + "".join(f"{t},pos\n" for t in TRAIN), encoding="utf-8")
  dev.write_text("text,label\n" + "".join(f"{t},pos\n" for t in DEV), encoding="utf-8")
  with caplog.at_level(logging.WARNING):
    text_data.read_examples([str(dev)], text_data.ReadOptions(), training_input=str(train))
  assert f"3 of 4 evaluation rows are training rows too (first: {dev}:2 repeats {train}:2)" in caplog.text


def test_repeats_within_a_file_and_the_tokenizer_options(caplog):
  rows = [text_data.TextExample("f.csv", i + 2, str(i), t, None, label)
          for i, (t, label) in enumerate([("Great film", "pos"), ("great film ", "neg")])]
  with caplog.at_level(logging.WARNING):
    counts = repeated_rows.warn_repeated_texts(rows)
  assert counts == {"repeated": 1, "conflicting": 1, "in_training": 0}
  assert "1 of 2 rows repeat an earlier row's text (first: f.csv:3 repeats f.csv:2)" in caplog.text
  cased = {"do_lower_case": False}  # (a cased tokenizer gives the two other ids: not one text)
  assert repeated_rows.warn_repeated_texts(rows, tokenizer_options=cased)["repeated"] == 0
  assert repeated_rows.warn_repeated_texts(rows[1:], rows[:1], cased)["in_training"] == 0


def test_row_key_reads_lists_and_none():
  row = text_data.TextExample("f", 1, "1", "A  B", None, "x")
  assert overlap.row_key(row, ("text", "text_pair")) == overlap.row_key(
      text_data.TextExample("g", 2, "2", "a b", None, "y"), ("text", "text_pair"))
  assert overlap.model_text(["X", "y "]) == overlap.model_text(("x", "Y"))


def _jsonl(path, rows):
  path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
  return str(path)


CASES = {
    "text_multiple_choice": (
        TextMultipleChoiceTask,
        lambda texts: [{"context": f"story {t}", "question": t, "choices": ["yes", "no"], "label": 0} for t in texts],
        {"num_choices": 2, "max_qa_length": 16}),
    "text_ranking": (
        TextRankingTask,
        lambda texts: [{"query": t, "positive": f"doc {t}", "negatives": [f"other {t}"]} for t in texts],
        {"num_negatives": 1}),
    "text_embedding": (
        TextEmbeddingTask, lambda texts: [{"anchor": t, "positive": f"doc {t}"} for t in texts], {}),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_row_tasks_warn_of_evaluation_rows_that_are_training_rows(tmp_path, caplog, spm_model_file, name):
  cls, rows, extra = CASES[name]
  train = _jsonl(tmp_path / "train.jsonl", rows(TRAIN))
  dev = _jsonl(tmp_path / "dev.jsonl", rows(DEV))
  data = {"global_batch_size": 2, "seq_length": 32, "seed": 7}
  config = tiny.finetune_override(dict(tiny.TRAIN_MODEL), train, dev, spm_model_file, 1, 1e-3, data, **extra)
  task = tiny.build_task(cls, name, config, str(tmp_path / "model"))
  with caplog.at_level(logging.WARNING):
    task.record_path(task.params.validation_data, "eval")
  assert f"3 of 4 evaluation rows are training rows too (first: {dev}:1 repeats {train}:1)" in caplog.text
  caplog.clear()
  task.params.validation_data.input_path = train  # (the training file itself: said once, not counted)
  with caplog.at_level(logging.WARNING):
    task.record_path(task.params.validation_data, "eval")
  assert f"The evaluation input is the training input ({train})" in caplog.text
  assert "evaluation rows are training rows too" not in caplog.text


def test_a_cased_text_run_compares_its_rows_as_its_tokenizer_reads_them(tmp_path, caplog):
  """The text tasks pass the run's tokenizer options to the repeat and overlap checks (`ReadOptions.comparison`):
  a do_lower_case=false run's "US" and "us" are two texts, and the dev row "Apple" is no training row "apple"."""
  from tasks.text.task import TextClassificationTask  # noqa: PLC0415
  train, dev = tmp_path / "train.csv", tmp_path / "dev.csv"
  train.write_text("text,label\nUS,country\nus,pronoun\napple,fruit\nIt,pronoun\n", encoding="utf-8")
  dev.write_text("text,label\nApple,fruit\nUK,country\n", encoding="utf-8")
  for lower, warned in ((False, False), (True, True)):
    config = tiny.finetune_override(dict(tiny.TRAIN_MODEL), str(train), str(dev), str(tiny.SPM_MODEL_FILE), 1, 1e-3,
                                    {"global_batch_size": 2, "seq_length": 16, "seed": 7}, do_lower_case=lower,
                                    records_dir=str(tmp_path / f"records_{lower}"))
    task = tiny.build_task(TextClassificationTask, "text_classification", config, str(tmp_path / f"model_{lower}"))
    caplog.clear()
    with caplog.at_level(logging.WARNING):
      task.record_path(task.params.train_data)
      task.record_path(task.params.validation_data)
    assert ("repeat an earlier row's text" in caplog.text) is warned
    assert ("training rows too" in caplog.text or "are training rows" in caplog.text) is warned, caplog.text
