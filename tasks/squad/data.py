"""SQuAD v1.1 / v2.0 data: aligning pieces to characters, windowed features, the training order (§5.2).

Reading the JSON (with named errors) is in `tasks.squad.reading`; its names are re-exported here.

Alignment. The reference aligns the joined pieces with the paragraph by a banded LCS and silently drops examples that
match badly. Here every character of the preprocessed paragraph keeps the index of the original character it came
from (whitespace collapse, NFKD + combining-mark removal and lower-casing are done per character), and the pieces are
matched against that text character by character (a `difflib` alignment only when SentencePiece's own normalisation
changed a character). Each token therefore carries exact original character offsets that never include whitespace,
and a span of tokens maps back to an exact substring of the original paragraph. Examples that still align badly are
counted and logged ("mismatch") and get the reference fallback answer at evaluation; nothing is dropped silently.

Features follow the reference layout `[CLS] question [SEP] doc-span [SEP]`, with `doc_stride` windows, max-context
scores, `p_mask` (1 = cannot be an answer: question, both [SEP], padding), [CLS] labels for out-of-span and
impossible answers (v1 too), and unique ids from 1000000000.
"""


from __future__ import annotations

import collections
import dataclasses
import difflib
import logging
import math
import random
import unicodedata
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from tasks.records import RecordWriter
from tasks.squad.reading import SquadDataError, SquadExample, load_dataset, read_squad_examples  # noqa: F401

logger = logging.getLogger(__name__)

SPIECE_UNDERLINE = "\u2581"

UNIQUE_ID_START = 1000000000


# --------------------------------------------------------------------------------------------------- alignment
def preprocess_with_offsets(text: str, lower: bool, remove_space: bool = True) -> Tuple[str, List[int]]:
  """The reference `preprocess_text`, keeping for each output character the index of its source character.

  Steps as §2.1: strip + collapse whitespace runs to one space, NFKD and drop combining marks, lower-case.
  """
  out_chars: List[str] = []
  offsets: List[int] = []
  pending_space = -1  # Index of the first whitespace char of a run not yet emitted.
  for i, ch in enumerate(text):
    if remove_space and ch.isspace():
      if out_chars and pending_space < 0:
        pending_space = i
      continue
    if pending_space >= 0:
      out_chars.append(" ")
      offsets.append(pending_space)
      pending_space = -1
    for d in unicodedata.normalize("NFKD", ch):
      if unicodedata.combining(d):
        continue
      for c in (d.lower() if lower else d):
        out_chars.append(c)
        offsets.append(i)
  return "".join(out_chars), offsets


@dataclasses.dataclass
class _Alignment:
  """Per-token [start, end) character offsets in the original text (end == start for whitespace-only tokens)."""
  starts: List[int]
  ends: List[int]
  matched_fraction: float


def align_tokens(tokens: Sequence[str], text: str, lower: bool) -> _Alignment:
  """Maps SentencePiece tokens of `preprocess_text(text)` to character offsets in `text`.

  A greedy walk handles the usual case (the pieces spell the preprocessed text, with "▁" for spaces); when
  SentencePiece's normalisation changed a character, a `difflib` alignment of the whole text is used instead.
  """
  norm, offsets = preprocess_with_offsets(text, lower)
  joined_chars, owner = [], []
  for t, piece in enumerate(tokens):
    for ch in piece.replace(SPIECE_UNDERLINE, " "):
      # Back to the decomposed form of the preprocessed text: SentencePiece's NFKC re-composes e.g. Hangul jamo.
      for d in unicodedata.normalize("NFKD", ch):
        if not unicodedata.combining(d):
          for c in (d.lower() if lower else d):
            joined_chars.append(c)
            owner.append(t)
  joined = "".join(joined_chars)
  pairs = _greedy_pairs(joined, norm)
  if pairs is None:
    matcher = difflib.SequenceMatcher(None, joined, norm, autojunk=False)
    pairs = [(a + k, b + k) for a, b, size in matcher.get_matching_blocks() for k in range(size)]
  starts: List[Optional[int]] = [None] * len(tokens)
  ends: List[Optional[int]] = [None] * len(tokens)
  matched = 0
  for a, b in pairs:
    if norm[b] == " ":
      continue  # Whitespace never bounds a token's span: answers come back without stray spaces.
    t, o = owner[a], offsets[b]
    matched += 1
    if starts[t] is None or o < starts[t]:
      starts[t] = o
    if ends[t] is None or o + 1 > ends[t]:
      ends[t] = o + 1
  # Tokens with no matched character (bare "▁", a dropped control char) get an empty span at the previous end.
  prev = 0
  for t in range(len(tokens)):
    if starts[t] is None:
      starts[t] = ends[t] = prev
    prev = ends[t]
  non_space = sum(1 for c in norm if c != " ")
  return _Alignment(starts, ends, matched / non_space if non_space else 1.0)


