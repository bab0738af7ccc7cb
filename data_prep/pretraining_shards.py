"""One pretraining shard from raw text to TFRecords: partition, tokenization, instances, records, manifest.

The engine behind `create_pretraining_data` (and `beam_pipeline`): the corpus is partitioned by document into shard
spill files (`partition`), and each shard is generated independently (`generate_shard`, in a worker process) from
seeded streams (`derive_rng`), so the output does not depend on the number of workers or on scheduling. A finished
shard has a manifest (fingerprint, size, SHA-256, statistics) that lets a rerun skip it (`finished_manifest`).
Workers never import TensorFlow except to write the TFRecord file.

Process hygiene (`pretraining_processes`): worker processes die with the process that started them, however it dies,
and the spill folder of a killed run is removed by the next run that writes beside it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
import random
import sys
import time
from typing import Callable, Dict, Iterator, List, Optional, Sequence, Tuple

import numpy as np

from data_prep import pretraining_instances as pi
from data_prep import pretraining_processes as processes
from data_prep import pretraining_records
from data_prep import text_lines
from data_prep.pretraining_config import FORMAT_VERSION
from data_prep.pretraining_config import GenerationConfig
from data_prep.text_lines import InputError  # noqa: F401 (the data tools' error, raised and re-exported here)
from official_albert import file_io
from official_albert import tokenization
from official_albert.data import records as records_lib
from official_albert.tokenization import UNK

logger = logging.getLogger(__name__)

_TAG_DOC, _TAG_ORDER, _TAG_BUFFER = 0, 1, 2


class Progress:
  """A throttled one-line progress display on stderr."""

  def __init__(self, enabled: bool, label: str, total: Optional[int] = None):
    self.enabled = enabled
    self.label = label
    self.total = total
    self.start = time.time()
    self._last = 0.0

  def update(self, done: int, extra: str = "", force: bool = False) -> None:
    if not self.enabled:
      return
    now = time.time()
    if not force and now - self._last < 0.25:
      return
    self._last = now
    rate = done / max(now - self.start, 1e-9)
    if self.total:
      frac = min(1.0, done / self.total)
      bar = "#" * int(frac * 30)
      text = f"\r{self.label} [{bar:<30}] {100 * frac:5.1f}% {done}/{self.total} ({rate:,.0f}/s) {extra}"
    else:
      text = f"\r{self.label} {done:,} ({rate:,.0f}/s) {extra}"
    sys.stderr.write(text)
    sys.stderr.flush()

  def close(self) -> None:
    if self.enabled:
      sys.stderr.write("\n")
      sys.stderr.flush()


def iter_documents(input_files: Sequence[str], errors: str = "strict",
                   counts: Optional[Dict[str, int]] = None) -> Iterator[Tuple[str, int, List[str]]]:
  """Streams documents as (file, first line number, stripped non-blank lines).

  A blank (whitespace-only) line ends a document; documents never span files. Undecodable UTF-8 raises InputError
  naming file:line, or with errors="replace" becomes U+FFFD (counted in `counts["lines_with_decode_errors"]`).
  """
  counts = counts if counts is not None else {}
  for key in ("lines_read", "blank_lines", "lines_with_decode_errors"):
    counts.setdefault(key, 0)
  for path in input_files:
    lines: List[str] = []
    first = 0
    for lineno, text in text_lines.iter_lines(path, errors, counts):
      text = text.strip()
      if not text:
        counts["blank_lines"] += 1
        if lines:
          yield path, first, lines
          lines = []
        continue
      if not lines:
        first = lineno
      lines.append(text)
    if lines:
      yield path, first, lines


def encode_document_block(doc_index: int, lines: Sequence[str]) -> bytes:
  """A document as stored in a spill file (and hashed into the shard fingerprint)."""
  return (f"{doc_index}\t{len(lines)}\n" + "\n".join(lines) + "\n").encode("utf-8")


def shard_fingerprint(config: GenerationConfig, spm_hash: str, content_hash: str, shard: int,
                      num_shards: int) -> str:
  """What a finished shard's manifest must match: generation settings, spm model bytes, the shard's text."""
  key = json.dumps(config.generation_key(), sort_keys=True)
  return hashlib.sha256(f"{key}\n{spm_hash}\n{content_hash}\n{shard}/{num_shards}".encode()).hexdigest()


def partition(input_files: Sequence[str], num_shards: int, spill_dir: str, errors: str,
               progress: Progress) -> Tuple[List[str], List[str], Dict[str, int]]:
  """Writes each document to its shard's spill file; returns (spill paths, content hashes, counts)."""
  counts: Dict[str, int] = {}
  spill_paths = [os.path.join(spill_dir, f"shard-{i:05d}.txt") for i in range(num_shards)]
  hashes = [hashlib.sha256() for _ in range(num_shards)]
  # Small per-shard buffers appended to closed files: bounded memory and no open-file limit with many shards.
  buffers = [bytearray() for _ in range(num_shards)]

  def flush(shard: int) -> None:
    with open(spill_paths[shard], "ab") as f:
      f.write(buffers[shard])
    buffers[shard].clear()

  documents = 0
  for _, _, lines in iter_documents(input_files, errors, counts):
    shard = documents % num_shards
    # Spill record: "<doc index>\t<line count>\n" then the lines (no line contains "\n").
    block = encode_document_block(documents, lines)
    buffers[shard] += block
    hashes[shard].update(block)
    if len(buffers[shard]) >= 1 << 16:
      flush(shard)
    documents += 1
    progress.update(documents, "documents partitioned")
  for shard in range(num_shards):
    flush(shard)
  counts["documents_read"] = documents
  return spill_paths, [h.hexdigest() for h in hashes], counts


