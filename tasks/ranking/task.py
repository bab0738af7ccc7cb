"""`text_ranking`: a cross-encoder reranker (an `AlbertClassifier` with one output) trained on query groups.

Inputs: `task.train_data.input_path` / `task.validation_data.input_path` name CSV / TSV / JSONL files (or records
made earlier) with the columns `task.query_column`, `task.positive_column` and `task.negative_column`. Each row is a
group: the positive and `task.num_negatives` negatives, shuffled, each packed with the query as one sentence pair
(`tasks.ranking.data`). The records are cached as the text tasks' are (`tasks.raw_inputs`, `<model_dir>/records`).

Model: the text tasks' sentence-pair classifier with one output, the relevance logit of a (query, document) pair;
the task reshapes a batch of groups [B, G, S] to [B·G, S] pairs and the logits back to [B, G]. Its checkpoint is an
ordinary one-output classifier's (`load_model(model_dir, "classifier")`), which `pipelines.rerank` reads.

Loss (`task.loss`):
- listwise (default): softmax cross-entropy over each group, the positive as the target (the "LCE" loss;
  sentence-transformers' CrossEncoder MultipleNegativesRankingLoss with `activation_fn=None`, `scale=1` and no
  in-batch negatives — its defaults, a scaled sigmoid and in-batch negatives, give another number). A reranker is
  used to order one query's candidates, and this trains exactly that: only the scores' differences within a group
  matter, every negative of the group is compared with the positive in one term, and the loss does not need the
  positives and negatives balanced.
- bce: each pair on its own, sigmoid cross-entropy against 1 (positive) or 0 (negative), averaged over the group
  (CrossEncoder's BinaryCrossEntropyLoss). Its scores are comparable across queries (a probability of relevance,
  usable with a threshold), at the price of weighting the easy negatives as much as the hard ones.

Each group is one example: its loss is the group's, averaged over the valid groups of the global batch (the
trainer's `denominators`), so replicas add up to the one-device loss; no term crosses groups.

Evaluation: every validation group is reranked by its scores; `eval_results.json` gets mrr@10, ndcg@10, recall@1,
map@100 (`official_albert.retrieval.metrics.rerank_metrics`, sentence-transformers' formulas per group), `queries`
(the groups scored) and `eval_loss`. A group is a row: a query with several positives, written one row each, is
scored once per row, each with one positive (sentence-transformers' CrossEncoderRerankingEvaluator takes them as one
sample); for per-query numbers, validate on a BEIR-format folder (below), which ranks each query's candidates once.
`model.ckpt-best` follows `ndcg@10`. A BEIR-format folder as validation input, with a first stage's run file
(`task.validation_candidates`), reranks each query's candidates instead and scores the ranking as the benchmark does
(`tasks.ranking.beir_evaluation`; no eval_loss: no groups). `--mode=predict` on such a folder (judgments not needed)
with `task.predict_candidates` writes the run's heads reranked (`predictions/<folder>.reranked.trec`).

The model directory's `tokenizer_config.json` (do_lower_case, keep_accents, remove_space, which `pipelines.rerank`
reads) and `ranking_training.json` (the loss) are written when training starts fresh (`initialize`) and read back by
every later run there (`tasks.embedding.record`): `--mode=eval` tokenizes as training did and reports the trained
loss's `eval_loss` without `task.do_lower_case` or `task.loss` repeated, and leaves the files as they are; an explicit
value that contradicts them is an error naming both. A fresh run takes the casing from task.init_checkpoint's folder,
where it records one. A directory trained before ranking_training.json existed records no loss: the run's
`task.loss`, else listwise; a file that records no valid loss (a hand edit) is an error naming it (`ranking_record`).
`convert_checkpoint` copies the file beside a converted reranker, so the loss travels with the weights.
"""

from __future__ import annotations

import json
import logging
import os
from typing import Any, Dict, List, Optional

