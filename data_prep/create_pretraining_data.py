r"""Creates ALBERT pretraining TFRecords: n-gram whole-word MLM + sentence-order prediction (reference §3).

Input: text files with one sentence per line and a blank line between documents. Output: TFRecord shards of
`tf.train.Example`s with exactly the reference features (§3.4: `input_ids`, `input_mask`, `segment_ids`,
`token_boundary`, `masked_lm_positions`, `masked_lm_ids`, `masked_lm_weights` (float), `next_sentence_labels`), so
files made by the original tool and by this one are interchangeable; plus `<output>.stats.json` and one
`<shard>.manifest.json` per shard.

How it runs (bounded memory, reproducible, parallel):
1. Partition (one pass, streaming): the input files are read line by line in order (files sorted per glob pattern);
   document k (global index, counting from 0) goes to shard k mod num_output_shards and is appended to that
   shard's spill file in a temporary directory next to the output (the system temp dir for remote outputs),
   removed at the end. Nothing but the current document is in RAM.
2. Generate (one task per shard, `--num_workers` processes started by a forkserver, never forked from this
   TensorFlow-loaded process): a worker loads one shard's documents, tokenizes every
   line once (reused by all `--dupe_factor` passes) and, per pass, walks the shard's documents in a seeded random
   order. Instances stream through a seeded shuffle buffer (`--shuffle_buffer_size`) into `<shard>.tmp-*`, which
   is renamed to the shard name when complete; then the manifest is written. Memory per worker is about one
   shard's token ids plus the shuffle buffer, so choose num_output_shards ≈ corpus size / memory you can spare.
3. Merge: shard statistics are summed into the stats JSON.

Bounded-memory equivalents of the reference's whole-corpus steps: the reference shuffles the document list and
the final instance list in RAM and draws random-document negatives from the whole corpus; here documents are
shuffled per shard and pass, instances are shuffled by a buffer within the shard (the training reader interleaves
and shuffles across shards again), and random-document negatives (only with `--random_next_sentence` or
`--sop_random_document_for_single_sentence`) come from the same shard.

Seeding: every draw comes from `--random_seed` (Python `random.Random` streams, see `derive_rng`). A (document,
pass) uses the stream (seed, 0, pass, global document index), the pass order of a shard (seed, 1, shard, pass) and
its shuffle buffer (seed, 2, shard, num_shards). So the output does not depend on `--num_workers` or on
scheduling, and in the default SOP mode the multiset of records does not even depend on `--num_output_shards`.
Scripts that call `create_pretraining_data` with num_workers > 1 need the usual `if __name__ == "__main__":` guard
(worker processes re-import the main module).

Re-runs: a shard whose manifest records the same fingerprint (all generation flags, the SentencePiece model bytes
and the shard's input text) and whose file still has the recorded size and SHA-256 is skipped.

Beyond the reference (each a flag): `--sop_random_document_for_single_sentence` (default False: in-document SOP
negatives), `--long_line_policy`, `--errors`, `--tokenizer_mode`, `--num_output_shards`, `--num_workers`,
`--shuffle_buffer_size`. `--vocab_file` is accepted for compatibility and ignored with `--spm_model_file`, as in
the reference; WordPiece-only data is not supported.

Usage:
  python -m data_prep.create_pretraining_data --input_file=corpus/*.txt --output_file=/data/albert/train \
    --spm_model_file=30k-clean.model --max_seq_length=512 --dupe_factor=40 --num_output_shards=64 --num_workers=8
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import multiprocessing
import os
import random
import shutil
import sys
import tempfile
import time
from typing import Callable, Dict, Iterator, List, Optional, Sequence, Tuple

from absl import flags
import numpy as np

from data_prep import pretraining_instances as pi
from official_albert import cli, file_io

logger = logging.getLogger(__name__)

FORMAT_VERSION = 1
LONG_LINE_POLICIES = ("split", "truncate", "keep")
ERROR_MODES = ("strict", "replace")
_TAG_DOC, _TAG_ORDER, _TAG_BUFFER = 0, 1, 2


class InputError(ValueError):
  """Bad input (missing files, empty corpus, undecodable bytes); the message names the file and line."""


@dataclasses.dataclass
class GenerationConfig:
  """Everything `create_pretraining_data` needs; field names are the flag names.

  Attributes:
    input_file: comma-separated files or glob patterns (each pattern must match at least one file).
    output_file: one path (with num_output_shards > 1 a prefix: `<prefix>-00000-of-00008`) or a comma list of
      shard paths.
    spm_model_file: SentencePiece model (ids <pad>=0 <unk>=1 [CLS]=2 [SEP]=3 [MASK]=4).
    vocab_file: accepted for reference compatibility; ignored (WordPiece data is not supported).
    do_lower_case: lower-case the text before tokenizing.
    tokenizer_mode: `FullTokenizer` mode; "reference" (default) is the reference's preprocess_text + encode_pieces
      (special-token strings in the corpus stay plain text), "hf" HF's slow tokenizer, "upstream_py3" upstream.
    options: the instance-creation options (reference flags).
    random_seed: the one seed of every draw (>= 0).
    dupe_factor: passes over the data, each with new masks / segment choices.
    num_output_shards: shards to write (0 = one per comma-separated output path).
    num_workers: parallel processes (1 = in this process).
    shuffle_buffer_size: per-shard instance shuffle buffer (records in RAM per worker).
    long_line_policy: lines with more tokens than max_seq_length - 3: "split" into consecutive sentences of at most
      that many tokens (default), "truncate" to that many, or "keep" (reference: the pair truncation cuts them).
    errors: "strict" (default) fails on undecodable UTF-8 naming file:line; "replace" uses U+FFFD and counts lines.
    stats_file: where to write the stats JSON (default `<output>.stats.json`).
    progress: draw a progress line on stderr.
  """
  input_file: str
  output_file: str
  spm_model_file: str
  vocab_file: Optional[str] = None
  do_lower_case: bool = True
  tokenizer_mode: str = "reference"
  options: pi.InstanceOptions = dataclasses.field(default_factory=pi.InstanceOptions)
  random_seed: int = 12345
  dupe_factor: int = 40
  num_output_shards: int = 0
  num_workers: int = 1
  shuffle_buffer_size: int = 20000
  long_line_policy: str = "split"
  errors: str = "strict"
  stats_file: Optional[str] = None
  progress: bool = True

  def validate(self) -> None:
    self.options.validate()
    if self.random_seed < 0:
      raise ValueError(f"--random_seed must be >= 0, got {self.random_seed}.")
    if self.dupe_factor < 1:
      raise ValueError(f"--dupe_factor must be >= 1, got {self.dupe_factor}.")
    if self.num_workers < 1:
      raise ValueError(f"--num_workers must be >= 1, got {self.num_workers}.")
    if self.shuffle_buffer_size < 1:
      raise ValueError(f"--shuffle_buffer_size must be >= 1, got {self.shuffle_buffer_size}.")
    if self.long_line_policy not in LONG_LINE_POLICIES:
      raise ValueError(f"--long_line_policy must be one of {LONG_LINE_POLICIES}, got {self.long_line_policy!r}.")
    if self.errors not in ERROR_MODES:
      raise ValueError(f"--errors must be one of {ERROR_MODES}, got {self.errors!r}.")
    if not self.spm_model_file:
      raise ValueError("--spm_model_file is required (WordPiece-only data from --vocab_file is not supported).")

  def generation_key(self) -> Dict[str, object]:
    """The settings that determine the output bytes (for the fingerprint; no worker count, no paths)."""
    return {"format_version": FORMAT_VERSION, "do_lower_case": self.do_lower_case,
            "tokenizer_mode": self.tokenizer_mode, "options": dataclasses.asdict(self.options),
            "random_seed": self.random_seed, "dupe_factor": self.dupe_factor,
            "shuffle_buffer_size": self.shuffle_buffer_size, "long_line_policy": self.long_line_policy,
            "errors": self.errors}


# ------------------------------------------------------------------------------------------------- file helpers
def resolve_input_files(input_file: str) -> List[str]:
  """Comma list of files/globs → sorted files per pattern, in pattern order, duplicates removed."""
  gfile = file_io.gfile()
  files: List[str] = []
  patterns = [p.strip() for p in input_file.split(",") if p.strip()]
  if not patterns:
    raise InputError("--input_file is empty.")
  for pattern in patterns:
    matched = sorted(gfile.glob(pattern))
    if not matched:
      raise InputError(f"--input_file pattern {pattern!r} matches no file.")
    for path in matched:
      if gfile.isdir(path):
        raise InputError(f"--input_file {path!r} is a directory, not a text file.")
      if path not in files:
        files.append(path)
  return files


def resolve_output_files(output_file: str, num_output_shards: int) -> List[str]:
  """The shard paths for `--output_file` / `--num_output_shards`."""
  outputs = [p.strip() for p in output_file.split(",") if p.strip()]
  if not outputs:
    raise ValueError("--output_file is empty.")
  if len(outputs) > 1:
    if num_output_shards not in (0, len(outputs)):
      raise ValueError(f"--num_output_shards={num_output_shards} but --output_file lists {len(outputs)} files.")
    return outputs
  n = num_output_shards or 1
  if n == 1:
    return outputs
  return [f"{outputs[0]}-{i:05d}-of-{n:05d}" for i in range(n)]


def _sha256_file(path: str) -> str:
  h = hashlib.sha256()
  with file_io.open_file(path, "rb") as f:
    while True:
      block = f.read(1 << 22)
      if not block:
        break
      h.update(block)
  return h.hexdigest()


# ---------------------------------------------------------------------------------------------------- progress
class _Progress:
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


# --------------------------------------------------------------------------------------------------- partition
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
    with file_io.open_file(path, "rb") as f:
      for lineno, raw in enumerate(f, start=1):
        counts["lines_read"] += 1
        try:
          text = raw.decode("utf-8")
        except UnicodeDecodeError as e:
          if errors != "replace":
            raise InputError(
                f"{path}:{lineno}: invalid UTF-8 (byte 0x{raw[e.start]:02x} at column {e.start + 1}); fix the file "
                f"or pass --errors=replace to substitute U+FFFD (counted in the stats).") from None
          text = raw.decode("utf-8", "replace")
          counts["lines_with_decode_errors"] += 1
        if lineno == 1 and text.startswith("\ufeff"):
          text = text[1:]
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


def _partition(input_files: Sequence[str], num_shards: int, spill_dir: str, errors: str,
               progress: _Progress) -> Tuple[List[str], List[str], Dict[str, int]]:
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


# -------------------------------------------------------------------------------------------------- generation
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


def _worker_init(counter) -> None:
  _WORKER_STATE["counter"] = counter
  logging.getLogger().setLevel(logging.WARNING)


def _tokenizer_and_vocab(config: GenerationConfig):
  key = (config.spm_model_file, config.do_lower_case, config.tokenizer_mode)
  cached = _WORKER_STATE.get("tokenizer")
  if cached is not None and cached[0] == key:
    return cached[1], cached[2]
  from official_albert import tokenization  # pylint: disable=g-import-not-at-top
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
  """Tokenizes every line once; applies the long-line policy; drops lines/documents without tokens (counted)."""
  max_tokens = config.options.max_num_tokens
  all_lines = [line for _, lines in raw_docs for line in lines]
  ids_per_line: List[List[int]] = []
  batch = 4096
  for start in range(0, len(all_lines), batch):
    ids_per_line.extend(tokenizer.encode_ids_batch(all_lines[start:start + batch]))
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
        yield from pi.serialize_instances(block, opts, vocab)
        on_progress(len(block))
        block = []
  yield from pi.serialize_instances(block, opts, vocab)
  on_progress(len(block))


def generate_shard(task: ShardTask, progress_cb: Optional[Callable[[int], None]] = None) -> Dict[str, object]:
  """Generates one shard (temp file + rename, then manifest); returns its manifest."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  config = task.config
  tokenizer, vocab = _tokenizer_and_vocab(config)
  cpu_start, wall_start = time.process_time(), time.time()
  counts = {k: 0 for k in ("lines_without_tokens", "long_lines_split", "long_lines_truncated",
                           "long_line_tokens_dropped", "documents_without_tokens", "documents", "sentences",
                           "single_sentence_documents")}
  raw_docs = task.documents if task.documents is not None else list(_read_spill(task.spill_path))
  doc_indices, documents = tokenize_documents(raw_docs, tokenizer, config, counts)
  del raw_docs
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
              "bytes": tf.io.gfile.stat(task.output_path).length, "sha256": _sha256_file(task.output_path),
              "stats": shard_stats}
  file_io.atomic_write_json(_manifest_path(task.output_path), manifest)
  return manifest


