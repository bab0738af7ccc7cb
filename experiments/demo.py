"""End-to-end demo (`make demo`): pretrain a small ALBERT on Python documentation, on CPU, and show it learned.

  python -m experiments.demo [--output_dir=demo_out] [--quick]

Stages (each timed and logged):
1. corpus   — docstrings and help topics of the standard library, then the docstrings of the installed TensorFlow,
              Keras, NumPy and Matplotlib read from source (`data_prep.corpus`, ~10 MB, no download); documents are
              split into a training part and a held-out part (every 20th document) for evaluation (stages 1-3 are
              the study kit's, `experiments.study`, shared with the research projects);
2. spm      — a SentencePiece unigram vocabulary trained on the training part (`data_prep.train_sentencepiece`);
3. data     — pretraining TFRecords (n-gram masking + in-document SOP, `data_prep.create_pretraining_data`);
4. pretrain — `albert_tiny_pretrain` through the train binary's entry point (`official_albert.train.run`,
              train_and_eval: the step-0 model is evaluated too, every evaluation covers every held-out instance),
              LAMB + the reference schedule, in bf16 where the CPU has bf16 instructions;
5. report   — step-0 vs final held-out metrics next to the chance levels (uniform, most frequent token, SOP 0.5),
              and `curves.png` (loss, MLM and SOP accuracy over steps) next to the model in `<output_dir>/model`;
6. finetune — what pretraining buys: a labelled task that word identity alone cannot solve, built from the corpus
              (is a documentation sentence in its own word order, or are its words shuffled? each sentence both
              ways, so the two classes hold the same words), written as CSV and trained with `text_classification`
              through the train binary's entry point twice with the same data, steps and seed: from the pretrained
              model (`task.init_checkpoint`, which also gives the model's shape) and from random init
              (`experiments.demo_downstream`); `--curve` also fine-tunes from the earlier kept checkpoints (dev
              accuracy against pretraining steps);
7. export_serve — `official_albert.serving.export.export_from_model_dir(head="pretrainer")`, then a NEW process runs
              `python -m official_albert.fill_mask --saved_model_dir=...` on a handful of documentation sentences
              and their top-5 answers are printed.

Every stage records wall and CPU seconds (`demo_summary.json`); CPU seconds / cores estimates the idle-machine time.

`--quick` is the variant the test suite runs (smaller corpus, vocabulary and step count).

Long because: `make demo` is one story told in stages (corpus, vocabulary, records, pretraining, the probes, the
report); kept in one file, the stages read in the order they run.
"""

from __future__ import annotations

import collections
import dataclasses
import json
import logging
import os
import resource
import shutil
import time
from typing import Any, Dict, List, Tuple

from absl import flags
import matplotlib
import sentencepiece as spm
import tensorflow as tf

from data_prep import corpus
from experiments import study
from experiments.charts import save_png
from experiments.demo_downstream import downstream_stage
from experiments.demo_downstream import export_and_serve
from experiments.demo_downstream import format_downstream
from experiments.pretraining import TINY_MODEL
from official_albert import cli
from official_albert import file_io
from official_albert import model_directory
from official_albert import train
from official_albert.data import input_pipeline
from official_albert.precision import resolve_mixed_precision

logger = logging.getLogger(__name__)


