"""`text_multiple_choice`: multiple choice on one's own rows, any number of choices up to task.num_choices.

The padding choices are masked out of the softmax: a row's probabilities and loss are the same padded to 5 choices,
among rows of other counts, as run at exactly its own count (the same weights). Bad rows name file:line and the key;
labels are read by index or by text; train / eval / predict run through the train binary; and a tiny model learns
real text (SST-2's sentiment as a choice between "positive" and "negative", some rows with a third choice).
"""

import csv
import functools
import json
import random

import numpy as np
import pytest
import tensorflow as tf

from official_albert import train
from official_albert.serving import served_heads
from official_albert.serving import task_pipelines
from official_albert.training.experiment_config import ConfigError
from tasks import row_files
from tasks.choice import data as choice_data
from tasks.choice import TextMultipleChoiceTask
from tasks.choice.task import masked_logits
from tasks.row_files import TextDataError
from tests import tiny

MODEL = {"preset": "", "vocab_size": 1000, "embedding_size": 16, "hidden_size": 32, "num_hidden_layers": 1,
         "num_attention_heads": 2, "intermediate_size": 64, "max_position_embeddings": 64,
         "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0}
make_task = functools.partial(tiny.build_task, TextMultipleChoiceTask, "text_multiple_choice")

ROWS = [
    {"context": "The cat sat on the mat all day.", "question": "Where did the cat sit?",
     "choices": ["on the mat", "in the tree", "under the car"], "label": 0},
    {"context": "Rain fell in the city.", "question": "What fell?", "choices": ["snow", "rain"], "label": "rain"},
    {"context": "Tom bought five apples and two pears.", "question": "How many apples did Tom buy?",
     "choices": ["two", "three", "four", "five", "six"], "label": 3},
    {"context": "", "question": "The sky on a clear day is _.", "choices": ["blue", "green", "red", "black"],
     "label": "blue"},
]


def write_jsonl(path, rows):
  path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
  return str(path)


def override(train_file, dev_file, spm_model_file, steps=2, num_choices=5, **task):
  data = {"global_batch_size": 2, "seq_length": 32, "seed": 7}
  config = tiny.finetune_override(MODEL, train_file, dev_file, spm_model_file, steps, 1e-3, data,
                                  num_choices=num_choices, classifier_dropout=0.0, max_qa_length=16, **task)
  config["task"]["predict_data"] = {"input_path": dev_file, "global_batch_size": 2, "seq_length": 32}
  return config


# ----------------------------------------------------------------------------------------------------- the mask
def _batch(task, rows, tmp_path, name):
  path = write_jsonl(tmp_path / f"{name}.jsonl", rows)
  task.params.validation_data.input_path = path
  task.params.validation_data.global_batch_size = len(rows)
  return next(iter(task.build_inputs(task.params.validation_data, role="eval")))


def test_a_row_scores_the_same_padded_among_others_as_at_its_own_count(tmp_path, spm_model_file):
  """Row 0 (3 choices) in a task of 5 choices beside rows of 2, 5 and 4 choices, and alone in a task of exactly 3
  choices with the same weights: the same probabilities over its 3 choices and the same loss; no padding choice
  gets probability or the argmax."""
  path = write_jsonl(tmp_path / "rows.jsonl", ROWS)
  five = make_task(override(path, path, spm_model_file, num_choices=5), str(tmp_path / "m5"))
  three = make_task(override(path, path, spm_model_file, num_choices=3), str(tmp_path / "m3"))
  tf.keras.utils.set_random_seed(1)
  model5, model3 = five.build_model(), three.build_model()
  model3.set_weights(model5.get_weights())  # (the scorer is [1, H] whatever the count: the same variables)
  batch5 = _batch(five, ROWS, tmp_path, "all")
  batch3 = _batch(three, ROWS[:1], tmp_path, "one")
  logits5 = masked_logits(model5(five.model_inputs(batch5))["logits"], batch5["choice_mask"]).numpy()
  logits3 = masked_logits(model3(three.model_inputs(batch3))["logits"], batch3["choice_mask"]).numpy()
  np.testing.assert_array_equal(batch5["choice_mask"].numpy(), [[1, 1, 1, 0, 0], [1, 1, 0, 0, 0], [1] * 5,
                                                                [1, 1, 1, 1, 0]])
  p5, p3 = tf.nn.softmax(logits5).numpy(), tf.nn.softmax(logits3).numpy()
  np.testing.assert_allclose(p5[0, :3], p3[0], atol=1e-6)
  assert p5[0, 3:].max() < 1e-30 and p5[1, 2:].max() < 1e-30 and p5[3, 4] < 1e-30
  one = _batch(five, ROWS[:1], tmp_path, "first")
  alone = masked_logits(model5(five.model_inputs(one))["logits"], one["choice_mask"]).numpy()
  np.testing.assert_allclose(alone[0, :3], logits5[0, :3], atol=1e-5)  # (the other rows change nothing)
  loss5 = float(five.build_losses(one, {"logits": model5(five.model_inputs(one))["logits"]}))
  loss3 = float(three.build_losses(batch3, {"logits": model3(three.model_inputs(batch3))["logits"]}))
  assert loss5 == pytest.approx(loss3, abs=1e-5)
  assert loss3 == pytest.approx(-np.log(p3[0, 0]), abs=1e-5)


# ----------------------------------------------------------------------------------------------------- rows
def test_labels_by_index_or_text_and_csv_cells_holding_lists(tmp_path, spm_model_file):
  csv_path = tmp_path / "rows.csv"
  with open(csv_path, "w", newline="", encoding="utf-8") as f:
    writer = csv.writer(f)
    writer.writerow(["context", "question", "choices", "label"])
    for row in ROWS:
      writer.writerow([row["context"], row["question"], json.dumps(row["choices"]), row["label"]])
  task = make_task(override(str(csv_path), str(csv_path), spm_model_file), str(tmp_path / "m"))
  examples = task.read(task.params.train_data, "train")
  assert [e.label for e in examples] == [0, 1, 3, 0]
  assert [len(e.choices) for e in examples] == [3, 2, 5, 4] and examples[3].line == 5


@pytest.mark.parametrize("row,words", [
    ({"question": "q?", "choices": ["a", "b"], "label": 2}, ["'label'", "2 is not", "2 choices (0..1, A..B"]),
    ({"question": "q?", "choices": ["a", "b"], "label": "c"}, ["'c' is not", "its text or its letter"]),
    ({"question": "q?", "choices": ["1", "2", "3", "4"], "label": "3"},
     ["'3' names different choices", "as index: choice 3 ('4')", "as text: choice 2 ('3')",
      "task.label_format to index or text"]),
    ({"question": "q?", "choices": ["B", "A"], "label": "A"}, ["as letter: choice 0", "as text: choice 1"]),
    ({"question": "q?", "choices": ["a", "a"], "label": "a"}, ["2 choices ([0, 1]) are the text 'a'"]),
    ({"question": "q?", "choices": ["a"], "label": 0}, ["1 choices", "task.num_choices=5"]),
    ({"question": "q?", "choices": list("abcdef"), "label": 0}, ["6 choices", "raise task.num_choices"]),
    ({"question": " ", "choices": ["a", "b"], "label": 0}, ["'question'", "task.question_column"]),
    ({"question": "q?", "choices": "a, b", "label": 0}, ["'choices'", "a JSON list of texts"]),
    ({"question": "q?", "choices": ["a", "b"]}, ["'label'", "no answer"]),
])
def test_bad_rows_name_file_line_and_key(tmp_path, spm_model_file, row, words):
  path = write_jsonl(tmp_path / "bad.jsonl", [dict(row, context="c")])
  task = make_task(override(path, path, spm_model_file), str(tmp_path / "m"))
  with pytest.raises(TextDataError) as error:
    task.read(task.params.train_data, "train")
  for word in words + [f"{tmp_path / 'bad.jsonl'}:1:"]:
    assert word in str(error.value), (word, str(error.value))


@pytest.mark.parametrize("label_format,label,choices,index", [
    ("auto", "B", ["x", "y", "z"], 1), ("auto", 2, ["x", "y", "z"], 2), ("auto", "15", ["12", "15", "20"], 1),
    ("auto", 15, ["12", "15", "20"], 1), ("auto", "1", ["0", "1", "2"], 1), ("auto", " y ", ["x", "y"], 1),
    ("text", "3", ["1", "2", "3", "4"], 2), ("index", "3", ["1", "2", "3", "4"], 3), ("letter", "b", ["1", "2"], 1),
    ("letter", "A", ["B", "A"], 0), ("text", "A", ["B", "A"], 1),
    ("auto", "²", ["x²", "²"], 1), ("index1", "1", ["x", "y"], 0), ("index1", 2, ["x", "y"], 1),
    ("index1", "B", ["x", "y"], 1)])  # (review s51: "²".isdigit() is True and int("²") raised a bare ValueError)
def test_labels_as_index_text_or_letter(label_format, label, choices, index):
  """An index, a choice's text or its letter: "auto" reads whichever names a choice (numeric choices such as years
  or counts, letters as RACE / ARC / CommonsenseQA write them) and refuses a label two readings read differently;
  task.label_format names one reading."""
  assert choice_data.answer_index(label, choices, "label", label_format) == index


def test_a_lower_case_letter_is_a_letter_only_when_the_format_says():
  with pytest.raises(row_files.RowProblem, match="its text or its letter"):
    choice_data.answer_index("b", ["x", "y"], "label")  # ("b" could be an answer's text)
  with pytest.raises(row_files.RowProblem, match="task.label_format=text"):
    choice_data.answer_index("1", ["x", "y"], "label", "text")
  with pytest.raises(row_files.RowProblem):
    choice_data.answer_index("²", ["x", "y"], "label", "index")


def test_an_answer_packed_like_another_choice_is_a_bad_row(tmp_path, spm_model_file):
  """A blank early in a long question with max_qa_length keeping the end cut every choice away, and "US" / "us"
  pack alike lower-cased: the label named one of identical inputs (no error; the label was noise)."""
  rows = [{"context": "x", "question": "Which country?", "choices": ["US", "us", "France"], "label": "US"},
          {"context": "x", "question": "Which country?", "choices": ["US", "France"], "label": "France"}]
  path = write_jsonl(tmp_path / "rows.jsonl", rows)
  task = make_task(override(path, path, spm_model_file), str(tmp_path / "m"))
  examples = task.read(task.params.train_data, "train")
  with pytest.raises(TextDataError, match=r"rows.jsonl:1: the answer \(choice 0, 'US'\) packs to the same pieces as "
                     r"choice 1 \('us'\)[\s\S]*skip_bad_rows"):
    list(choice_data.records(examples, [0, 1], task.tokenizer, 32, 5, 16))
  kept = list(choice_data.records(examples, [0, 1], task.tokenizer, 32, 5, 16, skip_bad_rows=True))
  assert [int(r["example_index"]) for r in kept] == [1]


def test_records_another_writer_made_are_refused_naming_the_file(tmp_path, spm_model_file):
  """RACE's records (no choice_mask / example_index) as input_path stopped the first batch with TensorFlow's parse
  error, naming neither the file nor the fix."""
  from official_albert.data import records as records_lib  # noqa: PLC0415
  zeros = np.zeros([4, 32], np.int32)
  path = str(tmp_path / "race_train.tf_record")
  records_lib.write_tfrecord(path, [{"input_word_ids": zeros, "input_mask": zeros, "input_type_ids": zeros,
                                     "label_ids": 1, "level_ids": 0}])
  task = make_task(override(path, path, spm_model_file, num_choices=4), str(tmp_path / "m"))
  with pytest.raises(ValueError, match=r"race_train.tf_record: [\s\S]*choice_mask missing[\s\S]*CSV / TSV / JSONL"):
    task.build_inputs(task.params.train_data, role="train")


@pytest.mark.parametrize("skip_bad_rows", [False, True])
def test_answers_numbered_from_one_are_refused_not_shifted(tmp_path, skip_bad_rows):
  """ARC's answerKey and many CSV exports number answers from 1: read 0-based, every label named the next choice and
  only a label equal to the choice count was a bad row (skipped under skip_bad_rows, the rest trained shifted)."""
  path = tmp_path / "arc.csv"
  rows = [("Which is a mammal?", ["whale", "shark", "trout"], "1"), ("Which is hot?", ["ice", "fire", "snow"], "2"),
          ("Which is a metal?", ["wood", "glass", "iron"], "3")]
  with open(path, "w", newline="", encoding="utf-8") as f:
    writer = csv.writer(f)
    writer.writerow(["question", "choices", "label"])
    writer.writerows([q, json.dumps(c), label] for q, c, label in rows)
  columns = {"context": "", "question": "question", "choices": "choices", "label": "label"}
  with pytest.raises(TextDataError, match=r"arc.csv:4:[\s\S]*from 1[\s\S]*label_format=index1"):
    choice_data.read_choice_rows(str(path), columns, 4, True, skip_bad_rows=skip_bad_rows)
  read = choice_data.read_choice_rows(str(path), columns, 4, True, label_format="index1")
  assert [e.choices[e.label] for e in read] == ["whale", "fire", "iron"]
  path.write_text(path.read_text(encoding="utf-8").replace('"]",3', '"]",0'), encoding="utf-8")
  read = choice_data.read_choice_rows(str(path), columns, 4, True)  # (a 0 label: the file is 0-based)
  assert [e.label for e in read] == [1, 2, 0]
  # Answers that are the text of a numeric choice are texts, not indices: "4" among ["4", "5", "6", "7"].
  quiz = tmp_path / "quiz.jsonl"
  quiz.write_text("".join(json.dumps({"question": f"{a} + 0?", "choices": ["4", "5", "6", "7"], "label": str(a)})
                          + "\n" for a in (4, 4, 5)), encoding="utf-8")
  assert [e.label for e in choice_data.read_choice_rows(str(quiz), columns, 4, True, skip_bad_rows=skip_bad_rows)] == [
      0, 0, 1]


def test_config_errors_name_the_key():
  for task, words in (({"label_format": "letters"}, ["task.label_format='letters'", "auto"]),
                      ({"num_choices": 1}, ["task.num_choices=1", "at least 2"]),
                      ({"choices_column": ""}, ["task.choices_column is empty"])):
    with pytest.raises(ConfigError) as error:
      train.build_params("text_multiple_choice", params_override=json.dumps({"task": {"model": MODEL, **task}}))
    for word in words:
      assert word in str(error.value)


# ----------------------------------------------------------------------------------------------------- the binary
@pytest.mark.slow
def test_train_eval_and_predict_through_the_binary(tmp_path, spm_model_file):
  path = write_jsonl(tmp_path / "rows.jsonl", ROWS)
  config = override(path, path, spm_model_file, steps=2)
  result = tiny.train_run("text_multiple_choice", tmp_path / "m", config)["eval_results"]
  assert result["num_examples"] == 4 and 0.0 <= result["eval_accuracy"] <= 1.0 and result["eval_loss"] > 0
  predicted = tiny.train_run("text_multiple_choice", tmp_path / "m", config, mode="predict")
  lines = [json.loads(line) for line in open(predicted["files"]["predictions"], encoding="utf-8")]
  assert [line["line"] for line in lines] == [1, 2, 3, 4]
  for line, row in zip(lines, ROWS):
    assert len(line["probabilities"]) == len(row["choices"])
    assert sum(line["probabilities"]) == pytest.approx(1.0, abs=1e-4)
    assert line["choice"] == row["choices"][line["prediction"]]
  # The run's directory serves as multiple choice (its params.yaml names the task; the variables are a
  # classifier's), and the pipeline on it, at each row's own choice count, gives --mode=predict's probabilities.
  model_dir = str(tmp_path / "m")
  assert served_heads.directory_head(model_dir) == served_heads.MULTIPLE_CHOICE
  for line, row in zip(lines, ROWS):
    answer = task_pipelines.multiple_choice(model_dir, row["context"], row["question"], row["choices"])
    assert answer["label"] == line["prediction"]
    np.testing.assert_allclose(answer["scores"], line["probabilities"], atol=1e-5)


# ----------------------------------------------------------------------------------------------------- learning
@pytest.mark.large
@pytest.mark.slow
def test_a_tiny_model_learns_real_sentiment_as_a_choice(shared_data_dir, tmp_path):
  """SST-2 (shared data) as multiple choice: "Which review is positive?" over one positive sentence and one or (every
  third row) two negative ones, in a seeded order: rows of 2 and 3 choices mix, chance 0.44 on the dev rows. A tiny
  model from scratch (test_sst2_finetune's settings: a SentencePiece model trained on the training sentences, AdamW
  3e-4, 300 steps) must beat chance clearly on the held-out dev rows."""
  glue_dir = shared_data_dir / "glue"
  if not (glue_dir / "SST-2" / "dev.tsv").exists():
    pytest.skip(f"no SST-2 sample under {glue_dir}")
  from data_prep import train_sentencepiece
  from tasks import glue

  def rows(examples, seed):
    rng = random.Random(seed)
    positive = [e.text_a for e in examples if e.label == "1"]
    negative = [e.text_a for e in examples if e.label != "1"]
    out = []
    for i, sentence in enumerate(positive):
      choices = [negative[(2 * i + k) % len(negative)] for k in range(2 if i % 3 == 0 else 1)]
      choices.insert(rng.randrange(len(choices) + 1), sentence)
      out.append({"question": "Which review is positive?", "choices": choices, "label": choices.index(sentence)})
    return out

  train_examples = glue.read_examples("sst-2", str(glue_dir), "train")
  dev_examples = glue.read_examples("sst-2", str(glue_dir), "dev")
  text_file = tmp_path / "sst2_train.txt"
  text_file.write_text("".join(e.text_a + "\n" for e in train_examples), encoding="utf-8")
  spm_model = train_sentencepiece.train_sentencepiece(
      [str(text_file)], str(tmp_path / "spm"), vocab_size=2000, hard_vocab_limit=False, seed=1, num_threads=1)
  train_file = write_jsonl(tmp_path / "train.jsonl", rows(train_examples, 1))
  dev_rows = rows(dev_examples, 2)
  dev_file = write_jsonl(tmp_path / "dev.jsonl", dev_rows)
  chance = float(np.mean([1 / len(r["choices"]) for r in dev_rows]))
  steps = 300
  model = dict(MODEL, vocab_size=2000, embedding_size=64, hidden_size=64, num_hidden_layers=2,
               intermediate_size=256, num_attention_heads=4)
  data = {"global_batch_size": 32, "seq_length": 64, "seed": 1}
  config = tiny.finetune_override(model, train_file, dev_file, spm_model, steps, 3e-4, data, loop=steps // 2,
                                  num_choices=3, classifier_dropout=0.0, max_qa_length=60, context_column="")
  config["runtime"]["seed"] = 1
  result = tiny.train_run("text_multiple_choice", tmp_path / "m", config)["eval_results"]
  assert result["num_examples"] == len(dev_rows) == 444
  assert result["eval_accuracy"] >= chance + 0.15, (chance, result)
