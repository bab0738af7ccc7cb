"""Long-input models traced for inference keep no graph in TensorFlow's gradient registry (custom_gradients.py).

Chunked attention is a `tf.custom_gradient` also at inference, and every graph trace of one registers its gradient in
TensorFlow's process-wide registry under a new name, whose closure holds the traced graph: each chunked model that a
pipeline (`graph_call`) or an export traced and then dropped kept +12 functions, +2 names and ~11,000 Python objects.
`custom_gradients.release` pops exactly the names of one trace (read from its graph), after giving each op its
gradient. Checked structurally (counts of registered names and functions), never by RSS.
"""

import gc
import threading

import keras
import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python.eager import context

from official_albert import AlbertConfig
from official_albert import compat
from official_albert import custom_gradients
from official_albert.checkpoints.loading import build_model
from official_albert.modeling.layers.chunked_attention import chunked_attention
from official_albert.serving import export
from official_albert.serving import graph_call as graph_module
from official_albert.serving.graph_call import graph_call
from tests import tiny

CHUNKED = dict(tiny.MODEL, attention_type="chunked", query_chunk_size=8, key_chunk_size=8)


def _names():
  return {name for name in compat.gradient_registrations() if name.startswith("CustomGradient-")}


def _counts():
  gc.collect()  # (a dropped trace's graph is a reference cycle: its functions are unregistered when collected)
  return len(context.context().list_function_names()), len(_names())


def _inputs(batch=2, seq=20, seed=0):
  ids = np.random.RandomState(seed).randint(5, 90, size=(batch, seq)).astype("int32")
  mask = np.ones_like(ids)
  mask[-1, seq - 5:] = 0
  return {"input_word_ids": ids, "input_mask": mask, "input_type_ids": np.zeros_like(ids)}


def _model(seed=1):
  keras.utils.set_random_seed(seed)
  model = build_model("classifier", AlbertConfig(**CHUNKED), num_labels=tiny.NUM_LABELS)
  model(_inputs())
  return model


@pytest.fixture
def graph_now(monkeypatch):
  """Graph from an entry's first call (no eager call first)."""
  monkeypatch.delenv(graph_module.EAGER_ENV, raising=False)
  monkeypatch.setattr(graph_module, "EAGER_CALLS", 0)


def _graph_def_names(graph):
  """The `_gradient_op_type`s of `graph`'s GraphDef: its nodes and its library functions' (while / map bodies)."""
  graph_def = graph.as_graph_def()
  nodes = list(graph_def.node) + [node for f in graph_def.library.function for node in f.node_def]
  return {node.attr["_gradient_op_type"].s.decode() for node in nodes if "_gradient_op_type" in node.attr}


def test_names_are_read_from_nested_graphs_and_a_released_trace_still_differentiates():
  """A custom gradient inside a while loop's body is found (the graph's library), and a trace released and then
  called under an outer GradientTape gets the same gradient as eagerly (its ops hold their gradient)."""
  rng = np.random.RandomState(0)
  q, k, v = (tf.constant(rng.normal(size=(1, 2, 11, 4)), tf.float32) for _ in range(3))
  bias = tf.zeros([1, 11])

  def attend_twice(q):
    return tf.while_loop(lambda i, x: i < 2, lambda i, x: (i + 1, chunked_attention(x, k, v, bias, 4, 4)), (0, q))[1]

  before = _names()
  concrete = tf.function(attend_twice, autograph=False).get_concrete_function(tf.TensorSpec(q.shape, tf.float32))
  traced = _names() - before
  assert traced and custom_gradients.registered_names(concrete.graph) == _graph_def_names(concrete.graph) == traced
  assert custom_gradients.release(concrete.graph) == traced
  assert _names() == before
  assert custom_gradients.release(concrete.graph) == set()  # (idempotent)

  def loss_and_grad(fn):
    with tf.GradientTape() as tape:
      tape.watch(q)
      loss = tf.reduce_sum(tf.sin(fn(q)))
    return loss.numpy(), tape.gradient(loss, q).numpy()

  expected, got = loss_and_grad(attend_twice), loss_and_grad(concrete)
  np.testing.assert_allclose(got[0], expected[0], rtol=1e-6)
  np.testing.assert_allclose(got[1], expected[1], rtol=1e-5, atol=1e-6)


@pytest.mark.slow
def test_graph_call_of_chunked_models_keeps_no_graph(graph_now):
  """Chunked models traced by `graph_call` and dropped: the registry's names stay as before and the registered
  functions do not grow (before: +2 names and +12 functions per model), and each still answers as eagerly.

  Functions may drop: the 1st count can hold an earlier test's leftovers, freed by a later collection.
  """
  before = _names()
  inputs = _inputs()
  counts = []
  for seed in range(2):
    model = _model(seed)
    expected = model(inputs, training=False)["logits"].numpy()
    call = graph_call(model)
    np.testing.assert_allclose(call(inputs)["logits"].numpy(), expected, rtol=0, atol=1e-5)
    del model, call
    counts.append(_counts())
  assert counts[1][0] <= counts[0][0] and counts[1][1] == counts[0][1] == len(before), counts


