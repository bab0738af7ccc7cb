"""The downstream average of a study: each pretrained variant fine-tuned on a few small labelled tasks.

Tasks (`--downstream`, comma list; each dev accuracy counts once in the average):
- `order` — the demo's task, built from the study's own corpus split (no download): is a documentation sentence in
  its own word order or are its words shuffled (`data_prep.corpus_tasks.make_order_task`: train sentences from
  the training documents, dev sentences from the held-out ones; `text_classification` on its CSV files);
- `sst-2`, `mrpc` — GLUE folders under `--glue_dir` (SST-2/, MRPC/ with train.tsv and dev.tsv). Without
  `--glue_dir` they are skipped; with it, a requested task whose files are missing is refused before anything trains
  (`check_glue_files`: a mistyped folder skipped them silently, and the study averaged other tasks than asked). A task
  too small to score (fewer than `MIN_TRAIN` train or `MIN_DEV` dev rows: the MRPC sample beside this repository has
  6 pairs) is skipped, and the skip and its reason are recorded in results.json.

Every task is trained through the train binary's entry point with the same data, steps and seed for every variant,
warm-started from the variant's pretraining run (`task.init_checkpoint`); the task's records are made once per study
(one SentencePiece model for all variants), each variant with its own model config (its dropout included). One
random-init run per task shows what pretraining buys: the study's base model (all-shared, the model's E, no
dropout), the variants' model in table5 only (docs/ablations.md, "Fairness").
Each fine-tuning marker (`downstream.json`) records the key it was trained under (the data fingerprint, the task's
records and counts, a GLUE task's SHA-256 of train.tsv and dev.tsv, the model, the fine-tuning settings, the seed,
the init checkpoint): a rerun with other settings
empties the folder and retrains, so the random-init baseline (`<output_dir>/random_init/<task>`, a folder no run key
clears) never reports an earlier invocation's numbers.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from typing import Any, Dict, List, Optional

from data_prep import create_finetuning_data as cfd
from data_prep.corpus_tasks import make_order_task
from experiments import study
from experiments.study import fingerprint
from official_albert import file_io
from official_albert import model_directory
from official_albert import train
from official_albert.config import AlbertConfig

logger = logging.getLogger(__name__)

TASKS = ("order", "sst-2", "mrpc")
EXPERIMENTS = {"order": "text_classification", "sst-2": "glue/sst-2", "mrpc": "glue/mrpc"}
FOLDERS = {"sst-2": "SST-2", "mrpc": "MRPC"}
MIN_TRAIN, MIN_DEV = 100, 50


def _rows(path: str) -> int:
  with open(path, encoding="utf-8") as f:
    return max(0, sum(1 for line in f if line.strip()) - 1)


def _sha256(path: str) -> str:
  """The file's SHA-256: its content in the keys, since a dev file corrected in place (its labels flipped, the same
  rows) kept the old key, and a rerun returned the old scores."""
  digest = hashlib.sha256()
  with open(path, "rb") as f:
    for block in iter(lambda: f.read(1 << 20), b""):
      digest.update(block)
  return digest.hexdigest()


def check_glue_files(names: List[str], glue_dir: str) -> None:
  """Refuses a requested GLUE task whose files are missing under a given `--glue_dir` (without one it is skipped).

  Raises:
    FileNotFoundError: naming the expected path and the fix.
  """
  if not glue_dir:
    return
  for name in names:
    if name not in FOLDERS:
      continue
    for split in ("train", "dev"):
      path = os.path.join(glue_dir, FOLDERS[name], f"{split}.tsv")
      if os.path.exists(path):
        continue
      hint = (f" ({glue_dir} holds train.tsv itself: give its parent folder)"
              if os.path.exists(os.path.join(glue_dir, "train.tsv")) else "")
      folders = ", ".join(f"{folder}/" for folder in FOLDERS.values())
      raise FileNotFoundError(f"--downstream={name} with --glue_dir={glue_dir}: {path} is missing{hint}. Give "
                              f"--glue_dir the folder that holds the GLUE task folders ({folders} with train.tsv and "
                              f"dev.tsv), or leave {name} out of --downstream.")


def prepare_tasks(output_dir: str, names: List[str], glue_dir: str, spm_model: str, settings) -> Dict[str, Any]:
  """Builds each task's records once (`<output_dir>/data/downstream/<task>`); returns {task: {"records": {split:
  path}, "counts"} (a GLUE task's with "sha256": {split: digest of its .tsv}) or {"skipped": reason}}.

  Raises:
    ValueError: a task name is not one of `TASKS`.
    FileNotFoundError: `glue_dir` is given and lacks a requested GLUE task's files (`check_glue_files`).
  """
  tasks: Dict[str, Any] = {}
  for name in names:
    if name not in TASKS:
      raise ValueError(f"--downstream={name!r} is not one of {TASKS}.")
  check_glue_files(names, glue_dir)
  for name in names:
    work = os.path.join(output_dir, "data", "downstream", name)
    if name == "order":
      corpus_dir = os.path.join(output_dir, "data", "corpus")
      made = make_order_task(work, os.path.join(corpus_dir, "train.txt"), os.path.join(corpus_dir, "heldout.txt"),
                             settings.seed, settings.ft_max_train, settings.ft_max_dev)
      tasks[name] = {"records": made["files"], "counts": made["counts"], "spm_model_file": spm_model}
      continue
    input_dir = glue_dir
    folder = os.path.join(input_dir, FOLDERS[name]) if input_dir else ""
    files = {split: os.path.join(folder, f"{split}.tsv") for split in ("train", "dev")}
    if not folder or not all(os.path.exists(p) for p in files.values()):
      tasks[name] = {"skipped": f"no {FOLDERS[name]}/train.tsv and dev.tsv under --glue_dir={glue_dir!r}"}
      continue
    counts = {split: _rows(path) for split, path in files.items()}
    if counts["train"] < MIN_TRAIN or counts["dev"] < MIN_DEV:
      tasks[name] = {"skipped": f"{folder} has {counts['train']} train / {counts['dev']} dev rows: too few to score "
                                f"(at least {MIN_TRAIN} / {MIN_DEV})", "counts": counts}
      continue
    records = cfd.create_finetuning_data(EXPERIMENTS[name], os.path.join(work, "records"), spm_model,
                                         splits=("train", "dev"), input_dir=input_dir,
                                         max_seq_length=settings.ft_seq_length, overwrite=True)
    tasks[name] = {"records": {s: records[s]["record_path"] for s in ("train", "dev")}, "counts": counts,
                   "sha256": {split: _sha256(path) for split, path in files.items()}}
  return tasks


def finetune(model_dir: str, task: str, spec: Dict[str, Any], settings, seed: int, model: Dict[str, Any],
             init_checkpoint: Optional[str], data_fingerprint: str) -> Dict[str, Any]:
  """Fine-tunes `model` (from `init_checkpoint`, or random init when None) on `task`; returns its dev accuracy.

  Resumable: `<model_dir>/downstream.json` is written last with the run's key and reused on a rerun with the same
  key; a run killed mid-way resumes under the same key (`finetune_key.json`); a folder left by other settings
  (another vocabulary, model, steps, records) is emptied and retrained, since the trainer would otherwise resume its
  checkpoint."""
  marker = os.path.join(model_dir, "downstream.json")
  task_override = {"model": dict(model, preset=""), "init_checkpoint": init_checkpoint or "",
                   **({"spm_model_file": spec["spm_model_file"]} if "spm_model_file" in spec else {})}
  override = settings.finetune_override(task_override, spec["records"]["train"], spec["records"]["dev"], seed,
                                        settings.mixed_precision, validation_interval=settings.ft_train_steps)
  fields = {"task": task, "override": override, "counts": spec.get("counts"), "data": data_fingerprint}
  if "sha256" in spec:  # (only when there: the order task's key, from the corpus in `data`, stays what it was)
    fields["sha256"] = spec["sha256"]
  key = fingerprint(fields)
  if file_io.exists(marker):
    with file_io.open_file(marker, "r") as f:
      done = json.load(f)
    if done.get("key") == key:
      return done
    logger.warning("ablations: %s was fine-tuned with other settings (key %s, now %s): retraining it", model_dir,
                   done.get("key"), key)
  study.start_or_resume(model_dir, key, "finetune_key.json")
  result = train.run(EXPERIMENTS[task], "train_and_eval", model_dir, params_override=json.dumps(override))
  final = result["eval_history"][-1][1]
  out = {"task": task, "accuracy": float(final["eval_accuracy"]), "global_step": int(final["global_step"]),
         "init": init_checkpoint or "random", "key": key}
  file_io.atomic_write_json(marker, out)
  return out


def downstream_scores(run_dir: str, pretrained_dir: str, tasks: Dict[str, Any], settings, seed: int,
                      data_fingerprint: str) -> Dict[str, Any]:
  """{"tasks": {task: accuracy}, "average"} of the variant pretrained in `pretrained_dir` (None when no task ran)."""
  model = AlbertConfig.from_json_file(model_directory.path(pretrained_dir, model_directory.CONFIG_FILE)).to_dict()
  scores = {}
  for name, spec in tasks.items():
    if "records" in spec:
      done = finetune(os.path.join(run_dir, "downstream", name), name, spec, settings, seed, model, pretrained_dir,
                      data_fingerprint)
      scores[name] = done["accuracy"]
  return {"tasks": scores, "average": sum(scores.values()) / len(scores) if scores else None}


def random_init_scores(output_dir: str, tasks: Dict[str, Any], settings, model: Dict[str, Any], seed: int,
                       data_fingerprint: str) -> Dict[str, float]:
  """Each task fine-tuned from random weights (the same model, data, steps and seed): what pretraining buys."""
  return {name: finetune(os.path.join(output_dir, "random_init", name), name, spec, settings, seed, model,
                         None, data_fingerprint)["accuracy"] for name, spec in tasks.items() if "records" in spec}
