r"""Tokenizes a pretraining corpus once, into compact shards for the on-the-fly pipeline (`dynamic_masking`).

`create_pretraining_data` writes `--dupe_factor` masked copies of the corpus; this tool writes the corpus itself, as
token ids, once. Masking, segment packing and SOP pairs are then drawn inside `tf.data` by
`tasks.pretraining_dynamic` (fresh masks every epoch, no copies on disk).

Input and preprocessing are exactly `create_pretraining_data`'s (its reading and tokenizing code is reused, not
copied): text files with one sentence per line and a blank line between documents, `--errors` for undecodable
UTF-8, `--tokenizer_mode` and `--do_lower_case` for the tokenizer; lines and documents without tokens are dropped
and counted; <unk> ids (`unk_tokens`) and lines spelling a special token (`lines_with_special_token_text`) are
counted, with the static tool's warnings. A corpus from which no example can be made (no document of 2 tokens or
more) is refused, as the static tool refuses it. Lines are stored whole: `--long_line_policy` (split / truncate /
keep lines longer than max_seq_length - 3 tokens) is recorded in the manifests and applied by the pipeline at the
sequence length it trains with, so one tokenized corpus serves seq 128 and seq 512 exactly as the static tool does
at each.

Output in `--output_dir`:
  tokens-NNNNNN            TFRecord shard; one `tf.train.Example` per document with the int64 features
                           `doc_index` [1] (global document index in the corpus, the key of its random draws),
                           `token_ids` [T] (piece ids of the whole document), `word_start` [T] (1 = the piece starts a
                           word: the reference start-piece rule) and `sentence_lengths` [M] (pieces per sentence).
  tokens-NNNNNN.manifest.json  fingerprint, size, SHA-256, counts and the vocabulary facts the pipeline needs
                           (vocab_size, [CLS]/[SEP]/[MASK] ids), and the SentencePiece model's SHA-256 (which the
                           training run checks against its task.spm_model_file).
  tokens.stats.json        totals of the run.
Shard k holds documents [k·D, (k+1)·D) of the corpus (D = `--documents_per_shard`). Point
`task.train_data.input_path` at `<output_dir>/tokens-*` (`.json` sidecars are ignored by the readers).

Streaming and resumable: the corpus is read once, line by line; a shard's documents are tokenized (in a worker
process when `--num_workers` > 1; at most 2·num_workers shards of text in memory) and written to a temporary name
that is renamed when complete. A rerun skips every shard whose manifest records the same fingerprint (tokenizer
settings, SentencePiece model bytes, the shard's text) and whose file still has the recorded size and SHA-256, so a
killed run resumes where it stopped. Shards numbered past the end of the corpus (left by an earlier run on more
text) are removed, with a log line.

Usage:
  python -m data_prep.tokenize_corpus --input_file='corpus/*.txt' --spm_model_file=30k-clean.model \
    --output_dir=/data/albert/tokens --num_workers=8
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import multiprocessing
import os
import re
import time
from typing import Dict, Iterator, List, Sequence, Tuple

from absl import flags
import numpy as np

from data_prep import create_pretraining_data as cpd
from data_prep import pretraining_files
from data_prep import pretraining_instances as pi
from data_prep import pretraining_records
from data_prep import pretraining_shards as shards
from data_prep.pretraining_shards import InputError
from official_albert import cli
from official_albert import file_io
from official_albert.data import records as records_lib
from official_albert.tokenization.spm_model import warn_if_cased_vocabulary
from official_albert.tokenization.spm_model import warn_if_unknown_pieces

logger = logging.getLogger(__name__)

FORMAT_VERSION = 1
SHARD_PREFIX = "tokens-"
STATS_NAME = "tokens.stats.json"
_SHARD_RE = re.compile(r"tokens-(\d{6})")
COUNT_KEYS = ("lines_without_tokens", "long_lines_split", "long_lines_truncated", "long_line_tokens_dropped",
              "documents_without_tokens", "documents", "sentences", "single_sentence_documents",
              "lines_with_special_token_text", "unk_tokens")
# create_pretraining_data's default tokenizer mode (followed, not repeated, so the two tools cannot drift apart).
DEFAULT_TOKENIZER_MODE = cpd.GenerationConfig.__dataclass_fields__["tokenizer_mode"].default


@dataclasses.dataclass
class TokenizeConfig:
  """Everything `tokenize_corpus` needs; field names are the flag names (see `define_flags`)."""
  input_file: str
  spm_model_file: str
  output_dir: str
  do_lower_case: bool = True
  tokenizer_mode: str = DEFAULT_TOKENIZER_MODE
  long_line_policy: str = "split"
  errors: str = "strict"
  documents_per_shard: int = 10000
  num_workers: int = 1
  progress: bool = True

  def validate(self) -> None:
    if self.documents_per_shard < 1:
      raise ValueError(f"--documents_per_shard must be >= 1, got {self.documents_per_shard}.")
    if self.num_workers < 1:
      raise ValueError(f"--num_workers must be >= 1, got {self.num_workers}.")
    if not self.output_dir:
      raise ValueError("--output_dir is required.")
    self.generation_config().validate()

  def generation_config(self) -> cpd.GenerationConfig:
    """The static tool's config with the same preprocessing: what its reading/tokenizing functions take."""
    return cpd.GenerationConfig(
        input_file=self.input_file, output_file=os.path.join(self.output_dir, "unused"),
        spm_model_file=self.spm_model_file, do_lower_case=self.do_lower_case, tokenizer_mode=self.tokenizer_mode,
        long_line_policy="keep", errors=self.errors, progress=False)  # lines whole: the pipeline applies the policy

  def tokenization_key(self) -> Dict[str, object]:
    """The settings that determine a shard's bytes (fingerprint; no paths, no worker count)."""
    return {"format_version": FORMAT_VERSION, "do_lower_case": self.do_lower_case,
            "tokenizer_mode": self.tokenizer_mode, "long_line_policy": self.long_line_policy, "errors": self.errors,
            "documents_per_shard": self.documents_per_shard}


