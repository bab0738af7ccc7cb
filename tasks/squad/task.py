"""The SQuAD fine-tuning task: the v1 span head or the original v2 head, the official metrics at evaluation, and
`--mode=predict` files (reference §5.2)."""

from __future__ import annotations

import dataclasses
import logging
import math
from typing import Dict, List, Optional

import keras
import numpy as np
import tensorflow as tf

from official_albert.data import input_pipeline
from official_albert.data import records as records_lib
from official_albert.modeling.models import AlbertSpanLabeler
from official_albert.modeling.models import AlbertSquadV2Model
from official_albert.training import base_task
from official_albert.training.experiment_config import DataConfig
from official_albert.training.hyperparams import ConfigError
from tasks import raw_inputs
from tasks import squad_evaluate
from tasks.squad import data as squad_data
from tasks.squad.data import convert_examples_to_features
from tasks.squad.data import load_dataset
from tasks.squad.data import read_squad_examples
from tasks.squad.postprocess import apply_null_threshold
from tasks.squad.postprocess import evaluate_v2_protocols
from tasks.squad.postprocess import leave_out_cut_questions
from tasks.squad.postprocess import postprocess_v1
from tasks.squad.postprocess import postprocess_v2
from tasks.squad.postprocess import questions_only
from tasks.squad.postprocess import write_predictions
from tasks.squad.schedule import count_questions
from tasks.squad.schedule import resolve_steps

logger = logging.getLogger(__name__)

V1_OUTPUT_KEYS = ("start_logits", "end_logits")

V2_OUTPUT_KEYS = ("start_top_log_probs", "start_top_index", "end_top_log_probs", "end_top_index", "cls_logits")



@dataclasses.dataclass
class SquadTaskConfig(raw_inputs.RawInputTaskConfig):
  """A SQuAD v1.1 / v2.0 fine-tuning run.

  Attributes:
    version_2_with_negative: False → `AlbertSpanLabeler` (v1 head); True → `AlbertSquadV2Model` (original v2 head).
    predict_file: the SQuAD JSON that `validation_data` was made from; evaluation rebuilds its (deterministic)
      features to map unique ids back to text (no pickle), so the tokenizer settings below must match. Not needed
      for a split whose input_path is the JSON itself (that file is used).
    spm_model_file, do_lower_case, tokenizer_mode, doc_stride, max_query_length: as used by create_finetuning_data
      (spm_model_file '' = model_dir's spiece.model, else the one beside init_checkpoint).
    squad_shuffle_seed: raw training JSON: the reference's example order (create_finetuning_data's flag).
    records_dir: cache of the records built from raw JSON inputs; '' = `<model_dir>/records`.
    n_best_size, max_answer_length, start_n_top, end_n_top: reference 20 / 30 / 5 / 5.
    null_score_threshold: v2 fixed-threshold protocol (null when cls score > threshold).
    predictions_dir: where predictions.json / nbest_predictions.json / null_odds.json are written at evaluation
      ('' = the task's logging_dir; nothing is written when both are empty, nor on a worker of a multi-worker
      evaluation other than the chief: `SquadTask.writes_predictions`). v2: predictions.json holds the answers
      that `best_f1` scores — "" where the null score is at or above the dev-tuned `best_f1_thresh`, as the
      reference re-writes it; null_odds.json keeps the scores for another threshold.
    train_data / validation_data: TFRecords from create_finetuning_data (train: --split=train; eval: --split=dev),
      or the SQuAD `.json` itself: its records are built and cached (`tasks.raw_inputs`).
    predict_data: `--mode=predict` records, made (as eval features, e.g. --split=test) from `predict_file`, or the
      `.json` itself. The v2 predictions.json applies `null_score_threshold` ("" when the null score is above it);
      null_odds.json keeps the scores for another threshold.
    train_epochs: the epochs a training run trains (the reference counts SQuAD in epochs): at start-up the recipe's
      `trainer.train_steps` become int(questions / batch · epochs) of the run's records, the warm-up 10% of them;
      steps set otherwise are kept, with a warning naming the steps to set (`tasks.squad.schedule`). 0 = the steps
      as set, unchecked.
  """
  version_2_with_negative: bool = False
  predict_file: str = ""
  doc_stride: int = 128
  max_query_length: int = 64
  n_best_size: int = 20
  max_answer_length: int = 30
  start_n_top: int = 5
  end_n_top: int = 5
  null_score_threshold: float = 0.0
  predictions_dir: str = ""
  squad_shuffle_seed: int = 12345
  train_epochs: float = 0.0
  train_data: DataConfig = dataclasses.field(default_factory=lambda: DataConfig(global_batch_size=48,
                                                                                seq_length=384))
  validation_data: DataConfig = dataclasses.field(
      default_factory=lambda: DataConfig(global_batch_size=8, seq_length=384, is_training=False,
                                         drop_remainder=False))
  predict_data: DataConfig = dataclasses.field(
      default_factory=lambda: DataConfig(global_batch_size=8, seq_length=384, is_training=False,
                                         drop_remainder=False))


  def validate(self) -> None:
    super().validate()
    if not math.isfinite(self.train_epochs) or self.train_epochs < 0:
      raise ConfigError(f"task.train_epochs must be >= 0 (0 = no check of the steps), got {self.train_epochs}.")
    for key in ("n_best_size", "max_answer_length", "start_n_top", "end_n_top", "doc_stride", "max_query_length"):
      value = getattr(self, key)
      if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"task.{key} must be a whole number >= 1, got {value!r} (reference default "
                          f"{getattr(type(self)(), key)}).")


