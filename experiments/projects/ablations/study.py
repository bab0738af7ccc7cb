"""`python -m experiments.projects.ablations.study --study=...`: the binary (flags, the study's run order, its outputs).

Run order: the checks that need no training (the settings, `--glue_dir`'s files and, once the shared data is known,
every run folder's pretraining key: a refusal comes before anything trains), the shared data (`data`), the
downstream tasks' records (`downstream`), then seed by seed every variant (`runner`: a killed study resumes where it
stopped, finished runs are not retrained), the random-init fine-tuning baselines, and last the outputs —
`results.json`, `table.md`, `curves.png`, `smoothness.png` (`report`). Every invocation appends its wall time, the
machine and its load (os.getloadavg at the start, after each run, at the end) to results.json's `invocations`, so
the time a study took is recorded with the load it ran under.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import platform
import time
from typing import Any, Dict, List

from absl import flags

from experiments import study as study_kit
from experiments.projects.ablations import data as shared_data
from experiments.projects.ablations import downstream
from experiments.projects.ablations import report
from experiments.projects.ablations import runner
from experiments.projects.ablations.studies import STUDIES
from experiments.projects.ablations.studies import StudySettings
from experiments.projects.ablations.studies import Variant
from official_albert import cli
from official_albert import file_io
from official_albert.precision import resolve_mixed_precision
from tasks.masking_options import num_predictions

logger = logging.getLogger(__name__)


def define_flags(fv: flags.FlagValues = flags.FLAGS) -> None:
  """Defines the binary's flags on `fv` (never at import time)."""
  flags.DEFINE_enum("study", "table5", sorted(STUDIES), "Which of the paper's ablations to run.", flag_values=fv)
  flags.DEFINE_string("output_dir", None, "Where the data, the runs and the outputs go (reused by a rerun).",
                      flag_values=fv)
  flags.DEFINE_list("corpus", [], "Text files, one sentence per line and a blank line between documents (every "
                    f"{StudySettings.heldout_every}th document is held out; --quick: every "
                    f"{StudySettings.quick().heldout_every}th). Default: the demo's documentation corpus (no "
                    "download).", flag_values=fv)
  flags.DEFINE_integer("seeds", 3, "Seeds per variant (1..K): model initialisation and data order.", flag_values=fv)
  flags.DEFINE_integer("steps", None, "Pretraining steps per variant (default: 1,500; --quick: 100).",
                       flag_values=fv)
  flags.DEFINE_integer("batch_size", None, "Pretraining batch (default 128; --quick: 64).", flag_values=fv)
  flags.DEFINE_integer("seq_length", None, "Pretraining sequence length in pieces (default 32); the masked slots per "
                       "sequence follow it (ceil(0.15 x length): 5 at 32, 20 at 128); below 32 the fine-tuning length "
                       "is capped at it.", flag_values=fv)
  flags.DEFINE_list("downstream", ["order", "sst-2", "mrpc"], "Fine-tuning tasks of the downstream average "
                    f"(of {downstream.TASKS}; empty: none). sst-2 / mrpc need --glue_dir.", flag_values=fv)
  flags.DEFINE_string("glue_dir", "", "A folder with GLUE task folders (SST-2/, MRPC/ with train.tsv, dev.tsv).",
                      flag_values=fv)
  flags.DEFINE_bool("balance_train", True, "Subsample the training records' majority sentence label to 50/50 (the "
                    "held-out sets always are).", flag_values=fv)
  flags.DEFINE_string("mixed_precision", "", "float32, mixed_bfloat16 or auto (bf16 where a probe measures it "
                      "faster); default: auto, --quick: float32.", flag_values=fv)
  flags.DEFINE_bool("quick", False, "A small, fast study (used by the test suite).", flag_values=fv)
  flags.mark_flag_as_required("output_dir", flag_values=fv)


