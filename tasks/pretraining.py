"""The ALBERT pretraining task: masked LM + sentence-order prediction (reference §1.5, §1.6, §4.3).

loss = Σ(w·nll)/(Σw + 1e-5) over the masked positions + mean SOP cross-entropy, both over the *global* batch: the
trainer sums the denominators Σw and the example count over every replica (`loss_denominators`), so one device and
N replicas compute the same loss. The reference normalises per TPU core and averages the cores' losses, which
differs when the cores' batches hold different numbers of masked positions; `trainer.loss_normalization=
per_replica` restores it. Metrics carry the reference eval names: `masked_lm_accuracy`, `masked_lm_loss` (weighted
mean), `sentence_order_accuracy`, `sentence_order_loss`, and `loss` (their sum over the whole set).

Casing: a fresh run records in `<model_dir>/tokenizer_config.json` the tokenizer options its input was made with (the
records' stats files: `records_tokenizer_options`), so that fine-tuning, fill_mask and the exports from that folder
tokenize as the records did (cased records stay cased) instead of falling back to ALBERT's uncased default.

Long because: the task is its data (static, dynamic, dummy), its losses and metrics, and the model directory's record of
how that data was tokenized, and each of these reads the same config; split apart, the record would have to rebuild the
input file lists the task builds here.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import os
import re
from typing import Dict, List, Optional, Sequence, Tuple

import keras
import numpy as np
import tensorflow as tf

from official_albert import file_io
from official_albert import model_directory
from official_albert.checkpoints import loading
from official_albert.checkpoints import native
from official_albert.checkpoints import tf1
from official_albert.checkpoints.sentence_transformers_folder import recorded_tokenizer_options
from official_albert.checkpoints.sentence_transformers_folder import TOKENIZER_DEFAULTS
from official_albert.checkpoints.sentence_transformers_folder import write_tokenizer_options
from official_albert.data import input_pipeline
from official_albert.data import records
from official_albert.modeling.models import AlbertPretrainer
from official_albert.training import base_task
from official_albert.training import vocabulary
from official_albert.training.experiment_config import DataConfig
from official_albert.training.experiment_config import TaskConfig
from official_albert.training.hyperparams import ConfigError
from tasks import pretraining_dynamic
from tasks import token_manifests
from tasks.masking_options import check_instance_options
from tasks.masking_options import MaskingOptions

MLM_WEIGHT_EPSILON = 1e-5  # the reference denominator term (§1.5 step 5)


@dataclasses.dataclass
class PretrainingDataConfig(DataConfig):
  """Pretraining TFRecords (reference §3.4 features).

  Attributes:
    max_predictions_per_seq: masked positions per sequence (must match the records; 20 in the reference).
    input_path: file patterns, comma separated; "dummy" gives a synthetic dataset of random ids (benchmarks,
      compile checks).
    dummy_vocab_size: id range of the synthetic dataset (capped at the model's vocab_size).
    dynamic_masking: input_path points at a tokenized corpus (`python -m data_prep.tokenize_corpus`) and the
      examples (segments, SOP pairs, n-gram masks) are drawn on the fly, fresh every epoch, by
      `tasks.pretraining_dynamic` (same features as the static records). False: static TFRecords (reference).
    masked_lm_prob, short_seq_prob, max_ngram: the reference instance options of the dynamic pipeline (only read
      with dynamic_masking; static records carry their own).
  """
  max_predictions_per_seq: int = 20
  dummy_vocab_size: int = 30000
  dynamic_masking: bool = False
  masked_lm_prob: float = MaskingOptions.masked_lm_prob
  short_seq_prob: float = MaskingOptions.short_seq_prob
  max_ngram: int = 3

  def validate(self) -> None:
    super().validate()
    check_instance_options(self.masked_lm_prob, self.short_seq_prob, self.max_ngram, error=ConfigError)


@dataclasses.dataclass
class PretrainingTaskConfig(TaskConfig):
  """Attributes: init_checkpoint — continued pretraining: restores the WHOLE pretrainer (encoder, MLM head, SOP head)
  from a native model dir or checkpoint prefix (a previous pretraining run's model_dir included), a Hugging Face
  directory or an original TF1 release (dir or prefix); the optimizer and step start fresh. Every variable must get
  a value, except those whose TF1 names match `init_checkpoint_allow_missing` (e.g. `cls/seq_relationship/*` for a
  Hub checkpoint without the SOP head, which then keeps its random initialisation). spm_model_file — the
  SentencePiece model the data was made with; the train binary copies it to `<model_dir>/spiece.model`.
  sentence_loss_weight — the weight of the sentence-level loss (SOP, or NSP when the records were made with
  `--random_next_sentence`) in `loss`; 1.0 is the reference. 0.0 trains the masked LM alone (the paper's "None" row
  of Table 5, `experiments.projects.ablations`): the sentence head keeps its initialisation, its metrics are still
  reported, and the chance-level watch leaves it alone."""
  spm_model_file: str = ""
  sentence_loss_weight: float = 1.0
  train_data: PretrainingDataConfig = dataclasses.field(default_factory=PretrainingDataConfig)
  validation_data: PretrainingDataConfig = dataclasses.field(
      default_factory=lambda: PretrainingDataConfig(is_training=False))
  init_checkpoint_allow_missing: List[str] = dataclasses.field(default_factory=list)

  def validate(self) -> None:
    super().validate()
    if self.sentence_loss_weight < 0.0:
      raise ConfigError(f"task.sentence_loss_weight must be >= 0, got {self.sentence_loss_weight}.")


def masked_lm_example_loss(mlm_logits: tf.Tensor, masked_lm_ids: tf.Tensor) -> tf.Tensor:
  """Per-position negative log-likelihood [B, P] (float32)."""
  log_probs = tf.nn.log_softmax(tf.cast(mlm_logits, tf.float32), axis=-1)
  ids = tf.cast(masked_lm_ids, tf.int32)
  return -tf.gather(log_probs, ids, axis=-1, batch_dims=2)


MLM_WEIGHTS = "masked_lm_weights"  # the loss denominator of the MLM term: Σ of the masked positions' weights


def _mlm_weights(labels: Dict[str, tf.Tensor]) -> tf.Tensor:
  """[B, P] weights of the masked positions, zero on the padding rows of an evaluation batch."""
  weights = tf.cast(labels["masked_lm_weights"], tf.float32)
  return weights * base_task.example_weights(labels, weights)[:, None]


def pretraining_denominators(labels: Dict[str, tf.Tensor]) -> Dict[str, tf.Tensor]:
  """This batch's Σ of the masked positions' weights and its number of (valid) examples."""
  weights = _mlm_weights(labels)
  return {MLM_WEIGHTS: tf.reduce_sum(weights),
          base_task.EXAMPLES: tf.reduce_sum(base_task.example_weights(labels, weights))}


def pretraining_losses(outputs: Dict[str, tf.Tensor], labels: Dict[str, tf.Tensor],
                       denominators: Optional[Dict[str, tf.Tensor]] = None,
                       sentence_loss_weight: float = 1.0) -> Dict[str, tf.Tensor]:
  """The reference losses: masked_lm_loss, sentence_order_loss and their sum `loss`.

  Args:
    outputs: the pretrainer's `mlm_logits` and `sop_logits`.
    labels: the batch's labels.
    denominators: global `pretraining_denominators` (summed over every replica); None = this batch's own.
    sentence_loss_weight: `loss` = masked_lm_loss + this × sentence_order_loss (0: the masked LM alone).
  """
  denominators = denominators or pretraining_denominators(labels)
  weights = _mlm_weights(labels)
  nll = masked_lm_example_loss(outputs["mlm_logits"], labels["masked_lm_ids"])
  mlm_loss = tf.reduce_sum(weights * nll) / (denominators[MLM_WEIGHTS] + MLM_WEIGHT_EPSILON)
  sop_labels = tf.reshape(tf.cast(labels["next_sentence_labels"], tf.int32), [-1])
  sop_ce = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=sop_labels,
                                                          logits=tf.cast(outputs["sop_logits"], tf.float32))
  sop_loss = base_task.weighted_mean(sop_ce, base_task.example_weights(labels, sop_ce),
                                     denominators[base_task.EXAMPLES])
  loss = mlm_loss + sop_loss if sentence_loss_weight == 1.0 else mlm_loss + sentence_loss_weight * sop_loss
  return {"masked_lm_loss": mlm_loss, "sentence_order_loss": sop_loss, "loss": loss}


class SumOfMetrics(keras.metrics.Metric):
  """A metric whose result is the weighted sum of other metrics' results (it owns no state).

  The pretraining `loss` over a whole evaluation is masked_lm_loss + sentence_loss_weight × sentence_order_loss (the
  training loss's weighting, so `best_checkpoint_metric=loss` ranks what training minimises: the lowest is kept,
  by `best_checkpoint_mode=auto` or `min`, never `max`), each already a mean over every position / example of every
  replica; averaging per-batch losses instead would weight batches, not examples.

  Args:
    parts: the metrics summed.
    name: the metric's name.
    weights: one weight per part; None = 1 each.
  """

  def __init__(self, parts: Sequence[keras.metrics.Metric], name: str = "loss",
               weights: Optional[Sequence[float]] = None):
    super().__init__(name=name)
    self._parts = list(parts)
    self._weights = [1.0] * len(self._parts) if weights is None else [float(w) for w in weights]
    if len(self._weights) != len(self._parts):
      raise ValueError(f"SumOfMetrics {name!r}: {len(self._weights)} weights for {len(self._parts)} parts.")

  def update_state(self, *args, **kwargs):
    del args, kwargs

  def result(self):
    return tf.add_n([w * tf.cast(p.result(), tf.float32) for p, w in zip(self._parts, self._weights)])

  def reset_state(self):
    pass


def dummy_pretraining_dataset(data: PretrainingDataConfig, batch_size: int, seed: int) -> tf.data.Dataset:
  """Random ids with the pretraining record layout (deterministic for a seed); repeats forever.

  The examples (8 global batches' worth) depend on the seed and the global batch size only, so a run split over
  several replicas of one pipeline sees the same examples as a single-device run.
  """
  rng = np.random.default_rng(seed)
  n, s, p = 8 * data.global_batch_size, data.seq_length, data.max_predictions_per_seq
  vocab = data.dummy_vocab_size
  features = {
      "input_word_ids": rng.integers(5, vocab, size=(n, s)).astype(np.int32),
      "input_mask": np.ones((n, s), np.int32),
      "input_type_ids": np.concatenate([np.zeros((n, s // 2), np.int32), np.ones((n, s - s // 2), np.int32)], 1),
      "masked_lm_positions": np.sort(rng.integers(1, s, size=(n, p)), axis=1).astype(np.int32),
      "masked_lm_ids": rng.integers(5, vocab, size=(n, p)).astype(np.int32),
      "masked_lm_weights": np.ones((n, p), np.float32),
      "next_sentence_labels": rng.integers(0, 2, size=(n, 1)).astype(np.int32),
  }
  return tf.data.Dataset.from_tensor_slices(features).repeat().batch(batch_size, drop_remainder=True)


def restore_pretrainer(model: keras.Model, path: str, allow_missing: Sequence[str] = ()) -> Dict[str, object]:
  """Loads every pretrainer weight from a native / HF / TF1 directory or a native / TF1 checkpoint prefix.

  Returns the loader's summary; raises (naming the variables) when a weight is missing or has another shape.
  """
  if tf.io.gfile.isdir(path):
    if model_directory.detect_format(path) == "tf1":
      summary = tf1.load_tf1_checkpoint(model, path, allow_missing)
    else:
      summary = loading.load_pretrained(path, model=model, allow_missing=allow_missing).load_summary
  else:
    prefix = model_directory.resolve_checkpoint(path, "init_checkpoint")
    object_based = any(n == "_CHECKPOINTABLE_OBJECT_GRAPH" for n, _ in tf.train.list_variables(prefix))
    summary = (native.restore_native(model, prefix, allow_missing=allow_missing) if object_based
               else tf1.load_tf1_checkpoint(model, prefix, allow_missing))
  logging.getLogger(__name__).info("Continued pretraining from %s (encoder, MLM and SOP heads; fresh optimizer).",
                                   path)
  return summary


# The tokenizer options the data tools record (create_pretraining_data's `generation`, tokenize_corpus' `tokenization`).
RECORDED_TOKENIZER_OPTIONS = ("do_lower_case", "keep_accents", "remove_space", "tokenizer_mode")
_SHARD_SUFFIX = re.compile(r"-\d{5}-of-\d{5}$")  # create_pretraining_data's `<prefix>-NNNNN-of-MMMMM`


def _stats_of(path: str, dynamic: bool, cache: Dict[str, object]) -> Optional[Tuple[str, dict]]:
  """(stats file, its tokenizer settings) of one input file, None when no finished run recorded it.

  A tokenized shard's is its folder's `tokens.stats.json` (`tokenization`); a record file's is create_pretraining_data's
  `<output_file>.stats.json` (`generation`): `<file>.stats.json`, `<prefix>.stats.json` of a `<prefix>-NNNNN-of-MMMMM`
  shard, else a stats file beside it whose `output_files` name it (a comma list of outputs). `cache`: stats files
  read and folders listed so far (one read or listing each, however many shards share it).
  """
  folder = os.path.dirname(path)
  if dynamic:
    candidates, section = [os.path.join(folder, pretraining_dynamic.TOKENS_STATS_NAME)], "tokenization"
  else:
    section = "generation"
    candidates = [path + ".stats.json", _SHARD_SUFFIX.sub("", path) + ".stats.json"]
    listing_key = "<listing>" + folder  # one listing per folder, however many shards it holds
    if listing_key not in cache:
      listed = file_io.gfile().listdir(folder or ".") if file_io.isdir(folder or ".") else []
      # Listed, not globbed: a folder named run[2] must not read run2's statistics.
      cache[listing_key] = [os.path.join(folder, n) for n in sorted(listed) if n.endswith(".stats.json")]
    candidates += [c for c in cache[listing_key] if c not in candidates]
  for candidate in candidates:
    if candidate not in cache:
      if not file_io.exists(candidate):
        continue
      with file_io.open_file(candidate, "r") as f:
        cache[candidate] = json.load(f)
    stats = cache[candidate]
    outputs = {os.path.basename(o) for o in stats.get("output_files", ())}
    if isinstance(stats.get(section), dict) and (dynamic or os.path.basename(path) in outputs):
      return candidate, stats[section]
  return None


def _spm_mismatch(made_with: Optional[Tuple[str, str]], spm: str, tool: str) -> List[str]:
  """[the problem] when the input records (`made_with`: SHA-256, file) another SentencePiece model than `spm`
  (task.spm_model_file, which the run copies into model_dir: the exports would tokenize with pieces the model never
  saw); [] when it records `spm` or nothing."""
  own = records.file_sha256(spm)
  if made_with is None or made_with[0] == own:
    return []
  return [f"{made_with[1]} was made with another SentencePiece model (SHA-256 {made_with[0][:12]}…) than "
          f"task.spm_model_file={spm} (SHA-256 {own[:12]}…): its ids are other pieces. Set task.spm_model_file to "
          f"the model given to {tool}, or make the input again with this one."]


def records_tokenizer_options(files: Sequence[str], dynamic: bool = False) -> Tuple[Dict[str, object], List[str]]:
  """The tokenizer options (`RECORDED_TOKENIZER_OPTIONS`) the input files were made with, and the files whose run
  recorded none (older records, records made elsewhere).

  Raises:
    ConfigError: two files were made with different values of one option (naming both files and the values):
      one model cannot be tokenized both ways afterwards.
  """
  found: Dict[str, Tuple[object, str]] = {}
  unrecorded, cache = [], {}
  for path in files:
    recorded = _stats_of(path, dynamic, cache)
    if recorded is None:
      unrecorded.append(path)
      continue
    stats_file, settings = recorded
    for key in RECORDED_TOKENIZER_OPTIONS:
      if key not in settings:
        continue
      value, first = found.setdefault(key, (settings[key], stats_file))
      if value != settings[key]:
        raise ConfigError(f"The pretraining input mixes tokenizer settings: {first} records {key}={value} but "
                          f"{stats_file} (for {path}) records {key}={settings[key]}. A model is tokenized one way "
                          "afterwards: make every input with the same --" + key + " (or train on one of them).")
  return {key: value for key, (value, _) in found.items()}, unrecorded


@base_task.register_task("pretraining", config_cls=PretrainingTaskConfig)
class PretrainingTask(base_task.Task):
  """MLM + SOP pretraining of `AlbertPretrainer`."""

  model_input_keys = base_task.ENCODER_INPUT_KEYS + ("masked_lm_positions",)
  best_metric = "masked_lm_accuracy"
  best_metric_higher_is_better = True

  def build_model(self) -> keras.Model:
    # The model creates all its variables in the constructor, so the optimizer can be built before any step.
    return AlbertPretrainer(self.params.model.to_albert_config())

  def build_inputs(self, data_config: PretrainingDataConfig,
                   input_context: Optional[tf.distribute.InputContext] = None,
                   role: Optional[str] = None) -> tf.data.Dataset:
    del role  # pretraining reads its records alike in every role
    batch_size = data_config.global_batch_size
    if input_context is not None:
      batch_size = input_context.get_per_replica_batch_size(batch_size)
    seed = data_config.seed
    if data_config.input_path.strip() == "dummy":
      pipeline_id = input_context.input_pipeline_id if input_context is not None else 0
      # Ids must stay inside the model's vocabulary.
      data_config = data_config.replace(
          dummy_vocab_size=min(data_config.dummy_vocab_size, self.params.model.vocab_size))
      return dummy_pretraining_dataset(data_config, batch_size, (seed or 0) + pipeline_id)
    if not data_config.input_path:
      raise ValueError("Pretraining data config has an empty input_path (set task.train_data.input_path / "
                       "task.validation_data.input_path).")
    patterns = [p.strip() for p in data_config.input_path.split(",") if p.strip()]
    if data_config.dynamic_masking:
      return self._dynamic_inputs(data_config, patterns, batch_size, input_context)
    self._check_records_vocabulary(input_pipeline.list_files(patterns))
    return input_pipeline.pretraining_dataset(
        patterns, seq_length=data_config.seq_length,
        max_predictions_per_seq=data_config.max_predictions_per_seq, batch_size=batch_size,
        is_training=data_config.is_training, input_context=input_context, seed=seed,
        shuffle_buffer_size=data_config.shuffle_buffer_size, drop_remainder=data_config.drop_remainder,
        **data_config.padding_options())

  def initialize(self, model: keras.Model) -> None:
    """Continued pretraining: `task.init_checkpoint` restores the whole pretrainer (see PretrainingTaskConfig); and
    the model directory's record of the input's tokenizer settings (`save_assets`): written when training starts
    fresh only, so a resumed run keeps the record of the data the model was trained on first."""
    if self.params.init_checkpoint:
      restore_pretrainer(model, self.params.init_checkpoint, self.params.init_checkpoint_allow_missing)
    self.save_assets()

  def input_tokenizer_options(self) -> Dict[str, object]:
    """`records_tokenizer_options` of the training input (not "dummy"); {} when it records none (logged once: the
    model directory then records nothing, and readers use ALBERT's uncased defaults). The training data alone: the
    weights learn its pieces, and a `--mode=train` run need not have its validation files yet."""
    data = self.params.train_data
    patterns = [p.strip() for p in (data.input_path or "").split(",") if p.strip()]
    if not patterns or patterns == ["dummy"]:
      return {}
    found, unrecorded = records_tokenizer_options(input_pipeline.list_files(patterns), data.dynamic_masking)
    if unrecorded:
      logging.getLogger(__name__).info(
          "%s (and %d more input files) has no stats file recording its tokenizer settings (records made by an "
          "older or another tool): %s records no casing, and fine-tuning from it lower-cases unless told "
          "(task.do_lower_case=false).", unrecorded[0], len(unrecorded) - 1, self.logging_dir or "the model_dir")
    return found

  def save_assets(self) -> None:
    """Writes `<model_dir>/tokenizer_config.json` with the input's tokenizer settings (`input_tokenizer_options`;
    chief only), which `model_tokenizer_options` reads for every later step (fine-tuning, fill_mask, exports).
    Every worker checks the inputs (mixed settings stop every one of them)."""
    options = self.input_tokenizer_options()
    if not options and self.params.init_checkpoint:
      # Continued pretraining on records that record nothing: the model keeps the casing it was trained with.
      folder = model_directory.checkpoint_folder(self.params.init_checkpoint)
      options = {key: value for key, (value, _) in recorded_tokenizer_options(folder).items()}
      if options:
        logging.getLogger(__name__).info("The input records no tokenizer settings: %s records those of "
                                         "task.init_checkpoint's folder %s.", self.logging_dir, folder)
    if not options or not self.logging_dir:
      return
    mode = options.pop("tokenizer_mode", None)
    file_io.makedirs(self.logging_dir)
    write_tokenizer_options(self.logging_dir, {**TOKENIZER_DEFAULTS, **options})
    logging.getLogger(__name__).info("%s records the input's tokenizer settings %s.", self.logging_dir, options)
    if mode not in (None, "hf"):
      logging.getLogger(__name__).warning(
          "The pretraining input was tokenized with tokenizer_mode=%s: give fine-tuning and the exports from %s the "
          "same (task.tokenizer_mode=%s, --tokenizer_mode=%s); they default to hf.", mode, self.logging_dir, mode, mode)

  def _dynamic_inputs(self, data_config: PretrainingDataConfig, patterns: List[str], batch_size: int,
                      input_context: Optional[tf.distribute.InputContext]) -> tf.data.Dataset:
    if data_config.length_bucket_window > 1:
      raise ValueError("length_bucket_window is not supported with dynamic_masking=true (use pad_to_multiple_of).")
    dataset = pretraining_dynamic.dynamic_pretraining_dataset(
        patterns, seq_length=data_config.seq_length, max_predictions_per_seq=data_config.max_predictions_per_seq,
        batch_size=batch_size, is_training=data_config.is_training, input_context=input_context,
        seed=data_config.seed, shuffle_buffer_size=data_config.shuffle_buffer_size,
        masked_lm_prob=data_config.masked_lm_prob, short_seq_prob=data_config.short_seq_prob,
        max_ngram=data_config.max_ngram, drop_remainder=data_config.drop_remainder,
        pad_to_multiple_of=data_config.pad_to_multiple_of)
    self._check_token_vocabulary(pretraining_dynamic.input_pipeline.list_files(patterns))
    return dataset

  def _check_token_vocabulary(self, files: List[str]) -> None:
    """The tokenized corpus fits the model and was made with `task.spm_model_file` (which the run copies into
    model_dir, so a mismatch would leave the exports tokenizing with pieces the model never saw)."""
    vocab_size = token_manifests.read_vocab_facts(files)["vocab_size"]
    problems = []
    if vocab_size > self.params.model.vocab_size:
      problems.append(f"the tokenized corpus {files[0]} (and {len(files) - 1} more) has a vocabulary of {vocab_size} "
                      f"pieces but task.model.vocab_size={self.params.model.vocab_size}: set task.model.vocab_size to "
                      f"at least {vocab_size} (the SentencePiece model's size).")
    spm = self.params.spm_model_file
    made_with = token_manifests.read_spm_sha256(files)  # two models among the shards: refused here
    if spm and file_io.exists(spm):
      if made_with is not None:
        problems += _spm_mismatch(made_with, spm, "data_prep.tokenize_corpus")
      elif vocabulary.spm_pieces(spm) != vocab_size:
        problems.append(f"the tokenized corpus {files[0]} has a vocabulary of {vocab_size} pieces but "
                        f"task.spm_model_file={spm} has {vocabulary.spm_pieces(spm)}: it was tokenized with another "
                        "SentencePiece model. Set task.spm_model_file to that model, or tokenize the corpus again.")
    if problems:
      raise vocabulary.VocabularyError("Vocabulary mismatch, nothing was trained:\n  " + "\n  ".join(problems))

  def _check_records_vocabulary(self, files: List[str]) -> None:
    """Static records were made with one SentencePiece model, `task.spm_model_file`, as `_check_token_vocabulary`
    checks tokenized shards: by the SHA-256 their stats' `generation` section records (create_pretraining_data);
    records whose stats record none (older runs, other tools) are not checked, as before."""
    cache: Dict[str, object] = {}
    made_with = token_manifests.one_spm_sha256(
        (path, (_stats_of(path, False, cache) or ("", {}))[1].get("spm_model_sha256")) for path in files)
    spm = self.params.spm_model_file
    problems = _spm_mismatch(made_with, spm, "data_prep.create_pretraining_data") if spm and file_io.exists(spm) else []
    if problems:
      raise vocabulary.VocabularyError("Vocabulary mismatch, nothing was trained:\n  " + problems[0])

  def loss_denominators(self, labels: Dict[str, tf.Tensor]) -> Dict[str, tf.Tensor]:
    return pretraining_denominators(labels)

  def build_losses(self, labels: Dict[str, tf.Tensor], model_outputs: Dict[str, tf.Tensor],
                   aux_losses: Optional[Sequence[tf.Tensor]] = None,
                   denominators: Optional[Dict[str, tf.Tensor]] = None) -> tf.Tensor:
    loss = pretraining_losses(model_outputs, labels, denominators, self.params.sentence_loss_weight)["loss"]
    if aux_losses:
      loss = loss + tf.add_n([tf.cast(l, tf.float32) for l in aux_losses])
    return loss

  def chance_losses(self) -> Dict[str, float]:
    """What the chance-level watch expects of an untrained model (`guardrails.chance_losses`): the sentence loss
    at ln 2, unless it is not trained (sentence_loss_weight 0), when nothing is watched."""
    return {"sentence_order_loss": math.log(2.0)} if self.params.sentence_loss_weight > 0 else {}

  def build_metrics(self, training: bool = True) -> List[keras.metrics.Metric]:
    del training
    mlm_loss, sop_loss = keras.metrics.Mean(name="masked_lm_loss"), keras.metrics.Mean(name="sentence_order_loss")
    return [
        keras.metrics.SparseCategoricalAccuracy(name="masked_lm_accuracy"),
        mlm_loss,
        keras.metrics.SparseCategoricalAccuracy(name="sentence_order_accuracy"),
        sop_loss,
        SumOfMetrics([mlm_loss, sop_loss], name="loss", weights=(1.0, self.params.sentence_loss_weight)),
    ]

  def process_metrics(self, metrics: Sequence[keras.metrics.Metric], labels: Dict[str, tf.Tensor],
                      model_outputs: Dict[str, tf.Tensor]) -> None:
    by_name = {m.name: m for m in metrics}
    weights = _mlm_weights(labels)
    mlm_logits = tf.cast(model_outputs["mlm_logits"], tf.float32)
    sop_logits = tf.cast(model_outputs["sop_logits"], tf.float32)
    sop_labels = tf.reshape(tf.cast(labels["next_sentence_labels"], tf.int32), [-1])
    valid = base_task.example_weights(labels, sop_logits)
    if "masked_lm_accuracy" in by_name:
      by_name["masked_lm_accuracy"].update_state(labels["masked_lm_ids"], mlm_logits, sample_weight=weights)
    if "masked_lm_loss" in by_name:
      nll = masked_lm_example_loss(mlm_logits, labels["masked_lm_ids"])
      by_name["masked_lm_loss"].update_state(nll, sample_weight=weights)
    if "sentence_order_accuracy" in by_name:
      by_name["sentence_order_accuracy"].update_state(sop_labels, sop_logits, sample_weight=valid)
    if "sentence_order_loss" in by_name:
      by_name["sentence_order_loss"].update_state(tf.nn.sparse_softmax_cross_entropy_with_logits(
          labels=sop_labels, logits=sop_logits), sample_weight=valid)
