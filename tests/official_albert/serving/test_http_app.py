"""The HTTP app in process (FastAPI's TestClient) with a stand-in model: readiness, the drain's refusals, the body
limit, the error shape of routes that do not exist. The real server process is tests/.../test_server.py."""

import concurrent.futures
import json
import threading
import warnings

import numpy as np
import pytest

pytest.importorskip("fastapi")
pytest.importorskip("prometheus_client")
pytest.importorskip("httpx")

with warnings.catch_warnings():  # Starlette 1.10 prefers httpx2 for its test client; httpx (the extra's) works
  warnings.simplefilter("ignore")
  from fastapi import testclient  # noqa: E402

from official_albert.serving import http_app  # noqa: E402


class StandIn:
  """A 2-label classifier that answers every text with label "b" (probabilities 0.25 / 0.75)."""

  name, head, backend, labels, has_exits, takes_pairs = "m", "classifier", "stand_in", ["a", "b"], False, True

  def predict(self, texts, pairs=None):
    return {"label": np.asarray(["b"] * len(texts), object), "label_id": np.ones(len(texts), np.int64),
            "probabilities": np.tile(np.asarray([[0.25, 0.75]], np.float32), (len(texts), 1))}

  def token_count(self, text, pair=None):
    return len(text.split()) + 2

  def outputs_metadata(self):
    return [{"name": "label", "datatype": "BYTES", "shape": [-1]}]


def _infer_body(texts):
  return {"inputs": [{"name": "text", "datatype": "BYTES", "shape": [len(texts)], "data": texts}]}


def test_ready_answers_and_the_drain_refuses_new_requests():
  state = http_app.ServerState()
  app = http_app.create_app({"m": StandIn()}, http_app.Settings(max_batch_size=4, max_text_chars=10), state)
  with testclient.TestClient(app) as client:
    assert client.get("/v2/health/ready").status_code == 200
    answer = client.post("/v2/models/m/infer", json=_infer_body(["x", "y"]))
    assert answer.status_code == 200 and answer.json()["outputs"][0]["data"] == ["b", "b"]
    assert client.post("/rerank", json={"query": "q", "texts": ["a", "b"]}).json() == [
        {"index": 0, "score": 0.75}, {"index": 1, "score": 0.75}]
    # A body larger than the limits allow is refused before it is read (4 x 2 texts of 10 characters here).
    big = client.post("/v2/models/m/infer", content=b"x" * 200_000, headers={"Content-Type": "application/json"})
    assert big.status_code == 413 and "split the request" in big.json()["error"]
    missing = client.get("/v3/nothing")
    assert missing.status_code == 404 and "Not Found" in missing.json()["error"]
    wrong_method = client.get("/v2/models/m/infer")
    assert wrong_method.status_code == 405 and "error" in wrong_method.json()
    state.draining = True
    assert client.get("/v2/health/ready").status_code == 503
    assert client.get("/v2/health/live").status_code == 200
    refused = client.post("/v2/models/m/infer", json=_infer_body(["x"]))
    assert refused.status_code == 503 and refused.headers["retry-after"] == "1"
    assert refused.headers["connection"] == "close"  # (a pooled client's retry came back to this replica)
    assert "shutting down" in refused.json()["error"]
    metrics = client.get("/metrics").text
    assert 'albert_requests_total{route="draining",status="503"} 1.0' in metrics
    assert 'albert_requests_total{route="/v2/models/{name}/infer",status="200"} 1.0' in metrics
    assert "albert_batch_size_bucket" in metrics and "albert_queue_depth" in metrics


def test_a_body_without_content_length_is_refused_once_it_passes_the_limit():
  """A chunked body (no Content-Length) is read as it streams in and refused 413 past the limit, as a body whose
  Content-Length says so is; one within the limit is answered."""
  app = http_app.create_app({"m": StandIn()}, http_app.Settings(max_batch_size=4, max_text_chars=10),
                            http_app.ServerState())

  def chunks(n):
    yield b'{"inputs": [{"name": "text", "datatype": "BYTES", "shape": [1], "data": ["x"]}]'
    for _ in range(n):
      yield b" " * 50_000
    yield b"}"

  with testclient.TestClient(app) as client:
    big = client.post("/v2/models/m/infer", content=chunks(10), headers={"Content-Type": "application/json"})
    assert big.status_code == 413 and "split the request" in big.json()["error"], big.text
    small = client.post("/v2/models/m/infer", content=chunks(1), headers={"Content-Type": "application/json"})
    assert small.status_code == 200, small.text