def shard_path(output_dir: str, index: int) -> str:
  return os.path.join(output_dir, f"{SHARD_PREFIX}{index:06d}")


@dataclasses.dataclass
class _ShardJob:
  index: int
  path: str
  fingerprint: str
  config: TokenizeConfig
  documents: List[Tuple[int, List[str]]]


def encode_document(doc_index: int, sentences: Sequence[np.ndarray], is_start: np.ndarray) -> bytes:
  """One document as a serialized `tf.train.Example` (the layout in the module docstring)."""
  ids = np.concatenate(sentences).astype(np.int64)
  return pretraining_records.encode_examples({
      "doc_index": np.array([[doc_index]], np.int64),
      "token_ids": ids[None, :],
      "word_start": is_start[ids].astype(np.int64)[None, :],
      "sentence_lengths": np.array([[len(s) for s in sentences]], np.int64),
  })[0]


def vocab_facts(vocab: pi.VocabInfo) -> Dict[str, int]:
  return {"vocab_size": vocab.vocab_size, "cls_id": vocab.cls_id, "sep_id": vocab.sep_id, "mask_id": vocab.mask_id}


def tokenize_shard(job: _ShardJob) -> Dict[str, object]:
  """Tokenizes one shard's documents and writes the shard (temporary name + rename), then its manifest."""
  import tensorflow as tf  # noqa: PLC0415 (binary: TF after launch)
  gen = job.config.generation_config()
  tokenizer, vocab = shards.tokenizer_and_vocab(gen)
  cpu_start = time.process_time()
  counts = {k: 0 for k in COUNT_KEYS}  # (long_lines_* stay 0 here: the pipeline applies the policy)
  doc_indices, documents = shards.tokenize_documents(job.documents, tokenizer, gen, counts)
  tokens = 0
  with file_io.atomic_path(job.path) as tmp:
    with tf.io.TFRecordWriter(tmp) as writer:
      for doc_index, sentences in zip(doc_indices, documents):
        writer.write(encode_document(doc_index, sentences, vocab.is_start))
        tokens += sum(len(s) for s in sentences)
  counts["tokens"] = tokens
  manifest = {"format_version": FORMAT_VERSION, "shard": job.index, "fingerprint": job.fingerprint,
              "first_document": job.documents[0][0] if job.documents else None,
              "documents_read": len(job.documents), "bytes": tf.io.gfile.stat(job.path).length,
              "sha256": records_lib.file_sha256(job.path), "counts": counts, "vocab": vocab_facts(vocab),
              "spm_model_sha256": records_lib.file_sha256(job.config.spm_model_file),
              "tokenization": job.config.tokenization_key(),
              "cpu_seconds": round(time.process_time() - cpu_start, 3)}
  file_io.atomic_write_json(shards.manifest_path(job.path), manifest)
  return manifest


def _iter_shard_texts(input_files: Sequence[str], config: TokenizeConfig, counts: Dict[str, int]
                      ) -> Iterator[Tuple[int, List[Tuple[int, List[str]]], str]]:
  """Streams (shard index, [(doc index, lines)], content hash) in corpus order."""
  batch: List[Tuple[int, List[str]]] = []
  digest = hashlib.sha256()
  index = 0
  for doc_index, (_, _, lines) in enumerate(shards.iter_documents(input_files, config.errors, counts)):
    batch.append((doc_index, lines))
    digest.update(shards.encode_document_block(doc_index, lines))
    if len(batch) == config.documents_per_shard:
      yield index, batch, digest.hexdigest()
      index, batch, digest = index + 1, [], hashlib.sha256()
  if batch:
    yield index, batch, digest.hexdigest()


