r"""Creates ALBERT pretraining TFRecords: n-gram whole-word MLM + sentence-order prediction (reference §3).

Input: text files with one sentence per line and a blank line between documents. Output: TFRecord shards of
`tf.train.Example`s with exactly the reference features (§3.4: `input_ids`, `input_mask`, `segment_ids`,
`token_boundary`, `masked_lm_positions`, `masked_lm_ids`, `masked_lm_weights` (float), `next_sentence_labels`), so
files made by the original tool and by this one are interchangeable; plus `<output>.stats.json` and one
`<shard>.manifest.json` per shard.

How it runs (bounded memory, reproducible, parallel):
1. Partition (one pass, streaming): the input files are read line by line in order (files sorted per glob pattern);
   document k (global index, counting from 0) goes to shard k mod num_output_shards and is appended to that
   shard's spill file in a temporary directory next to the output, `.partition-<pid>-<random>/` (the system temp
   dir for remote outputs), removed at the end. Nothing but the current document is in RAM. A run that is killed
   cannot remove its folder; the next run writing to the same directory does (only folders whose owner process is
   gone: see `pretraining_processes.spill_directory`).
2. Generate (one task per shard, `--num_workers` processes started by a forkserver, never forked from this
   TensorFlow-loaded process): a worker loads one shard's documents, tokenizes every
   line once (reused by all `--dupe_factor` passes) and, per pass, walks the shard's documents in a seeded random
   order. Workers exit as soon as this process is gone, also after kill -9 (`pretraining_processes.die_with_parent`).
   Instances stream through a seeded shuffle buffer (`--shuffle_buffer_size`) into `<shard>.tmp-*`, which
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
and the shard's input text) and whose file still has the recorded size and SHA-256 is skipped. The stats file is
removed before the first shard changes and written last, so only a finished run has one (a killed re-run leaves
shards of two runs and no stats). When the run is complete, the shards `<prefix>-NNNNN-of-MMMMM` of an earlier run
with another `--num_output_shards` (and their manifests) are removed, with a log line: the glob `<prefix>-*` would
read them with the new ones. An input file named twice, under any spelling, is read once; an output file named twice
is refused.

Beyond the reference (each a flag): `--sop_random_document_for_single_sentence` (default False: in-document SOP
negatives), `--long_line_policy`, `--errors`, `--tokenizer_mode`, `--num_output_shards`, `--num_workers`,
`--shuffle_buffer_size`. `--vocab_file` is accepted for compatibility and ignored with `--spm_model_file`, as in
the reference; WordPiece-only data is not supported.

Usage:
  python -m data_prep.create_pretraining_data --input_file=corpus/*.txt --output_file=/data/albert/train \
    --spm_model_file=30k-clean.model --max_seq_length=512 --dupe_factor=40 --num_output_shards=64 --num_workers=8
"""

from __future__ import annotations

import hashlib
import json
import logging
import multiprocessing
import os
import time
from typing import Dict, List, Sequence

from absl import flags

from data_prep import pretraining_instances as pi
from data_prep import pretraining_processes as processes
from data_prep import pretraining_shards as shards

# The settings, and the error create_pretraining_data raises too, are the engine's; importable from here as before.
from data_prep.pretraining_config import ERROR_MODES  # noqa: F401
from data_prep.pretraining_config import GenerationConfig  # noqa: F401
from data_prep.pretraining_config import LONG_LINE_POLICIES  # noqa: F401
from data_prep.pretraining_files import check_outputs_apart
from data_prep.pretraining_files import finish_run
from data_prep.pretraining_files import remove_temporaries
from data_prep.pretraining_files import resolve_input_files
from data_prep.pretraining_files import resolve_output_files
from data_prep.pretraining_files import start_run
from data_prep.pretraining_shards import InputError
from official_albert import cli
from official_albert import file_io
from official_albert.tokenization.spm_model import warn_if_cased_vocabulary

