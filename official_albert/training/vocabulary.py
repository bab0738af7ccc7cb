"""Start-up vocabulary checks: the ids a run reads, its SentencePiece model and its checkpoint fit `vocab_size`.

A vocabulary mismatch does not fail where it is made. Records made with a larger SentencePiece model than the model's
fail at step 1 with a bare `indices[28,44] = 6422 is not in [0, 4000)` on CPU (and give zeros on GPU, silently); a
SentencePiece model of another vocabulary trains silently and is copied into the model directory, so that an export
tokenizes with pieces the model never saw. `check_vocabulary` runs before the model is built and raises one
`VocabularyError` naming every file, the sizes and the fix:

- the task's SentencePiece model (`task.spm_model_file`, or the one a task resolves) has no more pieces than
  `task.model.vocab_size`;
- `task.init_checkpoint`'s word-embedding table has `vocab_size` rows (a config.json that disagrees with its
  weights), and an explicit `task.spm_model_file` is the very model found beside the checkpoint;
- a bounded sample of the records each split reads (`SAMPLE_RECORDS` per file, `SAMPLE_FILES` files) holds no id
  feature (`ID_FEATURES`) at or beyond `vocab_size`.

Token files of the on-the-fly pipeline are checked by the pretraining task when it reads their manifests (ids,
SentencePiece model); labels are checked when the raw-file tasks build a split's records, which `train_lib` does for
every split at start-up.
"""

from __future__ import annotations

import json
import logging
import os
import struct
from typing import Any, List, Optional, Sequence, Tuple

import sentencepiece as spm
import tensorflow as tf

from official_albert import file_io
from official_albert import model_directory as md
from official_albert.checkpoints import keras_hub_preset
from official_albert.data import records

logger = logging.getLogger(__name__)

# Record features that hold vocabulary ids (pretraining records, fine-tuning records, tokenized corpora).
ID_FEATURES = ("input_word_ids", "input_ids", "masked_lm_ids", "token_ids")
SAMPLE_RECORDS = 256
# A new model whose vocab_size has this many times the SentencePiece model's pieces or more is warned about (the tiny
# preset's 4,000 rows with a 2,000-piece model).
UNUSED_ROWS_FRACTION = 0.75
SAMPLE_FILES = 16
# The word-embedding table under each format's name.
_TABLE_NAMES = ("bert/embeddings/word_embeddings", "albert.embeddings.word_embeddings.weight",
                "embeddings.word_embeddings.weight")


class VocabularyError(ValueError):
  """The vocabularies of a run's inputs, SentencePiece model, checkpoint and model disagree (names each)."""


def spm_pieces(spm_model_file: str) -> int:
  """The number of pieces of a SentencePiece model (local or gs://)."""
  with file_io.open_file(spm_model_file, "rb") as f:
    return spm.SentencePieceProcessor(model_proto=f.read()).GetPieceSize()


def _safetensors_rows(path: str) -> Optional[int]:
  with file_io.open_file(path, "rb") as f:
    (size,) = struct.unpack("<Q", f.read(8))
    header = json.loads(f.read(size))
  for name in _TABLE_NAMES[1:]:
    if name in header:
      return int(header[name]["shape"][0])
  return None


def checkpoint_vocab_rows(location: str) -> Optional[Tuple[int, str]]:
  """(rows of the word-embedding table, the file read) of a native / HF / KerasHub / TF1 directory or checkpoint
  prefix; None when the checkpoint has no table we can find without loading it (e.g. a PyTorch pickle)."""
  found = md.detect_format(location) if file_io.isdir(location) and md.model_config_file(location) else None
  if found == "keras_hub":  # (no TF checkpoint: the table's shape is in the preset's HDF5 weights file)
    return keras_hub_preset.preset_vocab_rows(location)
  if found == "hf":
    weights = md.path(location, md.HF_WEIGHTS_FILE)
    rows = _safetensors_rows(weights) if file_io.exists(weights) else None
    return None if rows is None else (rows, weights)
  prefix = md.resolve_checkpoint(location, "task.init_checkpoint")
  for name, shape in tf.train.list_variables(prefix):
    base = name.replace("module/", "", 1)
    if base == _TABLE_NAMES[0] or base.endswith("embeddings/word_embeddings/.ATTRIBUTES/VARIABLE_VALUE"):
      return int(shape[0]), prefix
  return None