def _greedy_pairs(joined: str, norm: str) -> Optional[List[Tuple[int, int]]]:
  """Character pairs (joined index, norm index) when the strings agree up to spaces; None otherwise."""
  pairs = []
  i = j = 0
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
      return None
  while i < len(joined) and joined[i] == " ":
    i += 1
  while j < len(norm) and norm[j] == " ":
    j += 1
  return pairs if i == len(joined) and j == len(norm) else None


# ---------------------------------------------------------------------------------------------------- features
@dataclasses.dataclass
class SquadFeature:
  """One window of one example.

  Attributes:
    unique_id: from 1000000000, one per feature.
    example_index: index into the example list.
    doc_span_index: window number within the example.
    tokens: the token strings of the whole sequence.
    token_to_orig: sequence position → (start, end) character offsets in the paragraph (paragraph tokens only).
    token_is_max_context: sequence position → whether this window is the max-context one for that token.
    input_word_ids, input_mask, input_type_ids, p_mask: int lists of length max_seq_length.
    start_position, end_position: answer token positions (0 = [CLS] for impossible/out-of-span; -1 when no label).
    is_impossible: 1 when the label points to [CLS].
    doc_offset: position of the first paragraph token (len(question) + 2).
  """
  unique_id: int
  example_index: int
  doc_span_index: int
  tokens: List[str]
  token_to_orig: Dict[int, Tuple[int, int]]
  token_is_max_context: Dict[int, bool]
  input_word_ids: List[int]
  input_mask: List[int]
  input_type_ids: List[int]
  p_mask: List[int]
  start_position: int
  end_position: int
  is_impossible: int
  doc_offset: int


@dataclasses.dataclass
class FeatureStats:
  """Counts logged by `convert_examples_to_features` (never silent)."""
  examples: int = 0
  features: int = 0
  mismatched_examples: List[str] = dataclasses.field(default_factory=list)
  answers_off_token_boundary: List[str] = dataclasses.field(default_factory=list)
  out_of_span_features: int = 0


def _max_context_score(span_start: int, span_len: int, position: int) -> float:
  left = position - span_start
  right = span_start + span_len - 1 - position
  return min(left, right) + 0.01 * span_len


def answer_token_span(alignment: _Alignment, start_char: int, answer_len: int) -> Tuple[int, int]:
  """First and last paragraph tokens covering [start_char, start_char + answer_len) (−1, −1 if none)."""
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


