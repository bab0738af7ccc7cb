"""Train / evaluate / predict a registered experiment (Model Garden `train.py` manner).

  python -m official_albert.train --experiment=albert_tiny_pretrain --mode=train_and_eval --model_dir=/tmp/m \
      --config_file=a.yaml --config_file=b.yaml \
      --params_override="task.train_data.input_path=data/*.tfrecord,trainer.train_steps=1000" [--validate_input]

Config resolution: the experiment's defaults → each `--config_file` in order → `--params_override` → `--tpu` /
`--distribution_strategy`. A `--config_file` is always a file: one that does not exist is an error naming it, even
when its name also reads as an override (`lr=1e-4/config.yaml`); overrides go in `--params_override`. The effective
config is written to `<model_dir>/params.yaml`. The binary builds the task named by the config and hands it to the
trainer (`train_lib.run_experiment`). `--validate_input` reads every record of the splits the mode uses before
training and lists every bad file (exit status 1).

This is the top of the house: it is the one module of `official_albert` that imports from `experiments/` (the
registry of experiment names, which knows the tasks); see docs/design.md.
"""

from __future__ import annotations

import logging
import os
from typing import Any, Dict, Optional, Sequence

from absl import app
from absl import flags

from official_albert import cli
from official_albert import file_io
from official_albert.training import hyperparams


def define_flags(fv: flags.FlagValues = flags.FLAGS) -> None:
  """Defines the binary's flags on `fv` (never at import time)."""
  from official_albert.training.train_lib import MODES  # noqa: PLC0415 (binary: TF after launch)
  flags.DEFINE_string("experiment", None, "Registered experiment name (see experiments/registry.py).",
                      flag_values=fv)
  flags.DEFINE_enum("mode", "train", MODES, "What to run. predict writes <model_dir>/predictions/ from "
                    "task.predict_data.", flag_values=fv)
  flags.DEFINE_string("model_dir", None, "Checkpoints, summaries, params.yaml and eval_results.json (local or gs://).",
                      flag_values=fv)
  flags.DEFINE_multi_string("config_file", [], "YAML/JSON config files applied in order (always read as files: a "
                            "missing one is an error; overrides go in --params_override).", flag_values=fv)
  flags.DEFINE_string("params_override", None,
                      "YAML/JSON string, `key=value,...` string or file; applied after the config files.",
                      flag_values=fv)
  flags.DEFINE_string("tpu", None, "TPU name/address for TPUClusterResolver (sets runtime.tpu).", flag_values=fv)
  flags.DEFINE_string("distribution_strategy", None,
                      "one_device | mirrored | multi_worker_mirrored | tpu (sets runtime.distribution_strategy).",
                      flag_values=fv)
  flags.DEFINE_string("checkpoint", None, "--mode=predict: checkpoint prefix to read (default: model.ckpt-best, "
                      "else the latest ckpt-N).", flag_values=fv)
  flags.DEFINE_bool("validate_input", False,
                    "Before anything is built, read and decode every record of every file of the splits --mode "
                    "reads (train_data / validation_data / predict_data) with the task's own decoder; report every "
                    "bad file (path, first bad record, what is wrong, the fix) and exit with status 1, or go on with "
                    "the run when all are good. (Input patterns that match nothing are refused at start-up anyway.)",
                    flag_values=fv)
  flags.mark_flags_as_required(["experiment", "model_dir"], flag_values=fv)


def check_config_files(config_files: Sequence[str]) -> None:
  """Raises FileNotFoundError (IsADirectoryError) naming the first of `config_files` that is not a file.

  The config files and `--params_override` reach `hyperparams.override` as one list of strings, which reads a string
  naming no file as an override: a missing relative `lr=1e-4/config.yaml` would become the override `lr:
  1e-4/config.yaml` (and `trainer.train_steps=7` would silently apply). So every config file is checked here, while
  it is still known to be one; the message says what it would have meant as an override.
  """
  for path in config_files:
    if file_io.exists(path) and not file_io.isdir(path):
      continue
    missing = not file_io.exists(path)
    what = "does not exist" if missing else "is a directory, not a config file"
    where = "" if not file_io.is_local(path) or os.path.isabs(path) else f" (relative to {os.getcwd()})"
    try:
      as_override = hyperparams.parse_overrides(path) if "=" in path or ":" in path else None
    except (ValueError, OSError):
      as_override = None
    hint = (f" It would read as the override {as_override}: to override keys, pass them with "
            f"--params_override={path!r}." if as_override else "")
    raise (FileNotFoundError if missing else IsADirectoryError)(
        f"--config_file={path}: {what}{where}; a --config_file is always read as a YAML/JSON file.{hint}")


