"""`AlbertConfig`: the model hyperparameters, presets, and JSON I/O.

Field names are the original `albert_config.json` names (Hugging Face uses the same ones), so the original release's
config, an HF `config.json` and our own native `config.json` all load with `AlbertConfig.from_json_file`.

Long because: the one dataclass is the model's whole hyperparameter contract (reference §1.1) — its checks, its three
file formats' readers and writers, the presets and the attention types every exporter asks about — read as one.
"""

from __future__ import annotations

import copy
import dataclasses
import difflib
import json
import logging
import numbers
from typing import Any, Dict, List, Optional, Tuple

from official_albert import file_io

logger = logging.getLogger(__name__)

# Canonical activation names. "gelu_new" is the tanh approximation used by every released ALBERT model; "gelu" is the
# exact erf form (HF semantics). The *original* albert_config.json says "gelu" but means the tanh form, so files
# detected as original-format are translated on load (see `_FORMAT_ORIGINAL`).
ACTIVATIONS = ("gelu_new", "gelu", "relu", "tanh", "linear", "silu")
_ACTIVATION_ALIASES = {
    "gelu_pytorch_tanh": "gelu_new",
    "gelu_fast": "gelu_new",
    "gelu_approximate": "gelu_new",
    "swish": "silu",
    "identity": "linear",
}
SHARING_MODES = ("all", "attention", "ffn", "none")
# How each attention block computes softmax(QKᵀ)V: "dense" (the reference: the [S,S] scores at once), "chunked" (the
# same numbers over query/key tiles with an online softmax, official_albert/modeling/layers/chunked_attention.py) or
# "block_sparse" (BigBird ITC, official_albert/modeling/layers/block_sparse_attention.py).
ATTENTION_TYPES = ("dense", "chunked", "block_sparse")
# HF BigBird's name for dense attention.
_ATTENTION_TYPE_ALIASES = {"original_full": "dense", "full": "dense"}
# The attention fields; written to a config file only when attention_type is not "dense", so that configs of dense
# models (every released one) keep exactly the keys they had.
ATTENTION_FIELDS = ("attention_type", "block_size", "num_random_blocks", "block_sparse_seed", "query_chunk_size",
                    "key_chunk_size", "block_sparse_layout_blocks")
# The attention types whose outputs dense attention gives (chunked computes the same function over tiles): what a
# runtime with dense attention only (transformers' AlbertModel, KerasHub's TransformerEncoder) reproduces. Each
# exporter's `supports(attention_type)` says which types its runtime computes; the export harness
# (tests/official_albert/serving/export_harness.py) holds them to it.
DENSE_EQUIVALENT = ("dense", "chunked")

_FORMAT_ORIGINAL = "original"
_FORMAT_HF = "hf"
_FORMAT_NATIVE = "native"
_NATIVE_MARKER = "official_albert_format_version"

