"""Pretraining records as compact numpy arrays, for a trainer without TensorFlow.

A GPU host here has PyTorch but no TensorFlow (experiments/projects/early_exit/pretrain_torch.py pretrains there), so
it cannot read the study kit's TFRecords. `export_arrays` reads them once through our own input pipeline, so the
arrays hold exactly what our trainer is fed (the same masked positions, SOP labels and padding), and writes them into
one compressed `.npz` (atomically): `input_word_ids` and `masked_lm_ids` as uint16, the rest as uint8. The narrow
types keep a 200,000-instance file of 128 pieces near 32 MB, under what travels to such a host in one call; an id or
a position that does not fit is an error, never a wrapped number.

The early-exit study's data stage and the retrieval study's GPU route
(experiments/projects/retrieval/gpu_pretraining.py) both write their arrays here.
"""

from __future__ import annotations

import logging
from typing import Any, Dict, List, Sequence

import numpy as np

from official_albert import file_io

logger = logging.getLogger(__name__)

# What pretrain_torch.py reads (its ARRAY_NAMES), with the type each is stored as.
ARRAY_TYPES = {"input_word_ids": np.uint16, "input_mask": np.uint8, "input_type_ids": np.uint8,
               "masked_lm_positions": np.uint8, "masked_lm_ids": np.uint16, "masked_lm_weights": np.uint8,
               "next_sentence_labels": np.uint8}


def narrow(arrays: Dict[str, np.ndarray]) -> Dict[str, np.ndarray]:
  """`arrays` (the input pipeline's pretraining features) in `ARRAY_TYPES`, next-sentence labels flat.

  Raises:
    ValueError: a value that its narrow type cannot hold (a vocabulary over 65,536 pieces, sequences over 256
      pieces), naming the array and the largest value.
  """
  out = {}
  for name, kind in ARRAY_TYPES.items():
    value = np.asarray(arrays[name])
    if value.size and (value.min() < 0 or value.max() > np.iinfo(kind).max):
      raise ValueError(f"{name}: values from {value.min()} to {value.max()} do not fit {np.dtype(kind).name} (at "
                       f"most {np.iinfo(kind).max}): the arrays hold vocabularies of up to 65,536 pieces and "
                       "sequences of up to 256 pieces.")
    out[name] = value.astype(kind)
  out["next_sentence_labels"] = out["next_sentence_labels"].reshape(-1)
  return out


def export_arrays(record_files: Sequence[str], path: str, seq_length: int, max_predictions_per_seq: int) -> str:
  """Writes the pretraining records `record_files` (of `seq_length` pieces, `max_predictions_per_seq` masked) as
  `narrow` arrays to `path` (a compressed .npz, atomically); returns `path`."""
  from official_albert.data import input_pipeline  # noqa: PLC0415 (TF: only when arrays are written)
  dataset = input_pipeline.pretraining_dataset(list(record_files), seq_length, max_predictions_per_seq, 1024,
                                               is_training=False, drop_remainder=False)
  parts: Dict[str, List[Any]] = {}
  for batch in dataset:
    for key, value in batch.items():
      parts.setdefault(key, []).append(value.numpy())
  out = narrow({k: np.concatenate(v) for k, v in parts.items()})
  with file_io.atomic_path(path) as tmp:
    with open(tmp, "wb") as f:
      np.savez_compressed(f, **out)
  logger.info("wrote %s: %d instances of %d pieces", path, len(out["input_word_ids"]), seq_length)
  return path