def settings_from_flags(fv: flags.FlagValues) -> StudySettings:
  """The study's settings from the flags. A `--seq_length` below the fine-tuning length (`ft_seq_length`, 32) caps
  the fine-tuning length at it: the pretrained model has `seq_length` positions, and fine-tuning longer sequences
  failed after the first variant had pretrained (advising a flag the study does not have)."""
  settings = StudySettings.quick() if fv.quick else StudySettings.full()
  changes: Dict[str, Any] = {"balance_train": fv.balance_train,
                             "mixed_precision": fv.mixed_precision or ("float32" if fv.quick else "auto")}
  for flag, field in (("steps", "train_steps"), ("batch_size", "batch_size"), ("seq_length", "seq_length")):
    if fv[flag].value is not None:
      changes[field] = fv[flag].value
  if fv.seq_length is not None and fv.seq_length != settings.seq_length:
    # The masking density stays the recipe's: 5 slots at 32 pieces, 20 at 128 (the reference's), ceil(0.15 x length).
    changes["max_predictions_per_seq"] = num_predictions(fv.seq_length)
  if fv.seq_length is not None and fv.seq_length < settings.ft_seq_length:
    logger.info("ablations: --seq_length=%d is below the fine-tuning length %d: fine-tuning at %d pieces too.",
                fv.seq_length, settings.ft_seq_length, fv.seq_length)
    changes["ft_seq_length"] = fv.seq_length
  return dataclasses.replace(settings, **changes)


def check_settings(settings: StudySettings, tasks) -> None:
  """Refuses settings that would fail only after a variant has pretrained.

  Raises:
    ValueError: fine-tuning sequences longer than the pretrained model's positions (`seq_length`).
  """
  if tasks and settings.ft_seq_length > settings.seq_length:
    raise ValueError(f"ft_seq_length={settings.ft_seq_length} is longer than seq_length={settings.seq_length} (the "
                     f"pretrained model's positions): fine-tuning {list(tasks)} would fail after the first variant "
                     f"pretrains. Set ft_seq_length <= seq_length (the binary's --seq_length does), or run without "
                     f"downstream tasks (--downstream=).")


PRECISION_FILE = "precision.json"


def _resolve_precision(settings: StudySettings, output_dir: str) -> StudySettings:
  """"auto" becomes the dtype a matmul probe picks — once per output_dir: the choice is kept in precision.json and
  reused, because the probe's answer moves with the machine's load and the dtype is part of every run's key (a
  rerun that probed afresh could retrain finished runs)."""
  if settings.mixed_precision != "auto":
    return settings
  path = os.path.join(output_dir, PRECISION_FILE)
  if os.path.exists(path):
    with open(path, encoding="utf-8") as f:
      return dataclasses.replace(settings, mixed_precision=json.load(f)["mixed_precision"])
  model = settings.model
  choice, probe = resolve_mixed_precision("auto", (settings.batch_size * settings.seq_length, model["hidden_size"],
                                                   model["intermediate_size"]), owner="ablations")
  file_io.atomic_write_json(path, {"mixed_precision": choice, "probe": probe})
  return dataclasses.replace(settings, mixed_precision=choice)


def machine() -> Dict[str, Any]:
  cpu = platform.processor()
  if os.path.exists("/proc/cpuinfo"):
    with open("/proc/cpuinfo", encoding="utf-8") as f:
      cpu = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), cpu)
  return {"cpu": cpu, "cores": os.cpu_count()}


def _previous_invocations(path: str) -> List[Dict[str, Any]]:
  if not os.path.exists(path):
    return []
  with open(path, encoding="utf-8") as f:
    return json.load(f).get("invocations", [])


def _settings_line(settings: StudySettings, data: Dict[str, Any]) -> str:
  m = settings.model
  return (f"tiny ALBERT (E {m['embedding_size']}, H {m['hidden_size']}, {m['num_hidden_layers']} layers) unless the "
          f"variant says otherwise, {settings.train_steps} LAMB steps of {settings.batch_size} × "
          f"{settings.seq_length} pieces, vocabulary {data['vocab_size']}, "
          f"{data['corpus']['bytes'] / 1e6:.1f} MB corpus, held-out sets of "
          f"{data['heldout']['sop']['records']} (SOP) / {data['heldout']['nsp']['records']} (NSP) balanced pairs")


