"""Naming bad input: which file, which record, what is wrong and the fix, where tf.data names no file.

tf.data reports a damaged record or a record of the wrong shape without its file (`corrupted record at 599847`), so
the reader (`data.input_pipeline`) stays as it is, and `scan_files` reads the files of a `ReadSpec` (what one
`make_dataset` call reads, collected with `capture_reads`) record by record to name every bad file, the index of its
first bad record, what is wrong and the fix. The train binary runs it before training (`--validate_input`) and
whenever a read fails (`training.train_lib`). TensorFlow's message texts it reads are kept, with the version check
that provokes them, in `official_albert.compat`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import re
import threading
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import tensorflow as tf

from official_albert import compat


class InputDataError(ValueError):
  """Input files that cannot be read as configured; the message names each file, record and the fix."""


@dataclasses.dataclass(frozen=True)
class ReadSpec:
  """What one `make_dataset` call reads: its files (sidecars left out), its batched decoder and compression."""
  files: Tuple[str, ...]
  decode_fn: Callable[[tf.Tensor], Dict[str, tf.Tensor]]
  compression_type: str = ""


_CAPTURE = threading.local()


def record_read(spec: ReadSpec) -> None:
  """Called by `input_pipeline.make_dataset` for each dataset it builds: hands `spec` to every open `capture_reads`."""
  for reads in getattr(_CAPTURE, "stack", ()):
    reads.append(spec)


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
             "data_prep's .json sidecars are already left out of wildcard matches; a raw text file of a text_* "
             "task without a .csv / .tsv / .jsonl / .conll name is read with task.input_format set to its format")
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
