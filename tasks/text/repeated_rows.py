"""Rows that repeat: a labelled text file's rows whose text (and pair) an earlier row holds, and evaluation rows
that are training rows. Counted and warned about, never refused: a repeat can be on purpose (oversampling), but the
same text under two labels teaches two answers, and an evaluation on training rows is not held-out.

Texts are compared as the tokenizer sees them (`tasks.overlap`: `comparison_text`), not as written: "Great film" and
"great film " are one input to a lower-casing tokenizer, so one text to count.
"""

from __future__ import annotations

import logging
from typing import Dict, Mapping, Optional, Sequence

from tasks import overlap

logger = logging.getLogger(__name__)

FIELDS = ("text", "text_pair")


def warn_repeated_texts(examples: Sequence, training: Sequence = (),
                        tokenizer_options: Optional[Mapping[str, object]] = None) -> Dict[str, int]:
  """Counts and warns about rows whose text (and pair) an earlier row holds — among `examples` (and how many of
  those carry another label: one text taught two answers), and, with `training`, rows the training rows hold (an
  evaluation on them is not held-out; `overlap.warn_training_rows`). Never refused: repeated rows can be on purpose
  (oversampling). Texts are compared as the tokenizer with `tokenizer_options` sees them (None: FullTokenizer's
  defaults, do_lower_case=True as task.do_lower_case's default). Returns the counts {"repeated", "conflicting",
  "in_training"}."""
  keys = {}

  def key(example):
    if id(example) not in keys:  # (each row's texts normalised once, though both counts read them)
      keys[id(example)] = overlap.row_key(example, FIELDS, tokenizer_options)
    return keys[id(example)]

  seen = {}
  counts, firsts = {"repeated": 0, "conflicting": 0, "in_training": 0}, {}
  for e in examples:
    k = key(e)
    if k in seen:
      counts["repeated"] += 1
      firsts.setdefault("repeated", (e, seen[k]))
      if seen[k].label != e.label:
        counts["conflicting"] += 1
        firsts.setdefault("conflicting", (e, seen[k]))
    else:
      seen[k] = e
  where = {k: f"{e.path}:{e.line} repeats {o.path}:{o.line}" for k, (e, o) in firsts.items()}
  if counts["repeated"]:
    logger.warning("%d of %d rows repeat an earlier row's text (first: %s)%s.", counts["repeated"], len(examples),
                   where["repeated"], f"; {counts['conflicting']} of them with another label (first: "
                   f"{where['conflicting']})" if counts["conflicting"] else "")
  if training:
    counts["in_training"] = overlap.warn_training_rows(examples, training, key)
  return counts
