r"""The `early_exit` benchmark workload: ALBERT's patience-based early exit and static elastic depth in wall time.

    python -m experiments.benchmark --workload=early_exit --model_dir=FINE_TUNED_WITH_EXIT_HEADS \
        --baseline_model_dir=FINE_TUNED_WITHOUT --eval_file=../shared/data/glue/SST-2/dev.tsv --dtype=bfloat16 \
        --batch_size=8 --patience=1,2,3,4,5,6 --output_dir=bench_out

A fine-tuned classifier with exit heads (`task.exit_heads=true`) answers the labelled `--eval_file` (a GLUE-style
TSV with a `sentence` or `text` column and `label`, or any file `tasks.text.data` reads) in file order, in requests
of batch 1 and of `--batch_size`, each padded to its longest text (as `pipelines.classify` packs them; with
`--max_examples=N` the timed passes cover the first N examples, the answers always the whole file). Rows, per
batch size: `full` (patience 0: the plain model) and `patience_p` for each `--patience`; each reports seq/s, p50 and
p99 request latency, the dev accuracy of its answers, mean / p50 / p99 exit iteration and `speedup` (its seq/s over
`full`'s: the median over repetitions of the paired ratio, both rows having run back to back). Every repetition
runs every row over the whole file, interleaved, so load from other processes hits all rows alike; before them each
row makes `--warmup` (at least 1) untimed passes over every request, so no padded length is first met while timed.

The frontier (dev accuracy against speed-up, one line per batch size) is `early_exit_frontier.png`; `goals` names
the fastest patience that loses at most 0.5 point of accuracy against full depth at each batch size, against the
issue's targets (≥ 1.5× at batch 1, ≥ 1.3× at batch `--batch_size`). The static elastic-depth curve runs every
depth k = 1 … L at `--batch_size` once: the model without exit heads (`--baseline_model_dir`: the final head after k
iterations, no extra training) and the exit-heads model (head k), one timed pass each in a phase of its own after
the patience rows; the baseline's full-depth accuracy is the exit heads' cost. Its rows' `speedup` is not paired: it
is the TF `full` row's median pass at `--batch_size` (timed in the patience phase) over the depth row's one pass,
timed later, so load that changes between the phases moves it. Only the patience rows' speed-ups (TF, and
OpenVINO against OpenVINO's `full`) are the paired ratios described above. An OpenVINO export of the model
(`--openvino`, issue 31 item 3) adds the same full and patience rows run by OpenVINO.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import time
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from experiments.benchmark.core import BenchSettings
from experiments.charts import save_png

# The targets: at the patience that loses ≤ 0.5 point of dev accuracy, ≥ 1.5× at batch 1, ≥ 1.3× at batch 8.
MAX_ACCURACY_LOSS = 0.005
SPEEDUP_GOALS = {1: 1.5, 8: 1.3}


# ------------------------------------------------------------------------------------------------------ data
def read_eval_file(path: str) -> Tuple[List[str], List[str]]:
  """(texts, label strings) of a labelled file: GLUE TSV (`sentence` / `text` + `label` columns) or text-task file."""
  from tasks.text import data as text_data
  fmt = text_data.file_format(path) or "tsv"
  with open(path, encoding="utf-8") as f:
    header = f.readline().rstrip("\n")
  columns = header.split("\t" if fmt == "tsv" else ",")
  text_column = "sentence" if "sentence" in columns else "text"
  options = text_data.ReadOptions(text_column=text_column, label_column="label", input_format=fmt)
  examples = text_data.read_examples([path], options)
  return [e.text for e in examples], [str(e.label) for e in examples]


def packed_batches(tokenizer, texts: Sequence[str], batch_size: int, max_length: int) -> List[Dict[str, np.ndarray]]:
  """Requests of `batch_size` texts in file order, each packed `[CLS] text [SEP]` to its longest text."""
  from official_albert.tokenization import pack_ids
  ids = tokenizer.encode_ids_batch(list(texts))
  batches = []
  for start in range(0, len(ids), batch_size):
    chunk = ids[start:start + batch_size]
    length = min(max(len(a) for a in chunk) + 2, max_length)
    rows = [pack_ids(a, None, length) for a in chunk]
    batches.append({k: np.asarray([r[k] for r in rows], np.int32) for k in rows[0]})
  return batches


# ------------------------------------------------------------------------------------------------------ rows
class Row:
  """One (engine, batch size, mode) row: `call(batch) → (logits [b, K], exit_iteration [b])`, timed per request."""

  def __init__(self, name: str, engine: str, dtype: str, batch_size: int, call, patience: int = 0,
               depth: Optional[int] = None):
    self.name, self.engine, self.dtype, self.batch_size = name, engine, dtype, batch_size
    self.call, self.patience, self.depth = call, patience, depth
    self.pass_s: List[float] = []
    self.latencies: List[float] = []
    self.predictions: Optional[np.ndarray] = None
    self.exits: Optional[np.ndarray] = None
    self.error = ""

  def run_pass(self, batches, keep: bool) -> float:
    predictions, exits, total = [], [], 0.0
    for batch in batches:
      start = time.perf_counter()
      logits, exit_iteration = self.call(batch)
      elapsed = time.perf_counter() - start
      total += elapsed
      if keep:
        self.latencies.append(elapsed)
      predictions.append(np.argmax(logits, -1))
      exits.append(exit_iteration)
    self.predictions, self.exits = np.concatenate(predictions), np.concatenate(exits)
    return total


def tf_call(model, patience: int = 0, depth: Optional[int] = None):
  """The model under tf.function (any batch and length), returning host arrays."""
  import tensorflow as tf
  spec = [{k: tf.TensorSpec([None, None], tf.int32, name=k) for k in ("input_word_ids", "input_mask",
                                                                       "input_type_ids")}]
  layers = model.config.num_hidden_layers
  if patience:
    fn = tf.function(lambda x: model(x, patience=patience), input_signature=spec)
  elif depth is not None:
    fn = tf.function(lambda x: model(x, depth=depth), input_signature=spec)
  else:
    fn = tf.function(lambda x: model(x), input_signature=spec)

  def call(batch):
    out = fn(batch)
    logits = out["logits"].numpy()
    exits = out["exit_iteration"].numpy() if "exit_iteration" in out else np.full(len(logits), depth or layers)
    return logits, exits

  return call


def _stats(row: Row, labels: np.ndarray, examples: int) -> Dict[str, Any]:
  out = {"name": row.name, "engine": row.engine, "dtype": row.dtype, "batch_size": row.batch_size,
         "patience": row.patience, "depth": row.depth, "impl": "ours", "status": "ok" if not row.error else "error"}
  if row.error:
    out["reason"] = row.error
    return out
  passes = np.asarray(row.pass_s)
  latency = np.asarray(row.latencies) * 1e3
  out.update(examples=examples, evaluated=len(row.predictions), repeats=len(passes), median_s=float(np.median(passes)),
             min_s=float(passes.min()),
             max_s=float(passes.max()), times_s=[float(t) for t in passes],
             examples_per_s=examples / float(np.median(passes)), p50_ms=float(np.percentile(latency, 50)),
             p99_ms=float(np.percentile(latency, 99)), accuracy=float(np.mean(row.predictions == labels)),
             exit_mean=float(np.mean(row.exits)), exit_p50=float(np.percentile(row.exits, 50)),
             exit_p99=float(np.percentile(row.exits, 99)))
  return out


def _speedups(rows: List[Dict[str, Any]]) -> None:
  """Adds `speedup` (paired, see the module docstring) and `accuracy_change` against the `full` row of each group."""
  for r in rows:
    full = next((f for f in rows if f["status"] == "ok" and f["engine"] == r["engine"]
                 and f["batch_size"] == r["batch_size"] and f["patience"] == 0 and f["depth"] is None), None)
    if full is None or r["status"] != "ok" or len(full["times_s"]) != len(r["times_s"]):
      continue
    r["speedup"] = float(np.median(np.asarray(full["times_s"]) / np.asarray(r["times_s"])))
    r["accuracy_change"] = r["accuracy"] - full["accuracy"]


def frontier_goals(rows: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
  """Per (engine, batch size): the fastest patience within `MAX_ACCURACY_LOSS` of full depth, against the goal."""
  goals = []
  for engine in sorted({r["engine"] for r in rows}):
    for batch_size in sorted({r["batch_size"] for r in rows if r["engine"] == engine}):
      candidates = [r for r in rows if r["engine"] == engine and r["batch_size"] == batch_size and r["patience"]
                    and "speedup" in r and r["accuracy_change"] >= -MAX_ACCURACY_LOSS - 1e-9]
      target = SPEEDUP_GOALS.get(1 if batch_size == 1 else 8)
      goal = {"goal": f"{engine} batch {batch_size}: >= {target}x at <= {MAX_ACCURACY_LOSS * 100:.1f} point "
                      "accuracy loss", "engine": engine, "batch_size": batch_size}
      if not candidates:
        goals.append({**goal, "status": "missed", "reason": "no patience within the accuracy budget"})
        continue
      best = max(candidates, key=lambda r: r["speedup"])
      goals.append({**goal, "status": "met" if best["speedup"] >= target else "missed", "patience": best["patience"],
                    "speedup": best["speedup"], "accuracy_change": best["accuracy_change"],
                    "exit_mean": best["exit_mean"]})
  return goals


# ------------------------------------------------------------------------------------------------- workload
def labelled_texts(settings: BenchSettings, num_labels: Optional[int] = None):
  """The eval file's texts and label ids in the model's label order: its label file, else the names `classify` reads
  (`md.fallback_label_names`: HF id2label, labels.txt), for `num_labels` outputs (default: the file's label count).
  Not sorted names: "negative" before "positive" inverted a model that says positive first."""
  from official_albert import model_directory as md
  texts, label_strings = read_eval_file(settings.eval_file)
  saved = md.read_label_file(settings.model_dir)
  count = num_labels or len(set(label_strings))
  names = list(saved.labels) if saved else md.fallback_label_names(settings.model_dir, count)
  if names == [f"LABEL_{i}" for i in range(count)] and all(
      s.strip().isdecimal() and int(s) < count for s in label_strings):  # (nothing recorded: the ids themselves)
    names = [str(i) for i in range(count)]
    label_strings = [str(int(s)) for s in label_strings]
  unknown = sorted(set(label_strings) - set(names))
  if unknown:
    raise ValueError(f"{settings.eval_file}: labels {unknown} are not the model's {names}; write the model's label "
                     f"names in order, one a line, to {md.LABELS_TEXT_FILE} beside it.")
  return texts, np.asarray([names.index(s) for s in label_strings])


def early_exit_workload(settings: BenchSettings, log=print) -> Dict[str, Any]:
  """See the module docstring."""
  from official_albert import model_directory as md
  from official_albert.checkpoints.loading import load_model
  from official_albert.checkpoints.sentence_transformers_folder import model_tokenizer_options
  from official_albert.precision import global_dtype_policy
  from official_albert.precision import policy_for_dtype
  from official_albert.tokenization import FullTokenizer
  if not settings.model_dir or not settings.eval_file:
    return {"status": "skipped", "reason": "--workload=early_exit needs --model_dir (a classifier fine-tuned with "
                                           "task.exit_heads=true) and --eval_file (its labelled dev file)"}
  spm = settings.spm_model_file or md.require_spm_model(settings.model_dir, "the early_exit workload")
  # The casing the model records (as training and `classify` read it), not FullTokenizer's default lower-casing.
  tokenizer = FullTokenizer(spm, **model_tokenizer_options(settings.model_dir))
  dtype = settings.dtypes[0]
  with global_dtype_policy(policy_for_dtype(dtype)):
    model, _ = load_model(settings.model_dir, "classifier")
    baseline = load_model(settings.baseline_model_dir, "classifier")[0] if settings.baseline_model_dir else None
  if not model.exit_heads:
    raise ValueError(f"{settings.model_dir} has no exit heads; fine-tune it with task.exit_heads=true.")
  texts, labels = labelled_texts(settings, model.num_labels)
  config = model.config
  max_length = min(settings.seq_length, config.max_position_embeddings)
  batch_sizes = sorted({1, settings.batch_size})
  timed = texts[:settings.max_examples] if settings.max_examples else texts
  batches = {b: packed_batches(tokenizer, timed, b, max_length) for b in batch_sizes}
  every = packed_batches(tokenizer, texts, batch_sizes[-1], max_length)
  log(f"[early_exit] {len(texts)} examples of {settings.eval_file}; L={config.num_hidden_layers}; dtype {dtype}; "
      f"batches {batch_sizes}; patience {list(settings.patience)}")

  rows = _patience_rows(model, settings, dtype, batch_sizes, max_length, batches, every, log)
  results = [_stats(r, labels, len(timed)) for r in rows]
  _speedups(results)

  depth_results = _elastic_depth(model, baseline, batches, every, labels, len(timed), settings, dtype, log)
  b = batch_sizes[-1]
  full_b = next(r for r in results if r["name"] == f"tf_full_b{b}")
  for r in depth_results:
    if r["status"] == "ok":
      r["speedup"] = full_b["median_s"] / r["median_s"]
      r["accuracy_change"] = r["accuracy"] - full_b["accuracy"]
  out = {"rows": results, "elastic_depth": depth_results, "goals": frontier_goals(results),
         "eval_file": settings.eval_file, "examples": len(texts), "num_hidden_layers": config.num_hidden_layers,
         "model_dir": settings.model_dir, "baseline_model_dir": settings.baseline_model_dir, "dtype": dtype,
         "unit": "sequences"}
  if baseline is not None:
    full_depth = [r for r in depth_results if r["engine"] == "tf_baseline_depth" and
                  r["depth"] == config.num_hidden_layers]
    if full_depth and full_depth[0]["status"] == "ok":
      out["exit_heads_cost"] = {"accuracy_without_exit_heads": full_depth[0]["accuracy"],
                                "accuracy_with_exit_heads": full_b["accuracy"],
                                "change": full_b["accuracy"] - full_depth[0]["accuracy"]}
  return out


def _patience_rows(model, settings: BenchSettings, dtype: str, batch_sizes, max_length: int, batches, every,
                   log) -> List[Row]:
  """The patience rows (TF, and OpenVINO with `--openvino`), timed and answered; the OpenVINO exports live in a
  temporary folder that is removed when the rows are done, whatever happens."""
  rows: List[Row] = []
  # One function per patience, shared by its rows at every batch size (its signature takes any batch: one trace).
  calls = {p: tf_call(model, patience=p) for p in (0,) + tuple(settings.patience)}
  for b in batch_sizes:
    rows.append(Row(f"tf_full_b{b}", "tf", dtype, b, calls[0]))
    rows += [Row(f"tf_patience_{p}_b{b}", "tf", dtype, b, calls[p], patience=p) for p in settings.patience]
  exports = (tempfile.TemporaryDirectory(prefix="albert_early_exit_ov_") if settings.openvino
             else contextlib.nullcontext())
  with exports as root:
    if settings.openvino:
      rows += _openvino_rows(settings, dtype, batch_sizes, max_length, root, log)
    _rotate(rows, batches, settings, log)
    _answer_every_example(rows, every, log)
  return rows


def _elastic_depth(model, baseline, batches, every, labels, timed: int, settings: BenchSettings, dtype: str,
                   log) -> List[Dict[str, Any]]:
  """Static elastic depth: every k at the larger batch size, one timed pass each, for the model without exit heads
  (no extra training) and the exit-heads model with head k."""
  b = max(batches)
  rows = []
  for tag, which in (("baseline", baseline), ("exit_heads", model)):
    if which is None:
      continue
    for k in range(1, model.config.num_hidden_layers + 1):
      rows.append(Row(f"tf_{tag}_depth_{k}_b{b}", f"tf_{tag}_depth", dtype, b, tf_call(which, depth=k), depth=k))
  _rotate(rows, batches, settings, log, repeats=1)
  _answer_every_example(rows, every, log)
  return [_stats(r, labels, timed) for r in rows]


def _rotate(rows: List[Row], batches, settings: BenchSettings, log, repeats: Optional[int] = None) -> None:
  """`--warmup` (at least 1) untimed passes per row over every request, so every padded length is traced and
  met before timing; then `repeats` interleaved timed passes. Rows that already failed (an export) are skipped."""
  active = []
  for row in rows:
    if row.error:
      continue
    try:
      for _ in range(max(1, settings.warmup)):
        row.run_pass(batches[row.batch_size], keep=False)
      active.append(row)
    except Exception as e:  # A failing row is reported as such; the others still run.
      row.error = f"{type(e).__name__}: {str(e)[:500]}"
      log(f"  ERROR {row.name}: {row.error}")
  for rep in range(settings.repeats if repeats is None else repeats):
    for row in active:
      row.pass_s.append(row.run_pass(batches[row.batch_size], keep=True))
    log(f"  repetition {rep + 1}: " + ", ".join(f"{r.name}={r.pass_s[-1]:.2f}s" for r in active))


def _answer_every_example(rows: List[Row], every, log) -> None:
  """Each row's answers and exits on the whole file, in requests of the larger batch size (untimed): the dev metric.

  With `--max_examples` the timed passes cover the first N examples only; the answers of a row do not depend on the
  request's batch size beyond float round-off (each row's exit is its own).
  """
  for row in rows:
    if not row.error:
      row.run_pass(every, keep=False)
  log(f"  answered all {sum(len(b['input_mask']) for b in every)} examples with {len(rows)} rows")


def _openvino_rows(settings, dtype, batch_sizes, max_length: int, root: str, log) -> List[Row]:
  """The same rows run by OpenVINO: one export of `--model_dir` per patience (fixed at export), at the precision of
  `dtype` (bf16 for bfloat16, else f32), into `root` (the caller's temporary folder), at `max_length`: the TF rows'
  length (`--seq_length` capped at the model's positions). An export that fails gives its rows status "error"."""
  from official_albert.serving import openvino_export
  from official_albert.serving.openvino_runtime import OpenVINOExport
  precision = "bf16" if dtype == "bfloat16" else "f32"
  rows = []
  for patience in (0,) + tuple(settings.patience):
    export, error = None, ""
    try:
      folder = openvino_export.export_openvino(settings.model_dir, os.path.join(root, f"p{patience}"), "classifier",
                                               precision, seq_length=max_length, patience=patience)
      export = OpenVINOExport(folder)
    except Exception as e:  # reported as rows that did not run (status "error"); the others still run
      error = f"openvino export (patience {patience}, seq_length {max_length}) failed: {type(e).__name__}: {e}"
      log(f"  ERROR {error}")

    def call(batch, export=export):
      out = export(batch)
      return out["logits"], out["exit_iteration"]

    for b in batch_sizes:
      name = f"openvino_{'full' if not patience else f'patience_{patience}'}_b{b}"
      rows.append(Row(name, "openvino", precision, b, call, patience=patience))
      rows[-1].error = error[:800]
  log(f"  openvino: {len(rows)} rows ({precision}) from exports in {root}")
  return rows


# ---------------------------------------------------------------------------------------------------- plot
def plot_frontier(result: Dict[str, Any], path: str) -> Optional[str]:
  """Dev accuracy against wall-clock speed-up: patience rows per (engine, batch size), elastic depth per model."""
  rows = [r for r in result.get("rows", []) if r.get("status") == "ok" and "speedup" in r]
  if not rows:
    return None
  import matplotlib
  matplotlib.use("Agg")
  from matplotlib import pyplot as plt
  fig, ax = plt.subplots(figsize=(7.5, 5))
  for engine in sorted({r["engine"] for r in rows}):
    for b in sorted({r["batch_size"] for r in rows if r["engine"] == engine}):
      line = sorted((r for r in rows if r["engine"] == engine and r["batch_size"] == b),
                    key=lambda r: r["speedup"])
      ax.plot([r["speedup"] for r in line], [r["accuracy"] for r in line], "o-", label=f"{engine} patience, batch {b}")
      for r in line:
        ax.annotate(str(r["patience"] or "full"), (r["speedup"], r["accuracy"]), fontsize=7,
                    textcoords="offset points", xytext=(3, 3))
  for engine in sorted({r["engine"] for r in result.get("elastic_depth", []) if r.get("status") == "ok"}):
    line = [r for r in result["elastic_depth"] if r["engine"] == engine and r.get("status") == "ok"]
    ax.plot([r["speedup"] for r in line], [r["accuracy"] for r in line], "s--", alpha=0.6,
            label=f"static depth k, {engine.replace('tf_', '').replace('_depth', '')}")
  ax.set_xlabel("wall-clock speed-up over full depth (seq/s ratio)")
  ax.set_ylabel("dev accuracy")
  ax.set_title(f"early exit: {os.path.basename(result.get('eval_file', ''))}, L={result.get('num_hidden_layers')}, "
               f"{result.get('dtype')}", fontsize=10)
  return save_chart(fig, ax, path)


def save_chart(fig, ax, path: str) -> str:
  """Grid and legend, then `save_png` (the frontier charts here and in the study)."""
  ax.grid(alpha=0.3)
  ax.legend(fontsize=7)
  return save_png(fig, path, dpi=110)
