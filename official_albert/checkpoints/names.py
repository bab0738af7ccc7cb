"""Checkpoint names: one declarative table between our variables, TF1 names and Hugging Face names.

Our canonical name for every variable is its name in the original TF1 release (reference §1.3), e.g.
`bert/encoder/transformer/group_0/inner_group_0/attention_1/self/query/kernel`. `tf1_variable_map(model)` walks a
model and returns {TF1 name: variable}; `HF_TABLE` maps TF1 prefixes to HF prefixes with the tensor layout rule, so
converting is a table lookup, not code. Every load (hf.py, tf1.py, native.py) checks that each tensor is consumed
and each variable is set, with exact shapes; `raise_if_mismatch` lists whatever is missing, unexpected or
mis-shaped.
"""

from __future__ import annotations

import fnmatch
import re
from typing import Dict, Iterable, Sequence, Tuple

import keras

from official_albert.modeling.early_exit import exit_heads
from official_albert.modeling.encoder import AlbertEncoder
from official_albert.modeling.models import AlbertClassifier
from official_albert.modeling.models import AlbertMultipleChoice
from official_albert.modeling.models import AlbertPretrainer
from official_albert.modeling.models import AlbertSpanLabeler
from official_albert.modeling.models import AlbertSquadV2Model
from official_albert.modeling.models import AlbertTokenClassifier

_TRANSFORMER = "bert/encoder/transformer"
EXIT_HEADS_SCOPE = "exit_heads"  # TF1 scope of the exit heads (`modeling.early_exit`); HF: `exit_classifiers.{l}`

# ------------------------------------------------------------------------------------------------- TF1 names
# (layer kind, leaf names): how a Keras sublayer's variables are named in TF1.
_DENSE = (("kernel", "kernel"), ("bias", "bias"))
_LAYER_NORM = (("gamma", "gamma"), ("beta", "beta"))


def _layer_vars(prefix: str, layer, leaves) -> Dict[str, keras.Variable]:
  return {f"{prefix}/{tf1_leaf}": getattr(layer, attr) for attr, tf1_leaf in leaves}


def _block_prefix(encoder, part: str, index: int) -> str:
  c = encoder.config
  if encoder._shared(part):
    group, inner = divmod(index, c.inner_group_num)
    return f"{_TRANSFORMER}/group_{group}/inner_group_{inner}"
  layer, inner = divmod(index, c.inner_group_num)
  # Beyond the reference (sharing ablation): per-layer blocks get a layer index instead of a group index.
  return f"{_TRANSFORMER}/layer_{layer}/inner_group_{inner}"


def encoder_variable_map(encoder) -> Dict[str, keras.Variable]:
  """{TF1 name: variable} for an `AlbertEncoder` (the `bert/*` scope)."""
  names: Dict[str, keras.Variable] = {}
  emb = encoder.embeddings
  names["bert/embeddings/word_embeddings"] = emb.word_embeddings
  names["bert/embeddings/token_type_embeddings"] = emb.token_type_embeddings
  names["bert/embeddings/position_embeddings"] = emb.position_embeddings
  names.update(_layer_vars("bert/embeddings/LayerNorm", emb.layer_norm, _LAYER_NORM))
  if encoder.embedding_hidden_mapping_in is not None:
    names.update(_layer_vars("bert/encoder/embedding_hidden_mapping_in", encoder.embedding_hidden_mapping_in, _DENSE))
  for index, attention in enumerate(encoder.attention_layers):
    prefix = _block_prefix(encoder, "attention", index)
    for proj in ("query", "key", "value"):
      names.update(_layer_vars(f"{prefix}/attention_1/self/{proj}", getattr(attention, proj), _DENSE))
    names.update(_layer_vars(f"{prefix}/attention_1/output/dense", attention.output_dense, _DENSE))
    names.update(_layer_vars(f"{prefix}/LayerNorm", attention.layer_norm, _LAYER_NORM))
  for index, ffn in enumerate(encoder.ffn_layers):
    prefix = _block_prefix(encoder, "ffn", index)
    names.update(_layer_vars(f"{prefix}/ffn_1/intermediate/dense", ffn.intermediate, _DENSE))
    names.update(_layer_vars(f"{prefix}/ffn_1/intermediate/output/dense", ffn.output_dense, _DENSE))
    names.update(_layer_vars(f"{prefix}/LayerNorm_1", ffn.layer_norm, _LAYER_NORM))
  names.update(_layer_vars("bert/pooler/dense", encoder.pooler, _DENSE))
  return names


