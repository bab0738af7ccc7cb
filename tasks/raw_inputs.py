"""Fine-tuning straight from raw files: `input_path` names the data itself, the records are built and cached.

One mechanism for every fine-tuning task. The text tasks (`tasks.text`) read CSV / TSV / JSONL / CoNLL; GLUE, SQuAD
and RACE (`RawRecordsMixin`) read what `data_prep.create_finetuning_data` reads:

  GLUE   a folder (the GLUE root holding `<TASK>/`, or the task's folder) or one `.tsv` file
  SQuAD  one `.json` file (nested or flat layout, `tasks.squad.reading`)
  RACE   a folder (the one holding `RACE/`, `RACE/` itself, or one split's folder holding middle/ and high/)

Which split a folder gives, and which layout a file is read with, follows the role the caller reads the input in
(`Task.build_inputs(..., role=)`: the trainer reads train_data as "train", the evaluator validation_data as "eval"
and predict_data as "predict"): train → train, eval → dev, predict → test (GLUE `task.predict_split`, RACE
`task.predict_split`; SQuAD: training features for train, evaluation features otherwise). The path does not decide:
one GLUE folder can be both the validation and the predict input.

The records are written by `tasks.records.build_split` — the very code `create_finetuning_data` runs, so they are
byte-identical to that tool's output at the same settings — into `task.records_dir` (default
`<model_dir>/records`) as `<task>_<split>-<digest>.tf_record` + `.meta.json`, the digest and the stored key
covering the input files' sizes and SHA-256s, the SentencePiece model's SHA-256, the tokenizer settings,
max_seq_length and every family setting that changes records (doc_stride, max_query_length, the SQuAD shuffle seed,
max_qa_length, RACE levels, GLUE skip_bad_rows). Writes are atomic; building logs progress lines; a later run whose
key matches reuses the file and logs "reusing cached records". The explicit `create_finetuning_data` step stays
the way for large jobs (its output is a TFRecord path, read as before).

The SentencePiece model: `task.spm_model_file`, else `<model_dir>/spiece.model`, else the one beside
`task.init_checkpoint` (`model_directory.resolve_spm_model`). The train binary copies the one used into model_dir.
The tokenizer's keep_accents and remove_space go with the model too: model_dir's record, else (a fresh run) the
init_checkpoint folder's tokenizer_config.json (a cased, accented model converted there); `task.do_lower_case` is
always set (a record that contradicts it is logged). A training run writes the three to
`<model_dir>/tokenizer_config.json`; a model_dir recording only params.yaml's task.do_lower_case (trained from
prebuilt records) takes keep_accents / remove_space from the init folder, as its training run did. The prebuilt
records of an accented model: create_finetuning_data --keep_accents (--remove_space) as its tokenizer_config.json.
"""

from __future__ import annotations

import dataclasses
import getpass
import hashlib
import json
import logging
import os
import tempfile
from typing import Any, Callable, Dict, Iterable, Mapping, Optional, Tuple

from official_albert import file_io
from official_albert import model_directory as md
from official_albert.checkpoints.sentence_transformers_folder import finetuning_tokenizer_record
from official_albert.checkpoints.sentence_transformers_folder import model_tokenizer_options
from official_albert.checkpoints.sentence_transformers_folder import read_tokenizer_options
from official_albert.checkpoints.sentence_transformers_folder import write_tokenizer_options
from official_albert.data import records as records_lib
from official_albert.tokenization import FullTokenizer
from official_albert.tokenization import MODES as TOKENIZER_MODES
from official_albert.training import base_task
from official_albert.training.experiment_config import DataConfig
from official_albert.training.experiment_config import eval_data_config
from official_albert.training.experiment_config import FINETUNING_SHUFFLE_BUFFER
from official_albert.training.experiment_config import TaskConfig
from official_albert.training.hyperparams import ConfigError
from tasks.records import build_split
from tasks.records import split_cache_key

logger = logging.getLogger(__name__)



