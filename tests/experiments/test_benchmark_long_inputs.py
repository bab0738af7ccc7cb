"""The long_inputs workload on a tiny config: rows in child processes, peak memory, limits, budget, JAX without TF.

Never timed: the numbers come from `python -m experiments.benchmark.long_inputs` (docs/long_inputs.md).
"""

import json
import mmap

import pytest

from experiments.benchmark import long_inputs
from experiments.benchmark import long_inputs_child


def test_rows_cover_every_attention_for_ours_and_one_for_each_peer():
  rows = long_inputs.build_rows([1024, 512], long_inputs.ATTENTION_TYPES, ["float32"], long_inputs.MODES,
                                long_inputs.IMPLS, "jax")
  names = {r.name for r in rows}
  assert len(rows) == 2 * 2 * (3 + 1 + 1)
  assert "ours_jax_chunked_float32_s512_train_step" in names
  assert "hf_bigbird_block_sparse_float32_s1024_inference" in names
  assert "hf_albert_dense_float32_s512_inference" in names
  assert [r.seq_length for r in rows[:4]] == [512, 512, 1024, 1024]  # shortest first
  by_priority = sorted(rows, key=lambda r: r.priority)
  assert by_priority[0].seq_length == 1024  # (4096 and 8192 come first when present; then the longer ones)
  with pytest.raises(ValueError, match="unknown"):
    long_inputs.build_rows([512], ["sparse"], ["float32"], ["inference"], ["ours"], "jax")
  # OpenVINO runs our inference rows only; the peers keep both modes.
  rows = long_inputs.build_rows([512], ["dense"], ["float32"], long_inputs.MODES, ["ours", "hf_bigbird"], "openvino")
  assert [r.name for r in rows] == ["ours_openvino_dense_float32_s512_inference",
                                    "hf_bigbird_block_sparse_float32_s512_inference",
                                    "hf_bigbird_block_sparse_float32_s512_train_step"]


def test_ratios_pair_the_rows_of_the_issue():
  def row(impl, attention, seconds, rss, backend="tensorflow"):
    r = long_inputs.Row(impl, attention, "float32", 4096, "train_step", backend if impl == "ours" else "torch")
    return {**r.__dict__, "name": r.name, "status": "ok", "median_s": seconds, "peak_rss_mib": rss}
  rows = [row("ours", "dense", 10.0, 20000), row("ours", "chunked", 11.0, 2000), row("ours", "block_sparse", 4.0, 3000),
          row("hf_bigbird", "block_sparse", 6.0, 4000)]
  ratios = long_inputs.ratios(rows)
  assert ratios["chunked_over_dense_time_float32_s4096_train_step"] == pytest.approx(1.1)
  assert ratios["dense_over_chunked_peak_rss_float32_s4096_train_step"] == pytest.approx(10.0)
  assert ratios["dense_over_block_sparse_time_float32_s4096_train_step"] == pytest.approx(2.5)
  assert ratios["hf_bigbird_over_ours_block_sparse_time_tensorflow_float32_s4096_train_step"] == pytest.approx(1.5)


def test_a_row_beyond_the_memory_limit_is_stopped_and_reported():
  rows = long_inputs.build_rows([64], ["dense"], ["float32"], ["inference"], ["ours"], "tensorflow")
  result = long_inputs.run_long_inputs(rows, memory_limit_gb=0.05, preset="tiny", log=lambda *_: None)
  (only,) = result["rows"]
  assert only["status"] == "out_of_memory" and "memory_limit_gb" in only["reason"]


def test_a_memory_limit_stop_marks_the_rows_it_never_started_not_run():
  # One group process; the first row (by priority) outgrows the limit at start-up, the two after it never start.
  rows = long_inputs.build_rows([512, 1024, 2048], ["dense"], ["float32"], ["inference"], ["ours"], "tensorflow")
  result = long_inputs.run_long_inputs(rows, isolate="group", memory_limit_gb=0.05, preset="tiny",
                                       log=lambda *_: None)
  assert [r["status"] for r in result["rows"]] == ["out_of_memory", "not_run", "not_run"], result["rows"]
  for r in result["rows"][1:]:
    assert r["reason"].startswith("not started: the group's process was stopped at the memory limit"), r
  # The polled peak is the shared process's, never a row's own.
  assert all("peak_rss_process_mib" in r and "peak_rss_mib" not in r for r in result["rows"])


