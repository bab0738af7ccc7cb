r"""The long-range task's documents built from piece ids: the sentence pools as SentencePiece ids, documents drawn
afresh for every training batch, and the probe sets that tell the key sentence from the search for it.

`study` writes the documents as text for the train binary; here the same composition (a key
sentence of the label's family at a random sentence position among filler sentences) is done on piece ids, so that a
host without TensorFlow (`finetune_jax`'s fine-tuning on an accelerator) can draw new documents.
"""

from __future__ import annotations

from typing import Any, Dict, TYPE_CHECKING

import numpy as np

from official_albert import file_io
from official_albert.tokenization.tokenizer import pack_ids

if TYPE_CHECKING:
  from experiments.projects.long_inputs.study import LongRangeSettings


def write_pools(tokenizer, pools: Dict[str, Any], path: str, seed: int) -> Dict[str, Any]:
  """The filler, training-key and dev-key sentences as piece ids (flat + offsets), for documents drawn afresh each
  step and for the probes (`probe_sets`).

  Returns how often the pieces of two sentences joined by a space equal the concatenation of each one's pieces (the
  composition's assumption; measured on 500 random pairs)."""
  arrays = {}
  named = (("filler", pools["filler"]), ("key0", pools["train"][0]), ("key1", pools["train"][1]),
           ("dev0", pools["dev"][0]), ("dev1", pools["dev"][1]))
  for name, sentences in named:
    ids = tokenizer.encode_ids_batch(list(sentences))
    arrays[f"{name}_ids"] = np.concatenate([np.asarray(x, np.int32) for x in ids])
    arrays[f"{name}_offsets"] = np.cumsum([0] + [len(x) for x in ids]).astype(np.int64)
  rng = np.random.default_rng(seed)
  filler = pools["filler"]
  pairs = [(filler[rng.integers(len(filler))], filler[rng.integers(len(filler))]) for _ in range(500)]
  joined = tokenizer.encode_ids_batch([f"{a} {b}" for a, b in pairs])
  apart = tokenizer.encode_ids_batch([x for pair in pairs for x in pair])
  same = np.mean([list(joined[i]) == list(apart[2 * i]) + list(apart[2 * i + 1]) for i in range(len(pairs))])
  with file_io.atomic_path(path) as tmp, open(tmp, "wb") as f:
    np.savez_compressed(f, **arrays)
  return {"pools": {name: len(arrays[f"{name}_offsets"]) - 1 for name, _ in named},
          "joined_equals_concatenated": float(same)}


def sentence(pools: Dict[str, np.ndarray], name: str, index: int) -> np.ndarray:
  """The piece ids of sentence `index` of pool `name` (flat ids + offsets, as `write_pools` stores them)."""
  offsets = pools[f"{name}_offsets"]
  return pools[f"{name}_ids"][offsets[index]:offsets[index + 1]]


def labelled_record(ids: np.ndarray, label: int, seq_length: int) -> Dict[str, np.ndarray]:
  """`[CLS] ids [SEP]` packed to `seq_length` (the text task's record layout) with its label."""
  record = pack_ids(ids.tolist(), None, seq_length)
  return {**{k: np.asarray(v, np.int32) for k, v in record.items()}, "label_ids": np.int32(label)}


class FreshDocuments:
  """Training documents drawn afresh for every batch, as `study.make_documents` builds them (a key
  sentence of the label's family at a uniformly random sentence position among filler up to 2,000-4,000 pieces), from
  the pools' piece ids: the model cannot learn the training set by its filler."""

  def __init__(self, pools: Dict[str, np.ndarray], settings: LongRangeSettings, seq_length: int, seed: int,
               keys: str = "key", stream: int = 2):
    self.pools, self.settings, self.seq_length, self.keys = pools, settings, seq_length, keys
    self.rng = np.random.default_rng([seed, stream])

  def _pick(self, name: str) -> np.ndarray:
    return sentence(self.pools, name, int(self.rng.integers(len(self.pools[f"{name}_offsets"]) - 1)))

  def document(self, label: int) -> Dict[str, np.ndarray]:
    key = self._pick(f"{self.keys}{label}")
    target = int(self.rng.integers(self.settings.min_pieces, self.settings.max_pieces + 1))
    body, total = [], len(key)
    while total < target:
      body.append(self._pick("filler"))
      total += len(body[-1])
    body.insert(int(self.rng.integers(len(body) + 1)), key)
    return labelled_record(np.concatenate(body), label, self.seq_length)

  def batch(self, size: int) -> Dict[str, np.ndarray]:
    documents = [self.document(int(label)) for label in self.rng.integers(2, size=size)]
    return {k: np.stack([d[k] for d in documents]) for k in documents[0]}


def _sentences_alone(pools: Dict[str, np.ndarray], keys: str, seq_length: int, limit: int, seed: int
                     ) -> Dict[str, np.ndarray]:
  """Each key sentence of `keys` ("key": training, "dev": held out) as a document by itself, both families, at most
  `limit` per family (a seeded sample)."""
  rng = np.random.default_rng([seed, 4])
  rows = []
  for label in (0, 1):
    count = len(pools[f"{keys}{label}_offsets"]) - 1
    for index in sorted(rng.permutation(count)[:limit]):
      rows.append(labelled_record(sentence(pools, f"{keys}{label}", index), label, seq_length))
  return {k: np.stack([r[k] for r in rows]) for k in rows[0]}


def probe_sets(pools: Dict[str, np.ndarray], prepared: LongRangeSettings, seq_length: int, count: int = 256
               ) -> Dict[str, Dict[str, np.ndarray]]:
  """What a dev accuracy alone cannot tell apart, as extra evaluation sets of the model's sequence length:

  - `dev_keys_alone`: the held-out key sentences by themselves, as many of each family (the smaller family's count) —
    the ceiling set by classifying ONE unseen sentence; the long documents cannot score above it whatever the attention
    reads.
  - `train_keys_alone`: training key sentences by themselves (up to `count` per family): what was learnt of the keys.
  - `seen_keys_documents`: `count` documents of the prepared lengths (filler drawn afresh, a seeded stream of its own)
    around TRAINING key sentences: finding one known sentence anywhere in the document, without the held-out
    sentence's generalisation in the way; a truncated model can only find the keys in its first pieces.
  """
  documents = FreshDocuments(pools, prepared, seq_length, prepared.seed, keys="key", stream=3)
  balanced = min(len(pools[f"dev{label}_offsets"]) - 1 for label in (0, 1))
  return {"dev_keys_alone": _sentences_alone(pools, "dev", seq_length, balanced, prepared.seed),
          "train_keys_alone": _sentences_alone(pools, "key", seq_length, count, prepared.seed),
          "seen_keys_documents": documents.batch(count)}
