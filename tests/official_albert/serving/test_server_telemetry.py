"""The server's counters tell client behaviour and drain refusals apart from answers and server errors (audit s32
observe 5 and 6): a gRPC call refused while draining is counted, not timed (as REST's refusals), so 0-second refusals
do not pull the latency quantiles down during a drain; a client that hangs up mid-body is status 499 (nginx's "client
closed request"), not a 500 with an ERROR traceback that a 5xx alert would fire on; a request cancelled while the
model runs it is 499 over REST (the cancellation still raised) and CANCELLED over gRPC (it was counted "OK"), neither
timed. All with the HTTP app in process and a stand-in model (tests/.../test_http_app.py); the hang-up over a real
socket, served by uvicorn."""

import asyncio
import logging
import socket
import threading
import time
import warnings

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("prometheus_client")

import prometheus_client  # noqa: E402

from official_albert.serving import http_app  # noqa: E402
from tests.official_albert.serving.test_http_app import StandIn  # noqa: E402

EVENT_TIMEOUT_S = 120  # the bound of each wait for an event (a loaded machine); none is expected to come near it
INFER = "/v2/models/{name}/infer"


def _free_address() -> str:
  with socket.socket() as free:
    free.bind(("127.0.0.1", 0))
    return f"127.0.0.1:{free.getsockname()[1]}"


def test_a_grpc_call_refused_while_draining_is_counted_and_not_timed():
  """Audit s32 observe 5: one answered ModelInfer is timed; one refused UNAVAILABLE while draining is counted under
  status UNAVAILABLE and leaves the latency histogram's count as it was."""
  grpc = pytest.importorskip("grpc")
  pytest.importorskip("httpx")
  with warnings.catch_warnings():  # (as test_http_app: Starlette's test client warns about httpx)
    warnings.simplefilter("ignore")
    from fastapi import testclient  # noqa: PLC0415
  from official_albert.serving import oip_grpc_messages  # noqa: PLC0415

  class Classifier(StandIn):
    def inputs_metadata(self):  # (gRPC's ModelInfer reads the model's metadata first)
      return [{"name": "text", "datatype": "BYTES", "shape": [-1]}]

  messages = oip_grpc_messages.messages()
  address, state, metrics = _free_address(), http_app.ServerState(), http_app.Metrics()
  app = http_app.create_app({"m": Classifier()}, http_app.Settings(max_batch_size=4), state, metrics,
                            grpc_address=address)
  request = messages["ModelInferRequest"](model_name="m")
  request.inputs.add(name="text", datatype="BYTES", shape=[1]).contents.bytes_contents.append(b"x")
  timed = lambda: metrics.registry.get_sample_value(  # noqa: E731
      "albert_request_latency_seconds_count", {"route": "grpc:ModelInfer"})
  counted = lambda status: metrics.registry.get_sample_value(  # noqa: E731
      "albert_requests_total", {"route": "grpc:ModelInfer", "status": status})
  with testclient.TestClient(app), grpc.insecure_channel(address) as channel:
    infer = channel.unary_unary(f"/{oip_grpc_messages.SERVICE}/ModelInfer",
                                request_serializer=messages["ModelInferRequest"].SerializeToString,
                                response_deserializer=messages["ModelInferResponse"].FromString)
    assert [o.name for o in infer(request, timeout=EVENT_TIMEOUT_S).outputs][0] == "label"
    assert timed() == 1 and counted("OK") == 1
    state.draining = True
    with pytest.raises(grpc.RpcError) as e:
      infer(request, timeout=EVENT_TIMEOUT_S)
    assert e.value.code() == grpc.StatusCode.UNAVAILABLE and "shutting down" in e.value.details()
    assert counted("UNAVAILABLE") == 1
    assert timed() == 1, "a refusal while draining was observed in the latency histogram"


def test_a_client_that_hangs_up_mid_body_is_499_without_an_error_log(caplog):
  """Audit s32 observe 6: a client sends its headers with a Content-Length larger than the body it sends, then closes
  the socket. The request is counted with status 499 (no 500 sample), and nothing is logged at ERROR."""
  uvicorn = pytest.importorskip("uvicorn")
  metrics = http_app.Metrics()
  app = http_app.create_app({"m": StandIn()}, http_app.Settings(max_batch_size=4, max_text_chars=10),
                            http_app.ServerState(), metrics)

  def statuses():
    return {s.labels["status"] for m in metrics.registry.collect() if m.name == "albert_requests" for s in m.samples
            if s.name == "albert_requests_total" and s.labels["route"] == INFER}

  async def until(what, done):
    try:
      async with asyncio.timeout(EVENT_TIMEOUT_S):
        while not done():
          await asyncio.sleep(0.01)
    except TimeoutError:
      raise AssertionError(f"waited {EVENT_TIMEOUT_S} s for {what}") from None

  async def main():
    listening = socket.socket()
    listening.bind(("127.0.0.1", 0))
    port = listening.getsockname()[1]
    # (log_config None: uvicorn leaves logging as it is, so caplog sees every record)
    server = uvicorn.Server(uvicorn.Config(app, log_config=None, lifespan="on"))
    serving = asyncio.create_task(server.serve(sockets=[listening]))
    try:
      await until("the server to start", lambda: server.started or serving.done())
      assert server.started, serving.exception()
      _, writer = await asyncio.open_connection("127.0.0.1", port)
      writer.write(f"POST /v2/models/m/infer HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
                   "Content-Length: 1000\r\n\r\n".encode() + b'{"inputs": [')
      await writer.drain()
      writer.close()
      await writer.wait_closed()
      await until("the request to be counted", statuses)
    finally:
      server.should_exit = True
      await asyncio.wait_for(serving, EVENT_TIMEOUT_S)
      listening.close()

  with caplog.at_level(logging.INFO):
    asyncio.run(main())
  text = prometheus_client.generate_latest(metrics.registry).decode()
  assert statuses() == {"499"}, text
  assert 'status="500"' not in text
  errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
  assert not errors, [r.getMessage() for r in errors]
  assert any("499" in r.getMessage() and r.levelno == logging.INFO for r in caplog.records)


