r"""SQuAD v1.1 / v2.0 evaluation, equal to the official scripts.

Written from the published definitions of `evaluate-v1.1.py` and `evaluate-v2.0.py` (answer normalisation, token F1,
exact match, the no-answer threshold and the best-threshold search). The version is read from the data file
(`"version"`, or any `is_impossible` or answerless question; `--version` overrides) and the printed JSON has the
official keys:

  v1.1: {"exact_match": ..., "f1": ...}
  v2.0: exact, f1, total, HasAns_exact, HasAns_f1, HasAns_total, NoAns_exact, NoAns_f1, NoAns_total
        (+ best_exact, best_exact_thresh, best_f1, best_f1_thresh with --na-prob-file).

Inputs are checked first: the predictions file must be a JSON object of question id → answer text ("" = no
answer), the na-prob file one of id → number covering every predicted question; errors name the file. Questions of
the data file without a prediction score 0 in both versions (the v1.1 script's rule; the v2.0 script crashes on
them), and a line gives their count; prediction ids that are not in the data file are ignored with a warning that
gives their count and a few of them. The data file may also hold the flat HF-datasets rows the fine-tuning task
reads (converted as its reader does), and question ids are compared as strings (JSON object keys always are, so an
integer id in the data file matches its key in predictions.json).

Usage:
  python -m tasks.squad_evaluate DATA_FILE PRED_FILE [--na-prob-file F] [--na-prob-thresh T] [--out-file F]
                                [--version 1.1|2.0]
"""

from __future__ import annotations

import collections
import json
import re
import string
from typing import Dict, List, Optional

from absl import app
from absl import flags

from official_albert import cli
from official_albert import file_io
from tasks.squad_evaluate_inputs import check_dataset  # noqa: F401
from tasks.squad_evaluate_inputs import check_na_probs  # noqa: F401
from tasks.squad_evaluate_inputs import check_predictions  # noqa: F401
from tasks.squad_evaluate_inputs import detect_version  # noqa: F401
from tasks.squad_evaluate_inputs import json_kind

# The input checks, importable from here as before (`tasks.squad` calls squad_evaluate.check_dataset).
from tasks.squad_evaluate_inputs import prediction_coverage

_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)
_PUNCT = frozenset(string.punctuation)


def normalize_answer(s: str) -> str:
  """Lower-cases, drops punctuation and the articles a/an/the, and collapses whitespace (official definition)."""
  s = s.lower()
  s = "".join(ch for ch in s if ch not in _PUNCT)
  s = _ARTICLES.sub(" ", s)
  return " ".join(s.split())


def get_tokens(s: str) -> List[str]:
  return normalize_answer(s).split() if s else []


def compute_exact(a_gold: str, a_pred: str) -> int:
  return int(normalize_answer(a_gold) == normalize_answer(a_pred))


def compute_f1(a_gold: str, a_pred: str) -> float:
  """Token-overlap F1 (v2.0 definition: if either side has no tokens, F1 = 1 iff both are empty)."""
  gold_toks, pred_toks = get_tokens(a_gold), get_tokens(a_pred)
  if not gold_toks or not pred_toks:
    return float(gold_toks == pred_toks)
  return _token_f1(pred_toks, gold_toks)


def _token_f1(pred_toks, gold_toks) -> float:
  """Bag-of-tokens F1 shared by the v1.1 and v2.0 definitions."""
  common = collections.Counter(gold_toks) & collections.Counter(pred_toks)
  num_same = sum(common.values())
  if num_same == 0:
    return 0.0
  precision = num_same / len(pred_toks)
  recall = num_same / len(gold_toks)
  return 2 * precision * recall / (precision + recall)


def _f1_v1(prediction: str, ground_truth: str) -> float:
  """v1.1 F1: no empty-answer special case (an empty side gives 0)."""
  pred_toks, gold_toks = normalize_answer(prediction).split(), normalize_answer(ground_truth).split()
  return _token_f1(pred_toks, gold_toks)


def _qids(dataset: List[dict]) -> List[str]:
  return [str(qa["id"]) for article in dataset for p in article["paragraphs"] for qa in p["qas"]]


