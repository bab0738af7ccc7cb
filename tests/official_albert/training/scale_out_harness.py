"""Shared pieces of the scale-out tests: a tiny pretraining config, runs of the train binary as 1 process, as Mirrored
over logical CPUs and as MultiWorkerMirroredStrategy processes on 127.0.0.1, and checkpoint comparisons.

Runs are real processes, most of them `python -m official_albert.train` (logical CPU devices and MWMS need fresh
processes; a one-device reference may run in the test's own); each is bounded by a timeout and killed if a test
fails, so no trainer outlives its test.
"""

import glob
import json
import os
import pathlib
import re
import signal
import subprocess
import sys
import time

import numpy as np
import tensorflow as tf

from tests import local_cluster
from tests.conftest import CHILD_PYTHONPATH

REPO_ROOT = pathlib.Path(__file__).resolve().parents[3]
# A guard against a hang, not a speed expectation: tests wait for events (log lines, checkpoints, step markers), and
# on a loaded 2-core machine a tiny 20-step run of four processes can take minutes.
TIMEOUT = 600

TINY = {
    "task": {
        "model": {"vocab_size": 1000, "embedding_size": 16, "hidden_size": 32, "num_hidden_layers": 2,
                  "num_attention_heads": 2, "intermediate_size": 64, "max_position_embeddings": 32},
        "train_data": {"global_batch_size": 8, "seq_length": 32, "max_predictions_per_seq": 4, "seed": 5,
                       "shuffle_buffer_size": 64},
        "validation_data": {"input_path": "dummy", "dummy_vocab_size": 1000, "global_batch_size": 8,
                            "seq_length": 32, "max_predictions_per_seq": 4},
    },
    "trainer": {"train_steps": 20, "steps_per_loop": 5, "checkpoint_interval": 5, "summary_interval": 5,
                "warmup_steps": 2, "learning_rate": 0.01, "max_to_keep": 10},
    "runtime": {"enable_op_determinism": True},
}


def deep_merge(a, b):
  out = dict(a)
  for key, value in b.items():
    out[key] = deep_merge(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
  return out


def free_ports(n):
  return local_cluster.free_ports(n)


def start(model_dir, override, experiment="albert_tiny_pretrain", mode="train", env_extra=None, log=None,
          step_marker=None):
  """Starts the train binary; returns the Popen (stdout+stderr to `log`, a file path, or a pipe).

  With `step_marker` (a file path), the binary appends a line to that file after every training step
  (`marked_train.py`), so that a test can wait for steps instead of sleeping.
  """
  module = "official_albert.train"
  if step_marker:
    module = "tests.official_albert.training.marked_train"
    env_extra = dict(env_extra or {}, STEP_MARKER=str(step_marker))
  cmd = [sys.executable, "-m", module, f"--experiment={experiment}", f"--mode={mode}",
         f"--model_dir={model_dir}", f"--params_override={json.dumps(override)}"]
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=CHILD_PYTHONPATH, **(env_extra or {}))
  out = open(log, "w") if log else subprocess.PIPE
  return subprocess.Popen(cmd, cwd=REPO_ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, text=True)


def start_workers(model_dir, override, ports, logs, **kwargs):
  """One MultiWorkerMirroredStrategy process per port (TF_CONFIG on 127.0.0.1)."""
  override = deep_merge(override, {"runtime": {"distribution_strategy": "multi_worker_mirrored"}})
  return [start(model_dir, override, env_extra={"TF_CONFIG": local_cluster.local_tf_config(len(ports), i, ports)},
                log=logs[i], **kwargs) for i in range(len(ports))]


def output(proc, log=None):
  if log:
    return open(log).read()
  return proc.stdout.read() if proc.stdout else ""


def finish(procs, logs=(None,), timeout=TIMEOUT):
  """Waits for every process; raises with their output when one fails or hangs (then kills the rest)."""
  deadline = time.time() + timeout
  try:
    for proc in procs:
      proc.wait(timeout=max(1, deadline - time.time()))
  except subprocess.TimeoutExpired:
    kill(procs)
    raise AssertionError("a trainer hung:\n" + "\n----\n".join(output(p, l)[-3000:] for p, l in zip(procs, logs)))
  failed = [(p, l) for p, l in zip(procs, logs) if p.returncode != 0]
  if failed:
    raise AssertionError("a trainer failed:\n" + "\n----\n".join(
        f"rc={p.returncode}\n" + output(p, l)[-4000:] for p, l in failed))


def kill(procs):
  for proc in procs:
    if proc.poll() is None:
      proc.send_signal(signal.SIGKILL)
      proc.wait()


def latest_step(model_dir):
  steps = [int(p.rsplit("-", 1)[1].split(".")[0]) for p in glob.glob(os.path.join(model_dir, "ckpt-*.index"))]
  return max(steps, default=0)


