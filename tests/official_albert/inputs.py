"""Encoder inputs for the tests that compare two ways of running one model (ours vs an oracle, unrolled vs looped)."""

import numpy as np


def padded_pair_inputs(batch=2, seq=12, vocab=97, seed=1, low=5):
  """{input_word_ids, input_mask, input_type_ids} [batch, seq]: ids uniform in [low, vocab), row 1 padded over its
  last 4 positions (so the attention mask matters), segment 1 on the second half (so the type embeddings do)."""
  rng = np.random.default_rng(seed)
  ids = rng.integers(low, vocab, (batch, seq)).astype("int32")
  mask = np.ones((batch, seq), "int32")
  mask[1, seq - 4:] = 0
  types = np.zeros((batch, seq), "int32")
  types[:, seq // 2:] = 1
  return {"input_word_ids": ids, "input_mask": mask, "input_type_ids": types}