def _remove_temporaries(outputs: Sequence[str]) -> None:
  gfile = file_io.gfile()
  for out in outputs:
    for tmp in gfile.glob(f"{out}.tmp-*"):
      gfile.remove(tmp)


def _manifest_path(shard_path: str) -> str:
  return f"{shard_path}.manifest.json"


def finished_manifest(shard_path: str, fingerprint: str) -> Optional[Dict[str, object]]:
  """The manifest of a complete, unchanged shard made with the same fingerprint, else None."""
  gfile = file_io.gfile()
  mpath = _manifest_path(shard_path)
  if not (gfile.exists(mpath) and gfile.exists(shard_path)):
    return None
  try:
    with gfile.GFile(mpath, "r") as f:
      manifest = json.load(f)
  except (ValueError, OSError):
    return None
  if manifest.get("fingerprint") != fingerprint:
    return None
  if gfile.stat(shard_path).length != manifest.get("bytes") or _sha256_file(shard_path) != manifest.get("sha256"):
    logger.warning("%s does not match its manifest; regenerating it.", shard_path)
    return None
  return manifest


# ----------------------------------------------------------------------------------------------------- summary
def summarize(manifests: Sequence[Dict[str, object]], partition_counts: Dict[str, int], ngram: int
              ) -> Dict[str, object]:
  """Sums shard statistics and adds derived fractions."""
  total = pi.InstanceStats(ngram)
  extra: Dict[str, int] = {}
  for m in manifests:
    s = m["stats"]
    total.merge(pi.InstanceStats.from_dict(s))
    for k, v in s.items():
      if k not in pi.InstanceStats.COUNTERS and isinstance(v, int):
        extra[k] = extra.get(k, 0) + v
  out: Dict[str, object] = dict(partition_counts)
  out.update(extra)
  out.update(total.to_dict())
  c = total.counts
  out["records"] = int(sum(int(m["records"]) for m in manifests))
  cpu = sum(float(m.get("timing", {}).get("cpu_seconds", 0.0)) for m in manifests)
  out["worker_cpu_seconds"] = round(cpu, 3)
  out["instances_per_worker_cpu_second"] = round(c["instances"] / cpu, 1) if cpu > 0 else None
  out["masked_fraction"] = c["masked_tokens"] / max(1, c["tokens"])
  out["sop_label_1_fraction"] = c["sop_label_1"] / max(1, c["instances"])
  masked = max(1, c["masked_tokens"])
  out["replacement_fractions"] = {"mask": c["replaced_mask"] / masked, "keep": c["replaced_keep"] / masked,
                                  "random": c["replaced_random"] / masked}
  drawn = max(1, sum(total.ngram_drawn))
  out["ngram_drawn_fractions"] = {str(i + 1): int(v) / drawn for i, v in enumerate(total.ngram_drawn)}
  return out


