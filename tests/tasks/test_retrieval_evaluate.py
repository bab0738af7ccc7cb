"""tasks.retrieval_evaluate: an embedder scored on a BEIR-format folder (tasks/embedding/beir.py reads it).

The folder is made of real text (the standard library's docstrings: a paragraph's first sentence is a query, the
paragraph its relevant document, the other paragraphs distractors), with what published sets hold: titles on some
documents, a grade-0 judgment, a judgment of a document the corpus lacks, a query that is also a document. The
binary's numbers must equal `retrieval_metrics` over the full cosine matrix of the texts embedded as BEIR embeds them,
whatever the order of the files' lines, and bad lines are errors naming file:line.
"""

import gzip
import importlib.util
import json
import logging
import random
import re
import subprocess
import sys

from absl import flags
import numpy as np
import pytest

from official_albert.retrieval import metrics
from official_albert.retrieval import run_files
from official_albert.serving.embedding import embed
from official_albert.serving.rerank import rerank
from tasks import retrieval_evaluate
from tasks.embedding import beir
from tasks.row_files import TextDataError
from tests.conftest import REPO_ROOT
from tests.tasks.test_text_embedding import stdlib_texts


def _paragraphs():
  """The first 30 long paragraphs of the standard library's docstrings (real prose that no edit here changes)."""
  found = []
  for text in stdlib_texts():
    for block in re.split(r"\n\s*\n", text):
      block = " ".join(block.split())
      if len(block) > 200 and not block.startswith(("#", "|", "`", "-", "<", ">>>")) and block not in found:
        found.append(block)
        if len(found) == 30:
          return found
  return found


def _write(folder, corpus_rows, query_rows, qrels_lines, split="test"):
  (folder / "qrels").mkdir(parents=True, exist_ok=True)
  (folder / "corpus.jsonl").write_text("".join(json.dumps(r) + "\n" for r in corpus_rows), encoding="utf-8")
  (folder / "queries.jsonl").write_text("".join(json.dumps(r) + "\n" for r in query_rows), encoding="utf-8")
  (folder / "qrels" / f"{split}.tsv").write_text("".join(line + "\n" for line in qrels_lines), encoding="utf-8")


def _case():
  paragraphs = _paragraphs()
  assert len(paragraphs) >= 15, len(paragraphs)
  corpus = [{"_id": f"d{i}", "title": f"Part {i}" if i % 3 == 0 else "", "text": p} for i, p in enumerate(paragraphs)]
  del corpus[4]["title"]  # (no title key at all: the text alone)
  # (10 words: under the tiny model's 64 tokens. 30 were cut at 64 exactly as d7 is: the two tied, and the tie's
  # order, hence recall@1, came from rounding — it differed between the two paths on an AMX Xeon.)
  corpus.append({"_id": "d7_start", "text": " ".join(paragraphs[7].split()[:10])})
  queries = [{"_id": f"q{i}", "text": p.split(". ")[0]} for i, p in enumerate(paragraphs[:10])]
  queries.append({"_id": "d7", "text": paragraphs[7]})  # a query that is itself a document (Quora-like sets)
  queries.append({"_id": "q_unjudged", "text": "not in the qrels"})
  qrels = ["query-id\tcorpus-id\tscore"] + [f"q{i}\td{i}\t1" for i in range(10)]
  qrels += ["q1\td2\t0", "q3\td_missing\t2", "d7\td7_start\t1", "q5\td6\t2"]
  return corpus, queries, qrels


def _reference(model_dir, corpus, queries, qrels_lines):
  """The metrics computed the plain way: BEIR's texts embedded in file order, the full cosine matrix."""
  docs = {r["_id"]: ((r["title"] + " " + r["text"]).strip() if "title" in r else r["text"].strip()) for r in corpus}
  qrels = {}
  for line in qrels_lines[1:]:
    q, d, g = line.split("\t")
    qrels.setdefault(q, {})[d] = int(g)
  query_ids = [r["_id"] for r in queries if any(g > 0 for g in qrels.get(r["_id"], {}).values())]
  q_text = {r["_id"]: r["text"] for r in queries}
  q_vectors = embed(model_dir, [q_text[q] for q in query_ids])
  c_vectors = embed(model_dir, list(docs.values()))
  ignore = {q: {q} for q in query_ids if q in docs and qrels[q].get(q, 0) <= 0}
  return metrics.retrieval_metrics(metrics.cosine_scores(q_vectors, c_vectors), query_ids, list(docs), qrels,
                                   ignore=ignore)


