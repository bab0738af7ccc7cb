"""official_albert: ALBERT (arXiv 1909.11942) in TensorFlow 2 / Keras 3.

Public names are loaded on first access (PEP 562), so that TensorFlow-free submodules such as
`official_albert.tokenization` (data-prep and Beam workers) import without TensorFlow and Keras. Importing
`official_albert.modeling.models` (or touching any model name here) registers the Keras classes for
`keras.saving.load_model`.
"""

from official_albert.lazy_exports import lazy_exports as _lazy_exports

_EXPORTS = {
    "AlbertConfig": "config", "PRESETS": "config", "AlbertEncoder": "modeling.encoder",
    "AlbertPretrainer": "modeling.models", "AlbertClassifier": "modeling.models",
    "AlbertTokenClassifier": "modeling.models", "AlbertSpanLabeler": "modeling.models",
    "AlbertMultipleChoice": "modeling.models", "AlbertSquadV2Model": "modeling.models",
    "load_pretrained": "checkpoints.loading", "save_pretrained": "checkpoints.native",
}

__all__ = list(_EXPORTS)
__getattr__, __dir__ = _lazy_exports(__name__, _EXPORTS)
