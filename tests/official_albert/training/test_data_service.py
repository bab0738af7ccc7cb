"""The tf.data service path keeps the global batches (issue 28 item 7): two service workers, two consumers.

Before: each pipeline applied `distribute(processing_mode="parallel_epochs", job_name=...)` with a job name from
Python's salted `hash(model_dir)`, so the pipelines of one run had different jobs (the docstring said one), and with
several service workers every element came once per worker; with one shared job the consumers would split the
batches between them. Now the global stream is sharded by global batch over the workers and coordinated reads give
each consumer its slice of the same global batch every round, each global batch once, under one job name that every
process computes alike. With one service worker the order is the local stream's (test_scale_out: identical weights);
with W workers the W batches of each window of W rounds come in the order the service visits its workers.

A run restarted at the step it had reached (audit F3) used to get the dead attempt's job name and fail ("consumer was
restarted with the same iteration name"); the name now carries an attempt id that the chief draws and every worker
receives, so each attempt joins a new job and reads the same data.
"""

import os
import socket
import subprocess
import sys
import threading

import pytest
import tensorflow as tf

from official_albert.training import input_feed
from tests import local_cluster
from tests.conftest import CHILD_PYTHONPATH

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
GLOBAL_BATCH, CONSUMERS, LOCAL = 8, 2, 2  # 4 replicas: 2 consumers (input pipelines) of 2 replicas each


def _free_port():
  with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    return s.getsockname()[1]


def _service(num_workers):
  """A dispatcher that knows its workers (HINT sharding needs the list) and the workers."""
  service = tf.data.experimental.service
  addresses = [f"127.0.0.1:{_free_port()}" for _ in range(num_workers)]
  dispatcher = service.DispatchServer(service.DispatcherConfig(port=0, worker_addresses=addresses))
  workers = [service.WorkerServer(service.WorkerConfig(dispatcher_address=dispatcher.target.split("://")[1],
                                                       worker_address=a, port=int(a.split(":")[1])))
             for a in addresses]
  return dispatcher, workers


def _global_stream(data_config):
  """A seeded, infinite stream of global batches (what `task.build_inputs` returns for training)."""
  del data_config
  rows = tf.data.Dataset.range(1000).shuffle(64, seed=5).repeat()
  return rows.batch(GLOBAL_BATCH, drop_remainder=True).map(lambda x: {"x": x, "y": x * 10})


class _Data:
  global_batch_size = GLOBAL_BATCH


def _batches(topology, service="", job="j", skip=0, count=10):
  stream = input_feed.training_stream(_global_stream, _Data(), topology, skip, service, job)
  return [{k: v.tolist() for k, v in b.items()} for b in stream.take(count).as_numpy_iterator()]


def _global_batches(per_consumer):
  """The global batches that the consumers' per-replica batches form, round by round (replicas 0-1, then 2-3)."""
  rounds = len(per_consumer[0]) // LOCAL
  return [tuple(x for c in range(CONSUMERS) for r in range(LOCAL) for x in per_consumer[c][k * LOCAL + r]["x"])
          for k in range(rounds)]


@pytest.mark.large
@pytest.mark.slow
@pytest.mark.timing
def test_two_service_workers_and_two_consumers_share_each_global_batch_once():
  """Every round, the two consumers hold the two halves of ONE global batch of the local stream; every global batch
  comes once; the W = 2 service workers take turns, so each window of 2 rounds holds global batches 2k and 2k+1 (in
  the order the service's rounds visit the workers, which it does not fix: 0,1 or 1,0)."""
  dispatcher, workers = _service(2)
  topologies = [input_feed.Topology(CONSUMERS * LOCAL, c * LOCAL, LOCAL) for c in range(CONSUMERS)]
  stream = [tuple(b["x"].tolist()) for b in _global_stream(None).take(40).as_numpy_iterator()]
  for skip in (0, 3):  # a fresh run, and one resumed at global batch 3 (runtime.input_resume=skip)
    job = input_feed.service_job_name("/runs/x", skip)
    local = [_batches(t, skip=skip) for t in topologies]
    assert _global_batches(local) == stream[skip:skip + 5]
    served = [None] * CONSUMERS

    def consume(c, job=job, skip=skip):
      served[c] = _batches(topologies[c], dispatcher.target, job, skip)

    threads = [threading.Thread(target=consume, args=(c,)) for c in range(CONSUMERS)]
    for thread in threads:
      thread.start()
    for thread in threads:
      thread.join(timeout=600)
    batches = _global_batches(served)
    assert all(b in stream for b in batches), (skip, batches)  # each round: one global batch, sliced consistently
    indices = [stream.index(b) - skip for b in batches]
    assert len(set(indices)) == len(indices)
    assert [sorted(indices[k:k + 2]) for k in (0, 2)] == [[0, 1], [2, 3]], indices
  del workers