@dataclasses.dataclass
class DemoSettings(study.CorpusSettings, study.FinetuneSettings):
  """The knobs of one demo run (beside the kit's corpus and fine-tuning knobs); `full()` is `make demo`, `quick()`
  the test-suite variant."""
  train_steps: int
  batch_size: int
  steps_per_loop: int
  eval_interval: int
  eval_steps: int  # -1: every held-out instance
  learning_rate: float
  warmup_steps: int
  # "auto": mixed_bfloat16 where a matmul probe measures bf16 faster on this machine, else float32.
  mixed_precision: str = "float32"
  curve: bool = False  # the fine-tuning stage also fine-tunes from each kept pretraining checkpoint

  @classmethod
  def full(cls, seed: int = 12345) -> "DemoSettings":
    """`make demo`: ~10 MB of text, sequences of 32 pieces, 1,500 steps of batch 128 (~190k examples).

    Why short sequences: sentence-order prediction is learnt from the number of segment pairs seen, and at 32 pieces
    a segment is about one sentence. Measured on 2 cores (bf16): held-out SOP 0.59 after 200 steps at seq 32 × batch
    128, while seq 64 × batch 64 was still at 0.52 after 600 steps and seq 128 × batch 32 at chance after 3,000. The
    paper's recipe (seq 512, 125k steps of 4096) is `albert_*_v2_pretrain`.
    """
    return cls(corpus_bytes=None, packages=corpus.DEMO_PACKAGES, vocab_size=4000, seq_length=32,
               max_predictions_per_seq=5, dupe_factor=2, train_steps=1500, batch_size=128, steps_per_loop=50,
               eval_interval=500, eval_steps=-1, learning_rate=0.01, warmup_steps=150, mixed_precision="auto",
               ft_seq_length=32, seed=seed)

  @classmethod
  def quick(cls, seed: int = 12345) -> "DemoSettings":
    """The test suite's size: 300 kB of text, 80 steps of 64 (held-out MLM accuracy reaches its most-frequent-token
    plateau by then; the 160 steps this had until 2026-12 bought no margin, docs/demo.md)."""
    return cls(corpus_bytes=300_000, vocab_size=800, seq_length=32, max_predictions_per_seq=5, dupe_factor=1,
               train_steps=80, batch_size=64, steps_per_loop=40, eval_interval=40, eval_steps=4,
               learning_rate=0.01, warmup_steps=8, ft_seq_length=32, ft_train_steps=30, ft_warmup_steps=3,
               seed=seed)


def _cpu_seconds() -> float:
  """User + system CPU time of this process and its finished children (the fill-mask subprocess)."""
  own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
  return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


class _Timer:
  """Wall and CPU seconds per stage (CPU time estimates the wall time on an idle machine of N cores: ≈ CPU / N)."""

  def __init__(self):
    self.seconds: Dict[str, float] = {}
    self.cpu_seconds: Dict[str, float] = {}

  def stage(self, name: str):
    timer = self

    class _Stage:
      def __enter__(self):
        self.start = time.time()
        self.cpu_start = _cpu_seconds()
        logger.info("demo: %s ...", name)

      def __exit__(self, *exc):
        timer.seconds[name] = time.time() - self.start
        timer.cpu_seconds[name] = _cpu_seconds() - self.cpu_start
        logger.info("demo: %s done in %.1f s", name, timer.seconds[name])
        return False

    return _Stage()


# ----------------------------------------------------------------------------------------------------- stages
def label_baselines(pattern: str, settings: DemoSettings, train_pattern: str) -> Dict[str, float]:
  """Chance levels of the held-out MLM targets: uniform (1/V) and 'always the most frequent training target'."""

  def counts(path):
    counter = collections.Counter()
    dataset = input_pipeline.pretraining_dataset(path, settings.seq_length, settings.max_predictions_per_seq, 256,
                                                 is_training=False, drop_remainder=False)
    for batch in dataset:
      ids = batch["masked_lm_ids"].numpy()
      weights = batch["masked_lm_weights"].numpy()
      counter.update(ids[weights > 0].tolist())
    return counter

  train_counts, heldout_counts = counts(train_pattern), counts(pattern)
  most_common = train_counts.most_common(1)[0][0]
  total = max(sum(heldout_counts.values()), 1)
  return {"uniform": 1.0 / settings.vocab_size, "most_frequent_token": heldout_counts[most_common] / total,
          "heldout_targets": float(total), "most_frequent_token_id": float(most_common)}


def plot_curves(path: str, history: List[Tuple[int, Dict[str, float]]],
                evals: List[Tuple[int, Dict[str, float]]], baselines: Dict[str, float]) -> None:
  """curves.png: loss (train + held-out) and MLM / SOP accuracy (train + held-out) over steps."""
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt  # noqa: PLC0415 (after matplotlib.use)

  fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
  steps = [s for s, _ in history]
  esteps = [s for s, _ in evals]
  panels = (("loss", "loss (MLM + SOP)", None), ("masked_lm_accuracy", "MLM accuracy", "mlm"),
            ("sentence_order_accuracy", "SOP accuracy", "sop"))
  for ax, (key, title, kind) in zip(axes, panels):
    ax.plot(steps, [logs[key] for _, logs in history], label="train", color="tab:blue")
    ax.plot(esteps, [r[key] for _, r in evals], "o-", label="held-out", color="tab:orange")
    if kind == "mlm":
      ax.axhline(baselines["most_frequent_token"], ls="--", color="gray", label="most-frequent-token baseline")
      ax.axhline(baselines["uniform"], ls=":", color="black", label="uniform chance 1/V")
    if kind == "sop":
      ax.axhline(0.5, ls=":", color="black", label="chance 0.5")
    ax.set_title(title)
    ax.set_xlabel("step")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
  save_png(fig, path, dpi=90)


