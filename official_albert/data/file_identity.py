"""What identifies the files of an input path: by their names (`train_files_digest`) and by their bytes
(`content_digest`).

A training run's input positions index the file list they were taken over, and the checkpoints beside them were
trained on those files' contents; the best checkpoint was chosen on one evaluation input. A path says where data is,
not what it holds: a CSV corrected in place (labels flipped, rows added) keeps its path, and was resumed, or ranked
against, as the same data.
"""

from __future__ import annotations

import hashlib
import os
from typing import Dict, List, Mapping, Optional

from official_albert import file_io
from official_albert.data import input_pipeline
from official_albert.data import records

# An input up to FULL_HASH_TOTAL bytes (and a raw text file at any size) is hashed whole; the files of a larger one by
# their size and first and last STAMP_BYTES (`content_digest`).
FULL_HASH_TOTAL = 256 << 20
STAMP_BYTES = 64 << 10
RAW_TEXT_SUFFIXES = tuple(f"{kind}{gz}" for kind in (".csv", ".tsv", ".jsonl", ".json", ".txt", ".conll")
                          for gz in ("", ".gz"))
TRAIN_FILES_KEY = "train_files_sha256"  # of topology.json: the training files the input positions index
TRAIN_CONTENT_KEY = "train_files_content"  # of topology.json: those files' bytes
VALIDATION_CONTENT_KEY = "validation_content"  # of best_checkpoint.json's chosen_on: the evaluation input's bytes


def train_files_digest(input_path) -> Optional[str]:
  """sha256 of the sorted, resolved training files (`input_pipeline.list_files`, absolute); None when the path
  names no files (the synthetic `dummy` input; a missing file fails in the input pipeline, with its own message)."""
  try:
    files = sorted(input_pipeline.path_key(f) for f in input_pipeline.list_files(input_path or []))
  except ValueError:
    return None
  return hashlib.sha256("\n".join(files).encode("utf-8")).hexdigest()


def train_input_identity(input_path) -> Dict[str, Optional[str]]:
  """The training input's `TRAIN_FILES_KEY` (`train_files_digest`) and `TRAIN_CONTENT_KEY` (`content_digest`),
  which the input positions' topology.json records and a resume compares."""
  return {TRAIN_FILES_KEY: train_files_digest(input_path), TRAIN_CONTENT_KEY: content_digest(input_path)}


def content_digest(input_path) -> Optional[str]:
  """sha256 over the files of `input_path` by their bytes alone (`file_sha256`, in sorted order): the same bytes
  copied to another folder or name give the same digest, a file changed in place another. A raw text file (CSV,
  TSV, JSONL, ...: what the record cache reads through anyway) is hashed whole at any size, and so is every file of
  an input up to FULL_HASH_TOTAL bytes; the files of a larger input (a pretraining shard set) by their size and
  their first and last STAMP_BYTES, so that a start does not read a corpus through. None when the path names no
  files or one cannot be read now (an unreachable file system included): nothing is compared then."""
  try:
    files = input_pipeline.list_files(input_path or [])
    if not files:
      return None
    sizes = {f: file_io.gfile().stat(f).length if not file_io.is_local(f) else os.path.getsize(f) for f in files}
    small = sum(sizes.values()) <= FULL_HASH_TOTAL
    stamps = sorted(file_sha256(f, whole=small or f.lower().endswith(RAW_TEXT_SUFFIXES)) for f in files)
    return hashlib.sha256("\n".join(stamps).encode("utf-8")).hexdigest()
  except Exception:  # (ValueError, OSError, TensorFlow's OpError for a scheme not reachable here: not this run's)
    return None


def evaluation_content(input_path) -> Dict[str, str]:
  """{VALIDATION_CONTENT_KEY: `content_digest`} of an evaluation input, for its `chosen_on`; {} where it names no
  files (a folder such as GLUE's: compared by name, `same_evaluation`)."""
  digest = content_digest(input_path)
  return {VALIDATION_CONTENT_KEY: digest} if digest else {}


def file_sha256(path: str, whole: bool = True) -> str:
  """The file's size and the SHA-256 of its bytes (not `whole`: of its first and last STAMP_BYTES)."""
  with file_io.open_file(path, "rb") as f:
    f.seek(0, 2)
    size = f.tell()
    if not whole and size > 2 * STAMP_BYTES:
      f.seek(0)
      digest = hashlib.sha256(f.read(STAMP_BYTES))
      f.seek(size - STAMP_BYTES)
      digest.update(f.read(STAMP_BYTES))
      return f"{size}:{digest.hexdigest()}"
  return f"{size}:{records.file_sha256(path)}"


def same_evaluation(kept: Mapping[str, str], ours: Mapping[str, str]) -> bool:
  """Whether two `chosen_on` records (`update_best`) name one evaluation: the same task, and the same evaluation
  input — the same bytes where both record them, or where the kept one's file is still there (a dev.csv corrected
  in place, or another folder's dev.csv, is other data); else as spelled, or the same file names under another
  folder (dev data copied to a local disk or read through a fuse mount after a resume is the same data;
  glue/mnli-mm's dev_mismatched or a test set is not)."""
  if kept.get("task") != ours.get("task"):
    return False
  if kept.get(VALIDATION_CONTENT_KEY) and ours.get(VALIDATION_CONTENT_KEY):  # (the bytes, where both record them)
    return kept[VALIDATION_CONTENT_KEY] == ours[VALIDATION_CONTENT_KEY]
  if ours.get(VALIDATION_CONTENT_KEY) and kept.get("validation_input") != ours.get("validation_input"):
    theirs = content_digest(kept.get("validation_input"))  # (a record from before the bytes were: its file, if kept)
    if theirs is not None:
      return theirs == ours[VALIDATION_CONTENT_KEY]
  return (kept.get("validation_input") == ours.get("validation_input")
          or _input_names(kept) == _input_names(ours))


def _input_names(record: Mapping[str, str]) -> List[str]:
  """The last path component of each pattern of a `chosen_on` record's evaluation input."""
  return [os.path.basename(p.rstrip("/")) for p in str(record.get("validation_input") or "").split(",")]
