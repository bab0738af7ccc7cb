"""The experiment registry: name → factory of a default `ExperimentConfig`.

Experiment modules register factories with `@register_experiment("name")`; `get_experiment(name)` imports the
known experiment modules on first use and raises on unknown names with the list of known ones.
"""

from __future__ import annotations

import difflib
import importlib
import importlib.util
from typing import Callable, Dict, List

from official_albert import cli
from official_albert.training.experiment_config import ExperimentConfig

# Modules whose import registers experiments. Missing optional modules (e.g. a fine-tuning family not written yet)
# are skipped; errors raised *inside* an existing module propagate.
EXPERIMENT_MODULES = ("experiments.pretraining", "experiments.finetuning")

_FACTORIES: Dict[str, Callable[[], ExperimentConfig]] = {}
_loaded = False


def register_experiment(name: str):
  """Decorator registering `factory() -> ExperimentConfig` under `name`."""

  def decorator(factory: Callable[[], ExperimentConfig]):
    if name in _FACTORIES and _FACTORIES[name] is not factory:
      raise ValueError(f"Experiment {name!r} is already registered.")
    _FACTORIES[name] = factory
    return factory

  return decorator


def _load_modules() -> None:
  global _loaded
  if _loaded:
    return
  import tasks  # noqa: PLC0415 (shadow check first)
  cli.require_project_package(tasks)
  for module in EXPERIMENT_MODULES:
    if importlib.util.find_spec(module) is not None:
      importlib.import_module(module)
  _loaded = True


def registered_experiments() -> List[str]:
  _load_modules()
  return sorted(_FACTORIES)


def get_experiment(name: str) -> ExperimentConfig:
  """A fresh default config of experiment `name`."""
  _load_modules()
  if name not in _FACTORIES:
    close = difflib.get_close_matches(name, sorted(_FACTORIES), n=1)
    hint = f" Did you mean {close[0]!r}?" if close else ""
    raise ValueError(f"Unknown experiment {name!r}.{hint} Known experiments: {', '.join(sorted(_FACTORIES))}.")
  params = _FACTORIES[name]()
  params.validate()
  return params
