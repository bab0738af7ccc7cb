"""Start-up refusals of a distributed run (audit s30, findings 2-4): a TF_CONFIG that the strategy would ignore, a
global batch the replicas × micro-batches do not divide (before model_dir gets a file), and non-chief workers writing
model_dir's tokenizer_config.json while the inputs are prepared."""

import json
import os
import pathlib
import subprocess
import sys
import types

import pytest

from official_albert import train
from official_albert.training import distribute
from official_albert.training import input_feed
from official_albert.training import train_lib
from official_albert.training.experiment_config import RuntimeConfig
from official_albert.training.hyperparams import ConfigError
from tests.conftest import CHILD_PYTHONPATH
from tests.official_albert.training.test_train_lib import _deep_merge
from tests.official_albert.training.test_train_lib import TINY

REPO_ROOT = pathlib.Path(__file__).resolve().parents[3]


def _tf_config(num_workers, index=0, task_type="worker"):
  return json.dumps({"cluster": {"worker": [f"127.0.0.1:{23456 + i}" for i in range(num_workers)]},
                     "task": {"type": task_type, "index": index}})


# ------------------------------------------------------------------------------------------------ TF_CONFIG
@pytest.mark.parametrize("index", [0, 1])
@pytest.mark.parametrize("runtime", [dict(distribution_strategy=""), dict(distribution_strategy="mirrored"),
                                     dict(distribution_strategy="one_device"), dict(num_cpu_devices=2)])
def test_a_multi_worker_tf_config_without_mwms_is_refused(monkeypatch, runtime, index):
  """Each worker would otherwise build a one-process strategy, believe it is the chief and write the shared
  model_dir: N runs overwriting each other's checkpoints at 1/N of the global batch."""
  monkeypatch.setenv("TF_CONFIG", _tf_config(2, index))
  with pytest.raises(ConfigError, match=r"TF_CONFIG lists 2 chief/worker tasks .*"
                                        r"--distribution_strategy=multi_worker_mirrored.*unset TF_CONFIG"):
    distribute.strategy_from_runtime(RuntimeConfig(**runtime))


def test_tf_config_that_names_one_process_or_an_evaluator_is_allowed(monkeypatch):
  distribute.check_tf_config("multi_worker_mirrored")  # no TF_CONFIG
  monkeypatch.setenv("TF_CONFIG", _tf_config(2, 1))
  distribute.check_tf_config("multi_worker_mirrored")
  distribute.check_tf_config("Multi_Worker_Mirrored")
  monkeypatch.setenv("TF_CONFIG", _tf_config(2, 0, task_type="evaluator"))  # a side-car evaluator: one machine
  distribute.check_tf_config("one_device")
  monkeypatch.setenv("TF_CONFIG", _tf_config(2, 1))  # a TPU job: TPUStrategy reads runtime.tpu, not TF_CONFIG
  distribute.check_tf_config("tpu")
  distribute.check_tf_config("", tpu="grpc://10.0.0.2:8470")
  monkeypatch.setenv("TF_CONFIG", _tf_config(1))
  strategy = distribute.strategy_from_runtime(RuntimeConfig(distribution_strategy="one_device"))
  assert distribute.is_chief(strategy)
  monkeypatch.setenv("TF_CONFIG", "{not json")
  with pytest.raises(ConfigError, match="TF_CONFIG is not a JSON object"):
    distribute.check_tf_config("")