# -------------------------------------------------------------------------------------------------------- main
def create_pretraining_data(config: GenerationConfig) -> Dict[str, object]:
  """Runs partition → generation → summary; returns the stats dict (also written to the stats file).

  Raises:
    InputError: missing input files, undecodable bytes (errors="strict"), or no text at all. No shard is left
      half-written: shards are written to temporary names and renamed when complete.
  """
  config.validate()
  if config.vocab_file:
    logger.warning("--vocab_file=%s is ignored: the vocabulary is the SentencePiece model's.", config.vocab_file)
  started = time.time()
  input_files = resolve_input_files(config.input_file)
  outputs = resolve_output_files(config.output_file, config.num_output_shards)
  num_shards = len(outputs)
  stats_path = config.stats_file or f"{config.output_file.split(',')[0].strip()}.stats.json"
  gfile = file_io.gfile()
  for out in outputs:
    gfile.makedirs(os.path.dirname(out) or ".")
  with gfile.GFile(config.spm_model_file, "rb") as f:
    spm_hash = hashlib.sha256(f.read()).hexdigest()
  _tokenizer_and_vocab(config)  # fail fast on an unusable SentencePiece model, before reading the corpus

  first_dir = os.path.dirname(outputs[0]) or "."
  spill_dir = tempfile.mkdtemp(prefix=".partition-", dir=None if "://" in first_dir else first_dir)
  try:
    progress = _Progress(config.progress, "partition")
    spill_paths, content_hashes, partition_counts = _partition(input_files, num_shards, spill_dir, config.errors,
                                                               progress)
    progress.close()
    if partition_counts["documents_read"] == 0:
      raise InputError(f"no text in --input_file ({', '.join(input_files)}): every line is blank.")
    tasks, manifests = [], []
    for i, out in enumerate(outputs):
      fingerprint = shard_fingerprint(config, spm_hash, content_hashes[i], i, num_shards)
      done = finished_manifest(out, fingerprint)
      if done is not None:
        logger.info("%s is complete (manifest matches); skipping it.", out)
        manifests.append(done)
      else:
        tasks.append(ShardTask(i, num_shards, spill_paths[i], out, fingerprint, config))
    skipped = len(manifests)
    _remove_temporaries(outputs)  # left by a killed earlier run
    try:
      manifests.extend(_run_tasks(tasks, config))
    except BaseException:
      _remove_temporaries(outputs)  # workers terminated mid-shard cannot clean up themselves
      raise
  finally:
    shutil.rmtree(spill_dir, ignore_errors=True)

  manifests.sort(key=lambda m: int(m["shard"]))
  summary = summarize(manifests, partition_counts, config.options.ngram)
  if summary["records"] == 0:
    for out in outputs:  # empty shards are not a result worth keeping
      for path in (out, _manifest_path(out)):
        if gfile.exists(path):
          gfile.remove(path)
    raise InputError(f"no instance could be made from --input_file ({', '.join(input_files)}): "
                     f"{summary.get('documents', 0)} documents with tokens.")
  elapsed = time.time() - started
  summary.update({"input_files": input_files, "output_files": outputs, "shards_skipped": skipped,
                  "shards_generated": len(tasks), "elapsed_seconds": round(elapsed, 3),
                  "generation": config.generation_key()})
  file_io.atomic_write_json(stats_path, summary)
  return summary


