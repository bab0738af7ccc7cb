r"""The `long_inputs` workload: albert-base at 512-8192 tokens, batch 1, dense vs chunked vs block-sparse attention.

    python -m experiments.benchmark --workload=long_inputs --output_dir=bench_long          # through the driver
    python -m experiments.benchmark.long_inputs --output_dir=bench_long                     # the same, standalone
    python -m experiments.benchmark.long_inputs --backend=jax --isolate=group --output_dir=bench_long_gpu

Both merge into a results.json already in --output_dir (results_merge.py): the `long_inputs` entry and chart are
replaced, the other workloads' entries (`make bench`, the driver's single-workload commands) stay.

Rows: ours (`AlbertEncoder`, albert-base-v2 shape, the position table as long as the longest sequence) with
attention_type dense / chunked / block_sparse; peers HF `BigBirdModel` (block_sparse, block 64, 3 random blocks:
the same ITC pattern, BERT-base shape with E = H) and HF `AlbertModel` (dense; transformers' default attention
implementation, recorded per row: "sdpa" is PyTorch's fused attention). Each in float32 and bfloat16 (ours:
mixed_bfloat16; torch: autocast), for inference (one forward pass) and a training step (forward + backward to every
parameter's gradient; no optimizer update, which is O(parameters) and the same at every length).

Method. Every row runs in its own child process (`--isolate=row`, the default) and reports the **peak resident
memory of that process** (`ru_maxrss`, which includes the framework: `rss_setup_mib` is the resident memory after the
model and inputs are built, before the first call) — on an accelerator also the device's peak (`device_peak_mib`:
torch's `max_memory_allocated` after a reset, JAX's `peak_bytes_in_use`) and, for JAX rows, XLA's own accounting of
the compiled step (`xla_temp_mib`: the temporaries at the program's peak). A row whose process outgrows
`--memory_limit_gb` is stopped and reported as such (2 GiB of head room are left to the machine by default). With
`--isolate=group` one process runs every attention, length and mode of one (engine, dtype), by `Row.priority`: far
fewer start-ups and compilations, which is what a short accelerator session needs; the CPU peak then is the
group's (`peak_rss_process_mib`: no memory ratio is computed from it, and the chart leaves it out), each row adds
its own growth above its `rss_setup_mib` (`rss_growth_mib`), and only the device and XLA figures are per row.
Timing: the first call (tracing, compilation) is reported apart as `first_call_s`; then `--warmup` untimed and
`--repeats` timed calls, median reported; the 1-minute load average is recorded at each row's start and end (the
machine is shared).

The standalone form imports only NumPy, absl, Keras, the chosen backend and `official_albert.config` / `.modeling` /
`.file_io` (plus torch and transformers for the peers); it never imports TensorFlow unless `--backend=tensorflow`,
so it runs where only JAX (or only PyTorch) is installed. `--backend=openvino` times the serving path instead: our
encoder exported as `export_saved_model --format=openvino` exports it (float32 IR, converted from TensorFlow) and run
by OpenVINO's CPU runtime at the row's precision, inference rows only (`convert_compile_s`: export and compilation).
"""

from __future__ import annotations

import dataclasses
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from typing import Any, Dict, List, Optional, Sequence

from experiments.benchmark import results_merge
from experiments.benchmark.long_inputs_child import BLOCK_SIZE
from experiments.benchmark.long_inputs_child import IMPLS
from experiments.benchmark.long_inputs_child import loadavg
from experiments.benchmark.long_inputs_child import MODES
from experiments.benchmark.long_inputs_child import NUM_RANDOM_BLOCKS
from experiments.benchmark.long_inputs_child import OPTIONAL_IMPLS
from experiments.benchmark.long_inputs_child import RESULT_MARK
from experiments.benchmark.long_inputs_child import Row
from experiments.benchmark.long_inputs_child import SEQ_LENGTHS
from experiments.benchmark.long_inputs_child import SHARED_RSS_NOTE
from official_albert import cli
from official_albert.config import ATTENTION_TYPES

DTYPES = ("float32", "bfloat16")
# The entry's key in results.json, the driver's as well (its workload name); the chart is `<key>.png`.
WORKLOAD = "long_inputs"


