"""The server's HTTP application (FastAPI): the routes, readiness and drain, errors and Prometheus metrics.

Routes (docs/serving.md has a curl example of each; OIP is also served over gRPC with --grpc_port, serving.grpc_service,
answered by the same `oip_infer` and metadata calls):
  GET  /v2/health/live, /v2/health/ready, /v2/models/{name}, /v2/models/{name}/ready  (Open Inference Protocol v2)
  POST /v2/models/{name}/infer                              (OIP v2; text in as BYTES, or token ids as INT32)
       (and OIP's versioned paths, /v2/models/{name}/versions/1[/ready|/infer]; every GET route answers HEAD too)
  POST /v1/embeddings, /embed                                          (OpenAI's and TEI's shapes; encoder models)
  POST /rerank, /v1/rerank and /v2/rerank                 (TEI's and Cohere's shapes, rerank_http; pair classifiers)
  POST /v1/models/{name}:predict, /v1/models/{name}/versions/1:predict                      (TF Serving REST)
  GET  /metrics                                                                    (Prometheus)

Every answer goes through the model's `Batcher` (serving.batching) and the served model's `predict`, which calls the
pipeline functions (serving.served_model) — or, for a classifier served with `--depthwise_batching`, through its
`DepthwiseBatcher` (serving.depthwise_batching). Every refusal is `{"error": message}` with a 4xx status (503 when the
queue is full or the server drains, 504 on a timeout): FastAPI's own 404 / 422 formats are replaced so a client reads
one shape. FastAPI and prometheus-client are the optional `serve` extra (requirements-serve.txt); this module is
imported only by the server binary, after the extra was found.

Long because: the routes share one closure of models, batchers, state and metrics, and the body reading (size bound,
Content-Encoding) that every POST route uses; split apart they would pass that state around and be read together.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import Callable, Dict, Optional, Tuple
import zlib

import numpy as np

from official_albert.serving import grpc_service
from official_albert.serving import http_protocols as protocols
from official_albert.serving import rerank_http
from official_albert.serving import server_shutdown
from official_albert.serving.export_folder import install_hint

try:  # the `serve` extra: only official_albert.serve imports this module, inside its main
  import fastapi
  from fastapi import exceptions as fastapi_exceptions
  from fastapi import responses
  import prometheus_client
  from starlette import exceptions as starlette_exceptions
  from starlette.requests import ClientDisconnect
except ImportError as e:
  raise ImportError(f"The server needs FastAPI, uvicorn and prometheus-client: {install_hint('serve')}. ({e})") from e
from official_albert.serving.batching import Batcher
from official_albert.serving.batching import QueueFull
from official_albert.serving.batching import RequestTimeout
from official_albert.serving.depthwise_batching import DepthwiseBatcher
from official_albert.serving.served_model import CLASSIFIER
from official_albert.serving.served_model import ENCODER
from official_albert.serving.served_model import FILL_MASK
from official_albert.serving.served_model import MAX_CHOICES
from official_albert.serving.served_model import RERANKER
from official_albert.serving.served_model import ServedModel
from official_albert.serving.served_model import TASK_INPUTS
from official_albert.serving.served_rows import MAX_TOP_K
from official_albert.serving.server_metrics import Metrics

ApiError = protocols.ApiError
# Paths answered while the server drains (the probes must see it not ready; metrics stay readable).
_ALWAYS_ANSWERED = ("/v2/health/live", "/v2/health/ready", "/metrics")
SERVER_METADATA = {"name": "official_albert", "version": "1", "extensions": []}
# Request encodings read_json decodes (zlib's window bits: gzip's header, zlib's header as HTTP's "deflate").
_BODY_ENCODINGS = {"gzip": 16 + zlib.MAX_WBITS, "x-gzip": 16 + zlib.MAX_WBITS, "deflate": zlib.MAX_WBITS}
# A body over this many bytes (decoded) is "large": read under a slot of Settings.large_bodies, parsed in a thread.
LARGE_BODY = 1 << 20


def answered_while_draining(path: str) -> bool:
  """Whether `path` is answered during a drain: the probes and metrics, and a model's ready route (versioned or not),
  which then answers its own `{"name", "ready": false}` with 503, as gRPC's ModelReady answers ready=false."""
  return path in _ALWAYS_ANSWERED or (path.startswith("/v2/models/") and path.endswith("/ready"))


