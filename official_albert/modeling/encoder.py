"""`AlbertEncoder`: embeddings → (E→H projection) → shared blocks applied L times → pooler (reference §1.2)."""

from __future__ import annotations

import logging
from typing import Dict, List, Union

import keras
from keras import ops

from official_albert.config import AlbertConfig
from official_albert.modeling.inputs import check_id_ranges
from official_albert.modeling.inputs import check_optional_names  # noqa: F401  (importable from here, as before)
from official_albert.modeling.inputs import INPUT_NAMES  # noqa: F401
from official_albert.modeling.inputs import validate_inputs
from official_albert.modeling.layers import AlbertAttention
from official_albert.modeling.layers import AlbertEmbeddings
from official_albert.modeling.layers import AlbertFeedForward
from official_albert.modeling.layers.initializers import kernel_initializer
from official_albert.precision import global_dtype_policy

logger = logging.getLogger(__name__)


def as_config(config: Union[AlbertConfig, Dict]) -> AlbertConfig:
  if isinstance(config, AlbertConfig):
    return config
  if isinstance(config, dict):
    return AlbertConfig.from_dict(config, source="native")
  raise TypeError(f"Expected an AlbertConfig or a dict, got {type(config).__name__}.")


def attention_options(config: AlbertConfig) -> Dict:
  """`AlbertAttention` keyword arguments for the config's attention type (none for dense: the layer's defaults)."""
  if config.attention_type == "dense":
    return {}
  return dict(attention_type=config.attention_type, block_size=config.block_size,
              num_random_blocks=config.num_random_blocks, block_sparse_seed=config.block_sparse_seed,
              query_chunk_size=config.query_chunk_size, key_chunk_size=config.key_chunk_size,
              max_position_embeddings=config.max_position_embeddings,
              num_layers=config.num_hidden_layers * config.inner_group_num,
              layout_blocks=config.block_sparse_layout_blocks)


def encoder_options_config(model: keras.Model, **extra) -> Dict:
  """`get_config` of the encoder and of every model around it: the AlbertConfig, the encoder options, the name.

  It also writes the model's dtype policy under `dtype`, as Keras' own base `get_config` does: these configs replace
  the base one, and without it a model built under `mixed_bfloat16` would come back from `.keras` (or from
  `from_config(get_config())`) in whatever the global policy is then, float32 by default, without a word.
  """
  config = {"config": model.config.to_dict(), "fused_qkv": model.fused_qkv, "name": model.name,
            "dtype": keras.dtype_policies.serialize(model.dtype_policy), **extra}
  if model.layer_loop:
    config["layer_loop"] = True
  return config


def from_options_config(cls, config: Dict):
  """`from_config` of the encoder and of every model around it: `cls(**config)` built under the saved dtype policy.

  Why the global policy and not only `dtype=`: a Keras model does not hand its policy down to the layers it creates
  in `__init__` (each reads the global policy), so the whole model is built with the global policy set to the saved
  one, and the caller's policy is put back afterwards. A config written before the policy was saved (no `dtype`
  key) is built under the current global policy, as it always was.
  """
  config = dict(config)
  dtype = config.pop("dtype", None)
  if dtype is None:
    return cls(**config)
  policy = keras.dtype_policies.get(dtype)
  with global_dtype_policy(policy):
    return cls(dtype=policy, **config)


