"""Scale-out trains the same model: one device vs Mirrored over logical CPUs vs MultiWorkerMirroredStrategy processes.

Each test runs real train-binary processes on real pretraining records (loopback only, bounded by timeouts):
- the same global batches give the same weights after 20 LAMB steps on 1 device, 2 logical CPUs and 2 workers,
  while the reference's per-replica loss normalisation does not (so the comparison can fail);
- kill -9 of worker 1 after a checkpoint, restart of both: the final checkpoint is bit-identical to an
  uninterrupted run, with checkpointed iterators and in skip mode (the TPU path);
- XLA with 2 replicas equals the graph run; fp16 skips a step whose gradient is non-finite on one replica or
  worker, on all of them, halving the scale everywhere;
- SIGTERM during a 1000-step loop checkpoints after the step in flight, not at the end of the loop.
"""

import json
import os
import signal
import time

import numpy as np
import pytest

from tests.official_albert.training import scale_out_harness as H

pytestmark = pytest.mark.slow


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
  # The records hold different numbers of masked positions per example: normalising each replica's MLM loss by its
  # own count (the reference on TPU) trains a different model, which the comparison above would have caught.
  per_replica = H.model_weights(str(tmp_path / "per_replica" / "ckpt-20"))
  assert H.max_relative_difference(one, per_replica) > 1e-4


@pytest.mark.parametrize("input_resume", ["iterator", "skip"])
def test_workers_resume_bit_identically_after_kill_9(tmp_path, records, input_resume):
  config = _config(records, trainer={"train_steps": 40, "steps_per_loop": 1},
                   runtime={"input_resume": input_resume})
  full_logs = [tmp_path / f"full{i}.log" for i in range(2)]
  full = H.start_workers(tmp_path / "full", config, H.free_ports(2), full_logs)
  killed_dir = tmp_path / "killed"
  logs = [tmp_path / f"killed{i}.log" for i in range(2)]
  killed = H.start_workers(killed_dir, config, H.free_ports(2), logs)
  try:
    assert H.wait_for(lambda: H.latest_step(killed_dir) >= 5, H.TIMEOUT, killed), H.output(killed[0], logs[0])[-3000:]
    killed[1].send_signal(signal.SIGKILL)  # worker 1 dies; worker 0 would wait in the next collective: kill it too
    H.kill(killed)
    step_at_kill = H.latest_step(killed_dir)
    assert 5 <= step_at_kill < 40, "the run ended before it could be killed"
    if input_resume == "iterator":
      assert (killed_dir / "input_state" / "worker-1" / "ckpt-5.index").exists()  # worker 1's own position
    logs = [tmp_path / f"resumed{i}.log" for i in range(2)]
    resumed = H.start_workers(killed_dir, config, H.free_ports(2), logs)
    H.finish(resumed, logs)
    H.finish(full, full_logs)
  finally:
    H.kill(full + killed)
  assert "Resumed from" in open(logs[0]).read() and "Resumed from" in open(logs[1]).read()
  a, b = H.all_tensors(str(tmp_path / "full" / "ckpt-40")), H.all_tensors(str(killed_dir / "ckpt-40"))
  assert set(a) == set(b) and sum(n.startswith("optimizer/") for n in a) > 20
  for name in a:
    np.testing.assert_array_equal(a[name], b[name], err_msg=name)


def test_xla_with_two_replicas_matches_the_graph_run(tmp_path, records):
  config = _config(records, trainer={"train_steps": 10, "gradient_accumulation_steps": 2},
                   runtime={"num_cpu_devices": 2, "enable_op_determinism": False})
  graph = H.start(tmp_path / "graph", config, log=tmp_path / "graph.log")
  xla = H.start(tmp_path / "xla", H.deep_merge(config, {"runtime": {"jit_compile": True}}), log=tmp_path / "xla.log")
  try:
    H.finish([graph, xla], [tmp_path / "graph.log", tmp_path / "xla.log"])
  finally:
    H.kill([graph, xla])
  a, b = H.model_weights(str(tmp_path / "graph" / "ckpt-10")), H.model_weights(str(tmp_path / "xla" / "ckpt-10"))
  assert H.max_relative_difference(a, b) < 1e-5


_POISON_SCRIPT = r"""
import json, sys
import numpy as np
import tensorflow as tf
from official_albert import train
from official_albert.training import distribute, train_lib
import tasks.pretraining as pretraining

class PoisonedGradient(pretraining.PretrainingTask):
  # Step 3's gradient is +inf on replica 1 only (the loss stays finite): a fp16 overflow on one replica or worker.
  step = None

  def build_losses(self, labels, model_outputs, aux_losses=None, denominators=None):
    poison = tf.logical_and(tf.equal(self.step, 2), tf.equal(
        tf.distribute.get_replica_context().replica_id_in_sync_group, 1))

    @tf.custom_gradient
    def maybe_inf(x):
      return tf.identity(x), lambda dy: dy * tf.where(poison, np.inf, 1.0)

    outputs = dict(model_outputs, sop_logits=maybe_inf(model_outputs["sop_logits"]))
    return super().build_losses(labels, outputs, aux_losses, denominators)

params = train.build_params("albert_tiny_pretrain", params_override=sys.argv[2])
strategy = distribute.strategy_from_runtime(params.runtime)
params = train_lib.resolve_runtime(params, strategy)
train_lib._apply_runtime(params)  # the mixed_float16 policy, as run_experiment sets it
task = PoisonedGradient(params.task)
trainer = train_lib.Trainer(params, sys.argv[1], task=task, strategy=strategy)
task.step = trainer.global_step
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
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=str(H.REPO_ROOT), **(env_extra or {}))
    log = open(tmp_path / f"{name}.log", "w")
    import subprocess
    import sys
    return subprocess.Popen([sys.executable, str(script), str(tmp_path / name), json.dumps(override),
                             str(tmp_path / f"{name}.json")], cwd=H.REPO_ROOT, env=env, stdout=log,
                            stderr=subprocess.STDOUT)

  from official_albert.training import distribute
  ports = H.free_ports(2)
  worker_config = H.deep_merge(config, {"runtime": {"distribution_strategy": "multi_worker_mirrored"}})
  procs = {"mirrored": launch("mirrored", H.deep_merge(config, {"runtime": {"num_cpu_devices": 2}})),
           "one_device": launch("one_device", H.deep_merge(config, {"runtime": {
               "distribution_strategy": "one_device"}})),
           "w0": launch("w0", worker_config, {"TF_CONFIG": distribute.local_tf_config(2, 0, ports)}),
           "w1": launch("w1", worker_config, {"TF_CONFIG": distribute.local_tf_config(2, 1, ports)})}
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
  log = tmp_path / "term.log"
  proc = H.start(tmp_path / "term", config, log=log)
  try:
    # The first loop of 1000 steps has started once its trace is done; the notice then lands mid-loop.
    assert H.wait_for(lambda: "Started the first training loop" in open(log).read(), H.TIMEOUT, [proc]), (
        open(log).read()[-3000:])
    time.sleep(2)
    signalled = time.time()
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=60)
    elapsed = time.time() - signalled
  finally:
    H.kill([proc])
  out = open(log).read()
  assert proc.returncode == 75, out[-3000:]  # preempted, not finished
  step = H.latest_step(str(tmp_path / "term"))
  assert 0 < step < 1000, step  # not at the loop boundary: the loop stopped after the step in flight
  assert f"Preempted: saved a checkpoint at step {step}" in out
  assert elapsed < 30
