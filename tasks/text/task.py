"""The generic text tasks: `text_classification`, `text_regression`, `token_classification`, from raw files.

`task.train_data.input_path` (and validation / predict) may name CSV / TSV / JSONL / CoNLL files (comma-separated,
globs allowed; see `tasks.text.data`) or TFRecords already made. Raw files are turned into records on first use and
cached in `task.records_dir` (default `<model_dir>/records`): `<stem>-<digest>.tf_record` + `.meta.json`, reused only
while the cache key matches (`tasks.raw_inputs`, the mechanism GLUE / SQuAD / RACE raw inputs share: the files'
sizes and mtimes, the SentencePiece model's SHA-256, the tokenizer settings, seq_length, the columns and the label
set), as `create_finetuning_data` does.

The label set is read from the training file (sorted; or fixed by `task.labels`) and saved with the model as
`<model_dir>/labels.json`, together with whether it is multi-label and its `multi_label_threshold`, and the input
columns of training (`columns`: text_column, text_pair_column, label_column, input_format; token classification also
the CoNLL columns, multi-label the label separator); the tokenizer's options (do_lower_case, keep_accents,
remove_space: where model_dir records none, task.init_checkpoint's folder's, as the SentencePiece model) go to
`<model_dir>/tokenizer_config.json` and the train binary copies the SentencePiece model to `<model_dir>/spiece.model`.
Evaluation, `--mode=predict` and `export_saved_model` read them from there, so predict needs neither the training
file, `spm_model_file`, `multi_label`, the threshold, `do_lower_case` nor the column settings again. Those settings
default to None, "not set": an unset one takes the model directory's value (else the default the config documents);
one set explicitly wins, even when it is the default (`task.text_column=text` reads `text` from a model trained on
`body`), except where the model cannot follow: `task.multi_label` against the kind labels.json records, and
`task.labels` in another order than labels.json's, are errors. A training run in a model_dir that already holds
labels.json (a resumed run) must find the same label set in its training file: a class added or gone would change
the size of the classifier the checkpoints hold, so it is an error naming both sets (train in a new model_dir).
A label in an evaluation file that training did not see is an error naming file:line (or, with
`task.skip_bad_rows=true`, a counted, logged skip). At predict time the label column is not read at all, so it may
hold anything (an unseen label included).

`--mode=predict` writes `<model_dir>/predictions/<input stem>.predictions.<ext>` per input file, in the input's
format unless `task.predict_output_format` says otherwise: the row's id (`task.id_column`, else the line number),
its text (and pair), the predicted label string (multi-label: the labels whose probability is ≥ the threshold,
`task.multi_label_threshold` else labels.json's; regression: the score) and the probabilities (`score`, and
`scores` per label / `score_<label>` columns). Token classification writes one tag per word (JSONL `tokens` /
`tags` / `scores`, or CoNLL `token<TAB>tag`) for every word: a sentence longer than seq_length is predicted in
sub-sentences joined back (`tasks.text.data`), a word with no SentencePiece piece as `<unk>`.

Long because: the three text tasks differ in a few methods of one class (labels, loss, metrics, prediction files), and
the raw-file caching it shares with GLUE / SQuAD / RACE is here so that one file shows what `--experiment=text_*`
does with its files (the configs are in tasks/text/config.py)."""

from __future__ import annotations

import dataclasses
import logging
from typing import Any, Dict, List, Optional

import keras
import numpy as np
import tensorflow as tf

