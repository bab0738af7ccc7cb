"""TF-Serving-ready SavedModels: raw text in (tokenized in-graph), token ids in, or serialized tf.Examples in.

`AlbertServingModule(spec, loaded)` (or `(model, head, ...)`) is a `tf.Module` with these signatures (all tensors
batched on axis 0):

  serving_default   = serve_text, or serve_text_pair when exported with `text_pair=True` (= from_ids when no
                    SentencePiece model was given: then there are no text signatures).
  serve_text        `text` tf.string [B] (multiple choice: [B, C]) → the head's outputs (below) + the packed ids.
  serve_text_pair   `text`, `text_b` tf.string [B] ([B, C]; the same shape, else refused) → same, with `[CLS] A
                    [SEP] B [SEP]` packing (`[CLS] A [SEP]` where B has no pieces, as the pipelines). Multiple choice
                    packs RACE's rows (`choices.pack_choices`, as the records and pipelines): `text` the article,
                    `text_b` the question+option as `choices.qa_text` forms it — the client fills a "_" blank with
                    the option, else appends the option after a space —, which keeps its LAST `max_qa_length`
                    pieces (the option's) while the article is cut to fit; both segments are always written.
                    An encoder with a default prompt prepends it to `text` here too, as `embed` does: a text's
                    `sentence_embedding` is the same through every text signature (the packed ids include the
                    prompt's tokens), packed as `embed` packs it: cut at the folder's max_seq_length (the other
                    outputs and the packed ids at seq_length).
  from_ids          `input_word_ids`, `input_mask`, `input_type_ids` int32 [B, S] ([B, C, S]) (+ pretrainer:
                    `masked_lm_positions` int32 [B, P]; squad_v2: `p_mask` int32 [B, S]) → the model's raw outputs.
  serve_examples    `examples` serialized `tf.train.Example` [B] with int64 features `input_word_ids`,
                    `input_mask`, `input_type_ids` [S] (multiple choice: [C·S], row-major; pretrainer: also
                    `masked_lm_positions` [max_predictions_per_seq]; squad_v2: also `p_mask` [S]) — the feature
                    names of `data_prep.create_finetuning_data` → the head's outputs.
  tokenization_info no inputs → `spm_model_file` (asset path), `do_lower_case`, `keep_accents`, `remove_space`,
                    `tokenizer_mode`, `seq_length`; multiple choice's also `max_qa_length` (its rows' question+option
                    cap); an encoder's also `embed_prompt` (the default prompt its text signatures prepend, '' for
                    none) and `embed_seq_length` (the tokens `embed` packs a text into), so that a client (the
                    server's token counts) counts the tokens the model saw; every export's `attention_type` (the
                    model's: the pipelines pad a block_sparse model's rows to seq_length, as its graph runs them).
  embed             encoder head: `text` tf.string [B] → `sentence_embedding` float32 [B, D], the text's sentence
                    embedding (pooling and normalisation of the model directory's sentence-transformers files, or the
                    export's; texts cut at the folder's max_seq_length when shorter than seq_length; the folder's
                    default prompt prepended in the graph), the vector `pipelines.embed` returns.

The encoder head's outputs add `sentence_embedding` [B, D] in every signature. Head outputs beyond the raw ones:
classifier `probabilities` (softmax; regression heads with one output have none)
and `predictions` (argmax, or the score for regression); token classifier `probabilities`, `predictions`;
multiple choice `probabilities`, `predictions`; classifier and token classifier exported with a label list
(`labels=`, or `model_dir/labels.json` as the text tasks save it) also `labels` tf.string: the argmax label's name
(not for regression or multi-label models, whose argmax is no answer). A multi-label classifier (labels.json says
`multi_label`, as `text_classification` writes it with `task.multi_label=true`) returns per-label sigmoid
`probabilities` and int32 [B, L] `predictions`, 1 where the probability is ≥ the training run's
`task.multi_label_threshold` (saved in labels.json; 0.5 when absent; the probabilities serve any other). Pretrainer
on text: the [MASK] positions found in the text (`masked_lm_positions`, `masked_lm_weights` [B, P]), their
`mlm_logits` [B, P, V], `mlm_top_k_ids` and `mlm_top_k_probabilities` [B, P, k], and `sop_probabilities`. Text
signatures also return the packed `input_word_ids`, `input_mask`, `input_type_ids`, so clients can map token
positions back. Classifier and multiple choice also return `exit_iteration` int32 [B]: the iterations of the shared
block each row ran — L, or with an export's `patience` (early exit, `modeling.early_exit`) each row's own, or a
static `depth` k; patience 0 (the default) serves the plain model's graph and outputs.

The SentencePiece model is embedded in the graph and kept as an asset; reloading needs only
`import tensorflow as tf, tensorflow_text` and `tf.saved_model.load(path)`. The model's forward (`from_ids`) and the
tokenizer are each traced once, and every signature calls them: the SavedModel stores each once.

Long because: every head's signatures over one tf.Module (text, pairs, ids, examples, embed), each signature a
few lines over the same packing and output helpers; split by head they would repeat the packing.
"""

