"""Issue 33's contract command, `python -m experiments.ablations --study=table5 --corpus=FILE --seeds=K --steps=N
--output_dir=OUT`, still reaches the ablation study after issue 45 moved it to `experiments.projects.ablations.study`.

The study itself (a real `--quick` table5 run through its flags) is tested in
tests/experiments/projects/ablations/test_study.py; here only the old name is checked: it parses the contract's flags
with the study's own definitions and hands them to the study's `main`, in a subprocess (absl flags are process-wide),
with `main` replaced by a recorder so that nothing trains.
"""

import json
import pathlib
import subprocess
import sys

REPO_ROOT = pathlib.Path(__file__).resolve().parents[2]

_RUN_AS_MAIN = r"""
import json, runpy, sys
from experiments.projects.ablations import study
def recorder(argv, fv):
  print("MAIN " + json.dumps({name: fv[name].value for name in ("study", "corpus", "seeds", "steps", "output_dir")}))
study.main = recorder
sys.argv = ["experiments/ablations.py"] + sys.argv[1:]
runpy.run_module("experiments.ablations", run_name="__main__", alter_sys=True)
"""


def test_the_issue_33_command_runs_the_study_binary(tmp_path):
  corpus = tmp_path / "corpus.txt"
  corpus.write_text("One sentence.\nAnother one.\n")
  out = tmp_path / "out"
  result = subprocess.run(
      [sys.executable, "-c", _RUN_AS_MAIN, "--study=table5", f"--corpus={corpus}", "--seeds=2", "--steps=7",
       f"--output_dir={out}"],
      capture_output=True, text=True, cwd=REPO_ROOT, timeout=120, check=False)
  assert result.returncode == 0, result.stderr[-3000:]
  lines = [line for line in result.stdout.splitlines() if line.startswith("MAIN ")]
  assert len(lines) == 1, result.stdout[-2000:]
  assert json.loads(lines[0][len("MAIN "):]) == {"study": "table5", "corpus": [str(corpus)], "seeds": 2, "steps": 7,
                                                 "output_dir": str(out)}