def _str_keys(mapping):
  """`mapping` keyed by `str(id)`: data files may give integer ids, but JSON object keys (predictions.json,
  null_odds.json) are always strings, so ids are compared as strings throughout (a non-object is left to the
  checks)."""
  return {str(k): v for k, v in mapping.items()} if isinstance(mapping, dict) else mapping


def evaluate_v1(dataset: List[dict], predictions: Dict[str, str], source: str = "predictions") -> Dict[str, float]:
  """The v1.1 script's `evaluate`: every question counts; missing predictions score 0 (with a stderr message).

  `source` names the predictions in messages (the file, for the command line).
  """
  predictions = _str_keys(check_predictions(predictions, source))
  check_dataset(dataset)
  prediction_coverage(_qids(dataset), predictions, source, "Unanswered question {} will receive score 0.")
  f1 = exact_match = total = 0.0
  for article in dataset:
    for paragraph in article["paragraphs"]:
      for qa in paragraph["qas"]:
        total += 1
        if str(qa["id"]) not in predictions:
          continue
        golds = [a["text"] for a in qa["answers"]]
        if not golds:
          raise ValueError(f"question {qa['id']!r} has no answers: an unanswerable question is SQuAD v2.0, which "
                           "v1.1 scoring cannot score (on the command line: --version=2.0).")
        pred = predictions[str(qa["id"])]
        exact_match += max(float(normalize_answer(pred) == normalize_answer(g)) for g in golds)
        f1 += max(_f1_v1(pred, g) for g in golds)
  return {"exact_match": 100.0 * exact_match / total, "f1": 100.0 * f1 / total}


def make_qid_to_has_ans(dataset: List[dict]) -> Dict[str, bool]:
  return {str(qa["id"]): bool(qa["answers"]) for article in dataset for p in article["paragraphs"] for qa in p["qas"]}


def get_raw_scores(dataset: List[dict], preds: Dict[str, str]):
  """Per-question max exact/F1 over the gold answers ([""] when none normalise to non-empty)."""
  exact_scores, f1_scores = {}, {}
  for article in dataset:
    for p in article["paragraphs"]:
      for qa in p["qas"]:
        qid = str(qa["id"])
        golds = [a["text"] for a in qa["answers"] if normalize_answer(a["text"])] or [""]
        if qid not in preds:
          continue  # Counted and reported by the caller (`prediction_coverage`).
        pred = preds[qid]
        exact_scores[qid] = max(compute_exact(g, pred) for g in golds)
        f1_scores[qid] = max(compute_f1(g, pred) for g in golds)
  return exact_scores, f1_scores


def apply_no_ans_threshold(scores, na_probs, qid_to_has_ans, na_prob_thresh):
  """A question whose na_prob is strictly above the threshold is predicted unanswerable."""
  new_scores = {}
  for qid, s in scores.items():
    if na_probs[qid] > na_prob_thresh:
      new_scores[qid] = float(not qid_to_has_ans[qid])
    else:
      new_scores[qid] = s
  return new_scores


def make_eval_dict(exact_scores, f1_scores, qid_list=None) -> "collections.OrderedDict[str, float]":
  if qid_list is None:
    total = len(exact_scores)
    return collections.OrderedDict([
        ("exact", 100.0 * sum(exact_scores.values()) / total),
        ("f1", 100.0 * sum(f1_scores.values()) / total),
        ("total", total)])
  total = len(qid_list)
  return collections.OrderedDict([
      ("exact", 100.0 * sum(exact_scores[k] for k in qid_list) / total),
      ("f1", 100.0 * sum(f1_scores[k] for k in qid_list) / total),
      ("total", total)])


def merge_eval(main_eval, new_eval, prefix: str) -> None:
  for k in new_eval:
    main_eval[f"{prefix}_{k}"] = new_eval[k]


