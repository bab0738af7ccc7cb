"""How every binary of the project starts: `define_flags(fv)` + `main(argv, fv)`, launched by `launch`.

A binary module (official_albert.train, data_prep.create_pretraining_data, ...) defines its flags in a function, so
importing it (tests, other binaries) never defines or clashes flags, and ends with

    def console_main() -> None:
      \"\"\"The `albert-...` console script (pyproject.toml).\"\"\"
      cli.launch(define_flags, main)


    if __name__ == "__main__":
      console_main()

`launch` is the one place that sets process-wide defaults, and only for binaries: TensorFlow's C++ start-up logging
is quietened (`TF_CPP_MIN_LOG_LEVEL=2` unless already set) and Python logging goes to INFO. Binaries import
TensorFlow inside `main`, so these settings apply before it starts.
"""

from __future__ import annotations

import logging
import os
from typing import Callable

from absl import app
from absl import flags


def launch(define_flags: Callable[[flags.FlagValues], None], main: Callable[..., None],
           fv: flags.FlagValues = flags.FLAGS) -> None:
  """Defines the binary's flags on `fv`, then runs `main(argv, fv)` under absl (parsing, usage errors, exit codes)."""
  os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
  logging.getLogger().setLevel(logging.INFO)
  define_flags(fv)
  app.run(lambda argv: main(argv, fv))


def require_project_package(module) -> None:
  """Raises ImportError unless `module` (tasks, data_prep or experiments) is official_albert's own package.

  These top-level names are generic; a user's own `tasks` or `experiments` earlier on sys.path (the current folder
  comes first under `python -m`) would otherwise shadow ours and fail somewhere deep inside.
  """
  if getattr(module, "PROJECT", None) != "official_albert":
    raise ImportError(f"The package {module.__name__!r} imported from {getattr(module, '__file__', '?')} is not "
                      f"official_albert's: another {module.__name__!r} shadows it on sys.path. Run from another "
                      "folder or rename that package.")
