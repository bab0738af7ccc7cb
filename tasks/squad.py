"""SQuAD v1.1 / v2.0: examples, SentencePiece features, post-processing and the v2 threshold protocols (§5.2).

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
import json
import logging
import math
import os
import unicodedata
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from official_albert import file_io
from tasks import squad_evaluate

logger = logging.getLogger(__name__)

SPIECE_UNDERLINE = "\u2581"
UNIQUE_ID_START = 1000000000
NULL_FALLBACK_SCORE = 1e6  # Null score of an example that produced no features (reference: it stays 1e6).
V1_EMPTY_TEXT = "empty"  # The reference's v1 answer when no span is valid.


class SquadDataError(ValueError):
  """A SQuAD file is malformed; the message names the file and question id."""


@dataclasses.dataclass
class SquadExample:
  """One question.

  Attributes:
    qas_id: question id.
    question_text: the question.
    paragraph_text: the original context.
    orig_answer_text: the first gold answer ("" when impossible; None when the file has no answer).
    start_char: its character offset in `paragraph_text` (-1 when impossible / unknown).
    is_impossible: SQuAD 2.0 unanswerable question.
    answers: every gold answer text (for evaluation).
  """
  qas_id: str
  question_text: str
  paragraph_text: str
  orig_answer_text: Optional[str] = None
  start_char: int = -1
  is_impossible: bool = False
  answers: List[str] = dataclasses.field(default_factory=list)


# ----------------------------------------------------------------------------------------------------- reading


def _load_json(path: str):
  import tensorflow as tf  # Lazy: gs:// support only where files are read.

  with tf.io.gfile.GFile(path, "r") as f:
    return json.load(f)


def _flat_to_nested(data: List[dict]) -> List[dict]:
  """HF-datasets rows (id/question/context/answers{answer_start, text}) → official articles/paragraphs/qas."""
  paragraphs: "collections.OrderedDict[Tuple[str, str], dict]" = collections.OrderedDict()
  for row in data:
    key = (row.get("title", ""), row["context"])
    para = paragraphs.setdefault(key, {"context": row["context"], "qas": []})
    answers = row.get("answers") or {"text": [], "answer_start": []}
    qa = {"id": row["id"], "question": row["question"],
          "answers": [{"text": t, "answer_start": s} for t, s in zip(answers["text"], answers["answer_start"])]}
    if "is_impossible" in row:
      qa["is_impossible"] = row["is_impossible"]
    para["qas"].append(qa)
  return [{"title": "", "paragraphs": list(paragraphs.values())}]


def load_dataset(path: str) -> Tuple[List[dict], str]:
  """Reads a SQuAD file (official nested format, or flat HF-datasets rows) → (articles, version "1.1"/"2.0")."""
  data = _load_json(path)
  if not isinstance(data, dict) or "data" not in data:
    raise SquadDataError(f"{path}: not a SQuAD file (expected a JSON object with 'data').")
  articles = data["data"]
  if articles and "paragraphs" not in articles[0]:
    if "context" not in articles[0]:
      raise SquadDataError(f"{path}: entries have neither 'paragraphs' nor 'context'.")
    articles = _flat_to_nested(articles)
    # Flat files mark unanswerable questions only by an empty answer list; their version field decides.
  version = squad_evaluate.detect_version({"version": data.get("version", ""), "data": articles})
  return articles, version


def read_squad_examples(path: str, is_training: bool, version_2_with_negative: Optional[bool] = None
                        ) -> List[SquadExample]:
  """Reads a SQuAD v1.1/v2.0 file.

  Args:
    path: the JSON file.
    is_training: training needs exactly one answer per answerable question (reference rule).
    version_2_with_negative: None = from the file; True allows unanswerable questions.

  Raises:
    SquadDataError: empty context, an answer text not at its answer_start, or a training question without exactly
      one answer; the message names the file and the question id.
  """
  articles, version = load_dataset(path)
  v2 = version == "2.0" if version_2_with_negative is None else version_2_with_negative
  examples = []
  for article in articles:
    for para in article["paragraphs"]:
      context = para["context"]
      for qa in para["qas"]:
        qid = qa["id"]
        if not context or not context.strip():
          raise SquadDataError(f"{path}: question {qid}: empty context.")
        answers = qa.get("answers", [])
        is_impossible = bool(qa.get("is_impossible", v2 and not answers))
        if is_impossible and not v2:
          raise SquadDataError(f"{path}: question {qid} is unanswerable but the data is SQuAD v1.1.")
        for ans in answers:
          start, text = int(ans["answer_start"]), ans["text"]
          if context[start:start + len(text)] != text:
            raise SquadDataError(
                f"{path}: question {qid}: answer {text!r} is not at answer_start={start} "
                f"(context there: {context[start:start + len(text)]!r}).")
        if is_impossible:
          orig, start_char = "", -1
        elif answers:
          if is_training and len(answers) != 1:
            raise SquadDataError(f"{path}: question {qid}: training questions need exactly 1 answer, "
                                 f"got {len(answers)}.")
          orig, start_char = answers[0]["text"], int(answers[0]["answer_start"])
        elif is_training:
          raise SquadDataError(f"{path}: question {qid}: training question has no answer.")
        else:
          orig, start_char = None, -1
        examples.append(SquadExample(
            qas_id=qid, question_text=qa["question"], paragraph_text=context, orig_answer_text=orig,
            start_char=start_char, is_impossible=is_impossible, answers=[a["text"] for a in answers]))
  logger.info("%s: %d SQuAD v%s examples.", path, len(examples), "2.0" if v2 else "1.1")
  return examples


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


def features_to_arrays(features: Sequence[SquadFeature], is_training: bool) -> Dict[str, np.ndarray]:
  """Stacks features into model-input arrays (+ labels when training)."""
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


def feature_text(example: SquadExample, feature: SquadFeature, start: int, end: int) -> str:
  """Original paragraph substring covered by sequence positions [start, end]."""
  return example.paragraph_text[feature.token_to_orig[start][0]:feature.token_to_orig[end][1]]


# -------------------------------------------------------------------------------------------- post-processing


def _softmax(scores: Sequence[float]) -> List[float]:
  if not scores:
    return []
  m = max(scores)
  exps = [math.exp(s - m) for s in scores]
  total = sum(exps)
  return [e / total for e in exps]


def _top_indices(values, n: int) -> List[int]:
  values = np.asarray(values)
  return [int(i) for i in np.argsort(-values, kind="stable")[:n]]


def _group_features(features: Sequence[SquadFeature]) -> Dict[int, List[SquadFeature]]:
  grouped: Dict[int, List[SquadFeature]] = collections.defaultdict(list)
  for f in features:
    grouped[f.example_index].append(f)
  return grouped


def _valid_span(feature: SquadFeature, start: int, end: int, max_answer_length: int) -> bool:
  if start not in feature.token_to_orig or end not in feature.token_to_orig:
    return False  # Question, [SEP], padding, [CLS].
  if not feature.token_is_max_context.get(start, False):
    return False
  return start <= end and end - start + 1 <= max_answer_length


def _nbest(example, candidates, n_best_size, keys):
  """Sorts (score_a, score_b, feature, start, end) candidates, dedupes by text, adds softmax probabilities."""
  candidates.sort(key=lambda c: c[0] + c[1], reverse=True)
  seen, nbest = set(), []
  for score_a, score_b, feature, start, end in candidates:
    if len(nbest) >= n_best_size:
      break
    text = feature_text(example, feature, start, end)
    if text in seen:
      continue
    seen.add(text)
    nbest.append({"text": text, keys[0]: float(score_a), keys[1]: float(score_b)})
  return nbest


def postprocess_v1(examples: Sequence[SquadExample], features: Sequence[SquadFeature],
                   results: Mapping[int, Mapping[str, np.ndarray]], n_best_size: int = 20,
                   max_answer_length: int = 30):
  """v1 head: top-n starts × top-n ends per feature, score = start_logit + end_logit.

  Args:
    results: unique_id → {"start_logits": [L], "end_logits": [L]}.

  Returns:
    (predictions {qid: text}, nbest {qid: [{"text", "probability", "start_logit", "end_logit"}]}). An example with
    no valid span (or no features) gets the reference's "empty".
  """
  grouped = _group_features(features)
  predictions, all_nbest = collections.OrderedDict(), collections.OrderedDict()
  for ex_index, example in enumerate(examples):
    candidates = []
    for feature in grouped.get(ex_index, []):
      result = results[feature.unique_id]
      start_logits, end_logits = np.asarray(result["start_logits"]), np.asarray(result["end_logits"])
      for s in _top_indices(start_logits, n_best_size):
        for e in _top_indices(end_logits, n_best_size):
          if _valid_span(feature, s, e, max_answer_length):
            candidates.append((start_logits[s], end_logits[e], feature, s, e))
    nbest = _nbest(example, candidates, n_best_size, ("start_logit", "end_logit"))
    if not nbest:
      nbest = [{"text": V1_EMPTY_TEXT, "start_logit": 0.0, "end_logit": 0.0}]
    for entry, p in zip(nbest, _softmax([n["start_logit"] + n["end_logit"] for n in nbest])):
      entry["probability"] = p
    predictions[example.qas_id] = nbest[0]["text"]
    all_nbest[example.qas_id] = nbest
  return predictions, all_nbest


def postprocess_v2(examples: Sequence[SquadExample], features: Sequence[SquadFeature],
                   results: Mapping[int, Mapping[str, np.ndarray]], n_best_size: int = 20,
                   max_answer_length: int = 30, start_n_top: int = 5, end_n_top: int = 5):
  """Original v2 head (start beams, end conditioned on start, answer class); no threshold applied.

  Args:
    results: unique_id → {"start_top_log_probs" [start_n_top], "start_top_index" [start_n_top],
      "end_top_log_probs" [start_n_top*end_n_top], "end_top_index" [same], "cls_logits" scalar}; index
      i*end_n_top + j is end beam j of start beam i.

  Returns:
    (predictions {qid: best span text}, nbest, null_odds {qid: min cls_logits over the example's features}).
    No valid span → "" with log probs −1e6; an example without features → "" with null score 1e6.
  """
  grouped = _group_features(features)
  predictions, all_nbest, null_odds = (collections.OrderedDict(), collections.OrderedDict(),
                                       collections.OrderedDict())
  for ex_index, example in enumerate(examples):
    candidates = []
    score_null = NULL_FALLBACK_SCORE
    for feature in grouped.get(ex_index, []):
      r = results[feature.unique_id]
      score_null = min(score_null, float(np.asarray(r["cls_logits"]).reshape(())))
      start_lp, start_idx = np.asarray(r["start_top_log_probs"]), np.asarray(r["start_top_index"])
      end_lp, end_idx = np.asarray(r["end_top_log_probs"]), np.asarray(r["end_top_index"])
      for i in range(start_n_top):
        for j in range(end_n_top):
          s, e = int(start_idx[i]), int(end_idx[i * end_n_top + j])
          if s < feature.doc_offset:
            continue
          if _valid_span(feature, s, e, max_answer_length):
            candidates.append((start_lp[i], end_lp[i * end_n_top + j], feature, s, e))
    nbest = _nbest(example, candidates, n_best_size, ("start_log_prob", "end_log_prob"))
    if not nbest:
      nbest = [{"text": "", "start_log_prob": -1e6, "end_log_prob": -1e6}]
    for entry, p in zip(nbest, _softmax([n["start_log_prob"] + n["end_log_prob"] for n in nbest])):
      entry["probability"] = p
    predictions[example.qas_id] = nbest[0]["text"]
    all_nbest[example.qas_id] = nbest
    null_odds[example.qas_id] = score_null
  return predictions, all_nbest, null_odds


def apply_null_threshold(predictions: Mapping[str, str], null_odds: Mapping[str, float], threshold: float,
                         null_at_threshold: bool = False) -> "collections.OrderedDict[str, str]":
  """Predicts "" where the null score is above `threshold` (also at it with `null_at_threshold`, as the reference's
  re-write after `find_best_thresh` does)."""
  out = collections.OrderedDict()
  for qid, text in predictions.items():
    score = null_odds[qid]
    is_null = score >= threshold if null_at_threshold else score > threshold
    out[qid] = "" if is_null else text
  return out


def evaluate_v2_protocols(dataset: List[dict], predictions: Mapping[str, str], null_odds: Mapping[str, float],
                          fixed_threshold: float = 0.0) -> Dict[str, Dict[str, float]]:
  """Both SQuAD 2.0 protocols, labelled.

  - "fixed_threshold": null when cls score > `fixed_threshold`, chosen without looking at the evaluated data.
  - "dev_tuned_threshold_reference": the reference's protocol — `find_best_thresh` on the evaluated set picks
    best_f1_thresh, predictions are re-written (null at or above it) and scored with the official script with the
    null scores as na_probs and na_prob_thresh 1.0. Optimistic: the threshold is tuned on the data it scores.
  """
  fixed_preds = apply_null_threshold(predictions, null_odds, fixed_threshold)
  fixed = dict(squad_evaluate.evaluate_v2(dataset, fixed_preds))
  fixed["null_score_diff_threshold"] = float(fixed_threshold)
  search = squad_evaluate.evaluate_v2(dataset, dict(predictions), dict(null_odds))
  thresh = float(search["best_f1_thresh"])
  tuned_preds = apply_null_threshold(predictions, null_odds, thresh, null_at_threshold=True)
  tuned = dict(squad_evaluate.evaluate_v2(dataset, tuned_preds, dict(null_odds), na_prob_thresh=1.0))
  tuned["null_score_diff_threshold"] = thresh
  tuned["search_best_exact"] = float(search["best_exact"])  # What the sweep itself found, before the re-write.
  tuned["search_best_f1"] = float(search["best_f1"])
  return {"fixed_threshold": fixed, "dev_tuned_threshold_reference": tuned}


def write_predictions(output_dir: str, predictions: Mapping[str, str], nbest: Mapping[str, list],
                      null_odds: Optional[Mapping[str, float]] = None) -> Dict[str, str]:
  """Writes predictions.json, nbest_predictions.json (and null_odds.json) atomically; returns their paths."""

  paths = {"predictions": os.path.join(output_dir, "predictions.json"),
           "nbest": os.path.join(output_dir, "nbest_predictions.json")}
  file_io.atomic_write_text(paths["predictions"], json.dumps(predictions, indent=2, ensure_ascii=False))
  file_io.atomic_write_text(paths["nbest"], json.dumps(nbest, indent=2, ensure_ascii=False))
  if null_odds is not None:
    paths["null_odds"] = os.path.join(output_dir, "null_odds.json")
    file_io.atomic_write_text(paths["null_odds"], json.dumps(null_odds, indent=2))
  return paths


# ------------------------------------------------------------------------------------------------------- the Task
# Imported here so the data and post-processing code above stays usable without TensorFlow/Keras.
import keras  # noqa: E402
import tensorflow as tf  # noqa: E402

from official_albert.training.experiment_config import DataConfig, TaskConfig  # noqa: E402
from official_albert.training import base_task  # noqa: E402

V1_OUTPUT_KEYS = ("start_logits", "end_logits")
V2_OUTPUT_KEYS = ("start_top_log_probs", "start_top_index", "end_top_log_probs", "end_top_index", "cls_logits")


@dataclasses.dataclass
class SquadTaskConfig(TaskConfig):
  """A SQuAD v1.1 / v2.0 fine-tuning run.

  Attributes:
    version_2_with_negative: False → `AlbertSpanLabeler` (v1 head); True → `AlbertSquadV2Model` (original v2 head).
    predict_file: the SQuAD JSON that `validation_data` was made from; evaluation rebuilds its (deterministic)
      features to map unique ids back to text (no pickle), so the tokenizer settings below must match.
    spm_model_file, do_lower_case, tokenizer_mode, doc_stride, max_query_length: as used by create_finetuning_data.
    n_best_size, max_answer_length, start_n_top, end_n_top: reference 20 / 30 / 5 / 5.
    null_score_threshold: v2 fixed-threshold protocol (null when cls score > threshold).
    predictions_dir: where predictions.json / nbest_predictions.json / null_odds.json are written at evaluation
      ('' = the task's logging_dir; nothing is written when both are empty).
    train_data / validation_data: TFRecords from create_finetuning_data (train: --split=train; eval: --split=dev).
    predict_data: `--mode=predict` records, made (as eval features, e.g. --split=test) from `predict_file`. The
      v2 predictions.json applies `null_score_threshold` ("" when the null score is above it); null_odds.json keeps
      the scores for another threshold.
  """
  version_2_with_negative: bool = False
  predict_file: str = ""
  spm_model_file: str = ""
  do_lower_case: bool = True
  tokenizer_mode: str = "hf"
  doc_stride: int = 128
  max_query_length: int = 64
  n_best_size: int = 20
  max_answer_length: int = 30
  start_n_top: int = 5
  end_n_top: int = 5
  null_score_threshold: float = 0.0
  predictions_dir: str = ""
  train_data: DataConfig = dataclasses.field(default_factory=lambda: DataConfig(global_batch_size=48,
                                                                                seq_length=384))
  validation_data: DataConfig = dataclasses.field(
      default_factory=lambda: DataConfig(global_batch_size=8, seq_length=384, is_training=False,
                                         drop_remainder=False))
  predict_data: DataConfig = dataclasses.field(
      default_factory=lambda: DataConfig(global_batch_size=8, seq_length=384, is_training=False,
                                         drop_remainder=False))


def squad_feature_spec(seq_length: int, is_training: bool):
  spec = {k: tf.io.FixedLenFeature([seq_length], tf.int64) for k in base_task.ENCODER_INPUT_KEYS + ("p_mask",)}
  spec["unique_ids"] = tf.io.FixedLenFeature([], tf.int64)
  if is_training:
    for k in ("start_positions", "end_positions", "is_impossible"):
      spec[k] = tf.io.FixedLenFeature([], tf.int64)
  return spec


def _position_ce(log_probs: tf.Tensor, positions: tf.Tensor) -> tf.Tensor:
  positions = tf.reshape(tf.cast(positions, tf.int32), [-1, 1])
  return -tf.reduce_mean(tf.gather(log_probs, positions, axis=1, batch_dims=1))


@base_task.register_task("squad", config_cls=SquadTaskConfig)
class SquadTask(base_task.Task):
  """SQuAD fine-tuning: v1 start/end head or the original v2 head; evaluation runs the official metrics.

  v1 loss = (CE(start) + CE(end)) / 2 over the whole sequence. v2 loss = 0.5·(CE_start + CE_end) + 0.5·BCE(
  is_impossible, cls_logits), the end conditioned on the gold start (reference §5.2). Evaluation metrics: v1
  `exact_match`, `f1`; v2 the fixed-threshold official keys (`exact`, `f1`, `HasAns_*`, ...) plus the reference's
  dev-tuned protocol under a `dev_tuned_` prefix.
  """

  best_metric = "f1"

  def __init__(self, params: SquadTaskConfig, logging_dir: Optional[str] = None):
    super().__init__(params, logging_dir)
    self._v2 = params.version_2_with_negative
    self.model_input_keys = base_task.ENCODER_INPUT_KEYS + (("p_mask",) if self._v2 else ())
    self._eval_data = None  # (examples, features, dataset JSON), built once.

  def build_model(self) -> keras.Model:
    from official_albert.modeling.models import AlbertSpanLabeler, AlbertSquadV2Model
    config = self.params.model.to_albert_config()
    seq = max(self.params.train_data.seq_length, 2)
    dummy = {k: tf.zeros([1, seq], tf.int32) for k in base_task.ENCODER_INPUT_KEYS}
    if self._v2:
      model = AlbertSquadV2Model(config, start_n_top=self.params.start_n_top, end_n_top=self.params.end_n_top)
      dummy["p_mask"] = tf.zeros([1, seq], tf.int32)
    else:
      model = AlbertSpanLabeler(config)
    model(dummy, training=False)
    # The span heads never read the pooled output. The reference skips variables without a gradient (no update, no
    # weight decay); freezing the pooler does the same and keeps its pretrained weights in the checkpoint.
    model.encoder.pooler.trainable = False
    return model

  def build_inputs(self, data_config: DataConfig,
                   input_context: Optional[tf.distribute.InputContext] = None) -> tf.data.Dataset:
    if not data_config.input_path:
      raise ValueError("SQuAD: empty input_path (set task.train_data.input_path / task.validation_data.input_path "
                       "to the create_finetuning_data TFRecords).")
    if data_config.pad_to_multiple_of or data_config.length_bucket_window > 1:
      # Post-processing maps logits to token positions of fixed-length windows, and windows are nearly full.
      raise ValueError("SQuAD: pad_to_multiple_of / length_bucket_window are not supported (the start/end logits "
                       "must stay aligned with the max_seq_length windows); set them to 0.")
    from official_albert.data import input_pipeline
    batch_size = data_config.global_batch_size
    if input_context is not None:
      batch_size = input_context.get_per_replica_batch_size(batch_size)
    spec = squad_feature_spec(data_config.seq_length, data_config.is_training)
    return input_pipeline.make_dataset(
        data_config.input_path, lambda r: input_pipeline.decode_record(r, spec), batch_size, data_config.is_training,
        input_context=input_context, seed=data_config.seed, shuffle_buffer_size=max(data_config.shuffle_buffer_size, 1),
        drop_remainder=data_config.drop_remainder)

  def model_inputs(self, features):
    inputs = super().model_inputs(features)
    if self._v2 and "start_positions" in features:
      inputs["start_positions"] = features["start_positions"]  # Training: condition the end on the gold start.
    return inputs

  def build_losses(self, labels, model_outputs, aux_losses=None) -> tf.Tensor:
    if self._v2:
      start = _position_ce(tf.cast(model_outputs["start_log_probs"], tf.float32), labels["start_positions"])
      end = _position_ce(tf.cast(model_outputs["end_log_probs"], tf.float32), labels["end_positions"])
      cls = tf.reduce_mean(tf.nn.sigmoid_cross_entropy_with_logits(
          labels=tf.cast(tf.reshape(labels["is_impossible"], [-1]), tf.float32),
          logits=tf.reshape(tf.cast(model_outputs["cls_logits"], tf.float32), [-1])))
      loss = 0.5 * (start + end) + 0.5 * cls
    else:
      start = _position_ce(tf.nn.log_softmax(tf.cast(model_outputs["start_logits"], tf.float32)),
                           labels["start_positions"])
      end = _position_ce(tf.nn.log_softmax(tf.cast(model_outputs["end_logits"], tf.float32)),
                         labels["end_positions"])
      loss = 0.5 * (start + end)
    if aux_losses:
      loss = loss + tf.add_n([tf.cast(l, tf.float32) for l in aux_losses])
    return loss

  def validation_step(self, inputs, model, metrics):
    """Inference only (eval records carry no labels); returns the head outputs and unique ids for post-processing."""
    del metrics
    features, _ = self.split_inputs(inputs)
    feats = {k: v for k, v in features.items() if k not in ("start_positions", "end_positions", "is_impossible")}
    outputs = model(self.model_inputs(feats), training=False)
    keys = V2_OUTPUT_KEYS if self._v2 else V1_OUTPUT_KEYS
    logs = {k: outputs[k] for k in keys}
    logs["unique_ids"] = features["unique_ids"]
    return logs

  def _examples_and_features(self, seq_length: int):
    """predict_file's examples and their (deterministic) features, as create_finetuning_data made them."""
    from official_albert.tokenization import FullTokenizer
    p = self.params
    if not p.predict_file or not p.spm_model_file:
      raise ValueError("SQuAD evaluation/prediction needs task.predict_file (the JSON) and task.spm_model_file.")
    tokenizer = FullTokenizer(p.spm_model_file, do_lower_case=p.do_lower_case, mode=p.tokenizer_mode)
    examples = read_squad_examples(p.predict_file, is_training=False, version_2_with_negative=self._v2)
    features, _ = convert_examples_to_features(examples, tokenizer, seq_length, p.doc_stride, p.max_query_length)
    return examples, features

  def _load_eval_data(self):
    if self._eval_data is None:
      examples, features = self._examples_and_features(self.params.validation_data.seq_length)
      dataset, _ = load_dataset(self.params.predict_file)
      self._eval_data = (examples, features, dataset)
    return self._eval_data

  def postprocess(self, aggregated_logs, examples_and_features=None):
    """(examples, predictions, nbest, null_odds or None) from the collected eval outputs.

    `examples_and_features` defaults to the evaluation set's.
    """
    if examples_and_features is None:
      examples_and_features = self._load_eval_data()[:2]
    examples, features = examples_and_features
    keys = V2_OUTPUT_KEYS if self._v2 else V1_OUTPUT_KEYS
    cols = {k: np.concatenate(aggregated_logs[k], axis=0) for k in keys + ("unique_ids",)}
    results = {int(uid): {k: cols[k][i] for k in keys} for i, uid in enumerate(cols["unique_ids"])}
    used = [f for f in features if f.unique_id in results]
    if len(used) != len(features):
      logger.warning("SQuAD eval: results for %d of %d features (validation_steps limited?); examples without "
                     "results get the fallback answer.", len(used), len(features))
    p = self.params
    if self._v2:
      preds, nbest, null_odds = postprocess_v2(examples, used, results, p.n_best_size, p.max_answer_length,
                                               p.start_n_top, p.end_n_top)
    else:
      preds, nbest = postprocess_v1(examples, used, results, p.n_best_size, p.max_answer_length)
      null_odds = None
    return examples, preds, nbest, null_odds

  def reduce_aggregated_logs(self, aggregated_logs, global_step=None) -> Dict[str, float]:
    del global_step
    if not aggregated_logs:
      return {}
    _, preds, nbest, null_odds = self.postprocess(aggregated_logs)
    _, _, dataset = self._load_eval_data()
    out_dir = self.params.predictions_dir or self.logging_dir
    if out_dir:
      write_predictions(out_dir, preds, nbest, null_odds)
    if not self._v2:
      return dict(squad_evaluate.evaluate_v1(dataset, preds))
    protocols = evaluate_v2_protocols(dataset, preds, null_odds, self.params.null_score_threshold)
    results = {k: float(v) for k, v in protocols["fixed_threshold"].items()}
    results.update({f"dev_tuned_{k}": float(v) for k, v in protocols["dev_tuned_threshold_reference"].items()})
    return results

  def predict_outputs(self, features, outputs):
    out = {k: outputs[k] for k in (V2_OUTPUT_KEYS if self._v2 else V1_OUTPUT_KEYS)}
    out["unique_ids"] = features["unique_ids"]
    return out

  def write_prediction_files(self, aggregated_logs, output_dir: str) -> Dict[str, str]:
    """predictions.json, nbest_predictions.json and (v2) null_odds.json for every question of predict_file."""
    data = self._examples_and_features(self.params.predict_data.seq_length)
    num_results = sum(len(u) for u in aggregated_logs["unique_ids"])
    if num_results != len(data[1]):
      raise ValueError(f"SQuAD predict: {num_results} records in {self.params.predict_data.input_path} but "
                       f"{len(data[1])} features from {self.params.predict_file}; rebuild the records from this file "
                       "with the same tokenizer, max_seq_length, doc_stride and max_query_length.")
    _, preds, nbest, null_odds = self.postprocess(aggregated_logs, data)
    if null_odds is not None:
      preds = apply_null_threshold(preds, null_odds, self.params.null_score_threshold)
    return write_predictions(output_dir, preds, nbest, null_odds)
