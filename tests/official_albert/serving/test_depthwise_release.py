"""A depth-wise slot runner keeps no traced graph in TensorFlow's gradient registry (issue 47).

`DepthwiseSlots`' TensorFlow step is traced at its first call; a chunked-attention model's `tf.custom_gradient`
registers its gradient under a new name at that trace, and the registry's entry holds the traced graph. A runner
dropped by a model reload kept +1 name and +6 functions for the life of the process (measured on this file's tiny
3-iteration model); the step's trace now releases them (`custom_gradients.release`). Counted as
tests/official_albert/serving/test_custom_gradient_release.py counts: registered names and functions, never RSS.
"""

import gc

import numpy as np
import pytest
from tensorflow.python.eager import context

from official_albert import compat
from official_albert.serving.depthwise_slots import DepthwiseSlots
from tests import tiny

CHUNKED = dict(attention_type="chunked", query_chunk_size=8, key_chunk_size=8, num_hidden_layers=3)
LENGTH = 16


def _names():
  return {name for name in compat.gradient_registrations() if name.startswith("CustomGradient-")}


def _counts():
  gc.collect()  # (a dropped trace's graph is a reference cycle: its functions are unregistered when collected)
  return len(context.context().list_function_names()), len(_names())


@pytest.fixture(scope="module")
def rows():
  rng = np.random.default_rng(0)
  ids = rng.integers(5, 90, (4, LENGTH)).astype("int32")
  mask = np.ones_like(ids)
  mask[-1, LENGTH - 5:] = 0
  return {"input_word_ids": ids, "input_mask": mask, "input_type_ids": np.zeros_like(ids)}


def test_a_dropped_chunked_runner_keeps_no_graph_and_answers_as_the_model(rows):
  """Two runners of one chunked exit-head model, each traced by its steps and then dropped (as a reload drops
  the served model's): the registry's names stay as before and the functions do not grow (before: +1 name, +6
  functions per runner); each runner's answers (patience 0: every row runs L iterations) equal the model's."""
  model = tiny.exit_head_classifier(rows, scale=30.0, spread=15.0, **CHUNKED)
  expected = model(rows, training=False)["logits"].numpy()
  before = _names()
  counts = []
  for _ in range(2):
    slots = DepthwiseSlots(model, 0, slots=3, seq_length=LENGTH, length_buckets=())
    finished = {}
    for r in range(len(expected)):  # (4 texts into 3 slots: the 4th joins a later step beside running rows)
      while not slots.free():
        finished.update((row.owner, row) for row in slots.step())
      slots.add(r, {k: list(v[r]) for k, v in rows.items()})
    while slots.occupied():
      finished.update((row.owner, row) for row in slots.step())
    np.testing.assert_allclose(np.stack([finished[r].logits for r in range(len(expected))]), expected, rtol=0,
                               atol=1e-5)
    assert {row.exit_iteration for row in finished.values()} == {CHUNKED["num_hidden_layers"]}
    del slots
    counts.append(_counts())
  # (Functions may drop: the 1st count can hold an earlier test's leftovers, freed by a later collection.)
  assert counts[1][0] <= counts[0][0] and _names() == before, counts
