"""A request the server's own shutdown cancels is the server's doing, not the client's (serving.server_shutdown).

The drain (`serve.drain_then_exit`) ends; what is still in flight is cancelled by uvicorn after its graceful-shutdown
time (REST) or by gRPC's stop after its grace. Before: counted and logged as 499 "the client closed the connection"
(REST; the client got uvicorn's bare 500, or nothing) and CANCELLED (gRPC). Now: REST answers 503 with Retry-After,
counted under status 503 and in `albert_shutdown_cancels_total`, logged at WARNING; gRPC counts what its client reads,
UNAVAILABLE. A client that goes away stays 499 (tests/.../test_server_telemetry.py). Real sockets on localhost; the
held model waits on an event the test sets, and every wait is bounded.
"""

import asyncio
import logging
import socket
import warnings

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("prometheus_client")
httpx = pytest.importorskip("httpx")
uvicorn = pytest.importorskip("uvicorn")

from starlette.requests import ClientDisconnect  # noqa: E402

from official_albert import serve  # noqa: E402
from official_albert.serving import http_app  # noqa: E402
from official_albert.serving import server_shutdown  # noqa: E402
from tests.official_albert.serving.test_server_telemetry import held_grpc_call  # noqa: E402
from tests.official_albert.serving.test_server_telemetry import HeldClassifier  # noqa: E402

EVENT_TIMEOUT_S = 120  # the bound of each wait for an event (a loaded machine); none is expected to come near it
INFER = "/v2/models/{name}/infer"
BODY = {"inputs": [{"name": "text", "datatype": "BYTES", "shape": [1], "data": ["x"]}]}


def _statuses(metrics, route):
  return {s.labels["status"]: s.value for m in metrics.registry.collect() if m.name == "albert_requests"
          for s in m.samples if s.name == "albert_requests_total" and s.labels["route"] == route}


def test_a_rest_request_the_drain_leaves_in_flight_is_answered_and_counted_503_not_499(caplog):
  """A request held by the model when the drain ends (`drain_then_exit` past its hard limit) is cancelled by uvicorn's
  shutdown: the client reads 503 with Retry-After (not a dropped connection or a 500), the counter has status 503 (no
  499) and one albert_shutdown_cancels_total, and the log says the shutdown cut it, at WARNING (no "client closed")."""
  model, metrics, state = HeldClassifier(), http_app.Metrics(), http_app.ServerState()
  app = http_app.create_app({"m": model}, http_app.Settings(max_batch_size=4), state, metrics)

  async def main():
    listening = socket.socket()
    listening.bind(("127.0.0.1", 0))
    port = listening.getsockname()[1]
    # (log_config None: uvicorn leaves logging as it is, so caplog sees every record)
    server = uvicorn.Server(uvicorn.Config(app, log_config=None, lifespan="on", timeout_graceful_shutdown=0.2))
    serving = asyncio.create_task(server.serve(sockets=[listening]))
    try:
      async with asyncio.timeout(EVENT_TIMEOUT_S):
        while not (server.started or serving.done()):
          await asyncio.sleep(0.01)
      assert server.started, serving.exception()
      async with httpx.AsyncClient() as client:
        answer = asyncio.create_task(client.post(f"http://127.0.0.1:{port}/v2/models/m/infer", json=BODY,
                                                 timeout=EVENT_TIMEOUT_S))
        assert await asyncio.to_thread(model.entered.wait, EVENT_TIMEOUT_S), "the request never reached the model"
        state.draining = True  # (as the SIGTERM handler sets it)
        await asyncio.wait_for(serve.drain_then_exit(server, state, drain_seconds=0.0, hard_limit_s=0.1),
                               EVENT_TIMEOUT_S)
        assert state.closing and state.in_flight == 1
        answer = await asyncio.wait_for(answer, EVENT_TIMEOUT_S)
    finally:
      model.gate.set()
      server.should_exit = True
      await asyncio.wait_for(serving, EVENT_TIMEOUT_S)
      listening.close()
    return answer

  with caplog.at_level(logging.INFO):
    answer = asyncio.run(main())
  assert answer.status_code == 503, answer.text
  assert answer.headers.get("retry-after") == "1" and "shut down" in answer.json()["error"]
  assert _statuses(metrics, INFER) == {"503": 1.0}
  assert metrics.registry.get_sample_value("albert_shutdown_cancels_total", {"route": INFER}) == 1
  assert not metrics.registry.get_sample_value("albert_request_latency_seconds_count", {"route": INFER})
  messages = [(r.levelno, r.getMessage()) for r in caplog.records if r.name == "root"]
  assert any(level == logging.WARNING and "cancelled by the server's shutdown" in m for level, m in messages), messages
  assert not any("client closed" in m for _, m in messages), messages