from official_albert import file_io
from official_albert import model_directory
from official_albert.checkpoints.sentence_transformers_folder import finetuning_tokenizer_record
from official_albert.checkpoints.sentence_transformers_folder import model_tokenizer_options
from official_albert.checkpoints.sentence_transformers_folder import read_tokenizer_options
from official_albert.checkpoints.sentence_transformers_folder import TOKENIZER_DEFAULTS
from official_albert.checkpoints.sentence_transformers_folder import write_tokenizer_options
from official_albert.data import records as records_lib
from official_albert.modeling import models
from official_albert.tokenization import FullTokenizer
from official_albert.training import base_task
from official_albert.training.experiment_config import ConfigError
from official_albert.training.experiment_config import DataConfig
from tasks import raw_inputs
from tasks import row_files
from tasks.classification import ClassificationTask
from tasks.metrics import accuracy
from tasks.metrics import pearson
from tasks.metrics import spearman
from tasks.records import training_order
from tasks.text import data as text_data
from tasks.text import metrics as text_metrics
from tasks.text import predictions as text_predictions
from tasks.text.config import check_label_count
from tasks.text.config import LABELS_FILE
from tasks.text.config import SPM_FILE
from tasks.text.config import TextClassificationConfig
from tasks.text.config import TextRegressionConfig
from tasks.text.config import TextTaskConfig
from tasks.text.config import TokenClassificationConfig  # noqa: F401  (importable from here, as before)
from tasks.text.label_names import check_saved_labels

logger = logging.getLogger(__name__)


