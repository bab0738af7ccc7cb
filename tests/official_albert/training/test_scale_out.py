"""Scale-out trains the same model: one device vs Mirrored over logical CPUs vs MultiWorkerMirroredStrategy processes.

Each test runs real train-binary processes on real pretraining records (loopback only, bounded by timeouts):
- the same global batches give the same weights after 20 LAMB steps on 1 device, 2 logical CPUs and 2 workers,
  while the reference's per-replica loss normalisation does not (so the comparison can fail);
- kill -9 of worker 1 after a checkpoint, restart of both: the final checkpoint is bit-identical to an
  uninterrupted run, with checkpointed iterators and in skip mode (the TPU path);
- XLA with 2 replicas (logical CPUs or workers) equals the graph run; fp16 skips a step whose gradient is non-finite
  on one replica or worker, on all of them, halving the scale everywhere;
- SIGTERM during a 1000-step loop checkpoints after the step in flight, not at the end of the loop.
- eval and predict under 2 logical CPUs and 2 workers equal one device's (that reference, and the 4-step model it
  reads, run in the test's own process: a single device needs no fresh process).
"""

import json
import os
import signal

import numpy as np
import pytest

from tests import local_cluster
from tests.conftest import CHILD_PYTHONPATH
from tests.official_albert.training import scale_out_harness as H

pytestmark = [pytest.mark.large, pytest.mark.slow, pytest.mark.timing]


@pytest.fixture(scope="module")
def records(tmp_path_factory, spm_model_file):
  path, count = H.write_records(tmp_path_factory.mktemp("records"), spm_model_file)
  assert count > 100
  return path


def _config(records, **changes):
  config = H.deep_merge(H.TINY, {"task": {"train_data": {"input_path": records}}})
  return H.deep_merge(config, changes)


def test_one_device_mirrored_and_workers_train_the_same_model(tmp_path, records):
  config = _config(records)
  runs = {"one_device": H.start(tmp_path / "one", H.deep_merge(config, {"runtime": {
              "distribution_strategy": "one_device"}}), log=tmp_path / "one.log"),
          "mirrored": H.start(tmp_path / "mirrored", H.deep_merge(config, {"runtime": {"num_cpu_devices": 2}}),
                              log=tmp_path / "mirrored.log"),
          "per_replica": H.start(tmp_path / "per_replica", H.deep_merge(config, {
              "runtime": {"num_cpu_devices": 2}, "trainer": {"loss_normalization": "per_replica"}}),
              log=tmp_path / "per_replica.log")}
  logs = [tmp_path / f"w{i}.log" for i in range(2)]
  workers = H.start_workers(tmp_path / "workers", config, H.free_ports(2), logs)
  try:
    H.finish(list(runs.values()), [tmp_path / f"{k}.log" for k in runs])
    H.finish(workers, logs)
  finally:
    H.kill(list(runs.values()) + workers)
  one = H.model_weights(str(tmp_path / "one" / "ckpt-20"))
  for name in ("mirrored", "workers"):
    other = H.model_weights(str(tmp_path / name / "ckpt-20"))
    assert H.max_relative_difference(one, other) < 1e-5, name
  # The logged norm is the all-reduced gradient's (the mean over the last loop's steps), not a replica's times N.
  norm = H.logged(tmp_path / "one.log", 20, "global_norm")
  for log in (tmp_path / "mirrored.log", logs[0], logs[1]):
    assert H.logged(log, 20, "global_norm") == pytest.approx(norm, rel=1e-4), log
  # The records hold different numbers of masked positions per example: normalising each replica's MLM loss by its
  # own count (the reference on TPU) trains a different model, which the comparison above would have caught.
  per_replica = H.model_weights(str(tmp_path / "per_replica" / "ckpt-20"))
  assert H.max_relative_difference(one, per_replica) > 1e-4