from __future__ import annotations

import logging
import os
from typing import Dict, Optional, Sequence, Tuple

import tensorflow as tf

from official_albert import custom_gradients
from official_albert import directory_io
from official_albert import file_io
from official_albert import model_directory as md
from official_albert.checkpoints.formats import MODEL_TYPES
from official_albert.config import ATTENTION_TYPES
from official_albert.config import check_attention_type
from official_albert.data.input_pipeline import trim_to_longest
from official_albert.modeling.early_exit import check_head_options
from official_albert.modeling.early_exit import EXIT_HEAD_TYPES
from official_albert.modeling.early_exit import with_exit_iteration
from official_albert.serving.export_spec import check_precision
from official_albert.serving.export_spec import checked_tokenizer
from official_albert.serving.export_spec import export_seq_length
from official_albert.serving.export_spec import ExportSpec
from official_albert.serving.export_spec import load_for_export
from official_albert.serving.export_spec import LoadedExport
from official_albert.serving.export_spec import masks_in_graph
from official_albert.serving.export_spec import PRECISIONS
from official_albert.serving.export_tracing import shared_preprocessors
from official_albert.serving.pipeline_inputs import warn_patience
from official_albert.tokenization import AlbertPreprocessor
from official_albert.tokenization import SPECIAL_TOKEN_IDS
from official_albert.tokenization.in_graph import same_shape

logger = logging.getLogger(__name__)

MULTI_LABEL_THRESHOLD = md.MULTI_LABEL_THRESHOLD

_MASK_ID = SPECIAL_TOKEN_IDS["[MASK]"]
_SEP_ID = SPECIAL_TOKEN_IDS["[SEP]"]
_IDS = ("input_word_ids", "input_mask", "input_type_ids")
# Heads whose outputs have no sequence axis, so trailing padding can be cut before the model runs.
_TRIMMABLE_HEADS = ("classifier", "multiple_choice")


def squad_p_mask(input_mask: tf.Tensor, input_type_ids: tf.Tensor, input_word_ids: tf.Tensor) -> tf.Tensor:
  """Reference §5.2 p_mask for `[CLS] question [SEP] context [SEP]`: 0 for [CLS] and context tokens, else 1."""
  context = tf.logical_and(tf.equal(input_type_ids, 1), tf.not_equal(input_word_ids, _SEP_ID))
  context = tf.logical_and(context, tf.equal(input_mask, 1))
  is_cls = tf.equal(tf.range(tf.shape(input_word_ids)[-1]), 0)
  return 1 - tf.cast(tf.logical_or(context, is_cls), tf.int32)


def _float32_outputs(outputs) -> Dict[str, tf.Tensor]:
  """The outputs with bfloat16 ones (the pooler under `mixed_bfloat16`) in float32: one signature for both dtypes."""
  return {k: tf.cast(v, tf.float32) if v.dtype == tf.bfloat16 else v for k, v in dict(outputs).items()}


