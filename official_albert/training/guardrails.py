"""Guardrails of a training run against the upstream "I get SQuAD F1 16" and "accuracy stuck at 50%" reports.

- Fine-tuning from nothing: a fine-tuning run (any model but the pretrainer) without `task.init_checkpoint` starts
  from random weights; `warn_if_random_init` says so with a WARNING before the first step, and `eval_results.json`
  records `"init": "random"` (else the checkpoint path; `init_source`).
- Stuck at chance: `ChanceLevelMonitor` warns when the training loss stays at the chance level (`chance_losses`: the
  loss of a model that predicts the training labels' frequencies whatever its input, the entropy of those labels,
  ln K for balanced K-way labels) through the first 30% of the steps.
The trainer (`trainer.py`) and the evaluator (`evaluation.py`) call these; nothing here stops a run.
"""

from __future__ import annotations

import logging
import math
from typing import Dict, List, Optional, Tuple

import numpy as np

from official_albert.modeling import models
from official_albert.training.base_task import VALID_KEY

logger = logging.getLogger(__name__)

RANDOM_INIT = "random"  # the `"init"` of eval_results.json when task.init_checkpoint is empty
STUCK_WINDOW_FRACTION = 0.3
# 2% below chance already counts as learning. Why not more: a weakly but truly learning 2-way objective sits only a
# few percent below ln 2 (the demo's SOP at 0.59-0.60 accuracy logged 0.6625-0.6691, 3.5-4.4% below), while a stuck
# one stays within 1% (loop means over thousands of examples: 0.6925-0.7024 measured).
STUCK_TOLERANCE = 0.02
# Runs whose window (the first 30% of the steps) is shorter than this are not judged: a 1-4-step smoke run says
# nothing about learning, and its warning would only teach users to ignore the real one.
MIN_WINDOW_STEPS = 5
# Training examples read for the labels' frequencies (their entropy is the chance level of a classifier).
LABEL_SAMPLE = 4096


def init_source(params) -> str:
  """Where the run's weights started: `task.init_checkpoint`, or "random" when it is empty."""
  return getattr(params.task, "init_checkpoint", "") or RANDOM_INIT


def is_pretraining_model(model) -> bool:
  return isinstance(model, models.AlbertPretrainer)


def warn_if_random_init(params, model, task_name: str) -> bool:
  """Logs a WARNING when a fine-tuning model (anything but the pretrainer) starts without `task.init_checkpoint`.

  An empty `task.init_checkpoint` means random initialisation: the run trains, losses fall, but the results are
  those of an untrained ALBERT (upstream: "SQuAD F1 16", GLUE at the majority baseline). Returns whether it warned.
  """
  if is_pretraining_model(model) or init_source(params) != RANDOM_INIT:
    return False
  logger.warning(
      "task.init_checkpoint is empty: fine-tuning %s starts from RANDOM weights, not from a pretrained ALBERT. "
      "Expect untrained-model results (near the majority baseline; SQuAD F1 in the teens). Set "
      "task.init_checkpoint to a pretrained model directory or checkpoint prefix (for example the output of "
      "`python -m official_albert.convert_checkpoint`); eval_results.json records \"init\": \"random\".",
      task_name or type(model).__name__)
  return True


def chance_losses(task, model, train_data=None) -> Dict[str, float]:
  """{training-log key: its value for a model that has learnt nothing} — what `ChanceLevelMonitor` watches.

  A K-way softmax cross-entropy of a model that predicts the uniform distribution is ln K:
  - the pretrainer: `sentence_order_loss` = ln 2 (SOP, or NSP, is 2-way). The MLM loss has no such fixed level (a
    model that learnt only the unigram frequencies is already below ln V), so it is not watched;
  - a classifier with `num_labels` >= 2 (GLUE classification): `loss` = the entropy of the training labels when
    `train_data` is given (`label_entropy`: an input-blind model learns their frequencies, and on CoLA's 70/30
    labels sat at 0.61, below 98% of ln 2, unflagged), else ln(num_labels); nothing when every sampled label is the
    same (a loss of 0 is then no sign of learning). Regression (one output, STS-B) has none;
  - a multiple-choice model (RACE): `loss` = ln(num_choices);
  - anything else (the SQuAD span heads, whose uniform guess costs ln of the padded length, which changes with every
    batch under dynamic padding): none.
  A task may decide for itself by defining `chance_losses()` that returns this dict ({} = watch nothing).
  """
  custom = getattr(task, "chance_losses", None)
  if callable(custom):
    return dict(custom())
  if isinstance(model, models.AlbertPretrainer):
    return {"sentence_order_loss": math.log(2.0)}
  if isinstance(model, models.AlbertClassifier) and model.num_labels >= 2:
    level = label_entropy(task, train_data, model.num_labels) if train_data is not None else None
    if level == 0.0:
      return {}
    return {"loss": math.log(model.num_labels) if level is None else level}
  if isinstance(model, models.AlbertMultipleChoice) and model.num_choices >= 2:
    return {"loss": math.log(model.num_choices)}
  return {}