@pytest.fixture(scope="module")
def encoder_dir(tiny_model_dirs):
  return tiny_model_dirs["encoder"]


def test_metrics_equal_the_full_matrix_of_beirs_texts_in_any_line_order(tmp_path, encoder_dir, caplog):
  corpus, queries, qrels = _case()
  _write(tmp_path / "set", corpus, queries, qrels)
  got = retrieval_evaluate.evaluate(encoder_dir, str(tmp_path / "set"))
  want = _reference(encoder_dir, corpus, queries, qrels)
  assert got["queries"] == want["queries"] == 11 and got["corpus"] == len(corpus)
  for key in ("recall@1", "recall@10", "mrr@10", "ndcg@10", "map@100", "accuracy@3", "precision@5"):
    assert got[key] == pytest.approx(want[key], abs=1e-9), key
  assert 0.0 < got["ndcg@10"] < 1.0  # (neither a trivial ranking nor a broken one)
  # Shuffled lines, a document line repeated as a dump joined twice, the header kept first: the same numbers.
  rng = random.Random(3)
  shuffled_corpus = corpus + [corpus[5]]
  rng.shuffle(shuffled_corpus)
  shuffled_queries, body = list(queries), qrels[1:]
  rng.shuffle(shuffled_queries)
  rng.shuffle(body)
  _write(tmp_path / "shuffled", shuffled_corpus, shuffled_queries, [qrels[0]] + body)
  with caplog.at_level(logging.WARNING, logger=beir.__name__):
    again = retrieval_evaluate.evaluate(encoder_dir, str(tmp_path / "shuffled"))
  assert "1 lines repeat an id" in caplog.text and "1 judgments name documents" in caplog.text
  for key in ("recall@1", "recall@10", "mrr@10", "ndcg@10", "map@100"):
    assert again[key] == pytest.approx(got[key], abs=1e-6), key


def test_the_query_that_is_a_document_does_not_rank_itself_unless_asked(tmp_path, encoder_dir):
  corpus, queries, qrels = _case()
  _write(tmp_path / "set", corpus, queries, qrels)
  kept = retrieval_evaluate.evaluate(encoder_dir, str(tmp_path / "set"), ignore_identical_ids=False)
  left_out = retrieval_evaluate.evaluate(encoder_dir, str(tmp_path / "set"))
  # d7 as a query scores itself at cosine 1.0, first and not relevant, ahead of its relevant document (its start).
  assert kept["recall@1"] < left_out["recall@1"] and kept["mrr@10"] < left_out["mrr@10"]


def _reranked_reference(folder, encoder_dir, reranker, depth):
  """The retrieve-then-rerank metrics built plainly: the full cosine matrix, each query's head (its `depth` best
  documents, the query's own id left out, equal cosines ranked as the metrics rank them) reranked query by query,
  scores from the final ranks."""
  data = beir.read_beir(str(folder))
  query_ids = [q for q in data.queries if any(g > 0 for g in data.qrels.get(q, {}).values())]
  corpus_ids = list(data.corpus)
  cosines = metrics.cosine_scores(embed(encoder_dir, [data.queries[q] for q in query_ids]),
                                  embed(encoder_dir, [data.corpus[c] for c in corpus_ids]))
  ignore = {"d7": {"d7"}}
  scores, rankings = np.zeros_like(cosines), {}
  for i, q in enumerate(query_ids):
    relevant = [data.qrels.get(q, {}).get(c, 0) > 0 for c in corpus_ids]  # (equal cosines: relevant last)
    ranking = [j for j in np.lexsort((relevant, -cosines[i])) if corpus_ids[j] not in ignore.get(q, ())]
    head = ranking[:depth]
    order = rerank(reranker, data.queries[q], [data.corpus[corpus_ids[j]] for j in head])
    final = [head[o["index"]] for o in order] + ranking[depth:]
    for r, j in enumerate(final):
      scores[i, j] = -r
    rankings[q] = [corpus_ids[j] for j in ranking]
  return metrics.retrieval_metrics(scores, query_ids, corpus_ids, data.qrels, ignore=ignore), rankings