def squad_feature_spec(seq_length: int, is_training: bool):
  spec = {k: tf.io.FixedLenFeature([seq_length], tf.int64) for k in base_task.ENCODER_INPUT_KEYS + ("p_mask",)}
  spec["unique_ids"] = tf.io.FixedLenFeature([], tf.int64)
  if is_training:
    for k in ("start_positions", "end_positions", "is_impossible"):
      spec[k] = tf.io.FixedLenFeature([], tf.int64)
  return spec


def _position_ce(log_probs: tf.Tensor, positions: tf.Tensor) -> tf.Tensor:
  """[B] negative log-probability of the gold position."""
  positions = tf.reshape(tf.cast(positions, tf.int32), [-1, 1])
  return -tf.reshape(tf.gather(log_probs, positions, axis=1, batch_dims=1), [-1])


def check_result_ids(results: Dict[int, dict], features) -> None:
  """Raises unless the results' unique ids are the rebuilt features' ids (the first ones, when validation_steps
  stopped the evaluation early): any other id set means the records hold other windows than the rebuild."""
  ids = [f.unique_id for f in features]
  if set(results) == set(ids[:len(results)]):
    return
  known = set(ids)
  unknown = sorted(u for u in results if u not in known)
  missing = sorted(set(ids[:len(results)]) - set(results))
  raise ValueError(
      f"SQuAD: the {len(results)} results do not belong to the {len(ids)} features rebuilt from the SQuAD JSON ("
      f"{len(unknown)} unknown unique ids, e.g. {unknown[:3]}; {len(missing)} of the first {len(results)} features "
      f"without a result, e.g. {missing[:3]}): the records were made from another file, with other settings "
      "(tokenizer, max_seq_length, doc_stride, max_query_length) or as training records. Rebuild them with "
      "create_finetuning_data --split=dev and the task's settings, or set input_path to the SQuAD JSON itself.")