# Long because: the study's stages in the order they run (data, tasks, the runs, the baselines, the outputs); they
# share the load samples and the paths made at the top.
def run_study(study_name: str, output_dir: str, settings: StudySettings, seeds: int, corpus_files=(),
              tasks=(), glue_dir: str = "") -> Dict[str, Any]:
  """Runs (or resumes) a study; returns results.json's content."""
  study = STUDIES[study_name]
  start, loads = time.time(), [os.getloadavg()[0]]
  check_settings(settings, tasks)
  downstream.check_glue_files(list(tasks), glue_dir)  # (before the data: a typo costs no build)
  settings = _resolve_precision(settings, output_dir)
  data = shared_data.prepare_data(output_dir, settings, corpus_files, [v.objective for v in study.variants])
  runner.check_run_keys(output_dir, study.variants, seeds, settings, data)  # (before any run trains)
  prepared = downstream.prepare_tasks(output_dir, list(tasks), glue_dir, data["spm_model"], settings)
  runs = []
  for seed in range(1, seeds + 1):
    for variant in study.variants:
      runs.append(runner.run_variant(output_dir, study.name, variant, seed, settings, data, prepared))
      loads.append(os.getloadavg()[0])
      logger.info("ablations: %s seed %d: MLM %.4f NSP %.4f SOP %.4f (load %.1f)", variant.name, seed,
                  runs[-1]["masked_lm_accuracy"], runs[-1]["nsp_accuracy"], runs[-1]["sop_accuracy"], loads[-1])
  model = runner.pretraining_override(Variant("random init"), 1, settings, data)["task"]["model"]
  random_init = downstream.random_init_scores(output_dir, prepared, settings, model, 1, data["fingerprint"])
  summary = report.summarize(study, runs)
  results_path = os.path.join(output_dir, "results.json")
  invocation = {"started": time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(start)),
                "wall_seconds": round(time.time() - start, 1), "load_1min": [round(x, 2) for x in loads],
                "load_1min_end": round(os.getloadavg()[0], 2), "machine": machine()}
  meta = {"settings_line": _settings_line(settings, data), "seeds": seeds}
  results = {
      "study": study.name, "title": study.title, "seeds": list(range(1, seeds + 1)),
      "settings": dataclasses.asdict(settings), "data": data,
      "downstream_tasks": {k: {x: y for x, y in v.items() if x != "records"} for k, v in prepared.items()},
      "downstream_random_init": random_init, "paper": study.paper, "summary": summary, "runs": runs,
      "run_seconds": round(sum(r["pretrain_seconds"] + r["downstream_seconds"] for r in runs), 1),
      "invocations": _previous_invocations(results_path) + [invocation],
  }
  skipped = {k: v["skipped"] for k, v in prepared.items() if "skipped" in v}
  table = "\n".join([report.markdown_table(study, summary, meta), report.downstream_table(study, summary,
                                                                                         random_init, skipped),
                     "Label balance of every record set:", "", report.balance_table(data)])
  file_io.atomic_write_text(os.path.join(output_dir, "table.md"), table)
  report.plot_curves(os.path.join(output_dir, "curves.png"), study, runs)
  results["plots"] = ["curves.png"]
  if report.plot_smoothness(os.path.join(output_dir, "smoothness.png"), study, summary):
    results["plots"].append("smoothness.png")
  file_io.atomic_write_json(results_path, results)
  # The study kit's summary.json (mean ± std over seeds per variant and metric), beside results.json's full record.
  metrics = sorted(set(study.columns) | {"masked_lm_accuracy", "nsp_accuracy", "sop_accuracy"})
  study_kit.write_summary(output_dir, settings, results["seeds"],
                          {v.name: [r for r in runs if r["variant"] == v.name] for v in study.variants}, metrics,
                          study=study.name)
  print(table)
  print(f"wall time {invocation['wall_seconds']:.0f} s on {invocation['machine']['cpu']} "
        f"({invocation['machine']['cores']} cores), 1-min load {min(loads):.1f}-{max(loads):.1f}")
  return results


def main(argv, fv: flags.FlagValues = flags.FLAGS) -> None:
  del argv
  run_study(fv.study, fv.output_dir, settings_from_flags(fv), fv.seeds, fv.corpus, [t for t in fv.downstream if t],
            fv.glue_dir)


def console_main() -> None:
  """The `albert-ablations` console script (pyproject.toml)."""
  cli.launch(define_flags, main)


if __name__ == "__main__":
  console_main()
