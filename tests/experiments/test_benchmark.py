"""Smoke test of experiments.benchmark: it runs on a tiny config and writes valid results. Never timed."""

import dataclasses
import json

import pytest

from experiments.benchmark import core as benchmark
from experiments.benchmark import driver
from experiments.benchmark import peers
from official_albert import AlbertConfig
from official_albert import precision


def test_encoder_flops_formula_matches_hand_count():
  config = AlbertConfig.from_preset("albert-base-v2")
  s, h, f, e = 128, 768, 3072, 128
  per_layer_token = 3 * 2 * h * h + 2 * h * h + 2 * 2 * h * f + 2 * 2 * s * h  # QKV, output, FFN, QK^T and PV.
  want = s * 2 * e * h + s * 12 * per_layer_token + 2 * h * h
  assert benchmark.encoder_flops_per_example(config, s) == want
  # The known figure for albert-base: about 175 MFLOP per token.
  assert 170e6 < want / s < 180e6
  # Heads: P positions × (H→E transform + E→V logits) + SOP.
  assert benchmark.pretraining_heads_flops_per_example(config, 20) == 20 * (2 * h * e + 2 * e * 30000) + 4 * h


@pytest.mark.slow
def test_smoke_run_writes_json_and_chart(tmp_path, monkeypatch):
  real = peers.module_available
  # Pretend KerasHub is absent so the skip path is exercised whether or not it is installed.
  monkeypatch.setattr(peers, "module_available",
                      lambda name: "ModuleNotFoundError: pretend" if name == "keras_hub" else real(name))
  settings = benchmark.BenchSettings(workload="encoder_inference", preset="tiny", batch_size=2, seq_length=16,
                                     dtypes=("float32", "bfloat16"), compare=("hf_torch", "keras_hub"), repeats=1,
                                     warmup=0, variants="minimal")
  driver.run([settings], str(tmp_path), log=lambda *_: None)

  results = json.loads((tmp_path / "results.json").read_text())
  result = results["workloads"]["encoder_inference"]
  assert result["status"] == "ok"
  rows = {r["name"]: r for r in result["rows"]}
  for name in ("ours_xla_float32", "ours_xla_bfloat16", "matmul_2048_float32", "matmul_2048_bfloat16"):
    assert rows[name]["status"] == "ok", rows[name]
    assert rows[name]["median_s"] > 0 and rows[name]["repeats"] == 1
  ours = rows["ours_xla_float32"]
  assert ours["examples_per_s"] == pytest.approx(2 / ours["median_s"])
  assert ours["tokens_per_s"] == pytest.approx(32 / ours["median_s"])
  assert ours["mfu"] == pytest.approx(ours["gflops"] / result["matmul_peak_gflops"]["float32"])
  # The XLA fp32 path reproduces the eager fp32 reference; bf16 is close to it.
  assert ours["check"]["cosine_to_fp32_reference"]["flattened"] > 0.99999
  assert rows["ours_xla_bfloat16"]["check"]["cosine_to_fp32_reference"]["flattened"] > 0.99
  # A missing peer is a row that says why, never a silent gap.
  assert rows["keras_hub_xla_float32"]["status"] == "skipped"
  assert "pretend" in rows["keras_hub_xla_float32"]["reason"]
  # HF's two bf16 usages (issue 13) are both in the rotation.
  assert {"hf_torch_eager_autocast_bfloat16", "hf_torch_eager_pure_bfloat16"} <= set(rows)
  if rows["hf_torch_eager_float32"]["status"] == "ok":
    assert result["ratio_to_peers"]["ours_xla_float32"]["hf_torch_eager_float32"] > 0
  goals = {g["goal"]: g for g in result["goals"]}
  assert goals["fp32 >= 1.0x KerasHub XLA"]["status"] == "n/a"
  assert (tmp_path / "encoder_inference.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
  assert result["chart"] == "encoder_inference.png"
  assert "| encoder_inference | ours_xla_float32 | float32 |" in driver.format_table(results)


def test_goals_compare_medians():
  rows = [
      {"name": "ours_xla_float32", "impl": "ours", "dtype": "float32", "status": "ok", "median_s": 1.0,
       "examples_per_s": 8.0},
      {"name": "keras_hub_xla_float32", "impl": "keras_hub", "dtype": "float32", "status": "ok", "median_s": 0.9,
       "examples_per_s": 8.9},
      {"name": "hf_torch_eager_float32", "impl": "hf_torch", "dtype": "float32", "status": "ok", "median_s": 2.0,
       "examples_per_s": 4.0},
  ]
  goals = {g["goal"]: g for g in benchmark.goals("encoder_inference", rows, {})}
  assert goals["fp32 >= 1.0x KerasHub XLA"]["status"] == "not met"
  assert goals["fp32 >= 1.0x KerasHub XLA"]["ratio"] == pytest.approx(0.9)
  assert goals["fp32 >= 1.5x HF torch"]["status"] == "met"
  assert goals["fp32 >= 1.5x HF torch"]["ratio"] == pytest.approx(2.0)


def test_bad_flags_are_named():
  class Flags:
    compare, dtype, suite, workload, preset = "hf_torch,jax", "float32", None, "encoder_inference", "tiny"
    batch_size, seq_length, max_predictions_per_seq, repeats, warmup, seed = 2, 16, 4, 1, 0, 0
    matmul_peak, spm_model_file, text_file, variants, rows = False, None, None, "minimal", None

  with pytest.raises(ValueError, match="unknown peer 'jax'"):
    driver.settings_from_flags(Flags)
  Flags.compare, Flags.dtype = "none", "float16"
  with pytest.raises(ValueError, match="unknown dtype 'float16'"):
    driver.settings_from_flags(Flags)
  Flags.dtype, Flags.suite = "float32", "nightly"
  with pytest.raises(ValueError, match="--suite='nightly'"):
    driver.settings_from_flags(Flags)
  Flags.suite = "default"
  suite = driver.settings_from_flags(Flags)
  assert [s.workload for s in suite][:9] == ["encoder_inference", "encoder_inference", "pretrain_step", "finetune_step",
                                             "finetune_padding", "train_loop", "input_pipeline", "gemm", "compile"]
  # The frozen-weight rows (issue 13) are inference workloads only.
  assert {s.workload for s in suite if s.frozen_weight_kernels} == {"encoder_inference", "serving"}
  assert all(s.compare == () for s in suite)  # --compare=none wins over a suite entry's peers.
  assert suite[0].dtypes == ("float32", "bfloat16") and suite[0].compare == ()


@pytest.mark.large
def test_serving_rows_agree_with_the_keras_model(spm_model_file):
  pytest.importorskip("tensorflow_text")
  settings = benchmark.BenchSettings(workload="serving", preset="tiny", batch_size=2, seq_length=16, repeats=1,
                                     warmup=0, matmul_peak=False, spm_model_file=spm_model_file)
  result = driver.run_workload(settings, log=lambda *_: None)
  assert result["status"] == "ok", result
  assert {r["name"]: r["status"] for r in result["rows"]} == {
      "saved_model_text_in_dynamic_padding": "ok", "saved_model_ids_in_dynamic_padding": "ok",
      "saved_model_text_in_full_padding": "ok", "saved_model_ids_in_full_padding": "ok", "keras_model_ids_in": "ok",
      "saved_model_text_in_full_padding_bfloat16": "ok"}
  # The reloaded SavedModel on raw text gives the in-process model's logits on the ids it packed (with and without
  # dynamic padding).
  assert result["checks"]["text_in_vs_keras_max_abs_logit_diff"] < 1e-5
  assert result["checks"]["full_padding_text_in_vs_keras_max_abs_logit_diff"] < 1e-5
  # The bf16 export row serves the same model (its logits within bf16 rounding of float32's).
  assert result["checks"]["bf16_text_in_vs_float32_logit_cosine"]["flattened"] > 0.999


@pytest.mark.large
def test_finetune_padding_rows_cut_padding_on_real_lengths(spm_model_file):
  settings = benchmark.BenchSettings(workload="finetune_padding", preset="tiny", batch_size=2, seq_length=32,
                                     repeats=1, warmup=0, matmul_peak=False, compare=(),
                                     spm_model_file=spm_model_file)
  result = driver.run_workload(settings, log=lambda *_: None)
  assert result["status"] == "ok", result
  rows = {r["name"]: r for r in result["rows"]}
  assert {name: r["status"] for name, r in rows.items()} == {
      f"ours_{mode}_{layout}_float32": "ok" for mode, layouts in
      (("train", ("full_padding", "dynamic_padding", "dynamic_bucketed")),
       ("eval", ("full_padding", "dynamic_padding")))
      for layout in layouts}
  checks = result["checks"]
  padded = checks["padded_tokens_per_pass"]
  assert padded["full_padding"] == checks["examples_per_pass"] * 32
  assert checks["real_tokens_per_pass"] <= padded["dynamic_bucketed"] <= padded["dynamic_padding"] <= padded[
      "full_padding"]
  assert rows["ours_train_dynamic_padding_float32"]["tokens_per_s"] > 0


def test_gemm_rows_cover_every_dense_shape_of_the_encoder():
  settings = benchmark.BenchSettings(workload="gemm", preset="tiny", batch_size=2, seq_length=8, repeats=1, warmup=0,
                                     matmul_peak=False, compare=())
  result = driver.run_workload(settings, log=lambda *_: None)
  assert result["status"] == "ok", result
  h, f = benchmark.TINY["hidden_size"], benchmark.TINY["intermediate_size"]
  shapes = [(16, h, 3 * h), (16, h, h), (16, h, f), (16, f, h)]
  assert [tuple(s) for s in result["checks"]["shapes_mkn"]] == shapes
  rows = {r["name"]: r for r in result["rows"]}
  for m, k, n in shapes:
    for impl in ("tf_graph", "tf_xla"):
      row = rows[f"{impl}_{m}x{k}x{n}"]
      assert row["status"] == "ok" and row["gflop_per_step"] == pytest.approx(2 * m * k * n / 1e9)
    assert rows[f"torch_{m}x{k}x{n}"]["status"] == "skipped"  # Not requested with compare=().


def test_bf16_goals_compare_with_the_best_hf_bf16_row():
  """Issue 13: HF's bf16 is its best usage in the run (autocast or pure bf16), not a fixed row."""
  def row(name, impl, dtype, median):
    return {"name": name, "impl": impl, "dtype": dtype, "status": "ok", "median_s": median,
            "examples_per_s": 8 / median, "times_s": [median]}
  rows = [row("ours_tf_function_bfloat16", "ours", "bfloat16", 0.5),
          row("hf_torch_eager_autocast_bfloat16", "hf_torch", "bfloat16", 2.0),
          row("hf_torch_eager_pure_bfloat16", "hf_torch", "bfloat16", 0.6),
          row("ours_xla_float32", "ours", "float32", 1.0), row("hf_torch_eager_float32", "hf_torch", "float32", 0.9)]
  checks = {"ours_tf_function_bfloat16": {"cosine_to_fp32_reference": {"flattened": 0.9995}}}
  goals = {g["goal"]: g for g in benchmark.goals("encoder_inference", rows, checks)}
  best = goals["bf16 >= 1.3x the best HF torch bf16 row with cosine >= 0.999"]
  assert best["peer"] == "hf_torch_eager_pure_bfloat16" and best["ratio"] == pytest.approx(1.2)
  assert best["status"] == "not met"
  assert goals["fp32 >= 1.0x HF torch fp32"]["status"] == "not met"
  train = [dict(r, name=r["name"].replace("eager_", "eager_adamw_").replace("tf_function_", "tf_function_lamb_"))
           for r in rows]
  goal = {g["goal"]: g for g in benchmark.goals("pretrain_step", train, {})}[
      "pretraining step bf16 >= 1.3x the best HF torch bf16 row"]
  assert goal["peer"] == "hf_torch_eager_adamw_pure_bfloat16" and goal["ratio"] == pytest.approx(1.2)


def test_hf_bf16_rows_run_our_weights_in_both_recommended_ways():
  pytest.importorskip("torch")
  pytest.importorskip("transformers")
  from experiments.benchmark import models
  from official_albert.checkpoints.hf import hf_output_state
  settings = benchmark.BenchSettings(preset="tiny", batch_size=2, seq_length=16, seed=1)
  config, batch, _, reference, want = models.reference_encoder(settings)
  state = hf_output_state(reference, "encoder")[0]
  flops = 1.0
  out = {}
  for dtype, mode in (("float32", "autocast"), ("bfloat16", "autocast"), ("bfloat16", "pure")):
    runner = peers.hf_inference_runner(config, batch, dtype, flops, settings, mode, state)
    assert runner.name == {"float32": "hf_torch_eager_float32"}.get(dtype, f"hf_torch_eager_{mode}_bfloat16")
    out[runner.name] = runner.build()()
  # Same weights: HF float32 is our float32 encoder; both bf16 usages are close to it but really ran in bf16.
  assert benchmark.cosine(out["hf_torch_eager_float32"], want)["flattened"] > 0.99999
  for name in ("hf_torch_eager_autocast_bfloat16", "hf_torch_eager_pure_bfloat16"):
    assert benchmark.cosine(out[name], want)["flattened"] > 0.999
    assert abs(out[name] - out["hf_torch_eager_float32"]).max() > 1e-4
  assert abs(out["hf_torch_eager_pure_bfloat16"] - out["hf_torch_eager_autocast_bfloat16"]).max() > 0


@pytest.mark.large
def test_pretrain_step_has_both_hf_bf16_rows_in_the_rotation():
  pytest.importorskip("torch")
  settings = benchmark.BenchSettings(workload="pretrain_step", preset="tiny", batch_size=2, seq_length=16,
                                     max_predictions_per_seq=4, dtypes=("bfloat16",), compare=("hf_torch",),
                                     repeats=1, warmup=0, matmul_peak=False, rows=("ours_tf_function_lamb_bfloat16",))
  result = driver.run_workload(settings, log=lambda *_: None)
  rows = {r["name"]: r for r in result["rows"]}
  assert {n: r["status"] for n, r in rows.items()} == {
      "ours_tf_function_lamb_bfloat16": "ok", "hf_torch_eager_adamw_autocast_bfloat16": "ok",
      "hf_torch_eager_adamw_pure_bfloat16": "ok"}
  goal = {g["goal"]: g for g in result["goals"]}["pretraining step bf16 >= 1.3x the best HF torch bf16 row"]
  assert goal["peer"] == min(("hf_torch_eager_adamw_autocast_bfloat16", "hf_torch_eager_adamw_pure_bfloat16"),
                             key=lambda n: rows[n]["median_s"])


@pytest.mark.large
def test_frozen_weight_kernel_rows_run_in_their_own_process_and_match_float32(tmp_path):
  # Issue 13: TF_ONEDNN_ASSUME_FROZEN_WEIGHTS=1 switches our dense layers to oneDNN's blocked brgemm inner product;
  # TF reads it once per process, so the rows run in a child that has it, and this process stays without it.
  from official_albert.precision import frozen_weight_kernels_enabled
  settings = benchmark.BenchSettings(workload="encoder_inference", preset="tiny", batch_size=2, seq_length=16,
                                     dtypes=("float32", "bfloat16"), compare=(), repeats=1, warmup=0,
                                     variants="minimal", matmul_peak=False, frozen_weight_kernels=True)
  results = driver.run([settings], str(tmp_path), log=lambda *_: None)
  result = results["workloads"]["encoder_inference_frozen_weight_kernels"]
  assert result["status"] == "ok", result.get("reason")
  assert result["frozen_weight_kernels"] is True and not frozen_weight_kernels_enabled()
  rows = {r["name"]: r for r in result["rows"]}
  assert rows["ours_tf_function_bfloat16"]["status"] == "ok"
  assert rows["ours_xla_float32"]["check"]["cosine_to_fp32_reference"]["flattened"] > 0.99999
  assert rows["ours_tf_function_bfloat16"]["check"]["cosine_to_fp32_reference"]["flattened"] > 0.99


def test_frozen_weight_kernels_refuse_training_workloads_and_round_trip_their_flags():
  from absl import flags
  settings = benchmark.BenchSettings(workload="pretrain_step", preset="tiny", frozen_weight_kernels=True)
  with pytest.raises(ValueError, match="only inference workloads"):
    driver.run_workload(settings, log=lambda *_: None)
  want = benchmark.BenchSettings(workload="serving", preset="tiny", batch_size=3, seq_length=24, dtypes=("bfloat16",),
                                 compare=("hf_torch",), repeats=2, warmup=0, seed=5, matmul_peak=False,
                                 variants="minimal", rows=("ours_xla_bfloat16",), spm_model_file="/x/spm.model",
                                 frozen_weight_kernels=True, op_profile=True)
  fv = flags.FlagValues()
  driver.define_flags(fv)
  argv = driver.child_argv(want, "/tmp/out")
  fv(["benchmark"] + argv[3:])
  assert driver.settings_from_flags(fv) == [want]
  assert fv.output_dir == "/tmp/out"


def test_op_profile_counts_each_op_once_and_names_the_gemms():
  """Op events are "<node>:<type>"; host scopes ("Class::Method", "Eager...: fn", bare names) are not ops, and
  function-call ops contain other ops' events."""
  from types import SimpleNamespace as ns

  from experiments.benchmark import op_profile
  names = {1: "encoder/ffn/BiasAdd:_MklNativeFusedMatMul", 2: "encoder/ffn/Gelu/mul:Mul", 3: "ExecutorState::Process",
           4: "call:StatefulPartitionedCall", 5: "grad/MatMul:_MklMatMul", 6: "EagerLocalExecute: __inference_step_9",
           7: "EagerExecute"}
  events = [(1, 6), (2, 1), (3, 50), (4, 40), (5, 3), (2, 1), (6, 60), (7, 60)]
  xspace = ns(planes=[ns(event_metadata={k: ns(name=v) for k, v in names.items()},
                         lines=[ns(events=[ns(metadata_id=i, duration_ps=ms * 1e9) for i, ms in events])])])
  totals = op_profile.op_times(xspace)
  assert {k: tuple(v) for k, v in totals.items()} == {"_MklNativeFusedMatMul": (6.0, 1), "Mul": (2.0, 2),
                                                      "_MklMatMul": (3.0, 1)}
  summary = op_profile.summarize(totals, calls=2)
  assert summary["op_ms_per_step"] == pytest.approx(5.5) and summary["gemm_share"] == pytest.approx(9 / 11)
  assert [t["op"] for t in summary["top"]] == ["_MklNativeFusedMatMul", "_MklMatMul", "Mul"]
  assert summary["top"][2]["events_per_step"] == 1 and summary["top"][0]["ms_per_step"] == pytest.approx(3)
  xla = op_profile.summarize({"__inference_step_6098": [3000.0, 1], "Identity": [1.0, 2]}, calls=1)
  assert xla["status"] == "opaque" and "gemm_share" not in xla and "XLA" in xla["reason"]


def test_op_profile_of_a_real_row_is_recorded_after_the_timed_repetitions(tmp_path):
  settings = benchmark.BenchSettings(workload="encoder_inference", preset="tiny", batch_size=2, seq_length=16,
                                     dtypes=("bfloat16",), compare=(), repeats=2, warmup=0, variants="minimal",
                                     matmul_peak=False, rows=("ours_tf_function_bfloat16",), op_profile=True)
  result = driver.run([settings], str(tmp_path), log=lambda *_: None)["workloads"]["encoder_inference"]
  assert result["status"] == "ok"
  assert {r["name"]: r["repeats"] for r in result["rows"]}["ours_tf_function_bfloat16"] == 2  # timings untouched
  profile = result["op_profiles"]["ours_tf_function_bfloat16"]
  assert profile["status"] == "ok", profile
  shares = [t["share"] for t in profile["top"]]
  assert shares == sorted(shares, reverse=True) and sum(shares) <= 1 + 1e-9
  assert 0 < profile["gemm_share"] < 1 and any("MatMul" in t["op"] for t in profile["top"])
  assert profile["op_ms_per_step"] > 0


def test_rows_are_warmed_up_after_every_row_is_built():
  """Building a row seeds TF, which clears the kernel caches of rows built before it (their next call re-instantiates
  their functions); the warm-up calls must come after the last build so that cost stays out of the timed calls."""
  calls = []

  def runner(name, fail_warmup=False):
    def build():
      calls.append(("build", name))

      def step():
        calls.append(("call", name))
        if fail_warmup and len([c for c in calls if c == ("call", name)]) == 2:
          raise RuntimeError("boom")
      return step
    return benchmark.Runner(name, "ours", "float32", build)

  runners = [runner("a"), runner("b"), runner("c", fail_warmup=True)]
  benchmark.run_rotation(runners, benchmark.BenchSettings(repeats=2, warmup=1), log=lambda *_: None)
  last_build = max(i for i, c in enumerate(calls) if c[0] == "build")
  after = calls[last_build + 1:]
  assert after[:4] == [("call", "c"), ("call", "a"), ("call", "b"), ("call", "c")]  # c's first call, then warm-ups
  assert [r.status for r in runners] == ["ok", "ok", "error"] and "boom" in runners[2].reason
  assert after[4:] == [("call", "a"), ("call", "b")] * 2  # the row whose warm-up failed is out of the rotation
  assert len(runners[0].times) == len(runners[1].times) == 2 and not runners[2].times


def test_onednn_summary_counts_exec_lines_per_primitive_and_implementation():
  from experiments.benchmark import op_profile
  text = "\n".join([
      "onednn_verbose,v1,info,oneDNN v3.7.0",
      "onednn_verbose,v1,primitive,create:cache_miss,cpu,inner_product,brgemm:avx512_core_amx,forward_inference,,,1.5",
      "onednn_verbose,v1,primitive,exec,cpu,inner_product,brgemm:avx512_core_amx,forward_inference,src:bf16,,mb8,2.5",
      "onednn_verbose,v1,primitive,exec,cpu,reorder,jit:uni,undef,src:f32 dst:bf16,,768x3072,0.25",
      "onednn_verbose,v1,primitive,exec,cpu,inner_product,brgemm:avx512_core_amx,forward_inference,src:bf16,,mb8,1.5",
      "onednn_verbose,primitive,exec,cpu,matmul,brg_matmul:avx10_1_512_amx,undef,src:bf16,,2x3:3x4,0.5",
      "a line the model printed, exec,cpu,x,y,z,9"])
  summary = op_profile.onednn_summary(text)
  assert summary["calls"] == 4 and summary["ms"] == pytest.approx(4.75)
  assert [(p["primitive"], p["impl"], p["calls"], p["ms"]) for p in summary["primitives"]] == [
      ("inner_product", "brgemm:avx512_core_amx", 2, 4.0), ("matmul", "brg_matmul:avx10_1_512_amx", 1, 0.5),
      ("reorder", "jit:uni", 1, 0.25)]


@pytest.mark.large
@pytest.mark.cpu_kind
@pytest.mark.parametrize("cpu", ["this_cpu", "avx2_only"])
def test_onednn_kernels_of_a_real_row_are_recorded_when_onednn_verbose_is_on(tmp_path, cpu):
  """oneDNN reads ONEDNN_VERBOSE once per process, so this runs the benchmark in a child process.

  What the profile holds depends on the CPU: where TensorFlow runs its oneDNN kernels (AVX-512 VNNI / BF16, AMX) the
  dense layers are `inner_product` and attention `matmul` primitives; on an AVX2-only CPU TensorFlow leaves them off
  and its own MatMul calls oneDNN's GEMM API only (`gemm_api`, seen on an AVX2 EPYC). `avx2_only` reproduces that
  CPU here (`precision.AVX2_ONLY_ENV`); the child records which case it was.
  """
  import os
  import subprocess
  cap = os.environ.get("ONEDNN_MAX_CPU_ISA", "").upper()
  if cpu == "this_cpu" and cap and not cap.startswith(("AVX512", "AVX10", "AMX", "ALL")) and (
      precision.onednn_custom_ops_enabled()):
    pytest.skip(f"ONEDNN_MAX_CPU_ISA={cap} with TensorFlow's oneDNN kernels on is no real CPU: TF's bf16 MatMul "
                "aborts there (docs/performance.md, 'Which CPU'); the avx2_only case runs that CPU faithfully")
  settings = benchmark.BenchSettings(workload="encoder_inference", preset="tiny", batch_size=2, seq_length=16,
                                     dtypes=("bfloat16",), compare=(), repeats=1, warmup=0, variants="minimal",
                                     matmul_peak=False, rows=("ours_tf_function_bfloat16",), op_profile=True)
  env = {**os.environ, "ONEDNN_VERBOSE": "1", "TF_CPP_MIN_LOG_LEVEL": "2",
         **(precision.AVX2_ONLY_ENV if cpu == "avx2_only" else {})}
  done = subprocess.run(driver.child_argv(settings, str(tmp_path)), env=env, cwd=benchmark.REPO_ROOT,
                        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=600)
  assert done.returncode == 0, done.stdout[-3000:]
  with open(tmp_path / "results.json") as f:
    results = json.load(f)
  profile = results["workloads"]["encoder_inference"]["op_profiles"]["ours_tf_function_bfloat16"]
  onednn = profile["onednn"]
  kinds = {p["primitive"] for p in onednn["primitives"]}
  custom_ops = results["environment"]["onednn_custom_ops"]
  if cpu == "avx2_only":
    assert custom_ops is False and results["environment"]["onednn_max_cpu_isa"] == "AVX2"
  else:
    assert custom_ops is precision.onednn_custom_ops_enabled()  # the child ran on this CPU with this environment
  if custom_ops:
    assert onednn["calls"] > 0 and {"inner_product", "matmul"} <= kinds, onednn  # dense layers and attention
  else:
    assert onednn["calls"] > 0 and kinds == {"gemm_api"}, onednn  # TF's own MatMul kernels, oneDNN's GEMM API
  assert sum(p["calls"] for p in onednn["primitives"]) == onednn["calls"]


def test_a_row_failing_in_a_timed_repetition_is_an_error_row_and_the_others_go_on():
  """A row that raises in a timed repetition (train_loop's non-finite loss, a short repetition) is reported as such,
  as one failing while built or warmed up is; it no longer takes the workload and the suite down with it."""
  calls = []

  def runner(name, fail_on_call=None):
    def build():
      def step():
        calls.append(name)
        if calls.count(name) == fail_on_call:
          raise FloatingPointError("non-finite loss nan at step 300")
      return step
    return benchmark.Runner(name, "ours", "float32", build)

  # Calls: first call, warm-up, then timed repetitions; b fails in its 2nd timed repetition (its 4th call).
  runners = [runner("a"), runner("b", fail_on_call=4), runner("c")]
  benchmark.run_rotation(runners, benchmark.BenchSettings(repeats=3, warmup=1), log=lambda *_: None)
  assert [r.status for r in runners] == ["ok", "error", "ok"]
  assert runners[1].reason.startswith("FloatingPointError in timed repetition 2: non-finite loss")
  assert runners[1].times == [] and len(runners[0].times) == len(runners[2].times) == 3
  assert calls.count("b") == 4  # out of the rotation after it failed
  rows = [benchmark.summarize_row(r, {}) for r in runners]
  assert rows[1] == {"name": "b", "impl": "ours", "dtype": "float32", "status": "error", "note": "",
                     "reason": runners[1].reason}
  assert set(benchmark.ratios(rows)) == {"a", "c"}


def _fake_rows(outcomes):
  """A stand-in for a workload's row builder (models.gemm_runners): each call takes the next outcome, "ok" (one
  cheap row) or an exception to raise."""
  def build(settings):
    outcome = outcomes.pop(0)
    if isinstance(outcome, Exception):
      raise outcome
    return [benchmark.Runner("ours_row", "ours", "float32", lambda: (lambda: sum(range(100))), flops=1e3,
                             examples=2, tokens=32)], {}
  return build


def test_a_failing_workload_is_a_failed_entry_and_every_workload_is_written_when_done(tmp_path, monkeypatch):
  from experiments.benchmark import machine
  settings = benchmark.BenchSettings(workload="gemm", repeats=1, warmup=0, matmul_peak=False, compare=())
  build = _fake_rows(["ok", RuntimeError("boom"), "ok"])
  on_disk_at_start = []

  def rows(s):
    path = tmp_path / "results.json"
    on_disk_at_start.append(list(json.loads(path.read_text())["workloads"]) if path.exists() else [])
    return build(s)

  monkeypatch.setattr(driver, "gemm_runners", rows)
  lines = []
  results = driver.run([settings] * 3, str(tmp_path), log=lines.append)
  assert on_disk_at_start == [[], ["gemm"], ["gemm", "gemm_1"]]  # each workload on disk as soon as it was done
  on_disk = json.loads((tmp_path / "results.json").read_text())["workloads"]
  assert {k: v["status"] for k, v in on_disk.items()} == {"gemm": "ok", "gemm_1": "failed", "gemm_2": "ok"}
  assert on_disk["gemm_1"]["reason"] == "RuntimeError: boom" and on_disk["gemm_1"]["settings"]["workload"] == "gemm"
  assert any(line.startswith("[gemm_1] FAILED: RuntimeError: boom") for line in lines)
  assert results["workloads"]["gemm_2"]["rows"][0]["status"] == "ok"
  # Each entry names the machine that measured it (vendor, family, model, stepping, flags) and when.
  for entry in on_disk.values():
    assert entry["environment"]["cpu"] == machine.cpu_info() and entry["started_utc"] <= entry["finished_utc"]


def test_a_rerun_replaces_its_workloads_entry_and_charts_and_keeps_the_others(tmp_path, monkeypatch):
  """The documented one-workload commands share --output_dir=bench_out: results.json is merged by workload key."""
  settings = benchmark.BenchSettings(workload="gemm", repeats=1, warmup=0, matmul_peak=False, compare=())
  outcomes = ["ok", "ok", RuntimeError("second run")]
  monkeypatch.setattr(driver, "gemm_runners", _fake_rows(outcomes))
  driver.run([settings, settings], str(tmp_path), log=lambda *_: None)
  first = json.loads((tmp_path / "results.json").read_text())["workloads"]
  assert (first["gemm"]["chart"], first["gemm_1"]["chart"]) == ("gemm.png", "gemm_1.png")
  lines = []
  driver.run([settings], str(tmp_path), log=lines.append)  # gemm again; this time it fails and draws no chart
  merged = json.loads((tmp_path / "results.json").read_text())["workloads"]
  assert {k: v["status"] for k, v in merged.items()} == {"gemm": "failed", "gemm_1": "ok"}
  assert merged["gemm_1"] == first["gemm_1"]  # kept as measured, with its own machine and time
  assert not (tmp_path / "gemm.png").exists() and (tmp_path / "gemm_1.png").exists()
  assert any("merging into it" in line and "gemm, gemm_1" in line for line in lines), lines
  assert any(line.startswith("[gemm] replaces the entry measured") and "gemm.png" in line for line in lines), lines
  # Settings no workload can run are refused before the run starts: never a "failed" entry replacing a measured one.
  mistake = benchmark.BenchSettings(workload="pretrain_step", frozen_weight_kernels=True)
  with pytest.raises(ValueError, match="only inference workloads"):
    driver.run([settings, mistake], str(tmp_path), log=lambda *_: None)
  assert json.loads((tmp_path / "results.json").read_text())["workloads"] == merged


def test_flag_mistakes_never_replace_a_measured_entry(tmp_path, monkeypatch):
  """--repeats=0 (a bare numpy error) is refused before the run; a --rows name no row has, found once the rows are
  built, leaves the measured entry as it was (both replaced it with a "failed" one, and removed its chart)."""
  settings = benchmark.BenchSettings(workload="gemm", repeats=1, warmup=0, matmul_peak=False, compare=())
  monkeypatch.setattr(driver, "gemm_runners", _fake_rows(["ok", "ok"]))
  driver.run([settings], str(tmp_path), log=lambda *_: None)
  measured = json.loads((tmp_path / "results.json").read_text())["workloads"]
  with pytest.raises(ValueError, match="--repeats=0: must be >= 1"):
    driver.run([dataclasses.replace(settings, repeats=0)], str(tmp_path), log=lambda *_: None)
  lines = []
  driver.run([dataclasses.replace(settings, rows=("ours_typo",))], str(tmp_path), log=lines.append)
  assert json.loads((tmp_path / "results.json").read_text())["workloads"] == measured
  assert (tmp_path / "gemm.png").exists() and any("[gemm] not run: --rows: no such row(s)" in x for x in lines)
  lines = []  # another shape replaces the entry (keyed by workload): the log says which shape goes
  driver.run([dataclasses.replace(settings, batch_size=3)], str(tmp_path), log=lines.append)
  assert any("— it measured albert-base-v2 batch 8 seq 128" in x and "this run albert-base-v2 batch 3" in x
             and "another --output_dir" in x for x in lines), lines


def test_ratios_pair_only_rows_of_the_same_work_and_a_suite_refuses_the_flags_it_sets():
  rows = [{"name": n, "impl": impl, "status": "ok", "median_s": t, "times_s": [t], "gflop_per_step": g}
          for n, impl, t, g in (("tf_16x32x96", "ours", 1.0, 3.0), ("torch_16x32x96", "hf_torch", 2.0, 3.0),
                                ("torch_16x32x32", "hf_torch", 0.5, 1.0))]
  for paired in (False, True):
    assert benchmark.ratios(rows, paired=paired)["tf_16x32x96"] == {"torch_16x32x96": 2.0}
  from absl import flags
  fv = flags.FlagValues()
  driver.define_flags(fv)
  fv(["benchmark", "--suite=smoke", "--preset=albert-large-v2", "--dtype=bfloat16"])
  with pytest.raises(ValueError, match="--suite=smoke sets each entry's workload, preset and dtype; drop --preset, "
                                       "--dtype"):
    driver.settings_from_flags(fv)


def test_a_results_file_that_cannot_be_merged_into_is_refused_before_anything_runs(tmp_path):
  from experiments.benchmark import results_file
  (tmp_path / "results.json").write_text('{"rows": []}')
  with pytest.raises(ValueError, match=r"results.json: not a benchmark results file .*--output_dir"):
    results_file.start(str(tmp_path), {}, "cmd", log=lambda *_: None)
  (tmp_path / "results.json").write_text('{"workloads": {')
  with pytest.raises(ValueError, match=r"results.json: the benchmark results file is not valid JSON"):
    results_file.start(str(tmp_path), {}, "cmd", log=lambda *_: None)


def test_the_cpu_is_named_by_vendor_family_model_stepping_and_flags(tmp_path):
  """"AMD EPYC" names every EPYC generation on these VMs; the family and model tell them apart."""
  from experiments.benchmark import machine
  cpuinfo = tmp_path / "cpuinfo"
  cpuinfo.write_text("processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 26\nmodel\t\t: 2\nmodel name\t: AMD EPYC"
                     "\nstepping\t: 1\nflags\t\t: fpu avx2 avx512f avx512_bf16\n\nprocessor\t: 1\nvendor_id\t: Other\n")
  assert machine.cpu_info(str(cpuinfo)) == {
      "vendor": "AuthenticAMD", "model_name": "AMD EPYC", "family": 26, "model": 2, "stepping": 1,
      "flags": {"avx512f": True, "avx512_bf16": True, "avx512_fp16": False, "amx_bf16": False, "amx_tile": False}}
  assert "error" in machine.cpu_info(str(tmp_path / "missing"))


def test_our_training_rows_run_without_dropout_as_their_hf_peer_does(monkeypatch, spm_model_file):
  """albert-base-v1 trains with dropout 0.1 and every classifier head defaults to 0.1; the HF peer runs with 0."""
  from experiments.benchmark import models
  from experiments.benchmark import padding
  import official_albert

  class Built(Exception):
    pass

  configs = []

  def model(config, *args, **kwargs):
    configs.append(config)
    raise Built()

  monkeypatch.setattr(official_albert, "AlbertPretrainer", model)
  monkeypatch.setattr(official_albert, "AlbertClassifier", model)
  settings = benchmark.BenchSettings(preset="albert-base-v1", batch_size=2, seq_length=16, max_predictions_per_seq=4,
                                     compare=(), variants="minimal", spm_model_file=spm_model_file)
  assert benchmark.load_config("albert-base-v1").hidden_dropout_prob == 0.1
  ours = [r for builder in (models.pretrain_step_runners, models.finetune_step_runners,
                            padding.finetune_padding_runners) for r in builder(settings)[0] if r.impl == "ours"]
  for runner in ours:
    with pytest.raises(Built):
      runner.build()
    assert "dropout 0" in runner.note, runner.name
  assert len(configs) == len(ours) >= 3
  for c in configs:
    assert (c.hidden_dropout_prob, c.attention_probs_dropout_prob, c.classifier_dropout_prob) == (0, 0, 0)
  hf = peers.make_hf_config(benchmark.load_config("albert-base-v1"))
  assert (hf.hidden_dropout_prob, hf.attention_probs_dropout_prob, hf.classifier_dropout_prob) == (0, 0, 0)


def test_a_text_file_that_is_not_utf8_is_named_with_its_flag_and_line(tmp_path):
  path = tmp_path / "latin1.txt"
  path.write_bytes("one line\n".encode("utf-8") + "café\n".encode("latin-1"))
  with pytest.raises(ValueError, match=r"^--text_file: .*latin1.txt:2: invalid UTF-8 \(byte 0xe9 at column 4\)"):
    benchmark.bench_texts(benchmark.BenchSettings(text_file=str(path)))
  path.write_bytes("\ufeffone line\n\ncafé\n".encode("utf-8"))  # UTF-8, a byte-order mark at its top
  assert benchmark.bench_texts(benchmark.BenchSettings(text_file=str(path))) == ["one line", "café"]