def _mp_context():
  """Worker processes never fork this (possibly multithreaded, TensorFlow-loaded) process: a forkserver (a fresh
  process that imports TensorFlow and the tokenizer once, then forks each worker) where available, else spawn."""
  if "forkserver" in multiprocessing.get_all_start_methods():
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["tensorflow", "data_prep.create_pretraining_data", "official_albert.tokenization"])
    return ctx
  return multiprocessing.get_context("spawn")


def _run_tasks(tasks: List[ShardTask], config: GenerationConfig) -> List[Dict[str, object]]:
  if not tasks:
    return []
  progress = _Progress(config.progress, "instances")
  done = [0]
  results = []
  if config.num_workers == 1 or len(tasks) == 1:

    def cb(n: int) -> None:
      done[0] += n
      progress.update(done[0])

    for task in tasks:
      results.append(generate_shard(task, cb))
      progress.update(done[0], f"{len(results)}/{len(tasks)} shards", force=True)
    progress.close()
    return results
  ctx = _mp_context()
  counter = ctx.Value("q", 0)
  with ctx.Pool(min(config.num_workers, len(tasks)), initializer=_worker_init, initargs=(counter,)) as pool:
    pending = [pool.apply_async(generate_shard, (t,)) for t in tasks]
    while pending:
      still = []
      for r in pending:
        if r.ready():
          results.append(r.get())  # re-raises a worker's exception here
        else:
          still.append(r)
      pending = still
      progress.update(counter.value, f"{len(results)}/{len(tasks)} shards")
      if pending:
        time.sleep(0.1)
  progress.update(counter.value, f"{len(results)}/{len(tasks)} shards", force=True)
  progress.close()
  return results


