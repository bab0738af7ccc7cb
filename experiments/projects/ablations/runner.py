"""One variant × seed of a study: pretrain, score, fine-tune — resumable.

Layout (the study kit's, `experiments.study.run_path`): `<output_dir>/runs/<variant>/seed<k>/` holds `model/` (the
pretraining run: checkpoints, params.yaml), `curve.jsonl` (one line per training loop: the loop's training metrics,
and the held-out evaluation when one ran at that step), `downstream/<task>/` and, written last and atomically,
`result.json`: the completion marker. A rerun returns a finished run's result.json without training; a run killed
mid-way resumes from its newest checkpoint (the trainer resumes by itself, data order included) and goes on.

Two keys, so that a rerun redoes only what changed. `run_key.json` holds what the pretraining run (`model/`) depends
on — the variant, the seed, the data fingerprint and every setting but the fine-tuning and scoring ones — and
`pretrain.json` marks that run finished. `result.json`'s `run_id` adds everything else (every setting, the downstream
tasks with their records and content digests): a rerun under another task list (`--downstream`, `--glue_dir`) or
other fine-tuning settings reuses the pretrained model, scores it again and fine-tunes only the tasks whose own key
(`downstream/<task>/downstream.json`) changed. A run folder pretrained under other settings is never deleted: the
study refuses, naming the fields that differ (a deletion here once threw away every finished variant of a study
whose rerun only dropped a downstream task).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
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
RUN_KEY_FILE = "run_key.json"
PRETRAIN_FILE = "pretrain.json"
TRAIN_KEYS = ("loss", "masked_lm_accuracy", "masked_lm_loss", "sentence_order_accuracy", "sentence_order_loss")
# Settings only the scoring after pretraining reads (`probes.score`): a change rescores, it does not pretrain again.
SCORING_SETTINGS = ("probe_examples",)


class CurveRecorder:
  """`on_loop_end` of the pretraining run: appends each loop's training metrics to curve.jsonl, with the held-out
  evaluation the trainer wrote at that step (eval_results.json), so the curve survives a kill and a resume.

  Its first call also writes the step-0 evaluation (`record_step0`): the trainer keeps that one in memory only, so a
  run killed after its first loop lost the curve's first point on resume.
  """

  def __init__(self, path: str, model_dir: str):
    self.path = path
    self.model_dir = model_dir
    self.step0_checked = False

  def __call__(self, step: int, logs: Dict[str, float]) -> None:
    if not self.step0_checked:
      self.step0_checked = True
      record_step0(self.path, self.model_dir)
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


def record_step0(path: str, model_dir: str, eval_history=()) -> None:
  """Appends the untrained model's held-out evaluation (step 0) to curve.jsonl when the file has none.

  The trainer evaluates step 0 into its return value (`eval_history`) and its TensorBoard events (`<model_dir>/eval`)
  but not into eval_results.json; from the in-memory copy alone, a run killed mid-way and resumed had no step 0 in
  its curve. Taken from `eval_history` when it holds step 0, else from the event files.
  """
  if any(e["step"] == 0 for e in read_curve(path)):
    return
  results = next((r for step, r in eval_history if step == 0), None)
  evaluation = ({k: float(v) for k, v in results.items() if k in TRAIN_KEYS} if results is not None
                else step0_from_events(model_dir))
  if not evaluation:
    return
  _drop_partial_last_line(path)
  with open(path, "a", encoding="utf-8") as f:
    f.write(json.dumps({"step": 0, "eval": evaluation}) + "\n")


def step0_from_events(model_dir: str) -> Dict[str, float]:
  """The step-0 scalars of `TRAIN_KEYS` in `<model_dir>/eval`'s TensorBoard event files ({} when none)."""
  folder = os.path.join(model_dir, "eval")
  found: Dict[str, float] = {}
  if not os.path.isdir(folder):
    return found
  import tensorflow as tf  # noqa: PLC0415 (the event files only; the binary loads TF at launch anyway)
  from tensorflow.core.util import event_pb2  # noqa: PLC0415
  for name in sorted(os.listdir(folder)):
    if "tfevents" not in name:
      continue
    try:
      for record in tf.data.TFRecordDataset(os.path.join(folder, name)).as_numpy_iterator():
        event = event_pb2.Event.FromString(record)
        for value in event.summary.value if event.step == 0 else ():
          if value.tag in TRAIN_KEYS:
            found[value.tag] = (float(tf.make_ndarray(value.tensor)) if value.HasField("tensor")
                                else float(value.simple_value))
    except tf.errors.DataLossError:  # a write cut short by a kill: the complete records before it were read
      continue
  return found


