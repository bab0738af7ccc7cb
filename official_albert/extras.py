"""The optional extras (requirements-<extra>.txt / `official-albert[<extra>]`): how to name one a user lacks.

Imports nothing beyond the standard library, so that the code that must run without TensorFlow or SentencePiece
(the JAX loop, Beam workers, the export runtimes) can name the extra it needs.
"""

import sys


def install_hint(extra: str) -> str:
  """How to install an optional extra (in a checkout or from the package)."""
  return (f"pip install -r requirements-{extra}.txt (in a checkout) or pip install 'official-albert[{extra}]' "
          f"(the `{extra}` extra)")


def import_extra(module: str, package: str, needs: str, extra: str):
  """The runtime `module` of an optional extra, or an ImportError saying which package is missing, what `needs` it
  and how to install the extra (the runtimes import it only when a function needs it)."""
  try:
    __import__(module)  # the built-in import (not importlib's), so a test can take the package away
  except ImportError as e:
    raise ImportError(f"{package} is not installed; {needs}: {install_hint(extra)}. ({e})") from e
  return sys.modules[module]
