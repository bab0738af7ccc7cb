"""The demo's downstream stages: a labelled task built from the corpus (`data_prep.corpus_tasks.make_order_task`),
fine-tuned from the pretrained model and from random init (what pretraining buys), and export + serve.

Split from `experiments.demo` (which runs every stage); see its docstring for the whole flow.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any, Dict, List, Tuple

from data_prep import corpus_tasks
from official_albert import model_directory
from official_albert import train
from official_albert.config import AlbertConfig

# `settings` below is the running demo's `experiments.demo.DemoSettings` (not imported: demo imports this module).


# ------------------------------------------------------------------------------------------ fine-tuning stage
def run_finetuning(output_dir: str, name: str, task_data: Dict[str, Any], settings, mixed_precision: str = "float32",
                   init_checkpoint: str = "", random_init_like: str = "") -> Dict[str, Any]:
  """`text_classification` on the task's CSV files through the train binary's entry point.

  Args:
    name: the run's folder under `<output_dir>/finetune/`.
    init_checkpoint: the pretrained model (a model directory or a checkpoint prefix); the model's shape, and its
      SentencePiece model, come from it.
    random_init_like: no init_checkpoint: the same model shape (this directory's config.json) from random weights,
      with its SentencePiece model (the baseline that shows what pretraining buys).
  """
  model_dir = os.path.join(output_dir, "finetune", name)
  task: Dict[str, Any] = {"init_checkpoint": init_checkpoint}
  if random_init_like:
    model = AlbertConfig.from_json_file(model_directory.path(random_init_like, model_directory.CONFIG_FILE))
    task.update(model=dict(model.to_dict(), preset=""),
                spm_model_file=model_directory.require_spm_model(random_init_like, "the random-init baseline"))
  override = settings.finetune_override(task, task_data["files"]["train"], task_data["files"]["dev"], settings.seed,
                                        mixed_precision, eval_at_start=True)
  result = train.run("text_classification", "train_and_eval", model_dir, params_override=json.dumps(override))
  evals = result["eval_history"]
  return {"model_dir": model_dir, "init": init_checkpoint or "random", "step0_eval": evals[0][1],
          "final_eval": evals[-1][1], "eval_history": evals}


def pretraining_checkpoints(model_dir: str) -> List[Tuple[int, str]]:
  """(step, prefix) of the pretraining run's kept checkpoints, oldest first."""
  import tensorflow as tf  # noqa: PLC0415 (TF-free module)
  state = tf.train.get_checkpoint_state(model_dir)
  prefixes = list(state.all_model_checkpoint_paths) if state else []
  return sorted((int(p.rsplit("-", 1)[1]), p) for p in prefixes)


def downstream_stage(output_dir: str, model_dir: str, train_text: str, heldout_text: str, settings,
                     mixed_precision: str = "float32", curve: bool = False) -> Dict[str, Any]:
  """The word-order task fine-tuned from the pretrained model and from random init (same data, steps and seed);
  with `curve`, also from every kept earlier checkpoint of the pretraining run (dev accuracy vs pretraining steps)."""
  task_data = corpus_tasks.make_order_task(output_dir, train_text, heldout_text, settings.seed, settings.ft_max_train,
                                           settings.ft_max_dev)
  pretrained = run_finetuning(output_dir, "pretrained", task_data, settings, mixed_precision, init_checkpoint=model_dir)
  random = run_finetuning(output_dir, "random_init", task_data, settings, mixed_precision, random_init_like=model_dir)
  out = {"task": task_data, "pretrained": pretrained, "random_init": random,
         "gain": pretrained["final_eval"]["eval_accuracy"] - random["final_eval"]["eval_accuracy"]}
  if curve:
    checkpoints = pretraining_checkpoints(model_dir)
    points = [(0, random["final_eval"]["eval_accuracy"])]
    for step, prefix in checkpoints[:-1]:
      run = run_finetuning(output_dir, f"from_step_{step}", task_data, settings, mixed_precision,
                           init_checkpoint=prefix)
      points.append((step, run["final_eval"]["eval_accuracy"]))
    points.append((checkpoints[-1][0] if checkpoints else -1, pretrained["final_eval"]["eval_accuracy"]))
    out["curve"] = points
  return out


def format_downstream(ft: Dict[str, Any]) -> List[str]:
  """The report lines of `downstream_stage`."""
  counts = ft["task"]["counts"]
  pre, rnd = ft["pretrained"]["final_eval"], ft["random_init"]["final_eval"]
  lines = [
      f"Fine-tuning (text_classification on CSV): {ft['task']['name']}",
      f"  {counts['train']['sentences']} train / {counts['dev']['sentences']} dev sentences, each in order and "
      "shuffled (dev from held-out documents); majority and word identity alone: 0.5",
      f"  dev accuracy after {pre['global_step']} steps: from the pretrained model {pre['eval_accuracy']:.4f}, from "
      f"random init {rnd['eval_accuracy']:.4f} (same data, steps and seed): pretraining "
      f"{'+' if ft['gain'] >= 0 else ''}{ft['gain']:.4f}",
  ]
  if "curve" in ft:
    lines.append("  dev accuracy vs pretraining steps: " + ", ".join(f"{s}: {a:.4f}" for s, a in ft["curve"]))
  return lines


# ------------------------------------------------------------------------------------------- export-and-serve
# Documentation sentences in the corpus' style (TensorFlow / NumPy docstrings) with one noun masked; none of them is
# in the corpus verbatim. The first one is the headline.
FILL_MASK_QUERIES = (
    "An integer or [MASK] of integers.",
    "Returns the [MASK] of the tensor.",
    "The [MASK] of the returned array is the same as the input.",
    "This function returns a [MASK] of the input tensor.",
    "Create a new [MASK] with the given name.",
    "Returns the number of [MASK] in the array.",
)
FILL_MASK_QUERY = FILL_MASK_QUERIES[0]


def export_and_serve(output_dir: str, model_dir: str, settings,
                     queries: Tuple[str, ...] = FILL_MASK_QUERIES, top_k: int = 5) -> Dict[str, Any]:
  """Exports the pretrained model as a text-in SavedModel and answers fill-mask queries in a NEW process."""

  from official_albert.serving import export  # noqa: PLC0415 (TF-free module)
  export_dir = os.path.join(output_dir, "saved_model")
  export.export_from_model_dir(model_dir, export_dir, head="pretrainer", seq_length=settings.seq_length,
                               overwrite=True)
  command = [sys.executable, "-m", "official_albert.fill_mask", f"--saved_model_dir={export_dir}",
             f"--top_k={top_k}"] + [f"--text={query}" for query in queries]
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL=os.environ.get("TF_CPP_MIN_LOG_LEVEL", "2"))
  proc = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
  if proc.returncode != 0:
    raise RuntimeError(f"fill_mask on {export_dir} failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
  answers: List[Dict[str, Any]] = []
  for line in proc.stdout.splitlines():  # "# <query>" then one JSON object per prediction
    if line.startswith("# "):
      answers.append({"query": line[2:], "predictions": []})
    elif line.startswith("{") and answers:
      answers[-1]["predictions"].append(json.loads(line))
  if [a["query"] for a in answers] != list(queries) or not all(a["predictions"] for a in answers):
    raise RuntimeError(f"fill_mask did not answer every query:\n{proc.stdout[-2000:]}")
  return {"export_dir": export_dir, "query": answers[0]["query"], "predictions": answers[0]["predictions"],
          "answers": answers}
