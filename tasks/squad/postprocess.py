"""SQuAD post-processing (reference §5.2): the v2 null-score thresholds (fixed and dev-tuned protocols) and the
prediction files. The n-best spans and v1/v2 answers are computed by `official_albert.data.squad_postprocess`
(shared with the library's question-answering predictor); its names are re-exported here."""

from __future__ import annotations

import collections
import json
import logging
import os
from typing import Any, Dict, List, Mapping, Optional, Sequence

from official_albert import file_io
from official_albert.data.squad_postprocess import feature_text  # noqa: F401
from official_albert.data.squad_postprocess import NULL_FALLBACK_SCORE  # noqa: F401
from official_albert.data.squad_postprocess import postprocess_v1  # noqa: F401
from official_albert.data.squad_postprocess import postprocess_v2  # noqa: F401
from official_albert.data.squad_postprocess import softmax  # noqa: F401
from official_albert.data.squad_postprocess import V1_EMPTY_TEXT  # noqa: F401
from official_albert.data.squad_postprocess import valid_span  # noqa: F401
from tasks import squad_evaluate

logger = logging.getLogger(__name__)

_softmax = softmax  # the names before the move
_valid_span = valid_span


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


def leave_out_cut_questions(examples: Sequence[Any], features: Sequence[Any], results: Mapping[int, Any],
                            outputs: Sequence[Optional[dict]]) -> None:
  """Removes from each of `outputs` (predictions, nbest, null_odds or None; keyed by question id) the questions
  with a window that has no result (an evaluation cut short by trainer.validation_steps), and says so. They are
  left out rather than given the fallback answer: under v2 that is "no answer", which an unanswerable question
  scores as correct."""
  cut = {examples[f.example_index].qas_id for f in features if f.unique_id not in results}
  for answers in outputs:
    for qid in cut if answers is not None else ():
      answers.pop(qid, None)
  logger.warning("SQuAD eval: results for %d of %d features (trainer.validation_steps limited?); the %d questions "
                 "whose windows were all evaluated are scored, %d others are left out.",
                 sum(f.unique_id in results for f in features), len(features), len(outputs[0]), len(cut))


def questions_only(dataset: List[dict], qids) -> List[dict]:
  """`dataset` (articles → paragraphs → qas) keeping only the questions whose id is in `qids`, e.g. those an
  evaluation cut short by trainer.validation_steps reached with every window: scored as a smaller dev set rather
  than with the missing ones counted (0 under v1.1; under v2 a "no answer" fallback scores every unreached
  unanswerable question as correct). The dataset itself is returned when nothing is left out."""
  keep = {str(q) for q in qids}
  if all(str(qa["id"]) in keep for article in dataset for p in article["paragraphs"] for qa in p["qas"]):
    return dataset
  out = []
  for article in dataset:
    paragraphs = [dict(p, qas=[qa for qa in p["qas"] if str(qa["id"]) in keep]) for p in article["paragraphs"]]
    paragraphs = [p for p in paragraphs if p["qas"]]
    if paragraphs:
      out.append(dict(article, paragraphs=paragraphs))
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
  """Writes predictions.json, nbest_predictions.json (and null_odds.json) atomically; returns their paths.

  Every text is made before any file is written, and predictions.json, the file scorers read, is written last: an
  interrupted write leaves the previous predictions.json beside at most newer side files, never new predictions
  beside an old n-best. A v1 set removes a null_odds.json an earlier v2 run left (it would describe other answers).
  """
  paths = {"nbest": os.path.join(output_dir, "nbest_predictions.json"),
           "null_odds": os.path.join(output_dir, "null_odds.json"),
           "predictions": os.path.join(output_dir, "predictions.json")}
  texts = {"nbest": json.dumps(nbest, indent=2, ensure_ascii=False),
           "null_odds": None if null_odds is None else json.dumps(null_odds, indent=2),
           "predictions": json.dumps(predictions, indent=2, ensure_ascii=False)}
  for name, text in texts.items():
    if text is not None:
      file_io.atomic_write_text(paths[name], text)
  if null_odds is None and file_io.exists(paths["null_odds"]):
    file_io.remove(paths["null_odds"])
  if null_odds is None:
    del paths["null_odds"]
  return paths
