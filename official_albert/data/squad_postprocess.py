"""SQuAD post-processing (reference §5.2): the n-best answer spans of each example from the start/end outputs of its
windows, for the v1 span head and the original v2 head.

Shared by the fine-tuning evaluation (`tasks.squad.postprocess`, which re-exports these names and adds the v2
threshold protocols and the prediction files) and the question-answering predictor
(`serving.task_pipelines.question_answering`), which asks for the answers' character offsets too.
"""

from __future__ import annotations

import collections
import math
from typing import Any, Dict, List, Mapping, Sequence, Tuple

import numpy as np

from official_albert.data.squad_features import SquadFeature

NULL_FALLBACK_SCORE = 1e6  # Null score of an example that produced no features (reference: it stays 1e6).

V1_EMPTY_TEXT = "empty"  # The reference's v1 answer when no span is valid.


def span_offsets(feature: SquadFeature, start: int, end: int) -> Tuple[int, int]:
  """[start, end) character offsets of sequence positions [start, end] in the paragraph, from the first and last of
  them whose piece covers a character.

  Why: a bare "▁" piece covers no character; its empty span sits before the whitespace it stands for, so bounding
  the span by it would bring that whitespace in. The reference strips its answer text (`write_predictions`) to the
  same effect. A span of such pieces only gives "" (at its first piece).
  """
  spans = [feature.token_to_orig[p] for p in range(start, end + 1) if p in feature.token_to_orig]
  covered = [(s, e) for s, e in spans if e > s]
  if not covered:
    s = spans[0][0] if spans else feature.token_to_orig[start][0]
    return s, s
  return covered[0][0], covered[-1][1]


def feature_text(example: Any, feature: SquadFeature, start: int, end: int) -> str:
  """Original paragraph substring covered by sequence positions [start, end] (`span_offsets`: never starting or
  ending with the whitespace of a bare "▁" piece)."""
  char_start, char_end = span_offsets(feature, start, end)
  return example.paragraph_text[char_start:char_end]


def softmax(scores: Sequence[float]) -> List[float]:
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


def valid_span(feature: SquadFeature, start: int, end: int, max_answer_length: int) -> bool:
  """Both ends in the paragraph, the start token owned by this window (max context), start ≤ end, short enough."""
  if start not in feature.token_to_orig or end not in feature.token_to_orig:
    return False  # Question, [SEP], padding, [CLS].
  if not feature.token_is_max_context.get(start, False):
    return False
  return start <= end and end - start + 1 <= max_answer_length


def _nbest(example, candidates, n_best_size, keys, char_offsets):
  """Sorts (score_a, score_b, feature, start, end) candidates, dedupes by text (+ character offsets on request).

  The text never has whitespace at either end (`span_offsets`), as the reference's stripped `final_text` on which it
  dedupes; the offsets are those of the text.
  """
  candidates.sort(key=lambda c: c[0] + c[1], reverse=True)
  seen, nbest = set(), []
  for score_a, score_b, feature, start, end in candidates:
    if len(nbest) >= n_best_size:
      break
    char_start, char_end = span_offsets(feature, start, end)
    text = example.paragraph_text[char_start:char_end]
    if text in seen:
      continue
    seen.add(text)
    entry = {"text": text, keys[0]: float(score_a), keys[1]: float(score_b)}
    if char_offsets:
      entry["start"], entry["end"] = char_start, char_end
    nbest.append(entry)
  return nbest


def postprocess_v1(examples: Sequence[Any], features: Sequence[SquadFeature],
                   results: Mapping[int, Mapping[str, np.ndarray]], n_best_size: int = 20,
                   max_answer_length: int = 30, char_offsets: bool = False):
  """v1 head: top-n starts × top-n ends per feature, score = start_logit + end_logit.

  Args:
    results: unique_id → {"start_logits": [L], "end_logits": [L]}.
    char_offsets: also give each n-best entry its `start` / `end` character offsets in the paragraph (not in the
      reference's files).

  Returns:
    (predictions {qid: text}, nbest {qid: [{"text", "probability", "start_logit", "end_logit"}]}). An example with
    no valid span (or no features) gets the reference's "empty" (without offsets).
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
          if valid_span(feature, s, e, max_answer_length):
            candidates.append((start_logits[s], end_logits[e], feature, s, e))
    nbest = _nbest(example, candidates, n_best_size, ("start_logit", "end_logit"), char_offsets)
    if not nbest:
      nbest = [{"text": V1_EMPTY_TEXT, "start_logit": 0.0, "end_logit": 0.0}]
    for entry, p in zip(nbest, softmax([n["start_logit"] + n["end_logit"] for n in nbest])):
      entry["probability"] = p
    predictions[example.qas_id] = nbest[0]["text"]
    all_nbest[example.qas_id] = nbest
  return predictions, all_nbest


def postprocess_v2(examples: Sequence[Any], features: Sequence[SquadFeature],
                   results: Mapping[int, Mapping[str, np.ndarray]], n_best_size: int = 20,
                   max_answer_length: int = 30, start_n_top: int = 5, end_n_top: int = 5,
                   char_offsets: bool = False):
  """Original v2 head (start beams, end conditioned on start, answer class); no threshold applied.

  Args:
    results: unique_id → {"start_top_log_probs" [start_n_top], "start_top_index" [start_n_top],
      "end_top_log_probs" [start_n_top*end_n_top], "end_top_index" [same], "cls_logits" scalar}; index
      i*end_n_top + j is end beam j of start beam i.
    char_offsets: as `postprocess_v1`.

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
          if valid_span(feature, s, e, max_answer_length):
            candidates.append((start_lp[i], end_lp[i * end_n_top + j], feature, s, e))
    nbest = _nbest(example, candidates, n_best_size, ("start_log_prob", "end_log_prob"), char_offsets)
    if not nbest:
      nbest = [{"text": "", "start_log_prob": -1e6, "end_log_prob": -1e6}]
    for entry, p in zip(nbest, softmax([n["start_log_prob"] + n["end_log_prob"] for n in nbest])):
      entry["probability"] = p
    predictions[example.qas_id] = nbest[0]["text"]
    all_nbest[example.qas_id] = nbest
    null_odds[example.qas_id] = score_null
  return predictions, all_nbest, null_odds
