"""The demo's downstream stages: fine-tuning on a labelled task built from the corpus, and export + serve.

Split from `experiments.demo` (which runs every stage); see its docstring for the whole flow.
"""

from __future__ import annotations

import json
import os
from typing import Any, Dict, List, Tuple

from official_albert import file_io, model_directory

# `settings` below is the running demo's `experiments.demo.DemoSettings` (not imported: demo imports this module).


# ------------------------------------------------------------------------------------------ fine-tuning stage
def _prose_lines(lines: List[str]) -> List[str]:
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


# Two families of standard-library modules; the fine-tuning task tells their documentation sentences apart.
TOPIC_FAMILIES = (
    ("files", ("bz2", "filecmp", "fileinput", "fnmatch", "glob", "gzip", "lzma", "os", "os.path", "pathlib",
               "shutil", "stat", "tarfile", "tempfile", "zipfile", "zipimport")),
    ("networking", ("email", "email.charset", "email.contentmanager", "email.errors", "email.feedparser",
                    "email.generator", "email.header", "email.headerregistry", "email.message", "email.utils",
                    "ftplib", "http", "http.client", "http.cookies", "http.server", "imaplib", "ipaddress",
                    "mailbox", "poplib", "smtplib", "socket", "socketserver", "urllib.parse", "urllib.request",
                    "webbrowser", "wsgiref")),
)


def make_topic_task(output_dir: str, settings) -> Dict[str, Any]:
  """A real labelled task from the embedded corpus: which module family does a documentation sentence describe?

  Label 0 = files/OS modules, 1 = networking/email modules (`TOPIC_FAMILIES`). Sentences are the corpus' prose
  sentences of each family's documents (`data_prep.corpus.iter_documents`); every 4th document of a family goes to
  dev, so no dev sentence shares a document with a training sentence. The larger family is subsampled (seeded) to
  the smaller one's size per split. Writes `<output_dir>/finetune/data/SST-2/{train,dev}.tsv` (GLUE SST-2 layout:
  header `sentence<TAB>label`).
  """
  import numpy as np
  from data_prep import corpus
  rng = np.random.default_rng(settings.seed)
  per_split: Dict[str, List[List[str]]] = {"train": [], "dev": []}
  for label, (_, modules) in enumerate(TOPIC_FAMILIES):
    split_sentences: Dict[str, List[str]] = {"train": [], "dev": []}
    for i, document in enumerate(corpus.iter_documents(modules)):
      split_sentences["dev" if i % 4 == 3 else "train"].extend(_prose_lines(document))
    for split, sentences in split_sentences.items():
      per_split[split].append(sorted(set(sentences)))
  data_dir = os.path.join(output_dir, "finetune", "data")
  counts = {}
  for split, classes in per_split.items():
    size = min(len(c) for c in classes)
    if split == "train":
      size = min(size, settings.ft_max_train // 2)
    if size < 20:
      raise ValueError(f"Too few {split} sentences for the topic task: {[len(c) for c in classes]} per family.")
    rows = []
    for label, sentences in enumerate(classes):
      keep = np.sort(rng.choice(len(sentences), size, replace=False))
      rows += [f"{sentences[i]}\t{label}" for i in keep]
    rows = [rows[i] for i in rng.permutation(len(rows))]
    file_io.atomic_write_text(os.path.join(data_dir, "SST-2", f"{split}.tsv"),
                              "sentence\tlabel\n" + "\n".join(rows) + "\n")
    counts[split] = {"examples": len(rows), "per_class": size, "majority_accuracy": 0.5}
  return {"data_dir": data_dir, "counts": counts, "families": [name for name, _ in TOPIC_FAMILIES]}


def run_finetuning(output_dir: str, pretrained_dir: str, spm_model: str, task_data: Dict[str, Any],
                   settings, mixed_precision: str = "float32") -> Dict[str, Any]:
  """GLUE path: TSV → `create_finetuning_data` TFRecords → `glue/cola` through the train binary's entry point,
  warm-started from the pretrained demo model (`task.init_checkpoint`)."""
  from data_prep import create_finetuning_data as cfd
  from official_albert import train
  from official_albert.config import AlbertConfig
  records = cfd.create_finetuning_data(
      "glue/sst-2", os.path.join(output_dir, "finetune", "records"), spm_model, splits=("train", "dev"),
      input_dir=task_data["data_dir"], max_seq_length=settings.ft_seq_length, overwrite=True)
  model = AlbertConfig.from_json_file(model_directory.path(pretrained_dir, model_directory.CONFIG_FILE)).to_dict()
  model["preset"] = ""
  model_dir = os.path.join(output_dir, "finetune", "model")
  loop = max(settings.ft_train_steps // 3, 1)
  override = {
      "task": {
          "model": model, "init_checkpoint": pretrained_dir, "classifier_dropout": 0.0,
          "train_data": {"input_path": records["train"]["record_path"], "global_batch_size": settings.ft_batch_size,
                         "seq_length": settings.ft_seq_length, "seed": settings.seed},
          "validation_data": {"input_path": records["dev"]["record_path"], "global_batch_size": 64,
                              "seq_length": settings.ft_seq_length},
      },
      "trainer": {"train_steps": settings.ft_train_steps, "steps_per_loop": loop, "checkpoint_interval": loop,
                  "validation_interval": loop, "summary_interval": loop, "validation_steps": -1,
                  "learning_rate": settings.ft_learning_rate, "warmup_steps": settings.ft_warmup_steps,
                  "eval_at_start": True, "max_to_keep": 2},
      "runtime": {"seed": settings.seed, "mixed_precision_dtype": mixed_precision},
  }
  result = train.run("glue/sst-2", "train_and_eval", model_dir, params_override=json.dumps(override))
  evals = result["eval_history"]
  return {"model_dir": model_dir, "step0_eval": evals[0][1], "final_eval": evals[-1][1],
          "eval_history": evals, "best_checkpoint": result.get("best_checkpoint"),
          "train_records": records["train"]["num_records"], "dev_records": records["dev"]["num_records"]}


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
  import subprocess
  import sys
  from official_albert.serving import export
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
