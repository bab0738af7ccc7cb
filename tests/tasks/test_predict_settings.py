"""What a run in a trained model_dir takes from it: `text_classification`'s multi_label and threshold (labels.json),
do_lower_case (tokenizer_config.json, else params.yaml), the label order and the columns; an explicit setting wins
where the model can follow it and is an error naming the file where it cannot; a resumed training run whose
training file gained or lost a class is an error naming both label sets.

Most tests build the task on a model directory holding only the files a training run writes (no checkpoint): the
settings are resolved before any model exists. One end-to-end run trains and predicts the documented way.
"""

import csv
import json
import logging
import os
import shutil

import numpy as np
import pytest

from official_albert import model_directory
from official_albert import pipelines
from official_albert import train
from official_albert.checkpoints.sentence_transformers_folder import read_tokenizer_options
from official_albert.checkpoints.sentence_transformers_folder import write_tokenizer_options
from official_albert.serving import pipelines as serving_pipelines
from official_albert.serving.export_spec import ExportSpec
from official_albert.tokenization import FullTokenizer
from official_albert.training.hyperparams import ConfigError
from tasks import text
from tasks.text.tagging import TokenClassificationTask
from tests import tiny

COLUMNS = {"text_column": "body", "text_pair_column": "", "label_column": "label", "input_format": "",
           "label_separator": "|"}


def _model_dir(tmp_path, labels=("neg", "pos"), multi_label=False, threshold=0.5, columns=None):
  directory = tmp_path / "m"
  directory.mkdir(parents=True)
  model_directory.write_label_file(str(directory), model_directory.LabelFile(
      list(labels), multi_label, threshold, dict(columns or {}), "text_classification"))
  return str(directory)


def _task(model_dir, experiment="text_classification", **settings):
  params = train.build_params(experiment, params_override=json.dumps({"task": settings}))
  return text.TextClassificationTask(params.task, logging_dir=model_dir)


def _write_csv(path, header, rows):
  with open(path, "w", newline="", encoding="utf-8") as f:
    writer = csv.writer(f, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(rows)
  return str(path)


# ------------------------------------------------------------------------------------------------ multi-label
def test_multi_label_and_threshold_come_from_labels_json(tmp_path):
  model_dir = _model_dir(tmp_path, ("film", "happy"), multi_label=True, threshold=0.3)
  task = _task(model_dir)  # as documented: no multi_label, no threshold repeated
  assert task.label_kind == "multi" and task.best_metric == "micro_f1"
  assert task.multi_label_threshold == 0.3
  assert _task(model_dir, multi_label=True).multi_label_threshold == 0.3  # the flag alone keeps the model's threshold
  assert _task(model_dir, multi_label_threshold=0.7).multi_label_threshold == 0.7  # an explicit one wins
  assert _task(_model_dir(tmp_path / "single")).multi_label_threshold == model_directory.MULTI_LABEL_THRESHOLD


def test_multi_label_against_labels_json_is_an_error_naming_the_file(tmp_path):
  multi = _model_dir(tmp_path, ("film", "happy"), multi_label=True, threshold=0.3)
  with pytest.raises(ConfigError, match=r"task\.multi_label=false, but .*labels\.json says the classifier in .* is "
                                        r"multi-label .*Drop task\.multi_label"):
    _task(multi, multi_label=False)
  single = _model_dir(tmp_path / "single")
  with pytest.raises(ConfigError, match=r"task\.multi_label=true, but .*labels\.json .* is single-label"):
    _task(single, multi_label=True)
  assert _task(single, multi_label=False).label_kind == "class"


def test_a_resumed_training_run_records_its_new_threshold_and_predict_does_not(tmp_path, spm_model_file):
  model_dir = _model_dir(tmp_path, ("film", "happy"), multi_label=True, threshold=0.3)
  rows = [{"text": "good film", "label": ["film", "happy"]}, {"text": "bad", "label": []}]
  (tmp_path / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))

  def build(threshold, training):
    data = {"input_path": str(tmp_path / "train.jsonl"), "global_batch_size": 2, "seq_length": 16,
            "is_training": training}
    task = _task(model_dir, spm_model_file=spm_model_file, multi_label_threshold=threshold,
                 **{"train_data" if training else "predict_data": data})
    task.build_inputs(task.params.train_data if training else task.params.predict_data)

  build(0.6, training=False)  # a predict run's own threshold is for that run only
  assert model_directory.read_label_file(model_dir).threshold == 0.3
  build(0.4, training=True)  # a training run resuming the model sets the threshold it predicts at
  assert model_directory.read_label_file(model_dir).threshold == 0.4
  assert _task(model_dir).multi_label_threshold == 0.4


