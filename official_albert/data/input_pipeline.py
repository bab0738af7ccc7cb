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

Every pipeline made here (and the training and evaluation streams of `training.input_feed`) runs without tf.data's
autotuning model (`dataset_options`): dropping an iterator waits for its model thread, which sleeps up to 60 s
between optimizations and in a long-lived process was seen not to wake (the test suite stopped 20-143 s at a time,
GIL held, while the garbage collector freed an old iterator). `AUTOTUNE` still sizes the parallel maps (one call
per core) and the prefetch buffers (grown when the consumer waits); docs/performance.md has the measurements.

Bad input is named at no cost to the reader: `make_dataset` records what it reads (a `ReadSpec`, for
`capture_reads`), and `data.bad_input` reads those files record by record when a read fails or before training.
"""

from __future__ import annotations

import logging
import os
import posixpath
from typing import Callable, Dict, List, Mapping, Optional, Sequence, Union

import numpy as np
import tensorflow as tf

from official_albert import file_io
from official_albert.data import bad_input
from official_albert.data.bad_input import capture_reads  # noqa: F401

# The names of the bad-input diagnosis, importable from the reader as before.
from official_albert.data.bad_input import InputDataError  # noqa: F401
from official_albert.data.bad_input import is_read_error  # noqa: F401
from official_albert.data.bad_input import ReadSpec  # noqa: F401
from official_albert.data.bad_input import RecordProblem  # noqa: F401
from official_albert.data.bad_input import scan_file  # noqa: F401
from official_albert.data.bad_input import scan_files  # noqa: F401
from official_albert.data.bad_input import short_message  # noqa: F401

logger = logging.getLogger(__name__)

PRETRAINING_RENAMES = {"input_ids": "input_word_ids", "segment_ids": "input_type_ids"}
# Features whose last axis is the sequence (cut by dynamic padding); any others are left alone.
SEQUENCE_FEATURES = ("input_word_ids", "input_mask", "input_type_ids", "token_boundary")

Patterns = Union[str, Sequence[str]]

# The functions this reader maps (the tasks' record decoders included) have no tensor control flow: they run as
# written, not AutoGraph-converted at every trace (docs/design.md, "AutoGraph"). A decoder that needs a tensor
# decision writes it as `tf.cond` / `tf.where` (a Python `if` on a tensor raises at trace time).
no_autograph = tf.autograph.experimental.do_not_convert


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


# Whether a pattern names an existing file or directory as written (then it is no glob, whatever it holds); one
# helper for the project (the raw text readers use it too), kept under this name for train_lib's callers.
literal_path = file_io.literal_path


def path_key(path: str) -> str:
  """One spelling per file: `./d/f`, `d//f`, `d/x/../f` and the absolute path of a local file give the same key
  (`scheme://` paths are normalised after the scheme), so a file named two ways is read once."""
  scheme, sep, rest = path.partition("://")
  if sep:
    return scheme + sep + posixpath.normpath(rest)
  return os.path.normpath(os.path.abspath(path))


def list_files(input_patterns: Patterns) -> List[str]:
  """Sorted, de-duplicated files matching the patterns (comma-separated strings allowed).

  Wildcard matches that are sidecar files (`is_sidecar_file`) are left out, with a logged count; a file named
  literally is always kept. A pattern that names an existing path is taken literally even when it holds glob
  characters (`data [v1]/train.tfrecord`: as a glob, `[v1]` is a character class and matches nothing). Files are
  de-duplicated, keeping the first spelling, so one file named two ways is not read twice: a local file by
  `file_io.location_key` (its real path, so one reached through a symlinked folder too, as the data tools'
  readers do), a `scheme://` one by `path_key`.

  Raises:
    ValueError: a pattern is empty, names a folder (the message gives the glob of its files: the reader would open
      the folder as a file and fail only at the first step) or nothing matches (the message lists the patterns).
  """
  if isinstance(input_patterns, str):
    input_patterns = [input_patterns]
  patterns = [p.strip() for item in input_patterns for p in str(item).split(",") if p.strip()]
  if not patterns:
    raise ValueError("No input file pattern was given.")
  files: Dict[str, str] = {}  # location_key / path_key → the first spelling
  sidecars = set()
  for pattern in patterns:
    if literal_path(pattern):
      if tf.io.gfile.isdir(pattern):
        raise ValueError(f"input_path {pattern!r} is a folder, not a file; name its files with a glob, e.g. "
                         f"{pattern.rstrip('/') + '/*'!r} (sidecar .json files are left out).")
      matches = [pattern]
    else:
      matches = sorted(tf.io.gfile.glob(pattern))
      if any(c in pattern for c in "*?["):
        sidecars.update(m for m in matches if is_sidecar_file(m))
        matches = [m for m in matches if not is_sidecar_file(m)]
    for match in matches:
      files.setdefault(file_io.location_key(match) if file_io.is_local(match) else path_key(match), match)
  if sidecars:
    logger.info("Input patterns %s: left out %d sidecar file(s) that are not TFRecords (e.g. %s).", patterns,
                len(sidecars), sorted(sidecars)[0])
  if not files:
    raise ValueError(f"No input files match {patterns}" + (f" (only sidecar files: {sorted(sidecars)[:3]})."
                                                            if sidecars else "."))
  return sorted(files.values())


def check_first_record(input_patterns: Patterns, name_to_features: Mapping[str, tf.io.FixedLenFeature],
                       fix: str) -> None:
  """Raises a ValueError naming the file, the features and `fix` when the first record of the first file lacks a
  feature of `name_to_features` or holds another length: records written by another task's writer or at another
  seq_length otherwise stopped the first batch with TensorFlow's parse error, naming neither the file nor the fix."""
  files = list_files(input_patterns)
  if not files:
    return
  first = next(iter(tf.data.TFRecordDataset(files[0]).take(1)), None)
  if first is None:
    return
  try:
    example = tf.train.Example.FromString(first.numpy())
  except Exception:  # noqa: BLE001 (a protobuf DecodeError: not a tf.train.Example)
    raise ValueError(f"{files[0]}: its first record is not a tf.train.Example; {fix}") from None
  problems = []
  for name, spec in name_to_features.items():
    feature = example.features.feature.get(name)
    want = int(np.prod(spec.shape)) if spec.shape else 1
    if spec.default_value is not None:
      continue
    if feature is None:
      problems.append(f"{name} missing")
      continue
    kind = feature.WhichOneof("kind")
    have = len(getattr(feature, kind).value) if kind else 0
    if have != want:
      problems.append(f"{name} holds {have} values, expected {want} (shape {list(spec.shape)})")
  if problems:
    raise ValueError(f"{files[0]}: its records do not hold this task's features ({'; '.join(problems)}); they were "
                     f"written by another task's writer or with other settings (seq_length, num_choices); {fix}")


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


