"""Pretraining instances → the reference's TFRecord bytes (reference §3.4), without TensorFlow.

`serialize_instances` writes `tf.train.Example` protos directly (packed varints, the reference's feature order and
names), so data-prep workers need neither TensorFlow nor protobuf; the bytes equal what `tf.train.Example`
serialization gives (tested).
"""

from __future__ import annotations

from typing import Dict, List, Sequence, Tuple

import numpy as np

from data_prep.pretraining_instances import Instance
from data_prep.pretraining_instances import InstanceOptions
from data_prep.pretraining_instances import VocabInfo

FEATURE_ORDER = ("input_ids", "input_mask", "segment_ids", "token_boundary", "masked_lm_positions",
                 "masked_lm_ids", "masked_lm_weights", "next_sentence_labels")


_VARINT_CACHE: Dict[int, bytes] = {}


def _varint(n: int) -> bytes:
  cached = _VARINT_CACHE.get(n)
  if cached is not None:
    return cached
  out = bytearray()
  m = n
  while m > 0x7F:
    out.append((m & 0x7F) | 0x80)
    m >>= 7
  out.append(m)
  if n < 65536:
    _VARINT_CACHE[n] = bytes(out)
  return bytes(out)


def _packed_varint_rows(values: np.ndarray) -> Tuple[bytes, List[int]]:
  """Packed-varint payloads of each row of a non-negative int 2-D array: (all bytes, N+1 row offsets)."""
  v = np.asarray(values, dtype=np.int64)
  n, length = v.shape
  if v.size == 0:
    return b"", [0] * (n + 1)
  if v.min() < 0:
    raise ValueError("negative values cannot be encoded here (all ALBERT features are >= 0)")
  top = int(v.max())
  if top < 0x80:
    return v.astype(np.uint8).tobytes(), [r * length for r in range(n + 1)]
  width = (top.bit_length() + 6) // 7
  nbytes = np.ones_like(v)
  for k in range(1, width):
    nbytes += v >= (1 << (7 * k))
  col = np.arange(width, dtype=np.int64)
  groups = (v[:, :, None] >> (7 * col)) & 0x7F
  groups |= (col < (nbytes[:, :, None] - 1)) * 0x80
  flat = groups[col < nbytes[:, :, None]].astype(np.uint8).tobytes()
  offsets = np.concatenate([[0], np.cumsum(nbytes.sum(axis=1))]).tolist()
  return flat, offsets


_HEADER_CACHE: Dict[Tuple[bytes, int, int], bytes] = {}


def _feature_header(key: bytes, kind: int, payload_len: int) -> bytes:
  """Bytes of one `Features.feature` map entry up to its packed payload (kind: 0x1a int64_list, 0x12 float_list)."""
  cache_key = (key, kind, payload_len)
  header = _HEADER_CACHE.get(cache_key)
  if header is None:
    # The list message omits an empty packed field; the Feature still carries the (empty) list.
    inner_hdr = (b"\x0a" + _varint(payload_len)) if payload_len else b""
    inner_len = len(inner_hdr) + payload_len
    feature_hdr = bytes([kind]) + _varint(inner_len) + inner_hdr
    feature_len = len(feature_hdr) + payload_len
    key_field = b"\x0a" + _varint(len(key)) + key
    value_hdr = b"\x12" + _varint(feature_len)
    entry_len = len(key_field) + len(value_hdr) + feature_len
    header = b"\x0a" + _varint(entry_len) + key_field + value_hdr + feature_hdr
    _HEADER_CACHE[cache_key] = header
  return header


def encode_examples(features: Dict[str, np.ndarray]) -> List[bytes]:
  """Serialises N examples given as 2-D arrays [N, L] per feature (float dtype → float_list, else int64_list).

  Byte-identical to `tf.train.Example(...).SerializeToString(deterministic=True)` (map entries in key order). The
  default protobuf serialisation orders map entries by hash, so there is no fixed "reference" byte order; what the
  readers see, the parsed content, is the same.
  """
  parts = []
  num = None
  for name in sorted(features):
    value = np.asarray(features[name])
    if value.ndim != 2:
      raise ValueError(f"feature {name!r} must be [N, L], got shape {value.shape}")
    if num is None:
      num = value.shape[0]
    elif value.shape[0] != num:
      raise ValueError(f"feature {name!r} has {value.shape[0]} rows, expected {num}")
    if value.dtype.kind == "f":
      length = 4 * value.shape[1]
      parts.append((name.encode(), 0x12, value.astype("<f4").tobytes(), [r * length for r in range(num + 1)]))
    else:
      flat, offsets = _packed_varint_rows(value)
      parts.append((name.encode(), 0x1A, flat, offsets))
  out = []
  for r in range(num or 0):
    body = []
    for key, kind, flat, offsets in parts:
      a, b = offsets[r], offsets[r + 1]
      body.append(_feature_header(key, kind, b - a))
      body.append(flat[a:b])
    msg = b"".join(body)
    out.append(b"\x0a" + _varint(len(msg)) + msg)
  return out


def instances_to_features(instances: Sequence[Instance], opts: InstanceOptions,
                          vocab: VocabInfo) -> Dict[str, np.ndarray]:
  """Pads a block of instances to the reference feature layout (§3.4) as 2-D arrays [N, L]."""
  num = len(instances)
  seq, slots = opts.max_seq_length, opts.num_prediction_slots
  lens = np.fromiter((len(x.tokens) for x in instances), np.int64, num)
  counts = np.fromiter((len(x.positions) for x in instances), np.int64, num)
  if num and (lens.max() > seq or counts.max() > slots):
    raise ValueError(f"an instance has {lens.max()} tokens / {counts.max()} predictions; limits {seq} / {slots}")
  col = np.arange(seq)
  real = col[None, :] < lens[:, None]
  ids = np.zeros((num, seq), np.int64)
  if num:
    ids[real] = np.concatenate([x.tokens for x in instances])
  boundary = (vocab.is_start[ids] | (ids == vocab.cls_id) | (ids == vocab.sep_id)) & real
  len_a = np.fromiter((x.len_a for x in instances), np.int64, num)
  segment = (col[None, :] >= (len_a + 2)[:, None]) & real
  pmask = np.arange(slots)[None, :] < counts[:, None]
  total = int(counts.sum())
  pos_flat = np.fromiter((p for x in instances for p in x.positions), np.int64, total)
  repl_flat = np.fromiter((r for x in instances for r in x.replacements), np.int64, total)
  rows = np.repeat(np.arange(num), counts)
  positions = np.zeros((num, slots), np.int64)
  positions[pmask] = pos_flat
  labels = np.zeros((num, slots), np.int64)
  labels[pmask] = ids[rows, pos_flat]
  input_ids = ids.copy()
  input_ids[rows, pos_flat] = repl_flat
  return {
      "input_ids": input_ids,
      "input_mask": real.astype(np.int64),
      "segment_ids": segment.astype(np.int64),
      "token_boundary": boundary.astype(np.int64),
      "masked_lm_positions": positions,
      "masked_lm_ids": labels,
      "masked_lm_weights": pmask.astype(np.float32),
      "next_sentence_labels": np.fromiter((x.sop_label for x in instances), np.int64, num)[:, None],
  }


def serialize_instances(instances: Sequence[Instance], opts: InstanceOptions, vocab: VocabInfo) -> List[bytes]:
  """Serialised `tf.train.Example` bytes with the reference features, one per instance."""
  if not instances:
    return []
  return encode_examples(instances_to_features(instances, opts, vocab))
