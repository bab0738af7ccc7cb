"""Hugging Face transformers as the numerical oracle (test extras: torch==2.13.0, transformers==4.57.6)."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")


def hf_config(**kwargs):
  base = dict(hidden_act="gelu_new", hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
              classifier_dropout_prob=0.1)
  return transformers.AlbertConfig(**{**base, **kwargs})


def make_hf_model(cls_name, config, seed=0, **kwargs):
  """A random-weight HF model in eval mode. Weights are perturbed so LayerNorms and biases are not trivially 1/0."""
  torch.manual_seed(seed)
  model = getattr(transformers, cls_name)(config, **kwargs).eval()
  with torch.no_grad():
    for name, param in model.named_parameters():
      if "LayerNorm" in name or "layer_norm" in name or name.endswith("bias"):
        param.add_(0.05 * torch.randn_like(param))
  return model


def to_torch(inputs):
  return {"input_ids": torch.tensor(np.asarray(inputs["input_word_ids"]), dtype=torch.long),
          "attention_mask": torch.tensor(np.asarray(inputs["input_mask"]), dtype=torch.long),
          "token_type_ids": torch.tensor(np.asarray(inputs["input_type_ids"]), dtype=torch.long)}


def save_hf(model, directory):
  model.save_pretrained(str(directory), safe_serialization=True)
  return str(directory)
