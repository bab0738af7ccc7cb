"""Train / evaluate / predict a registered experiment (Model Garden `train.py` manner).

  python -m official_albert.train --experiment=albert_tiny_pretrain --mode=train_and_eval --model_dir=/tmp/m \
      --config_file=a.yaml --config_file=b.yaml \
      --params_override="task.train_data.input_path=data/*.tfrecord,trainer.train_steps=1000" [--validate_input]

Config resolution: the experiment's defaults → each `--config_file` in order → each `--params_override` in order
(the flag may be repeated, like `--config_file`) → `--tpu` / `--distribution_strategy`, validated once at the end (a
later source may complete what an earlier one starts). A `--config_file` is always a file: one that does not exist
is an error naming it, even when its name also reads as an override (`lr=1e-4/config.yaml`); overrides go in
`--params_override`. The effective config is written to `<model_dir>/params.yaml`, which names its experiment: a
config file recording another experiment than `--experiment` is refused, naming both. The binary builds the task
named by the config and hands it to the trainer (`train_lib.run_experiment`). `--validate_input` reads every record
of the splits the mode uses before training and lists every bad file (exit status 1).

Flag checks before anything is written: an empty `--model_dir` (an unset `$MODEL_DIR`) and one naming an existing
file are refused; `--checkpoint` is read by `--mode=eval` / `predict` only (a training run resumes from the latest
`ckpt-N` of `--model_dir`, and a warm start is `task.init_checkpoint`); `--tpu` with a config that names another
`runtime.distribution_strategy` is refused, naming both (the run would train on the host without a word).

This is the top of the house: it is the one module of `official_albert` that imports from `experiments/` (the
registry of experiment names, which knows the tasks); see docs/design.md.
"""

from __future__ import annotations

import logging
import os
from typing import Any, Dict, List, Optional, Sequence, Union

from absl import app
from absl import flags

from official_albert import cli
from official_albert import file_io
from official_albert.training import checkpoint_records
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
  flags.DEFINE_multi_string("params_override", [],
                            "YAML/JSON string, `key=value,...` string or file; applied after the config files. May "
                            "be repeated: the values are applied in order (a later one wins on the same key).",
                            flag_values=fv)
  flags.DEFINE_string("tpu", None, "TPU name/address for TPUClusterResolver (sets runtime.tpu).", flag_values=fv)
  flags.DEFINE_string("distribution_strategy", None,
                      "one_device | mirrored | multi_worker_mirrored | tpu (sets runtime.distribution_strategy).",
                      flag_values=fv)
  flags.DEFINE_string("checkpoint", None, "--mode=eval / predict: the checkpoint prefix to read (default: eval "
                      "reads the latest ckpt-N; predict model.ckpt-best, else the latest ckpt-N). Refused in the "
                      "training modes, which resume from --model_dir (warm start: task.init_checkpoint).",
                      flag_values=fv)
  flags.DEFINE_bool("validate_input", False,
                    "Before anything is built, read and decode every record of every file of the splits --mode "
                    "reads (train_data / validation_data / predict_data) with the task's own decoder; report every "
                    "bad file (path, first bad record, what is wrong, the fix) and exit with status 1, or go on with "
                    "the run when all are good. (Input patterns that match nothing are refused at start-up anyway.)",
                    flag_values=fv)
  flags.mark_flags_as_required(["experiment", "model_dir"], flag_values=fv)


def check_config_files(config_files: Sequence[str], experiment: str) -> None:
  """Raises FileNotFoundError (IsADirectoryError) naming the first of `config_files` that is not a file.

  The config files and `--params_override` reach `hyperparams.override` as one list of strings, which reads a string
  naming no file as an override: a missing relative `lr=1e-4/config.yaml` would become the override `lr:
  1e-4/config.yaml` (and `trainer.train_steps=7` would silently apply). So every config file is checked here, while
  it is still known to be one; the message says what it would have meant as an override, and suggests
  `--params_override` only when that override applies to `experiment`'s config (`lr=...` would be refused too).
  """
  for path in config_files:
    if file_io.exists(path) and not file_io.isdir(path):
      continue
    missing = not file_io.exists(path)
    what = "does not exist" if missing else "is a directory, not a config file"
    where = "" if not file_io.is_local(path) or os.path.isabs(path) else f" (relative to {os.getcwd()})"
    try:
      as_override = hyperparams.parse_overrides(path) if "=" in path or ":" in path else None
      if as_override:
        from experiments import registry  # noqa: PLC0415 (binary: only on this error path)
        hyperparams.override(registry.get_experiment(experiment), path)
    except (ValueError, OSError, ImportError):
      as_override = None
    hint = (f" It would read as the override {as_override}: to override keys, pass them with "
            f"--params_override={path!r}." if as_override else "")
    raise (FileNotFoundError if missing else IsADirectoryError)(
        f"--config_file={path}: {what}{where}; a --config_file is always read as a YAML/JSON file.{hint}")


