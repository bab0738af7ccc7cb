"""Rows that repeat: a labelled text file's rows whose text (and pair) an earlier row holds, and evaluation rows
that are training rows. Counted and warned about, never refused: a repeat can be on purpose (oversampling), but the
same text under two labels teaches two answers, and an evaluation on training rows is not held-out."""

from __future__ import annotations

import logging
from typing import Dict, Sequence

logger = logging.getLogger(__name__)


def warn_repeated_texts(examples: Sequence, training: Sequence = ()) -> Dict[str, int]:
  """Counts and warns about rows whose text (and pair) an earlier row holds — among `examples` (and how many of
  those carry another label: one text taught two answers), and, with `training`, rows the training rows hold (an
  evaluation on them is not held-out). Never refused: repeated rows can be on purpose (oversampling). Returns the
  counts {"repeated", "conflicting", "in_training"}."""
  seen, trained = {}, {(e.text, e.text_pair): e for e in reversed(list(training))}
  counts, firsts = {"repeated": 0, "conflicting": 0, "in_training": 0}, {}
  for e in examples:
    key = (e.text, e.text_pair)
    if key in trained:
      counts["in_training"] += 1
      firsts.setdefault("in_training", (e, trained[key]))
    if key in seen:
      counts["repeated"] += 1
      firsts.setdefault("repeated", (e, seen[key]))
      if seen[key].label != e.label:
        counts["conflicting"] += 1
        firsts.setdefault("conflicting", (e, seen[key]))
    else:
      seen[key] = e
  where = {k: f"{e.path}:{e.line} repeats {o.path}:{o.line}" for k, (e, o) in firsts.items()}
  if counts["repeated"]:
    logger.warning("%d of %d rows repeat an earlier row's text (first: %s)%s.", counts["repeated"], len(examples),
                   where["repeated"], f"; {counts['conflicting']} of them with another label (first: "
                   f"{where['conflicting']})" if counts["conflicting"] else "")
  if counts["in_training"]:
    logger.warning("%d of %d evaluation rows are training rows too (first: %s): their scores are not held-out "
                   "scores.", counts["in_training"], len(examples), where["in_training"])
  return counts