# Keys HF's PretrainedConfig writes for every model; they carry no ALBERT hyperparameter and are dropped on load.
# The last line: keys that older transformers versions wrote (output_past, _num_labels, xla_device) or that a
# quantized or attention-backend-pinned model's config carries; transformers loads all of them.
_HF_BOOKKEEPING_KEYS = frozenset({
    "architectures", "model_type", "torch_dtype", "dtype", "transformers_version", "_name_or_path", "_commit_hash",
    "_attn_implementation_autoset", "output_hidden_states", "output_attentions", "return_dict", "use_return_dict",
    "torchscript", "use_bfloat16", "tf_legacy_loss", "pruned_heads", "tie_word_embeddings", "chunk_size_feed_forward",
    "is_encoder_decoder", "is_decoder", "cross_attention_hidden_size", "add_cross_attention", "tie_encoder_decoder",
    "max_length", "min_length", "do_sample", "early_stopping", "num_beams", "num_beam_groups", "diversity_penalty",
    "temperature", "top_k", "top_p", "typical_p", "repetition_penalty", "length_penalty", "no_repeat_ngram_size",
    "encoder_no_repeat_ngram_size", "bad_words_ids", "num_return_sequences", "output_scores",
    "return_dict_in_generate", "forced_bos_token_id", "forced_eos_token_id", "remove_invalid_values",
    "exponential_decay_length_penalty", "suppress_tokens", "begin_suppress_tokens", "finetuning_task", "id2label",
    "label2id", "tokenizer_class", "prefix", "sep_token_id", "decoder_start_token_id", "task_specific_params",
    "problem_type", "num_labels", "embedding_projection_size", "gradient_checkpointing", "use_cache",
    "output_past", "_num_labels", "xla_device", "quantization_config", "_attn_implementation",
})
# The defaults of the original release's and transformers' AlbertConfig (both xxlarge-shaped) where they differ from
# ours (albert-base-v2): a key missing from their config.json / albert_config.json means these values there, so
# from_dict fills them for those sources (a config without num_attention_heads is a 64-head model in transformers and
# the reference; H and F are shape-checked at load, the head count is not).
_SOURCE_DEFAULTS = {"hidden_size": 4096, "num_attention_heads": 64, "intermediate_size": 16384}
# Real numbers (int or float, not bool); validate() names a field holding anything else (null, a string).
_REAL_FIELDS = ("hidden_dropout_prob", "attention_probs_dropout_prob", "classifier_dropout_prob",
                "initializer_range", "layer_norm_eps")
# Whole numbers >= 0 (not bool) that validate() checks the type of: the original release's keys, which the model does
# not use, and HF's token ids (null allowed), which only travel back to the files they came from.
_COUNT_FIELDS = ("down_scale_factor", "net_structure_type", "gap_size", "num_memory_blocks")
_TOKEN_ID_FIELDS = ("pad_token_id", "bos_token_id", "eos_token_id")


def _is_count(value: Any) -> bool:
  """Whether `value` is an integer >= 0 (a JSON `true` or `"8"` is not)."""
  return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def check_attention_type(attention_type: str) -> str:
  """`attention_type` when it is one of `ATTENTION_TYPES` (an exporter's `supports` is asked of known types only)."""
  if attention_type not in ATTENTION_TYPES:
    raise ValueError(f"attention_type={attention_type!r} is not one of {ATTENTION_TYPES}.")
  return attention_type


def dense_equivalent(attention_type: str) -> bool:
  """Whether dense attention computes `attention_type`'s outputs (what a runtime with dense attention only gives)."""
  return check_attention_type(attention_type) in DENSE_EQUIVALENT


