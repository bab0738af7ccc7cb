"""`tf.data` readers for ALBERT TFRecords (pretraining records of reference §3.4 and any fixed-length features).

The pretraining reader reads files made by `data_prep.create_pretraining_data` and by the original
`create_pretraining_data.py` (same feature names), and renames them to the model contract:

  input_ids → input_word_ids, segment_ids → input_type_ids; input_mask, masked_lm_positions, masked_lm_ids,
  masked_lm_weights, next_sentence_labels (and token_boundary on request) keep their names.

Every int64 feature becomes int32 (TPU/XLA friendly, as the reference does), weights stay float32.

Pipeline (training): files sorted → shard per `tf.distribute.InputContext` (by file when there are at least as many
files as input pipelines, else by record) → shuffle the file order (seeded) → repeat → interleave `TFRecordDataset`s
(parallel, `cycle_length` files at once) → shuffle records (seeded buffer) → batch (drop_remainder) → parse the
batch with one `tf.io.parse_example` (vectorised, parallel) → [length bucketing] → [dynamic padding] → prefetch.

Two optional speed-ups for data with short sequences (fine-tuning sentences are mostly far below max_seq_length):
- dynamic padding (`pad_to_multiple_of > 0`): each batch is cut to its longest sequence, rounded up to a multiple
  (so XLA sees at most seq_length / multiple shapes). Only trailing padding is removed, and padded keys get a
  −10000 attention bias, so every output at a real token is the same as with full padding (to float rounding).
  Batch order and composition are unchanged: safe for evaluation and prediction.
- length bucketing (`length_bucket_window = K > 1`, training only): K consecutive batches are parsed together,
  sorted by length and cut into K batches of similar lengths, whose order is then shuffled (seeded). Less padding
  per batch, at the price of batches that are no longer i.i.d. in length — off by default (reference behaviour).

Evaluation reads the files in order, once, without shuffling. No Python runs per record. With a `seed` every random
step is seeded and the interleave is deterministic, so the same seed gives the same batches and a checkpointed
iterator resumes exactly.

Bad input is named, at no cost to the reader: tf.data reports a damaged record or a record of the wrong shape
without its file (`corrupted record at 599847`), so the reader itself stays as it is, and `scan_files` reads the
files of a `ReadSpec` (what one `make_dataset` call reads, collected with `capture_reads`) record by record to name
every bad file, the index of its first bad record, what is wrong and the fix. The train binary runs it before
training (`--validate_input`) and whenever a read fails (`training.train_lib`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import re
import threading
from typing import Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import tensorflow as tf

from official_albert import compat

logger = logging.getLogger(__name__)

PRETRAINING_RENAMES = {"input_ids": "input_word_ids", "segment_ids": "input_type_ids"}
# Features whose last axis is the sequence (cut by dynamic padding); any others are left alone.
SEQUENCE_FEATURES = ("input_word_ids", "input_mask", "input_type_ids", "token_boundary")

Patterns = Union[str, Sequence[str]]


class InputDataError(ValueError):
  """Input files that cannot be read as configured; the message names each file, record and the fix."""


def pretraining_feature_spec(seq_length: int, max_predictions_per_seq: int,
                             include_token_boundary: bool = False) -> Dict[str, tf.io.FixedLenFeature]:
  """The reference record layout (§3.4). With do_permutation data pass 2 × max_predictions_per_seq."""
  spec = {
      "input_ids": tf.io.FixedLenFeature([seq_length], tf.int64),
      "input_mask": tf.io.FixedLenFeature([seq_length], tf.int64),
      "segment_ids": tf.io.FixedLenFeature([seq_length], tf.int64),
      "masked_lm_positions": tf.io.FixedLenFeature([max_predictions_per_seq], tf.int64),
      "masked_lm_ids": tf.io.FixedLenFeature([max_predictions_per_seq], tf.int64),
      "masked_lm_weights": tf.io.FixedLenFeature([max_predictions_per_seq], tf.float32),
      "next_sentence_labels": tf.io.FixedLenFeature([1], tf.int64),
  }
  if include_token_boundary:
    spec["token_boundary"] = tf.io.FixedLenFeature([seq_length], tf.int64)
  return spec


def is_sidecar_file(path: str) -> bool:
  """Files data_prep writes beside its TFRecords (`.manifest.json`, `.meta.json`, `.stats.json`, `.tmp-*` leftovers
  of a killed writer): never records, so a wildcard such as `train-*` must not feed them to the reader."""
  name = path.rsplit("/", 1)[-1]
  return name.endswith(".json") or ".tmp-" in name


def list_files(input_patterns: Patterns) -> List[str]:
  """Sorted, de-duplicated files matching the patterns (comma-separated strings allowed).

  Wildcard matches that are sidecar files (`is_sidecar_file`) are left out, with a logged count; a file named
  literally is always kept.

  Raises:
    ValueError: a pattern is empty or nothing matches (the message lists the patterns).
  """
  if isinstance(input_patterns, str):
    input_patterns = [input_patterns]
  patterns = [p.strip() for item in input_patterns for p in str(item).split(",") if p.strip()]
  if not patterns:
    raise ValueError("No input file pattern was given.")
  files, sidecars = set(), set()
  for pattern in patterns:
    matches = tf.io.gfile.glob(pattern)
    if any(c in pattern for c in "*?["):
      sidecars.update(m for m in matches if is_sidecar_file(m))
      matches = [m for m in matches if not is_sidecar_file(m)]
    files.update(matches)
  if sidecars:
    logger.info("Input patterns %s: left out %d sidecar file(s) that are not TFRecords (e.g. %s).", patterns,
                len(sidecars), sorted(sidecars)[0])
  if not files:
    raise ValueError(f"No input files match {patterns}" + (f" (only sidecar files: {sorted(sidecars)[:3]})."
                                                            if sidecars else "."))
  return sorted(files)


def decode_record(record: tf.Tensor, name_to_features: Mapping[str, tf.io.FixedLenFeature],
                  renames: Optional[Mapping[str, str]] = None) -> Dict[str, tf.Tensor]:
  """Parses serialized `tf.train.Example`s (one or a batch), casts int64 → int32 and renames keys."""
  if record.shape.rank == 0:
    parsed = tf.io.parse_single_example(record, name_to_features)
  else:
    parsed = tf.io.parse_example(record, name_to_features)
  renames = renames or {}
  out = {}
  for name, tensor in parsed.items():
    if tensor.dtype == tf.int64:
      tensor = tf.cast(tensor, tf.int32)
    out[renames.get(name, name)] = tensor
  return out


def sequence_lengths(features: Mapping[str, tf.Tensor]) -> tf.Tensor:
  """Real tokens per example [B] (for [B, C, S] multiple-choice features, the longest choice)."""
  lengths = tf.reduce_sum(tf.cast(features["input_mask"] != 0, tf.int32), axis=-1)
  while lengths.shape.rank > 1:
    lengths = tf.reduce_max(lengths, axis=-1)
  return lengths


def trim_to_longest(features: Mapping[str, tf.Tensor], pad_to_multiple_of: int,
                    sequence_features: Sequence[str] = SEQUENCE_FEATURES) -> Dict[str, tf.Tensor]:
  """Cuts the sequence axis of a batch to its longest sequence, rounded up to `pad_to_multiple_of`.

  Assumes trailing padding (`input_mask` = 1…1 0…0), as every ALBERT record writer makes; the last axis of each
  feature in `sequence_features` is sliced, the other features are returned as they are.
  """
  if pad_to_multiple_of < 1:
    raise ValueError(f"pad_to_multiple_of must be >= 1, got {pad_to_multiple_of}.")
  full = tf.shape(features["input_mask"])[-1]
  longest = tf.reduce_max(sequence_lengths(features))
  length = (longest + pad_to_multiple_of - 1) // pad_to_multiple_of * pad_to_multiple_of
  length = tf.clip_by_value(length, 1, full)
  return {k: (v[..., :length] if k in sequence_features else v) for k, v in features.items()}


def bucket_by_length(dataset: tf.data.Dataset, batch_size: int, window: int, seed: Optional[int]) -> tf.data.Dataset:
  """Parsed batches of `batch_size · window` examples → `window` batches of similar length each, order shuffled."""

  def split_sorted(features):
    order = tf.argsort(sequence_lengths(features), stable=True)
    return tf.data.Dataset.from_tensor_slices(tf.nest.map_structure(
        lambda t: tf.reshape(tf.gather(t, order), tf.concat([[window, batch_size], tf.shape(t)[1:]], 0)),
        features))

  return dataset.flat_map(split_sorted).shuffle(window, seed=seed, reshuffle_each_iteration=True)


def make_dataset(input_patterns: Patterns, decode_fn: Callable[[tf.Tensor], Dict[str, tf.Tensor]],
                 batch_size: int, is_training: bool,
                 input_context: Optional[tf.distribute.InputContext] = None, seed: Optional[int] = None,
                 shuffle_buffer_size: int = 10000, cycle_length: int = 8, drop_remainder: bool = True,
                 compression_type: str = "", deterministic: Optional[bool] = None, pad_to_multiple_of: int = 0,
                 length_bucket_window: int = 0) -> tf.data.Dataset:
  """Generic batched TFRecord reader; `decode_fn` maps a batch of serialized records to a feature dict.

  Args:
    input_patterns: file patterns (list or comma-separated string).
    decode_fn: batched parser, e.g. `lambda r: decode_record(r, spec, renames)`.
    batch_size: per-pipeline batch size (already divided per replica by the caller when distributed).
    is_training: shuffle files and records and repeat forever; else one ordered pass.
    input_context: shards the input per pipeline (multi-worker).
    seed: seeds every shuffle and makes the interleave deterministic (same seed → same batches).
    shuffle_buffer_size: record shuffle buffer (training only).
    cycle_length: files read concurrently by the interleave.
    drop_remainder: keep every batch full (static shapes for XLA/TPU).
    compression_type: "" or "GZIP"/"ZLIB".
    deterministic: force the interleave order; default: deterministic when seeded or not training.
    pad_to_multiple_of: > 0 turns on dynamic padding (see the module docstring): batches are cut to their longest
      sequence rounded up to this multiple, so the sequence axis of the dataset becomes `None`.
    length_bucket_window: > 1 (training only) turns on length bucketing over this many batches.

  Returns:
    A prefetched `tf.data.Dataset` of feature dicts.
  """
  if batch_size < 1:
    raise ValueError(f"batch_size must be >= 1, got {batch_size}.")
  if pad_to_multiple_of < 0:
    raise ValueError(f"pad_to_multiple_of must be >= 0 (0 = off), got {pad_to_multiple_of}.")
  if length_bucket_window < 0:
    raise ValueError(f"length_bucket_window must be >= 0 (0 or 1 = off), got {length_bucket_window}.")
  if length_bucket_window > 1 and not is_training:
    raise ValueError("length_bucket_window reorders examples: it is for training data only (evaluation and "
                     "prediction keep file order; use pad_to_multiple_of there).")
  if length_bucket_window > 1 and not drop_remainder:
    raise ValueError("length_bucket_window needs drop_remainder=True (it cuts full windows into full batches).")
  window = length_bucket_window if length_bucket_window > 1 else 1
  if window > 1 and not pad_to_multiple_of:
    logger.warning("length_bucket_window=%d without pad_to_multiple_of: batches are grouped by length but still "
                   "padded to seq_length, so nothing is saved; set pad_to_multiple_of (e.g. 16).", window)
  files = list_files(input_patterns)
  for reads in getattr(_CAPTURE, "stack", ()):
    reads.append(ReadSpec(tuple(files), decode_fn, compression_type))
  if deterministic is None:
    deterministic = seed is not None or not is_training
  options = tf.data.Options()
  options.deterministic = deterministic
  num_pipelines = input_context.num_input_pipelines if input_context else 1
  pipeline_id = input_context.input_pipeline_id if input_context else 0
  shard_records = num_pipelines > 1 and len(files) < num_pipelines

  dataset = tf.data.Dataset.from_tensor_slices(tf.constant(files, tf.string))
  if num_pipelines > 1 and not shard_records:
    dataset = dataset.shard(num_pipelines, pipeline_id)
  num_files = -(-len(files) // num_pipelines) if not shard_records else len(files)
  if is_training:
    dataset = dataset.shuffle(max(1, num_files), seed=seed, reshuffle_each_iteration=True)
    dataset = dataset.repeat()
  if is_training:
    dataset = dataset.interleave(
        lambda f: tf.data.TFRecordDataset(f, compression_type=compression_type, buffer_size=1 << 20),
        cycle_length=max(1, min(cycle_length, num_files)), block_length=1, num_parallel_calls=tf.data.AUTOTUNE,
        deterministic=deterministic)
  else:
    # Evaluation reads file after file, in order (as the reference does).
    dataset = tf.data.TFRecordDataset(dataset, compression_type=compression_type, buffer_size=1 << 20)
  if shard_records:
    dataset = dataset.shard(num_pipelines, pipeline_id)
  if is_training:
    dataset = dataset.shuffle(shuffle_buffer_size, seed=None if seed is None else seed + 1,
                              reshuffle_each_iteration=True)
  dataset = dataset.batch(batch_size * window, drop_remainder=drop_remainder)
  dataset = dataset.map(decode_fn, num_parallel_calls=tf.data.AUTOTUNE, deterministic=deterministic)
  if window > 1:
    dataset = bucket_by_length(dataset, batch_size, window, seed=None if seed is None else seed + 2)
  if pad_to_multiple_of:
    dataset = dataset.map(lambda f: trim_to_longest(f, pad_to_multiple_of), num_parallel_calls=tf.data.AUTOTUNE,
                          deterministic=deterministic)
  dataset = dataset.prefetch(tf.data.AUTOTUNE)
  return dataset.with_options(options)


def pretraining_dataset(input_patterns: Patterns, seq_length: int, max_predictions_per_seq: int, batch_size: int,
                        is_training: bool, input_context: Optional[tf.distribute.InputContext] = None,
                        seed: Optional[int] = None, shuffle_buffer_size: int = 10000, cycle_length: int = 8,
                        include_token_boundary: bool = False, drop_remainder: bool = True,
                        compression_type: str = "", pad_to_multiple_of: int = 0,
                        length_bucket_window: int = 0) -> tf.data.Dataset:
  """Batched pretraining features in the model's names (see the module docstring).

  Args:
    input_patterns: TFRecord file patterns (list or comma-separated string).
    seq_length: the records' max_seq_length.
    max_predictions_per_seq: the records' masked-LM slots (2× the flag for do_permutation data).
    batch_size: per-pipeline batch size.
    is_training: shuffle + repeat (training) or one ordered pass (evaluation).
    input_context: multi-worker sharding.
    seed: seeds the shuffles (deterministic order).
    shuffle_buffer_size: record shuffle buffer.
    cycle_length: files interleaved at once.
    include_token_boundary: also return `token_boundary` [B, S].
    drop_remainder: full batches only.
    compression_type: "" or "GZIP"/"ZLIB".
    pad_to_multiple_of, length_bucket_window: dynamic padding and length bucketing (`make_dataset`).

  Returns:
    Dataset of dicts: input_word_ids, input_mask, input_type_ids [B, S] int32; masked_lm_positions,
    masked_lm_ids [B, P] int32; masked_lm_weights [B, P] float32; next_sentence_labels [B, 1] int32.
  """
  spec = pretraining_feature_spec(seq_length, max_predictions_per_seq, include_token_boundary)
  return make_dataset(input_patterns, lambda r: decode_record(r, spec, PRETRAINING_RENAMES), batch_size,
                      is_training, input_context=input_context, seed=seed, shuffle_buffer_size=shuffle_buffer_size,
                      cycle_length=cycle_length, drop_remainder=drop_remainder, compression_type=compression_type,
                      pad_to_multiple_of=pad_to_multiple_of, length_bucket_window=length_bucket_window)


# ------------------------------------------------------------------------------------------- naming bad input
@dataclasses.dataclass(frozen=True)
class ReadSpec:
  """What one `make_dataset` call reads: its files (sidecars left out), its batched decoder and compression."""
  files: Tuple[str, ...]
  decode_fn: Callable[[tf.Tensor], Dict[str, tf.Tensor]]
  compression_type: str = ""


_CAPTURE = threading.local()


@contextlib.contextmanager
def capture_reads():
  """Collects the `ReadSpec` of every `make_dataset` call made in this thread inside the block.

  How a caller learns what a task's `build_inputs` reads (files and the task's own decoder) without knowing the
  task; building a dataset reads nothing, so this is cheap.
  """
  stack = _CAPTURE.__dict__.setdefault("stack", [])
  reads: List[ReadSpec] = []
  stack.append(reads)
  try:
    yield reads
  finally:
    stack.pop()


# TensorFlow's words for a failed record read or parse (no API: `compat` keeps them with the version check, which
# provokes each error on the installed TensorFlow); anything else is not an input problem.
_READ_ERROR = re.compile(compat.READ_ERROR_ANY)
_LENGTH, _MISSING, _DTYPE, _OFFSET, _NOT_EXAMPLE = (re.compile(compat.READ_ERROR_PATTERNS[kind]) for kind in (
    "length", "missing_feature", "dtype", "damaged", "not_example"))


def is_read_error(error: BaseException) -> bool:
  """True for the errors a damaged file or a record of the wrong layout raises inside tf.data."""
  return isinstance(error, tf.errors.OpError) and bool(_READ_ERROR.search(error.message or ""))


@dataclasses.dataclass(frozen=True)
class RecordProblem:
  """The first bad record of one file.

  Attributes:
    path: the file.
    record: 0-based index of the first bad record (the records before it were read and decoded).
    kind: not_tfrecord | truncated | corrupted | not_example | length | missing_feature | dtype | unreadable | other.
    detail: TensorFlow's message (first line, shortened).
    feature, found, expected: for `length` (values found vs expected), `missing_feature`, `dtype`.
    offset: byte offset TensorFlow reported for a damaged record.
  """
  path: str
  record: int
  kind: str
  detail: str
  feature: str = ""
  found: str = ""
  expected: str = ""
  offset: Optional[int] = None

  def describe(self, setting: str = "", suggested: Optional[int] = None) -> str:
    """`path: record N: what is wrong. Fix: ...`; `setting` (e.g. task.train_data.seq_length) and `suggested`
    (its value that reads these records) complete the fix of a `length` problem."""
    rebuild = ("rebuild the shard (delete it and re-run the data_prep command that made it: finished shards are "
               "kept) or copy it again, or leave it out of the input pattern")
    at = f" (byte offset {self.offset})" if self.offset is not None else ""
    if self.kind == "not_tfrecord":
      what = "not a TFRecord file (its first bytes are not a TFRecord header)"
      fix = ("take it out of input_path: narrow the glob (e.g. out/train-*-of-*) or list the record files; "
             "data_prep's .json sidecars are already left out of wildcard matches")
    elif self.kind == "truncated":
      what = f"the file ends inside this record{at}: it was cut short (an interrupted write or copy)"
      if self.record == 0 and self.offset == 0:
        what += ", or it is not a TFRecord file at all"
      fix = rebuild
    elif self.kind == "corrupted":
      what, fix = f"the record fails its checksum{at}: the file is damaged", rebuild
    elif self.kind == "not_example":
      what = "the record is not a serialized tf.train.Example"
      fix = "these are not ALBERT records: point input_path at the output of data_prep"
    elif self.kind == "length":
      what = f"feature {self.feature!r} has {self.found} values, the config expects {self.expected}"
      if setting:
        value = f"={suggested}" if suggested is not None else ""
        flag = "--max_seq_length" if setting.endswith("seq_length") else "--" + setting.rsplit(".", 1)[-1]
        fix = (f"the records were built with other sizes: set {setting}{value} to read them as they are, or rebuild "
               f"them with {flag} matching {setting}")
      else:
        fix = "read them with the sizes they were built with (seq_length / max_predictions_per_seq), or rebuild them"
    elif self.kind == "missing_feature":
      what = f"the record has no feature {self.feature!r} ({self.expected}) that this task reads"
      fix = ("these records were made for another task or by another tool: point input_path at records made for "
             "this task (data_prep.create_pretraining_data / create_finetuning_data --task=...)")
    elif self.kind == "dtype":
      what = f"feature {self.feature!r} holds {self.found} values, this task reads {self.expected}"
      fix = "these records were made for another task or by another tool: rebuild them for this task"
    else:
      what, fix = f"cannot be read ({self.detail})", rebuild
    return f"{self.path}: record {self.record}: {what}. Fix: {fix}."


def short_message(message: str, limit: int = 300) -> str:
  """The line of a TensorFlow error message that says what failed (a graph error's first line is only "Graph
  execution error:"), without its `{{function_node ...}}` prefix, shortened."""
  lines = [line.strip() for line in (message or "").splitlines() if line.strip()]
  line = next((line for line in lines if _READ_ERROR.search(line)), lines[0] if lines else "")
  line = re.sub(r"^\{\{function_node [^}]*\}\}\s*", "", line)
  return line if len(line) <= limit else line[:limit] + "..."


def _problem(path: str, record: int, error: tf.errors.OpError) -> RecordProblem:
  message = error.message or ""
  detail = short_message(message)
  offset = _OFFSET.search(message)
  if offset:
    byte = int(offset.group(2))
    kind = offset.group(1)
    if record == 0 and byte == 0 and (kind == "corrupted" or "Is this even a TFRecord" in message):
      kind = "not_tfrecord"
    return RecordProblem(path, record, kind, detail, offset=byte)
  if (m := _LENGTH.search(message)):
    return RecordProblem(path, record, "length", detail, feature=m.group(1), found=m.group(2),
                         expected=m.group(3).replace(" ", ""))
  if (m := _MISSING.search(message)):
    return RecordProblem(path, record, "missing_feature", detail, feature=m.group(1), expected=m.group(2))
  if (m := _DTYPE.search(message)):
    return RecordProblem(path, record, "dtype", detail, feature=m.group(1), found=m.group(2), expected=m.group(3))
  if _NOT_EXAMPLE.search(message):
    return RecordProblem(path, record, "not_example", detail)
  if isinstance(error, (tf.errors.NotFoundError, tf.errors.PermissionDeniedError)):
    return RecordProblem(path, record, "unreadable", detail)
  return RecordProblem(path, record, "other", detail)


def _readable_from(path: str, compression_type: str, start: int) -> int:
  """Index of the first record at or after `start` that cannot be read (one record at a time)."""
  index = start
  try:
    for _ in tf.data.TFRecordDataset(path, compression_type=compression_type).skip(start):
      index += 1
  except tf.errors.OpError:
    pass
  return index


def scan_file(path: str, decode_fn: Optional[Callable[[tf.Tensor], Dict[str, tf.Tensor]]] = None,
              compression_type: str = "", batch_size: int = 1024) -> Tuple[int, Optional[RecordProblem]]:
  """Reads every record of `path` (and decodes it with `decode_fn`, when given) up to the first bad one.

  Returns:
    (records read and decoded before the first bad one, or all of them; the problem or None).
  """
  count, size = 0, 0
  iterator = iter(tf.data.TFRecordDataset(path, compression_type=compression_type,
                                          buffer_size=1 << 20).batch(batch_size))
  while True:
    try:
      batch = next(iterator)
    except StopIteration:
      # TensorFlow ends a file silently when it stops inside a record's 12-byte header: count the bytes.
      if not compression_type and size != tf.io.gfile.stat(path).length:
        return count, RecordProblem(path, count, "truncated", "bytes after the last whole record", offset=size)
      return count, None
    except tf.errors.OpError as e:
      bad = _readable_from(path, compression_type, count)
      return bad, _problem(path, bad, e)
    if decode_fn is not None:
      try:
        decode_fn(batch)
      except tf.errors.OpError:
        for i in range(int(batch.shape[0])):  # The batch failed: find its first bad record.
          try:
            decode_fn(batch[i:i + 1])
          except tf.errors.OpError as e:
            return count + i, _problem(path, count + i, e)
    count += int(batch.shape[0])
    size += int(tf.reduce_sum(tf.strings.length(batch))) + 16 * int(batch.shape[0])  # + length, 2 CRCs


def scan_files(files: Sequence[str], decode_fn: Optional[Callable[[tf.Tensor], Dict[str, tf.Tensor]]] = None,
               compression_type: str = "", batch_size: int = 1024) -> Tuple[int, List[RecordProblem]]:
  """`scan_file` over every file: (records read, one `RecordProblem` per bad file), every file checked."""
  total, problems = 0, []
  for path in files:
    count, problem = scan_file(path, decode_fn, compression_type, batch_size)
    total += count
    if problem is not None:
      problems.append(problem)
  return total, problems
