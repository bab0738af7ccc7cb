"""`official_albert.retrieval` against sentence-transformers (issue 46's oracle equality): MNRL with and without hard
negatives, its symmetric form, CoSENT, the cosine loss and MatryoshkaLoss — values and gradients within 1e-5 — and the
retrieval metrics within 1e-9 of InformationRetrievalEvaluator on the same embeddings.

The oracle runs in its own process with torch only (sentence_transformers_oracle.py beside this file), once for the
module; the test skips where sentence-transformers (requirements-test.txt) is not installed.
"""

import importlib.util
import json
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from official_albert.retrieval import losses
from official_albert.retrieval import metrics
from official_albert.retrieval import search

ORACLE = pathlib.Path(__file__).with_name("sentence_transformers_oracle.py")
pytestmark = pytest.mark.skipif(importlib.util.find_spec("sentence_transformers") is None,
                                reason="sentence-transformers (requirements-test.txt) is not installed")
B, D, SCALE = 6, 16, 20.0
DIMS, WEIGHTS = (16, 8, 4), (1.0, 0.5, 0.25)


def _retrieval_case(rng):
  """Queries near some documents (so metrics are neither 0 nor 1), several relevant documents for some queries, a
  query without any (left out by both), and a relevant id absent from the corpus (counts in recall's denominator)."""
  corpus = rng.normal(size=(150, D)).astype(np.float32)
  queries, relevant = [], {}
  for q in range(25):
    targets = rng.choice(150, size=int(rng.integers(1, 4)), replace=False)
    queries.append(corpus[targets[0]] + rng.normal(scale=1.2, size=D).astype(np.float32))
    relevant[f"q{q}"] = [f"d{t}" for t in targets]
  relevant["q3"].append("missing-doc")
  relevant["q7"] = []
  return {"query_ids": [f"q{q}" for q in range(25)], "corpus_ids": [f"d{c}" for c in range(150)],
          "relevant": relevant}, np.stack(queries), corpus


def _edge_cases(rng):
  """name → (ir, query vectors, corpus vectors) where a cut-off passes what there is (mutation audit 24 F6): a corpus
  of 4 documents under cut-offs up to 10 (precision@10 is over 10 still), and a query with 150 relevant documents
  among 300 under map@100 (divided by min(100, 150))."""
  small = {"query_ids": ["q0", "q1", "q2"], "corpus_ids": ["d0", "d1", "d2", "d3"],
           "relevant": {"q0": ["d0"], "q1": ["d1", "d3"], "q2": ["d2"]}}
  many_ids = [f"d{c}" for c in range(300)]
  many = {"query_ids": ["q0", "q1"], "corpus_ids": many_ids,
          "relevant": {"q0": list(rng.choice(many_ids, size=150, replace=False)), "q1": many_ids[:120]}}
  return {name: (ir, rng.normal(size=(len(ir["query_ids"]), D)).astype(np.float32),
                 rng.normal(size=(len(ir["corpus_ids"]), D)).astype(np.float32))
          for name, ir in (("small_corpus", small), ("many_relevant", many))}


EDGE_CASES = _edge_cases(np.random.default_rng(1))


@pytest.fixture(scope="module")
def case(tmp_path_factory):
  rng = np.random.default_rng(0)
  inputs = {name: rng.normal(size=(B, D)).astype(np.float32) for name in ("anchors", "positives", "negatives")}
  inputs["positives"] += 0.8 * inputs["anchors"]  # positives resemble their anchors, as trained pairs do
  inputs["labels"] = rng.uniform(size=B).astype(np.float32)
  ir, query_vectors, corpus_vectors = _retrieval_case(rng)
  edges = {}
  for name, (edge_ir, edge_queries, edge_corpus) in EDGE_CASES.items():
    edges.update({f"ir_{name}": json.dumps(edge_ir), f"query_vectors_{name}": edge_queries,
                  f"corpus_vectors_{name}": edge_corpus})
  folder = tmp_path_factory.mktemp("st_oracle")
  np.savez(folder / "in.npz", scale=SCALE, dims=np.array(DIMS), weights=np.array(WEIGHTS), ir=json.dumps(ir),
           query_vectors=query_vectors, corpus_vectors=corpus_vectors, ir_cases=json.dumps(sorted(EDGE_CASES)),
           **edges, **inputs)
  env = {**os.environ, "USE_TF": "0", "TF_CPP_MIN_LOG_LEVEL": "2"}
  done = subprocess.run([sys.executable, str(ORACLE), str(folder / "in.npz"), str(folder / "out.npz")], env=env,
                        capture_output=True, text=True, timeout=900)
  assert done.returncode == 0, done.stderr[-3000:]
  oracle = dict(np.load(folder / "out.npz"))
  return inputs, oracle, ir, query_vectors, corpus_vectors


