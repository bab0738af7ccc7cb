"""Checkpoints: name tables (names.py), the three directory formats (hf.py, tf1.py, native.py), loading any of them
(loading.py: `load_pretrained`, `load_model`, `MODEL_TYPES`) and conversion (convert.py).

Public names are loaded on first access, so that `official_albert.checkpoints.formats` (the format and model-type
names) imports without TensorFlow.
"""

import importlib as _importlib

_EXPORTS = {
    "CheckpointMismatchError": "names", "HF_TABLE": "names", "HF_DERIVED_KEYS": "names",
    "tf1_variable_map": "names", "encoder_variable_map": "names", "tf1_to_hf_name": "names",
    "hf_state_dict": "hf", "load_hf_state_dict": "hf",
    "NATIVE_CHECKPOINT_PREFIX": "native", "save_pretrained": "native", "restore_native": "native",
    "load_pretrained": "loading", "load_model": "loading", "build_model": "loading", "detect_format": "loading",
    "find_spm_model": "loading",
    "FORMATS": "formats", "MODEL_TYPES": "formats", "SPM_NAMES": "formats",
}

__all__ = list(_EXPORTS)


def __getattr__(name):
  if name in _EXPORTS:
    return getattr(_importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
  raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
  return sorted(set(globals()) | set(_EXPORTS))
