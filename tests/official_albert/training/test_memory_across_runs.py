"""Runs of one process (a notebook's sweep) do not keep each other's graphs.

`tf.custom_gradient` traced in a tf.function registers its gradient in TensorFlow's process-wide gradient registry
under a new name and never removes it; the registered closure holds the traced graph, so every run kept its step
graphs and their registered functions (+18 functions, +42,505 Python objects, ~35 MB RSS per tiny pretraining run).
`train_lib.forget_custom_gradients` (inside `runtime_scope`) drops them. Checked structurally (counts of registered
names), never by RSS, which is noisy under load.
"""

import gc

import tensorflow as tf
from tensorflow.python.eager import context

from official_albert import compat
from official_albert.training import train_lib
from tests.official_albert.training.test_train_lib import tiny_params


def _custom_gradient_names():
  return {name for name in compat.gradient_registrations() if name.startswith("CustomGradient-")}


def _counts():
  gc.collect()  # (a run's graphs are reference cycles: their functions are unregistered when collected)
  return len(context.context().list_function_names()), len(_custom_gradient_names())


def test_runs_in_one_process_keep_no_graphs(tmp_path):
  """The 2nd and 3rd runs end with as many custom gradients as the 1st and no more registered functions (the old
  code: +18 functions and +4 gradient names per run).

  Functions may drop: in a full suite, the 1st run can end holding an earlier test's leftovers (a bounded cache
  evicted by the next run): CI saw 521, 517, 517.
  """
  params = tiny_params(trainer={"train_steps": 2, "steps_per_loop": 2, "checkpoint_interval": 2})
  counts = []
  for run in range(3):
    summary = train_lib.run_experiment(params, str(tmp_path / f"run{run}"), "train")
    assert summary["global_step"] == 2
    del summary
    counts.append(_counts())
  functions, gradients = zip(*counts)
  assert functions[2] <= functions[1] <= functions[0], counts
  assert gradients[2] == gradients[1] == gradients[0], counts


@tf.custom_gradient
def _doubled_gradient(x):
  return tf.identity(x), lambda dy: 2.0 * dy


def test_a_function_traced_inside_keeps_its_gradient():
  """The names are dropped on exit, and a function traced inside still differentiates afterwards (its trace holds
  the gradient)."""
  @tf.function
  def grad(x):
    with tf.GradientTape() as tape:
      tape.watch(x)
      y = _doubled_gradient(x) * 3.0
    return tape.gradient(y, x)

  before = _custom_gradient_names()
  with train_lib.forget_custom_gradients():
    assert float(grad(tf.constant(1.0))) == 6.0
    assert _custom_gradient_names() - before  # (TensorFlow registered one)
  assert _custom_gradient_names() == before
  assert float(grad(tf.constant(2.0))) == 6.0  # the same trace, called after its name was dropped
