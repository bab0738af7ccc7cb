"""RACE: reading the raw release layout, 4-option encoding and accuracy per level (reference §5.3).

The raw release has one JSON article per file under `RACE/{train,dev,test}/{middle,high}/*.txt` (keys `article`,
`questions`, `options`, `answers`, `id`). The reference reads a user-built `all.txt` instead (the fix that read every
file was merged and then reverted upstream); this module reads the release files directly, in sorted order.

Encoding per option (`official_albert.tokenization.choices`, shared with the library's multiple-choice predictor): a
question with "_" has every "_" replaced by the option, otherwise the text is "question option"; the sequence is
`[CLS] article [SEP] qa [SEP]`, the qa part keeps its LAST `max_qa_length` tokens and the article is cut from the end
to fit. Features are [4, L] per example.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
from typing import Dict, List, Optional, Sequence

import numpy as np

from official_albert import file_io
from official_albert.tokenization.choices import pack_choices, qa_text  # noqa: F401  (qa_text: re-exported)
from tasks.records import RecordWriter

logger = logging.getLogger(__name__)

NUM_CHOICES = 4
LEVELS = ("middle", "high")
SPLITS = ("train", "dev", "test")


class RaceDataError(ValueError):
  """A RACE file is malformed; the message names the file."""


@dataclasses.dataclass
class RaceExample:
  """One question with its 4 options.

  Attributes:
    example_id: "<file id>-<question index>".
    level: "middle" or "high".
    article: the passage.
    question: the question (may contain "_" blanks).
    options: the 4 option texts.
    label: 0..3 (A..D), or None when the file has no answers.
  """
  example_id: str
  level: str
  article: str
  question: str
  options: List[str]
  label: Optional[int]


def split_dir(data_dir: str, split: str) -> str:
  """`data_dir` may be the folder holding `RACE/`, `RACE/` itself, or one split's folder (holding middle/, high/)."""
  gfile = file_io.gfile()
  for candidate in (os.path.join(data_dir, "RACE", split), os.path.join(data_dir, split)):
    if gfile.isdir(candidate):
      return candidate
  if any(gfile.isdir(os.path.join(data_dir, level)) for level in LEVELS):
    return data_dir
  raise FileNotFoundError(f"RACE split {split!r} not found under {data_dir} (expected RACE/{split}/{{middle,high}}).")


def read_race_file(path: str, level: str) -> List[RaceExample]:
  """Reads one article file (one JSON object) → its questions."""
  gfile = file_io.gfile()
  with gfile.GFile(path, "r") as f:
    text = f.read()
  try:
    obj = json.loads(text)
  except json.JSONDecodeError as e:
    raise RaceDataError(f"{path}: not a JSON article ({e}).") from None
  for key in ("article", "questions", "options"):
    if key not in obj:
      raise RaceDataError(f"{path}: missing key {key!r}.")
  questions, options = obj["questions"], obj["options"]
  answers = obj.get("answers")
  if len(options) != len(questions) or (answers is not None and len(answers) != len(questions)):
    raise RaceDataError(f"{path}: {len(questions)} questions, {len(options)} option lists, "
                        f"{None if answers is None else len(answers)} answers.")
  file_id = obj.get("id", os.path.basename(path))
  out = []
  for i, (question, opts) in enumerate(zip(questions, options)):
    if len(opts) != NUM_CHOICES:
      raise RaceDataError(f"{path}: question {i} has {len(opts)} options, expected {NUM_CHOICES}.")
    label = None
    if answers is not None:
      letter = answers[i]
      if not isinstance(letter, str) or len(letter) != 1 or not "A" <= letter <= "D":
        raise RaceDataError(f"{path}: question {i}: answer {letter!r} is not one of A, B, C, D.")
      label = ord(letter) - ord("A")
    out.append(RaceExample(example_id=f"{file_id}-{i}", level=level, article=obj["article"], question=question,
                           options=list(opts), label=label))
  return out


def read_examples(data_dir: str, split: str, levels: Sequence[str] = LEVELS) -> List[RaceExample]:
  """Reads every `*.txt` of `RACE/<split>/<level>/` (sorted, so the order is deterministic).

  Args:
    data_dir: folder holding `RACE/` (or `RACE/` itself).
    split: "train", "dev" or "test".
    levels: ("middle", "high") or one of them (the reference's middle_only / high_only).
  """
  gfile = file_io.gfile()
  base = split_dir(data_dir, split)
  examples = []
  for level in levels:
    if level not in LEVELS:
      raise ValueError(f"RACE level must be one of {LEVELS}, got {level!r}.")
    level_dir = os.path.join(base, level)
    if not gfile.isdir(level_dir):
      raise FileNotFoundError(f"RACE folder {level_dir} not found.")
    files = sorted(n for n in gfile.listdir(level_dir) if n.endswith(".txt"))
    if not files:
      raise FileNotFoundError(f"No *.txt article files in {level_dir}.")
    for name in files:
      examples.extend(read_race_file(os.path.join(level_dir, name), level))
  logger.info("RACE %s %s: %d questions.", split, "+".join(levels), len(examples))
  return examples


