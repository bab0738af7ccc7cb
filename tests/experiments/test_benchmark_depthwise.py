"""`--workload=depthwise_serving` (issue 47): the three ways of serving an exit-head classifier under one Poisson
sweep. The summary rules are checked on made-up rows; the workload runs end to end at the tiny size against real
server processes (every request answered, each server drained to exit 0, the rows and summary recorded); speed is
never asserted. Against the stand-in server of test_benchmark_server_load.py (no model), a server that answers
nothing fails the workload with its reason."""

import keras
import numpy as np
import pytest

from experiments.benchmark import core as benchmark
from experiments.benchmark import depthwise_load
from experiments.benchmark import driver
from tests import tiny
from tests.experiments.test_benchmark_server_load import STAND_IN_LOG
from tests.experiments.test_benchmark_server_load import stand_in_processes
from tests.experiments.test_benchmark_server_load import stand_in_server


def _row(offered, achieved, p99):
  return {"offered_per_s": offered, "sent_per_s": offered, "achieved_per_s": achieved, "p99_ms": p99}


def test_held_rates_and_ratios():
  sweeps = {"full_depth": [_row(10, 10, 20), _row(20, 20, 30), _row(40, 30, 900)],
            "in_call_exit": [_row(10, 10, 20), _row(20, 20, 30), _row(40, 39, 40)],
            "depthwise": [_row(10, 10, 15), _row(20, 20, 20), _row(40, 40, 35), _row(60, 50, 500)]}
  summary = depthwise_load.summarize(sweeps, layers=12, exit_mean=6.0)
  assert summary["full_depth_held_per_s"] == 20 and summary["p99_bound_ms"] == 36.0  # 1.2 x full depth's 30 ms
  assert summary["in_call_exit_held_per_s"] == 20  # 40/s is kept up with, but its p99 (40 ms) is above the bound
  assert summary["depthwise_held_per_s"] == 40 and summary["depthwise_vs_full_depth"] == 2.0
  assert summary["depthwise_vs_in_call_exit"] == 2.0 and summary["ideal_speedup"] == 2.0
  assert depthwise_load.server_flags("depthwise", 5, 16) == ["--patience=5", "--depthwise_batching", "--slots=16"]
  assert depthwise_load.server_flags("full_depth", 5, 16) == []
  assert depthwise_load.server_flags("depthwise_full_depth", 5, 16) == ["--depthwise_batching", "--slots=16"]
  assert depthwise_load.server_flags("depthwise_one_bucket", 5, 16)[-1] == "--length_buckets=none"
  assert depthwise_load.server_flags("depthwise", 5, 16, 3)[-1] == "--depthwise_iterations=3"
  assert depthwise_load.server_flags("in_call_exit", 5, 16, 3) == ["--patience=5"]
  assert depthwise_load.server_flags("in_call_exit_openvino", 5, 16, 3) == []  # (patience fixed in the export)
  assert depthwise_load.server_flags("depthwise_openvino", 5, 16)[-1] == "--depthwise_runtime=openvino"


def test_openvino_modes_are_held_to_openvino_full_depth():
  sweeps = {"full_depth": [_row(10, 10, 20), _row(20, 20, 30), _row(40, 30, 900)],
            "depthwise": [_row(10, 10, 15), _row(20, 20, 20), _row(40, 40, 35)],
            "full_depth_openvino": [_row(10, 10, 10), _row(20, 20, 15), _row(40, 40, 20), _row(60, 40, 800)],
            "in_call_exit_openvino": [_row(10, 10, 10), _row(20, 20, 20), _row(40, 40, 30)],
            "depthwise_openvino": [_row(10, 10, 10), _row(20, 20, 12), _row(40, 40, 20), _row(60, 60, 24)]}
  summary = depthwise_load.summarize(sweeps, layers=12, exit_mean=6.0)
  assert summary["p99_bound_ms"] == 36.0 and summary["p99_bound_openvino_ms"] == 24.0  # 1.2 x each runtime's
  assert summary["full_depth_openvino_held_per_s"] == 40
  assert summary["in_call_exit_openvino_held_per_s"] == 20  # 30 ms at 40/s: above OpenVINO's bound, not TF's
  assert summary["depthwise_openvino_held_per_s"] == 60 and summary["depthwise_openvino_vs_full_depth_openvino"] == 1.5
  assert summary["depthwise_openvino_vs_in_call_exit_openvino"] == 3.0
  assert summary["depthwise_vs_full_depth"] == 2.0 and "depthwise_vs_in_call_exit" not in summary  # (not served)
  sweeps["full_depth"] = [_row(10, 5, 20)]  # TensorFlow full depth held nothing: the OpenVINO verdicts still stand
  summary = depthwise_load.summarize(sweeps, layers=12, exit_mean=6.0)
  assert summary["note"] == "full depth kept up with no offered rate" and summary["depthwise_held_per_s"] is None
  assert summary["depthwise_openvino_vs_in_call_exit_openvino"] == 3.0
  budget = {"modes": depthwise_load.MODES}
  settings = benchmark.BenchSettings(workload="depthwise_serving", openvino=True)
  assert depthwise_load.served_modes(settings, budget) == list(depthwise_load.MODES + depthwise_load.OPENVINO_MODES)
  settings = benchmark.BenchSettings(workload="depthwise_serving", rows=("depthwise_openvino", "in_call_exit"))
  assert depthwise_load.served_modes(settings, budget) == ["full_depth", "in_call_exit", "depthwise_openvino"]
  with pytest.raises(ValueError, match="no such mode.*depthwise_tpu"):
    depthwise_load.served_modes(benchmark.BenchSettings(rows=("depthwise_tpu",)), budget)


