"""`serving.graph_call`: the pipelines' Keras calls run as a cached graph give the eager call's answers (labels and
`exit_iteration` equal, float32 probabilities and embeddings within 1e-6) at every batch size, length and option in
one process (no wrong reuse of a graph), trace once per model, options and input structure however the batch and
length change, free their model with it, and leave non-Keras callables and one-shot calls eager."""

import gc
import weakref

import keras
import numpy as np
import pytest
import tensorflow as tf

from official_albert import AlbertConfig
from official_albert import pipelines
from official_albert.checkpoints.loading import build_model
from official_albert.modeling import early_exit
from official_albert.modeling.embedder import AlbertEmbedder
from official_albert.serving import embedding
from official_albert.serving import graph_call as graph_module
from official_albert.serving import served_model
from official_albert.serving import task_pipelines
from official_albert.serving.graph_call import graph_call
from official_albert.serving.pipelines import packed_batches
from official_albert.tokenization import FullTokenizer
from tests import tiny

LAYERS = 5
TEXTS = ["the invoice is wrong", "it crashes on start", "great work", "a", "nothing works at all today, again",
         "thanks", "the app is slow when I open the second window of the settings", "best support ever", "refund",
         "why was I charged twice for the same order last month"]
TOL = 1e-6


@pytest.fixture(scope="module")
def tokenizer():
  return FullTokenizer(str(tiny.SPM_MODEL_FILE))


@pytest.fixture(scope="module")
def exit_model(tokenizer):
  """A tiny classifier with exit heads whose rows leave at different iterations (large head weights, biases that
  take each iteration's mean logits away, as tests/official_albert/serving/test_early_exit_serving.py builds)."""
  keras.utils.set_random_seed(7)
  model = build_model("classifier", AlbertConfig(**dict(tiny.MODEL, num_hidden_layers=LAYERS)),
                      num_labels=tiny.NUM_LABELS, exit_heads=True)
  rng = np.random.default_rng(3)
  base = rng.normal(size=model.classifier.output_weights.shape) * 100.0
  heads = early_exit.exit_heads(model) + [model.classifier]
  for head in heads:
    head.output_weights.assign((base + 50.0 * rng.normal(size=base.shape)).astype("float32"))
  _, inputs = next(packed_batches(tokenizer, TEXTS, None, len(TEXTS), None, 64))
  mean_logits = model(inputs, return_exit_logits=True)["exit_logits"].numpy().mean(0)
  for head, mean in zip(heads, mean_logits):
    head.output_bias.assign(-mean)
  return model


@pytest.fixture
def eager(monkeypatch):
  """Runs the body with every graph_call direct (the eager oracle)."""
  def run(fn, *args, **kwargs):
    with monkeypatch.context() as m:
      m.setenv(graph_module.EAGER_ENV, "1")
      return fn(*args, **kwargs)
  return run


@pytest.fixture
def graph_now(monkeypatch):
  """Graph from an entry's first call (no eager call first), so that every batch below runs a graph."""
  monkeypatch.delenv(graph_module.EAGER_ENV, raising=False)
  monkeypatch.setattr(graph_module, "EAGER_CALLS", 0)


class _NeedsEager(keras.Model):
  """A model whose Python reads an input's value (no graph of it can be traced)."""

  def call(self, inputs, training=False):
    return {"total": tf.constant([int(np.asarray(inputs["input_word_ids"]).sum())])}


def test_a_model_that_cannot_be_traced_keeps_its_direct_call(graph_now, caplog):
  model = _NeedsEager()
  ids = np.asarray([[2, 10, 3]], np.int32)
  model({"input_word_ids": ids})
  call = graph_call(model)
  assert [int(call({"input_word_ids": ids})["total"][0]) for _ in range(2)] == [15, 15]
  assert "runs eagerly" in caplog.text
  # The failed trace left no Keras name scope open: a model built next names its variables from the root.
  layer = keras.layers.Dense(2, name="after")
  layer.build((None, 3))
  assert layer.kernel.path == "after/kernel", layer.kernel.path


