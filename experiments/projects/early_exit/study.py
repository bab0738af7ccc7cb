r"""The early-exit study (issue 31): a 12-iteration ALBERT pretrained as the demo does, fine-tuned with and without
exit heads on SST-2 and the demo's topic task (3 seeds each), then measured by the `early_exit` benchmark workload.

    python -m experiments.projects.early_exit.study --stage=data --output_dir=out/early_exit_study
    python -m experiments.projects.early_exit.study --stage=pretrain --output_dir=out/early_exit_study   # or below
    python -m experiments.projects.early_exit.study --stage=finetune --output_dir=out/early_exit_study
    python -m experiments.projects.early_exit.study --stage=bench --output_dir=out/early_exit_study
    python -m experiments.projects.early_exit.study --stage=report --output_dir=out/early_exit_study

The project's README (experiments/projects/early_exit/README.md) holds the measured tables and why the model is
this size. Stages (each writes under `--output_dir` and is skipped when its output is there and was made from the same
inputs: the fine-tuning and bench markers record the pretrain stage's fingerprint, so a pretrain stage run again
retrains and re-measures what came from the old model):

1. data — the demo's corpus (the installed Python's and packages' documentation), its SentencePiece vocabulary (4000
   pieces), pretraining records (n-gram MLM + SOP, seq 64) — the kit's stage, `experiments.study` — and the topic
   task (`data_prep.corpus_tasks.make_topic_task`); `pretrain_arrays.npz`: the records for a trainer without TF.
2. pretrain — `STUDY_MODEL` (H 256, 12 iterations of one shared block) with LAMB through the train binary, as the
   demo does; or `--pretrained_dir`, a model pretrained elsewhere (any format `checkpoints.loading` reads, e.g. the
   HF directory of `pretrain_torch.py` on a GPU from `pretrain_arrays.npz`). The later stages reuse this stage's
   model without repeating the flag (`pretrained_for_later_stage`).
3. finetune — glue/sst-2 through the train binary on the SST-2 sample (`--glue_data_dir`/SST-2) and the topic
   task, with `task.exit_heads=true` and without, seeds `--seeds`, warm-started from the pretrained model.
4. bench — `python -m experiments.benchmark --workload=early_exit` per (task, seed): the exit-heads model against
   its dev set, the model without exit heads as the baseline (full-depth metric, static elastic depth).
5. report — mean ± std over seeds of every row (n beside a row that ran on fewer seeds), the exit heads' cost at
   full depth, the frontier; `report.json`, `report.md`.

Long because: one study told in its five stages, which share the settings dataclass and the run-directory layout
(`finetune_dir`) the report reads back; the report is the stages' summary, not a tool of its own.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import logging
import os
import shutil
import subprocess
import sys
import time
from typing import Any, Dict, List

from absl import flags
import matplotlib

from data_prep import corpus
from data_prep.corpus_tasks import make_topic_task
from experiments import pretraining_arrays
from experiments import study
from experiments.benchmark.core import shared_data_dir
from experiments.benchmark.early_exit import MAX_ACCURACY_LOSS
from experiments.benchmark.early_exit import save_chart
from experiments.benchmark.early_exit import SPEEDUP_GOALS
from official_albert import cli
from official_albert import file_io
from official_albert import model_directory
from official_albert import train

logger = logging.getLogger(__name__)

STAGES = ("data", "pretrain", "finetune", "bench", "report")
# 12 iterations of one shared block; E 128 as every released ALBERT.
STUDY_MODEL = dict(embedding_size=128, hidden_size=256, num_hidden_layers=12, num_hidden_groups=1,
                   num_attention_heads=4, intermediate_size=1024, max_position_embeddings=64,
                   hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
TASKS = ("topic", "sst2")
TOPIC_MAX_TRAIN = 4000  # topic-task training rows at most (two families: up to 2000 sentences each)
# The benchmark row's numbers the report means over seeds (report.json, and the study kit's summary.json).
ROW_METRICS = ("accuracy", "accuracy_change", "speedup", "examples_per_s", "p50_ms", "p99_ms", "exit_mean", "exit_p50",
               "exit_p99")


@dataclasses.dataclass
class StudySettings(study.CorpusSettings):
  """The knobs of the study (see the module docstring for why these values), beside the kit's corpus knobs (at
  `full()`: the demo's whole corpus, 5 masked copies)."""
  # LAMB at 0.01 (the demo's rate, for a 4-iteration H 128 model) leaves this 12-iteration model at the unigram
  # plateau and its fine-tuning at chance; 0.002 learns (the README's "Pretraining on the CPU").
  pretrain_steps: int = 2500
  pretrain_batch_size: int = 64
  pretrain_learning_rate: float = 0.002
  ft_seq_length: int = 64
  ft_batch_size: int = 32
  # Steps per task (SST-2: 5000 training sentences; topic: 744): what 2 shared cores can afford for 12 runs.
  ft_train_steps: Dict[str, int] = dataclasses.field(default_factory=lambda: {"sst2": 300, "topic": 200})
  # Per task. SST-2 (movie reviews, far from the pretraining corpus) stayed at chance at 2e-4 (exit heads, 250 steps)
  # and reached 0.61 at 1e-4 (the demo's) after 300 steps; the topic task at 3e-4 (warm-up 30) left the model without
  # exit heads at chance (loss ln 2) while the one with them reached 0.87; 2e-4 trains both.
  ft_learning_rate: Dict[str, float] = dataclasses.field(default_factory=lambda: {"sst2": 1e-4, "topic": 2e-4})
  ft_warmup_steps: int = 50
  seeds: tuple = (1, 2, 3)

  @classmethod
  def full(cls) -> "StudySettings":
    """The study as measured (its README); it has no quick size: its tests run the stages on made-up results."""
    return cls(packages=tuple(corpus.DEMO_PACKAGES), dupe_factor=5)


