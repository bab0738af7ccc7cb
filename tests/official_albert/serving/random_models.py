"""Tiny random model directories for the export tests, which compare an exported file with the Keras model."""

import keras
import numpy as np

from official_albert import AlbertConfig
from official_albert.checkpoints.loading import build_model
from official_albert.checkpoints.native import save_pretrained


def perturb_weights(model, seed, only_constant=False):
  """Adds N(0, 0.1) noise to the weights (`only_constant`: to those that start constant — biases and LayerNorm γ/β
  start as zeros / ones), so that every parameter counts in the comparison."""
  rng = np.random.default_rng(seed)
  for variable in model.weights:
    value = np.asarray(variable)
    if not only_constant or np.all(value == value.flat[0]):
      variable.assign((value + rng.normal(0, 0.1, value.shape)).astype(value.dtype))


def random_model_dirs(root, heads, config_fields, num_choices, spm_model_file, seed, only_constant=False):
  """{test name: (model dir, Keras model)} for `heads` ({test name: (head, num_labels)}): the i-th built with
  `seed + i`, perturbed with seed i, saved as `root/<test name>` with the test SentencePiece model."""
  out = {}
  for i, (name, (head, num_labels)) in enumerate(heads.items()):
    keras.utils.set_random_seed(seed + i)
    model = build_model(head, AlbertConfig(**config_fields), num_labels, num_choices)
    perturb_weights(model, seed=i, only_constant=only_constant)
    save_pretrained(model, str(root / name), spm_model_file=spm_model_file)
    out[name] = (str(root / name), model)
  return out