def check_masked_positions(features: Dict[str, tf.Tensor]) -> Dict[str, tf.Tensor]:
  """`features` once every `masked_lm_positions` lies in [0, seq_length): the MLM head gathers at them, and a negative
  position wraps around (−1 predicts the last token's word) where the gather does not fail. Records of this project's
  writers always pass; foreign or damaged ones stop the input with an InvalidArgumentError saying so."""
  positions = features["masked_lm_positions"]
  seq_length = tf.shape(features["input_word_ids"])[-1]
  message = ("masked_lm_positions outside [0, seq_length) in a pretraining record: the records are damaged or were "
             "written by another tool; rebuild them with data_prep.create_pretraining_data")
  with tf.control_dependencies([tf.debugging.assert_non_negative(positions, message=message),
                               tf.debugging.assert_less(positions, seq_length, message=message)]):
    features["masked_lm_positions"] = tf.identity(positions)
  return features


def sequence_lengths(features: Mapping[str, tf.Tensor]) -> tf.Tensor:
  """Real tokens per example [B] (for [B, C, S] multiple-choice features, the longest choice)."""
  lengths = tf.reduce_sum(tf.cast(features["input_mask"] != 0, tf.int32), axis=-1)
  while lengths.shape.rank > 1:
    lengths = tf.reduce_max(lengths, axis=-1)
  return lengths