def label_entropy(task, train_data, num_labels: int) -> Optional[float]:
  """The loss of predicting the training labels' frequencies (from the first `LABEL_SAMPLE` examples of
  `train_data`, read in file order by the task's own pipeline): their entropy for single labels, the mean binary
  entropy over the labels of multi-hot ones (the per-label sigmoid loss). None when they cannot be read — a guardrail
  never stops a run."""
  try:
    config = train_data.replace(is_training=False, drop_remainder=False, global_batch_size=256, pad_to_multiple_of=0,
                                length_bucket_window=0)
    rows = []
    for element in task.build_inputs(config, role="train").take(-(-LABEL_SAMPLE // 256)):
      labels = element[1] if isinstance(element, tuple) else element
      ids = np.asarray(labels["label_ids"])
      if VALID_KEY in labels:
        ids = ids[np.asarray(labels[VALID_KEY]) > 0]
      rows.append(ids)
    labels = np.concatenate(rows) if rows else np.zeros([0])
  except Exception as error:  # noqa: BLE001 (whatever the task's pipeline raises: the training run reports it)
    logger.info("The chance level uses ln %d: the training labels could not be read (%s).", num_labels, error)
    return None
  if labels.ndim == 1 and labels.size and np.issubdtype(labels.dtype, np.integer) and labels.min() >= 0:
    p = np.bincount(labels.astype(np.int64), minlength=num_labels) / labels.size
    return float(-sum(q * math.log(q) for q in p if q > 0))
  if labels.ndim == 2 and labels.shape[1] == num_labels and labels.shape[0]:
    p = labels.astype(np.float64).mean(axis=0)
    return float(np.mean([-(q * math.log(q) + (1 - q) * math.log(1 - q)) if 0 < q < 1 else 0.0 for q in p]))
  return None


class ChanceLevelMonitor:
  """Says so in the log when training sits at the chance level through the first 30% of the steps.

  Definition. Let c be the chance level of a watched training-log key (`chance_losses`), T = `trainer.train_steps`
  and W = ceil(0.3·T). The run is *stuck at chance* on that key when every training loop that ends at or before
  step W — and at least the first loop — logged a mean value >= (1 - 0.02)·c (2% below chance already counts as
  learning, `STUCK_TOLERANCE`; above chance, e.g. a diverging loss, is stuck as well). It is decided once, at the
  first loop that ends at or after W, with one WARNING per stuck key. A run resumed at or after step W is not judged
  (it has no loops of the window); one resumed before W is judged on its own loops. A run with W below
  `MIN_WINDOW_STEPS` (T <= 13) is not judged at all.

  Args:
    chance: {log key: chance level}, from `chance_losses`.
    train_steps: T.
    start_step: the step this `train()` call starts from.
  """

  def __init__(self, chance: Dict[str, float], train_steps: int, start_step: int,
               fraction: float = STUCK_WINDOW_FRACTION, tolerance: float = STUCK_TOLERANCE):
    self.chance = dict(chance)
    self.tolerance = tolerance
    self.fraction = fraction
    self.window_end = max(1, math.ceil(fraction * train_steps))
    self.active = bool(self.chance) and self.judges(train_steps, start_step, fraction)
    self.values: Dict[str, List[Tuple[int, float]]] = {k: [] for k in self.chance}
    self.stuck_keys: List[str] = []

  @staticmethod
  def judges(train_steps: int, start_step: int, fraction: float = STUCK_WINDOW_FRACTION) -> bool:
    """Whether a run of `train_steps` from `start_step` is judged (before its chance levels are worked out)."""
    window_end = max(1, math.ceil(fraction * train_steps))
    return start_step < window_end and window_end >= MIN_WINDOW_STEPS

  def update(self, step: int, logs: Dict[str, float]) -> List[str]:
    """Records one loop's logs (ending at `step`); returns the warnings, once, when the window is complete."""
    if not self.active:
      return []
    if step <= self.window_end or not any(self.values.values()):
      for key in self.chance:
        if key in logs:
          self.values[key].append((step, float(logs[key])))
    if step < self.window_end:
      return []
    self.active = False
    messages = []
    for key, level in self.chance.items():
      seen = self.values[key]
      if seen and all(math.isfinite(v) and v >= (1.0 - self.tolerance) * level for _, v in seen):
        self.stuck_keys.append(key)
        messages.append(
            f"Training is stuck at chance level: {key} stayed at or above {(1.0 - self.tolerance) * level:.4f} "
            f"(chance level {level:.4f} = the loss of a guess that ignores the input, less "
            f"{100 * self.tolerance:.0f}%) in every "
            f"training loop of the first {100 * self.fraction:.0f}% of the steps (through step {step}: "
            f"{', '.join(f'{v:.4f} at step {s}' for s, v in seen[-5:])}). The model is not learning this "
            "objective: check trainer.learning_rate and the warmup, task.init_checkpoint, and that the labels belong "
            "to their inputs.")
    return messages
