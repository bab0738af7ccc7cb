"""`--workload=serving_load` (issue 43): the server under closed-loop and Poisson load beside the in-process model.

The test runs the workload end to end at the tiny size against a real server process (the SavedModel backend, fewer
levels; the closed loop over REST and over gRPC), and checks what its rows record and that every request was
answered; speed is never asserted. The knee rule
is checked on made-up rows. A stand-in HTTP server (`stand_in_server`: /metrics, and every infer request dropped or
refused; no model) checks that every request is counted answered, refused or lost, and that a server which answers
nothing fails the workload with its reason; test_benchmark_depthwise.py uses it too.
"""

import concurrent.futures
import contextlib
import http.server
import os
import socket
import threading
import types

import pytest

from experiments.benchmark import core as benchmark
from experiments.benchmark import driver
from experiments.benchmark import load_clients
from experiments.benchmark import server_load

STAND_IN_LOG = "ERROR stand-in: queue full, every request refused"


class _StandIn(http.server.BaseHTTPRequestHandler):
  """/metrics answers (an empty batch histogram); an infer request gets the server's `answer`: "drop" (the
  connection closed unanswered, as when the model's process dies mid-request) or that HTTP status."""
  protocol_version = "HTTP/1.1"

  def log_message(self, *args):
    pass

  def _send(self, status, body):
    self.send_response(status)
    self.send_header("Content-Length", str(len(body)))
    self.end_headers()
    self.wfile.write(body)

  def do_GET(self):
    self._send(200, b'albert_batch_size_sum{model="albert"} 0.0\nalbert_batch_size_count{model="albert"} 0.0\n')

  def do_POST(self):
    self.rfile.read(int(self.headers["Content-Length"]))
    if self.server.answer == "drop":
      self.connection.shutdown(socket.SHUT_RDWR)
      self.close_connection = True
    else:
      self._send(self.server.answer, b'{"error": "queue full"}')


class _StandInServer(http.server.ThreadingHTTPServer):
  request_queue_size = 128  # (the default 5 made 16 clients' SYNs wait out the kernel's 1 s / 3 s retransmits)


@contextlib.contextmanager
def stand_in_server(answer):
  """A localhost stand-in of the server that answers every infer request with `answer` ("drop" or a status);
  yields its port."""
  server = _StandInServer(("127.0.0.1", 0), _StandIn)
  server.answer = answer
  threading.Thread(target=server.serve_forever, daemon=True).start()
  try:
    yield server.server_address[1]
  finally:
    server.shutdown()
    server.server_close()


def stand_in_processes(port):
  """A class that takes `ServerProcess`' place: every server it "starts" is the stand-in at `port`, with a log that
  says why it refused, drained to exit 0."""

  class StandInProcess:
    def __init__(self, folder, max_batch_size, log_path, flags=(), grpc=False):
      self.port, self.grpc_address, self.log_path = port, None, log_path
      self.proc = types.SimpleNamespace(pid=os.getpid(), returncode=None)
      with open(log_path, "w", encoding="utf-8") as f:
        f.write(f"starting\n{STAND_IN_LOG}\n")

    def wait_ready(self):
      return self

    def stop(self):
      self.proc.returncode = 0

  return StandInProcess


def test_the_knee_is_the_highest_rate_kept_up_with_in_the_low_load_regime():
  def row(offered, achieved, p99):
    return {"offered_per_s": offered, "achieved_per_s": achieved, "p99_ms": p99}
  rows = [row(10, 10, 20), row(20, 19.8, 25), row(30, 29, 39), row(40, 35, 200), row(35, 34, 45)]
  assert server_load.knee(rows) == 35  # 40 is not kept up with; 30 and 35 stay within max(2 x 20, 20 + 50) ms
  assert server_load.knee([row(10, 5, 20)]) is None
  assert server_load.knee([row(10, 10, 20), row(20, 20, 80)]) == 10  # 80 ms > 70 ms: out of the low-load regime