logger = logging.getLogger(__name__)

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
# Long because: the tool's run in the order it happens (check, partition, skip finished shards, generate, summarise);
# the steps are calls into pretraining_shards, and the cleanup on failure needs them in one scope.
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
  check_outputs_apart(input_files, outputs, stats_path)
  gfile = file_io.gfile()
  for out in outputs:
    gfile.makedirs(os.path.dirname(out) or ".")
  with gfile.GFile(config.spm_model_file, "rb") as f:
    spm_hash = hashlib.sha256(f.read()).hexdigest()
  shards.tokenizer_and_vocab(config)  # fail fast on an unusable SentencePiece model, before reading the corpus
  warn_if_cased_vocabulary(config.spm_model_file, config.do_lower_case, logger)

  first_dir = os.path.dirname(outputs[0]) or "."
  with processes.spill_directory(None if "://" in first_dir else first_dir) as spill_dir:
    progress = shards.Progress(config.progress, "partition")
    spill_paths, content_hashes, partition_counts = shards.partition(input_files, num_shards, spill_dir,
                                                                     config.errors, progress)
    progress.close()
    if partition_counts["documents_read"] == 0:
      raise InputError(f"no text in --input_file ({', '.join(input_files)}): every line is blank.")
    tasks, manifests = [], []
    for i, out in enumerate(outputs):
      fingerprint = shards.shard_fingerprint(config, spm_hash, content_hashes[i], i, num_shards)
      done = shards.finished_manifest(out, fingerprint)
      if done is not None:
        logger.info("%s is complete (manifest matches); skipping it.", out)
        manifests.append(done)
      else:
        tasks.append(shards.ShardTask(i, num_shards, spill_paths[i], out, fingerprint, config))
    skipped = len(manifests)
    start_run(outputs, stats_path)  # the old stats file and a killed run's temporaries (shared with Beam mode)
    try:
      manifests.extend(_run_tasks(tasks, config))
    except BaseException:
      remove_temporaries(outputs)  # workers terminated mid-shard cannot clean up themselves
      raise

  manifests.sort(key=lambda m: int(m["shard"]))
  summary = summarize(manifests, partition_counts, config.options.ngram)
  elapsed = time.time() - started
  summary.update({"input_files": input_files, "output_files": outputs, "shards_skipped": skipped,
                  "shards_generated": len(tasks), "elapsed_seconds": round(elapsed, 3),
                  "generation": config.stats_generation(spm_hash)})
  # No instance → InputError (empty shards removed); other shard counts removed; the stats file (shared with Beam).
  return finish_run(summary, config.output_file, outputs, input_files, stats_path, config.tokenizer_mode,
                    spm_model_file=config.spm_model_file)


def _mp_context():
  """Worker processes never fork this (possibly multithreaded, TensorFlow-loaded) process: a forkserver (a fresh
  process that imports TensorFlow and the tokenizer once, then forks each worker) where available, else spawn.

  Never "fork": a forked worker would inherit the write end of the lifeline pipe (and the spill folder's lock) and
  so never notice that this process died."""
  if "forkserver" in multiprocessing.get_all_start_methods():
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["tensorflow", "data_prep.create_pretraining_data", "official_albert.tokenization"])
    return ctx
  return multiprocessing.get_context("spawn")


def _run_tasks(tasks: List[shards.ShardTask], config: GenerationConfig) -> List[Dict[str, object]]:
  if not tasks:
    return []
  progress = shards.Progress(config.progress, "instances")
  done = [0]
  results = []
  if config.num_workers == 1 or len(tasks) == 1:

    def cb(n: int) -> None:
      done[0] += n
      progress.update(done[0])

    for task in tasks:
      results.append(shards.generate_shard(task, cb))
      progress.update(done[0], f"{len(results)}/{len(tasks)} shards", force=True)
    progress.close()
    return results
  ctx = _mp_context()
  counter = ctx.Value("q", 0)
  # The lifeline: only this process holds the write end, so the workers see EOF when it is gone, however it ends
  # (`pretraining_processes.die_with_parent`).
  lifeline_read, lifeline_write = ctx.Pipe(duplex=False)
  try:
    return _run_pool(ctx, tasks, config, counter, lifeline_read, progress, results)
  finally:
    lifeline_write.close()
    lifeline_read.close()


