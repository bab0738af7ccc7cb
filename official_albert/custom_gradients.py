"""Drops from TensorFlow's gradient registry the custom gradients of one finished trace, and only those.

Why: traced in a tf.function, `tf.custom_gradient` registers its gradient in TensorFlow's process-wide registry under
a new name (`CustomGradient-<uid>`) at every trace and never removes it; the entry's closure holds the traced graph,
so that graph and its registered functions are never freed. Chunked attention is a custom gradient also at inference:
each long-input model traced by a pipeline (`serving.graph_call`) or an export and then dropped kept +12 functions,
+2 names and ~11,000 Python objects for good (a server or notebook that loads many grew without bound).

How: `release(graph)` reads the names from the graph itself — graph-mode `tf.custom_gradient` emits an `IdentityN`
op whose `_gradient_op_type` attribute is the registered name, in the graph or in a function of its library (a
while / map body) — gives each such op its gradient as its own (`compat.pin_registered_gradient`: the trace still
differentiates afterwards, also called under an outer `GradientTape`) and pops exactly those names. Names that other
threads' traces register meanwhile are not touched, so a server tracing on request threads and a training run in
another thread may release at any time. Release only once nothing reads the names from the registry any more:
`tf.saved_model.save` serializes a graph's custom gradients from it (`serving.export` releases after the save).
"""

from __future__ import annotations

from typing import Iterator, Set

from official_albert import compat


def _custom_gradient_ops(graph) -> Iterator:
  """The ops of `graph` and of its library's function graphs that carry a `_gradient_op_type` (custom gradients)."""
  for g in [graph] + compat.function_graphs(graph):
    for op in g.get_operations():
      if op.type == "IdentityN" and "_gradient_op_type" in op.node_def.attr:
        yield op


def registered_names(graph) -> Set[str]:
  """The gradient names that the custom gradients traced into `graph` use (registered or already released)."""
  return {op.get_attr("_gradient_op_type").decode() for op in _custom_gradient_ops(graph)}


def release(*graphs) -> Set[str]:
  """Makes each custom-gradient op of `graphs` hold its gradient, then pops their names from the registry.

  Returns the names popped. Idempotent: a name already released (or popped by `train_lib.forget_custom_gradients`)
  is skipped; its op keeps the gradient it was given.
  """
  names = set()
  for graph in graphs:
    for op in _custom_gradient_ops(graph):
      if compat.pin_registered_gradient(op):
        names.add(op.get_attr("_gradient_op_type").decode())
  registry = compat.gradient_registrations()
  for name in names:
    registry.pop(name, None)
  return names
