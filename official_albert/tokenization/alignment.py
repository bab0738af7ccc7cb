"""Where SentencePiece pieces sit in the original text: character offsets of pieces, first pieces of words.

Shared by the fine-tuning data (`tasks.squad`, `tasks.text`) and the text-in predictors (`serving.task_pipelines`),
so that a prediction maps back to the text exactly as the records were made.

Character alignment (SQuAD). The reference aligns the joined pieces with the paragraph by a banded LCS and silently
drops examples that match badly. Here every character of the preprocessed paragraph keeps the index of the original
character it came from (whitespace collapse, NFKD + combining-mark removal and lower-casing are done per character),
and the pieces are matched against that text character by character (a `difflib` alignment of a short window only
where SentencePiece's own normalisation changed or dropped a character). Each token therefore carries exact
original character offsets that never include whitespace, and a span of tokens maps back to an exact substring of
the original text. The "hf" tokenizer mode's quote normalisation (`` and '' become ") is mirrored on request
(`normalize_quotes`), each '"' then covering both characters of its pair.

Word alignment (token tagging). Each whitespace word is tokenized on its own; its tag sits on its first piece. A
sentence whose pieces do not fit in one sequence is split at word boundaries into consecutive sub-sentences
(`sub_sentences`, as the reference's `tagging_data_lib._tokenize_example`), so every word gets a position; a single
word longer than a sequence keeps its first pieces. A word that tokenizes to no piece (a lone zero-width space or
BOM) is given the `<unk>` piece when the caller passes its id (`unk_id`; the `tasks.text` records and
`pipelines.token_classification` do, as the reference does), so that it too is tagged and scored; without one it
gets no position. The predictor's words
(`whitespace_words`) are split at every whitespace character, while the CoNLL reader (`tasks.text.data`) splits its
lines at ASCII spaces and tabs only: a CoNLL token "10\u00a0000" (no-break space) is one word in training and two
in `pipelines.token_classification`.
"""

from __future__ import annotations

import dataclasses
import difflib
from typing import List, Optional, Sequence, Tuple
import unicodedata

from official_albert.tokenization.tokenizer import SPIECE_UNDERLINE
from official_albert.tokenization.tokenizer import UNK

# ------------------------------------------------------------------------------------------ character offsets
QUOTE_PAIRS = ("``", "''")  # What FullTokenizer's "hf" mode turns into '"' (HF's AlbertTokenizer does).


def preprocess_with_offsets(text: str, lower: bool, remove_space: bool = True,
                            normalize_quotes: bool = False) -> Tuple[str, List[int]]:
  """The reference `preprocess_text`, keeping for each output character the index of its source character.

  Steps as §2.1: strip + collapse whitespace runs to one space, NFKD and drop combining marks, lower-case;
  `normalize_quotes` as the "hf" tokenizer mode (`` and '' → ", each from its pair's first character).
  """
  norm, starts, _ = preprocess_with_spans(text, lower, remove_space, normalize_quotes)
  return norm, starts


def preprocess_with_spans(text: str, lower: bool, remove_space: bool = True,
                          normalize_quotes: bool = False) -> Tuple[str, List[int], List[int]]:
  """`preprocess_with_offsets` with each output character's [start, end) source range.

  Why ranges: a normalised quote pair is one '"' but two source characters; a token ending in it must end after
  both (every other output character comes from one source character: end = start + 1).
  """
  out_chars: List[str] = []
  starts: List[int] = []
  ends: List[int] = []
  pending_space = -1  # Index of the first whitespace char of a run not yet emitted.
  i = 0
  while i < len(text):
    ch = text[i]
    if remove_space and ch.isspace():
      if out_chars and pending_space < 0:
        pending_space = i
      i += 1
      continue
    if pending_space >= 0:
      out_chars.append(" ")
      starts.append(pending_space)
      ends.append(pending_space + 1)
      pending_space = -1
    if normalize_quotes and text[i:i + 2] in QUOTE_PAIRS:
      # str.replace's leftmost non-overlapping matches; the two pairs share no character, so one scan finds both.
      out_chars.append('"')
      starts.append(i)
      ends.append(i + 2)
      i += 2
      continue
    for d in unicodedata.normalize("NFKD", ch):
      if unicodedata.combining(d):
        continue
      for c in (d.lower() if lower else d):
        out_chars.append(c)
        starts.append(i)
        ends.append(i + 1)
    i += 1
  return "".join(out_chars), starts, ends


def _is_mark(ch: str) -> bool:
  """Whether `ch` is only combining marks once decomposed (the preprocessing drops every one of them)."""
  decomposed = unicodedata.normalize("NFKD", ch)
  return bool(decomposed) and all(unicodedata.combining(d) for d in decomposed)


@dataclasses.dataclass
class Alignment:
  """Per-token [start, end) character offsets in the original text (end == start for whitespace-only tokens)."""
  starts: List[int]
  ends: List[int]
  matched_fraction: float