class HeldClassifier(StandIn):
  """A classifier whose model call waits for `gate` (set by the test) after setting `entered`."""

  def __init__(self):
    self.entered, self.gate = threading.Event(), threading.Event()

  def inputs_metadata(self):
    return [{"name": "text", "datatype": "BYTES", "shape": [-1]}]

  def predict(self, texts, pairs=None):
    self.entered.set()
    assert self.gate.wait(EVENT_TIMEOUT_S), "the test never opened the gate"
    return super().predict(texts, pairs)


def held_grpc_call(channel, messages, request, model: HeldClassifier):
  """A ModelInfer call of `request` started on `channel`, once it reached `model` (held there until its gate)."""
  from official_albert.serving import oip_grpc_messages  # noqa: PLC0415  (grpc: the serving extra)
  infer = channel.unary_unary(f"/{oip_grpc_messages.SERVICE}/ModelInfer",
                              request_serializer=messages["ModelInferRequest"].SerializeToString,
                              response_deserializer=messages["ModelInferResponse"].FromString)
  call = infer.future(request, timeout=EVENT_TIMEOUT_S)
  assert model.entered.wait(EVENT_TIMEOUT_S), "the call never reached the model"
  return call


def test_a_grpc_call_the_client_cancels_is_counted_cancelled_not_ok():
  """A ModelInfer the client cancels while the model runs it is counted under status CANCELLED (it was counted "OK",
  an answer nobody got), and kept out of the latency histogram, as REST's 499."""
  grpc = pytest.importorskip("grpc")
  pytest.importorskip("httpx")
  with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from fastapi import testclient  # noqa: PLC0415
  from official_albert.serving import oip_grpc_messages  # noqa: PLC0415

  messages, model = oip_grpc_messages.messages(), HeldClassifier()
  address, metrics = _free_address(), http_app.Metrics()
  app = http_app.create_app({"m": model}, http_app.Settings(max_batch_size=4), http_app.ServerState(), metrics,
                            grpc_address=address)
  request = messages["ModelInferRequest"](model_name="m")
  request.inputs.add(name="text", datatype="BYTES", shape=[1]).contents.bytes_contents.append(b"x")
  counted = lambda: {s.labels["status"] for m in metrics.registry.collect() if m.name == "albert_requests"  # noqa: E731
                     for s in m.samples if s.labels.get("route") == "grpc:ModelInfer" and s.name.endswith("_total")}
  with testclient.TestClient(app), grpc.insecure_channel(address) as channel:
    try:
      call = held_grpc_call(channel, messages, request, model)
      call.cancel()
      deadline = time.monotonic() + EVENT_TIMEOUT_S
      while not counted():
        assert time.monotonic() < deadline, f"waited {EVENT_TIMEOUT_S} s for the cancelled call to be counted"
        time.sleep(0.01)
    finally:
      model.gate.set()
  assert counted() == {"CANCELLED"}
  assert not metrics.registry.get_sample_value("albert_request_latency_seconds_count", {"route": "grpc:ModelInfer"})


def test_a_rest_request_cancelled_while_the_model_runs_it_is_499_and_stays_cancelled(caplog):
  """The ASGI app's task cancelled while the model holds its request (a server stopping at once): the cancellation
  goes on up (the app does not swallow it), and the request is counted 499 with no ERROR log and no latency."""
  model, metrics = HeldClassifier(), http_app.Metrics()
  app = http_app.create_app({"m": model}, http_app.Settings(max_batch_size=4), http_app.ServerState(), metrics)
  body = b'{"inputs": [{"name": "text", "datatype": "BYTES", "shape": [1], "data": ["x"]}]}'

  async def main():
    lifespan, started = asyncio.Queue(), asyncio.Event()
    await lifespan.put({"type": "lifespan.startup"})

    async def lifespan_send(message):
      started.set()
    life = asyncio.create_task(app({"type": "lifespan", "asgi": {"version": "3.0"}}, lifespan.get, lifespan_send))
    await asyncio.wait_for(started.wait(), EVENT_TIMEOUT_S)
    messages = [{"type": "http.request", "body": body, "more_body": False}]

    async def receive():
      if messages:
        return messages.pop(0)
      await asyncio.Event().wait()  # (no disconnect: the task is cancelled instead)

    async def send(message):
      pass
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST", "scheme": "http",
             "path": "/v2/models/m/infer", "raw_path": b"/v2/models/m/infer", "query_string": b"", "root_path": "",
             "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
             "client": ("127.0.0.1", 1), "server": ("127.0.0.1", 80)}
    request = asyncio.create_task(app(scope, receive, send))
    try:
      assert await asyncio.to_thread(model.entered.wait, EVENT_TIMEOUT_S), "the request never reached the model"
      request.cancel()
      with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(request, EVENT_TIMEOUT_S)
    finally:
      model.gate.set()
      await lifespan.put({"type": "lifespan.shutdown"})
      await asyncio.wait_for(life, EVENT_TIMEOUT_S)

  with caplog.at_level(logging.INFO):
    asyncio.run(main())
  assert metrics.registry.get_sample_value("albert_requests_total", {"route": INFER, "status": "499"}) == 1
  assert not metrics.registry.get_sample_value("albert_request_latency_seconds_count", {"route": INFER})
  assert not [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