def _read_spill(path: str) -> Iterator[Tuple[int, List[str]]]:
  with open(path, "rb") as f:
    data = f.read().decode("utf-8")
  lines = data.split("\n")
  i = 0
  while i < len(lines) - 1:
    index, count = lines[i].split("\t")
    count = int(count)
    yield int(index), lines[i + 1:i + 1 + count]
    i += 1 + count


@dataclasses.dataclass
class ShardTask:
  """One shard's work: its documents come from `spill_path`, or from `documents` (the Beam pipeline)."""
  shard_index: int
  num_shards: int
  spill_path: Optional[str]
  output_path: str
  fingerprint: str
  config: GenerationConfig
  documents: Optional[List[Tuple[int, List[str]]]] = None


_WORKER_STATE: Dict[str, object] = {}
def worker_init(counter, lifeline=None) -> None:
  """Pool initializer of a worker: the shared progress counter, quiet logging, and death with the parent.

  Args:
    counter: a shared integer the worker adds its generated instances to (progress display).
    lifeline: the read end of a pipe whose only write end the parent holds (`multiprocessing.Pipe(duplex=False)`);
      None = no parent watch (tests calling the worker functions in-process).
  """
  _WORKER_STATE["counter"] = counter
  logging.getLogger().setLevel(logging.WARNING)
  if lifeline is not None:
    processes.die_with_parent(lifeline)


def tokenizer_and_vocab(config: GenerationConfig):
  """The tokenizer and vocabulary of `config`'s SentencePiece model, cached per process for its shards.

  The cache key holds the model file's SHA-256, not only its path: a notebook that made records, retrained its model
  at the same path and made records again (in this process: `num_workers=1` or one shard) got records tokenized
  with the old model, under a manifest naming the new model's hash. Hashing a model (~1 MB) once per shard is cheap.
  """
  try:
    model_hash = records_lib.file_sha256(config.spm_model_file)
  except Exception:  # pylint: disable=broad-except  (FullTokenizer below names the unreadable model)
    model_hash = None
  key = (config.spm_model_file, model_hash, config.do_lower_case, config.tokenizer_mode)
  cached = _WORKER_STATE.get("tokenizer")
  if cached is not None and cached[0] == key:
    return cached[1], cached[2]
  # FullTokenizer's special-id check (protobuf-free) rejects models without <pad>/<unk>/[CLS]/[SEP]/[MASK] at 0..4.
  tokenizer = tokenization.FullTokenizer(config.spm_model_file, do_lower_case=config.do_lower_case,
                                         mode=config.tokenizer_mode, check_special_ids=True)
  sp = tokenizer.sp_model
  pieces = [sp.IdToPiece(i) for i in range(sp.GetPieceSize())]
  vocab = pi.VocabInfo.from_pieces(pieces)
  _WORKER_STATE["tokenizer"] = (key, tokenizer, vocab)
  return tokenizer, vocab


