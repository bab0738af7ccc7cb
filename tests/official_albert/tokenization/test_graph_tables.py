"""The in-graph tokenizer's code-point tables (`graph_tables`) equal a straightforward per-character computation.

`graph_tables` computes its tables with numpy over UTF-32 arrays and memoises them per process (~4.5 s of CPU per
process before, ~1 s now, paid once instead of by every tokenizer build). The references here are the plain Python
versions the optimised code replaced (one Python comparison per code point), for every argument combination that
`AlbertTextTokenizer` and `special_token_patterns` use; the tables must be IDENTICAL, not just give the same ids on
some texts. The memoised tables are shared by every tokenizer, so they are handed out immutable (tuples).
"""

import functools
import unicodedata

import pytest
import tensorflow as tf

from official_albert.tokenization import graph_tables
from official_albert.tokenization.tokenizer import SPECIAL_TOKENS

# (pre_lower, strip_accents, lower): AlbertTextTokenizer's norm map (hf + lower-case and/or strip accents), its lower
# map, and special_token_patterns' pre-lower table.
COMBINATIONS = [(True, True, False), (True, False, False), (False, True, False), (False, False, True)]


def _code_points():
  return [c for c in range(1, 0x110000) if not 0xD800 <= c <= 0xDFFF]


@functools.lru_cache(maxsize=None)  # (special_token_patterns' reference reads one table again)
def reference_char_map_table(pre_lower, strip_accents, lower):
  """c -> lower(drop_combining(NFKD(pre_lower(c)))) per code point, compared character by character in Python."""
  code_points = _code_points()
  chars = [chr(c) for c in code_points]
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
  return keys, values


def reference_sigma_context_tables():
  chars = [chr(c) for c in _code_points()]
  alone = "\0".join(x + "\u03a3" for x in chars).lower().split("\0")
  after_a = "\0".join("A" + x + "\u03a3" for x in chars).lower().split("\0")
  final = "\u03c2"
  cased = [ord(x) for x, s in zip(chars, alone) if s[-1] == final]
  ignorable = [ord(x) for x, s1, s2 in zip(chars, alone, after_a) if s2[-1] == final and s1[-1] != final]
  return ignorable, cased


@pytest.mark.parametrize("args", COMBINATIONS)
def test_char_map_table_equals_reference(args):
  keys, values = graph_tables.char_map_table(*args)
  want_keys, want_values = reference_char_map_table(*args)
  assert list(keys) == want_keys, args
  assert [list(v) for v in values] == want_values, args
  assert keys and len(keys) == len(values)


def test_sigma_context_tables_equal_reference():
  ignorable, cased = graph_tables.sigma_context_tables()
  want_ignorable, want_cased = reference_sigma_context_tables()
  assert list(ignorable) == want_ignorable
  assert list(cased) == want_cased
  assert 0x41 in cased and 0x27 in ignorable  # "A" is cased; the apostrophe is case-ignorable


@pytest.mark.parametrize("pre_lower", [True, False])
def test_special_token_patterns_and_whitespace_equal_reference(pre_lower):
  """The patterns read the memoised table: with HF's per-character lower-casing first, the lower-case tokens match
  whatever lower-cases to them (the Kelvin sign lower-cases to "k"); otherwise every token matches itself only
  (RE2 patterns: the in-graph tokenizer matches them with TensorFlow's regex ops)."""
  patterns = graph_tables.special_token_patterns(pre_lower)
  assert set(patterns) == set(SPECIAL_TOKENS)
  variants = {"<PAD>": "<pad>", "<UNK>": "<unk>", "<UN\u212a>": "<unk>", "[cls]": None, "[CLS]": "[CLS]"}
  for text, token in variants.items():
    matched = [t for t, pattern in patterns.items() if tf.strings.regex_full_match(text, pattern).numpy()]
    assert matched == ([token] if token and (pre_lower or text == token) else []), (text, matched)
  whitespace = [c for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF and chr(c).isspace()]
  assert graph_tables.ws_class() == "[" + "".join(f"\\x{{{c:04x}}}" for c in whitespace) + "]"


def test_memoised_tables_are_immutable():
  """Every tokenizer shares the memoised tables: a caller that appended to one changed every later tokenizer."""
  for args in COMBINATIONS:
    keys, values = graph_tables.char_map_table(*args)
    assert graph_tables.char_map_table(*args)[0] is keys  # memoised, not recomputed
    assert isinstance(keys, tuple) and isinstance(values, tuple), args
    assert all(isinstance(v, tuple) for v in values), args
  ignorable, cased = graph_tables.sigma_context_tables()
  assert isinstance(ignorable, tuple) and isinstance(cased, tuple)
  assert graph_tables.sigma_context_tables()[0] is ignorable
  patterns = graph_tables.special_token_patterns(True)
  patterns.clear()  # a fresh dict per call: clearing it changes nothing shared
  assert graph_tables.special_token_patterns(True)