def test_a_reranker_reorders_each_querys_head_and_the_rest_stays_below(tmp_path, encoder_dir, tiny_model_dirs):
  """The binary's numbers equal `_reranked_reference`'s; the reranker is a one-output classifier (tiny `regression`
  head)."""
  corpus, queries, qrels = _case()
  _write(tmp_path / "set", corpus, queries, qrels)
  reranker, depth = tiny_model_dirs["regression"], 5
  got = retrieval_evaluate.evaluate(encoder_dir, str(tmp_path / "set"), rerank_model_dir=reranker,
                                    rerank_depth=depth)
  want, rankings = _reranked_reference(tmp_path / "set", encoder_dir, reranker, depth)
  plain = retrieval_evaluate.evaluate(encoder_dir, str(tmp_path / "set"))
  assert got["queries"] == want["queries"] == 11 and got["rerank_depth"] == depth
  for key in ("recall@1", "recall@3", "recall@10", "mrr@10", "ndcg@10", "map@100"):
    assert got[key] == pytest.approx(want[key], abs=1e-9), key
  assert any(got[k] != plain[k] for k in ("recall@1", "mrr@10", "ndcg@10"))  # (the reranker changed the order)
  assert got["recall@10"] == plain["recall@10"]  # (the head is the bi-encoder's top 5 either way)
  # The query that is a document: its own id takes no place in the head. Judged relevant to the fifth document
  # of its ranking, that document is reranked with the four above it (not left below a head of four).
  qrels = [line for line in qrels if not line.startswith("d7\t")] + [f"d7\t{rankings['d7'][depth - 1]}\t1"]
  _write(tmp_path / "fifth", corpus, queries, qrels)
  got = retrieval_evaluate.evaluate(encoder_dir, str(tmp_path / "fifth"), rerank_model_dir=reranker,
                                    rerank_depth=depth)
  want, _ = _reranked_reference(tmp_path / "fifth", encoder_dir, reranker, depth)
  for key in ("recall@1", "recall@3", "mrr@10", "ndcg@10", "map@100"):
    assert got[key] == pytest.approx(want[key], abs=1e-9), key
  with pytest.raises(ValueError, match="--rerank_depth=0"):
    retrieval_evaluate.evaluate(encoder_dir, str(tmp_path / "set"), rerank_model_dir=reranker, rerank_depth=0)


def test_the_run_file_is_the_ranking_scored(tmp_path, encoder_dir, tiny_model_dirs):
  """`--run_file` writes the ranking the metrics were computed on (reranked or not): read back and scored by
  `ranking_metrics` it gives the binary's numbers, each query's documents in the ranking's order, the query's own id
  left out; `--run_depth` keeps each query's first documents. A copy of q1's relevant document under another id ties
  with it exactly: the run must hold the tie in the metrics' order (relevant last), not the corpus's."""
  corpus, queries, qrels = _case()
  corpus.append(dict(next(row for row in corpus if row["_id"] == "d1"), _id="d1_copy"))
  _write(tmp_path / "set", corpus, queries, qrels)
  data = beir.read_beir(str(tmp_path / "set"))
  for rerank_model_dir in (None, tiny_model_dirs["regression"]):
    run_file = str(tmp_path / "run.trec.gz")
    got = retrieval_evaluate.evaluate(encoder_dir, str(tmp_path / "set"), rerank_model_dir=rerank_model_dir,
                                      rerank_depth=5, run_file=run_file, run_depth=len(corpus))
    run = run_files.read_run(run_file)
    assert list(run) == data.scored_query_ids() and got["run_depth"] == len(corpus)
    assert "d7" not in [d for d, _ in run["d7"]] and len(run["q0"]) == len(corpus)
    again = metrics.ranking_metrics({q: [d for d, _ in ranking] for q, ranking in run.items()}, data.qrels)
    for key in ("recall@1", "recall@3", "recall@10", "mrr@10", "ndcg@10", "map@100", "queries"):
      assert again[key] == pytest.approx(got[key], abs=1e-12), (rerank_model_dir, key)
    short = str(tmp_path / "short.trec")
    retrieval_evaluate.evaluate(encoder_dir, str(tmp_path / "set"), rerank_model_dir=rerank_model_dir,
                                rerank_depth=5, run_file=short, run_depth=3)
    assert run_files.read_run(short) == {q: ranking[:3] for q, ranking in run.items()}
  with pytest.raises(ValueError, match="--run_depth=0"):
    retrieval_evaluate.evaluate(encoder_dir, str(tmp_path / "set"), run_file=short, run_depth=0)



