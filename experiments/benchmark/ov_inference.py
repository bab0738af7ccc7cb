r"""`--workload=openvino_inference` (issue 18): the encoder forward through OpenVINO next to TF and the peers.

    python -m experiments.benchmark --workload=openvino_inference --batch_size=8 --seq_length=128

Rows, all with the same random weights (a seeded float32 `AlbertEncoder`, copied or converted), one rotation:
  ours_tf_xla_float32          our encoder, TF float32 under XLA (the fastest TF fp32 path).
  ours_tf_function_bfloat16    our encoder, TF mixed_bfloat16 in a tf.function (the fastest TF bf16 path).
  ours_openvino_f32 / _bf16 / _int8   OpenVINO on our export: `to_openvino_model(encoder, "encoder")` (the
                               `from_ids` inputs, int32), compiled with `compile_openvino(precision=...)`, latency hint;
                               int8 = `quantize_int8` (NNCF post-training) on 8 random calibration batches, then
                               compiled like bf16 (layers NNCF leaves unquantized run in bf16).
  ours_litert_f32 / _int8      LiteRT on our export: `litert_export.to_litert(encoder, "encoder")` (f32, and int8 =
                               dynamic-range quantization: int8 weights, float activations), run by the
                               `ai-edge-litert` interpreter (its default CPU delegate, one thread per core) — the
                               on-device format, timed here on the same CPU beside TF and OpenVINO.
  hf_torch_eager_pure_bfloat16 peer: transformers AlbertModel with our weights (`checkpoints.hf.hf_output_state`),
                               `model.to(torch.bfloat16)`.
  hf_onnx_openvino_bf16        peer: the same HF model (float32) exported by `torch.onnx.export`, read by OpenVINO,
                               compiled with the same `compile_openvino(precision="bf16")` — OpenVINO bf16 on HF's
                               ONNX export of the same weights.
  matmul_2048_* (TF) and torch_matmul_2048_bfloat16: the in-run peaks; bf16 MFU is against the larger of TF's and
                               torch's bf16 matmul (`mfu_vs_bf16_peak` on every row, int8 and f32 included).

The issue's shapes: p50/p99 ms at batch 1 × seq 128 (`p50_ms`, `p99_ms` of every row; use --repeats ≥ 30 for a
p99), seq/s at 8 × 128 and 32 × 512 (`examples_per_s`). Each row is checked against the TF float32 reference
(`checks[row]`: cosine and max |diff| of sequence_output).

OpenVINO API: `official_albert.serving.openvino_export` when it exists, else `StandIn` below (the same names and
arguments: `openvino.convert_model` of a tf.function with the `from_ids` signature, `Core.compile_model` with the
precision and performance hints, `nncf.quantize`); `checks["openvino_api"]` says which ran. Without openvino (or
nncf, torch, onnx, ai-edge-litert) the rows that need it are `skipped` with the reason.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from typing import Any, Dict, List, Optional

import numpy as np

from experiments.benchmark.core import BenchSettings
from experiments.benchmark.core import encoder_flops_per_example
from experiments.benchmark.core import module_available
from experiments.benchmark.core import random_batch
from experiments.benchmark.core import Runner
from experiments.benchmark.core import skipped
from experiments.benchmark.models import cosine_check
from experiments.benchmark.models import reference_encoder
from experiments.benchmark.models import tf_encoder_runner
from experiments.benchmark.peers import hf_inference_runner
from experiments.benchmark.peers import peer_status
from experiments.benchmark.peers import torch_matmul_runners
from official_albert.serving.export_folder import install_hint

IDS = ("input_word_ids", "input_mask", "input_type_ids")
HF_IDS = ("input_ids", "attention_mask", "token_type_ids")
OPENVINO_EXTRA = install_hint("openvino")
LITERT_EXTRA = install_hint("litert")
CALIBRATION_BATCHES = 8


class StandIn:
  """The subset of `official_albert.serving.openvino_export` the benchmark uses, for when it is not there."""

  @staticmethod
  def to_openvino_model(model, head: str, **head_options):
    """float32 OpenVINO model of an `AlbertEncoder` with the `from_ids` input and output names, dynamic shapes."""
    import openvino as ov
    import tensorflow as tf
    if head != "encoder" or head_options:
      raise ValueError(f"the benchmark's stand-in converts head='encoder' only, not {head!r} {head_options}.")
    specs = [tf.TensorSpec([None, None], tf.int32, name=k) for k in IDS]

    @tf.function(input_signature=specs)
    def from_ids(input_word_ids, input_mask, input_type_ids):
      out = model({"input_word_ids": input_word_ids, "input_mask": input_mask, "input_type_ids": input_type_ids},
                  training=False)
      return {"sequence_output": out["sequence_output"], "pooled_output": out["pooled_output"]}
    return ov.convert_model(from_ids.get_concrete_function())

  @staticmethod
  def compile_openvino(ov_model_or_xml_path, precision: str = "bf16", num_threads: Optional[int] = None,
                       hint: str = "latency"):
    import openvino as ov
    if precision not in ("f32", "bf16", "int8"):
      raise ValueError(f"precision must be f32, bf16 or int8, got {precision!r}.")
    config = {"INFERENCE_PRECISION_HINT": "f32" if precision == "f32" else "bf16",
              "PERFORMANCE_HINT": hint.upper()}
    if num_threads:
      config["INFERENCE_NUM_THREADS"] = int(num_threads)
    return ov.Core().compile_model(ov_model_or_xml_path, "CPU", config)

  @staticmethod
  def quantize_int8(ov_model, calibration_inputs: List[Dict[str, np.ndarray]], **kwargs):
    import nncf
    return nncf.quantize(ov_model, nncf.Dataset(calibration_inputs), model_type=nncf.ModelType.TRANSFORMER,
                         subset_size=len(calibration_inputs), **kwargs)


def openvino_api():
  """(api, source): `official_albert.serving.openvino_export` when importable, else `StandIn`."""
  try:
    from official_albert.serving import openvino_export
    return openvino_export, "official_albert.serving.openvino_export"
  except ImportError as e:
    return StandIn, f"benchmark stand-in (official_albert.serving.openvino_export: {type(e).__name__}: {e})"


def _ov_runner(name: str, impl: str, dtype: str, compile_fn, feed: Dict[str, np.ndarray], output: str, flops: float,
               check, note: str) -> Runner:
  """A row running an OpenVINO compiled model synchronously on one infer request (reused across calls)."""
  def build():
    compiled = compile_fn()
    request = compiled.create_infer_request()
    port = compiled.output(output)

    def step():
      request.infer(feed)
      return np.array(request.get_tensor(port).data, copy=True)
    return step
  b, s = feed[next(iter(feed))].shape
  return Runner(name, impl, dtype, build, flops, b, b * s, check=check, note=note)


def _litert_runner(name: str, dtype: str, flatbuffer_fn, feed: Dict[str, np.ndarray], output: str, flops: float,
                   check, note: str) -> Runner:
  """A row running a LiteRT flatbuffer through the interpreter's signature runner (built once)."""
  def build():
    from official_albert.serving.litert_runtime import require_litert
    interpreter = require_litert().Interpreter(model_content=flatbuffer_fn(), num_threads=os.cpu_count())
    runner = interpreter.get_signature_runner()

    def step():
      return np.array(runner(**feed)[output], copy=True)
    return step
  b, s = feed[next(iter(feed))].shape
  return Runner(name, "ours", dtype, build, flops, b, b * s, check=check, note=note)