def _assert_same_classes(expected, got, tol=TOL):
  assert [r["label_id"] for r in got] == [r["label_id"] for r in expected]
  assert [r["exit_iteration"] for r in got] == [r["exit_iteration"] for r in expected]
  np.testing.assert_allclose([list(r["probabilities"].values()) for r in got],
                             [list(r["probabilities"].values()) for r in expected], rtol=0, atol=tol)


@pytest.mark.slow
def test_classify_graph_equals_eager_at_every_patience_batch_and_length(exit_model, tokenizer, eager, graph_now):
  """Patience 0, 1, 2 and depth 3 on the same model, batch sizes 1, 2 and 6 (padded lengths from 3 to the
  longest text), in one process: each equals its eager call, and each options' graph is traced once.

  Labels and exit iterations are compared exactly and the encoder's `pooled_output` within 1e-6. The probabilities
  are compared within 1e-4 here: this model's heads (weights ~100, biases cancelling sums of ~1e3 down to logits
  ~1) turn the pooled output's last-bit differences between fused graph kernels and eager ones into ~1e-5 on the
  logits; a model with ordinary heads is held to 1e-6 below."""
  texts = TEXTS[4:]
  calls = [(dict(patience=0), 2), (dict(patience=2), 1), (dict(patience=2), 6), (dict(patience=1), 2),
           (dict(depth=3), 6), (dict(patience=2), 2), (dict(patience=0), 6)]
  exits_seen = set()
  traces = {}
  for options, batch_size in calls:
    expected = eager(pipelines.classify, exit_model, texts, tokenizer=tokenizer, batch_size=batch_size, **options)
    before = graph_module.trace_count()
    got = pipelines.classify(exit_model, texts, tokenizer=tokenizer, batch_size=batch_size, **options)
    key = tuple(sorted(options.items()))
    traces[key] = traces.get(key, 0) + graph_module.trace_count() - before
    _assert_same_classes(expected, got, tol=1e-4)
    exits_seen.update(r["exit_iteration"] for r in got)
  _, inputs = next(packed_batches(tokenizer, texts, None, len(texts), None, 64))
  np.testing.assert_allclose(graph_call(exit_model, patience=2)(inputs)["pooled_output"].numpy(),
                             exit_model(inputs, training=False, patience=2)["pooled_output"].numpy(), rtol=0, atol=TOL)
  # One trace per options (patience=2 asked twice: its graph reused), none per batch size or length.
  assert traces == {(("patience", 0),): 1, (("patience", 2),): 1, (("patience", 1),): 1, (("depth", 3),): 1}
  assert len(exits_seen) >= 3  # rows left at different iterations: the exit rule ran in the graph


@pytest.mark.parametrize("name", ["classifier", "regression"])
def test_classify_graph_equals_eager_within_1e6(name, tiny_model_dirs, tokenizer, eager, graph_now):
  model = tiny_model_dirs.model(name)
  for batch_size in (1, 3, 10):
    expected = eager(pipelines.classify, model, TEXTS, tokenizer=tokenizer, batch_size=batch_size)
    got = pipelines.classify(model, TEXTS, tokenizer=tokenizer, batch_size=batch_size)
    if name == "regression":
      np.testing.assert_allclose([r["score"] for r in got], [r["score"] for r in expected], rtol=0, atol=TOL)
    else:
      _assert_same_classes(expected, got)


def test_new_batch_sizes_and_lengths_do_not_retrace(exit_model, graph_now):
  call = graph_call(exit_model, patience=3)  # (options of their own: a fresh entry)
  rng = np.random.default_rng(0)
  before = graph_module.trace_count()
  for batch, length in [(1, 3), (2, 7), (16, 40), (5, 64), (1, 64), (9, 11), (3, 3), (33, 20)]:
    ids = rng.integers(5, 900, (batch, length)).astype(np.int32)
    out = call({"input_word_ids": tf.constant(ids), "input_mask": tf.ones_like(ids),
                "input_type_ids": tf.zeros_like(ids)})
    assert out["logits"].shape == (batch, tiny.NUM_LABELS)
  assert graph_module.trace_count() - before == 1
  # Numpy inputs of the same structure share the graph too.
  ids = rng.integers(5, 900, (4, 6)).astype(np.int32)
  call({"input_word_ids": ids, "input_mask": np.ones_like(ids), "input_type_ids": np.zeros_like(ids)})
  assert graph_module.trace_count() - before == 1


