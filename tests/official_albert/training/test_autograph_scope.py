"""AutoGraph converts only the functions whose own body has tensor control flow (docs/design.md, "AutoGraph").

Converting a function costs CPU at every trace, in every process (the suite starts hundreds of training, eval and
predict processes); the training and evaluation code below the loop function has no tensor control flow, so its
boundaries (`strategy.run`'s replica step, the input maps, the jit-compiled and evaluation `tf.function`s) are
marked not to be converted. This keeps it so: a structure check (which functions get transformed), not a timing.
"""

import pytest
import tensorflow as tf
from tensorflow.python.autograph.pyct import transpiler

from data_prep import tokenize_corpus
from official_albert.training import train_lib
from tasks import pretraining_dynamic
from tasks.text import TextClassificationTask
from tests import tiny
from tests.data_prep.test_create_pretraining_data import corpus_docs
from tests.data_prep.test_create_pretraining_data import write_corpus
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


def test_the_input_streams_convert_none_of_our_functions(tmp_path, spm_model_file, converted):
  """The maps of the fine-tuning reader (`input_pipeline.make_dataset`: the task's record decoder, the interleave,
  dynamic padding, length bucketing) and of the dynamic pretraining pipeline (a record-sharded pipeline: its filter
  too) run as written; converted, they made 10-26 (fine-tuning) and 72 (dynamic masking) transforms a run."""
  rows = "".join(f"{'a good film' if i % 2 else 'a dull plot'},{'pos' if i % 2 else 'neg'}\n" for i in range(8))
  (tmp_path / "train.csv").write_text("text,label\n" + rows, encoding="utf-8")
  data = {"input_path": str(tmp_path / "train.csv"), "global_batch_size": 4, "seq_length": 16, "seed": 1,
          "pad_to_multiple_of": 8}
  task = tiny.build_task(TextClassificationTask, "text_classification", {"task": {
      "spm_model_file": spm_model_file, "train_data": dict(data, length_bucket_window=2),
      "validation_data": dict(data, is_training=False, drop_remainder=False)}}, model_dir=str(tmp_path / "m"))
  for config in (task.params.train_data, task.params.validation_data):
    assert next(iter(task.build_inputs(config)))["input_word_ids"].shape[0] == 4
  tokenize_corpus.tokenize_corpus(tokenize_corpus.TokenizeConfig(
      input_file=write_corpus(tmp_path / "c.txt", corpus_docs(12)), spm_model_file=spm_model_file,
      output_dir=str(tmp_path / "tok"), documents_per_shard=12, progress=False))
  dataset = pretraining_dynamic.dynamic_pretraining_dataset(  # (evaluation maps a subset: not built again)
      str(tmp_path / "tok" / "tokens-*"), 32, 5, 2, is_training=True, seed=1, pad_to_multiple_of=8,
      input_context=tf.distribute.InputContext(num_input_pipelines=2, input_pipeline_id=1))
  assert next(iter(dataset))["input_word_ids"].shape[0] == 2
  assert not converted, sorted(set(converted))
