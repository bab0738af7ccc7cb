r"""results.json and the charts of a benchmark run (experiments/benchmark/driver.py), and the table it logs.

One entry per workload key (the workload's name; `..._frozen_weight_kernels` for a frozen-weight run; a second
entry of one workload in the same run gets its position as a suffix, e.g. `serving_11`). Why merged: the documented
single-workload commands (docs/performance.md, "one run per table row group") all write to --output_dir=bench_out,
so a run into a folder that has a results.json **merges into it**: a workload run again replaces its entry and
removes that entry's charts; the other entries, from earlier runs, stay with theirs. Each entry therefore records
the machine and the time that measured it (its own `environment` and `command`, `started_utc` and
`finished_utc`); the top-level `environment` and `command` are the latest run's. The log says which entries were
kept and which replaced. results.json is written after every workload (atomically), so a suite that stops halfway
keeps every workload it finished. The merge is results_merge.py's, which the standalone
`python -m experiments.benchmark.long_inputs` writes through too: its `long_inputs` entry merges the same way.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import platform
import sys
from typing import Any, Dict, Optional, Sequence

from experiments.benchmark import early_exit
from experiments.benchmark import long_inputs
from experiments.benchmark import results_merge
from experiments.benchmark.machine import cpu_info
from experiments.benchmark.results_merge import loadavg
from experiments.benchmark.results_merge import results_path  # noqa: F401 (the driver's results_file.results_path)
from experiments.benchmark.results_merge import start  # noqa: F401 (the driver's and the tests' results_file.start)
from experiments.benchmark.results_merge import utc_now
from experiments.benchmark.results_merge import WORKLOADS_KEY
from experiments.charts import save_png
from official_albert.precision import onednn_custom_ops_enabled
from official_albert.precision import probe_matmul_speed


def environment_info() -> Dict[str, Any]:
  """The machine and software of this run (results.json's `environment`, and each entry's own copy)."""
  import keras
  import tensorflow as tf
  info = {"python": sys.version.split()[0], "platform": platform.platform(), "cpu_count": os.cpu_count(),
          "tensorflow": tf.__version__, "keras": keras.__version__, "time_utc": utc_now(), "loadavg_start": loadavg()}
  # The CPU by vendor, family, model and stepping as well as its name ("AMD EPYC" names every EPYC generation on
  # these VMs), and the flags its bf16 / fp16 rows could use.
  info["cpu"] = cpu_info()
  info["cpu_model"] = info["cpu"].get("model_name")
  # Whether TF runs its oneDNN kernels (off by default on an AVX2-only CPU): it decides which kernels a profile shows.
  info["onednn_custom_ops"] = onednn_custom_ops_enabled()
  info["onednn_max_cpu_isa"] = os.environ.get("ONEDNN_MAX_CPU_ISA")
  # TensorFlow's thread pools when set from the environment (docs/serving.md, Threads); a started server inherits them.
  info["tf_num_intraop_threads"] = os.environ.get("TF_NUM_INTRAOP_THREADS")
  info["tf_num_interop_threads"] = os.environ.get("TF_NUM_INTEROP_THREADS")
  # What the flags do not tell: whether bf16 is faster here (the same probe decides the demo's "auto" precision).
  info["precision_probe"] = probe_matmul_speed().as_dict()
  # The installed versions, read from the package metadata: importing the peers would cost every run ~5 s (torch and
  # transformers) before its first row, in workloads that never use them.
  for name in ("torch", "transformers", "keras_hub"):
    try:
      info[name] = importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:  # Optional peers: absence is recorded, not an error.
      info[name] = None
  return info


def record(results: Dict[str, Any], key: str, result: Dict[str, Any], started_utc: str, output_dir: str,
           log=print) -> str:
  """Puts `result` under `key`, draws its charts and writes results.json (results_merge.record, which says how an
  earlier run's entry is replaced). Returns the JSON path."""
  return results_merge.record(results, key, result, started_utc, output_dir, draw=draw_charts, log=log)


def draw_charts(result: Dict[str, Any], output_dir: str, key: str) -> None:
  """Draws the entry's bar (or long_inputs) chart and its early-exit frontier, and names them in the entry."""
  png = plot(result, os.path.join(output_dir, f"{key}.png"))
  if png:
    result["chart"] = os.path.basename(png)
  frontier = early_exit.plot_frontier(result, os.path.join(output_dir, f"{key}_frontier.png"))
  if frontier:
    result["frontier_chart"] = os.path.basename(frontier)


def plot(result: Dict[str, Any], path: str) -> Optional[str]:
  """A bar chart of examples/s (median, min-max whiskers) for a row-based workload; None when there is nothing.

  long_inputs: time and peak memory against length instead (long_inputs.plot)."""
  if result.get("settings", {}).get("workload") == "long_inputs":
    return long_inputs.plot(result.get("rows", []), path)
  rows = [r for r in result.get("rows", []) if r.get("status") == "ok" and "examples_per_s" in r]
  if not rows:
    return None
  import matplotlib
  matplotlib.use("Agg")
  from matplotlib import pyplot as plt
  names = [r["name"] for r in rows]
  values = [r["examples_per_s"] for r in rows]
  low = [r["examples_per_s"] - r["examples_per_s"] * r["median_s"] / r["max_s"] for r in rows]
  high = [r["examples_per_s"] * r["median_s"] / r["min_s"] - r["examples_per_s"] for r in rows]
  colors = {"ours": "tab:blue", "hf_torch": "tab:orange", "keras_hub": "tab:green"}
  fig, ax = plt.subplots(figsize=(9, 0.4 * len(rows) + 1.5))
  ax.barh(range(len(rows)), values, xerr=[low, high], color=[colors.get(r["impl"], "tab:gray") for r in rows])
  ax.set_yticks(range(len(rows)), names, fontsize=8)
  ax.invert_yaxis()
  s = result["settings"]
  unit = result.get("unit", "examples")
  ax.set_xlabel(f"{unit}/s (median; whiskers min-max)")
  seq = result.get("seq_length", s["seq_length"])  # (what ran: a workload cuts it to the model's positions)
  ax.set_title(f"{s['workload']} {s.get('preset', '')} batch={s['batch_size']} seq={seq}", fontsize=10)
  for i, r in enumerate(rows):
    label = f"{r['examples_per_s']:.2f}" + (f"  MFU {r['mfu']:.0%}" if "mfu" in r else "")
    ax.text(r["examples_per_s"], i, " " + label, va="center", fontsize=7)
  return save_png(fig, path, dpi=110)


def format_table(results: Dict[str, Any]) -> str:
  """A markdown table of every row (docs/performance.md is made from it)."""
  lines = ["| workload | row | dtype | median s | p50 ms | p99 ms | ex/s | ex/CPU-s | tokens/s | GFLOP/s | MFU | "
           "MFU vs bf16 peak | first call s |", "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]

  def num(r, key, fmt):
    return format(r[key], fmt) if isinstance(r.get(key), (int, float)) else ""

  for key, result in results["workloads"].items():
    for r in result.get("rows", []):
      if "status" not in r:
        continue  # compile/data_prep rows have their own layout (see results.json).
      if r.get("status") != "ok" or "median_s" not in r:
        if "name" in r and r.get("status") != "ok":
          lines.append(f"| {key} | {r['name']} | {r.get('dtype', '')} | {r.get('status')}: "
                       f"{r.get('reason', '')[:60]} |" + " |" * 9)
        continue
      lines.append(f"| {key} | {r['name']} | {r['dtype']} | {r['median_s']:.3f} | {num(r, 'p50_ms', '.1f')} | "
                   f"{num(r, 'p99_ms', '.1f')} | {num(r, 'examples_per_s', '.2f')} | "
                   f"{num(r, 'examples_per_cpu_s', '.0f')} | {num(r, 'tokens_per_s', '.0f')} | "
                   f"{num(r, 'gflops', '.1f') if r.get('gflop_per_step') else ''} | {num(r, 'mfu', '.0%')} | "
                   f"{num(r, 'mfu_vs_bf16_peak', '.0%')} | "
                   f"{num(r, 'first_call_s', '.1f')} |")
  return "\n".join(lines)


def log_summary(results: Dict[str, Any], keys: Sequence[str], log=print) -> None:
  """The table, the goals and the headline comparisons of the entries `keys` (this run's)."""
  mine = {key: results[WORKLOADS_KEY][key] for key in keys}
  log(format_table({WORKLOADS_KEY: mine}))
  for key, result in mine.items():
    for g in result.get("goals", []):
      detail = (f" (ratio of medians {g['ratio']:.2f}, paired {g['paired_ratio']:.2f})" if "paired_ratio" in g else
                f" (ratio {g['ratio']:.2f})" if "ratio" in g else
                f" ({g['margin_ms']:+.1f} ms)" if "margin_ms" in g else
                f" (MFU {g['mfu']:.0%})" if isinstance(g.get("mfu"), float) else
                f" ({g['examples_per_s']:.0f} examples/s, {g['examples_per_cpu_s']:.0f} per CPU-second)"
                if "examples_per_s" in g else "")
      log(f"[{key}] goal {g['goal']}: {g['status']}{detail}")
    if "comparison" in result:
      log(f"[{key}] " + json.dumps(result["comparison"]))
    if "median_instances_per_s" in result:
      log(f"[{key}] {result['median_instances_per_s']:.0f} instances/s (target 3300)")
    if result.get("status") == "failed":
      log(f"[{key}] FAILED: {result.get('reason', '')}")
