"""The binaries' errors (issue 44, item 5): the project's own errors about the input are one `error: ...` line on
stderr with exit code 1, the traceback only under --verbose; other errors keep their traceback."""

import json
import os
import pathlib
import subprocess
import sys

from official_albert import cli
from official_albert import model_directory as md
from tests.conftest import CHILD_PYTHONPATH

REPO_ROOT = pathlib.Path(__file__).resolve().parents[2]


def _run(*args):
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=CHILD_PYTHONPATH)
  return subprocess.run([sys.executable, "-m", "data_prep.train_sentencepiece", *args], cwd=REPO_ROOT, env=env,
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