def test_a_run_as_the_first_stage_scores_as_the_ranking_it_holds(tmp_path, encoder_dir, tiny_model_dirs):
  """`first_stage="run"`: the embedder's own run (every document) scores the embedder's numbers, reranked too; a run
  cut to 3 documents retrieves nothing below them."""
  corpus, queries, qrels = _case()
  _write(tmp_path / "set", corpus, queries, qrels)
  folder, run_file, reranker = str(tmp_path / "set"), str(tmp_path / "run.trec"), tiny_model_dirs["regression"]
  plain = retrieval_evaluate.evaluate(encoder_dir, folder, run_file=run_file, run_depth=len(corpus))
  again = retrieval_evaluate.evaluate(None, folder, first_stage="run", candidates=run_file)
  reranked = retrieval_evaluate.evaluate(encoder_dir, folder, rerank_model_dir=reranker, rerank_depth=5)
  reranked_run = retrieval_evaluate.evaluate(None, folder, first_stage="run", candidates=run_file,
                                             rerank_model_dir=reranker, rerank_depth=5,
                                             run_file=str(tmp_path / "out.trec"))
  for key in ("recall@1", "recall@10", "mrr@10", "ndcg@10", "map@100", "queries"):
    assert again[key] == pytest.approx(plain[key], abs=1e-12), key
    assert reranked_run[key] == pytest.approx(reranked[key], abs=1e-12), key
  assert again["first_stage"] == "run" and again["candidates"] == run_file
  out = run_files.read_run(str(tmp_path / "out.trec"))
  assert metrics.ranking_metrics({q: [d for d, _ in r] for q, r in out.items()},
                                 beir.read_beir(folder).qrels)["ndcg@10"] == pytest.approx(reranked_run["ndcg@10"])
  cut = str(tmp_path / "cut.trec")
  retrieval_evaluate.evaluate(encoder_dir, folder, run_file=cut, run_depth=3)
  short = retrieval_evaluate.evaluate(None, folder, first_stage="run", candidates=cut)
  assert short["recall@10"] == pytest.approx(plain["recall@3"], abs=1e-12)
  assert short["recall@10"] < plain["recall@10"]
  # Two runs fused (RRF): the fused lists' numbers, the query's own id left out as from any run.
  if importlib.util.find_spec("bm25s"):
    retrieval_evaluate.evaluate(None, folder, first_stage="bm25", run_file=str(tmp_path / "bm25.trec"))
    hybrid = retrieval_evaluate.evaluate(None, folder, first_stage="run",
                                         candidates=f"{tmp_path / 'bm25.trec'},{run_file}")
    fused = run_files.fuse([run_files.read_run(str(tmp_path / "bm25.trec")), run_files.read_run(run_file)])
    want = metrics.ranking_metrics({q: [d for d, _ in r if d != q] for q, r in fused.items()},
                                   beir.read_beir(folder).qrels)
    for key in ("recall@1", "recall@10", "mrr@10", "ndcg@10", "map@100"):
      assert hybrid[key] == pytest.approx(want[key], abs=1e-12), key
  with pytest.raises(ValueError, match="--candidates .* given with --first_stage=run and only then"):
    retrieval_evaluate.evaluate(None, folder, first_stage="run")
  with pytest.raises(ValueError, match="leave out --model_dir"):
    retrieval_evaluate.evaluate(encoder_dir, folder, first_stage="run", candidates=run_file)


