r"""`--workload=depthwise_serving`: depth-wise continuous batching against the server's other ways of running an
exit-head classifier, open loop (issue 47).

    python -m experiments.benchmark --workload=depthwise_serving --model_dir=FINE_TUNED_WITH_EXIT_HEADS \
        --eval_file=DEV.tsv --patience=5 --batch_size=16

One classifier fine-tuned with `task.exit_heads=true` is served (`python -m official_albert.serve`, a localhost port)
three ways, each with `--batch_size` texts per block call:
- `full_depth`: dynamic batching, every text through all L iterations (`--max_batch_size`);
- `in_call_exit`: dynamic batching with early exit inside each call (`--patience`): a call's rows leave one by one,
  but the next call starts only when its slowest row is done;
- `depthwise`: `--depthwise_batching --slots` at the same patience: texts join and leave between steps of
  `--depthwise_iterations` iterations (this workload's flag of that name, else the server's default);
- `depthwise_one_bucket`: the same with `--length_buckets=none` (one block call per step, every text padded to the
  served length, against one call per length bucket);
- `depthwise_full_depth`: depth-wise without `--patience` (every text through L iterations): the same runtime as
  `depthwise` (a graph per step, where the dynamic batcher calls the Keras model eagerly), so `depthwise` over it
  is the early exit's own gain, and it over `full_depth` the continuous batching and the graph's;
- with `--openvino`, the same three ways in OpenVINO (f32), so that depth-wise batching is compared within one
  runtime: `full_depth_openvino` and `in_call_exit_openvino` serve OpenVINO exports of the model (patience 0 and
  `--patience`, fixed at export; written to a temporary folder first), `depthwise_openvino` the model directory with
  the block converted to OpenVINO at start-up (`--depthwise_runtime=openvino`).
`--rows=MODE,...` serves only those modes (full depth always, first: it sets the rates' scale).
Each gets an untimed warm-up (every text once at concurrency 1, 4 and 16: OpenVINO compiles kernels per new input
shape) and then the same open-loop Poisson sweep (the eval file's texts, one per request, exponential gaps; the rates
are fractions of full depth's closed-loop throughput at concurrency 16, measured first; a mode's sweep stops after
two levels it does not keep up with), each level bounded in requests and seconds: offered / sent / achieved rate,
p50 / p99, the requests answered, refused and lost, and the mean rows per block call (the server's
`albert_batch_size`: texts per call, or slots occupied per step for depthwise). When full depth's closed loop answers
none of its requests there is no rate to scale the sweeps by: the workload stops there with status "failed", its
reason the counts and the end of the server's log.

The summary: full depth's highest held rate (`server_load.knee`) and its p99 there; for the others the highest
rate held (achieved ≥ 95% of sent) with p99 ≤ 1.2 × that p99 (the OpenVINO modes against `full_depth_openvino`'s
when it ran); their ratios to their runtime's full depth and to each other; the dev
accuracy and mean exit iteration at full depth and at the patience (`pipelines.classify` in process — the served
answers equal it, tests/official_albert/serving/test_depthwise.py); and the ideal speed-up L / mean exit.
"""

from __future__ import annotations

import os
import tempfile
from typing import Any, Dict, List, Optional, Sequence

import numpy as np

from experiments.benchmark.core import BenchSettings
from experiments.benchmark.early_exit import labelled_texts
from experiments.benchmark.server_load import answered_none
from experiments.benchmark.server_load import closed_loop
from experiments.benchmark.server_load import knee
from experiments.benchmark.server_load import poisson
from experiments.benchmark.server_load import ServerProcess

MODES = ("full_depth", "in_call_exit", "depthwise", "depthwise_one_bucket", "depthwise_full_depth")
OPENVINO_MODES = ("full_depth_openvino", "in_call_exit_openvino", "depthwise_openvino")
EXPORTED_MODES = {"full_depth_openvino": False, "in_call_exit_openvino": True}  # served from an export: with patience?
RATE_FRACTIONS = (0.25, 0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0)
WARM_UP_CONCURRENCY = (1, 4, 16)
P99_SLACK = 1.2  # a mode's held rate: p99 within this factor of full depth's p99 at full depth's held rate