def latest_listed_position(directory):
  """The newest step that the checkpoint state file of `directory` (a model_dir, or a worker's input_state folder)
  lists (0 when none).

  A save is complete only once that file (replaced atomically when a save has finished) lists it: a `ckpt-N.index`
  alone may be a merge a kill cut short (TF fills it in place), and a run killed then resumes from the step before,
  or from step 0 when it was the first save.
  """
  state = pathlib.Path(directory) / "checkpoint"
  text = state.read_text() if state.exists() else ""
  return max((int(step) for step in re.findall(r'ckpt-(\d+)"', text)), default=0)


def wait_for(predicate, timeout, procs=()):
  deadline = time.time() + timeout
  while time.time() < deadline:
    if predicate():
      return True
    if any(p.poll() is not None for p in procs):
      return predicate()
    time.sleep(0.02)
  return False


def logged(log, step, key):
  """The value of `key` in the trainer's console line for `step` ("step 20/20  loss 7.1  global_norm 1.5 ...")."""
  for line in open(log):
    if f"step {step}/" in line and f"  {key} " in line:
      return float(line.split(f"  {key} ")[1].split()[0])
  raise AssertionError(f"{log}: no {key} logged at step {step}")


def model_weights(prefix):
  """{name: array} of the model's weights in a checkpoint written by the trainer.

  A checkpoint stores each variable once, under the first path that reaches it: a model whose weights the
  `model/` path does not reach (the bi-encoder's shared encoder) has them under `optimizer/_trainable_variables/`
  instead, so both are read — reading `model/` alone compared only that model's frozen pooler, and 3 of the
  pretraining model's 32 weights.
  """
  reader = tf.train.load_checkpoint(prefix)
  return {n: reader.get_tensor(n) for n, dtype in reader.get_variable_to_dtype_map().items()
          if n.startswith(("model/", "optimizer/_trainable_variables/")) and dtype != tf.variant
          and "OPTIMIZER_SLOT" not in n}


# Below this norm a variable is compared absolutely: the attention key bias gets no gradient (a softmax does not see a
# bias shared by every key), so it stays at ~3e-9 and differs by round-off as large as itself between runs.
NORM_FLOOR = 1e-3


def max_relative_difference(a, b):
  """Largest ‖a − b‖ / max(‖a‖, NORM_FLOOR) over the variables of two checkpoints' weights."""
  assert set(a) == set(b), set(a) ^ set(b)
  return max(float(np.linalg.norm(a[n] - b[n]) / max(np.linalg.norm(a[n]), NORM_FLOOR)) for n in a)


def all_tensors(prefix):
  reader = tf.train.load_checkpoint(prefix)
  return {n: reader.get_tensor(n) for n, dtype in reader.get_variable_to_dtype_map().items() if dtype != tf.variant}


def write_records(root, spm_model_file, max_bytes=40_000, shards=2):
  """Real pretraining TFRecords (seq 32, 4 predictions) made from the Python documentation."""
  from data_prep import corpus
  from data_prep import create_pretraining_data as cpd
  from data_prep import pretraining_instances as pi
  text = str(root / "corpus.txt")
  corpus.write_python_docs_corpus(text, max_bytes=max_bytes)
  stats = cpd.create_pretraining_data(cpd.GenerationConfig(
      input_file=text, output_file=str(root / "train.tfrecord"), spm_model_file=spm_model_file,
      options=pi.InstanceOptions(max_seq_length=32, max_predictions_per_seq=4), dupe_factor=1, random_seed=7,
      num_output_shards=shards, progress=False))
  return ",".join(stats["output_files"]), stats["records"]


def eval_and_predict(model_dir, override, output_file):
  """Evaluates and predicts `model_dir` as glue/sst-2 (`override`: JSON) under one strategy, writing the eval results
  and the number of predict batches to `output_file` (JSON).

  Run by the worker processes (whose strategy needs a fresh process) and in the test's own process for the
  one-device reference, which needs no process of its own (a child's start and TensorFlow import cost ~8 s of CPU).
  """
  from official_albert import train
  from official_albert.training import base_task
  from official_albert.training import distribute
  from official_albert.training import train_lib
  params = train.build_params("glue/sst-2", params_override=override)
  strategy = distribute.strategy_from_runtime(params.runtime)  # one strategy for both runs (MWMS: once per process)
  results = {}
  for mode in ("eval", "predict"):
    task = base_task.create_task(params.task, logging_dir=model_dir)
    results[mode] = train_lib.run_experiment(params, model_dir, mode, strategy=strategy, task=task)
  with open(output_file, "w") as f:
    json.dump({"eval": results["eval"], "predict_batches": results["predict"]["predict_batches"]}, f)