def test_rows_of_a_shared_process_report_its_peak_and_their_own_growth(monkeypatch, tmp_path):
  # Dense (96 MiB per call) runs before chunked (32 MiB) in one process: ru_maxrss would give chunked dense's peak.
  sizes = {"dense": 96, "chunked": 32}

  def touch(mib: int) -> float:
    # Fresh pages of an anonymous map, every one written: numpy's buffer could reuse memory an earlier test in this
    # worker freed but the allocator kept (CI measured 0.0 growth for chunked's 32 MiB).
    with mmap.mmap(-1, mib * 2**20, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS) as pages:
      for offset in range(0, mib * 2**20, mmap.PAGESIZE):
        pages[offset] = 1
      return float(mib)

  monkeypatch.setattr(long_inputs_child, "_ours_step", lambda row, spec: (lambda: touch(sizes[row.attention]), {}))
  rows = long_inputs.build_rows([4096], ["dense", "chunked"], ["float32"], ["inference"], ["ours"], "tensorflow")
  results = [long_inputs_child.run_row(r, {"warmup": 0, "repeats": 1}, shared_process=True) for r in rows]
  for r in results:
    assert r["status"] == "ok" and "peak_rss_mib" not in r and r["peak_rss_process_mib"] > 0, r
    assert "no peak-RSS ratio" in r["note"]
  if "rss_growth_mib" in results[1]:  # (where the kernel lets /proc/self/clear_refs reset the high-water mark)
    assert results[0]["rss_growth_mib"] > 80 and 24 < results[1]["rss_growth_mib"] < 80, results
  ratios = long_inputs.ratios(results)
  assert "chunked_over_dense_time_float32_s4096_inference" in ratios
  assert not [k for k in ratios if "peak_rss" in k], ratios
  assert long_inputs.plot(results, str(tmp_path / "chart.png"))  # time lines; no memory line of shared rows


def test_chart_draws_one_line_per_engine_attention_and_dtype_in_both_modes(monkeypatch, tmp_path):
  from matplotlib import pyplot as plt
  figures = []
  monkeypatch.setattr(plt, "close", figures.append)
  rows = [{**r.__dict__, "name": r.name, "status": "ok", "median_s": r.seq_length / 1000, "peak_rss_mib": 500.0}
          for r in long_inputs.build_rows([512, 1024, 2048], ["dense", "chunked"], ["float32"], long_inputs.MODES,
                                          ["ours"], "tensorflow")]
  long_inputs.plot(rows, str(tmp_path / "chart.png"))
  (figure,) = figures
  for ax in figure.axes:  # time and memory, inference and train_step (a train_step name has "_s" in "_step")
    lines = ax.get_lines()
    assert sorted(line.get_label() for line in lines) == ["ours_tensorflow_chunked_float32",
                                                          "ours_tensorflow_dense_float32"], ax.get_title()
    assert [list(line.get_xdata()) for line in lines] == [[512, 1024, 2048]] * 2, ax.get_title()
  monkeypatch.undo()
  plt.close(figure)


@pytest.mark.large
@pytest.mark.slow
def test_tiny_run_in_child_processes_writes_results_and_chart(tmp_path):
  settings = dict(preset="tiny", block_size=8, num_random_blocks=1, warmup=0, repeats=1, log=lambda *_: None)
  rows = long_inputs.build_rows([160], long_inputs.ATTENTION_TYPES, ["float32"], long_inputs.MODES, ["ours"],
                                "tensorflow")
  rows += long_inputs.build_rows([160], [], ["float32"], ["inference"], ["hf_bigbird", "hf_albert"], "tensorflow")
  result = long_inputs.run_long_inputs(rows, isolate="group", **settings)
  jax_rows = long_inputs.build_rows([160], ["block_sparse"], ["bfloat16"], ["train_step"], ["ours"], "jax")
  jax_result = long_inputs.run_long_inputs(jax_rows, isolate="row", **settings)
  result["rows"] += jax_result["rows"]
  bad = [r for r in result["rows"] if r["status"] != "ok"]
  assert not bad, bad
  for r in result["rows"]:
    peak = r.get("peak_rss_mib", r.get("peak_rss_process_mib"))  # (a group's shared process: its peak)
    assert r["median_s"] > 0 and peak > r["rss_setup_mib"] * 0.5 > 0, r
  for r in jax_result["rows"]:
    assert r["tensorflow_imported"] is False and r["xla_temp_mib"] >= 0, r  # the JAX path never loads TensorFlow
  assert {r["attn_implementation"] for r in result["rows"] if r["impl"] == "hf_albert"} <= {"sdpa", "eager"}
  path = long_inputs.write(result, str(tmp_path))
  data = json.loads(open(path).read())
  assert data["workloads"]["long_inputs"]["chart"] == "long_inputs.png" and (tmp_path / "long_inputs.png").exists()
  assert "dense_over_block_sparse_time_float32_s160_train_step" in result["ratios"]


@pytest.mark.large
@pytest.mark.slow
def test_openvino_rows_run_the_serving_export_of_every_attention():
  pytest.importorskip("openvino")
  settings = dict(preset="tiny", block_size=8, num_random_blocks=1, warmup=0, repeats=1, log=lambda *_: None)
  rows = long_inputs.build_rows([160], long_inputs.ATTENTION_TYPES, ["float32", "bfloat16"], ["inference"], ["ours"],
                                "openvino")
  result = long_inputs.run_long_inputs(rows, isolate="group", **settings)
  bad = [r for r in result["rows"] if r["status"] != "ok"]
  assert not bad, bad
  assert len(result["rows"]) == 6
  for r in result["rows"]:
    assert r["median_s"] > 0 and r["convert_compile_s"] > 0 and r["backend"] == "openvino", r
  assert "dense_over_block_sparse_time_bfloat16_s160_inference" in result["ratios"]


