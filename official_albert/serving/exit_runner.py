"""How `pipelines.classify` runs a classifier over a batch: the Keras model at a patience (early exit) or depth, or
an export folder at the ones fixed at its export (`modeling.early_exit`, docs/early_exit.md)."""

from __future__ import annotations

import logging
from typing import Optional

import numpy as np

from official_albert.serving.graph_call import graph_call
from official_albert.serving.pipeline_inputs import warn_patience

logger = logging.getLogger(__name__)


def exit_runner(model, export_folder: bool, patience: Optional[int], depth: Optional[int],
                exit_threshold: Optional[float], multi_label_threshold: Optional[float]):
  """inputs → (logits, exit iterations [B]) of `classify`: a Keras model at `patience` / `depth` (a patience that
  can never end a row early is warned), or an export folder (`export_folder`) at the ones it was exported with
  (asking for others raises)."""
  if export_folder:
    exported = {"patience": model.settings.get("patience", 0), "depth": model.settings.get("depth"),
                "exit_threshold": model.settings.get("exit_threshold")}  # (recorded since 2026-12-05)
    for name, value in (("patience", patience), ("depth", depth), ("exit_threshold", exit_threshold)):
      if value is not None and value != exported[name] and (name != "exit_threshold" or exported[name] is not None):
        raise ValueError(f"classify: {name}={value}, but {model.export_dir} was exported with {name}="
                         f"{exported[name]} (an export folder's is fixed at export); re-export it with "
                         f"--{name}={value}.")
    iterations = exported["depth"] or model.config.num_hidden_layers

    def run_export(inputs):
      out = model(inputs)
      exits = out.get("exit_iteration", np.full(len(out["logits"]), iterations, np.int32))
      return out["logits"], np.asarray(exits)

    return run_export
  warn_patience(patience, model.config.num_hidden_layers, "classify")
  if exit_threshold is not None and not (patience and int(model.num_labels) == 1):
    logger.warning("classify: exit_threshold=%s is the exit rule of a regression head (one output) with patience; "
                   "this call (patience=%s, %d outputs) does not use it.", exit_threshold, patience,
                   int(model.num_labels))
  options = {}  # (none: the plain call, as any model takes it)
  if patience:
    options["patience"] = patience
    if exit_threshold is not None:
      options["exit_threshold"] = exit_threshold
    if multi_label_threshold is not None:
      options["multi_label_threshold"] = multi_label_threshold
  if depth is not None:
    options["depth"] = depth
  iterations = depth or model.config.num_hidden_layers
  call = graph_call(model, **options)  # (a Keras model's graph at these options: serving.graph_call)

  def run_model(inputs):
    out = call(inputs)
    exits = out["exit_iteration"] if "exit_iteration" in out else np.full(len(out["logits"]), iterations, np.int32)
    return out["logits"], np.asarray(exits)

  return run_model
