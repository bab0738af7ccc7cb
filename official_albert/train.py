"""Train / evaluate a registered experiment (Model Garden `train.py` manner).

  python -m official_albert.train --experiment=albert_tiny_pretrain --mode=train_and_eval --model_dir=/tmp/m \
      --config_file=a.yaml --config_file=b.yaml \
      --params_override="task.train_data.input_path=data/*.tfrecord,trainer.train_steps=1000"

Config resolution: the experiment's defaults → each `--config_file` in order → `--params_override` → `--tpu` /
`--distribution_strategy`. The effective config is written to `<model_dir>/params.yaml`.
"""

from __future__ import annotations

import logging
from typing import Any, Dict, Optional, Sequence

from absl import app
from absl import flags

FLAGS = flags.FLAGS
flags.DEFINE_string("experiment", None, "Registered experiment name (see experiments/registry.py).")
flags.DEFINE_enum("mode", "train", ["train", "eval", "train_and_eval", "predict"],
                  "What to run. predict writes <model_dir>/predictions/ from task.predict_data.")
flags.DEFINE_string("model_dir", None, "Checkpoints, summaries, params.yaml and eval_results.json (local or gs://).")
flags.DEFINE_multi_string("config_file", [], "YAML/JSON config files applied in order.")
flags.DEFINE_string("params_override", None,
                    "YAML/JSON string, `key=value,...` string or file; applied after the config files.")
flags.DEFINE_string("tpu", None, "TPU name/address for TPUClusterResolver (sets runtime.tpu).")
flags.DEFINE_string("distribution_strategy", None,
                    "one_device | mirrored | multi_worker_mirrored | tpu (sets runtime.distribution_strategy).")
flags.DEFINE_string("checkpoint", None,
                    "--mode=predict: checkpoint prefix to read (default: model.ckpt-best, else the latest ckpt-N).")


def build_params(experiment: str, config_files: Sequence[str] = (), params_override: Optional[str] = None,
                 tpu: Optional[str] = None, distribution_strategy: Optional[str] = None):
  """The effective ExperimentConfig from the experiment name, config files, overrides and flags."""
  from experiments import registry  # The one import from experiments/ into the library (see DESIGN.md).
  params = registry.get_experiment(experiment)
  for path in config_files:
    params = params.override(path)
  if params_override:
    params = params.override(params_override)
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
  """Importable entry point of the binary; returns `train_lib.run_experiment`'s result."""
  from official_albert.training import train_lib
  params = build_params(experiment, config_files, params_override, tpu, distribution_strategy)
  return train_lib.run_experiment(params, model_dir, mode, **kwargs)


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
  logging.getLogger().setLevel(logging.INFO)
  kwargs = {"checkpoint": FLAGS.checkpoint} if FLAGS.mode == "predict" else {}
  result = run(FLAGS.experiment, FLAGS.mode, FLAGS.model_dir, FLAGS.config_file, FLAGS.params_override, FLAGS.tpu,
               FLAGS.distribution_strategy, **kwargs)
  if FLAGS.mode == "predict":
    logging.info("predictions from %s: %s", result["checkpoint"], result["files"])
  elif FLAGS.mode == "eval":
    logging.info("eval results: %s", result)
  else:
    logging.info("finished: status=%s global_step=%s", result["status"], result["global_step"])


if __name__ == "__main__":
  flags.mark_flags_as_required(["experiment", "model_dir"])
  app.run(main)