# -------------------------------------------------------------------------------------------------------- main
# Long because: the demo's stages in the order they run, each a `with timer.stage(...)` block calling one function: the
# function is the story's table of contents.
def run_demo(output_dir: str, settings: DemoSettings) -> Dict[str, Any]:
  """Runs every stage; returns the summary (also written to `<output_dir>/demo_summary.json`)."""
  timer = _Timer()
  os.makedirs(output_dir, exist_ok=True)
  for stage_dir in ("model", "finetune", "saved_model"):  # a rerun starts fresh instead of resuming a finished run
    path = os.path.join(output_dir, stage_dir)
    if os.path.isdir(path):
      logger.warning("demo: removing %s, left by a previous run (every run starts from scratch)", path)
      shutil.rmtree(path)
  data = study.make_pretraining_data(output_dir, settings, timer.stage)
  spm_model = data["spm_model"]
  with timer.stage("baselines"):
    baselines = label_baselines(data["heldout_records"], settings, data["train_records"])

  precision, precision_probe = resolve_mixed_precision(
      settings.mixed_precision, (settings.batch_size * settings.seq_length, TINY_MODEL["hidden_size"],
                                 TINY_MODEL["intermediate_size"]))
  vocab_size = spm.SentencePieceProcessor(model_file=spm_model).GetPieceSize()
  model_dir = os.path.join(output_dir, "model")
  override = {
      "task": {
          "model": {"vocab_size": vocab_size, "max_position_embeddings": settings.seq_length},
          **study.pretraining_data_override(data, settings, settings.batch_size),
      },
      "trainer": {"train_steps": settings.train_steps, "steps_per_loop": settings.steps_per_loop,
                  "checkpoint_interval": settings.eval_interval, "validation_interval": settings.eval_interval,
                  "summary_interval": settings.steps_per_loop, "validation_steps": settings.eval_steps,
                  "learning_rate": settings.learning_rate, "warmup_steps": settings.warmup_steps,
                  "eval_at_start": True},
      "runtime": {"seed": settings.seed, "mixed_precision_dtype": precision},
  }
  with timer.stage("pretrain"):
    result = train.run("albert_tiny_pretrain", "train_and_eval", model_dir, params_override=json.dumps(override))
  tf_io_copy(spm_model, model_directory.path(model_dir, model_directory.SPM_FILE))

  history = result["history"]
  evals = result["eval_history"]
  first, last = evals[0][1], evals[-1][1]
  plot_path = os.path.join(model_dir, "curves.png")
  with timer.stage("plot"):
    plot_curves(plot_path, history, evals, baselines)
  with timer.stage("finetune"):
    finetune = downstream_stage(output_dir, model_dir, data["train_text"], data["heldout_text"], settings, precision,
                                settings.curve)
  with timer.stage("export_serve"):
    serving = export_and_serve(output_dir, model_dir, settings)
  summary = {
      "settings": dataclasses.asdict(settings), "mixed_precision": precision,
      "precision_probe": precision_probe, "corpus": data["corpus"],
      "vocab_size": vocab_size,
      "train_records": data["train_examples"], "heldout_records": data["heldout_examples"],
      "baselines": baselines, "step0_eval": first, "final_eval": last,
      "eval_history": [(s, r) for s, r in evals], "train_history": history,
      "best_checkpoint": result.get("best_checkpoint"), "model_dir": model_dir, "plot": plot_path,
      "finetune": finetune, "serving": serving,
      "stage_seconds": timer.seconds, "total_seconds": sum(timer.seconds.values()),
      "stage_cpu_seconds": timer.cpu_seconds, "total_cpu_seconds": sum(timer.cpu_seconds.values()),
  }
  file_io.atomic_write_text(os.path.join(output_dir, "demo_summary.json"), json.dumps(summary, indent=2, default=float))
  print(format_report(summary))
  return summary


