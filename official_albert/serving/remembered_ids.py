"""A tokenizer that remembers the ids of the texts it encoded last, for the server.

Why: the server tokenizes a text to order its batch by length (`ServedModel.token_count`), then the pipeline it
answers through tokenizes the same text again to pack it, and an OpenAI embeddings answer counts its tokens a third
time for `usage`. `RememberedIds` is passed to the pipelines in place of the folder's `FullTokenizer`: the later
encodings of a text read the ids of the first, which are the same (the tokenizer is deterministic).
"""

from __future__ import annotations

import collections
import threading
from typing import List, Sequence


class RememberedIds:
  """`tokenizer` (a `FullTokenizer`) whose `encode_ids_batch` remembers the ids of the last `size` texts; every
  other attribute is the tokenizer's. Safe to share between the server's threads."""

  def __init__(self, tokenizer, size: int = 4096):
    self.tokenizer = tokenizer
    self._size = max(1, int(size))
    self._ids: "collections.OrderedDict[str, tuple]" = collections.OrderedDict()
    self._lock = threading.Lock()
    self.encoded = 0  # texts the tokenizer itself encoded (tests count them)

  def __getattr__(self, name):
    return getattr(self.tokenizer, name)

  def encode_ids_batch(self, texts: Sequence[str]) -> List[List[int]]:
    """The tokenizer's `encode_ids_batch(texts)`: new lists each call, the remembered texts not encoded again."""
    texts = list(texts)
    with self._lock:
      known = {t: self._ids[t] for t in texts if t in self._ids}
      for t in known:
        self._ids.move_to_end(t)
    missing = list(dict.fromkeys(t for t in texts if t not in known))
    if missing:
      fresh = dict(zip(missing, (tuple(ids) for ids in self.tokenizer.encode_ids_batch(missing))))
      known.update(fresh)
      with self._lock:
        self.encoded += len(missing)
        self._ids.update(fresh)
        while len(self._ids) > self._size:
          self._ids.popitem(last=False)
    return [list(known[t]) for t in texts]
