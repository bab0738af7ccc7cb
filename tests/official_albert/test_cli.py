"""The binaries' errors (issue 44, item 5): the project's own errors about the input are one `error: ...` line on
stderr with exit code 1, the traceback only under --verbose; other errors keep their traceback."""

import importlib
import json
import os
import pathlib
import re
import subprocess
import sys

from absl import app
from absl import flags
import pytest

from official_albert import cli
from official_albert import model_directory as md
from tests.conftest import CHILD_PYTHONPATH

REPO_ROOT = pathlib.Path(__file__).resolve().parents[2]


def _run(*args, module="data_prep.train_sentencepiece", **env):
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=CHILD_PYTHONPATH, **env)
  return subprocess.run([sys.executable, "-m", module, *args], cwd=REPO_ROOT, env=env,
                        capture_output=True, text=True, timeout=300)


def test_a_binarys_input_error_is_one_line_and_the_traceback_is_behind_verbose(tmp_path):
  args = [f"--input={tmp_path / 'missing.txt'}", f"--model_prefix={tmp_path / 'spm'}"]
  quiet = _run(*args)
  assert quiet.returncode == 1, quiet.stderr
  expected = f"error: train_sentencepiece: input file {tmp_path / 'missing.txt'} does not exist."
  assert quiet.stderr.strip().splitlines()[-1] == expected
  assert "Traceback" not in quiet.stderr
  verbose = _run(*args, "--verbose")
  assert verbose.returncode == 1 and "Traceback" in verbose.stderr
  assert "FileNotFoundError: train_sentencepiece: input file" in verbose.stderr


def _raised(fn):
  try:
    fn()
  except Exception as e:  # pylint: disable=broad-except
    return e
  raise AssertionError("nothing raised")


def test_only_the_projects_own_errors_are_user_errors(tmp_path):
  missing = _raised(lambda: md.resolve_checkpoint(str(tmp_path / "nothing")))
  assert cli.is_user_error(missing) and cli.error_line(missing).startswith("error: checkpoint ")
  assert not cli.is_user_error(_raised(lambda: json.loads("{")))  # a ValueError raised inside the standard library
  assert not cli.is_user_error(_raised(lambda: md.resolve_checkpoint(None)))  # a TypeError: a bug, traceback kept
  assert cli.error_line(KeyError("metric 'x' is not among the eval results")) == \
      "error: metric 'x' is not among the eval results"
  # Raised "in" a project file: a sentence is a user error, a bare key (a dict lookup: a bug) is not.
  in_project = str(REPO_ROOT / "official_albert" / "somewhere.py")
  assert cli.is_user_error(_raised(lambda: exec(compile("raise ValueError('x: bad, fix it')", in_project, "exec"))))
  assert not cli.is_user_error(_raised(lambda: exec(compile("{}['key']", in_project, "exec"))))


def test_a_leading_tilde_in_a_path_flag_is_expanded_and_other_flags_keep_theirs(monkeypatch, tmp_path):
  # bash leaves `~` after `--model_dir=`: unexpanded, the binary would write to a folder literally named `~`.
  monkeypatch.setenv("HOME", str(tmp_path))
  fv = flags.FlagValues()
  for name in ("model_dir", "input_file", "input_format", "text"):
    flags.DEFINE_string(name, None, "", flag_values=fv)
  flags.DEFINE_multi_string("config_file", None, "", flag_values=fv)
  flags.DEFINE_list("input", None, "", flag_values=fv)
  flags.DEFINE_string("out-file", None, "", short_name="o", flag_values=fv)
  fv(["prog", "--model_dir=~/runs/a", "--input_file=~/a.txt,b.txt,~/c.txt", "--input_format=~x", "--text=~/a [MASK]",
      "--config_file=~/a.yaml", "--config_file=b.yaml", "--input=~/s.txt,t.txt", "-o", "~/out.json"])
  cli.expand_user_paths(fv)
  assert fv.model_dir == f"{tmp_path}/runs/a"
  assert fv.input_file == f"{tmp_path}/a.txt,b.txt,{tmp_path}/c.txt"
  assert fv.config_file == [f"{tmp_path}/a.yaml", "b.yaml"] and fv.input == [f"{tmp_path}/s.txt", "t.txt"]
  assert fv["out-file"].value == f"{tmp_path}/out.json"
  assert (fv.input_format, fv.text) == ("~x", "~/a [MASK]")  # not paths
  assert cli.is_path_flag("na-prob-file") and cli.is_path_flag("checkpoint") and not cli.is_path_flag("output_format")
  fv(["prog", "--model_dir=~no_such_user_xyz/runs"])
  with pytest.raises(app.UsageError, match=r"--model_dir=~no_such_user_xyz/runs: no user 'no_such_user_xyz' on this "
                                           r"machine to expand '~no_such_user_xyz' for .*write the full path"):
    cli.expand_user_paths(fv)


def test_a_binary_reads_a_tilde_path_flag_under_home(tmp_path):
  quiet = _run("--input=~/missing.txt", f"--model_prefix={tmp_path / 'spm'}", HOME=str(tmp_path))
  assert quiet.returncode == 1, quiet.stderr
  assert quiet.stderr.strip().splitlines()[-1] == \
      f"error: train_sentencepiece: input file {tmp_path / 'missing.txt'} does not exist."


