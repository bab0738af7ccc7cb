"""Public names of a package loaded on first access (PEP 562), so that importing the package stays cheap.

`official_albert` and `official_albert.checkpoints` use it: their TensorFlow-free submodules (the tokenizer,
`checkpoints.formats`) import without TensorFlow, and the model classes load when a name is first touched.
"""

import importlib
from typing import Callable, Dict, List, Mapping, Tuple


def lazy_exports(package: str, exports: Mapping[str, str]) -> Tuple[Callable[[str], object], Callable[[], List[str]]]:
  """(`__getattr__`, `__dir__`) for `package`: `exports` maps a public name to the submodule that defines it.

  Example, in a package's `__init__.py`:
    __getattr__, __dir__ = lazy_exports(__name__, {"AlbertConfig": "config", ...})
  """
  exports: Dict[str, str] = dict(exports)

  def getattr_(name: str):
    if name in exports:
      return getattr(importlib.import_module(f"{package}.{exports[name]}"), name)
    raise AttributeError(f"module {package!r} has no attribute {name!r}")

  def dir_() -> List[str]:
    return sorted(set(vars(importlib.import_module(package))) | set(exports))

  return getattr_, dir_
