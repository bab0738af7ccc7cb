"""The checkpoint books of one run in `model_dir`: periodic saves, resume with fallback, the best checkpoint.

- `ckpt-N` (`tf.train.CheckpointManager`, `max_to_keep`): the model, the optimizer (slots and step) and the dropout
  RNG states. Under MultiWorkerMirroredStrategy saving is collective: every worker calls `save`; the chief writes
  `model_dir`, the others a temporary directory they delete right after.
- `input_state/worker-<i>/ckpt-N`: worker i's own tf.data iterator position at step N (`runtime.input_resume=
  iterator`), written by that worker after the collective save. Each worker restores its own, never the chief's.
  `input_state/topology.json` records the split (workers, replicas, global batch) those states belong to, and a
  digest of the training file list they index (a changed list is refused: new shards would never be read) and of
  those files' bytes (a file changed in place is refused: the checkpoints were trained on its old contents).
- Resume: the newest `ckpt-N` that can be read and, in iterator mode, whose input state every worker has; a latest
  checkpoint that cannot be read (truncated file, missing shard) is skipped with a warning for the previous one. A
  run killed during its first save (an unreadable `ckpt-N` that no state file lists) starts from step 0, warned.
  The model and the optimizer must match the checkpoint; the dropout RNG states may be absent (a run that had no
  dropout, resumed with dropout on: they start fresh). The optimizer is read through the layout it was saved in, so a
  run resumes across mixed_float16 (a `LossScaleOptimizer` saves the optimizer under `optimizer/inner_optimizer`;
  switching to or from float16 starts a fresh loss scale). Eval and predict restore only the model and the step.
- Best: after each evaluation, `ckpt-N` is copied to `model.ckpt-best` when the tracked metric improved, and
  `best_checkpoint.json` says which step and value it holds (the reference's max-over-checkpoints protocol, reference
  §8 item 26; reported numbers should come from the final checkpoint) and what it was chosen on (`chosen_on`: the
  task and the evaluation input); an evaluation of other data never replaces it.

- Owner: the chief of a training run holds `model_dir`'s owner lock (`run_lock.hold_owner_lock`) from its resume
  (or first save) on, so a second trainer there (a relaunched job whose old copy still runs) fails fast naming the
  first; eval-only jobs take none. The best copy is made under `.best.lock` (trainer and eval job alike), into a
  temporary prefix that is then moved over `model.ckpt-best`: a reader never finds one step's data under another's
  index.

`model_dir` is also a native model directory: `official_albert.load_pretrained` reads the `model` root of `ckpt-N`.

Long because: the checkpoint books of one run (save, resume with its fallbacks, the best copy, the workers' input
positions) share the model_dir layout and the step they name; split, each half would re-derive the other's names.
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
from typing import Any, Callable, Dict, List, Mapping, Optional

import tensorflow as tf

from official_albert import checkpoint_files
from official_albert import file_io
from official_albert import model_directory as md
from official_albert import params_file
from official_albert.data.file_identity import same_evaluation
from official_albert.data.file_identity import TRAIN_CONTENT_KEY
from official_albert.data.file_identity import train_files_digest  # noqa: F401 (here until 2026-12-05)
from official_albert.data.file_identity import TRAIN_FILES_KEY
from official_albert.data.file_identity import train_input_identity  # noqa: F401 (the trainer's topology keys)
from official_albert.training import distribute
from official_albert.training import run_lock

logger = logging.getLogger(__name__)

CHECKPOINT_NAME = md.CHECKPOINT_NAME
BEST_CHECKPOINT_PREFIX = md.BEST_CHECKPOINT_PREFIX
BEST_CHECKPOINT_INFO = md.BEST_CHECKPOINT_INFO
INPUT_TOPOLOGY_FILE = md.INPUT_TOPOLOGY_FILE
SAVE_COUNTER = "save_counter/.ATTRIBUTES/VARIABLE_VALUE"
SUPERSEDED_FILE = "superseded.json"  # of input_state/: {"step": N}, positions before N resume no checkpoint
CHOSEN_ON_KEY = "chosen_on"  # of best_checkpoint.json: the task and evaluation input the best was chosen on
# `checkpoint_files.temporary_checkpoint_prefix(<model_dir>/model.ckpt-best)`'s files, with atomic_copy's temporaries
# of them: a best copy cut short by a kill.
_BEST_TEMPORARY = re.compile(r"^\.tmp-\d+-\d+-" + re.escape(BEST_CHECKPOINT_PREFIX) + r"\.(index|data-).*$")


def checkpoint_step(prefix: str) -> int:
  """N of `.../ckpt-N` (-1 when the prefix has no step)."""
  try:
    return int(prefix.rsplit("-", 1)[-1])
  except ValueError:
    return -1


def readable_files(prefix: str) -> bool:
  """Whether the files of checkpoint `prefix` can be opened (False for an index a kill cut short)."""
  try:
    tf.train.load_checkpoint(prefix)
  except Exception:  # pylint: disable=broad-except  (a truncated index raises DataLossError, OpError, ...)
    return False
  return True


def _read_run_json(path: str) -> Optional[Dict[str, Any]]:
  if not tf.io.gfile.exists(path):
    return None
  with tf.io.gfile.GFile(path, "r") as f:
    return json.load(f)


def read_best(model_dir: str) -> Optional[Dict[str, Any]]:
  """`best_checkpoint.json` of `model_dir`, or None before the first evaluation."""
  return _read_run_json(f"{model_dir}/{BEST_CHECKPOINT_INFO}")


def saved_names(prefix: str) -> List[str]:
  """The variable names a checkpoint holds (reads its index only)."""
  return [name for name, _ in tf.train.list_variables(prefix)]


def optimizer_view(optimizer, names: List[str]):
  """The object to restore the `optimizer` entry of a checkpoint whose variables are `names` into.

  A mixed_float16 run saves a `LossScaleOptimizer`: the optimizer's own state under `optimizer/inner_optimizer/`,
  the loss scale beside it; any other precision saves the optimizer at `optimizer/`. The weights and slots are the
  same float32 variables either way, so a run resumes across the precision switch (trainer._check_loss_scale
  recommends mixed_bfloat16 to a diverged float16 run) with the loss scale, when there is one now, starting afresh.
  """
  saved_wrapped = any(n.startswith("optimizer/inner_optimizer/") for n in names)
  inner = getattr(optimizer, "inner_optimizer", None)
  if saved_wrapped and inner is None:
    view = tf.Module(name="loss_scale_optimizer_view")
    view.inner_optimizer = optimizer
    return view
  if not saved_wrapped and inner is not None and any(n.startswith("optimizer/") for n in names):
    return inner
  return optimizer


def read_eval_results(model_dir: str) -> Optional[Dict[str, Any]]:
  """`eval_results.json` of `model_dir` (the last evaluation's results), or None when there is none."""
  return _read_run_json(f"{model_dir}/{md.EVAL_RESULTS_FILE}")


class CheckpointKeeper:
  """Saves, restores and ranks the checkpoints of one run.

  Args:
    model_dir: the run's directory (local or gs://).
    strategy: the run's strategy (decides who owns `model_dir` in a multi-worker job).
    items: the trackables of a checkpoint, e.g. {"model": ..., "optimizer": ..., "rng_states": ...}. A restore
      asserts that "model" and "optimizer" match the checkpoint; any other item may be absent from it.
    step_counter: the optimizer's step variable (names `ckpt-N`).
    max_to_keep: `ckpt-N` kept by the manager.
  """

  def __init__(self, model_dir: str, strategy: tf.distribute.Strategy, items: Mapping[str, Any],
               step_counter: tf.Variable, max_to_keep: int):
    self.model_dir = model_dir.rstrip("/")
    self.strategy = strategy
    self.step_counter = step_counter
    self.items = dict(items)
    self.checkpoint = tf.train.Checkpoint(**items)
    self._manager = tf.train.CheckpointManager(
        self.checkpoint, distribute.write_dirpath(self.model_dir, strategy), max_to_keep=max_to_keep,
        step_counter=step_counter, checkpoint_name=CHECKPOINT_NAME)

  @property
  def step(self) -> int:
    return int(self.step_counter.numpy())

  def latest(self) -> Optional[str]:
    return tf.train.latest_checkpoint(self.model_dir)

  def claim(self) -> None:
    """Makes this process the owner of model_dir when it is the chief (`run_lock.hold_owner_lock`; idempotent).

    Raises:
      run_lock.ModelDirBusyError: another live training run owns model_dir.
    """
    if distribute.is_chief(self.strategy):
      run_lock.hold_owner_lock(self.model_dir)

  def save(self) -> str:
    """Saves `ckpt-<step>` (collectively under MultiWorkerMirroredStrategy); returns its prefix."""
    self.claim()  # (again after a `run_lock.release_owner_lock`: the returned trainer of a finished run trains on)
    path = self._manager.save(checkpoint_number=self.step_counter)
    distribute.remove_temp_dirpath(self.model_dir, self.strategy)
    return path

  def restore(self, prefix: str, weights_only: bool = True) -> str:
    """Restores `prefix`; returns it.

    Args:
      prefix: a checkpoint prefix.
      weights_only: only the model must match (eval / predict; the optimizer, whatever its kind or precision, gives
        the step when it can); else the model and the optimizer must (a training resume). Other items (the dropout
        RNG states) are restored when the checkpoint has them: a dropout-free run has none, and its resume with
        dropout on starts them fresh instead of failing.
    """
    names = saved_names(prefix)
    strict = {"model": self.items["model"]}
    loose = {k: v for k, v in self.items.items() if k not in ("model", "optimizer")}
    if "optimizer" in self.items:
      (loose if weights_only else strict)["optimizer"] = optimizer_view(self.items["optimizer"], names)
    tf.train.Checkpoint(**strict).read(prefix).expect_partial().assert_existing_objects_matched()
    missing = [k for k in loose if not any(n.startswith(f"{k}/") for n in names)]
    if missing:
      logger.info("%s holds no %s (new in this run); they start fresh.", prefix, " / ".join(missing))
    tf.train.Checkpoint(**loose).read(prefix).expect_partial()
    if SAVE_COUNTER in names:  # the root's own count of saves, as a restore through `self.checkpoint` would set it
      self.checkpoint.save_counter.assign(tf.train.load_checkpoint(prefix).get_tensor(SAVE_COUNTER))
    return prefix

  def candidates(self) -> List[str]:
    """The model checkpoint prefixes of model_dir, newest first."""
    return self.listed_candidates() or sorted(
        (p[:-len(".index")] for p in tf.io.gfile.glob(f"{self.model_dir}/{CHECKPOINT_NAME}-*.index")),
        key=checkpoint_step, reverse=True)

  def listed_candidates(self) -> List[str]:
    """The prefixes model_dir's checkpoint state file lists (written once a save has finished), newest first."""
    state = tf.train.get_checkpoint_state(self.model_dir)
    candidates: List[str] = []
    if state is not None:  # (TF has joined a relative listed name to model_dir: joining again broke relative dirs)
      candidates = list(state.all_model_checkpoint_paths) or [state.model_checkpoint_path]
    return sorted(candidates, key=checkpoint_step, reverse=True)

  def restore_latest(self, accept: Optional[Callable[[str], bool]] = None,
                     weights_only: bool = False) -> Optional[str]:
    """Restores the newest readable checkpoint of model_dir (falling back on unreadable ones); returns its prefix.

    Args:
      accept: called with each candidate prefix, newest first; a candidate it rejects is skipped (the trainer uses
        it to skip steps whose input state some worker lacks).
      weights_only: as in `restore` (True for eval). False is a training resume: the chief first claims model_dir
        (`claim`), so a second trainer fails before it restores anything.
    """
    if not weights_only:
      self.claim()
    failures = []
    for prefix in self.candidates():
      if accept is not None and not accept(prefix):
        # Killed between the model's save and a worker's input save: the previous checkpoint is complete.
        logger.warning("Checkpoint %s lacks the input state of some worker; trying the previous one.", prefix)
        continue
      try:
        self.restore(prefix, weights_only=weights_only)
      except Exception as e:  # pylint: disable=broad-except  (truncated files raise IndexError, OpError, ...)
        message = str(e).splitlines()[0] if str(e) else type(e).__name__
        logger.warning("Checkpoint %s could not be restored (%s); trying the previous one.", prefix, message)
        failures.append(f"{prefix}: {message}")
        continue
      if failures:
        logger.warning("Resumed from %s after skipping %d unreadable checkpoint(s).", prefix, len(failures))
      return prefix
    if failures and not self.listed_candidates() and not any(map(readable_files, self.candidates())):
      # No save ever finished: the run was killed during its first one (TF fills `ckpt-N.index` in place, and the
      # state file that lists a finished save is written after it). Nothing was trained past step 0 to lose; a
      # readable checkpoint that does not fit (another model) is still an error.
      logger.warning("No checkpoint in %s finished saving (no checkpoint state file lists one; %s): starting from "
                     "step 0.", self.model_dir, "; ".join(failures))
      return None
    if failures:
      raise RuntimeError(f"No checkpoint in {self.model_dir} could be restored: {'; '.join(failures)}"
                         f"{params_file.experiment_hint(self.model_dir)}")
    return None

  # ------------------------------------------------------------------------------------------------ best
  @property
  def best_prefix(self) -> str:
    return f"{self.model_dir}/{BEST_CHECKPOINT_PREFIX}"

  def update_best(self, results: Mapping[str, Any], metric: str, higher_is_better: bool,
                  chosen_on: Optional[Mapping[str, str]] = None,
                  legacy_chosen_on: Optional[Mapping[str, str]] = None) -> bool:
    """Copies `ckpt-<step>` to `model.ckpt-best` when `results[metric]` beats the kept one; True when it did.

    Args:
      results, metric, higher_is_better: this evaluation's results and the metric (and direction) that ranks them.
      chosen_on: what these results were computed on (`CHOSEN_ON_KEY`: the task and the evaluation input), recorded
        in best_checkpoint.json. A kept best chosen on other data is left alone (logged): numbers from another dev
        set do not rank against it (`glue/mnli-mm --mode=eval` on a `glue/mnli` model_dir scored dev_mismatched
        against the dev_matched best and could replace the checkpoint MNLI-m.tsv was predicted from).
      legacy_chosen_on: what a best_checkpoint.json written before the record was chosen on, as far as model_dir
        tells (its params.yaml: the training run's task and validation input); None = unknown, compared as before
        (by the metric name only).

    The read-compare-copy-write runs under `<model_dir>/.best.lock` (a trainer and an eval job beside it, or two
    eval jobs, took turns: interleaved, they left one step's data files under another's index, or a
    best_checkpoint.json naming other weights than model.ckpt-best holds).
    """
    if metric not in results:
      raise KeyError(f"Best-checkpoint metric {metric!r} is not among the eval results {sorted(results)}.")
    with run_lock.exclusive(self.model_dir, run_lock.BEST_LOCK_FILE, "best-checkpoint update") as locked:
      return self._update_best(results, metric, higher_is_better, chosen_on, legacy_chosen_on, locked)

  def _update_best(self, results, metric, higher_is_better, chosen_on, legacy_chosen_on, locked: bool) -> bool:
    """`update_best` under its lock (`locked`: False where the folder takes none)."""
    step = self.step
    checkpoint = f"{self.model_dir}/{CHECKPOINT_NAME}-{step}"
    if not tf.io.gfile.exists(checkpoint + ".index"):
      logger.warning("No checkpoint for step %d; the best-checkpoint copy is not updated.", step)
      return False
    value = float(results[metric])
    best = read_best(self.model_dir)
    kept_on = None if best is None else best.get(CHOSEN_ON_KEY, legacy_chosen_on)
    if chosen_on is not None and kept_on is not None and not same_evaluation(kept_on, chosen_on):
      logger.warning("%s/%s was chosen on %s; this evaluation is on %s: its %s is not compared with it and the best "
                  "copy is kept (delete %s and %s.* to choose anew on this data).", self.model_dir,
                  BEST_CHECKPOINT_INFO, dict(kept_on), dict(chosen_on), metric, BEST_CHECKPOINT_INFO,
                  BEST_CHECKPOINT_PREFIX)
      return False
    if best is not None and not tf.io.gfile.exists(self.best_prefix + ".index"):
      logger.warning("%s/%s names step %s but %s.index is missing (a copy cut short, or removed): the next evaluation "
                     "makes the best copy anew.", self.model_dir, BEST_CHECKPOINT_INFO, best.get("global_step"),
                     self.best_prefix)
    elif best is not None and best.get("metric") == metric:
      if best.get("global_step") == step:
        return False
      kept = float(best["value"])
      # A non-finite value (STS-B's pearson of a collapsed head that predicts one score) is worse than any finite
      # one: compared as a number it could never be replaced (x > nan is False) once kept.
      if not math.isfinite(value):
        return False
      if math.isfinite(kept) and not (value > kept if higher_is_better else value < kept):
        return False
    if not math.isfinite(value):
      logger.warning("Best-checkpoint metric %s is %s at step %d; kept as model.ckpt-best until a step scores a "
                     "number.", metric, value, step)
    if not self._replace_best(checkpoint, locked):
      return False
    file_io.atomic_write_json(f"{self.model_dir}/{BEST_CHECKPOINT_INFO}",
                              {"metric": metric, "value": value, "global_step": step, "source": checkpoint,
                               "results": dict(results),
                               **({CHOSEN_ON_KEY: dict(chosen_on)} if chosen_on is not None else {})})
    logger.info("New best %s = %.4f at step %d → %s.", metric, value, step, BEST_CHECKPOINT_PREFIX)
    return True

  def _replace_best(self, checkpoint: str, locked: bool) -> bool:
    """Puts a copy of `checkpoint` at model.ckpt-best; False when `checkpoint` vanished while it was copied.

    The copy is made under a temporary prefix (`checkpoint_files.temporary_checkpoint_prefix`), then moved in: the old
    index is removed first, then the new data files and the new index are renamed into place, so a reader finds the
    old checkpoint, no checkpoint (predict then takes the newest ckpt-N) or the new one, never a mixed prefix. A copy
    that fails (a trainer's max_to_keep pruned `checkpoint` meanwhile) leaves model.ckpt-best as it was.
    """
    if locked:  # (only the lock holder may take another process's temporary for a killed copy)
      for stale in _prefix_files(self.model_dir, _BEST_TEMPORARY.match):
        logger.info("Removing %s, left by a best-checkpoint copy that was cut short.", stale)
        tf.io.gfile.remove(stale)
    temporary = checkpoint_files.temporary_checkpoint_prefix(self.best_prefix)
    try:
      checkpoint_files.copy_checkpoint(checkpoint, temporary)
    except Exception:  # pylint: disable=broad-except  (NotFoundError, FileNotFoundError, OSError, ...)
      for path in _prefix_files(self.model_dir, _of_prefix(temporary)):
        tf.io.gfile.remove(path)
      if tf.io.gfile.exists(checkpoint + ".index"):
        raise
      logger.warning("%s was removed while it was copied to %s (max_to_keep pruned it): the best copy is left as "
                     "it was.", checkpoint, BEST_CHECKPOINT_PREFIX)
      return False
    new_names = {os.path.basename(p)[len(os.path.basename(temporary)):]
                 for p in _prefix_files(self.model_dir, _of_prefix(temporary))}
    old = _prefix_files(self.model_dir, _of_prefix(self.best_prefix))
    for path in sorted(old, key=lambda p: not p.endswith(".index")):  # the index first, then data it will not reuse
      if path.endswith(".index") or path[len(self.best_prefix):] not in new_names:
        tf.io.gfile.remove(path)
    checkpoint_files.move_checkpoint(temporary, self.best_prefix)
    return True


def _of_prefix(prefix: str) -> Callable[[str], bool]:
  """A test of file names: whether one is a file of checkpoint `prefix` (its `.index` or a `.data-*`)."""
  name = os.path.basename(prefix)
  return lambda f: f.startswith((f"{name}.index", f"{name}.data-"))


def _prefix_files(directory: str, accept: Callable[[str], Any]) -> List[str]:
  """The files of `directory` whose names `accept` takes (listed, not globbed: no pattern characters in names)."""
  if not tf.io.gfile.isdir(directory):
    return []
  return [f"{directory}/{f}" for f in sorted(tf.io.gfile.listdir(directory)) if accept(f.rstrip("/"))]


def _saved_steps(directory: str) -> List[int]:
  """The steps of `directory`'s `ckpt-N` its state file lists (written atomically once a save has finished)."""
  state = tf.train.get_checkpoint_state(directory) if tf.io.gfile.isdir(directory) else None
  return [checkpoint_step(p) for p in (state.all_model_checkpoint_paths if state else [])]


# ------------------------------------------------------------------------------------------------ input state
class InputPositions:
  """One worker's book of its tf.data iterator positions (`runtime.input_resume=iterator`).

  `input_state/worker-<i>/ckpt-N` holds worker i's iterator at step N (the same N as the model's `ckpt-N`);
  `input_state/topology.json` the split (workers, replicas, global batch) they belong to, since a position only fits
  the split it was taken in; `input_state/superseded.json` the step before which a skip run's saves superseded them.

  Args:
    model_dir: the run's directory.
    worker_index: this worker's index (its own positions, never the chief's).
    iterator: the training iterator whose position is kept.
    max_to_keep: how many positions to keep (as the model's checkpoints).
    topology: this run's split ({"num_workers", "num_replicas", "global_batch_size"}), `TRAIN_FILES_KEY`: the
      `train_files_digest` of its training files, and `TRAIN_CONTENT_KEY`: their `content_digest` (None, or absent:
      none recorded or checked).
  """

  def __init__(self, model_dir: str, worker_index: int, iterator, max_to_keep: int, topology: Mapping[str, Any]):
    self.model_dir = model_dir
    self.worker_index = worker_index
    self.topology = {k: v for k, v in topology.items() if v is not None}  # no file list digest: not recorded
    self.max_to_keep = max_to_keep
    root = f"{model_dir.rstrip('/')}/{md.INPUT_STATE_DIR}"
    self.directory = f"{root}/worker-{worker_index}"
    self._topology_file = f"{root}/{INPUT_TOPOLOGY_FILE}"
    self.track(iterator)

  def track(self, iterator) -> None:
    """Keeps the positions of `iterator` from now on (the trainer's rebuilt one, after a resume by skipping)."""
    self.iterator = iterator
    self._manager = tf.train.CheckpointManager(tf.train.Checkpoint(train_iterator=iterator), self.directory,
                                               max_to_keep=self.max_to_keep, checkpoint_name=CHECKPOINT_NAME)

  def saved_topology(self) -> Optional[Dict[str, int]]:
    """The split recorded in `input_state/topology.json`, None when there is none."""
    return _read_run_json(self._topology_file)

  def current_steps(self) -> List[int]:
    """The steps of this worker's saved positions that can resume the model's checkpoints: none before the step a run
    without positions (`input_resume=skip`) marked at its saves (`save_input_positions`): that would roll it back."""
    return sorted(s for s in _saved_steps(self.directory) if s >= (superseded_step(self.model_dir) or 0))

  def check_topology(self) -> None:
    """Raises ValueError, naming both and the fix, when the positions were saved by a run split otherwise or over
    other training files (a position indexes the file list it was taken over: new shards would never be read, a
    deleted one fails unexplained). Positions saved before the file list was recorded are taken as they are; so are
    positions a skip run superseded (`save_input_positions`; it leaves topology.json as the iterator run wrote it)."""
    if not set(self.current_steps()) & set(_saved_steps(self.model_dir)):  # (none to restore: the run skips or refuses)
      return
    saved = self.saved_topology()
    digest = saved.pop(TRAIN_FILES_KEY, None) if saved else None
    content = saved.pop(TRAIN_CONTENT_KEY, None) if saved else None
    ours = {k: v for k, v in self.topology.items() if k not in (TRAIN_FILES_KEY, TRAIN_CONTENT_KEY)}
    if digest is not None and self.topology.get(TRAIN_FILES_KEY) not in (None, digest):
      raise ValueError(
          f"{self.model_dir}: the input positions in input_state/ were taken over another list of training files "
          f"than task.train_data.input_path gives now (sha256 of the sorted paths: {digest} then, "
          f"{self.topology[TRAIN_FILES_KEY]} now; a moved copy of the files counts as a change). An iterator "
          "position only fits its file list. Resume with runtime.input_resume=skip (the stream over the new files is "
          "rebuilt and the consumed global batches skipped), or restore the original files.")
    if content is not None and self.topology.get(TRAIN_CONTENT_KEY) not in (None, content):
      raise ValueError(
          f"{self.model_dir}: the training files changed since its checkpoints and input positions were saved "
          f"(task.train_data.input_path: the same names, other bytes): they were trained on the old contents. Train "
          "on the new ones in a new --model_dir; or, to continue this run on them, resume with "
          "runtime.input_resume=skip (the stream over the new contents is rebuilt and the consumed global batches "
          "skipped).")
    if saved is not None and saved != ours:
      raise ValueError(
          f"{self.model_dir}: the input positions in input_state/ were saved by a run split as {saved}, this run is "
          f"split as {ours}; an iterator position does not carry over to another split. Resume "
          "with runtime.input_resume=skip (the stream is rebuilt and the consumed global batches skipped; keep "
          "task.train_data.global_batch_size) or restore the original number of workers and replicas.")

  def exists(self, step: int) -> bool:
    """Whether this worker's position at `step` was saved, completely (its state file lists it: an index alone may be
    a save a kill cut short, "too short to be an sstable"), and resumes the checkpoint of `step` (`current_steps`)."""
    return step in self.current_steps() and tf.io.gfile.exists(f"{self.directory}/{CHECKPOINT_NAME}-{step}.index")

  def restore(self, step: int) -> None:
    """Puts the iterator where this worker was at `step`; a position tf.data cannot put into this run's pipeline (saved
    by another version of it, or under other input settings) raises ValueError naming runtime.input_resume=skip."""
    prefix = f"{self.directory}/{CHECKPOINT_NAME}-{step}"
    try:
      tf.train.Checkpoint(train_iterator=self.iterator).read(prefix).expect_partial().assert_existing_objects_matched()
    except tf.errors.InvalidArgumentError as e:  # ("Failed to restore dataset iterator ... is out of range")
      reason = re.sub(r"^\{\{function_node [^}]*\}\}\s*", "", e.message.splitlines()[0])[:300]
      raise ValueError(
          f"{prefix}: the saved input position does not fit this run's input pipeline: it was saved by another "
          f"version of official_albert or under other task.train_data settings (tf.data: {reason}). Resume with "
          f"runtime.input_resume=skip: the stream is rebuilt in this pipeline's data order and its first {step} "
          "global batches (the consumed ones) dropped, so the rest of the interrupted epoch may repeat or miss some "
          "examples of the saved run's order; or train into an empty --model_dir.") from e
    logger.info("Input position of worker %d restored from %s.", self.worker_index, prefix)

  def save(self, step: int, is_chief: bool) -> None:
    """Saves this worker's position at `step`; the chief also records the split (when it changed)."""
    self._manager.save(checkpoint_number=step)
    if is_chief and self.saved_topology() != self.topology:
      file_io.atomic_write_json(self._topology_file, self.topology)


def superseded_step(model_dir: str) -> Optional[int]:
  """The step from which a run that saves no positions superseded those in input_state/ (None: none did)."""
  return (_read_run_json(f"{model_dir.rstrip('/')}/{md.INPUT_STATE_DIR}/{SUPERSEDED_FILE}") or {}).get("step")


def save_input_positions(positions: Optional[InputPositions], model_dir: str, step: int, is_chief: bool) -> None:
  """After `ckpt-<step>`: saves this worker's position (iterator mode), or, with none (`input_resume=skip`), the chief
  marks `step` in input_state/ when positions were saved since the last mark: they no longer resume its checkpoints."""
  if positions is not None:
    positions.save(step, is_chief)
  elif is_chief:
    root = f"{model_dir.rstrip('/')}/{md.INPUT_STATE_DIR}"
    newest = max((s for d in tf.io.gfile.glob(f"{root}/worker-*") for s in _saved_steps(d)), default=-1)
    if newest >= (superseded_step(model_dir) or 0):  # (none saved since the mark: it stands)
      file_io.atomic_write_json(f"{root}/{SUPERSEDED_FILE}", {"step": step})
