"""Every optional extra's missing-package message names the extra as pip installs it (`official-albert[<extra>]`).

A pip user has no requirements-*.txt file, so a message naming only that file (or a bare "No module named ...")
leaves them without the command to run. Each case takes the extra's package away (sys.modules[name] = None makes
its import fail) and reads the message the binary or module would show.
"""

import sys

from absl import flags
import pytest

from tests.test_packaging import EXTRAS


def _serve_message(monkeypatch):
  from official_albert import serve
  monkeypatch.setitem(sys.modules, "uvicorn", None)
  fv = flags.FlagValues()
  serve.define_flags(fv)
  fv(["prog", "--model_dir=/nonexistent", "--model_name=x"])
  with pytest.raises(SystemExit) as raised:
    serve.main([], fv)
  return str(raised.value.code)


def _retrieval_message(monkeypatch):
  from experiments.projects.retrieval import rankers
  monkeypatch.setitem(sys.modules, "bm25s", None)
  with pytest.raises(ImportError) as raised:
    rankers.bm25_rankings(["a b"], ["a"], 1)
  return str(raised.value)


def _jax_message(monkeypatch):
  from experiments import jax_loop
  monkeypatch.setitem(sys.modules, "jax", None)
  monkeypatch.setenv("KERAS_BACKEND", "jax")
  with pytest.raises(ImportError) as raised:
    jax_loop.use_jax_backend()
  return str(raised.value)


def _openvino_message(monkeypatch):
  from experiments.benchmark import ov_inference
  return ov_inference.OPENVINO_EXTRA


def _litert_message(monkeypatch):
  from experiments.benchmark import ov_inference
  return ov_inference.LITERT_EXTRA


MESSAGES = {"serve": _serve_message, "retrieval": _retrieval_message, "jax": _jax_message,
            "openvino": _openvino_message, "litert": _litert_message}


@pytest.mark.parametrize("extra", sorted(MESSAGES))
def test_missing_extra_message_names_the_pip_extra(extra, monkeypatch):
  assert extra in EXTRAS, f"{extra} is not an extra of pyproject.toml"
  assert f"official-albert[{extra}]" in MESSAGES[extra](monkeypatch)
