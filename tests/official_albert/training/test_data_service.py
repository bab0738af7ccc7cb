"""The tf.data service path keeps the global batches (issue 28 item 7): two service workers, two consumers.

Before: each pipeline applied `distribute(processing_mode="parallel_epochs", job_name=...)` with a job name from
Python's salted `hash(model_dir)`, so the pipelines of one run had different jobs (the docstring said one), and with
several service workers every element came once per worker; with one shared job the consumers would split the
batches between them. Now the global stream is sharded by global batch over the workers and coordinated reads give
each consumer its slice of every global batch, in order, under one job name that every process computes alike.
"""

import os
import socket
import subprocess
import sys
import threading

import numpy as np
import pytest
import tensorflow as tf

from official_albert.training import input_feed

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


@pytest.mark.slow
@pytest.mark.timing
def test_two_service_workers_and_two_consumers_get_the_global_batches_of_the_local_stream():
  dispatcher, workers = _service(2)
  topologies = [input_feed.Topology(CONSUMERS * LOCAL, c * LOCAL, LOCAL) for c in range(CONSUMERS)]
  for skip in (0, 3):  # a fresh run, and one resumed at global batch 3 (runtime.input_resume=skip)
    job = input_feed.service_job_name("/runs/x", skip)
    local = [_batches(t, skip=skip) for t in topologies]
    served = [None] * CONSUMERS

    def consume(c, job=job, skip=skip):
      served[c] = _batches(topologies[c], dispatcher.target, job, skip)

    threads = [threading.Thread(target=consume, args=(c,)) for c in range(CONSUMERS)]
    for thread in threads:
      thread.start()
    for thread in threads:
      thread.join(timeout=600)
    assert served == local, (skip, served, local)
    # Together the consumers' slices are each global batch exactly once: replicas 0-1, then 2-3.
    first = [local[c][r]["x"] for c in range(CONSUMERS) for r in range(LOCAL)]
    expected = next(iter(_global_stream(None).skip(skip).as_numpy_iterator()))["x"]
    np.testing.assert_array_equal(np.concatenate(first), expected)
  del workers


def test_the_job_name_is_the_same_in_every_process_of_a_run():
  code = "from official_albert.training import input_feed; print(input_feed.service_job_name('/runs/x/', 7))"
  names = set()
  for seed in ("1", "2"):
    env = dict(os.environ, PYTHONHASHSEED=seed, PYTHONPATH=REPO_ROOT, TF_CPP_MIN_LOG_LEVEL="3")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    names.add(out.stdout.strip().splitlines()[-1])
  assert names == {input_feed.service_job_name("/runs/x", 7)}
  assert input_feed.service_job_name("/runs/x", 7) != input_feed.service_job_name("/runs/x", 8)