@pytest.mark.parametrize("error, closing, status", [
    (ClientDisconnect(), True, 499),  # a client that leaves during the close is still the client's doing
    (asyncio.CancelledError(), False, 499),  # a cancellation outside the close: the client's (as before)
    (asyncio.CancelledError(), True, 503),  # the server's shutdown
])
def test_unanswered_tells_the_client_leaving_from_the_shutdown(caplog, error, closing, status):
  metrics, state = http_app.Metrics(), http_app.ServerState()
  state.closing = closing
  with caplog.at_level(logging.INFO):
    assert server_shutdown.unanswered("POST", "/v2/models/m/infer", INFER, error, state, metrics) == status
  assert _statuses(metrics, INFER) == {str(status): 1.0}
  assert (metrics.registry.get_sample_value("albert_shutdown_cancels_total", {"route": INFER}) or 0) == (status == 503)
  assert [r.levelno for r in caplog.records] == [logging.WARNING if status == 503 else logging.INFO]


def test_a_grpc_call_the_servers_stop_cuts_is_counted_unavailable_not_cancelled(monkeypatch, caplog):
  """A ModelInfer held by the model when the gRPC server stops (its grace passed) while the server closes: the client
  reads UNAVAILABLE, and the call is counted UNAVAILABLE (it was CANCELLED, a client's cancellation), untimed, with a
  WARNING naming the shutdown."""
  grpc = pytest.importorskip("grpc")
  with warnings.catch_warnings():  # (as test_http_app: Starlette's test client warns about httpx)
    warnings.simplefilter("ignore")
    from fastapi import testclient  # noqa: PLC0415
  from official_albert.serving import grpc_service  # noqa: PLC0415
  from official_albert.serving import oip_grpc_messages  # noqa: PLC0415

  servers, start_server = [], grpc_service.start_server

  async def recorded(*args, **kwargs):
    servers.append(await start_server(*args, **kwargs))
    return servers[-1]
  monkeypatch.setattr(grpc_service, "start_server", recorded)
  with socket.socket() as free:
    free.bind(("127.0.0.1", 0))
    address = f"127.0.0.1:{free.getsockname()[1]}"
  messages, model = oip_grpc_messages.messages(), HeldClassifier()
  metrics, state = http_app.Metrics(), http_app.ServerState()
  app = http_app.create_app({"m": model}, http_app.Settings(max_batch_size=4), state, metrics, grpc_address=address)
  request = messages["ModelInferRequest"](model_name="m")
  request.inputs.add(name="text", datatype="BYTES", shape=[1]).contents.bytes_contents.append(b"x")
  with caplog.at_level(logging.INFO), testclient.TestClient(app) as client, grpc.insecure_channel(address) as channel:
    try:
      call = held_grpc_call(channel, messages, request, model)
      state.draining = state.closing = True  # (as drain_then_exit leaves them)
      client.portal.call(servers[0].stop, 0.1)
      with pytest.raises(grpc.RpcError) as e:
        call.result(timeout=EVENT_TIMEOUT_S)
    finally:
      model.gate.set()
  assert e.value.code() == grpc.StatusCode.UNAVAILABLE
  assert _statuses(metrics, "grpc:ModelInfer") == {"UNAVAILABLE": 1.0}
  assert not metrics.registry.get_sample_value("albert_request_latency_seconds_count", {"route": "grpc:ModelInfer"})
  assert any(r.levelno == logging.WARNING and "cancelled by the server's shutdown" in r.getMessage()
             for r in caplog.records)