def test_bm25_as_the_first_stage_ranks_as_its_score_matrix(tmp_path, tiny_model_dirs):
  """`first_stage="bm25"`: the numbers of `retrieval_metrics` over bm25s' own scores of every (query, document), the
  query that is a document left out; reranked and written as a run, read back to the same numbers."""
  bm25s = pytest.importorskip("bm25s")
  corpus, queries, qrels = _case()
  queries.append({"_id": "q_stop_words", "text": "It is not to be, or it is."})
  qrels.append("q_stop_words\td0\t1")
  _write(tmp_path / "set", corpus, queries, qrels)
  got = retrieval_evaluate.evaluate(None, str(tmp_path / "set"), first_stage="bm25")
  data = beir.read_beir(str(tmp_path / "set"))
  query_ids, corpus_ids = data.scored_query_ids(), list(data.corpus)
  retriever = bm25s.BM25()
  retriever.index(bm25s.tokenize([data.corpus[c] for c in corpus_ids], stopwords="en", show_progress=False),
                  show_progress=False)
  tokens = bm25s.tokenize([data.queries[q] for q in query_ids], stopwords="en", return_ids=False,
                          show_progress=False)
  assert [] in tokens  # (a query of stop words and one-letter words alone: it scores every document 0)
  scores = np.stack([retriever.get_scores(t) if t else np.zeros(len(corpus_ids)) for t in tokens])
  want = metrics.retrieval_metrics(scores, query_ids, corpus_ids, data.qrels, ignore={"d7": {"d7"}})
  for key in ("recall@1", "recall@10", "mrr@10", "ndcg@10", "map@100", "queries"):
    assert got[key] == pytest.approx(want[key], abs=1e-12), key
  assert got["first_stage"] == "bm25" and "model_dir" not in got and "dim" not in got
  assert got["recall@10"] >= 0.5  # (most queries are their paragraph's first sentence: the words are there)
  run_file = str(tmp_path / "bm25.trec")
  reranked = retrieval_evaluate.evaluate(None, str(tmp_path / "set"), first_stage="bm25", run_file=run_file,
                                         rerank_model_dir=tiny_model_dirs["regression"], rerank_depth=5,
                                         run_depth=len(corpus))
  run = run_files.read_run(run_file)
  again = metrics.ranking_metrics({q: [d for d, _ in ranking] for q, ranking in run.items()}, data.qrels)
  for key in ("recall@1", "recall@10", "mrr@10", "ndcg@10", "map@100"):
    assert again[key] == pytest.approx(reranked[key], abs=1e-12), key
  assert any(reranked[k] != got[k] for k in ("recall@1", "mrr@10", "ndcg@10"))  # (the reranker reordered)
  assert reranked["recall@10"] == got["recall@10"]  # (the head is BM25's top 5 either way)
  with pytest.raises(ValueError, match="leave out --model_dir"):
    retrieval_evaluate.evaluate("some_dir", str(tmp_path / "set"), first_stage="bm25")
  with pytest.raises(ValueError, match="--model_dir is required"):
    retrieval_evaluate.evaluate(None, str(tmp_path / "set"))


def test_the_beir_convention_scores_as_pytrec_eval_on_the_run_it_ranks(tmp_path, encoder_dir):
  """`metric_convention="beir"`: nDCG@10 and MAP@100 of graded qrels as BEIR's pytrec_eval computes them on the
  ranking the evaluation wrote (and as the run first stage scores that run), apart from the default's binary gains;
  the output names the convention."""
  corpus, queries, qrels = _case()
  qrels += ["q2\td5\t2", "q4\td9\t3", "q4\td8\t1"]  # (graded, several relevant per query)
  _write(tmp_path / "set", corpus, queries, qrels)
  folder, run_file = str(tmp_path / "set"), str(tmp_path / "run.trec")
  graded = retrieval_evaluate.evaluate(encoder_dir, folder, run_file=run_file, run_depth=len(corpus),
                                       metric_convention="beir")
  default = retrieval_evaluate.evaluate(encoder_dir, folder)
  again = retrieval_evaluate.evaluate(None, folder, first_stage="run", candidates=run_file, metric_convention="beir")
  assert (graded["metric_convention"], default["metric_convention"]) == ("beir", "sentence_transformers")
  assert graded["ndcg@10"] != pytest.approx(default["ndcg@10"], abs=1e-6)
  for key in ("recall@10", "mrr@10", "ndcg@10", "map@100", "queries"):
    assert again[key] == pytest.approx(graded[key], abs=1e-12), key
  with pytest.raises(ValueError, match="convention='trec'"):
    retrieval_evaluate.evaluate(encoder_dir, folder, metric_convention="trec")
  pytrec_eval = pytest.importorskip("pytrec_eval")
  run = {q: {d: s for d, s in ranking} for q, ranking in _tie_free(run_files.read_run(run_file)).items()}
  judged = beir.read_beir(folder).qrels
  per_query = pytrec_eval.RelevanceEvaluator({q: judged[q] for q in run}, {"ndcg_cut.10", "map_cut.100"}).evaluate(run)
  assert len(per_query) == graded["queries"]
  assert graded["ndcg@10"] == pytest.approx(np.mean([v["ndcg_cut_10"] for v in per_query.values()]), abs=1e-12)
  assert graded["map@100"] == pytest.approx(np.mean([v["map_cut_100"] for v in per_query.values()]), abs=1e-12)