def test_every_request_is_counted_answered_refused_or_lost_in_every_row():
  with stand_in_server("drop") as port:  # a dropped connection: neither a latency nor a dead client thread
    closed = server_load.closed_loop(port, ["a text"], concurrency=2, requests_per_client=3, max_seconds=60)
    level = server_load.poisson(port, ["a text"], rate=50.0, max_requests=6, max_seconds=1.0, seed=0)
    server = types.SimpleNamespace(port=port, proc=types.SimpleNamespace(pid=os.getpid()))
    soak = server_load.soak(server, ["a text"], total=6, max_seconds=60, concurrency=2)
  for row in (closed, level, soak):
    assert (row["requests"], row["answered"], row["refused"], row["lost"]) == (6, 0, 0, 6), row
  assert closed["errors"] == soak["errors"] == 6 and closed["requests_per_s"] == 0 and closed["p99_ms"] is None
  with stand_in_server(503) as port:
    closed = server_load.closed_loop(port, ["a text"], concurrency=2, requests_per_client=2, max_seconds=60)
    level = server_load.poisson(port, ["a text"], rate=50.0, max_requests=4, max_seconds=1.0, seed=0)
  for row in (closed, level):
    assert (row["requests"], row["answered"], row["refused"], row["lost"]) == (4, 0, 4, 0), row
  with pytest.raises(ValueError, match="rate must be > 0"):
    server_load.poisson(port, ["a text"], rate=0.0, max_requests=4, max_seconds=1.0, seed=0)


def test_grpc_tells_a_refusal_from_a_lost_connection():
  grpc = pytest.importorskip("grpc")
  from official_albert.serving import oip_grpc_messages

  def refuse(request, context):
    context.abort(grpc.StatusCode.UNAVAILABLE, "queue full")

  server = grpc.server(concurrent.futures.ThreadPoolExecutor(1))
  server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(
      oip_grpc_messages.SERVICE, {"ModelInfer": grpc.unary_unary_rpc_method_handler(refuse)}),))
  port = server.add_insecure_port("127.0.0.1:0")
  server.start()
  with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    closed_port = s.getsockname()[1]  # (nothing listens there once the socket is closed)
  try:
    refusing, unreachable = (load_clients.GrpcClient(f"127.0.0.1:{p}", "albert") for p in (port, closed_port))
    assert refusing.infer("a text") == load_clients.REFUSED  # UNAVAILABLE the server sent
    assert unreachable.infer("a text") == load_clients.LOST  # UNAVAILABLE of a connection that failed
    refusing.close(), unreachable.close()
  finally:
    server.stop(0)


@pytest.mark.parametrize("answer, refused, lost", [(503, 7, 0), ("drop", 0, 7)])
def test_a_server_that_answers_nothing_fails_the_workload_with_its_reason(monkeypatch, answer, refused, lost):
  pytest.importorskip("fastapi")
  monkeypatch.setattr(server_load, "CONCURRENCY", (1, 2))
  budget = dict(server_load._budget(benchmark.BenchSettings(preset="tiny")), requests_per_client=2, single_calls=3)
  monkeypatch.setattr(server_load, "_budget", lambda settings: budget)
  monkeypatch.setattr(server_load, "build_folders", lambda settings, root: {"saved_model": root})
  monkeypatch.setattr(server_load, "sentences", lambda settings: (["a text", "another text"], "test"))
  monkeypatch.setattr(server_load, "in_process", lambda folder, texts, batch_size, calls: {
      "mode": "in_process", "batch_size": batch_size, "calls": calls, "texts_per_s": 1.0, "p99_ms": 1.0})
  settings = benchmark.BenchSettings(workload="serving_load", preset="tiny", batch_size=4)
  with stand_in_server(answer) as port:
    monkeypatch.setattr(server_load, "ServerProcess", stand_in_processes(port))
    monkeypatch.setattr(server_load, "GrpcClient", lambda address, model: load_clients.HttpClient(port, model))
    result = server_load.server_load_workload(settings, log=lambda line: None)  # was: ZeroDivisionError
  assert result["status"] == "failed" and result["server_exit_codes"] == {"saved_model": 0}, result
  assert (f"saved_model: the server answered none of 7 closed-loop requests ({refused} refused, {lost} lost)"
          in result["reason"]) and STAND_IN_LOG in result["reason"]
  rows = {r["name"]: r for r in result["rows"]}
  assert not [name for name in rows if "poisson" in name or "soak" in name]  # no rate to scale them by
  assert rows["saved_model_closed_c2"]["requests"] == 4 and rows["saved_model_grpc_closed_c2"]["answered"] == 0
  assert result["knee_per_s"] == {"saved_model": None}