@dataclasses.dataclass
class RawInputTaskConfig(TaskConfig):
  """The settings a task needs to turn raw files into records (the GLUE, SQuAD, RACE and text configs inherit them).

  Attributes:
    spm_model_file: SentencePiece model; '' = `<model_dir>/spiece.model`, else the one beside `init_checkpoint`.
    do_lower_case, tokenizer_mode: FullTokenizer settings (as create_finetuning_data's flags).
    records_dir: the record cache; '' = `<model_dir>/records`.
  """
  spm_model_file: str = ""
  do_lower_case: bool = True
  tokenizer_mode: str = "hf"
  records_dir: str = ""

  def validate(self) -> None:
    """Also checks tokenizer_mode here, naming the key: the tokenizer refused it only when the records were built."""
    super().validate()
    if self.tokenizer_mode not in TOKENIZER_MODES:
      raise ConfigError(f"task.tokenizer_mode={self.tokenizer_mode!r} is not one of {TOKENIZER_MODES}.")


@dataclasses.dataclass
class RowFilesTaskConfig(RawInputTaskConfig):
  """A task trained on the user's own row files (CSV / TSV / JSONL: the text tasks and the text embedding task),
  with what reading them and their default splits share, written once.

  Attributes:
    input_format: the files' format; '' = from each file's extension.
    skip_bad_rows: skip, count and log bad rows instead of raising.
    record_shuffle_seed: the training records are written in the order of a permutation of the row positions drawn
      with this seed, so a file sorted by label trains shuffled; the same rows in another order train in another
      sequence (the same distribution, not the same batches). Negative keeps the file order.
    train_data / validation_data / predict_data: batch 32 of 128 pieces with the fine-tuning shuffle buffer;
      evaluation and prediction at 128 pieces.
  """
  input_format: str = ""
  skip_bad_rows: bool = False
  record_shuffle_seed: int = 12345
  train_data: DataConfig = dataclasses.field(default_factory=lambda: DataConfig(
      global_batch_size=32, seq_length=128, shuffle_buffer_size=FINETUNING_SHUFFLE_BUFFER))
  validation_data: DataConfig = dataclasses.field(default_factory=lambda: eval_data_config(seq_length=128))
  predict_data: DataConfig = dataclasses.field(default_factory=lambda: eval_data_config(seq_length=128))


def records_root(records_dir: str, model_dir: Optional[str]) -> str:
  """Where cached records go: `records_dir`, else `<model_dir>/records`, else this user's folder in the temp directory
  (`albert_finetuning_records-<uid>`: one shared name was created by the first user, 0755, and every other user's run
  then failed writing into it; one another user owns is refused, as its records could be anyone's).

  Raises:
    PermissionError: the folder cannot be created (a read-only model_dir), or the temp one is another user's; the
      message names the folder and task.records_dir.
  """
  user = os.getuid() if hasattr(os, "getuid") else getpass.getuser()
  shared = os.path.join(tempfile.gettempdir(), f"albert_finetuning_records-{user}")
  root = records_dir or (md.path(model_dir, md.RECORDS_DIR) if model_dir else shared)
  try:
    file_io.makedirs(root)
  except PermissionError as e:
    raise _unwritable(root, e) from e
  if root == shared and hasattr(os, "getuid") and os.stat(root).st_uid != os.getuid():
    raise PermissionError(f"{root}: the fine-tuning record cache in the temp directory belongs to another user; set "
                          "task.records_dir to a folder of yours.")
  return root


def _unwritable(root: str, error: OSError) -> PermissionError:
  """The error for a records folder this run cannot write: the OS error names a path, not the setting that moves it."""
  return PermissionError(f"{root}: cannot write the cached fine-tuning records there ({error.strerror or error}: "
                         f"{error.filename}); set task.records_dir to a writable folder.")


def cached_record_paths(root: str, stem: str, key: Mapping[str, Any]) -> Tuple[str, str, Dict[str, Any]]:
  """(record path, meta path, JSON-normalised key): `<root>/<stem>-<first 12 hex of the key's SHA-256>`.

  The key is normalised through JSON (tuples → lists) because it is compared with its copy in the `.meta.json`.
  """
  key = json.loads(json.dumps(key))
  digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:12]
  base = os.path.join(root, f"{stem}-{digest}")
  return base + ".tf_record", base + ".meta.json", key


