"""ALBERT SentencePiece tokenization: the Python `FullTokenizer` and the in-graph `AlbertPreprocessor`.

Three behaviours are offered (`mode`), because the reference (google-research/albert) and Hugging Face differ:

* `"hf"` (default): ids equal HF's slow `AlbertTokenizer` (transformers 4.x `use_fast=False`,
  `encode(text, add_special_tokens=False)`). Special tokens written in the text (`[CLS]`, `[SEP]`, `[MASK]`,
  `<pad>`, `<unk>`) are split out and mapped to their ids; the rest is lower-cased character by character (no
  Greek final-sigma rule), each chunk is preprocessed with the quote normalisation (\\`\\` and '' -> ") and the
  digit-comma rule strips the leading "▁" the way the reference intended.
* `"reference"`: the reference's `preprocess_text(text, lower=do_lower_case)` (§2.1: no quote normalisation, no
  special tokens in the text, whole-string `str.lower()` after NFKD) and the intended digit-comma rule.
* `"upstream_py3"`: like `"reference"` but the digit-comma rule keeps the leading "▁" of the re-encoded number, as
  the upstream code does under Python 3 (reference §2.2 item 3); use it to reproduce data made by upstream scripts.

In-graph (tensorflow_text `FastSentencepieceTokenizer` + TF string ops, for `tf.function`, `tf.data` and SavedModels):
`AlbertTextTokenizer(...)(texts [B] string) -> ragged int32 ids [B, (T)]` gives the same ids as `FullTokenizer`
in every mode (see its docstring); `AlbertPacker(seq_length)(ids_a[,
ids_b])` and `AlbertPreprocessor(spm_model_file, seq_length)(text_a[, text_b])` return int32 [B, seq_length]
`input_word_ids`, `input_mask`, `input_type_ids`. Python packing: `pack_ids`, `truncate_seq_pair`,
`FullTokenizer.encode_pair`.

This module does not import TensorFlow (data-prep workers only need `FullTokenizer`): the in-graph classes live in
`official_albert.tokenization.in_graph` and are loaded on first access as attributes of the package; TensorFlow's
gfile is imported only to read a non-local (e.g. gs://) model path.
"""

from __future__ import annotations

import re
from typing import Dict, Iterable, List, Optional, Sequence, Tuple
import unicodedata

import sentencepiece as spm

from official_albert.tokenization.spm_model import check_special_tokens  # noqa: F401
from official_albert.tokenization.spm_model import check_spm_model_file  # noqa: F401

# The model file and ALBERT's special tokens, importable from here as before.
from official_albert.tokenization.spm_model import CLS  # noqa: F401
from official_albert.tokenization.spm_model import load_sp_model  # noqa: F401
from official_albert.tokenization.spm_model import LSTRIP_TOKENS  # noqa: F401
from official_albert.tokenization.spm_model import MASK  # noqa: F401
from official_albert.tokenization.spm_model import PAD  # noqa: F401
from official_albert.tokenization.spm_model import SEP  # noqa: F401
from official_albert.tokenization.spm_model import SPECIAL_TOKEN_IDS  # noqa: F401
from official_albert.tokenization.spm_model import SPECIAL_TOKENS  # noqa: F401
from official_albert.tokenization.spm_model import SPIECE_UNDERLINE  # noqa: F401
from official_albert.tokenization.spm_model import UNK  # noqa: F401

MODES = ("hf", "reference", "upstream_py3")

_SPECIAL_SPLIT = re.compile("(" + "|".join(re.escape(t) for t in SPECIAL_TOKENS) + ")")


# ------------------------------------------------------------------------------------------------ preprocessing
def preprocess_text(inputs: str, remove_space: bool = True, lower: bool = False, keep_accents: bool = False,
                    normalize_quotes: bool = False) -> str:
  """The reference's text normalisation (§2.1), with HF's two extra switches.

  Args:
    inputs: the text (`bytes` are decoded as UTF-8).
    remove_space: strip and collapse every whitespace run (Python's `str.split()` set) to one space.
    lower: lower-case at the end (whole-string `str.lower()`).
    keep_accents: skip NFKD + dropping combining characters (HF's switch; the reference always strips).
    normalize_quotes: replace \\`\\` and '' with " (HF does; the reference does not).

  Returns:
    The normalised `str`.
  """
  if isinstance(inputs, bytes):
    inputs = inputs.decode("utf-8")
  outputs = " ".join(inputs.strip().split()) if remove_space else inputs
  if normalize_quotes:
    outputs = outputs.replace("``", '"').replace("''", '"')
  if not keep_accents and not outputs.isascii():  # ASCII is NFKD-invariant and has no combining marks
    outputs = unicodedata.normalize("NFKD", outputs)
    outputs = "".join(c for c in outputs if not unicodedata.combining(c))
  if lower:
    outputs = outputs.lower()
  return outputs


