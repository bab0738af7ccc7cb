"""FullTokenizer's Python preprocessing as per-code-point tables and regexes that the in-graph tokenizer applies.

The in-graph path (`in_graph.AlbertTextTokenizer`) gives FullTokenizer's ids by construction: what the Python side
computes with `str.lower()`, `unicodedata` and its digit-comma rule is computed here, once, from Python, into tables
(looked up in the graph with `searchsorted` + gathers) and regex character classes.
"""

from __future__ import annotations

import collections
import re
from typing import Dict, List, Sequence, Tuple
import unicodedata

import sentencepiece as spm
import tensorflow as tf

from official_albert.tokenization.tokenizer import is_digit_comma_piece
from official_albert.tokenization.tokenizer import SPECIAL_TOKENS
from official_albert.tokenization.tokenizer import split_digit_comma


# The in-graph path never relies on TF/ICU's own Unicode tables for lower-casing or NFKD: TF's `tf.strings.lower`
# and tf_text's NFKD follow other Unicode versions than Python's `unicodedata` (we measured 41 and 118 code points
# that differ), and Python is the reference (HF calls `str.lower()` and `unicodedata`). Instead, per-code-point
# tables are computed from Python here and applied in-graph with `searchsorted` + dense gathers.
def python_whitespace() -> List[int]:
  return [c for c in range(0x3001) if chr(c).isspace()]  # all str.isspace() code points are below U+3001


def regex_class(code_points: Sequence[int]) -> str:
  return "[" + "".join(f"\\x{{{c:04x}}}" for c in code_points) + "]"


_WS_CLASS = None


def ws_class() -> str:
  global _WS_CLASS
  if _WS_CLASS is None:
    _WS_CLASS = regex_class(python_whitespace())
  return _WS_CLASS


_CHAR_TABLE_CACHE: Dict[Tuple[bool, bool, bool], Tuple[List[int], List[List[int]]]] = {}


def char_map_table(pre_lower: bool, strip_accents: bool, lower: bool) -> Tuple[List[int], List[List[int]]]:
  """(sorted keys, replacement code points) for c -> lower(drop_combining(NFKD(pre_lower(c)))), per character.

  NFKD followed by dropping every combining character (ccc != 0) is exactly a per-character map: canonical
  reordering only permutes combining characters, which are all dropped. Lower-casing commutes with the whitespace
  and quote steps (no character lower-cases to whitespace or a quote), so one table covers the whole chunk
  preprocessing. The final lower-casing is table-driven per character; its one context rule (word-final capital
  sigma) is applied separately by `final_sigma`.
  """
  key = (pre_lower, strip_accents, lower)
  if key in _CHAR_TABLE_CACHE:
    return _CHAR_TABLE_CACHE[key]
  code_points = [c for c in range(1, 0x110000) if not 0xD800 <= c <= 0xDFFF]  # NUL maps to itself
  chars = [chr(c) for c in code_points]
  # Whole-string calls on NUL-separated characters run in C; NUL is uncased, has ccc 0 and no decomposition, so
  # no character's result depends on its neighbours.
  joined = "\0".join(chars)
  if pre_lower:
    joined = joined.lower()
  if strip_accents:
    drop = {c: None for c in code_points if unicodedata.combining(chr(c))}
    joined = unicodedata.normalize("NFKD", joined).translate(drop)
  if lower:
    joined = joined.lower()
  out = joined.split("\0")
  assert len(out) == len(chars)
  keys, values = [], []
  for c, ch, o in zip(code_points, chars, out):
    if o != ch:
      keys.append(c)
      values.append([ord(x) for x in o])
  _CHAR_TABLE_CACHE[key] = (keys, values)
  return keys, values


def special_token_patterns(pre_lower: bool) -> Dict[str, str]:
  """RE2 pattern per special token: the strings that HF's per-character lower-casing turns into the token.

  Only the all-lower-case tokens (<pad>, <unk>) gain variants ("<PAD>", and "<UNK>" with the Kelvin sign);
  [CLS]/[SEP]/[MASK] are matched exactly.
  """
  keys, values = char_map_table(True, False, False) if pre_lower else ([], [])
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


_SIGMA_CONTEXT_CACHE: List[Tuple[List[int], List[int]]] = []


def sigma_context_tables() -> Tuple[List[int], List[int]]:
  """(case-ignorable, cased-and-not-ignorable) code points as CPython's final-sigma rule sees them.

  `unicodedata` does not expose these properties, so they are read off `str.lower()` itself: "xΣ" ends in "ς"
  iff x stops the backward scan and is cased; "AxΣ" ends in "ς" but "xΣ" does not iff x is skipped.
  """
  if not _SIGMA_CONTEXT_CACHE:
    code_points = [c for c in range(1, 0x110000) if not 0xD800 <= c <= 0xDFFF]
    chars = [chr(c) for c in code_points]
    alone = "\0".join(x + "\u03a3" for x in chars).lower().split("\0")
    after_a = "\0".join("A" + x + "\u03a3" for x in chars).lower().split("\0")
    final = "\u03c2"
    cased = [c for c, s in zip(code_points, alone) if s[-1] == final]
    ignorable = [c for c, s1, s2 in zip(code_points, alone, after_a) if s2[-1] == final and s1[-1] != final]
    _SIGMA_CONTEXT_CACHE.append((ignorable, cased))
  return _SIGMA_CONTEXT_CACHE[0]


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