def test_raw_scores_of_a_label_classifier_are_refused():
  """/rerank's raw_scores is a reranker's logits (TEI's option); a label classifier ranks by a probability and has no
  single raw score: refused 400 rather than answered with probabilities. A string for a boolean is refused too."""
  app = http_app.create_app({"m": StandIn()}, http_app.Settings(max_batch_size=4), http_app.ServerState())
  with testclient.TestClient(app) as client:
    refused = client.post("/rerank", json={"query": "q", "texts": ["a"], "raw_scores": True})
    assert refused.status_code == 400 and refused.json()["error"].startswith("raw_scores:"), refused.text
    refused = client.post("/rerank", json={"query": "q", "texts": ["a"], "raw_scores": "false"})
    assert refused.status_code == 400 and "JSON boolean" in refused.json()["error"], refused.text
    assert client.post("/rerank", json={"query": "q", "texts": ["a"], "raw_scores": False}).status_code == 200
    unknown = client.post("/v1/models/m:predict", json={"signature_name": "nope", "instances": ["a"]})
    assert unknown.status_code == 400 and "['serving_default']" in unknown.json()["error"], unknown.text
    known = client.post("/v1/models/m:predict", json={"signature_name": "serving_default", "instances": ["a"]})
    assert known.status_code == 200, known.text


class StandInReranker(StandIn):
  """A reranker whose logit is fixed per text: 17 and 20 both give a float32 sigmoid of 1.0 (it saturates)."""

  name, head, labels = "r", "reranker", None
  LOGITS = {"a": 17.0, "b": 20.0, "c": -3.0}

  def predict(self, texts, pairs=None):
    logits = np.asarray([self.LOGITS[p] for p in pairs], np.float32)
    return {"logit": logits, "score": (1 / (1 + np.exp(-logits))).astype(np.float32)}


def test_a_reranker_orders_by_the_logit_where_its_scores_saturate():
  """Mutation audit 24 F3: ordered by the float32 sigmoid, logits 17 and 20 tie at score 1.0 and keep the request's
  order; /rerank orders by the logit, as pipelines.rerank does (docs/serving.md), so 20 comes first."""
  from official_albert.serving import rerank
  app = http_app.create_app({"r": StandInReranker()}, http_app.Settings(max_batch_size=4), http_app.ServerState())
  with testclient.TestClient(app) as client:
    answer = client.post("/rerank", json={"query": "q", "texts": ["a", "b", "c"]})
    assert answer.status_code == 200, answer.text
    logits = np.asarray(list(StandInReranker.LOGITS.values()), np.float32)
    assert [r["index"] for r in answer.json()] == [r["index"] for r in rerank.postprocess(logits)] == [1, 0, 2]
    assert [r["score"] for r in answer.json()][:2] == [1.0, 1.0]
    raw = client.post("/rerank", json={"query": "q", "texts": ["a", "b", "c"], "raw_scores": True}).json()
    assert raw == [{"index": 1, "score": 20.0}, {"index": 0, "score": 17.0}, {"index": 2, "score": -3.0}]
    # Cohere's shape orders by the logit too, cut at top_n, with the documents asked for (objects or strings).
    for route in ("/v1/rerank", "/v2/rerank"):
      cohere = client.post(route, json={"model": "r", "query": "q", "documents": ["a", {"text": "b"}, "c"],
                                        "top_n": 2, "return_documents": True})
      assert cohere.status_code == 200, cohere.text
      body = cohere.json()
      assert body["results"] == [{"index": 1, "relevance_score": 1.0, "document": {"text": "b"}},
                                 {"index": 0, "relevance_score": 1.0, "document": {"text": "a"}}]
      assert body["model"] == "r" and body["id"].startswith("rerank-") and body["usage"] == {"total_tokens": 9}
    plain = client.post("/v1/rerank", json={"query": "q", "documents": ["c", "a"]}).json()["results"]
    assert [r["index"] for r in plain] == [1, 0] and "document" not in plain[0]
    refused = client.post("/v1/rerank", json={"query": "q", "documents": ["a"], "max_tokens_per_doc": 512})
    assert refused.status_code == 400 and "max_tokens_per_doc: not a field of /v1/rerank" in refused.json()["error"]


def test_the_cohere_route_answers_a_classifier_as_the_tei_route_does():
  """A 2-label classifier's /v1/rerank relevance_score is /rerank's score (the last label's probability); a model
  name the server does not hold is a 404 naming the models."""
  app = http_app.create_app({"m": StandIn()}, http_app.Settings(max_batch_size=4), http_app.ServerState())
  with testclient.TestClient(app) as client:
    tei = client.post("/rerank", json={"query": "q", "texts": ["x", "y"]}).json()
    cohere = client.post("/v1/rerank", json={"query": "q", "documents": ["x", "y"]}).json()["results"]
    assert [(r["index"], r["relevance_score"]) for r in cohere] == [(r["index"], r["score"]) for r in tei]
    missing = client.post("/v1/rerank", json={"model": "nope", "query": "q", "documents": ["x"]})
    assert missing.status_code == 404 and "models: ['m']" in missing.json()["error"]


