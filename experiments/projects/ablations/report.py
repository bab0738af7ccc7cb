"""A study's outputs: the summary over seeds (mean ± std), the Markdown table in the paper's layout with the paper's
numbers beside ours, and the plots (learning curves per variant; Figure 1's per-layer L2 / cosine curves)."""

from __future__ import annotations

import statistics
from typing import Any, Dict, List, Optional

import matplotlib

from experiments.charts import save_png
from experiments.study import mean_std

LABELS = {"parameters": "parameters", "masked_lm_accuracy": "MLM", "nsp_accuracy": "NSP", "sop_accuracy": "SOP",
          "downstream_average": "downstream avg", "train_masked_lm_accuracy": "MLM (train)"}


def summarize(study, runs: List[Dict[str, Any]]) -> Dict[str, Dict[str, Any]]:
  """{variant: {column: {"mean", "std", "n"}}} over the variant's seeds, for every table column and the downstream
  tasks; plus the per-layer curves' means."""
  out = {}
  for variant in study.variants:
    mine = [r for r in runs if r["variant"] == variant.name]
    if not mine:
      continue
    row = {c: mean_std([r.get(c) for r in mine]) for c in set(study.columns) | {"masked_lm_accuracy",
                                                                                  "nsp_accuracy", "sop_accuracy"}}
    for task in sorted({t for r in mine for t in (r.get("downstream") or {})}):
      row[f"downstream/{task}"] = mean_std([(r.get("downstream") or {}).get(task) for r in mine])
    for key in ("l2_distance", "cosine_similarity"):
      layers = [r["layers"][key] for r in mine if r.get("layers")]
      row[f"layers/{key}"] = [statistics.fmean(v) for v in zip(*layers)] if layers else []
    out[variant.name] = row
  return out


def _cell(column: str, stats: Dict[str, Any]) -> str:
  if stats["mean"] is None:
    return "—"
  if column == "parameters":
    return f"{stats['mean'] / 1e6:.2f}M"
  if stats["n"] < 2:  # one seed has no spread to show
    return f"{100 * stats['mean']:.1f}"
  return f"{100 * stats['mean']:.1f} ± {100 * stats['std']:.1f}"


def _paper_cell(column: str, value: Optional[float]) -> str:
  if value is None:
    return "—"
  return f"{value / 1e6:.0f}M" if column == "parameters" else f"{value:.1f}"


def markdown_table(study, summary: Dict[str, Dict[str, Any]], meta: Dict[str, Any]) -> str:
  """The study's table: one row per variant, each column ours (mean ± std over seeds, in %) and the paper's."""
  lines = [f"### {study.title}", "",
           "| variant | " + " | ".join(f"{LABELS.get(c, c)} (ours) | (paper)" for c in study.columns) + " |",
           "|" + "---|" * (1 + 2 * len(study.columns))]
  for variant in study.variants:
    if variant.name not in summary:
      continue
    row, paper = summary[variant.name], study.paper.get(variant.name, {})
    cells = []
    for column in study.columns:
      cells += [_cell(column, row[column]), _paper_cell(column, paper.get(column))]
    lines.append(f"| {variant.name} | " + " | ".join(cells) + " |")
  # The seeds that ran (meta), else the most values any cell averages: the last column's n is 0 when it has no value
  # (downstream_average with no task run) though every seed ran.
  seeds = meta.get("seeds") or max((s["n"] for row in summary.values() for s in row.values()
                                    if isinstance(s, dict) and "n" in s), default=0)
  lines += ["", f"Ours: mean ± std over {seeds} seed(s), in % (parameters: the encoder's, counted as the paper "
            f"counts them); {meta['settings_line']}. Paper: ALBERT-base, 125k steps of 4096 × 512 "
            "(— where the paper gives no number for this cell)."]
  return "\n".join(lines) + "\n"