def test_the_driver_keeps_its_settings_and_draws_the_long_inputs_chart(monkeypatch, tmp_path):
  """`python -m experiments.benchmark --workload=long_inputs` (docs/long_inputs.md): the entry keeps the driver's
  settings, whose workload name draws the chart, and long_inputs' own under `long_inputs_settings`."""
  from experiments.benchmark import core
  from experiments.benchmark import driver

  def run_group(rows, *args, **kwargs):  # the child processes, faked
    return [{**r.__dict__, "name": r.name, "status": "ok", "median_s": r.seq_length / 1e5, "peak_rss_mib": 500.0}
            for r in rows]

  monkeypatch.setattr(long_inputs, "run_group", run_group)
  settings = core.BenchSettings(workload="long_inputs", preset="tiny", dtypes=("float32",), compare=(), repeats=1,
                                warmup=0)
  driver.run([settings], str(tmp_path), log=lambda *_: None)
  result = json.loads((tmp_path / "results.json").read_text())["workloads"]["long_inputs"]
  assert result["settings"]["workload"] == "long_inputs" and result["settings"]["dtypes"] == ["float32"]
  assert result["long_inputs_settings"]["isolate"] == "row" and result["long_inputs_settings"]["preset"] == "tiny"
  assert result["chart"] == "long_inputs.png" and (tmp_path / "long_inputs.png").exists()


def test_the_standalone_results_name_the_cpu_as_the_drivers_do():
  from experiments.benchmark import machine
  environment = long_inputs.environment()
  assert environment["cpu"] == machine.cpu_info()  # vendor, family, model, stepping, the bf16 / AMX flags
  assert environment["cpu_model"] == environment["cpu"].get("model_name")


def test_unknown_dtypes_and_modes_are_refused_naming_the_flag():
  """The child reads anything but bfloat16 as float32 and anything but train_step as inference: `--dtypes=bf16` ran
  float32 rows named bf16, `--modes=train` inference rows (CLI audit)."""
  for kwargs, flag in ((dict(dtypes=["bf16"], modes=["inference"]), "--dtypes"),
                       (dict(dtypes=["float32"], modes=["train"]), "--modes")):
    with pytest.raises(ValueError, match=flag):
      long_inputs.build_rows([512], ["dense"], impls=["ours"], backend="tensorflow", **kwargs)


def test_the_standalone_writer_merges_into_the_drivers_results_file_and_refuses_another(tmp_path, monkeypatch):
  """`make bench` into D, then `python -m experiments.benchmark.long_inputs --output_dir=D`: the standalone writer
  replaced D/results.json whole, losing every other workload's entry (audit). It merges as the driver does."""
  from absl import flags
  earlier = {"environment": {"time_utc": "2026-11-01T00:00:00+00:00"}, "command": "make bench",
             "workloads": {"gemm": {"status": "ok", "rows": [], "chart": "gemm.png"},
                           "long_inputs": {"status": "ok", "rows": [], "chart": "long_inputs.png"}}}
  (tmp_path / "results.json").write_text(json.dumps(earlier))
  for chart in ("gemm.png", "long_inputs.png"):
    (tmp_path / chart).write_bytes(b"png")
  lines = []
  result = {"status": "ok", "rows": [], "ratios": {}, "settings": {"isolate": "row"}}
  data = json.loads(open(long_inputs.write(result, str(tmp_path), log=lines.append)).read())
  gemm, new = data["workloads"]["gemm"], data["workloads"]["long_inputs"]
  assert list(data["workloads"]) == ["gemm", "long_inputs"], data["workloads"]
  assert gemm == {**earlier["workloads"]["gemm"], "environment": earlier["environment"], "command": "make bench"}
  assert new["settings"] == {"isolate": "row"} and new["started_utc"] <= new["finished_utc"]
  assert new["environment"]["cpu"] == data["environment"]["cpu"] and new["command"] == data["command"]
  # The replaced entry's chart goes with it, the kept entry's stays; written atomically (no temporary file left).
  assert sorted(p.name for p in tmp_path.iterdir()) == ["gemm.png", "results.json"]
  assert any("merging into it" in line and "gemm, long_inputs" in line for line in lines), lines
  # A results.json that is not a results file is refused, naming it and the fix — before the run measures anything.
  (tmp_path / "results.json").write_text('{"rows": []}')
  with pytest.raises(ValueError, match=r"results.json: not a benchmark results file .*--output_dir"):
    long_inputs.write(result, str(tmp_path), log=lambda *_: None)
  monkeypatch.setattr(long_inputs, "run_long_inputs", lambda *a, **k: pytest.fail("measured before refusing"))
  fv = flags.FlagValues()
  long_inputs.define_flags(fv)
  fv(["long_inputs", f"--output_dir={tmp_path}", "--seq_lengths=512", "--impls=ours"])
  with pytest.raises(ValueError, match=r"results.json: not a benchmark results file"):
    long_inputs.main([], fv)
  assert json.loads((tmp_path / "results.json").read_text()) == {"rows": []}  # refused, not overwritten