@pytest.mark.parametrize("answer, refused, lost", [(503, 64, 0), ("drop", 0, 64)])
def test_a_server_that_answers_nothing_fails_the_workload_with_its_reason(monkeypatch, tmp_path, answer, refused,
                                                                           lost):
  pytest.importorskip("fastapi")
  monkeypatch.setattr(depthwise_load, "labelled_texts", lambda settings: (["a text", "b text"], np.asarray([0, 1])))
  monkeypatch.setattr(depthwise_load, "quality", lambda model_dir, texts, labels, patience: {
      "num_hidden_layers": 4, "seq_length": 32, "full_depth": {"accuracy": 0.5, "exit_mean": 4.0},
      "patience": {"accuracy": 0.5, "exit_mean": 2.0}})
  settings = benchmark.BenchSettings(workload="depthwise_serving", preset="tiny", batch_size=4, patience=(1,),
                                     model_dir=str(tmp_path), eval_file=str(tmp_path / "dev.tsv"))
  budget = dict(depthwise_load._budget(settings), closed_seconds=600.0)  # only a hang guard: the count is asserted
  monkeypatch.setattr(depthwise_load, "_budget", lambda settings: budget)
  with stand_in_server(answer) as port:
    monkeypatch.setattr(depthwise_load, "ServerProcess", stand_in_processes(port))
    result = depthwise_load.depthwise_serving_workload(settings, log=lambda line: None)  # was: ZeroDivisionError
  assert result["status"] == "failed" and result["server_exit_codes"] == {"full_depth": 0}, result  # no other mode
  assert (f"full_depth: the server answered none of 64 closed-loop requests ({refused} refused, {lost} lost)"
          in result["reason"]) and STAND_IN_LOG in result["reason"]
  (closed,) = result["rows"]  # concurrency 16 x 4 requests; no sweep level: no rate to scale it by
  assert closed["name"] == "full_depth_closed_c16" and (closed["requests"], closed["lost"]) == (64, lost)


@pytest.mark.large
@pytest.mark.slow
@pytest.mark.timing
def test_the_workload_serves_three_ways_and_loses_no_request(tmp_path, spm_model_file):
  pytest.importorskip("fastapi")
  from official_albert import AlbertConfig
  from official_albert.checkpoints.loading import build_model
  from official_albert.checkpoints.native import save_pretrained
  keras.utils.set_random_seed(3)
  config = AlbertConfig(vocab_size=1000, embedding_size=16, hidden_size=32, num_hidden_layers=4, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=64)
  model = build_model("classifier", config, num_labels=2, exit_heads=True)
  save_pretrained(model, str(tmp_path / "cls"), spm_model_file=spm_model_file)
  tiny.write_labels(tmp_path / "cls", ["0", "1"])
  rng = np.random.default_rng(0)
  lines = ["sentence\tlabel"] + [f"text number {i} {'good' if i % 2 else 'bad'} {'word ' * int(rng.integers(1, 30))}"
                                 f"\t{i % 2}" for i in range(24)]
  (tmp_path / "dev.tsv").write_text("\n".join(lines) + "\n")
  settings = benchmark.BenchSettings(workload="depthwise_serving", preset="tiny", batch_size=4, seed=1,
                                     model_dir=str(tmp_path / "cls"), eval_file=str(tmp_path / "dev.tsv"),
                                     patience=(1,))
  log = []
  result = driver.run([settings], str(tmp_path / "out"), log=log.append)["workloads"]["depthwise_serving"]
  assert result["status"] == "ok", result
  assert result["server_exit_codes"] == {mode: 0 for mode in depthwise_load.MODES[:3]}  # each drained on SIGTERM
  rows = {r["name"]: r for r in result["rows"]}
  assert rows["full_depth_closed_c16"]["errors"] == 0
  for mode in depthwise_load.MODES[:3]:
    levels = [rows[f"{mode}_poisson_{f:g}"] for f in (0.5, 1.0, 2.0) if f"{mode}_poisson_{f:g}" in rows]
    assert len(levels) >= 2, mode  # (a mode stops after two levels it cannot keep up with, as a loaded CPU may)
    for row in levels:
      assert row["answered"] == row["requests"] and row["refused"] == row["lost"] == 0, row
      assert 1 <= row["mean_rows_per_call"] <= 4, row  # texts per call, or slots occupied per step
  quality = result["quality"]
  assert quality["full_depth"]["exit_mean"] == 4 and 2 <= quality["patience"]["exit_mean"] <= 4
  assert result["summary"]["ideal_speedup"] == round(4 / quality["patience"]["exit_mean"], 3)
  assert any("[depthwise_serving] summary" in line for line in log)
