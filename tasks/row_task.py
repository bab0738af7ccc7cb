"""The skeleton the row-file tasks (`text_embedding`, `text_ranking`) share: tokenizer, record cache, input pipeline.

Both read CSV / TSV / JSONL rows (or records made earlier), tokenize them with the model's SentencePiece model, cache
the records under the text tasks' record cache (`tasks.raw_inputs`, keyed by everything that changes them; training
records in a seeded random order) and read them through the ordinary `input_pipeline`. What differs — the rows, the
record layout and the cache key's task settings — is each task's; this class holds the rest once.
"""

from __future__ import annotations

import logging
import os
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import tensorflow as tf

from official_albert import file_io
from official_albert import model_directory as md
from official_albert.checkpoints.sentence_transformers_folder import model_tokenizer_options
from official_albert.data import input_pipeline
from official_albert.data import records as records_lib
from official_albert.tokenization import FullTokenizer
from official_albert.training import base_task
from official_albert.training.experiment_config import DataConfig
from tasks import overlap
from tasks import raw_inputs
from tasks import row_files
from tasks.records import training_order
from tasks.text import data as text_data

logger = logging.getLogger(__name__)

# In every row task's cache key: changed when the row readers read a file otherwise (2: TSV cells in CSV quoting
# unquoted, a reordered header again re-keys the rows, list cells, the unread label-column check), so records built
# by an earlier reader are rebuilt, never reused.
ROW_READER = 2


