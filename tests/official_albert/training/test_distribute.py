"""Tests for official_albert.training.distribute, and LAMB under MirroredStrategy (2 logical CPUs, in a subprocess)."""

import json
import os
import pathlib
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import tensorflow as tf

from official_albert.training import distribute
from tests import local_cluster

REPO_ROOT = pathlib.Path(__file__).resolve().parents[3]


def test_default_and_one_device():
  assert distribute.get_distribution_strategy("off") is tf.distribute.get_strategy()
  one = distribute.get_distribution_strategy("One_Device", num_gpus=0)
  assert isinstance(one, tf.distribute.OneDeviceStrategy)
  assert one.num_replicas_in_sync == 1
  assert "CPU:0" in one.extended.worker_devices[0].upper()


def test_mirrored_without_gpus_falls_back_to_one_cpu_replica():
  """Only the factory's fallback (no GPU, no device list → /cpu:0). Training with two replicas is tested where there
  are two: `test_lamb_mirrored_two_cpus_equals_one_device` below (2 logical CPUs, in a subprocess) and
  tests/official_albert/training/test_scale_out.py (1 device vs Mirrored over 2 logical CPUs vs 2 workers)."""
  strategy = distribute.get_distribution_strategy("mirrored", num_gpus=0)
  assert isinstance(strategy, tf.distribute.MirroredStrategy)
  assert strategy.num_replicas_in_sync == 1
  assert [d.upper() for d in strategy.extended.worker_devices] == ["/JOB:LOCALHOST/REPLICA:0/TASK:0/DEVICE:CPU:0"]
  assert distribute.is_chief(strategy)


@pytest.mark.parametrize("kwargs, match", [
    (dict(distribution_strategy="parameter_server"), "Unknown distribution_strategy='parameter_server'"),
    (dict(distribution_strategy="one_device", num_gpus=2), "num_gpus=2"),
    (dict(distribution_strategy="mirrored", all_reduce_alg="tree"), "Unknown all_reduce_alg='tree'"),
    (dict(distribution_strategy="multi_worker_mirrored", all_reduce_alg="tree"), "Unknown all_reduce_alg='tree'"),
    (dict(distribution_strategy=None), "must be a string"),
    (dict(distribution_strategy="mirrored", num_gpus=-1), "num_gpus"),
])
def test_errors_name_the_flag(kwargs, match):
  with pytest.raises(ValueError, match=match):
    distribute.get_distribution_strategy(**kwargs)


def test_tpu_path_uses_resolver_and_initialises(monkeypatch):
  calls = []

  class FakeResolver:
    def __init__(self, tpu):
      calls.append(("resolver", tpu))

  monkeypatch.setattr(tf.distribute.cluster_resolver, "TPUClusterResolver", FakeResolver)
  monkeypatch.setattr(tf.config, "experimental_connect_to_cluster", lambda r: calls.append(("connect",)))
  monkeypatch.setattr(tf.tpu.experimental, "initialize_tpu_system", lambda r: calls.append(("init",)))
  monkeypatch.setattr(tf.distribute, "TPUStrategy", lambda r: ("strategy", r))
  kind, resolver = distribute.get_distribution_strategy("tpu", tpu_address="grpc://10.0.0.2:8470")
  assert kind == "strategy" and isinstance(resolver, FakeResolver)
  assert calls == [("resolver", "grpc://10.0.0.2:8470"), ("connect",), ("init",)]
  calls.clear()
  distribute.get_distribution_strategy("tpu", tpu_address="")
  assert calls == [("resolver", "local"), ("init",)]  # TPU VM: no remote cluster connection


class _FakeStrategy:
  """Carries a cluster resolver the way MultiWorkerMirroredStrategy does, without starting a server."""

  def __init__(self, cluster, task_type, task_id):
    self.cluster_resolver = tf.distribute.cluster_resolver.SimpleClusterResolver(
        tf.train.ClusterSpec(cluster), task_type=task_type, task_id=task_id)


def test_chief_and_worker_dirs(tmp_path):
  workers = {"worker": ["127.0.0.1:1", "127.0.0.1:2"]}
  w0, w1 = _FakeStrategy(workers, "worker", 0), _FakeStrategy(workers, "worker", 1)
  with_chief = {"chief": ["127.0.0.1:3"], **workers}
  chief, w0c = _FakeStrategy(with_chief, "chief", 0), _FakeStrategy(with_chief, "worker", 0)
  assert distribute.is_chief(None) and distribute.is_chief(w0) and distribute.is_chief(chief)
  assert not distribute.is_chief(w1) and not distribute.is_chief(w0c)
  assert distribute.num_workers(w0) == 2 and distribute.num_workers(chief) == 3 and distribute.num_workers(None) == 1
  model_dir = str(tmp_path)
  assert distribute.write_dirpath(model_dir, w0) == model_dir
  temp = distribute.write_dirpath(model_dir, w1)
  assert temp == os.path.join(model_dir, "workertemp_1")
  tf.io.gfile.makedirs(temp)
  (pathlib.Path(temp) / "ckpt-1.index").write_text("x")
  distribute.remove_temp_dirpath(model_dir, w0)  # chief: nothing removed
  assert os.path.isdir(temp)
  distribute.remove_temp_dirpath(model_dir, w1)
  assert not os.path.exists(temp) and os.path.isdir(model_dir)


def test_local_tf_config_and_free_port():
  port = local_cluster.find_free_port()
  assert 0 < port < 65536
  config = json.loads(local_cluster.local_tf_config(2, 1, [port, port + 1]))
  assert config == {"cluster": {"worker": [f"127.0.0.1:{port}", f"127.0.0.1:{port + 1}"]},
                    "task": {"type": "worker", "index": 1}}
  with pytest.raises(ValueError, match="ports"):
    local_cluster.local_tf_config(2, 0, [port])


