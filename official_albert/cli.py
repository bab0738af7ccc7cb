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

Errors: the project's own errors about what the user gave (data, config, vocabulary, checkpoint: the messages name
the file and the fix) are printed as `error: <message>` on stderr with exit code 1, without a traceback; `--verbose`
(a flag of every binary) shows the traceback. The rule (`is_user_error`): an exception of `USER_ERROR_TYPES` raised
by the project's own code (its innermost frame is in official_albert, tasks, data_prep or experiments), so no
exception class needs a marker and this module imports none of those packages. Anything else — a TypeError, an
error raised inside TensorFlow — is a bug or an unforeseen state and keeps its traceback.
"""

from __future__ import annotations

import logging
import os
import sys
from typing import Callable

from absl import app
from absl import flags

# The exception types the project raises with a fix in the message (ValueError covers InputDataError, ConfigError,
# VocabularyError, CheckpointMismatchError, the data_prep and task data errors; OSError the missing files; ImportError
# a missing optional extra; FloatingPointError a NaN loss; RuntimeError no readable checkpoint).
USER_ERROR_TYPES = (ValueError, OSError, KeyError, ImportError, FloatingPointError, RuntimeError)
_PROJECT_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_PROJECT_PACKAGES = tuple(os.path.join(_PROJECT_ROOT, name) + os.sep
                          for name in ("official_albert", "tasks", "data_prep", "experiments"))


def is_user_error(error: BaseException) -> bool:
  """An error of `USER_ERROR_TYPES` raised by the project's own code (its innermost frame is in one of its packages)."""
  if not isinstance(error, USER_ERROR_TYPES):
    return False
  if isinstance(error, KeyError) and " " not in str(error.args[0] if error.args else ""):
    return False  # a bare key (a dict lookup), not a sentence the project wrote
  tb = error.__traceback__
  if tb is None:
    return False
  while tb.tb_next is not None:
    tb = tb.tb_next
  return os.path.abspath(tb.tb_frame.f_code.co_filename).startswith(_PROJECT_PACKAGES)


def error_line(error: BaseException) -> str:
  """`error: <message>` (a KeyError's message without the quotes str() adds)."""
  message = error.args[0] if isinstance(error, KeyError) and error.args else str(error)
  return f"error: {message or type(error).__name__}"


def launch(define_flags: Callable[[flags.FlagValues], None], main: Callable[..., None],
           fv: flags.FlagValues = flags.FLAGS) -> None:
  """Defines the binary's flags on `fv` (and `--verbose`), then runs `main(argv, fv)` under absl (parsing, usage
  errors, exit codes); a user error (`is_user_error`) is one `error: ...` line on stderr and exit code 1."""
  os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
  logging.getLogger().setLevel(logging.INFO)
  define_flags(fv)
  if "verbose" not in fv:
    flags.DEFINE_boolean("verbose", False, "Show the traceback of an error about the input (data, config, "
                         "vocabulary, checkpoint); without it such an error is one `error: ...` line.", flag_values=fv)

  def run_main(argv):
    try:
      return main(argv, fv)
    except Exception as e:  # pylint: disable=broad-except  (re-raised unless a user error)
      if fv["verbose"].value or not is_user_error(e):
        raise
      sys.stdout.flush()
      sys.stderr.write(error_line(e) + "\n")
      sys.stderr.flush()
      return 1

  app.run(run_main)


def require_project_package(module) -> None:
  """Raises ImportError unless `module` (tasks, data_prep or experiments) is official_albert's own package.

  These top-level names are generic; a user's own `tasks` or `experiments` earlier on sys.path (the current folder
  comes first under `python -m`) would otherwise shadow ours and fail somewhere deep inside.
  """
  if getattr(module, "PROJECT", None) != "official_albert":
    raise ImportError(f"The package {module.__name__!r} imported from {getattr(module, '__file__', '?')} is not "
                      f"official_albert's: another {module.__name__!r} shadows it on sys.path. Run from another "
                      "folder or rename that package.")