# The settings each resumable stage depends on (its fingerprint): another value runs the stage afresh.
DATA_SETTINGS = tuple(f.name for f in dataclasses.fields(study.CorpusSettings))  # the kit's corpus knobs
PRETRAIN_SETTINGS = DATA_SETTINGS + ("pretrain_steps", "pretrain_batch_size", "pretrain_learning_rate")


def _timed(summary: Dict[str, Any], name: str, fn, *args):
  return study.timed(summary.setdefault("stages", {}), name, fn, *args)


# ---------------------------------------------------------------------------------------------------- stages
def stage_data(output_dir: str, settings: StudySettings) -> Dict[str, Any]:
  """Corpus, vocabulary, pretraining records (+ arrays) and the topic task; returns their paths. The study kit's
  resumable stage `data` (`<output_dir>/stages/data.json`): built once per data settings."""
  key = {name: getattr(settings, name) for name in DATA_SETTINGS}
  return study.run_stage(output_dir, "data", {**key, "topic_max_train": TOPIC_MAX_TRAIN},
                         functools.partial(_make_data, output_dir, settings), log=logger.info)


def _make_data(output_dir: str, settings: StudySettings) -> Dict[str, Any]:
  # The demo's full corpus (no size cap, its packages, its held-out documents), as `make demo` makes it.
  made = study.make_pretraining_data(output_dir, settings)
  topic = make_topic_task(output_dir, settings.seed, max_train=TOPIC_MAX_TRAIN)
  return {"spm_model": made["spm_model"], "train_records": made["train_records"],
          "heldout_records": made["heldout_records"], "corpus": made["corpus"],
          "topic_data_dir": topic["data_dir"], "topic_counts": topic["counts"],
          "arrays": pretraining_arrays.export_arrays(made["train_records"].split(","),
                                                     os.path.join(output_dir, "pretrain_arrays.npz"),
                                                     settings.seq_length, settings.max_predictions_per_seq)}


def stage_pretrain(output_dir: str, settings: StudySettings, data: Dict[str, Any],
                   pretrained_dir: str = "") -> str:
  """`output_dir/pretrained`: STUDY_MODEL pretrained by our trainer, or converted from `pretrained_dir`."""
  key = _pretrain_key(settings, data, pretrained_dir)
  return study.run_stage(output_dir, "pretrain", key,
                         functools.partial(_pretrain, output_dir, settings, data, pretrained_dir), log=logger.info)