# The child process: logical devices must be configured before TensorFlow initialises them.
_MIRRORED_SCRIPT = textwrap.dedent("""
    import json, os
    os.environ["TF_CPP_MIN_LOG_LEVEL"] = "2"
    import numpy as np, tensorflow as tf, keras
    from official_albert.training import distribute
    from official_albert.training import gradients, optimization

    devices = distribute.configure_logical_cpus(2)
    rng = np.random.default_rng(0)
    X = rng.standard_normal((8, 6)).astype(np.float32) * 3
    Y = rng.standard_normal((8, 2)).astype(np.float32)
    GLOBAL_BATCH = 8

    def build():
      keras.utils.set_random_seed(0)
      inp = keras.Input((6,))
      x = keras.layers.Dense(5, name="dense", kernel_initializer=keras.initializers.GlorotUniform(seed=1))(inp)
      x = keras.layers.LayerNormalization(name="LayerNorm", epsilon=1e-12)(x)
      out = keras.layers.Dense(2, name="output", kernel_initializer=keras.initializers.GlorotUniform(seed=2))(x)
      model = keras.Model(inp, out)
      opt = optimization.create_optimizer("lamb", 0.05, num_train_steps=20, num_warmup_steps=1)
      opt.build(model.trainable_variables)
      return model, opt

    def loss_fn(model, x, y):
      # Sum over the local examples divided by the global batch: replicas' gradients add up to the full gradient.
      return tf.reduce_sum(tf.square(model(x) - y)) / GLOBAL_BATCH

    def run(strategy, accumulate):
      with strategy.scope():
        model, opt = build()
      initial = [v.numpy().copy() for v in model.trainable_variables]

      def grad_fn(batch):
        with tf.GradientTape() as tape:
          loss = loss_fn(model, *batch)
        return loss, tape.gradient(loss, model.trainable_variables)

      def replica_step(x, y):
        if accumulate:
          # Each replica's 4 examples as 2 micro-batches of 2 whose losses are divided by the whole global batch (8):
          # the sum of the micro-batch gradients, summed over replicas, is the gradient of the batch of 8.
          loss, grads = gradients.accumulate_micro_batch_gradients(grad_fn, (x, y), 2)
        else:
          loss, grads = grad_fn((x, y))
        opt.apply(grads, model.trainable_variables)
        return loss

      @tf.function
      def step(dist_x, dist_y):
        return strategy.reduce("SUM", strategy.run(replica_step, (dist_x, dist_y)), axis=None)

      for _ in range(3):
        ds = tf.data.Dataset.from_tensor_slices((X, Y)).batch(8)
        dx, dy = next(iter(strategy.experimental_distribute_dataset(ds)))
        step(dx, dy)
      moved = max(float(np.abs(v.numpy() - w0).max()) for v, w0 in zip(model.trainable_variables, initial))
      return ({v.path: v.numpy().tolist() for v in model.trainable_variables}, int(opt.iterations.numpy()),
              strategy.num_replicas_in_sync, moved, float(opt.global_norm))

    one = run(distribute.get_distribution_strategy("one_device"), False)
    mirrored = run(distribute.get_distribution_strategy("mirrored", devices=devices), False)
    mirrored_acc = run(distribute.get_distribution_strategy("mirrored", devices=devices), True)
    print("RESULT" + json.dumps({"one": one, "mirrored": mirrored, "mirrored_acc": mirrored_acc}))
""")


def script_result(script: str):
  """Runs `script` in a fresh CPU-only Python (its own logical devices) and returns the JSON of its last RESULT line."""
  env = dict(os.environ, PYTHONPATH=str(REPO_ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
             TF_CPP_MIN_LOG_LEVEL="2", CUDA_VISIBLE_DEVICES="")
  proc = subprocess.run([sys.executable, "-c", script], cwd=REPO_ROOT, env=env, capture_output=True, text=True,
                        timeout=300)
  assert proc.returncode == 0, proc.stderr[-4000:]
  line = [l for l in proc.stdout.splitlines() if l.startswith("RESULT")][-1]
  return json.loads(line[len("RESULT"):])


@pytest.mark.slow
def test_lamb_mirrored_two_cpus_equals_one_device():
  result = script_result(_MIRRORED_SCRIPT)
  (one_w, one_it, one_n, moved, one_norm), (mir_w, mir_it, mir_n, _, mir_norm) = result["one"], result["mirrored"]
  acc_w, acc_it, acc_n, _, acc_norm = result["mirrored_acc"]
  # The clip sees the whole batch's gradient (sum over replicas first); its norm is > 1, so clipping was active.
  assert one_norm > 1.0
  np.testing.assert_allclose([mir_norm, acc_norm], [one_norm, one_norm], rtol=1e-5)
  assert (one_n, mir_n, acc_n) == (1, 2, 2)
  assert one_it == mir_it == acc_it == 3
  assert moved > 1e-3  # the steps did something (lr(0) = 0 freezes only the first)
  for path in one_w:
    np.testing.assert_allclose(mir_w[path], one_w[path], rtol=1e-5, atol=1e-6, err_msg=path)
    np.testing.assert_allclose(acc_w[path], one_w[path], rtol=1e-5, atol=1e-6, err_msg=path)
  assert set(one_w) == {"dense/kernel", "dense/bias", "LayerNorm/gamma", "LayerNorm/beta",
                                        "output/kernel", "output/bias"}