def test_workers_resume_bit_identically_after_kill_9(tmp_path, records):
  """Both resume modes against one uninterrupted run (the mode only changes how a restart finds its position)."""
  config = _config(records, trainer={"train_steps": 40, "steps_per_loop": 1})
  full_logs = [tmp_path / f"full{i}.log" for i in range(2)]
  full = H.start_workers(tmp_path / "full", config, H.free_ports(2), full_logs)
  modes, procs = ("iterator", "skip"), list(full)
  try:
    killed = {m: H.start_workers(tmp_path / m, H.deep_merge(config, {"runtime": {"input_resume": m}}),
                                 H.free_ports(2), [tmp_path / f"{m}-killed{i}.log" for i in range(2)]) for m in modes}
    procs += killed["iterator"] + killed["skip"]
    # After a complete checkpoint: the model's and, with checkpointed iterators, each worker's own input position.
    # A position counts once the worker's checkpoint state file lists it (an .index alone may be a save in flight).
    listed = lambda i: H.latest_listed_position(tmp_path / "iterator" / "input_state" / f"worker-{i}")  # noqa: E731
    done = {"iterator": lambda: all(listed(i) >= 5
                                    for i in range(2)),
            "skip": lambda: H.latest_listed_position(tmp_path / "skip") >= 5}  # a finished save
    resumed = {}
    for mode in modes:
      assert H.wait_for(done[mode], H.TIMEOUT, killed[mode]), open(tmp_path / f"{mode}-killed0.log").read()[-3000:]
      killed[mode][1].send_signal(signal.SIGKILL)  # worker 1 dies; worker 0 would wait in the next collective
      H.kill(killed[mode])
      assert 5 <= H.latest_step(tmp_path / mode) < 40, "the run ended before it could be killed"
      logs = [tmp_path / f"{mode}-resumed{i}.log" for i in range(2)]
      resumed[mode] = H.start_workers(tmp_path / mode, H.deep_merge(config, {"runtime": {"input_resume": mode}}),
                                      H.free_ports(2), logs)
      procs += resumed[mode]
    for mode in modes:
      H.finish(resumed[mode], [tmp_path / f"{mode}-resumed{i}.log" for i in range(2)])
    H.finish(full, full_logs)
  finally:
    H.kill(procs)
  a = H.all_tensors(str(tmp_path / "full" / "ckpt-40"))
  assert sum(n.startswith("optimizer/") for n in a) > 20
  for mode in modes:
    for i in range(2):
      assert "Resumed from" in open(tmp_path / f"{mode}-resumed{i}.log").read(), (mode, i)
    b = H.all_tensors(str(tmp_path / mode / "ckpt-40"))
    assert set(a) == set(b), mode
    for name in a:  # skip mode: no batch read twice or missed, or the weights would differ
      np.testing.assert_array_equal(a[name], b[name], err_msg=f"{mode}: {name}")


def test_xla_with_two_replicas_matches_the_graph_run(tmp_path, records):
  config = _config(records, trainer={"train_steps": 10, "gradient_accumulation_steps": 2},
                   runtime={"num_cpu_devices": 2, "enable_op_determinism": False})
  xla_config = H.deep_merge(config, {"runtime": {"jit_compile": True}})
  graph = H.start(tmp_path / "graph", config, log=tmp_path / "graph.log")
  xla = H.start(tmp_path / "xla", xla_config, log=tmp_path / "xla.log")
  logs = [tmp_path / f"w{i}.log" for i in range(2)]
  workers = H.start_workers(tmp_path / "workers", H.deep_merge(xla_config, {"runtime": {"num_cpu_devices": 0}}),
                            H.free_ports(2), logs)  # XLA under MultiWorkerMirroredStrategy: collectives outside it
  try:
    H.finish([graph, xla], [tmp_path / "graph.log", tmp_path / "xla.log"])
    H.finish(workers, logs)
  finally:
    H.kill([graph, xla] + workers)
  a = H.model_weights(str(tmp_path / "graph" / "ckpt-10"))
  for name in ("xla", "workers"):
    assert H.max_relative_difference(a, H.model_weights(str(tmp_path / name / "ckpt-10"))) < 1e-5, name


