"""What is measured on a pretrained model: held-out MLM / NSP / SOP accuracy, Figure 1's per-layer distances, and
parameters counted as the paper counts them.

Held-out accuracy is computed here, not by the trainer's evaluation, because every model is scored on every
held-out set (an NSP-trained model on the SOP set too): the model is restored from its run's last checkpoint and run
over each set once, in order, every example counted (the sets are balanced 50/50, see `data`). The sentence head is
read the same way for both tasks (label 1 = "swapped" for SOP, "random document" for NSP), as the paper does: an
SOP model that calls a random-document pair "not in order" scores on NSP without ever training on it.
"""

from __future__ import annotations

from typing import Any, Dict, List

import numpy as np
import tensorflow as tf

from official_albert.checkpoints import loading
from official_albert.config import AlbertConfig
from official_albert.data import input_pipeline
from official_albert.modeling.encoder import AlbertEncoder

MODEL_INPUTS = ("input_word_ids", "input_mask", "input_type_ids", "masked_lm_positions")


def parameter_count(model_config: Dict[str, Any]) -> int:
  """All parameters of the encoder (embeddings, projection, transformer blocks, pooler), as the paper's Tables 3-4
  count them (ALBERT-base: 12M all-shared, 89M not-shared); the MLM and sentence heads are not counted."""
  fields = {k: v for k, v in model_config.items() if k != "preset"}
  return int(AlbertEncoder(AlbertConfig(**fields)).count_params())


def paper_base_parameters(sharing: str, embedding_size: int = 128) -> int:
  """`parameter_count` of the paper's ALBERT-base (V 30,000, H 768, 12 layers, 12 heads, FFN 3072, 512 positions)."""
  base = AlbertConfig.from_preset("albert-base-v2").to_dict()
  return parameter_count(dict(base, sharing=sharing, embedding_size=embedding_size))


def restore(model_dir: str):
  """The pretrainer of `model_dir` (config.json + its newest checkpoint)."""
  return loading.load_pretrained(model_dir)


def _dataset(pattern: str, settings, batch_size: int = 256):
  return input_pipeline.pretraining_dataset(pattern.split(","), settings.seq_length,
                                            settings.max_predictions_per_seq, batch_size, is_training=False,
                                            drop_remainder=False)


def heldout_accuracy(model, pattern: str, settings) -> Dict[str, float]:
  """{"masked_lm_accuracy", "sentence_accuracy", "examples"} of `model` on every record of `pattern`."""

  @tf.function
  def predict(batch):
    outputs = model({k: batch[k] for k in MODEL_INPUTS}, training=False)
    return tf.argmax(outputs["mlm_logits"], -1, output_type=tf.int32), tf.argmax(outputs["sop_logits"], -1,
                                                                                 output_type=tf.int32)

  mlm_hits = mlm_total = sentence_hits = examples = 0.0
  for batch in _dataset(pattern, settings):
    mlm, sentence = predict(batch)
    weights = batch["masked_lm_weights"].numpy()
    mlm_hits += float(((mlm.numpy() == batch["masked_lm_ids"].numpy()) * weights).sum())
    mlm_total += float(weights.sum())
    labels = batch["next_sentence_labels"].numpy().reshape(-1)
    sentence_hits += float((sentence.numpy() == labels).sum())
    examples += labels.size
  return {"masked_lm_accuracy": mlm_hits / max(mlm_total, 1.0), "sentence_accuracy": sentence_hits / max(examples, 1),
          "examples": int(examples)}


def layer_smoothness(model, pattern: str, settings) -> Dict[str, List[float]]:
  """Figure 1: per layer, the mean over held-out tokens of the L2 distance and the cosine similarity between the
  layer's input and output embeddings (layer 1's input is the embedding after the E→H projection)."""
  encoder = model.encoder
  distances, cosines, tokens = None, None, 0.0
  for batch in _dataset(pattern, settings, batch_size=128).take(max(1, settings.probe_examples // 128)):
    x = encoder.embeddings(batch["input_word_ids"], batch["input_type_ids"], training=False)
    if encoder.embedding_hidden_mapping_in is not None:
      x = encoder.embedding_hidden_mapping_in(x)
    layers = [x] + list(encoder({k: batch[k] for k in MODEL_INPUTS[:3]}, training=False)["encoder_outputs"])
    mask = tf.cast(batch["input_mask"], tf.float32)
    d, c = [], []
    for before, after in zip(layers[:-1], layers[1:]):
      before, after = tf.cast(before, tf.float32), tf.cast(after, tf.float32)
      d.append(float(tf.reduce_sum(tf.norm(after - before, axis=-1) * mask)))
      cos = tf.reduce_sum(tf.math.l2_normalize(after, -1) * tf.math.l2_normalize(before, -1), -1)
      c.append(float(tf.reduce_sum(cos * mask)))
    distances = np.add(distances, d) if distances is not None else np.array(d)
    cosines = np.add(cosines, c) if cosines is not None else np.array(c)
    tokens += float(tf.reduce_sum(mask))
  return {"l2_distance": (distances / tokens).tolist(), "cosine_similarity": (cosines / tokens).tolist(),
          "tokens": int(tokens)}


def score(model_dir: str, heldout: Dict[str, Dict[str, Any]], settings) -> Dict[str, Any]:
  """Every held-out number of the model in `model_dir`: MLM accuracy (on the SOP held-out set, whose pairs are in-
  document text for every model), NSP and SOP accuracy (each on its own set), and the per-layer distances."""
  model = restore(model_dir)
  sop = heldout_accuracy(model, heldout["sop"]["pattern"], settings)
  nsp = heldout_accuracy(model, heldout["nsp"]["pattern"], settings)
  return {"masked_lm_accuracy": sop["masked_lm_accuracy"], "masked_lm_accuracy_nsp_set": nsp["masked_lm_accuracy"],
          "nsp_accuracy": nsp["sentence_accuracy"], "sop_accuracy": sop["sentence_accuracy"],
          "heldout_examples": {"sop": sop["examples"], "nsp": nsp["examples"]},
          "layers": layer_smoothness(model, heldout["sop"]["pattern"], settings)}
