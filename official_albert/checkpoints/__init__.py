"""Checkpoints: the declarative name tables (native ↔ TF1 ↔ Hugging Face), TF1 checkpoint I/O, and loading with
full-consumption checks. `load_pretrained` / `save_pretrained` are the entry points."""

from official_albert.checkpoints.names import (HF_DERIVED_KEYS, HF_TABLE, NATIVE_CHECKPOINT_PREFIX,
                                               CheckpointMismatchError, encoder_variable_map, hf_state_dict,
                                               load_hf_state_dict, load_pretrained, save_pretrained,
                                               tf1_to_hf_name, tf1_variable_map)
