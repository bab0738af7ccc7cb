"""ALBERT models: the pretrainer (MLM + SOP) and the task models (encoder + head).

Every model has an `.encoder` (`AlbertEncoder`) and takes the encoder's input dict; outputs are dicts with the
contract names of docs/design.md. Heads are created with the model, so a model holds all its variables from
construction (no deferred build) and can be restored or converted before its first call.
"""

from __future__ import annotations

from typing import Dict, Union

import keras
from keras import ops

from official_albert.config import AlbertConfig
from official_albert.modeling import early_exit
from official_albert.modeling.encoder import AlbertEncoder
from official_albert.modeling.encoder import as_config
from official_albert.modeling.encoder import encoder_options_config
from official_albert.modeling.encoder import from_options_config
from official_albert.modeling.inputs import check_optional_names
from official_albert.modeling.inputs import INPUT_NAMES
from official_albert.modeling.layers import MaskedLMHead
from official_albert.modeling.layers import SquadV2Head
from official_albert.modeling.layers import TransposedLogits


class _AlbertModel(keras.Model):
  """Shared plumbing: config handling, the encoder, serialization."""

  def __init__(self, config: Union[AlbertConfig, Dict], fused_qkv: bool = True, layer_loop: bool = False, name=None,
               **kwargs):
    super().__init__(name=name or self.default_name, **kwargs)
    self.config = as_config(config)
    self.fused_qkv = fused_qkv
    self.layer_loop = layer_loop
    self.encoder = AlbertEncoder(self.config, fused_qkv=fused_qkv, layer_loop=layer_loop, name="encoder")

  default_name = "albert_model"

  def _build_classifier(self, num_outputs: int, dropout_rate: float | None) -> TransposedLogits:
    """The `output_weights` [num_outputs,H] head of the classifier-style models (dropout from the config)."""
    self.dropout_rate = self.config.classifier_dropout_prob if dropout_rate is None else dropout_rate
    head = TransposedLogits(num_outputs, self.config.hidden_size, self.config.initializer_range,
                            dropout_rate=self.dropout_rate, name="classifier")
    head.build()
    return head

  def _encoder_inputs(self, inputs):
    check_optional_names(inputs, type(self).__name__)  # (before the other keys are left out)
    return ({k: inputs[k] for k in INPUT_NAMES if k in inputs}
            if isinstance(inputs, dict) else inputs)

  def _encode(self, inputs, training):
    return self.encoder(self._encoder_inputs(inputs), training=training)

  def _extra_config(self):
    return {}

  def get_config(self):
    return encoder_options_config(self, **self._extra_config())

  @classmethod
  def from_config(cls, config):
    return from_options_config(cls, config)


@keras.saving.register_keras_serializable(package="official_albert")
class AlbertPretrainer(_AlbertModel):
  """Encoder + MLM head (tied to the word table) + SOP head.

  Inputs: the encoder inputs plus optional `masked_lm_positions` int [B,P] (without it, MLM logits are computed at
  every position). Outputs: `mlm_logits` [B,P,V] float32, `sop_logits` [B,2] float32, `sequence_output`,
  `pooled_output`.
  """

  default_name = "albert_pretrainer"

  def __init__(self, config, **kwargs):
    super().__init__(config, **kwargs)
    c = self.config
    self.mlm_head = MaskedLMHead(c.vocab_size, c.embedding_size, c.hidden_size, c.hidden_act, c.initializer_range,
                                 c.layer_norm_eps, name="predictions")
    self.sop_head = TransposedLogits(2, c.hidden_size, c.initializer_range, name="seq_relationship")
    self.mlm_head.build()
    self.sop_head.build()
    self.built = True

  def call(self, inputs, training=False):
    outputs = self._encode(inputs, training)
    sequence = outputs["sequence_output"]
    positions = inputs.get("masked_lm_positions") if isinstance(inputs, dict) else None
    if positions is None:
      batch, seq_len = ops.shape(sequence)[0], ops.shape(sequence)[1]
      positions = ops.broadcast_to(ops.arange(seq_len, dtype="int32")[None, :], (batch, seq_len))
    mlm_logits = self.mlm_head(sequence, positions, self.encoder.embedding_table)
    sop_logits = self.sop_head(outputs["pooled_output"], training=training)
    return {"mlm_logits": mlm_logits, "sop_logits": sop_logits, "sequence_output": sequence,
            "pooled_output": outputs["pooled_output"]}