def test_threshold_must_be_a_probability(tmp_path):
  with pytest.raises(ConfigError, match=r"task\.multi_label_threshold=1\.5 is no probability"):
    _task(None, multi_label=True, multi_label_threshold=1.5)


# ------------------------------------------------------------------------------------------------ do_lower_case
def test_do_lower_case_comes_from_the_model_dir(tmp_path, spm_model_file):
  model_dir = _model_dir(tmp_path)
  write_tokenizer_options(model_dir, {"do_lower_case": False})

  def lower(directory, **settings):
    return _task(directory, spm_model_file=spm_model_file, **settings).tokenizer.do_lower_case

  assert lower(model_dir) is False
  assert lower(model_dir, do_lower_case=True) is True  # an explicit setting wins
  # A directory trained before tokenizer_config.json was written: its params.yaml's task.do_lower_case.
  old = _model_dir(tmp_path / "old")
  with open(os.path.join(old, model_directory.PARAMS_FILE), "w") as f:
    f.write("task:\n  do_lower_case: false\n")
  assert lower(old) is False
  assert lower(_model_dir(tmp_path / "none")) is True  # nothing recorded: the default


def test_training_records_do_lower_case_for_later_runs(tmp_path):
  model_dir = str(tmp_path / "m")
  _task(model_dir, labels=["neg", "pos"], do_lower_case=False, text_column="body").save_assets()
  recorded = {"do_lower_case": False, "keep_accents": False, "remove_space": True}
  assert read_tokenizer_options(model_dir) == recorded
  assert _task(model_dir).columns()["text_column"] == "body"
  # A later (predict) run with its own override does not rewrite the training run's record.
  _task(model_dir, do_lower_case=True).save_assets()
  assert read_tokenizer_options(model_dir) == recorded


def test_a_fresh_run_tokenizes_as_its_init_checkpoint_folder_records(tmp_path, spm_model_file, caplog):
  """A cased, accented model converted into a folder (its tokenizer_config.json: do_lower_case false, keep_accents
  true) is fine-tuned as it was trained, not lower-cased and stripped of accents: where model_dir records nothing and
  nothing is set, the three options come from task.init_checkpoint's folder (as its SentencePiece model does, and as
  the pipelines read that folder), key the record cache and go into model_dir's tokenizer_config.json, which
  predict, the pipelines and the exports read. An explicit do_lower_case wins with a warning, as against model_dir's
  record, and model_dir's record, once there, wins over the folder's."""
  init = tmp_path / "cased_converted"
  init.mkdir()
  shutil.copy(spm_model_file, init / "spiece.model")
  write_tokenizer_options(str(init), {"do_lower_case": False, "keep_accents": True})
  train_file = _write_csv(tmp_path / "train.csv", ["text", "label"], [["Café Über", "pos"], ["Straße", "neg"]])
  model_dir = str(tmp_path / "run")
  task = _task(model_dir, init_checkpoint=str(init), train_data={"input_path": train_file, "seq_length": 16})
  cased = {"do_lower_case": False, "keep_accents": True, "remove_space": True}
  expected = FullTokenizer(str(init / "spiece.model"), **cased).encode_ids("Café Über Straße")
  assert task.tokenizer.encode_ids("Café Über Straße") == expected
  assert task.tokenizer_options == cased
  with open(task.record_path(task.params.train_data)[:-len(".tf_record")] + ".meta.json", encoding="utf-8") as f:
    key = json.load(f)["cache_key"]
  assert {k: key[k] for k in cased} == cased
  task.save_assets()
  assert read_tokenizer_options(model_dir) == cased
  # model_dir's record wins from now on (a folder re-converted uncased changes nothing for this model).
  write_tokenizer_options(str(init), {"do_lower_case": True})
  assert _task(model_dir, init_checkpoint=str(init)).tokenizer_options == cased
  # An explicit setting wins, with a warning naming the folder's file (the rule for a contradicting model_dir).
  write_tokenizer_options(str(init), {"do_lower_case": False, "keep_accents": True})
  fresh = _task(str(tmp_path / "other"), init_checkpoint=str(init), do_lower_case=True)
  with caplog.at_level(logging.WARNING):
    assert fresh.tokenizer_options == dict(cased, do_lower_case=True)
  assert "task.do_lower_case=true, but the model was trained with do_lower_case=false" in caplog.text
  assert os.path.join(str(init), "tokenizer_config.json") in caplog.text