def align_tokens(tokens: Sequence[str], text: str, lower: bool, normalize_quotes: bool = False) -> Alignment:
  """Maps SentencePiece tokens of `preprocess_text(text)` to character offsets in `text`.

  A greedy walk handles the usual case (the pieces spell the preprocessed text, with "▁" for spaces); where
  SentencePiece's normalisation changed or dropped a character, a `difflib` alignment of a window after it
  resynchronises the walk (`_resynced_pairs`: time stays about linear in the text's length).

  Args:
    tokens: the pieces of `text`.
    text: the original text.
    lower: the tokenizer's `do_lower_case`.
    normalize_quotes: the tokenizer turned `` and '' into " (`FullTokenizer.mode == "hf"`): without it those
      pieces would match nothing and the text could count as badly aligned.
  """
  norm, src_starts, src_ends = preprocess_with_spans(text, lower, normalize_quotes=normalize_quotes)
  # Lower-casing a whole string writes a word-final capital sigma as final sigma (ς, the reference mode's pieces),
  # one character at a time as σ: compared as one letter, or the Σ ending an answer was cut off.
  norm = norm.replace("ς", "σ") if lower else norm
  joined_chars, owner = [], []
  for t, piece in enumerate(tokens):
    for ch in piece.replace(SPIECE_UNDERLINE, " "):
      # Back to the decomposed form of the preprocessed text: SentencePiece's NFKC re-composes e.g. Hangul jamo.
      for d in unicodedata.normalize("NFKD", ch):
        if not unicodedata.combining(d):
          for c in (d.lower().replace("ς", "σ") if lower else d):
            joined_chars.append(c)
            owner.append(t)
  joined = "".join(joined_chars)
  pairs = _greedy_pairs(joined, norm)
  if pairs is None:
    pairs = _resynced_pairs(joined, norm)
  starts: List[Optional[int]] = [None] * len(tokens)
  ends: List[Optional[int]] = [None] * len(tokens)
  matched = 0
  for a, b in pairs:
    if norm[b] == " ":
      continue  # Whitespace never bounds a token's span: answers come back without stray spaces.
    t = owner[a]
    matched += 1
    if starts[t] is None or src_starts[b] < starts[t]:
      starts[t] = src_starts[b]
    if ends[t] is None or src_ends[b] > ends[t]:
      ends[t] = src_ends[b]
  # A combining mark after a token's last character is the token's (decomposed é, Arabic harakat, Hebrew niqqud,
  # half-width katakana's voiced marks ﾞ ﾟ, which decompose to combining ones): the walk drops the marks, and an
  # answer ended mid-character ("cafe" of "cafe\u0301", "ｶ" of "ｶﾞ").
  for t, end in enumerate(ends):
    while end is not None and end < len(text) and _is_mark(text[end]):
      end += 1
    ends[t] = end
  # Tokens with no matched character (bare "▁", a dropped control char) get an empty span at the previous end;
  # a span of tokens takes its text from its non-empty ones (`squad_postprocess.span_offsets`).
  prev = 0
  for t in range(len(tokens)):
    if starts[t] is None:
      starts[t] = ends[t] = prev
    prev = ends[t]
  non_space = sum(1 for c in norm if c != " ")
  return Alignment(starts, ends, matched / non_space if non_space else 1.0)


def _greedy_pairs(joined: str, norm: str) -> Optional[List[Tuple[int, int]]]:
  """Character pairs (joined index, norm index) when the strings agree up to spaces; None otherwise."""
  pairs: List[Tuple[int, int]] = []
  i, j = _greedy_walk(joined, norm, 0, 0, pairs)
  if i < len(joined) and j < len(norm):  # (a mismatch)
    return None
  while i < len(joined) and joined[i] == " ":
    i += 1
  while j < len(norm) and norm[j] == " ":
    j += 1
  return pairs if i == len(joined) and j == len(norm) else None


# A local `difflib` window where the greedy walk fails, and the matching run it must reach to resume the walk.
RESYNC_WINDOW, RESYNC_ANCHOR = 256, 12


def _resynced_pairs(joined: str, norm: str) -> List[Tuple[int, int]]:
  """Character pairs of the greedy walk, resynchronised by a local `difflib` alignment wherever it fails.

  Why: one character SentencePiece drops but preprocessing keeps (\x01, U+200B, U+FEFF) or changes (ligatures,
  full-width forms) used to send the whole paragraph to `difflib`, quadratic in its length (seconds at 18k
  characters, hours at 1 MB) and matching repetitive text badly. Here only a window after the failure is aligned,
  up to the first run of RESYNC_ANCHOR equal characters (or the ends of both strings); the walk resumes after that
  run. A window with no such run doubles (at worst the rest of the text, as before).
  """
  pairs: List[Tuple[int, int]] = []
  i = j = 0
  while True:
    i, j = _greedy_walk(joined, norm, i, j, pairs)
    if i >= len(joined) or j >= len(norm):
      return pairs
    window = RESYNC_WINDOW
    while True:
      a_end, b_end = min(len(joined), i + window), min(len(norm), j + window)
      at_end = a_end == len(joined) and b_end == len(norm)
      blocks = difflib.SequenceMatcher(None, joined[i:a_end], norm[j:b_end], autojunk=False).get_matching_blocks()
      anchor = next((k for k, (_, _, size) in enumerate(blocks) if size >= RESYNC_ANCHOR), None)
      if anchor is not None or at_end:
        break
      window *= 2
    kept = blocks if anchor is None else blocks[:anchor + 1]
    pairs.extend((i + a + k, j + b + k) for a, b, size in kept for k in range(size))
    if anchor is None:
      return pairs
    a, b, size = blocks[anchor]
    i, j = i + a + size, j + b + size


