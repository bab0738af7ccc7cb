"""The tf.data service path keeps the global batches (issue 28 item 7): two service workers, two consumers.

Before: each pipeline applied `distribute(processing_mode="parallel_epochs", job_name=...)` with a job name from
Python's salted `hash(model_dir)`, so the pipelines of one run had different jobs (the docstring said one), and with
several service workers every element came once per worker; with one shared job the consumers would split the
batches between them. Now the global stream is sharded by global batch over the workers and coordinated reads give
each consumer its slice of the same global batch every round, each global batch once, under one job name that every
process computes alike. With one service worker the order is the local stream's (test_scale_out: identical weights);
with W workers the W batches of each window of W rounds come in the order the service visits its workers.
"""

import os
import socket
import subprocess
import sys
import threading

import pytest
import tensorflow as tf

from official_albert.training import input_feed
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


@pytest.mark.slow
def test_the_job_name_is_the_same_in_every_process_of_a_run():
  code = "from official_albert.training import input_feed; print(input_feed.service_job_name('/runs/x/', 7))"
  names = set()
  for seed in ("1", "2"):
    env = dict(os.environ, PYTHONHASHSEED=seed, PYTHONPATH=CHILD_PYTHONPATH, TF_CPP_MIN_LOG_LEVEL="3")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    names.add(out.stdout.strip().splitlines()[-1])
  assert names == {input_feed.service_job_name("/runs/x", 7)}
  assert input_feed.service_job_name("/runs/x", 7) != input_feed.service_job_name("/runs/x", 8)
