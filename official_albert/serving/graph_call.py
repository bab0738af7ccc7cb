"""The pipelines' forward pass as a graph: one cached `tf.function` per Keras model, call options and input structure.

Why: a Keras model called eagerly dispatches each of its ops from Python, and ALBERT runs its shared block L times
(more ops again with early exit's per-iteration heads), so on a CPU most of a small batch's time is that dispatch,
not arithmetic (docs/serving.md has the measurements). The same call traced once into a graph runs it in C++.

How: `graph_call(model, **options)` gives a callable `inputs → outputs` equal to
`model(inputs, training=False, **options)`:
- For a built `keras.Model` and a dict of rank-fixed tensors / arrays, the graph is traced once per (model, options,
  input names, dtypes and ranks) with every dimension None in its input signature, so that new batch sizes and padded
  lengths reuse it (no retrace; `trace_count` counts traces). The options are Python values fixed in the graph
  (patience, depth, exit_threshold, ...), hence part of the key.
- The first `EAGER_CALLS` calls of such an entry run eagerly: a pipeline given a directory loads a new model per
  call, and tracing (seconds) for the one batch of a one-shot call would cost more than it saves. A model object
  called again (the server's, a loop's, a pipeline call of several batches) runs its graph from the next call on.
- The cache holds the model weakly (the graph reaches it through a weak reference), so a model dropped by its owner
  is freed with its graphs (also a long-input model's: the trace's custom gradients leave TensorFlow's registry,
  `custom_gradients.release`).
- A model whose call cannot be traced (Python that needs eager values) logs a warning once and keeps its direct
  call. Anything else — an export folder's runtime (OpenVINO, LiteRT), a stub, a plain callable, an unbuilt model — is
  called directly, as before. `OFFICIAL_ALBERT_EAGER=1` in the environment makes every call direct (to compare, or to
  debug inside the model).

Eager and graph give the same outputs up to float rounding of the kernels' order (labels and `exit_iteration` equal,
float32 probabilities within 1e-6: tests/official_albert/serving/test_graph_call.py).
"""

from __future__ import annotations

import logging
import os
import threading
from typing import Callable, Dict, Tuple
import weakref

import keras
from keras.src.backend.common import global_state  # (the Keras name-scope stack: no public handle on it)
import numpy as np
import tensorflow as tf

from official_albert import custom_gradients

EAGER_ENV = "OFFICIAL_ALBERT_EAGER"
# Calls of a (model, options, inputs) entry run eagerly before its graph is traced.
EAGER_CALLS = 1

_lock = threading.Lock()
_graphs: "weakref.WeakKeyDictionary[keras.Model, Dict[Tuple, _Entry]]" = weakref.WeakKeyDictionary()
_traces = 0


def trace_count() -> int:
  """Graphs traced by `graph_call` in this process (each trace runs the model's Python once)."""
  return _traces


def eager_only() -> bool:
  """Whether `EAGER_ENV` asks for direct (eager) calls only."""
  return os.environ.get(EAGER_ENV, "").strip().lower() not in ("", "0", "false", "no")


class _Entry:
  """One model's graph for one options and input structure, traced at its `EAGER_CALLS + 1`-th call."""

  def __init__(self, model: keras.Model, options: Dict[str, object], structure: Tuple):
    self.calls = 0
    self.function = None
    self.untraceable = False
    self.lock = threading.Lock()  # (tracing holds it: one trace per entry, other entries go on)
    self._model = weakref.ref(model)
    self._options = dict(options)
    self._signature = [{name: tf.TensorSpec([None] * rank, dtype, name=name) for name, dtype, rank in structure}]

  def next_call(self):
    """(Under the entry's `lock`.) The callable for this call: None (call the model directly) for the first
    `EAGER_CALLS` and for a model that cannot be traced, else the graph (traced here the first time)."""
    if self.calls < EAGER_CALLS or self.untraceable:
      self.calls += 1
      return None
    if self.function is None:
      function = tf.function(self._traced, input_signature=self._signature, autograph=False)
      scopes = _keras_name_scopes()
      depth = len(scopes)
      try:
        # The graph holds its custom gradients (chunked attention's) itself, and TensorFlow's registry lets go of
        # them: a model dropped is freed with its graph (official_albert/custom_gradients.py).
        custom_gradients.release(function.get_concrete_function().graph)
      except Exception as e:  # a model whose Python needs eager values: it keeps its direct call, as before
        # A trace that fails inside the model's call leaves its Keras name scope on the (thread's) stack: every
        # model built afterwards in this thread would get its variable paths prefixed with this model's name.
        del scopes[depth:]
        logging.warning("%s: runs eagerly (its call could not be traced into a graph: %s: %s).",
                        getattr(self._model(), "name", "model"), type(e).__name__, e)
        self.untraceable = True
        return None
      self.function = function
    return self.function

  def _traced(self, inputs):
    global _traces
    _traces += 1  # (Python runs here only while tracing)
    return self._model()(inputs, training=False, **self._options)


def _keras_name_scopes() -> list:
  """This thread's stack of open Keras name scopes (Keras keeps it in its global state; a list, mutable in place)."""
  return global_state.get_global_attribute("name_scope_stack", default=[], set_to_default=True)


def _structure(inputs) -> Tuple:
  """(name, dtype, rank) of each input, sorted; None when `inputs` is not a dict of tensors / arrays."""
  if not isinstance(inputs, dict) or not inputs:
    return None
  out = []
  for name, value in inputs.items():
    if not isinstance(name, str) or not isinstance(value, (tf.Tensor, np.ndarray)):
      return None
    out.append((name, tf.as_dtype(value.dtype), len(value.shape)))
  return tuple(sorted(out, key=lambda item: item[0]))


def graph_call(model, **options) -> Callable:
  """`inputs → model(inputs, training=False, **options)`, through the model's cached graph when it has one (see
  the module docstring). `options` must be hashable Python values."""
  def direct(inputs):
    return model(inputs, training=False, **options)

  if not isinstance(model, keras.Model) or eager_only():
    return direct
  key_options = tuple(sorted(options.items()))

  def call(inputs):
    structure = _structure(inputs)
    if structure is None or not model.built:
      return direct(inputs)
    with _lock:
      entries = _graphs.setdefault(model, {})
      key = (key_options, structure)
      if key not in entries:
        entries[key] = _Entry(model, options, structure)
      entry = entries[key]
    with entry.lock:
      function = entry.next_call()
    return direct(inputs) if function is None else function(dict(inputs))

  return call