# ------------------------------------------------------------------------------------------------ labels
def test_task_labels_in_another_order_than_labels_json_is_an_error(tmp_path):
  model_dir = _model_dir(tmp_path)
  with pytest.raises(ConfigError, match=r"task\.labels=\['pos', 'neg'\] but .*labels\.json names the outputs of "
                                        r"the classifier in .* as \['neg', 'pos'\].*Drop task\.labels"):
    _ = _task(model_dir, labels=["pos", "neg"]).labels
  assert _task(model_dir, labels=["neg", "pos"]).labels == ["neg", "pos"]
  assert _task(model_dir).labels == ["neg", "pos"]


@pytest.mark.parametrize("skip_bad_rows", [False, True])
def test_resumed_training_on_a_file_with_a_new_label_is_an_error(tmp_path, spm_model_file, skip_bad_rows):
  model_dir = _model_dir(tmp_path)
  rows = [("good fun film", "pos"), ("bad dull film", "neg")] * 2
  train_path = _write_csv(tmp_path / "train.csv", ["text", "label"], rows + [("it was ok", "neutral")])
  data = {"input_path": train_path, "global_batch_size": 2, "seq_length": 16, "is_training": True}
  task = _task(model_dir, spm_model_file=spm_model_file, train_data=data, skip_bad_rows=skip_bad_rows)
  # (it was "label 'neutral' was not seen in training ... add it to the training data", or a silent skip)
  with pytest.raises(ValueError, match=r"train\.csv: the training file has labels \['neutral'\] that "
                                       r".*labels\.json \['neg', 'pos'\], written by an earlier run .* does not.*new "
                                       r"--model_dir, or delete .*labels\.json and the checkpoints"):
    task.record_path(task.params.train_data)
  # The same label set resumes (the records are built with labels.json's order), and so does a subset of it.
  for kept in (rows, rows[::2]):
    _write_csv(tmp_path / "train.csv", ["text", "label"], kept)
    task = _task(model_dir, spm_model_file=spm_model_file, train_data=data, skip_bad_rows=skip_bad_rows)
    assert os.path.exists(task.record_path(task.params.train_data))



def test_labels_json_and_task_labels_in_another_unicode_normalisation_are_the_same_labels(tmp_path, spm_model_file):
  """Rows' labels are read in NFC; a labels.json (or task.labels) written in NFD (e + combining accent) names the
  same labels: neither "task.labels=[...] but labels.json names [...]" nor "the training file has labels [...] that
  labels.json does not" may fire over two spellings that print alike."""
  nfc, nfd = "n\u00e9gatif", "ne\u0301gatif"
  model_dir = _model_dir(tmp_path, labels=(nfd, "positif"))
  assert _task(model_dir, labels=[nfc, "positif"]).labels == [nfd, "positif"]
  train_path = _write_csv(tmp_path / "train.csv", ["text", "label"], [("bad dull film", nfc), ("good fun", "positif")])
  data = {"input_path": train_path, "global_batch_size": 2, "seq_length": 16, "is_training": True}
  task = _task(model_dir, spm_model_file=spm_model_file, train_data=data)
  assert os.path.exists(task.record_path(task.params.train_data))


