"""A tokenizer that remembers the ids of the texts it encoded last, for the server.

Why: the server tokenizes a text to order its batch by length (`ServedModel.token_count`), then the pipeline it
answers through tokenizes the same text again to pack it, and an OpenAI embeddings answer counts its tokens a third
time for `usage`. `RememberedIds` is passed to the pipelines in place of the folder's `FullTokenizer`: the later
encodings of a text read the ids of the first, which are the same (the tokenizer is deterministic).

Bounded by size as well as by count: a server's requests may hold `--max_inputs` texts of `--max_text_chars`
characters each, so 4096 remembered texts could be gigabytes (a 100,000-character text is ~65,000 ids). The cache
holds at most `max_bytes` (its texts, and their ids stored as 4-byte int32 arrays), forgets the least recently used
first, and does not remember a text that alone would take more than `max_bytes // 16` (it is encoded each time).
"""

from __future__ import annotations

import array
import collections
import sys
import threading
from typing import List, Sequence

# The default bound of one model's cache: 64 MiB (e.g. ~100 texts of 100,000 characters, or 4096 short ones).
DEFAULT_MAX_BYTES = 64 << 20


class RememberedIds:
  """`tokenizer` (a `FullTokenizer`) whose `encode_ids_batch` remembers the ids of the last `size` texts that fit in
  `max_bytes` (`held_bytes`: what the remembered texts and ids take now); every other attribute is the tokenizer's.
  Safe to share between the server's threads."""

  def __init__(self, tokenizer, size: int = 4096, max_bytes: int = DEFAULT_MAX_BYTES):
    self.tokenizer = tokenizer
    self._size = max(1, int(size))
    self._max_bytes = max(1, int(max_bytes))
    self._ids: "collections.OrderedDict[str, array.array]" = collections.OrderedDict()
    self._lock = threading.Lock()
    self.held_bytes = 0
    self.encoded = 0  # texts the tokenizer itself encoded (tests count them)

  def __getattr__(self, name):
    return getattr(self.tokenizer, name)

  @staticmethod
  def _bytes(text: str, ids: array.array) -> int:
    """What an entry holds: its text (the dict's key) and its ids, 4 bytes each."""
    return sys.getsizeof(text) + ids.itemsize * len(ids)

  def encode_ids_batch(self, texts: Sequence[str]) -> List[List[int]]:
    """The tokenizer's `encode_ids_batch(texts)`: new lists each call, the remembered texts not encoded again."""
    texts = list(texts)
    with self._lock:
      known = {t: self._ids[t] for t in texts if t in self._ids}
      for t in known:
        self._ids.move_to_end(t)
    missing = list(dict.fromkeys(t for t in texts if t not in known))
    if missing:
      fresh = dict(zip(missing, (array.array("i", ids) for ids in self.tokenizer.encode_ids_batch(missing))))
      known.update(fresh)
      with self._lock:
        self.encoded += len(missing)
        for text, ids in fresh.items():
          size = self._bytes(text, ids)
          if text in self._ids or size > self._max_bytes // 16:  # (another thread's; or too large to keep)
            continue
          self._ids[text] = ids
          self.held_bytes += size
        while self._ids and (len(self._ids) > self._size or self.held_bytes > self._max_bytes):
          text, ids = self._ids.popitem(last=False)
          self.held_bytes -= self._bytes(text, ids)
    return [known[t].tolist() for t in texts]
