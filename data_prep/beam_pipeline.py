r"""Apache Beam version of `data_prep.create_pretraining_data`: the same shards, byte for byte, on any runner.

Install the optional extra first (it pins protobuf < 7, so it is not in the base requirements):
  pip install -r requirements-beam.txt   (in a checkout; or pip install 'official-albert[beam]')

The pipeline runs the local tool's per-shard function (`create_pretraining_data.generate_shard`) on the same
inputs, so the records are identical to local mode for the same flags and seed:
1. Each input file is read whole by one worker (document boundaries and line numbers need sequential reading);
   a first pass counts its documents, so every document gets the same global index as in local mode.
2. Documents are keyed by shard (global index mod num_output_shards) and grouped: one shard's documents meet in
   one worker (memory per worker ≈ one shard, as locally).
3. Each group runs `generate_shard` (tokenize once, dupe passes, seeded shuffle buffer, temp file + rename,
   manifest); finished shards whose manifest matches are skipped, as locally.
4. The manifests are summed; the run then ends as local mode does (`pretraining_files.finish_run`: no instance is
   an InputError, shards of another `--num_output_shards` are removed) and writes `<output>.stats.json`.

Usage (flags as create_pretraining_data; Beam's own pipeline options in one quoted `--beam_options`, split as the
shell splits words and passed to Beam's PipelineOptions after `--runner`):
  python -m data_prep.beam_pipeline --input_file='gs://bucket/text/*.txt' --output_file=gs://bucket/albert/train \
    --spm_model_file=gs://bucket/30k-clean.model --num_output_shards=512 --runner=DataflowRunner \
    --beam_options='--project=my-project --region=us-central1 --temp_location=gs://bucket/tmp'
Positional arguments are refused (by `main`, as `cli.launch` does for the binaries that take none): a shell-split
`--input_file data/*.txt` would otherwise hand the other files to PipelineOptions, which discards what it cannot parse
with only a warning.
"""

from __future__ import annotations

import hashlib
import json
import shlex
import time
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

from absl import app
from absl import flags

from data_prep import create_pretraining_data as cpd
from data_prep import pretraining_files
from data_prep import pretraining_shards as shards
from official_albert import cli
from official_albert import file_io
from official_albert.serving import export_folder

_PARTITION_KEYS = ("lines_read", "blank_lines", "lines_with_decode_errors")


def count_documents(item: Tuple[int, str], errors: str) -> Tuple[int, Dict[str, int]]:
  """(file index, its partition counts and `documents_read`): the first pass over one input file."""
  index, path = item
  counts: Dict[str, int] = {}
  n = sum(1 for _ in shards.iter_documents([path], errors, counts))
  counts["documents_read"] = n
  return index, counts


def keyed_documents(item: Tuple[int, str], file_counts: Dict[int, Dict[str, int]], errors: str,
                    num_shards: int) -> Iterable[Tuple[int, Tuple[int, List[str]]]]:
  """(shard, (global document index, lines)) for every document of one input file, indexed as in local mode."""
  index, path = item
  offset = sum(c["documents_read"] for f, c in file_counts.items() if f < index)
  for k, (_, _, lines) in enumerate(shards.iter_documents([path], errors)):
    doc_index = offset + k
    yield doc_index % num_shards, (doc_index, lines)


def generate(shard: int, documents: Sequence[Tuple[int, List[str]]], config: cpd.GenerationConfig,
             outputs: Sequence[str], spm_hash: str) -> Dict[str, object]:
  """Writes one shard from its documents (or skips it when its manifest matches); returns its manifest."""
  documents = sorted(documents, key=lambda d: d[0])
  content = hashlib.sha256()
  for doc_index, lines in documents:
    content.update(shards.encode_document_block(doc_index, lines))
  fingerprint = shards.shard_fingerprint(config, spm_hash, content.hexdigest(), shard, len(outputs))
  done = shards.finished_manifest(outputs[shard], fingerprint)
  if done is not None:
    done["skipped"] = True
    return done
  task = shards.ShardTask(shard, len(outputs), None, outputs[shard], fingerprint, config, documents=list(documents))
  return shards.generate_shard(task)