def downstream_table(study, summary: Dict[str, Dict[str, Any]], random_init: Dict[str, float],
                     skipped: Dict[str, str]) -> str:
  """Each downstream task's dev accuracy per variant, with the random-init run of the same model beside."""
  tasks = sorted({k.split("/", 1)[1] for row in summary.values() for k in row if k.startswith("downstream/")})
  if not tasks:
    return ""
  lines = ["| variant | " + " | ".join(tasks) + " |", "|---|" + "---|" * len(tasks)]
  for name, row in summary.items():
    # A variant may lack a task (its runs finished before the task could run): "—", not a KeyError.
    lines.append(f"| {name} | " + " | ".join(_cell(t, row.get(f"downstream/{t}", {"mean": None})) for t in tasks)
                 + " |")
  lines.append("| random init | " + " | ".join(f"{100 * random_init[t]:.1f}" if t in random_init else "—"
                                                for t in tasks) + " |")
  notes = [f"{t}: skipped — {reason}" for t, reason in sorted(skipped.items())]
  return "\n".join(lines + ([""] + notes if notes else [])) + "\n"


def balance_table(data: Dict[str, Any]) -> str:
  """The label balance of every record set (before and after balancing)."""
  lines = ["| records | examples | label 1 | before balancing |", "|---|---|---|---|"]
  for part in ("train", "heldout"):
    for kind, entry in sorted(data[part].items()):
      before = entry.get("balancing", {}).get("before")
      was = f"{before['examples']} examples, label 1 {before['label_1_fraction']:.3f}" if before else "(not balanced)"
      lines.append(f"| {kind} {part} | {entry['labels']['examples']} | {entry['labels']['label_1_fraction']:.3f} | "
                   f"{was} |")
  return "\n".join(lines) + "\n"


def plot_curves(path: str, study, runs: List[Dict[str, Any]]) -> None:
  """curves.png: held-out MLM accuracy and held-out sentence accuracy, both on the variant's own objective's set
  (the training-time evaluation: the NSP arm's NSP records, the others' SOP records; table.md's MLM column scores
  every model on the SOP set), and the training loss against steps; one colour per variant, one line per seed."""
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt  # noqa: PLC0415 (after matplotlib.use)
  fig, axes = plt.subplots(1, 3, figsize=(16, 4.4))
  panels = (("eval", "masked_lm_accuracy", "held-out MLM accuracy (own objective's set)"),
            ("eval", "sentence_order_accuracy", "held-out sentence accuracy (own objective)"),
            ("train", "loss", "training loss (MLM + weighted sentence loss)"))
  colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
  for index, variant in enumerate(study.variants):
    for n, run in enumerate(r for r in runs if r["variant"] == variant.name):
      for ax, (part, key, title) in zip(axes, panels):
        points = [(e["step"], e[part][key]) for e in run["curve"] if key in e.get(part, {})]
        if points:
          ax.plot(*zip(*points), "-o" if part == "eval" else "-", ms=3, lw=1, color=colours[index % len(colours)],
                  label=variant.name if n == 0 else None, alpha=0.8)
          ax.set_title(title)
  for ax in axes:
    ax.set_xlabel("step")
    ax.grid(alpha=0.3)
  axes[1].axhline(0.5, ls=":", color="black", lw=1)
  axes[0].legend(fontsize=8)
  fig.suptitle(study.title, fontsize=9)
  save_png(fig, path, dpi=90)


def plot_smoothness(path: str, study, summary: Dict[str, Dict[str, Any]]) -> bool:
  """smoothness.png (Figure 1): per-layer L2 distance and cosine similarity of each layer's input and output, for
  the study's all-shared and not-shared variants (mean over seeds). False when the study has neither pair."""
  pairs = [v for v in study.variants if v.sharing in ("all", "none") and v.name in summary
           and summary[v.name]["layers/l2_distance"]]
  if not {v.sharing for v in pairs} >= {"all", "none"}:
    return False
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt  # noqa: PLC0415 (after matplotlib.use)
  fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
  for variant in pairs:
    for ax, key in zip(axes, ("l2_distance", "cosine_similarity")):
      values = summary[variant.name][f"layers/{key}"]
      ax.plot(range(1, len(values) + 1), values, "-o", label=variant.name)
  for ax, title in zip(axes, ("L2 distance (input → output of the layer)", "cosine similarity (input, output)")):
    ax.set_title(title)
    ax.set_xlabel("layer")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
  save_png(fig, path, dpi=90)
  return True
