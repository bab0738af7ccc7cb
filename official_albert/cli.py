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

The command line, checked by `launch` for every binary before its `main` runs:
- Positional arguments are refused (`app.UsageError` naming them): `--input_file data/*.txt` (the shell expands the
  glob into several words; absl takes the first as the value) would otherwise drop the other files without a word.
  A binary that takes positional arguments opts in with `launch(..., positional=True)` (squad_evaluate's DATA_FILE
  PRED_FILE; beam_pipeline, which refuses them itself to name `--beam_options`, its flag for Beam's options).
- A leading `~` or `~user` in a path flag's value is expanded (`os.path.expanduser`, also after each comma of a
  comma-separated value): bash does not expand `~` after `--model_dir=`, and the binary would otherwise write to a
  folder literally named `~`. Path flags (`is_path_flag`): names ending in `_dir`, `_file`, `_files`, `_path` or
  `_prefix` (a dash reads as `_`), and `input`, `output`, `checkpoint`, `corpus`. A `~user` naming no user is refused.
- Every flag `define_flags` creates (and `--verbose`) is a key flag of the main module, so `--help` lists them even
  when they are defined in another module (albert-benchmark's in driver.py, beam_pipeline's in
  create_pretraining_data) or the binary runs as a console script.
"""

from __future__ import annotations

import logging
import os
import sys
from typing import Any, Callable, Dict, Mapping, Optional, Tuple

from absl import app
from absl import flags

from official_albert import file_io

# The exception types the project raises with a fix in the message (ValueError covers InputDataError, ConfigError,
# VocabularyError, CheckpointMismatchError, the data_prep and task data errors; OSError the missing files; ImportError
# a missing optional extra; FloatingPointError a NaN loss; RuntimeError no readable checkpoint).
USER_ERROR_TYPES = (ValueError, OSError, KeyError, ImportError, FloatingPointError, RuntimeError)
# The flags whose values name files or folders (`is_path_flag`): by the end of the name, and these names.
PATH_FLAG_SUFFIXES = ("_dir", "_file", "_files", "_path", "_prefix")
PATH_FLAG_NAMES = frozenset({"input", "output", "checkpoint", "corpus"})
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


def is_path_flag(name: str) -> bool:
  """Whether flag `name` names files or folders (`PATH_FLAG_SUFFIXES`, `PATH_FLAG_NAMES`; a dash reads as `_`)."""
  name = name.replace("-", "_")
  return name in PATH_FLAG_NAMES or name.endswith(PATH_FLAG_SUFFIXES)


def _expand_home(name: str, value: str) -> str:
  """`value` with a leading `~` / `~user` expanded in each comma-separated part (bash leaves it after `--flag=`);
  `file_io.expand_home`, its error as a usage error."""
  try:
    return file_io.expand_home(value, f"--{name}")
  except ValueError as e:
    raise app.UsageError(str(e)) from None


def expand_user_paths(fv: flags.FlagValues) -> None:
  """Expands a leading `~` / `~user` in the values of the path flags (`is_path_flag`) of `fv`, in place.

  Raises:
    app.UsageError: a `~user` naming no user of this machine.
  """
  for name in list(fv):
    flag = fv[name]
    if name != flag.name or not is_path_flag(name) or not flag.value:
      continue  # (a short name is the same flag under its long name)
    if isinstance(flag.value, str) and "~" in flag.value:
      flag.value = _expand_home(name, flag.value)
    elif isinstance(flag.value, list) and any(isinstance(v, str) and "~" in v for v in flag.value):
      flag.value = [_expand_home(name, v) if isinstance(v, str) else v for v in flag.value]


def check_no_positional(argv) -> None:
  """Raises app.UsageError naming the arguments after the program name in `argv` (absl's leftovers), if any."""
  if len(argv) > 1:
    raise app.UsageError(f"Unexpected positional arguments {argv[1:]}: this binary takes flags only. A flag's value "
                         "is one word: join several files with commas (--input_file=a.txt,b.txt) or quote a glob "
                         "(--input_file='data/*.txt') so that the shell does not split it.")


def number_list(fv: flags.FlagValues, name: str, kind: Callable[[str], Any] = int) -> Tuple[Any, ...]:
  """The items of list flag `name` read as `kind` (int or float); ValueError naming the flag and the bad item."""
  values = []
  for item in fv[name].value or ():
    try:
      values.append(kind(item))
    except ValueError:
      noun = "an integer" if kind is int else "a number"
      raise ValueError(f"--{name}={','.join(fv[name].value)}: {item!r} is not {noun}; write comma-separated "
                       f"{kind.__name__}s (e.g. --{name}=1,2,3).") from None
  return tuple(values)


def launch(define_flags: Callable[[flags.FlagValues], None], main: Callable[..., None],
           fv: flags.FlagValues = flags.FLAGS, positional: bool = False) -> None:
  """Defines the binary's flags on `fv` (and `--verbose`), then runs `main(argv, fv)` under absl (parsing, usage
  errors, exit codes); a user error (`is_user_error`) is one `error: ...` line on stderr and exit code 1.

  Args:
    define_flags: defines the binary's flags on a FlagValues.
    main: `main(argv, fv)`.
    fv: the FlagValues absl parses (flags.FLAGS).
    positional: the binary takes positional arguments (`argv[1:]`); without it they are a usage error.
  """
  os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
  logging.getLogger().setLevel(logging.INFO)
  before = set(fv)
  define_flags(fv)
  if "verbose" not in fv:
    flags.DEFINE_boolean("verbose", False, "Show the traceback of an error about the input (data, config, "
                         "vocabulary, checkpoint); without it such an error is one `error: ...` line.", flag_values=fv)
  for name in sorted(set(fv) - before):  # --help lists the main module's key flags only
    if fv.find_module_defining_flag(name, "").startswith("absl."):
      # absltest's --test_tmpdir, --xml_output_file, ...: defined while define_flags imports TensorFlow (whose
      # test_util imports absltest); they are not the binary's, so --help leaves them to --helpfull.
      continue
    fv.register_key_flag_for_module(sys.argv[0], fv[name])

  def run_main(argv):
    if not positional:
      check_no_positional(argv)
    expand_user_paths(fv)
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


# The folder that holds official_albert, tasks, data_prep and experiments (a checkout's root, or site-packages).
PACKAGES_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def child_env(env: Optional[Mapping[str, str]] = None) -> Dict[str, str]:
  """`env` (default os.environ) for a child `python -m <one of the project's modules>`.

  `-m` puts the current folder first on the child's sys.path, so a user's own `experiments/` or `tasks/` there would
  be run instead of ours ("No module named experiments.benchmark"). PYTHONSAFEPATH=1 (Python >= 3.11) leaves the
  current folder out, and the folder holding the project's packages goes first on PYTHONPATH (the caller's entries
  kept after it), so the child runs the same packages as this process, an uninstalled checkout included. The current
  folder itself is kept, so relative paths in the child's arguments still resolve.
  """
  env = dict(os.environ if env is None else env)
  kept = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and p != PACKAGES_ROOT]
  env["PYTHONPATH"] = os.pathsep.join([PACKAGES_ROOT] + kept)
  env["PYTHONSAFEPATH"] = "1"
  return env
