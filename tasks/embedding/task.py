"""`text_embedding`: a bi-encoder (both sides through one shared `AlbertEmbedder`) trained on text pairs.

Inputs: `task.train_data.input_path` / `task.validation_data.input_path` name CSV / TSV / JSONL files (or records
made earlier) with the columns `task.anchor_column`, `task.positive_column`, optional `task.negative_column` (a hard
negative) or `task.score_column` (scored pairs). The rows become fixed-length records in the text tasks' record cache
(`tasks.raw_inputs`, `<model_dir>/records`: reused while the files, tokenizer and settings match; training records
in a seeded random order), read through the ordinary `input_pipeline`, so sharding, resumption and the trainer's
per-replica slicing work as for every task.

Loss (`official_albert.retrieval.losses`, sentence-transformers' formulas): mnrl (in-batch + hard negatives, scale,
symmetric), cosent or cosine, summed over `task.matryoshka_dims` prefixes when set. Under `tf.distribute` the
in-batch negatives span the global batch: each replica gathers the positives (negatives; anchors when symmetric)
of every replica (`ReplicaContext.all_gather`, whose gradient all-reduces and slices back), ranks its own anchors
at `offset = replica id × per-replica batch`, and scales its mean by (its rows / the global rows, the trainer's
`denominators`), so the replicas' losses add up to the one-device loss of the same global batch. CoSENT compares
every pair with every other: each replica computes it over the gathered batch and takes its share the same way.

`task.mask_false_negatives=true` takes out of mnrl's softmax the in-batch "negatives" that repeat a text of their
row (`losses.in_batch_false_negatives`; texts are one when their token ids are: `text_keys`).

`task.grad_cache_chunk` > 0 computes the same loss and gradient by GradCache (`official_albert.retrieval.grad_cache`):
the encoder runs that many rows at a time, so the in-batch negatives can span a batch larger than memory.

Evaluation: queries = the validation anchors, corpus = their positives (each distinct model input once: texts that
give one record, the same ids at seq_length, are one), relevant = each anchor's own positive (an anchor that is
also a document, as in paraphrases written both ways, does not rank itself), over the rows evaluated
(trainer.validation_steps may stop early: a warning says so); `eval_results.json` gets recall@1, recall@10, mrr@10,
ndcg@10, map@100 (`vector_retrieval_metrics`: a block of cosines at a time, no [Q, C] matrix) and `eval_loss` (the
loss over the validation set cut into batches of its global_batch_size). Scored pairs report Spearman and Pearson
of cosine vs score instead of the retrieval metrics.

Long because: one task's inputs, model, loss (with its distributed and GradCache paths), evaluation and prediction
share its settings record and record cache; split, each part would reach into the others' state.

A BEIR-format folder as validation input: its queries rank its whole corpus (`beir_evaluation`; no eval_loss).

Prediction (`--mode=predict`): the texts of `task.predict_data` (column `task.predict_column`, default the anchors')
→ `<stem>.embeddings.npy` and `.jsonl` (`write_prediction_files`).

The model directory: `config.json`, the checkpoints (`model/encoder/...`, as every task's), `spiece.model`, the
sentence-transformers pooling files (`modules.json`, `1_Pooling/`, `2_Normalize/` when normalize) and the
tokenizer's do_lower_case (`tokenizer_config.json`) that `pipelines.embed(model_dir, texts)` reads, and
`embedding_training.json` (loss, Matryoshka widths, pooling, the columns): written when training starts fresh
(`initialize`), and read back by every later run there (`tasks.embedding.record`): `--mode=predict` / `eval` need
none of the training run's settings repeated, compute the vectors its pipelines compute, and leave the files as
they are; an explicit setting that contradicts them is an error naming both values and the file.
"""

from __future__ import annotations

import io
import json
import logging
import math
import os
from typing import Any, Dict, List, Optional

import keras
import numpy as np
import tensorflow as tf

from official_albert import compat
from official_albert import file_io
from official_albert.modeling.embedder import AlbertEmbedder
from official_albert.retrieval import grad_cache
from official_albert.retrieval import losses
from official_albert.retrieval.metrics import pair_cosines
from official_albert.retrieval.metrics import vector_retrieval_metrics
from official_albert.training import base_task
from official_albert.training.experiment_config import DataConfig
from tasks import row_files
from tasks.embedding import beir
from tasks.embedding import beir_evaluation
from tasks.embedding import data as pair_data
from tasks.embedding import record
from tasks.embedding.beir_evaluation import BeirEvaluation
from tasks.embedding.config import RECORDED_DEFAULTS
from tasks.embedding.config import TextEmbeddingConfig
from tasks.metrics import pearson
from tasks.metrics import spearman
from tasks.row_task import RowFileTask
from tasks.text import data as text_data

