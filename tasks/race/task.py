"""RACE fine-tuning: the task config and the 4-way multiple-choice task over RACE records or raw folders (§5.3).

The data side — reading the release, the 4-option encoding, records, accuracy per level — is `tasks/race/data.py`;
the package (`tasks.race`) exports the public names of both.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from typing import Dict, List, Optional

import keras
import numpy as np
import tensorflow as tf

from official_albert import file_io
from official_albert.modeling.models import AlbertMultipleChoice
from official_albert.training import base_task
from official_albert.training.experiment_config import DataConfig
from tasks import raw_inputs
from tasks.classification import ClassificationTask
from tasks.classification import FineTuningTaskConfig
from tasks.race import data as race_data
from tasks.race.data import compute_metrics
from tasks.race.data import LEVELS
from tasks.race.data import NUM_CHOICES
from tasks.race.data import read_examples
from tasks.records import check_record_order
from tasks.squad.data import record_metas

logger = logging.getLogger(__name__)


@dataclasses.dataclass
class RaceTaskConfig(FineTuningTaskConfig):
  """A RACE fine-tuning run (reference: msl 512, max_qa 128, lr 1e-5, 12000 steps, warmup 1000, batch 32).

  Attributes:
    classifier_dropout, exit_heads: the settings of the [1, H] scorer (`FineTuningTaskConfig`).
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
    model = AlbertMultipleChoice(self.params.model.to_albert_config(), num_choices=NUM_CHOICES,
                                 dropout_rate=self.params.classifier_dropout, exit_heads=self.params.exit_heads)
    seq = max(self.params.train_data.seq_length, 2)
    model({k: tf.zeros([1, NUM_CHOICES, seq], tf.int32) for k in base_task.ENCODER_INPUT_KEYS}, training=False)
    return model

  def feature_spec(self, seq_length: int):
    return race_feature_spec(seq_length)

  def raw_writer(self, data_config: DataConfig, role: str):
    return race_data.raw_writer(self.params, data_config, role)

  def build_inputs(self, data_config: DataConfig, input_context: Optional[tf.distribute.InputContext] = None,
                   role: Optional[str] = None) -> tf.data.Dataset:
    return super().build_inputs(self.raw_to_records(data_config, role), input_context, role)

  def decode(self, records, seq_length: int):
    out = super().decode(records, seq_length)
    for k in base_task.ENCODER_INPUT_KEYS:
      out[k] = tf.reshape(out[k], [-1, NUM_CHOICES, seq_length])
    return out

  def compute_metrics(self, logits, labels, extras) -> Dict[str, float]:
    return compute_metrics(labels, logits, np.asarray(LEVELS)[extras["level_ids"]])

  def compute_metric_names(self) -> List[str]:
    """`eval_accuracy`, and `accuracy_<level>` / `num_<level>` for each of `task.levels` (the evaluation reports a
    level's pair when the evaluated questions include that level's)."""
    return ["eval_accuracy"] + [f"{kind}_{level}" for level in LEVELS if level in self.params.levels
                                for kind in ("accuracy", "num")]

  def predict_outputs(self, features, outputs):
    """The logits and each record's `level_ids`: predictions.json keys a record by the questions of its level."""
    out = super().predict_outputs(features, outputs)
    if "level_ids" in features:
      out["level_ids"] = features["level_ids"]
    return out

  def record_levels(self, aggregated_logs, count: int) -> Optional[List[str]]:
    """The level of each predicted record, in record order: the records' own `level_ids` (predict collects them),
    else the order and counts of the records' `.meta.json` (`levels`, written in --race_levels order), else None
    (unknown: read as `task.predict_levels` says)."""
    if "level_ids" in (aggregated_logs or {}):
      return [LEVELS[i] for i in np.concatenate(aggregated_logs["level_ids"], axis=0)]
    metas = record_metas(self.params.predict_data.input_path)
    if len(metas) != 1 or not isinstance(metas[0][1].get("levels"), dict) or metas[0][1].get("split") == "train":
      return None
    levels = [level for level, n in metas[0][1]["levels"].items() for _ in range(int(n))]
    if len(levels) != count:
      raise ValueError(f"RACE predict: {metas[0][0]} counts {len(levels)} questions ({metas[0][1]['levels']}) but "
                       f"{self.params.predict_data.input_path} gave {count} records; rebuild the records.")
    return levels

  def question_ids(self, folder: str, levels: Optional[List[str]], count: int) -> List[str]:
    """The question id of each of `count` records: the ids of `folder` read per level (sorted files, as
    create_finetuning_data reads them), handed out in record order by each record's level (`levels`; None = the
    records hold `task.predict_levels` in that order). Records made with --race_levels=high,middle were keyed
    with the middle questions' ids when only the count was checked.

    Raises:
      ValueError: the records' levels or counts per level are not those of the folder read with
        `task.predict_levels`; the message names both.
    """
    p = self.params
    examples = read_examples(folder, p.predict_split, p.predict_levels)
    ids = [e.example_id for e in examples]
    if len(set(ids)) != len(ids):
      raise ValueError(f"RACE predict: duplicate question ids in {folder} ({p.predict_split}).")
    read = {level: sum(e.level == level for e in examples) for level in p.predict_levels}
    if levels is None:
      if len(ids) != count:
        raise ValueError(f"RACE predict: {len(ids)} questions in {folder} ({p.predict_split}, "
                         f"{'+'.join(p.predict_levels)}) but {count} records in {p.predict_data.input_path}.")
      return ids
    held = {level: levels.count(level) for level in dict.fromkeys(levels)}
    if sorted(held.items()) != sorted(read.items()):
      raise ValueError(f"RACE predict: the records of {p.predict_data.input_path} hold the levels {held} (in record "
                       f"order) but {folder} ({p.predict_split}) read with "
                       f"task.predict_levels={list(p.predict_levels)} has {read}. Set task.predict_levels to the "
                       "records' levels (create_finetuning_data --race_levels), or rebuild the records from this "
                       "folder.")
    if list(held) != [level for level in p.predict_levels if level in held]:
      logger.info("RACE predict: the records hold the levels in the order %s, task.predict_levels is %s: each "
                  "record takes the next question of its own level.", list(held), list(p.predict_levels))
    queues = {level: iter([e.example_id for e in examples if e.level == level]) for level in read}
    return [next(queues[level]) for level in levels]

  def write_prediction_files(self, aggregated_logs, output_dir: str) -> Dict[str, str]:
    """`<output_dir>/predictions.json`: {question id: answer letter A-D}, each record keyed by a question of its own
    level (`question_ids`)."""
    logits = np.concatenate(aggregated_logs["logits"], axis=0)
    p = self.params
    raw = self.raw_writer(p.predict_data, "predict")
    folder = p.predict_input_dir or (p.predict_data.input_path if raw else "")
    if folder and not raw:
      check_record_order(raw_inputs.single_path(p.predict_data.input_path) or "", "RACE predict")
    if folder:
      ids = self.question_ids(folder, self.record_levels(aggregated_logs, len(logits)), len(logits))
    else:
      logger.warning("task.predict_input_dir is empty: RACE predictions are keyed 0..%d in record order.",
                     len(logits) - 1)
      ids = [str(i) for i in range(len(logits))]
    letters = ["ABCD"[i] for i in np.argmax(logits, axis=-1)]
    path = os.path.join(output_dir, "predictions.json")
    file_io.atomic_write_json(path, dict(zip(ids, letters)), sort_keys=False)
    return {"predictions": path}