def pretraining_key(variant, seed: int, settings, data: Dict[str, Any]) -> Dict[str, Any]:
  """What the pretraining run (`model/`) depends on: `run_key.json`'s content.

  Every setting but the fine-tuning ones (`ft_*`) and `SCORING_SETTINGS`, so that a rerun under another task list or
  other fine-tuning settings keeps the pretrained model. As JSON holds it (tuples as lists), to compare field by
  field with the file.
  """
  training = {k: v for k, v in dataclasses.asdict(settings).items()
              if not k.startswith("ft_") and k not in SCORING_SETTINGS}
  key = json.loads(json.dumps({"variant": variant.describe(), "seed": seed, "training": training,
                               "data": data["fingerprint"]}, default=str))
  key["id"] = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]
  return key


def run_key(study: str, variant, seed: int, settings, data: Dict[str, Any], tasks: Dict[str, Any]) -> Dict[str, Any]:
  """Everything the run's numbers depend on (`result.json`'s `run_id`); a finished run with another key is redone —
  its scoring and fine-tuning, not its pretraining when `pretraining_key` is the same.

  The downstream part is the tasks that run (those with records) with their data, the files' SHA-256 included (a
  corrected dev file of the same row count is other data): a task skipped for lack of `--glue_dir` is not in it, so
  a rerun that adds `--glue_dir` redoes the runs finished without it rather than returning them without that task
  (and averaging other task sets than the new runs')."""
  # Every settings field (the data's too, already in its fingerprint): a list of names left ft_warmup_steps out, so
  # a finished run was returned as is under a new fine-tuning warmup.
  key = {"pretraining": pretraining_key(variant, seed, settings, data)["id"], "training": dataclasses.asdict(settings),
         "downstream": sorted((name, spec.get("counts"), spec["records"], spec.get("sha256"))
                              for name, spec in tasks.items() if "records" in spec)}
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


def key_differences(old: Dict[str, Any], key: Dict[str, Any]) -> List[str]:
  """The fields of `key` (a `pretraining_key`) that `old` (a run_key.json) holds otherwise, as "field: old -> new".

  Fields of `old` that `key` lacks are no difference: a run_key.json written before the pretraining key was split
  off holds the fine-tuning settings and the downstream tasks too, and its pretraining run stays valid.
  """
  found = [f"{name}: {old.get(name, '(absent)')!r} -> {key[name]!r}" for name in ("variant", "seed", "data")
           if old.get(name) != key[name]]
  training = old.get("training") or {}
  found += [f"training.{name}: {training.get(name, '(absent)')!r} -> {value!r}"
            for name, value in key["training"].items() if training.get(name) != value]
  return found


def check_run_folder(run_dir: str, key: Dict[str, Any]) -> bool:
  """True when `run_dir` was started under `key` (resume it), False when it holds no run yet.

  Raises:
    ValueError: the folder was pretrained under other settings, or holds a run without its run_key.json. Nothing is
      deleted: a pretraining run is hours of CPU, and a typo in a flag must not cost them.
  """
  key_path = os.path.join(run_dir, RUN_KEY_FILE)
  fix = (f"Its checkpoints and results are kept. To run these settings give another --output_dir; to redo this run "
         f"remove {run_dir} yourself; to reuse it rerun with the settings it was started with.")
  if not os.path.exists(key_path):
    if any(os.path.exists(os.path.join(run_dir, name)) for name in ("model", RESULT_FILE)):
      raise ValueError(f"{run_dir} holds a run but no {RUN_KEY_FILE}: which settings it was trained under is "
                       f"unknown. {fix}")
    return False
  with open(key_path, encoding="utf-8") as f:
    differences = key_differences(json.load(f), key)
  if differences:
    raise ValueError(f"{run_dir} was pretrained under other settings ({key_path}): "
                     f"{'; '.join(differences)}. {fix}")
  return True


def check_run_keys(output_dir: str, variants, seeds: int, settings, data: Dict[str, Any]) -> None:
  """Every run folder of the study against its pretraining key, before any training (`check_run_folder`), so a
  changed setting is refused at once rather than after the variants before the first mismatch have run."""
  for seed in range(1, seeds + 1):
    for variant in variants:
      check_run_folder(run_path(output_dir, variant.slug, seed), pretraining_key(variant, seed, settings, data))


