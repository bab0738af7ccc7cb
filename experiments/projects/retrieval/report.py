"""The retrieval study's table: mean ± std over seeds of each method, and the issue's bars."""

from __future__ import annotations

import platform
from typing import Any, Dict, Sequence

from experiments import study

METRICS = ("recall@10", "ndcg@10", "mrr@10", "map@100")
# The bars.
MLM_MARGIN = 0.15
QUARTER_KEEPS = 0.90
RERANK_GAIN = 0.03
# (name, label); a name with `_s<seed>` runs is mean ± std over the seeds.
METHODS = (("mlm_mean", "mean-pooled MLM vectors (no retrieval training)"), ("bm25", "BM25 (bm25s)"),
           ("biencoder_full", "bi-encoder, full width"), ("biencoder_quarter", "bi-encoder, 1/4 width"),
           ("biencoder_eighth", "bi-encoder, 1/8 width"), ("biencoder_rerank", "bi-encoder + reranker (top 20)"),
           ("biencoder_fused", "bi-encoder + reranker, rank fusion (RRF, top 20)"))


def summarize(results: Dict[str, Dict[str, float]], seeds: Sequence[int]) -> Dict[str, Any]:
  """{method: {metric: mean/std/n, "per_seed": …}} and the bars, from `stage_evaluate`'s results."""
  methods = {}
  for name, _ in METHODS:
    runs = [results[name]] if name in results else [results[f"{name}_s{s}"] for s in seeds]
    methods[name] = {m: study.mean_std([r[m] for r in runs]) for m in METRICS}
    if name not in results:
      methods[name]["per_seed"] = {str(s): {m: results[f"{name}_s{s}"][m] for m in METRICS} for s in seeds}
  recall = {name: methods[name]["recall@10"]["mean"] for name in methods}
  ndcg = {name: methods[name]["ndcg@10"]["mean"] for name in methods}
  bars = [
      {"bar": f"bi-encoder recall@10 >= mean-pooled MLM + {MLM_MARGIN}",
       "value": recall["biencoder_full"] - recall["mlm_mean"], "target": MLM_MARGIN,
       "met": recall["biencoder_full"] >= recall["mlm_mean"] + MLM_MARGIN},
      {"bar": f"1/4 width keeps >= {QUARTER_KEEPS:.0%} of full-width recall@10",
       "value": recall["biencoder_quarter"] / max(recall["biencoder_full"], 1e-12), "target": QUARTER_KEEPS,
       "met": recall["biencoder_quarter"] >= QUARTER_KEEPS * recall["biencoder_full"]},
      {"bar": f"reranker over the top 20 raises nDCG@10 by >= {RERANK_GAIN}",
       "value": ndcg["biencoder_rerank"] - ndcg["biencoder_full"], "target": RERANK_GAIN,
       "met": ndcg["biencoder_rerank"] >= ndcg["biencoder_full"] + RERANK_GAIN},
      {"bar": f"(the same with the reranker's order fused with the bi-encoder's, RRF) >= {RERANK_GAIN}",
       "value": ndcg["biencoder_fused"] - ndcg["biencoder_full"], "target": RERANK_GAIN,
       "met": ndcg["biencoder_fused"] >= ndcg["biencoder_full"] + RERANK_GAIN},
      {"bar": "BM25 beside (reported, no target): bi-encoder recall@10 - BM25 recall@10",
       "value": recall["biencoder_full"] - recall["bm25"], "target": None, "met": None}]
  return {"methods": methods, "bars": bars}


def format_table(summary: Dict[str, Any]) -> str:
  lines = ["| method | recall@10 | nDCG@10 | MRR@10 | MAP@100 |", "|---|---|---|---|---|"]
  for name, label in METHODS:
    entry = summary["methods"][name]
    cells = [f"{entry[m]['mean']:.3f} ± {entry[m]['std']:.3f}" if entry[m]["n"] > 1 else f"{entry[m]['mean']:.3f}"
             for m in METRICS]
    lines.append(f"| {label} | " + " | ".join(cells) + " |")
  lines += ["", "| bar | measured | met |", "|---|---|---|"]
  for bar in summary["bars"]:
    met = "—" if bar["met"] is None else ("**met**" if bar["met"] else "**missed**")
    lines.append(f"| {bar['bar']} | {bar['value']:+.3f} | {met} |" if "keeps" not in bar["bar"]
                 else f"| {bar['bar']} | {bar['value']:.1%} | {met} |")
  return "\n".join(lines)


def cpu_name() -> str:
  try:
    with open("/proc/cpuinfo") as f:
      for line in f:
        if line.startswith("model name"):
          return line.split(":", 1)[1].strip()
  except OSError:
    pass
  return platform.processor() or "?"