def sample_max_id(files: Sequence[str], compression_type: str = "", per_file: int = SAMPLE_RECORDS,
                  max_files: int = SAMPLE_FILES) -> Optional[Tuple[int, str, int, str]]:
  """(largest id, file, record index, feature) over the first `per_file` records of the first `max_files` files;
  None when no record has an id feature."""
  best = None
  for path in list(files)[:max_files]:
    dataset = tf.data.TFRecordDataset(path, compression_type=compression_type or None).take(per_file)
    try:
      for index, raw in enumerate(dataset.as_numpy_iterator()):
        features = tf.train.Example.FromString(raw).features.feature
        for name in ID_FEATURES:
          if name in features and features[name].int64_list.value:
            value = max(features[name].int64_list.value)
            if best is None or value > best[0]:
              best = (int(value), path, index, name)
    except (tf.errors.OpError, ValueError):  # not records of Examples: `--validate_input` and the reader say why
      continue
  return best


def _same_bytes(a: str, b: str) -> bool:
  return os.path.abspath(a) == os.path.abspath(b) or records.file_sha256(a) == records.file_sha256(b)


def check_vocabulary(params: Any, mode: str, task: Any, reads: Sequence[Tuple[str, Any]] = ()) -> None:
  """Raises one VocabularyError listing every disagreement (see the module docstring).

  Args:
    params: the ExperimentConfig.
    mode: the run's mode (the init checkpoint is checked for the training modes only).
    task: the task (its `sentencepiece_model_file()` when it has one).
    reads: (config key, `input_pipeline.ReadSpec`) of every split the mode reads.
  """
  p = params.task
  model = getattr(p, "model", None)
  if model is None:
    return
  vocab_size = int(model.vocab_size)
  problems: List[str] = []
  hook = getattr(task, "sentencepiece_model_file", None)
  spm = (hook() if callable(hook) else None) or getattr(p, "spm_model_file", "")
  if spm and file_io.exists(spm):
    pieces = spm_pieces(spm)
    if pieces > vocab_size:
      problems.append(f"the SentencePiece model {spm} has {pieces} pieces but task.model.vocab_size is {vocab_size}: "
                      "its ids beyond the embedding table have no row. Use the SentencePiece model the model was "
                      "trained with (spiece.model in its directory), or set task.model.vocab_size for a new model.")
    elif pieces <= UNUSED_ROWS_FRACTION * vocab_size and mode in ("train", "train_and_eval") and not getattr(
        p, "init_checkpoint", ""):
      logger.warning("The SentencePiece model %s has %d pieces but the new model's task.model.vocab_size is %d: %d "
                     "embedding rows will never be used (parameters and MLM output for ids that never occur). Set "
                     "task.model.vocab_size=%d.", spm, pieces, vocab_size, vocab_size - pieces, pieces)
  init = getattr(p, "init_checkpoint", "")
  if init and mode in ("train", "train_and_eval"):
    found = checkpoint_vocab_rows(init)
    if found is not None and found[0] != vocab_size:
      problems.append(f"task.init_checkpoint={init}: its word-embedding table ({found[1]}) has {found[0]} rows but "
                      f"task.model.vocab_size is {vocab_size}. Fix the checkpoint's config file "
                      f"({md.model_config_file(init)}) or point task.init_checkpoint at the model it describes.")
    beside = md.find_spm_model(init if file_io.isdir(init) else os.path.dirname(init) or ".")
    explicit = getattr(p, "spm_model_file", "")
    if explicit and beside and file_io.exists(explicit) and not _same_bytes(explicit, beside):
      problems.append(f"task.spm_model_file={explicit} is not the SentencePiece model of task.init_checkpoint "
                      f"({beside}, another file with other bytes): the checkpoint's embeddings belong to its own "
                      "pieces. Leave task.spm_model_file empty to use the checkpoint's, or give that file.")
  seen = set()
  for key, read in reads:
    if read.files in seen:
      continue
    seen.add(read.files)
    found = sample_max_id(read.files, read.compression_type)
    if found is not None and found[0] >= vocab_size:
      value, path, index, feature = found
      problems.append(f"{key}: {path} record {index}: {feature} holds id {value}, not in [0, {vocab_size}) "
                      f"(task.model.vocab_size={vocab_size}): these records were made with a larger vocabulary than "
                      "the model's. Remake them with the model's SentencePiece model, or train a model of that "
                      "vocabulary (task.model.vocab_size, or the checkpoint made with it).")
  if problems:
    raise VocabularyError("Vocabulary mismatch, nothing was trained:\n  " + "\n  ".join(problems))
