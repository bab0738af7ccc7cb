"""SQuAD's training length in epochs (reference §5.2): the steps resolved at start-up from the run's data.

The reference derives SQuAD's steps at run time: `num_train_steps = int(#training questions / batch · epochs)`, warm-up
`WARMUP_PROPORTION` of them. The registered experiments (`experiments/finetuning.py`) fix the steps that gives for the
reference's training sets at batch 48 (SQuAD v1.1 87,599 questions: 3,649; v2.0 130,319: 5,429 / 8,144) and record
the epochs in `task.train_epochs`. A run on another file, or at another `task.train_data.global_batch_size` (16 to
fit memory), trained another number of epochs with those steps (0.67 epoch at batch 16; 35 on a 5,000-question
file). So at start-up, once the training records count their questions, `resolve_steps` replaces steps that are still
the recipe's (`recipe_steps`) with the run's own, as the reference computes them, and the warm-up derived from them
with `WARMUP_PROPORTION` of the new ones (a warning says so). Steps set to anything else are the steps trained (a
deliberate short run, `trainer.train_steps=2`), with a warning (`epochs_warning`) naming the steps that would train
the epochs; `task.train_epochs=0` turns both off (the recipe's steps are then trained as set).
"""

from __future__ import annotations

from typing import Dict, Optional, Sequence, Set, Tuple

WARMUP_PROPORTION = 0.1  # run_squad's --warmup_proportion
# The reference's training sets (train-v1.1.json, train-v2.0.json: questions), the recipes' batch and epochs.
REFERENCE_TRAIN_QUESTIONS = {False: 87599, True: 130319}
RECIPE_BATCH = 48
RECIPE_EPOCHS = (2.0, 3.0)


def epoch_steps(num_examples: int, batch_size: int, epochs: float) -> Tuple[int, int]:
  """(train steps, warm-up steps) as the reference computes them: int(questions / batch · epochs), int(0.1 · that)."""
  steps = int(num_examples / batch_size * epochs)
  return steps, int(steps * WARMUP_PROPORTION)


def count_questions(metas: Sequence[Tuple[str, dict]]) -> Optional[int]:
  """The training questions the records' `.meta.json` files count (`num_examples`), None when one has no count."""
  counts = [meta.get("num_examples") for _, meta in metas]
  if not counts or any(not isinstance(n, int) for n in counts):
    return None
  return sum(counts)


def epochs_warning(params, num_examples: int, source: str) -> Optional[str]:
  """The start-up warning when `params.trainer.train_steps` does not train `task.train_epochs` epochs of the
  `num_examples` questions of `source` at the training batch (None when it does, or when the check is off).

  Why: the recipe's steps are a count of the reference's data at batch 48, not of the run's."""
  task, steps = params.task, params.trainer.train_steps
  epochs, batch = task.train_epochs, task.train_data.global_batch_size
  if not epochs or not num_examples:
    return None
  wanted, warmup = epoch_steps(num_examples, batch, epochs)
  if steps == wanted:
    return None
  return (f"SQuAD: trainer.train_steps={steps} at task.train_data.global_batch_size={batch} trains "
          f"{steps * batch / num_examples:.2f} epochs of the {num_examples} training questions of {source}, but the "
          f"recipe is task.train_epochs={epochs:g} (reference: steps = int(questions / batch x epochs), warm-up "
          f"{WARMUP_PROPORTION:g} of them). To train {epochs:g} epochs set trainer.train_steps={wanted},"
          f"trainer.warmup_steps={warmup}; to keep these steps without this warning set task.train_epochs=0.")


def recipe_steps(task) -> Set[int]:
  """The `trainer.train_steps` a SQuAD recipe sets for the reference's training set of `task`'s version at batch 48
  (the registered epochs, and `task.train_epochs`): steps a run's config did not choose for its own data."""
  questions = REFERENCE_TRAIN_QUESTIONS[bool(task.version_2_with_negative)]
  return {epoch_steps(questions, RECIPE_BATCH, e)[0] for e in RECIPE_EPOCHS + (task.train_epochs,)}


def resolve_steps(params, num_examples: int, source: str) -> Tuple[Dict[str, int], Optional[str]]:
  """(the `trainer` fields to change, the start-up warning) for a run of `num_examples` training questions.

  Steps that are the recipe's (`recipe_steps`) become `task.train_epochs` epochs of the run's questions at its batch
  (at least 1), and a warm-up derived from them (the recipe's 10%, or `finetuning_rates`' rounding of it) 10% of the
  new ones; a warm-up set otherwise stays. Other steps are kept, with `epochs_warning`'s message. ({}, None) when the
  steps already train the epochs or the check is off. A run whose own steps equal a recipe's count (3,649 on v1.1)
  is resolved too: `task.train_epochs=0` keeps them.
  """
  task, trainer = params.task, params.trainer
  epochs, batch, steps = task.train_epochs, task.train_data.global_batch_size, trainer.train_steps
  if not epochs or not num_examples:
    return {}, None
  wanted, warmup = epoch_steps(num_examples, batch, epochs)
  wanted = max(wanted, 1)
  if steps == wanted:
    return {}, None
  if steps not in recipe_steps(task):
    return {}, epochs_warning(params, num_examples, source)
  changes = {"train_steps": wanted}
  if trainer.warmup_steps in (int(steps * WARMUP_PROPORTION), max(1, round(steps * WARMUP_PROPORTION))):
    changes["warmup_steps"] = warmup
  shown = changes.get("warmup_steps", trainer.warmup_steps)
  return changes, (
      f"SQuAD: the recipe's trainer.train_steps={steps} (its count for the reference's training set at batch "
      f"{RECIPE_BATCH}) at task.train_data.global_batch_size={batch} trains {steps * batch / num_examples:.2f} epochs "
      f"of the {num_examples} training questions of {source}; this run trains task.train_epochs={epochs:g} epochs "
      f"of them as the reference counts them (steps = int(questions / batch x epochs), warm-up "
      f"{WARMUP_PROPORTION:g} of them): trainer.train_steps={wanted},trainer.warmup_steps={shown}"
      f"{'' if 'warmup_steps' in changes else ' (as set)'}. Set trainer.train_steps to train other steps, or "
      f"task.train_epochs=0 to train the recipe's {steps}.")
