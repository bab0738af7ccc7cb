"""`--workload=serving_load`: the inference server (`official_albert.serve`) under load, beside the same model in
process (issue 43).

For each backend (a classifier SavedModel; an OpenVINO export where the extra is installed) of the preset's shape
(random weights, the benchmark's SentencePiece model), the workload starts `python -m official_albert.serve` on a free
localhost port and measures, one text per request:
- closed loop at concurrency 1, 4, 16, 64 (each client sends its next request when the last is answered): requests/s,
  p50 / p95 / p99 latency, the mean batch the server ran (from its /metrics); over OIP's REST route, then the same
  levels over its gRPC transport (`--grpc_port`; the `grpc_closed_c*` rows);
- the in-process pipeline on the same folder at batch 1 and at `--batch_size` (`served_model.ServedModel.predict`,
  the function the server's batcher calls): texts/s and the latency of a call;
- an open-loop Poisson sweep (arrivals at exponential gaps, whatever the answers do) at fractions of the best
  closed-loop throughput, each level bounded in requests and seconds: offered and achieved rate, p50 / p99, refusals.
  The knee is the highest offered rate the server still keeps up with (achieved ≥ 95% of the rate sent) without its
  p99 leaving the low-load regime (≤ 2× the lowest rate's p99, or + 50 ms).

A soak (10,000 requests at the tiny size, 2,000 otherwise, at concurrency 16) reads the server's RSS after the first
tenth and at the end. Every loop is bounded in count and time and stops by itself; the server is stopped at the end
(SIGTERM, its drain). The `serving` workload (the SavedModel hop in process) is a different measurement, kept.

Long because: the server's process, the three load loops (closed, Poisson, soak) and the run of one backend that
binds them share one budget and one row format, and read together; the clients and their counting are in
`load_clients`.
"""

from __future__ import annotations

import concurrent.futures
import http.client
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any, Callable, Dict, List, Optional, Sequence

import numpy as np

from experiments.benchmark.core import BenchSettings
from experiments.benchmark.core import default_spm
from experiments.benchmark.core import load_config
from experiments.benchmark.core import REPO_ROOT
from experiments.benchmark.core import sentences
from experiments.benchmark.load_clients import ANSWERED
from experiments.benchmark.load_clients import GrpcClient
from experiments.benchmark.load_clients import HttpClient
from experiments.benchmark.load_clients import run_clients
from experiments.benchmark.load_clients import Tally

CONCURRENCY = (1, 4, 16, 64)
POISSON_FRACTIONS = (0.25, 0.5, 0.75, 0.9, 1.0, 1.1, 1.25)
START_TIMEOUT_S = 600
MODEL = "albert"


def _budget(settings: BenchSettings) -> Dict[str, float]:
  """Requests and seconds per level: small for the tiny preset (the test), larger otherwise."""
  if settings.preset == "tiny":
    return {"requests_per_client": 8, "level_seconds": 10.0, "poisson_seconds": 4.0, "poisson_requests": 120,
            "in_process_repeats": 20, "single_calls": 400, "soak_requests": 10_000, "soak_seconds": 600.0}
  return {"requests_per_client": 30, "level_seconds": 60.0, "poisson_seconds": 20.0, "poisson_requests": 2000,
          "in_process_repeats": 20, "single_calls": 400, "soak_requests": 2_000, "soak_seconds": 600.0}


def build_folders(settings: BenchSettings, root: str) -> Dict[str, str]:
  """{backend: folder}: a classifier model directory of the preset's shape, its SavedModel and OpenVINO exports."""
  import keras

  from official_albert import model_directory as md
  from official_albert.checkpoints.loading import build_model
  from official_albert.checkpoints.native import save_pretrained
  from official_albert.serving import export
  from official_albert.tokenization import FullTokenizer
  spm = default_spm(settings)
  config = load_config(settings.preset).inference_copy().replace(vocab_size=FullTokenizer(spm).vocab_size)
  seq_length = min(settings.seq_length, config.max_position_embeddings)  # (the tiny preset has 64 positions)
  keras.utils.set_random_seed(settings.seed)
  model = build_model("classifier", config, settings.num_labels)
  model_dir = os.path.join(root, "model")
  save_pretrained(model, model_dir, spm_model_file=spm)
  md.write_label_file(model_dir, md.LabelFile([f"label_{i}" for i in range(settings.num_labels)]))
  folders = {"saved_model": export.export_from_model_dir(model_dir, os.path.join(root, "saved_model"),
                                                         head="classifier", seq_length=seq_length)}
  try:
    from official_albert.serving import openvino_export
  except ImportError:  # the OpenVINO extra is optional
    return folders
  folders["openvino"] = openvino_export.export_openvino(model_dir, os.path.join(root, "openvino"), "classifier",
                                                        "f32", seq_length=seq_length)
  return folders