def run(config: cpd.GenerationConfig, pipeline_args: Optional[List[str]] = None,
        runner: str = "DirectRunner") -> Dict[str, object]:
  """Builds and runs the pipeline; returns the stats dict (also written to the stats file).

  The steps before and after the pipeline are the local tool's own (`pretraining_files.start_run` / `finish_run`):
  the old stats file and a killed run's temporaries go first; afterwards a run with no instance raises InputError
  (its empty shards removed), the shards of an earlier run with another `--num_output_shards` are removed, and the
  stats file is written last. The pipeline's last step writes its summary beside the stats file
  (`<stats>.pipeline.json`, on a worker); this process reads it back, removes it and finishes the run.

  Args:
    config: the same config as the local tool (num_workers is ignored: the runner decides parallelism).
    pipeline_args: extra Beam pipeline options (e.g. ["--project=...", "--temp_location=gs://..."]; the binary's
      `--beam_options`, split by `beam_option_args`).
    runner: Beam runner name.

  Raises:
    InputError: missing input files, undecodable bytes (errors="strict"), no text or no instance, as local mode.
    ImportError: Apache Beam is not installed (names the `beam` extra); nothing on disk has been touched.
  """
  config.validate()
  # Before start_run: it deletes the stats file of a finished run, which pretraining reads for the casing and the spm
  # check; without Beam the run must stop while that file is still there.
  require_beam()
  started = time.time()
  input_files = cpd.resolve_input_files(config.input_file)
  outputs = cpd.resolve_output_files(config.output_file, config.num_output_shards)
  stats_path = config.stats_file or f"{config.output_file.split(',')[0].strip()}.stats.json"
  summary_path = f"{stats_path}.pipeline.json"
  pretraining_files.check_outputs_apart(input_files, list(outputs) + [summary_path], stats_path)
  gfile = file_io.gfile()
  with gfile.GFile(config.spm_model_file, "rb") as f:
    spm_hash = hashlib.sha256(f.read()).hexdigest()
  pretraining_files.start_run(list(outputs) + [summary_path], stats_path)
  if file_io.exists(summary_path):
    file_io.remove(summary_path)
  run_pipeline(config, input_files, outputs, spm_hash, summary_path, started, pipeline_args, runner)
  with gfile.GFile(summary_path, "r") as f:
    summary = json.load(f)
  file_io.remove(summary_path)
  summary["elapsed_seconds"] = round(time.time() - started, 3)
  return pretraining_files.finish_run(summary, config.output_file, outputs, input_files, stats_path,
                                      config.tokenizer_mode, spm_model_file=config.spm_model_file)


def require_beam() -> None:
  """An ImportError naming the `beam` extra when Apache Beam is not installed (`run` asks before it touches disk)."""
  export_folder.import_extra("apache_beam", "Apache Beam", "albert-beam-pretraining-data needs it", "beam")


def run_pipeline(config: cpd.GenerationConfig, input_files: Sequence[str], outputs: Sequence[str], spm_hash: str,
                 summary_path: str, started: float, pipeline_args: Optional[List[str]], runner: str) -> None:
  """The Beam pipeline itself: writes every shard, then the run's summary to `summary_path` (see `run`)."""
  import apache_beam as beam  # noqa: PLC0415 (optional extra)
  from apache_beam.options.pipeline_options import PipelineOptions  # noqa: PLC0415 (optional extra)

  num_shards = len(outputs)
  files = list(enumerate(input_files))
  errors = config.errors
  options = PipelineOptions([f"--runner={runner}"] + list(pipeline_args or []))
  with beam.Pipeline(options=options) as p:
    counts = (p | "ListFiles" >> beam.Create(files)
              | "CountDocuments" >> beam.Map(count_documents, errors))
    docs = (p | "ListFilesAgain" >> beam.Create(files)
            | "ReadDocuments" >> beam.FlatMap(keyed_documents, beam.pvalue.AsDict(counts), errors, num_shards))
    written = (docs | "GroupByShard" >> beam.GroupByKey()
               | "GenerateShards" >> beam.Map(lambda kv, *args: generate(kv[0], kv[1], *args), config, outputs,
                                              spm_hash))
    # Shards that received no document are still written (empty), as in local mode.
    present = written | "ShardIds" >> beam.Map(lambda m: int(m["shard"]))
    empty = (p | "AllShards" >> beam.Create(list(range(num_shards)))
             | "Missing" >> beam.Filter(lambda s, got: s not in set(got), beam.pvalue.AsList(present))
             | "GenerateEmpty" >> beam.Map(lambda s: generate(s, [], config, outputs, spm_hash)))
    manifests = ((written, empty) | "AllManifests" >> beam.Flatten()
                 | "Gather" >> beam.combiners.ToList())
    file_counts = counts | "GatherCounts" >> beam.combiners.ToList()
    _ = ((manifests, file_counts) | "Zip" >> beam.Flatten() | "All" >> beam.combiners.ToList()
         | "Summarize" >> beam.Map(write_summary, summary_path, input_files, outputs, config, started, spm_hash))