def _budget(settings: BenchSettings) -> Dict[str, Any]:
  if settings.preset == "tiny":  # (the test: three of the modes, three levels)
    return {"modes": MODES[:3], "fractions": (0.5, 1.0, 2.0), "poisson_seconds": 3.0, "poisson_requests": 60,
            "closed_requests": 4, "closed_seconds": 10.0}
  return {"modes": MODES, "fractions": RATE_FRACTIONS, "poisson_seconds": 15.0, "poisson_requests": 2000,
          "closed_requests": 30, "closed_seconds": 60.0}


def server_flags(mode: str, patience: int, batch_size: int, depthwise_iterations: int = 0) -> List[str]:
  """The server's flags of one mode (its `--max_batch_size` is set by ServerProcess; `depthwise_iterations` > 0:
  the depth-wise modes' `--depthwise_iterations`, else the server's default)."""
  if mode == "full_depth" or mode in EXPORTED_MODES:  # (an export's patience is fixed in its graph)
    return []
  if mode == "in_call_exit":
    return [f"--patience={patience}"]
  flags = ([] if mode == "depthwise_full_depth" else [f"--patience={patience}"]) + [
      "--depthwise_batching", f"--slots={batch_size}"]
  if mode == "depthwise_one_bucket":
    flags.append("--length_buckets=none")
  if depthwise_iterations:
    flags.append(f"--depthwise_iterations={depthwise_iterations}")
  return flags + (["--depthwise_runtime=openvino"] if mode in OPENVINO_MODES else [])  # (exports returned above)


def kept_up(row: Dict[str, Any]) -> bool:
  """Whether a sweep level's answers kept up with its arrivals (achieved ≥ 95% of the rate sent)."""
  return row["achieved_per_s"] >= 0.95 * row["sent_per_s"]


def held_rate(rows: Sequence[Dict[str, Any]], p99_bound_ms: float) -> Optional[float]:
  """The highest offered rate kept up with (achieved ≥ 95% of the rate sent) with p99 ≤ `p99_bound_ms`."""
  held = [r["offered_per_s"] for r in rows if r["p99_ms"] is not None and r["p99_ms"] <= p99_bound_ms and kept_up(r)]
  return max(held) if held else None


def quality(model_dir: str, texts: Sequence[str], labels: np.ndarray, patience: int) -> Dict[str, Any]:
  """Dev accuracy and exit iterations at full depth and at `patience`, in process (the served answers' function),
  the model's L (`num_hidden_layers`) and served `seq_length`."""
  from official_albert.serving import pipelines  # noqa: PLC0415 (TF after the driver's set-up)
  from official_albert.serving.pipeline_inputs import default_seq_length  # noqa: PLC0415
  model, tokenizer, _ = pipelines.resolve_model(model_dir, "classifier", None, True, "hf", "quality")
  seq_length = default_seq_length(model, model_dir)
  out: Dict[str, Any] = {"num_hidden_layers": int(model.config.num_hidden_layers), "seq_length": int(seq_length)}
  for name, p in (("full_depth", None), ("patience", patience)):
    results = pipelines.classify(model, list(texts), tokenizer=tokenizer, batch_size=32, patience=p,
                                 seq_length=seq_length)
    exits = np.asarray([r["exit_iteration"] for r in results])
    out[name] = {"accuracy": round(float(np.mean([r["label_id"] for r in results] == labels)), 4),
                 "exit_mean": round(float(exits.mean()), 3)}
  return out


def mean_rows(before: Dict[str, float], after: Dict[str, float]) -> Optional[float]:
  calls = after["count"] - before["count"]
  return round((after["sum"] - before["sum"]) / calls, 2) if calls else None


def _bound(rows: Optional[List[Dict[str, Any]]]):
  """(held rate, p99 bound) a full-depth sweep sets: its knee and 1.2 × its p99 there; None when it held none."""
  rate = knee(rows) if rows else None
  if rate is None:
    return None
  return rate, P99_SLACK * next(r["p99_ms"] for r in rows if r["offered_per_s"] == rate)