@keras.saving.register_keras_serializable(package="official_albert")
class AlbertEncoder(keras.Model):
  """The ALBERT encoder.

  Inputs: dict `input_word_ids`, `input_mask` (optional, default all ones), `input_type_ids` (optional, default
  zeros), int [B,S] with S ≤ max_position_embeddings. Outputs: dict `sequence_output` [B,S,H] (float32),
  `pooled_output` [B,H], `encoder_outputs` (list of L·inner_group_num block outputs).

  Parameter sharing: block weights are created once per (group, inner group) and re-applied to every layer routed
  to the group (`group = int(l / L · G)`, any G ≤ L: L=5, G=2 runs group 0 for layers 0-2 and group 1 for layers
  3-4), so an albert-large encoder holds exactly one block of weights. The
  `sharing` ablation ("attention", "ffn", "none") gives per-layer attention and/or FFN weights.

  Args:
    config: an `AlbertConfig` (or its dict).
    fused_qkv: one [H,3H] matmul for Q/K/V (same variables, same numbers; faster).
    layer_loop: run the shared layers as a graph loop (`while_loop`, one per hidden group) instead of unrolling
      them: the graph holds one copy of the block, so deep models trace and compile much faster. Requires
      `sharing="all"`. Same numbers as the unrolled path, but `encoder_outputs` then holds only the last layer's
      output (the per-layer outputs are not kept).
  """

  def __init__(self, config: Union[AlbertConfig, Dict], fused_qkv: bool = True, layer_loop: bool = False,
               **kwargs):
    kwargs.setdefault("name", "albert_encoder")
    super().__init__(**kwargs)
    self.config = as_config(config)
    self.fused_qkv = fused_qkv
    self.layer_loop = layer_loop
    c = self.config
    if layer_loop and c.sharing != "all":
      raise ValueError(f"layer_loop=True needs sharing='all' (one block per group), got sharing={c.sharing!r}.")
    unused = c.unused_groups() if c.sharing == "all" else []
    if unused:
      logger.warning(
          "%s: the reference routing int(l / L * G) runs no layer in group(s) %s (num_hidden_layers=%d, "
          "num_hidden_groups=%d); their weights are kept (checkpoints and conversions hold them, as the HF model "
          "does) but frozen (trainable=False: no gradient, weight decay or optimizer slots), as they never run. For "
          "one block per layer use sharing='none'.", self.name, unused, c.num_hidden_layers, c.num_hidden_groups)
    self.embeddings = AlbertEmbeddings(
        c.vocab_size, c.embedding_size, c.max_position_embeddings, c.type_vocab_size, c.initializer_range,
        c.layer_norm_eps, c.hidden_dropout_prob, name="embeddings")
    self.embedding_hidden_mapping_in = None
    if c.embedding_size != c.hidden_size:  # The projection exists only when E != H (reference §1.2 step 2).
      self.embedding_hidden_mapping_in = keras.layers.Dense(
          c.hidden_size, kernel_initializer=kernel_initializer(c.initializer_range),
          name="embedding_hidden_mapping_in")
    attention_layers = [
        AlbertAttention(c.hidden_size, c.num_attention_heads, c.attention_probs_dropout_prob, c.hidden_dropout_prob,
                        c.initializer_range, c.layer_norm_eps, fused_qkv=fused_qkv, name=f"{key}_attention",
                        **attention_options(c))
        for key in self._block_keys("attention")]
    ffn_layers = [
        AlbertFeedForward(c.hidden_size, c.intermediate_size, c.hidden_act, c.hidden_dropout_prob,
                          c.initializer_range, c.layer_norm_eps, name=f"{key}_ffn")
        for key in self._block_keys("ffn")]
    # One attribute per sub-block: TF's object-based checkpoints track attributes, not Keras' layer lists.
    for layer in attention_layers + ffn_layers:
      setattr(self, layer.name, layer)
    self._attention_names = [layer.name for layer in attention_layers]
    self._ffn_names = [layer.name for layer in ffn_layers]
    self.pooler = keras.layers.Dense(c.hidden_size, activation="tanh",
                                     kernel_initializer=kernel_initializer(c.initializer_range), name="pooler")
    self.build()
    self.freeze_unused_groups()

  @property
  def trainable(self):
    """Keras' flag; the unused groups' blocks stay False whatever it is set to (the setter)."""
    return keras.Model.trainable.fget(self)

  @trainable.setter
  def trainable(self, value):
    """Keras' setter (which sets every sub-layer alike), then the unused groups frozen again: unfreezing the encoder
    must not hand the optimizer blocks that never run (they would get no gradient, and the step would fail)."""
    keras.Model.trainable.fset(self, value)
    if getattr(self, "_ffn_names", None) is not None:  # (Keras sets `trainable` in its __init__, before the blocks)
      self.freeze_unused_groups()

  def unused_blocks(self) -> List[keras.layers.Layer]:
    """The sub-blocks that no layer runs: those of the groups `AlbertConfig.unused_groups` names (shared parts only).

    The reference's float routing skips a group for a few L = G configs (L = G = 22: group 15); its weights stay in
    the model so that HF / TF1 checkpoints load and convert, but they get no gradient."""
    c = self.config
    used = {(part, self.block_index(part, layer, inner)) for part in ("attention", "ffn")
            for layer in range(c.num_hidden_layers) for inner in range(c.inner_group_num)}
    return [block for part, blocks in (("attention", self.attention_layers), ("ffn", self.ffn_layers))
            for index, block in enumerate(blocks) if (part, index) not in used]

  def freeze_unused_groups(self) -> None:
    """`trainable = False` on `unused_blocks()`: no gradient (which `Task.check_gradients` would refuse at step 1),
    no weight decay, no optimizer slots; still in `weights`, checkpoints and conversions. Set at construction, so
    `from_config` and `.keras` loading rebuild it."""
    for block in self.unused_blocks():
      block.trainable = False

  @property
  def attention_layers(self) -> List[AlbertAttention]:
    """The distinct attention sub-blocks, indexed by `block_index("attention", layer, inner)`."""
    return [getattr(self, name) for name in self._attention_names]

  @property
  def ffn_layers(self) -> List[AlbertFeedForward]:
    """The distinct FFN sub-blocks, indexed by `block_index("ffn", layer, inner)`."""
    return [getattr(self, name) for name in self._ffn_names]

  # ----------------------------------------------------------------------------------------------- routing
  def _shared(self, part: str) -> bool:
    return self.config.sharing == "all" or self.config.sharing == part

  def _block_keys(self, part: str) -> List[str]:
    """Names of the distinct `part` ("attention" | "ffn") sub-blocks, in creation order."""
    c = self.config
    if self._shared(part):
      return [f"group_{g}_inner_group_{k}" for g in range(c.num_hidden_groups) for k in range(c.inner_group_num)]
    return [f"layer_{l}_inner_group_{k}" for l in range(c.num_hidden_layers) for k in range(c.inner_group_num)]

  def block_index(self, part: str, layer: int, inner: int) -> int:
    """Index into `attention_layers`/`ffn_layers` of the sub-block applied at (layer, inner)."""
    c = self.config
    first = c.group_of_layer(layer) if self._shared(part) else layer
    return first * c.inner_group_num + inner

  # ------------------------------------------------------------------------------------------------- keras
  def build(self, input_shape=None):
    c = self.config
    self.embeddings.build()
    if self.embedding_hidden_mapping_in is not None:
      self.embedding_hidden_mapping_in.build((None, None, c.embedding_size))
    for layer in self.attention_layers + self.ffn_layers:
      layer.build()
    self.pooler.build((None, c.hidden_size))

  def call(self, inputs, training=False, depth=None):
    """`depth`: run only the first `depth` iterations of the layer stack (static elastic depth); None = all L."""
    c = self.config
    depth = self.check_depth(depth)
    x, mask, batch, seq = self.embed(inputs, training=training)
    if self.layer_loop:
      x = ops.reshape(self._looped_layers(x, mask, training, depth), (batch, seq, c.hidden_size))
      pooled = self.pooler(x[:, 0, :])
      return {"sequence_output": x, "pooled_output": pooled, "encoder_outputs": [x]}
    encoder_outputs = self.run_layers(x, mask, 0, depth, training=training, weights=self.layer_weights(training))
    encoder_outputs = [ops.reshape(h, (batch, seq, c.hidden_size)) for h in encoder_outputs]
    x = encoder_outputs[-1]
    pooled = self.pooler(x[:, 0, :])
    return {"sequence_output": x, "pooled_output": pooled, "encoder_outputs": encoder_outputs}

  def check_depth(self, depth) -> int:
    """`depth` as the number of iterations to run (None = num_hidden_layers); raises outside 1..L."""
    layers = self.config.num_hidden_layers
    if depth is None:
      return layers
    if isinstance(depth, bool) or int(depth) != depth or not 1 <= depth <= layers:
      raise ValueError(f"{self.name}: depth={depth!r} must be an integer in 1..num_hidden_layers ({layers}).")
    return int(depth)

  def embed(self, inputs, training=False):
    """Validated inputs → (hidden [B·S, H] entering the first iteration, input_mask [B, S], B, S)."""
    c = self.config
    ids, mask, type_ids = validate_inputs(inputs, c.max_position_embeddings, self.name)
    check_id_ranges(ids, type_ids, c.vocab_size, c.type_vocab_size, self.name)
    batch, seq = ops.shape(ids)[0], ops.shape(ids)[1]
    x = self.embeddings(ids, type_ids, training=training)
    # From here on the activations are [B·S, width]: every GEMM is 2-D, the form in which TF's oneDNN remapper fuses
    # it with its bias add and GELU (a 3-D Dense puts reshapes in between). Back to [B, S, H] at the end.
    x = ops.reshape(x, (-1, c.embedding_size))
    if self.embedding_hidden_mapping_in is not None:
      x = self.embedding_hidden_mapping_in(x)
    return x, mask, batch, seq

  def layer_weights(self, training, prepare_now: int = 0):
    """`weights(part, index)` for `run_layers`: each block's `prepared_weights()`, built once per forward pass.

    In training each layer prepares its own (None; see AlbertAttention.prepared_weights). `prepare_now`: build those
    of the first `prepare_now` iterations at once (a caller that runs iterations inside graph branches must not
    build them in the first branch that needs them).
    """
    prepared = {}

    def weights(part, index):
      if training:
        return None
      if (part, index) not in prepared:
        blocks = self.attention_layers if part == "attention" else self.ffn_layers
        prepared[part, index] = blocks[index].prepared_weights()
      return prepared[part, index]

    for layer in range(prepare_now):
      for inner in range(self.config.inner_group_num):
        for part in ("attention", "ffn"):
          weights(part, self.block_index(part, layer, inner))
    return weights

  def run_layers(self, x, mask, start: int, stop: int, training=False, weights=None) -> List:
    """Iterations `start`..`stop`-1 of the layer stack on `x` [B·S, H] (any B, with `mask` [B, S]).

    Returns the block outputs [B·S, H] (inner_group_num per iteration). The plain forward pass runs 0..L; the early
    exit runs one iteration at a time on the rows still running (`modeling.early_exit`).
    """
    c = self.config
    weights = weights or self.layer_weights(training)
    outputs = []
    for layer in range(start, stop):
      for inner in range(c.inner_group_num):
        a = self.block_index("attention", layer, inner)
        x = self.attention_layers[a](x, mask, training=training, weights=weights("attention", a),
                                     layer_index=layer * c.inner_group_num + inner)
        f = self.block_index("ffn", layer, inner)
        x = self.ffn_layers[f](x, training=training, weights=weights("ffn", f))
        outputs.append(x)
    return outputs

  def _looped_layers(self, x, attention_mask, training, depth):
    """The layer stack as one `while_loop` per hidden group.

    The routing int(l / L · G) is non-decreasing in l, so the layers of a group are contiguous and groups come in
    order; each group's loop runs as many times as layers are routed to it (unequal counts when G does not divide L).
    """
    c = self.config
    # Blocks return float32 (post-LN); the loop carry must keep one dtype, so enter in float32. Under mixed
    # precision this is exact: the first block casts its input to float32 for the residual anyway.
    x = ops.cast(x, "float32")
    first_layer = 0
    for group in range(c.num_hidden_groups):
      num_layers = sum(1 for l in range(depth) if c.group_of_layer(l) == group)
      if not num_layers:
        continue
      first_layer, group_first_layer = first_layer + num_layers, first_layer
      blocks = [(self.attention_layers[group * c.inner_group_num + inner],
                 self.ffn_layers[group * c.inner_group_num + inner]) for inner in range(c.inner_group_num)]
      # Inference prepares each block's weights once, outside the loop (see AlbertAttention.prepared_weights).
      weights = [(None, None) if training else (a.prepared_weights(), f.prepared_weights()) for a, f in blocks]

      def body(i, h, blocks=blocks, weights=weights, group_first_layer=group_first_layer):
        for inner, ((attention, ffn), (wa, wf)) in enumerate(zip(blocks, weights)):
          layer_index = (group_first_layer + i) * c.inner_group_num + inner
          h = ffn(attention(h, attention_mask, training=training, weights=wa, layer_index=layer_index),
                  training=training, weights=wf)
        return i + 1, h

      if keras.backend.backend() == "jax":
        # JAX differentiates a loop only with a static trip count in the loop itself: fori_loop over Python ints
        # lowers to lax.scan (lax.while_loop, which ops.while_loop becomes, has no reverse-mode gradient).
        x = ops.fori_loop(0, num_layers, lambda i, h, body=body: body(i, h)[1], x)
        continue
      # maximum_iterations gives the loop a static trip count (XLA needs it for the gradient).
      _, x = ops.while_loop(lambda i, h, n=num_layers: i < n, body, (ops.convert_to_tensor(0, "int32"), x),
                            maximum_iterations=num_layers)
    return x

  @property
  def embedding_table(self):
    """The [V,E] word table, tied to the MLM output projection."""
    return self.embeddings.word_embeddings

  def get_config(self):
    return encoder_options_config(self)

  @classmethod
  def from_config(cls, config):
    return from_options_config(cls, config)
