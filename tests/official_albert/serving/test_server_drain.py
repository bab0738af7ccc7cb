"""The drain on SIGTERM (official_albert.serve): the requests the server received are answered, and it keeps answering
as a draining server until they are.

uvicorn finishes the HTTP requests it has open when it stops, and gRPC's graceful stop the calls it has, whatever our
drain does; but both close their ports at once. What the drain adds, and what these tests isolate, is the server's own
count of requests in flight (`ServerState.in_flight`, REST and gRPC, `serve.drain_then_exit`): past --drain_seconds
the server stays up — not ready, refusing new requests with 503 / UNAVAILABLE, answering its liveness probe — until
every request it received is answered (a Kubernetes liveness probe that met a closed port would kill the container
with them inside), then exits 0. Planting "exit at SIGTERM without waiting for requests in flight" in
`drain_then_exit` fails both tests. The held requests wait on a file the test removes (tests/.../held_serve.py), not
on a slow model; no assertion depends on speed.
"""

import asyncio
import concurrent.futures
import re
import signal
import time
import types

import numpy as np
import pytest

grpc = pytest.importorskip("grpc")
httpx = pytest.importorskip("httpx")
pytest.importorskip("fastapi")

from official_albert import serve  # noqa: E402
from official_albert.serving import pipelines  # noqa: E402
from tests import tiny  # noqa: E402
from tests.official_albert.serving.test_grpc_server import _outputs  # noqa: E402
from tests.official_albert.serving.test_grpc_server import _start  # noqa: E402
from tests.official_albert.serving.test_grpc_server import _text  # noqa: E402
from tests.official_albert.serving.test_grpc_server import Client  # noqa: E402
from tests.official_albert.serving.test_grpc_server import LABELS  # noqa: E402
from tests.official_albert.serving.test_grpc_server import M  # noqa: E402
from tests.official_albert.serving.test_grpc_server import release_and_stop  # noqa: E402
from tests.official_albert.serving.test_server import _wait_exit  # noqa: E402
from tests.official_albert.serving.test_server import REQUEST_TIMEOUT_S  # noqa: E402

TEXTS = ["a gripping film", "it crashes on start, every single time I open it"]
EVENT_TIMEOUT_S = 120  # the bound of each wait for an event (a loaded machine); none is expected to come near it


def test_the_drain_waits_for_requests_in_flight_past_drain_seconds():
  """`drain_then_exit` with a stand-in server: past drain_seconds it does not ask the server to exit while requests
  are in flight, and does once they are answered; a request stuck past the hard limit does not keep it alive."""
  async def scenario():
    state, server = types.SimpleNamespace(draining=True, in_flight=2), types.SimpleNamespace(should_exit=False)
    drain = asyncio.create_task(serve.drain_then_exit(server, state, drain_seconds=0.05, hard_limit_s=600))
    await asyncio.sleep(0.5)  # ten times drain_seconds
    assert not server.should_exit and not drain.done()
    state.in_flight = 0
    await asyncio.wait_for(drain, EVENT_TIMEOUT_S)
    assert server.should_exit
    stuck_state, stuck = types.SimpleNamespace(draining=True, in_flight=1), types.SimpleNamespace(should_exit=False)
    await asyncio.wait_for(serve.drain_then_exit(stuck, stuck_state, drain_seconds=0.0, hard_limit_s=0.2),
                           EVENT_TIMEOUT_S)
    assert stuck.should_exit and stuck_state.in_flight == 1

  asyncio.run(scenario())


@pytest.fixture(scope="module")
def classifier(tmp_path_factory, tiny_model_dirs):
  root = tmp_path_factory.mktemp("drain")
  return tiny.write_labels(tiny_model_dirs.copy("classifier", root / "cls"), LABELS)


def _wait_for(condition, what):
  deadline = time.monotonic() + EVENT_TIMEOUT_S
  while not condition():
    assert time.monotonic() < deadline, f"waited {EVENT_TIMEOUT_S} s for {what}"
    time.sleep(0.05)


def _queue_depth(server) -> float:
  metrics = httpx.get(f"{server.url}/metrics", timeout=REQUEST_TIMEOUT_S).text
  match = re.search(r'^albert_queue_depth\{model="cls"\} (\S+)$', metrics, re.M)
  return float(match.group(1)) if match else 0.0


def _check(labels, probabilities, want):
  """A served answer (labels, flat probabilities) against `classify`'s on the same texts."""
  assert labels == [w["label"] for w in want]
  np.testing.assert_allclose(np.reshape(probabilities, (len(want), -1)),
                             [[w["probabilities"][name] for name in LABELS] for w in want], atol=1e-5)


def _status(server, path, seconds_since_term):
  try:
    return httpx.get(f"{server.url}{path}", timeout=REQUEST_TIMEOUT_S).status_code
  except httpx.TransportError as e:
    raise AssertionError(f"{seconds_since_term:.1f} s after SIGTERM, with requests in flight, the HTTP port is "
                         f"closed: {e!r}") from e


def _still_draining(server, client, seconds_since_term):
  """One round of probes of a draining server; an AssertionError naming what failed (a closed port included)."""
  live, ready = (_status(server, path, seconds_since_term) for path in ("/v2/health/live", "/v2/health/ready"))
  try:
    refused = httpx.post(f"{server.url}/v2/models/cls/infer", json={"inputs": [
        {"name": "text", "datatype": "BYTES", "shape": [1], "data": [TEXTS[0]]}]}, timeout=REQUEST_TIMEOUT_S)
  except httpx.TransportError as e:
    raise AssertionError(f"{seconds_since_term:.1f} s after SIGTERM, with requests in flight, the HTTP port is "
                         f"closed: {e!r}") from e
  assert (live, ready, refused.status_code) == (200, 503, 503), refused.text
  assert refused.headers.get("retry-after") and "shutting down" in refused.json()["error"]
  with pytest.raises(grpc.RpcError) as refused_call:
    client.infer("cls", _text([TEXTS[0]]))
  assert refused_call.value.code() == grpc.StatusCode.UNAVAILABLE, refused_call.value
  assert client.ServerReady(M["ServerReadyRequest"](), timeout=REQUEST_TIMEOUT_S).ready is False