_POISON_SCRIPT = r"""
import json, sys
import numpy as np
import tensorflow as tf
from official_albert import train
from official_albert.training import distribute, train_lib
import tasks.pretraining as pretraining

class PoisonedGradient(pretraining.PretrainingTask):
  # Step 3's gradient is +inf on replica 1 only (the loss stays finite): a fp16 overflow on one replica or worker.
  # Only while the scale is still the initial one: the step is redone after the skip, then it is clean.
  trainer = None

  def build_losses(self, labels, model_outputs, aux_losses=None, denominators=None):
    first_try = tf.equal(self.trainer.optimizer.dynamic_scale, self.trainer.optimizer.initial_scale)
    poison = tf.logical_and(tf.logical_and(tf.equal(self.trainer.global_step, 2), first_try), tf.equal(
        tf.distribute.get_replica_context().replica_id_in_sync_group, 1))

    @tf.custom_gradient
    def maybe_inf(x):
      return tf.identity(x), lambda dy: dy * tf.where(poison, np.inf, 1.0)

    outputs = dict(model_outputs, sop_logits=maybe_inf(model_outputs["sop_logits"]))
    return super().build_losses(labels, outputs, aux_losses, denominators)

params = train.build_params("albert_tiny_pretrain", params_override=sys.argv[2])
strategy = distribute.strategy_from_runtime(params.runtime)
params = train_lib.resolve_runtime(params, strategy)
with train_lib.runtime_scope(params):  # the mixed_float16 policy, as run_experiment sets it
  task = PoisonedGradient(params.task)
  trainer = train_lib.Trainer(params, sys.argv[1], task=task, strategy=strategy)
  task.trainer = trainer
  result = trainer.train()
weights = np.concatenate([v.numpy().ravel() for v in trainer.model.trainable_variables])
json.dump({"scale": float(trainer.optimizer.dynamic_scale.numpy()), "step": trainer.step,
           "finite": bool(np.all(np.isfinite(weights))), "history": [h[0] for h in result["history"]],
           "checksum": float(np.sum(weights.astype(np.float64) ** 2))}, open(sys.argv[3], "w"))
"""


def test_fp16_skips_a_non_finite_step_on_every_replica_and_worker(tmp_path, records):
  script = tmp_path / "poison.py"
  script.write_text(_POISON_SCRIPT)
  config = _config(records, trainer={"train_steps": 6, "steps_per_loop": 2, "checkpoint_interval": 6},
                   runtime={"mixed_precision_dtype": "mixed_float16"})

  def launch(name, override, env_extra=None):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=CHILD_PYTHONPATH, **(env_extra or {}))
    log = open(tmp_path / f"{name}.log", "w")
    import subprocess
    import sys
    return subprocess.Popen([sys.executable, str(script), str(tmp_path / name), json.dumps(override),
                             str(tmp_path / f"{name}.json")], cwd=H.REPO_ROOT, env=env, stdout=log,
                            stderr=subprocess.STDOUT)

  ports = H.free_ports(2)
  worker_config = H.deep_merge(config, {"runtime": {"distribution_strategy": "multi_worker_mirrored"}})
  procs = {"mirrored": launch("mirrored", H.deep_merge(config, {"runtime": {"num_cpu_devices": 2}})),
           "one_device": launch("one_device", H.deep_merge(config, {"runtime": {
               "distribution_strategy": "one_device"}})),
           "w0": launch("w0", worker_config, {"TF_CONFIG": local_cluster.local_tf_config(2, 0, ports)}),
           "w1": launch("w1", worker_config, {"TF_CONFIG": local_cluster.local_tf_config(2, 1, ports)})}
  try:
    H.finish(list(procs.values()), [tmp_path / f"{k}.log" for k in procs])
  finally:
    H.kill(list(procs.values()))
  results = {k: json.load(open(tmp_path / f"{k}.json")) for k in procs}
  clean = results["one_device"]  # one replica: replica 1 does not exist, nothing is poisoned
  for name in ("mirrored", "w0", "w1"):
    got = results[name]
    assert got["finite"], name
    assert got["scale"] == clean["scale"] / 2, (name, got["scale"], clean["scale"])  # halved once, everywhere
    assert got["step"] == 6  # the skipped step was redone: 6 optimizer updates
  assert results["w0"]["checksum"] == results["w1"]["checksum"]  # both workers took the same branch