def convert_example(example: RaceExample, tokenizer, max_seq_length: int = 512,
                    max_qa_length: int = 128) -> Dict[str, np.ndarray]:
  """[4, L] `input_word_ids`/`input_mask`/`input_type_ids` and the scalar `label_ids` (−1 without a label)."""
  rows = pack_choices(tokenizer, example.article, example.question, example.options, max_seq_length, max_qa_length)
  features = {k: np.asarray([r[k] for r in rows], np.int32) for k in rows[0]}
  features["label_ids"] = np.int32(-1 if example.label is None else example.label)
  return features


def convert_examples(examples: Sequence[RaceExample], tokenizer, max_seq_length: int = 512,
                     max_qa_length: int = 128) -> Dict[str, np.ndarray]:
  """Stacked features: [N, 4, L] inputs and [N] labels."""
  feats = [convert_example(e, tokenizer, max_seq_length, max_qa_length) for e in examples]
  if not feats:
    shape = [0, NUM_CHOICES, max_seq_length]
    return {"input_word_ids": np.zeros(shape, np.int32), "input_mask": np.zeros(shape, np.int32),
            "input_type_ids": np.zeros(shape, np.int32), "label_ids": np.zeros([0], np.int32)}
  return {k: np.stack([f[k] for f in feats]) for k in feats[0]}


class RaceRecords(RecordWriter):
  """`create_finetuning_data --task=race`: one record per question, [4, L] inputs + `label_ids` + `level_ids`."""

  default_max_seq_length = 512

  def __init__(self, options):
    super().__init__(options)
    if not options.input_dir:
      raise ValueError("--input_dir (the folder holding RACE/) is required for RACE.")

  def input_files(self, split: str) -> List[str]:
    gfile = file_io.gfile()
    base, paths = split_dir(self.options.input_dir, split), []
    for level in self.options.race_levels:
      level_dir = os.path.join(base, level)
      if not gfile.isdir(level_dir):
        raise FileNotFoundError(f"RACE folder {level_dir} not found (levels read: {list(self.options.race_levels)}).")
      paths += [os.path.join(level_dir, n) for n in gfile.listdir(level_dir) if n.endswith(".txt")]
    return paths

  def cache_settings(self):
    return {"max_qa_length": self.options.max_qa_length, "levels": list(self.options.race_levels)}

  def records(self, split: str, tokenizer):
    o = self.options
    examples = read_examples(o.input_dir, split, o.race_levels)

    def generate():
      for e in examples:
        record = convert_example(e, tokenizer, o.max_seq_length, o.max_qa_length)
        record["level_ids"] = LEVELS.index(e.level)
        yield record

    return generate(), {"num_examples": len(examples), "num_choices": NUM_CHOICES,
                        "levels": {lv: sum(e.level == lv for e in examples) for lv in o.race_levels}}


def compute_metrics(labels, predictions, levels: Optional[Sequence[str]] = None) -> Dict[str, float]:
  """`eval_accuracy` overall, plus `accuracy_middle` / `accuracy_high` when levels are given.

  Args:
    labels: [N] gold indices.
    predictions: [N] predicted indices, or logits [N, 4].
    levels: [N] "middle"/"high" per example.
  """
  labels = np.asarray(labels)
  predictions = np.asarray(predictions)
  if predictions.ndim == 2:
    predictions = np.argmax(predictions, axis=-1)
  if labels.shape != predictions.shape:
    raise ValueError(f"labels shape {labels.shape} != predictions shape {predictions.shape}.")
  correct = labels == predictions
  out = {"eval_accuracy": float(np.mean(correct)) if correct.size else 0.0}
  if levels is not None:
    levels = np.asarray(levels)
    if levels.shape != labels.shape:
      raise ValueError(f"levels shape {levels.shape} != labels shape {labels.shape}.")
    for level in LEVELS:
      sel = levels == level
      if sel.any():
        out[f"accuracy_{level}"] = float(np.mean(correct[sel]))
        out[f"num_{level}"] = int(sel.sum())
  return out


# ------------------------------------------------------------------------------------------------------- the Task
# Imported here so the readers and encoders above stay usable without TensorFlow/Keras.
import keras  # noqa: E402
import tensorflow as tf  # noqa: E402

from official_albert.training import base_task  # noqa: E402
from official_albert.training.experiment_config import DataConfig, eval_data_config  # noqa: E402
from tasks import raw_inputs  # noqa: E402
from tasks.classification import ClassificationTask  # noqa: E402