def convert_examples_to_features(examples: Sequence[SquadExample], tokenizer, max_seq_length: int = 384,
                                 doc_stride: int = 128, max_query_length: int = 64,
                                 min_match_fraction: float = 0.8) -> Tuple[List[SquadFeature], FeatureStats]:
  """Windows each example into features (reference `convert_examples_to_features`).

  Args:
    examples: from `read_squad_examples`.
    tokenizer: `official_albert.tokenization.FullTokenizer` (its `tokenize` applies `preprocess_text`).
    max_seq_length, doc_stride, max_query_length: reference defaults 384 / 128 / 64.
    min_match_fraction: below this fraction of aligned paragraph characters an example counts as a mismatch and
      produces no features (the reference uses 0.8 of its LCS); it is counted, logged and gets the fallback answer.

  Returns:
    (features, stats).
  """
  if max_seq_length <= max_query_length + 3:
    raise ValueError(f"max_seq_length={max_seq_length} must exceed max_query_length + 3 = {max_query_length + 3}.")
  lower = bool(getattr(tokenizer, "do_lower_case", True))
  cls_id, sep_id = tokenizer.convert_tokens_to_ids(["[CLS]", "[SEP]"])
  stats = FeatureStats(examples=len(examples))
  features: List[SquadFeature] = []
  unique_id = UNIQUE_ID_START
  para_cache: Dict[str, Tuple[List[str], List[int], _Alignment]] = {}
  for ex_index, example in enumerate(examples):
    if example.paragraph_text not in para_cache:
      para_tokens = list(tokenizer.tokenize(example.paragraph_text))
      para_cache.clear()  # Questions of one paragraph are adjacent; keep only the current paragraph.
      para_cache[example.paragraph_text] = (para_tokens, tokenizer.convert_tokens_to_ids(para_tokens),
                                            align_tokens(para_tokens, example.paragraph_text, lower))
    para_tokens, para_ids, alignment = para_cache[example.paragraph_text]
    if alignment.matched_fraction < min_match_fraction or not para_ids:
      stats.mismatched_examples.append(example.qas_id)
      logger.warning("MISMATCH: question %s: only %.1f%% of the paragraph aligned with its %d pieces; no features.",
                     example.qas_id, 100 * alignment.matched_fraction, len(para_ids))
      continue
    query_tokens = list(tokenizer.tokenize(example.question_text))[:max_query_length]
    query_ids = tokenizer.convert_tokens_to_ids(query_tokens)

    tok_start = tok_end = -1
    if example.orig_answer_text and not example.is_impossible and example.start_char >= 0:
      tok_start, tok_end = answer_token_span(alignment, example.start_char, len(example.orig_answer_text))
      recovered = (example.paragraph_text[alignment.starts[tok_start]:alignment.ends[tok_end]]
                   if tok_start >= 0 else None)
      if recovered != example.orig_answer_text:
        stats.answers_off_token_boundary.append(example.qas_id)
        logger.info("Question %s: answer %r does not fall on token boundaries (tokens give %r).",
                    example.qas_id, example.orig_answer_text, recovered)

    max_tokens_for_doc = max_seq_length - len(query_ids) - 3
    spans = []
    start = 0
    while start < len(para_ids):
      length = min(len(para_ids) - start, max_tokens_for_doc)
      spans.append((start, length))
      if start + length == len(para_ids):
        break
      start += min(length, doc_stride)

    # The window in which each paragraph token has the most context (first window wins ties, as the reference).
    best_span = [-1] * len(para_ids)
    best_score = [-math.inf] * len(para_ids)
    for k, (span_start, span_len) in enumerate(spans):
      for doc_pos in range(span_start, span_start + span_len):
        score = _max_context_score(span_start, span_len, doc_pos)
        if score > best_score[doc_pos]:
          best_score[doc_pos], best_span[doc_pos] = score, k

    doc_offset = len(query_ids) + 2
    for span_index, (span_start, span_len) in enumerate(spans):
      ids = [cls_id] + list(query_ids) + [sep_id]
      types = [0] * len(ids)
      p_mask = [0] + [1] * (len(query_ids) + 1)
      token_to_orig, is_max = {}, {}
      for i in range(span_len):
        doc_pos = span_start + i
        pos = len(ids)
        token_to_orig[pos] = (alignment.starts[doc_pos], alignment.ends[doc_pos])
        is_max[pos] = best_span[doc_pos] == span_index
        ids.append(para_ids[doc_pos])
        types.append(1)
        p_mask.append(0)
      ids.append(sep_id)
      types.append(1)
      p_mask.append(1)
      tokens = ["[CLS]"] + query_tokens + ["[SEP]"] + para_tokens[span_start:span_start + span_len] + ["[SEP]"]
      pad = max_seq_length - len(ids)
      mask = [1] * len(ids) + [0] * pad
      ids += [0] * pad
      types += [0] * pad
      p_mask += [1] * pad

      if example.is_impossible:
        start_pos, end_pos, impossible = 0, 0, 1
      elif tok_start >= 0:
        if span_start <= tok_start and tok_end < span_start + span_len:
          start_pos, end_pos, impossible = tok_start - span_start + doc_offset, tok_end - span_start + doc_offset, 0
        else:
          start_pos, end_pos, impossible = 0, 0, 1  # Out of this window: [CLS] label, v1 too (reference).
          stats.out_of_span_features += 1
      else:
        start_pos, end_pos, impossible = -1, -1, 0  # No label (prediction data).
      features.append(SquadFeature(
          unique_id=unique_id, example_index=ex_index, doc_span_index=span_index, tokens=tokens,
          token_to_orig=token_to_orig, token_is_max_context=is_max, input_word_ids=ids, input_mask=mask,
          input_type_ids=types, p_mask=p_mask, start_position=start_pos, end_position=end_pos,
          is_impossible=impossible, doc_offset=doc_offset))
      unique_id += 1
  stats.features = len(features)
  logger.info("SQuAD features: %d examples → %d features; %d mismatched examples (fallback answers); %d answers "
              "not on token boundaries; %d out-of-span windows.", stats.examples, stats.features,
              len(stats.mismatched_examples), len(stats.answers_off_token_boundary), stats.out_of_span_features)
  return features, stats


def shuffle_training_order(examples: Sequence[SquadExample], features: Sequence[SquadFeature], seed: int
                           ) -> Tuple[List[SquadExample], List[SquadFeature]]:
  """The reference's training order: examples shuffled by `random.Random(seed).shuffle` (run_squad_v1/v2 use 12345,
  reference §5.2), then windowed — so each question's windows stay adjacent and unique ids count up in that order.

  The features are made in file order (paragraph tokenisation is cached per paragraph; shuffling first would redo it
  for every question) and then regrouped: `Random.shuffle` permutes by length and generator only, so permuting the
  indices gives the reference's order exactly. Everything stays in memory: the feature list exists already (SQuAD
  v1.1 train: 87,599 examples → ~88k features at 384), the permutation adds one index per example. Without it the
  records follow the file, so even after the reader's 100-record shuffle buffer a batch of 48 holds a few
  neighbouring articles instead of a sample of the whole set.

  Returns:
    (examples in the shuffled order, their features with `example_index` and `unique_id` renumbered in place).
  """
  order = list(range(len(examples)))
  random.Random(seed).shuffle(order)
  grouped: Dict[int, List[SquadFeature]] = collections.defaultdict(list)
  for f in features:
    grouped[f.example_index].append(f)
  out: List[SquadFeature] = []
  for new_index, old_index in enumerate(order):
    for f in grouped.get(old_index, ()):
      f.example_index, f.unique_id = new_index, UNIQUE_ID_START + len(out)
      out.append(f)
  return [examples[i] for i in order], out


