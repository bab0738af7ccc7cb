"""The reference's masking and packing options, written once for both ways of making pretraining examples.

ALBERT pretraining examples are made two ways with the same distributions: ahead of time by
`data_prep.create_pretraining_data` (`data_prep.pretraining_instances.InstanceOptions`, NumPy) and on the fly inside
`tf.data` by `tasks.pretraining_dynamic` (`DynamicOptions`, TF ops). Both option classes derive from `MaskingOptions`
so that the example layout, the reference's names and defaults (create_pretraining_data.py's flags, reference §3.1),
their checks and the n-gram length distribution have one home; the pretraining task's config checks its own copy of
the probabilities here at config time (`check_instance_options`).

It lives in `tasks/` because the dynamic pipeline may not import `data_prep` while `data_prep` may import `tasks`,
and it imports no TensorFlow: the static tool's instance logic stays NumPy only.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import Tuple

import numpy as np


def check_instance_options(masked_lm_prob: float, short_seq_prob: float, max_ngram: int,
                           error: type = ValueError, ngram_name: str = "max_ngram") -> None:
  """Raises `error` naming the option when one of the reference instance options is out of range.

  Args:
    masked_lm_prob, short_seq_prob, max_ngram: the values to check.
    error: the exception class (the task config raises its `ConfigError`, so a bad value fails at config time).
    ngram_name: what the caller calls the longest n-gram (the static tool's flag is `--ngram`).
  """
  if not 0.0 <= masked_lm_prob <= 1.0:
    raise error(f"masked_lm_prob must be in [0, 1], got {masked_lm_prob}.")
  if not 0.0 <= short_seq_prob <= 1.0:
    raise error(f"short_seq_prob must be in [0, 1], got {short_seq_prob}.")
  if max_ngram < 1:
    raise error(f"{ngram_name} must be >= 1, got {max_ngram}.")


@functools.lru_cache(maxsize=None)
def ngram_cdf(max_ngram: int, favor_shorter: bool) -> Tuple[float, ...]:
  """The cumulative distribution of the masked n-gram length n in [1, max_ngram]: p(n) ∝ 1/n (reference §3.3), or
  those probabilities reversed when `favor_shorter` is False; the last value is exactly 1."""
  p = 1.0 / np.arange(1, max_ngram + 1)
  p /= p.sum()
  if not favor_shorter:
    p = p[::-1]
  cdf = np.cumsum(p).tolist()
  cdf[-1] = 1.0
  return tuple(cdf)


@dataclasses.dataclass(frozen=True)
class MaskingOptions:
  """The example layout and the masking / packing probabilities both pretraining-data paths read.

  Attributes:
    max_seq_length: padded length of every example (reference default 512).
    max_predictions_per_seq: masked-LM target slots.
    masked_lm_prob: budget = min(max_predictions_per_seq, max(1, round(len(tokens) * masked_lm_prob))).
    short_seq_prob: probability that a document pass targets a random shorter length.
  """
  max_seq_length: int = 512
  max_predictions_per_seq: int = 20
  masked_lm_prob: float = 0.15
  short_seq_prob: float = 0.1

  def check_options(self, max_ngram: int, ngram_name: str) -> None:
    """Raises ValueError naming the option that is out of range (a subclass adds the longest n-gram's value and
    name: the two paths call it differently)."""
    if self.max_seq_length < 5:
      raise ValueError(f"max_seq_length must be >= 5 ([CLS] A [SEP] B [SEP]), got {self.max_seq_length}.")
    if self.max_predictions_per_seq < 1:
      raise ValueError(f"max_predictions_per_seq must be >= 1, got {self.max_predictions_per_seq}.")
    check_instance_options(self.masked_lm_prob, self.short_seq_prob, max_ngram, ngram_name=ngram_name)


def num_predictions(seq_length: int, masked_lm_prob: float = MaskingOptions.masked_lm_prob) -> int:
  """Masked-LM slots for a sequence length: enough for the masking budget of a full sequence, ceil(masked_lm_prob ×
  seq_length) (5 at 32, 20 at 128, the reference's pairing of the two flags; 615 at 4,096)."""
  return max(1, math.ceil(masked_lm_prob * seq_length))