def summarize(sweeps: Dict[str, List[Dict[str, Any]]], layers: int, exit_mean: float) -> Dict[str, Any]:
  """The held rates and ratios of the module docstring."""
  summary: Dict[str, Any] = {"full_depth_held_per_s": knee(sweeps["full_depth"]),
                             "ideal_speedup": round(layers / exit_mean, 3)}
  bounds = {"": _bound(sweeps["full_depth"])}  # per runtime suffix: its full depth's held rate and p99 bound
  if bounds[""] is None:
    summary["note"] = "full depth kept up with no offered rate"
  else:
    summary["p99_bound_ms"] = round(bounds[""][1], 2)
  if "full_depth_openvino" in sweeps:
    summary["full_depth_openvino_held_per_s"] = knee(sweeps["full_depth_openvino"])
    bounds["_openvino"] = _bound(sweeps["full_depth_openvino"])
    if bounds["_openvino"] is not None:
      summary["p99_bound_openvino_ms"] = round(bounds["_openvino"][1], 2)
  for mode in [m for m in sweeps if m not in ("full_depth", "full_depth_openvino")]:
    suffix = "_openvino" if mode.endswith("_openvino") and "_openvino" in bounds else ""
    if bounds[suffix] is None:
      summary[f"{mode}_held_per_s"] = summary[f"{mode}_vs_full_depth{suffix}"] = None
      continue
    base_rate, mode_bound = bounds[suffix]
    rate = summary[f"{mode}_held_per_s"] = held_rate(sweeps[mode], mode_bound)
    summary[f"{mode}_vs_full_depth{suffix}"] = round(rate / base_rate, 3) if rate else None
  for suffix in ("", "_openvino"):
    dw, ic = f"depthwise{suffix}_held_per_s", f"in_call_exit{suffix}_held_per_s"
    if dw in summary and ic in summary:
      summary[f"depthwise{suffix}_vs_in_call_exit{suffix}"] = (
          round(summary[dw] / summary[ic], 3) if summary[dw] and summary[ic] else None)
  dw, dw_full = summary.get("depthwise_held_per_s"), summary.get("depthwise_full_depth_held_per_s")
  summary["depthwise_vs_depthwise_full_depth"] = round(dw / dw_full, 3) if dw and dw_full else None
  return summary


def served_modes(settings: BenchSettings, budget: Dict[str, Any]) -> List[str]:
  """The modes to serve, in order: the budget's (and with `--openvino` the OpenVINO ones), or `--rows` (full
  depth always first)."""
  modes = list(budget["modes"]) + (list(OPENVINO_MODES) if settings.openvino else [])
  if not settings.rows:
    return modes
  known = MODES + OPENVINO_MODES
  unknown = sorted(set(settings.rows) - set(known))
  if unknown:
    raise ValueError(f"--rows: no such mode(s) {unknown} in depthwise_serving; known: {', '.join(known)}")
  return ["full_depth"] + [m for m in known if m in settings.rows and m != "full_depth"]


def _export(model_dir: str, root: str, mode: str, patience: int, seq_length: int) -> str:
  """An f32 OpenVINO export of `model_dir` for an exported mode (patience fixed at export), in `root`."""
  from official_albert.serving import openvino_export  # noqa: PLC0415 (the optional OpenVINO extra)
  return openvino_export.export_openvino(model_dir, os.path.join(root, f"export_{mode}"), "classifier", "f32",
                                         seq_length=seq_length, patience=patience if EXPORTED_MODES[mode] else 0)


