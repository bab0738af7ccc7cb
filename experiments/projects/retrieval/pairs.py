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
import re
from typing import AbstractSet, Dict, Iterable, List, Sequence, Tuple

Pair = Tuple[str, str]
# (query, positive, index of the training passage it was cut from): an Inverse Cloze Task row.
ClozeRow = Tuple[str, str, int]
# A sentence ends at . ! or ? before a space and a capital, digit, quote or bracket ("e.g. a" does not end one); the
# passage's last piece counts only when it ends so too (the
# passage is cut at `max_passage_chars`, which can leave half a sentence).
_SENTENCE_BREAK = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9`'\"(\[])")


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


def sentences(passage: str) -> List[str]:
  """The passage's sentences, in order; a last piece that does not end a sentence (a cut passage) is left out."""
  parts = [p.strip() for p in _SENTENCE_BREAK.split(passage) if p.strip()]
  return [p for p in parts if p[-1] in ".!?"]


def cloze_rows(train: Sequence[Pair], exclude: AbstractSet[str], per_passage: int,
               options: PairOptions = PairOptions()) -> List[ClozeRow]:
  """Inverse Cloze Task rows (Lee, Chang and Toutanova 2019, ORQA): a sentence of a training passage is a query
  and the passage without that sentence its positive.

  Why: a reranker learns from its groups what a bi-encoder gets from every other pair of its batch, and the first
  lines give one group a passage; a passage's sentences give several more queries of the same kind (a short
  statement that its passage's other sentences explain). The sentence is cut out of the positive, so the task is
  to relate it to its context, not to find it verbatim.

  Rules: a sentence of `min_query_words`-`max_query_words` words, found in one training passage only and once
  there (a repeated sentence has no single answer), not a training or `exclude`d query (the held-out queries),
  and leaving at least `min_passage_words` words; at most `per_passage` a passage, chosen by a hash of the text,
  so the rows depend on the pairs alone (not their order).

  Returns:
    (sentence, passage without it, index of the passage in `train`) rows, by passage and then sentence.
  """
  if per_passage <= 0:
    return []
  queries = {q for q, _ in train}
  counts = collections.Counter(s for _, p in train for s in set(sentences(p)))
  rows = []
  for index, (_, passage) in enumerate(train):
    candidates = []
    for sentence in dict.fromkeys(sentences(passage)):
      if counts[sentence] != 1 or passage.count(sentence) != 1 or sentence in queries or sentence in exclude:
        continue
      if not options.min_query_words <= len(sentence.split()) <= options.max_query_words:
        continue
      rest = " ".join(passage.replace(sentence, " ", 1).split())
      if len(rest.split()) < options.min_passage_words:
        continue
      candidates.append((sentence, rest))
    key = lambda row: hashlib.sha256(f"cloze\0{row[0]}".encode("utf-8")).hexdigest()  # noqa: E731
    rows += [(q, rest, index) for q, rest in sorted(sorted(candidates, key=key)[:per_passage])]
  return rows