def format_summary(summary: Dict[str, object]) -> str:
  keys = ("documents", "instances", "records", "tokens", "masked_fraction", "sop_label_1_fraction",
          "replacement_fractions", "ngram_drawn_fractions", "ngram_masked_histogram", "lines_without_tokens",
          "lines_with_decode_errors", "long_lines_split", "long_lines_truncated", "documents_without_tokens",
          "single_sentence_chunks_split", "chunks_skipped_too_short", "shards_generated", "shards_skipped",
          "worker_cpu_seconds", "instances_per_worker_cpu_second", "elapsed_seconds")
  return json.dumps({k: summary.get(k) for k in keys}, indent=1)


# ------------------------------------------------------------------------------------------------------- flags
def define_flags(fv: flags.FlagValues = flags.FLAGS) -> None:
  """Defines the binary's flags on `fv` (never at import time)."""
  d = pi.InstanceOptions()
  flags.DEFINE_string("input_file", None, "Input text: comma-separated files or globs (one sentence per line, "
                      "blank line between documents).", flag_values=fv)
  flags.DEFINE_string("output_file", None, "Output TFRecord path (prefix when --num_output_shards > 1) or a "
                      "comma-separated list of shard paths.", flag_values=fv)
  flags.DEFINE_string("spm_model_file", None, "SentencePiece model.", flag_values=fv)
  flags.DEFINE_string("vocab_file", None, "Accepted for compatibility with the reference; ignored.", flag_values=fv)
  flags.DEFINE_bool("do_lower_case", True, "Lower-case the input text.", flag_values=fv)
  flags.DEFINE_enum("tokenizer_mode", "reference", ["reference", "hf", "upstream_py3"],
                    "FullTokenizer mode (reference = the reference's preprocess_text + encode_pieces).", flag_values=fv)
  flags.DEFINE_bool("do_whole_word_mask", d.do_whole_word_mask, "Mask whole words (start + continuation pieces).", flag_values=fv)
  flags.DEFINE_bool("do_permutation", d.do_permutation, "Add permuted-token targets (reference option).", flag_values=fv)
  flags.DEFINE_bool("favor_shorter_ngram", d.favor_shorter_ngram, "p(n) ∝ 1/n (False: reversed).", flag_values=fv)
  flags.DEFINE_bool("random_next_sentence", d.random_next_sentence, "BERT NSP instead of SOP.", flag_values=fv)
  flags.DEFINE_bool("sop_random_document_for_single_sentence", d.sop_random_document_for_single_sentence,
                    "Reference behaviour: a one-sentence chunk takes B from a random document (label 1). Default: "
                    "split the sentence at a random word start (in-document SOP negatives only).", flag_values=fv)
  flags.DEFINE_integer("max_seq_length", d.max_seq_length, "Maximum sequence length.", flag_values=fv)
  flags.DEFINE_integer("ngram", d.ngram, "Maximum n-gram length (whole words) to mask.", flag_values=fv)
  flags.DEFINE_integer("max_predictions_per_seq", d.max_predictions_per_seq, "Masked-LM predictions per sequence.", flag_values=fv)
  flags.DEFINE_integer("random_seed", 12345, "Seed of every random draw.", flag_values=fv)
  flags.DEFINE_integer("dupe_factor", 40, "Passes over the data with different masks.", flag_values=fv)
  flags.DEFINE_float("masked_lm_prob", d.masked_lm_prob, "Masked LM probability.", flag_values=fv)
  flags.DEFINE_float("short_seq_prob", d.short_seq_prob, "Probability of a shorter target length per pass.", flag_values=fv)
  flags.DEFINE_integer("num_output_shards", 0, "Output shards (0: one per --output_file entry).", flag_values=fv)
  flags.DEFINE_integer("num_workers", 1, "Worker processes.", flag_values=fv)
  flags.DEFINE_integer("shuffle_buffer_size", 20000, "Per-shard instance shuffle buffer (records).", flag_values=fv)
  flags.DEFINE_enum("long_line_policy", "split", list(LONG_LINE_POLICIES),
                    "Lines longer than max_seq_length-3 tokens: split, truncate or keep (reference).", flag_values=fv)
  flags.DEFINE_enum("errors", "strict", list(ERROR_MODES), "Undecodable UTF-8: fail (strict) or replace + count.", flag_values=fv)
  flags.DEFINE_string("stats_file", None, "Stats JSON path (default <output_file>.stats.json).", flag_values=fv)
  flags.DEFINE_bool("progress", True, "Progress line on stderr.", flag_values=fv)
  flags.mark_flags_as_required(["input_file", "output_file", "spm_model_file"], flag_values=fv)


