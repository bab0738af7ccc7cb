"""A model folder opened once for the server: its head, its outputs, and one call that answers a batch of texts.

The server (`official_albert.serve`, `serving.http_app`) answers through the same pipeline functions a user calls in
process — `pipelines.classify` for a classifier, `embedding.embed` for an encoder — so that a request's answer is the
pipeline's answer on the same folder (tests/official_albert/serving/test_server.py compares them). What differs is
only that the folder is opened here once (the built Keras model and its tokenizer, the opened export runtime, or the
loaded SavedModel) and that object is passed to the pipeline on every batch, instead of the path, which would rebuild
the model per call.

Heads served in this cut: classifier (single-label; a model directory, a SavedModel, an OpenVINO or LiteRT export)
and encoder (sentence embeddings; a model directory, a sentence-transformers folder, an OpenVINO or LiteRT export).
Any other head, a multi-label or a regression classifier is refused at start-up naming the folder and the head.
A classifier model directory with exit heads can instead be served depth-wise (`enable_depthwise`, the server's
`--depthwise_batching`): its texts then run in `serving.depthwise_slots`, and `finish_logits` turns each request's
logits into the same outputs as `predict`.
"""

from __future__ import annotations

import os
from typing import Dict, List, Optional, Sequence

import numpy as np
import tensorflow as tf

from official_albert import model_directory as md
from official_albert.checkpoints import native
from official_albert.modeling import early_exit
from official_albert.serving import embedding
from official_albert.serving import pipelines
from official_albert.serving.depthwise_slots import DepthwiseSlots
from official_albert.serving.pipeline_inputs import default_seq_length
from official_albert.tokenization import FullTokenizer

CLASSIFIER = "classifier"
ENCODER = "encoder"


class ModelLoadError(Exception):
  """A folder the server cannot serve; the message names the folder and the reason."""


def directory_head(folder: str) -> str:
  """The head of a model directory: "classifier" when it holds a sequence-classification head, else "encoder"
  (sentence embeddings from the encoder of any other directory: pretrainer, encoder, sentence-transformers)."""
  if os.path.exists(md.path(folder, md.SENTENCE_TRANSFORMERS_MODULES_FILE)):
    return ENCODER
  model_format = md.detect_format(folder)
  if model_format == "native":
    return CLASSIFIER if native.has_submodule(folder, "classifier") else ENCODER
  if model_format in ("hf", "hf_tf"):
    architectures = (md.read_json(md.path(folder, md.CONFIG_FILE)) or {}).get("architectures") or []
    return CLASSIFIER if any("SequenceClassification" in a for a in architectures) else ENCODER
  return ENCODER