# Long because: the three servers' sweeps in the order they run, with the bounds of every loop read together.
def depthwise_serving_workload(settings: BenchSettings, log=print) -> Dict[str, Any]:
  """See the module docstring; `settings.patience[0]` is the patience, `settings.batch_size` the rows per call."""
  try:
    import fastapi  # noqa: F401,PLC0415
  except ImportError as e:
    return {"status": "skipped", "reason": f"the serve extra (requirements-serve.txt) is not installed: {e}"}
  if not settings.model_dir or not settings.eval_file:
    return {"status": "skipped", "reason": "--workload=depthwise_serving needs --model_dir (a classifier fine-tuned "
                                           "with task.exit_heads=true) and --eval_file (its labelled dev file)"}
  from experiments.benchmark.server_load import batch_stats  # noqa: PLC0415
  budget = _budget(settings)
  patience = int(settings.patience[0])
  texts, labels = labelled_texts(settings)
  scores = quality(settings.model_dir, texts, labels, patience)
  layers, seq_length = scores.pop("num_hidden_layers"), scores.pop("seq_length")
  log(f"[depthwise_serving] {len(texts)} texts; L={layers}; patience {patience}; quality {scores}")
  sent = texts[:settings.max_examples] if settings.max_examples else texts
  rows, sweeps, base, exit_codes, failure = [], {}, None, {}, None
  modes = served_modes(settings, budget)
  with tempfile.TemporaryDirectory(prefix="albert_bench_depthwise_") as root:
    for mode in modes:
      folder = (_export(settings.model_dir, root, mode, patience, seq_length) if mode in EXPORTED_MODES
                else settings.model_dir)
      server = ServerProcess(folder, settings.batch_size, os.path.join(root, f"server_{mode}.log"),
                             server_flags(mode, patience, settings.batch_size, settings.depthwise_iterations))
      try:
        server.wait_ready()
        # Untimed: every text once at concurrency 1, 4 and 16 (batches or steps of few rows and of many), so that
        # no level pays for shapes seen first (OpenVINO compiles kernels per new input shape, oneDNN creates
        # primitives per shape: a few hundred ms each, which would be a low-load level's p99).
        for concurrency in WARM_UP_CONCURRENCY:
          warm = closed_loop(server.port, sent, concurrency, -(-len(sent) // concurrency), budget["closed_seconds"])
          log(f"[depthwise_serving] {mode} warm-up c{concurrency}: {warm['requests']} requests, "
              f"{warm['refused']} refused, {warm['lost']} lost")
        if base is None:  # the rates' scale: full depth's closed-loop throughput at concurrency 16
          closed = closed_loop(server.port, sent, 16, budget["closed_requests"], budget["closed_seconds"])
          rows.append({"name": "full_depth_closed_c16", "mode": "full_depth", **closed})
          base = closed["requests_per_s"]
          log(f"[depthwise_serving] full depth closed c16: {closed}")
          if base <= 0:  # every request refused or lost: no rate to scale any mode's sweep by
            failure = answered_none(mode, [closed], server.log_path)
            log(f"[depthwise_serving] {failure}")
            break  # (the server is stopped below)
        sweeps[mode] = []
        for i, fraction in enumerate(budget["fractions"]):
          before = batch_stats(server.port)
          row = poisson(server.port, sent, base * fraction, budget["poisson_requests"], budget["poisson_seconds"],
                        settings.seed + i)
          row = {"name": f"{mode}_poisson_{fraction:g}", "mode": mode, "fraction": fraction, **row,
                 "mean_rows_per_call": mean_rows(before, batch_stats(server.port))}
          sweeps[mode].append(row)
          rows.append(row)
          log(f"[depthwise_serving] {mode} {fraction:g}x: {row}")
          if sum(not kept_up(r) for r in sweeps[mode][-2:]) == 2:
            break  # two levels past what this mode keeps up with: higher rates only grow the backlog
      finally:
        server.stop()
        exit_codes[mode] = server.proc.returncode
  result = {"status": "ok", "rows": rows, "quality": scores, "patience": patience,
            "depthwise_iterations": settings.depthwise_iterations or "server default",
            "slots": settings.batch_size, "num_hidden_layers": layers, "eval_file": settings.eval_file,
            "model_dir": settings.model_dir, "examples": len(texts), "server_exit_codes": exit_codes,
            "unit": "requests"}
  if failure:
    return {**result, "status": "failed", "reason": failure}
  result["summary"] = summarize(sweeps, layers, scores["patience"]["exit_mean"])
  log(f"[depthwise_serving] summary: {result['summary']}")
  return result