def test_sigterm_inside_a_long_loop_checkpoints_after_the_current_step(tmp_path, records):
  config = _config(records, trainer={"train_steps": 100_000, "steps_per_loop": 1000, "checkpoint_interval": 1000,
                                     "summary_interval": 1000})
  log, marker = tmp_path / "term.log", tmp_path / "steps.txt"
  proc = H.start(tmp_path / "term", config, log=log, step_marker=marker)
  try:
    # Event, not a sleep: the marker gains a line after each completed step of the first 1000-step loop, so the
    # notice lands mid-loop on any machine, however slow or loaded (a fixed 2 s got step 0 on a slow CPU).
    assert H.wait_for(lambda: marker.exists() and marker.read_text().count("step") >= 1, H.TIMEOUT, [proc]), (
        open(log).read()[-3000:])
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=H.TIMEOUT)
  finally:
    H.kill([proc])
  out = open(log).read()
  assert proc.returncode == 75, out[-3000:]  # preempted, not finished
  step = H.latest_step(str(tmp_path / "term"))
  # Not at the loop boundary: the loop stopped after the step in flight, at or after the step the marker showed.
  assert 0 < step < 1000, step
  assert marker.read_text().count("step") == step
  assert f"Preempted: saved a checkpoint at step {step}" in out


# A worker's eval and predict runs (the one-device reference runs the same function in the test's process).
_EVAL_PREDICT_SCRIPT = r"""
import sys
from tests.official_albert.training import scale_out_harness as H
H.eval_and_predict(*sys.argv[1:4])
"""


@pytest.fixture(scope="module")
def sst2_model(tmp_path_factory, spm_model_file):
  """A 4-step SST-2-like classifier; dev (13 rows) and test (11 rows) do not fill the last batch of 4."""
  from data_prep import create_finetuning_data as cfd
  root = tmp_path_factory.mktemp("sst2")
  (root / "SST-2").mkdir()
  words = ["a good film", "a bad film", "great fun", "dull and slow", "fine acting", "an awful mess"]
  rows = lambda n, labelled: [(f"{words[i % 6]} {i}\t{i % 2}" if labelled else f"{i}\t{words[i % 6]} {i}")  # noqa
                              for i in range(n)]
  (root / "SST-2" / "train.tsv").write_text("sentence\tlabel\n" + "\n".join(rows(16, True)) + "\n")
  (root / "SST-2" / "dev.tsv").write_text("sentence\tlabel\n" + "\n".join(rows(13, True)) + "\n")
  (root / "SST-2" / "test.tsv").write_text("index\tsentence\n" + "\n".join(rows(11, False)) + "\n")
  recs = cfd.create_finetuning_data("glue/sst-2", str(root / "records"), spm_model_file,
                                    splits=["train", "dev", "test"], input_dir=str(root), max_seq_length=32)
  data = lambda split, batch, training=False: {"input_path": recs[split]["record_path"],  # noqa: E731
                                               "global_batch_size": batch, "seq_length": 32,
                                               "is_training": training, "drop_remainder": training, "seed": 1}
  override = {
      "task": {"model": dict(H.TINY["task"]["model"], preset="", max_position_embeddings=64),
               "classifier_dropout": 0.0, "train_data": data("train", 8, True),
               "validation_data": data("dev", 4), "predict_data": data("test", 4),
               "predict_file": str(root / "SST-2" / "test.tsv")},
      "trainer": {"train_steps": 4, "steps_per_loop": 2, "checkpoint_interval": 4, "validation_steps": -1,
                  "learning_rate": 1e-3, "warmup_steps": 0},
      "runtime": {"distribution_strategy": "one_device", "seed": 3}}
  # Trained in this process (the train binary's own entry point): a child would add ~8 s of CPU to start.
  from official_albert import train
  result = train.run("glue/sst-2", "train", str(root / "model"), params_override=json.dumps(override))
  assert (result["status"], result["global_step"]) == ("completed", 4)
  return root, override