def test_positional_arguments_are_refused_unless_the_binary_takes_them(tmp_path):
  # `--input a.txt b.txt` (a shell-expanded glob): absl takes a.txt as the value; b.txt must not be dropped silently.
  refused = _run("--input", str(tmp_path / "a.txt"), str(tmp_path / "b.txt"), f"--model_prefix={tmp_path / 'spm'}")
  assert refused.returncode == 1, refused.stderr
  assert refused.stderr.strip().splitlines()[-1].startswith(
      f"Unexpected positional arguments ['{tmp_path / 'b.txt'}']: this binary takes flags only.")
  assert "join several files with commas" in refused.stderr
  with pytest.raises(app.UsageError, match=r"Unexpected positional arguments \['x'\]"):
    cli.check_no_positional(["prog", "x"])
  cli.check_no_positional(["prog"])
  # squad_evaluate opts in: DATA_FILE PRED_FILE are positional.
  (tmp_path / "data.json").write_text(json.dumps({"version": "1.1", "data": [{"paragraphs": [{
      "context": "The cat sat.", "qas": [{"id": "q1", "question": "Who sat?",
                                          "answers": [{"text": "The cat", "answer_start": 0}]}]}]}]}))
  (tmp_path / "pred.json").write_text(json.dumps({"q1": "cat"}))
  squad = _run(str(tmp_path / "data.json"), str(tmp_path / "pred.json"), module="tasks.squad_evaluate")
  assert squad.returncode == 0, squad.stderr
  assert json.loads(squad.stdout) == {"exact_match": 100.0, "f1": 100.0}


@pytest.mark.parametrize("module, expected", [("experiments.benchmark", "--workload"),
                                              ("data_prep.beam_pipeline", "--input_file")])
def test_help_lists_the_flags_defined_in_another_module(module, expected):
  # albert-benchmark's flags are defined in driver.py, beam_pipeline's in create_pretraining_data; absl's --help
  # lists the main module's key flags only.
  shown = _run("--help", module=module)  # (absl's --help exits with status 1)
  listed = shown.stdout + shown.stderr
  assert f"\n  {expected}:" in listed and "\n  --[no]verbose:" in listed


def test_number_list_flags_name_the_flag_and_the_bad_item():
  fv = flags.FlagValues()
  flags.DEFINE_list("seq_lengths", None, "", flag_values=fv)
  flags.DEFINE_list("weights", None, "", flag_values=fv)
  fv(["prog", "--seq_lengths=512,4k", "--weights=1,0.5"])
  assert cli.number_list(fv, "weights", float) == (1.0, 0.5)
  error = _raised(lambda: cli.number_list(fv, "seq_lengths"))
  assert cli.is_user_error(error)  # one `error:` line from a binary
  assert cli.error_line(error) == ("error: --seq_lengths=512,4k: '4k' is not an integer; write comma-separated ints "
                                   "(e.g. --seq_lengths=1,2,3).")


@pytest.mark.parametrize("module, args, flag", [
    ("experiments.benchmark.long_inputs", ["--seq_lengths=512,4k"], "--seq_lengths=512,4k: '4k' is not an integer"),
    ("experiments.projects.retrieval.study", ["--output_dir=unused", "--seeds=1,x"], "--seeds=1,x: 'x' is not"),
    ("experiments.projects.retrieval.study", ["--output_dir=unused", "--matryoshka_weights=1,a"],
     "--matryoshka_weights=1,a: 'a' is not a number"),
    ("experiments.projects.early_exit.study", ["--seeds=1.5"], "--seeds=1.5: '1.5' is not an integer"),
])
def test_the_binaries_number_list_flags_are_read_by_number_list(module, args, flag):
  binary = importlib.import_module(module)
  fv = flags.FlagValues()
  binary.define_flags(fv)
  fv(["prog", *args])
  with pytest.raises(ValueError, match=re.escape(flag)):
    binary.main(["prog"], fv)


@pytest.mark.parametrize("entry, expected", [("official_albert.train", "--experiment"),
                                             ("experiments.projects.early_exit.pretrain_torch", "--steps")])
def test_console_script_help_lists_its_own_flags_only(entry, expected):
  # As the installed bin/ wrapper runs it: sys.argv[0] is the script, the flags live in `entry`. albert-train's
  # define_flags imports TensorFlow, whose test_util defines absltest's --test_tmpdir & co.: not albert-train's.
  # albert-early-exit-pretrain-torch runs absl's app.run itself and listed no flag at all.
  code = (f"import sys; sys.argv[0] = 'albert-script'; from {entry} import console_main; console_main()")
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=CHILD_PYTHONPATH)
  shown = subprocess.run([sys.executable, "-c", code, "--help"], cwd=REPO_ROOT, env=env, capture_output=True,
                         text=True, timeout=300)
  listed = shown.stdout + shown.stderr
  assert f"\n  {expected}" in listed, listed
  assert "test_tmpdir" not in listed and "xml_output_file" not in listed