@base_task.register_task("squad", config_cls=SquadTaskConfig)
class SquadTask(raw_inputs.RawRecordsMixin, base_task.Task):
  """SQuAD fine-tuning: v1 start/end head or the original v2 head; evaluation runs the official metrics.

  v1 loss = (CE(start) + CE(end)) / 2 over the whole sequence. v2 loss = 0.5·(CE_start + CE_end) + 0.5·BCE(
  is_impossible, cls_logits), the end conditioned on the gold start (reference §5.2). Evaluation metrics: v1
  `exact_match`, `f1`; v2 the fixed-threshold official keys (`exact`, `f1`, `HasAns_*`, ...) plus the reference's
  dev-tuned protocol under a `dev_tuned_` prefix.

  Best checkpoint (`best_metric`): v1 `f1`, as the reference. v2 `best_f1`: the reference (§5.2 protocol) keeps the
  checkpoint with the highest F1 of the predictions re-written at the threshold tuned on the evaluated set
  (= `dev_tuned_f1`, threshold `best_f1_thresh`), not the F1 at the fixed `null_score_threshold` (`f1`, still
  reported). `trainer.best_checkpoint_metric=f1` restores the fixed-threshold choice.
  """

  best_metric = "f1"
  V2_BEST_METRIC = "best_f1"

  def __init__(self, params: SquadTaskConfig, logging_dir: Optional[str] = None):
    super().__init__(params, logging_dir)
    # Whether evaluation writes the prediction files: False once the trainer clears logging_dir (every worker but
    # the chief), also when predictions_dir names the place; else every worker wrote the same files there.
    self.writes_predictions = True
    self._v2 = params.version_2_with_negative
    if self._v2:
      self.best_metric = self.V2_BEST_METRIC
    self.model_input_keys = base_task.ENCODER_INPUT_KEYS + (("p_mask",) if self._v2 else ())
    self._eval_data = None  # (examples, features, dataset JSON), built once.

  @base_task.Task.logging_dir.setter
  def logging_dir(self, value: Optional[str]) -> None:
    """The trainer sets None on every worker but the chief: then no prediction files, predictions_dir or not."""
    base_task.Task.logging_dir.fset(self, value)
    self.writes_predictions = value is not None

  def build_model(self) -> keras.Model:
    config = self.params.model.to_albert_config()
    seq = max(self.params.train_data.seq_length, 2)
    dummy = {k: tf.zeros([1, seq], tf.int32) for k in base_task.ENCODER_INPUT_KEYS}
    if self._v2:
      model = AlbertSquadV2Model(config, start_n_top=self.params.start_n_top, end_n_top=self.params.end_n_top)
      dummy["p_mask"] = tf.zeros([1, seq], tf.int32)
    else:
      model = AlbertSpanLabeler(config)
    model(dummy, training=False)
    # The span heads never read the pooled output. The reference skips variables without a gradient (no update, no
    # weight decay); freezing the pooler does the same and keeps its pretrained weights in the checkpoint.
    model.encoder.pooler.trainable = False
    return model

  def build_inputs(self, data_config: DataConfig, input_context: Optional[tf.distribute.InputContext] = None,
                   role: Optional[str] = None) -> tf.data.Dataset:
    if not data_config.input_path:
      raise ValueError("SQuAD: empty input_path (set task.train_data.input_path / task.validation_data.input_path "
                       "to the SQuAD JSON or the create_finetuning_data TFRecords).")
    data_config = self.raw_to_records(data_config, role)
    if data_config.pad_to_multiple_of or data_config.length_bucket_window > 1:
      # Post-processing maps logits to token positions of fixed-length windows, and windows are nearly full.
      raise ValueError("SQuAD: pad_to_multiple_of / length_bucket_window are not supported (the start/end logits "
                       "must stay aligned with the max_seq_length windows); set them to 0.")
    batch_size = data_config.global_batch_size
    if input_context is not None:
      batch_size = input_context.get_per_replica_batch_size(batch_size)
    spec = squad_feature_spec(data_config.seq_length, data_config.is_training)
    return input_pipeline.make_dataset(
        data_config.input_path, lambda r: input_pipeline.decode_record(r, spec), batch_size, data_config.is_training,
        input_context=input_context, seed=data_config.seed, shuffle_buffer_size=max(data_config.shuffle_buffer_size, 1),
        drop_remainder=data_config.drop_remainder)

  def check_schedule(self, params, mode: str) -> None:
    """Resolves a training run's `trainer.train_steps` from `task.train_epochs` and its training questions at its
    batch where they are still the recipe's, else warns when they train other epochs (`schedule.resolve_steps`).

    Called at start-up once the inputs are built (`train_lib.prepare_inputs`), when a raw JSON's records and their
    counts exist, and before the trainer is built from `params`: the resolved steps replace `params.trainer` in
    place (the run's own copy of the config), so the schedule, the trainer and params.yaml all get them."""
    if mode not in ("train", "train_and_eval") or not params.task.train_epochs:
      return
    data = self.raw_to_records(params.task.train_data, "train")
    count = count_questions(squad_data.record_metas(data.input_path))
    if count is None:
      logger.info("SQuAD: the training records of %s count no questions (no .meta.json): trainer.train_steps=%d is "
                  "not resolved from task.train_epochs=%g.", params.task.train_data.input_path,
                  params.trainer.train_steps, params.task.train_epochs)
      return
    changes, message = resolve_steps(params, count, params.task.train_data.input_path)
    if changes:
      params.trainer = params.trainer.replace(**changes)
    if message:
      logger.warning(message)

  def model_inputs(self, features):
    inputs = super().model_inputs(features)
    if self._v2 and "start_positions" in features:
      inputs["start_positions"] = features["start_positions"]  # Training: condition the end on the gold start.
    return inputs

  def build_losses(self, labels, model_outputs, aux_losses=None, denominators=None) -> tf.Tensor:
    """Mean over the (global) batch of the per-feature span loss (v2: plus the answer-class loss)."""
    if self._v2:
      start = _position_ce(tf.cast(model_outputs["start_log_probs"], tf.float32), labels["start_positions"])
      end = _position_ce(tf.cast(model_outputs["end_log_probs"], tf.float32), labels["end_positions"])
      cls = tf.nn.sigmoid_cross_entropy_with_logits(
          labels=tf.cast(tf.reshape(labels["is_impossible"], [-1]), tf.float32),
          logits=tf.reshape(tf.cast(model_outputs["cls_logits"], tf.float32), [-1]))
      per_feature = 0.5 * (start + end) + 0.5 * cls
    else:
      start = _position_ce(tf.nn.log_softmax(tf.cast(model_outputs["start_logits"], tf.float32)),
                           labels["start_positions"])
      end = _position_ce(tf.nn.log_softmax(tf.cast(model_outputs["end_logits"], tf.float32)),
                         labels["end_positions"])
      per_feature = 0.5 * (start + end)
    return base_task.example_mean_loss(per_feature, labels, aux_losses, denominators)

  def validation_step(self, inputs, model, metrics):
    """Inference only (eval records carry no labels); returns the head outputs and unique ids for post-processing."""
    del metrics
    features, _ = self.split_inputs(inputs)
    feats = {k: v for k, v in features.items() if k not in ("start_positions", "end_positions", "is_impossible")}
    outputs = model(self.model_inputs(feats), training=False)
    keys = V2_OUTPUT_KEYS if self._v2 else V1_OUTPUT_KEYS
    logs = {k: outputs[k] for k in keys}
    logs["unique_ids"] = features["unique_ids"]
    return logs

  def raw_writer(self, data_config: DataConfig, role: str):
    return squad_data.raw_writer(self.params, data_config, role)

  def source_file(self, data_config: DataConfig) -> str:
    """The JSON behind `data_config`'s records: its input_path when that is the JSON, else task.predict_file."""
    raw = self.raw_writer(data_config, "eval")
    return raw[0].options.input_file if raw else self.params.predict_file

  def _examples_and_features(self, seq_length: int, source: str):
    """`source`'s examples and their (deterministic) features, as create_finetuning_data made them."""
    p = self.params
    if not source:
      raise ValueError("SQuAD evaluation/prediction maps the records back to the questions of a SQuAD JSON: set the "
                       "split's input_path (task.validation_data / task.predict_data) to the JSON itself, or "
                       "task.predict_file to the JSON its records were made from.")
    tokenizer = self.raw_tokenizer(source)
    examples = read_squad_examples(source, is_training=False, version_2_with_negative=self._v2)
    features, _ = convert_examples_to_features(examples, tokenizer, seq_length, p.doc_stride, p.max_query_length)
    return examples, features

  def check_records(self, data_config: DataConfig, field: str) -> None:
    """Raises when `data_config`'s prebuilt records were made with other window or tokenizer settings than those
    their features are rebuilt with here, or are training records (`squad_data.check_eval_records`); raw JSON inputs
    are built with the task's own settings."""
    if self.raw_writer(data_config, "eval") is not None:
      return
    p = self.params
    expected = {"max_seq_length": data_config.seq_length, "doc_stride": p.doc_stride,
                "max_query_length": p.max_query_length, "do_lower_case": p.do_lower_case,
                "tokenizer_mode": p.tokenizer_mode}
    options = self.raw_tokenizer_options()  # (what `_examples_and_features` rebuilds the features with)
    expected.update(keep_accents=options["keep_accents"], remove_space=options["remove_space"])
    spm = self.sentencepiece_model_file()
    if spm:
      expected["spm_sha256"] = records_lib.file_sha256(spm)
    squad_data.check_eval_records(data_config.input_path, field, expected)

  def _load_eval_data(self):
    if self._eval_data is None:
      p = self.params
      data = p.validation_data if p.validation_data.input_path else p.validation_data.replace(
          input_path=p.train_data.input_path)  # the evaluator's fallback to the training files
      self.check_records(data, "validation_data")
      source = self.source_file(data)
      examples, features = self._examples_and_features(p.validation_data.seq_length, source)
      dataset, _ = load_dataset(source)
      squad_evaluate.check_dataset(dataset, source)  # Scoring needs every question's answers.
      self._eval_data = (examples, features, dataset)
    return self._eval_data

  def postprocess(self, aggregated_logs, examples_and_features=None):
    """(examples, predictions, nbest, null_odds or None) from the collected eval outputs.

    `examples_and_features` defaults to the evaluation set's.
    """
    if examples_and_features is None:
      examples_and_features = self._load_eval_data()[:2]
    examples, features = examples_and_features
    keys = V2_OUTPUT_KEYS if self._v2 else V1_OUTPUT_KEYS
    cols = {k: np.concatenate(aggregated_logs[k], axis=0) for k in keys + ("unique_ids",)}
    results = {int(uid): {k: cols[k][i] for k in keys} for i, uid in enumerate(cols["unique_ids"])}
    check_result_ids(results, features)
    used = [f for f in features if f.unique_id in results]
    p = self.params
    if self._v2:
      preds, nbest, null_odds = postprocess_v2(examples, used, results, p.n_best_size, p.max_answer_length,
                                               p.start_n_top, p.end_n_top)
    else:
      preds, nbest = postprocess_v1(examples, used, results, p.n_best_size, p.max_answer_length)
      null_odds = None
    if len(used) != len(features):
      leave_out_cut_questions(examples, features, results, (preds, nbest, null_odds))
    return examples, preds, nbest, null_odds

  def reduce_aggregated_logs(self, aggregated_logs, global_step=None) -> Dict[str, float]:
    del global_step
    if not aggregated_logs:
      return {}
    _, preds, nbest, null_odds = self.postprocess(aggregated_logs)
    _, _, dataset = self._load_eval_data()
    dataset = questions_only(dataset, preds)  # (all of them unless evaluation stopped early)
    out_dir = (self.params.predictions_dir or self.logging_dir) if self.writes_predictions else None
    if not self._v2:
      if out_dir:
        write_predictions(out_dir, preds, nbest)
      return dict(squad_evaluate.evaluate_v1(dataset, preds))
    protocols = evaluate_v2_protocols(dataset, preds, null_odds, self.params.null_score_threshold)
    fixed, tuned = protocols["fixed_threshold"], protocols["dev_tuned_threshold_reference"]
    if out_dir:
      # The reference's final file (§5.2 step 4): "" where the null score is at or above the dev-tuned threshold,
      # i.e. the answers best_f1 scores; nbest_predictions.json and null_odds.json keep every span and score.
      write_predictions(out_dir, apply_null_threshold(preds, null_odds, tuned["null_score_diff_threshold"],
                                                      null_at_threshold=True), nbest, null_odds)
    results = {k: float(v) for k, v in fixed.items()}
    results.update({f"dev_tuned_{k}": float(v) for k, v in tuned.items()})
    # The reference's reported and checkpoint-selecting F1 (§5.2 step 5: predictions re-written at the tuned
    # threshold, scored with na_prob_thresh 1.0 on the logits) = dev_tuned_f1. Not the sweep's own maximum, which the
    # official v2.0 script calls best_f1 and which is kept here as dev_tuned_search_best_f1.
    results["best_f1"] = float(tuned["f1"])
    results["best_f1_thresh"] = float(tuned["null_score_diff_threshold"])
    logger.info("SQuAD v2 eval: best_f1 %.4f (checkpoint metric: F1 at the dev-tuned null threshold best_f1_thresh "
                "%.4f, reference §5.2); f1 %.4f at the fixed threshold %.4f.", results["best_f1"],
                results["best_f1_thresh"], results["f1"], results["null_score_diff_threshold"])
    return results

  def reduced_metric_names(self) -> List[str]:
    """`reduce_aggregated_logs`' keys: v1 `exact_match`, `f1`; v2 the official keys at the fixed threshold, the same
    with the sweep's under `dev_tuned_`, and `best_f1` / `best_f1_thresh`. (`HasAns_*` / `NoAns_*` are reported when
    the evaluated questions include answerable / unanswerable ones, as every SQuAD 2.0 dev set does.)"""
    if not self._v2:
      return ["exact_match", "f1"]
    fixed = [f"{group}{key}" for group in ("", "HasAns_", "NoAns_") for key in ("exact", "f1", "total")]
    fixed.append("null_score_diff_threshold")
    tuned = [f"dev_tuned_{key}" for key in fixed + ["search_best_exact", "search_best_f1"]]
    return fixed + tuned + ["best_f1", "best_f1_thresh"]

  def predict_outputs(self, features, outputs):
    out = {k: outputs[k] for k in (V2_OUTPUT_KEYS if self._v2 else V1_OUTPUT_KEYS)}
    out["unique_ids"] = features["unique_ids"]
    return out

  def write_prediction_files(self, aggregated_logs, output_dir: str) -> Dict[str, str]:
    """predictions.json, nbest_predictions.json and (v2) null_odds.json for every question of predict_file."""
    self.check_records(self.params.predict_data, "predict_data")
    source = self.source_file(self.params.predict_data)
    data = self._examples_and_features(self.params.predict_data.seq_length, source)
    num_results = sum(len(u) for u in aggregated_logs["unique_ids"])
    if num_results != len(data[1]):
      raise ValueError(f"SQuAD predict: {num_results} records in {self.params.predict_data.input_path} but "
                       f"{len(data[1])} features from {source}; rebuild the records from this file "
                       "with the same tokenizer, max_seq_length, doc_stride and max_query_length.")
    _, preds, nbest, null_odds = self.postprocess(aggregated_logs, data)
    if null_odds is not None:
      preds = apply_null_threshold(preds, null_odds, self.params.null_score_threshold)
    return write_predictions(output_dir, preds, nbest, null_odds)