def _hold_queue_and_terminate(server, pool, gate, held_infer):
  """Holds `held_infer` (a gRPC call) inside the model, queues a REST request behind it, sends SIGTERM and waits
  for the server to turn not ready; returns (the held call's future, the queued request's future, when signalled)."""
  (gate / "hold").write_text("")
  held_call = pool.submit(held_infer)
  _wait_for(lambda: (gate / "held").exists(), "the gRPC call to reach the model")
  queued = pool.submit(lambda: httpx.post(f"{server.url}/v2/models/cls/infer", json={"inputs": [
      {"name": "text", "datatype": "BYTES", "shape": [1], "data": [TEXTS[1]]}]}, timeout=REQUEST_TIMEOUT_S))
  _wait_for(lambda: _queue_depth(server) == 1, "the REST request to wait in the queue")
  server.proc.send_signal(signal.SIGTERM)
  signalled = time.monotonic()
  _wait_for(lambda: _status(server, "/v2/health/ready", time.monotonic() - signalled) == 503,
            "the server to turn not ready")
  return held_call, queued, signalled


@pytest.mark.slow
@pytest.mark.timing
def test_sigterm_answers_requests_held_in_the_batcher_then_exits(classifier, tmp_path, monkeypatch):
  """A gRPC call held inside the model call and a REST request waiting in the queue behind it when SIGTERM comes:
  until they are answered — well past --drain_seconds — the server is up and draining (live 200, ready 503, new
  requests 503 / UNAVAILABLE); released, each gets `classify`'s answer on its text, and the process exits 0."""
  gate = tmp_path / "gate"
  gate.mkdir()
  monkeypatch.setenv("ALBERT_TEST_HOLD_DIR", str(gate))
  drain_seconds = 1.0
  server = _start(tmp_path, {"cls": classifier}, f"--drain_seconds={drain_seconds}",
                  module="tests.official_albert.serving.held_serve")
  client = Client(server.grpc_address)
  want = pipelines.classify(classifier, TEXTS)
  pool = concurrent.futures.ThreadPoolExecutor(2)
  try:
    held_call, queued, signalled = _hold_queue_and_terminate(
        server, pool, gate, lambda: _outputs(client.infer("cls", _text([TEXTS[0]]))))
    while time.monotonic() - signalled < drain_seconds + 2.0:  # past --drain_seconds, both still in flight
      _still_draining(server, client, time.monotonic() - signalled)
      time.sleep(0.1)
    assert server.proc.poll() is None and not held_call.done() and not queued.done()
    (gate / "hold").unlink()
    out = held_call.result(timeout=REQUEST_TIMEOUT_S)
    _check(out["label"][2], out["probabilities"][2], want[:1])
    answer = queued.result(timeout=REQUEST_TIMEOUT_S)
    assert answer.status_code == 200, answer.text
    outputs = {o["name"]: o["data"] for o in answer.json()["outputs"]}
    _check(outputs["label"], outputs["probabilities"], want[1:])
    assert _wait_exit(server.proc) == 0, server.log()
  finally:
    release_and_stop(gate, server, pool, client)


@pytest.mark.slow
@pytest.mark.timing
@pytest.mark.parametrize("second", [signal.SIGTERM, signal.SIGINT], ids=["sigterm", "sigint"])
def test_a_second_signal_during_the_drain_stops_at_once(classifier, tmp_path, monkeypatch, second):
  """A gRPC call held inside the model and a REST request in the queue behind it: after SIGTERM the server drains
  and waits for them (--drain_seconds=600, far past this test's bound); a second SIGTERM, or SIGINT, ends it while
  the call is still held — both requests cut (UNAVAILABLE, a closed connection) and exit status 128 + the signal, as
  docs/serving.md (Shutdown) says. Without it the server waits for the model call, which the gate holds."""
  gate = tmp_path / "gate"
  gate.mkdir()
  monkeypatch.setenv("ALBERT_TEST_HOLD_DIR", str(gate))
  server = _start(tmp_path, {"cls": classifier}, "--drain_seconds=600",
                  module="tests.official_albert.serving.held_serve")
  client = Client(server.grpc_address)
  pool = concurrent.futures.ThreadPoolExecutor(2)
  try:
    held_call, queued, signalled = _hold_queue_and_terminate(
        server, pool, gate, lambda: client.infer("cls", _text([TEXTS[0]])))
    _still_draining(server, client, time.monotonic() - signalled)  # the first signal alone: it waits for them
    assert server.proc.poll() is None and not held_call.done() and not queued.done()
    server.proc.send_signal(second)
    assert _wait_exit(server.proc, EVENT_TIMEOUT_S) == 128 + second, server.log()
    assert (gate / "hold").exists()  # (the model call was never released: the process ended with it inside)
    with pytest.raises(grpc.RpcError) as cut:
      held_call.result(timeout=EVENT_TIMEOUT_S)
    assert cut.value.code() == grpc.StatusCode.UNAVAILABLE, cut.value
    with pytest.raises(httpx.TransportError):
      queued.result(timeout=EVENT_TIMEOUT_S)
    assert f"{signal.Signals(second).name}: stopping at once; 2 requests in flight are cut" in server.log()
  finally:
    release_and_stop(gate, server, pool, client)