def special_chunks(text, do_lower_case: bool, mode: str = "hf") -> List[Tuple[bool, str]]:
  """The chunks of one text as FullTokenizer reads them: (is_special, text). "hf" splits special tokens written in
  the text out (after per-character lower-casing, which skips them) and applies [MASK]'s lstrip; the reference modes
  keep the text whole."""
  if isinstance(text, bytes):
    text = text.decode("utf-8")
  if mode != "hf":
    return [(False, text)]
  parts = _SPECIAL_SPLIT.split(text)  # odd indices are special tokens
  if do_lower_case:
    # HF lower-cases around the special tokens first and splits afterwards, so "<PAD>" becomes "<pad>" (id 0).
    parts = _SPECIAL_SPLIT.split("".join(p if i % 2 else lower_per_char(p) for i, p in enumerate(parts)))
  for i in range(1, len(parts), 2):
    if parts[i] in LSTRIP_TOKENS:
      parts[i - 1] = parts[i - 1].rstrip()
  return [(bool(i % 2), p) for i, p in enumerate(parts) if p]


def lower_per_char(text: str) -> str:
  """`str.lower()` applied to each character on its own, as HF's `tokenize` does (no final-sigma context)."""
  # CPython's only context-dependent lower-casing is the capital sigma; everything else is per character already.
  if "\u03a3" not in text:
    return text.lower()
  return "".join(c.lower() for c in text)


def is_digit_comma_piece(piece: str) -> bool:
  return len(piece) > 1 and piece[-1] == "," and piece[-2].isdigit()


def split_digit_comma(sp_model: spm.SentencePieceProcessor, piece: str, strip_underline: bool) -> List[str]:
  """Reference §2.2 step 2: `▁1990,` -> re-encoded number pieces, then ","."""
  new_pieces = sp_model.EncodeAsPieces(piece[:-1].replace(SPIECE_UNDERLINE, ""))
  if strip_underline and piece[0] != SPIECE_UNDERLINE and new_pieces[0][0] == SPIECE_UNDERLINE:
    if len(new_pieces[0]) == 1:
      new_pieces = new_pieces[1:]
    else:
      new_pieces[0] = new_pieces[0][1:]
  new_pieces.append(piece[-1])
  return new_pieces


def _apply_digit_comma(sp_model, pieces: List[str], strip_underline: bool) -> List[str]:
  out: List[str] = []
  for piece in pieces:
    if is_digit_comma_piece(piece):
      out.extend(split_digit_comma(sp_model, piece, strip_underline))
    else:
      out.append(piece)
  return out


def encode_pieces(sp_model: spm.SentencePieceProcessor, text: str, sample: bool = False,
                  strip_underline: bool = True) -> List[str]:
  """Reference §2.2: spm pieces (as `str`) with the digit-comma rule.

  Args:
    sp_model: a loaded `SentencePieceProcessor`.
    text: already preprocessed text.
    sample: subword regularisation (`SampleEncodeAsPieces(text, 64, 0.1)`), as in the reference.
    strip_underline: apply the intended "▁" strip of the digit-comma rule (HF); False keeps it (upstream py3).
  """
  if isinstance(text, bytes):
    text = text.decode("utf-8")
  pieces = sp_model.SampleEncodeAsPieces(text, 64, 0.1) if sample else sp_model.EncodeAsPieces(text)
  return _apply_digit_comma(sp_model, pieces, strip_underline)


def encode_ids(sp_model: spm.SentencePieceProcessor, text: str, sample: bool = False,
               strip_underline: bool = True) -> List[int]:
  """`encode_pieces` followed by `PieceToId` on each piece."""
  return [sp_model.PieceToId(p) for p in encode_pieces(sp_model, text, sample, strip_underline)]


