"""Tests of `data_prep.beam_pipeline`'s command line: how Beam's own options reach PipelineOptions.

Beam is an optional extra (requirements-beam.txt), so a stand-in `apache_beam` records what the pipeline is built
with; the pipeline's own steps are tested against local mode in test_create_pretraining_data.py.
"""

import re
import shlex
import sys
import types

from absl import app
from absl import flags
import pytest

from data_prep import beam_pipeline
from tests.data_prep.test_create_pretraining_data import corpus_docs
from tests.data_prep.test_create_pretraining_data import write_corpus

DATAFLOW_OPTIONS = ["--project=my-project", "--region=us-central1", "--temp_location=gs://bucket/tmp"]


class _Built(Exception):
  """Raised by the stand-in Pipeline once it has its options: nothing of the pipeline runs."""


def _stand_in_beam(monkeypatch):
  """Installs a stand-in `apache_beam` whose PipelineOptions records its arguments; returns that record."""
  seen = []

  class PipelineOptions:
    def __init__(self, args):
      seen.append(list(args))

  def pipeline(options):
    raise _Built()

  beam = types.ModuleType("apache_beam")
  beam.Pipeline = pipeline
  options = types.ModuleType("apache_beam.options")
  pipeline_options = types.ModuleType("apache_beam.options.pipeline_options")
  pipeline_options.PipelineOptions = PipelineOptions
  for module in (beam, options, pipeline_options):
    monkeypatch.setitem(sys.modules, module.__name__, module)
  return seen


def _flag_values(argv):
  fv = flags.FlagValues()
  beam_pipeline.define_flags(fv)
  return fv, fv(argv)


def _documented_command():
  """The words of the command line in the module docstring's Usage (after `python -m data_prep.beam_pipeline`)."""
  doc = beam_pipeline.__doc__
  command = doc[doc.index("  python -m data_prep.beam_pipeline"):].split("\n")
  lines = [command[0]]
  while lines[-1].endswith("\\"):
    lines.append(command[len(lines)])
  return shlex.split(" ".join(line.rstrip("\\") for line in lines))[3:]


def test_documented_command_line_passes_beam_options_after_the_runner(monkeypatch):
  """Every binary refuses positional arguments and absl unknown flags: Beam's options (Dataflow's --project, ...)
  had no way in. They travel in --beam_options; the docstring's command and --help's example parse."""
  calls = []
  monkeypatch.setattr(beam_pipeline, "run", lambda config, pipeline_args, runner: calls.append(
      (config.input_file, pipeline_args, runner)) or {})
  monkeypatch.setattr(beam_pipeline.cpd, "format_summary", lambda summary: "")
  words = _documented_command()
  fv, argv = _flag_values(["prog"] + words)
  beam_pipeline.main(argv, fv)
  assert calls == [("gs://bucket/text/*.txt", DATAFLOW_OPTIONS, "DataflowRunner")]
  assert f"--runner=DataflowRunner {beam_pipeline.BEAM_OPTIONS_EXAMPLE}" in fv["beam_options"].help
  assert shlex.split(beam_pipeline.BEAM_OPTIONS_EXAMPLE) == [f"--beam_options={' '.join(DATAFLOW_OPTIONS)}"]
  assert beam_pipeline.beam_option_args("") == []
  assert beam_pipeline.beam_option_args("--project 'my project' --num_workers=4") == [
      "--project", "my project", "--num_workers=4"]


def test_beam_options_reach_pipeline_options(tmp_path, spm_model_file, monkeypatch):
  seen = _stand_in_beam(monkeypatch)
  corpus = write_corpus(tmp_path / "corpus.txt", corpus_docs(num_docs=4))
  fv, argv = _flag_values(["prog", f"--input_file={corpus}", f"--output_file={tmp_path / 'train'}",
                           f"--spm_model_file={spm_model_file}", "--runner=FlinkRunner",
                           "--beam_options=--flink_master=localhost:8081 --parallelism=2"])
  with pytest.raises(_Built):
    beam_pipeline.main(argv, fv)
  assert seen == [["--runner=FlinkRunner", "--flink_master=localhost:8081", "--parallelism=2"]]


@pytest.mark.parametrize("text, message", [
    ("--project='my-project", "No closing quotation"),
    ("project=my-project", "'project=my-project' is not an option"),
    ("--region=us-central1 --runner=DirectRunner", "set the runner with the --runner flag"),
])
def test_bad_beam_options_are_refused_naming_the_flag(text, message):
  with pytest.raises(ValueError, match=re.escape(message)) as raised:
    beam_pipeline.beam_option_args(text)
  assert str(raised.value).startswith(f"--beam_options={text}: ")


def test_positional_arguments_are_refused_naming_beam_options(monkeypatch):
  """The old form (Beam options after `--`) and a shell-split --input_file would reach PipelineOptions, which
  discards what it cannot parse (the other files) without an error."""
  monkeypatch.setattr(beam_pipeline, "run", lambda *args, **kwargs: pytest.fail("ran with positional arguments"))
  for extra in (["--", "--project=my-project"], ["data/b.txt"]):
    fv, argv = _flag_values(["prog", "--input_file=data/a.txt", "--output_file=out/train",
                             "--spm_model_file=m.model"] + extra)
    with pytest.raises(app.UsageError, match=r"Unexpected positional arguments .*--beam_options='--project="):
      beam_pipeline.main(argv, fv)


def test_without_beam_a_finished_run_keeps_its_stats_file(tmp_path, spm_model_file, monkeypatch):
  """Without Beam (the usual install) the binary must stop before `start_run`, which deletes the finished run's
  stats file: pretraining reads it for the casing and the spm check. The error names the extra to install."""
  from tests.data_prep.test_create_pretraining_data import make_config
  corpus = write_corpus(tmp_path / "corpus.txt", corpus_docs(num_docs=4))
  beam_pipeline.cpd.create_pretraining_data(make_config(tmp_path, spm_model_file, str(corpus), name="train",
                                                        dupe_factor=1))
  stats = tmp_path / "train.stats.json"
  assert stats.is_file()
  monkeypatch.setitem(sys.modules, "apache_beam", None)
  fv, argv = _flag_values(["prog", f"--input_file={corpus}", f"--output_file={tmp_path / 'train'}",
                           f"--spm_model_file={spm_model_file}"])
  with pytest.raises(ImportError, match=re.escape("official-albert[beam]")):
    beam_pipeline.main(argv, fv)
  assert stats.is_file()