class ServerState:
  """What the routes and the SIGTERM handler share: ready (after start-up), draining, requests in flight."""

  def __init__(self):
    self.ready = False
    self.draining = False
    self.closing = False  # the drain ended: a request still in flight is cancelled by the server (server_shutdown)
    self.in_flight = 0


class Settings:
  """The batching and limit flags of `official_albert.serve`."""

  def __init__(self, max_batch_size: int = 32, batch_timeout_ms: float = 5.0, max_queue: int = 256,
               request_timeout_s: float = 60.0, max_inputs: Optional[int] = None, max_text_chars: int = 100_000,
               large_bodies: int = 2, max_batch_tokens: Optional[int] = None):
    self.max_batch_size, self.batch_timeout_s, self.max_queue = max_batch_size, batch_timeout_ms / 1000, max_queue
    self.request_timeout_s, self.max_batch_tokens = request_timeout_s, max_batch_tokens or None
    self.large_bodies = max(1, large_bodies)  # bodies over LARGE_BODY bytes read and parsed at once (read_json)
    self.limits = protocols.Limits(max_inputs or 4 * max_batch_size, max_text_chars)


def _error(status: int, message: str, headers: Optional[Dict[str, str]] = None) -> responses.JSONResponse:
  return responses.JSONResponse({"error": message}, status_code=status, headers=headers)


