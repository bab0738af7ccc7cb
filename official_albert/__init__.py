"""official_albert: ALBERT (arXiv 1909.11942) in TensorFlow 2 / Keras 3."""

import os as _os

_os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from official_albert.config import AlbertConfig, PRESETS  # noqa: E402
from official_albert.encoder import AlbertEncoder  # noqa: E402
from official_albert.models import (AlbertClassifier, AlbertMultipleChoice, AlbertPretrainer,  # noqa: E402
                                    AlbertSpanLabeler, AlbertSquadV2Model, AlbertTokenClassifier)

__all__ = ["AlbertConfig", "PRESETS", "AlbertEncoder", "AlbertPretrainer", "AlbertClassifier",
           "AlbertTokenClassifier", "AlbertSpanLabeler", "AlbertMultipleChoice", "AlbertSquadV2Model",
           "load_pretrained", "save_pretrained"]


def __getattr__(name):
  # checkpoints imports safetensors and friends; load it on first use.
  if name in ("load_pretrained", "save_pretrained"):
    from official_albert import checkpoints
    return getattr(checkpoints, name)
  raise AttributeError(name)