def _transposed_logits_vars(prefix: str, layer) -> Dict[str, keras.Variable]:
  sep = "/" if prefix else ""
  return {f"{prefix}{sep}output_weights": layer.output_weights, f"{prefix}{sep}output_bias": layer.output_bias}


def tf1_variable_map(model) -> Dict[str, keras.Variable]:
  """{TF1 name: variable} for any of our models (reference §1.3; task heads as the original scripts name them)."""
  if isinstance(model, AlbertEncoder):
    return encoder_variable_map(model)
  names = encoder_variable_map(model.encoder)
  if isinstance(model, AlbertPretrainer):
    head = model.mlm_head
    names.update(_layer_vars("cls/predictions/transform/dense", head.dense, _DENSE))
    names.update(_layer_vars("cls/predictions/transform/LayerNorm", head.layer_norm, _LAYER_NORM))
    names["cls/predictions/output_bias"] = head.output_bias
    names.update(_transposed_logits_vars("cls/seq_relationship", model.sop_head))
  elif isinstance(model, (AlbertClassifier, AlbertTokenClassifier, AlbertMultipleChoice)):
    # run_classifier.py / run_race.py create `output_weights` / `output_bias` at the root scope.
    names.update(_transposed_logits_vars("", model.classifier))
    # Beyond the reference: the exit heads of iterations 1 … L-1 (the head of iteration L is the one above).
    for layer, head in enumerate(exit_heads(model)):
      names.update(_transposed_logits_vars(f"{EXIT_HEADS_SCOPE}/layer_{layer}", head))
  elif isinstance(model, AlbertSpanLabeler):
    names.update(_transposed_logits_vars("cls/squad", model.span_head))
  elif isinstance(model, AlbertSquadV2Model):
    head = model.squad_head
    names.update(_layer_vars("start_logits/dense", head.start_dense, _DENSE))
    names.update(_layer_vars("end_logits/dense_0", head.end_dense_0, _DENSE))
    names.update(_layer_vars("end_logits/LayerNorm", head.end_layer_norm, _LAYER_NORM))
    names.update(_layer_vars("end_logits/dense_1", head.end_dense_1, _DENSE))
    names.update(_layer_vars("answer_class/dense_0", head.answer_dense_0, _DENSE))
    names["answer_class/dense_1/kernel"] = head.answer_dense_1.kernel
  else:
    raise TypeError(f"No checkpoint name table for {type(model).__name__}.")
  return names