@pytest.mark.large
@pytest.mark.slow
@pytest.mark.timing
def test_the_job_name_is_the_same_in_every_process_of_a_run():
  """Two MultiWorkerMirroredStrategy workers with differently salted `hash()` get one name: the model directory's
  digest and the chief's attempt id (`attempt_id` broadcasts it)."""
  code = ("import tensorflow as tf; from official_albert.training import input_feed; "
          "strategy = tf.distribute.MultiWorkerMirroredStrategy(); "
          "print(input_feed.service_job_name('/runs/x/', 7, input_feed.attempt_id(strategy)))")
  ports = local_cluster.free_ports(2)
  procs = [subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ, PYTHONHASHSEED=str(i + 1), PYTHONPATH=CHILD_PYTHONPATH,
                                     TF_CPP_MIN_LOG_LEVEL="3", TF_CONFIG=local_cluster.local_tf_config(2, i, ports)))
           for i in range(2)]
  try:
    outputs = [proc.communicate(timeout=600) for proc in procs]
  finally:  # (one worker dead: the other would wait for it in the collective)
    for proc in procs:
      if proc.poll() is None:
        proc.kill()
        proc.wait()
  assert all(proc.returncode == 0 for proc in procs), [err[-2000:] for _, err in outputs]
  names = {out.strip().splitlines()[-1] for out, _ in outputs}
  assert len(names) == 1, names
  name = names.pop()
  assert name == input_feed.service_job_name("/runs/x", 7, int(name.rsplit("_", 1)[1], 16))
  assert input_feed.service_job_name("/runs/x", 7, 1) != input_feed.service_job_name("/runs/x", 8, 1)
  assert input_feed.service_job_name("/runs/x", 7, 1) != input_feed.service_job_name("/runs/x", 7, 2)


_ATTEMPT = """
import sys
import tensorflow as tf
from official_albert.training import input_feed
class Data:
  global_batch_size = 4
stream = lambda _: tf.data.Dataset.range(10**6).batch(4, drop_remainder=True).map(lambda x: {"x": x})
job = input_feed.service_job_name("/runs/x", 0)  # the same model_dir and resume step in both attempts
batches = input_feed.training_stream(stream, Data(), input_feed.Topology(), 0, sys.argv[1], job)
print([int(b["x"][0]) // 4 for b in batches.take(5)])
"""


@pytest.mark.slow
def test_a_run_restarted_at_the_same_step_joins_a_new_job():
  """Two attempts (processes) of one run starting the stream at the same global batch, the first gone before the
  second starts while the dispatcher still holds its job: both read global batches 0-4."""
  dispatcher, workers = _service(1)
  env = dict(os.environ, PYTHONPATH=CHILD_PYTHONPATH, TF_CPP_MIN_LOG_LEVEL="3")
  for attempt in (1, 2):
    out = subprocess.run([sys.executable, "-c", _ATTEMPT, dispatcher.target], env=env, capture_output=True, text=True,
                         timeout=600)
    assert out.returncode == 0, (attempt, out.stderr[-2000:])  # before: FailedPreconditionError in attempt 2
    assert out.stdout.strip().splitlines()[-1] == "[0, 1, 2, 3, 4]", attempt
  del workers