def config_from_flags(f: flags.FlagValues = flags.FLAGS) -> GenerationConfig:
  """The GenerationConfig that the parsed flags `f` describe."""
  options = pi.InstanceOptions(
      max_seq_length=f.max_seq_length, max_predictions_per_seq=f.max_predictions_per_seq,
      masked_lm_prob=f.masked_lm_prob, short_seq_prob=f.short_seq_prob, ngram=f.ngram,
      favor_shorter_ngram=f.favor_shorter_ngram, do_whole_word_mask=f.do_whole_word_mask,
      do_permutation=f.do_permutation, random_next_sentence=f.random_next_sentence,
      sop_random_document_for_single_sentence=f.sop_random_document_for_single_sentence)
  return GenerationConfig(
      input_file=f.input_file, output_file=f.output_file, spm_model_file=f.spm_model_file,
      vocab_file=f.vocab_file, do_lower_case=f.do_lower_case, tokenizer_mode=f.tokenizer_mode, options=options,
      random_seed=f.random_seed, dupe_factor=f.dupe_factor, num_output_shards=f.num_output_shards,
      num_workers=f.num_workers, shuffle_buffer_size=f.shuffle_buffer_size, long_line_policy=f.long_line_policy,
      errors=f.errors, stats_file=f.stats_file, progress=f.progress)


def main(argv, fv: flags.FlagValues = flags.FLAGS) -> None:
  del argv
  summary = create_pretraining_data(config_from_flags(fv))
  print(format_summary(summary))


def console_main() -> None:
  """The `albert-create-pretraining-data` console script (pyproject.toml)."""
  cli.launch(define_flags, main)


if __name__ == "__main__":
  console_main()