def build_rows(seq_lengths: Sequence[int], attention_types: Sequence[str], dtypes: Sequence[str],
               modes: Sequence[str], impls: Sequence[str], backend: str) -> List[Row]:
  """The rotation: ours for every attention type, the peers with the attention they implement; shortest first."""
  for flag, values, known in (("--dtypes", dtypes, DTYPES), ("--modes", modes, MODES)):
    unknown = [v for v in values if v not in known]
    if unknown:  # (the child reads anything but bfloat16 as float32, anything but train_step as inference)
      raise ValueError(f"{flag}: unknown {unknown}; known: {list(known)}.")
  rows = []
  for impl in impls:
    if impl not in IMPLS + OPTIONAL_IMPLS:
      raise ValueError(f"--impls: unknown {impl!r}; known: {IMPLS + OPTIONAL_IMPLS}.")
    attentions = attention_types if impl == "ours" else (["block_sparse"] if impl == "hf_bigbird" else ["dense"])
    for attention in attentions:
      if attention not in ATTENTION_TYPES:
        raise ValueError(f"--attention_types: unknown {attention!r}; known: {ATTENTION_TYPES}.")
      for dtype in dtypes:
        for seq in sorted(seq_lengths):
          for mode in modes:
            if impl == "ours" and backend == "openvino" and mode != "inference":
              continue  # an OpenVINO IR has no training step: the peers' training rows stay
            rows.append(Row(impl, attention, dtype, int(seq), mode, backend if impl == "ours" else "torch"))
  return rows


def _memory_available_gib() -> float:
  with open("/proc/meminfo") as f:
    for line in f:
      if line.startswith("MemAvailable:"):
        return int(line.split()[1]) / 2**20
  return 8.0


def _tree_rss_mib(pid: int) -> float:
  """Resident memory of `pid` and its descendants (from /proc)."""
  total, todo = 0.0, [pid]
  while todo:
    current = todo.pop()
    try:
      with open(f"/proc/{current}/status") as f:
        for line in f:
          if line.startswith("VmRSS:"):
            total += int(line.split()[1]) / 1024.0
      with open(f"/proc/{current}/task/{current}/children") as f:
        todo += [int(c) for c in f.read().split()]
    except (OSError, ValueError):
      continue
  return total


def run_group(rows: Sequence[Row], settings: Dict[str, Any], memory_limit_mib: float, log=print,
              seconds: Optional[float] = None) -> List[Dict[str, Any]]:
  """Runs `rows` in one child process; returns their results (rows it never reached: failed, with the reason).

  `seconds`: the process starts no row after that many seconds, and is stopped 30 s later whatever it is doing.
  """
  started = time.time()
  with tempfile.TemporaryDirectory(prefix="albert_long_inputs_") as tmp:
    spec = os.path.join(tmp, "rows.json")
    with open(spec, "w") as f:
      json.dump({**settings, "rows": [dataclasses.asdict(r) for r in rows],
                 "deadline": started + seconds if seconds else None}, f)
    # Keras' backend in the child: OpenVINO rows are converted from TensorFlow; the peers' processes need none.
    backend = {"torch": "jax", "openvino": "tensorflow"}.get(rows[0].backend, rows[0].backend)
    env = dict(cli.child_env(), KERAS_BACKEND=backend, TF_CPP_MIN_LOG_LEVEL="2", XLA_PYTHON_CLIENT_PREALLOCATE="false")
    out_path = os.path.join(tmp, "out.txt")
    with open(out_path, "w") as out:
      proc = subprocess.Popen([sys.executable, "-m", "experiments.benchmark.long_inputs_child", spec],
                              stdout=out, stderr=subprocess.STDOUT, env=env)
      peak, stopped, killed, timed_out = 0.0, False, False, False
      while proc.poll() is None:
        rss = _tree_rss_mib(proc.pid)
        peak = max(peak, rss)
        if rss > memory_limit_mib:
          proc.kill()
          stopped = True
          break
        if seconds and time.time() > started + seconds + 30:
          proc.kill()
          timed_out = True
          break
        time.sleep(0.2)
      proc.wait()
    with open(out_path) as f:
      text = f.read()
  results = [json.loads(line[len(RESULT_MARK):]) for line in text.splitlines() if line.startswith(RESULT_MARK)]
  done = {r["name"] for r in results}
  # The polled peak is the process's: a row's own only when the process ran that row alone.
  peak_field = {"peak_rss_mib": peak} if len(rows) == 1 else {"peak_rss_process_mib": peak, "note": SHARED_RSS_NOTE}
  for row in rows:
    if row.name in done:
      continue
    if stopped:  # only the row that was running when the limit hit is out of memory; later ones never started
      status = "out_of_memory"
      reason = f"stopped: the process outgrew --memory_limit_gb ({memory_limit_mib / 1024:.1f} GiB resident)"
    elif killed:
      status = "not_run"
      reason = (f"not started: the group's process was stopped at the memory limit (--memory_limit_gb "
                f"{memory_limit_mib / 1024:.1f} GiB) in an earlier row")
    elif timed_out:
      status, reason = "not_run", "stopped: --time_budget_s spent"
    else:
      status, reason = "failed", f"child exited {proc.returncode}: {text[-800:]}"
    results.append({**dataclasses.asdict(row), "name": row.name, "status": status, "reason": reason, **peak_field})
    killed, stopped = killed or stopped, False
  for r in results:
    log(f"  {r['name']}: " + (f"{r['median_s']:.3f} s, {r['tokens_per_s']:.0f} tok/s, {_memory_text(r)}"
                              + f", load {r.get('loadavg_start')}" if r.get("status") == "ok"
                              else f"{r['status']}: {r.get('reason', '')[:200]}"))
  return results