# -------------------------------------------------------------------------------------------- the HF table
# Rows: (TF1 prefix regex, HF prefix template, kind). Kinds: "dense" (kernel [in,out] ↔ weight [out,in] transposed,
# bias ↔ bias), "layer_norm" (gamma ↔ weight, beta ↔ bias), "tensor" (same array, same layout).
_G = r"(?P<g>\d+)"
_I = r"(?P<i>\d+)"
_LAYER = "albert.encoder.albert_layer_groups.{g}.albert_layers.{i}"
HF_TABLE: Tuple[Tuple[str, str, str], ...] = (
    ("bert/embeddings/word_embeddings", "albert.embeddings.word_embeddings.weight", "tensor"),
    ("bert/embeddings/token_type_embeddings", "albert.embeddings.token_type_embeddings.weight", "tensor"),
    ("bert/embeddings/position_embeddings", "albert.embeddings.position_embeddings.weight", "tensor"),
    ("bert/embeddings/LayerNorm", "albert.embeddings.LayerNorm", "layer_norm"),
    ("bert/encoder/embedding_hidden_mapping_in", "albert.encoder.embedding_hidden_mapping_in", "dense"),
    (f"{_TRANSFORMER}/group_{_G}/inner_group_{_I}/attention_1/self/(?P<p>query|key|value)",
     f"{_LAYER}.attention.{{p}}", "dense"),
    (f"{_TRANSFORMER}/group_{_G}/inner_group_{_I}/attention_1/output/dense", f"{_LAYER}.attention.dense", "dense"),
    (f"{_TRANSFORMER}/group_{_G}/inner_group_{_I}/LayerNorm", f"{_LAYER}.attention.LayerNorm", "layer_norm"),
    (f"{_TRANSFORMER}/group_{_G}/inner_group_{_I}/ffn_1/intermediate/dense", f"{_LAYER}.ffn", "dense"),
    (f"{_TRANSFORMER}/group_{_G}/inner_group_{_I}/ffn_1/intermediate/output/dense", f"{_LAYER}.ffn_output",
     "dense"),
    (f"{_TRANSFORMER}/group_{_G}/inner_group_{_I}/LayerNorm_1", f"{_LAYER}.full_layer_layer_norm", "layer_norm"),
    ("bert/pooler/dense", "albert.pooler", "dense"),
    ("cls/predictions/transform/dense", "predictions.dense", "dense"),
    ("cls/predictions/transform/LayerNorm", "predictions.LayerNorm", "layer_norm"),
    ("cls/predictions/output_bias", "predictions.bias", "tensor"),
    ("cls/seq_relationship/output_weights", "sop_classifier.classifier.weight", "tensor"),
    ("cls/seq_relationship/output_bias", "sop_classifier.classifier.bias", "tensor"),
    ("output_weights", "classifier.weight", "tensor"),
    ("output_bias", "classifier.bias", "tensor"),
    ("cls/squad/output_weights", "qa_outputs.weight", "tensor"),
    (f"{EXIT_HEADS_SCOPE}/layer_(?P<l>\\d+)/output_weights", "exit_classifiers.{l}.weight", "tensor"),
    (f"{EXIT_HEADS_SCOPE}/layer_(?P<l>\\d+)/output_bias", "exit_classifiers.{l}.bias", "tensor"),
    ("cls/squad/output_bias", "qa_outputs.bias", "tensor"),
)
_LEAVES = {
    "dense": (("kernel", "weight", True), ("bias", "bias", False)),
    "layer_norm": (("gamma", "weight", False), ("beta", "bias", False)),
    "tensor": (("", "", False),),
}
# HF keys that hold no independent value: buffers and tied copies (checked for consistency, not loaded).
HF_DERIVED_KEYS = {
    "albert.embeddings.position_ids": "position-id buffer (arange), not a weight",
    "predictions.decoder.weight": "tied to albert.embeddings.word_embeddings.weight",
    "predictions.decoder.bias": "tied to predictions.bias",
}
# transformers' AlbertTransformer always builds the E→H projection; ours, like the reference, has none when E == H.
# An HF export then carries the identity under these names, and an HF read drops it only when it is the identity.
HF_EMBEDDING_PROJECTION = ("albert.encoder.embedding_hidden_mapping_in.weight",
                           "albert.encoder.embedding_hidden_mapping_in.bias")


def _compiled_table():
  rows = []
  for tf1_prefix, hf_prefix, kind in HF_TABLE:
    for tf1_leaf, hf_leaf, transpose in _LEAVES[kind]:
      tf1_pattern = tf1_prefix + (f"/{tf1_leaf}" if tf1_leaf else "")
      hf_template = hf_prefix + (f".{hf_leaf}" if hf_leaf else "")
      rows.append((re.compile(tf1_pattern + "$"), hf_template, transpose))
  return rows


_COMPILED = _compiled_table()


def tf1_to_hf_name(tf1_name: str) -> Tuple[str, bool]:
  """TF1 name → (HF name, transpose?). Raises KeyError when the table has no row for it."""
  for pattern, template, transpose in _COMPILED:
    match = pattern.match(tf1_name)
    if match:
      return template.format(**match.groupdict()), transpose
  raise KeyError(f"No Hugging Face name for TF1 variable {tf1_name!r} (the HF format cannot hold it).")


# ---------------------------------------------------------------------------------------------- assignment
class CheckpointMismatchError(ValueError):
  """A checkpoint does not match the model: lists missing, unexpected and mis-shaped names."""


def matches(name: str, patterns: Iterable[str]) -> bool:
  return any(fnmatch.fnmatchcase(name, p) for p in patterns)


def raise_if_mismatch(source: str, missing: Sequence[str], unexpected: Sequence[str],
                      misshaped: Sequence[str]) -> None:
  if not (missing or unexpected or misshaped):
    return
  parts = [f"Checkpoint {source} does not match the model."]
  for title, items in (("missing (in the model, not in the file)", missing),
                       ("unexpected (in the file, not in the model)", unexpected), ("wrong shape", misshaped)):
    if items:
      shown = "\n    ".join(items[:50]) + (f"\n    ... and {len(items) - 50} more" if len(items) > 50 else "")
      parts.append(f"  {len(items)} {title}:\n    {shown}")
  parts.append("  (a head in the file the model lacks, and one the model has missing: the file holds another head "
               "than the model was built with; name it, --model_type. Else pass allow_missing=[glob, ...] for heads "
               "the file is known not to have, e.g. 'cls/seq_relationship/*' for Hub checkpoints without the SOP "
               "head)")
  raise CheckpointMismatchError("\n".join(parts))
