"""FullTokenizer's Python preprocessing as per-code-point tables and regexes that the in-graph tokenizer applies.

The in-graph path (`in_graph.AlbertTextTokenizer`) gives FullTokenizer's ids by construction: what the Python side
computes with `str.lower()`, `unicodedata` and its digit-comma rule is computed here, once, from Python, into tables
(looked up in the graph with `searchsorted` + gathers) and regex character classes.
"""

from __future__ import annotations

import collections
import functools
import re
from typing import Dict, Sequence, Tuple
import unicodedata

import numpy as np
import sentencepiece as spm
import tensorflow as tf

from official_albert.tokenization.tokenizer import is_digit_comma_piece
from official_albert.tokenization.tokenizer import SPECIAL_TOKENS
from official_albert.tokenization.tokenizer import split_digit_comma

# The in-graph path never relies on TF/ICU's own Unicode tables for lower-casing or NFKD: TF's `tf.strings.lower`
# and tf_text's NFKD follow other Unicode versions than Python's `unicodedata` (we measured 41 and 118 code points
# that differ), and Python is the reference (HF calls `str.lower()` and `unicodedata`). Instead, per-code-point
# tables are computed from Python here and applied in-graph with `searchsorted` + dense gathers.
_UNIDATA = unicodedata.unidata_version


def python_whitespace() -> Tuple[int, ...]:
  return tuple(c for c in range(0x3001) if chr(c).isspace())  # all str.isspace() code points are below U+3001


def regex_class(code_points: Sequence[int]) -> str:
  return "[" + "".join(f"\\x{{{c:04x}}}" for c in code_points) + "]"


def ws_class() -> str:
  return _ws_class(_UNIDATA)


@functools.lru_cache(maxsize=None)
def _ws_class(unidata_version: str) -> str:
  del unidata_version  # the cache key only
  return regex_class(python_whitespace())


# The tables below read every non-surrogate code point through `str.lower()` / `unicodedata`: as one NUL-separated
# string (the C implementations do the work) whose results are compared as UTF-32 arrays in numpy, not per character
# in Python (a tokenizer's first build in a process: ~4.9 s of CPU -> ~1 s on 2 AMD EPYC cores). They are memoised
# per process on their arguments and `unicodedata.unidata_version` (fixed for an interpreter's life, but it is what
# they depend on), and handed out as tuples: every tokenizer shares them, so none may mutate them.
# (`digit_comma_table` is not memoised: ~2 ms per 1,000 pieces, and a model may be retrained at the same path.)
def _all_code_points() -> np.ndarray:
  return np.concatenate([np.arange(1, 0xD800), np.arange(0xE000, 0x110000)]).astype(np.uint32)  # NUL maps to itself


def _utf32(codes: np.ndarray) -> str:
  return codes.astype("<u4").tobytes().decode("utf-32-le")


def _codes(text: str) -> np.ndarray:
  return np.frombuffer(text.encode("utf-32-le"), "<u4")


