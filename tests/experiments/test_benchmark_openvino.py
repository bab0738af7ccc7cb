"""Smoke tests of `--workload=openvino_inference` (experiments/benchmark/ov_inference.py) on a tiny config.

Never timed: every engine's output is checked against the TF float32 reference on the same weights, the MFU peak is
checked to be the larger bf16 matmul, and a missing package must give `skipped` rows with the reason.
"""

import pytest

from experiments.benchmark import core as benchmark
from experiments.benchmark import driver
from experiments.benchmark import ov_inference

OURS_OV = ("ours_openvino_f32", "ours_openvino_bf16", "ours_openvino_int8")
OURS_LITERT = ("ours_litert_f32", "ours_litert_int8")


def _settings(**changes):
  base = dict(workload="openvino_inference", preset="tiny", batch_size=2, seq_length=16, repeats=2, warmup=0,
              compare=("hf_torch",))
  return benchmark.BenchSettings(**{**base, **changes})


def test_openvino_rows_compute_the_tf_model():
  pytest.importorskip("openvino")
  pytest.importorskip("nncf")
  pytest.importorskip("torch")
  pytest.importorskip("onnx")
  pytest.importorskip("ai_edge_litert")
  result = driver.run_workload(_settings(), log=lambda *_: None)
  assert result["status"] == "ok", result
  rows = {r["name"]: r for r in result["rows"]}
  assert {n: r["status"] for n, r in rows.items()} == {n: "ok" for n in (
      "matmul_2048_float32", "matmul_2048_bfloat16", "torch_matmul_2048_bfloat16", "ours_tf_xla_float32",
      "ours_tf_function_bfloat16", *OURS_OV, *OURS_LITERT, "hf_torch_eager_pure_bfloat16", "hf_onnx_openvino_bf16")}
  checks = result["checks"]
  cos = {n: c["cosine_to_fp32_reference"]["flattened"] for n, c in checks.items() if isinstance(c, dict)}
  # f32 IR = the TF model; bf16 rows (ours, HF torch and OpenVINO on HF's ONNX export) close to it: one set of
  # weights in every engine; int8 within quantization error.
  assert checks["ours_openvino_f32"]["max_abs_diff"] < 1e-4
  assert checks["ours_litert_f32"]["max_abs_diff"] < 1e-4 and cos["ours_litert_int8"] >= 0.99
  for name in ("ours_tf_function_bfloat16", "ours_openvino_bf16", "hf_torch_eager_pure_bfloat16",
               "hf_onnx_openvino_bf16"):
    assert cos[name] >= 0.999, (name, cos[name])
  assert cos["ours_openvino_int8"] >= 0.99
  # MFU against the larger of TF's and torch's bf16 matmul; every row, int8 included, against that bf16 peak.
  peak = max(rows["matmul_2048_bfloat16"]["gflops"], rows["torch_matmul_2048_bfloat16"]["gflops"])
  assert result["matmul_peak_gflops"]["bfloat16"] == pytest.approx(peak)
  assert rows["ours_openvino_bf16"]["mfu"] == pytest.approx(rows["ours_openvino_bf16"]["gflops"] / peak)
  assert rows["ours_openvino_int8"]["mfu_vs_bf16_peak"] == pytest.approx(rows["ours_openvino_int8"]["gflops"] / peak)
  for row in rows.values():
    assert row["p50_ms"] <= row["p99_ms"]
  goals = {g["goal"]: g for g in result["goals"]}
  vs_hf = goals["OpenVINO bf16 on our export >= 1.0x OpenVINO bf16 on HF's ONNX export (issue: b8 x s128)"]
  assert vs_hf["ratio"] == pytest.approx(rows["hf_onnx_openvino_bf16"]["median_s"]
                                         / rows["ours_openvino_bf16"]["median_s"])
  assert goals["every non-int8 row's sequence_output cosine to TF float32 >= 0.999"]["status"] == "met"


def test_openvino_rows_skip_cleanly_without_openvino_or_torch(monkeypatch):
  real = benchmark.module_available
  missing = {"openvino": "ModuleNotFoundError: pretend openvino", "torch": "ModuleNotFoundError: pretend torch",
             "ai_edge_litert": "ModuleNotFoundError: pretend litert"}
  for module in (ov_inference, benchmark):
    monkeypatch.setattr(module, "module_available", lambda name: missing.get(name) or real(name))
  from experiments.benchmark import peers
  monkeypatch.setattr(peers, "module_available", lambda name: missing.get(name) or real(name))
  result = driver.run_workload(_settings(rows=("ours_tf_xla_float32",) + OURS_OV + OURS_LITERT, matmul_peak=False),
                               log=lambda *_: None)
  rows = {r["name"]: r for r in result["rows"]}
  assert rows["ours_tf_xla_float32"]["status"] == "ok"
  for name in OURS_OV:
    assert rows[name]["status"] == "skipped"
    assert "pretend openvino" in rows[name]["reason"] and "requirements-openvino.txt" in rows[name]["reason"]
  for name in ("hf_torch_eager_pure_bfloat16", "hf_onnx_openvino_bf16"):
    assert rows[name]["status"] == "skipped" and "pretend torch" in rows[name]["reason"]
  for name in OURS_LITERT:
    assert rows[name]["status"] == "skipped" and "requirements-litert.txt" in rows[name]["reason"]
  assert {g["status"] for g in result["goals"][:3]} == {"n/a"}
  assert "| openvino_inference | ours_openvino_bf16 | bfloat16 | skipped:" in driver.format_table(
      {"workloads": {"openvino_inference": result}})


def test_stand_in_is_used_only_when_the_export_module_is_missing():
  api, source = ov_inference.openvino_api()
  try:
    from official_albert.serving import openvino_export  # noqa: F401
    assert source == "official_albert.serving.openvino_export"
  except ImportError:
    assert api is ov_inference.StandIn and source.startswith("benchmark stand-in")
  for name in ("to_openvino_model", "compile_openvino", "quantize_int8"):
    assert callable(getattr(api, name))


def test_the_peak_of_a_dtype_is_its_fastest_matmul_row():
  def matmul(name, dtype, seconds):
    return benchmark.Runner(name, "matmul", dtype, build=lambda: None, flops=2e9, times=[seconds, seconds])
  runners = [matmul("matmul_2048_bfloat16", "bfloat16", 2.0), matmul("torch_matmul_2048_bfloat16", "bfloat16", 1.0),
             matmul("matmul_2048_float32", "float32", 4.0), matmul("late_matmul_bfloat16", "bfloat16", 4.0)]
  assert benchmark.matmul_peaks(runners) == {"bfloat16": pytest.approx(2.0), "float32": pytest.approx(0.5)}


def test_litert_rows_compute_the_tf_model():
  """The LiteRT rows alone (no OpenVINO / torch / onnx needed): f32 = the TF model, int8 within quantization error."""
  pytest.importorskip("ai_edge_litert")
  result = driver.run_workload(_settings(rows=("ours_tf_xla_float32",) + OURS_LITERT, compare=(), matmul_peak=False),
                               log=lambda *_: None)
  rows = {r["name"]: r for r in result["rows"]}
  assert all(rows[n]["status"] == "ok" for n in OURS_LITERT), rows
  checks = result["checks"]
  assert checks["ours_litert_f32"]["max_abs_diff"] < 1e-4
  assert checks["ours_litert_int8"]["cosine_to_fp32_reference"]["flattened"] >= 0.99
  assert rows["ours_litert_f32"]["p50_ms"] <= rows["ours_litert_f32"]["p99_ms"]
