"""The encoder's input names and the checks that need no framework: shared by the Keras models
(`modeling.inputs`, which adds the tensor checks) and the export folders (`serving.export_folder`, which run on
OpenVINO or LiteRT without TensorFlow or Keras).

What would otherwise answer wrongly without a word is refused with the key named: the mask or type ids under another
name (HF's `attention_mask`, a typo), ids outside the vocabulary or the segment table. OpenVINO's Gather returned a
row of zeros for an id past the table, so an export folder answered where the Keras model refused.
"""

from __future__ import annotations

import difflib

import numpy as np

INPUT_NAMES = ("input_word_ids", "input_mask", "input_type_ids")

# Hugging Face's names of the optional inputs: under them the mask was left out, silently (every position attended).
_ALIASES = {"attention_mask": "input_mask", "token_type_ids": "input_type_ids"}


def check_optional_names(inputs, owner: str) -> None:
  """Refuses an input dict whose mask or type ids are under another name (HF's `attention_mask` /
  `token_type_ids`, a typo such as `input_masks`): the encoder would take its default (all ones / zeros) and answer
  wrongly without a word.

  Raises:
    KeyError: naming the key and the contract name.
  """
  if not isinstance(inputs, dict):
    return
  keys = [str(k) for k in inputs]
  for name in INPUT_NAMES[1:]:
    if name in inputs:
      continue
    near = [k for k in keys if _ALIASES.get(k) == name] + difflib.get_close_matches(name, keys, n=1, cutoff=0.8)
    if near:
      raise KeyError(f"{owner}: input {near[0]!r} is not read (the contract names are {INPUT_NAMES}); pass it as "
                     f"{name!r}, or it is taken as its default (an all-ones mask / zero type ids).")


def check_array_ranges(ids, type_ids, vocab_size: int, type_vocab_size: int, owner: str) -> None:
  """Refuses ids outside [0, vocab_size) and type ids outside [0, type_vocab_size) (NumPy arrays, or None).

  Raises:
    ValueError: naming the input, the first bad position and value, and the limit.
  """
  for name, value, limit in (("input_word_ids", ids, vocab_size), ("input_type_ids", type_ids, type_vocab_size)):
    if value is None:
      continue
    array = np.asarray(value)
    if array.size == 0:
      continue
    low, high = int(array.min()), int(array.max())
    if low < 0 or high >= limit:
      bad = low if low < 0 else high
      where = tuple(int(i) for i in np.argwhere(array == bad)[0])
      raise ValueError(f"{owner}: {name}{list(where)} is {bad}, outside [0, {limit}) (the model's "
                       f"{'vocab_size' if name == 'input_word_ids' else 'type_vocab_size'}); send ids of the model's "
                       "own tokenizer.")