def tf_io_copy(src: str, dst: str) -> None:
  tf.io.gfile.copy(src, dst, overwrite=True)


def _probe_line(probe: Dict[str, Any]) -> str:
  gflops = probe["gflops"]
  return (f"matmul {'x'.join(str(d) for d in probe['shape'])} float32 {gflops['float32']:.0f} vs bfloat16 "
          f"{gflops['bfloat16']:.0f} GFLOP/s on this machine")


def format_report(summary: Dict[str, Any]) -> str:
  first, last, base = summary["step0_eval"], summary["final_eval"], summary["baselines"]
  lines = [
      "",
      "ALBERT demo: pretraining on the Python documentation (held-out documents)",
      f"  corpus {summary['corpus']['bytes'] / 1e6:.2f} MB, {summary['corpus']['documents']} documents; "
      f"vocab {summary['vocab_size']}; {summary['train_records']} train / {summary['heldout_records']} held-out "
      "instances",
      f"  precision {summary['mixed_precision']}" + (
          f" (auto: {_probe_line(summary['precision_probe'])})" if summary.get("precision_probe") else ""),
      f"  {'metric':<26}{'step 0':>10}{'step ' + str(last['global_step']):>12}",
  ]
  for key in ("masked_lm_accuracy", "masked_lm_loss", "sentence_order_accuracy", "sentence_order_loss", "loss"):
    lines.append(f"  {key:<26}{first[key]:>10.4f}{last[key]:>12.4f}")
  lines += [
      f"  MLM chance: uniform 1/V = {base['uniform']:.4f}; always-most-frequent-token = "
      f"{base['most_frequent_token']:.4f}; SOP chance = 0.5",
      f"  curves: {summary['plot']}",
  ]
  if "finetune" in summary:
    lines += format_downstream(summary["finetune"])
  if "serving" in summary:
    serve = summary["serving"]
    lines.append(f"Export + serve (SavedModel {serve['export_dir']}, answered by a new process), top-5:")
    for answer in serve.get("answers") or [{"query": serve["query"], "predictions": serve["predictions"]}]:
      words = ", ".join(f"{p['token_str']!r} {p['score']:.3f}" for p in answer["predictions"])
      lines.append(f"  {answer['query']!r} → {words}")
  lines += [
      "  time: " + ", ".join(f"{k} {v:.0f}s" for k, v in summary["stage_seconds"].items())
      + f"; total {summary['total_seconds']:.0f}s",
  ]
  if "total_cpu_seconds" in summary:
    lines.append(f"  CPU time: total {summary['total_cpu_seconds']:.0f}s (≈ wall time on an idle machine × cores used)")
  return "\n".join(lines)


def define_flags(fv: flags.FlagValues = flags.FLAGS) -> None:
  """Defines the binary's flags on `fv` (never at import time)."""
  flags.DEFINE_string("output_dir", "demo_out", "Where the corpus, vocabulary, data, model and plot go.",
                      flag_values=fv)
  flags.DEFINE_bool("quick", False, "Smaller, faster variant (used by the test suite).", flag_values=fv)
  flags.DEFINE_integer("train_steps", None, "Override the number of pretraining steps.", flag_values=fv)
  flags.DEFINE_integer("seed", 12345, "Seed of every stage.", flag_values=fv)
  flags.DEFINE_bool("curve", False, "Also fine-tune from every kept earlier pretraining checkpoint: downstream dev "
                    "accuracy against pretraining steps (a few minutes more).", flag_values=fv)


def main(argv, fv: flags.FlagValues = flags.FLAGS) -> None:
  del argv
  settings = DemoSettings.quick(fv.seed) if fv.quick else DemoSettings.full(fv.seed)
  if fv.train_steps:
    settings = dataclasses.replace(settings, train_steps=fv.train_steps)
  if fv.curve:
    settings = dataclasses.replace(settings, curve=True)
  run_demo(fv.output_dir, settings)


def console_main() -> None:
  """The `albert-demo` console script (pyproject.toml)."""
  cli.launch(define_flags, main)


if __name__ == "__main__":
  console_main()