def _tie_free(run):
  """The run's lists, checked to hold no two equal scores (where tie order is the only difference allowed)."""
  for q, ranking in run.items():
    scores = [s for _, s in ranking]
    assert len(set(scores)) == len(scores), q
  return run


def test_rank_only_ranks_every_query_as_the_judged_split_ranks_it(tmp_path, encoder_dir, tiny_model_dirs):
  """`rank_only` on a folder without qrels: every query of queries.jsonl ranked, in its order, and each judged
  query's run line for line the judged split's (documents, scores within 1e-9), for the embedder, the embedder
  reranked, BM25 (its zero-score ties aside: judged, they put relevant documents last) and a run reranked."""
  corpus, queries, qrels = _case()
  _write(tmp_path / "set", corpus, queries, qrels)
  hidden = tmp_path / "hidden"  # (the same texts, no judgments: a leaderboard's hidden split)
  hidden.mkdir()
  for name in ("corpus.jsonl", "queries.jsonl"):
    (hidden / name).write_text((tmp_path / "set" / name).read_text(encoding="utf-8"), encoding="utf-8")
  folder, n, reranker = str(tmp_path / "set"), len(corpus), tiny_model_dirs["regression"]
  every_id = [r["_id"] for r in queries]

  def both(name, model_dir, **options):
    judged_file, every_file = str(tmp_path / f"{name}.trec"), str(tmp_path / f"{name}_all.trec")
    retrieval_evaluate.evaluate(model_dir, folder, run_file=judged_file, run_depth=n, **options)
    got = retrieval_evaluate.evaluate(model_dir, str(hidden), run_file=every_file, run_depth=n, rank_only=True,
                                      **options)
    assert got["rank_only"] and got["queries"] == len(every_id) and got["corpus"] == n
    assert "split" not in got and "ndcg@10" not in got
    judged, every = run_files.read_run(judged_file), run_files.read_run(every_file)
    assert list(every) == every_id and "d7" not in [d for d, _ in every["d7"]]
    return judged, every, every_file

  def assert_same(judged, every, name):
    for q, ranking in judged.items():
      assert [d for d, _ in every[q]] == [d for d, _ in ranking], (name, q)
      np.testing.assert_allclose([s for _, s in every[q]], [s for _, s in ranking], atol=1e-9, err_msg=name)

  judged, every, embedder_run = both("dense", encoder_dir)
  assert_same(_tie_free(judged), every, "dense")
  judged, every, _ = both("reranked", encoder_dir, rerank_model_dir=reranker, rerank_depth=5)
  assert_same(_tie_free(judged), every, "reranked")
  # The embedder's run of every query as the first stage, reranked: the judged queries' lines as on the judged split.
  judged, every, _ = both("run", None, first_stage="run", candidates=embedder_run, rerank_model_dir=reranker,
                          rerank_depth=5)
  assert_same(judged, every, "run")
  if importlib.util.find_spec("bm25s"):
    judged, every, _ = both("bm25", None, first_stage="bm25")
    for q, ranking in judged.items():  # (the same scores in the same order; equal scores as a set)
      assert [s for _, s in every[q]] == [s for _, s in ranking], q
      by_score = lambda r: sorted((-s, d) for d, s in r)  # noqa: E731
      assert by_score(every[q]) == by_score(ranking), q
  with pytest.raises(ValueError, match="give --run_file"):
    retrieval_evaluate.evaluate(encoder_dir, str(hidden), rank_only=True)
  with pytest.raises(ValueError, match="rank at one width with --dim"):
    retrieval_evaluate.evaluate(encoder_dir, str(hidden), rank_only=True, run_file="x.trec", dims=(16,))
  with pytest.raises(FileNotFoundError, match="qrels/test.tsv does not exist.* pass --rank_only"):
    retrieval_evaluate.evaluate(encoder_dir, str(hidden))
  fv = flags.FlagValues()
  retrieval_evaluate.define_flags(fv)
  fv(["prog", f"--data_dir={hidden}", "--rank_only", "--split=dev", "--run_file=x.trec"])
  with pytest.raises(ValueError, match="--rank_only with --split=dev"):
    retrieval_evaluate.main([], fv)