def _ours(fn, *arrays):
  tensors = [tf.constant(a) for a in arrays]
  with tf.GradientTape() as tape:
    tape.watch(tensors)
    value = fn(*tensors)
  return [value.numpy()] + [g.numpy() for g in tape.gradient(value, tensors)]


OURS = {
    "mnrl": (lambda a, p: losses.mnrl_loss(a, p, scale=SCALE), ("anchors", "positives")),
    "mnrl_negatives": (lambda a, p, n: losses.mnrl_loss(a, p, [n], scale=SCALE), ("anchors", "positives", "negatives")),
    "symmetric": (lambda a, p: losses.mnrl_loss(a, p, scale=SCALE, symmetric=True), ("anchors", "positives")),
    "symmetric_negatives": (lambda a, p, n: losses.mnrl_loss(a, p, [n], scale=SCALE, symmetric=True),
                            ("anchors", "positives", "negatives")),
    "cosent": (None, ("anchors", "positives")),
    "cosine": (None, ("anchors", "positives")),
    "matryoshka_mnrl": (lambda a, p: losses.matryoshka_loss(lambda x, y: losses.mnrl_loss(x, y, scale=SCALE), [a, p],
                                                            DIMS, WEIGHTS), ("anchors", "positives")),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(OURS))
def test_loss_values_and_gradients_equal_sentence_transformers(case, name):
  inputs, oracle, *_ = case
  fn, names = OURS[name]
  if name == "cosent":
    fn = lambda a, p: losses.cosent_loss(a, p, inputs["labels"], scale=SCALE)  # noqa: E731
  elif name == "cosine":
    fn = lambda a, p: losses.cosine_loss(a, p, inputs["labels"])  # noqa: E731
  ours = _ours(fn, *[inputs[n] for n in names])
  assert len(ours) == len(names) + 1
  for i, value in enumerate(ours):
    expected = oracle[f"{name}_{i}"]
    np.testing.assert_allclose(value, expected, rtol=1e-5, atol=1e-5, err_msg=f"{name} {'value' if not i else i}")
  assert abs(float(ours[0])) > 1e-3  # a loss that is not trivially zero


def test_retrieval_metrics_equal_the_information_retrieval_evaluator(case):
  *_, ir, query_vectors, corpus_vectors = case
  expected = json.loads(str(case[1]["ir"]))
  relevant = {q: set(v) for q, v in ir["relevant"].items()}
  ours = metrics.retrieval_metrics(metrics.cosine_scores(query_vectors, corpus_vectors), ir["query_ids"],
                                   ir["corpus_ids"], relevant)
  assert ours["queries"] == 24  # q7 has no relevant document
  assert set(expected) <= set(ours), set(expected) - set(ours)
  for name, value in expected.items():
    assert abs(ours[name] - value) <= 1e-9, (name, ours[name], value)
  # The embedding task's evaluation (a block of cosines at a time, three queries a block here): the same numbers.
  blocked = metrics.vector_retrieval_metrics(query_vectors, corpus_vectors, ir["query_ids"], ir["corpus_ids"],
                                             relevant, block_bytes=3 * 8 * len(ir["corpus_ids"]))
  for name, value in expected.items():
    assert abs(blocked[name] - value) <= 1e-9, (name, blocked[name], value)
  assert 0.0 < ours["recall@10"] < 1.0 and 0.0 < ours["ndcg@10"] < 1.0  # neither trivial end


@pytest.mark.parametrize("name", sorted(EDGE_CASES))
def test_retrieval_metrics_equal_the_evaluator_where_a_cut_off_passes_the_corpus_or_the_relevant(case, name):
  ir, query_vectors, corpus_vectors = EDGE_CASES[name]
  expected = json.loads(str(case[1][f"ir_{name}"]))
  ours = metrics.retrieval_metrics(metrics.cosine_scores(query_vectors, corpus_vectors), ir["query_ids"],
                                   ir["corpus_ids"], {q: set(v) for q, v in ir["relevant"].items()})
  assert set(expected) <= set(ours), set(expected) - set(ours)
  for metric, value in expected.items():
    assert abs(ours[metric] - value) <= 1e-9, (name, metric, ours[metric], value)
  if name == "small_corpus":  # 1 or 2 relevant of 4, whatever the order: precision@10 is 1 or 2 tenths
    assert ours["precision@10"] == pytest.approx(4 / 3 / 10)
  else:
    assert 0.0 < ours["map@100"] < 1.0


