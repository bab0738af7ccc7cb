"""Fine-tuning rates that fit the model being fine-tuned (issue 44, item 1).

The fine-tuning experiments' recipe (`experiments/finetuning.py`: AdamW 2e-5, 100 warm-up steps of 1,000) is the
reference's for albert-base and larger. A small model fine-tuned at 2e-5 learns next to nothing in a short run (a
128-wide model pretrained with the README's recipe stays at chance on a 3-class CSV after 150 steps; the demo's 1e-4
with a short warm-up reaches its accuracy). An experiment whose trainer says `rates_by_model_size` therefore takes,
when the run's config files and overrides set no `trainer.learning_rate` (resp. `trainer.warmup_steps`):

- the learning rate of `RATE_BY_HIDDEN_SIZE` for the model's hidden size (the recipe's own from base width up);
- a warm-up of 10% of `trainer.train_steps` (the recipe's 100 of 1,000, kept in proportion for any run length).

The paper's per-task recipes (GLUE, SQuAD, RACE: `trainer.paper_recipe`) were tuned for the released sizes: a model
of one of those shapes (`config.paper_size`: albert-base, large, xlarge, xxlarge) keeps its recipe exactly; any other
model — one's own small one — gets the rates above, as the text experiments do, where the run sets none.

The choice is logged at the run's start with the reason and the keys that override it, and params.yaml records it.
"""

from __future__ import annotations

import logging
from typing import Sequence

from official_albert.config import paper_size
from official_albert.training.experiment_config import ExperimentConfig
from official_albert.training.hyperparams import OverrideSource
from official_albert.training.hyperparams import parse_overrides

logger = logging.getLogger(__name__)

# (widest hidden_size, learning rate): the first row whose width the model does not exceed; wider models keep the
# experiment's rate (2e-5: the reference's fine-tuning range for albert-base and up).
RATE_BY_HIDDEN_SIZE = ((256, 1e-4), (512, 5e-5))
WARMUP_FRACTION = 0.1


def explicit_trainer_keys(sources: Sequence[OverrideSource]) -> set:
  """The `trainer.*` keys the config files and overrides set."""
  keys = set()
  for source in sources:
    trainer = parse_overrides(source).get("trainer", {})
    keys.update(trainer if isinstance(trainer, dict) else ())
  return keys


def fit_rates(params: ExperimentConfig, sources: Sequence[OverrideSource]) -> ExperimentConfig:
  """`params` with the learning rate and warm-up chosen from the model's size where the sources set none."""
  model = getattr(params.task, "model", None)
  if not params.trainer.rates_by_model_size or model is None:
    return params
  trainer = params.trainer
  size = paper_size(model) if trainer.paper_recipe else None
  if size is not None:
    logger.info("Fine-tuning rates: the paper's recipe for albert-%s (learning_rate %g, warmup_steps %d).", size,
                trainer.learning_rate, trainer.warmup_steps)
    return params
  explicit = explicit_trainer_keys(sources)
  chosen = {}
  if "learning_rate" not in explicit:
    rate = next((r for width, r in RATE_BY_HIDDEN_SIZE if model.hidden_size <= width), trainer.learning_rate)
    if rate != trainer.learning_rate:
      chosen["learning_rate"] = rate
  if "warmup_steps" not in explicit:
    warmup = max(1, round(WARMUP_FRACTION * trainer.train_steps))
    if warmup != trainer.warmup_steps:
      chosen["warmup_steps"] = warmup
  params = params.override({"trainer": chosen}) if chosen else params
  if {"learning_rate", "warmup_steps"} - explicit:
    why = ("; the experiment's own rates are the paper's recipe for albert-base and larger, and this model is none of "
           "the paper's sizes" if trainer.paper_recipe else "")
    logger.info("Fine-tuning rates for hidden_size %d: learning_rate %g%s, warmup_steps %d%s (chosen by the model's "
                "size and the run's %d steps where not set%s; set trainer.learning_rate / trainer.warmup_steps to "
                "choose).", model.hidden_size, params.trainer.learning_rate,
                " (set)" if "learning_rate" in explicit else "", params.trainer.warmup_steps,
                " (set)" if "warmup_steps" in explicit else "", params.trainer.train_steps, why)
  return params
