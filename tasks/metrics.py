"""Classification and regression metrics over a whole evaluation set, in plain NumPy (reference §5.1).

They equal scikit-learn / scipy (tested): accuracy, binary F1, Matthews correlation (division by zero → 0, as the
reference's streaming MCC), Pearson and Spearman (average ranks for ties). GLUE, RACE and any labelled-text task
compute their reference metrics with them.
"""

from __future__ import annotations

import numpy as np


def accuracy(labels, preds) -> float:
  labels, preds = np.asarray(labels), np.asarray(preds)
  check_same_length(labels, preds)
  return float(np.mean(labels == preds)) if labels.size else 0.0


def check_same_length(labels, preds) -> None:
  if labels.shape != preds.shape:
    raise ValueError(f"labels shape {labels.shape} != predictions shape {preds.shape}.")


def _confusion(labels, preds, positive=1):
  labels, preds = np.asarray(labels), np.asarray(preds)
  check_same_length(labels, preds)
  y, p = labels == positive, preds == positive
  tp = float(np.sum(y & p))
  tn = float(np.sum(~y & ~p))
  fp = float(np.sum(~y & p))
  fn = float(np.sum(y & ~p))
  return tp, tn, fp, fn


def f1_score(labels, preds, positive=1) -> float:
  """Binary F1 of the positive class; 0 when there are no true or predicted positives (as scikit-learn)."""
  tp, _, fp, fn = _confusion(labels, preds, positive)
  denom = 2 * tp + fp + fn
  return 0.0 if denom == 0 else 2 * tp / denom


def matthews_corrcoef(labels, preds, positive=1) -> float:
  """Binary MCC from TP/TN/FP/FN (reference formula); a zero denominator gives 0."""
  tp, tn, fp, fn = _confusion(labels, preds, positive)
  denom = (tp + fp) * (tp + fn) * (tn + fp) * (tn + fn)
  if denom == 0:
    return 0.0
  return float((tp * tn - fp * fn) / np.sqrt(denom))


def pearson(x, y) -> float:
  """Pearson correlation; nan when either side is constant or not finite (as scipy)."""
  x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
  check_same_length(x, y)
  if not (np.isfinite(x).all() and np.isfinite(y).all()):
    return float("nan")
  # Each side scaled to max |value| 1 (the correlation does not change) and each root taken on its own: the squares
  # and their product overflowed to inf for values ~1e77 and up (pearson 0.0), or underflowed to 0 for ~1e-155 and
  # down (nan, as if constant).
  x, y = _to_unit_max(x), _to_unit_max(y)
  xm, ym = x - x.mean(), y - y.mean()
  denom = np.sqrt(np.sum(xm * xm)) * np.sqrt(np.sum(ym * ym))
  if denom == 0:
    return float("nan")
  return float(np.clip(np.sum(xm * ym) / denom, -1.0, 1.0))


def _to_unit_max(x: np.ndarray) -> np.ndarray:
  """`x` / max |x| (all-zero `x` as it is): values in [-1, 1], whose squares cannot overflow, and values all of one
  tiny scale (~1e-200) no longer underflow to 0 when squared."""
  top = np.max(np.abs(x), initial=0.0)
  return x / top if top > 0 else x


def rankdata(x) -> np.ndarray:
  """Ranks starting at 1 with ties given their average rank (scipy's default "average" method).

  A NaN anywhere makes every rank NaN, as scipy (`nan_policy="propagate"`): sorted, each NaN would get a rank of its
  own and the correlation of a head that predicts NaN would pass for a number. ±inf are ranked, as scipy ranks them.
  """
  x = np.asarray(x, np.float64)
  if np.isnan(x).any():
    return np.full(x.shape, np.nan)
  order = np.argsort(x, kind="mergesort")
  sorted_x = x[order]
  # Group boundaries of equal values; each group gets the mean of its 1-based positions.
  starts = np.concatenate([[True], sorted_x[1:] != sorted_x[:-1]])
  group = np.cumsum(starts) - 1
  first = np.flatnonzero(starts)
  last = np.concatenate([first[1:], [len(x)]]) - 1
  avg = (first + last) / 2.0 + 1.0
  ranks = np.empty(len(x), np.float64)
  ranks[order] = avg[group]
  return ranks


def spearman(x, y) -> float:
  """Spearman rank correlation = Pearson of the average ranks; NaN when either side holds a NaN (as scipy)."""
  x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
  check_same_length(x, y)
  return pearson(rankdata(x), rankdata(y))
