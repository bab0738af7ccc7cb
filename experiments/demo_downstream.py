"""The demo's downstream stages: a labelled task built from the corpus, fine-tuned from the pretrained model and from
random init (what pretraining buys), and export + serve.

Split from `experiments.demo` (which runs every stage); see its docstring for the whole flow.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any, Dict, List, Tuple

import numpy as np

from official_albert import file_io
from official_albert import model_directory
from official_albert import train
from official_albert.config import AlbertConfig

# `settings` below is the running demo's `experiments.demo.DemoSettings` (not imported: demo imports this module).


# ------------------------------------------------------------------------------------------ fine-tuning stage
def prose_lines(lines: List[str]) -> List[str]:
  """Unique prose sentences among corpus lines: 6-30 words, capitalised, ending with '.'."""
  seen, out = set(), []
  for line in lines:
    line = " ".join(line.split())
    words = line.split()
    if not 6 <= len(words) <= 30 or not line[0].isupper() or not line.endswith("."):
      continue
    if sum(c.isalpha() or c == " " for c in line) < 0.9 * len(line):
      continue  # Code, tables and signatures are not prose.
    if line not in seen:
      seen.add(line)
      out.append(line)
  return out


ORIGINAL, SHUFFLED = "original", "shuffled"


def _words(sentence: str) -> List[str]:
  """The words of a prose sentence, lower-cased, without its final full stop (which would mark the last word)."""
  return sentence.lower().rstrip(".").split()


def _shuffled(words: List[str], rng) -> List[str]:
  """A permutation of `words` that differs from their order (sentences of 6+ words always have one)."""
  while True:
    order = rng.permutation(len(words))
    if any(int(i) != j for j, i in enumerate(order)):
      return [words[i] for i in order]


def _split_sentences(path: str, rng, limit: int) -> List[str]:
  """Up to `limit` prose sentences of the corpus file at `path` (documents separated by blank lines), seeded."""
  with open(path, encoding="utf-8") as f:
    sentences = prose_lines(f.read().splitlines())
  keep = np.sort(rng.choice(len(sentences), min(limit, len(sentences)), replace=False))
  return [sentences[i] for i in keep]


def make_order_task(output_dir: str, settings, train_text: str, heldout_text: str) -> Dict[str, Any]:
  """A task word identity cannot solve: is a documentation sentence in its own word order, or are its words shuffled?

  Every sentence is in the data twice, once in order (label "original") and once with its words permuted (label
  "shuffled"), so the two classes hold the same words: a bag-of-words model, or anything that reads word identity
  alone, is at chance (0.5) by construction, and what tells them apart is the order of the words, which is what a
  masked-LM learns from raw text. Training sentences come from the pretraining corpus' training documents (up to
  `settings.ft_max_train // 2` of them: few labelled examples), dev sentences from its held-out documents, which
  neither pretraining nor fine-tuning saw. Sentences are lower-cased without their final full stop (else the stop,
  and the capital of the first word, would mark the order). Written as CSV (`text,label`) for text_classification,
  each sentence's two rows side by side.
  """
  rng = np.random.default_rng(settings.seed)
  data_dir = os.path.join(output_dir, "finetune", "data")
  counts, files = {}, {}
  for split, path, limit in (("train", train_text, settings.ft_max_train // 2),
                             ("dev", heldout_text, settings.ft_max_dev // 2)):
    sentences = _split_sentences(path, rng, limit)
    if len(sentences) < 20:
      raise ValueError(f"Too few prose sentences in {path} for the word-order task: {len(sentences)}.")
    lines = ["text,label"]
    for sentence in sentences:
      words = _words(sentence)
      for text, label in ((" ".join(words), ORIGINAL), (" ".join(_shuffled(words, rng)), SHUFFLED)):
        lines.append(f"\"{text.replace(chr(34), chr(34) * 2)}\",{label}")
    files[split] = os.path.join(data_dir, f"{split}.csv")
    file_io.atomic_write_text(files[split], "\n".join(lines) + "\n")
    counts[split] = {"examples": 2 * len(sentences), "sentences": len(sentences), "majority_accuracy": 0.5}
  return {"data_dir": data_dir, "files": files, "counts": counts, "labels": [ORIGINAL, SHUFFLED],
          "name": "word order of a documentation sentence (original vs shuffled words)"}


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
  loop = max(settings.ft_train_steps // 3, 1)
  data = {"global_batch_size": settings.ft_batch_size, "seq_length": settings.ft_seq_length, "seed": settings.seed}
  task = {"init_checkpoint": init_checkpoint, "classifier_dropout": 0.0,
          "train_data": dict(data, input_path=task_data["files"]["train"]),
          "validation_data": dict(data, input_path=task_data["files"]["dev"], global_batch_size=64)}
  if random_init_like:
    model = AlbertConfig.from_json_file(model_directory.path(random_init_like, model_directory.CONFIG_FILE))
    task.update(model=dict(model.to_dict(), preset=""),
                spm_model_file=model_directory.require_spm_model(random_init_like, "the random-init baseline"))
  override = {
      "task": task,
      "trainer": {"train_steps": settings.ft_train_steps, "steps_per_loop": loop, "checkpoint_interval": loop,
                  "validation_interval": loop, "summary_interval": loop, "validation_steps": -1,
                  "learning_rate": settings.ft_learning_rate, "warmup_steps": settings.ft_warmup_steps,
                  "eval_at_start": True, "max_to_keep": 1},
      "runtime": {"seed": settings.seed, "mixed_precision_dtype": mixed_precision},
  }
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
  task_data = make_order_task(output_dir, settings, train_text, heldout_text)
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
