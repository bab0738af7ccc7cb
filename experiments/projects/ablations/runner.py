"""One variant × seed of a study: pretrain, score, fine-tune — resumable.

Layout (the study kit's, `experiments.study.run_path`): `<output_dir>/runs/<variant>/seed<k>/` holds `model/` (the
pretraining run: checkpoints, params.yaml), `curve.jsonl` (one line per training loop: the loop's training metrics,
and the held-out evaluation when one ran at that step), `downstream/<task>/` and, written last and atomically,
`result.json`: the completion marker. A rerun returns a finished run's result.json without training; a run killed
mid-way resumes from its newest checkpoint (the trainer resumes by itself, data order included) and goes on.
`run_key.json` holds what the run was started with: a run folder left by other settings is started afresh rather
than resumed.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
import shutil
import time
from typing import Any, Dict, List, Optional

from experiments.projects.ablations import downstream
from experiments.projects.ablations import probes
from experiments.study import run_path
from official_albert import file_io
from official_albert import model_directory as md
from official_albert import train

logger = logging.getLogger(__name__)

RESULT_FILE = "result.json"
CURVE_FILE = "curve.jsonl"
TRAIN_KEYS = ("loss", "masked_lm_accuracy", "masked_lm_loss", "sentence_order_accuracy", "sentence_order_loss")


class CurveRecorder:
  """`on_loop_end` of the pretraining run: appends each loop's training metrics to curve.jsonl, with the held-out
  evaluation the trainer wrote at that step (eval_results.json), so the curve survives a kill and a resume."""

  def __init__(self, path: str, model_dir: str):
    self.path = path
    self.model_dir = model_dir

  def __call__(self, step: int, logs: Dict[str, float]) -> None:
    entry: Dict[str, Any] = {"step": int(step), "train": {k: float(logs[k]) for k in TRAIN_KEYS if k in logs}}
    evaluation = md.path(self.model_dir, md.EVAL_RESULTS_FILE)
    if os.path.exists(evaluation):
      with open(evaluation, encoding="utf-8") as f:
        results = json.load(f)
      if int(results.get("global_step", -1)) == int(step):
        entry["eval"] = {k: float(v) for k, v in results.items() if k in TRAIN_KEYS}
    _drop_partial_last_line(self.path)
    with open(self.path, "a", encoding="utf-8") as f:
      f.write(json.dumps(entry) + "\n")


def _drop_partial_last_line(path: str) -> None:
  """Cuts curve.jsonl back to its last whole line when a killed run's append stopped mid-line (no final newline;
  an entry missing only its newline gets it).

  Appended to as it was, the resumed run's first entry joined the partial one on one line, which `read_curve` then
  refused on every rerun of that seed. The partial entry is lost either way (its step's point is missing from the
  curve unless the resumed run replays that step).
  """
  if not os.path.exists(path) or not os.path.getsize(path):
    return
  with open(path, "rb+") as f:
    f.seek(-1, os.SEEK_END)
    if f.read(1) == b"\n":
      return
    f.seek(0)
    data = f.read()
    keep = data.rfind(b"\n") + 1
    if _curve_entry(data[keep:].decode("utf-8", "replace")) is not None:  # whole but for its newline
      f.seek(0, os.SEEK_END)
      f.write(b"\n")
      return
    logger.warning("%s: line %d was cut short (a killed run's partial write: %r); dropped it.", path,
                   data.count(b"\n") + 1, data[keep:keep + 80])
    f.truncate(keep)


def _curve_entry(line: str) -> Optional[Dict[str, Any]]:
  """One curve.jsonl line's entry: a JSON object with an integer "step"; None for anything else."""
  try:
    entry = json.loads(line)
  except ValueError:
    return None
  ok = isinstance(entry, dict) and isinstance(entry.get("step"), int) and not isinstance(entry["step"], bool)
  return entry if ok else None


def read_curve(path: str) -> List[Dict[str, Any]]:
  """curve.jsonl, one entry per step (a step recorded twice — replayed after a resume — keeps its last entry).

  An unreadable last line is a write cut short by a kill or a full disk: skipped with a warning (that step's point is
  lost; the next append cuts the line off, `_drop_partial_last_line`). An unreadable line before it is no partial
  write: refused, naming the file and line.

  Raises:
    ValueError: a line other than the last is no JSON object with an integer "step".
  """
  if not os.path.exists(path):
    return []
  with open(path, encoding="utf-8", errors="replace") as f:
    lines = [(number, line) for number, line in enumerate(f, 1) if line.strip()]
  by_step: Dict[int, Dict[str, Any]] = {}
  for index, (number, line) in enumerate(lines):
    entry = _curve_entry(line)
    if entry is None and index == len(lines) - 1:
      logger.warning("%s:%d: the last line is no whole entry (a write cut short by a kill or a full disk): "
                     "skipped (that step's point is missing from the curve).", path, number)
      continue
    if entry is None:
      raise ValueError(f"{path}:{number}: not a curve entry (a JSON object with an integer \"step\"): "
                       f"{line.strip()[:80]!r}. The file is damaged; delete the line (that step is then missing "
                       "from the curve) or the run folder (the run is redone).")
    by_step[entry["step"]] = dict(by_step.get(entry["step"], {}), **entry)
  return [by_step[s] for s in sorted(by_step)]