class ServedModel:
  """One folder, loaded once. `predict(texts, pairs)` gives the batch's output arrays, named as the OIP outputs.

  Attributes:
    name: the model's name in the routes. folder: the path it was opened from.
    head: "classifier" or "encoder". backend: "model_directory", "saved_model", "openvino" or "litert".
    labels: a classifier's label names (the order of `probabilities`). has_exits: a classifier with exit heads
      (its outputs add `exit_iteration`). takes_pairs: a classifier that takes a second segment (`text_pair`).
    width: the embedding width (encoder) or the number of labels.
    tokenizer: the `FullTokenizer` whose token counts order a batch and fill `usage`.
  """

  def __init__(self, name: str, folder: str, patience: Optional[int] = None):
    self.name, self.folder = name, os.fspath(folder)
    self.patience = patience
    self.slots: Optional[DepthwiseSlots] = None  # set by `enable_depthwise` (--depthwise_batching)
    if not os.path.isdir(self.folder):
      raise ModelLoadError(f"{self.folder}: no such folder.")
    try:
      self._open()
    except ModelLoadError:
      raise
    except Exception as e:  # any reason a folder does not load: one start-up error naming the folder
      raise ModelLoadError(f"{self.folder}: cannot be served: {type(e).__name__}: {e}") from e

  # Long because: one branch per kind of folder (SavedModel, export folder, model directory) and head, each a few lines.
  def _open(self) -> None:
    self.has_exits, self.labels, self.width = False, None, None
    self.takes_pairs = False  # a classifier's `text_pair` input (every classifier but a SavedModel without it)
    if pipelines.is_saved_model(self.folder):
      self.backend, self.head = "saved_model", CLASSIFIER
      self.model = pipelines.LoadedSavedModel(self.folder)
      signatures = self.model.loaded.signatures
      if "serve_text" not in signatures or "logits" not in signatures["serve_text"].structured_outputs:
        raise ModelLoadError(f"{self.folder}: a SavedModel without a text-in classifier signature; this server takes "
                             "classifier SavedModels (export_saved_model --head=classifier); serve an encoder's model "
                             "directory or OpenVINO / LiteRT export instead.")
      outputs = signatures["serve_text"].structured_outputs
      self.has_exits = "exit_iteration" in outputs
      self.takes_pairs = "serve_text_pair" in signatures
      info = signatures["tokenization_info"]()
      self.tokenizer = FullTokenizer(info["spm_model_file"].numpy().decode("utf-8"),
                                     do_lower_case=bool(info["do_lower_case"].numpy()),
                                     mode=info["tokenizer_mode"].numpy().decode("utf-8"))
      self._set_labels(int(outputs["logits"].shape[-1]), self.folder)
      self._check_patience()
      return
    if pipelines.is_export_folder(self.folder):
      self.model = pipelines.open_export_folder(self.folder)
      self.backend, self.head, self.tokenizer = self.model.format_name, self.model.head, self.model.tokenizer
      if self.head == ENCODER:
        self.model.require_outputs(("sentence_embedding",), "the server's embeddings")
      elif self.head == CLASSIFIER:
        self.has_exits = "exit_iteration" in self.model.output_names
        self.takes_pairs = True  # (the folder's tokenizer packs the pair; the graph takes ids)
        self._set_labels(int(self.model.num_labels), self.folder)
        self._check_patience()
      else:
        raise ModelLoadError(self._unsupported())
      return
    self.backend, self.head = "model_directory", directory_head(self.folder)
    if self.head == CLASSIFIER:
      self.model, self.tokenizer, _ = pipelines.resolve_model(self.folder, CLASSIFIER, None, True, "hf", "classify")
      self.has_exits = bool(early_exit.exit_heads(self.model))
      self.takes_pairs = True
      self._set_labels(int(self.model.num_labels), self.folder)
    else:
      self.model, self.tokenizer, settings = embedding.load_embedder(self.folder)
      self.seq_length = settings.max_seq_length

  def enable_depthwise(self, slots: int, runtime: str = "tensorflow",
                       length_buckets: Optional[Sequence[int]] = None) -> None:
    """Serves this classifier with depth-wise continuous batching (`serving.depthwise_slots`) over `slots` rows at
    the server's patience (none: 0, full depth) on `runtime` ("tensorflow" or "openvino"), and runs one text
    through it (the graphs are traced or compiled before the server is ready); `length_buckets` as
    `DepthwiseSlots`'s. Raises ModelLoadError for a folder
    that cannot run depth-wise, naming why."""
    if self.backend != "model_directory" or self.head != CLASSIFIER:
      raise ModelLoadError(f"{self.folder}: --depthwise_batching serves classifier model directories fine-tuned with "
                           f"task.exit_heads=true; this is a {self.backend} {self.head} (an export's graph runs whole "
                           "batches: serve it without --depthwise_batching).")
    try:
      self.slots = DepthwiseSlots(self.model, self.patience or 0, slots,
                                  default_seq_length(self.model, self.folder), runtime=runtime,
                                  length_buckets=length_buckets)
    except (ValueError, ImportError) as e:
      raise ModelLoadError(f"{self.folder}: {e}") from e
    self.slots.add(None, self.slots.pack(self.tokenize(["warm up"])[0]))
    while self.slots.occupied():
      self.slots.step()

  def tokenize(self, texts: Sequence[str]) -> List[List[int]]:
    """Token ids of each text (no special tokens): what depth-wise batching packs into a slot."""
    return self.tokenizer.encode_ids_batch(list(texts))

  def finish_logits(self, logits: np.ndarray, exits: np.ndarray) -> Dict[str, np.ndarray]:
    """A classifier's outputs (as `predict`'s) from its head's logits [n, K] and exit iterations [n], as
    `pipelines.classify` turns logits into answers (softmax; the first most probable label)."""
    probs = tf.nn.softmax(np.asarray(logits, np.float32).reshape(len(exits), -1), axis=-1).numpy()
    ids = np.argmax(probs, axis=-1) if len(exits) else np.zeros((0,), np.int64)
    return {"label": np.asarray([self.labels[int(i)] for i in ids], object),
            "label_id": np.asarray(ids, np.int64),
            "probabilities": probs.astype(np.float32).reshape(len(exits), len(self.labels)),
            "exit_iteration": np.asarray(exits, np.int64)}

  def _check_patience(self) -> None:
    if self.patience is not None:
      raise ModelLoadError(f"{self.folder}: --patience is fixed in an export ({self.backend}); serve it without "
                           "--patience, or re-export it with --patience.")

  def _set_labels(self, num_labels: int, folder: str) -> None:
    saved = md.read_label_file(folder) if num_labels > 1 else None
    if num_labels == 1 or (saved is not None and saved.multi_label):
      raise ModelLoadError(self._unsupported("a regression head" if num_labels == 1 else "a multi-label classifier"))
    self.labels = list(saved.labels) if saved is not None and saved.labels else md.fallback_label_names(
        folder, num_labels)
    self.width = num_labels

  def _unsupported(self, what: Optional[str] = None) -> str:
    return (f"{self.folder}: {what or 'a ' + str(self.head) + ' head'} is not served yet (this server takes "
            "single-label classifiers and encoders); use the in-process pipelines (official_albert.serving).")

  def token_count(self, text: str, pair: Optional[str] = None) -> int:
    """Tokens of the packed text ([CLS] A [SEP] (B [SEP])): how the batcher groups requests, and OpenAI's usage."""
    n = len(self.tokenizer.encode_ids_batch([text])[0]) + 2
    return n + (len(self.tokenizer.encode_ids_batch([pair])[0]) + 1 if pair is not None else 0)

  def truncate(self, vectors: np.ndarray, dimensions: Optional[int]) -> np.ndarray:
    """An encoder's vectors cut to their first `dimensions` and re-normalised (OpenAI's `dimensions`), as
    `embedding.embed(folder, texts, dim=dimensions)` answers: a width the folder was trained at
    (`embedding_training.json`'s Matryoshka widths; the full width always). Raises ValueError naming the widths."""
    if dimensions is None:
      return vectors
    width = int(vectors.shape[-1])
    return embedding.truncate(vectors, embedding.check_dim(self.folder, dimensions, width, force=False))

  def predict(self, texts: Sequence[str], pairs: Optional[Sequence[str]] = None) -> Dict[str, np.ndarray]:
    """The batch's outputs: classifier `label` (object array of str), `label_id` int64 [n], `probabilities` float32
    [n, k] (the order of `labels`), `exit_iteration` int64 [n] with exit heads; encoder `sentence_embedding` float32
    [n, d]. Computed by the pipeline functions on the whole batch."""
    texts = list(texts)
    if self.head == ENCODER:
      if pairs is not None:
        raise ValueError("text_pair: an encoder embeds single texts; send `text` only.")
      options = {} if self.backend != "model_directory" else {"tokenizer": self.tokenizer,
                                                              "seq_length": self.seq_length}
      vectors = np.asarray(embedding.embed(self.model, texts, batch_size=max(1, len(texts)), **options), np.float32)
      self.width = int(vectors.shape[-1])  # (known from the warm-up batch on: the metadata never runs the model)
      return {"sentence_embedding": vectors.reshape(len(texts), -1)}
    # The label names of every backend passed explicitly: `probabilities` below is read in their order.
    options = {"batch_size": max(1, len(texts)), "labels": self.labels}
    if self.backend == "model_directory":
      options["tokenizer"] = self.tokenizer
      if self.patience is not None:
        options["patience"] = self.patience
    results = pipelines.classify(self.model, texts, text_pairs=list(pairs) if pairs is not None else None, **options)
    out = {"label": np.asarray([r["label"] for r in results], object),
           "label_id": np.asarray([r["label_id"] for r in results], np.int64),
           "probabilities": np.asarray([[r["probabilities"][name] for name in self.labels] for r in results],
                                       np.float32).reshape(len(texts), len(self.labels))}
    if self.has_exits:
      out["exit_iteration"] = np.asarray([r["exit_iteration"] for r in results], np.int64)
    return out

  def outputs_metadata(self) -> List[Dict[str, object]]:
    """OIP metadata of the outputs (-1: the batch dimension)."""
    if self.head == ENCODER:
      return [{"name": "sentence_embedding", "datatype": "FP32", "shape": [-1, self.embedding_width()]}]
    out = [{"name": "label", "datatype": "BYTES", "shape": [-1]},
           {"name": "label_id", "datatype": "INT64", "shape": [-1]},
           {"name": "probabilities", "datatype": "FP32", "shape": [-1, len(self.labels)]}]
    if self.has_exits:
      out.append({"name": "exit_iteration", "datatype": "INT64", "shape": [-1]})
    return out

  def embedding_width(self) -> int:
    """The embedding width, from the warm-up batch (`official_albert.serve` runs one before serving)."""
    if self.width is None:
      self.predict(["width"])
    return self.width