def cached_records(root: str, stem: str, key: Mapping[str, Any],
                   build: Callable[[str, str, Dict[str, Any]], Dict[str, Any]], source: str) -> str:
  """The record file of `source` cached under `root`: reused when its key matches, else `build(...)` writes it.

  Args:
    root: the cache folder (`records_root`).
    stem: file name stem (the input's name, or `<task>_<split>`).
    key: everything that changes the records.
    build: (record path, meta path, key) -> meta; writes both files (via `official_albert.data.records`).
    source: the raw input, for the log lines.

  Returns:
    The record file's path.
  """
  record, meta_path, key = cached_record_paths(root, stem, key)
  if records_lib.cached_meta(meta_path, record, key) is not None:
    logger.info("%s: reusing cached records %s (cache key matches: same input files, tokenizer and settings).",
                source, record)
  else:
    logger.info("%s: no cached records for these settings; building %s.", source, record)
  try:
    meta = build(record, meta_path, key)
  except PermissionError as e:  # (an existing but read-only records folder; not an unreadable input file)
    if e.filename and os.path.dirname(os.path.abspath(e.filename)) == os.path.abspath(root):
      raise _unwritable(root, e) from e
    raise
  return meta.get("record_path", record)


class RawRecordsMixin:
  """Raw GLUE / SQuAD / RACE inputs for a task (put it before the task's base class; the config must be a
  `RawInputTaskConfig`). The task implements `raw_writer`; `raw_to_records` is called first in `build_inputs`."""

  def __init__(self, params, logging_dir: Optional[str] = None):
    super().__init__(params, logging_dir)
    self._raw_model_dir = logging_dir  # kept for reading where the trainer clears logging_dir (non-chief)
    self._raw_spm: Optional[str] = None
    self._raw_tokenizer = None
    self._raw_options: Optional[Dict[str, bool]] = None

  def raw_writer(self, data_config: DataConfig, role: str) -> Optional[Tuple[Any, str]]:
    """(the family's `tasks.records.RecordWriter`, split) when `data_config.input_path` is raw data, else None."""
    raise NotImplementedError

  def sentencepiece_model_file(self) -> Optional[str]:
    """The SentencePiece model this task tokenizes with (None when none is configured or found)."""
    if self._raw_spm is None:
      p = self.params
      self._raw_spm = md.resolve_spm_model(p.spm_model_file, self._raw_model_dir, p.init_checkpoint) or ""
    return self._raw_spm or None

  def raw_tokenizer_options(self) -> Dict[str, bool]:
    """`task.do_lower_case` (a setting these configs always hold, as create_finetuning_data's flag), and keep_accents
    and remove_space as model_dir records them, else — model_dir records none — task.init_checkpoint's folder
    (`model_tokenizer_options`); a do_lower_case that contradicts that record is logged (set it to the record's)."""
    if self._raw_options is None:  # (read once: the run's own tokenizer_config.json, written later, says the same)
      p = self.params
      recorded = finetuning_tokenizer_record(self._raw_model_dir, p.init_checkpoint).get("do_lower_case")
      if recorded is not None and recorded[0] != bool(p.do_lower_case):
        logger.warning("task.do_lower_case=%s, but %s records do_lower_case=%s: the texts are tokenized otherwise "
                       "than the model was trained (set task.do_lower_case=%s).", str(p.do_lower_case).lower(),
                       recorded[1], str(recorded[0]).lower(), str(recorded[0]).lower())
      self._raw_options = model_tokenizer_options(self._raw_model_dir, p.do_lower_case, p.init_checkpoint)
    return dict(self._raw_options)

  def raw_tokenizer(self, what: str):
    """The FullTokenizer of `sentencepiece_model_file()`; `what` names the input that needs it in the error."""
    if self._raw_tokenizer is None:
      spm = self.sentencepiece_model_file()
      if not spm:
        raise ValueError(f"{what}: tokenizing raw data needs a SentencePiece model: set task.spm_model_file (or put "
                         f"{md.SPM_FILE} in task.init_checkpoint's directory or in model_dir).")
      p = self.params
      tokenizer = FullTokenizer(spm, mode=p.tokenizer_mode, **self.raw_tokenizer_options())
      if tokenizer.vocab_size > p.model.vocab_size:
        raise ValueError(f"{spm} has {tokenizer.vocab_size} pieces but task.model.vocab_size is "
                         f"{p.model.vocab_size}; use the model's own SentencePiece model.")
      self._raw_tokenizer = tokenizer
    return self._raw_tokenizer

  def raw_to_records(self, data_config: DataConfig, role: Optional[str] = None) -> DataConfig:
    """`data_config` itself, or (raw input) a copy whose input_path is the cached records built from `role`'s split.

    `role`: "train" | "eval" | "predict", from the caller (`Task.build_inputs`); None: `base_task.input_role`'s
    default (train for a training config, else eval).
    """
    role = base_task.input_role(data_config, role)
    found = self.raw_writer(data_config, role)
    if found is None:
      return data_config
    writer, split = found
    path = data_config.input_path
    self.raw_tokenizer(path)  # fails early, before the input files are fingerprinted
    p = self.params
    options = self.raw_tokenizer_options()  # (keep_accents / remove_space keyed only when not the defaults)
    key = split_cache_key(writer, split, records_lib.file_sha256(self.sentencepiece_model_file()), p.do_lower_case,
                          p.tokenizer_mode, options["keep_accents"], options["remove_space"])
    if role == "train" and self.logging_dir and not read_tokenizer_options(self.logging_dir):  # (chief; kept if there)
      file_io.makedirs(self.logging_dir)
      write_tokenizer_options(self.logging_dir, options)  # what the pipelines and a resumed run read
    root = records_root(p.records_dir, self._raw_model_dir)

    def build(record, meta_path, key):
      return build_split(writer, split, record, meta_path, key, lambda: self.raw_tokenizer(path))

    record = cached_records(root, f"{writer.options.task.replace('/', '_')}_{split}", key, build, path)
    return data_config.replace(input_path=record)