# ------------------------------------------------------------------------------------------------ Python tokenizer
class FullTokenizer:
  """SentencePiece tokenizer with ALBERT's preprocessing applied inside `tokenize` (fixes albert#88).

  `tokenize` returns `str` pieces; for many lines prefer `tokenize_batch` / `encode_ids_batch` (one SentencePiece
  call for the whole batch; its throughput against HF's slow tokenizer is in docs/performance.md).

  Args:
    spm_model_file: path (local or gs://) of the SentencePiece model.
    do_lower_case: lower-case the text.
    remove_space: strip and collapse whitespace runs.
    keep_accents: keep accents (skip NFKD + combining-mark removal); HF's switch, False in the reference.
    mode: "hf" (default), "reference" or "upstream_py3"; see the module docstring.
    check_special_ids: raise if the model does not have ALBERT's special ids at 0..4.
  """

  def __init__(self, spm_model_file: str, do_lower_case: bool = True, remove_space: bool = True,
               keep_accents: bool = False, mode: str = "hf", check_special_ids: bool = True):
    if mode not in MODES:
      raise ValueError(f"FullTokenizer mode must be one of {MODES}, got {mode!r}.")
    self.spm_model_file = spm_model_file
    self.do_lower_case = do_lower_case
    self.remove_space = remove_space
    self.keep_accents = keep_accents
    self.mode = mode
    self.sp_model, self.sp_model_proto = load_sp_model(spm_model_file)
    if check_special_ids:
      check_special_tokens(self.sp_model, name=spm_model_file)
    self.vocab: Dict[str, int] = {self.sp_model.IdToPiece(i): i for i in range(self.sp_model.GetPieceSize())}
    self.inv_vocab: Dict[int, str] = {i: p for p, i in self.vocab.items()}
    self._strip_underline = mode != "upstream_py3"
    # The digit-comma rewrite of each vocabulary piece, precomputed: most rows then need one C-level set check.
    # An unknown piece is surface text and could end in digit + "," only if "," itself were not in the vocabulary.
    self._digit_comma_pieces = {
        p: split_digit_comma(self.sp_model, p, self._strip_underline) for p in self.vocab
        if is_digit_comma_piece(p) and not self.sp_model.IsControl(self.vocab[p])}
    self._comma_in_vocab = "," in self.vocab

  @property
  def vocab_size(self) -> int:
    return len(self.vocab)

  def _chunks(self, text: str) -> List[Tuple[bool, str]]:
    return special_chunks(text, self.do_lower_case, self.mode)

  def _preprocess_chunk(self, chunk: str) -> str:
    return preprocess_text(chunk, remove_space=self.remove_space, lower=self.do_lower_case,
                           keep_accents=self.keep_accents, normalize_quotes=self.mode == "hf")

  def preprocess(self, text: str) -> str:
    """The normalised text fed to SentencePiece (for one chunk without special tokens)."""
    return self._preprocess_chunk(lower_per_char(text) if self.mode == "hf" and self.do_lower_case else text)

  def tokenize(self, text: str) -> List[str]:
    """Text -> list of `str` pieces (special tokens in the text come out as themselves in "hf" mode)."""
    return self.tokenize_batch([text])[0]

  def tokenize_batch(self, texts: Sequence[str]) -> List[List[str]]:
    """Tokenizes many texts with one SentencePiece call (much less per-line overhead than `tokenize`)."""
    layout = []  # per text: list of (is_special, token or index into `normal`)
    normal: List[str] = []
    for text in texts:
      row = []
      for is_special, chunk in self._chunks(text):
        if is_special:
          row.append((True, chunk))
        else:
          row.append((False, len(normal)))
          normal.append(self._preprocess_chunk(chunk))
      layout.append(row)
    encoded = self.sp_model.Encode(normal, out_type=str) if normal else []
    out = []
    for row in layout:
      pieces: List[str] = []
      for is_special, value in row:
        if is_special:
          pieces.append(value)
        else:
          pieces.extend(self._digit_comma(encoded[value]))
      out.append(pieces)
    return out

  def _digit_comma(self, pieces: List[str]) -> List[str]:
    if not self._comma_in_vocab:
      return _apply_digit_comma(self.sp_model, pieces, self._strip_underline)
    table = self._digit_comma_pieces
    if table.keys().isdisjoint(pieces):
      return pieces
    out: List[str] = []
    for piece in pieces:
      if piece in table:
        out.extend(table[piece])
      else:
        out.append(piece)
    return out

  def encode_ids(self, text: str) -> List[int]:
    """Text -> ids (no [CLS]/[SEP] added)."""
    return self.convert_tokens_to_ids(self.tokenize(text))

  def encode_ids_batch(self, texts: Sequence[str]) -> List[List[int]]:
    """Batch form of `encode_ids`."""
    return [self.convert_tokens_to_ids(p) for p in self.tokenize_batch(texts)]

  def encode_ids_with_masks_batch(self, texts: Sequence[str]) -> List[List[int]]:
    """Ids of texts whose `[MASK]`s are the mask token (fill-mask queries) in every mode: "hf" splits special
    tokens out itself; the reference modes, like the original tokenizer, would spell `[MASK]` out as pieces, so
    there the text is cut at each `[MASK]` and the parts between are encoded."""
    if self.mode == "hf":
      return self.encode_ids_batch(texts)
    parts = [(t.decode("utf-8") if isinstance(t, bytes) else str(t)).split(MASK) for t in texts]
    encoded = iter(self.encode_ids_batch([p for row in parts for p in row]))
    mask_id = self.vocab[MASK]
    out = []
    for row in parts:
      ids: List[int] = []
      for i in range(len(row)):
        ids.extend(([mask_id] if i else []) + list(next(encoded)))
      out.append(ids)
    return out

  def convert_tokens_to_ids(self, tokens: Iterable[str]) -> List[int]:
    """Pieces -> ids; an unknown piece maps to <unk> (id 1), like `PieceToId`."""
    vocab = self.vocab
    unk = SPECIAL_TOKEN_IDS[UNK]
    return [vocab.get(t, unk) for t in tokens]

  def convert_ids_to_tokens(self, ids: Iterable[int]) -> List[str]:
    """Ids -> pieces; raises IndexError naming an out-of-range id."""
    out = []
    for i in ids:
      i = int(i)
      if i not in self.inv_vocab:
        raise IndexError(f"token id {i} is outside the vocabulary (size {self.vocab_size}).")
      out.append(self.inv_vocab[i])
    return out

  # ---------------------------------------------------------------------------------------------- packing
  def encode_pair(self, text_a: str, text_b: Optional[str] = None, max_seq_length: int = 128) -> Dict[str, List[int]]:
    """Tokenizes and packs `[CLS] A [SEP] (B [SEP])` to `max_seq_length` (see `pack_ids`).

    A `text_b` without pieces (`""`, blank) packs one segment, `[CLS] A [SEP]`, as GLUE's records, the pipelines and
    the in-graph packer do (the reference writes B only `if tokens_b`).
    """
    ids_a = self.encode_ids(text_a)
    ids_b = (self.encode_ids(text_b) or None) if text_b is not None else None
    return pack_ids(ids_a, ids_b, max_seq_length)