class TextTask(ClassificationTask):
  """What the three text tasks share: labels, tokenizer, raw files → cached records, prediction files."""

  label_kind = "class"

  def __init__(self, params: TextTaskConfig, logging_dir: Optional[str] = None):
    super().__init__(params, logging_dir)
    self._model_dir = logging_dir  # kept for reading even where the trainer clears logging_dir (non-chief)
    self._labels: Optional[List[str]] = None
    self._tokenizer = None
    self._spm: Optional[str] = None
    self._columns: Optional[Dict[str, Any]] = None
    self._tokenizer_options: Optional[Dict[str, bool]] = None
    self._threshold: Optional[float] = None
    self._checked_training_labels: Optional[str] = None  # the training input whose label set matched labels.json

  # --------------------------------------------------------------------------------------------- options
  def _saved(self) -> Optional[model_directory.LabelFile]:
    """model_dir's labels.json (None when there is none)."""
    return model_directory.read_label_file(self._model_dir) if self._model_dir else None

  def columns(self) -> Dict[str, Any]:
    """The reading settings: each one the run sets (None = not set, so that setting a column back to its default
    wins too), else the one saved with the model, else the default — so predict on a new file needs no
    `task.text_column` again."""
    if self._columns is None:
      p, saved = self.params, (self._saved() or model_directory.LabelFile([])).columns
      self._columns = {}
      for name, default in p.column_defaults().items():
        value = getattr(p, name)
        if value is None:
          value = saved.get(name, default)
          if value != default:
            logger.info("%s: task.%s=%r from %s (set task.%s to read another).", self.name, name, value,
                        model_directory.path(self._model_dir, LABELS_FILE), name)
        self._columns[name] = value
    return self._columns

  def read_options(self, with_labels: bool, labels=()) -> text_data.ReadOptions:
    p, c = self.params, self.columns()
    return text_data.ReadOptions(
        text_column=c["text_column"], text_pair_column=c["text_pair_column"], label_column=c["label_column"],
        id_column=p.id_column, input_format=c["input_format"], with_labels=with_labels, label_kind=self.label_kind,
        label_separator=c.get("label_separator", "|"), labels=tuple(labels), skip_bad_rows=p.skip_bad_rows,
        conll_token_column=c.get("conll_token_column", 0), conll_tag_column=c.get("conll_tag_column", -1),
        comparison={**self.tokenizer_options, "tokenizer_mode": p.tokenizer_mode})  # (how repeated texts compare)

  # --------------------------------------------------------------------------------------------- labels
  @property
  def labels(self) -> List[str]:
    """The label strings in output order (empty for regression)."""
    if self._labels is None:
      self._labels = self._resolve_labels()
    return self._labels

  def _resolve_labels(self) -> List[str]:
    """labels.json's in a trained model_dir (it names the classifier's outputs: `task.labels` in another order
    would swap the predicted names, so that is an error), else `task.labels`, else the training file's."""
    if self.label_kind == "float":
      return []
    p = self.params
    saved = self._saved()
    if saved is not None:
      check_saved_labels(self._model_dir, saved.labels)
      if p.labels and list(map(text_data.label_text, p.labels)) != list(map(text_data.label_text, saved.labels)):
        raise ConfigError(
            f"task.labels={list(p.labels)} but {model_directory.path(self._model_dir, LABELS_FILE)} names the "
            f"outputs of the classifier in {self._model_dir} as {saved.labels}: output i is the file's label i, so "
            "other names or another order would give rows the wrong labels. Drop task.labels (the model's are "
            "read from the file), or give them in the file's order; to train other labels, use a new model_dir.")
      return check_label_count(list(saved.labels), self.label_kind, model_directory.path(self._model_dir, LABELS_FILE))
    if p.labels:
      return check_label_count(list(p.labels), self.label_kind, f"task.labels={list(p.labels)}")
    path = p.train_data.input_path
    if not text_data.is_raw_input(path, self.columns()["input_format"]):
      raise ValueError(f"{self.name}: no label set (no {LABELS_FILE} in {self._model_dir}) — set task.labels, or "
                       f"train from a raw file named {sorted(row_files.EXTENSIONS)} (or task.input_format="
                       f"{'|'.join(row_files.FORMATS)}) at task.train_data.input_path: its labels are read.")
    examples = text_data.read_examples(text_data.expand_paths(path), self.read_options(True))
    labels = check_label_count(text_data.label_set(examples), self.label_kind,
                               f"{path}: column {self.columns()['label_column']!r} (task.label_column)")
    logger.info("%s: %d labels from %s: %s", self.name, len(labels), path, labels[:20])
    text_metrics.warn_untyped_tags(f"{self.name}: the tags of {path}", labels if self.label_kind == "tags" else [])
    return labels

  def _check_training_labels(self, data_config: DataConfig) -> None:
    """A training file read in a model_dir that holds labels.json (of an earlier run there: this one resumes it)
    must have no label that file lacks: the labels come from the training data, and a class added would change the
    size of the classifier its checkpoints hold (it raised "label X was not seen in training" for a label that was,
    or skipped those rows with skip_bad_rows). A fixed `task.labels` is exempt (it is the label set: rows with other
    labels are bad rows)."""
    saved = self._saved()
    path = data_config.input_path
    if (self.label_kind == "float" or saved is None or self.params.labels or not data_config.is_training
        or self._checked_training_labels == path):
      return
    found = text_data.label_set(text_data.read_examples(text_data.expand_paths(path), self.read_options(True)))
    added = text_data.unknown_labels(found, saved.labels)  # (each as rows are looked up: '1' finds '1.0')
    if added:  # (a label of the file missing from these rows is fine: the classifier keeps its output)
      labels_file = model_directory.path(self._model_dir, LABELS_FILE)
      raise ValueError(
          f"{path}: the training file has labels {added[:10]} that {labels_file} {saved.labels[:20]}, written by an "
          f"earlier run in {self._model_dir}, does not. The classifier of that run has {len(saved.labels)} outputs, "
          "one per label of the file, so this run cannot resume it with more: train in a new --model_dir, or delete "
          f"{labels_file} and the checkpoints in {self._model_dir} to start over.")
    self._checked_training_labels = path

  @property
  def num_outputs(self) -> int:
    return 1 if self.label_kind == "float" else len(self.labels)

  @property
  def multi_label_threshold(self) -> float:
    """The probability at which a multi-label model predicts a label: `task.multi_label_threshold` when set, else
    the one labels.json saved (the training run's, which `pipelines.classify` and the exports use too), else 0.5."""
    if self._threshold is None:
      explicit = getattr(self.params, "multi_label_threshold", None)
      saved = self._saved()
      if explicit is not None:
        self._threshold = float(explicit)
      elif saved is not None and saved.multi_label:
        self._threshold = saved.threshold
      else:
        self._threshold = model_directory.MULTI_LABEL_THRESHOLD
    return self._threshold

  def save_assets(self) -> None:
    """`labels.json` (label set, multi-label threshold, the columns read) and `tokenizer_config.json`
    (`tokenizer_options`) into model_dir, with the labels.json of the run that first trained there (chief only; existing
    files are kept: a later run — predict, with its own overrides — does not rewrite the training run's record). The
    train binary copies the SentencePiece model (`sentencepiece_model_file`) beside them."""
    if not self.logging_dir:
      return
    file_io.makedirs(self.logging_dir)
    if not read_tokenizer_options(self.logging_dir):  # (also beside an earlier version's labels.json: it had none)
      write_tokenizer_options(self.logging_dir, self.tokenizer_options)
    if not file_io.exists(model_directory.path(self.logging_dir, LABELS_FILE)):
      multi = self.label_kind == "multi"  # (the threshold is what the exports and `pipelines.classify` predict at)
      model_directory.write_label_file(self.logging_dir, model_directory.LabelFile(
          self.labels, multi, self.multi_label_threshold if multi else model_directory.MULTI_LABEL_THRESHOLD,
          self.columns(), self.name))

  # --------------------------------------------------------------------------------------------- tokenizer
  def sentencepiece_model_file(self) -> Optional[str]:
    """The SentencePiece model used (the train binary copies it to model_dir), None when none is found."""
    return self.spm_model_file(required=False)

  def spm_model_file(self, required: bool = True) -> Optional[str]:
    if self._spm is None:
      p = self.params
      self._spm = model_directory.resolve_spm_model(p.spm_model_file, self._model_dir, p.init_checkpoint) or ""
    if not self._spm and required:
      raise ValueError(f"{self.name}: no SentencePiece model to tokenize raw files: set task.spm_model_file (or put "
                       f"{SPM_FILE} in task.init_checkpoint's directory or in model_dir).")
    return self._spm or None

  @property
  def tokenizer_options(self) -> Dict[str, bool]:
    """do_lower_case, keep_accents, remove_space as the model was trained: model_dir's record (tokenizer_config.json,
    which training writes, else params.yaml), else — a run whose model_dir records none — task.init_checkpoint's
    folder's (a cased model converted there is fine-tuned cased), else FullTokenizer's defaults; `task.do_lower_case`
    when set wins (with a warning against a record). Tokenizing otherwise than training did gives the model pieces
    it never saw (a cased model read lower-cased)."""
    if self._tokenizer_options is None:
      explicit, p = self.params.do_lower_case, self.params
      record = finetuning_tokenizer_record(self._model_dir, p.init_checkpoint)
      options = model_tokenizer_options(self._model_dir, explicit, p.init_checkpoint)
      recorded, source = record.get("do_lower_case", (None, ""))
      if explicit is not None and recorded is not None and recorded != explicit:
        logger.warning("%s: task.do_lower_case=%s, but the model was trained with do_lower_case=%s (%s): texts are "
                       "tokenized otherwise than in training.", self.name, str(explicit).lower(),
                       str(recorded).lower(), source)
      elif explicit is None and options != TOKENIZER_DEFAULTS:
        logger.info("%s: tokenizer %s, as the model was trained (%s; set task.do_lower_case to override).",
                    self.name, options, sorted({file for _, file in record.values()}))
      self._tokenizer_options = options
    return dict(self._tokenizer_options)

  @property
  def do_lower_case(self) -> bool:
    """The tokenizer's do_lower_case (`tokenizer_options`)."""
    return self.tokenizer_options["do_lower_case"]

  @property
  def tokenizer(self):
    if self._tokenizer is None:
      self._tokenizer = FullTokenizer(self.spm_model_file(), mode=self.params.tokenizer_mode, **self.tokenizer_options)
      if self._tokenizer.vocab_size > self.params.model.vocab_size:
        raise ValueError(f"{self._spm} has {self._tokenizer.vocab_size} pieces but task.model.vocab_size is "
                         f"{self.params.model.vocab_size}; use the model's own SentencePiece model.")
    return self._tokenizer

  # --------------------------------------------------------------------------------------------- model
  def build_model(self) -> keras.Model:
    if self.label_kind == "tags":
      model = models.AlbertTokenClassifier(self.params.model.to_albert_config(), num_labels=self.num_outputs,
                                           dropout_rate=self.params.classifier_dropout)
    else:
      model = models.AlbertClassifier(self.params.model.to_albert_config(), num_labels=self.num_outputs,
                                      dropout_rate=self.params.classifier_dropout, exit_heads=self.params.exit_heads)
    seq = max(self.params.train_data.seq_length, 2)
    model({k: tf.zeros([1, seq], tf.int32) for k in base_task.ENCODER_INPUT_KEYS}, training=False)
    if self.label_kind == "tags":
      # The tagger never reads the pooled output: frozen, it gets no (missing) gradient and keeps its weights.
      model.encoder.pooler.trainable = False
    self.save_assets()
    return model

  @property
  def is_regression(self) -> bool:
    return self.label_kind == "float"

  def feature_spec(self, seq_length: int):
    spec = {k: tf.io.FixedLenFeature([seq_length], tf.int64) for k in base_task.ENCODER_INPUT_KEYS}
    if self.label_kind == "tags":  # (the sentence ids are -1 in records made before long sentences were split)
      spec.update({k: tf.io.FixedLenFeature([seq_length], tf.int64) for k in ("label_ids", "word_starts")})
      spec.update({k: tf.io.FixedLenFeature([], tf.int64, -1) for k in ("sentence_id", "sub_sentence_id")})
    elif self.label_kind == "multi":
      spec["label_ids"] = tf.io.FixedLenFeature([self.num_outputs], tf.float32)
    else:
      spec["label_ids"] = tf.io.FixedLenFeature([], tf.float32 if self.is_regression else tf.int64)
    return spec

  # --------------------------------------------------------------------------------------------- raw inputs
  def _is_predict_only(self, input_path: str) -> bool:
    p = self.params
    return input_path == p.predict_data.input_path and input_path not in (p.validation_data.input_path,
                                                                          p.train_data.input_path)

  def record_path(self, data_config: DataConfig) -> str:
    """The cached records of `data_config`'s raw files (built now when the cache key does not match)."""
    p = self.params
    files = text_data.expand_paths(data_config.input_path)
    with_labels = not self._is_predict_only(data_config.input_path)
    options = self.read_options(with_labels, self.labels if with_labels else ())
    order_seed = p.record_shuffle_seed if data_config.is_training and p.record_shuffle_seed >= 0 else None
    key = {"task": self.name, "seq_length": data_config.seq_length, **self.tokenizer_options,
           "tokenizer_mode": p.tokenizer_mode, "spm_sha256": records_lib.file_sha256(self.spm_model_file()),
           "inputs": records_lib.input_fingerprint(files), "options": dataclasses.asdict(options),
           "labels": self.labels, "record_shuffle_seed": order_seed, "empty_pair": "one_segment",
           **({"long_sentences": "sub_sentences", "pieceless_words": "unk"} if self.label_kind == "tags" else {})}
    stem = row_files.file_stem(files[0])

    def write(record, meta_path, key):
      def build():  # (records reused from the cache were checked when they were built)
        self._check_training_labels(data_config)
        logger.info("Building records of %s (seq_length %d) into %s ...", ", ".join(files), data_config.seq_length,
                    record)
        examples = text_data.read_examples(files, options, "" if data_config.is_training else p.train_data.input_path)
        if not examples:
          raise ValueError(f"{data_config.input_path}: no examples left to train or evaluate on.")
        examples = training_order(examples, "train" if order_seed is not None else "eval", order_seed)
        return (text_data.records(examples, self.tokenizer, data_config.seq_length, self.label_kind, self.labels),
                {"task": self.name, "num_examples": len(examples), "labels": self.labels})
      return records_lib.build_or_reuse(record, meta_path, key, build)

    root = raw_inputs.records_root(p.records_dir, self._model_dir)
    return raw_inputs.cached_records(root, stem, key, write, data_config.input_path)

  def _record_training_threshold(self) -> None:
    """A training run that sets `task.multi_label_threshold` in a directory whose labels.json (an earlier run's:
    this one resumes it) holds another records the new one, which predict, the pipelines and the exports then use
    (save_assets keeps an existing file, so the first run's threshold stayed). Chief only; predict runs never
    rewrite it."""
    explicit, saved = getattr(self.params, "multi_label_threshold", None), self._saved()
    if (not self.logging_dir or explicit is None or saved is None or not saved.multi_label
        or float(explicit) == saved.threshold):
      return
    logger.info("%s: task.multi_label_threshold=%s replaces %s in %s.", self.name, explicit, saved.threshold,
                model_directory.path(self.logging_dir, LABELS_FILE))
    model_directory.write_label_file(self.logging_dir, dataclasses.replace(saved, threshold=float(explicit)))

  def build_inputs(self, data_config: DataConfig, input_context: Optional[tf.distribute.InputContext] = None,
                   role: Optional[str] = None) -> tf.data.Dataset:
    if data_config.is_training:
      self._record_training_threshold()
    if text_data.is_raw_input(data_config.input_path, self.columns()["input_format"]):
      data_config = data_config.replace(input_path=self.record_path(data_config))
    return super().build_inputs(data_config, input_context, role)

  # --------------------------------------------------------------------------------------------- loss, metrics
  def example_losses(self, logits, label_ids):
    if self.label_kind == "multi":
      per_label = tf.nn.sigmoid_cross_entropy_with_logits(labels=tf.cast(label_ids, tf.float32),
                                                          logits=tf.cast(logits, tf.float32))
      return tf.reduce_mean(per_label, axis=-1)
    return super().example_losses(logits, label_ids)

  def build_metrics(self, training: bool = True) -> List[keras.metrics.Metric]:
    metrics = [] if training else [keras.metrics.Mean(name="eval_loss")]
    if self.label_kind == "multi":
      # (the training logs' running value, at the model's threshold; the eval's label_accuracy is computed over
      # the whole set with the predictions' >= rule, multi_label_scores)
      metrics.append(keras.metrics.BinaryAccuracy(name="label_accuracy", threshold=self.multi_label_threshold))
    elif self.label_kind == "class":
      metrics.append(keras.metrics.SparseCategoricalAccuracy(name="cls_accuracy"))
    return metrics

  def process_metrics(self, metrics, labels, model_outputs) -> None:
    logits = tf.cast(model_outputs["logits"], tf.float32)
    valid = base_task.example_weights(labels, logits)
    for metric in metrics:
      if metric.name == "eval_loss":
        metric.update_state(self.example_losses(logits, labels["label_ids"]), sample_weight=valid)
      elif metric.name == "label_accuracy":
        metric.update_state(labels["label_ids"], tf.sigmoid(logits), sample_weight=valid[:, None])
      elif metric.name == "cls_accuracy":
        metric.update_state(tf.reshape(labels["label_ids"], [-1]), logits, sample_weight=valid)

  def compute_metrics(self, logits, labels, extras) -> Dict[str, float]:
    del extras
    if self.is_regression:
      preds, gold = logits.reshape(-1).astype(np.float64), labels.astype(np.float64)
      return {"pearson": pearson(preds, gold), "spearman": spearman(preds, gold),
              "mse": float(np.mean((preds - gold) ** 2)) if gold.size else 0.0}
    if self.label_kind == "multi":
      return text_metrics.multi_label_scores(labels, self.probabilities(logits) >= self.multi_label_threshold)
    preds = np.argmax(logits, axis=-1)
    return {"eval_accuracy": accuracy(labels, preds),
            "macro_f1": text_metrics.macro_f1(labels, preds, self.num_outputs)}

  def compute_metric_names(self) -> List[str]:
    """`compute_metrics`' keys for this kind of label."""
    return (["pearson", "spearman", "mse"] if self.is_regression else ["micro_f1", "subset_accuracy", "label_accuracy"]
            if self.label_kind == "multi" else ["eval_accuracy", "macro_f1"])

  def probabilities(self, logits: np.ndarray) -> np.ndarray:
    logits = np.asarray(logits, np.float64)
    if self.label_kind == "multi":
      return 1.0 / (1.0 + np.exp(-logits))
    shifted = np.exp(logits - logits.max(axis=-1, keepdims=True))
    return shifted / shifted.sum(axis=-1, keepdims=True)

  # --------------------------------------------------------------------------------------------- predict
  def predict_examples(self) -> List[text_data.TextExample]:
    data = self.params.predict_data
    if not text_data.is_raw_input(data.input_path, self.columns()["input_format"]):
      raise ValueError(f"{self.name}: --mode=predict writes rows next to their text, so task.predict_data."
                       f"input_path must name the raw files (got {data.input_path!r}).")
    return text_data.read_examples(text_data.expand_paths(data.input_path),
                                   self.read_options(not self._is_predict_only(data.input_path), self.labels))

  def write_prediction_files(self, aggregated_logs, output_dir: str) -> Dict[str, str]:
    logits = np.concatenate(aggregated_logs["logits"], axis=0)
    examples = self.predict_examples()
    if len(examples) != len(logits):
      raise ValueError(f"{len(logits)} predictions for {len(examples)} examples of "
                       f"{self.params.predict_data.input_path}; the records are stale — delete task.records_dir.")
    probs = self.probabilities(logits)
    def rows():  # (one at a time, as written: a list held every row's dict of all the labels' scores at once)
      for e, logit, prob in zip(examples, logits, probs):
        row = {"id": e.guid, "text": e.text}
        if self.columns()["text_pair_column"]:
          row["text_pair"] = e.text_pair
        if self.is_regression:
          row["prediction"] = float(logit.reshape(-1)[0])
        elif self.label_kind == "multi":
          row["prediction"] = [lab for lab, q in zip(self.labels, prob) if q >= self.multi_label_threshold]
          row["scores"] = {lab: float(q) for lab, q in zip(self.labels, prob)}
        else:
          row["prediction"] = self.labels[int(np.argmax(prob))]
          row["score"] = float(np.max(prob))
          row["scores"] = {lab: float(q) for lab, q in zip(self.labels, prob)}
        yield row
    return text_predictions.write_rows(examples, rows(), output_dir, self.columns()["input_format"],
                                       self.params.predict_output_format, self.columns().get("label_separator", "|"))