def find_best_thresh(preds, scores, na_probs, qid_to_has_ans):
  """The official threshold search: sweep na_probs ascending, answering every question at or below the threshold.

  Questions without a prediction (not in `scores`) score 0 at every threshold: they are left out of the starting
  count and kept in the denominator. With every question predicted this is exactly the official computation.

  Returns:
    (best score in percent, best threshold). Starts from "all unanswered" with threshold 0.0.
  """
  num_no_ans = sum(1 for k in qid_to_has_ans if not qid_to_has_ans[k] and k in scores)
  cur_score = best_score = num_no_ans
  best_thresh = 0.0
  for qid in sorted(na_probs, key=lambda k: na_probs[k]):
    if qid not in scores:
      continue
    if qid_to_has_ans[qid]:
      diff = scores[qid]
    else:
      diff = -1 if preds[qid] else 0
    cur_score += diff
    if cur_score > best_score:
      best_score = cur_score
      best_thresh = na_probs[qid]
  return 100.0 * best_score / len(qid_to_has_ans), best_thresh


def find_all_best_thresh(main_eval, preds, exact_raw, f1_raw, na_probs, qid_to_has_ans) -> None:
  best_exact, exact_thresh = find_best_thresh(preds, exact_raw, na_probs, qid_to_has_ans)
  best_f1, f1_thresh = find_best_thresh(preds, f1_raw, na_probs, qid_to_has_ans)
  main_eval["best_exact"] = best_exact
  main_eval["best_exact_thresh"] = exact_thresh
  main_eval["best_f1"] = best_f1
  main_eval["best_f1_thresh"] = f1_thresh


def evaluate_v2(dataset: List[dict], preds: Dict[str, str], na_probs: Optional[Dict[str, float]] = None,
                na_prob_thresh: float = 1.0, source: str = "predictions",
                na_prob_source: str = "na-prob file") -> "collections.OrderedDict[str, float]":
  """The v2.0 script's evaluation; `na_probs=None` means all 0.0 and no best-threshold keys (no --na-prob-file).

  Unlike the official script (a KeyError), questions without a prediction score 0, as in the v1.1 script.
  `source` / `na_prob_source` name the inputs in messages.
  """
  preds = _str_keys(check_predictions(preds, source))
  check_dataset(dataset)
  have_na_file = na_probs is not None
  qid_to_has_ans = make_qid_to_has_ans(dataset)
  missing = prediction_coverage(list(qid_to_has_ans), preds, source, "Missing prediction for {}")
  predicted = [k for k in qid_to_has_ans if k in preds]
  if na_probs is None:
    na_probs = {k: 0.0 for k in preds}
  else:
    na_probs = check_na_probs(_str_keys(na_probs), predicted, na_prob_source)
  has_ans = [k for k, v in qid_to_has_ans.items() if v]
  no_ans = [k for k, v in qid_to_has_ans.items() if not v]
  exact_raw, f1_raw = get_raw_scores(dataset, preds)
  exact_thresh = apply_no_ans_threshold(exact_raw, na_probs, qid_to_has_ans, na_prob_thresh)
  f1_thresh = apply_no_ans_threshold(f1_raw, na_probs, qid_to_has_ans, na_prob_thresh)
  for qid in missing:
    exact_thresh[qid] = f1_thresh[qid] = 0.0
  out = make_eval_dict(exact_thresh, f1_thresh)
  if has_ans:
    merge_eval(out, make_eval_dict(exact_thresh, f1_thresh, qid_list=has_ans), "HasAns")
  if no_ans:
    merge_eval(out, make_eval_dict(exact_thresh, f1_thresh, qid_list=no_ans), "NoAns")
  if have_na_file:
    find_all_best_thresh(out, preds, exact_raw, f1_raw, na_probs, qid_to_has_ans)
  return out