def test_dims_score_each_width_as_a_run_at_that_width(tmp_path, encoder_dir, tiny_model_dirs, monkeypatch):
  corpus, queries, qrels = _case()
  _write(tmp_path / "set", corpus, queries, qrels)
  got = retrieval_evaluate.evaluate(encoder_dir, str(tmp_path / "set"), dims=(16, 8), force_dim=True)
  assert sorted(got["by_dim"]) == ["16", "8"] and got["dim"] == 32
  for k in (16, 8):
    alone = retrieval_evaluate.evaluate(encoder_dir, str(tmp_path / "set"), dim=k, force_dim=True)
    assert alone["dim"] == k
    for key in ("recall@1", "recall@10", "mrr@10", "ndcg@10", "map@100"):
      assert got["by_dim"][str(k)][key] == pytest.approx(alone[key], abs=1e-9), (k, key)
  assert got["by_dim"]["8"] != got["by_dim"]["16"]
  # Reranked: each width's head reordered by the reranker, loaded once for every width.
  loads, loaded = [], retrieval_evaluate._loaded_reranker
  monkeypatch.setattr(retrieval_evaluate, "_loaded_reranker", lambda *a: loads.append(a) or loaded(*a))
  reranked = dict(rerank_model_dir=tiny_model_dirs["regression"], rerank_depth=3, force_dim=True)
  got = retrieval_evaluate.evaluate(encoder_dir, str(tmp_path / "set"), dims=(16, 8), **reranked)
  assert len(loads) == 1
  alone = retrieval_evaluate.evaluate(encoder_dir, str(tmp_path / "set"), dim=8, **reranked)
  for key in ("recall@1", "mrr@10", "ndcg@10", "map@100"):
    assert got["by_dim"]["8"][key] == pytest.approx(alone[key], abs=1e-9), key
  # A width the directory was not trained at is refused unless forced, as embed(dim=K) refuses it.
  with pytest.raises(ValueError, match="--dims: .* not at dim=8"):
    retrieval_evaluate.evaluate(encoder_dir, str(tmp_path / "set"), dims=(8,))


def test_the_binary_prints_and_writes_the_same_json(tmp_path, encoder_dir):
  corpus, queries, qrels = _case()
  _write(tmp_path / "set", corpus, queries, qrels, split="dev")
  out = tmp_path / "results.json"
  done = subprocess.run([sys.executable, "-m", "tasks.retrieval_evaluate", f"--model_dir={encoder_dir}",
                         f"--data_dir={tmp_path / 'set'}", "--split=dev", f"--output_file={out}"], cwd=REPO_ROOT,
                        capture_output=True, text=True, timeout=600)
  assert done.returncode == 0, done.stderr[-3000:]
  printed = json.loads(done.stdout.strip().splitlines()[-1])
  assert printed == json.loads(out.read_text()) and printed["split"] == "dev"
  want = retrieval_evaluate.evaluate(encoder_dir, str(tmp_path / "set"), split="dev")
  assert printed["ndcg@10"] == pytest.approx(want["ndcg@10"], abs=1e-9)
  # A split the folder lacks: one error line naming the splits it has.
  done = subprocess.run([sys.executable, "-m", "tasks.retrieval_evaluate", f"--model_dir={encoder_dir}",
                         f"--data_dir={tmp_path / 'set'}"], cwd=REPO_ROOT, capture_output=True, text=True, timeout=600)
  assert done.returncode == 1 and "qrels/test.tsv does not exist" in done.stderr and "['dev']" in done.stderr


