"""`pipelines.search` and `semantic_search`: texts searched as their `embed` vectors are, equal scores in corpus order,
and the refusals. sentence-transformers' `util.semantic_search` is the oracle (test_sentence_transformers_parity.py)."""

import numpy as np
import pytest

from official_albert import pipelines
from official_albert.retrieval import metrics
from official_albert.retrieval.search import semantic_search
from official_albert.serving.embedding import embed_queries_and_corpus

QUERIES = ["How do I resume training?", "Where are the checkpoints written?"]
CORPUS = ["Checkpoints are written every N steps.", "The corpus is split into shards.", "Resume from the last save.",
          "Sentence vectors are pooled."]


def test_search_ranks_the_corpus_by_the_cosine_of_embeds_vectors(tiny_model_dirs):
  """The hits are the full cosine matrix's best columns over the vectors of `embed_queries_and_corpus` (both sides in
  one call, longest first: `embed`'s vectors, in the order given); one query as a string and a top_k past the corpus
  give every document; a width as `embed(dim=K)`."""
  model_dir = tiny_model_dirs["encoder"]
  got = pipelines.search(model_dir, QUERIES, CORPUS, top_k=3)
  queries, corpus = embed_queries_and_corpus(model_dir, QUERIES, CORPUS)
  np.testing.assert_allclose(queries, pipelines.embed(model_dir, QUERIES), atol=1e-6)
  np.testing.assert_allclose(corpus, pipelines.embed(model_dir, CORPUS), atol=1e-6)
  assert embed_queries_and_corpus(model_dir, "one query", CORPUS[:1])[0].shape[0] == 1
  with pytest.raises(ValueError, match=r"queries\[0\] is a NoneType"):  # (its own index, not the joined list's)
    pipelines.search(model_dir, [None], CORPUS)
  with pytest.raises(ValueError, match=r"corpus\[1\] is a int"):
    pipelines.search(model_dir, QUERIES, ["a", 3])
  cosines = metrics.cosine_scores(queries, corpus)
  for row, hits in zip(cosines, got):
    order = np.argsort(-row, kind="stable")[:3]
    assert [h["corpus_id"] for h in hits] == order.tolist()
    np.testing.assert_allclose([h["score"] for h in hits], row[order], atol=1e-9)
  everything = pipelines.search(model_dir, QUERIES[0], CORPUS, top_k=10)
  assert len(everything) == 1 and sorted(h["corpus_id"] for h in everything[0]) == [0, 1, 2, 3]
  assert [h["corpus_id"] for h in pipelines.search(model_dir, QUERIES, CORPUS[2])[1]] == [0]  # (one document)
  narrow = pipelines.search(model_dir, QUERIES, CORPUS, top_k=2, dim=8, force=True)
  want = semantic_search(pipelines.embed(model_dir, QUERIES, dim=8, force=True),
                         pipelines.embed(model_dir, CORPUS, dim=8, force=True), top_k=2)
  assert [[h["corpus_id"] for h in hits] for hits in narrow] == [[h["corpus_id"] for h in hits] for hits in want]


def test_retrieve_and_rerank_is_rerank_over_the_first_stage_with_corpus_ids(tiny_model_dirs, monkeypatch):
  """search(rerank_model_dir=R): each query's best rerank_depth documents by cosine, in `pipelines.rerank(R, query,
  those documents, top_k)`'s order and scores, its indices taken back to corpus ids, each hit's cosine kept; the
  reranker loaded once for every query."""
  from official_albert.serving import embedding
  encoder, reranker = tiny_model_dirs["encoder"], tiny_model_dirs["regression"]
  corpus = CORPUS + ["Shards are read in parallel.", "Training resumes from the newest checkpoint."]
  loads, loaded = [], embedding.loaded_reranker
  monkeypatch.setattr(embedding, "loaded_reranker", lambda *a: loads.append(a) or loaded(*a))
  got = pipelines.search(encoder, QUERIES, corpus, top_k=2, rerank_model_dir=reranker, rerank_depth=4)
  assert len(loads) == 1
  first = pipelines.search(encoder, QUERIES, corpus, top_k=4)
  for query, hits, head in zip(QUERIES, got, first):
    want = pipelines.rerank(reranker, query, [corpus[h["corpus_id"]] for h in head], top_k=2)
    assert [h["corpus_id"] for h in hits] == [head[w["index"]]["corpus_id"] for w in want]
    np.testing.assert_allclose([h["score"] for h in hits], [w["score"] for w in want], atol=1e-6)
    np.testing.assert_allclose([h["cosine"] for h in hits], [head[w["index"]]["score"] for w in want], atol=1e-6)
  # The reranker changed some query's order (else this test would not tell a rerank from none).
  assert any([h["corpus_id"] for h in hits] != [h["corpus_id"] for h in head[:2]] for hits, head in zip(got, first))
  with pytest.raises(ValueError, match="rerank_depth=1 must be a whole number >= top_k=2"):
    pipelines.search(encoder, QUERIES, corpus, top_k=2, rerank_model_dir=reranker, rerank_depth=1)


def test_equal_scores_keep_the_corpus_order_in_every_block():
  corpus = np.array([[0.0, 1.0], [1.0, 0.0], [2.0, 0.0], [0.0, 3.0]])  # (1 and 2, 0 and 3: equal cosines)
  queries = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
  want = [[1, 2, 0, 3], [0, 3, 1, 2], [0, 1, 2, 3]]
  for block_bytes in (1, 1 << 20):
    assert [[h["corpus_id"] for h in hits] for hits in semantic_search(queries, corpus, 4, block_bytes)] == want


@pytest.mark.parametrize("queries,corpus,top_k,words", [
    (np.ones((2, 4)), np.ones((3, 5)), 1, "same width"),
    (np.ones((2, 4)), np.ones((0, 4)), 1, "non-empty"),
    (np.ones((2, 4)), np.ones((3, 4)), 0, "top_k=0"),
    (np.ones((2, 4)), np.array([[1.0, 0, 0, 0], [np.nan, 0, 0, 0]]), 1, "corpus embedding 1 holds NaN"),
])
def test_semantic_search_refuses_what_has_no_order(queries, corpus, top_k, words):
  with pytest.raises(ValueError, match=words):
    semantic_search(queries, corpus, top_k)