def check_model_dir(model_dir: Optional[str]) -> None:
  """Refuses a `--model_dir` that cannot hold the run, before anything is written.

  An empty one (`--model_dir=$MODEL_DIR` with the variable unset) passes absl's required-flag check, and the run
  went half to the current folder (the checkpoints) and half to `/` (`params.yaml`, `config.json`, ...). One naming
  an existing file failed at the first write with a traceback from `os.makedirs`.

  Raises:
    app.UsageError: the directory is empty or whitespace.
    NotADirectoryError: it names an existing file.
  """
  if model_dir is None or not str(model_dir).strip():
    raise app.UsageError(f"--model_dir={model_dir or ''!r} is empty (an unset shell variable?); name the run's "
                         "directory.")
  if file_io.exists(model_dir) and not file_io.isdir(model_dir):
    raise NotADirectoryError(f"--model_dir={model_dir} is a file, not a directory; name the run's directory "
                             "(new or existing).")


def check_init_checkpoint_apart(init_checkpoint: Optional[str], model_dir: str) -> None:
  """Refuses training into the folder of `task.init_checkpoint`: the run's ckpt-N, params.yaml and labels landed
  beside the pretrained `model.ckpt`, which the pipelines and serving then read first (`md.resolve_checkpoint`), and
  the pretrained folder was no longer one model.

  Raises:
    app.UsageError: naming both and the fix.
  """
  if not init_checkpoint or not str(init_checkpoint).strip():
    return
  init = str(init_checkpoint).strip()
  folder = init if file_io.isdir(init) else checkpoint_records.checkpoint_folder(init)
  if file_io.same_location(folder, model_dir):
    raise app.UsageError(f"--model_dir={model_dir} is the folder of task.init_checkpoint={init}: the run would write "
                         "its checkpoints and records beside the weights it starts from (and the folder's model.ckpt "
                         "would still be what pipelines and serving read). Pass a new --model_dir; "
                         "task.init_checkpoint starts it from those weights.")


def _override_sources(params_override: Union[None, str, Sequence[str]]) -> List[str]:
  """`--params_override` as a list: one string (the importable API's form) or the repeated flag's values."""
  if not params_override:
    return []
  return [params_override] if isinstance(params_override, str) else [s for s in params_override if s]


def build_params(experiment: str, config_files: Sequence[str] = (),
                 params_override: Union[None, str, Sequence[str]] = None, tpu: Optional[str] = None,
                 distribution_strategy: Optional[str] = None, mode: Optional[str] = None,
                 model_dir: Optional[str] = None):
  """The effective ExperimentConfig from the experiment name, config files, overrides and flags.

  `params_override` is one override source or several (the repeated flag), applied in order after the config files.
  With `mode`, `task.model` comes from the model the run starts from or reads (`task.init_checkpoint`, `model_dir`;
  `official_albert.training.model_source`) unless the overrides set it.

  Raises:
    app.UsageError: `tpu` with a config or `distribution_strategy` that names another strategy (the run would
      silently train without the TPU).
    ConfigError: the stacked config is invalid (naming the key), or a config file records another experiment.
  """
  check_config_files(config_files, experiment)  # before anything is imported or built: the error is about a flag
  import experiments  # noqa: PLC0415 (shadow check first)
  cli.require_project_package(experiments)
  from experiments import registry  # noqa: PLC0415 (binary: TF after launch)
  from official_albert.training import experiment_config  # noqa: PLC0415 (binary: TF after launch)
  from official_albert.training import model_source  # noqa: PLC0415 (binary: TF after launch)
  params = registry.get_experiment(experiment)
  params.experiment_name = experiment  # params.yaml's first line (`experiment_config.save_params_yaml`)
  sources = [hyperparams.ConfigFile(path) for path in config_files] + _override_sources(params_override)
  for path in list(config_files) + [s for s in sources if isinstance(s, str) and "\n" not in s.strip()]:
    path = os.path.expanduser(path.strip()) if path.strip().startswith("~") else path.strip()  # (as _parse reads it)
    if file_io.exists(path) and not file_io.isdir(path):  # a params.yaml of another run, say
      experiment_config.check_recorded_experiment(path, experiment)
  params = model_source.apply_overrides(params, sources, mode, model_dir)
  runtime = {}
  if tpu:
    strategy = distribution_strategy or params.runtime.distribution_strategy
    if strategy and strategy != "tpu":
      origin = ("--distribution_strategy" if distribution_strategy
                else "runtime.distribution_strategy from the experiment / --config_file / --params_override")
      raise app.UsageError(f"--tpu={tpu} but {origin} is {strategy!r}: the run would not use the TPU. Drop one, "
                           "or pass --distribution_strategy=tpu.")
    runtime["tpu"] = tpu
    if not distribution_strategy and not params.runtime.distribution_strategy:
      runtime["distribution_strategy"] = "tpu"
  if distribution_strategy:
    runtime["distribution_strategy"] = distribution_strategy
  if runtime:
    params = params.override({"runtime": runtime})
  return params