logger = logging.getLogger(__name__)

# The retrieval metrics eval_results.json reports (of `retrieval_metrics`' keys).
REPORTED = ("recall@1", "recall@10", "mrr@10", "ndcg@10", "map@100")


class BiEncoder(keras.Model):
  """The sides of a pair through one `AlbertEmbedder` in one forward pass (concatenated along the batch).

  Outputs `<side>_embedding` [B, D] for each side present in the inputs. `.encoder` is the embedder's, so checkpoints
  hold `model/encoder/...` as every task's do (warm start, `load_model(model_dir, "encoder")`, `pipelines.embed`).
  """

  def __init__(self, embedder: AlbertEmbedder, name: str = "bi_encoder", **kwargs):
    super().__init__(name=name, **kwargs)
    self.embedder = embedder
    self.encoder = embedder.encoder
    self.config = embedder.config

  def call(self, inputs, training=False):
    sides = [s for s in pair_data.SIDES if pair_data.side_key(s, "input_word_ids") in inputs]
    batch = {k: tf.concat([inputs[pair_data.side_key(s, k)] for s in sides], axis=0)
             for k in pair_data.ENCODER_KEYS}
    vectors = self.embedder(batch, training=training)["sentence_embedding"]
    return {f"{s}_embedding": v for s, v in zip(sides, tf.split(vectors, len(sides), axis=0))}