class RowFileTask(base_task.Task):
  """A task trained on rows of CSV / TSV / JSONL files. Subclasses set `row_noun` and `overlap_fields`, implement
  `record_path` (through `cached_records`) and `role_feature_spec`, and read rows with `read(data_config, role=...)`
  (`training_rows`)."""

  row_noun = "rows"  # what one row is, for the empty-input error (e.g. "pairs")
  # The fields of a row (its example's) that make its model input: an evaluation row whose fields a training row
  # holds is counted and warned about (`warn_training_rows`); () = not compared.
  overlap_fields: Tuple[str, ...] = ()

  def __init__(self, params, logging_dir: Optional[str] = None):
    super().__init__(params, logging_dir)
    self._model_dir = logging_dir  # kept for reading where the trainer clears logging_dir (non-chief)
    self._spm: Optional[str] = None
    self._tokenizer = None
    self._tokenizer_options: Optional[Dict[str, bool]] = None

  # --------------------------------------------------------------------------------------------- tokenizer
  def sentencepiece_model_file(self) -> Optional[str]:
    """The SentencePiece model used (the train binary copies it to model_dir), None when none is found."""
    if self._spm is None:
      p = self.params
      self._spm = md.resolve_spm_model(p.spm_model_file, self._model_dir, p.init_checkpoint) or ""
    return self._spm or None

  def tokenizer_options(self) -> Dict[str, bool]:
    """The tokenizer's do_lower_case (the resolved `task.do_lower_case`), keep_accents and remove_space (as model_dir
    records them, else task.init_checkpoint's folder: `model_tokenizer_options`)."""
    if self._tokenizer_options is None:  # (read once: the run's own record, written later, says the same)
      p = self.params
      self._tokenizer_options = model_tokenizer_options(self._model_dir, p.do_lower_case, p.init_checkpoint)
    return dict(self._tokenizer_options)

  def comparison_options(self) -> Dict[str, object]:
    """`tokenizer_options`, the run's tokenizer_mode and SentencePiece model: what `comparison_text` needs to tell
    whether two texts are one model input (the reference modes keep special tokens and quotes as written; the model's
    own normalisation rule, which need not be nmt_nfkc, decides which characters are one)."""
    model = self.sentencepiece_model_file() or ""
    return {**self.tokenizer_options(), "tokenizer_mode": self.params.tokenizer_mode, "spm_model_file": model,
            "spm_model_version": file_io.local_file_version(model)}

  @property
  def tokenizer(self) -> FullTokenizer:
    if self._tokenizer is None:
      spm = self.sentencepiece_model_file()
      if not spm:
        raise ValueError(f"{self.name}: no SentencePiece model to tokenize raw files: set task.spm_model_file (or put "
                         f"{md.SPM_FILE} in task.init_checkpoint's directory or in model_dir).")
      self._tokenizer = FullTokenizer(spm, mode=self.params.tokenizer_mode, **self.tokenizer_options())
      if self._tokenizer.vocab_size > self.params.model.vocab_size:
        raise ValueError(f"{spm} has {self._tokenizer.vocab_size} pieces but task.model.vocab_size is "
                         f"{self.params.model.vocab_size}; use the model's own SentencePiece model.")
    return self._tokenizer

  # --------------------------------------------------------------------------------------------- records
  def order_seed(self, role: str) -> Optional[int]:
    """The seed of the training records' order; None (file order) for evaluation or record_shuffle_seed < 0."""
    seed = self.params.record_shuffle_seed
    return seed if role == "train" and seed >= 0 else None

  def record_key(self, data_config: DataConfig, files: Sequence[str]) -> Dict[str, Any]:
    """The cache key's part every row task has (the task adds its columns and settings)."""
    p = self.params
    _ = self.tokenizer  # (built first: it raises naming the fix when there is no SentencePiece model)
    return {"task": self.name, "row_reader": ROW_READER, "seq_length": data_config.seq_length,
            **self.tokenizer_options(), "tokenizer_mode": p.tokenizer_mode,
            "spm_sha256": records_lib.file_sha256(self.sentencepiece_model_file()),
            "inputs": records_lib.input_fingerprint(files)}

  def cached_records(self, data_config: DataConfig, role: str, key: Dict[str, Any], read: Callable[[], List[Any]],
                     make_records: Callable[[List[Any], List[int]], Any]) -> str:
    """The cached records of `data_config`'s raw files, built now when `key` does not match.

    Args:
      data_config: the files.
      role: train | eval (the file stem's suffix; train records come in `order_seed`'s order).
      key: the cache key (`record_key` plus the task's settings).
      read: () -> the examples, in file order.
      make_records: (ordered examples, their file indices) -> the records.
    """
    p = self.params
    files = text_data.expand_paths(data_config.input_path)
    order_seed = self.order_seed(role)
    stem = row_files.file_stem(files[0])

    def write(record, meta_path, key):
      def build():
        examples = read()
        if not examples:
          raise ValueError(f"{data_config.input_path}: no {self.row_noun} left to train or evaluate on.")
        if role == "eval":
          self.warn_training_rows(data_config, examples)
        indices = training_order(list(range(len(examples))), "train" if order_seed is not None else "eval",
                                 order_seed)
        return (make_records([examples[i] for i in indices], indices),
                {"task": self.name, "num_examples": len(examples)})
      return records_lib.build_or_reuse(record, meta_path, key, build)

    root = raw_inputs.records_root(p.records_dir, self._model_dir)
    return raw_inputs.cached_records(root, f"{stem}-{role}", key, write, data_config.input_path)

  def training_rows(self) -> List[Any]:
    """The training files' rows, for `warn_training_rows`: read as evaluation reads its rows (no training-only
    warnings twice)."""
    return self.read(self.params.train_data, role="eval")

  def warn_training_rows(self, data_config: DataConfig, examples: Sequence[Any]) -> int:
    """Counts and warns about the evaluation rows `examples` (of `data_config`'s raw files) that are training rows,
    compared as the tokenizer sees them (`tasks.overlap`), when task.train_data names other raw files; returns the
    count. A warning, never an error: a dev set may share some texts with training on purpose."""
    p = self.params
    train = p.train_data.input_path
    if not self.overlap_fields or not train:
      return 0
    try:  # (a training input that cannot be read now is not this evaluation read's error)
      if not (text_data.is_raw_input(train, p.input_format) and
              text_data.is_raw_input(data_config.input_path, p.input_format)):
        return 0  # (records made earlier, or a BEIR folder: no rows to compare)
      real = [sorted(map(os.path.realpath, text_data.expand_paths(path))) for path in (train, data_config.input_path)]
      if real[0] == real[1]:
        logger.warning("The evaluation input is the training input (%s): its scores are not held-out scores.", train)
        return 0
      training = self.training_rows()
    except (OSError, ValueError) as e:
      logger.info("Evaluation rows not compared with the training rows (%s): %s", train, e)
      return 0
    options = self.comparison_options()
    return overlap.warn_training_rows(examples, training,
                                      lambda example: overlap.row_key(example, self.overlap_fields, options))

  def reads_raw_input(self, data_config: DataConfig) -> bool:
    """Whether `data_config` names raw files that `record_path` turns into records (else: records made earlier)."""
    return text_data.is_raw_input(data_config.input_path, self.params.input_format)

  def record_path(self, data_config: DataConfig, role: str) -> str:
    raise NotImplementedError

  def role_feature_spec(self, data_config: DataConfig, role: str) -> Dict[str, tf.io.FixedLenFeature]:
    """The records' features for `role`."""
    raise NotImplementedError

  # --------------------------------------------------------------------------------------------- inputs
  def build_inputs(self, data_config: DataConfig, input_context: Optional[tf.distribute.InputContext] = None,
                   role: Optional[str] = None) -> tf.data.Dataset:
    role = base_task.input_role(data_config, role)
    if not data_config.input_path:
      raise ValueError(f"{self.name}: empty input_path (set task.train_data.input_path / "
                       f"task.validation_data.input_path to CSV / TSV / JSONL files of {self.row_noun}).")
    path = data_config.input_path
    spec = self.role_feature_spec(data_config, role)
    if self.reads_raw_input(data_config):
      path = self.record_path(data_config, role)
    else:
      input_pipeline.check_first_record(path, spec, f"point the input_path at the CSV / TSV / JSONL files (the task "
                                        f"writes its records), or give records the {self.name} task wrote at this "
                                        f"seq_length ({data_config.seq_length}).")
    batch_size = data_config.global_batch_size
    if input_context is not None:
      batch_size = input_context.get_per_replica_batch_size(batch_size)
    return input_pipeline.make_dataset(
        path, lambda records: input_pipeline.decode_record(records, spec), batch_size, data_config.is_training,
        input_context=input_context, seed=data_config.seed, shuffle_buffer_size=max(data_config.shuffle_buffer_size, 1),
        drop_remainder=data_config.drop_remainder)