def run(experiment: str, mode: str, model_dir: str, config_files: Sequence[str] = (),
        params_override: Union[None, str, Sequence[str]] = None, tpu: Optional[str] = None,
        distribution_strategy: Optional[str] = None, **kwargs) -> Dict[str, Any]:
  """Importable entry point of the binary: builds the params and the task, then runs the trainer.

  An eval / predict run given a `checkpoint` in another folder first copies that folder's records into `model_dir`
  (`checkpoint_records`: they say what the weights mean, e.g. the label order), so it runs as it would there.

  Returns `train_lib.run_experiment`'s result.
  """
  check_model_dir(model_dir)
  from official_albert.training import base_task  # noqa: PLC0415 (binary: TF after launch)
  from official_albert.training import train_lib  # noqa: PLC0415 (binary: TF after launch)
  adopted = []
  if mode in ("eval", "predict"):
    checkpoint = kwargs.get("checkpoint")
    if checkpoint and not file_io.exists(checkpoint + ".index"):  # (before its records are copied into model_dir)
      raise FileNotFoundError(f"--mode={mode}: checkpoint {checkpoint} not found ({checkpoint}.index is missing); "
                              "pass a checkpoint prefix such as <model_dir>/ckpt-N.")
    adopted = checkpoint_records.adopt_records(checkpoint, model_dir)
  try:  # (the records are read by build_params: task.model from model_dir)
    params = build_params(experiment, config_files, params_override, tpu, distribution_strategy, mode, model_dir)
    if "train" in mode:
      check_init_checkpoint_apart(getattr(params.task, "init_checkpoint", None), model_dir)
    task = base_task.create_task(params.task, logging_dir=model_dir.rstrip("/"))
  except BaseException:
    for name in adopted:  # a refused run leaves model_dir as it was (the next command may name another checkpoint)
      file_io.remove(os.path.join(model_dir, name))
    raise
  return train_lib.run_experiment(params, model_dir, mode, task=task, **kwargs)


def main(argv, fv: flags.FlagValues = flags.FLAGS) -> int:
  """Runs the binary; the exit code is 0 when done, 75 (EX_TEMPFAIL) after a preemption checkpoint and 1 when the
  input files are missing or bad (`InputDataError`: the start-up pattern check or `--validate_input`) or their
  vocabulary is not the model's (`VocabularyError`), or --model_dir holds other records than --checkpoint's folder
  (`RecordConflictError`)."""
  if len(argv) > 1:
    raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
  if fv.checkpoint is not None and not fv.checkpoint.strip():
    raise app.UsageError("--checkpoint= is empty (an unset shell variable?); name a checkpoint prefix, or leave the "
                         "flag out to read the latest ckpt-N.")
  if fv.checkpoint is not None and fv.mode not in ("eval", "predict"):
    raise app.UsageError(f"--checkpoint={fv.checkpoint} with --mode={fv.mode}: --checkpoint names the checkpoint "
                         "that --mode=eval / predict reads. Training resumes from the latest ckpt-N of --model_dir; "
                         "to start from other weights set task.init_checkpoint.")
  check_model_dir(fv.model_dir)  # before anything is built or written: the error is about a flag
  from official_albert.data.input_pipeline import InputDataError  # noqa: PLC0415 (binary: TF after launch)
  from official_albert.training.checkpoint_records import RecordConflictError  # noqa: PLC0415 (as the others)
  from official_albert.training.vocabulary import VocabularyError  # noqa: PLC0415 (binary: TF after launch)
  kwargs = {"checkpoint": fv.checkpoint} if fv.mode in ("eval", "predict") else {}
  try:
    result = run(fv.experiment, fv.mode, fv.model_dir, fv.config_file, fv.params_override, fv.tpu,
                 fv.distribution_strategy, validate_input=fv.validate_input, **kwargs)
  except (InputDataError, VocabularyError, RecordConflictError) as e:
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
