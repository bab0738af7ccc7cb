"""official_albert: ALBERT (arXiv 1909.11942) in TensorFlow 2 / Keras 3.

Public names are loaded on first access (PEP 562), so that TensorFlow-free submodules such as
`official_albert.tokenization` (data-prep and Beam workers) import without TensorFlow and Keras. Importing
`official_albert.modeling.models` (or touching any model name here) registers the Keras classes for
`keras.saving.load_model`.
"""

import importlib as _importlib

_EXPORTS = {
    "AlbertConfig": "config", "PRESETS": "config", "AlbertEncoder": "modeling.encoder",
    "AlbertPretrainer": "modeling.models", "AlbertClassifier": "modeling.models",
    "AlbertTokenClassifier": "modeling.models", "AlbertSpanLabeler": "modeling.models",
    "AlbertMultipleChoice": "modeling.models", "AlbertSquadV2Model": "modeling.models",
    "load_pretrained": "checkpoints.loading", "save_pretrained": "checkpoints.native",
}

__all__ = list(_EXPORTS)


def __getattr__(name):
  if name in _EXPORTS:
    return getattr(_importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
  raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
  return sorted(set(globals()) | set(_EXPORTS))