def model_in_hand(model, head: str, seq_length: Optional[int] = None, spm_model_file: Optional[str] = None,
                  labels: Optional[Sequence[str]] = None, multi_label: bool = False,
                  multi_label_threshold: float = MULTI_LABEL_THRESHOLD, embedding=None,
                  **spec_fields) -> Tuple[ExportSpec, LoadedExport]:
  """The (spec, loaded) of a model already in memory, for `AlbertServingModule` (tests, benchmarks, notebooks).

  Args:
    model: an `AlbertEncoder`, `AlbertPretrainer` or task model (weights loaded; an `AlbertEmbedder` with
      `embedding`).
    head, seq_length, spm_model_file: as `ExportSpec` (seq_length None: 128 cut to the model's positions);
      `spec_fields` are its other fields (do_lower_case, keep_accents, remove_space, tokenizer_mode,
      max_predictions_per_seq, text_pair, patience, depth, exit_threshold, max_qa_length). No folder is read: the
      tokenizer options not given are FullTokenizer's defaults.
    labels, multi_label, multi_label_threshold, embedding: as `LoadedExport` (labels, multi_label, threshold,
      embedding): the classifier's label names / per-label sigmoids, the encoder's `EmbeddingSettings`.
  """
  spec = ExportSpec("", "", head, seq_length, spm_model_file, **spec_fields)
  return spec, LoadedExport(model, spm_model_file, None, None if labels is None else list(labels), multi_label,
                            multi_label_threshold, None, embedding)