def write_summary(parts: List[List[object]], summary_path: str, input_files: Sequence[str], outputs: Sequence[str],
                  config: cpd.GenerationConfig, started: float, spm_hash: str) -> None:
  """The pipeline's last step: sums the manifests and the partition counts into `summary_path` (no check here: the
  checks are the local tool's, made by `run` in `pretraining_files.finish_run`). Its `generation` section is local
  mode's, the SentencePiece model's SHA-256 included: the pretraining task refuses records of two models by it."""
  manifests: List[Dict[str, object]] = []
  partition_counts = {k: 0 for k in _PARTITION_KEYS + ("documents_read",)}
  for part in parts:
    for item in part:
      if isinstance(item, dict):
        manifests.append(item)
      else:
        for k, v in item[1].items():
          partition_counts[k] = partition_counts.get(k, 0) + v
  manifests.sort(key=lambda m: int(m["shard"]))
  summary = cpd.summarize(manifests, partition_counts, config.options.ngram)
  skipped = sum(1 for m in manifests if m.get("skipped"))
  summary.update({"input_files": list(input_files), "output_files": list(outputs), "shards_skipped": skipped,
                  "shards_generated": len(manifests) - skipped, "elapsed_seconds": round(time.time() - started, 3),
                  "generation": config.stats_generation(spm_hash), "runner": "beam"})
  file_io.atomic_write_json(summary_path, summary)


# The example the docs, --help and the errors give (tests/data_prep/test_beam_pipeline.py parses it).
BEAM_OPTIONS_EXAMPLE = "--beam_options='--project=my-project --region=us-central1 --temp_location=gs://bucket/tmp'"


def define_flags(fv: flags.FlagValues = flags.FLAGS) -> None:
  """create_pretraining_data's flags plus --runner and --beam_options (Beam's own options: every binary refuses
  positional arguments, and absl refuses flags it does not know, so they travel in one flag)."""
  cpd.define_flags(fv)
  flags.DEFINE_string("runner", "DirectRunner", "Beam runner (DirectRunner, DataflowRunner, FlinkRunner, ...).",
                      flag_values=fv)
  flags.DEFINE_string("beam_options", "", "Beam's own pipeline options in one string, split as the shell splits "
                      "words (shlex) and passed to Beam's PipelineOptions after --runner. Dataflow, e.g.: "
                      f"--runner=DataflowRunner {BEAM_OPTIONS_EXAMPLE}; Flink: --runner=FlinkRunner "
                      "--beam_options='--flink_master=host:8081 --parallelism=8'.", flag_values=fv)


def beam_option_args(text: str) -> List[str]:
  """`--beam_options` as the argument list for PipelineOptions (after `--runner`).

  Raises:
    ValueError: unbalanced quotes, a first word that is not an option (PipelineOptions would discard it with only
      a warning), or a `--runner` inside (the --runner flag sets it; a second one would silently win).
  """
  try:
    args = shlex.split(text or "")
  except ValueError as e:
    raise ValueError(f"--beam_options={text}: {e}; quote it as a shell command line, e.g. {BEAM_OPTIONS_EXAMPLE}."
                     ) from None
  if args and not args[0].startswith("-"):
    raise ValueError(f"--beam_options={text}: {args[0]!r} is not an option; write Beam's options as on its own "
                     f"command line, e.g. {BEAM_OPTIONS_EXAMPLE}.")
  for arg in args:
    if arg == "--runner" or arg.startswith("--runner="):
      raise ValueError(f"--beam_options={text}: set the runner with the --runner flag, not inside --beam_options.")
  return args


def main(argv, fv: flags.FlagValues = flags.FLAGS) -> None:
  if len(argv) > 1:
    raise app.UsageError(f"Unexpected positional arguments {argv[1:]}: this binary takes flags only. Beam's own "
                         f"options go in one flag, not after `--`: {BEAM_OPTIONS_EXAMPLE}. A flag's value is one "
                         "word: join several files with commas or quote a glob (--input_file='data/*.txt').")
  pipeline_args = beam_option_args(fv.beam_options)
  summary = run(cpd.config_from_flags(fv), pipeline_args=pipeline_args, runner=fv.runner)
  print(cpd.format_summary(summary))


def console_main() -> None:
  """The `albert-beam-pretraining-data` console script (pyproject.toml)."""
  cli.launch(define_flags, main, positional=True)  # main refuses them itself, naming --beam_options


if __name__ == "__main__":
  console_main()