def trim_to_longest(features: Mapping[str, tf.Tensor], pad_to_multiple_of: int,
                    sequence_features: Sequence[str] = SEQUENCE_FEATURES) -> Dict[str, tf.Tensor]:
  """Cuts the sequence axis of a batch after its last real token (`input_mask` 1), rounded up to `pad_to_multiple_of`.

  With trailing padding (`input_mask` = 1…1 0…0, as every ALBERT record writer makes) that is the longest sequence;
  the last real position rather than the count of real tokens, so that a row padded on the left (a client's ids) or
  with holes in its mask keeps every real token. The last axis of each feature in `sequence_features` is sliced, the
  other features are returned as they are.
  """
  if pad_to_multiple_of < 1:
    raise ValueError(f"pad_to_multiple_of must be >= 1, got {pad_to_multiple_of}.")
  full = tf.shape(features["input_mask"])[-1]
  longest = tf.reduce_max(tf.cast(features["input_mask"] != 0, tf.int32) * tf.range(1, full + 1))
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

  return dataset.flat_map(no_autograph(split_sorted)).shuffle(window, seed=seed, reshuffle_each_iteration=True)


def make_dataset(input_patterns: Patterns, decode_fn: Callable[[tf.Tensor], Dict[str, tf.Tensor]],
                 batch_size: int, is_training: bool,
                 input_context: Optional[tf.distribute.InputContext] = None, seed: Optional[int] = None,
                 shuffle_buffer_size: int = 10000, cycle_length: int = 8, drop_remainder: bool = True,
                 compression_type: str = "", deterministic: Optional[bool] = None, pad_to_multiple_of: int = 0,
                 length_bucket_window: int = 0) -> tf.data.Dataset:
  """Generic batched TFRecord reader; `decode_fn` maps a batch of serialized records to a feature dict.

  Args:
    input_patterns: file patterns (list or comma-separated string).
    decode_fn: batched parser, e.g. `lambda r: decode_record(r, spec, renames)`; run as written, not
      AutoGraph-converted (`no_autograph`): a tensor decision in it must be `tf.cond` / `tf.where`.
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
  bad_input.record_read(ReadSpec(tuple(files), decode_fn, compression_type))
  if deterministic is None:
    deterministic = seed is not None or not is_training
  options = dataset_options(deterministic)
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
        no_autograph(lambda f: tf.data.TFRecordDataset(f, compression_type=compression_type, buffer_size=1 << 20)),
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
  dataset = dataset.map(no_autograph(decode_fn), num_parallel_calls=tf.data.AUTOTUNE, deterministic=deterministic)
  if window > 1:
    dataset = bucket_by_length(dataset, batch_size, window, seed=None if seed is None else seed + 2)
  if pad_to_multiple_of:
    dataset = dataset.map(no_autograph(lambda f: trim_to_longest(f, pad_to_multiple_of)),
                          num_parallel_calls=tf.data.AUTOTUNE, deterministic=deterministic)
  dataset = dataset.prefetch(tf.data.AUTOTUNE)
  return dataset.with_options(options)


def dataset_options(deterministic: Optional[bool] = None) -> tf.data.Options:
  """The `tf.data.Options` of this project's input pipelines: autotuning's model thread off (module docstring).

  Args:
    deterministic: element order kept as written (None: tf.data's default, deterministic).
  """
  options = tf.data.Options()
  options.autotune.enabled = False
  if deterministic is not None:
    options.deterministic = deterministic
  return options


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
  return make_dataset(input_patterns, lambda r: check_masked_positions(decode_record(r, spec, PRETRAINING_RENAMES)),
                      batch_size,
                      is_training, input_context=input_context, seed=seed, shuffle_buffer_size=shuffle_buffer_size,
                      cycle_length=cycle_length, drop_remainder=drop_remainder, compression_type=compression_type,
                      pad_to_multiple_of=pad_to_multiple_of, length_bucket_window=length_bucket_window)