def _pretrain_key(settings: StudySettings, data: Dict[str, Any], pretrained_dir: str) -> Dict[str, Any]:
  return {"pretrained_dir": pretrained_dir, "data": data["train_records"], **{n: getattr(settings, n) for n in
          PRETRAIN_SETTINGS}, **({"pretrained": study.directory_stamp(pretrained_dir)} if pretrained_dir else {})}


def _pretrain(output_dir: str, settings: StudySettings, data: Dict[str, Any], pretrained_dir: str) -> str:
  target = os.path.join(output_dir, "pretrained")
  if pretrained_dir:
    from official_albert.checkpoints.convert import convert  # noqa: PLC0415 (binary: TF after launch)
    from official_albert.checkpoints.loading import detect_format  # noqa: PLC0415 (binary: TF after launch)
    convert(detect_format(pretrained_dir), pretrained_dir, "native", target, model_type="pretrainer",
            spm_model_file=data["spm_model"])
    return target
  from official_albert.precision import resolve_mixed_precision  # noqa: PLC0415 (binary: TF after launch)
  precision, _ = resolve_mixed_precision("auto", (settings.pretrain_batch_size * settings.seq_length,
                                                  STUDY_MODEL["hidden_size"], STUDY_MODEL["intermediate_size"]),
                                         owner="early_exit_study")
  override = {
      "task": {"model": {**STUDY_MODEL, "vocab_size": settings.vocab_size},
               **study.pretraining_data_override(data, settings, settings.pretrain_batch_size)},
      "trainer": {"train_steps": settings.pretrain_steps, "steps_per_loop": 50, "checkpoint_interval": 500,
                  "validation_interval": 500, "summary_interval": 50, "validation_steps": 20,
                  "learning_rate": settings.pretrain_learning_rate, "warmup_steps": settings.pretrain_steps // 10},
      "runtime": {"seed": settings.seed, "mixed_precision_dtype": precision}}
  train.run("albert_tiny_pretrain", "train_and_eval", target, params_override=json.dumps(override))
  file_io.atomic_copy(data["spm_model"], model_directory.path(target, model_directory.SPM_FILE))
  return target


def pretrained_for_later_stage(output_dir: str, settings: StudySettings, data: Dict[str, Any],
                               pretrained_dir: str, stage: str) -> str:
  """The later stages' model: the pretrain stage with its recorded `--pretrained_dir` when the flag is left out (their
  README commands do), redone when its settings changed unless converted from elsewhere (refused: made from the old
  data); another `--pretrained_dir` is refused (only `--stage=pretrain` swaps the model)."""
  path = study.stage_path(output_dir, "pretrain")
  marker = file_io.read_json(path) if os.path.exists(path) else {}
  recorded = marker.get("key", {}).get("pretrained_dir", "")
  if recorded and not pretrained_dir and marker.get("fingerprint") != study.fingerprint(
      _pretrain_key(settings, data, recorded)):  # a model made elsewhere from the old data: not ours to redo
    raise ValueError(f"{path}: the model converted from {recorded} was pretrained for other data or pretraining "
                     "settings than this run's; pretrain it again from pretrain_arrays.npz, then --stage=pretrain.")
  if not pretrained_dir or not marker or pretrained_dir == recorded:
    return stage_pretrain(output_dir, settings, data, pretrained_dir or recorded)
  raise ValueError(f"--stage={stage} --pretrained_dir={pretrained_dir}, but {path} records the pretrain stage run "
                   f"with --pretrained_dir={recorded or '(none: pretrained here)'}. Leave out --pretrained_dir to use "
                   f"that model, or run --stage=pretrain --pretrained_dir={pretrained_dir} to switch to yours.")


def task_files(task: str, data: Dict[str, Any]) -> Dict[str, str]:
  """train / dev TSVs (GLUE SST-2 layout) of a study task (SST-2 from `main`'s --glue_data_dir)."""
  glue = data.get("glue_data_dir") or os.path.join(shared_data_dir(), "glue")
  folder = glue if task == "sst2" else data["topic_data_dir"]
  files = {split: os.path.join(folder, "SST-2", f"{split}.tsv") for split in ("train", "dev")}
  if not os.path.exists(files["train"]):
    raise FileNotFoundError(f"{files['train']} not found (task {task}).")
  return files


def finetune_dir(output_dir: str, task: str, exit_heads: bool, seed: int) -> str:
  return os.path.join(output_dir, "ft", f"{task}_{'exit' if exit_heads else 'plain'}_s{seed}")


FINETUNE_MARKER = "study_finetune.json"
BENCH_KEY_FILE = "bench_key.json"


def pretrain_fingerprint(output_dir: str) -> str:
  """The fingerprint of the pretrain stage's marker (which pretrained model `output_dir/pretrained` is): the
  fine-tuning and bench markers record it, so a pretrain stage run again (another `--pretrained_dir`, other
  settings) retrains and re-measures what was made from the old model."""
  path = study.stage_path(output_dir, "pretrain")
  if not os.path.exists(path):
    raise FileNotFoundError(f"{path} is missing: run --stage=pretrain first.")
  return file_io.read_json(path)["fingerprint"]


def stage_finetune(output_dir: str, settings: StudySettings, data: Dict[str, Any], pretrained: str,
                   tasks=TASKS, train_missing: bool = True) -> Dict[str, Any]:
  """glue/sst-2 on each task, with and without exit heads, per seed; returns {model dir: eval results, seconds}.
  `train_missing=False` (the later stages) only reads the finished runs and raises naming a missing one."""
  from official_albert.precision import resolve_mixed_precision  # noqa: PLC0415 (binary: TF after launch)
  precision, _ = resolve_mixed_precision("auto", (settings.ft_batch_size * settings.ft_seq_length,
                                                  STUDY_MODEL["hidden_size"], STUDY_MODEL["intermediate_size"]),
                                         owner="early_exit_study")
  results = {}
  pretrain = pretrain_fingerprint(output_dir)
  for task in tasks:
    files = task_files(task, data)
    steps = settings.ft_train_steps[task]
    for seed in settings.seeds:
      for exit_heads in (True, False):
        model_dir = finetune_dir(output_dir, task, exit_heads, seed)
        done = os.path.join(model_dir, FINETUNE_MARKER)
        override = {
            "task": {"model": {**STUDY_MODEL, "vocab_size": settings.vocab_size, "preset": ""},
                     "init_checkpoint": pretrained, "classifier_dropout": 0.1, "exit_heads": exit_heads,
                     "spm_model_file": data["spm_model"],
                     "train_data": {"input_path": files["train"], "global_batch_size": settings.ft_batch_size,
                                    "seq_length": settings.ft_seq_length, "seed": seed, "pad_to_multiple_of": 16},
                     "validation_data": {"input_path": files["dev"], "global_batch_size": 64,
                                         "seq_length": settings.ft_seq_length, "pad_to_multiple_of": 16}},
            "trainer": {"train_steps": steps, "steps_per_loop": 50, "checkpoint_interval": steps,
                        "validation_interval": steps, "summary_interval": 50, "validation_steps": -1,
                        "learning_rate": settings.ft_learning_rate[task], "warmup_steps": settings.ft_warmup_steps,
                        "max_to_keep": 1},
            "runtime": {"seed": seed, "mixed_precision_dtype": precision}}
        # The precision is left out: the probe's answer moves with the machine's load.
        key = study.fingerprint({"pretrain": pretrain, "task": override["task"], "trainer": override["trainer"]})
        if os.path.exists(done):
          marker = file_io.read_json(done)
          if marker.get("key") == key:
            results[model_dir] = marker
            continue
          if not train_missing:
            raise RuntimeError(f"{done} was fine-tuned from another pretrained model (the pretrain stage ran again "
                               "since), with other settings or before its key was kept: run --stage=finetune again.")
          logger.warning("%s: fine-tuned under other settings or from another pretrained model: retraining",
                         model_dir)
        elif not train_missing:
          raise FileNotFoundError(f"{done} is missing: run --stage=finetune first.")
        if os.path.isdir(model_dir):  # the trainer would resume a checkpoint of the old run
          shutil.rmtree(model_dir)
        start, load = time.time(), os.getloadavg()
        result = train.run("glue/sst-2", "train_and_eval", model_dir, params_override=json.dumps(override))
        file_io.atomic_copy(data["spm_model"], model_directory.path(model_dir, model_directory.SPM_FILE))
        results[model_dir] = {"eval": result["eval_results"], "wall_s": time.time() - start, "loadavg_start": load,
                              "loadavg_end": os.getloadavg(), "steps": steps, "precision": precision, "key": key,
                              "pretrain": pretrain}
        file_io.atomic_write_json(done, results[model_dir])
        logger.info("%s: %s", model_dir, results[model_dir])
  return results


def stage_bench(output_dir: str, settings: StudySettings, data: Dict[str, Any], tasks=TASKS,
                repeats: int = 2, timed_examples: int = 200) -> Dict[str, str]:
  """`--workload=early_exit` per (task, seed), each in its own process, in the machine's faster TF precision (the
  matmul probe at the model's shape); returns {key: results.json}. Timed on the first `timed_examples` dev
  sentences (2 cores shared by a team: 28 rows × `repeats` passes), answered on all of them."""
  from official_albert import precision  # noqa: PLC0415 (binary: TF after launch)
  probe = precision.probe_matmul_speed((8 * settings.ft_seq_length, STUDY_MODEL["hidden_size"],
                                        STUDY_MODEL["intermediate_size"]))
  dtype = "bfloat16" if probe.faster_policy() == "mixed_bfloat16" else "float32"
  logger.info("bench dtype %s: %s", dtype, probe.describe())
  out = {}
  for task in tasks:
    dev = task_files(task, data)["dev"]
    for seed in settings.seeds:
      key = f"{task}_s{seed}"
      target = os.path.join(output_dir, "bench", key)
      out[key] = os.path.join(target, "results.json")
      # What was measured: the two fine-tuned models (their markers' keys hold the pretrained model's) and the
      # timing knobs. A bench left from other models is measured again.
      models = [finetune_dir(output_dir, task, heads, seed) for heads in (True, False)]
      bench_key = {"models": [file_io.read_json(os.path.join(m, FINETUNE_MARKER)).get("key") for m in models],
                   "repeats": repeats, "timed_examples": timed_examples, "seq_length": settings.ft_seq_length}
      key_path = os.path.join(target, BENCH_KEY_FILE)
      if os.path.exists(out[key]) and os.path.exists(key_path) and file_io.read_json(key_path) == bench_key:
        continue
      if os.path.isdir(target):
        shutil.rmtree(target)
      argv = [sys.executable, "-m", "experiments.benchmark", "--workload=early_exit",
              f"--model_dir={finetune_dir(output_dir, task, True, seed)}",
              f"--baseline_model_dir={finetune_dir(output_dir, task, False, seed)}", f"--eval_file={dev}",
              f"--dtype={dtype}", "--batch_size=8", f"--seq_length={settings.ft_seq_length}", f"--repeats={repeats}",
              "--patience=1,2,3,4,5,6", "--openvino", "--nomatmul_peak", f"--max_examples={timed_examples}",
              f"--output_dir={target}"]
      logger.info("%s", " ".join(argv))
      subprocess.run(argv, check=True, env=cli.child_env())  # not a user's experiments/ in the cwd
      file_io.atomic_write_json(key_path, bench_key)
  return out


def stage_report(output_dir: str, settings: StudySettings, benches: Dict[str, str],
                 finetune: Dict[str, Any], tasks=TASKS) -> Dict[str, Any]:
  """Mean ± std over seeds of every row, the exit heads' cost, the goals; report.json, report.md, frontier PNGs."""
  report: Dict[str, Any] = {"settings": dataclasses.asdict(settings), "model": STUDY_MODEL, "tasks": {}}
  per_variant: Dict[str, List[Dict[str, Any]]] = {}  # "<task>/<row>": one row per seed (the kit's summary.json)
  for task in tasks:
    loaded = [file_io.read_json(benches[f"{task}_s{seed}"]) for seed in settings.seeds]
    results = [one["workloads"]["early_exit"] for one in loaded]
    report.setdefault("environment", loaded[0]["environment"])
    # A row that did not run ok on a seed (an OpenVINO export that failed) is meaned over the seeds it ran on: its
    # n says how many (the report prints it, `_goals` passes it over); its per-seed entries name their seeds.
    rows: Dict[str, Dict[str, Any]] = {}
    for seed, result in zip(settings.seeds, results):
      for r in result["rows"] + result["elastic_depth"]:
        if r.get("status") == "ok":
          rows.setdefault(r["name"], {"name": r["name"], "engine": r["engine"], "batch_size": r["batch_size"],
                                      "patience": r["patience"], "depth": r["depth"], "seeds": {}})["seeds"][seed] = r
    table = []
    for name, entry in rows.items():
      ok = entry.pop("seeds")
      seeds = [{**{key: ok[s].get(key) for key in ROW_METRICS}, "seed": s, "status": "ok"} if s in ok
               else {"seed": s, "status": "not run or failed"} for s in settings.seeds]
      entry.update({key: study.mean_std(r.get(key) for r in seeds) for key in ROW_METRICS}, n=len(ok))
      per_variant[f"{task}/{name}"] = seeds
      table.append(entry)
    cost = study.mean_std(r["exit_heads_cost"]["change"] for r in results if "exit_heads_cost" in r)
    plain_ft = study.mean_std(finetune[finetune_dir(output_dir, task, False, s)]["eval"]["eval_accuracy"]
                              for s in settings.seeds)
    exit_ft = study.mean_std(finetune[finetune_dir(output_dir, task, True, s)]["eval"]["eval_accuracy"]
                             for s in settings.seeds)
    goals = _goals(table, len(settings.seeds))
    report["tasks"][task] = {"rows": table, "exit_heads_cost": cost, "finetune_accuracy_without": plain_ft,
                             "finetune_accuracy_with": exit_ft, "goals": goals, "examples": results[0]["examples"],
                             "frontier": _plot(table, os.path.join(output_dir, f"frontier_{task}.png"), task)}
  report["finetune"] = finetune
  summary = study.write_summary(output_dir, settings, settings.seeds, per_variant, ROW_METRICS,
                                goals={task: entry["goals"] for task, entry in report["tasks"].items()})
  for variant, seeds in per_variant.items():  # the kit keeps the metrics only: each entry names its seed too
    for kept, row in zip(summary["per_seed"][variant], seeds):
      kept.update(seed=row["seed"], status=row["status"])
  file_io.atomic_write_json(study.summary_path(output_dir), summary)
  file_io.atomic_write_json(os.path.join(output_dir, "report.json"), report)
  file_io.atomic_write_text(os.path.join(output_dir, "report.md"), format_report(report))
  return report


def _goals(table: List[Dict[str, Any]], seeds: int) -> List[Dict[str, Any]]:
  """Per engine and batch size: the fastest patience whose mean accuracy change is within 0.5 point. Only rows
  measured on all `seeds` seeds compete (one that failed on some is named under "incomplete")."""
  goals = []
  for engine in ("tf", "openvino"):
    for b in (1, 8):
      rows = [r for r in table if r["engine"] == engine and r["batch_size"] == b and r["patience"]]
      complete = [r for r in rows if r["accuracy_change"]["n"] >= seeds and r["speedup"]["n"] >= seeds]
      candidates = [r for r in complete if r["accuracy_change"]["mean"] >= -MAX_ACCURACY_LOSS - 1e-9]
      goal = {"engine": engine, "batch_size": b}
      incomplete = [r["name"] for r in rows if r not in complete]
      if incomplete:
        goal["incomplete"] = incomplete  # left out: measured on fewer than all seeds
      if not candidates:
        goals.append({**goal, "status": "missed (no patience within 0.5 point)"})
        continue
      best = max(candidates, key=lambda r: r["speedup"]["mean"])
      goals.append({**goal, "patience": best["patience"], "speedup": best["speedup"],
                    "accuracy_change": best["accuracy_change"], "exit_mean": best["exit_mean"],
                    "target": SPEEDUP_GOALS[b],
                    "status": "met" if best["speedup"]["mean"] >= SPEEDUP_GOALS[b] else "missed"})
  return goals


def _plot(table: List[Dict[str, Any]], path: str, task: str) -> str:

  matplotlib.use("Agg")
  from matplotlib import pyplot as plt  # noqa: PLC0415 (after matplotlib.use)
  fig, ax = plt.subplots(figsize=(7.5, 5))
  for engine in ("tf", "openvino"):
    for b in (1, 8):
      # A row without a speed-up (its group's full-depth row errored: nothing to divide by) has no place on it.
      line = sorted((r for r in table if r["engine"] == engine and r["batch_size"] == b and r["depth"] is None
                     and r["speedup"]["mean"] is not None), key=lambda r: r["speedup"]["mean"])
      if not line:
        continue
      ax.errorbar([r["speedup"]["mean"] for r in line], [r["accuracy"]["mean"] for r in line],
                  xerr=[r["speedup"]["std"] for r in line], yerr=[r["accuracy"]["std"] for r in line], fmt="o-",
                  capsize=2, label=f"{engine}, batch {b}")
      for r in line:
        ax.annotate(str(r["patience"] or "full"), (r["speedup"]["mean"], r["accuracy"]["mean"]), fontsize=7,
                    textcoords="offset points", xytext=(3, 3))
  for engine, label in (("tf_baseline_depth", "static depth k, no exit heads"),
                        ("tf_exit_heads_depth", "static depth k, exit heads")):
    line = sorted((r for r in table if r["engine"] == engine and r["speedup"]["mean"] is not None),
                  key=lambda r: r["depth"])
    if line:
      ax.plot([r["speedup"]["mean"] for r in line], [r["accuracy"]["mean"] for r in line], "s--", alpha=0.5,
              label=f"{label} (batch 8)")
  ax.set_xlabel("wall-clock speed-up over full depth (mean over seeds)")
  ax.set_ylabel("dev accuracy (mean ± std over seeds)")
  ax.set_title(f"early exit, {task}: 12 iterations, H 256", fontsize=10)
  return save_chart(fig, ax, path)


def _pm(stat: Dict[str, float], fmt: str = ".3f", scale: float = 1.0, seeds: int = 0) -> str:
  """"mean ± std"; no "±" for one value (its std 0.0 is no spread); "(n=…)" for fewer values than `seeds`."""
  if not stat or stat.get("mean") is None:
    return ""
  n = stat.get("n", seeds)
  text = f"{stat['mean'] * scale:{fmt}}" + (f" ± {stat['std'] * scale:{fmt}}" if n >= 2 else "")
  return text + (f" (n={n})" if n < seeds else "")


def format_report(report: Dict[str, Any]) -> str:
  env = report.get("environment", {})
  n_seeds = len(report["settings"]["seeds"])
  pm = functools.partial(_pm, seeds=n_seeds)
  lines = [f"# Early-exit study ({env.get('cpu_model', '?')}, {env.get('cpu_count', '?')} cores; load "
           f"{env.get('loadavg_start', '?')})", ""]
  for task, entry in report["tasks"].items():
    lines += [f"## {task} ({entry['examples']} dev examples)", "",
              f"Fine-tuned dev accuracy: with exit heads {pm(entry['finetune_accuracy_with'], '.4f')}, without "
              f"{pm(entry['finetune_accuracy_without'], '.4f')}; exit heads' cost at full depth (with − without) "
              f"{pm(entry['exit_heads_cost'], '.2f', 100)} points.", "",
              "| row | batch | patience | accuracy | Δ points | speed-up | seq/s | p50 ms | p99 ms | exit mean | "
              "exit p99 |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in sorted(entry["rows"], key=lambda r: (r["engine"], r["batch_size"], r["depth"] or 0, r["patience"])):
      mode = r["patience"] if r["depth"] is None else f"depth {r['depth']}"
      short = f" (n={r['n']} of {n_seeds} seeds)" if r.get("n", n_seeds) < n_seeds else ""
      lines.append(f"| {r['name']}{short} | {r['batch_size']} | {mode} | "
                   f"{pm(r['accuracy'], '.4f')} | {pm(r['accuracy_change'], '.2f', 100)} | "
                   f"{pm(r['speedup'], '.2f')} | {pm(r['examples_per_s'], '.1f')} | {pm(r['p50_ms'], '.1f')} | "
                   f"{pm(r['p99_ms'], '.1f')} | {pm(r['exit_mean'], '.2f')} | {pm(r['exit_p99'], '.1f')} |")
    lines += ["", f"Goals (fastest patience within 0.5 point of full depth, mean over all {n_seeds} seeds):", ""]
    for g in entry["goals"]:
      lines.append(f"- {g['engine']} batch {g['batch_size']}: {g['status']}" + (
          f" — patience {g['patience']}, {pm(g['speedup'], '.2f')}× (target {g['target']}×), "
          f"Δ {pm(g['accuracy_change'], '.2f', 100)} points, mean exit {pm(g['exit_mean'], '.2f')}"
          if "patience" in g else "") + (f" (left out, not on all seeds: {', '.join(g['incomplete'])})"
                                         if g.get("incomplete") else ""))
    lines.append("")
  return "\n".join(lines)


# ------------------------------------------------------------------------------------------------------ main
def define_flags(fv: flags.FlagValues = flags.FLAGS) -> None:
  """Defines the binary's flags on `fv` (never at import time)."""
  flags.DEFINE_enum("stage", "data", list(STAGES), "Which stage to run.", flag_values=fv)
  flags.DEFINE_string("output_dir", "out/early_exit_study", "Where everything goes.", flag_values=fv)
  flags.DEFINE_string("pretrained_dir", None, "A pretrained model directory to use instead of the pretrain stage.",
                      flag_values=fv)
  flags.DEFINE_list("tasks", list(TASKS), "Tasks of the finetune / bench / report stages.", flag_values=fv)
  flags.DEFINE_list("seeds", None, "Fine-tuning seeds (default: StudySettings.seeds, 1,2,3).", flag_values=fv)
  flags.DEFINE_integer("repeats", 2, "Timed passes per benchmark row.", flag_values=fv)
  flags.DEFINE_integer("timed_examples", 200, "Dev sentences each benchmark row is timed on.", flag_values=fv)
  flags.DEFINE_string("glue_data_dir", None, "GLUE folder holding SST-2/ (task sst2; default: "
                      "$OFFICIAL_ALBERT_SHARED_DATA/glue, else the checkout's ../shared/data/glue).", flag_values=fv)


def main(argv, fv: flags.FlagValues = flags.FLAGS) -> None:
  del argv
  settings = StudySettings.full().replace(seeds=cli.number_list(fv, "seeds") if fv.seeds else None)
  summary: Dict[str, Any] = {}
  glue = fv.glue_data_dir or os.path.join(shared_data_dir(), "glue")  # checked before hours of data/pretrain
  if "sst2" in fv.tasks and not os.path.isfile(os.path.join(glue, "SST-2", "train.tsv")):
    raise FileNotFoundError(f"--glue_data_dir={glue}: no SST-2/train.tsv for task sst2 of --tasks. Point "
                            "--glue_data_dir (or OFFICIAL_ALBERT_SHARED_DATA) at GLUE, or leave it out: --tasks=topic.")
  data = {**_timed(summary, "data", stage_data, fv.output_dir, settings), "glue_data_dir": glue}
  if fv.stage == "pretrain":
    pretrained = _timed(summary, "pretrain", stage_pretrain, fv.output_dir, settings, data, fv.pretrained_dir or "")
  elif fv.stage in ("finetune", "bench", "report"):
    pretrained = _timed(summary, "pretrain", pretrained_for_later_stage, fv.output_dir, settings, data,
                        fv.pretrained_dir or "", fv.stage)
  if fv.stage in ("finetune", "bench", "report"):
    summary["finetune"] = _timed(summary, "finetune", stage_finetune, fv.output_dir, settings, data, pretrained,
                                 tuple(fv.tasks), fv.stage == "finetune")
  if fv.stage in ("bench", "report"):
    benches = _timed(summary, "bench", stage_bench, fv.output_dir, settings, data, tuple(fv.tasks),
                     fv.repeats, fv.timed_examples)
  if fv.stage == "report":
    report = stage_report(fv.output_dir, settings, benches, summary["finetune"], tuple(fv.tasks))
    print(format_report(report))
    return
  print(json.dumps(summary, indent=2, default=str))


def console_main() -> None:
  cli.launch(define_flags, main)


if __name__ == "__main__":
  console_main()