class ServerProcess:
  """`python -m official_albert.serve` on a free localhost port, serving one folder as `MODEL` (`flags`: more of the
  server's flags, e.g. `--patience=5 --depthwise_batching`; `grpc`: also OIP over gRPC, at `grpc_address`)."""

  def __init__(self, folder: str, max_batch_size: int, log_path: str, flags: Sequence[str] = (), grpc: bool = False):
    self.port = _free_port()
    self.grpc_address = f"127.0.0.1:{_free_port()}" if grpc else None
    grpc_flags = [f"--grpc_port={self.grpc_address.rsplit(':', 1)[1]}"] if grpc else []
    args = [sys.executable, "-m", "official_albert.serve", f"--model_dir={folder}", f"--model_name={MODEL}",
            f"--port={self.port}", f"--max_batch_size={max_batch_size}", "--batch_timeout_ms=5", "--max_queue=4096",
            "--drain_seconds=0", server_kernel_flag(), *grpc_flags, *flags]
    # The repository first; the caller's PYTHONPATH kept after it.
    kept = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    pythonpath = os.pathsep.join([str(REPO_ROOT)] + kept)
    env = dict(os.environ, PYTHONPATH=pythonpath, TF_CPP_MIN_LOG_LEVEL="2")
    self.log_path = log_path
    with open(log_path, "wb") as log:
      self.proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, env=env)

  def wait_ready(self) -> "ServerProcess":
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
      if self.proc.poll() is not None:
        raise RuntimeError(f"the server exited with {self.proc.returncode}: see {self.log_path}")
      try:
        if _get(self.port, "/v2/health/ready")[0] == 200:
          return self
      except OSError:
        pass
      time.sleep(0.5)
    raise RuntimeError(f"the server was not ready within {START_TIMEOUT_S} s: see {self.log_path}")

  def stop(self) -> None:
    if self.proc.poll() is None:
      self.proc.send_signal(signal.SIGTERM)
      try:
        self.proc.wait(timeout=120)
      except subprocess.TimeoutExpired:
        self.proc.kill()
        self.proc.wait(timeout=60)


def server_kernel_flag(environ=None) -> str:
  """The server's `--[no]frozen_weight_kernels`, set to this process's own setting.

  Why: the server turns TensorFlow's frozen-weight oneDNN kernels on by default, and on a CPU with AMX they are worth
  1.3-1.5x at bf16 (docs/performance.md); the in-process rows this workload compares with run this process's kernels.
  Left to its default, the server would be measured with faster kernels than the pipeline it is held against. Run
  the workload with `--frozen_weight_kernels` to measure both sides as `albert-serve` serves by default.
  """
  from official_albert.precision import frozen_weight_kernels_enabled
  return "--frozen_weight_kernels" if frozen_weight_kernels_enabled(environ) else "--nofrozen_weight_kernels"


def _free_port() -> int:
  with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    return s.getsockname()[1]


def _get(port: int, path: str):
  conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
  try:
    conn.request("GET", path)
    response = conn.getresponse()
    return response.status, response.read()
  finally:
    conn.close()


def batch_stats(port: int) -> Dict[str, float]:
  """The server's batch-size histogram totals (`albert_batch_size` sum and count) from /metrics."""
  text = _get(port, "/metrics")[1].decode()
  out = {}
  for key in ("sum", "count"):
    match = re.search(rf'^albert_batch_size_{key}\{{model="{MODEL}"\}} (\S+)$', text, re.M)
    out[key] = float(match.group(1)) if match else 0.0
  return out


def _percentiles(latencies: Sequence[float]) -> Dict[str, float]:
  if not latencies:
    return {"p50_ms": None, "p95_ms": None, "p99_ms": None}
  values = np.percentile(np.asarray(latencies) * 1e3, [50, 95, 99])
  return {"p50_ms": round(float(values[0]), 2), "p95_ms": round(float(values[1]), 2),
          "p99_ms": round(float(values[2]), 2)}