# Long because: the app's routes are one table of small handlers over shared state (models, batchers, metrics), read
# together; each handler is parse → batcher → answer.
def create_app(models: Dict[str, ServedModel], settings: Settings, state: ServerState,
               metrics: Optional[Metrics] = None, grpc_address: Optional[str] = None) -> fastapi.FastAPI:
  """The FastAPI app serving `models` (loaded and warmed up by the caller); `state.ready` turns on at start-up.

  `grpc_address` ("host:port"): also serve OIP over gRPC there (serving.grpc_service), started with the batchers
  in the app's event loop and stopped before them."""
  metrics = metrics or Metrics()
  batchers: Dict[str, object] = {}  # Batcher or DepthwiseBatcher: submit / start / stop / depth
  grpc_servers = []

  @contextlib.asynccontextmanager
  async def lifespan(app):
    for name, model in models.items():
      if getattr(model, "slots", None) is not None:  # --depthwise_batching (serving.depthwise_batching)
        batchers[name] = DepthwiseBatcher(model.slots, model.tokenize, model.finish_logits, settings.max_queue,
                                          metrics.batch_size.labels(name).observe,
                                          metrics.queue_depth.labels(name).set)
        batchers[name].start()
        continue
      batchers[name] = Batcher(model.predict, model.token_count, settings.max_batch_size, settings.batch_timeout_s,
                               settings.max_queue, metrics.batch_size.labels(name).observe,
                               metrics.queue_depth.labels(name).set,
                               max_batch_tokens=settings.max_batch_tokens,
                               **({"group": model.group} if hasattr(model, "group") else {}))
      batchers[name].start()
    if grpc_address is not None:
      calls = grpc_service.OipCalls(oip_infer, model_metadata_of, lambda: dict(SERVER_METADATA), state,
                                    lambda rpc, code, seconds: observe_grpc(rpc, code, seconds),
                                    lambda delta: metrics.in_flight.inc(delta), most_values, grpc_decode_slot)
      grpc_servers.append(await grpc_service.start_server(calls, grpc_address, max_body))
    state.ready = True
    yield
    state.ready = False
    for server in grpc_servers:  # (after the drain: nothing is in flight unless the stop was immediate)
      await server.stop(grace=settings.request_timeout_s)
    for batcher in batchers.values():
      await batcher.stop()

  app = fastapi.FastAPI(title="official_albert", lifespan=lifespan, docs_url=None, redoc_url=None, openapi_url=None)

  @app.exception_handler(ApiError)
  async def api_error(request, e: ApiError):
    return _error(e.status, e.message, e.headers)

  @app.exception_handler(starlette_exceptions.HTTPException)
  async def http_error(request, e):
    hint = " (routes: /v2/models/{name}/infer, /v1/embeddings, /rerank, /v1/rerank, /v1/models/{name}:predict)"
    # (Starlette's headers kept: a 405's `Allow` lists the path's methods, as RFC 9110 15.5.6 asks)
    return _error(e.status_code, f"{e.detail}: {request.method} {request.url.path}" + (hint if e.status_code in (
        404, 405) else ""), getattr(e, "headers", None))

  @app.exception_handler(fastapi_exceptions.RequestValidationError)
  async def validation_error(request, e):
    return _error(400, f"invalid request: {e.errors()}")

  @app.middleware("http")
  async def count_and_drain(request: fastapi.Request, call_next):
    path = request.url.path
    if state.draining and not answered_while_draining(path):
      # (Connection: close: a pooled client's retry came back on the same connection, to this replica, until it
      # closed)
      response = _error(503, "the server is shutting down; retry on another replica.",
                        {"Retry-After": "1", "Connection": "close"})
    else:
      state.in_flight += 1
      gauged = not answered_while_draining(path)  # (the gauge leaves out the probes and its own scrape)
      if gauged:
        metrics.in_flight.inc()
      started = time.monotonic()
      try:
        response = await call_next(request)
      except (ClientDisconnect, asyncio.CancelledError) as e:  # no answer: the client left (499), or the shutdown (503)
        status = server_shutdown.unanswered(request.method, path, getattr(request.scope.get("route"), "path",
                                                                          "unmatched"), e, state, metrics)
        if isinstance(e, asyncio.CancelledError):
          raise  # (ShutdownAnswers sends a shutdown's 503)
        return responses.Response(status_code=status)  # (nobody reads it)
      except Exception as e:  # a bug in a handler: still one JSON error, and the server stays up
        logging.exception("request failed")
        response = _error(500, f"internal error: {type(e).__name__}: {e}")
      finally:
        state.in_flight -= 1
        if gauged:
          metrics.in_flight.dec()
      metrics.latency.labels(getattr(request.scope.get("route"), "path", "unmatched")).observe(
          time.monotonic() - started)
    # The route's template (bounded label values); "unmatched" for unknown paths, "draining" for refusals at shutdown.
    route = getattr(request.scope.get("route"), "path", "draining" if response.status_code == 503 and state.draining
                    and not answered_while_draining(path) else "unmatched")
    metrics.requests.labels(route, str(response.status_code)).inc()
    return response

  app.add_middleware(server_shutdown.ShutdownAnswers, state=state)  # (outside count_and_drain: added after it)

  def observe_grpc(rpc: str, code: str, seconds: Optional[float]) -> None:
    metrics.requests.labels(f"grpc:{rpc}", code).inc()
    if seconds is not None:  # (None: refused while draining, or cancelled: counted only, as REST's above)
      metrics.latency.labels(f"grpc:{rpc}").observe(seconds)

  def model_of(name: Optional[str], heads: Tuple[str, ...], route: str) -> ServedModel:
    if name is None:
      candidates = [m for m in models.values() if m.head in heads]
      if len(candidates) != 1:
        raise ApiError(400, f"model: missing; {route} serves {[m.name for m in candidates]} here: name one.")
      return candidates[0]
    if name not in models:
      raise ApiError(404, f"model {name!r} is not served here; models: {sorted(models)}.")
    model = models[name]
    if model.head not in heads:
      raise ApiError(400, f"model {name!r} is a {model.head}; {route} takes {' or '.join(heads)} models.")
    return model

  def served(name: str) -> ServedModel:
    if name not in models:
      raise ApiError(404, f"model {name!r} is not served here; models: {sorted(models)}.")
    return models[name]

  async def run(model: ServedModel, texts, pairs=None) -> Dict[str, np.ndarray]:
    try:
      return await batchers[model.name].submit(texts, pairs, settings.request_timeout_s)
    except QueueFull:
      raise ApiError(503, f"model {model.name!r}: the queue is full ({settings.max_queue} requests waiting); retry "
                     "shortly.", {"Retry-After": "1"}) from None
    except RequestTimeout:
      raise ApiError(504, f"model {model.name!r}: no answer within {settings.request_timeout_s} s "
                     "(--request_timeout_s); retry, or send fewer texts.") from None

  # The most bytes a request may hold: every text at its limit, JSON-escaped (12 bytes a character at worst: a
  # character outside the BMP is escaped as two \\uXXXX, as json.dumps writes it) and a margin for the rest of the
  # body. A larger Content-Length is refused before the body is read; a body without one (chunked) is read as it
  # streams in, and refused as soon as it passes the limit, never held whole. A compressed body (Content-Encoding
  # gzip / deflate) is held to the same limit decoded, so a small body cannot expand past it.
  max_body = settings.limits.max_inputs * 2 * (12 * settings.limits.max_text_chars + 64) + 65536

  def body_too_large(size: str) -> ApiError:
    return ApiError(413, f"request body {size}, more than {max_body} (--max_inputs texts of --max_text_chars "
                    "characters); split the request.")

  def body_decoder(request: fastapi.Request):
    """The request's Content-Encoding as (name, zlib decompressor), (None, None) for none, or a refusal: 415 for an
    encoding not decoded here, 400 for the binary-data extension (a JSON header followed by raw tensor bytes)."""
    if "inference-header-content-length" in request.headers:
      raise ApiError(400, "Inference-Header-Content-Length: the binary-data extension of KServe / Triton is not "
                     "supported here (the server metadata lists no extensions); send each input's values as JSON "
                     "`data` (tritonclient: binary_data=False).")
    header = request.headers.get("content-encoding", "")
    names = [n.strip().lower() for n in header.split(",") if n.strip() and n.strip().lower() != "identity"]
    if not names:
      return None, None
    if len(names) > 1 or names[0] not in _BODY_ENCODINGS:
      raise ApiError(415, f"Content-Encoding: {header!r} is not supported; send the body uncompressed, or compressed "
                     "once with gzip or deflate.", {"Accept-Encoding": "gzip, deflate"})
    return names[0], zlib.decompressobj(_BODY_ENCODINGS[names[0]])

  def decoded(encoding: str, decoder, data: bytes, size: int) -> bytes:
    """`data` decoded, at most the bytes that keep the decoded body (`size` bytes so far) within max_body + 1."""
    try:
      out = decoder.decompress(data, max_body + 1 - size)
    except zlib.error as e:
      raise ApiError(400, f"Content-Encoding: the body is not valid {encoding} data ({e}); send it compressed with "
                     f"{encoding}, or uncompressed without the header.") from None
    if size + len(out) > max_body:
      raise body_too_large(f"decoded from {encoding}, of more than {max_body} bytes")
    return out

  # Large bodies (over LARGE_BODY bytes, decoded) are read and parsed at most `settings.large_bodies` at once, and
  # parsed in a thread: what they hold is bounded (large_bodies x max_body, and what json.loads builds of them),
  # and parsing one (seconds for hundreds of MB) never holds up the event loop, which answers /v2/health/live and
  # every small request meanwhile. A large body that waits longer than --request_timeout_s for a slot gets 503.
  large_bodies = asyncio.Semaphore(settings.large_bodies)

  async def large_body_slot():
    try:
      await asyncio.wait_for(large_bodies.acquire(), settings.request_timeout_s)
    except asyncio.TimeoutError:
      raise ApiError(503, f"{settings.large_bodies} request bodies of more than {LARGE_BODY} bytes are being read; "
                     "retry shortly, or send fewer texts per request.", {"Retry-After": "1"}) from None

  async def grpc_decode_slot(size: int) -> Optional[Callable[[], None]]:
    """A gRPC message of `size` bytes: a large one waits for a slot of the same bound (grpc_service.OipCalls)."""
    if size <= LARGE_BODY:
      return None
    await large_body_slot()
    return large_bodies.release

  async def read_json(request: fastapi.Request):
    encoding, decoder = body_decoder(request)
    length = request.headers.get("content-length")
    if length is not None and length.isdigit() and int(length) > max_body:
      raise body_too_large(f"of {length} bytes")
    chunks, size, sent, large = [], 0, 0, False  # large: this request holds a slot of large_bodies
    try:
      async for chunk in request.stream():
        sent += len(chunk)
        if sent > max_body:
          raise body_too_large(f"(sent without Content-Length) of {sent} bytes so far")
        chunk = chunk if decoder is None else decoded(encoding, decoder, chunk, size)
        size += len(chunk)
        chunks.append(chunk)
        if size > LARGE_BODY and not large:
          await large_body_slot()
          large = True
      if decoder is not None:
        rest = decoder.flush()  # (nothing is left unconsumed: a decoded() that stopped at its bound raised 413)
        if size + len(rest) > max_body:
          raise body_too_large(f"decoded from {encoding}, of more than {max_body} bytes")
        chunks.append(rest)
        if not decoder.eof or decoder.unused_data:
          what = "followed by other bytes" if decoder.eof else "cut short"
          raise ApiError(400, f"Content-Encoding: the {encoding} body is {what}; send one whole {encoding} stream.")
      body = b"".join(chunks)
      chunks.clear()  # (one copy held, not two)
      if large:  # the parse frees the slot when it ends: a request cancelled meanwhile leaves its thread running
        parse = asyncio.get_running_loop().run_in_executor(None, protocols.parse_json, body)
        parse.add_done_callback(lambda _: large_bodies.release())
        large = False
        return await asyncio.shield(parse)
    finally:
      if large:  # (a body refused or cut off while it was read)
        large_bodies.release()
    return protocols.parse_json(body)

  def check_version(name: str, version: str) -> None:
    """A versioned path's version, as gRPC's check_version (grpc_service): the one served, "1", or 404 naming it."""
    if version != "1":
      raise ApiError(404, f"model {name!r} version {version!r}: this server serves version \"1\" only (or leave "
                     "the version out of the path).")

  def get(path: str):
    """A GET route that answers HEAD too (RFC 9110 9.1; FastAPI's app.get registers GET only, so HEAD got 405)."""
    return app.api_route(path, methods=["GET", "HEAD"])

  @get("/v2/health/live")
  async def live():
    return {"live": True}

  @get("/v2/health/ready")
  async def ready():
    ok = state.ready and not state.draining
    return responses.JSONResponse({"ready": ok}, status_code=200 if ok else 503)

  @get("/v2")
  async def server_metadata():
    return SERVER_METADATA

  @get("/v2/models/{name}")
  async def model_metadata(name: str):
    return model_metadata_of(name)

  @get("/v2/models/{name}/versions/{version}")
  async def model_version_metadata(name: str, version: str):
    served(name)
    check_version(name, version)
    return model_metadata_of(name)

  @get("/v2/models/{name}/ready")
  async def model_ready(name: str):
    served(name)
    ok = state.ready and not state.draining
    return responses.JSONResponse({"name": name, "ready": ok}, status_code=200 if ok else 503)

  @get("/v2/models/{name}/versions/{version}/ready")
  async def model_version_ready(name: str, version: str):
    served(name)
    check_version(name, version)
    return await model_ready(name)

  async def oip_infer(name: str, body: Dict[str, object]) -> Dict[str, object]:
    """The OIP answer of model `name` to `body` (REST's JSON body; gRPC's request read into it)."""
    model = served(name)
    # (in a thread: a fill-mask request's rows tokenize every text, up to --max_inputs of --max_text_chars)
    rows, requested = await asyncio.to_thread(oip_rows, name, model, body)
    return protocols.oip_response(name, await run(model, *rows), requested, body.get("id"))

  def oip_rows(name: str, model: ServedModel, body: Dict[str, object]) -> Tuple[tuple, Optional[list]]:
    """(the batcher's arguments, the output names asked for or None) of OIP `body` for model `name`, or an ApiError."""
    top_k = protocols.oip_int_parameter(body, "top_k", 1, MAX_TOP_K)
    if top_k is not None and model.head != FILL_MASK:
      raise ApiError(400, f"parameters.top_k: model {name!r} is a {model.head}; top_k is for fill-mask models.")
    if "input_word_ids" in protocols.oip_input_names(body):
      if getattr(model, "id_limits", None) is None:
        raise ApiError(400, f"input_word_ids: model {name!r} ({model.backend} {model.head}) takes text, not token ids; "
                       f"send its inputs {[i['name'] for i in model.inputs_metadata()]} (BYTES).")
      if getattr(model, "slots", None) is not None:
        raise ApiError(400, f"input_word_ids: model {name!r} is served with --depthwise_batching, which takes text "
                       "only; send text (BYTES).")
      ids, mask, types, requested = protocols.oip_token_ids(body, settings.limits, model.id_limits)
      return (model.id_rows(ids, mask, types),), requested
    if model.head in TASK_INPUTS:
      inputs, requested = protocols.oip_text_tensors(body, TASK_INPUTS[model.head], settings.limits)
      return tuple(model.task_rows(inputs, top_k)), requested
    texts, pairs, requested = protocols.oip_inputs(body, model.takes_pairs, settings.limits)
    return (texts, pairs), requested

  def most_values(name: str) -> int:
    """The most values one OIP input of model `name` may hold (what gRPC decodes of a tensor at most): --max_inputs
    rows of at most its positions (token ids) or of MAX_CHOICES texts (a multiple-choice row)."""
    id_limits = getattr(served(name), "id_limits", None)
    return settings.limits.max_inputs * max(MAX_CHOICES, id_limits.max_length if id_limits is not None else 1)

  def model_metadata_of(name: str) -> Dict[str, object]:
    model = served(name)
    return {"name": name, "versions": ["1"], "platform": f"official_albert_{model.backend}",
            "inputs": model.inputs_metadata(), "outputs": model.outputs_metadata()}

  @app.post("/v2/models/{name}/infer")
  async def infer(name: str, request: fastapi.Request):
    served(name)
    return await oip_infer(name, await read_json(request))

  @app.post("/v2/models/{name}/versions/{version}/infer")
  async def infer_version(name: str, version: str, request: fastapi.Request):
    served(name)
    check_version(name, version)
    return await oip_infer(name, await read_json(request))

  @app.post("/v1/embeddings")
  async def embeddings(request: fastapi.Request):
    body = await read_json(request)
    name, texts, _, encoding = protocols.openai_embedding_request(body, settings.limits)
    dimensions = protocols.openai_dimensions(body)
    model = model_of(name, (ENCODER,), "/v1/embeddings")
    outputs = await run(model, texts)
    try:
      vectors = model.truncate(outputs["sentence_embedding"], dimensions)
    except ValueError as e:  # a width the model was not trained at: the message names the ones it was
      raise ApiError(400, f"dimensions: {e}") from None
    # (tokenized again for a SavedModel, ~13 ms per 100k characters: off the event loop, which answers probes)
    tokens = await asyncio.to_thread(lambda: sum(model.token_count(t) for t in texts))
    return protocols.openai_embedding_response(model.name, vectors, encoding, tokens)

  @app.post("/embed")
  async def tei_embed(request: fastapi.Request):
    name, texts, normalize, dimensions = protocols.tei_embed_request(await read_json(request), settings.limits)
    model = model_of(name, (ENCODER,), "/embed")
    outputs = await run(model, texts)  # (outside the try: a model's own ValueError is no `dimensions` 400)
    try:
      vectors = model.truncate(outputs["sentence_embedding"], dimensions)
    except ValueError as e:  # a width the model was not trained at: the message names the ones it was
      raise ApiError(400, f"dimensions: {e}") from None
    if normalize:  # (TEI's default: unit vectors, whether or not the folder normalises)
      vectors = vectors / np.maximum(np.linalg.norm(vectors, axis=-1, keepdims=True), 1e-12)
    return np.asarray(vectors, np.float32).tolist()

  @app.post("/rerank")
  async def rerank(request: fastapi.Request):
    name, query, texts, return_text, raw_scores = rerank_http.rerank_request(await read_json(request), settings.limits)
    model = rerank_http.paired_model(model_of(name, (RERANKER, CLASSIFIER), "/rerank"), "/rerank", raw_scores)
    scores, keys, logits = rerank_http.pair_scores(model, await run(model, [query] * len(texts), texts))
    return rerank_http.rerank_response(logits if raw_scores and logits else scores, texts, return_text, keys)

  @app.post("/v1/rerank")
  @app.post("/v2/rerank")
  async def cohere_rerank(request: fastapi.Request):
    name, query, texts, top_n, documents = rerank_http.cohere_request(await read_json(request), settings.limits)
    route = request.url.path
    model = rerank_http.paired_model(model_of(name, (RERANKER, CLASSIFIER), route), route)
    scores, keys, _ = rerank_http.pair_scores(model, await run(model, [query] * len(texts), texts))
    tokens = await asyncio.to_thread(lambda: sum(model.token_count(query, text) for text in texts))
    return rerank_http.cohere_response(model.name, scores, keys, texts, top_n, documents, tokens)

  def tfs_signatures(model: ServedModel) -> Tuple[str, ...]:
    """The `signature_name`s :predict answers for `model`: TF Serving's default, and a SavedModel's text signatures
    (the ones that take what this route takes; its id and example signatures are not served here)."""
    signatures = getattr(getattr(getattr(model, "model", None), "loaded", None), "signatures", None) or {}
    return (protocols.TFS_DEFAULT_SIGNATURE,) + tuple(
        n for n in ("serve_text", "serve_text_pair", "embed") if n in signatures)

  @app.post("/v1/models/{name}/versions/{version}:predict")
  async def tfs_predict_version(name: str, version: str, request: fastapi.Request):
    served(name)
    check_version(name, version)
    return await tfs_predict(name, request)

  @app.post("/v1/models/{name}:predict")
  async def tfs_predict(name: str, request: fastapi.Request):
    model = served(name)
    if model.head not in (CLASSIFIER, ENCODER):
      raise ApiError(400, f"model {name!r} is a {model.head}; TF Serving's predict serves classifiers and encoders "
                     f"here: send its inputs over OIP, POST /v2/models/{name}/infer.")
    body = await read_json(request)
    texts, pairs, row_form = protocols.tfs_request(body, model.takes_pairs, settings.limits, tfs_signatures(model))
    return protocols.tfs_response(await run(model, texts, pairs), row_form)

  @get("/metrics")
  async def prometheus_metrics():
    for name, batcher in batchers.items():
      metrics.queue_depth.labels(name).set(batcher.depth())
    return responses.Response(prometheus_client.generate_latest(metrics.registry),
                              media_type=prometheus_client.CONTENT_TYPE_LATEST)

  return app
