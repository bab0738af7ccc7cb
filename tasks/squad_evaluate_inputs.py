"""The inputs of the SQuAD evaluation, checked before scoring (`tasks.squad_evaluate`): the data file, the
predictions (question id → answer text) and the na-prob file (question id → number); errors name the file, and a
question without a prediction or a prediction without a question is counted and shown.
"""

from __future__ import annotations

import sys
from typing import Dict, List

_MAX_LISTED = 10  # Ids printed per message: the count is what matters, a few examples help to find the cause.


def json_kind(value) -> str:
  return {dict: "object", list: "array", str: "string", bool: "boolean", type(None): "null"}.get(
      type(value), "number")


def _examples(ids) -> str:
  ids = list(ids)
  more = f", ... ({len(ids) - _MAX_LISTED} more)" if len(ids) > _MAX_LISTED else ""
  return ", ".join(repr(i) for i in ids[:_MAX_LISTED]) + more


def check_dataset(dataset, source: str = "data", need_answers: bool = True) -> None:
  """Raises ValueError naming `source`, the article, paragraph, question id and key when the nesting is broken, or
  both places of a question id used twice (as `str(id)`; per-id predictions and scores would merge the two questions).

  Expected: [{"title", "paragraphs": [{"context", "qas": [{"id", "question", "answers": [{"text", ...}]}]}]}].
  `need_answers`: evaluation needs the gold answers ([] for an unanswerable question); reading may not.
  """
  def fail(where, msg):
    raise ValueError(f"{source}: {where}: {msg}. Fix the file; expected layout: {{\"data\": [{{\"title\", "
                     "\"paragraphs\": [{\"context\", \"qas\": [{\"id\", \"question\", \"answers\": "
                     "[{\"text\", \"answer_start\"}]}]}]}]}.")

  def get(entry, key, kind, where):
    if not isinstance(entry, dict):
      fail(where, f"expected a JSON object, got a JSON {json_kind(entry)}")
    if key not in entry:
      fail(where, f"missing key {key!r}")
    value = entry[key]
    if not isinstance(value, kind) or isinstance(value, bool):
      expected = "string or number" if isinstance(kind, tuple) else json_kind(kind())
      fail(where, f"{key!r} is a JSON {json_kind(value)}, expected a JSON {expected}")
    return entry[key]

  if not isinstance(dataset, list):
    fail("'data'", f"expected a JSON array of articles, got a JSON {json_kind(dataset)}")
  first_place = {}  # str(id) → where it was first seen: ids are compared as strings everywhere (predictions.json).
  for a, article in enumerate(dataset):
    where_a = f"article {a}" + (f" ({article.get('title')!r})" if isinstance(article, dict) else "")
    for p, para in enumerate(get(article, "paragraphs", list, where_a)):
      for q, qa in enumerate(get(para, "qas", list, f"{where_a}, paragraph {p}")):
        where_q = f"{where_a}, paragraph {p}, question #{q} (no id)"
        if isinstance(qa, dict) and "id" in qa:
          where_q = f"{where_a}, paragraph {p}, question {qa['id']}"
        get(qa, "id", (str, int), where_q)
        qid = str(qa["id"])
        if qid in first_place:
          raise ValueError(f"{source}: {where_q}: the question id {qa['id']!r} is used again (first at "
                           f"{first_place[qid]}). Predictions, predictions.json and the scores keep one answer per "
                           "id, so one of the two questions would be lost or scored against the other's answer. Fix "
                           "the file: give each question its own id (e.g. prefix the ids of merged files).")
        first_place[qid] = where_q
        if need_answers:
          for k, ans in enumerate(get(qa, "answers", list, where_q)):
            get(ans, "text", str, f"{where_q}, answer {k}")


def detect_version(data: dict) -> str:
  """"1.1" or "2.0": the file's `version`, or 2.0 when any question carries `is_impossible`."""
  version = str(data.get("version", "")).lstrip("v")
  if version.startswith("2"):
    return "2.0"
  if version.startswith("1"):
    return "1.1"
  for article in data["data"]:
    for p in article["paragraphs"]:
      for qa in p["qas"]:
        if "is_impossible" in qa:
          return "2.0"
  return "1.1"


def check_predictions(preds, source: str = "predictions") -> Dict[str, str]:
  """`preds` when it is a JSON object of question id → answer text; else a ValueError naming `source` and the fix."""
  if not isinstance(preds, dict):
    raise ValueError(f"{source}: expected a JSON object mapping each question id to its answer text, e.g. "
                     f"{{\"56ddde6b9a695914005b9628\": \"Normandy\", \"5ad39d53604f3c001a3fe8d1\": \"\"}} (\"\" = no "
                     f"answer), got a JSON {json_kind(preds)}. Pass the predictions.json written by SQuAD "
                     "post-processing.")
  bad = [k for k, v in preds.items() if not isinstance(v, str)]
  if bad:
    first = preds[bad[0]]
    hint = (" This looks like nbest_predictions.json; pass predictions.json." if isinstance(first, list) else "")
    raise ValueError(f"{source}: {len(bad)} of {len(preds)} predictions are not answer texts (e.g. {bad[0]!r} → a "
                     f"JSON {json_kind(first)}); every value must be a string (\"\" = no answer).{hint}")
  return preds


def check_na_probs(na_probs, predicted_qids, source: str = "na-prob file") -> Dict[str, float]:
  """`na_probs` when it is an object of id → number covering every id of `predicted_qids`; else a ValueError."""
  if not isinstance(na_probs, dict):
    raise ValueError(f"{source}: expected a JSON object mapping each question id to its no-answer score (a number; "
                     f"null_odds.json of the same run), got a JSON {json_kind(na_probs)}.")
  bad = [k for k, v in na_probs.items() if not isinstance(v, (int, float)) or isinstance(v, bool)]
  if bad:
    raise ValueError(f"{source}: {len(bad)} of {len(na_probs)} no-answer scores are not numbers (e.g. {bad[0]!r} → "
                     f"a JSON {json_kind(na_probs[bad[0]])}).")
  missing = [k for k in predicted_qids if k not in na_probs]
  if missing:
    raise ValueError(f"{source}: no score for {len(missing)} of the {len(predicted_qids)} predicted questions "
                     f"({_examples(missing)}); the threshold needs one for each (pass the null_odds.json written "
                     "with these predictions).")
  unknown = [k for k in na_probs if k not in predicted_qids]
  if unknown:
    print(f"Warning: {len(unknown)} ids in {source} are not predicted questions of the data file and are ignored: "
          f"{_examples(unknown)}.", file=sys.stderr)
  return na_probs


def prediction_coverage(qids: List[str], preds: Dict[str, str], source: str, message: str) -> List[str]:
  """The question ids without a prediction, after printing their count (and up to 10 `message` lines) and a warning
  for prediction ids that are not questions of the data (they are ignored, as by the official scripts)."""
  if not qids:
    raise ValueError("The data file holds no questions; nothing to evaluate.")
  known = set(qids)
  unknown = [k for k in preds if k not in known]
  if unknown:
    print(f"Warning: {len(unknown)} of the {len(preds)} prediction ids in {source} are not questions of the data "
          f"file and are ignored: {_examples(unknown)}. Check that the predictions belong to this data file.",
          file=sys.stderr)
  missing = [k for k in qids if k not in preds]
  for k in missing[:_MAX_LISTED]:
    print(message.format(k), file=sys.stderr)
  if missing:
    print(f"{len(missing)} of {len(qids)} questions have no prediction in {source}; they score 0 (exact and F1), "
          "as in the official v1.1 script.", file=sys.stderr)
  return missing