def closed_loop(port: int, texts: Sequence[str], concurrency: int, requests_per_client: int,
                max_seconds: float, make_client: Optional[Callable[[], Any]] = None) -> Dict[str, Any]:
  """`concurrency` clients, each sending its next request when the last is answered, until each has sent
  `requests_per_client` or `max_seconds` have passed. `make_client`: a new client per thread (default: OIP over HTTP
  on `port`; `load_clients.GrpcClient` for the gRPC rows). Every request sent is answered, refused or lost
  (`requests` their sum; `errors` = refused + lost); requests/s counts the answered ones."""
  tally = Tally()
  before = batch_stats(port)
  stop_at = time.monotonic() + max_seconds

  def client(index: int) -> None:
    c = make_client() if make_client else HttpClient(port, MODEL)
    try:
      for k in range(requests_per_client):
        if time.monotonic() > stop_at:
          break
        t0 = time.perf_counter()
        outcome = c.infer(texts[(index * requests_per_client + k) % len(texts)])
        tally.add(outcome, time.perf_counter() - t0)
    finally:
      c.close()

  start = time.perf_counter()
  run_clients(client, concurrency)
  elapsed = time.perf_counter() - start
  after = batch_stats(port)
  batches = after["count"] - before["count"]
  counts = tally.row()
  return {"mode": "closed", "concurrency": concurrency, **counts, "errors": counts["refused"] + counts["lost"],
          "requests_per_s": round(counts["answered"] / elapsed, 3),
          "mean_batch_size": round((after["sum"] - before["sum"]) / batches, 2) if batches else None,
          **_percentiles(tally.latencies)}


def poisson(port: int, texts: Sequence[str], rate: float, max_requests: int, max_seconds: float,
            seed: int) -> Dict[str, Any]:
  """Open loop: requests at exponential gaps of mean 1 / `rate`, sent whatever the answers do (a pool of 128
  senders), `min(max_requests, rate · max_seconds)` of them; latency counts from each request's planned send. Every
  request is answered, refused or lost (`requests` their sum): each sender's future is read."""
  if not rate > 0:
    raise ValueError(f"poisson: the rate must be > 0 requests/s, got {rate} (a closed loop that answered nothing "
                     "sets no rate: see server_load.answered_none)")
  count = max(1, min(max_requests, int(rate * max_seconds)))
  gaps = np.random.default_rng(seed).exponential(1.0 / rate, size=count)
  local = threading.local()
  tally = Tally()

  def send(planned: float, text: str) -> None:
    if not hasattr(local, "client"):
      local.client = HttpClient(port, MODEL)
    outcome = local.client.infer(text)
    tally.add(outcome, time.perf_counter() - planned)

  start = time.perf_counter()
  with concurrent.futures.ThreadPoolExecutor(max_workers=128) as pool:
    planned, futures = start, []
    for k, gap in enumerate(gaps):
      planned += float(gap)
      delay = planned - time.perf_counter()
      if delay > 0:
        time.sleep(delay)
      futures.append(pool.submit(send, planned, texts[k % len(texts)]))
  elapsed = time.perf_counter() - start
  for future in futures:
    future.result()  # (a failed connection came back LOST; anything else a sender raised is raised here)
  counts = tally.row()
  # The rate this draw of gaps offered (a short sweep level's draw is off the nominal rate by ~1/sqrt(count)).
  sent = count / float(gaps.sum())
  return {"mode": "poisson", "offered_per_s": round(rate, 3), "sent_per_s": round(sent, 3), **counts,
          "achieved_per_s": round(counts["answered"] / elapsed, 3), **_percentiles(tally.latencies)}


def answered_none(what: str, rows: Sequence[Dict[str, Any]], log_path: str) -> str:
  """The reason a workload fails when its closed loop (`rows`) answered nothing, every request refused or lost, so
  that there is no rate to scale a Poisson sweep by: the counts and the end of the server's log (`log_path`, in a
  temporary folder that is gone when the workload returns)."""
  refused, lost = sum(r["refused"] for r in rows), sum(r["lost"] for r in rows)
  try:
    with open(log_path, "rb") as f:
      f.seek(max(0, os.path.getsize(log_path) - 2000))
      tail = " | ".join(f.read().decode("utf-8", "replace").splitlines()[-10:]) or "(empty)"
  except OSError as e:
    tail = f"(unreadable: {e})"
  return (f"{what}: the server answered none of {refused + lost} closed-loop requests ({refused} refused, {lost} "
          f"lost), so the Poisson sweep had no rate to scale; the end of its log "
          f"({os.path.basename(log_path)}): {tail}")


def rss_bytes(pid: int) -> Optional[int]:
  """The process's resident set size (Linux /proc), None elsewhere."""
  try:
    with open(f"/proc/{pid}/status") as f:
      return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmRSS:"))
  except (OSError, StopIteration, ValueError):
    return None