def test_the_order_of_the_corpus_does_not_change_the_metrics(case):
  *_, ir, query_vectors, corpus_vectors = case
  relevant = {q: set(v) for q, v in ir["relevant"].items()}
  order = np.random.default_rng(3).permutation(len(ir["corpus_ids"]))
  base = metrics.retrieval_metrics(metrics.cosine_scores(query_vectors, corpus_vectors), ir["query_ids"],
                                   ir["corpus_ids"], relevant)
  shuffled = metrics.retrieval_metrics(metrics.cosine_scores(query_vectors, corpus_vectors[order]), ir["query_ids"],
                                       [ir["corpus_ids"][i] for i in order], relevant)
  assert base == pytest.approx(shuffled, abs=1e-12)


def test_bad_inputs_are_named():
  with pytest.raises(ValueError, match=r"scores has shape \(2, 3\), not \(2 queries, 4 documents\)"):
    metrics.retrieval_metrics(np.zeros((2, 3)), ["a", "b"], ["w", "x", "y", "z"], {"a": {"x"}})
  with pytest.raises(ValueError, match="no query has a relevant document"):
    metrics.retrieval_metrics(np.zeros((1, 2)), ["a"], ["x", "y"], {"b": {"x"}})
  one = np.array([[0.9, 0.8, 0.1]])  # one query whose relevant document "d1" ranks first
  with pytest.raises(ValueError, match=r"corpus_ids name 1 document\(s\) more than once \(e.g. \['d1'\]\)"):
    metrics.retrieval_metrics(one, ["q"], ["d1", "d1", "d2"], {"q": {"d1"}})  # (else recall@10 2.0)
  with pytest.raises(ValueError, match=r"relevant\['q'\] is the string 'd1', not a collection"):
    metrics.retrieval_metrics(one, ["q"], ["d", "1", "d1"], {"q": "d1"})  # (else a substring match: recall 1.5)
  with pytest.raises(ValueError, match="none of the relevant documents is in the corpus"):
    metrics.retrieval_metrics(one, ["q"], [1, 2, 3], {"q": {"1"}})  # (ints against strings: else all 0)
  with pytest.raises(ValueError, match="the corpus is empty"):
    metrics.retrieval_metrics(np.zeros((1, 0)), ["q"], [], {"q": {"d1"}})
  with pytest.raises(ValueError, match="matryoshka dimension 32 is larger than the embedding"):
    losses.truncate(tf.zeros((2, 16)), 32)
  with pytest.raises(ValueError, match="2 matryoshka weights for 3 dimensions"):
    losses.matryoshka_loss(lambda a: a, [tf.ones((2, 16))], (16, 8, 4), (1.0, 1.0))


@pytest.mark.parametrize("top_k", [10, 200])
def test_semantic_search_equals_sentence_transformers(case, top_k):
  """`semantic_search` gives `util.semantic_search`'s hits on the same vectors: the same documents in the same order
  (random vectors: no ties), scores within float32's rounding (its cosines are float32, ours float64); past the
  corpus, every document. Blocks of one query give the same answer (up to a matrix product's last bits)."""
  _, oracle, _, query_vectors, corpus_vectors = case
  want = json.loads(str(oracle[f"search_{top_k}"]))
  got = search.semantic_search(query_vectors, corpus_vectors, top_k=top_k)
  assert [[h["corpus_id"] for h in hits] for hits in got] == [[h["corpus_id"] for h in hits] for hits in want]
  np.testing.assert_allclose([[h["score"] for h in hits] for hits in got],
                             [[h["score"] for h in hits] for hits in want], atol=1e-6)
  assert len(got[0]) == min(top_k, len(corpus_vectors))
  blocks = search.semantic_search(query_vectors, corpus_vectors, top_k=top_k, block_bytes=1)  # (a row a block)
  assert [[h["corpus_id"] for h in hits] for hits in blocks] == [[h["corpus_id"] for h in hits] for hits in got]
  np.testing.assert_allclose([[h["score"] for h in hits] for hits in blocks],
                             [[h["score"] for h in hits] for hits in got], atol=1e-12)  # (a product's last bits)