def _mp_context():
  """Workers never fork this TensorFlow-loaded process: a forkserver where available, else spawn."""
  if "forkserver" in multiprocessing.get_all_start_methods():
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["tensorflow", "data_prep.pretraining_shards", "official_albert.tokenization"])
    return ctx
  return multiprocessing.get_context("spawn")


def _remove_stale(output_dir: str, num_shards: int) -> List[str]:
  """Removes shards numbered >= num_shards (and their manifests / temporaries); returns what was removed."""
  return pretraining_files.remove_stale_shards(os.path.join(output_dir, SHARD_PREFIX), _SHARD_RE,
                                    lambda match, temporary: temporary or int(match.group(1)) >= num_shards)


# Long because: the tool's run in the order it happens (check, partition, skip finished shards, tokenize, summarise), as
# create_pretraining_data's; the cleanup on failure needs the steps in one scope.
def tokenize_corpus(config: TokenizeConfig) -> Dict[str, object]:
  """Runs the tool; returns the stats dict (also written to `<output_dir>/tokens.stats.json`).

  Raises:
    InputError: missing input files, undecodable bytes (errors="strict"), no token in the whole corpus, or no
      document of 2 tokens or more (no example could be made: `create_pretraining_data` refuses such a corpus too).
      The shards written are removed.
  """
  config.validate()
  started = time.time()
  input_files = cpd.resolve_input_files(config.input_file)
  written = file_io.location_key(config.output_dir)
  for path in input_files:  # (a glob over the output folder: its shards read as text, then replaced or removed)
    if (file_io.location_key(os.path.dirname(path) or ".") == written
        and os.path.basename(path).startswith((SHARD_PREFIX, "tokens.stats"))):
      raise InputError(f"--input_file matched {path!r}, a file this tool writes in --output_dir, not text; narrow "
                       "the pattern to the corpus files (e.g. *.txt), or write to another --output_dir.")
  file_io.makedirs(config.output_dir)
  gen = config.generation_config()
  _, vocab = shards.tokenizer_and_vocab(gen)  # fail fast on an unusable SentencePiece model
  warn_if_cased_vocabulary(config.spm_model_file, config.do_lower_case, logger)
  with file_io.open_file(config.spm_model_file, "rb") as f:
    spm_hash = hashlib.sha256(f.read()).hexdigest()
  key = json.dumps(config.tokenization_key(), sort_keys=True)
  read_counts: Dict[str, int] = {}
  manifests: List[Dict[str, object]] = []
  skipped = 0
  progress = shards.Progress(config.progress, "documents")
  # Only a finished run has a stats file: a run killed from here on leaves its new shards mixed with the earlier
  # run's (stale ones are removed only at the end), and the earlier run's stats would make that mix look complete.
  stats_path = os.path.join(config.output_dir, STATS_NAME)
  if file_io.exists(stats_path):
    file_io.remove(stats_path)
  pool = _mp_context().Pool(config.num_workers) if config.num_workers > 1 else None
  pending = []
  try:
    for index, documents, content_hash in _iter_shard_texts(input_files, config, read_counts):
      path = shard_path(config.output_dir, index)
      fingerprint = hashlib.sha256(f"{key}\n{spm_hash}\n{content_hash}\n{index}".encode()).hexdigest()
      done = shards.finished_manifest(path, fingerprint)
      if done is not None:
        skipped += 1
        manifests.append(done)
        continue
      job = _ShardJob(index, path, fingerprint, config, documents)
      if pool is None:
        manifests.append(tokenize_shard(job))
      else:
        pending.append(pool.apply_async(tokenize_shard, (job,)))
        while len(pending) >= 2 * config.num_workers:  # bounded memory: that many shards of text at most
          manifests.append(pending.pop(0).get())
      progress.update(documents[-1][0] + 1, f"{len(manifests) + len(pending)} shards")
    for result in pending:
      manifests.append(result.get())  # re-raises a worker's exception here
  finally:
    if pool is not None:
      pool.terminate()
      pool.join()
    progress.close()
  num_shards = len(manifests)
  removed = _remove_stale(config.output_dir, num_shards)
  if removed:
    logger.warning("Removed %d shard file(s) past the end of the corpus (left by an earlier run): %s", len(removed),
                   removed[:4])
  totals = {k: 0 for k in COUNT_KEYS + ("tokens",)}
  for m in manifests:
    for k, v in m["counts"].items():
      totals[k] = totals.get(k, 0) + int(v)
  if totals["tokens"] <= totals["documents"]:  # a stored document has >= 1 token: here none has 2
    _remove_stale(config.output_dir, 0)  # shards that make no example are no result worth keeping (as finish_run)
    if totals["documents"] == 0:
      raise InputError(f"no token in --input_file ({', '.join(input_files)}): "
                       f"{read_counts.get('lines_read', 0)} lines read, every one blank or without tokens.")
    # The static tool's "no instance could be made" (finish_run): the pipeline would loop forever for an example.
    raise InputError(f"no pretraining example can be made from --input_file ({', '.join(input_files)}): each of its "
                     f"{totals['documents']} documents with tokens is a single token ({totals['tokens']} tokens), and "
                     "an example needs a document of 2 tokens or more (a segment pair). Give documents of several "
                     "words: one sentence per line, a blank line only between documents.")
  manifests.sort(key=lambda m: int(m["shard"]))
  stats: Dict[str, object] = dict(read_counts)
  stats.update(totals)
  stats.update({"documents_read": sum(int(m["documents_read"]) for m in manifests), "shards": num_shards,
                "shards_skipped": skipped, "shards_written": num_shards - skipped,
                "bytes": sum(int(m["bytes"]) for m in manifests), "vocab": vocab_facts(vocab),
                "input_files": input_files, "output_pattern": os.path.join(config.output_dir, f"{SHARD_PREFIX}*"),
                "tokenization": config.tokenization_key(), "spm_model_sha256": spm_hash,
                "elapsed_seconds": round(time.time() - started, 3)})
  pretraining_files.warn_special_token_text(totals["lines_with_special_token_text"], config.tokenizer_mode, logger)
  warn_if_unknown_pieces(totals["unk_tokens"], totals["tokens"], config.do_lower_case, logger, config.spm_model_file)
  file_io.atomic_write_json(stats_path, stats)
  return stats