def _segments(codes: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
  """(start, end) of each NUL-separated segment of `codes`."""
  nul = np.flatnonzero(codes == 0)
  return np.concatenate([[0], nul + 1]), np.concatenate([nul, [codes.size]])


def char_map_table(pre_lower: bool, strip_accents: bool,
                   lower: bool) -> Tuple[Tuple[int, ...], Tuple[Tuple[int, ...], ...]]:
  """(sorted keys, replacement code points) for c -> lower(drop_combining(NFKD(pre_lower(c)))), per character.

  NFKD followed by dropping every combining character (ccc != 0) is exactly a per-character map: canonical
  reordering only permutes combining characters, which are all dropped. Lower-casing commutes with the whitespace
  and quote steps (no character lower-cases to whitespace or a quote), so one table covers the whole chunk
  preprocessing. The final lower-casing is table-driven per character; its one context rule (word-final capital
  sigma) is applied separately by `final_sigma`. Memoised per process, as tuples (see above).
  """
  return _char_map_table(bool(pre_lower), bool(strip_accents), bool(lower), _UNIDATA)


@functools.lru_cache(maxsize=None)
def _combining() -> np.ndarray:
  """The code points with a non-zero canonical combining class (what accent stripping drops), read-only."""
  codes = _all_code_points()
  combining = codes[np.fromiter((unicodedata.combining(chr(c)) != 0 for c in codes.tolist()), bool, codes.size)]
  combining.setflags(write=False)
  return combining


@functools.lru_cache(maxsize=None)
def _char_map_table(pre_lower: bool, strip_accents: bool, lower: bool, unidata_version: str):
  del unidata_version  # the cache key only
  code_points = _all_code_points()
  # Whole-string calls on NUL-separated characters run in C; NUL is uncased, has ccc 0 and no decomposition, so
  # no character's result depends on its neighbours.
  joined = np.zeros(2 * code_points.size - 1, np.uint32)
  joined[::2] = code_points
  text = _utf32(joined)
  if pre_lower:
    text = text.lower()
  if strip_accents:
    codes = _codes(unicodedata.normalize("NFKD", text))
    text = _utf32(codes[~np.isin(codes, _combining())])
  if lower:
    text = text.lower()
  out = _codes(text)
  starts, ends = _segments(out)
  assert starts.size == code_points.size
  first = out[np.minimum(starts, out.size - 1)]
  changed = np.flatnonzero((ends - starts != 1) | (first != code_points))
  keys = tuple(int(c) for c in code_points[changed])
  values = tuple(tuple(int(x) for x in out[starts[i]:ends[i]]) for i in changed.tolist())
  return keys, values


def special_token_patterns(pre_lower: bool) -> Dict[str, str]:
  """RE2 pattern per special token: the strings that HF's per-character lower-casing turns into the token.

  Only the all-lower-case tokens (<pad>, <unk>) gain variants ("<PAD>", and "<UNK>" with the Kelvin sign);
  [CLS]/[SEP]/[MASK] are matched exactly. A new dict per call (cheap once `char_map_table` is memoised).
  """
  keys, values = char_map_table(True, False, False) if pre_lower else ((), ())
  preimages = collections.defaultdict(list)
  for c, v in zip(keys, values):
    if len(v) == 1:
      preimages[v[0]].append(c)
  patterns = {}
  for token in SPECIAL_TOKENS:
    if token != token.lower() or not pre_lower:
      patterns[token] = re.escape(token)
    else:
      patterns[token] = "".join(regex_class([ord(ch)] + preimages[ord(ch)]) for ch in token)
  return patterns


def sigma_context_tables() -> Tuple[Tuple[int, ...], Tuple[int, ...]]:
  """(case-ignorable, cased-and-not-ignorable) code points as CPython's final-sigma rule sees them.

  `unicodedata` does not expose these properties, so they are read off `str.lower()` itself: "xΣ" ends in "ς"
  iff x stops the backward scan and is cased; "AxΣ" ends in "ς" but "xΣ" does not iff x is skipped. Memoised per
  process, as tuples.
  """
  return _sigma_context_tables(_UNIDATA)


@functools.lru_cache(maxsize=None)
def _sigma_context_tables(unidata_version: str):
  del unidata_version  # the cache key only
  code_points = _all_code_points()
  final = 0x3C2

  def ends_final(prefix: Sequence[int]) -> np.ndarray:
    """Whether each "prefix + x + Σ" (NUL-joined, lower-cased as one string) ends in a final sigma."""
    width = len(prefix) + 3
    joined = np.zeros((code_points.size, width), np.uint32)
    joined[:, :len(prefix)] = prefix
    joined[:, len(prefix)] = code_points
    joined[:, len(prefix) + 1] = 0x3A3
    out = _codes(_utf32(joined.reshape(-1)[:-1]).lower())
    _, ends = _segments(out)
    assert ends.size == code_points.size
    return out[ends - 1] == final

  alone, after_a = ends_final([]), ends_final([ord("A")])
  cased = tuple(int(c) for c in code_points[alone])
  ignorable = tuple(int(c) for c in code_points[after_a & ~alone])
  return ignorable, cased


def member(sorted_values: tf.Tensor, x: tf.Tensor) -> tf.Tensor:
  """x in sorted_values (a sorted int32 tensor whose last entry is a sentinel)."""
  idx = tf.minimum(tf.searchsorted(sorted_values, x, out_type=tf.int32), tf.shape(sorted_values)[0] - 1)
  return tf.equal(tf.gather(sorted_values, idx), x)


def final_sigma(cps: tf.Tensor, splits: tf.Tensor, ignorable: tf.Tensor, cased: tf.Tensor) -> tf.Tensor:
  """Replaces each capital sigma that CPython's `str.lower()` makes final ("ς") by U+03C2, per string."""
  n = tf.size(cps)
  pos = tf.range(n)
  row = tf.searchsorted(tf.cast(splits[1:], tf.int32), pos, side="right")
  stops = tf.cast(tf.where(tf.logical_not(member(ignorable, cps)))[:, 0], tf.int32)  # non-ignorable positions
  stops_ext = tf.concat([stops, [0]], axis=0)  # sentinel for empty inputs
  is_cased = tf.concat([member(cased, cps), [False]], axis=0)
  row_ext = tf.concat([row, [-1]], axis=0)
  num_stops = tf.size(stops)
  prev = tf.searchsorted(stops, pos, side="left") - 1
  prev_pos = tf.gather(stops_ext, tf.maximum(prev, 0))
  prev_pos = tf.where(prev >= 0, prev_pos, n)  # n indexes the sentinels: not cased, row -1
  nxt = tf.searchsorted(stops, pos, side="right")
  next_pos = tf.where(nxt < num_stops, tf.gather(stops_ext, tf.minimum(nxt, num_stops)), n)
  cased_before = tf.gather(is_cased, prev_pos) & tf.equal(tf.gather(row_ext, prev_pos), row)
  cased_after = tf.gather(is_cased, next_pos) & tf.equal(tf.gather(row_ext, next_pos), row)
  final = tf.equal(cps, 0x3A3) & cased_before & tf.logical_not(cased_after)
  return tf.where(final, 0x3C2, cps)


def digit_comma_table(sp_model: spm.SentencePieceProcessor, strip_underline: bool):
  """(sorted ids, replacement ids) for the vocabulary pieces that the digit-comma rule rewrites.

  The rule's output depends only on the piece string, so it is precomputed per vocabulary entry.
  """
  keys, values = [], []
  for i in range(sp_model.GetPieceSize()):
    piece = sp_model.IdToPiece(i)
    if sp_model.IsControl(i) or sp_model.IsUnknown(i) or not is_digit_comma_piece(piece):
      continue
    keys.append(i)
    values.append([sp_model.PieceToId(p) for p in split_digit_comma(sp_model, piece, strip_underline)])
  return keys, values