class AlbertServingModule(tf.Module):
  """The serving signatures around one of our models (see the module docstring).

  `AlbertServingModule(spec, loaded)` serves what `load_for_export(spec)` read (`export_from_model_dir`);
  `AlbertServingModule(model, head, **fields)` a model in hand (`model_in_hand`'s arguments).

  Args:
    spec: the export's settings (`ExportSpec`): head, seq_length, the tokenizer's settings, max_predictions_per_seq
      ([MASK] slots of the pretrainer's text/example signatures), text_pair (`serving_default` takes `text` and
      `text_b`), patience / depth / exit_threshold (classifier / multiple choice, fixed at export: early exit — the
      model needs exit heads — or every row at `depth` iterations; 0 / None = full depth).
    loaded: the model (weights loaded) and what goes with it (`LoadedExport`): the SentencePiece model of the
      in-graph tokenizer (needed for the text signatures), the classifier's label names / per-label sigmoids (module
      docstring), the encoder's `EmbeddingSettings` (the model is then an `AlbertEmbedder`: adds
      `sentence_embedding` and the `embed` signature).
    top_k: predictions per [MASK] in the pretrainer's text outputs.
    pad_to_multiple_of: dynamic padding for the heads without a sequence axis in their outputs (classifier,
      multiple_choice): each request batch is cut to its longest sequence rounded up to this multiple before the
      model runs (same outputs, several times faster on short texts). 0 = always run at seq_length (also what
      block_sparse models do).
  """

  def __init__(self, spec, loaded=None, *, top_k: int = 5, pad_to_multiple_of: int = 16, name: Optional[str] = None,
               **model_fields):
    super().__init__(name=name)
    if not isinstance(spec, ExportSpec):
      spec, loaded = model_in_hand(spec, loaded, **model_fields)
    elif model_fields:
      raise TypeError(f"AlbertServingModule(spec, loaded) takes no {sorted(model_fields)}: they are the spec's.")
    model, head = loaded.model, spec.head
    if head not in MODEL_TYPES:
      raise ValueError(f"head={head!r} is not one of {MODEL_TYPES}.")
    config = model.config
    # (the spec's length, else what `load_for_export` resolved, else the default cut to the model)
    seq_length = export_seq_length(spec.seq_length if spec.seq_length is not None else loaded.seq_length,
                                   config.max_position_embeddings)
    self.model = model
    self.head = head
    self.seq_length = int(seq_length)
    self.max_predictions_per_seq = int(spec.max_predictions_per_seq)
    self.top_k = int(min(top_k, config.vocab_size))
    self._pieces = int(config.vocab_size)
    self.text_pair = spec.text_pair
    if pad_to_multiple_of < 0:
      raise ValueError(f"pad_to_multiple_of must be >= 0 (0 = off), got {pad_to_multiple_of}.")
    # Block-sparse attention's pattern (its last global block, its random blocks) follows the padded length, so
    # cutting a request to its longest sequence would change the outputs: those models always run at seq_length.
    trimmable = head in _TRIMMABLE_HEADS and config.attention_type != "block_sparse"
    self.pad_to_multiple_of = int(pad_to_multiple_of) if trimmable else 0
    self.num_choices = getattr(model, "num_choices", None) if head == "multiple_choice" else None
    self.max_qa_length = spec.qa_length(self.seq_length) if head == "multiple_choice" else None  # (RACE's rows)
    self._tokenizer_options = spec.tokenizer_options()  # (recorded by tokenization_info)
    self.qa_settings = spec.qa_settings()  # (recorded by tokenization_info)
    self.labels = _check_labels(loaded.labels, model, head)
    if loaded.multi_label and head != "classifier":
      raise ValueError(f"multi_label=True is for classifier heads, not head={head!r}.")
    self.multi_label = bool(loaded.multi_label)
    self.multi_label_threshold = float(loaded.threshold)
    check_head_options(head, spec.patience, spec.depth)
    self.patience, self.depth, self.exit_threshold = int(spec.patience), spec.depth, float(spec.exit_threshold)
    warn_patience(self.patience, config.num_hidden_layers, "export")
    self._iterations = spec.depth or config.num_hidden_layers  # what `exit_iteration` says when no row exits early
    self._tokenizer_mode = spec.tokenizer_mode
    embedding = loaded.embedding
    if embedding is not None and head != "encoder":
      raise ValueError(f"embedding= is the encoder's sentence embedding, not head={head!r}'s.")
    self.embedding = embedding
    # The folder's default prompt (config_sentence_transformers.json), prepended as `embed` on the folder does, by
    # every text signature (one prompt per export: a SavedModel signature takes no prompt name).
    self.embed_prompt = embedding.prompt() if embedding is not None else ""
    self.preprocessor = None
    self.embed_preprocessor = None
    if loaded.spm_model_file:
      tokenizer = masks_in_graph(head, loaded.tokenizer or checked_tokenizer(loaded.spm_model_file, spec, config))
      self.preprocessor = AlbertPreprocessor(seq_length=seq_length, full_tokenizer=tokenizer)
      # The text outputs rank only ids that are pieces (a model may have more rows than its vocabulary pieces).
      self._pieces = min(tokenizer.vocab_size, config.vocab_size)
      self.top_k = min(self.top_k, self._pieces)
      if embedding is not None:
        length = min(self.seq_length, embedding.max_seq_length or self.seq_length)
        self.embed_preprocessor = (self.preprocessor if length == self.seq_length else
                                   AlbertPreprocessor(seq_length=length, full_tokenizer=tokenizer))

  # ---------------------------------------------------------------------------------------------- core
  def _call_model(self, features: Dict[str, tf.Tensor]) -> Dict[str, tf.Tensor]:
    """Raw model outputs (the `from_ids` contract)."""
    inputs = {k: tf.cast(features[k], tf.int32) for k in _IDS}
    if self.pad_to_multiple_of:
      inputs = trim_to_longest(inputs, self.pad_to_multiple_of)
    if self.head == "encoder":
      out = self.model(inputs, training=False)
      names = ("sequence_output", "pooled_output") + (("sentence_embedding",) if self.embedding is not None else ())
      return _float32_outputs({k: out[k] for k in names})
    if self.head == "pretrainer":
      inputs["masked_lm_positions"] = tf.cast(features["masked_lm_positions"], tf.int32)
      out = self.model(inputs, training=False)
      return _float32_outputs({k: out[k] for k in ("mlm_logits", "sop_logits", "sequence_output", "pooled_output")})
    if self.head == "squad_v2":
      inputs["p_mask"] = tf.cast(features["p_mask"], tf.int32)
    if self.head in EXIT_HEAD_TYPES:
      return _float32_outputs(self._exit_head_outputs(inputs))
    return _float32_outputs(self.model(inputs, training=False))

  def _exit_head_outputs(self, inputs: Dict[str, tf.Tensor]) -> Dict[str, tf.Tensor]:
    """Classifier / multiple choice: the model at the export's patience or depth, with `exit_iteration`."""
    options = {}  # (none at full depth: the plain call)
    if self.patience:
      options["patience"] = self.patience
      if self.head == "classifier":
        options.update(exit_threshold=self.exit_threshold,
                       multi_label_threshold=self.multi_label_threshold if self.multi_label else None)
    if self.depth is not None:
      options["depth"] = self.depth
    return with_exit_iteration(dict(self.model(inputs, training=False, **options)), self._iterations)

  def _head_outputs(self, features: Dict[str, tf.Tensor], forward=None) -> Dict[str, tf.Tensor]:
    """Raw outputs (`forward`: the signatures' one traced model call, else `_call_model`) plus the derived ones
    (probabilities, predictions, [MASK] top-k)."""
    out = dict((forward or self._call_model)(features))
    if self.head in ("classifier", "token_classifier", "multiple_choice"):
      logits = out["logits"]
      if self.head == "classifier" and logits.shape[-1] == 1:
        out["predictions"] = logits[:, 0]  # regression (STS-B): the score itself
      elif self.multi_label:  # one sigmoid per label, as the model was trained (not a softmax over them)
        out["probabilities"] = tf.sigmoid(logits)
        out["predictions"] = tf.cast(out["probabilities"] >= self.multi_label_threshold, tf.int32)
      else:
        out["probabilities"] = tf.nn.softmax(logits, axis=-1)
        out["predictions"] = tf.argmax(logits, axis=-1, output_type=tf.int32)
        if self.labels is not None:
          out["labels"] = tf.gather(tf.constant(self.labels, tf.string), out["predictions"])
    elif self.head == "pretrainer":
      probs = tf.nn.softmax(out["mlm_logits"], axis=-1)
      out["mlm_top_k_probabilities"], out["mlm_top_k_ids"] = tf.math.top_k(probs[..., :self._pieces], k=self.top_k)
      out["sop_probabilities"] = tf.nn.softmax(out["sop_logits"], axis=-1)
    return out

  def _mask_positions(self, word_ids: tf.Tensor, input_mask: tf.Tensor):
    """[MASK] positions of each row, padded/truncated to max_predictions_per_seq, and their 1/0 weights."""
    is_mask = tf.logical_and(tf.equal(word_ids, _MASK_ID), tf.equal(input_mask, 1))
    positions = tf.broadcast_to(tf.range(tf.shape(word_ids)[1], dtype=tf.int32), tf.shape(word_ids))
    ragged = tf.ragged.boolean_mask(positions, is_mask)
    shape = [None, self.max_predictions_per_seq]
    return ragged.to_tensor(0, shape=shape), tf.ones_like(ragged, tf.int32).to_tensor(0, shape=shape)

  def _text_outputs(self, text: tf.Tensor, text_b: Optional[tf.Tensor], shared=None) -> Dict[str, tf.Tensor]:
    """A text signature's outputs; `shared`: (forward, preprocessor, embed preprocessor) of `signatures`."""
    if self.preprocessor is None:
      raise ValueError("This module was built without spm_model_file; the text signatures need it.")
    forward, preprocessor, embed_preprocessor = shared or (self._call_model, self.preprocessor, self.embed_preprocessor)
    if self.embed_prompt:  # (an embedder's text, as `embed` reads it: its sentence_embedding is embed's)
      text = tf.strings.join([self.embed_prompt, text])
    if text_b is not None:  # (checked before flattening: an error names the [B, C] shapes the client sent)
      text, text_b = same_shape(text, text_b)
    batch_shape = tf.shape(text)
    flat_a = tf.reshape(text, [-1])
    flat_b = None if text_b is None else tf.reshape(text_b, [-1])
    # An empty second text packs one segment (the pipelines'); a multiple-choice row is RACE's (both, qa cap).
    qa_cap = self.max_qa_length if text_b is not None else None
    features = preprocessor(flat_a, flat_b, empty_b_alone=self.head != "multiple_choice", qa_cap=qa_cap)
    if self.head == "multiple_choice":
      features = {k: tf.reshape(v, tf.concat([batch_shape, [self.seq_length]], 0)) for k, v in features.items()}
    if self.head == "pretrainer":
      features["masked_lm_positions"], features["masked_lm_weights"] = self._mask_positions(
          features["input_word_ids"], features["input_mask"])
    if self.head == "squad_v2":
      features["p_mask"] = squad_p_mask(features["input_mask"], features["input_type_ids"],
                                        features["input_word_ids"])
    out = self._head_outputs(features, forward)
    if self.embed_preprocessor is not None and self.embed_preprocessor is not self.preprocessor:
      # The sentence embedding of the text as `embed` packs it (cut at the folder's max_seq_length, as the folder's
      # encode does); the other outputs stay at seq_length. A second model call, only when the two lengths differ.
      embed_features = embed_preprocessor(flat_a, flat_b)
      out["sentence_embedding"] = forward(embed_features)["sentence_embedding"]
    for key, value in features.items():
      out.setdefault(key, value)
    return out

  def _examples_spec(self) -> Dict[str, tf.io.FixedLenFeature]:
    length = self.seq_length * (self.num_choices or 1)
    spec = {k: tf.io.FixedLenFeature([length], tf.int64) for k in _IDS}
    if self.head == "pretrainer":
      spec["masked_lm_positions"] = tf.io.FixedLenFeature([self.max_predictions_per_seq], tf.int64)
    if self.head == "squad_v2":
      spec["p_mask"] = tf.io.FixedLenFeature([self.seq_length], tf.int64)
    return spec

  # ---------------------------------------------------------------------------------------------- signatures
  def _id_specs(self) -> Dict[str, tf.TensorSpec]:
    shape = [None, self.num_choices, None] if self.head == "multiple_choice" else [None, None]
    specs = {k: tf.TensorSpec(shape, tf.int32, name=k) for k in _IDS}
    if self.head == "pretrainer":
      specs["masked_lm_positions"] = tf.TensorSpec([None, None], tf.int32, name="masked_lm_positions")
    if self.head == "squad_v2":
      specs["p_mask"] = tf.TensorSpec([None, None], tf.int32, name="p_mask")
    return specs

  # Long because: one tf.function per signature of the module docstring's contract, each a few lines.
  def signatures(self) -> Dict[str, tf.types.experimental.ConcreteFunction]:
    """{signature name: concrete function} for `tf.saved_model.save`.

    The model's forward is traced once, as `from_ids`, and the tokenizer once (`export_tracing`); every other
    signature calls them, so the SavedModel stores each once (docs/serving.md "One model trace"). No AutoGraph: no
    tensor control flow to convert (Python `if`s on the head and spec; the model's are `ops.cond` / `while_loop`).
    """
    text_shape = [None, self.num_choices] if self.head == "multiple_choice" else [None]
    specs = self._id_specs()
    names = list(specs)

    @tf.function(input_signature=[specs[n] for n in names], autograph=False)
    def from_ids(*args):
      return self._call_model(dict(zip(names, args)))

    def forward(features):
      out = from_ids(*[tf.cast(features[n], tf.int32) for n in names])
      if self.head == "pretrainer":  # (the signatures' static [MASK] slots, which from_ids takes as None)
        out["mlm_logits"].set_shape(features["masked_lm_positions"].shape[:2].concatenate([None]))
      return out

    shared = (forward, *shared_preprocessors(self.preprocessor, self.embed_preprocessor)) if self.preprocessor else None

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="examples")], autograph=False)
    def serve_examples(examples):
      parsed = tf.io.parse_example(examples, self._examples_spec())
      if self.num_choices:
        parsed = {k: (tf.reshape(v, [-1, self.num_choices, self.seq_length]) if k in _IDS else v)
                  for k, v in parsed.items()}
      return self._head_outputs({k: tf.cast(v, tf.int32) for k, v in parsed.items()}, forward)

    @tf.function(input_signature=[], autograph=False)
    def tokenization_info():
      info = {key: tf.constant(value) for key, value in self._tokenizer_options.items()}
      info.update({"tokenizer_mode": tf.constant(self._tokenizer_mode),
                   "seq_length": tf.constant(self.seq_length, tf.int32),
                   "attention_type": tf.constant(str(self.model.config.attention_type))})  # (pipelines' padding)
      asset = getattr(getattr(self.preprocessor, "tokenizer", None), "spm_model_asset", None)
      info["spm_model_file"] = asset.asset_path if asset is not None else tf.constant("")
      if self.max_qa_length is not None:
        info["max_qa_length"] = tf.constant(self.max_qa_length, tf.int32)
      for key, value in self.qa_settings.items():  # (a SQuAD run's windows and post-processing)
        info[key] = tf.constant(value, tf.int32 if isinstance(value, int) else tf.float64)
      if self.embed_preprocessor is not None:
        info.update({"embed_prompt": tf.constant(self.embed_prompt),
                     "embed_seq_length": tf.constant(self.embed_preprocessor.packer.seq_length, tf.int32)})
      return info

    sigs = {"from_ids": from_ids.get_concrete_function(), "serve_examples": serve_examples.get_concrete_function(),
            "tokenization_info": tokenization_info.get_concrete_function()}
    if self.preprocessor is not None:
      @tf.function(input_signature=[tf.TensorSpec(text_shape, tf.string, name="text")], autograph=False)
      def serve_text(text):
        return self._text_outputs(text, None, shared)

      @tf.function(input_signature=[tf.TensorSpec(text_shape, tf.string, name="text"),
                                    tf.TensorSpec(text_shape, tf.string, name="text_b")], autograph=False)
      def serve_text_pair(text, text_b):
        return self._text_outputs(text, text_b, shared)

      if self.embed_preprocessor is not None:
        prompt = self.embed_prompt

        @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="text")], autograph=False)
        def embed(text):
          text = tf.reshape(text, [-1])
          features = shared[2](tf.strings.join([prompt, text]) if prompt else text)
          return {"sentence_embedding": forward(features)["sentence_embedding"]}

        sigs["embed"] = embed.get_concrete_function()
      sigs["serve_text"] = serve_text.get_concrete_function()
      sigs["serve_text_pair"] = serve_text_pair.get_concrete_function()
      sigs["serving_default"] = sigs["serve_text_pair" if self.text_pair else "serve_text"]
    else:
      sigs["serving_default"] = sigs["from_ids"]
    return sigs


