"""Worker of tests/official_albert/modeling/test_early_exit_backends.py: the early exit under KERAS_BACKEND.

`python -m tests.official_albert.modeling.early_exit_harness --dir=DIR` builds the test's classifier and multiple-
choice models with exit heads under the backend named by KERAS_BACKEND, with the weights of DIR/weights.npz (in
`model.weights` order, which is the construction order on every backend), and writes DIR/<backend>.npz: each
patience's logits and exit iterations, every iteration's logits of one full pass, and a static depth's logits.
"""

import argparse
import os

import numpy as np

CONFIG = dict(vocab_size=64, embedding_size=8, hidden_size=16, num_hidden_layers=5, num_attention_heads=2,
              intermediate_size=32, max_position_embeddings=16)
PATIENCE = (1, 2)


def inputs(shape=(12, 10)):
  rng = np.random.default_rng(3)
  mask = (np.arange(shape[-1]) < rng.integers(3, shape[-1] + 1, shape[:-1])[..., None]).astype(np.int32)
  return {"input_word_ids": rng.integers(5, 64, shape).astype(np.int32) * mask, "input_mask": mask,
          "input_type_ids": np.zeros(shape, np.int32)}


def models():
  from official_albert import AlbertConfig
  from official_albert.modeling.models import AlbertClassifier
  from official_albert.modeling.models import AlbertMultipleChoice
  config = AlbertConfig(**CONFIG)
  return {"classifier": (AlbertClassifier(config, num_labels=3, exit_heads=True), inputs()),
          "multiple_choice": (AlbertMultipleChoice(config, num_choices=3, exit_heads=True), inputs((4, 3, 10)))}


def run(built, weights=None):
  """{key: array} of every exit path; `weights` {model name: list of arrays} are set first."""
  from keras import ops
  np_ = ops.convert_to_numpy
  out = {}
  for name, (model, x) in built.items():
    if weights is not None:
      model.set_weights(weights[name])
    out[f"{name}/all"] = np_(model(x, return_exit_logits=True)["exit_logits"])
    out[f"{name}/depth_2"] = np_(model(x, depth=2)["logits"])
    for p in PATIENCE:
      result = model(x, patience=p)
      out[f"{name}/patience_{p}/logits"] = np_(result["logits"])
      out[f"{name}/patience_{p}/exit"] = np_(result["exit_iteration"])
  return out


def main():
  parser = argparse.ArgumentParser()
  parser.add_argument("--dir", required=True)
  args = parser.parse_args()
  import keras
  saved = np.load(os.path.join(args.dir, "weights.npz"))
  built = models()
  weights = {name: [saved[f"{name}/{i}"] for i in range(len(model.weights))] for name, (model, _) in built.items()}
  np.savez(os.path.join(args.dir, f"{keras.backend.backend()}.npz"), **run(built, weights))


if __name__ == "__main__":
  main()