def evaluate_files(data_file: str, pred_file: str, na_prob_file: Optional[str] = None,
                   na_prob_thresh: float = 1.0, version: Optional[str] = None):
  """Loads the files and returns (version, result dict) as the official script for that version computes it."""
  data = _load_json(data_file, "data file")
  preds = check_predictions(_load_json(pred_file, "predictions file"), f"predictions file {pred_file}")
  if not isinstance(data, dict) or "data" not in data:
    raise ValueError(f"{data_file}: not an official SQuAD file (expected a JSON object with a top-level 'data', got "
                     f"a JSON {json_kind(data)}{' without it' if isinstance(data, dict) else ''}).")
  articles, file_version = _articles(data_file, data)
  if version is None and file_version == "1.1" and not str(data.get("version", "")).strip() and any(
      not qa["answers"] for article in articles for p in article["paragraphs"] for qa in p["qas"]):
    file_version = "2.0"  # No version field and answerless questions (flat rows mark v2's unanswerable ones so).
  version = version or file_version
  source = f"predictions file {pred_file}"
  if version == "1.1":
    if na_prob_file:
      raise ValueError(f"--na-prob-file is a SQuAD v2.0 option but {data_file} is v1.1.")
    return version, evaluate_v1(articles, preds, source)
  na_probs = None
  if na_prob_file:
    na_probs = _load_json(na_prob_file, "na-prob file")
  return version, evaluate_v2(articles, preds, na_probs, na_prob_thresh, source, f"na-prob file {na_prob_file}")


def _articles(data_file: str, data: dict):
  """(articles, version) of a parsed data file, checked for evaluation: the official nested layout as it is; flat
  HF-datasets rows (which the fine-tuning task reads too) converted by the task's reader,
  `tasks.squad.reading.parse_dataset`."""
  rows = data["data"]
  if isinstance(rows, list) and rows and isinstance(rows[0], dict) and "paragraphs" not in rows[0] and (
      "context" in rows[0]):
    # Only here: importing tasks.squad imports TensorFlow (~5 s), which an official file does not need.
    from tasks.squad.reading import parse_dataset  # noqa: PLC0415
    articles, version = parse_dataset(data_file, data)
    check_dataset(articles, data_file)  # The reader does not need the answers; scoring does.
    return articles, version
  check_dataset(rows, data_file)
  return rows, detect_version(data)


def _load_json(path: str, what: str):
  """The parsed file (a local file is read without importing TensorFlow: ~5 s of the binary's run)."""
  return file_io.read_json(path, what)


def define_flags(fv: flags.FlagValues = flags.FLAGS) -> None:
  """The official scripts' options (with their dashed names and short forms); DATA_FILE PRED_FILE are positional."""
  flags.DEFINE_string("out-file", None, "Write the JSON here instead of stdout.", short_name="o", flag_values=fv)
  flags.DEFINE_string("na-prob-file", None, "Model's no-answer scores (v2.0).", short_name="n", flag_values=fv)
  flags.DEFINE_enum("version", None, ["1.1", "2.0"], "Score as this SQuAD version (default: the data file's "
                    "'version', else 2.0 when a question is unanswerable or has no answers).", flag_values=fv)
  flags.DEFINE_float("na-prob-thresh", 1.0, "Predict no-answer when na_prob is above this (v2.0; default 1.0).",
                     short_name="t", flag_values=fv)


def main(argv: List[str], fv: flags.FlagValues = flags.FLAGS) -> int:
  """`argv` = [program, DATA_FILE, PRED_FILE] after flag parsing."""
  if len(argv) != 3:
    raise app.UsageError("usage: python -m tasks.squad_evaluate DATA_FILE PRED_FILE [--na-prob-file F] "
                         f"[--na-prob-thresh T] [--out-file F]; got positional arguments {argv[1:]}.")
  data_file, pred_file = argv[1:]
  version, result = evaluate_files(data_file, pred_file, fv["na-prob-file"].value, fv["na-prob-thresh"].value,
                                   fv["version"].value)
  if fv["out-file"].value:
    file_io.atomic_write_text(fv["out-file"].value, json.dumps(result))
  elif version == "1.1":
    print(json.dumps(result))
  else:
    print(json.dumps(result, indent=2))
  return 0


def console_main() -> None:
  """The `albert-squad-evaluate` console script (pyproject.toml)."""
  cli.launch(define_flags, main, positional=True)  # DATA_FILE PRED_FILE


if __name__ == "__main__":
  console_main()