def tokenize_documents(raw_docs: Sequence[Tuple[int, List[str]]], tokenizer, config: GenerationConfig,
                       counts: Dict[str, int]) -> Tuple[List[int], List[List[np.ndarray]]]:
  """Tokenizes every line once; applies the long-line policy; drops lines/documents without tokens (counted).

  In "hf" mode a special-token string written in the text ("[SEP]", "[MASK]", "<pad>", "[CLS]") becomes that token's
  id, as in HF's tokenizer (the reference modes keep it plain text); such lines are kept and counted in
  `counts["lines_with_special_token_text"]`. The <unk> ids of the kept tokens are counted in `counts["unk_tokens"]`
  (text the vocabulary cannot spell: `spm_model.warn_if_unknown_pieces` warns when there are many).
  """
  max_tokens = config.options.max_num_tokens
  unk_id = tokenizer.vocab[UNK]
  counts.setdefault("unk_tokens", 0)
  all_lines = [line for _, lines in raw_docs for line in lines]
  ids_per_line: List[List[int]] = []
  batch = 4096
  for start in range(0, len(all_lines), batch):
    ids_per_line.extend(tokenizer.encode_ids_batch(all_lines[start:start + batch]))
  if getattr(tokenizer, "mode", None) == "hf":
    specials = {tokenizer.vocab[t] for t in ("<pad>", "[CLS]", "[SEP]", "[MASK]") if t in tokenizer.vocab}
    counts["lines_with_special_token_text"] = counts.get("lines_with_special_token_text", 0) + sum(
        1 for ids in ids_per_line if not specials.isdisjoint(ids))
  doc_indices: List[int] = []
  documents: List[List[np.ndarray]] = []
  k = 0
  for doc_index, lines in raw_docs:
    sentences = []
    for _ in lines:
      ids = ids_per_line[k]
      k += 1
      if not ids:
        counts["lines_without_tokens"] += 1
        continue
      arr = np.asarray(ids, dtype=np.int32)
      truncated = len(arr) > max_tokens and config.long_line_policy == "truncate"
      counts["unk_tokens"] += int(np.count_nonzero((arr[:max_tokens] if truncated else arr) == unk_id))
      if len(arr) > max_tokens and config.long_line_policy != "keep":
        if config.long_line_policy == "split":
          counts["long_lines_split"] += 1
          sentences.extend(arr[s:s + max_tokens] for s in range(0, len(arr), max_tokens))
        else:
          counts["long_lines_truncated"] += 1
          counts["long_line_tokens_dropped"] += len(arr) - max_tokens
          sentences.append(arr[:max_tokens])
        continue
      sentences.append(arr)
    if not sentences:
      counts["documents_without_tokens"] += 1
      continue
    counts["documents"] += 1
    counts["sentences"] += len(sentences)
    if len(sentences) == 1:
      counts["single_sentence_documents"] += 1
    doc_indices.append(doc_index)
    documents.append(sentences)
  return doc_indices, documents


def derive_rng(seed: int, tag: int, a: int, b: int) -> random.Random:
  """The generator of one (tag, a, b) stream of `seed` (string seeds go through SHA-512: no stream overlap)."""
  return random.Random(f"albert-pretraining/{seed}/{tag}/{a}/{b}")


def _iter_shard_records(task: ShardTask, doc_indices: List[int], documents: List[List[np.ndarray]],
                        vocab: pi.VocabInfo, stats: pi.InstanceStats,
                        on_progress: Callable[[int], None], block_size: int = 512) -> Iterator[bytes]:
  """Yields the shard's serialised records in generation order (serialised in blocks)."""
  config = task.config
  opts = config.options
  seed = config.random_seed
  block: List[pi.Instance] = []
  for dupe in range(config.dupe_factor):
    order = list(range(len(documents)))
    derive_rng(seed, _TAG_ORDER, task.shard_index, dupe).shuffle(order)
    for pos in order:
      rng = derive_rng(seed, _TAG_DOC, dupe, doc_indices[pos])
      block.extend(pi.create_instances_from_document(documents, pos, opts, vocab, rng, stats))
      if len(block) >= block_size:
        yield from pretraining_records.serialize_instances(block, opts, vocab)
        on_progress(len(block))
        block = []
  yield from pretraining_records.serialize_instances(block, opts, vocab)
  on_progress(len(block))