def truncated_lengths(len_a: int, len_b: int, max_num_tokens: int) -> Tuple[int, int]:
  """Lengths after the reference's longest-first truncation (pop from the longer; on a tie pop from B)."""
  if len_a + len_b <= max_num_tokens:
    return len_a, len_b
  new_a = min(len_a, max(max_num_tokens - len_b, (max_num_tokens + 1) // 2))
  return new_a, max_num_tokens - new_a


def truncate_seq_pair(tokens_a: List, tokens_b: List, max_num_tokens: int) -> None:
  """In place: removes tokens from the end of the longer list until the total fits (reference classifier rule)."""
  new_a, new_b = truncated_lengths(len(tokens_a), len(tokens_b), max_num_tokens)
  del tokens_a[new_a:]
  del tokens_b[new_b:]


def pack_ids(ids_a: Sequence[int], ids_b: Optional[Sequence[int]] = None,
             max_seq_length: int = 128) -> Dict[str, List[int]]:
  """`[CLS] A [SEP] B [SEP]` with longest-first truncation and zero padding (reference §2.3).

  Returns:
    dict `input_word_ids`, `input_mask`, `input_type_ids`: lists of `max_seq_length` ints. Segment 0 covers
    [CLS], A and the first [SEP]; segment 1 covers B and its [SEP].
  """
  specials = 3 if ids_b is not None else 2
  if max_seq_length < specials:
    raise ValueError(f"max_seq_length={max_seq_length} leaves no room for the {specials} special tokens.")
  a = list(ids_a)
  b = list(ids_b) if ids_b is not None else []
  truncate_seq_pair(a, b, max_seq_length - specials)
  cls, sep = SPECIAL_TOKEN_IDS[CLS], SPECIAL_TOKEN_IDS[SEP]
  word_ids = [cls] + a + [sep]
  type_ids = [0] * len(word_ids)
  if ids_b is not None:
    word_ids += b + [sep]
    type_ids += [1] * (len(b) + 1)
  mask = [1] * len(word_ids)
  pad = max_seq_length - len(word_ids)
  return {
      "input_word_ids": word_ids + [0] * pad,
      "input_mask": mask + [0] * pad,
      "input_type_ids": type_ids + [0] * pad,
  }
