"""`--workload=serving_load` (issue 43): the server under closed-loop and Poisson load beside the in-process model.

The test runs the workload end to end at the tiny size against a real server process (the SavedModel backend, fewer
levels; the closed loop over REST and over gRPC), and checks what its rows record and that every request was
answered; speed is never asserted. The knee rule
is checked on made-up rows.
"""

import pytest

from experiments.benchmark import core as benchmark
from experiments.benchmark import driver
from experiments.benchmark import server_load


def test_the_knee_is_the_highest_rate_kept_up_with_in_the_low_load_regime():
  def row(offered, achieved, p99):
    return {"offered_per_s": offered, "achieved_per_s": achieved, "p99_ms": p99}
  rows = [row(10, 10, 20), row(20, 19.8, 25), row(30, 29, 39), row(40, 35, 200), row(35, 34, 45)]
  assert server_load.knee(rows) == 35  # 40 is not kept up with; 30 and 35 stay within max(2 x 20, 20 + 50) ms
  assert server_load.knee([row(10, 5, 20)]) is None
  assert server_load.knee([row(10, 10, 20), row(20, 20, 80)]) == 10  # 80 ms > 70 ms: out of the low-load regime


@pytest.mark.large
@pytest.mark.slow
@pytest.mark.timing
def test_the_workload_measures_a_real_server_and_loses_no_request(monkeypatch, tmp_path):
  pytest.importorskip("fastapi")
  real_build = server_load.build_folders
  monkeypatch.setattr(server_load, "build_folders", lambda s, root: {"saved_model": real_build(s, root)["saved_model"]})
  monkeypatch.setattr(server_load, "CONCURRENCY", (1, 4, 16))
  monkeypatch.setattr(server_load, "POISSON_FRACTIONS", (0.5, 1.0))
  tiny_budget = dict(server_load._budget(benchmark.BenchSettings(preset="tiny")), soak_requests=100)
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
    assert rows[name]["answered"] + rows[name]["refused"] == rows[name]["requests"] and rows[name]["refused"] == 0
  assert {g["goal"].split(":")[0] for g in result["goals"]} == {"saved_model"} and len(result["goals"]) == 2
  assert {g["status"] for g in result["goals"]} <= {"met", "missed"}
  assert sum("[serving_load] goal saved_model:" in line for line in lines) == 2  # the goals as the driver prints them
  assert rows["saved_model_in_process_b4"]["texts_per_s"] > 0
  soak = rows["saved_model_soak"]
  assert soak["requests"] == 100 and soak["errors"] == 0 and soak["first"] == 10
  assert soak["rss_after_first_mib"] > 0 and soak["rss_at_end_mib"] > 0 and soak["rss_growth"] is not None
