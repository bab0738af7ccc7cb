"""RACE data: reading the raw release layout, 4-option encoding, records and accuracy per level (reference §5.3).

The raw release has one JSON article per file under `RACE/{train,dev,test}/{middle,high}/*.txt` (keys `article`,
`questions`, `options`, `answers`, `id`). The reference reads a user-built `all.txt` instead, one article per line
(the fix that read every file was merged and then reverted upstream); this module reads the release files directly,
in sorted order, and reads a file of JSON lines as its articles, so a folder holding only `all.txt` works too (an
`all.txt` beside the release files is skipped: it repeats them).

Encoding per option (`official_albert.tokenization.choices`, shared with the library's multiple-choice predictor): a
question with "_" has every "_" replaced by the option, otherwise the text is "question option"; the sequence is
`[CLS] article [SEP] qa [SEP]`, the qa part keeps its LAST `max_qa_length` tokens and the article is cut from the end
to fit. Features are [4, L] per example.

The fine-tuning task is `tasks/race/task.py`; this module needs neither Keras nor the trainer.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
from typing import Dict, List, Optional, Sequence

import numpy as np

from official_albert import file_io
from official_albert.tokenization.choices import pack_choices
from tasks import raw_inputs
from tasks import row_files
from tasks.records import FILE_ORDER
from tasks.records import RecordOptions
from tasks.records import RecordWriter
from tasks.records import training_order

logger = logging.getLogger(__name__)

NUM_CHOICES = 4
LEVELS = ("middle", "high")
SPLITS = ("train", "dev", "test")
ALL_FILE = "all.txt"  # the reference's user-built file: every article of a level, one per line


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
  """Reads one article file → its questions: a release file (one JSON object), or a file of JSON lines, one article
  each (the reference's user-built `all.txt`)."""
  with file_io.open_file(path, "rb") as f:
    data = f.read()
  try:
    text = data.decode("utf-8-sig")
  except UnicodeDecodeError as e:  # kept (as before), but said: each bad byte became U+FFFD in the text
    text = data.decode("utf-8-sig", errors="replace")
    logger.warning("%s: %d undecodable byte sequence(s) replaced by U+FFFD, the first on line %d (%s at byte %d); "
                   "re-save the file as UTF-8 to keep those characters.", path,
                   text.count("\ufffd") - data.decode("utf-8-sig", errors="ignore").count("\ufffd"),
                   data[:e.start].count(b"\n") + 1, e.reason, e.start)
  # Lines end at \n (\r\n, \r) only: `splitlines` also splits at U+2028, U+0085 and other separators that a JSON
  # string may hold raw (`json.dumps(ensure_ascii=False)` writes them), cutting an article line in two.
  lines = [(n, line) for n, line in enumerate(row_files.physical_lines(text), 1) if line.strip()]
  if len(lines) <= 1 or not lines[0][1].rstrip().endswith("}"):
    return _article_questions(file_io.read_json(path, "article", error=RaceDataError), path, level)
  out = []
  for number, line in lines:  # JSON lines
    try:
      obj = json.loads(line)
    except json.JSONDecodeError as e:
      raise RaceDataError(f"{path}:{number}: not a JSON article ({e.msg}, column {e.colno}); a RACE .txt file is one "
                          "JSON article, or one article per line.") from None
    surrogate = row_files.lone_surrogate(line, obj)
    if surrogate:
      raise RaceDataError(f"{path}:{number}: {surrogate}.")
    out.extend(_article_questions(obj, f"{path}:{number}", level,
                                  default_id=f"{os.path.basename(path)}:{number}"))
  return out


def _article_questions(obj, path: str, level: str, default_id: Optional[str] = None) -> List[RaceExample]:
  """The questions of one parsed article (`path` names it in errors)."""
  if not isinstance(obj, dict):
    raise RaceDataError(f"{path}: expected a JSON object (an article), got {type(obj).__name__}.")
  for key in ("article", "questions", "options"):
    if key not in obj:
      raise RaceDataError(f"{path}: missing key {key!r}.")
  questions, options = obj["questions"], obj["options"]
  answers = obj.get("answers")
  if len(options) != len(questions) or (answers is not None and len(answers) != len(questions)):
    raise RaceDataError(f"{path}: {len(questions)} questions, {len(options)} option lists, "
                        f"{None if answers is None else len(answers)} answers.")
  file_id = obj.get("id", default_id or os.path.basename(path))
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
    if ALL_FILE in files and len(files) > 1:
      # The reference's all.txt concatenates the release files beside it: reading both would count every question
      # twice.
      logger.info("RACE %s: %s skipped (the %d article files beside it are read).", level_dir, ALL_FILE,
                  len(files) - 1)
      files.remove(ALL_FILE)
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
    return {"max_qa_length": self.options.max_qa_length, "levels": list(self.options.race_levels),
            "train_shuffle_seed": self.options.train_shuffle_seed}

  def records(self, split: str, tokenizer):
    o = self.options
    examples = training_order(read_examples(o.input_dir, split, o.race_levels), split, o.train_shuffle_seed)

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


# -------------------------------------------------------------------------------------------------- raw inputs
def raw_writer(params, data_config, role: str):
  """The `RaceRecords` and split of a raw RACE input (`tasks.raw_inputs`), None for records: a folder holding RACE/,
  RACE/ itself (the role's split) or one split's folder (middle/, high/)."""
  raw_inputs.refuse_raw_lists(data_config.input_path, (".txt",), "RACE")
  path = raw_inputs.single_path(data_config.input_path)
  if not raw_inputs.is_dir(path):
    return None
  levels = params.predict_levels if role == "predict" else params.levels
  options = RecordOptions(task="race", input_dir=path, max_seq_length=data_config.seq_length,
                          max_qa_length=params.max_qa_length, race_levels=tuple(levels),
                          **FILE_ORDER if role == "predict" else {})
  return RaceRecords(options), raw_inputs.split_of(role, params.predict_split)