import keras
import numpy as np
import tensorflow as tf

from official_albert import file_io
from official_albert import model_directory as md
from official_albert.checkpoints.sentence_transformers_folder import write_tokenizer_options
from official_albert.modeling.models import AlbertClassifier
from official_albert.retrieval.metrics import rerank_metrics
from official_albert.retrieval.ranking_record import read_ranking_loss
from official_albert.retrieval.ranking_record import RECORD_FIX
from official_albert.retrieval.run_files import write_run
from official_albert.training import base_task
from official_albert.training.experiment_config import ConfigError
from official_albert.training.experiment_config import DataConfig
from tasks.embedding import beir
from tasks.embedding import record
from tasks.embedding.beir_evaluation import check_covered
from tasks.ranking import beir_evaluation
from tasks.ranking import data as group_data
from tasks.ranking.beir_evaluation import reranked_run
from tasks.ranking.beir_evaluation import RerankEvaluation
from tasks.ranking.config import TextRankingConfig
from tasks.row_task import RowFileTask
from tasks.text import data as text_data

logger = logging.getLogger(__name__)

# The rerank metrics eval_results.json reports (of `rerank_metrics`' keys).
REPORTED = ("mrr@10", "ndcg@10", "recall@1", "map@100")
# task key -> the value of a run that neither sets it nor finds it recorded (`record.resolve`).
RECORDED_DEFAULTS = {"do_lower_case": True, "loss": "listwise"}


def ranking_record(model_dir: Optional[str], loss: Optional[str] = None) -> record.Recorded:
  """{"loss": (value, file)} as `model_dir`'s ranking_training.json records it; {} without the file.

  A file that records no valid loss (not JSON, not an object, "loss" missing or not one of LOSSES: a hand edit) is
  an error naming the file, the key, the value, the allowed values and the fix, where the run leaves `loss`
  (task.loss) unset; a run that sets it is told (a warning) and uses its own, as without the file.

  Raises:
    ConfigError (a ValueError): the file records no valid loss and `loss` is None.
  """
  file_path = md.path(model_dir, md.RANKING_TRAINING_FILE) if model_dir else None
  if not file_path or not file_io.exists(file_path):
    return {}
  fix = (f"{RECORD_FIX} (a run there then uses task.loss, else listwise), or set task.loss to the loss the model "
         "was trained with.")
  try:
    value = read_ranking_loss(file_path, fix, error=ConfigError)
  except ConfigError as error:
    if loss is None:
      raise
    logger.warning("%s\ntask.loss=%r is used.", error, loss)
    return {}
  return {"loss": (value, file_path)}


def group_loss(logits: tf.Tensor, labels: tf.Tensor, loss: str) -> tf.Tensor:
  """[B] the loss of each group from its candidates' logits [B, G] and relevance labels [B, G] (1 / 0).

  listwise: cross-entropy of softmax(logits) against the labels normalised to a distribution (the positive alone
  when it is the only relevant candidate). bce: the mean over the group of sigmoid cross-entropy.
  """
  logits = tf.cast(logits, tf.float32)
  labels = tf.cast(labels, tf.float32)
  if loss == "bce":
    return tf.reduce_mean(tf.nn.sigmoid_cross_entropy_with_logits(labels=labels, logits=logits), axis=-1)
  target = tf.math.divide_no_nan(labels, tf.reduce_sum(labels, axis=-1, keepdims=True))
  return -tf.reduce_sum(target * tf.nn.log_softmax(logits, axis=-1), axis=-1)