def _check_labels(labels: Optional[Sequence[str]], model, head: str) -> Optional[list]:
  """The label names as a list (None without), checked against the head's number of outputs."""
  if labels is None:
    return None
  if head not in ("classifier", "token_classifier"):
    raise ValueError(f"labels= names classifier / token_classifier outputs, not head={head!r}.")
  labels = [str(label) for label in labels]
  outputs = int(model.classifier.output_weights.shape[0])
  if len(labels) != outputs:
    raise ValueError(f"{len(labels)} labels {labels[:5]}... but the {head} has {outputs} outputs; the labels file "
                     "belongs to another model.")
  return labels


def supports(attention_type: str) -> bool:
  """Whether the SavedModel computes `attention_type`: it is traced from our Keras layers, so every type."""
  return check_attention_type(attention_type) in ATTENTION_TYPES


def export_saved_model(module: AlbertServingModule, export_dir: str, overwrite: bool = False,
                       label_file: Optional[md.LabelFile] = None,
                       embedding_training: Optional[Dict[str, object]] = None) -> str:
  """Saves `module` with its signatures; written to a temporary directory first, then renamed into place.

  `label_file` is written beside `saved_model.pb` as labels.json (the names of all outputs, which the graph's
  `labels` output cannot give, and a multi-label model's threshold), so `pipelines.classify` serves the folder.
  `embedding_training` (an encoder's model directory's embedding_training.json) is written beside it too: the
  Matryoshka widths it was trained at, which `embed(folder, texts, dim=K)` and the server's OpenAI `dimensions` check,
  as they do on the OpenVINO / LiteRT folders. A killed export's `<export_dir>.tmp-<pid>-...-export` (its process
  gone) is removed first (`file_io.remove_dead_temporaries`); each call writes its own `file_io.export_temporary`.
  """
  if tf.io.gfile.exists(export_dir):
    if not overwrite:
      raise FileExistsError(f"{export_dir} exists; pass overwrite=True (--overwrite) to replace it.")
  parent = os.path.dirname(os.path.abspath(export_dir)) if "://" not in export_dir else os.path.dirname(export_dir)
  tf.io.gfile.makedirs(parent)
  tmp = file_io.export_temporary(export_dir)
  file_io.remove_dead_temporaries(export_dir)  # a killed export's <export_dir>.tmp-<pid>-...-export (a whole model)
  if tf.io.gfile.exists(tmp):  # (ours, on gs:// too)
    tf.io.gfile.rmtree(tmp)
  try:
    signatures = module.signatures()
    try:
      tf.saved_model.save(module, tmp, signatures=signatures)
    finally:  # (saved: chunked attention's gradients, read from TF's registry, may leave it: custom_gradients)
      custom_gradients.release(*(function.graph for function in signatures.values()))
    if label_file is not None:
      md.write_label_file(tmp, label_file)
    if embedding_training:
      md.write_embedding_training_file(tmp, embedding_training)
    directory_io.replace_directory(tmp, export_dir)
  except BaseException:  # (an interrupt too) no half-written folder is left beside export_dir
    if tf.io.gfile.exists(tmp):
      tf.io.gfile.rmtree(tmp)
    raise
  return export_dir


