"""The experiment a `params.yaml` (or a `--config_file`) names in its leading comment (`# experiment: NAME`).

Split from `training.experiment_config`, which writes the line, so that readers without TensorFlow (the checkpoint
loaders under the JAX and torch backends) can read it: experiment_config imports the training stack.
"""

from __future__ import annotations

import re

from official_albert import file_io

EXPERIMENT_LINE = re.compile(r"#\s*experiment:\s*(\S+)\s*$")


def recorded_experiment(path: str) -> str:
  """The experiment that the config file at `path` records in its leading comment lines ('' if none)."""
  with file_io.open_file(path, "rb") as f:
    lines = f.read().decode("utf-8", errors="replace").splitlines()
  for line in lines:
    if not line.strip().startswith("#"):
      return ""
    found = EXPERIMENT_LINE.match(line.strip())
    if found:
      return found.group(1)
  return ""