@dataclasses.dataclass
class AlbertConfig:
  """ALBERT hyperparameters (reference §1.1).

  Defaults follow albert-base-v2 except where a field only matters for compatibility.

  Attributes:
    vocab_size: rows of the word-embedding table (V).
    embedding_size: factorized embedding width (E).
    hidden_size: transformer width (H).
    num_hidden_layers: number of layer applications (L).
    num_hidden_groups: distinct shared parameter groups (G); layer l uses group int(l * G / L).
    num_attention_heads: attention heads (N); H must be divisible by N.
    intermediate_size: FFN inner width (F).
    inner_group_num: distinct attention+FFN blocks applied in sequence inside each layer.
    down_scale_factor: saved by the original release, never used by the model.
    hidden_act: FFN and MLM-transform activation; one of `ACTIVATIONS` ("gelu_new" = tanh GELU, the ALBERT one).
    hidden_dropout_prob: dropout after embeddings, attention output and FFN output.
    attention_probs_dropout_prob: dropout on attention probabilities.
    max_position_embeddings: rows of the position table (P); sequences longer than P are rejected.
    type_vocab_size: rows of the token-type table (T).
    initializer_range: stddev of the truncated-normal (2 sigma) initializer.
    layer_norm_eps: LayerNorm epsilon (1e-12 in the reference; Keras' default of 1e-3 would be wrong).
    classifier_dropout_prob: dropout on the pooled output in classification heads (0.1 in the reference scripts).
    sharing: cross-layer sharing ablation of the ALBERT paper (Table 4). "all" (default, the released models) shares
      attention and FFN per group; "attention" shares only attention (FFN per layer); "ffn" only the FFN; "none"
      gives every layer its own block. Non-"all" modes are beyond the reference and need num_hidden_groups == 1.
    net_structure_type, gap_size, num_memory_blocks, layers_to_keep: keys of the released configs that the model
      ignores; kept so that files round-trip.
    position_embedding_type: only "absolute" (the original) is supported.
    pad_token_id, bos_token_id, eos_token_id: HF token ids, kept for HF export.
    attention_type: "dense" (the reference, default; also when the key is absent), "chunked" (exact attention over
      query/key tiles with an online softmax and a recomputing backward pass: the same function, with memory
      O(S·chunk) instead of O(S²)) or "block_sparse" (BigBird ITC: each block of `block_size` queries attends to
      the first and last blocks, a window of 3 blocks and `num_random_blocks` random blocks; the first and last
      blocks attend to everything). HF BigBird's "original_full" is read as "dense".
    block_size, num_random_blocks: BigBird's block size and random blocks per query block (HF BigBird's names and
      defaults). block_sparse runs dense attention when S <= (5 + 2 * num_random_blocks) * block_size, as HF does.
    block_sparse_seed: seed of the random-block layout; with it the layout is a function of (seed, layer,
      block_sparse_layout_blocks, number of blocks), so a saved model rebuilds the same attention pattern.
    block_sparse_layout_blocks: the square of the layout's priority table drawn at once (None: ceil(
      max_position_embeddings / block_size)); position extension keeps the original's, so the extended model attends
      as the original did at every length the original took (docs/long_inputs.md).
    query_chunk_size, key_chunk_size: chunked attention's tile (queries per tile, keys per online-softmax step).
  """

  vocab_size: int = 30000
  embedding_size: int = 128
  hidden_size: int = 768
  num_hidden_layers: int = 12
  num_hidden_groups: int = 1
  num_attention_heads: int = 12
  intermediate_size: int = 3072
  inner_group_num: int = 1
  down_scale_factor: int = 1
  hidden_act: str = "gelu_new"
  hidden_dropout_prob: float = 0.0
  attention_probs_dropout_prob: float = 0.0
  max_position_embeddings: int = 512
  type_vocab_size: int = 2
  initializer_range: float = 0.02
  layer_norm_eps: float = 1e-12
  classifier_dropout_prob: float = 0.1
  sharing: str = "all"
  net_structure_type: int = 0
  gap_size: int = 0
  num_memory_blocks: int = 0
  layers_to_keep: List[int] = dataclasses.field(default_factory=list)
  position_embedding_type: str = "absolute"
  pad_token_id: int = 0
  bos_token_id: int = 2
  eos_token_id: int = 3
  attention_type: str = "dense"
  block_size: int = 64
  num_random_blocks: int = 3
  block_sparse_seed: int = 0
  query_chunk_size: int = 1024
  key_chunk_size: int = 512
  # block_sparse: the square of the random-layout priority table drawn at once, in blocks (None: today's
  # ceil(max_position_embeddings / block_size)); extend_model keeps the original's, so an extended model attends to
  # the same random blocks at every length the original took (block_sparse_attention.py, docs/long_inputs.md).
  block_sparse_layout_blocks: Optional[int] = None

  def __post_init__(self):
    self.hidden_act = _ACTIVATION_ALIASES.get(str(self.hidden_act).lower(), str(self.hidden_act).lower())
    self.attention_type = _ATTENTION_TYPE_ALIASES.get(str(self.attention_type), str(self.attention_type))
    self.validate()

  # ----------------------------------------------------------------------------------------------- validation
  def validate(self) -> None:
    """Raises ValueError naming the offending field(s) for any invalid combination."""
    positive = ("vocab_size", "embedding_size", "hidden_size", "num_hidden_layers", "num_hidden_groups",
                "num_attention_heads", "intermediate_size", "inner_group_num", "max_position_embeddings",
                "type_vocab_size")
    for name in positive:
      value = getattr(self, name)
      if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"AlbertConfig.{name} must be a positive integer, got {value!r}.")
    if self.hidden_size % self.num_attention_heads:
      raise ValueError(
          f"AlbertConfig.hidden_size ({self.hidden_size}) is not divisible by num_attention_heads "
          f"({self.num_attention_heads}).")
    # Any 1 <= G <= L is valid (reference §1.2 step 3): layer l runs group int(l / L * G), so groups may hold
    # unequal numbers of layers (L=5, G=2: layers 0-2 -> group 0, layers 3-4 -> group 1).
    if self.num_hidden_groups > self.num_hidden_layers:
      raise ValueError(
          f"AlbertConfig.num_hidden_groups ({self.num_hidden_groups}) exceeds num_hidden_layers "
          f"({self.num_hidden_layers}): layer l runs group int(l / L * G), so group(s) "
          f"{', '.join(map(str, range(self.num_hidden_layers, self.num_hidden_groups)))} would never run. Set "
          f"num_hidden_groups to at most {self.num_hidden_layers}.")
    if self.hidden_act not in ACTIVATIONS:
      raise ValueError(f"AlbertConfig.hidden_act={self.hidden_act!r} is not one of {ACTIVATIONS}.")
    for name in _REAL_FIELDS:
      value = getattr(self, name)
      if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"AlbertConfig.{name} must be a number, got {value!r}.")
    for name in ("hidden_dropout_prob", "attention_probs_dropout_prob", "classifier_dropout_prob"):
      value = getattr(self, name)
      if not 0.0 <= float(value) < 1.0:
        raise ValueError(f"AlbertConfig.{name} must be in [0, 1), got {value!r}.")
    if self.sharing not in SHARING_MODES:
      raise ValueError(f"AlbertConfig.sharing={self.sharing!r} is not one of {SHARING_MODES}.")
    if self.sharing != "all" and self.num_hidden_groups != 1:
      raise ValueError(
          f"AlbertConfig.sharing={self.sharing!r} needs num_hidden_groups == 1 (got {self.num_hidden_groups}); "
          "groups are the checkpoint-compatible sharing mechanism and only combine with sharing='all'.")
    if self.position_embedding_type != "absolute":
      raise ValueError(
          f"AlbertConfig.position_embedding_type={self.position_embedding_type!r} is not supported (only "
          "'absolute', as in the original ALBERT).")
    if not self.initializer_range > 0 or not self.layer_norm_eps > 0:
      raise ValueError("AlbertConfig.initializer_range and layer_norm_eps must be > 0.")
    if self.attention_type not in ATTENTION_TYPES:
      close = difflib.get_close_matches(self.attention_type, ATTENTION_TYPES, n=1)
      hint = f" Did you mean {close[0]!r}?" if close else ""
      raise ValueError(f"AlbertConfig.attention_type={self.attention_type!r} is not one of {ATTENTION_TYPES}.{hint}")
    for name in ("block_size", "num_random_blocks", "query_chunk_size", "key_chunk_size"):
      value = getattr(self, name)
      if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"AlbertConfig.{name} must be a positive integer, got {value!r}.")
    if (isinstance(self.block_sparse_seed, bool) or not isinstance(self.block_sparse_seed, int)
        or self.block_sparse_seed < 0):
      # (NumPy's random generator, which draws the block layout, takes seeds >= 0 only.)
      raise ValueError(f"AlbertConfig.block_sparse_seed must be an integer >= 0, got {self.block_sparse_seed!r}.")
    self._validate_counts()

  def _validate_counts(self) -> None:
    """The integer fields `validate` does not check above, each named with its value when it is no integer >= 0."""
    layout = self.block_sparse_layout_blocks
    if layout is not None and not (_is_count(layout) and layout > 0):
      raise ValueError("AlbertConfig.block_sparse_layout_blocks must be null (the model's own number of blocks) or "
                       f"a positive integer, got {layout!r}.")
    # The original release's unused keys (written back to its albert_config.json) and HF's token ids (written back
    # to an HF config.json): a hand-edited "8" or -3 is named here, with its file, not by a converter later.
    for name in _COUNT_FIELDS + _TOKEN_ID_FIELDS:
      value = getattr(self, name)
      if not _is_count(value) and not (value is None and name in _TOKEN_ID_FIELDS):
        accepted = "null or an integer >= 0" if name in _TOKEN_ID_FIELDS else "an integer >= 0"
        raise ValueError(f"AlbertConfig.{name} must be {accepted}, got {value!r}.")
    if not isinstance(self.layers_to_keep, (list, tuple)) or not all(_is_count(v) for v in self.layers_to_keep):
      raise ValueError(f"AlbertConfig.layers_to_keep must be a list of integers >= 0, got {self.layers_to_keep!r}.")

  # ------------------------------------------------------------------------------------------------- derived
  @property
  def head_size(self) -> int:
    return self.hidden_size // self.num_attention_heads

  def group_of_layer(self, layer_index: int) -> int:
    """The reference routing `int(l / L * G)` (float division, truncation), for any G <= L.

    Written exactly as the reference computes it, float rounding included: for a few configs the float form and
    the exact `l * G // L` differ (L = G = 22: layer 15 runs group 14 in the reference); see `unused_groups` and
    `hf_routing_differences`.
    """
    if not 0 <= layer_index < self.num_hidden_layers:
      raise IndexError(f"layer_index {layer_index} is outside 0..{self.num_hidden_layers - 1}.")
    return int(layer_index / self.num_hidden_layers * self.num_hidden_groups)

  def unused_groups(self) -> List[int]:
    """Groups that no layer is routed to (their weights never run or train).

    Empty except for some G == L configs, where the reference's float routing skips a group (L = G = 22 skips
    group 15); the reference then never creates the group's variables, while this model and HF hold them.
    """
    used = {self.group_of_layer(l) for l in range(self.num_hidden_layers)}
    return [g for g in range(self.num_hidden_groups) if g not in used]

  def hf_routing_differences(self) -> List[Tuple[int, int, int]]:
    """(layer, group here = reference, group in HF) where HF's `int(i / (L / G))` routes differently.

    Empty for every released config and for most others; non-empty for a few, e.g. L=18, G=14 (layer 9: group 7
    here and in the reference, 6 in HF). Converting such a model to or from HF would silently change its outputs.
    """
    num_layers, num_groups = self.num_hidden_layers, self.num_hidden_groups
    return [(l, self.group_of_layer(l), int(l / (num_layers / num_groups))) for l in range(num_layers)
            if self.group_of_layer(l) != int(l / (num_layers / num_groups))]

  def check_hf_routing(self, origin: str) -> None:
    """Raises ValueError when HF would route some layer to another group than this model (see above)."""
    differences = self.hf_routing_differences()
    if differences:
      shown = ", ".join(f"layer {l}: group {ours} here, {theirs} in HF" for l, ours, theirs in differences[:4])
      raise ValueError(
          f"{origin}: num_hidden_layers={self.num_hidden_layers}, num_hidden_groups={self.num_hidden_groups} is "
          f"routed differently by Hugging Face's int(i / (L / G)) than by the reference's int(l / L * G) used "
          f"here ({shown}); the converted model would compute something else. Pick another num_hidden_groups "
          f"(every released config and most others route identically).")

  def replace(self, **changes) -> "AlbertConfig":
    """Returns a validated copy with `changes` applied."""
    return dataclasses.replace(copy.deepcopy(self), **changes)

  def inference_copy(self) -> "AlbertConfig":
    """Copy with both dropout rates zeroed, like the reference's `is_training=False`."""
    return self.replace(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)

  # --------------------------------------------------------------------------------------------------- io
  def to_dict(self) -> Dict[str, Any]:
    """All fields, except the attention fields of a dense model (absent means dense; released configs stay as they
    were)."""
    data = dataclasses.asdict(self)
    if self.attention_type == "dense":
      for name in ATTENTION_FIELDS:
        data.pop(name)
    return data

  def attention_dict(self) -> Dict[str, Any]:
    """The attention fields (empty for dense): what converters write next to the format's own keys."""
    return {} if self.attention_type == "dense" else {name: getattr(self, name) for name in ATTENTION_FIELDS}

  def to_json_string(self) -> str:
    data = self.to_dict()
    data[_NATIVE_MARKER] = 1
    return json.dumps(data, indent=2, sort_keys=True) + "\n"

  def to_json_file(self, path: str) -> None:
    """Writes the native config.json atomically."""
    file_io.atomic_write_text(path, self.to_json_string())

  def to_hf_dict(self) -> Dict[str, Any]:
    """The config as an HF `config.json` dict (AlbertForPreTraining)."""
    data = {k: v for k, v in self.to_dict().items()
            if k not in ("sharing", "down_scale_factor", "net_structure_type", "gap_size", "num_memory_blocks",
                         "layers_to_keep")}
    if self.sharing != "all":
      raise ValueError(f"HF ALBERT has no sharing={self.sharing!r} mode; only 'all' can be exported to HF.")
    self.check_hf_routing("HF export")
    if self.attention_type not in DENSE_EQUIVALENT:
      # The keys travel in config.json (HF's PretrainedConfig keeps unknown keys) so the model converts back as it
      # was; HF's AlbertModel itself always runs full attention.
      logger.warning("HF export of attention_type='block_sparse': transformers' AlbertModel ignores it and runs "
                     "dense attention, which computes other outputs than this model at S > %d. Convert back to "
                     "native (the keys are kept in config.json) to run block-sparse attention.",
                     (5 + 2 * self.num_random_blocks) * self.block_size)
    data.update(architectures=["AlbertForPreTraining"], model_type="albert")
    return data

  @classmethod
  def from_dict(cls, data: Dict[str, Any], source: str = "auto", strict: bool = True,
                origin: str = "<dict>") -> "AlbertConfig":
    """Builds a config from a dict in original, HF or native form.

    Args:
      data: the JSON object.
      source: "original" (google-research/albert `albert_config.json`: "gelu" means the tanh form), "hf", "native"
        or "auto" (HF if HF bookkeeping keys are present, native if our marker is, else original). A key missing
        from an original or HF config takes that format's default (`_SOURCE_DEFAULTS`: H=4096, 64 heads,
        F=16384), a native one ours.
      strict: unknown keys raise ValueError (with a "did you mean" hint); with False they are logged and dropped.
      origin: what to call the source in messages (a file path).

    Returns:
      A validated AlbertConfig.
    """
    if not isinstance(data, dict):
      raise ValueError(f"{origin}: expected a JSON object, got {type(data).__name__}.")
    data = dict(data)
    if source == "auto":
      if _NATIVE_MARKER in data:
        source = _FORMAT_NATIVE
      elif "model_type" in data or "architectures" in data or "transformers_version" in data:
        source = _FORMAT_HF
      else:
        source = _FORMAT_ORIGINAL
    if source not in (_FORMAT_ORIGINAL, _FORMAT_HF, _FORMAT_NATIVE):
      raise ValueError(f"source must be auto|original|hf|native, got {source!r}.")
    data.pop(_NATIVE_MARKER, None)
    if source == _FORMAT_HF:
      model_type = data.get("model_type", "albert")
      if model_type != "albert":
        raise ValueError(f"{origin}: model_type is {model_type!r}, not 'albert'.")
      for key in list(data):
        if key in _HF_BOOKKEEPING_KEYS:
          data.pop(key)
      if "classifier_dropout_prob" in data and data["classifier_dropout_prob"] is None:
        # transformers' heads read null as "use hidden_dropout_prob" (AlbertForTokenClassification).
        data["classifier_dropout_prob"] = data.get("hidden_dropout_prob", cls.hidden_dropout_prob)
    if source in (_FORMAT_ORIGINAL, _FORMAT_HF):
      # A missing key means that format's default, not ours (`_SOURCE_DEFAULTS`).
      for key, value in _SOURCE_DEFAULTS.items():
        data.setdefault(key, value)
    if source == _FORMAT_ORIGINAL and str(data.get("hidden_act", "")).lower() == "gelu":
      # The original modeling.py's "gelu" is the tanh approximation (reference §1.2 item 6).
      data["hidden_act"] = "gelu_new"
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - known)
    if unknown:
      hints = []
      for key in unknown:
        close = difflib.get_close_matches(key, sorted(known), n=1, cutoff=0.75)
        hints.append(f"{key!r}" + (f" (did you mean {close[0]!r}?)" if close else ""))
      message = f"{origin}: unknown AlbertConfig key(s): {', '.join(hints)}."
      if strict:
        raise ValueError(message + " Pass strict=False to drop them.")
      logger.warning("%s Dropping them.", message)
      for key in unknown:
        data.pop(key)
    try:
      config = cls(**data)
    except (TypeError, ValueError) as e:
      raise ValueError(f"{origin}: {e}") from None
    if source == _FORMAT_HF:
      config.check_hf_routing(origin)
    return config

  @classmethod
  def from_json_file(cls, path: str, source: str = "auto", strict: bool = True) -> "AlbertConfig":
    """Loads an original `albert_config.json`, an HF `config.json` or a native config.json."""
    if not file_io.exists(path):
      raise FileNotFoundError(f"AlbertConfig file not found: {path}")
    data = file_io.read_json(path, "model configuration")
    return cls.from_dict(data, source=source, strict=strict, origin=path)

  @classmethod
  def from_preset(cls, name: str, **overrides) -> "AlbertConfig":
    """One of `albert-{base,large,xlarge,xxlarge}-v{1,2}` (also accepts `_` for `-`)."""
    key = name.replace("_", "-").lower()
    if key not in PRESETS:
      close = difflib.get_close_matches(key, sorted(PRESETS), n=1)
      hint = f" Did you mean {close[0]!r}?" if close else ""
      raise ValueError(f"Unknown ALBERT preset {name!r}.{hint} Known: {', '.join(sorted(PRESETS))}.")
    return cls(**{**PRESETS[key], **overrides})


