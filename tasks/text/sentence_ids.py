"""Which records build a token-classification record comes from (`records_id`), beside its `sentence_id`.

Why: `sentence_id` counts from 0 in each records file, and the task joins a sentence's sub-sentences back by their
ids (`tasks.text.tagging.join_sub_sentences`). A `task.validation_data.input_path` that lists two records files (two
cached builds) held sentence k twice, and the join merged the two into one sentence (other entity scores than the raw
files read together). Each build's records carry one `records_id`, derived from the examples it was built from, and
the join groups by (`records_id`, `sentence_id`).

The id is a digest of the examples (their files, lines, tokens and tags), not a random number: a build of the same
examples writes the same records. Two builds of the same examples share it, so listing both evaluates each sentence
twice under one id: the join refuses that (a sub-sentence met twice), naming the fix.
"""

from __future__ import annotations

import hashlib
from typing import Sequence

RECORDS_ID = "records_id"  # the record feature; -1 in records made before it (one records file: still right)


def records_id(examples: Sequence) -> int:
  """A 31-bit id (non-negative: records decode it as int32, -1 being "none") of a records build of `examples`
  (`tasks.text.data.TextExample`s, in record order)."""
  digest = hashlib.sha256()
  for e in examples:
    fields = [e.path, str(e.line), "\x1f".join(e.tokens or ()), "\x1f".join(map(str, e.label or ()))]
    digest.update(("\x1e".join(fields) + "\x1d").encode("utf-8", "surrogatepass"))
  return int.from_bytes(digest.digest()[:4], "big") & 0x7FFFFFFF
