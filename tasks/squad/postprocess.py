"""SQuAD post-processing (reference §5.2): n-best spans from the start/end outputs, v1 and v2 answers, the v2
null-score thresholds (fixed and dev-tuned protocols), and the prediction files."""

from __future__ import annotations

import collections
import json
import math
import os
from typing import Dict, List, Mapping, Optional, Sequence

import numpy as np

from official_albert import file_io
from tasks import squad_evaluate
from tasks.squad.data import SquadExample, SquadFeature

NULL_FALLBACK_SCORE = 1e6  # Null score of an example that produced no features (reference: it stays 1e6).

V1_EMPTY_TEXT = "empty"  # The reference's v1 answer when no span is valid.



def feature_text(example: SquadExample, feature: SquadFeature, start: int, end: int) -> str:
  """Original paragraph substring covered by sequence positions [start, end]."""
  return example.paragraph_text[feature.token_to_orig[start][0]:feature.token_to_orig[end][1]]


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
  for key in ("best_exact", "best_exact_thresh", "best_f1", "best_f1_thresh"):
    tuned.pop(key)  # A second sweep over the re-written predictions: not part of the reference's report.
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
