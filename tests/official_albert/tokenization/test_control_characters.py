"""In-graph tokenizer == `FullTokenizer` on text with NUL, control characters and other awkward Unicode.

Issue 12: exported SavedModels dropped everything after a U+0000 ("nul\\x00byte and more words" -> 5 pieces in-graph
against 16 from `FullTokenizer`), because tensorflow_text's regex-split op reads each string only up to its first
NUL. A seeded property test over random strings drawn from the character classes that trip tokenizers (NUL, C0/C1
controls, combining marks, whitespace variants, zero-width and bidi marks, CJK, emoji, RTL scripts, special-token
text, digit-comma numbers, any non-surrogate code point) compares the ids of both paths, plus one NUL case end to
end through an exported SavedModel's text signature.
"""

import random

import keras
import numpy as np
import pytest
import tensorflow as tf

from official_albert import AlbertConfig
from official_albert import tokenization
from official_albert.checkpoints.loading import build_model
from official_albert.serving import export
from official_albert.tokenization import FullTokenizer
from official_albert.tokenization import pack_ids

NUL_TEXT = "nul\x00byte and more words"

_RANGES = {
    "nul": [(0x0, 0x0)],
    "c0": [(0x1, 0x1F), (0x7F, 0x7F)],
    "c1": [(0x80, 0x9F)],
    "combining": [(0x300, 0x36F), (0x1AB0, 0x1AFF), (0x20D0, 0x20FF), (0xFE20, 0xFE2F)],
    "whitespace": [(0x9, 0xD), (0x1C, 0x20), (0x85, 0x85), (0xA0, 0xA0), (0x1680, 0x1680), (0x2000, 0x200A),
                   (0x2028, 0x2029), (0x202F, 0x202F), (0x205F, 0x205F), (0x3000, 0x3000)],
    "format": [(0x200B, 0x200F), (0x202A, 0x202E), (0x2060, 0x2064), (0xFEFF, 0xFEFF), (0xFFF9, 0xFFFD)],
    "cjk": [(0x3040, 0x30FF), (0x4E00, 0x9FFF), (0xAC00, 0xD7A3), (0xFF00, 0xFFEF)],
    "emoji": [(0x1F300, 0x1F5FF), (0x1F600, 0x1F64F), (0x1F900, 0x1F9FF), (0x1F3FB, 0x1F3FF), (0xFE0F, 0xFE0F),
              (0x200D, 0x200D), (0x2600, 0x27BF)],
    "rtl": [(0x590, 0x5FF), (0x600, 0x6FF), (0x750, 0x77F), (0xFB50, 0xFDFF), (0xFE70, 0xFEFC)],
    "latin": [(0xC0, 0x24F), (0x1E00, 0x1EFF)],
    "greek": [(0x370, 0x3FF), (0x1F00, 0x1FFF)],
    "private_and_non": [(0xE000, 0xE010), (0xFDD0, 0xFDEF), (0xFFFE, 0xFFFF), (0x10FFFE, 0x10FFFF)],
    "any": [(0x1, 0xD7FF), (0xE000, 0x10FFFF)],
}
_WORDS = ["the", "The", "quick", "1990,", "3,500", "[MASK]", "[CLS]", "[SEP]", "<pad>", "<unk>", "<PAD>", "``",
          "''", "ΟΔΟΣ", "Σ", "café", "İstanbul", "ß", "ﬃ", "½", "١٢٣,", "...", "-", "a", "\ue000", "\ue0000",
          "\ue0001"]


def _draw_char(rng: random.Random, kind: str) -> str:
  ranges = _RANGES[kind]
  lo, hi = rng.choice(ranges)
  return chr(rng.randint(lo, hi))


def random_texts(count: int, seed: int):
  """Seeded random strings: ASCII words and spaces mixed with characters of every class in `_RANGES`.

  Every string holds at least one non-ASCII or control character; a quarter hold a NUL (also at the start, the
  end, and in runs), so each class is exercised in many contexts.
  """
  rng = random.Random(seed)
  kinds = sorted(_RANGES)
  texts = []
  for i in range(count):
    parts = []
    for _ in range(rng.randint(1, 12)):
      roll = rng.random()
      if roll < 0.3:
        parts.append(rng.choice(_WORDS))
      elif roll < 0.45:
        parts.append(" " * rng.randint(1, 3))
      else:
        kind = rng.choice(kinds)
        parts.append("".join(_draw_char(rng, kind) for _ in range(rng.randint(1, 4))))
    if i % 4 == 0:  # NUL in a quarter of the strings, anywhere (start, middle, end) and in runs
      for _ in range(rng.randint(1, 3)):
        parts.insert(rng.randint(0, len(parts)), "\x00" * rng.randint(1, 2))
    parts.insert(rng.randint(0, len(parts)), _draw_char(rng, rng.choice(kinds)))
    texts.append("".join(parts))
  return texts