def _memory_text(r: Dict[str, Any]) -> str:
  """A result's memory figures for the log: its own peak RSS, or a shared process's peak and the row's growth."""
  if "peak_rss_mib" in r:
    text = f"peak RSS {r['peak_rss_mib']:.0f} MiB"
  else:
    text = f"process peak RSS {r.get('peak_rss_process_mib', 0):.0f} MiB" + (
        f", row growth {r['rss_growth_mib']:.0f} MiB" if "rss_growth_mib" in r else "")
  return text + (f", device peak {r['device_peak_mib']:.0f} MiB" if r.get("device_peak_mib") else "")


def ratios(rows: Sequence[Dict[str, Any]]) -> Dict[str, float]:
  """The issue's comparisons per (dtype, length, mode): chunked/dense time and memory, dense/block_sparse speed-up,
  HF BigBird / our block_sparse speed-up.

  The memory ratio needs both rows' own peaks (`peak_rss_mib`, `--isolate=row`): in a shared process the later row's
  ru_maxrss includes the earlier row's peak, so a ratio of `peak_rss_process_mib` is not computed.
  """
  ok = {r["name"]: r for r in rows if r.get("status") == "ok"}
  out = {}
  for r in ok.values():
    if r["impl"] != "ours" or r["attention"] != "dense":
      continue
    key = f"{r['dtype']}_s{r['seq_length']}_{r['mode']}"
    chunked = ok.get(r["name"].replace("_dense_", "_chunked_"))
    sparse = ok.get(r["name"].replace("_dense_", "_block_sparse_"))
    if chunked:
      out[f"chunked_over_dense_time_{key}"] = chunked["median_s"] / r["median_s"]
      if "peak_rss_mib" in r and "peak_rss_mib" in chunked:
        out[f"dense_over_chunked_peak_rss_{key}"] = r["peak_rss_mib"] / chunked["peak_rss_mib"]
    if sparse:
      out[f"dense_over_block_sparse_time_{key}"] = r["median_s"] / sparse["median_s"]
  for r in ok.values():
    if r["impl"] == "hf_bigbird":
      key = f"{r['dtype']}_s{r['seq_length']}_{r['mode']}"
      for ours in ok.values():
        if (ours["impl"], ours["attention"], ours["dtype"], ours["seq_length"], ours["mode"]) == (
            "ours", "block_sparse", r["dtype"], r["seq_length"], r["mode"]):
          out[f"hf_bigbird_over_ours_block_sparse_time_{ours['backend']}_{key}"] = r["median_s"] / ours["median_s"]
  return out


def _chart_lines(rows: Sequence[Dict[str, Any]]) -> Dict[str, List[tuple]]:
  """{"engine_attention_dtype": sorted [(length, median_s, own peak MiB or None)]} from the rows' fields."""
  lines: Dict[str, List[tuple]] = {}
  for r in rows:
    engine = f"ours_{r.get('backend', 'tensorflow')}" if r["impl"] == "ours" else r["impl"]
    memory = r.get("device_peak_mib") or r.get("peak_rss_mib")
    lines.setdefault(f"{engine}_{r['attention']}_{r['dtype']}", []).append((r["seq_length"], r["median_s"], memory))
  return {k: sorted(v, key=lambda p: p[0]) for k, v in lines.items()}