@base_task.register_task("text_classification", config_cls=TextClassificationConfig)
class TextClassificationTask(TextTask):
  """Single texts or pairs → one of the training file's labels (or several, `task.multi_label=true`)."""

  best_metric = "eval_accuracy"

  def __init__(self, params: TextClassificationConfig, logging_dir: Optional[str] = None):
    super().__init__(params, logging_dir)
    if self._multi_label(params.multi_label, self._saved()):
      self.label_kind = "multi"
      self.best_metric = "micro_f1"

  def _multi_label(self, explicit: Optional[bool], saved: Optional[model_directory.LabelFile]) -> bool:
    """`task.multi_label` when set, else what labels.json records: a multi-label model predicted without the setting
    repeated gave softmax answers over its sigmoid labels. A setting that contradicts the file is an error: the
    head was trained as one or the other."""
    if saved is None or not saved.labels:
      return bool(explicit)
    if explicit is None:
      if saved.multi_label:
        logger.info("%s: multi_label=true from %s.", self.name, model_directory.path(self._model_dir, LABELS_FILE))
      return saved.multi_label
    if explicit != saved.multi_label:
      kind = "multi-label (one sigmoid per label)" if saved.multi_label else "single-label (one softmax)"
      raise ConfigError(
          f"task.multi_label={str(explicit).lower()}, but {model_directory.path(self._model_dir, LABELS_FILE)} "
          f"says the classifier in {self._model_dir} is {kind}. Drop task.multi_label (the model's kind is read "
          f"from that file), or train a {'multi' if explicit else 'single'}-label model in a new model_dir.")
    return explicit


@base_task.register_task("text_regression", config_cls=TextRegressionConfig)
class TextRegressionTask(TextTask):
  """Single texts or pairs → one score (`AlbertClassifier` with one output, MSE)."""

  label_kind = "float"
  best_metric = "pearson"