@dataclasses.dataclass
class RaceTaskConfig(raw_inputs.RawInputTaskConfig):
  """A RACE fine-tuning run (reference: msl 512, max_qa 128, lr 1e-5, 12000 steps, warmup 1000, batch 32).

  Attributes:
    classifier_dropout: dropout on the pooled output before the [1, H] scorer (0.1).
    train_data / validation_data: TFRecords from `create_finetuning_data --task=race` (`seq_length` = L), or the
      raw RACE folder (train / dev split; or one split's folder) turned into cached records (`tasks.raw_inputs`,
      with spm_model_file, do_lower_case, tokenizer_mode, records_dir, max_qa_length and levels).
    predict_data: `--mode=predict` records (create_finetuning_data `--splits=test`), in file order, or the raw
      RACE folder (its `predict_split`, `predict_levels`; the question ids then come from it).
    predict_input_dir, predict_split, predict_levels: the RACE folder, split and levels those records were made
      from; they give predictions.json its question ids. predict_input_dir '' = ids "0".."N-1" in record order.
    max_qa_length, levels: question+option cap and levels of raw train / validation data (create_finetuning_data's
      --max_qa_length, --race_levels).
  """
  classifier_dropout: float = 0.1
  train_data: DataConfig = dataclasses.field(default_factory=lambda: DataConfig(global_batch_size=32,
                                                                                seq_length=512))
  validation_data: DataConfig = dataclasses.field(default_factory=eval_data_config)
  predict_data: DataConfig = dataclasses.field(default_factory=eval_data_config)
  predict_input_dir: str = ""
  predict_split: str = "test"
  predict_levels: List[str] = dataclasses.field(default_factory=lambda: list(LEVELS))
  max_qa_length: int = 128
  levels: List[str] = dataclasses.field(default_factory=lambda: list(LEVELS))


def race_feature_spec(seq_length: int):
  spec = {k: tf.io.FixedLenFeature([NUM_CHOICES * seq_length], tf.int64) for k in base_task.ENCODER_INPUT_KEYS}
  spec["label_ids"] = tf.io.FixedLenFeature([], tf.int64)
  spec["level_ids"] = tf.io.FixedLenFeature([], tf.int64)
  return spec


@base_task.register_task("race", config_cls=RaceTaskConfig)
class RaceTask(raw_inputs.RawRecordsMixin, ClassificationTask):
  """4-way multiple choice with `AlbertMultipleChoice`; eval: `eval_accuracy`, `accuracy_middle`, `accuracy_high`."""

  best_metric = "eval_accuracy"
  extra_label_keys = ("level_ids",)

  def build_model(self) -> keras.Model:
    from official_albert.modeling.models import AlbertMultipleChoice
    model = AlbertMultipleChoice(self.params.model.to_albert_config(), num_choices=NUM_CHOICES,
                                 dropout_rate=self.params.classifier_dropout)
    seq = max(self.params.train_data.seq_length, 2)
    model({k: tf.zeros([1, NUM_CHOICES, seq], tf.int32) for k in base_task.ENCODER_INPUT_KEYS}, training=False)
    return model

  def feature_spec(self, seq_length: int):
    return race_feature_spec(seq_length)

  def raw_writer(self, data_config: DataConfig, role: str):
    return raw_inputs.race_raw_writer(self.params, data_config, role)

  def build_inputs(self, data_config: DataConfig,
                   input_context: Optional[tf.distribute.InputContext] = None) -> tf.data.Dataset:
    return super().build_inputs(self.raw_to_records(data_config), input_context)

  def decode(self, records, seq_length: int):
    out = super().decode(records, seq_length)
    for k in base_task.ENCODER_INPUT_KEYS:
      out[k] = tf.reshape(out[k], [-1, NUM_CHOICES, seq_length])
    return out

  def compute_metrics(self, logits, labels, extras) -> Dict[str, float]:
    return compute_metrics(labels, logits, np.asarray(LEVELS)[extras["level_ids"]])

  def write_prediction_files(self, aggregated_logs, output_dir: str) -> Dict[str, str]:
    """`<output_dir>/predictions.json`: {question id: answer letter A-D}."""
    logits = np.concatenate(aggregated_logs["logits"], axis=0)
    p = self.params
    folder = p.predict_input_dir or (p.predict_data.input_path if self.raw_writer(p.predict_data, "predict") else "")
    if folder:
      ids = [e.example_id for e in read_examples(folder, p.predict_split, p.predict_levels)]
      if len(ids) != len(logits):
        raise ValueError(f"RACE predict: {len(ids)} questions in {folder} ({p.predict_split}, "
                         f"{'+'.join(p.predict_levels)}) but {len(logits)} records in {p.predict_data.input_path}.")
      if len(set(ids)) != len(ids):
        raise ValueError(f"RACE predict: duplicate question ids in {folder} ({p.predict_split}).")
    else:
      logger.warning("task.predict_input_dir is empty: RACE predictions are keyed 0..%d in record order.",
                     len(logits) - 1)
      ids = [str(i) for i in range(len(logits))]
    letters = ["ABCD"[i] for i in np.argmax(logits, axis=-1)]
    path = os.path.join(output_dir, "predictions.json")
    file_io.atomic_write_json(path, dict(zip(ids, letters)), sort_keys=False)
    return {"predictions": path}
