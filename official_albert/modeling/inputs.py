"""The encoder's input contract: the names, dtypes and shapes `AlbertEncoder` and every model built on it take.
(The names and the framework-free checks are in `official_albert.input_contract`, shared with the export folders.)

`input_word_ids` [B, S] (required), `input_mask` and `input_type_ids` (optional: all ones / zeros), integers. What
would otherwise answer wrongly without a word is refused with the key named: the mask or type ids under another name
(HF's `attention_mask`, a typo), a sequence longer than the position table (also at run time in a TensorFlow graph
of unknown length), and in an eager call ids outside the vocabulary or the segment table (a negative id took the
table's last row, and under JAX an id past the table gave NaN).
"""

from __future__ import annotations

import difflib

import keras
from keras import ops
import numpy as np

from official_albert.input_contract import check_array_ranges
from official_albert.input_contract import check_optional_names
from official_albert.input_contract import INPUT_NAMES


def validate_inputs(inputs, max_position_embeddings: int, owner: str):
  """Checks names, dtypes and shapes of the encoder inputs; returns (ids, mask, type_ids) as int32 tensors."""
  if not isinstance(inputs, dict):
    inputs = {"input_word_ids": inputs}
  check_optional_names(inputs, owner)
  if "input_word_ids" not in inputs:
    close = difflib.get_close_matches("input_word_ids", [str(k) for k in inputs], n=1, cutoff=0.5)
    hint = f" (got {close[0]!r}; the contract names are {INPUT_NAMES})" if close else f" (expected {INPUT_NAMES})"
    raise KeyError(f"{owner}: missing input 'input_word_ids'{hint}; got keys {sorted(map(str, inputs))}.")
  tensors = {}
  for name in INPUT_NAMES:
    if inputs.get(name) is None:
      continue
    value = ops.convert_to_tensor(inputs[name])
    dtype = keras.backend.standardize_dtype(value.dtype)
    if "int" not in dtype:
      raise TypeError(f"{owner}: input {name!r} must be an integer tensor, got dtype {dtype}.")
    if len(value.shape) != 2:
      raise ValueError(f"{owner}: input {name!r} must have shape [batch, seq_length], got {tuple(value.shape)}.")
    tensors[name] = ops.cast(value, "int32")
  ids = tensors["input_word_ids"]
  for name, value in tensors.items():
    for axis in (0, 1):
      a, b = value.shape[axis], ids.shape[axis]
      if a is not None and b is not None and a != b:
        raise ValueError(f"{owner}: input {name!r} has shape {tuple(value.shape)} but 'input_word_ids' has "
                         f"{tuple(ids.shape)}.")
  seq_length = ids.shape[1]
  if seq_length is not None and seq_length > max_position_embeddings:
    raise ValueError(f"{owner}: sequence length {seq_length} exceeds max_position_embeddings "
                     f"({max_position_embeddings}).")
  if seq_length is None and keras.backend.backend() == "tensorflow":
    ids = _check_dynamic_length(ids, max_position_embeddings, owner)
  mask = tensors.get("input_mask", ops.ones_like(ids))
  type_ids = tensors.get("input_type_ids", ops.zeros_like(ids))
  return ids, mask, type_ids


def _check_dynamic_length(ids, max_position_embeddings: int, owner: str):
  """`ids` behind a run-time check that a length unknown when traced (a graph with a None sequence axis) is at most
  `max_position_embeddings`: else the position embeddings fail deep inside ("Incompatible shapes [1,70,16] vs
  [1,64,16]"), naming no input. TensorFlow backend only (JAX traces every shape concretely, so the static check above
  sees it); an Assert, which XLA compiles to nothing (the static shapes of jit_compile runs are checked above)."""
  import tensorflow as tf  # noqa: PLC0415  (TensorFlow backend only: the modeling code also runs under JAX)
  check = tf.debugging.assert_less_equal(
      tf.shape(ids)[1], max_position_embeddings,
      message=f"{owner}: the sequence length exceeds max_position_embeddings ({max_position_embeddings}); cut the "
              f"inputs to at most {max_position_embeddings} tokens or use a model with more positions")
  with tf.control_dependencies([check] if check is not None else []):
    return tf.identity(ids)


def check_id_ranges(ids, type_ids, vocab_size: int, type_vocab_size: int, owner: str) -> None:
  """Refuses ids outside [0, vocab_size) and type ids outside [0, type_vocab_size) where their values are at hand
  (an eager call); a traced call (a graph, jit) is not checked: the tokenizers write no others, and the server checks
  what clients send (`serving.http_protocols`)."""
  check_array_ranges(_values(ids), _values(type_ids), vocab_size, type_vocab_size, owner)


def _values(value):
  """`value` as a NumPy array when it holds values (eager), else None (a symbolic tensor or a JAX tracer)."""
  backend = keras.backend.backend()
  if backend == "tensorflow":
    import tensorflow as tf  # noqa: PLC0415  (TensorFlow backend only)
    return value.numpy() if tf.executing_eagerly() and hasattr(value, "numpy") else None
  if backend == "jax":
    import jax  # noqa: PLC0415  (JAX backend only)
    return None if isinstance(value, jax.core.Tracer) else np.asarray(value)
  return None
