"""docs/distributed_training.md runs: every command block in it is executed or validated here.

A block marked `<!-- tested: runs -->` runs as written (bash, `python` = this interpreter) with `/tmp/albert_local`
moved into the test's folder and the loopback ports replaced by free ones; each training run it starts must finish
its 10 steps. A block marked `<!-- tested: flags -->` (Cloud TPU, several hosts, gs:// data) cannot run here: each
`python -m MODULE ...` line in it is parsed by that binary's own flags, and train commands are resolved to their
effective config (typos in keys and invalid values fail), with the strategy its flags and TF_CONFIG select.
"""

import json
import os
import pathlib
import re
import shlex
import subprocess

from absl import flags
import pytest

from tests import local_cluster
from tests import warm_python
from tests.conftest import docs_shell_env

REPO_ROOT = pathlib.Path(__file__).resolve().parent.parent
DOC = REPO_ROOT / "docs" / "distributed_training.md"
_BLOCK = re.compile(r"<!-- tested: (runs|flags) -->\n```sh\n(.*?)```", re.S)


def _blocks(kind):
  return [body for marker, body in _BLOCK.findall(DOC.read_text(encoding="utf-8")) if marker == kind]


def _commands(body):
  """Logical lines of a shell block (continuations joined), comments and blank lines left out."""
  lines = body.replace("\\\n", " ").splitlines()
  return [line.strip() for line in lines if line.strip() and not line.strip().startswith("#")]


def test_every_command_block_is_marked():
  text = DOC.read_text(encoding="utf-8")
  assert text.count("```sh") == len(_BLOCK.findall(text)) >= 6
  assert len(_blocks("runs")) >= 3 and len(_blocks("flags")) >= 3


# Subprocess limits scale with what a block runs: each training command gets a start-up allowance plus an allowance
# per step (float16 on some CPUs takes ~2 minutes a step). They only guard against a hang; progress is what is checked.
_STARTUP_SECONDS = 300
_SECONDS_PER_STEP = 120


def _train_steps(script):
  """{model_dir: trainer.train_steps} of every train command in a block."""
  runs = {}
  for command in re.findall(r"official_albert\.train .*", script.replace("\\\n", " ")):
    model_dir = re.search(r"--model_dir=(\S+)", command).group(1)
    runs[model_dir] = int(re.search(r"trainer\.train_steps=(\d+)", command).group(1))
  return runs


def test_block_limits_follow_the_steps_each_command_runs():
  runs = {}
  for body in _blocks("runs"):
    runs.update(_train_steps(body))
  assert runs["/tmp/albert_local/fp16"] <= 2  # float16 on a CPU: the fewest steps that check the recipe
  assert runs["/tmp/albert_local/mirrored"] == runs["/tmp/albert_local/mwms"] == 10
  assert len(runs) >= 4


@pytest.mark.large
@pytest.mark.timing
@pytest.mark.slow
def test_the_local_commands_run(tmp_path):
  expected = {}
  with warm_python.serving(docs_shell_env(tmp_path)) as env:  # (each `python -m` forked from one TensorFlow import)
    for number, body in enumerate(_blocks("runs")):
      ports = [str(p) for p in local_cluster.free_ports(2)]
      script = body.replace("/tmp/albert_local", str(tmp_path / "local"))
      script = script.replace("23456", ports[0]).replace("23457", ports[-1])
      runs = _train_steps(script)
      expected.update(runs)
      limit = sum(_STARTUP_SECONDS + _SECONDS_PER_STEP * steps for steps in runs.values())
      proc = subprocess.run(["bash", "-c", script], cwd=REPO_ROOT, env=env, capture_output=True, text=True,
                            timeout=limit)
      assert proc.returncode == 0, f"block {number}:\n{body}\n{proc.stderr[-4000:]}"
  assert len(expected) >= 4
  for model_dir, steps in expected.items():
    # A background worker's failure does not change `wait`'s status: the checkpoint of the last step tells.
    assert os.path.exists(f"{model_dir}/ckpt-{steps}.index"), model_dir


def _parse(module_name, args):
  import importlib
  module = importlib.import_module(module_name)
  fv = flags.FlagValues()
  module.define_flags(fv)
  fv(["prog"] + args)  # unknown flags, bad values and missing required flags raise here
  return fv


def test_the_cluster_commands_parse_and_resolve(monkeypatch):
  import tensorflow as tf

  from official_albert import train
  from official_albert.training import distribute
  from official_albert.training import train_lib
  checked = {"official_albert.train": 0, "data_prep.create_pretraining_data": 0}
  for body in _blocks("flags"):
    env = {}
    for command in _commands(body):
      words = shlex.split(command)
      if words[0] == "export":
        name, value = words[1].split("=", 1)
        env[name] = value
        continue
      assert words[:2] == ["python", "-m"] and words[2] in checked, command
      fv = _parse(words[2], words[3:])
      checked[words[2]] += 1
      if words[2] != "official_albert.train":
        continue
      params = train.build_params(fv.experiment, fv.config_file, fv.params_override, fv.tpu, fv.distribution_strategy)
      assert fv.model_dir.startswith("gs://") and "input_path" in ",".join(fv.params_override)
      runtime = params.runtime
      if fv.tpu:
        assert runtime.distribution_strategy == "tpu"
        monkeypatch.setattr(distribute, "is_tpu", lambda s: True)
        resolved = train_lib.resolve_runtime(params, tf.distribute.get_strategy())
        assert resolved.runtime.mixed_precision_dtype == "mixed_bfloat16", command
        monkeypatch.undo()
      else:
        assert runtime.distribution_strategy == "multi_worker_mirrored"
        cluster = json.loads(env["TF_CONFIG"])
        assert len(cluster["cluster"]["worker"]) == 2 and cluster["task"] == {"type": "worker", "index": 0}
        resolved = train_lib.resolve_runtime(params, tf.distribute.get_strategy())
        assert resolved.runtime.mixed_precision_dtype == "mixed_float16"
        assert params.trainer.gradient_accumulation_steps == 8 and runtime.all_reduce_alg == "nccl"
  assert checked["official_albert.train"] >= 4 and checked["data_prep.create_pretraining_data"] == 1
