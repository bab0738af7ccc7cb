"""`AlbertEmbedder`: the encoder with sentence pooling — one vector per text (`sentence_embedding`).

The sentence-embedding models built on ALBERT (sentence-transformers' paraphrase-albert-small-v2 / -base-v2, SetFit
bodies) are a plain ALBERT encoder followed by a pooling and an optional normalisation: the weights are the
encoder's, the pooling is configuration. So the embedder holds an `AlbertEncoder` under `.encoder` (a checkpoint of
any head restores into it as an encoder does) and a `SentencePooling`; what it pools with comes from the model
directory's sentence-transformers files (`checkpoints.sentence_transformers_folder`) or is given.
"""

from __future__ import annotations

from typing import Optional, Sequence

import keras
from keras import ops

from official_albert.modeling.encoder import AlbertEncoder
from official_albert.modeling.encoder import as_config
from official_albert.modeling.encoder import encoder_options_config
from official_albert.modeling.encoder import from_options_config
from official_albert.modeling.inputs import validate_inputs
from official_albert.modeling.layers.pooling import SentencePooling


@keras.saving.register_keras_serializable(package="official_albert")
class AlbertEmbedder(keras.Model):
  """Encoder → `SentencePooling` over the tokens of `input_mask`.

  Inputs: the encoder's. Outputs: `sentence_embedding` [B, H·len(pooling)] float32, plus the encoder's
  `sequence_output` and `pooled_output`.

  Args:
    config: an `AlbertConfig` (or its dict); ignored when `encoder` is given.
    pooling: `POOLING_MODES` to concatenate; normalize: L2-normalise the result.
    encoder: an existing (loaded) `AlbertEncoder` to pool over; its variables are shared, not copied.
    dim: keep the first `dim` dimensions of the pooled vector and L2-normalise them (a Matryoshka width; whatever
      `normalize` says, as `pipelines.embed(..., dim=K)` and the Matryoshka loss cut it); None = the whole vector.
      The exports take it (`export_saved_model --dim`), so that their graphs serve the cut vector.
    fused_qkv, layer_loop: the new encoder's options (`AlbertEncoder`).
  """

  def __init__(self, config=None, pooling: Sequence[str] = ("mean",), normalize: bool = False, encoder=None,
               fused_qkv: bool = True, layer_loop: bool = False, dim: Optional[int] = None, name=None, **kwargs):
    if encoder is not None:
      # The wrapper computes as its encoder does, and says so in its config (`dtype`): an encoder built under
      # mixed_bfloat16 and wrapped under float32 came back from the config in float32.
      kwargs.setdefault("dtype", encoder.dtype_policy)
    super().__init__(name=name or "albert_embedder", **kwargs)
    if encoder is None:
      if config is None:
        raise ValueError("AlbertEmbedder needs a config or an encoder.")
      encoder = AlbertEncoder(as_config(config), fused_qkv=fused_qkv, layer_loop=layer_loop, name="encoder")
    self.encoder = encoder
    self.config = encoder.config
    self.fused_qkv = encoder.fused_qkv
    self.layer_loop = encoder.layer_loop
    self.pooling = SentencePooling(pooling, normalize, name="sentence_pooling")
    width = self.config.hidden_size * len(self.pooling.modes)
    if dim is not None and not 0 < int(dim) <= width:
      raise ValueError(f"dim={dim} is not in 1..{width} (the embedding width: hidden_size × pooling modes).")
    self.dim = None if dim is None else int(dim)
    self.built = True

  @property
  def pooling_modes(self):
    return self.pooling.modes

  @property
  def normalize(self) -> bool:
    return self.pooling.normalize

  def call(self, inputs, training=False):
    _, mask, _ = validate_inputs(inputs, self.config.max_position_embeddings, self.name)
    outputs = self.encoder(inputs, training=training)
    embedding = self.pooling(outputs["sequence_output"], ops.cast(mask, "int32"))
    if self.dim is not None:
      cut = embedding[..., :self.dim]
      embedding = cut / ops.maximum(ops.sqrt(ops.sum(ops.square(cut), axis=-1, keepdims=True)), 1e-12)
    return {"sentence_embedding": embedding, "sequence_output": outputs["sequence_output"],
            "pooled_output": outputs["pooled_output"]}

  def get_config(self):
    extra = {} if self.dim is None else {"dim": self.dim}
    return encoder_options_config(self, pooling=list(self.pooling.modes), normalize=self.pooling.normalize, **extra)

  @classmethod
  def from_config(cls, config):
    return from_options_config(cls, config)