def build_params(experiment: str, config_files: Sequence[str] = (), params_override: Optional[str] = None,
                 tpu: Optional[str] = None, distribution_strategy: Optional[str] = None, mode: Optional[str] = None,
                 model_dir: Optional[str] = None):
  """The effective ExperimentConfig from the experiment name, config files, overrides and flags.

  With `mode`, `task.model` comes from the model the run starts from or reads (`task.init_checkpoint`, `model_dir`;
  `official_albert.training.model_source`) unless the overrides set it.
  """
  check_config_files(config_files)  # before anything is imported or built: the error is about a flag
  import experiments  # noqa: PLC0415 (shadow check first)
  cli.require_project_package(experiments)
  from experiments import registry  # noqa: PLC0415 (binary: TF after launch)
  from official_albert.training import model_source  # noqa: PLC0415 (binary: TF after launch)
  params = registry.get_experiment(experiment)
  sources = list(config_files) + ([params_override] if params_override else [])
  params = model_source.apply_overrides(params, sources, mode, model_dir)
  runtime = {}
  if tpu:
    runtime["tpu"] = tpu
    if not distribution_strategy and not params.runtime.distribution_strategy:
      runtime["distribution_strategy"] = "tpu"
  if distribution_strategy:
    runtime["distribution_strategy"] = distribution_strategy
  if runtime:
    params = params.override({"runtime": runtime})
  return params


def run(experiment: str, mode: str, model_dir: str, config_files: Sequence[str] = (),
        params_override: Optional[str] = None, tpu: Optional[str] = None,
        distribution_strategy: Optional[str] = None, **kwargs) -> Dict[str, Any]:
  """Importable entry point of the binary: builds the params and the task, then runs the trainer.

  Returns `train_lib.run_experiment`'s result.
  """
  from official_albert.training import base_task  # noqa: PLC0415 (binary: TF after launch)
  from official_albert.training import train_lib  # noqa: PLC0415 (binary: TF after launch)
  params = build_params(experiment, config_files, params_override, tpu, distribution_strategy, mode, model_dir)
  task = base_task.create_task(params.task, logging_dir=model_dir.rstrip("/"))
  return train_lib.run_experiment(params, model_dir, mode, task=task, **kwargs)


def main(argv, fv: flags.FlagValues = flags.FLAGS) -> int:
  """Runs the binary; the exit code is 0 when done, 75 (EX_TEMPFAIL) after a preemption checkpoint and 1 when the
  input files are missing or bad (`InputDataError`: the start-up pattern check or `--validate_input`) or their
  vocabulary is not the model's (`VocabularyError`)."""
  if len(argv) > 1:
    raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
  from official_albert.data.input_pipeline import InputDataError  # noqa: PLC0415 (binary: TF after launch)
  from official_albert.training.vocabulary import VocabularyError  # noqa: PLC0415 (binary: TF after launch)
  kwargs = {"checkpoint": fv.checkpoint} if fv.mode == "predict" else {}
  try:
    result = run(fv.experiment, fv.mode, fv.model_dir, fv.config_file, fv.params_override, fv.tpu,
                 fv.distribution_strategy, validate_input=fv.validate_input, **kwargs)
  except (InputDataError, VocabularyError) as e:
    logging.error("%s", e)  # the message names every file and the fix: no traceback needed
    return 1
  if fv.mode == "predict":
    logging.info("predictions from %s: %s", result["checkpoint"], result["files"])
  elif fv.mode == "eval":
    logging.info("eval results: %s", result)
  else:
    logging.info("finished: status=%s global_step=%s", result["status"], result["global_step"])
    if result["status"] == "preempted":
      from official_albert.training.preemption import PREEMPTED_EXIT_CODE  # noqa: PLC0415 (binary: TF after launch)
      return PREEMPTED_EXIT_CODE
  return 0


def console_main() -> None:
  """The `albert-train` console script (pyproject.toml)."""
  cli.launch(define_flags, main)


if __name__ == "__main__":
  console_main()
