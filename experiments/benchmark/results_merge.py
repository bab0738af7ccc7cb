"""Merging a workload's entry into a benchmark results.json: the one implementation the driver's results file
(results_file.py) and the standalone `python -m experiments.benchmark.long_inputs` both write through.

Why merged, and what an entry records: results_file.py's docstring. Why a module of its own: results_file imports
long_inputs (to draw its chart), so long_inputs cannot import results_file (no import circles); and the standalone
long_inputs run must not import TensorFlow or Keras (it runs where only JAX or PyTorch is installed), so this module
imports only the standard library and `official_albert.file_io` (TensorFlow-free for local paths).
"""

from __future__ import annotations

import datetime
import json
import os
from typing import Any, Callable, Dict, List, Optional, Sequence

from official_albert import file_io

RESULTS_FILE = "results.json"
# Where the benchmark's entries live in results.json (the file is refused without it: not a results file).
WORKLOADS_KEY = "workloads"


def utc_now() -> str:
  return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def loadavg() -> Optional[Sequence[float]]:
  """The 1, 5 and 15-minute load averages (None where the OS has none): the machine is shared."""
  try:
    return os.getloadavg()
  except OSError:
    return None


def results_path(output_dir: str) -> str:
  return os.path.join(output_dir, RESULTS_FILE)


def start(output_dir: str, environment: Dict[str, Any], command: str, log=print) -> Dict[str, Any]:
  """The results a run writes into: the entries of `output_dir`'s results.json (earlier runs'), if any, under this
  run's environment and command.

  Read before anything is measured, so that a file the run could not merge into stops it at once, not after an
  hour of measuring. Entries written before entries recorded their own machine get the file's.

  Raises:
    ValueError: results.json is not valid JSON or not a benchmark results file; the message names it and the fix.
  """
  path = results_path(output_dir)
  workloads: Dict[str, Any] = {}
  if file_io.exists(path):
    fix = "Move it away, or choose another --output_dir (a run merges its workloads into the results.json there)."
    data = file_io.read_json(path, what="benchmark results file", fix=fix)
    if not isinstance(data, dict) or not isinstance(data.get(WORKLOADS_KEY), dict) or not all(
        isinstance(entry, dict) for entry in data[WORKLOADS_KEY].values()):
      raise ValueError(f"{path}: not a benchmark results file (no \"{WORKLOADS_KEY}\" object of workload entries). "
                       f"{fix}")
    workloads = data[WORKLOADS_KEY]
    for entry in workloads.values():
      entry.setdefault("environment", data.get("environment"))
      entry.setdefault("command", data.get("command"))
    log(f"{path} exists: merging into it. It holds {len(workloads)} workload entr"
        f"{'y' if len(workloads) == 1 else 'ies'} of earlier runs ({', '.join(workloads) or 'none'}); a workload "
        "this run measures replaces its entry and charts, the others are kept.")
  return {"environment": environment, "command": command, WORKLOADS_KEY: workloads}


def chart_names(key: str, result: Dict[str, Any]) -> List[str]:
  """The chart files of an entry: those it names and those its key would be drawn as."""
  names = {f"{key}.png", f"{key}_frontier.png"}
  return sorted(names | {result[field] for field in ("chart", "frontier_chart") if isinstance(result.get(field), str)})


def _shape(entry: Dict[str, Any]) -> str:
  """An entry's measured shape for the log: preset, batch, sequence length and dtypes (entries are keyed by
  workload, so a run of another shape replaces the entry of the first)."""
  settings = entry.get("settings") or {}
  return (f"{settings.get('preset')} batch {settings.get('batch_size')} seq {settings.get('seq_length')} "
          f"{'/'.join(settings.get('dtypes') or ())}").strip()


def record(results: Dict[str, Any], key: str, result: Dict[str, Any], started_utc: str, output_dir: str,
           draw: Optional[Callable[[Dict[str, Any], str, str], None]] = None, log=print) -> str:
  """Puts `result` under `key` (replacing an earlier run's entry and removing its charts), draws its charts and
  writes results.json atomically. Returns the JSON path.

  The entry keeps the machine and times it already has (a frozen-weight child process records its own) and else
  gets this run's `environment` (with the load average at its end), `command`, `started_utc` and `finished_utc`.
  `draw(result, output_dir, key)` draws the entry's charts and names them in it (local output dirs only:
  matplotlib writes local files); it runs after the old entry's charts are removed, so it never loses a new one.
  """
  file_io.makedirs(output_dir)
  result.setdefault("environment", {**results["environment"], "loadavg_end": loadavg()})
  result.setdefault("command", results["command"])
  result.setdefault("started_utc", started_utc)
  result.setdefault("finished_utc", utc_now())
  old = results[WORKLOADS_KEY].get(key)
  if old is not None:
    removed = [name for name in chart_names(key, old) if file_io.exists(os.path.join(output_dir, name))]
    for name in removed:
      file_io.remove(os.path.join(output_dir, name))
    when = old.get("finished_utc") or (old.get("environment") or {}).get("time_utc") or "an unknown time"
    shape = _shape(old)
    changed = f" — it measured {shape}, this run {_shape(result)}" if shape != _shape(result) else ""
    log(f"[{key}] replaces the entry measured {when} in {results_path(output_dir)}{changed}"
        + (f"; removed its charts {', '.join(removed)} (the new entry draws its own)" if removed else "")
        + (" (keep both: give this run another --output_dir)" if changed else ""))
  results[WORKLOADS_KEY][key] = result
  if draw is not None and file_io.is_local(output_dir):
    draw(result, output_dir, key)
  results["environment"]["loadavg_end"] = loadavg()
  path = results_path(output_dir)
  file_io.atomic_write_text(path, json.dumps(results, indent=2, sort_keys=False, default=float) + "\n")
  log(f"wrote {path} ({key})")
  return path
