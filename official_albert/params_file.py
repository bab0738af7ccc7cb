"""The experiment a `params.yaml` (or a `--config_file`) names in its leading comment (`# experiment: NAME`).

Split from `training.experiment_config`, which writes the line, so that readers without TensorFlow (the checkpoint
loaders under the JAX and torch backends) can read it: experiment_config imports the training stack.
"""

from __future__ import annotations

import re

from official_albert import file_io
from official_albert import model_directory as md

EXPERIMENT_LINE = re.compile(r"#\s*experiment:\s*(\S+)\s*$")


def recorded_experiment(path: str) -> str:
  """The experiment that the config file at `path` records in its leading comment lines ('' if none)."""
  with file_io.open_file(path, "rb") as f:
    # (utf-8-sig: a byte-order mark before the line, as Windows editors write, hid it and the guard with it)
    lines = f.read().decode("utf-8-sig", errors="replace").splitlines()
  for line in lines:
    if not line.strip():  # (a blank line above the comment hid it too)
      continue
    if not line.strip().startswith("#"):
      return ""
    found = EXPERIMENT_LINE.match(line.strip())
    if found:
      return found.group(1)
  return ""


def experiment_hint(model_dir: str) -> str:
  """". <model_dir>/params.yaml records the experiment 'X': ..." for an error about model_dir's checkpoints (a
  text_classification run resumed or evaluated as text_regression failed on a tensor's shape, naming neither), or ""
  when it records none."""
  path = md.path(model_dir, md.PARAMS_FILE)
  try:
    recorded = recorded_experiment(path) if file_io.exists(path) else ""
  except OSError:
    return ""
  return (f". {path} records the experiment {recorded!r}: a run of another --experiment builds another model "
          "(pass that one, or a new --model_dir)") if recorded else ""
