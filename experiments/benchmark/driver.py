r"""The benchmark suite's driver: throughput of official_albert against its peers and the machine's own matmul peak.

    python -m experiments.benchmark --workload=encoder_inference --preset=albert-base-v2 --batch_size=8 \
        --seq_length=128 --dtype=float32,bfloat16 --compare=hf_torch,keras_hub --output_dir=bench_out
    python -m experiments.benchmark --suite=default --output_dir=bench_out      # what `make bench` runs

Workloads: `encoder_inference`, `pretrain_step`, `finetune_step`, `finetune_padding` (a fine-tuning / evaluation pass
on real sentence lengths: full padding vs dynamic padding vs length bucketing; experiments/benchmark/padding.py),
`train_loop` (the real train_lib loop at steps_per_loop 1/10/100, XLA off/on) and `input_pipeline` (records/s of the
shipped tf.data reader vs a naive per-record one; both in experiments/benchmark/training.py),
`gemm` (fp32 GEMMs at the encoder's shapes [B·S, H]×[H, 3H | H | F] and [B·S, F]×[F, H] through TF's graph path,
XLA:CPU and PyTorch: where the fp32 ceiling of each framework lies),
`compile` (trace/compile time of the layer loop vs the unrolled stack), `tokenize` (sentences/s), `data_prep`
(instances/s of create_pretraining_data, one worker),
`serving` (a reloaded classifier SavedModel, text in vs ids in, vs the in-process model),
`dynamic_data` (examples/s of the on-the-fly pretraining pipeline at seq 128 and 512 with tf.data parallelism 1 and 2,
next to the static reader and generator; experiments/benchmark/dynamic_data.py), `openvino_inference` (TF fp32/bf16,
OpenVINO f32/bf16/int8 on our export, HF torch bf16 and OpenVINO on HF's ONNX export, same weights;
experiments/benchmark/ov_inference.py), `long_inputs` (albert-base at batch 1 and 512-4096 tokens: dense, chunked
and block-sparse attention, float32 and bfloat16, inference and a training step, next to HF BigBird block-sparse and
HF AlbertModel; each row in its own process with its peak resident memory; experiments/benchmark/long_inputs.py),
`early_exit` (a fine-tuned model with exit heads on its labelled dev file: seq/s, p50/p99 latency, accuracy and exit
iterations at batch 1 and --batch_size for full depth and each --patience, the frontier plot and the static
elastic-depth curve; experiments/benchmark/early_exit.py).

This module holds what ties them together: the workload list, the named suites, running one workload or many
(a workload that fails becomes a "failed" entry and the run goes on), and the flags; results.json (merged by
workload key into the one in --output_dir, written after every workload), the charts and the table are in
results_file.py. The method (interleaved timing, MFU) and the FLOP counts are in core.py, the peers in peers.py;
`encoder_inference`, `pretrain_step`, `finetune_step` and `gemm` in models.py; `compile`, `tokenize`, `data_prep`
and `serving` in standalone.py. Imports point from here to the workload modules and from them to core.py and
peers.py, never back: within the package only __main__.py imports this module.

Long because: the flags, the suites and the run that merges each entry are one contract (what a flag means is what
an entry records); the workloads themselves live in their own modules.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import tempfile
import traceback
from typing import Any, Dict, List, Sequence

from experiments.benchmark import depthwise_load
from experiments.benchmark import dynamic_data
from experiments.benchmark import early_exit
from experiments.benchmark import long_inputs
from experiments.benchmark import op_profile
from experiments.benchmark import ov_inference
from experiments.benchmark import padding
from experiments.benchmark import results_file
from experiments.benchmark import server_load
from experiments.benchmark import training
from experiments.benchmark.core import BenchSettings
from experiments.benchmark.core import COSINE_GOAL
from experiments.benchmark.core import goals
from experiments.benchmark.core import matmul_peaks
from experiments.benchmark.core import matmul_runners
from experiments.benchmark.core import module_available
from experiments.benchmark.core import PEERS
from experiments.benchmark.core import ratios
from experiments.benchmark.core import run_rotation
from experiments.benchmark.core import summarize_row
from experiments.benchmark.models import encoder_inference_runners
from experiments.benchmark.models import finetune_step_runners
from experiments.benchmark.models import gemm_runners
from experiments.benchmark.models import pretrain_step_runners
from experiments.benchmark.results_file import environment_info
from experiments.benchmark.results_file import format_table  # noqa: F401 (was this module's: driver.format_table)
from experiments.benchmark.standalone import compile_workload
from experiments.benchmark.standalone import data_prep_workload
from experiments.benchmark.standalone import serving_workload
from experiments.benchmark.standalone import tokenize_workload
from official_albert import cli

WORKLOADS = ("encoder_inference", "pretrain_step", "finetune_step", "finetune_padding", "train_loop", "input_pipeline",
             "gemm", "compile", "tokenize", "data_prep", "serving", "dynamic_data", "openvino_inference", "long_inputs",
             "early_exit", "serving_load", "depthwise_serving")
# `make bench`: the "must show" numbers in one invocation (about 20-30 minutes on 2 busy cores).
SUITES = {
    "default": [
        # Issue 13: with the op-type breakdown of our rows (where the bf16 time goes on the machine that ran it).
        dict(workload="encoder_inference", preset="albert-base-v2", dtype="float32,bfloat16", op_profile=True),
        # Issue 13: the serving setting TF_ONEDNN_ASSUME_FROZEN_WEIGHTS=1 (oneDNN's blocked brgemm inner product,
        # weights reordered once), in its own process next to the same HF rows.
        dict(workload="encoder_inference", preset="albert-base-v2", dtype="float32,bfloat16", variants="minimal",
             compare="hf_torch", frozen_weight_kernels=True),
        dict(workload="pretrain_step", preset="albert-base-v2", dtype="float32,bfloat16",
             rows=("ours_xla_lamb_float32", "ours_tf_function_lamb_float32", "ours_xla_lamb_bfloat16",
                   "ours_tf_function_lamb_bfloat16", "ours_tf_function_mlm_all_positions_lamb_float32",
                   "ours_tf_function_unfused_qkv_lamb_float32"), op_profile=True),
        dict(workload="finetune_step", preset="albert-base-v2", dtype="float32,bfloat16", variants="minimal",
             compare="hf_torch"),
        dict(workload="finetune_padding", preset="albert-base-v2", dtype="float32", compare="hf_torch", repeats=2,
             warmup=0),
        dict(workload="train_loop", preset="tiny", dtype="float32", repeats=3, warmup=0),
        dict(workload="input_pipeline"),
        dict(workload="gemm", repeats=7, compare="hf_torch"),
        dict(workload="compile", preset="albert-large-v2", dtype="float32", batch_size=2, repeats=1),
        dict(workload="serving", preset="albert-base-v2"),
        dict(workload="serving", preset="albert-base-v2", batch_size=1, repeats=30),
        dict(workload="serving", preset="albert-base-v2", batch_size=1, repeats=30, frozen_weight_kernels=True),
        dict(workload="tokenize"),
        dict(workload="data_prep"),
        # Issue 14: seq 128 and 512, tf.data parallelism 1 and 2, next to the static reader and generator.
        dict(workload="dynamic_data", batch_size=32, repeats=3),
        # Issue 18: p50/p99 at b1 x s128, seq/s at b8 x s128 and b32 x s512 (MFU vs the larger bf16 matmul).
        dict(workload="openvino_inference", preset="albert-base-v2", batch_size=1, seq_length=128, repeats=30,
             compare="hf_torch"),
        dict(workload="openvino_inference", preset="albert-base-v2", batch_size=8, seq_length=128, compare="hf_torch"),
        dict(workload="openvino_inference", preset="albert-base-v2", batch_size=32, seq_length=512, repeats=3,
             compare="hf_torch"),
    ],
    # Seconds, for a smoke test: a tiny config, the minimal rows.
    "smoke": [
        dict(workload="encoder_inference", preset="tiny", dtype="float32,bfloat16", batch_size=2, seq_length=16,
             variants="minimal"),
    ],
}


# Workloads that only run inference: the ones allowed with frozen-weight kernels (a training step would silently
# keep its initial weights, see precision.check_weights_may_change); not depthwise_serving (in-process accuracy rows).
FROZEN_WEIGHT_WORKLOADS = ("encoder_inference", "serving", "gemm", "serving_load")


def child_argv(settings: BenchSettings, output_dir: str) -> List[str]:
  """The command line that runs `settings` alone in a new process (the flags `settings_from_flags` reads back)."""
  argv = [sys.executable, "-m", "experiments.benchmark", f"--workload={settings.workload}",
          f"--preset={settings.preset}", f"--batch_size={settings.batch_size}", f"--seq_length={settings.seq_length}",
          f"--max_predictions_per_seq={settings.max_predictions_per_seq}", f"--dtype={','.join(settings.dtypes)}",
          f"--compare={','.join(settings.compare) or 'none'}", f"--repeats={settings.repeats}",
          f"--warmup={settings.warmup}", f"--seed={settings.seed}",
          f"--{'' if settings.matmul_peak else 'no'}matmul_peak", f"--variants={settings.variants}",
          f"--output_dir={output_dir}"]
  argv += [f"--rows={','.join(settings.rows)}"] if settings.rows else []
  argv += [f"--spm_model_file={settings.spm_model_file}"] if settings.spm_model_file else []
  argv += [f"--text_file={settings.text_file}"] if settings.text_file else []
  argv += ["--op_profile"] if settings.op_profile else []
  argv += [f"--{name}={getattr(settings, name)}" for name in ("model_dir", "baseline_model_dir", "eval_file")
           if getattr(settings, name)]
  argv += [f"--patience={','.join(map(str, settings.patience))}", f"--max_examples={settings.max_examples}",
           f"--{'' if settings.openvino else 'no'}openvino"]
  return argv + (["--frozen_weight_kernels"] if settings.frozen_weight_kernels else [])


def run_in_frozen_weight_process(settings: BenchSettings, log=print) -> Dict[str, Any]:
  """Runs `settings` in a child process with `FROZEN_WEIGHTS_ENV` on; returns its result.

  Why a child: TF reads the variable once per process and it changes every fused MatMul kernel, so the rows with
  and without it cannot share a process (and a training workload later in the suite must not run under it).
  """
  from official_albert.precision import FROZEN_WEIGHTS_ENV
  with tempfile.TemporaryDirectory(prefix="albert_bench_frozen_") as tmp:
    env = cli.child_env({**os.environ, FROZEN_WEIGHTS_ENV: "1"})  # not a user's experiments/ in the cwd
    done = subprocess.run(child_argv(settings, tmp), env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True)
    for line in done.stdout.splitlines():
      log(f"  [child] {line}")
    path = os.path.join(tmp, "results.json")
    if done.returncode or not os.path.exists(path):
      return {"settings": dataclasses.asdict(settings), "status": "failed",
              "reason": f"child process exited {done.returncode}: {done.stdout[-1500:]}"}
    with open(path) as f:
      return next(iter(json.load(f)["workloads"].values()))  # the child ran this one workload


class SettingsError(ValueError):
  """A flag no row of the workload can run, found after its rows are built (`--rows`): not a "failed" entry."""


def check_settings(settings: BenchSettings) -> None:
  """Raises ValueError, naming the flag, for settings no workload can run (checked for a whole run before it starts,
  so a mistyped flag never becomes a "failed" entry that replaces a measured one)."""
  if settings.workload not in WORKLOADS:
    raise ValueError(f"--workload={settings.workload!r} is not one of {WORKLOADS}.")
  for name, least in (("repeats", 1), ("warmup", 0), ("batch_size", 1), ("seq_length", 2)):
    if getattr(settings, name) < least:
      raise ValueError(f"--{name}={getattr(settings, name)}: must be >= {least}.")
  if settings.frozen_weight_kernels and settings.workload not in FROZEN_WEIGHT_WORKLOADS:
    raise ValueError(f"--frozen_weight_kernels with --workload={settings.workload}: frozen-weight kernels keep the "
                     f"first weights they see, so only inference workloads {FROZEN_WEIGHT_WORKLOADS} can use them.")


# Long because: the dispatch to every workload and the fields every result records (device, settings, oneDNN weight
# caching, peaks), in one place so that no workload's result lacks them.
def run_workload(settings: BenchSettings, log=print) -> Dict[str, Any]:
  """Runs one workload; returns its JSON-ready result."""
  from official_albert.precision import frozen_weight_kernels_enabled
  check_settings(settings)
  if settings.frozen_weight_kernels and not frozen_weight_kernels_enabled():
    return run_in_frozen_weight_process(settings, log)
  log(f"[{settings.workload}] preset={settings.preset} batch={settings.batch_size} seq={settings.seq_length} "
      f"dtypes={list(settings.dtypes)} compare={list(settings.compare)}")
  # Recorded on every result: the variable changes which oneDNN kernel each of our dense layers runs.
  result: Dict[str, Any] = {"settings": dataclasses.asdict(settings),
                            "frozen_weight_kernels": frozen_weight_kernels_enabled()}
  builders = {"encoder_inference": encoder_inference_runners, "pretrain_step": pretrain_step_runners,
              "finetune_step": finetune_step_runners, "finetune_padding": padding.finetune_padding_runners,
              "gemm": gemm_runners, "openvino_inference": ov_inference.openvino_inference_runners}
  if settings.workload in builders:
    reason = module_available("official_albert.modeling.models")
    if reason:
      result.update(status="skipped", reason=f"official_albert.modeling.models not available: {reason}")
      return result
    import tensorflow as tf
    tf.keras.utils.set_random_seed(settings.seed)
    runners, checks = builders[settings.workload](settings)
    if settings.rows:
      unknown = sorted(set(settings.rows) - {r.name for r in runners})
      if unknown:
        raise SettingsError(f"--rows: no such row(s) {unknown} in {settings.workload}; known: "
                            f"{[r.name for r in runners if r.impl == 'ours']}.")
      runners = [r for r in runners if r.impl != "ours" or r.name in settings.rows]
    if settings.matmul_peak:
      runners = matmul_runners(settings) + runners
    run_rotation(runners, settings, log)
    if settings.op_profile:
      result["op_profiles"] = op_profile.profile_rows(runners, log)
    peaks = matmul_peaks(runners)
    rows = [summarize_row(r, peaks) for r in runners]
    result.update(status="ok", rows=rows, matmul_peak_gflops=peaks, ratio_to_peers=ratios(rows),
                  paired_ratio_to_peers=ratios(rows, paired=True),
                  checks=checks,
                  flops_per_example=next((r.flops / r.examples for r in runners if r.impl != "matmul" and r.examples),
                                         0.0))
    bf16_checks = {k: v for k, v in checks.items() if isinstance(v, dict) and "bfloat16" in k
                   and "cosine_to_fp32_reference" in v}
    if bf16_checks:
      result["bf16_cosine_ok"] = all(v["cosine_to_fp32_reference"]["flattened"] >= COSINE_GOAL
                                     for v in bf16_checks.values())
    result["goals"] = (ov_inference.openvino_goals(rows, checks, settings) if settings.workload == "openvino_inference"
                       else goals(settings.workload, rows, checks))
  elif settings.workload == "compile":
    result.update(status="ok", **compile_workload(settings, log))
  elif settings.workload == "tokenize":
    result.update({"status": "ok", **tokenize_workload(settings, log)})
  elif settings.workload == "data_prep":
    result.update({"status": "ok", **data_prep_workload(settings, log)})
  elif settings.workload == "serving":
    result.update({"status": "ok", **serving_workload(settings, log)})
  elif settings.workload in ("train_loop", "input_pipeline"):
    workload = getattr(training, f"{settings.workload}_workload")
    result.update({"status": "ok", **workload(settings, log)})
  elif settings.workload == "dynamic_data":
    result.update({"status": "ok", **dynamic_data.dynamic_data_workload(settings, log)})
  elif settings.workload == "long_inputs":
    # Lengths 512-4096 on the driver (8192 through the module's own flags); --compare=hf_torch adds both HF peers.
    impls = ("ours",) + (("hf_bigbird", "hf_albert") if "hf_torch" in settings.compare else ())
    rows = long_inputs.build_rows(long_inputs.SEQ_LENGTHS[:-1], long_inputs.ATTENTION_TYPES, settings.dtypes,
                                  long_inputs.MODES, impls, "tensorflow")
    measured = long_inputs.run_long_inputs(rows, warmup=settings.warmup, repeats=settings.repeats,
                                           preset=settings.preset, log=log)
    # long_inputs' own settings (lengths, isolation, memory limit) beside the driver's, which name the workload
    # (results_file.plot draws its chart by that name).
    result["long_inputs_settings"] = measured.pop("settings", {})
    result.update(measured)
  elif settings.workload == "serving_load":
    result.update(server_load.server_load_workload(settings, log))
  elif settings.workload == "early_exit":
    result.update({"status": "ok", **early_exit.early_exit_workload(settings, log)})
  elif settings.workload == "depthwise_serving":
    result.update(depthwise_load.depthwise_serving_workload(settings, log))
  return result


def workload_keys(settings_list: Sequence[BenchSettings]) -> List[str]:
  """The results.json key of each entry of a run: its workload (`_frozen_weight_kernels` added for such a run),
  and for a workload the run has already measured, its position as a suffix (`serving_11`)."""
  keys: List[str] = []
  for settings in settings_list:
    name = settings.workload + ("_frozen_weight_kernels" if settings.frozen_weight_kernels else "")
    keys.append(name if name not in keys else f"{name}_{len(keys)}")
  return keys


def run(settings_list: Sequence[BenchSettings], output_dir: str, log=print) -> Dict[str, Any]:
  """Runs the workloads in order, merging each one's entry into `output_dir`'s results.json as soon as it is done
  (results_file: a rerun replaces that workload's entry and charts, the others stay); returns the results. A
  workload that raises is an entry with status "failed" naming the exception, and the next one still runs."""
  for settings in settings_list:
    check_settings(settings)
  results = results_file.start(output_dir, environment_info(), " ".join(sys.argv), log)
  keys = workload_keys(settings_list)
  for key, settings in zip(keys, settings_list):
    started = results_file.utc_now()
    try:
      result = run_workload(settings, log)
    except SettingsError as e:  # a mistyped flag found once the rows are built: the measured entry stays
      log(f"[{key}] not run: {e} ({output_dir}'s entry for it, if any, is left as it was)")
      continue
    except Exception as e:  # One workload's failure is its entry; what was measured before and after it is kept.
      result = {"settings": dataclasses.asdict(settings), "status": "failed",
                "reason": f"{type(e).__name__}: {str(e)[:2000]}"}
      # A traceback only for what is not an error about the input (cli.is_user_error: those name the fix).
      log(f"[{key}] FAILED: {result['reason']}" + ("" if cli.is_user_error(e) else f"\n{traceback.format_exc()}"))
    results_file.record(results, key, result, started, output_dir, log)
  results_file.log_summary(results, keys, log)
  return results



def settings_from_flags(flag_values) -> List[BenchSettings]:
  def split(value):
    return tuple(x.strip() for x in value.split(",") if x.strip()) if value else ()

  compare = () if flag_values.compare in ("", "none") else split(flag_values.compare)
  for peer in compare:
    if peer not in PEERS:
      raise ValueError(f"--compare: unknown peer {peer!r}; known: {PEERS}.")
  dtypes = split(flag_values.dtype)
  for dtype in dtypes:
    if dtype not in ("float32", "bfloat16"):
      raise ValueError(f"--dtype: unknown dtype {dtype!r}; expected float32 and/or bfloat16.")
  base = dict(batch_size=flag_values.batch_size, seq_length=flag_values.seq_length,
              max_predictions_per_seq=flag_values.max_predictions_per_seq, compare=compare,
              repeats=flag_values.repeats, warmup=flag_values.warmup, seed=flag_values.seed,
              matmul_peak=flag_values.matmul_peak, spm_model_file=flag_values.spm_model_file,
              text_file=flag_values.text_file, variants=flag_values.variants, rows=split(flag_values.rows),
              frozen_weight_kernels=getattr(flag_values, "frozen_weight_kernels", False),
              op_profile=getattr(flag_values, "op_profile", False),
              model_dir=getattr(flag_values, "model_dir", None),
              baseline_model_dir=getattr(flag_values, "baseline_model_dir", None),
              eval_file=getattr(flag_values, "eval_file", None),
              patience=tuple(int(p) for p in split(getattr(flag_values, "patience", "1,2,3,4,5,6"))),
              max_examples=getattr(flag_values, "max_examples", 0), openvino=getattr(flag_values, "openvino", False),
              depthwise_iterations=getattr(flag_values, "depthwise_iterations", 0))
  if flag_values.suite:
    if flag_values.suite not in SUITES:
      raise ValueError(f"--suite={flag_values.suite!r} is not one of {sorted(SUITES)}.")
    given = [name for name in ("workload", "preset", "dtype") if _given(flag_values, name)]
    if given:  # (each suite entry sets its own: they were dropped without a word)
      raise ValueError(f"--suite={flag_values.suite} sets each entry's workload, preset and dtype; drop "
                       f"{', '.join('--' + n for n in given)}, or run that workload alone with --workload.")
    out = []
    for entry in SUITES[flag_values.suite]:
      entry = dict(entry)
      if "dtype" in entry:
        entry["dtypes"] = split(entry.pop("dtype"))
      if "compare" in entry:  # The suite narrows the peers to those that matter here; --compare still limits them.
        entry["compare"] = tuple(p for p in split(entry.pop("compare")) if p in compare)
      out.append(BenchSettings(**{**base, **entry}))
    return out
  return [BenchSettings(workload=flag_values.workload, preset=flag_values.preset, dtypes=dtypes, **base)]


def _given(flag_values, name: str) -> bool:
  """Whether flag `name` was set on the command line (False for a plain settings object without absl's flags)."""
  try:
    return bool(flag_values[name].present)
  except (TypeError, KeyError, AttributeError):
    return False


def define_flags(fv=None) -> None:
  """Defines the binary's flags on `fv` (never at import time)."""
  from absl import flags
  fv = flags.FLAGS if fv is None else fv
  flags.DEFINE_enum("workload", "encoder_inference", list(WORKLOADS), "What to measure.", flag_values=fv)
  flags.DEFINE_string("suite", None, f"A named list of workloads instead of --workload: {sorted(SUITES)}.",
                      flag_values=fv)
  flags.DEFINE_string("preset", "albert-base-v2", "albert-* preset, 'tiny', or a config.json path.", flag_values=fv)
  flags.DEFINE_integer("batch_size", 8, "Batch size.", flag_values=fv)
  flags.DEFINE_integer("seq_length", 128, "Sequence length.", flag_values=fv)
  flags.DEFINE_integer("max_predictions_per_seq", 20, "Masked positions per sequence (pretrain_step).", flag_values=fv)
  flags.DEFINE_string("dtype", "float32", "Comma-separated: float32, bfloat16 (bf16 = mixed_bfloat16 for ours).",
                      flag_values=fv)
  flags.DEFINE_string("compare", ",".join(PEERS), "Comma-separated peers to run alongside ('none' for none).",
                      flag_values=fv)
  flags.DEFINE_integer("repeats", 5, "Timed repetitions per row (interleaved across rows).", flag_values=fv)
  flags.DEFINE_integer("warmup", 1, "Untimed calls per row after the first (compiling) call.", flag_values=fv)
  flags.DEFINE_enum("variants", "all", ["all", "minimal"],
                    "all: every ablation row (tf.function/XLA, unfused QKV, layer loop, MLM at all positions); "
                    "minimal: ours with XLA per dtype, and the peers.", flag_values=fv)
  flags.DEFINE_string("rows", None, "Comma-separated names of our rows to keep (default: all of --variants; "
                      "depthwise_serving: its modes).", flag_values=fv)
  flags.DEFINE_integer("seed", 0, "Seed of the weights and inputs.", flag_values=fv)
  flags.DEFINE_bool("matmul_peak", True, "Time the fp32/bf16 matmul peak in the same rotation (for MFU).",
                    flag_values=fv)
  flags.DEFINE_string("spm_model_file", None, "SentencePiece model for tokenize/data_prep (default: the checkout's "
                      "test fixture, else a small one trained once into a temporary folder).", flag_values=fv)
  flags.DEFINE_string("text_file", None, "Text lines for tokenize/data_prep (default: stdlib docstrings).",
                      flag_values=fv)
  flags.DEFINE_string("output_dir", "bench_out", "Where results.json and the PNG charts go.", flag_values=fv)
  flags.DEFINE_bool("frozen_weight_kernels", False,
                    "Run --workload (inference only) with TF_ONEDNN_ASSUME_FROZEN_WEIGHTS=1, in a child process: "
                    "TF's oneDNN MatMul kernels then use oneDNN's blocked brgemm inner product with weights reordered "
                    "once. Never for training: the kernels keep their first weights.", flag_values=fv)
  flags.DEFINE_string("model_dir", None, "early_exit: a classifier fine-tuned with task.exit_heads=true.",
                      flag_values=fv)
  flags.DEFINE_string("baseline_model_dir", None, "early_exit: the same task fine-tuned without exit heads (exit "
                      "heads' cost, static elastic depth).", flag_values=fv)
  flags.DEFINE_string("eval_file", None, "early_exit: the labelled dev file (GLUE TSV or a text-task file).",
                      flag_values=fv)
  flags.DEFINE_string("patience", "1,2,3,4,5,6", "early_exit: comma-separated patience values.", flag_values=fv)
  flags.DEFINE_integer("max_examples", 0, "early_exit: the first N examples of --eval_file only (0 = all).",
                       flag_values=fv)
  flags.DEFINE_bool("openvino", False, "early_exit / depthwise_serving: also the rows / modes run by OpenVINO.",
                    flag_values=fv)
  flags.DEFINE_integer("depthwise_iterations", 0, "depthwise_serving: the server's --depthwise_iterations (block "
                       "iterations per depth-wise step; 0: the server's default).", flag_values=fv)
  flags.DEFINE_bool("op_profile", False,
                    "After the timed repetitions, profile one more step of each of our TF rows (TF profiler) and "
                    "add op_profiles to the result: op time per step, the GEMM share and the top op types.",
                    flag_values=fv)


def main(argv, fv=None) -> None:
  del argv
  os.environ.setdefault("KERAS_BACKEND", "tensorflow")  # the KerasHub peer runs on Keras' TensorFlow backend
  from absl import flags
  import tensorflow as tf
  fv = flags.FLAGS if fv is None else fv
  tf.get_logger().setLevel("ERROR")  # Each row is its own tf.function; the retracing warning does not apply.
  settings_list = settings_from_flags(fv)
  results = run(settings_list, fv.output_dir)
  failed = [key for key in workload_keys(settings_list) if results["workloads"][key].get("status") == "failed"]
  if failed:  # Written and logged above; the exit status says so too (scripts and `make bench` stop on it).
    raise RuntimeError(f"workload(s) {', '.join(failed)} failed: the reasons are in the log above and in "
                       f"{results_file.results_path(fv.output_dir)}, with the other workloads' results.")