# ------------------------------------------------------------------------------------------------ columns
def test_a_column_set_back_to_its_default_wins_over_labels_json(tmp_path):
  model_dir = _model_dir(tmp_path, columns=COLUMNS)
  assert _task(model_dir).columns()["text_column"] == "body"
  new = _write_csv(tmp_path / "new.csv", ["id", "text"], [("1", "hello")])
  task = _task(model_dir, text_column="text", predict_data={"input_path": new})
  assert task.columns()["text_column"] == "text"
  assert [e.text for e in task.predict_examples()] == ["hello"]
  params = train.build_params("token_classification", params_override=json.dumps({"task": {"text_column": "tokens"}}))
  tagger_dir = str(tmp_path / "tagger")
  os.makedirs(tagger_dir)
  model_directory.write_label_file(tagger_dir, model_directory.LabelFile(
      ["B-PER", "O"], columns={"text_column": "words", "conll_token_column": 1}, task="token_classification"))
  columns = TokenClassificationTask(params.task, logging_dir=tagger_dir).columns()
  assert (columns["text_column"], columns["conll_token_column"], columns["label_column"]) == ("tokens", 1, "tags")


# ------------------------------------------------------------------------------------------------ end to end
@pytest.mark.slow
def test_multi_label_cased_model_predicts_the_documented_way(tmp_path, spm_model_file):
  """Trained multi-label at threshold 0.3 with do_lower_case=false; predict names only the file (docs/recipe.md)."""
  texts = ["Good Fun Film", "Bad Dull Film", "Lovely Warm Story", "Awful Mess"]
  tags = [["film", "happy"], ["film"], ["happy"], []]
  (tmp_path / "train.jsonl").write_text("".join(json.dumps({"text": texts[i % 4], "label": tags[i % 4]}) + "\n"
                                                for i in range(8)))
  (tmp_path / "new.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in texts))

  def data(path, training=False):
    return {"input_path": str(path), "global_batch_size": 8 if training else 4, "seq_length": 32,
            "is_training": training, "drop_remainder": training, "seed": 1}

  def override(task):
    return json.dumps({"task": dict(task, model=tiny.TRAIN_MODEL), "runtime": {"distribution_strategy":
                                                                               "one_device", "seed": 3},
                       "trainer": {"train_steps": 2, "steps_per_loop": 2, "checkpoint_interval": 2,
                                   "validation_interval": 2, "summary_interval": 2, "validation_steps": -1,
                                   "warmup_steps": 0, "learning_rate": 1e-3}})

  model_dir = str(tmp_path / "m")
  train.run("text_classification", "train", model_dir, params_override=override(
      {"classifier_dropout": 0.0, "spm_model_file": spm_model_file, "train_data": data(tmp_path / "train.jsonl", True),
       "multi_label": True, "multi_label_threshold": 0.3, "do_lower_case": False}))
  out = train.run("text_classification", "predict", model_dir, params_override=override(
      {"train_data": data(tmp_path / "missing.jsonl", True), "predict_data": data(tmp_path / "new.jsonl")}))
  rows = [json.loads(line) for line in open(out["files"][str(tmp_path / "new.jsonl")], encoding="utf-8")]
  assert [r["text"] for r in rows] == texts
  for row in rows:  # label lists at the model's threshold, not a softmax's one label
    assert isinstance(row["prediction"], list) and set(row["scores"]) == {"film", "happy"}
    assert row["prediction"] == [k for k, v in row["scores"].items() if v >= 0.3]
  records = os.path.join(model_dir, "records")
  metas = [json.load(open(os.path.join(records, f))) for f in os.listdir(records)
           if f.startswith("new-") and f.endswith(".meta.json")]
  keys = [m.get("cache_key", m.get("key", m)) for m in metas]
  assert len(keys) == 1 and keys[0]["do_lower_case"] is False  # tokenized cased, as in training
  # pipelines.classify and the exports read the directory's tokenizer_config.json too (they lower-cased every
  # directory's text), so they answer as predict did.
  classified = pipelines.classify(model_dir, texts)
  for row, result in zip(rows, classified):
    np.testing.assert_allclose([result["probabilities"][k] for k in ("film", "happy")],
                               [row["scores"][k] for k in ("film", "happy")], atol=1e-5)
  assert serving_pipelines.resolve_model(model_dir, "classifier", None, None, "hf")[1].do_lower_case is False
  assert ExportSpec(model_dir, str(tmp_path / "export")).lower_case() is False