def export_hf_onnx(model, path: str, seq_length: int) -> str:
  """`torch.onnx.export` of an HF AlbertModel (float32) with dynamic batch and sequence axes; returns `path`."""
  import warnings

  import torch
  example = tuple(torch.ones((1, seq_length), dtype=torch.long) for _ in HF_IDS)
  with warnings.catch_warnings(), torch.no_grad():
    warnings.simplefilter("ignore")  # The legacy exporter's deprecation and tracer warnings.
    torch.onnx.export(model, example, path, input_names=list(HF_IDS),
                      output_names=["last_hidden_state", "pooler_output"],
                      dynamic_axes={k: {0: "batch", 1: "sequence"} for k in HF_IDS}, dynamo=False)
  return path


# Long because: the rows of one workload, a block per runtime and precision in the order the table reports them; the
# blocks share the reference model, its weights and outputs built at the top.
def openvino_inference_runners(settings: BenchSettings):
  """The rows of the module docstring; returns (runners, checks)."""
  config, batch, features, reference, want = reference_encoder(settings)
  weights = reference.get_weights()
  flops = settings.batch_size * encoder_flops_per_example(config, settings.seq_length)
  checks: Dict[str, Any] = {}
  runners = [tf_encoder_runner("ours_tf_xla_float32", config, weights, features, "float32", True, flops,
                               cosine_check("ours_tf_xla_float32", want, checks)),
             tf_encoder_runner("ours_tf_function_bfloat16", config, weights, features, "bfloat16", False, flops,
                               cosine_check("ours_tf_function_bfloat16", want, checks))]
  feed = {k: batch[k].astype(np.int32) for k in IDS}
  api, checks["openvino_api"] = openvino_api()
  ov_reason = module_available("openvino")
  ov_reason = f"{ov_reason}; {OPENVINO_EXTRA}" if ov_reason else None
  shared: Dict[str, Any] = {}

  def ov_model():
    if "ov_model" not in shared:  # Converted once, by the first OpenVINO row to build (its build_s holds it).
      shared["ov_model"] = api.to_openvino_model(reference, "encoder")
    return shared["ov_model"]

  def int8_model():
    calibration = [{k: random_batch(config, 2, settings.seq_length, 1, settings.seed + 1 + i)[k].astype(np.int32)
                    for k in IDS} for i in range(CALIBRATION_BATCHES)]
    return api.quantize_int8(ov_model(), calibration)

  ours_ov = [("f32", "float32", lambda: api.compile_openvino(ov_model(), precision="f32")),
             ("bf16", "bfloat16", lambda: api.compile_openvino(ov_model(), precision="bf16")),
             ("int8", "int8", lambda: api.compile_openvino(int8_model(), precision="int8"))]
  for precision, dtype, compile_fn in ours_ov:
    name = f"ours_openvino_{precision}"
    reason = ov_reason or (module_available("nncf") if precision == "int8" else None)
    runners.append(skipped(name, "ours", dtype, reason) if reason else _ov_runner(
        name, "ours", dtype, compile_fn, feed, "sequence_output", flops, cosine_check(name, want, checks),
        note=f"OpenVINO on our export, precision={precision}, latency hint"
             + (f", NNCF PTQ on {CALIBRATION_BATCHES} random batches" if precision == "int8" else "")))

  litert_reason = module_available("ai_edge_litert")
  for precision, dtype in (("f32", "float32"), ("int8", "int8")):
    name = f"ours_litert_{precision}"
    if litert_reason:
      runners.append(skipped(name, "ours", dtype, f"{litert_reason}; {LITERT_EXTRA}"))
      continue

    def flatbuffer(quantize=precision == "int8"):
      from official_albert.serving import litert_export
      return litert_export.to_litert(reference, "encoder", quantize=quantize)
    runners.append(_litert_runner(name, dtype, flatbuffer, feed, "sequence_output", flops,
                                  cosine_check(name, want, checks),
                                  note=f"LiteRT interpreter on our export ({precision}"
                                       + (": int8 weights, float activations" if precision == "int8" else "")
                                       + f"), {os.cpu_count()} threads"))

  peers = peer_status([p for p in settings.compare if p == "hf_torch"])
  state = None
  if "hf_torch" in peers:
    torch_reason = peers["hf_torch"]
    if torch_reason is None:
      from official_albert.checkpoints.hf import hf_output_state
      state = hf_output_state(reference, "encoder")[0]  # Our weights under HF AlbertModel's names and layouts.
      runners.append(hf_inference_runner(config, batch, "bfloat16", flops, settings, "pure", state,
                                         check=cosine_check("hf_torch_eager_pure_bfloat16", want, checks)))
      if settings.matmul_peak:
        runners += torch_matmul_runners(settings)
    else:
      runners.append(skipped("hf_torch_eager_pure_bfloat16", "hf_torch", "bfloat16", torch_reason))

    def hf_onnx_model():
      from experiments.benchmark.peers import hf_albert_model
      tmp = tempfile.mkdtemp(prefix="albert_bench_onnx_")
      try:
        path = export_hf_onnx(hf_albert_model(config, settings.seed, state), os.path.join(tmp, "albert.onnx"),
                              settings.seq_length)
        return api.compile_openvino(path, precision="bf16")  # Read and compiled before the folder goes.
      finally:
        shutil.rmtree(tmp, ignore_errors=True)

    onnx_reason = module_available("onnx")
    reason = torch_reason or ov_reason or (onnx_reason and f"{onnx_reason}; pip install -r requirements-bench.txt")
    name = "hf_onnx_openvino_bf16"
    runners.append(skipped(name, "openvino_hf", "bfloat16", reason) if reason else _ov_runner(
        name, "openvino_hf", "bfloat16", hf_onnx_model, {k: batch[o].astype(np.int64) for k, o in zip(HF_IDS, IDS)},
        "last_hidden_state", flops, cosine_check(name, want, checks),
        note="OpenVINO bf16 (latency hint) on torch.onnx.export of HF AlbertModel with our weights"))
  return runners, checks


