"""`text_classification` / `text_regression` from raw CSV, TSV and JSONL files through the train binary (issue 16).

Tiny model, a few steps: the point is the path (raw file → cached records → train/eval → labels.json → predict file
with label strings), the bad-row errors and the unseen-label handling, not accuracy.
"""

import csv
import json
import logging
import os

import pytest

from official_albert import train
from official_albert.data import file_identity
from tasks import text
from tasks.text import data as text_data

TINY_MODEL = {"preset": "", "vocab_size": 1000, "embedding_size": 16, "hidden_size": 32, "num_hidden_layers": 1,
              "num_attention_heads": 2, "intermediate_size": 64, "max_position_embeddings": 64,
              "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0}
GOOD = ["a good and fine film", "great fun", "lovely, warm story", "\"best\" movie ever"]
BAD = ["a bad and dull film", "awful mess", "boring, cold plot", "worst \"movie\" ever"]


def _data(path, batch=4, training=False):
  return {"input_path": str(path), "global_batch_size": batch, "seq_length": 32, "is_training": training,
          "drop_remainder": training, "seed": 1}


def _override(task, steps=2):
  return json.dumps({"task": task, "trainer": {"train_steps": steps, "steps_per_loop": steps,
                                               "checkpoint_interval": steps, "validation_interval": steps,
                                               "summary_interval": steps, "validation_steps": -1,
                                               "warmup_steps": 0, "learning_rate": 1e-3},
                     "runtime": {"distribution_strategy": "one_device", "seed": 3}})


def _task(spm_model_file, train_path, predict_path, **extra):
  return dict({"model": TINY_MODEL, "classifier_dropout": 0.0, "spm_model_file": spm_model_file,
               "train_data": _data(train_path, batch=8, training=True), "validation_data": _data(train_path, 16),
               "predict_data": _data(predict_path)}, **extra)


def _write_csv(path, header, rows, delimiter=","):
  if delimiter == "\t":  # GLUE-style TSV: no quoting at all
    path.write_text("".join("\t".join(r) + "\n" for r in [header] + list(rows)), encoding="utf-8")
    return
  with open(path, "w", newline="", encoding="utf-8") as f:
    writer = csv.writer(f, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(rows)


def _rows(n=8):
  return [(f"r{i}", (GOOD if i % 2 else BAD)[i % 4], "pos" if i % 2 else "neg") for i in range(n)]


@pytest.fixture(scope="module")
def csv_run(tmp_path_factory, spm_model_file):
  """CSV (quoted fields, id column): train_and_eval, then predict on a file whose label column has an unseen label."""
  root = tmp_path_factory.mktemp("csv")
  _write_csv(root / "train.csv", ["id", "text", "label"], _rows())
  _write_csv(root / "test.csv", ["id", "text", "label"],
             [("t0", GOOD[3], "pos"), ("t1", BAD[0], "neutral"), ("t2", "never seen, text", "")])
  task = _task(spm_model_file, root / "train.csv", root / "test.csv", id_column="id")
  model_dir = str(root / "model")
  result = train.run("text_classification", "train_and_eval", model_dir, params_override=_override(task))
  return {"root": root, "task": task, "model_dir": model_dir, "result": result}


def test_csv_trains_saves_labels_and_caches_records(csv_run, caplog):
  result, model_dir = csv_run["result"], csv_run["model_dir"]
  assert result["global_step"] == 2
  assert {"eval_accuracy", "macro_f1", "eval_loss"} <= set(result["eval_results"])
  labels = json.load(open(os.path.join(model_dir, text.LABELS_FILE)))
  assert labels["labels"] == ["neg", "pos"]
  assert os.path.exists(os.path.join(model_dir, text.SPM_FILE))
  # What the best was chosen on and what the input positions were taken over, by the CSV's bytes (review s56: a CSV
  # corrected in place resumed, and ranked, as the same data).
  content = file_identity.content_digest(str(csv_run["root"] / "train.csv"))
  best = json.load(open(os.path.join(model_dir, "best_checkpoint.json")))
  assert best["chosen_on"][file_identity.VALIDATION_CONTENT_KEY] == content
  topology = json.load(open(os.path.join(model_dir, "input_state", "topology.json")))
  assert topology[file_identity.TRAIN_CONTENT_KEY] == content
  metas = [f for f in os.listdir(os.path.join(model_dir, "records")) if f.startswith("train-")]
  # .tf_record + .meta.json for training (rows in a seeded random order) and for validation (the file's order), both
  # read from train.csv.
  assert len(metas) == 4
  # A second run reuses the cache (same key) instead of rebuilding.
  params = train.build_params("text_classification", params_override=_override(csv_run["task"]))
  task = text.TextClassificationTask(params.task, logging_dir=model_dir)
  with caplog.at_level(logging.INFO):
    task.record_path(params.task.train_data)
  assert "cache key matches" in caplog.text


def test_csv_predict_writes_label_strings_next_to_ids(csv_run):
  task = dict(csv_run["task"], train_data=_data(csv_run["root"] / "missing.csv", 8, True))  # predict needs no train
  result = train.run("text_classification", "predict", csv_run["model_dir"], params_override=_override(task))
  path = result["files"][str(csv_run["root"] / "test.csv")]
  assert path.endswith(os.path.join("predictions", "test.predictions.csv"))
  rows = list(csv.DictReader(open(path, encoding="utf-8")))
  # The label column is not read at predict time: the unseen "neutral" and the empty label are no problem.
  assert [r["id"] for r in rows] == ["t0", "t1", "t2"]
  assert [r["text"] for r in rows] == [GOOD[3], BAD[0], "never seen, text"]
  assert {r["prediction"] for r in rows} <= {"neg", "pos"}
  for r in rows:
    assert float(r["score"]) == pytest.approx(max(float(r["score_neg"]), float(r["score_pos"])), abs=1e-6)
    assert float(r["score_neg"]) + float(r["score_pos"]) == pytest.approx(1.0, abs=1e-5)
    assert r["prediction"] == max(("neg", "pos"), key=lambda k: float(r[f"score_{k}"]))


def test_unseen_label_in_evaluation_file_is_a_named_error(csv_run):
  root = csv_run["root"]
  _write_csv(root / "dev.csv", ["id", "text", "label"], [("d0", GOOD[0], "pos"), ("d1", BAD[1], "neutral")])
  task = dict(csv_run["task"], validation_data=_data(root / "dev.csv", 16))
  with pytest.raises(text.TextDataError, match=r"dev\.csv:3: column 'label': label 'neutral' was not seen in "
                                               r"training \(known labels: \['neg', 'pos'\]\)"):
    train.run("text_classification", "eval", csv_run["model_dir"], params_override=_override(task))
  # Documented alternative: skip (and count) such rows.
  task["skip_bad_rows"] = True
  results = train.run("text_classification", "eval", csv_run["model_dir"], params_override=_override(task))
  assert results["eval_steps"] == 1


@pytest.mark.slow
def test_tsv_pairs_train_and_predict_tsv(tmp_path, spm_model_file):
  # TSV is read without quoting (bare quotes in the text, as GLUE files).
  rows = [(t, t.split()[0], y) for _, t, y in _rows()]
  _write_csv(tmp_path / "train.tsv", ["sentence1", "sentence2", "gold"], rows, delimiter="\t")
  assert '"best" movie ever' in (tmp_path / "train.tsv").read_text()
  task = _task(spm_model_file, tmp_path / "train.tsv", tmp_path / "train.tsv", text_column="sentence1",
               text_pair_column="sentence2", label_column="gold")
  task["validation_data"] = _data("")
  result = train.run("text_classification", "train", str(tmp_path / "m"), params_override=_override(task))
  assert result["global_step"] == 2
  out = train.run("text_classification", "predict", str(tmp_path / "m"), params_override=_override(task))
  lines = open(out["files"][str(tmp_path / "train.tsv")], encoding="utf-8").read().splitlines()
  assert lines[0].split("\t")[:4] == ["id", "text", "text_pair", "prediction"]
  assert len(lines) == 9 and lines[1].split("\t")[:3] == ["2", rows[0][0], rows[0][1]]  # id = the line number


@pytest.mark.slow
def test_jsonl_multi_label_train_and_predict(tmp_path, spm_model_file):
  lines = [{"body": t, "tags": (["happy", "film"] if i % 2 else ["film"]) if i % 3 else []}
           for i, (_, t, _) in enumerate(_rows())]
  (tmp_path / "train.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
  task = _task(spm_model_file, tmp_path / "train.jsonl", tmp_path / "train.jsonl", text_column="body",
               label_column="tags", multi_label=True)
  result = train.run("text_classification", "train_and_eval", str(tmp_path / "m"), params_override=_override(task))
  assert {"micro_f1", "subset_accuracy", "label_accuracy"} <= set(result["eval_results"])
  assert json.load(open(tmp_path / "m" / text.LABELS_FILE))["labels"] == ["film", "happy"]
  out = train.run("text_classification", "predict", str(tmp_path / "m"), params_override=_override(task))
  rows = [json.loads(x) for x in open(out["files"][str(tmp_path / "train.jsonl")])]
  assert len(rows) == 8 and rows[0]["text"] == lines[0]["body"]
  for row in rows:
    assert set(row["prediction"]) <= {"film", "happy"} and set(row["scores"]) == {"film", "happy"}
    assert row["prediction"] == [k for k, v in row["scores"].items() if v >= 0.5]
  _served_multi_label_equals_predict(tmp_path, task, rows)


def _served_multi_label_equals_predict(tmp_path, task, rows):
  """The served model answers as `--mode=predict` does: `pipelines.classify` and the SavedModel read labels.json
  (names, multi_label, the training run's threshold) and give the predict file's sigmoids and label lists — not a
  softmax. The threshold is moved to the median score so that it splits the labels."""
  import numpy as np  # pylint: disable=g-import-not-at-top
  import tensorflow as tf  # pylint: disable=g-import-not-at-top

  from official_albert import pipelines  # pylint: disable=g-import-not-at-top
  from official_albert.serving import export  # pylint: disable=g-import-not-at-top
  threshold = float(np.median([v for row in rows for v in row["scores"].values()]))
  saved = json.load(open(tmp_path / "m" / text.LABELS_FILE))
  assert saved["multi_label"] and saved["multi_label_threshold"] == 0.5
  saved["multi_label_threshold"] = threshold
  (tmp_path / "m" / text.LABELS_FILE).write_text(json.dumps(saved))
  task = dict(task, multi_label_threshold=threshold)
  out = train.run("text_classification", "predict", str(tmp_path / "m"), params_override=_override(task))
  rows = [json.loads(x) for x in open(out["files"][str(tmp_path / "train.jsonl")])]
  assert {len(row["prediction"]) for row in rows} != {0} and {len(row["prediction"]) for row in rows} != {2}
  served = pipelines.classify(str(tmp_path / "m"), [row["text"] for row in rows], seq_length=32)
  export.export_from_model_dir(str(tmp_path / "m"), str(tmp_path / "export"), head="classifier", seq_length=32)
  model = tf.saved_model.load(str(tmp_path / "export")).signatures["serving_default"]
  outputs = model(text=tf.constant([row["text"] for row in rows]))
  for i, (row, mine) in enumerate(zip(rows, served)):
    assert mine["labels"] == row["prediction"]
    np.testing.assert_allclose([mine["probabilities"][k] for k in ("film", "happy")],
                               [row["scores"][k] for k in ("film", "happy")], atol=1e-5)
    np.testing.assert_allclose(outputs["probabilities"][i].numpy(), [row["scores"]["film"], row["scores"]["happy"]],
                               atol=1e-5)
    assert [k for k, p in zip(("film", "happy"), outputs["predictions"][i].numpy()) if p] == row["prediction"]


@pytest.mark.slow
def test_jsonl_regression_trains_and_reports_pearson(tmp_path, spm_model_file):
  (tmp_path / "train.jsonl").write_text("".join(json.dumps({"text": t, "label": float(i % 5)}) + "\n"
                                                for i, (_, t, _) in enumerate(_rows())))
  task = _task(spm_model_file, tmp_path / "train.jsonl", tmp_path / "train.jsonl")
  result = train.run("text_regression", "train_and_eval", str(tmp_path / "m"), params_override=_override(task))
  assert {"pearson", "spearman", "mse"} <= set(result["eval_results"])
  out = train.run("text_regression", "predict", str(tmp_path / "m"), params_override=_override(task))
  rows = [json.loads(x) for x in open(out["files"][str(tmp_path / "train.jsonl")])]
  assert len(rows) == 8 and all(isinstance(r["prediction"], float) for r in rows)


# ------------------------------------------------------------------------------------------------- bad rows
def _options(**kw):
  return text_data.ReadOptions(**kw)


def test_bad_rows_name_file_line_and_column(tmp_path):
  path = tmp_path / "a.csv"
  path.write_text("id,text,label\n1,fine,pos\n2,\"multi\nline\",neg,extra\n3,fine,pos\n")
  with pytest.raises(text.TextDataError, match=r"a\.csv:3: 4 fields, the header has 3 .*task\.skip_bad_rows=true"):
    text_data.read_text_examples(str(path), _options())
  path.write_text("id,texts,label\n1,fine,pos\n")
  with pytest.raises(text.TextDataError, match=r"a\.csv:1: no column 'text' .*Did you mean 'texts'\? Set "
                                               r"task\.text_column"):
    text_data.read_text_examples(str(path), _options())
  path.write_text("id,text,label\n1,fine,pos\n2,,neg\n")
  with pytest.raises(text.TextDataError, match=r"a\.csv:3: column 'text': the text is empty"):
    text_data.read_text_examples(str(path), _options())
  path.write_text("text,label\nfine,0.5\nbad,high\n")
  with pytest.raises(text.TextDataError, match=r"a\.csv:3: column 'label': 'high' is not a number"):
    text_data.read_text_examples(str(path), _options(label_kind="float"))
  jsonl = tmp_path / "a.jsonl"
  jsonl.write_text('{"text": "ok", "label": "a"}\n\n{"text": "no label"}\n{oops\n')
  with pytest.raises(text.TextDataError, match=r"a\.jsonl:3: no 'label' key"):
    text_data.read_text_examples(str(jsonl), _options())
  # (float() took true as 1.0 and "1_000" as 1000.0; a multi-label list made classes 'None' and 'True')
  for value in ("true", '"1_000"'):
    jsonl.write_text('{"text": "ok", "label": %s}\n' % value)
    with pytest.raises(text.TextDataError, match=r"a\.jsonl:1: column 'label': .* is not a number"):
      text_data.read_text_examples(str(jsonl), _options(label_kind="float"))
  jsonl.write_text('{"text": "ok", "label": ["a", null, true]}\n')
  with pytest.raises(text.TextDataError, match=r"a\.jsonl:1: column 'label': .* holds a value that is not a label"):
    text_data.read_text_examples(str(jsonl), _options(label_kind="multi"))


def test_skip_bad_rows_counts_and_logs(tmp_path, caplog):
  path = tmp_path / "a.csv"
  path.write_text("id,text,label\n1,fine,pos\n2,,neg\n3,too,many,fields\n4,good,neg\n")
  with caplog.at_level(logging.WARNING):
    examples = text_data.read_text_examples(str(path), _options(skip_bad_rows=True))
  assert [(e.line, e.text, e.label) for e in examples] == [(2, "fine", "pos"), (5, "good", "neg")]
  assert "skipped 2 of 4 rows" in caplog.text and "a.csv:3" in caplog.text and "a.csv:4" in caplog.text


def test_multi_label_cells_and_fixed_label_set(tmp_path, caplog):
  path = tmp_path / "a.tsv"
  path.write_text("text\tlabel\nx \"y\"\ta|b\nz\t\n")
  with caplog.at_level(logging.WARNING):
    examples = text_data.read_text_examples(str(path), _options(label_kind="multi"))
  assert [(e.text, e.label) for e in examples] == [("x \"y\"", ["a", "b"]), ("z", [])]
  # (review s50: an empty cell trains as negative for every class; legitimate, but as often a gap: counted)
  assert "a.tsv: 1 of 2 rows have an empty label cell in column 'label' (e.g. line 3)" in caplog.text
  with pytest.raises(text.TextDataError, match=r"a\.tsv:2: .*label 'b' was not seen in training"):
    text_data.read_text_examples(str(path), _options(label_kind="multi", labels=("a",)))



def test_labels_differing_only_in_unicode_normalisation_are_one_label(tmp_path, caplog):
  """`négatif` typed as é (NFC) and as e + combining accent (NFD: macOS, some exports) made two classes that print
  alike, and a dev file (or task.labels) spelled the other way was refused as "not seen in training" while listing
  it. Labels are compared in NFC; labels equal but for case stay two classes, with one warning naming both."""
  nfc, nfd = "n\u00e9gatif", "ne\u0301gatif"
  path = tmp_path / "train.csv"
  path.write_text(f"text,label\nawful,{nfc}\ngreat,positif\nbad,{nfd}\n", encoding="utf-8")
  examples = text_data.read_text_examples(str(path), _options())
  assert [e.label for e in examples] == [nfc, "positif", nfc]
  assert text_data.label_set(examples) == [nfc, "positif"]
  for fixed in ((nfc, "positif"), (nfd, "positif")):  # labels.json's / task.labels in either spelling
    dev = text_data.read_text_examples(str(path), _options(labels=fixed))
    record = text_data.text_record(dev[2], [7], None, 4, "class", list(fixed))
    assert int(record["label_ids"]) == 0
  multi = tmp_path / "multi.tsv"
  multi.write_text(f"text\tlabel\nx\t{nfd}|positif\n", encoding="utf-8")
  (example,) = text_data.read_text_examples(str(multi), _options(label_kind="multi", labels=(nfc, "positif")))
  assert example.label == [nfc, "positif"]
  assert text_data.text_record(example, [7], None, 4, "multi", [nfd, "positif"])["label_ids"].tolist() == [1, 1]
  case = tmp_path / "case.csv"
  case.write_text("text,label\na,Positive\nb,positive\nc,negative\n", encoding="utf-8")
  with caplog.at_level(logging.WARNING):
    assert text_data.label_set(text_data.read_text_examples(str(case), _options())) == [
        "Positive", "negative", "positive"]
  assert caplog.text.count("differ only in case") == 1 and "['Positive', 'positive']" in caplog.text
  caplog.clear()
  # (review s50: a no-break space or full-width letters, pasted from a web page or a CJK keyboard, made two classes
  # without a word; names are written with ascii() so that the difference shows in the log)
  wide = tmp_path / "wide.tsv"
  wide.write_text("text\tlabel\na\tnot spam\nb\tnot\u00a0spam\nc\t\uff53\uff50\uff41\uff4d\nd\tspam\ne\tham\n",
                  encoding="utf-8")
  with caplog.at_level(logging.WARNING):
    assert len(text_data.label_set(text_data.read_text_examples(str(wide), _options()))) == 5
  assert caplog.text.count("differ only in case, width or spaces") == 2 and "'not\\xa0spam'" in caplog.text
  assert "'\\uff53\\uff50\\uff41\\uff4d'" in caplog.text and "ham" not in caplog.text



def test_saved_labels_that_are_one_label_after_nfc_keep_their_outputs(tmp_path, caplog):
  """A model trained before labels were read in NFC on a file with `négatif` in both spellings has two outputs, one
  per spelling, in labels.json; rows of each spelling were all moved to the first, silently. Rows are looked up by
  their exact spelling first; the colliding outputs are named in one warning."""
  nfc, nfd = "n\u00e9gatif", "ne\u0301gatif"
  path = tmp_path / "eval.csv"
  path.write_text(f"text,label\nbad,{nfc}\nawful,{nfd}\ngood,positif\nmeh, {nfd} \n", encoding="utf-8")
  saved = [nfd, nfc, "positif"]
  with caplog.at_level(logging.WARNING):
    examples = text_data.read_text_examples(str(path), _options(labels=tuple(saved)))
    ids = [int(text_data.text_record(e, [7], None, 4, "class", saved)["label_ids"]) for e in examples]
  assert ids == [1, 0, 2, 1]  # (' négatif ' in NFD: no exact spelling, so its NFC form: output 1's own)
  assert caplog.text.count("one label after NFC") == 1 and "(0, " in caplog.text and "(1, " in caplog.text
  assert text_data.unknown_labels([nfc, "positif"], saved) == []

def test_a_jsonl_null_pair_is_an_empty_pair_and_other_nulls_are_named(tmp_path):
  """pandas and `datasets` write a missing second text as null: it was "no 'text_pair' key", though the key is there
  and CSV's empty cell reads as an empty pair (one segment). Another null value says it is null."""
  jsonl = tmp_path / "train.jsonl"
  jsonl.write_text('{"text": "a", "text_pair": "b", "label": "x"}\n{"text": "c", "text_pair": null, "label": "y"}\n')
  examples = text_data.read_text_examples(str(jsonl), _options(text_pair_column="text_pair"))
  assert [(e.text, e.text_pair) for e in examples] == [("a", "b"), ("c", "")]
  jsonl.write_text('{"text": "a", "label": null}\n')
  with pytest.raises(text.TextDataError, match=r"train\.jsonl:1: key 'label' is null"):
    text_data.read_text_examples(str(jsonl), _options())
  jsonl.write_text('{"text": "a", "label": "x"}\n')
  with pytest.raises(text.TextDataError, match=r"train\.jsonl:1: no 'text_pair' key"):
    text_data.read_text_examples(str(jsonl), _options(text_pair_column="text_pair"))


def test_a_header_repeated_by_concatenated_files_is_skipped_with_a_warning(tmp_path, caplog):
  """(`cat a.csv b.csv > train.csv` left b's header as a row: the class 'label' was trained.)"""
  path = tmp_path / "train.csv"
  path.write_text("text,label\ngood film,pos\nbad film,neg\ntext, label\nnice,pos\n\ufefftext,label\ndull,neg\n",
                  encoding="utf-8")
  with caplog.at_level(logging.WARNING):
    examples = text_data.read_text_examples(str(path), _options())
  assert [(e.line, e.text, e.label) for e in examples] == [(2, "good film", "pos"), (3, "bad film", "neg"),
                                                           (5, "nice", "pos"), (7, "dull", "neg")]
  assert text_data.label_set(examples) == ["neg", "pos"]
  assert "train.csv:4: the header again: files concatenated? Skipped 2 such row(s) (lines 4, 6)" in caplog.text
  tsv = tmp_path / "train.tsv"
  tsv.write_text("text\tlabel\nok\tpos\ntext\tlabel\n", encoding="utf-8")
  assert [e.text for e in text_data.read_text_examples(str(tsv), _options())] == ["ok"]


def test_in_a_one_column_file_a_row_equal_to_the_header_is_data(tmp_path, caplog):
  """(A predict input `text\nhello\ntext\nbye` lost its row "text": a one-column header is also a plausible text.)"""
  path = tmp_path / "predict.csv"
  path.write_text("text\nhello\ntext\nbye\n", encoding="utf-8")
  with caplog.at_level(logging.WARNING):
    rows = list(text_data.read_rows(str(path), "csv"))
  assert [(line, row) for line, row, _ in rows] == [(2, {"text": "hello"}), (3, {"text": "text"}), (4, {"text": "bye"})]
  assert "the header again" not in caplog.text


def test_a_decimal_comma_is_a_number_only_in_a_semicolon_separated_csv(tmp_path, caplog):
  """A `;` CSV is a decimal-comma locale's export (every regression row was rejected); elsewhere `4,8` stays an
  error that names the fix, and only number columns are read so."""
  path = tmp_path / "sts.csv"
  path.write_text("sentence1;sentence2;score\nA man plays.;A man is playing 1,5 songs.;4,8\nA dog.;A cat.;-0,5\n"
                  "One.;Two.;3\n", encoding="utf-8")
  options = _options(text_column="sentence1", text_pair_column="sentence2", label_column="score", label_kind="float")
  with caplog.at_level(logging.INFO):
    examples = text_data.read_text_examples(str(path), options)
  assert [(e.text_pair, e.label) for e in examples] == [("A man is playing 1,5 songs.", 4.8), ("A cat.", -0.5),
                                                        ("Two.", 3.0)]
  assert "sts.csv: read 2 decimal-comma number(s) in column(s) ['score']" in caplog.text
  labels = text_data.read_text_examples(str(path), _options(text_column="sentence1", label_column="score"))
  assert [e.label for e in labels] == ["4,8", "-0,5", "3"]  # a class name is left as written
  comma = tmp_path / "sts_comma.csv"
  comma.write_text('sentence1,sentence2,score\nA man plays.,A man is playing.,"4,8"\n', encoding="utf-8")
  with pytest.raises(text.TextDataError, match=r"sts_comma\.csv:2: column 'score': '4,8' is not a number "
                                               r"\(text_regression\); a decimal comma is read only in a ';'-separated "
                                               r"CSV .*: write 4\.8"):
    text_data.read_text_examples(str(comma), options)


def test_an_existing_file_whose_name_holds_brackets_is_that_file_not_a_pattern(tmp_path):
  """(`reviews [2024].csv` was globbed as a character class and "matched no file".)"""
  path = tmp_path / "reviews [2024].csv"
  path.write_text("text,label\nok,pos\n", encoding="utf-8")
  (tmp_path / "reviews 2.csv").write_text("text,label\nok,pos\n", encoding="utf-8")
  assert text_data.expand_paths(str(path)) == [str(path)]
  assert text_data.expand_paths(f"{tmp_path}/reviews [2]*.csv") == [str(tmp_path / "reviews 2.csv")]  # a pattern
  with pytest.raises(FileNotFoundError, match=r"input_path entry .*missing \[1\]\.csv' matches no file"):
    text_data.expand_paths(str(tmp_path / "missing [1].csv"))


@pytest.mark.slow
def test_predict_reuses_the_columns_saved_with_the_labels(tmp_path, spm_model_file):
  _write_csv(tmp_path / "train.csv", ["ticket", "body", "queue"], _rows())
  task = _task(spm_model_file, tmp_path / "train.csv", "", text_column="body", label_column="queue")
  task["validation_data"] = _data("")
  train.run("text_classification", "train", str(tmp_path / "m"), params_override=_override(task))
  saved = json.load(open(tmp_path / "m" / text.LABELS_FILE))
  assert saved["labels"] == ["neg", "pos"] and saved["columns"] == {
      "text_column": "body", "text_pair_column": "", "label_column": "queue", "input_format": "",
      "label_separator": "|"}
  # A new file, and neither the columns nor the SentencePiece model named again (spiece.model is in model_dir).
  _write_csv(tmp_path / "new.csv", ["ticket", "body"], [("n0", GOOD[0]), ("n1", BAD[0])])
  predict = {"model": TINY_MODEL, "classifier_dropout": 0.0, "train_data": _data(tmp_path / "missing.csv", 8, True),
             "predict_data": _data(tmp_path / "new.csv")}
  out = train.run("text_classification", "predict", str(tmp_path / "m"), params_override=_override(predict))
  rows = list(csv.DictReader(open(out["files"][str(tmp_path / "new.csv")], encoding="utf-8")))
  assert [r["text"] for r in rows] == [GOOD[0], BAD[0]] and {r["prediction"] for r in rows} <= {"neg", "pos"}
  # An explicit setting still wins over the saved one.
  _write_csv(tmp_path / "other.csv", ["summary", "body"], [("short words", GOOD[0])])
  predict = dict(predict, predict_data=_data(tmp_path / "other.csv"), text_column="summary")
  out = train.run("text_classification", "predict", str(tmp_path / "m"), params_override=_override(predict))
  rows = list(csv.DictReader(open(out["files"][str(tmp_path / "other.csv")], encoding="utf-8")))
  assert [r["text"] for r in rows] == ["short words"]


def test_an_empty_pair_cell_packs_one_segment_as_glue_and_the_pipelines():
  """Review of 2026-11-30: GLUE and the pipelines pack a second text without pieces as `[CLS] A [SEP]` (the
  reference's `if tokens_b:`); the text tasks' records packed an empty `text_pair_column` cell as
  `[CLS] A [SEP] [SEP]`, a model trained on such rows then met another packing when served."""
  import numpy as np

  from official_albert.tokenization.tokenizer import pack_ids
  example = text_data.TextExample(path="t.csv", line=2, guid="t.csv:2", text="a", text_pair="", label="pos")
  for empty in ([], np.zeros([0], np.int32)):
    record = text_data.text_record(example, [7, 8, 9], empty, 8, "class", ["neg", "pos"])
    single = pack_ids([7, 8, 9], None, 8)
    assert record["input_word_ids"].tolist() == list(single["input_word_ids"])
    assert record["input_type_ids"].tolist() == [0] * 8 and int(record["label_ids"]) == 1
  paired = text_data.text_record(example, [7, 8, 9], [5], 8, "class", ["neg", "pos"])
  assert paired["input_type_ids"].tolist() == [0, 0, 0, 0, 0, 1, 1, 0]


def test_task_labels_naming_one_label_in_two_unicode_forms_are_duplicates():
  """(`négatif` as NFC and as NFD passed the duplicate check, then read as one label: two outputs for one class.)"""
  from official_albert.training.experiment_config import ConfigError  # noqa: PLC0415
  with pytest.raises(ConfigError, match=r"task.labels has duplicates"):
    text.TextClassificationConfig(labels=["n\u00e9gatif", "ne\u0301gatif", "positif"]).validate()
  text.TextClassificationConfig(labels=["n\u00e9gatif", "positif"]).validate()


def test_repeated_rows_and_evaluation_rows_seen_in_training_are_counted_and_warned(tmp_path, caplog):
  """Review s56 (the journey): duplicated rows, the same text under two labels, and a dev file made of training rows
  passed without a word (an evaluation on training rows inflated eval_accuracy and the best checkpoint's choice)."""
  train_csv, dev_csv = tmp_path / "train.csv", tmp_path / "dev.csv"
  _write_csv(train_csv, ["text", "label"], [("a", "x"), ("b", "y"), ("a", "x"), ("b", "x"), ("c", "y")])
  _write_csv(dev_csv, ["text", "label"], [("c", "y"), ("d", "x")])
  options = text_data.ReadOptions()
  with caplog.at_level(logging.WARNING):
    text_data.read_examples([str(train_csv)], options)
  assert f"2 of 5 rows repeat an earlier row's text (first: {train_csv}:4 repeats {train_csv}:2); 1 of them with " \
         f"another label (first: {train_csv}:5 repeats {train_csv}:3)" in caplog.text
  caplog.clear()
  with caplog.at_level(logging.WARNING):
    text_data.read_examples([str(dev_csv)], options, training_input=str(train_csv))
    text_data.read_examples([str(dev_csv)], options, training_input=str(tmp_path / "gone.csv"))  # (not an error)
  assert f"1 of 2 evaluation rows are training rows too (first: {dev_csv}:2 repeats {train_csv}:6)" in caplog.text
  assert caplog.text.count("evaluation rows are training rows") == 1
  caplog.clear()
  with caplog.at_level(logging.WARNING):  # (the training file itself as the evaluation input)
    text_data.read_examples([str(train_csv)], options, training_input=str(train_csv))
  assert f"The evaluation input is the training input ({train_csv})" in caplog.text
