"""SQuAD's training length in epochs (reference §5.2): a start-up check of the recipe's steps against the data.

The reference derives SQuAD's steps at run time: `num_train_steps = int(#training questions / batch · epochs)`, warm-up
`WARMUP_PROPORTION` of them. The registered experiments (`experiments/finetuning.py`) fix the steps that gives for the
reference's training sets at batch 48 (SQuAD v1.1 87,599 questions: 3,649; v2.0 130,319: 5,429 / 8,144) and record
the epochs in `task.train_epochs`. A run on another file, or at another `task.train_data.global_batch_size` (16 to
fit memory), would train another number of epochs without a word (0.67 epoch at batch 16; 35 on a 5,000-question
file): `epochs_warning` says so at start-up, with the `trainer.train_steps` / `trainer.warmup_steps` that train the
recipe's epochs. The steps stay the ones set, so a deliberate short run (`trainer.train_steps=2`) is honoured;
`task.train_epochs=0` turns the check off.
"""

from __future__ import annotations

from typing import Optional, Sequence, Tuple

WARMUP_PROPORTION = 0.1  # run_squad's --warmup_proportion


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
