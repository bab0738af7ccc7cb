"""Retrieval pairs from the demo corpus: a docstring's first line is the query, the rest of it the passage.

The demo corpus (`experiments.study.make_corpus`) is the Python documentation, one docstring per document, and a
docstring's first line is its summary ("Return the number of items in a container."): a short question-like text
whose answer is the body below it. That is the (title → rest of the passage) task of retrieval benchmarks, on text
the pretraining saw (training documents) or never saw (held-out documents).

Why the rules below:
- Held-out queries come from the corpus' held-out documents (never pretrained on). The documentation repeats itself
  (inherited docstrings, aliases), so a training pair whose query or passage equals a held-out one is dropped: the
  held-out queries and passages never appear in training.
- A query that heads two different passages (or a passage under two queries) has no single right answer; both are
  dropped.
- The output depends on the set of documents only: pairs are deduplicated and sorted, and the held-out subsample is
  chosen by a hash of the text, so shuffled or duplicated input documents give the same pairs.
"""

from __future__ import annotations

import collections
import dataclasses
import hashlib
from typing import Dict, Iterable, List, Sequence, Tuple

Pair = Tuple[str, str]


@dataclasses.dataclass(frozen=True)
class PairOptions:
  """What makes a (query, passage) pair.

  Attributes:
    min_query_words, max_query_words: the first line's length in words (shorter ones are names, longer ones prose).
    min_passage_words: the rest's length in words.
    max_passage_chars: the passage is cut here (the model reads ~60 pieces of it anyway).
    max_heldout: held-out pairs kept (a hash-chosen subsample; 0 = all).
    max_train: training pairs kept (a hash-chosen subsample; 0 = all).
  """
  min_query_words: int = 3
  max_query_words: int = 24
  min_passage_words: int = 8
  max_passage_chars: int = 600
  max_heldout: int = 500
  max_train: int = 0


def split_documents(text: str) -> List[str]:
  """The documents of a corpus file (separated by blank lines)."""
  return [d.strip() for d in text.split("\n\n") if d.strip()]


def document_pair(document: str, options: PairOptions = PairOptions()):
  """(query, passage) of one document, or None when it does not make a pair (one line, too short, too long)."""
  lines = [" ".join(line.split()) for line in document.splitlines()]
  lines = [line for line in lines if line]
  if len(lines) < 2:
    return None
  query, passage = lines[0], " ".join(lines[1:])
  if not options.min_query_words <= len(query.split()) <= options.max_query_words:
    return None
  if len(passage.split()) < options.min_passage_words:
    return None
  return query, passage[:options.max_passage_chars].rstrip()


def _unambiguous(pairs: Iterable[Pair]) -> List[Pair]:
  """Distinct pairs whose query heads one passage and whose passage has one query, sorted."""
  pairs = sorted(set(pairs))
  queries = collections.Counter(q for q, _ in pairs)
  passages = collections.Counter(p for _, p in pairs)
  return [(q, p) for q, p in pairs if queries[q] == 1 and passages[p] == 1]


def _hash_order(pairs: Sequence[Pair], limit: int, salt: str) -> List[Pair]:
  """The first `limit` pairs in the order of a hash of their text (0 = all), then sorted: a subsample that does not
  depend on the input's order."""
  if not limit or len(pairs) <= limit:
    return sorted(pairs)
  key = lambda pair: hashlib.sha256(f"{salt}\0{pair[0]}\0{pair[1]}".encode("utf-8")).hexdigest()  # noqa: E731
  return sorted(sorted(pairs, key=key)[:limit])


def build_pairs(train_documents: Iterable[str], heldout_documents: Iterable[str],
                options: PairOptions = PairOptions()) -> Dict[str, List[Pair]]:
  """{"train": [(query, passage)], "heldout": [(query, passage)]}: see the module docstring.

  Raises:
    ValueError: no held-out or no training pair survives (a corpus too small for the options).
  """
  def pairs_of(documents):
    return _unambiguous(p for p in (document_pair(d, options) for d in documents) if p)

  heldout = _hash_order(pairs_of(heldout_documents), options.max_heldout, "heldout")
  held_queries = {q for q, _ in heldout}
  held_passages = {p for _, p in heldout}
  train = [(q, p) for q, p in pairs_of(train_documents) if q not in held_queries and p not in held_passages]
  train = _hash_order(train, options.max_train, "train")
  if not heldout or not train:
    raise ValueError(f"{len(train)} training and {len(heldout)} held-out pairs: too few documents with a first line "
                     f"of {options.min_query_words}-{options.max_query_words} words and a rest of at least "
                     f"{options.min_passage_words} words; use a larger corpus (--corpus_bytes).")
  return {"train": train, "heldout": heldout}