@pytest.mark.parametrize("name", ["x/y", "", "..", "a b", "m:predict"])
def test_a_model_name_no_route_reaches_stops_start_up(name, tmp_path):
  """--model_name is a path segment of every route: a name with "/" (or empty, or dots only...) is refused at
  start-up, naming the characters a name may hold, before any folder loads."""
  from official_albert import serve
  from official_albert.serving import served_model
  with pytest.raises(served_model.ModelLoadError, match="letters, digits, '_', '.' and '-'"):
    serve.load_models([str(tmp_path / "not_loaded")], [name])


LARGE = 2 << 20  # bytes of a body the app reads as large (over http_app's 1 MiB LARGE_BODY)


def _large_body(texts=("x",)):
  """A valid OIP body of more than LARGE bytes (JSON allows the trailing whitespace)."""
  return json.dumps(_infer_body(list(texts))).encode() + b" " * LARGE


def test_liveness_is_answered_while_a_large_body_is_parsed(monkeypatch):
  """Audit s29 safety 3: a large body was json.loads-ed in the event loop (seconds for tens of MB), and
  /v2/health/live went unanswered meanwhile (a Kubernetes livenessProbe then restarts the pod). Here the parse is
  held until the probe has been answered: parsed in the event loop, the probe could not be answered before the
  parse gave up waiting (`waited` False). Bounded by events, not by timing."""
  parse, parsing, probed, waited = http_app.protocols.parse_json, threading.Event(), threading.Event(), []

  def held_parse(body):
    parsing.set()
    waited.append(probed.wait(timeout=30))
    return parse(body)

  monkeypatch.setattr(http_app.protocols, "parse_json", held_parse)
  app = http_app.create_app({"m": StandIn()}, http_app.Settings(max_batch_size=4), http_app.ServerState())
  with testclient.TestClient(app) as client, concurrent.futures.ThreadPoolExecutor(1) as pool:
    infer = pool.submit(client.post, "/v2/models/m/infer", content=_large_body(),
                        headers={"Content-Type": "application/json"})
    assert parsing.wait(timeout=60)
    live = client.get("/v2/health/live")
    probed.set()
    assert live.status_code == 200 and live.json() == {"live": True}
    answer = infer.result(timeout=60)
  assert answer.status_code == 200 and answer.json()["outputs"][0]["data"] == ["b"], answer.text
  assert waited == [True], "the large body was parsed in the event loop: the probe waited for it"


def counted_at_once(call, bound):
  """(`call` wrapped, [the most calls running at once]): each call waits (at most a second) for one more than `bound`
  to start, so that calls let through beyond the bound overlap and are counted."""
  lock, now, most, over = threading.Lock(), [0], [0], threading.Event()

  def counted(*args, **kwargs):
    with lock:
      now[0] += 1
      most[0] = max(most[0], now[0])
      if now[0] > bound:
        over.set()
    over.wait(timeout=1)
    with lock:
      now[0] -= 1
    return call(*args, **kwargs)

  return counted, most


def test_large_bodies_are_read_and_parsed_at_most_settings_large_bodies_at_once(monkeypatch):
  """Parsed off the event loop, large bodies would otherwise all be held and parsed at once (each up to the body
  limit, and json.loads builds several times that): at most Settings.large_bodies are. Each parse waits (at most a
  second) for one more than the bound to start; none may, and every request is still answered."""
  counted_parse, most = counted_at_once(http_app.protocols.parse_json, bound=2)
  monkeypatch.setattr(http_app.protocols, "parse_json", counted_parse)
  app = http_app.create_app({"m": StandIn()}, http_app.Settings(max_batch_size=4, large_bodies=2),
                            http_app.ServerState())
  with testclient.TestClient(app) as client, concurrent.futures.ThreadPoolExecutor(4) as pool:
    answers = list(pool.map(lambda _: client.post("/v2/models/m/infer", content=_large_body(),
                                                  headers={"Content-Type": "application/json"}), range(4)))
  assert [a.status_code for a in answers] == [200] * 4, [a.text for a in answers]
  assert 1 <= most[0] <= 2, f"{most[0]} large bodies parsed at once (Settings.large_bodies=2)"


