"""`runtime.jit_compile` really XLA-compiles the trainer's gradient step and the evaluation step (audit s29, 1).

The "XLA equals graph" tests (test_train_lib, test_scale_out, test_dynamic_padding) compare an XLA run with a graph
run; if the flag were dropped they would compare graph with graph and still pass. These tests look at what was
built instead: the trainer's gradient function must be a `tf.function` with `jit_compile=True`, and the traced
evaluation step must call a must-compile function (`_XlaMustCompile`) that holds the model's attention.
"""

import json

import pytest
import tensorflow as tf

from official_albert.train import build_params
from official_albert.training import train_lib

SMALL = {
    "task": {
        "model": {"vocab_size": 300, "embedding_size": 8, "hidden_size": 16, "num_hidden_layers": 1,
                  "num_attention_heads": 2, "intermediate_size": 32, "max_position_embeddings": 16},
        "train_data": {"input_path": "dummy", "dummy_vocab_size": 300, "global_batch_size": 2, "seq_length": 8,
                       "max_predictions_per_seq": 2},
        "validation_data": {"input_path": "dummy", "dummy_vocab_size": 300, "global_batch_size": 2,
                            "seq_length": 8, "max_predictions_per_seq": 2},
    },
    "trainer": {"train_steps": 1, "steps_per_loop": 1, "validation_steps": 1, "warmup_steps": 1},
    "runtime": {"distribution_strategy": "one_device"},
}


def _trainer(tmp_path, jit_compile):
  params = build_params("albert_tiny_pretrain", params_override=json.dumps(SMALL))
  return train_lib.Trainer(params.override({"runtime": {"jit_compile": jit_compile}}), str(tmp_path / "model"))


def _xla_functions_with_attention(concrete):
  """Names of the must-compile functions in `concrete`'s graph library that hold attention (BatchMatMulV2).

  Why the op filter: the library XLA-compiles small helpers of its own (the GELU derivative) whatever the flag says,
  so "some must-compile function exists" would pass with the flag ignored.
  """
  names = []
  for function in concrete.graph.as_graph_def().library.function:
    attr = function.attr.get("_XlaMustCompile")
    if attr is not None and attr.b and any(node.op == "BatchMatMulV2" for node in function.node_def):
      names.append(function.signature.name)
  return names


@pytest.mark.slow  # ~5 s on 2 cores: builds two trainers and traces an evaluation step
@pytest.mark.parametrize("jit_compile", [True, False])
def test_jit_compile_compiles_the_gradient_step_and_the_evaluation_step(tmp_path, jit_compile):
  trainer = _trainer(tmp_path, jit_compile)

  # The replica's forward + backward pass (trainer.Trainer._make_grad_fn), the part the flag puts under XLA.
  grad_fn = trainer._make_grad_fn()
  compiled = isinstance(grad_fn, tf.types.experimental.PolymorphicFunction) and grad_fn._jit_compile is True
  assert compiled == jit_compile, (
      f"runtime.jit_compile={jit_compile} but the trainer's gradient step is {grad_fn!r} "
      f"(jit_compile={getattr(grad_fn, '_jit_compile', None)}); see trainer.py Trainer._make_grad_fn")

  # The evaluation step, traced on one real evaluation batch (no XLA compile needed: the attribute is in the graph).
  evaluator = trainer.evaluator
  batch = next(iter(evaluator._batches(evaluator._eval_data_config(), 1, role="eval")))
  concrete = evaluator._step_fn("eval").get_concrete_function(batch)
  xla = _xla_functions_with_attention(concrete)
  assert bool(xla) == jit_compile, (
      f"runtime.jit_compile={jit_compile} but the evaluation step's must-compile functions holding attention are "
      f"{xla}; see evaluation.py Evaluator._step_fn")