def test_eval_and_predict_under_workers_equal_one_process(tmp_path, sst2_model):
  import shutil
  import subprocess
  import sys
  root, override = sst2_model
  script = tmp_path / "eval_predict.py"
  script.write_text(_EVAL_PREDICT_SCRIPT)
  runs = {"one": {"distribution_strategy": "one_device"}, "mirrored": {"num_cpu_devices": 2},
          "w0": {"distribution_strategy": "multi_worker_mirrored"},
          "w1": {"distribution_strategy": "multi_worker_mirrored"}}
  ports = H.free_ports(2)
  procs, logs, args = [], [], {}
  for name, runtime in runs.items():
    model_dir = tmp_path / ("workers" if name.startswith("w") else name)
    if not model_dir.exists():
      shutil.copytree(root / "model", model_dir)
    config = H.deep_merge(override, {"runtime": dict({"distribution_strategy": ""}, **runtime)})
    args[name] = [str(model_dir), json.dumps(config), str(tmp_path / f"{name}.json")]
    if name == "one":  # one device: this process (below), while the others run
      continue
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=CHILD_PYTHONPATH)
    if name.startswith("w"):
      env["TF_CONFIG"] = local_cluster.local_tf_config(2, int(name[1]), ports)
    logs.append(tmp_path / f"{name}.log")
    procs.append(subprocess.Popen([sys.executable, str(script)] + args[name], cwd=H.REPO_ROOT, env=env,
                                  stdout=open(logs[-1], "w"), stderr=subprocess.STDOUT))
  try:
    H.eval_and_predict(*args["one"])
    H.finish(procs, logs)
  finally:
    H.kill(procs)
  got = {name: json.load(open(tmp_path / f"{name}.json")) for name in runs}
  one = got["one"]["eval"]
  assert one["eval_steps"] == 4 and set(one) >= {"eval_accuracy", "eval_loss", "cls_accuracy"}
  for name in ("mirrored", "w0", "w1"):
    other = got[name]["eval"]
    assert set(other) == set(one), name
    for key, value in one.items():
      assert other[key] == pytest.approx(value, rel=1e-6, abs=1e-7), (name, key)
  # Only the chief wrote files; its files equal the single process's.
  one_file = json.load(open(tmp_path / "one" / "eval_results.json"))
  for name in ("mirrored", "workers"):
    saved = json.load(open(tmp_path / name / "eval_results.json"))
    assert saved.pop("init") == one_file["init"] == "random"  # a string: no task.init_checkpoint here
    assert saved == pytest.approx({k: v for k, v in one_file.items() if k != "init"}, rel=1e-6)
    assert (tmp_path / name / "predictions" / "SST-2.tsv").read_text() == (
        tmp_path / "one" / "predictions" / "SST-2.tsv").read_text()
  rows = (tmp_path / "one" / "predictions" / "SST-2.tsv").read_text().splitlines()
  assert rows[0] == "index\tprediction" and [r.split("\t")[0] for r in rows[1:]] == [str(i) for i in range(11)]


def test_tf_data_service_feeds_the_same_batches(tmp_path, records):
  script = tmp_path / "service.py"
  script.write_text(r'''
import json, sys
import numpy as np
import tensorflow as tf
from official_albert import train
from official_albert.training import train_lib
service = tf.data.experimental.service
import socket
with socket.socket() as s:  # the dispatcher lists its workers (the HINT sharding of the training stream needs it)
  s.bind(("127.0.0.1", 0))
  port = s.getsockname()[1]
dispatcher = service.DispatchServer(service.DispatcherConfig(port=0, worker_addresses=[f"127.0.0.1:{port}"]))
worker = service.WorkerServer(service.WorkerConfig(dispatcher_address=dispatcher.target.split("://")[1],
                                                   worker_address=f"127.0.0.1:{port}", port=port))
override = json.loads(sys.argv[2])
weights = {}
for name, address in (("local", ""), ("service", dispatcher.target)):
  params = train.build_params("albert_tiny_pretrain", params_override=json.dumps(
      dict(override, runtime=dict(override["runtime"], tf_data_service_address=address))))
  trainer = train_lib.run_experiment(params, f"{sys.argv[1]}/{name}", "train")["trainer"]
  weights[name] = np.concatenate([v.numpy().ravel() for v in trainer.model.trainable_variables])
  print(name, trainer.input_resume)
print("max_abs_diff", float(np.abs(weights["local"] - weights["service"]).max()))
''')
  import subprocess
  import sys
  config = _config(records, trainer={"train_steps": 6}, runtime={"distribution_strategy": "one_device"})
  proc = subprocess.run([sys.executable, str(script), str(tmp_path), json.dumps(config)], cwd=H.REPO_ROOT,
                        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=CHILD_PYTHONPATH),
                        capture_output=True, text=True, timeout=H.TIMEOUT)
  assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
  assert "local iterator" in proc.stdout and "service skip" in proc.stdout  # a service iterator is not saved
  assert float(proc.stdout.split("max_abs_diff ")[1].split()[0]) == 0.0
