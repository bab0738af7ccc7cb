"""Task steps outside the trainer, for tests that train or predict by hand (no clipping, accumulation or replicas).

Test-only: they moved here from the library (`Task.train_step`, `GlueTask.predict_submission`), which trains and
predicts through `official_albert.training.train_lib` alone.
"""

from typing import Dict, Sequence

import keras
import numpy as np
import tensorflow as tf

from official_albert.training.base_task import Task
from official_albert.training.experiment_config import DataConfig
from tasks import glue


def train_step(task: Task, inputs, model: keras.Model, optimizer: keras.optimizers.Optimizer,
               metrics: Sequence[keras.metrics.Metric]) -> Dict[str, tf.Tensor]:
  """One plain optimizer step of `task`'s loss on `inputs` (the batch's own denominators); returns {'loss': loss}."""
  loss, grads = task.compute_gradients(inputs, model, None, metrics)
  optimizer.apply_gradients(zip(grads, model.trainable_variables))
  return {"loss": loss}


def predict_submission(task: glue.GlueTask, model: keras.Model, data_config: DataConfig,
                       examples: Sequence[glue.InputExample], output_dir: str) -> str:
  """Runs `model` over `data_config` (the records, in file order) and writes the GLUE submission file of `examples`."""
  data_config = data_config.replace(is_training=False, drop_remainder=False)
  batches = task.predict(model, task.build_inputs(data_config))
  logits = np.concatenate([b["logits"] for b in batches], axis=0) if batches else np.zeros([0, 1])
  return glue.write_submission(task.spec.name, examples, logits, output_dir)