# Presets as data (reference §1.1 "Released configs"). All: E=128, V=30000, P=512, T=2, init 0.02, tanh GELU, G=1.
_SIZES = {
    "base": dict(hidden_size=768, num_hidden_layers=12, num_attention_heads=12, intermediate_size=3072),
    "large": dict(hidden_size=1024, num_hidden_layers=24, num_attention_heads=16, intermediate_size=4096),
    "xlarge": dict(hidden_size=2048, num_hidden_layers=24, num_attention_heads=16, intermediate_size=8192),
    "xxlarge": dict(hidden_size=4096, num_hidden_layers=12, num_attention_heads=64, intermediate_size=16384),
}
PRESETS: Dict[str, Dict[str, Any]] = {}
for _size, _shape in _SIZES.items():
  for _version in ("v1", "v2"):
    # v2 models were trained without dropout; v1 with 0.1 except xxlarge (0).
    _dropout = 0.1 if (_version == "v1" and _size != "xxlarge") else 0.0
    PRESETS[f"albert-{_size}-{_version}"] = dict(
        vocab_size=30000, embedding_size=128, max_position_embeddings=512, type_vocab_size=2,
        initializer_range=0.02, hidden_act="gelu_new", num_hidden_groups=1, inner_group_num=1,
        hidden_dropout_prob=_dropout, attention_probs_dropout_prob=_dropout, **_shape)


def paper_size(model) -> Optional[str]:
  """"base", "large", "xlarge" or "xxlarge" when `model` (an `AlbertConfig` or a `ModelConfig`) has the shape of
  that released ALBERT (hidden size, layers, heads, intermediate size), else None: the paper's fine-tuning recipes
  were tuned for these sizes only (`training.finetuning_rates`)."""
  shape = {k: getattr(model, k, None) for k in ("hidden_size", "num_hidden_layers", "num_attention_heads",
                                                "intermediate_size")}
  return next((size for size, preset in _SIZES.items() if preset == shape), None)
