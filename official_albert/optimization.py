"""The public path of ALBERT's optimizers: `official_albert.optimization.LAMB` / `AdamW` (they live in
`official_albert.training.optimization`)."""

from official_albert.training.lr_schedule import AlbertLearningRateSchedule
from official_albert.training.optimization import AdamW
from official_albert.training.optimization import create_optimizer
from official_albert.training.optimization import DEFAULT_EXCLUDE_FROM_WEIGHT_DECAY
from official_albert.training.optimization import LAMB

__all__ = ["LAMB", "AdamW", "AlbertLearningRateSchedule", "create_optimizer", "DEFAULT_EXCLUDE_FROM_WEIGHT_DECAY"]