def generate_shard(task: ShardTask, progress_cb: Optional[Callable[[int], None]] = None) -> Dict[str, object]:
  """Generates one shard (temp file + rename, then manifest); returns its manifest."""
  import tensorflow as tf  # noqa: PLC0415 (binary: TF after launch)
  config = task.config
  tokenizer, vocab = tokenizer_and_vocab(config)
  cpu_start, wall_start = time.process_time(), time.time()
  counts = {k: 0 for k in ("lines_without_tokens", "long_lines_split", "long_lines_truncated",
                           "long_line_tokens_dropped", "documents_without_tokens", "documents", "sentences",
                           "single_sentence_documents", "lines_with_special_token_text", "unk_tokens")}
  raw_docs = task.documents if task.documents is not None else list(_read_spill(task.spill_path))
  doc_indices, documents = tokenize_documents(raw_docs, tokenizer, config, counts)
  del raw_docs
  # The text's tokens once (the instances' `tokens` count each of --dupe_factor passes): the <unk> fraction's base.
  counts["text_tokens"] = sum(len(s) for sentences in documents for s in sentences)
  stats = pi.InstanceStats(config.options.ngram)
  counter = _WORKER_STATE.get("counter")
  pending = [0]

  def on_progress(n: int) -> None:
    pending[0] += n
    if pending[0] >= 256 or n == 0:
      if counter is not None:
        with counter.get_lock():
          counter.value += pending[0]
      if progress_cb is not None:
        progress_cb(pending[0])
      pending[0] = 0

  records = 0
  with file_io.atomic_path(task.output_path) as tmp_path:
    with tf.io.TFRecordWriter(tmp_path) as writer:
      buffer: List[bytes] = []
      size = config.shuffle_buffer_size
      brng = derive_rng(config.random_seed, _TAG_BUFFER, task.shard_index, task.num_shards)
      for record in _iter_shard_records(task, doc_indices, documents, vocab, stats, on_progress):
        if len(buffer) < size:
          buffer.append(record)
          continue
        j = brng.randrange(size)
        writer.write(buffer[j])
        buffer[j] = record
        records += 1
      brng.shuffle(buffer)
      for record in buffer:
        writer.write(record)
        records += 1
    on_progress(0)
  shard_stats = stats.to_dict()
  shard_stats.update(counts)
  # Tokenizing + generating + writing this shard, in this worker (excludes process start and imports).
  timing = {"cpu_seconds": round(time.process_time() - cpu_start, 3),
            "wall_seconds": round(time.time() - wall_start, 3)}
  manifest = {"format_version": FORMAT_VERSION, "shard": task.shard_index, "num_shards": task.num_shards,
              "fingerprint": task.fingerprint, "records": records, "timing": timing,
              "bytes": tf.io.gfile.stat(task.output_path).length, "sha256": records_lib.file_sha256(task.output_path),
              "stats": shard_stats}
  file_io.atomic_write_json(manifest_path(task.output_path), manifest)
  return manifest


def manifest_path(shard_path: str) -> str:
  return f"{shard_path}.manifest.json"


def finished_manifest(shard_path: str, fingerprint: str) -> Optional[Dict[str, object]]:
  """The manifest of a complete, unchanged shard made with the same fingerprint, else None."""
  gfile = file_io.gfile()
  mpath = manifest_path(shard_path)
  if not (gfile.exists(mpath) and gfile.exists(shard_path)):
    return None
  try:
    with gfile.GFile(mpath, "r") as f:
      manifest = json.load(f)
  except (ValueError, OSError):
    return None
  if manifest.get("fingerprint") != fingerprint:
    return None
  if (gfile.stat(shard_path).length != manifest.get("bytes")
      or records_lib.file_sha256(shard_path) != manifest.get("sha256")):
    logger.warning("%s does not match its manifest; regenerating it.", shard_path)
    return None
  return manifest