def openvino_goals(rows: List[Dict[str, Any]], checks: Dict[str, Any], settings: BenchSettings) -> List[Dict]:
  """Issue 18's "must show" comparisons on this run's rows (status "n/a" when a row is missing)."""
  by_name = {r["name"]: r for r in rows if r["status"] == "ok"}
  shape = f"this run: batch {settings.batch_size} x seq {settings.seq_length}"

  def ratio_goal(text, ours, base, target):
    if ours not in by_name or base not in by_name:
      return {"goal": text, "status": "n/a", "reason": f"missing row {ours if ours not in by_name else base}"}
    a, b = by_name[ours], by_name[base]
    ratio = b["median_s"] / a["median_s"]
    return {"goal": text, "ours": ours, "peer": base, "ratio": ratio, "target": target, "shape": shape,
            "paired_ratio": float(np.median(np.asarray(b["times_s"]) / np.asarray(a["times_s"]))),
            "status": "met" if ratio >= target else "not met"}

  bf16 = by_name.get("ours_openvino_bf16")
  mfu = bf16.get("mfu_vs_bf16_peak") if bf16 else None
  cosines = {name: c["cosine_to_fp32_reference"]["flattened"] for name, c in checks.items()
             if isinstance(c, dict) and "cosine_to_fp32_reference" in c}
  return [
      ratio_goal("OpenVINO bf16 on our export >= 1.0x OpenVINO bf16 on HF's ONNX export (issue: b8 x s128)",
                 "ours_openvino_bf16", "hf_onnx_openvino_bf16", 1.0),
      {"goal": "OpenVINO bf16 on our export >= 75% of the in-run bf16 matmul peak (issue: b32 x s512)",
       "ours": "ours_openvino_bf16", "mfu": mfu, "target": 0.75, "shape": shape,
       "status": "n/a" if mfu is None else ("met" if mfu >= 0.75 else "not met")},
      ratio_goal("OpenVINO int8 >= 1.3x OpenVINO bf16 on our export", "ours_openvino_int8", "ours_openvino_bf16",
                 1.3),
      {"goal": "every non-int8 row's sequence_output cosine to TF float32 >= 0.999",
       "cosines": {k: v for k, v in cosines.items() if "int8" not in k},
       "status": "met" if cosines and all(v >= 0.999 for k, v in cosines.items() if "int8" not in k) else
       ("n/a" if not cosines else "not met")},
  ]
