"""AutoGraph converts only the functions whose own body has tensor control flow (docs/design.md, "AutoGraph").

Converting a function costs CPU at every trace, in every process (the suite starts hundreds of training, eval and
predict processes); the training and evaluation code below the loop function has no tensor control flow, so its
boundaries (`strategy.run`'s replica step, the input maps, the jit-compiled and evaluation `tf.function`s) are
marked not to be converted. This keeps it so: a structure check (which functions get transformed), not a timing.
"""

import pytest
from tensorflow.python.autograph.pyct import transpiler

from official_albert.training import train_lib
from tests.official_albert.training.test_train_lib import tiny_params

# The loop function: `for _ in tf.range(...)`, `break` and `if` on tensors (trainer.py).
ALLOWED = {"Trainer._make_train_fn.<locals>.train_loop"}
OUR_PACKAGES = ("official_albert", "tasks")


@pytest.fixture()
def converted(monkeypatch):
  """The qualified names of our functions AutoGraph transforms while the test runs (cached conversions included:
  `GenericTranspiler.transform` runs for every function a trace converts, before the conversion cache)."""
  names = []
  original = transpiler.GenericTranspiler.transform

  def transform(self, obj, user_context):
    if (getattr(obj, "__module__", None) or "").startswith(OUR_PACKAGES):
      names.append(getattr(obj, "__qualname__", repr(obj)))
    return original(self, obj, user_context)

  monkeypatch.setattr(transpiler.GenericTranspiler, "transform", transform)
  return names


def test_a_training_run_converts_only_the_loop_function(tmp_path, converted):
  """train_and_eval with gradient accumulation (the micro-batch while_loop): training, evaluation and the input
  stream convert nothing of ours but the loop function."""
  params = tiny_params(trainer={"train_steps": 2, "steps_per_loop": 2, "checkpoint_interval": 2,
                                "validation_interval": 2, "validation_steps": 1, "summary_interval": 2,
                                "gradient_accumulation_steps": 2})
  result = train_lib.run_experiment(params, str(tmp_path), "train_and_eval")
  assert result["global_step"] == 2 and "masked_lm_accuracy" in result["eval_results"]
  assert "Trainer._make_train_fn.<locals>.train_loop" in converted  # (the hook sees conversions)
  assert set(converted) <= ALLOWED, sorted(set(converted) - ALLOWED)