def feature_record(feature: SquadFeature, is_training: bool) -> Dict[str, np.ndarray]:
  """One feature as a fine-tuning record: model inputs + `unique_ids` (+ span labels when training)."""
  record = {"unique_ids": np.asarray([feature.unique_id], np.int64),
            "input_word_ids": np.asarray(feature.input_word_ids, np.int32),
            "input_mask": np.asarray(feature.input_mask, np.int32),
            "input_type_ids": np.asarray(feature.input_type_ids, np.int32),
            "p_mask": np.asarray(feature.p_mask, np.int32)}
  if is_training:
    record.update(start_positions=np.asarray([feature.start_position], np.int32),
                  end_positions=np.asarray([feature.end_position], np.int32),
                  is_impossible=np.asarray([feature.is_impossible], np.int32))
  return record


def features_to_arrays(features: Sequence[SquadFeature], is_training: bool) -> Dict[str, np.ndarray]:
  """Stacks features into model-input arrays [N, L] and [N] (the records of `feature_record`, batched)."""
  out = {
      "unique_ids": np.asarray([f.unique_id for f in features], np.int64),
      "input_word_ids": np.asarray([f.input_word_ids for f in features], np.int32),
      "input_mask": np.asarray([f.input_mask for f in features], np.int32),
      "input_type_ids": np.asarray([f.input_type_ids for f in features], np.int32),
      "p_mask": np.asarray([f.p_mask for f in features], np.int32),
  }
  if is_training:
    out["start_positions"] = np.asarray([f.start_position for f in features], np.int32)
    out["end_positions"] = np.asarray([f.end_position for f in features], np.int32)
    out["is_impossible"] = np.asarray([f.is_impossible for f in features], np.int32)
  return out


class SquadRecords(RecordWriter):
  """`create_finetuning_data --task=squad_v1|squad_v2`: one record per window (`convert_examples_to_features`).

  `--split=train` writes training features (with span labels) in the reference's shuffled order
  (`shuffle_training_order`, seed `--squad_shuffle_seed`, default 12345; negative = file order, a deviation); any
  other split writes evaluation features in file order, which post-processing rebuilds from the same JSON and matches
  by `unique_ids` (no pickle).
  """

  default_max_seq_length = 384

  def __init__(self, options):
    super().__init__(options)
    if not options.input_file:
      raise ValueError("--input_file (the SQuAD JSON) is required for SQuAD.")

  def input_files(self, split: str) -> List[str]:
    del split
    return [self.options.input_file]

  def cache_settings(self):
    return {"doc_stride": self.options.doc_stride, "max_query_length": self.options.max_query_length,
            "squad_shuffle_seed": self._shuffle_seed()}

  def _shuffle_seed(self) -> Optional[int]:
    seed = self.options.squad_shuffle_seed
    return None if seed is None or seed < 0 else int(seed)

  def records(self, split: str, tokenizer):
    o = self.options
    is_training = split == "train"
    examples = read_squad_examples(o.input_file, is_training=is_training,
                                   version_2_with_negative=o.task == "squad_v2")
    features, stats = convert_examples_to_features(examples, tokenizer, o.max_seq_length, o.doc_stride,
                                                   o.max_query_length)
    seed = self._shuffle_seed() if is_training else None
    if seed is not None:
      examples, features = shuffle_training_order(examples, features, seed)
      logger.info("SQuAD train: %d examples (%d features) shuffled with random.Random(%d) (reference §5.2).",
                  len(examples), len(features), seed)
    elif is_training:
      logger.warning("SQuAD train: records written in file order (--squad_shuffle_seed < 0): batches will hold few "
                     "articles unless the reader's shuffle buffer spans the whole file.")
    records = (feature_record(f, is_training) for f in features)
    return records, {"num_examples": len(examples), "num_features": len(features),
                     "num_mismatched_examples": len(stats.mismatched_examples),
                     "num_answers_off_token_boundary": len(stats.answers_off_token_boundary),
                     "num_out_of_span_features": stats.out_of_span_features, "is_training": is_training,
                     "shuffle_seed": seed,
                     "doc_stride": o.doc_stride, "max_query_length": o.max_query_length}