# ------------------------------------------------------------------------------------------------ batch sizes
def test_each_global_batch_is_checked_against_its_divisor_naming_its_key():
  data = lambda batch: types.SimpleNamespace(global_batch_size=batch)  # noqa: E731
  trainer = types.SimpleNamespace(gradient_accumulation_steps=3)
  with pytest.raises(ConfigError, match=r"task.train_data.global_batch_size=8 is not divisible by the 2 replicas in "
                                        r"sync × trainer.gradient_accumulation_steps=3 = 6"):
    input_feed.check_global_batches([("task.train_data", data(8))], 2, trainer)
  with pytest.raises(ConfigError, match=r"task.train_data.global_batch_size=5 is not divisible by the 2 replicas"):
    input_feed.check_global_batches([("task.train_data", data(5))], 2)
  for key in ("task.validation_data", "task.predict_data"):  # no micro-batches outside training
    input_feed.check_global_batches([(key, data(8))], 2, trainer)
    with pytest.raises(ConfigError, match=rf"{key}.global_batch_size=5 is not divisible by the 2 replicas"):
      input_feed.check_global_batches([("task.train_data", data(12)), (key, data(5))], 2, trainer)
  input_feed.check_global_batches([("task.train_data", data(12))], 2, trainer)


def test_a_batch_the_replicas_times_micro_batches_do_not_divide_fails_before_model_dir_gets_a_file(tmp_path):
  """2 logical CPUs, global batch 8, 3 micro-batches: 8 splits over the replicas (4 each) but 4 not into 3. Refused
  with its keys before params.yaml / config.json exist (it used to fail while the first step traced, after them)."""
  model_dir = tmp_path / "run"
  override = _deep_merge(TINY, {"task": {"train_data": {"global_batch_size": 8}},
                                "trainer": {"gradient_accumulation_steps": 3},
                                "runtime": {"distribution_strategy": "", "num_cpu_devices": 2}})
  cmd = [sys.executable, "-m", "official_albert.train", "--experiment=albert_tiny_pretrain", "--mode=train",
         f"--model_dir={model_dir}", f"--params_override={json.dumps(override)}"]
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=CHILD_PYTHONPATH)
  env.pop("TF_CONFIG", None)
  result = subprocess.run(cmd, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=300)
  assert result.returncode != 0
  assert ("task.train_data.global_batch_size=8 is not divisible by the 2 replicas in sync × "
          "trainer.gradient_accumulation_steps=3" in result.stdout + result.stderr), result.stdout + result.stderr
  assert not model_dir.exists() or not any(model_dir.iterdir())


# ------------------------------------------------------------------------------------------------ chief-only writes
def test_a_non_chief_worker_does_not_write_tokenizer_config_while_preparing_inputs(tmp_path, spm_model_file,
                                                                                   monkeypatch):
  """Raw GLUE: preparing the inputs writes `<model_dir>/tokenizer_config.json` on the chief only (the Trainer clears
  the task's logging_dir on the others, but only after the inputs are built)."""
  folder = tmp_path / "glue" / "SST-2"
  folder.mkdir(parents=True)
  rows = "sentence\tlabel\n" + "".join(f"{t}\t{y}\n" for t, y in [("a good film", 1), ("an awful mess", 0)] * 2)
  (folder / "train.tsv").write_text(rows)
  model = {"preset": "", "vocab_size": 1000, "embedding_size": 16, "hidden_size": 32, "num_hidden_layers": 1,
           "num_attention_heads": 2, "intermediate_size": 64, "max_position_embeddings": 64}
  params = train.build_params("glue/sst-2", params_override=json.dumps({
      "task": {"model": model, "spm_model_file": spm_model_file, "records_dir": str(tmp_path / "cache"),
               "train_data": {"input_path": str(tmp_path / "glue"), "global_batch_size": 4, "seq_length": 32}},
      "runtime": {"distribution_strategy": "one_device"}}))

  class Built(Exception):
    pass

  def stop(*args, **kwargs):
    raise Built

  monkeypatch.setattr(train_lib, "Trainer", stop)  # the inputs are prepared: stop before the model
  for chief, model_dir in ((False, tmp_path / "worker1"), (True, tmp_path / "chief")):
    monkeypatch.setattr(distribute, "is_chief", lambda strategy=None, chief=chief: chief)
    with pytest.raises(Built):
      train_lib.run_experiment(params, str(model_dir), "train")
    assert (model_dir / "tokenizer_config.json").exists() == chief
