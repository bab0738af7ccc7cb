"""tests/child_site/sitecustomize.py: the suite's child processes import Keras without the optional packages it would
pull in for features this project never uses, and still import those packages when asked directly; OpenVINO's
converter and NNCF find no usage telemetry to send (the pytest process itself: tests/conftest.py)."""

import importlib.util
import os
import subprocess
import sys

import pytest

from tests.conftest import CHILD_PYTHONPATH

_CHILD = """
import importlib.util, sys
import keras
skipped = sorted(m for m in ("sklearn", "jax", "matplotlib.pyplot") if m in sys.modules)
print("SKIPPED_BY_KERAS", skipped)
for name in ("sklearn", "jax", "matplotlib.pyplot"):
  if importlib.util.find_spec(name.split(".")[0]) is not None:
    __import__(name)
    assert name in sys.modules, name
print("DIRECT_IMPORTS_OK")
if importlib.util.find_spec("openvino") is not None:
  from openvino.tools.ovc import convert_impl
  assert convert_impl.tm.__name__ == "openvino.tools.ovc.telemetry_stub", convert_impl.tm
  print("OPENVINO_TELEMETRY_STUB")
"""


@pytest.mark.slow  # one child process importing Keras, then scikit-learn, JAX and pyplot
def test_keras_skips_its_optional_imports_and_direct_imports_still_work():
  assert os.environ["PYTHONPATH"].split(os.pathsep)[0].endswith(os.path.join("tests", "child_site"))
  result = subprocess.run([sys.executable, "-c", _CHILD], env=dict(os.environ, PYTHONPATH=CHILD_PYTHONPATH,
                                                                   KERAS_BACKEND="tensorflow"),
                          capture_output=True, text=True, timeout=600)
  assert result.returncode == 0, result.stderr[-3000:]
  assert "SKIPPED_BY_KERAS []" in result.stdout, result.stdout
  assert "DIRECT_IMPORTS_OK" in result.stdout
  if importlib.util.find_spec("openvino") is not None:
    assert "OPENVINO_TELEMETRY_STUB" in result.stdout


def test_the_test_process_sends_no_openvino_telemetry():
  """A conversion here would queue ~240 usage events, each a thread trying an HTTPS send (6-10 s of CPU)."""
  pytest.importorskip("openvino")
  from openvino.tools.ovc import convert_impl
  assert convert_impl.tm.__name__ == "openvino.tools.ovc.telemetry_stub", convert_impl.tm