@pytest.mark.parametrize("file,edit,message", [
    ("corpus.jsonl", lambda lines: lines[:2] + ["{not json"] + lines[2:], "corpus.jsonl:3: not JSON"),
    ("corpus.jsonl", lambda lines: lines + ['{"_id": "d0", "text": "another text"}'],
     "id 'd0' again, with another text than on line 1"),
    ("corpus.jsonl", lambda lines: lines + ['{"_id": "", "text": "x"}'], "\"_id\" must be a non-empty string"),
    ("queries.jsonl", lambda lines: lines + ['["q", "text"]'], "queries.jsonl:13: a JSON list"),
    ("queries.jsonl", lambda lines: lines + ['{"_id": "q9", "text": "cut \\ud83d"}'],
     "queries.jsonl:13: key 'text' holds a lone UTF-16 surrogate"),
    ("qrels/test.tsv", lambda lines: lines[:3] + ["q2\td2\tyes"] + lines[3:], "test.tsv:4: score 'yes'"),
    ("qrels/test.tsv", lambda lines: lines + ["q_nowhere\td1\t1"], "query 'q_nowhere' is not in queries.jsonl"),
    ("qrels/test.tsv", lambda lines: lines + ["q0\td0\t2"], "graded 2 here and 1 on line 2"),
    ("qrels/test.tsv", lambda lines: lines + ["q0 d0 1"], "1 tab-separated field(s)"),
    ("qrels/test.tsv", lambda lines: lines + ["q0 Q0 d0 1"], "reads as TREC's `query Q0 document grade`"),
])
def test_bad_lines_are_errors_naming_file_and_line(tmp_path, file, edit, message):
  corpus, queries, qrels = _case()
  _write(tmp_path, corpus, queries, qrels)
  path = tmp_path / file
  path.write_text("\n".join(edit(path.read_text(encoding="utf-8").splitlines())) + "\n", encoding="utf-8")
  with pytest.raises(TextDataError, match=re.escape(message)):
    beir.read_beir(str(tmp_path))


def test_a_qrels_file_without_header_keeps_its_first_judgment_and_ids_may_be_numbers(tmp_path):
  corpus = [{"_id": 1, "text": " one "}, {"_id": "2", "title": "T", "text": "two"}]
  _write(tmp_path, corpus, [{"_id": "q", "text": "which"}], ["q\t1\t1", "q\t2\t0"])
  data = beir.read_beir(str(tmp_path))
  assert data.qrels == {"q": {"1": 1, "2": 0}} and data.corpus == {"1": "one", "2": "T two"}
  assert np.isfinite(len(data.queries))


def test_documents_of_one_text_under_two_ids_are_said(tmp_path, caplog):
  """(They tie exactly; ties rank the relevant last, where pytrec_eval breaks them by id: a silent gap.)"""
  corpus = [{"_id": "a", "text": "same"}, {"_id": "b", "text": "same"}, {"_id": "c", "text": "other"}]
  _write(tmp_path, corpus, [{"_id": "q", "text": "which"}], ["q\tb\t1"])
  with caplog.at_level(logging.WARNING):
    beir.read_beir(str(tmp_path))
  assert "1 documents have the text of another id" in caplog.text


def test_a_folder_of_gzip_files_reads_as_the_plain_one(tmp_path):
  """Large sets are published as corpus.jsonl.gz (and queries, qrels): each is read as it decompresses, where the
  plain file is absent; a split given only compressed is listed among the splits."""
  corpus, queries, qrels = _case()
  _write(tmp_path / "plain", corpus, queries, qrels, split="dev")
  _write(tmp_path / "packed", corpus, queries, qrels, split="dev")
  for name in ("corpus.jsonl", "queries.jsonl", "qrels/dev.tsv"):
    path = tmp_path / "packed" / name
    path.with_name(path.name + ".gz").write_bytes(gzip.compress(path.read_bytes()))
    path.unlink()
  plain, packed = beir.read_beir(str(tmp_path / "plain"), "dev"), beir.read_beir(str(tmp_path / "packed"), "dev")
  assert (packed.corpus, packed.queries, packed.qrels) == (plain.corpus, plain.queries, plain.qrels)
  assert packed.files()[0].endswith("corpus.jsonl.gz")
  with pytest.raises(FileNotFoundError, match=re.escape("qrels/test.tsv does not exist") + r".*\['dev'\]"):
    beir.read_beir(str(tmp_path / "packed"), "test")