def run_key(study: str, variant, seed: int, settings, data: Dict[str, Any], tasks: Dict[str, Any]) -> Dict[str, Any]:
  """Everything the run's numbers depend on; a finished run with another key is redone.

  The downstream part is the tasks that run (those with records) with their data: a task skipped for lack of
  `--glue_dir` is not in it, so a rerun that adds `--glue_dir` redoes the runs finished without it rather than
  returning them without that task (and averaging other task sets than the new runs')."""
  # Every settings field (the data's too, already in its fingerprint): a list of names left ft_warmup_steps out, so
  # a finished run was returned as is under a new fine-tuning warmup.
  training = dataclasses.asdict(settings)
  key = {"variant": variant.describe(), "seed": seed, "training": training, "data": data["fingerprint"],
         "downstream": sorted((name, spec.get("counts"), spec["records"]) for name, spec in tasks.items()
                              if "records" in spec)}
  key["id"] = hashlib.sha256(json.dumps(key, sort_keys=True, default=str).encode()).hexdigest()[:16]
  return key


def pretraining_override(variant, seed: int, settings, data: Dict[str, Any]) -> Dict[str, Any]:
  """`--params_override` of the variant's pretraining run (`albert_tiny_pretrain` underneath)."""
  kind = "nsp" if variant.objective == "nsp" else "sop"
  interval = max(settings.train_steps // settings.eval_points, 1)
  shape = {"global_batch_size": settings.batch_size, "seq_length": settings.seq_length,
           "max_predictions_per_seq": settings.max_predictions_per_seq}
  model = variant.model_overrides(settings.model)
  model.update(vocab_size=data["vocab_size"], max_position_embeddings=settings.seq_length)
  return {
      "task": {"model": model, "sentence_loss_weight": 0.0 if variant.objective == "none" else 1.0,
               "train_data": dict(shape, input_path=data["train"][kind]["pattern"], seed=seed),
               "validation_data": dict(shape, input_path=data["heldout"][kind]["pattern"])},
      "trainer": {"train_steps": settings.train_steps, "steps_per_loop": settings.steps_per_loop,
                  "checkpoint_interval": interval, "validation_interval": interval,
                  "summary_interval": settings.steps_per_loop, "validation_steps": -1,
                  "learning_rate": settings.learning_rate, "warmup_steps": settings.warmup_steps,
                  "eval_at_start": True, "max_to_keep": 1},
      "runtime": {"seed": seed, "mixed_precision_dtype": settings.mixed_precision},
  }


def _start_or_resume(run_dir: str, key: Dict[str, Any]) -> None:
  """Keeps the run folder when it was started with `key` (resume), else empties it."""
  key_path = os.path.join(run_dir, "run_key.json")
  if os.path.exists(key_path):
    with open(key_path, encoding="utf-8") as f:
      if json.load(f).get("id") == key["id"]:
        logger.info("ablations: resuming %s", run_dir)
        return
    logger.warning("ablations: %s was started with other settings: starting it afresh", run_dir)
  if os.path.isdir(run_dir):
    shutil.rmtree(run_dir)
  file_io.atomic_write_json(key_path, key)


def run_variant(output_dir: str, study: str, variant, seed: int, settings, data: Dict[str, Any],
                tasks: Dict[str, Any]) -> Dict[str, Any]:
  """Pretrains, scores and fine-tunes one variant × seed (or returns its finished result)."""
  run_dir = run_path(output_dir, variant.slug, seed)
  key = run_key(study, variant, seed, settings, data, tasks)
  result_path = os.path.join(run_dir, RESULT_FILE)
  if os.path.exists(result_path):
    with open(result_path, encoding="utf-8") as f:
      result = json.load(f)
    if result.get("run_id") == key["id"]:
      logger.info("ablations: %s seed %d is done (%s): not retrained", variant.name, seed, result_path)
      return result
  _start_or_resume(run_dir, key)
  model_dir = os.path.join(run_dir, "model")
  start = time.time()
  summary = train.run("albert_tiny_pretrain", "train_and_eval", model_dir,
                      params_override=json.dumps(pretraining_override(variant, seed, settings, data)),
                      on_loop_end=CurveRecorder(os.path.join(run_dir, CURVE_FILE), model_dir))
  pretrain_seconds = time.time() - start
  curve = read_curve(os.path.join(run_dir, CURVE_FILE))
  for step, results in summary["eval_history"]:
    if step == 0 and not any(e["step"] == 0 for e in curve):
      curve.insert(0, {"step": 0, "eval": {k: float(v) for k, v in results.items() if k in TRAIN_KEYS}})
  scores = probes.score(model_dir, data["heldout"], settings)
  start = time.time()
  scored = downstream.downstream_scores(run_dir, model_dir, tasks, settings, seed, data["fingerprint"])
  last_train = next((e["train"] for e in reversed(curve) if e.get("train")), {})
  model = pretraining_override(variant, seed, settings, data)["task"]["model"]
  result = dict(variant.describe(), run_id=key["id"], variant=variant.name, seed=seed,
                embedding_size=model["embedding_size"], parameters=probes.parameter_count(model))
  result.update({k: scores[k] for k in ("masked_lm_accuracy", "masked_lm_accuracy_nsp_set", "nsp_accuracy",
                                         "sop_accuracy", "heldout_examples", "layers")})
  result.update(train_masked_lm_accuracy=last_train.get("masked_lm_accuracy"), downstream=scored["tasks"],
                downstream_average=scored["average"], curve=curve, global_step=int(summary["global_step"]),
                pretrain_seconds=pretrain_seconds, downstream_seconds=time.time() - start, model_dir=model_dir)
  file_io.atomic_write_json(result_path, result)
  return result


def load_result(output_dir: str, variant, seed: int) -> Optional[Dict[str, Any]]:
  path = os.path.join(run_path(output_dir, variant.slug, seed), RESULT_FILE)
  if not os.path.exists(path):
    return None
  with open(path, encoding="utf-8") as f:
    return json.load(f)
