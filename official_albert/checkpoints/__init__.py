"""Checkpoints: name tables (names.py), the three directory formats (hf.py, tf1.py, native.py), loading any of them
(loading.py: `load_pretrained`, `load_model`, `MODEL_TYPES`) and conversion (convert.py).

Public names are loaded on first access, so that `official_albert.checkpoints.formats` (the format and model-type
names) imports without TensorFlow.
"""

from official_albert.lazy_exports import lazy_exports as _lazy_exports

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
__getattr__, __dir__ = _lazy_exports(__name__, _EXPORTS)