EXPORT_DTYPES = PRECISIONS["saved_model"]  # float32, bfloat16


def export_from_model_dir(model_dir: str, export_dir: str, head: str = "pretrainer", *, dtype: str = "float32",
                          top_k: int = 5, pad_to_multiple_of: int = 16, **options) -> str:
  """Loads `model_dir` (native, HF or original release; see `checkpoints.loading.load_model`) and exports it.

  `model_dir`, `export_dir`, `head` and `options` are the `ExportSpec` the OpenVINO export shares (seq_length,
  spm_model_file, num_labels, num_choices, do_lower_case, keep_accents, remove_space, tokenizer_mode,
  max_predictions_per_seq, text_pair, pooling, normalize, overwrite). The SentencePiece model defaults to the
  directory's (`spiece.model` or `30k-clean.model`); a directory without one exports only the id and example
  signatures unless `spm_model_file` is given.

  `dtype="bfloat16"` exports the model under Keras' `mixed_bfloat16` policy: the GEMMs run in bfloat16 (AMX / AVX-512
  BF16 on Xeon CPUs, tensor cores on GPUs), LayerNorm and the logits stay float32, the weights are stored in float32
  and cast once per request (not once per shared layer). Same signatures, input and output names and dtypes.
  (Storing bfloat16 copies instead was measured and not kept: docs/performance.md.)
  """
  spec = ExportSpec(model_dir, export_dir, head, **options)
  check_precision("saved_model", dtype)  # (before anything loads)
  spec.check()
  file_io.check_checkpoint_path(export_dir, "--export_dir")  # (the SavedModel's variables are a checkpoint)
  loaded = load_for_export(spec, dtype)
  module = AlbertServingModule(spec, loaded, top_k=top_k, pad_to_multiple_of=pad_to_multiple_of)
  trained = md.read_embedding_training_file(spec.model_dir) if spec.head == "encoder" else None
  return export_saved_model(module, export_dir, overwrite=spec.overwrite, label_file=loaded.export_label_file(),
                            embedding_training=trained)