def test_one_shot_calls_stay_eager_and_a_reused_model_traces_once(exit_model, tokenizer, monkeypatch):
  """The default rule: an entry's first call is eager (a pipeline given a directory loads a new model per call);
  its second traces, and later ones reuse that graph."""
  monkeypatch.delenv(graph_module.EAGER_ENV, raising=False)
  before = graph_module.trace_count()
  call = graph_call(exit_model, patience=1, depth=None)  # (options of their own: a fresh entry)
  _, inputs = next(packed_batches(tokenizer, TEXTS[:2], None, 2, None, 64))
  first = call(inputs)
  assert graph_module.trace_count() == before
  second = call(inputs)
  assert graph_module.trace_count() == before + 1
  call(inputs)
  assert graph_module.trace_count() == before + 1
  np.testing.assert_allclose(second["pooled_output"].numpy(), first["pooled_output"].numpy(), rtol=0, atol=TOL)
  np.testing.assert_array_equal(second["exit_iteration"].numpy(), first["exit_iteration"].numpy())


@pytest.mark.parametrize("wrap", ["encoder", "with_encoder", "embedder_normalize"])
def test_embed_on_a_model_object_traces_once_over_calls(wrap, tokenizer, monkeypatch):
  """`embed` wraps an encoder (or re-pools an embedder) in an AlbertEmbedder; a new one per call traced a new graph
  per call (graph_call keys its graphs on the object). The same wrapper now serves every call with its options, and
  is freed with its encoder."""
  monkeypatch.delenv(graph_module.EAGER_ENV, raising=False)
  encoder = build_model("encoder", AlbertConfig(**tiny.MODEL))
  model, options = encoder, {}
  if wrap == "with_encoder":
    model = type("WithEncoder", (), {"encoder": encoder})()
  elif wrap == "embedder_normalize":
    model, options = AlbertEmbedder(encoder=encoder), {"normalize": True}
  before = graph_module.trace_count()
  first = embedding.embed(model, TEXTS[:4], tokenizer=tokenizer, batch_size=2, **options)
  for _ in range(2):
    np.testing.assert_allclose(embedding.embed(model, TEXTS[:4], tokenizer=tokenizer, batch_size=2, **options), first,
                               rtol=0, atol=TOL)
  assert graph_module.trace_count() - before == 1
  assert embedding.embedder_of(model, **options) is embedding.embedder_of(model, **options)
  assert embedding.embedder_of(model, pooling="max") is not embedding.embedder_of(model, **options)
  assert len(encoder.weights) == len(build_model("encoder", AlbertConfig(**tiny.MODEL)).weights)
  alive = weakref.ref(encoder)
  del encoder, model
  gc.collect()
  assert alive() is None


@pytest.mark.slow
def test_the_cache_frees_its_model(graph_now):
  model = build_model("encoder", AlbertConfig(**tiny.MODEL))
  ids = tf.constant([[2, 10, 3]], tf.int32)
  graph_call(model)({"input_word_ids": ids, "input_mask": tf.ones_like(ids), "input_type_ids": tf.zeros_like(ids)})
  assert model in graph_module._graphs
  alive = weakref.ref(model)
  del model
  gc.collect()
  assert alive() is None