def plot(rows: Sequence[Dict[str, Any]], path: str) -> Optional[str]:
  """Time and peak memory against length, one line per (engine, attention, dtype), inference and training.

  Lines are grouped by the rows' fields, not their names (a train_step name has "_s" after its length). The memory
  panel shows a row's own peak only (device, else `peak_rss_mib`): shared-process rows without a device figure are
  left out of it.
  """
  ok = [r for r in rows if r.get("status") == "ok"]
  if not ok:
    return None
  try:
    import matplotlib
  except ImportError:  # (an accelerator box with only JAX/torch installed: results.json alone)
    return None
  matplotlib.use("Agg")
  from matplotlib import pyplot as plt
  fig, axes = plt.subplots(2, 2, figsize=(12, 8))
  for col, mode in enumerate(MODES):
    for line, points in sorted(_chart_lines([r for r in ok if r["mode"] == mode]).items()):
      style = "--" if "bfloat16" in line else "-"
      axes[0, col].plot([p[0] for p in points], [p[1] for p in points], style, marker="o", label=line)
      memory = [(p[0], p[2]) for p in points if p[2] is not None]
      if memory:
        axes[1, col].plot([p[0] for p in memory], [p[1] for p in memory], style, marker="o", label=line)
    axes[0, col].set_title(f"{mode}: seconds per step (batch 1)")
    axes[1, col].set_title(f"{mode}: peak memory, MiB (device if any, else the row's own process RSS)")
    for ax in axes[:, col]:
      ax.set_xscale("log", base=2)
      ax.set_yscale("log")
      ax.set_xlabel("sequence length")
      ax.grid(True, which="both", alpha=0.3)
  if axes[0, 0].get_legend_handles_labels()[0]:
    axes[0, 0].legend(fontsize=6)
  fig.tight_layout()
  fig.savefig(path, dpi=110)
  plt.close(fig)
  return path


def environment() -> Dict[str, Any]:
  info: Dict[str, Any] = {"python": sys.version.split()[0], "platform": platform.platform(),
                          "cpu_count": os.cpu_count(), "loadavg_start": loadavg(),
                          "time_utc": results_merge.utc_now()}
  # The CPU as the driver's results.json names it (vendor, family, model, stepping, the bf16 / AMX flags): TF-free.
  from experiments.benchmark.machine import cpu_info
  info["cpu"] = cpu_info()
  info["cpu_model"] = info["cpu"].get("model_name")
  try:
    out = subprocess.run(["nvidia-smi", "--query-gpu=name,memory.total", "--format=csv,noheader"],
                         capture_output=True, text=True, timeout=20)
    if out.returncode == 0:
      info["gpu"] = out.stdout.strip()
  except (OSError, subprocess.SubprocessError):
    pass
  return info


def run_long_inputs(rows: Sequence[Row], isolate: str = "row", warmup: int = 1, repeats: int = 3,
                    memory_limit_gb: Optional[float] = None, time_budget_s: float = 0.0, preset: str = "albert-base-v2",
                    block_size: int = BLOCK_SIZE, num_random_blocks: int = NUM_RANDOM_BLOCKS,
                    log=print) -> Dict[str, Any]:
  """Runs the rows (each in its own process, or one process per group) and returns the workload's result.

  `time_budget_s` (0 = none): each process gets the remaining budget in proportion to its rows; a group process
  runs its rows by `Row.priority` and starts none after its share (rows left: status "not_run").
  """
  if isolate not in ("row", "group"):
    raise ValueError(f"--isolate={isolate!r}: row or group.")
  limit_gb = memory_limit_gb if memory_limit_gb else max(1.0, _memory_available_gib() - 2.0)
  settings = dict(max_length=max(r.seq_length for r in rows), warmup=warmup, repeats=repeats, preset=preset,
                  block_size=block_size, num_random_blocks=num_random_blocks)
  groups: Dict[str, List[Row]] = {}
  for row in rows:
    groups.setdefault(row.name if isolate == "row" else row.group, []).append(row)
  if isolate == "group":
    groups = {k: sorted(v, key=lambda r: r.priority) for k, v in groups.items()}
  log(f"[long_inputs] {len(rows)} rows in {len(groups)} processes, memory limit {limit_gb:.1f} GiB"
      + (f", time budget {time_budget_s:.0f} s" if time_budget_s else ""))
  deadline = time.time() + time_budget_s if time_budget_s else None
  results: List[Dict[str, Any]] = []
  remaining = len(rows)
  for members in groups.values():
    # Each process gets the remaining budget in proportion to its rows.
    seconds = max(1.0, (deadline - time.time()) * len(members) / remaining) if deadline else None
    remaining -= len(members)
    results += run_group(members, settings, limit_gb * 1024, log, seconds)
  return {"status": "ok", "rows": results, "ratios": ratios(results),
          "settings": {**settings, "isolate": isolate, "memory_limit_gb": limit_gb, "time_budget_s": time_budget_s,
                       "batch_size": 1}}


