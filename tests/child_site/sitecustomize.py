"""Loaded by every Python process the tests start (tests/conftest.py puts this folder on their PYTHONPATH).

`import keras` imports three optional packages when they are installed, only to offer features this project never
uses: scikit-learn (Keras's scikit-learn wrappers), JAX (a monitoring shim in Keras's Orbax callback, and TF Lite's
`jax.jit` hook) and matplotlib's pyplot (Keras's image-gallery plot). The core install has no scikit-learn and no
JAX — the test environment has them for the sentence-transformers oracle and the JAX-backend tests — so every child
process of the suite (the documented commands, the workers, the servers: hundreds per run) paid ~1.5 s of CPU for
them on 2 cores. Here those three importers, and only they, see the packages as absent, as in the core install:
Keras sets its optional handles to None, as it does there. Any other import of them — the JAX backend, the
sentence-transformers oracle, our charts — loads them as usual; a package already loaded is never refused.

OpenVINO's converter and NNCF import `openvino_telemetry` to send usage events unless the user opted out (its consent
file) or the process looks like CI: ~240 events per `ov.convert_model` or int8 quantization, each a thread trying an
HTTPS send that this sandbox cannot make — 6-10 s of CPU and most of the sys time per conversion (a tiny early-exit
classifier's conversion: 12.3 s of CPU → 1.8 s; AMD EPYC, 2 cores). To them the package is absent here, as OpenVINO
and NNCF allow (their own no-telemetry stubs). docs/serving_openvino.md tells users how to opt out.
"""

import os
import sys

# Module name -> the files (path fragments) whose import of it is refused.
_REFUSED_IMPORTERS = {
    "sklearn": ("keras/src/wrappers/",),
    "jax": ("tensorflow/lite/python/", "keras/src/callbacks/orbax_checkpoint"),
    "matplotlib": ("keras/src/visualization/",),
    "matplotlib.pyplot": ("keras/src/visualization/",),
    "openvino_telemetry": ("/openvino/", "/nncf/"),
}


_THIS_FILE = __file__.replace("\\", "/")


def _importer_file():
  """The file of the first frame outside the import machinery: the module whose `import` statement runs."""
  frame = sys._getframe(1)
  while frame is not None:
    filename = frame.f_code.co_filename.replace("\\", "/")
    if filename != _THIS_FILE and not filename.startswith("<frozen") and "/importlib/" not in filename:
      return filename
    frame = frame.f_back
  return ""


class _OptionalImportRefuser:
  """A meta path finder that answers "not installed" to the importers above and defers to the others."""

  @staticmethod
  def find_spec(name, path=None, target=None):
    del path, target
    importers = _REFUSED_IMPORTERS.get(name)
    if importers and any(fragment in _importer_file() for fragment in importers):
      raise ModuleNotFoundError(f"No module named {name!r}", name=name)
    return None


sys.meta_path.insert(0, _OptionalImportRefuser())


def _log_cpu_at_exit(path):
  """`ALBERT_TEST_PROCESS_LOG=FILE`: each process appends its CPU seconds and command line at exit (where a run's
  time goes: `awk '{s += $1} END {print NR, s}' FILE`)."""
  import atexit

  def write():
    usage = os.times()
    line = f"{usage.user + usage.system:.2f} {' '.join(sys.argv)[:200]}\n"
    with open(path, "a", encoding="utf-8") as f:
      f.write(line)

  atexit.register(write)


if os.environ.get("ALBERT_TEST_PROCESS_LOG"):
  _log_cpu_at_exit(os.environ["ALBERT_TEST_PROCESS_LOG"])