def single_path(input_path: str) -> Optional[str]:
  """The one path of `input_path` (no comma list, no glob, not "dummy"), else None. A path that exists is itself even
  when its name holds `[`, `*` or `?` (`glue [v2]/`, `train [2024].tsv`), not a pattern."""
  path = (input_path or "").strip()
  if not path or path == "dummy" or "," in path:
    return None
  if any(c in path for c in "*?[") and not file_io.literal_path(path):
    return None
  return path


def refuse_raw_lists(input_path: str, extensions: Iterable[str], what: str) -> None:
  """A ValueError for a comma list or glob of `input_path` naming raw files (`extensions`) or folders: a family that
  reads one folder or one file would hand them to the TFRecord reader ("corrupted record at 0")."""
  if single_path(input_path) is not None or not (input_path or "").strip() or input_path.strip() == "dummy":
    return
  parts = [p.strip() for p in input_path.split(",") if p.strip()]
  paths = [m for p in parts for m in (file_io.glob(p) if any(c in p for c in "*?[") else [p])]
  raw = [p for p in paths if ends_with(p, extensions) or is_dir(p)]
  if raw:
    raise ValueError(f"input_path={input_path!r} names {len(raw)} raw file(s) or folder(s) (e.g. {raw[0]!r}) in a "
                     f"list or pattern; {what} reads one folder or one file as raw input (a list or pattern is of "
                     "TFRecords). Give one, or write records of several with create_finetuning_data.")


def is_dir(path: Optional[str]) -> bool:
  return bool(path) and file_io.gfile().isdir(path)


def ends_with(path: Optional[str], extensions: Iterable[str]) -> bool:
  """Whether `path`'s name ends in one of `extensions` (case-insensitive; `.tsv.gz` names a compressed TSV)."""
  return bool(path) and os.path.basename(path).lower().endswith(tuple(e.lower() for e in extensions))


def split_of(role: str, predict_split: str) -> str:
  """The release split a role reads from a folder: train → train, eval → dev, predict → the task's predict_split."""
  return {"train": "train", "eval": "dev", "predict": predict_split}[role]
