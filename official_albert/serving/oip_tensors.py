"""What an Open Inference Protocol v2 tensor is, apart from any refusal: the shape of its `data` and its token ids.

An OIP tensor's `shape` is a list of dimensions and its `data` is sent flat (row-major) or nested in that shape; the
helpers here read both (`shape_dims`, `nested_as`, `nesting`, `flatten`) without deciding what is wrong with a
request. The token-id inputs (`ID_INPUTS`, their integer datatypes, and the `IdLimits` a model's ids must fit) are
declared here too. Kept apart from `http_protocols`, which turns each mismatch into an `ApiError` naming the field and
the fix, so that the wire formats' parsers read as their rules and the pure tensor arithmetic reads in one place;
nothing here imports the protocols, so both they and the model's row types (`served_rows`) can use it.
"""

from __future__ import annotations

from typing import List, Optional, Sequence

ID_INPUTS = ("input_word_ids", "input_mask", "input_type_ids")
INTEGER_TYPES = ("INT32", "INT64")


class Limits:
  """What one request may hold: `max_inputs` texts (rows), each at most `max_text_chars` characters."""

  def __init__(self, max_inputs: int, max_text_chars: int):
    self.max_inputs, self.max_text_chars = max_inputs, max_text_chars


class IdLimits:
  """What a model's token ids may hold: ids below `vocab_size`, at most `max_length` per row, segment ids below
  `type_vocab_size`."""

  def __init__(self, vocab_size: int, max_length: int, type_vocab_size: int):
    self.vocab_size, self.max_length, self.type_vocab_size = vocab_size, max_length, type_vocab_size


def shape_dims(shape: object) -> bool:
  """Whether `shape` is a non-empty list of dimensions: integers (not JSON booleans, which Python counts as ints)
  of at least 0."""
  return (isinstance(shape, list) and bool(shape)
          and all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape))


def nested_as(data: object, shape: Sequence[int]) -> bool:
  """Whether `data` is nested exactly as `shape` (lists of shape[0] lists of shape[1] ... values that are not lists);
  recurses at most len(shape) deep, whatever the data's depth."""
  if not shape:
    return not isinstance(data, list)
  return isinstance(data, list) and len(data) == shape[0] and all(nested_as(x, shape[1:]) for x in data)


def nesting(data: object, depth: int) -> Optional[List[int]]:
  """The shape `data`'s nested lists have (at most `depth` levels looked at), or None when they are uneven."""
  if not isinstance(data, list) or depth == 0:
    return []
  inner = [nesting(x, depth - 1) for x in data]
  if any(i is None or i != inner[0] for i in inner):
    return None
  return [len(data)] + (inner[0] if inner else [])


def flatten(data: object) -> object:
  """A nested row-major list flattened (OIP clients send `data` flat or nested in the tensor's shape)."""
  if not isinstance(data, list):
    return data
  flat = []
  for x in data:
    flat.extend(flatten(x) if isinstance(x, list) else [x])
  return flat