def _run_pool(ctx, tasks, config: GenerationConfig, counter, lifeline, progress, results) -> List[Dict[str, object]]:
  """Runs `tasks` on a pool of `config.num_workers` processes (each watching `lifeline`); appends to `results`."""
  with ctx.Pool(min(config.num_workers, len(tasks)), initializer=shards.worker_init,
                initargs=(counter, lifeline)) as pool:
    pending = [pool.apply_async(shards.generate_shard, (t,)) for t in tasks]
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
          "single_sentence_chunks_split", "chunks_skipped_too_short", "lines_with_special_token_text",
          "unk_tokens", "shards_generated", "shards_skipped",
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
  flags.DEFINE_enum("tokenizer_mode", "hf", ["hf", "reference", "upstream_py3"],
                    "FullTokenizer mode, the same in every tool of the recipe (hf: the default everywhere; reference = "
                    "the reference's preprocess_text + encode_pieces).", flag_values=fv)
  flags.DEFINE_bool("do_whole_word_mask", d.do_whole_word_mask, "Mask whole words (start + continuation pieces).",
                    flag_values=fv)
  flags.DEFINE_bool("do_permutation", d.do_permutation, "Add permuted-token targets (reference option).",
                    flag_values=fv)
  flags.DEFINE_bool("favor_shorter_ngram", d.favor_shorter_ngram, "p(n) ∝ 1/n (False: reversed).", flag_values=fv)
  flags.DEFINE_bool("random_next_sentence", d.random_next_sentence, "BERT NSP instead of SOP.", flag_values=fv)
  flags.DEFINE_bool("sop_random_document_for_single_sentence", d.sop_random_document_for_single_sentence,
                    "Reference behaviour: a one-sentence chunk takes B from a random document (label 1). Default: "
                    "split the sentence at a random word start (in-document SOP negatives only).", flag_values=fv)
  flags.DEFINE_integer("max_seq_length", d.max_seq_length, "Maximum sequence length.", flag_values=fv)
  flags.DEFINE_integer("ngram", d.ngram, "Maximum n-gram length (whole words) to mask.",
                       flag_values=fv)
  flags.DEFINE_integer("max_predictions_per_seq", d.max_predictions_per_seq, "Masked-LM predictions per sequence.",
                       flag_values=fv)
  flags.DEFINE_integer("random_seed", 12345, "Seed of every random draw.", flag_values=fv)
  flags.DEFINE_integer("dupe_factor", 40, "Passes over the data with different masks.",
                       flag_values=fv)
  flags.DEFINE_float("masked_lm_prob", d.masked_lm_prob, "Masked LM probability.", flag_values=fv)
  flags.DEFINE_float("short_seq_prob", d.short_seq_prob, "Probability of a shorter target length per pass.",
                     flag_values=fv)
  flags.DEFINE_integer("num_output_shards", 0, "Output shards (0: one per --output_file entry).", flag_values=fv)
  flags.DEFINE_integer("num_workers", 1, "Worker processes.", flag_values=fv)
  flags.DEFINE_integer("shuffle_buffer_size", 20000, "Per-shard instance shuffle buffer (records).",
                       flag_values=fv)
  flags.DEFINE_enum("long_line_policy", "split", list(LONG_LINE_POLICIES),
                    "Lines longer than max_seq_length-3 tokens: split, truncate or keep (reference).", flag_values=fv)
  flags.DEFINE_enum("errors", "strict", list(ERROR_MODES), "Undecodable UTF-8: fail (strict) or replace + count.",
                    flag_values=fv)
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