@pytest.mark.slow
def test_a_graph_call_under_an_outer_tape_still_differentiates(graph_now):
  model = _model()
  inputs = {name: tf.constant(value) for name, value in _inputs().items()}

  def grads(call):
    with tf.GradientTape() as tape:
      loss = tf.reduce_sum(tf.sin(call(inputs)["logits"]))
    return [tf.convert_to_tensor(g).numpy() for g in tape.gradient(loss, model.trainable_variables) if g is not None]

  before = _names()
  got = grads(graph_call(model))
  assert _names() == before
  expected = grads(lambda x: model(x, training=False))
  assert len(got) == len(expected) > 0
  for a, b in zip(expected, got):
    np.testing.assert_allclose(b, a, rtol=1e-4, atol=1e-5 * max(1.0, np.abs(a).max()))


@pytest.mark.slow
def test_export_keeps_no_graph_and_the_folder_still_differentiates(tmp_path):
  """Two exports of a chunked model end with the registry as before them and no more functions after the second
  (before: +2 names and +12 functions per export);
  the folder (saved with the gradients still registered) loads, answers as the model and differentiates."""
  before = _names()
  counts = []
  for run in range(2):
    model = _model()
    export.export_saved_model(export.AlbertServingModule(model, "classifier", seq_length=32), str(tmp_path / str(run)))
    expected = model(_inputs(), training=False)["logits"].numpy()
    del model
    counts.append(_counts())
  # (Functions may drop: the 1st count can hold an earlier test's leftovers, freed by the 2nd export's collection.)
  assert counts[1][0] <= counts[0][0] and _names() == before, counts
  loaded = tf.saved_model.load(str(tmp_path / "1"))
  from_ids = loaded.signatures["from_ids"]
  inputs = {name: tf.constant(value) for name, value in _inputs().items()}
  with tf.GradientTape() as tape:
    logits = from_ids(**inputs)["logits"]
    loss = tf.reduce_sum(tf.sin(logits))
  np.testing.assert_allclose(logits.numpy(), expected, rtol=0, atol=1e-5)
  grads = tape.gradient(loss, from_ids.trainable_variables)
  assert grads and all(g is not None and np.isfinite(tf.convert_to_tensor(g).numpy()).all() for g in grads)


@tf.custom_gradient
def _doubled_gradient(x):
  return tf.identity(x), lambda dy: 2.0 * dy


class _PausedTrace(keras.Model):
  """A chunked model whose trace, its custom gradients registered, tells `tracing` and waits for `go`."""

  def __init__(self, inner, tracing, go):
    super().__init__(name="paused_trace")
    self.inner, self.tracing, self.go = inner, tracing, go

  def call(self, inputs, training=False):
    out = self.inner(inputs, training=training)
    if not tf.executing_eagerly():
      self.tracing.set()
      assert self.go.wait(60)
    return out


def test_a_name_another_thread_registers_meanwhile_stays(graph_now):
  """While this thread traces a chunked model (paused by events, not sleeps), a second thread traces a function of
  its own custom gradient: the release of this trace leaves the other name registered (popping every name new since
  the trace began would drop it), and the other function still differentiates under an outer tape."""
  tracing, go = threading.Event(), threading.Event()
  model = _PausedTrace(_model(), tracing, go)
  model(_inputs())  # (built eagerly: no pause)
  seen = {}

  def traced_elsewhere(x):
    return _doubled_gradient(x) * 3.0

  def other_thread():
    try:
      assert tracing.wait(60)
      before = _names()
      seen["function"] = tf.function(traced_elsewhere, autograph=False).get_concrete_function(
          tf.TensorSpec([], tf.float32))
      seen["name"] = (_names() - before).pop()
    except BaseException as e:  # noqa: BLE001 (reported below, in the test's thread)
      seen["error"] = e
    finally:
      go.set()

  thread = threading.Thread(target=other_thread)
  thread.start()
  try:
    graph_call(model)(_inputs())  # traced (the other thread's trace in the middle) and released here
  finally:
    go.set()
    thread.join(60)
  assert "error" not in seen, seen["error"]
  assert seen["name"] in _names()
  x = tf.constant(1.0)
  with tf.GradientTape() as tape:
    tape.watch(x)
    y = seen["function"](x)
  assert float(tape.gradient(y, x)) == 6.0
  custom_gradients.release(seen["function"].graph)
  assert seen["name"] not in _names()


@pytest.mark.slow
def test_openvino_conversion_keeps_no_graph():
  """`to_openvino_model` (the OpenVINO export's and depth-wise batching's conversion) drops its trace's custom
  gradients once converted (before: +2 names per chunked model converted), and the IR answers as the model."""
  openvino_export = pytest.importorskip("official_albert.serving.openvino_export")
  pytest.importorskip("openvino")
  before = _names()
  model = _model()
  ov_model = openvino_export.to_openvino_model(model, "classifier")
  assert _names() == before
  compiled = openvino_export.compile_openvino(ov_model, precision="f32")
  inputs = _inputs()
  got = openvino_export.run_compiled(compiled, inputs)
  np.testing.assert_allclose(got["logits"], model(inputs, training=False)["logits"].numpy(), rtol=0, atol=1e-4)