def soak(server: ServerProcess, texts: Sequence[str], total: int, max_seconds: float,
         concurrency: int = 16) -> Dict[str, Any]:
  """`total` requests at `concurrency` (closed loop), the server's RSS read after the first tenth is answered and
  at the end: a server that keeps something per request grows between the two. Counts as `closed_loop`'s."""
  checkpoint = max(1, total // 10)
  tally = Tally()
  lock = threading.Lock()
  marks: Dict[str, Optional[int]] = {}
  stop_at = time.monotonic() + max_seconds
  counter = iter(range(total))

  def client(_: int) -> None:
    c = HttpClient(server.port, MODEL)
    try:
      while time.monotonic() < stop_at:
        with lock:
          k = next(counter, None)
        if k is None:
          return
        outcome = c.infer(texts[k % len(texts)])
        if tally.add(outcome) == checkpoint and outcome == ANSWERED:  # (one thread's answer is the checkpoint's)
          marks["rss_first"] = rss_bytes(server.proc.pid)
    finally:
      c.close()

  run_clients(client, concurrency)
  first, last = marks.get("rss_first"), rss_bytes(server.proc.pid)
  growth = (last / first - 1.0) if first and last else None
  counts = tally.row()
  return {"mode": "soak", **counts, "errors": counts["refused"] + counts["lost"], "rss_after_first_mib": _mib(first),
          "first": checkpoint, "rss_at_end_mib": _mib(last), "rss_growth": None if growth is None else round(growth, 4)}


def _mib(value: Optional[int]) -> Optional[float]:
  return None if value is None else round(value / 2**20, 1)


def knee(rows: Sequence[Dict[str, Any]]) -> Optional[float]:
  """The highest offered rate kept up with (achieved ≥ 95% of the rate its arrivals were sent at) with p99 ≤
  max(2 × the lowest rate's p99, that p99 + 50 ms); None when not even the lowest rate was."""
  rows = sorted((r for r in rows if r["p99_ms"] is not None), key=lambda r: r["offered_per_s"])
  if not rows:
    return None
  limit = max(2 * rows[0]["p99_ms"], rows[0]["p99_ms"] + 50.0)
  best = None
  for r in rows:
    if r["achieved_per_s"] >= 0.95 * r.get("sent_per_s", r["offered_per_s"]) and r["p99_ms"] <= limit:
      best = r["offered_per_s"]
  return best


def in_process(folder: str, texts: Sequence[str], batch_size: int, repeats: int) -> Dict[str, Any]:
  """The served model's own `predict` (what the server's batcher calls) in this process, `batch_size` texts a call.

  The calls walk the same texts the clients send (consecutive texts of the list, `repeats` calls), so that the rows
  compare one text mix: texts/s = texts / total time, latency = the median call, p50 / p95 / p99 of the calls.
  """
  from official_albert.serving.served_model import ServedModel
  model = ServedModel(MODEL, folder)
  model.predict([texts[i % len(texts)] for i in range(batch_size)])  # warm-up (tracing, first kernels)
  times = []
  for call in range(repeats):
    batch = [texts[(call * batch_size + i) % len(texts)] for i in range(batch_size)]
    t0 = time.perf_counter()
    model.predict(batch)
    times.append(time.perf_counter() - t0)
  return {"mode": "in_process", "batch_size": batch_size, "calls": repeats,
          "texts_per_s": round(batch_size * repeats / sum(times), 3),
          "latency_ms": round(float(np.median(times)) * 1e3, 2), **_percentiles(times)}


def _goals(backend: str, rows: Dict[str, Dict[str, Any]], batch_size: int) -> List[Dict[str, Any]]:
  c16, c1 = rows.get("closed_c16"), rows.get("closed_c1")
  batched, single = rows.get(f"in_process_b{batch_size}"), rows.get("in_process_b1")
  goals = []
  if c16 and batched:
    ratio = c16["requests_per_s"] / batched["texts_per_s"]
    goals.append({"goal": f"{backend}: concurrency 16 >= 0.8x in-process batch {batch_size}", "ratio": round(ratio, 3),
                  "status": "met" if ratio >= 0.8 else "missed"})
  if c1 and single and c1["p99_ms"] is not None:
    margin = c1["p99_ms"] - single["p99_ms"]  # tails compared over the same texts
    goals.append({"goal": f"{backend}: p99 at concurrency 1 <= in-process batch-1 p99 + 5 ms",
                  "margin_ms": round(margin, 2), "status": "met" if margin <= 5.0 else "missed"})
  return goals


def in_process_calls(batch_size: int, budget: Dict[str, float]) -> int:
  """Calls of the in-process row at `batch_size`. Batch 1 gets `single_calls` (400): its p99 is one of issue 43's bars,
  and the p99 of 80 calls is their second-largest, one stall away from another number."""
  return int(budget["single_calls"] if batch_size == 1 else budget["in_process_repeats"])


# Long because: one backend's whole measurement (server start, closed levels, in-process rows, the Poisson sweep, the
# server's stop) in the order it runs, so that the bounds of every loop read together.
def run_backend(backend: str, folder: str, settings: BenchSettings, texts: Sequence[str], log,
                work_dir: str) -> Dict[str, Any]:
  budget = _budget(settings)
  rows: Dict[str, Dict[str, Any]] = {}
  for b in sorted({1, settings.batch_size}):
    rows[f"in_process_b{b}"] = in_process(folder, texts, b, in_process_calls(b, budget))
    log(f"[serving_load] {backend} in process b{b}: {rows[f'in_process_b{b}']}")
  server = ServerProcess(folder, settings.batch_size, os.path.join(work_dir, f"server_{backend}.log"),
                         grpc=True).wait_ready()
  try:
    # Concurrency 1 sends as many texts as the in-process batch-1 row called, the same ones, so that the two p99s
    # (one bar of issue 43) are tails of one text mix and one sample size (30 requests made the p99 their maximum).
    sent = {c: in_process_calls(1, budget) if c == 1 else int(budget["requests_per_client"]) for c in CONCURRENCY}
    for c in CONCURRENCY:
      rows[f"closed_c{c}"] = closed_loop(server.port, texts, c, sent[c], budget["level_seconds"])
      log(f"[serving_load] {backend} closed c{c}: {rows[f'closed_c{c}']}")
    for c in CONCURRENCY:  # the same closed loop over OIP's gRPC transport (same server, batcher and model)
      rows[f"grpc_closed_c{c}"] = {**closed_loop(server.port, texts, c, sent[c], budget["level_seconds"],
                                                 lambda: GrpcClient(server.grpc_address, MODEL)), "transport": "grpc"}
      log(f"[serving_load] {backend} gRPC closed c{c}: {rows[f'grpc_closed_c{c}']}")
    # The sweep's scale: the best closed-loop throughput (on 2 cores albert-base peaks at concurrency 1: batching
    # pads every text to its batch's longest and the cores are full at one text).
    base = max(rows[f"closed_c{c}"]["requests_per_s"] for c in CONCURRENCY)
    sweep, failure = [], None
    if base <= 0:  # every request refused or lost: no sweep to scale, and a soak would only count more of them
      failure = answered_none(backend, [rows[f"closed_c{c}"] for c in CONCURRENCY], server.log_path)
      log(f"[serving_load] {failure}")
    for i, fraction in enumerate(POISSON_FRACTIONS if failure is None else ()):
      row = poisson(server.port, texts, base * fraction, int(budget["poisson_requests"]), budget["poisson_seconds"],
                    settings.seed + i)
      rows[f"poisson_{fraction:g}"] = row
      sweep.append(row)
      log(f"[serving_load] {backend} poisson {fraction:g}x: {row}")
    if failure is None:
      rows["soak"] = soak(server, texts, int(budget["soak_requests"]), budget["soak_seconds"])
      log(f"[serving_load] {backend} soak: {rows['soak']}")
  finally:
    server.stop()
  named = [{"name": f"{backend}_{key}", "backend": backend, **row} for key, row in rows.items()]
  return {"rows": named, "knee_per_s": knee(sweep), "goals": _goals(backend, rows, settings.batch_size),
          "server_exit_code": server.proc.returncode, "failure": failure}


def server_load_workload(settings: BenchSettings, log=print) -> Dict[str, Any]:
  """The rows of the module docstring for every backend available; `settings.batch_size` is the server's
  `--max_batch_size` and the in-process batch compared with it. Status "failed" (the other backends still measured)
  when a backend's server answered none of its closed-loop requests, the reason naming its counts and log."""
  try:
    import fastapi  # noqa: F401
  except ImportError as e:
    return {"status": "skipped", "reason": f"the serve extra (requirements-serve.txt) is not installed: {e}"}
  texts, source = sentences(settings)
  out: Dict[str, Any] = {"status": "ok", "texts": source, "rows": [], "knee_per_s": {}, "goals": []}
  with tempfile.TemporaryDirectory(prefix="albert_bench_server_") as root:
    for backend, folder in build_folders(settings, root).items():
      result = run_backend(backend, folder, settings, texts, log, root)
      out["rows"] += result["rows"]
      out["knee_per_s"][backend] = result["knee_per_s"]
      out["goals"] += result["goals"]
      out.setdefault("server_exit_codes", {})[backend] = result["server_exit_code"]
      if result["failure"]:
        out.update(status="failed", reason="; ".join(filter(None, [out.get("reason"), result["failure"]])))
  return out