def test_non_keras_callables_and_env_are_called_directly(exit_model, monkeypatch, graph_now):
  seen = []

  def stub(inputs, training=None, **options):
    seen.append((training, options))
    return {"logits": np.zeros((1, 2), np.float32)}

  before = graph_module.trace_count()
  graph_call(stub, patience=3)({"input_word_ids": np.zeros((1, 2), np.int32)})
  assert seen == [(False, {"patience": 3})]
  monkeypatch.setenv(graph_module.EAGER_ENV, "1")
  ids = tf.constant([[2, 10, 3]], tf.int32)
  graph_call(exit_model, patience=4)({"input_word_ids": ids, "input_mask": tf.ones_like(ids),
                                      "input_type_ids": tf.zeros_like(ids)})
  assert graph_module.trace_count() == before


# name → (directory of tiny_model_dirs, pipeline call on (model, tokenizer), values compared within TOL, exact keys).
PIPELINES = {
    "fill_mask": ("pretrainer", lambda m, t: pipelines.fill_mask(m, ["the [MASK] is wrong", "[MASK] work", "a [MASK]"],
                                                               tokenizer=t, batch_size=2),
                  None),
    "feature_extraction": ("encoder", lambda m, t: pipelines.feature_extraction(m, TEXTS, tokenizer=t, batch_size=3),
                           ("sequence_output", "pooled_output")),
    "embed": ("encoder", lambda m, t: embedding.embed(m, TEXTS, tokenizer=t, batch_size=3), None),
    "token_classification": ("token_classifier", lambda m, t: task_pipelines.token_classification(
        m, TEXTS, tokenizer=t, batch_size=3), None),
    "question_answering": ("span", lambda m, t: task_pipelines.question_answering(
        m, ["what is wrong?", "what crashes?"], [TEXTS[0], TEXTS[1] + " " + TEXTS[6]], tokenizer=t,
        max_seq_length=32, doc_stride=8, max_query_length=8), None),
    "multiple_choice": ("multiple_choice", lambda m, t: task_pipelines.multiple_choice(
        m, TEXTS[:3], ["which?", "what?", "who?"], [["a", "b"], ["great work", "slow"], ["thanks", "refund"]],
        tokenizer=t, batch_size=2), None),
}


@pytest.mark.parametrize("name", sorted(PIPELINES))
def test_other_pipelines_graph_equals_eager(name, tiny_model_dirs, tokenizer, eager, graph_now):
  head, run, keys = PIPELINES[name]
  model = tiny_model_dirs.model(head)
  if name == "embed":
    model = embedding.load_embedder(tiny_model_dirs[head])[0]
  expected = eager(run, model, tokenizer)
  before = graph_module.trace_count()
  got = run(model, tokenizer)
  assert graph_module.trace_count() - before == 1  # every batch (and window) of the call on one graph
  if name == "embed":
    np.testing.assert_allclose(got, expected, rtol=0, atol=TOL)
  elif keys is not None:
    for e, g in zip(expected, got):
      assert list(g["input_word_ids"]) == list(e["input_word_ids"])
      for k in keys:
        np.testing.assert_allclose(g[k], e[k], rtol=0, atol=TOL)
  else:
    _assert_same_structure(expected, got)


def _assert_same_structure(expected, got):
  """Strings, ints and lists equal; floats within TOL."""
  if isinstance(expected, dict):
    assert sorted(got) == sorted(expected)
    for k in expected:
      _assert_same_structure(expected[k], got[k])
  elif isinstance(expected, (list, tuple)):
    assert len(got) == len(expected)
    for e, g in zip(expected, got):
      _assert_same_structure(e, g)
  elif isinstance(expected, (float, np.floating)):
    assert abs(float(got) - float(expected)) <= TOL
  elif isinstance(expected, np.ndarray):
    np.testing.assert_allclose(got, expected, rtol=0, atol=TOL)
  else:
    assert got == expected


@pytest.mark.parametrize("head", ["classifier", "token_classifier"])
def test_the_servers_warm_up_traces_before_the_first_request(head, tiny_model_dirs, monkeypatch):
  monkeypatch.delenv(graph_module.EAGER_ENV, raising=False)
  served = served_model.ServedModel("m", tiny_model_dirs[head], head=head)
  served.warm_up()
  before = graph_module.trace_count()
  served.predict(TEXTS[:3])
  served.predict(TEXTS)
  assert graph_module.trace_count() == before