def _greedy_walk(joined: str, norm: str, i: int, j: int, pairs: List[Tuple[int, int]]) -> Tuple[int, int]:
  """Appends the pairs of equal characters from (i, j), skipping spaces on either side; returns where it stopped:
  a mismatch (both indices inside their strings), or the end of either string."""
  while i < len(joined) and j < len(norm):
    if joined[i] == norm[j]:
      pairs.append((i, j))
      i += 1
      j += 1
    elif joined[i] == " ":
      i += 1
    elif norm[j] == " ":
      j += 1
    else:
      break
  return i, j


def answer_token_span(alignment: Alignment, start_char: int, answer_len: int) -> Tuple[int, int]:
  """First and last tokens covering characters [start_char, start_char + answer_len) (−1, −1 if none)."""
  end_char = start_char + answer_len
  tok_start = tok_end = -1
  for t, (s, e) in enumerate(zip(alignment.starts, alignment.ends)):
    if e <= s:
      continue
    if tok_start < 0 and e > start_char:
      tok_start = t
    if s < end_char:
      tok_end = t
  if tok_start < 0 or tok_end < tok_start:
    return -1, -1
  return tok_start, tok_end


# ------------------------------------------------------------------------------------------------ word pieces
def whitespace_words(text: str) -> List[Tuple[str, int, int]]:
  """(word, start, end) of each whitespace-separated word of `text` (`str.split()`'s words, with offsets).

  Every `str.isspace` character splits, the no-break space U+00A0 and the ideographic space U+3000 included (the
  tokenizer's whitespace collapse splits there too), unlike the CoNLL reader, which keeps them inside a token (it
  splits its columns at ASCII spaces and tabs): a client that pairs these words with a CoNLL-style token list must
  split its tokens at those characters as well. Zero-width characters (U+200B, U+FEFF) are not whitespace here.
  """
  words, start = [], None
  for i, ch in enumerate(text):
    if ch.isspace():
      if start is not None:
        words.append((text[start:i], start, i))
        start = None
    elif start is None:
      start = i
  if start is not None:
    words.append((text[start:], start, len(text)))
  return words


def unk_id(tokenizer) -> int:
  """The id of `tokenizer`'s `<unk>` piece: what a word without pieces is written as (`align_words`)."""
  return int(tokenizer.convert_tokens_to_ids([UNK])[0])


def _word_pieces(pieces: Sequence[int], unk: Optional[int]) -> Sequence[int]:
  return [unk] if not len(pieces) and unk is not None else pieces


def align_words(word_pieces: Sequence[Sequence[int]], seq_length: int,
                unk: Optional[int] = None) -> Tuple[List[int], List[Optional[int]]]:
  """Piece ids of a sentence and, per word, the position of its first piece ([CLS] = 0) or None.

  None: the word has no piece (it tokenizes to nothing, and no `unk` id stands in for it) or lies beyond
  `seq_length - 2` pieces (cut; `sub_sentences` splits a sentence so that none is).
  """
  ids: List[int] = []
  first: List[Optional[int]] = []
  limit = seq_length - 2
  for pieces in word_pieces:
    pieces = _word_pieces(pieces, unk)
    if not len(pieces) or len(ids) >= limit:
      first.append(None)
      continue
    first.append(len(ids) + 1)
    ids.extend(pieces[:limit - len(ids)])
  return ids, first


def sub_sentences(word_pieces: Sequence[Sequence[int]], seq_length: int,
                  unk: Optional[int] = None) -> List[Tuple[int, int]]:
  """[start, end) word ranges of the consecutive sub-sentences a sentence is split into, each `[CLS] words [SEP]` of
  at most `seq_length` pieces (one range for a sentence that fits, an empty one included).

  Why: words beyond one sequence were dropped, untagged and unscored. As the reference, a word that does not fit
  after the words before it starts the next sub-sentence; one longer than a whole sequence is alone there and keeps
  its first `seq_length - 2` pieces (`align_words`).
  """
  limit = max(seq_length - 2, 1)
  spans: List[Tuple[int, int]] = []
  start = used = 0
  for i, pieces in enumerate(word_pieces):
    n = min(len(_word_pieces(pieces, unk)), limit)
    if used and used + n > limit:
      spans.append((start, i))
      start, used = i, 0
    used += n
  spans.append((start, len(word_pieces)))
  return spans
