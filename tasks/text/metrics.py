"""Metrics of the text tasks, in plain NumPy: entity F1 for tags (seqeval / conlleval style), multi-label F1, macro F1.

Entity F1 follows conlleval's chunk rules (seqeval's default, non-strict mode): a tag is `O`, or `PREFIX-TYPE` with
prefix B (begin), I (inside), E/L (end) or S/U (single), in either case; a bare prefix (`B`, `I`: untyped BIO) is
that prefix with an empty type, and a tag without a prefix counts as I. A chunk ends before a
B / S / O tag, after an E / S tag, or where the type changes; it starts at B / S, at an I / E that follows O, E or S,
or where the type changes. So IOB1, IOB2, IOE and IOBES files all score as conlleval scores them, including
ill-formed sequences (`O I-PER` starts a PER entity). Precision, recall and F1 are micro averages over entities;
an entity counts only when its type, first and last word all match.
"""

from __future__ import annotations

import logging
from typing import Dict, List, Sequence, Set, Tuple

import numpy as np

logger = logging.getLogger(__name__)

_PREFIXES = {"B": "B", "I": "I", "E": "E", "L": "E", "S": "S", "U": "S"}


def split_tag(tag: str) -> Tuple[str, str]:
  """("O", "") | (prefix in B/I/E/S, type). The outside tag in either case, as the prefixes: `o` beside `b-per`
  scored each run of `o` words as an entity of type "o"."""
  if not tag or tag.upper() == "O":
    return "O", ""
  if tag.upper() in _PREFIXES:  # a bare prefix (untyped BIO, keyphrase sets such as Inspec): seqeval's empty type
    return _PREFIXES[tag.upper()], ""
  for sep in ("-", "_"):
    head, found, tail = tag.partition(sep)
    if found and head.upper() in _PREFIXES:
      return _PREFIXES[head.upper()], tail
  return "I", tag


def untyped_tag_set(tags: Sequence[str]) -> bool:
  """Whether a tag set has no outside tag and no prefixed tag (B-/I-/E-/S-...): integer ids ("0", "3", as a
  `datasets` export writes them) or POS tags, whose entity F1 reads each tag as an entity type (the outside "0"
  too), so it means nothing there."""
  return bool(tags) and not any(split_tag(t)[0] == "O" or split_tag(t)[1] != t for t in tags)


def warn_untyped_tags(what: str, tags: Sequence[str]) -> None:
  """Warns about an `untyped_tag_set`; `what` names where the tags come from."""
  if untyped_tag_set(tags):
    logger.warning("%s (%s) have no outside tag \"O\" and no B-/I-/E-/S- prefix, so entity_f1 (the best-checkpoint "
                   "metric) reads every tag, the outside one too, as an entity type and means nothing: for integer "
                   "tags, write the tag names instead (their ClassLabel names); for tags without entities (POS), read "
                   "token_accuracy.", what, list(tags)[:10])


def _ends(prev: str, prev_type: str, tag: str, type_: str) -> bool:
  if prev in ("E", "S"):
    return True
  if prev in ("B", "I") and tag in ("B", "S", "O"):
    return True
  return prev != "O" and prev_type != type_


def _starts(prev: str, prev_type: str, tag: str, type_: str) -> bool:
  if tag in ("B", "S"):
    return True
  if tag in ("I", "E") and prev in ("O", "E", "S"):
    return True
  return tag != "O" and prev_type != type_


def entities(tags: Sequence[str]) -> List[Tuple[str, int, int]]:
  """(type, first word, last word) of every chunk of one sentence's tags."""
  out = []
  prev, prev_type, begin = "O", "", None
  for i, tag in enumerate(list(tags) + ["O"]):
    prefix, type_ = split_tag(tag)
    if begin is not None and _ends(prev, prev_type, prefix, type_):
      out.append((prev_type, begin, i - 1))
      begin = None
    if _starts(prev, prev_type, prefix, type_):
      begin = i
    prev, prev_type = prefix, type_
  return out


def entity_scores(gold: Sequence[Sequence[str]], pred: Sequence[Sequence[str]]) -> Dict[str, float]:
  """Micro entity precision / recall / F1 and token accuracy over sentences of word tags."""
  if len(gold) != len(pred):
    raise ValueError(f"{len(gold)} gold sentences but {len(pred)} predicted.")
  true: Set[Tuple[int, str, int, int]] = set()
  found: Set[Tuple[int, str, int, int]] = set()
  correct_tokens = total_tokens = 0
  for n, (g, p) in enumerate(zip(gold, pred)):
    if len(g) != len(p):
      raise ValueError(f"sentence {n}: {len(g)} gold tags but {len(p)} predicted.")
    true.update((n,) + e for e in entities(g))
    found.update((n,) + e for e in entities(p))
    correct_tokens += sum(a == b for a, b in zip(g, p))
    total_tokens += len(g)
  hits = len(true & found)
  precision = hits / len(found) if found else 0.0
  recall = hits / len(true) if true else 0.0
  f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
  return {"entity_precision": precision, "entity_recall": recall, "entity_f1": f1,
          "token_accuracy": correct_tokens / total_tokens if total_tokens else 0.0}


def macro_f1(labels: np.ndarray, preds: np.ndarray, num_labels: int) -> float:
  """Unweighted mean of the per-class F1 over the classes that occur in the labels or the predictions, as
  scikit-learn's `f1_score(average="macro")`: a class of the model absent from both is left out (counting it as 0
  pulled the score of an eval set without that class down)."""
  labels, preds = np.asarray(labels), np.asarray(preds)
  gold, guess = np.broadcast_arrays(labels, preds)
  # (one counting pass each: four passes per class took 4 s at 1M rows × 1000 labels)
  tp = _class_counts(gold[gold == guess], num_labels)
  denom = _class_counts(labels.ravel(), num_labels) + _class_counts(preds.ravel(), num_labels)
  present = denom > 0
  return float(np.mean(2 * tp[present] / denom[present])) if present.any() else 0.0


def _class_counts(values: np.ndarray, num_labels: int) -> np.ndarray:
  """How often each class 0 .. num_labels - 1 occurs in `values`; a value that is no class (-1 for an unlabelled
  row, out of range, not a whole number, NaN) counts for none."""
  if values.dtype.kind not in "iub":
    values = np.asarray(values, np.float64)
    values = values[values == np.trunc(values)]
  values = values[(values >= 0) & (values < num_labels)]
  return np.bincount(values.astype(np.int64), minlength=num_labels)


def multi_label_scores(labels: np.ndarray, preds: np.ndarray) -> Dict[str, float]:
  """Micro F1 over (example, label) pairs, subset accuracy (every label of an example right) and label accuracy
  (the share of (example, label) pairs right), all of `preds` (the labels at the model's threshold)."""
  labels, preds = np.asarray(labels) > 0.5, np.asarray(preds) > 0.5
  tp = float(np.sum(labels & preds))
  denom = float(np.sum(labels) + np.sum(preds))
  return {"micro_f1": 2 * tp / denom if denom else 0.0,
          "subset_accuracy": float(np.mean(np.all(labels == preds, axis=-1))) if labels.size else 0.0,
          "label_accuracy": float(np.mean(labels == preds)) if labels.size else 0.0}