def test_a_cancelled_large_request_keeps_its_slot_until_its_parse_ends(monkeypatch):
  """Review s29: a request cancelled (its client gone) while its large body was parsed freed its slot at once, with
  its parse still running in a thread: clients that send large bodies and drop them ran more parses at once than
  Settings.large_bodies. The slot is now freed by the parse's end: the next large body's parse starts after it."""
  import asyncio  # noqa: PLC0415

  import httpx  # noqa: PLC0415
  parse, started, gate, events = http_app.protocols.parse_json, threading.Event(), threading.Event(), []

  def held_parse(body):
    if not started.is_set():
      started.set()
      gate.wait(timeout=30)
      events.append("first parse ended")
    else:
      events.append("second parse started")
    return parse(body)

  monkeypatch.setattr(http_app.protocols, "parse_json", held_parse)
  app = http_app.create_app({"m": StandIn()}, http_app.Settings(max_batch_size=4, large_bodies=1),
                            http_app.ServerState())

  async def scenario():
    async with app.router.lifespan_context(app), httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                                                   base_url="http://test") as client:
      post = lambda: client.post("/v2/models/m/infer", content=_large_body(),  # noqa: E731
                                 headers={"Content-Type": "application/json"})
      first = asyncio.create_task(post())
      assert await asyncio.to_thread(started.wait, 30)
      first.cancel()
      second = asyncio.create_task(post())
      await asyncio.sleep(0.5)  # (the chance a freed slot would give it to start its parse before the first ends)
      gate.set()
      return (await second).status_code

  assert asyncio.run(scenario()) == 200
  assert events == ["first parse ended", "second parse started"]


@pytest.mark.parametrize("flag", ["--slots=8", "--depthwise_runtime=openvino", "--length_buckets=32,64",
                                  "--depthwise_iterations=2"])
def test_a_depthwise_flag_without_depthwise_batching_is_a_usage_error(flag):
  """Audit s29 config 6: the flags documented "With --depthwise_batching:" were accepted without it and ignored
  (plain dynamic batching on TensorFlow, no word). Each is a usage error naming it and --depthwise_batching, before
  anything loads; with --depthwise_batching they pass the check."""
  from absl import app  # noqa: PLC0415
  from absl import flags  # noqa: PLC0415

  from official_albert import serve  # noqa: PLC0415
  fv = flags.FlagValues()
  serve.define_flags(fv)
  fv(["albert-serve", "--model_dir=/nowhere", "--model_name=m", flag])
  with pytest.raises(app.UsageError, match=f"{flag.split('=')[0]}: only with --depthwise_batching"):
    serve.main([], fv)
  fv(["albert-serve", "--model_dir=/nowhere", "--model_name=m", flag, "--depthwise_batching"])
  serve.check_flags(fv)


@pytest.mark.parametrize("flags_given,message", [(["--exit_threshold=0.5"], "give --patience too"),
                                                  (["--exit_threshold=0", "--patience=2"], "above 0"),
                                                  (["--exit_threshold=nan", "--patience=2"], "above 0")])
def test_an_exit_threshold_that_cannot_apply_is_a_usage_error(flags_given, message):
  from absl import app  # noqa: PLC0415
  from absl import flags  # noqa: PLC0415

  from official_albert import serve  # noqa: PLC0415
  fv = flags.FlagValues()
  serve.define_flags(fv)
  fv(["albert-serve", "--model_dir=/nowhere", "--model_name=m", *flags_given])
  with pytest.raises(app.UsageError, match=message):
    serve.check_flags(fv)
  fv(["albert-serve", "--model_dir=/nowhere", "--model_name=m", "--exit_threshold=0.5", "--patience=2"])
  serve.check_flags(fv)


@pytest.mark.parametrize("flags_given", [["--max_batch_tokens=-1"], ["--max_batch_tokens=512", "--depthwise_batching"]])
def test_a_token_budget_that_cannot_apply_is_a_usage_error(flags_given):
  from absl import app  # noqa: PLC0415
  from absl import flags  # noqa: PLC0415

  from official_albert import serve  # noqa: PLC0415
  fv = flags.FlagValues()
  serve.define_flags(fv)
  fv(["albert-serve", "--model_dir=/nowhere", "--model_name=m"] + flags_given)
  with pytest.raises(app.UsageError, match="--max_batch_tokens="):
    serve.main([], fv)


@pytest.mark.parametrize("flags_given,message", [
    (["--grpc_port=70000"], "--grpc_port"), (["--port=-1"], "--port"), (["--max_batch_size=0"], "--max_batch_size"),
    (["--max_inputs=0"], "--max_inputs"), (["--max_text_chars=0"], "--max_text_chars"), (["--max_queue=0"],
                                                                                        "--max_queue")])