@base_task.register_task("text_ranking", config_cls=TextRankingConfig)
class TextRankingTask(RowFileTask):
  """Cross-encoder reranker training on query groups (see the module docstring)."""

  best_metric = "ndcg@10"
  row_noun = "query groups"
  overlap_fields = ("query", "positive")  # (an evaluation group whose query and positive a training group has)

  def __init__(self, params: TextRankingConfig, logging_dir: Optional[str] = None):
    # The casing and loss model_dir records (a trained reranker's: eval / a resumed run), else the casing of
    # init_checkpoint's folder, where the run leaves them unset.
    recorded = {**record.casing_record(logging_dir, params.init_checkpoint),
                **ranking_record(logging_dir, params.loss)}
    params = record.resolve(params, logging_dir, RECORDED_DEFAULTS, recorded, self.name)
    super().__init__(params, logging_dir)
    self.ranks_folder = beir.is_beir_folder(params.validation_data.input_path)
    # role → a folder's candidates as its records were made from, and the records' key.
    self._folders: Dict[str, RerankEvaluation] = {}
    self._folder_keys: Dict[str, str] = {}
    self._eval_batch = params.validation_data.global_batch_size

  # --------------------------------------------------------------------------------------------- inputs
  def columns(self) -> Dict[str, str]:
    p = self.params
    return {"query": p.query_column, "positive": p.positive_column, "negative": p.negative_column}

  def read(self, data_config: DataConfig, role: str) -> List[group_data.RankingExample]:
    p = self.params
    files = text_data.expand_paths(data_config.input_path)
    examples = [e for f in files for e in group_data.read_groups(f, self.columns(), p.group_negatives(role),
                                                                 p.input_format, p.skip_bad_rows,
                                                                 self.comparison_options(), trim=False)]
    return group_data.drop_query_positives(examples, p.group_negatives(role), p.skip_bad_rows,
                                           self.comparison_options())

  def training_rows(self) -> List[group_data.RankingExample]:
    """The training groups as training reads them (an evaluation read wants task.eval_num_negatives per row)."""
    return self.read(self.params.train_data, "train")

  def reads_raw_input(self, data_config: DataConfig) -> bool:
    return beir.is_beir_folder(data_config.input_path) or super().reads_raw_input(data_config)

  def record_path(self, data_config: DataConfig, role: str) -> str:
    """The cached records of `data_config`'s raw files (built now when the cache key does not match)."""
    p = self.params
    if beir.is_beir_folder(data_config.input_path):
      return self.folder_record_path(data_config, role)
    if role == "predict":  # (before the predict pass, not after it: `write_prediction_files` needs a folder's run)
      raise beir_evaluation.missing_predict_candidates_error(data_config.input_path)
    key = self.record_key(data_config, text_data.expand_paths(data_config.input_path))
    key.update(columns=self.columns(), negatives=p.group_negatives(role), input_format=p.input_format,
               skip_bad_rows=p.skip_bad_rows, record_shuffle_seed=p.record_shuffle_seed,
               train_order=self.order_seed(role) is not None)
    return self.cached_records(
        data_config, role, key, lambda: self.read(data_config, role),
        lambda examples, indices: group_data.records(examples, indices, self.tokenizer, data_config.seq_length,
                                                     p.record_shuffle_seed))

  def folder_record_path(self, data_config: DataConfig, role: str) -> str:
    """The records of a BEIR-format folder's (query, candidate) pairs (`beir_evaluation`): the validation split's
    judged queries with task.validation_candidates, or (`--mode=predict`) every query of task.predict_candidates."""
    p = self.params
    folder, predict = data_config.input_path, role == "predict"
    run_file = p.predict_candidates if predict else p.validation_candidates
    if role == "train":
      raise ValueError(f"{folder} is a folder (a BEIR-format retrieval set), which only task.validation_data and "
                       "task.predict_data read; train on CSV / TSV / JSONL files of query groups.")
    if not run_file:
      raise (beir_evaluation.missing_predict_candidates_error(folder) if predict else
             beir_evaluation.missing_candidates_error(folder, p.validation_split))
    files = (beir.split_files(folder, "")[:2] if predict else beir.check_files(folder, p.validation_split))
    key = self.record_key(data_config, files + [run_file])
    key.update(beir_split="" if predict else p.validation_split, rerank_depth=p.rerank_depth, role=role)
    fingerprint = json.dumps(key, sort_keys=True, default=str)
    read: List[RerankEvaluation] = []

    def evaluation() -> RerankEvaluation:
      data = beir.read_texts(folder) if predict else beir.read_beir(folder, p.validation_split)
      return RerankEvaluation.of(data, run_file, p.rerank_depth, predict=predict)

    path = self.cached_records(
        data_config, role, key, lambda: read.append(evaluation()) or read[-1].examples(),
        lambda examples, indices: group_data.records(examples, indices, self.tokenizer, data_config.seq_length, -1))
    if fingerprint != self._folder_keys.get(role):
      self._folders[role], self._folder_keys[role] = read[-1] if read else evaluation(), fingerprint
    if not predict:
      self._eval_batch = data_config.global_batch_size
    return path

  def feature_spec(self, seq_length: int, group: int) -> Dict[str, tf.io.FixedLenFeature]:
    spec = {k: tf.io.FixedLenFeature([group, seq_length], tf.int64) for k in group_data.ENCODER_KEYS}
    spec["labels"] = tf.io.FixedLenFeature([group], tf.float32)
    spec["example_index"] = tf.io.FixedLenFeature([], tf.int64)
    return spec

  def role_feature_spec(self, data_config: DataConfig, role: str) -> Dict[str, tf.io.FixedLenFeature]:
    if role != "train" and beir.is_beir_folder(data_config.input_path):
      return self.feature_spec(data_config.seq_length, 1)  # (one (query, candidate) pair per record)
    return self.feature_spec(data_config.seq_length, 1 + self.params.group_negatives(role))

  def model_inputs(self, features: Dict[str, tf.Tensor]) -> Dict[str, tf.Tensor]:
    """The groups' pairs as one batch of pairs: [B, G, S] → [B·G, S]."""
    missing = [k for k in group_data.ENCODER_KEYS if k not in features]
    if missing:
      raise KeyError(f"{self.name}: the input batch lacks {missing}; it has {sorted(features)}.")
    return {k: tf.reshape(features[k], [-1, tf.shape(features[k])[-1]]) for k in group_data.ENCODER_KEYS}

  # --------------------------------------------------------------------------------------------- model
  def build_model(self) -> keras.Model:
    p = self.params
    model = AlbertClassifier(p.model.to_albert_config(), num_labels=1)
    seq = max(p.train_data.seq_length, 2)
    model({k: tf.zeros([1, seq], tf.int32) for k in base_task.ENCODER_INPUT_KEYS}, training=False)
    return model

  def initialize(self, model: keras.Model) -> None:
    """The warm start, and `save_assets`: written when training starts fresh only, so `--mode=eval` (and a resumed
    run) keep the trained model's tokenizer_config.json."""
    super().initialize(model)
    self.save_assets()

  def save_assets(self) -> None:
    """The tokenizer's options (`tokenizer_options`), which `pipelines.rerank` reads to tokenize as training did,
    and ranking_training.json (the loss, which a later run there reads back; chief only)."""
    if self.logging_dir:
      file_io.makedirs(self.logging_dir)
      write_tokenizer_options(self.logging_dir, self.tokenizer_options())
      file_io.atomic_write_json(md.path(self.logging_dir, md.RANKING_TRAINING_FILE),
                                {"task": self.name, "loss": self.params.loss}, sort_keys=False)

  # --------------------------------------------------------------------------------------------- loss
  def build_losses(self, labels: Any, model_outputs: Dict[str, tf.Tensor], aux_losses=None,
                   denominators=None) -> tf.Tensor:
    """Σ over this replica's valid groups of the group loss / the global batch's valid groups."""
    relevance = labels["labels"]
    logits = tf.reshape(model_outputs["logits"], tf.shape(relevance))
    per_group = group_loss(logits, relevance, self.params.loss)
    return base_task.example_mean_loss(per_group, labels, aux_losses, denominators)

  # --------------------------------------------------------------------------------------------- evaluation
  def eval_outputs(self, features, labels, outputs) -> Dict[str, tf.Tensor]:
    relevance = labels["labels"]
    return {"scores": tf.reshape(tf.cast(outputs["logits"], tf.float32), tf.shape(relevance)),
            "labels": relevance, "example_index": features["example_index"]}

  def reduce_aggregated_logs(self, aggregated_logs, global_step=None) -> Dict[str, float]:
    del global_step
    if not aggregated_logs:
      return {}
    scores = np.concatenate(aggregated_logs["scores"])
    if "eval" in self._folders and scores.shape[-1] == 1:  # (a folder's pairs: `RerankEvaluation` ranks them)
      return self._folders["eval"].results(scores[:, 0], np.concatenate(aggregated_logs["example_index"]),
                                           self._eval_batch, REPORTED, self.params.metric_convention)
    labels = np.concatenate(aggregated_logs["labels"])
    metrics = rerank_metrics(scores, labels, convention=self.params.metric_convention)
    loss = group_loss(tf.constant(scores), tf.constant(labels), self.params.loss)
    out = {k: float(metrics[k]) for k in REPORTED}
    out.update(queries=int(metrics["queries"]), eval_loss=float(tf.reduce_mean(loss)))
    return out

  def reduced_metric_names(self) -> List[str]:
    """`reduce_aggregated_logs`' keys: the REPORTED rerank metrics, `queries` and `eval_loss` (none on a folder)."""
    return list(REPORTED) + ["queries"] + ([] if self.ranks_folder else ["eval_loss"])

  def check_eval_settings(self, trainer_config) -> None:
    folder = self.params.validation_data.input_path
    if self.ranks_folder and not self.params.validation_candidates:
      raise beir_evaluation.missing_candidates_error(folder, self.params.validation_split)
    if self.ranks_folder and trainer_config.validation_steps != -1:
      raise beir_evaluation.cut_candidates_error(folder, trainer_config.validation_steps)

  def evaluation_input(self, data_config: DataConfig) -> str:
    """A folder's split, with the candidates and depth it is scored on (each gives another number)."""
    if not beir.is_beir_folder(data_config.input_path):
      return data_config.input_path
    p = self.params
    return f"{data_config.input_path.rstrip('/')}#{p.validation_split},{p.validation_candidates}#top{p.rerank_depth}"

  # --------------------------------------------------------------------------------------------- predict
  def predict_outputs(self, features, outputs) -> Dict[str, tf.Tensor]:
    return {"logits": tf.reshape(tf.cast(outputs["logits"], tf.float32), [-1]),
            "example_index": features["example_index"]}

  def write_prediction_files(self, aggregated_logs, output_dir: str) -> Dict[str, str]:
    """`<folder>.reranked.trec`: each query of task.predict_candidates with its first task.rerank_depth candidates
    in the reranker's order, scored by their logits (`beir_evaluation.reranked_run` says why)."""
    evaluation = self._folders.get("predict")
    if evaluation is None:
      raise beir_evaluation.missing_predict_candidates_error(self.params.predict_data.input_path)
    index = np.concatenate(aggregated_logs["example_index"])
    pairs = evaluation.pairs()
    check_covered(index, pairs, self.name, f"{pairs} (query, candidate) pairs of {evaluation.run_file}",
                  "every query's head is reranked", self.params.predict_data.global_batch_size)
    logits = np.concatenate(aggregated_logs["logits"])[np.argsort(index, kind="stable")]
    name = os.path.basename(evaluation.data.folder.rstrip("/")) or "predict"
    path = os.path.join(output_dir, f"{name}.reranked.trec")
    write_run(path, reranked_run(evaluation, logits))
    return {"run": path}
