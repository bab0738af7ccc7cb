"""A freshly built model draws every kernel and table independently (reference §1.2 item 8), and a seed fixes them.

Keras 3's `TruncatedNormal(seed=None)` draws one seed when it is made and then returns the same numbers for the same
shape on every call (stateless). One such object handed to several weights gave them the same starting values: the
position and token-type tables repeated the word table's rows, the FFN's output kernel held the intermediate kernel's
numbers, and the SQuAD 2.0 head's kernels were copies of each other. Each weight now gets its own initializer.
"""

import itertools

import keras
import numpy as np
import pytest

from official_albert import AlbertConfig
from official_albert.checkpoints.loading import build_model
from tests import tiny

CASES = [(name, head, num_labels, tiny.MODEL, False) for name, (head, num_labels) in tiny.HEADS.items()]
CASES += [("grouped_pretrainer", "pretrainer", None, tiny.GROUPED, False),
          ("grouped_squad_v2", "squad_v2", None, tiny.GROUPED, False),
          ("classifier_exit_heads", "classifier", tiny.NUM_LABELS, tiny.MODEL, True)]


def _random_weights(head, num_labels, fields, exit_heads, seed=7):
  """{path: flattened values} of the model's kernels and tables (the weights drawn at random: biases and LayerNorm
  start at constants, so they are left out)."""
  keras.utils.set_random_seed(seed)
  model = build_model(head, AlbertConfig(**fields), num_labels or 2, tiny.NUM_CHOICES, exit_heads=exit_heads)
  return {v.path: np.asarray(v).ravel() for v in model.weights if len(v.shape) >= 2}


@pytest.mark.parametrize("name, head, num_labels, fields, exit_heads", CASES, ids=[c[0] for c in CASES])
def test_no_two_weights_start_with_the_same_values(name, head, num_labels, fields, exit_heads):
  weights = _random_weights(head, num_labels, fields, exit_heads)
  assert len(weights) >= 2, f"{name}: expected several kernels and tables, got {sorted(weights)}"
  same = []
  for (path_a, a), (path_b, b) in itertools.combinations(weights.items(), 2):
    n = min(a.size, b.size)
    if np.array_equal(a[:n], b[:n]):
      same.append(f"{path_a} == {path_b} (first {n} values)")
  assert not same, f"{name}: weights share their initial values: " + "; ".join(same)


def test_same_seed_same_initial_weights():
  first = _random_weights("squad_v2", None, tiny.MODEL, False)
  again = _random_weights("squad_v2", None, tiny.MODEL, False)
  assert first.keys() == again.keys()
  for path, values in first.items():
    np.testing.assert_array_equal(values, again[path], err_msg=path)