@pytest.fixture(scope="module")
def tokenizer(spm_model_file):
  return FullTokenizer(spm_model_file)


def _first_mismatch(texts, want, got, tokenizer):
  for text, w, g in zip(texts, want, got):
    if w != g:
      return (f"{sum(a != b for a, b in zip(want, got))} of {len(texts)} texts differ; first {text!r}:\n"
              f"  FullTokenizer {tokenizer.sp_model.IdToPiece(w)} {w}\n"
              f"  in-graph      {tokenizer.sp_model.IdToPiece(g)} {g}")
  return None


def test_random_texts_cover_the_classes():
  texts = random_texts(2400, seed=12)
  joined = "".join(texts)
  assert len(texts) == len(set(texts)) > 2000
  assert sum("\x00" in t for t in texts) >= 600
  for kind in _RANGES:
    lo_hi = _RANGES[kind]
    hits = sum(any(lo <= ord(c) <= hi for lo, hi in lo_hi) for c in joined)
    assert hits >= 100, (kind, hits)
  assert all(not 0xD800 <= ord(c) <= 0xDFFF for c in joined)  # no surrogates: not valid in UTF-8


def test_nul_case_from_the_issue(tokenizer):
  graph = tokenization.AlbertTextTokenizer(full_tokenizer=tokenizer)
  want = tokenizer.encode_ids(NUL_TEXT)
  assert len(want) == 16
  assert graph(tf.constant([NUL_TEXT])).to_list()[0] == want
  for text in ["\x00", "\x00\x00 [MASK] \x00", "x\x00", "\x00x", "[CLS]\x00[SEP]", "a \x00 b\ue000\x00\ue0000"]:
    assert graph(tf.constant([text])).to_list()[0] == tokenizer.encode_ids(text), repr(text)


@pytest.mark.parametrize("kwargs, count", [({}, 2400), (dict(mode="reference"), 600),
                                           (dict(do_lower_case=False, keep_accents=True), 600)])
def test_in_graph_equals_full_tokenizer_on_random_unicode(spm_model_file, kwargs, count):
  """≥ 2,000 seeded random strings in the default mode (600 each in two other settings), one batched call each."""
  tokenizer = FullTokenizer(spm_model_file, **kwargs)
  graph = tokenization.AlbertTextTokenizer(full_tokenizer=tokenizer)
  texts = random_texts(count, seed=12 + len(kwargs))
  want = tokenizer.encode_ids_batch(texts)
  got = graph(tf.constant(texts)).to_list()
  problem = _first_mismatch(texts, want, got, tokenizer)
  assert problem is None, problem


@pytest.mark.slow
def test_saved_model_text_signature_keeps_text_after_nul(spm_model_file, tokenizer, tmp_path):
  """End to end: `AlbertServingModule` exported and reloaded; its text signature packs what `FullTokenizer` does."""
  keras.utils.set_random_seed(3)
  config = AlbertConfig(vocab_size=1000, embedding_size=8, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=16, max_position_embeddings=32)
  model = build_model("classifier", config, 2)
  module = export.AlbertServingModule(model, "classifier", seq_length=24, spm_model_file=spm_model_file,
                                      pad_to_multiple_of=0)
  path = str(tmp_path / "sm")
  tf.saved_model.save(module, path, signatures=module.signatures())
  reloaded = tf.saved_model.load(path)
  texts = [NUL_TEXT, "tab\tand\x01ctrl\x85next\x00"]
  out = reloaded.signatures["serve_text"](text=tf.constant(texts))
  for i, text in enumerate(texts):
    want = pack_ids(tokenizer.encode_ids(text), None, 24)
    np.testing.assert_array_equal(out["input_word_ids"][i].numpy(), want["input_word_ids"], err_msg=repr(text))
    np.testing.assert_array_equal(out["input_mask"][i].numpy(), want["input_mask"], err_msg=repr(text))
  assert int(out["input_mask"][0].numpy().sum()) == 16 + 2  # [CLS] + 16 pieces + [SEP]