def write(result: Dict[str, Any], output_dir: str, log=print, results: Optional[Dict[str, Any]] = None) -> str:
  """Merges the `long_inputs` entry into `output_dir`'s results.json as the driver does, so a `make bench` or driver
  run's other entries stay (results_merge.record: this entry and its chart replaced, each entry with its own
  environment, command and times; written atomically), draws long_inputs.png; returns the JSON path.

  `results`: what `start_results` read before the run (main reads it first, so that a file the run cannot merge
  into stops it before anything is measured); None reads it now.

  Raises:
    ValueError: results.json is not valid JSON or not a benchmark results file; the message names it and the fix.
  """
  if results is None:
    results = start_results(output_dir, log)
  started = results["environment"].get("time_utc") or results_merge.utc_now()
  return results_merge.record(results, WORKLOAD, result, started, output_dir, draw=draw_chart, log=log)


def start_results(output_dir: str, log=print) -> Dict[str, Any]:
  """`output_dir`'s results.json to merge into, under this run's environment and command (results_merge.start:
  a file that is not a benchmark results file raises ValueError naming it and the fix)."""
  return results_merge.start(output_dir, environment(), " ".join(sys.argv), log)


def draw_chart(result: Dict[str, Any], output_dir: str, key: str) -> None:
  """Draws the entry's time and memory chart (`plot`) as `<key>.png` and names it in the entry."""
  png = plot(result["rows"], os.path.join(output_dir, f"{key}.png"))
  if png:
    result["chart"] = os.path.basename(png)


def define_flags(fv=None) -> None:
  from absl import flags
  fv = flags.FLAGS if fv is None else fv
  flags.DEFINE_string("preset", "albert-base-v2", "albert-* preset of our rows (peers take its shape), or 'tiny'.",
                      flag_values=fv)
  flags.DEFINE_integer("block_size", BLOCK_SIZE, "block_sparse block size (ours and HF BigBird).", flag_values=fv)
  flags.DEFINE_integer("num_random_blocks", NUM_RANDOM_BLOCKS, "block_sparse random blocks per query block.",
                       flag_values=fv)
  flags.DEFINE_string("output_dir", "bench_long_inputs", "Where results.json and long_inputs.png go.", flag_values=fv)
  flags.DEFINE_enum("backend", "tensorflow", ["tensorflow", "jax", "openvino"], "Keras backend of our rows "
                    "(openvino: the serving export of our encoder on OpenVINO's CPU runtime, inference rows only; "
                    "needs the openvino extra).", flag_values=fv)
  flags.DEFINE_list("seq_lengths", [str(s) for s in SEQ_LENGTHS], "Sequence lengths.", flag_values=fv)
  flags.DEFINE_list("attention_types", list(ATTENTION_TYPES), "Our attention types.", flag_values=fv)
  flags.DEFINE_list("dtypes", ["float32", "bfloat16"], "float32 and/or bfloat16.", flag_values=fv)
  flags.DEFINE_list("modes", list(MODES), "inference and/or train_step.", flag_values=fv)
  flags.DEFINE_list("impls", list(IMPLS), f"Implementations: {IMPLS + OPTIONAL_IMPLS}.", flag_values=fv)
  flags.DEFINE_enum("isolate", "row", ["row", "group"], "One process per row (ru_maxrss per row) or per group.",
                    flag_values=fv)
  flags.DEFINE_integer("warmup", 1, "Untimed calls after the first.", flag_values=fv)
  flags.DEFINE_integer("repeats", 3, "Timed calls per row.", flag_values=fv)
  flags.DEFINE_float("memory_limit_gb", None, "Stop a row's process beyond this resident memory (default: the "
                     "machine's available memory at start minus 2 GiB).", flag_values=fv)
  flags.DEFINE_float("time_budget_s", 0.0, "Whole-run budget in seconds (0 = none), shared by the processes; rows "
                     "a process has no time left for are reported as not_run.", flag_values=fv)


def main(argv, fv=None) -> None:
  del argv
  from absl import flags
  fv = flags.FLAGS if fv is None else fv
  from official_albert import cli
  seq_lengths = cli.number_list(fv, "seq_lengths")  # an error naming the flag, not int()'s
  rows = build_rows(seq_lengths, fv.attention_types, fv.dtypes, fv.modes, fv.impls, fv.backend)
  results = start_results(fv.output_dir)  # a results.json it cannot merge into stops the run before it measures
  result = run_long_inputs(rows, fv.isolate, fv.warmup, fv.repeats, fv.memory_limit_gb, fv.time_budget_s, fv.preset,
                           fv.block_size, fv.num_random_blocks)
  write(result, fv.output_dir, results=results)
  for key, value in result["ratios"].items():
    print(f"{key}: {value:.2f}")


def console_main() -> None:
  from official_albert import cli
  cli.launch(define_flags, main)


if __name__ == "__main__":
  console_main()