def _start_or_resume(run_dir: str, key: Dict[str, Any]) -> None:
  """Resumes the run folder when it was started under `key` (a run_key.json of the earlier format is rewritten in
  this one), starts it when it holds no run; refuses otherwise (`check_run_folder`)."""
  key_path = os.path.join(run_dir, RUN_KEY_FILE)
  if check_run_folder(run_dir, key):
    logger.info("ablations: resuming %s", run_dir)
    with open(key_path, encoding="utf-8") as f:
      if json.load(f) == key:
        return
  file_io.atomic_write_json(key_path, key)


def _pretrain(run_dir: str, model_dir: str, override: Dict[str, Any], key: Dict[str, Any],
              train_steps: int) -> Dict[str, Any]:
  """{"global_step", "pretrain_seconds"} of the pretraining run: `pretrain.json`'s when it finished under `key`, else
  trains (or resumes) it and writes pretrain.json once it reached `train_steps`."""
  marker = os.path.join(run_dir, PRETRAIN_FILE)
  curve_path = os.path.join(run_dir, CURVE_FILE)
  if os.path.exists(marker):
    with open(marker, encoding="utf-8") as f:
      done = json.load(f)
    if done.get("key") == key["id"]:
      logger.info("ablations: %s is pretrained (%s): not retrained", model_dir, marker)
      record_step0(curve_path, model_dir)
      return done
  finished = _finished_before_markers(run_dir, key, train_steps)
  if finished is not None:
    file_io.atomic_write_json(marker, finished)
    record_step0(curve_path, model_dir)
    return finished
  start = time.time()
  summary = train.run("albert_tiny_pretrain", "train_and_eval", model_dir, params_override=json.dumps(override),
                      on_loop_end=CurveRecorder(curve_path, model_dir))
  record_step0(curve_path, model_dir, summary["eval_history"])
  done = {"key": key["id"], "global_step": int(summary["global_step"]), "pretrain_seconds": time.time() - start}
  if done["global_step"] >= train_steps:
    file_io.atomic_write_json(marker, done)
  return done


def _finished_before_markers(run_dir: str, key: Dict[str, Any], train_steps: int) -> Optional[Dict[str, Any]]:
  """pretrain.json's content for a run finished before that file existed: its result.json's step and timing, when
  its pretraining reached `train_steps` (its run_key.json matched: `check_run_folder`). Without this, the rerun called
  the trainer on the finished model and froze the timing of that no-op call (0 s) as the pretraining's."""
  path = os.path.join(run_dir, RESULT_FILE)
  try:
    with open(path, encoding="utf-8") as f:
      result = json.load(f)
  except (OSError, ValueError):
    return None
  if not isinstance(result, dict) or int(result.get("global_step", -1)) < train_steps:
    return None
  return {"key": key["id"], "global_step": int(result["global_step"]),
          "pretrain_seconds": float(result.get("pretrain_seconds", 0.0))}


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
  pretraining = pretraining_key(variant, seed, settings, data)
  _start_or_resume(run_dir, pretraining)
  model_dir = os.path.join(run_dir, "model")
  override = pretraining_override(variant, seed, settings, data)
  pretrained = _pretrain(run_dir, model_dir, override, pretraining, settings.train_steps)
  curve = read_curve(os.path.join(run_dir, CURVE_FILE))
  scores = probes.score(model_dir, data["heldout"], settings)
  start = time.time()
  scored = downstream.downstream_scores(run_dir, model_dir, tasks, settings, seed, data["fingerprint"])
  last_train = next((e["train"] for e in reversed(curve) if e.get("train")), {})
  model = override["task"]["model"]
  result = dict(variant.describe(), run_id=key["id"], variant=variant.name, seed=seed,
                embedding_size=model["embedding_size"], parameters=probes.parameter_count(model))
  result.update({k: scores[k] for k in ("masked_lm_accuracy", "masked_lm_accuracy_nsp_set", "nsp_accuracy",
                                         "sop_accuracy", "heldout_examples", "layers")})
  result.update(train_masked_lm_accuracy=last_train.get("masked_lm_accuracy"), downstream=scored["tasks"],
                downstream_average=scored["average"], curve=curve, global_step=pretrained["global_step"],
                pretrain_seconds=pretrained["pretrain_seconds"], downstream_seconds=time.time() - start,
                model_dir=model_dir)
  file_io.atomic_write_json(result_path, result)
  return result


def load_result(output_dir: str, variant, seed: int) -> Optional[Dict[str, Any]]:
  path = os.path.join(run_path(output_dir, variant.slug, seed), RESULT_FILE)
  if not os.path.exists(path):
    return None
  with open(path, encoding="utf-8") as f:
    return json.load(f)