@keras.saving.register_keras_serializable(package="official_albert")
class AlbertClassifier(_AlbertModel):
  """Sentence(-pair) classification on the pooled output: dropout → `output_weights` [num_labels,H] → `logits`.

  `num_labels=1` is regression (STS-B): `logits` [B,1] are the predicted scores.

  `exit_heads=True` adds one head per earlier iteration of the shared block (`modeling.early_exit`): training then
  also returns `exit_logits` [B, L, num_labels] (every iteration's head, the last = `logits`), and inference takes
  `patience` (early exit, row by row: outputs of each row's exit iteration plus `exit_iteration` [B]) or `depth`
  (every row runs that many iterations; also without exit heads). With neither, the outputs are those of the plain
  model, bit for bit.
  """

  default_name = "albert_classifier"

  def __init__(self, config, num_labels: int = 2, dropout_rate: float | None = None, exit_heads: bool = False,
               **kwargs):
    super().__init__(config, **kwargs)
    if num_labels < 1:
      raise ValueError(f"num_labels must be >= 1, got {num_labels}.")
    self.num_labels = num_labels
    self.classifier = self._build_classifier(num_labels, dropout_rate)
    self.exit_heads = bool(exit_heads)
    if self.exit_heads:
      early_exit.add_exit_heads(self, num_labels)
    self.built = True

  def call(self, inputs, training=False, patience=0, depth=None, exit_threshold=early_exit.DEFAULT_EXIT_THRESHOLD,
           multi_label_threshold=None, return_exit_logits=False):
    """`patience`, `depth`, `exit_threshold`, `multi_label_threshold`: see `modeling.early_exit.early_exit`;
    `return_exit_logits`: also `exit_logits` at inference (every iteration's head in one full pass)."""
    early_exit.check_options(self, training, patience, depth, return_exit_logits)
    if patience:
      return early_exit.early_exit(self, self._encoder_inputs(inputs), patience, exit_threshold, multi_label_threshold)
    if depth is not None:
      return early_exit.elastic_depth(self, self._encoder_inputs(inputs), depth)
    every_iteration = self.exit_heads and (training or return_exit_logits)
    outputs = (early_exit.encode_every_iteration(self, self._encoder_inputs(inputs), training) if every_iteration
               else self._encode(inputs, training))
    logits = self.classifier(outputs["pooled_output"], training=training)
    result = {"logits": logits, "pooled_output": outputs["pooled_output"]}
    if every_iteration:
      result["exit_logits"] = early_exit.all_exit_logits(self, outputs["encoder_outputs"], logits, training)
    return result

  def _extra_config(self):
    return {"num_labels": self.num_labels, "dropout_rate": self.dropout_rate, "exit_heads": self.exit_heads}


@keras.saving.register_keras_serializable(package="official_albert")
class AlbertTokenClassifier(_AlbertModel):
  """Per-token classification on the sequence output: dropout → [num_labels,H] → `logits` [B,S,num_labels]."""

  default_name = "albert_token_classifier"

  def __init__(self, config, num_labels: int = 2, dropout_rate: float | None = None, **kwargs):
    super().__init__(config, **kwargs)
    self.num_labels = num_labels
    self.classifier = self._build_classifier(num_labels, dropout_rate)
    self.built = True

  def call(self, inputs, training=False):
    outputs = self._encode(inputs, training)
    return {"logits": self.classifier(outputs["sequence_output"], training=training)}

  def _extra_config(self):
    return {"num_labels": self.num_labels, "dropout_rate": self.dropout_rate}


@keras.saving.register_keras_serializable(package="official_albert")
class AlbertSpanLabeler(_AlbertModel):
  """SQuAD v1 head (`cls/squad/output_weights` [2,H]): `start_logits`, `end_logits` [B,S] (raw logits)."""

  default_name = "albert_span_labeler"

  def __init__(self, config, **kwargs):
    super().__init__(config, **kwargs)
    self.span_head = TransposedLogits(2, self.config.hidden_size, self.config.initializer_range, name="squad")
    self.span_head.build()
    self.built = True

  def call(self, inputs, training=False):
    outputs = self._encode(inputs, training)
    logits = self.span_head(outputs["sequence_output"], training=training)
    return {"start_logits": logits[..., 0], "end_logits": logits[..., 1]}