# ------------------------------------------------------------------------------------------------------- flags
def define_flags(fv: flags.FlagValues = flags.FLAGS) -> None:
  """Defines the binary's flags on `fv` (never at import time)."""
  flags.DEFINE_string("input_file", None, "Input text: comma-separated files or globs (one sentence per line, "
                      "blank line between documents).", flag_values=fv)
  flags.DEFINE_string("spm_model_file", None, "SentencePiece model.", flag_values=fv)
  flags.DEFINE_string("output_dir", None, "Where the tokens-NNNNNN shards and their manifests go.", flag_values=fv)
  flags.DEFINE_bool("do_lower_case", True, "Lower-case the input text.", flag_values=fv)
  flags.DEFINE_enum("tokenizer_mode", DEFAULT_TOKENIZER_MODE, ["reference", "hf", "upstream_py3"],
                    "FullTokenizer mode (as create_pretraining_data).", flag_values=fv)
  flags.DEFINE_enum("long_line_policy", "split", list(cpd.LONG_LINE_POLICIES),
                    "Lines longer than max_seq_length-3 tokens (at the training seq length): split, truncate or "
                    "keep; applied by the pipeline.", flag_values=fv)
  flags.DEFINE_enum("errors", "strict", list(cpd.ERROR_MODES), "Undecodable UTF-8: fail (strict) or replace + count.",
                    flag_values=fv)
  flags.DEFINE_integer("documents_per_shard", 10000, "Documents per output shard.", flag_values=fv)
  flags.DEFINE_integer("num_workers", 1, "Tokenizer worker processes.", flag_values=fv)
  flags.DEFINE_bool("progress", True, "Progress line on stderr.", flag_values=fv)
  flags.mark_flags_as_required(["input_file", "spm_model_file", "output_dir"], flag_values=fv)


def config_from_flags(f: flags.FlagValues = flags.FLAGS) -> TokenizeConfig:
  return TokenizeConfig(input_file=f.input_file, spm_model_file=f.spm_model_file, output_dir=f.output_dir,
                        do_lower_case=f.do_lower_case, tokenizer_mode=f.tokenizer_mode,
                        long_line_policy=f.long_line_policy, errors=f.errors,
                        documents_per_shard=f.documents_per_shard, num_workers=f.num_workers, progress=f.progress)


def main(argv, fv: flags.FlagValues = flags.FLAGS) -> None:
  del argv
  stats = tokenize_corpus(config_from_flags(fv))
  print(json.dumps({k: stats[k] for k in ("documents", "sentences", "tokens", "shards", "shards_skipped", "bytes",
                                          "lines_without_tokens", "lines_with_decode_errors", "long_lines_split",
                                          "documents_without_tokens", "lines_with_special_token_text", "unk_tokens",
                                          "output_pattern", "elapsed_seconds")},
                   indent=1))


def console_main() -> None:
  """The `albert-tokenize-corpus` console script (pyproject.toml)."""
  cli.launch(define_flags, main)


if __name__ == "__main__":
  console_main()