@base_task.register_task("text_embedding", config_cls=TextEmbeddingConfig)
class TextEmbeddingTask(RowFileTask):
  """Bi-encoder training on pairs / triplets / scored pairs (see the module docstring)."""

  row_noun, overlap_fields = "pairs", ("anchor", "positive")  # (RowFileTask's: an evaluation pair trained on)

  def __init__(self, params: TextEmbeddingConfig, logging_dir: Optional[str] = None):
    # The settings model_dir records (a trained model: predict / eval / a resumed run) where the run leaves them unset
    # (the casing: init_checkpoint's folder's where model_dir records none).
    recorded = record.embedding_record(logging_dir, params.init_checkpoint)
    params = record.resolve(params, logging_dir, RECORDED_DEFAULTS, recorded, self.name)
    super().__init__(params, logging_dir)
    # The evaluation rows' texts, the records' cache key they were read under, their `input_keys` (None: not yet).
    self._validation: Optional[List[pair_data.PairExample]] = None
    self._validation_key: Optional[str] = None
    self._validation_ids: Optional[List[Any]] = None
    self._eval_data: Optional[DataConfig] = None  # what evaluation reads (validation_data, or the training files)
    self._beir: Optional[BeirEvaluation] = None  # a BEIR folder's split evaluation read (its records' rows)
    self.scored = bool(params.score_column)
    self.ranks_folder = beir.is_beir_folder(params.validation_data.input_path)
    self.best_metric = "spearman" if self.scored and not self.ranks_folder else "ndcg@10"
    keys = [pair_data.side_key(s, k) for s in self.train_sides() for k in pair_data.ENCODER_KEYS]
    self.model_input_keys = tuple(keys)

  # --------------------------------------------------------------------------------------------- inputs
  def train_sides(self):
    return ("anchor", "positive") + (("negative",) if self.params.negative_column else ())

  def columns(self, sides, role: str = "train") -> Dict[str, str]:
    """side → column; `--mode=predict` reads one column of texts (`predict_column`, else the anchors')."""
    p = self.params
    names = {"anchor": p.anchor_column, "positive": p.positive_column, "negative": p.negative_column}
    if role == "predict":
      names["anchor"] = p.predict_column or p.anchor_column
    return {side: names[side] for side in sides}

  def read(self, data_config: DataConfig, sides=pair_data.SIDES[:2], role="train") -> List[pair_data.PairExample]:
    p, files = self.params, text_data.expand_paths(data_config.input_path)
    score = p.score_column if role != "predict" else ""
    examples = [e for f in files for e in pair_data.read_pairs(
        f, self.columns(sides, role), p.input_format, p.skip_bad_rows, score, self.comparison_options(),
        not p.ignore_label_column)]
    examples = pair_data.check_hard_negatives(examples, p.skip_bad_rows, self.comparison_options())
    if role == "train" and p.loss == "mnrl" and not p.mask_false_negatives:
      pair_data.warn_of_repeated_texts(examples, self.comparison_options())
    return pair_data.check_scores(examples, score, p.loss)

  def validation_examples(self) -> Optional[List[pair_data.PairExample]]:
    """The rows evaluation read, in file order (it names queries and documents by them); None for records (and a
    BEIR folder). Read anew whenever the evaluation records are (`record_path`): the rows are the records' rows."""
    data = self._eval_data or self.params.validation_data
    if not text_data.is_raw_input(data.input_path, self.params.input_format):
      return None
    if self._validation is None:
      self._validation = self.read(data, ("anchor", "positive"))
    return self._validation

  def validation_keys(self) -> Optional[List[Any]]:
    """Each evaluation row's (anchor, positive) as the model reads them (`pair_data.input_keys`: the records' own
    tokenizer and packing at the evaluation seq_length), made once per evaluation input; None for records."""
    examples = self.validation_examples()
    if examples is not None and self._validation_ids is None:
      seq_length = (self._eval_data or self.params.validation_data).seq_length
      self._validation_ids = pair_data.input_keys(examples, self.tokenizer, seq_length)
    return None if examples is None else self._validation_ids

  def sides_of(self, data_config: DataConfig, role: str):
    if role == "eval" and beir.is_beir_folder(data_config.input_path):
      return ("anchor",)  # (one text per record: the queries, then the corpus)
    return {"train": self.train_sides(), "predict": ("anchor",)}.get(role, ("anchor", "positive"))

  def reads_raw_input(self, data_config: DataConfig) -> bool:
    return beir.is_beir_folder(data_config.input_path) or super().reads_raw_input(data_config)

  def record_path(self, data_config: DataConfig, role: str) -> str:
    """The cached records of `data_config`'s raw files (built now when the cache key does not match)."""
    p = self.params
    if beir.is_beir_folder(data_config.input_path):
      return self.folder_record_path(data_config, role)
    sides = self.sides_of(data_config, role)
    key = self.record_key(data_config, text_data.expand_paths(data_config.input_path))
    scored = self.scored and role != "predict"
    key.update(columns=self.columns(sides, role), score_column=p.score_column if scored else "",
               input_format=p.input_format, skip_bad_rows=p.skip_bad_rows, record_shuffle_seed=self.order_seed(role),
               ignore_label_column=p.ignore_label_column,
               **({"score_range": [-1, 1]} if scored and p.loss == "cosine" else {}))  # (unchecked caches: rebuilt)
    read: List[List[pair_data.PairExample]] = []  # (the rows a rebuild read, kept for evaluation)
    path = self.cached_records(
        data_config, role, key, lambda: read.append(self.read(data_config, sides, role)) or read[-1],
        lambda examples, indices: pair_data.records(examples, indices, self.tokenizer, data_config.seq_length, sides,
                                                    scored))
    fingerprint = json.dumps(key, sort_keys=True, default=str)
    if role == "eval" and fingerprint != self._validation_key:  # (records of new files: their rows, not the old)
      self._validation = read[-1] if read else self.read(data_config, sides, role)
      self._validation_key, self._validation_ids = fingerprint, None
    return path

  def folder_record_path(self, data_config: DataConfig, role: str) -> str:
    """The records of a BEIR-format folder's texts (`beir_evaluation`), which evaluation alone reads."""
    if role != "eval":
      raise ValueError(f"{data_config.input_path} is a folder (a BEIR-format retrieval set), which only "
                       "task.validation_data reads; train and predict on CSV / TSV / JSONL files of pairs / texts.")
    split = self.params.validation_split
    key = self.record_key(data_config, beir.check_files(data_config.input_path, split))
    key.update(beir_split=split)
    fingerprint = json.dumps(key, sort_keys=True, default=str)
    read: List[BeirEvaluation] = []
    path = self.cached_records(
        data_config, role, key, lambda: read.append(BeirEvaluation.read(data_config.input_path, split)) or
        read[-1].examples(),
        lambda examples, indices: pair_data.records(examples, indices, self.tokenizer, data_config.seq_length,
                                                    ("anchor",), False))
    if fingerprint != self._validation_key:
      self._beir = read[-1] if read else BeirEvaluation.read(data_config.input_path, split)
      self._validation_key, self._validation, self._validation_ids = fingerprint, None, None
    return path

  def feature_spec(self, seq_length: int, sides, scored: Optional[bool] = None) -> Dict[str, tf.io.FixedLenFeature]:
    spec = {pair_data.side_key(s, k): tf.io.FixedLenFeature([seq_length], tf.int64)
            for s in sides for k in pair_data.ENCODER_KEYS}
    spec["example_index"] = tf.io.FixedLenFeature([], tf.int64)
    if self.scored if scored is None else scored:
      spec["score"] = tf.io.FixedLenFeature([], tf.float32)
    return spec

  def role_feature_spec(self, data_config: DataConfig, role: str) -> Dict[str, tf.io.FixedLenFeature]:
    return self.feature_spec(data_config.seq_length, self.sides_of(data_config, role),
                             self.scored and role != "predict")

  def build_inputs(self, data_config: DataConfig, input_context: Optional[tf.distribute.InputContext] = None,
                   role: Optional[str] = None) -> tf.data.Dataset:
    if base_task.input_role(data_config, role) == "eval":
      self._eval_data = data_config  # (what evaluation reads: `validation_examples` names queries by its rows)
    return super().build_inputs(data_config, input_context, role)

  def model_inputs(self, features: Dict[str, tf.Tensor]) -> Dict[str, tf.Tensor]:
    """The sides present (evaluation reads anchor and positive only)."""
    inputs = {k: features[k] for k in self.model_input_keys if k in features}
    if pair_data.side_key("anchor", "input_word_ids") not in inputs:
      raise KeyError(f"{self.name}: the input batch has no anchor side; it has {sorted(features)}.")
    return inputs

  # --------------------------------------------------------------------------------------------- model
  def build_model(self) -> keras.Model:
    p = self.params
    embedder = AlbertEmbedder(p.model.to_albert_config(), pooling=p.pooling_modes, normalize=p.normalize)
    model = BiEncoder(embedder)
    seq = max(p.train_data.seq_length, 2)
    zeros = tf.zeros([1, seq], tf.int32)
    model({pair_data.side_key(s, k): zeros for s in ("anchor", "positive") for k in pair_data.ENCODER_KEYS})
    # The pooled output ([CLS] dense) is not part of a sentence embedding: frozen, it gets no (missing) gradient.
    model.encoder.pooler.trainable = False
    return model

  def initialize(self, model: keras.Model) -> None:
    """The warm start, and the model directory's record of this training run (`save_assets`): written when training
    starts fresh only, so `--mode=predict` / `eval` (and a resumed run) keep the trained model's."""
    super().initialize(model)
    self.save_assets()

  def save_assets(self) -> None:
    """The model directory's record of this run (`record.write_embedding_record`; chief only)."""
    if self.logging_dir:
      record.write_embedding_record(self.logging_dir, self.params, self.name, self.columns(self.train_sides()))

  def chance_losses(self) -> Dict[str, float]:
    """MNRL of a model that has learnt nothing: ln(global batch × (1 + hard negatives)) (uniform softmax)."""
    p = self.params
    if p.loss != "mnrl" or p.symmetric or p.matryoshka_dims:
      return {}
    return {"loss": math.log(p.train_data.global_batch_size * (2 if p.negative_column else 1))}

  # --------------------------------------------------------------------------------------------- loss
  def pair_loss(self, embeddings: Dict[str, tf.Tensor], scores: Optional[tf.Tensor],
                keys: Optional[Dict[str, tf.Tensor]] = None) -> tf.Tensor:
    """This replica's mean loss, its in-batch negatives (CoSENT's comparisons) spanning the global batch; `keys`
    ({side: [B] `text_keys`}) give mnrl's false negatives when `task.mask_false_negatives`."""
    p = self.params
    anchors = tf.cast(embeddings["anchor_embedding"], tf.float32)
    positives = tf.cast(embeddings["positive_embedding"], tf.float32)
    negatives = [tf.cast(embeddings["negative_embedding"], tf.float32)] if "negative_embedding" in embeddings else []
    ctx = tf.distribute.get_replica_context()
    replicas = ctx.num_replicas_in_sync if ctx is not None else 1

    def gather(t):
      if replicas == 1:
        return t
      gathered = ctx.all_gather(t, axis=0)
      gathered.set_shape([None] + t.shape.as_list()[1:])  # (the collective loses the static width truncate reads)
      return gathered

    if p.loss == "mnrl":
      offset = tf.cast(ctx.replica_id_in_sync_group, tf.int32) * tf.shape(anchors)[0] if replicas > 1 else 0
      masks = None
      if p.mask_false_negatives:
        if keys is None:
          raise ValueError(f"{self.name}: task.mask_false_negatives needs the texts' keys (`text_keys`).")
        masks = losses.in_batch_false_negatives(gather(keys["anchor"]), gather(keys["positive"]),
                                                [gather(keys["negative"])] if negatives else [])
      fn = lambda a, pos, all_a, *neg: losses.mnrl_loss(  # noqa: E731
          a, pos, neg, scale=p.scale, symmetric=p.symmetric, all_anchors=all_a, offset=offset,
          false_negatives=masks)
      tensors = [anchors, gather(positives), gather(anchors) if p.symmetric else anchors,
                 *[gather(n) for n in negatives]]
    elif p.loss == "cosent":
      labels = gather(tf.cast(scores, tf.float32))
      fn = lambda a, b: losses.cosent_loss(a, b, labels, scale=p.scale)  # noqa: E731
      tensors = [gather(anchors), gather(positives)]
    else:
      fn = lambda a, b: losses.cosine_loss(a, b, tf.cast(scores, tf.float32))  # noqa: E731
      tensors = [anchors, positives]
    if p.matryoshka_dims:
      return losses.matryoshka_loss(fn, tensors, p.matryoshka_dims, p.matryoshka_weights or None)
    return fn(*tensors)

  def compute_gradients(self, inputs, model, optimizer, metrics, denominators=None, share=1.0, aux_share=1.0):
    """The base pass, or GradCache's (`task.grad_cache_chunk` > 0: the same loss and gradient, the encoder run a
    chunk of rows at a time). Refused on a micro-batch of in-batch-negative losses (`aux_share` = 1 / (replicas ×
    micro-batches), base_task's contract): mnrl and cosent would rank each micro-batch against itself only, a
    different (easier) loss than the configured batch's."""
    ctx = tf.distribute.get_replica_context()
    micro_batches = round(1.0 / (aux_share * (ctx.num_replicas_in_sync if ctx is not None else 1)))
    if micro_batches > 1 and self.params.loss != "cosine":
      raise ValueError(f"trainer.gradient_accumulation_steps={micro_batches} with task.loss={self.params.loss}: "
                       "the in-batch negatives would span one micro-batch, not the batch. Set "
                       "trainer.gradient_accumulation_steps=1 and task.grad_cache_chunk=N (GradCache: the whole "
                       "batch's negatives, the encoder run N rows at a time) for a batch larger than memory.")
    if self.params.grad_cache_chunk <= 0:
      return super().compute_gradients(inputs, model, optimizer, metrics, denominators, share, aux_share)
    return self.cached_gradients(inputs, model, optimizer, metrics, denominators, share)

  def cached_gradients(self, inputs, model, optimizer, metrics, denominators=None, share=1.0):
    """`compute_gradients` by GradCache (`official_albert.retrieval.grad_cache`): the embeddings chunk by chunk
    without a tape, `build_losses` on the whole batch (gathered across replicas as the plain pass gathers them) and
    its gradient on the embeddings, then each chunk again under a tape. The bi-encoder adds no auxiliary losses
    (`model.losses`), so none are added here."""
    features, labels = self.split_inputs(inputs)

    def loss_fn(embeddings):
      loss = tf.cast(self.build_losses(labels, embeddings, denominators=denominators), tf.float32) * share
      if isinstance(optimizer, keras.optimizers.LossScaleOptimizer):
        return loss, optimizer.scale_loss(loss)
      return loss, loss

    tvars = model.trainable_variables
    loss, embeddings, grads = grad_cache.cached_gradients(
        lambda part: model(part, training=True), loss_fn, self.model_inputs(features), tvars,
        self.params.grad_cache_chunk, compat.seed_generator_states(model))
    self.check_gradients(tvars, grads)
    self.process_metrics(metrics, labels, embeddings)
    return loss, grads

  def build_losses(self, labels: Any, model_outputs: Dict[str, tf.Tensor], aux_losses=None,
                   denominators=None) -> tf.Tensor:
    """The replica's mean loss × (its rows / the global batch's rows): the replicas' shares sum to the global loss."""
    rows = tf.cast(tf.shape(model_outputs["anchor_embedding"])[0], tf.float32)
    count = rows if denominators is None else tf.cast(denominators[base_task.EXAMPLES], tf.float32)
    scores = labels.get("score") if isinstance(labels, dict) else None
    keys = (pair_data.text_keys(labels, ("anchor", "positive", "negative")) if self.params.mask_false_negatives
            else None)
    loss = tf.cast(self.pair_loss(model_outputs, scores, keys), tf.float32) * rows / count
    if aux_losses:
      loss = loss + tf.add_n([tf.cast(a, tf.float32) for a in aux_losses])
    return loss

  # --------------------------------------------------------------------------------------------- evaluation
  def eval_outputs(self, features, labels, outputs) -> Dict[str, tf.Tensor]:
    out = {f"{side}_embedding": tf.cast(outputs[f"{side}_embedding"], tf.float32) for side in ("anchor", "positive")
           if f"{side}_embedding" in outputs}  # (a BEIR folder's texts: the anchor side only)
    out["example_index"] = features["example_index"]
    if "positive_embedding" not in out:
      return out
    if self.scored:
      out["score"] = labels["score"]
    elif self.params.mask_false_negatives:  # (eval_loss masks as training does: `set_loss`)
      out.update({f"{side}_key": key
                  for side, key in pair_data.text_keys(features, ("anchor", "positive")).items()})
    return out

  def reduce_aggregated_logs(self, aggregated_logs, global_step=None) -> Dict[str, float]:
    del global_step
    if not aggregated_logs:
      return {}
    if "positive_embedding" not in aggregated_logs:  # (a BEIR folder's texts: `BeirEvaluation` orders them)
      return self._beir.results(np.concatenate(aggregated_logs["anchor_embedding"]),
                                np.concatenate(aggregated_logs["example_index"]),
                                (self._eval_data or self.params.validation_data).global_batch_size, REPORTED,
                                self.params.metric_convention)
    order = np.argsort(np.concatenate(aggregated_logs["example_index"]), kind="stable")
    anchors = np.concatenate(aggregated_logs["anchor_embedding"])[order]
    positives = np.concatenate(aggregated_logs["positive_embedding"])[order]
    scores = np.concatenate(aggregated_logs["score"])[order] if self.scored else None
    keys = ({side: np.concatenate(aggregated_logs[f"{side}_key"])[order] for side in ("anchor", "positive")}
            if "anchor_key" in aggregated_logs else None)
    results = {"eval_loss": self.set_loss(anchors, positives, scores, keys)}
    index = np.concatenate(aggregated_logs["example_index"])[order]
    if self.scored:
      examples = self.validation_examples()
      if examples is not None:  # (the warning when validation_steps ended early; scores come from the records)
        pair_data.check_evaluated(index, len(examples), self.eval_input_path(), scored=True)
      cosine = pair_cosines(anchors, positives)
      results.update(spearman=spearman(cosine, scores), pearson=pearson(cosine, scores))
      return results
    results.update(self.retrieval_results(anchors, positives, index))
    return results

  def eval_input_path(self) -> str:
    return (self._eval_data or self.params.validation_data).input_path

  def reduced_metric_names(self) -> List[str]:
    """`reduce_aggregated_logs`' keys: `eval_loss` and Spearman / Pearson (scored pairs) or the REPORTED retrieval
    metrics with the `queries` and `corpus` counts."""
    ranked = list(REPORTED) + ["queries", "corpus"]
    return ranked if self.ranks_folder else ["eval_loss"] + (["spearman", "pearson"] if self.scored else ranked)

  def check_eval_settings(self, trainer_config) -> None:
    if self.ranks_folder and trainer_config.validation_steps != -1:
      raise beir_evaluation.cut_corpus_error(self.params.validation_data.input_path, trainer_config.validation_steps)

  def evaluation_input(self, data_config: DataConfig) -> str:
    folder = beir.is_beir_folder(data_config.input_path)
    return f"{data_config.input_path.rstrip('/')}#{self.params.validation_split}" if folder else data_config.input_path

  def retrieval_results(self, anchors: np.ndarray, positives: np.ndarray, index: np.ndarray) -> Dict[str, float]:
    """Queries = the distinct anchors, corpus = the distinct positives, relevant = every positive an anchor is paired
    with (as sentence-transformers' InformationRetrievalEvaluator takes queries, corpus and qrels: an anchor on several
    rows is one query with several relevant documents), texts told apart by the ids the model reads
    (`validation_keys`, `pair_data.evaluation_sets`); a document that is the query's own text is left out of its
    ranking unless relevant to it (BEIR's ignore_identical_ids: paraphrases written both ways). Over the rows
    evaluated: when trainer.validation_steps stops evaluation early, the first K rows' anchors against those rows'
    positives (`pair_data.check_evaluated` warns). Evaluating records made earlier, whose texts are not at hand,
    every row is a query and a document."""
    examples = self.validation_examples()
    if examples is not None:
      pair_data.check_evaluated(index, len(examples), self.eval_input_path())
      row_keys = self.validation_keys()
      keys = [row_keys[int(i)] for i in index]
    else:
      keys = [(int(i), int(i)) for i in index]
    query_rows, documents, relevant, ignore = pair_data.evaluation_sets(keys)
    metrics = vector_retrieval_metrics(anchors[query_rows], positives[documents],  # (no [Q, C] matrix in memory)
                                       [str(q) for q in range(len(query_rows))],
                                       [str(c) for c in range(len(documents))], relevant, ignore=ignore,
                                       convention=self.params.metric_convention)
    out = {k: float(metrics[k]) for k in REPORTED}
    out.update(queries=len(query_rows), corpus=len(documents))
    return out

  # --------------------------------------------------------------------------------------------- predict
  def predict_outputs(self, features, outputs) -> Dict[str, tf.Tensor]:
    return {"embedding": tf.cast(outputs["anchor_embedding"], tf.float32), "example_index": features["example_index"]}

  def write_prediction_files(self, aggregated_logs, output_dir: str) -> Dict[str, str]:
    """`<stem>.embeddings.npy` (float32 [N, D], row i = the file's i-th text, files in the order given) and
    `<stem>.embeddings.jsonl` (row i's file, line and text), `<stem>` the first input file's name: the vectors
    `pipelines.embed(model_dir, texts)` gives at the same seq_length."""
    data = self.params.predict_data
    if not text_data.is_raw_input(data.input_path, self.params.input_format):
      raise ValueError(f"{self.name}: --mode=predict writes each vector beside its text, so task.predict_data."
                       f"input_path must name the raw files (got {data.input_path!r}).")
    examples = self.read(data, ("anchor",), "predict")
    order = np.argsort(np.concatenate(aggregated_logs["example_index"]), kind="stable")
    vectors = np.concatenate(aggregated_logs["embedding"]).astype(np.float32)[order]
    if len(vectors) != len(examples):
      raise ValueError(f"{len(vectors)} vectors for {len(examples)} texts of {data.input_path}; the records are "
                       "stale — delete task.records_dir.")
    stem = row_files.file_stem(text_data.expand_paths(data.input_path)[0])
    paths = {"embeddings": os.path.join(output_dir, f"{stem}.embeddings.npy"),
             "texts": os.path.join(output_dir, f"{stem}.embeddings.jsonl")}
    buffer = io.BytesIO()
    np.save(buffer, vectors)
    file_io.atomic_write_bytes(paths["embeddings"], buffer.getvalue())
    file_io.atomic_write_text(paths["texts"], "".join(
        json.dumps({"file": e.path, "line": e.line, "text": e.anchor}, ensure_ascii=False) + "\n" for e in examples))
    return paths

  def set_loss(self, anchors: np.ndarray, positives: np.ndarray, scores: Optional[np.ndarray],
               keys: Optional[Dict[str, np.ndarray]] = None) -> float:
    """The training loss over the evaluation set, in batches of validation_data.global_batch_size (hard negatives
    are not read at evaluation: in-batch negatives only), weighted by batch size."""
    size, total = self.params.validation_data.global_batch_size, 0.0
    for begin in range(0, len(anchors), size):
      part = {"anchor_embedding": tf.constant(anchors[begin:begin + size]),
              "positive_embedding": tf.constant(positives[begin:begin + size])}
      batch_scores = None if scores is None else tf.constant(scores[begin:begin + size])
      part_keys = None if keys is None else {s: tf.constant(k[begin:begin + size]) for s, k in keys.items()}
      total += float(self.pair_loss(part, batch_scores, part_keys)) * len(part["anchor_embedding"])
    return total / max(len(anchors), 1)