@keras.saving.register_keras_serializable(package="official_albert")
class AlbertMultipleChoice(_AlbertModel):
  """Multiple choice (RACE): inputs [B,C,S] → pooled per choice → dropout → [1,H] → `logits` [B,C].

  `exit_heads`, `patience`, `depth`: as `AlbertClassifier` (a question exits as one, on the argmax over its choices).
  """

  default_name = "albert_multiple_choice"

  def __init__(self, config, num_choices: int = 4, dropout_rate: float | None = None, exit_heads: bool = False,
               **kwargs):
    super().__init__(config, **kwargs)
    self.num_choices = num_choices
    self.classifier = self._build_classifier(1, dropout_rate)
    self.exit_heads = bool(exit_heads)
    if self.exit_heads:
      early_exit.add_exit_heads(self, 1)
    self.built = True

  def call(self, inputs, training=False, patience=0, depth=None, return_exit_logits=False):
    early_exit.check_options(self, training, patience, depth, return_exit_logits)
    ids = ops.convert_to_tensor(inputs["input_word_ids"])
    if len(ids.shape) != 3:
      raise ValueError(f"{self.name}: 'input_word_ids' must be [batch, num_choices, seq_length], got "
                       f"{tuple(ids.shape)}.")
    if ids.shape[1] is not None and ids.shape[1] != self.num_choices:
      raise ValueError(f"{self.name}: expected {self.num_choices} choices, got {ids.shape[1]}.")
    seq_len = ops.shape(ids)[2]
    flat = {k: ops.reshape(ops.convert_to_tensor(inputs[k]), (-1, seq_len))
            for k in ("input_word_ids", "input_mask", "input_type_ids") if k in inputs}
    if patience:
      return early_exit.early_exit(self, flat, patience, choices=self.num_choices)
    if depth is not None:
      return {"logits": early_exit.elastic_depth(self, flat, depth, choices=self.num_choices)["logits"]}
    every_iteration = self.exit_heads and (training or return_exit_logits)
    outputs = (early_exit.encode_every_iteration(self, flat, training) if every_iteration
               else self.encoder(flat, training=training))
    logits = self.classifier(outputs["pooled_output"], training=training)
    result = {"logits": ops.reshape(logits, (-1, self.num_choices))}
    if every_iteration:
      result["exit_logits"] = early_exit.all_exit_logits(self, outputs["encoder_outputs"], result["logits"], training,
                                                         choices=self.num_choices)
    return result

  def _extra_config(self):
    return {"num_choices": self.num_choices, "dropout_rate": self.dropout_rate, "exit_heads": self.exit_heads}


@keras.saving.register_keras_serializable(package="official_albert")
class AlbertSquadV2Model(_AlbertModel):
  """The original SQuAD 2.0 model (reference §5.2): encoder + `SquadV2Head`.

  Inputs: encoder inputs + `p_mask` [B,S] (1 = not allowed as an answer token) + optional `start_positions` [B]
  (training: the end distribution is conditioned on the gold start). Outputs: `start_log_probs` [B,S],
  `cls_logits` [B], and `end_log_probs` [B,S] (training) or `start_top_log_probs`/`start_top_index` [B,k1],
  `end_top_log_probs`/`end_top_index` [B,k1·k2] (inference).
  """

  default_name = "albert_squad_v2"

  def __init__(self, config, start_n_top: int = 5, end_n_top: int = 5, dropout_rate: float = 0.1, **kwargs):
    super().__init__(config, **kwargs)
    self.start_n_top = start_n_top
    self.end_n_top = end_n_top
    self.dropout_rate = dropout_rate
    self.squad_head = SquadV2Head(self.config.hidden_size, start_n_top, end_n_top, dropout_rate,
                                  self.config.initializer_range, self.config.layer_norm_eps, name="squad_v2")
    self.squad_head.build()
    self.built = True

  def call(self, inputs, training=False):
    outputs = self._encode(inputs, training)
    if "p_mask" not in inputs:
      raise KeyError(f"{self.name}: missing input 'p_mask' [batch, seq_length].")
    return self.squad_head(outputs["sequence_output"], inputs["p_mask"], inputs.get("start_positions"),
                           training=training)

  def _extra_config(self):
    return {"start_n_top": self.start_n_top, "end_n_top": self.end_n_top, "dropout_rate": self.dropout_rate}