def test_a_limit_or_port_out_of_range_is_refused_by_its_flag(flags_given, message):
  """(--grpc_port=70000 listened on 4464; --max_batch_size=0 and the other limits refused every request 413.)"""
  from absl import flags  # noqa: PLC0415

  from official_albert import serve  # noqa: PLC0415
  fv = flags.FlagValues()
  serve.define_flags(fv)
  with pytest.raises(flags.IllegalFlagValueError, match=message):
    fv(["albert-serve", "--model_dir=/nowhere", "--model_name=m"] + flags_given)


@pytest.mark.parametrize("flags_given,message", [
    (["--request_timeout_s=0"], "--request_timeout_s=0.0: give a time"),
    (["--port=9000", "--grpc_port=9000"], "--grpc_port=9000 is --port too")])
def test_a_timeout_of_zero_and_one_port_for_both_are_usage_errors(flags_given, message):
  from absl import app  # noqa: PLC0415
  from absl import flags  # noqa: PLC0415

  from official_albert import serve  # noqa: PLC0415
  fv = flags.FlagValues()
  serve.define_flags(fv)
  fv(["albert-serve", "--model_dir=/nowhere", "--model_name=m"] + flags_given)
  with pytest.raises(app.UsageError, match=message):
    serve.main([], fv)


def test_one_model_given_two_heads_is_refused():
  from official_albert import serve  # noqa: PLC0415
  from official_albert.serving.served_heads import ModelLoadError  # noqa: PLC0415
  assert serve.parse_model_heads(["c=classifier", "c=classifier"], ["c"]) == {"c": "classifier"}
  with pytest.raises(ModelLoadError, match="--model_head=c=token_classifier and --model_head=c=classifier"):
    serve.parse_model_heads(["c=token_classifier", "c=classifier"], ["c"])


class FailingEncoder(StandIn):
  """An encoder whose model call raises a ValueError of its own."""

  name, head = "enc", "encoder"

  def predict(self, texts, pairs=None):
    raise ValueError("the model's own error")

  def truncate(self, vectors, dimensions):
    return vectors


def test_a_model_error_on_embed_is_not_a_dimensions_400():
  """TEI's /embed ran the model inside the `dimensions` check: any ValueError of the model became "400 dimensions:
  ...", which a client does not retry and a 5xx alert never sees; /v1/embeddings answered 500."""
  app = http_app.create_app({"enc": FailingEncoder()}, http_app.Settings(max_batch_size=4, max_text_chars=10),
                            http_app.ServerState())
  with testclient.TestClient(app, raise_server_exceptions=False) as client:
    for route, body in (("/embed", {"model": "enc", "inputs": "a"}),
                        ("/v1/embeddings", {"model": "enc", "input": "a"})):
      answer = client.post(route, json=body)
      assert answer.status_code == 500 and "dimensions" not in answer.text, (route, answer.status_code, answer.text)


class CountingEncoder(StandIn):
  """An encoder whose token count (`usage`) is held until the liveness probe has been answered."""

  name, head = "enc", "encoder"

  def __init__(self):
    self.counting, self.probed, self.waited = threading.Event(), threading.Event(), []

  def predict(self, texts, pairs=None):
    return {"sentence_embedding": np.ones((len(texts), 2), np.float32)}

  def truncate(self, vectors, dimensions):
    return vectors

  def token_count(self, text, pair=None):
    self.counting.set()
    self.waited.append(self.probed.wait(timeout=30))
    return 1


def test_liveness_is_answered_while_usage_tokens_are_counted():
  """/v1/embeddings counted its `usage` tokens in the event loop (a SavedModel tokenizes again: ~13 ms per 100k
  characters, seconds for a full request), and /v2/health/live waited. Bounded by events, not by timing."""
  model = CountingEncoder()
  app = http_app.create_app({"enc": model}, http_app.Settings(max_batch_size=4), http_app.ServerState())
  with testclient.TestClient(app) as client, concurrent.futures.ThreadPoolExecutor(1) as pool:
    embedding = pool.submit(client.post, "/v1/embeddings", json={"model": "enc", "input": "a"})
    assert model.counting.wait(timeout=60)
    live = client.get("/v2/health/live")
    model.probed.set()
    assert live.status_code == 200
    answer = embedding.result(timeout=60)
  assert answer.status_code == 200 and answer.json()["usage"]["total_tokens"] == 1, answer.text
  assert model.waited == [True], "the tokens were counted in the event loop: the probe waited for them"