@pytest.mark.large
@pytest.mark.slow
@pytest.mark.timing
def test_the_workload_measures_a_real_server_and_loses_no_request(monkeypatch, tmp_path):
  pytest.importorskip("fastapi")
  real_build = server_load.build_folders
  monkeypatch.setattr(server_load, "build_folders", lambda s, root: {"saved_model": real_build(s, root)["saved_model"]})
  monkeypatch.setattr(server_load, "CONCURRENCY", (1, 4, 16))
  monkeypatch.setattr(server_load, "POISSON_FRACTIONS", (0.5, 1.0))
  # The level time is only a hang guard here: 400 sequential round trips at c=1 overran 10 s beside a loaded core.
  tiny_budget = dict(server_load._budget(benchmark.BenchSettings(preset="tiny")), soak_requests=100,
                     level_seconds=600.0)
  monkeypatch.setattr(server_load, "_budget", lambda settings: tiny_budget)
  settings = benchmark.BenchSettings(workload="serving_load", preset="tiny", batch_size=4, seq_length=32, seed=1)
  lines = []
  result = driver.run([settings], str(tmp_path), log=lines.append)["workloads"]["serving_load"]  # as the binary runs it
  assert result["status"] == "ok" and result["server_exit_codes"] == {"saved_model": 0}  # SIGTERM drained, exit 0
  rows = {r["name"]: r for r in result["rows"]}
  assert set(rows) == {"saved_model_in_process_b1", "saved_model_in_process_b4", "saved_model_closed_c1",
                       "saved_model_closed_c4", "saved_model_closed_c16", "saved_model_grpc_closed_c1",
                       "saved_model_grpc_closed_c4", "saved_model_grpc_closed_c16", "saved_model_poisson_0.5",
                       "saved_model_poisson_1", "saved_model_soak"}
  for c in (1, 4, 16):
    for transport in ("", "grpc_"):  # OIP over REST, then the same levels over gRPC
      closed = rows[f"saved_model_{transport}closed_c{c}"]
      # every request answered; concurrency 1 sends the in-process batch-1 row's texts (one sample for both p99s)
      sent = rows["saved_model_in_process_b1"]["calls"] if c == 1 else 8 * c
      assert closed["errors"] == 0 and closed["requests"] == sent, closed
      assert closed["requests_per_s"] > 0 and closed["p50_ms"] <= closed["p99_ms"]
      assert 1 <= closed["mean_batch_size"] <= 4  # batches the server ran, from its /metrics
  assert rows["saved_model_grpc_closed_c4"]["transport"] == "grpc"
  for transport in ("", "grpc_"):  # one client: nothing to batch with
    assert rows[f"saved_model_{transport}closed_c1"]["mean_batch_size"] == 1
  for name in ("saved_model_poisson_0.5", "saved_model_poisson_1"):
    assert rows[name]["answered"] == rows[name]["requests"] and rows[name]["refused"] == rows[name]["lost"] == 0
  assert {g["goal"].split(":")[0] for g in result["goals"]} == {"saved_model"} and len(result["goals"]) == 2
  assert {g["status"] for g in result["goals"]} <= {"met", "missed"}
  assert sum("[serving_load] goal saved_model:" in line for line in lines) == 2  # the goals as the driver prints them
  assert rows["saved_model_in_process_b4"]["texts_per_s"] > 0
  soak = rows["saved_model_soak"]
  assert soak["requests"] == soak["answered"] == 100 and soak["errors"] == 0 and soak["first"] == 10
  assert soak["rss_after_first_mib"] > 0 and soak["rss_at_end_mib"] > 0 and soak["rss_growth"] is not None


def test_the_server_runs_the_benchmark_process_kernels(monkeypatch, tmp_path):
  """The server's rows are held against in-process rows of this process: both run one kind of oneDNN kernel (left
  to its default the server turned frozen-weight kernels on, 1.3-1.5x at bf16 on AMX, and the other side did not)."""
  from official_albert.precision import FROZEN_WEIGHTS_ENV
  assert server_load.server_kernel_flag({}) == "--nofrozen_weight_kernels"
  assert server_load.server_kernel_flag({FROZEN_WEIGHTS_ENV: "1"}) == "--frozen_weight_kernels"
  started = []
  monkeypatch.setattr(server_load.subprocess, "Popen", lambda args, **kw: started.append(args))
  for value, flag in (("0", "--nofrozen_weight_kernels"), ("1", "--frozen_weight_kernels")):
    monkeypatch.setenv(FROZEN_WEIGHTS_ENV, value)
    server_load.ServerProcess("folder", 4, str(tmp_path / "server.log"))
    assert [a for a in started[-1] if a.endswith("frozen_weight_kernels")] == [flag]
  # and the workload may run in a frozen-weight child, server and in-process rows alike
  driver.check_settings(benchmark.BenchSettings(workload="serving_load", frozen_weight_kernels=True))
