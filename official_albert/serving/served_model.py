"""A model folder opened once for the server: its head, its outputs, and one call that answers a batch of texts.

The server (`official_albert.serve`, `serving.http_app`) answers through the same pipeline functions a user calls in
process — `pipelines.classify` for a classifier, `embedding.embed` for an encoder — so that a request's answer is the
pipeline's answer on the same folder (tests/official_albert/serving/test_server.py compares them). What differs is
only that the folder is opened here once (the built Keras model and its tokenizer, the opened export runtime, or the
loaded SavedModel) and that object is passed to the pipeline on every batch, instead of the path, which would rebuild
the model per call.

Heads served (docs/serving.md has the table of folders per head): classifiers (single-label, or a regression head
answering `score`) and encoders, which also take token ids (`TokenIds` rows, OIP's `input_word_ids`) except from a
SavedModel (its signatures take text); question answering, token classification and multiple choice
(`task_pipelines`) and fill-mask, whose rows are their pipeline's arguments; and rerankers (`pipelines.rerank`'s
scores of pairs). A multi-label classifier or a SavedModel without text signatures is refused at start-up naming the
folder and the reason (`served_heads`).
A classifier model directory with exit heads can instead be served depth-wise (`enable_depthwise`, the server's
`--depthwise_batching`): its texts then run in `serving.depthwise_slots`, and `finish_logits` turns each request's
logits into the same outputs as `predict`.

How a folder is opened per backend and head (and refused at start-up) is `served_folder.ServedFolder`, the base
class of `ServedModel`; this module is the rest of the server's view of a folder: which rows it takes (texts, pairs,
token ids, a task head's inputs), how a batch of them is answered, and how it is described in the metadata.
"""

from __future__ import annotations

import json
import logging
import os
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
import tensorflow as tf

from official_albert.retrieval import matryoshka
from official_albert.serving import embedding
from official_albert.serving import pipelines
from official_albert.serving import rerank
from official_albert.serving import task_pipelines
from official_albert.serving.depthwise_slots import DepthwiseSlots
from official_albert.serving.exit_runner import exit_runner
from official_albert.serving.graph_call import graph_call
from official_albert.serving.http_protocols import ApiError
from official_albert.serving.saved_model_runtime import saved_model_embed_text
from official_albert.serving.served_folder import ServedFolder
from official_albert.serving.served_heads import CLASSIFIER
from official_albert.serving.served_heads import ENCODER
from official_albert.serving.served_heads import FILL_MASK
from official_albert.serving.served_heads import ModelLoadError
from official_albert.serving.served_heads import MULTIPLE_CHOICE
from official_albert.serving.served_heads import QUESTION_ANSWERING
from official_albert.serving.served_heads import RERANKER
from official_albert.serving.served_heads import TASK_INPUTS
from official_albert.serving.served_heads import TASK_OUTPUTS
from official_albert.serving.served_heads import TOKEN_CLASSIFIER
from official_albert.serving.served_rows import ChoiceRow
from official_albert.serving.served_rows import mask_rows
from official_albert.serving.served_rows import MaskRow
from official_albert.serving.served_rows import TokenIds

# Choices a multiple-choice row may hold (a model is built per count: its weights do not depend on it).
MAX_CHOICES = 16


class ServedModel(ServedFolder):
  """One folder, loaded once. `predict(texts, pairs)` gives the batch's output arrays, named as the OIP outputs.

  Attributes:
    name: the model's name in the routes. folder: the path it was opened from.
    head: one of `HEADS`. backend: "model_directory", "saved_model", "openvino" or "litert".
    labels: a classifier's label names (the order of `probabilities`). has_exits: a classifier with exit heads
      (its outputs add `exit_iteration`). takes_pairs: a classifier that takes a second segment (`text_pair`).
    width: the embedding width (encoder) or the number of labels.
    tokenizer: the `FullTokenizer` whose token counts order a batch and fill `usage`.
    count_prompt: the prompt an encoder's pipeline prepends to each text, counted with it ('' for none).
    id_limits: for a model that takes token ids (`TokenIds` rows), the vocabulary, positions and segments they must
      fit; None for one that takes text only.
  """

  def __init__(self, name: str, folder: str, patience: Optional[int] = None, head: Optional[str] = None,
               exit_threshold: Optional[float] = None):
    """`head`: one of `HEADS` (the server's --model_head), or None to read it from the folder. `exit_threshold`: a
    regression head's exit rule at `patience` (classify's; None: its default); the other heads do not use it."""
    self.name, self.folder = name, os.fspath(folder)
    self.patience, self.exit_threshold = patience, exit_threshold
    self.requested_head = head
    self.id_limits = None
    self.slots: Optional[DepthwiseSlots] = None  # set by `enable_depthwise` (--depthwise_batching)
    self.open_folder()
    self._read_encoder_text()

  def _read_encoder_text(self) -> None:
    """Sets `count_prompt`, the prompt an encoder's pipeline prepends to each text ('' for none and for the other
    heads), which `token_count` counts with the text: OpenAI's `usage` is the tokens the model saw. A SavedModel's
    `packed_length` is the length its `embed` signature packs a text into (the folder's max_seq_length when shorter
    than --seq_length), both read from its graph (`tokenization_info`)."""
    self.count_prompt = ""
    if self.head != ENCODER:
      return
    if self.backend == "saved_model":
      self.count_prompt, length = saved_model_embed_text(self.model.loaded.signatures)
      self.packed_length = min(self.packed_length, length or self.packed_length)
    elif self.backend == "model_directory":
      self.count_prompt = self.embed_prompt  # (the directory's default prompt, which `predict` passes to `embed`)
    else:  # an export folder's runtime: the prompt its serving_config.json records, as `embed` prepends it
      self.count_prompt = embedding.default_prompt(self.model)

  def enable_depthwise(self, slots: int, runtime: str = "tensorflow",
                       length_buckets: Optional[Sequence[int]] = None, iterations_per_step: int = 1) -> None:
    """Serves this classifier with depth-wise continuous batching (`serving.depthwise_slots`) over `slots` rows at
    the server's patience (none: 0, full depth) on `runtime` ("tensorflow" or "openvino"), and runs one text
    through it (the graphs are traced or compiled before the server is ready); `length_buckets` and
    `iterations_per_step` as `DepthwiseSlots`'s, except that `iterations_per_step` is the most a step runs: above
    the model's iterations (the server's default 3 on a 1- or 2-layer model) it is capped there, and logged.
    Raises ModelLoadError for a folder that cannot run depth-wise, naming why."""
    if self.regression:
      raise ModelLoadError(f"{self.folder}: --depthwise_batching serves classifiers with labels; this is a regression "
                           "head: serve it without --depthwise_batching.")
    if self.backend != "model_directory" or self.head != CLASSIFIER:
      raise ModelLoadError(f"{self.folder}: --depthwise_batching serves classifier model directories fine-tuned with "
                           f"task.exit_heads=true; this is a {self.backend} {self.head} (an export's graph runs whole "
                           "batches: serve it without --depthwise_batching).")
    layers = int(self.model.config.num_hidden_layers)
    if isinstance(iterations_per_step, int) and iterations_per_step > layers:  # (DepthwiseSlots refuses the rest)
      logging.info("%s: depth-wise batching runs %d iterations per step, not %d (--depthwise_iterations): the "
                   "model has %d.", self.folder, layers, iterations_per_step, layers)
      iterations_per_step = layers
    try:
      self.slots = DepthwiseSlots(self.model, self.patience or 0, slots, self.seq_length, runtime=runtime,
                                  length_buckets=length_buckets, iterations_per_step=iterations_per_step)
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
    `pipelines.classify` turns logits into answers (softmax; the first most probable label; a regression head's
    one logit is its `score`)."""
    if self.regression:
      return {"score": np.asarray(logits, np.float32).reshape(len(exits)),
              "exit_iteration": np.asarray(exits, np.int64)}
    probs = tf.nn.softmax(np.asarray(logits, np.float32).reshape(len(exits), -1), axis=-1).numpy()
    ids = np.argmax(probs, axis=-1) if len(exits) else np.zeros((0,), np.int64)
    return {"label": np.asarray([self.labels[int(i)] for i in ids], object),
            "label_id": np.asarray(ids, np.int64),
            "probabilities": probs.astype(np.float32).reshape(len(exits), len(self.labels)),
            "exit_iteration": np.asarray(exits, np.int64)}

  def token_count(self, text, pair: Optional[str] = None) -> int:
    """Tokens of the packed text ([CLS] A [SEP] (B [SEP])): how the batcher groups requests, and OpenAI's and
    Cohere's usage; a `TokenIds` row's length. An encoder's count is that of the text it embeds, its prompt
    (`count_prompt`) prepended; an encoder's, classifier's or reranker's is cut at the length it packs a text (and
    its pair) into (`packed_length`), as the text is."""
    if isinstance(text, TokenIds):
      return len(text.ids)
    if isinstance(text, ChoiceRow):
      return sum(len(ids) for ids in self.tokenizer.encode_ids_batch([text.context, text.question])) + 3
    if isinstance(text, MaskRow):
      text = text.text
    elif self.count_prompt:
      text = self.count_prompt + text
    n = len(self.tokenizer.encode_ids_batch([text])[0]) + 2
    n += len(self.tokenizer.encode_ids_batch([pair])[0]) + 1 if pair is not None else 0
    return n if self.packed_length is None else min(n, self.packed_length)

  def truncate(self, vectors: np.ndarray, dimensions: Optional[int]) -> np.ndarray:
    """An encoder's vectors cut to their first `dimensions` and re-normalised (OpenAI's `dimensions`), as
    `embedding.embed(folder, texts, dim=dimensions)` answers: a width the folder was trained at
    (`embedding_training.json`'s Matryoshka widths; the full width always). Raises ValueError naming the widths."""
    if dimensions is None:
      return vectors
    width = int(vectors.shape[-1])
    return matryoshka.truncate(vectors, matryoshka.check_dim(self.folder, dimensions, width, force=False))

  def group(self, text, pair: Optional[str] = None) -> int:
    """The batcher's kind of a row (rows of one kind share a model call): 0 a text, 1 a text with its pair (for
    question answering: a question with its context), 2 a `TokenIds` row."""
    if isinstance(text, ChoiceRow):
      return 100 + len(text.choices)  # one choice count per call
    if isinstance(text, MaskRow):
      return 1000 + text.top_k  # one top_k per call
    return 2 if isinstance(text, TokenIds) else int(pair is not None)

  def id_rows(self, ids: np.ndarray, mask: np.ndarray, types: np.ndarray) -> List[TokenIds]:
    """A request's token ids [n, s] as `TokenIds` rows (what `predict` takes in place of texts)."""
    return [TokenIds(tuple(int(x) for x in i), tuple(int(x) for x in m), tuple(int(x) for x in t))
            for i, m, t in zip(ids, mask, types)]

  def task_rows(self, inputs: Dict[str, list], top_k: Optional[int] = None) -> Tuple[list, Optional[list]]:
    """(texts, pairs) for the batcher from a task head's OIP inputs (`TASK_INPUTS`): QA's questions with their
    contexts as pairs; a token classifier's texts; fill-mask's `MaskRow`s with the request's `top_k` (default 5)."""
    if self.head == QUESTION_ANSWERING:
      return list(inputs["question"]), list(inputs["context"])
    if self.head == FILL_MASK:
      return self.mask_rows(list(inputs["text"]), top_k), None
    if self.head == MULTIPLE_CHOICE:
      width = len(inputs["choices"][0])
      if not 2 <= width <= MAX_CHOICES:
        raise ApiError(400, f"choices: {width} per row; send between 2 and {MAX_CHOICES} (shape [n, k]).")
      if self.backend != "model_directory" and width not in self.choice_models:
        raise ApiError(400, f"choices: {width} per row, but model {self.name!r} was exported for "
                       f"{self.model.num_choices} choices ({self.backend}: fixed at export); send that many per row.")
      return [ChoiceRow(c, q, tuple(o)) for c, q, o in zip(inputs["context"], inputs["question"],
                                                            inputs["choices"])], None
    return list(inputs["text"]), None

  def mask_rows(self, texts: List[str], top_k: Optional[int]) -> List[MaskRow]:
    """A fill-mask request's rows (`served_rows.mask_rows`: each text checked here, since one without [MASK] would
    fail the whole batch in the pipeline), at `top_k` (default 5, at most a SavedModel's --top_k)."""
    if self.backend == "saved_model":
      return mask_rows(self.tokenizer, texts, top_k, self.name, cut_at=self.seq_length, max_top_k=self.max_top_k)
    return mask_rows(self.tokenizer, texts, top_k, self.name, positions=int(self.model.config.max_position_embeddings))

  def warm_up(self) -> None:
    """Runs each kind of row the model takes (texts, pairs, token ids; a task head's or a reranker's rows twice) so
    that the graphs are traced before the server is ready (`serving.graph_call` traces a Keras model's graph at its
    second call). Raises the model's error."""
    rows = {QUESTION_ANSWERING: (["warm up?"], ["warm up"]), RERANKER: (["warm up"], ["warm up"]),
            TOKEN_CLASSIFIER: (["warm up"], None)}.get(self.head)
    if self.head == MULTIPLE_CHOICE:  # (the first count a folder takes: 4 for a directory, an export's own)
      rows = ([ChoiceRow("warm up", "warm up?", tuple(f"choice {i}" for i in range(min(self.choice_models))))], None)
    elif self.head == FILL_MASK:
      rows = (self.mask_rows(["warm [MASK] up"], None), None)
    if rows is not None:
      for _ in range(2):
        self.predict(*rows)
      return
    if self.takes_pairs:
      self.predict(["warm up"], ["warm up"])
    self.predict(["warm up"])
    if self.id_limits is not None:
      self.predict([TokenIds((2, 3), (1, 1), (0, 0))])

  def predict(self, texts: Sequence[str], pairs: Optional[Sequence[str]] = None) -> Dict[str, np.ndarray]:
    """The batch's outputs: classifier `label` (object array of str), `label_id` int64 [n], `probabilities` float32
    [n, k] (the order of `labels`), `exit_iteration` int64 [n] with exit heads; encoder `sentence_embedding` float32
    [n, d]; question answering `answer` (str), `score` float32, `start`, `end` int64 [n]; token classifier `words`
    (a JSON string per text: the pipeline's list of {word, start, end, label, score}). Computed by the pipeline
    functions on the whole batch; `TokenIds` rows by the model on the ids (`predict_ids`)."""
    texts = list(texts)
    if texts and isinstance(texts[0], TokenIds):
      return self.predict_ids(texts)
    if self.head == QUESTION_ANSWERING:
      answers = task_pipelines.question_answering(self.model, texts, list(pairs), tokenizer=self.tokenizer,
                                                  batch_size=max(1, len(texts)), **self.qa_options)
      return {"answer": np.asarray([a["answer"] for a in answers], object),
              "score": np.asarray([a["score"] for a in answers], np.float32),
              "start": np.asarray([a["start"] for a in answers], np.int64),
              "end": np.asarray([a["end"] for a in answers], np.int64)}
    if self.head == RERANKER:  # `score` as pipelines.rerank reports it, `logit` what it orders by
      if pairs is None:
        raise ApiError(400, "text_pair: missing; a reranker scores (query, document) pairs: send the queries in text "
                       "and the documents in text_pair (or POST /rerank).")
      scores, logits = rerank.score_pairs(self.model, self.tokenizer, texts, pairs, self.seq_length)
      return {"score": scores, "logit": logits}
    if self.head == FILL_MASK:  # (`MaskRow`s of one top_k per call: `group`; a SavedModel's own pipeline)
      filled = (pipelines.fill_mask_saved_model if self.backend == "saved_model" else pipelines.fill_mask)(
          self.model, [r.text for r in texts], top_k=texts[0].top_k, tokenizer=self.tokenizer,
          **({} if self.backend == "saved_model" else {"batch_size": max(1, len(texts))}))
      return {"predictions": np.asarray([json.dumps(f) for f in filled], object)}
    if self.head == MULTIPLE_CHOICE:
      picks = task_pipelines.multiple_choice(
          self.choice_model(len(texts[0].choices)), [r.context for r in texts], [r.question for r in texts],
          [list(r.choices) for r in texts], tokenizer=self.tokenizer, batch_size=max(1, len(texts)),
          **self.choice_options)
      return {"label": np.asarray([p["label"] for p in picks], np.int64),
              "choice": np.asarray([p["choice"] for p in picks], object),
              "scores": np.asarray([p["scores"] for p in picks], np.float32).reshape(len(texts), -1)}
    if self.head == TOKEN_CLASSIFIER:
      words = task_pipelines.token_classification(self.model, texts, seq_length=self.seq_length, labels=self.labels,
                                                  tokenizer=self.tokenizer, batch_size=max(1, len(texts)))
      return {"words": np.asarray([json.dumps(w) for w in words], object)}
    if self.head == ENCODER:
      if pairs is not None:
        raise ValueError("text_pair: an encoder embeds single texts; send `text` only.")
      options = {} if self.backend == "saved_model" else {"tokenizer": self.tokenizer, **(  # (a SavedModel: in-graph)
          {"seq_length": self.seq_length, "prompt": self.embed_prompt} if self.backend == "model_directory" else {})}
      vectors = np.asarray(embedding.embed(self.model, texts, batch_size=max(1, len(texts)), **options), np.float32)
      self.width = int(vectors.shape[-1])  # (known from the warm-up batch on: the metadata never runs the model)
      return {"sentence_embedding": vectors.reshape(len(texts), -1)}
    # The label names of every backend passed explicitly: `probabilities` below is read in their order.
    # (labels: None for a regression head; a SavedModel's `classify` tokenizes in its graph, not with `tokenizer`.)
    options = {"batch_size": max(1, len(texts)), "labels": self.labels, "tokenizer": self.tokenizer}
    if self.backend == "model_directory":  # (an export packs at its own length)
      options["seq_length"] = self.seq_length  # the folder's, as classify(folder) reads it (ServedFolder)
      if self.patience is not None:
        options["patience"] = self.patience
        if self.regression and self.exit_threshold is not None:
          options["exit_threshold"] = self.exit_threshold
    results = pipelines.classify(self.model, texts, text_pairs=list(pairs) if pairs is not None else None, **options)
    return self._classifier_outputs(results)

  def _classifier_outputs(self, results: Sequence[Dict]) -> Dict[str, np.ndarray]:
    """`classify`'s dicts as the classifier's output arrays (`predict`)."""
    if self.regression:
      out = {"score": np.asarray([r["score"] for r in results], np.float32)}
    else:
      out = {"label": np.asarray([r["label"] for r in results], object),
             "label_id": np.asarray([r["label_id"] for r in results], np.int64),
             "probabilities": np.asarray([[r["probabilities"][name] for name in self.labels] for r in results],
                                         np.float32).reshape(len(results), len(self.labels))}
    if self.has_exits:
      out["exit_iteration"] = np.asarray([r["exit_iteration"] for r in results], np.int64)
    return out

  def predict_ids(self, rows: Sequence[TokenIds]) -> Dict[str, np.ndarray]:
    """The outputs of `predict` for rows of token ids: the model run on them as sent (padded with mask 0 to the
    longest row; a block_sparse model's to the length its text is packed at, `id_length`), the classifier's logits
    turned into answers as `classify` turns them (`finish_logits`; its exit rule at the server's patience), the
    encoder's `sentence_embedding`."""
    if not pipelines.pads_to_cap(self.model):
      return self._run_ids(rows, max(len(r.ids) for r in rows))
    # A block_sparse model's pattern follows the padded length: each row at its own `id_length` (one run per length,
    # put back in the rows' order), so its answer is that of the same text sent as text, whatever its batch-mates.
    lengths = [self.id_length(len(r.ids)) for r in rows]
    parts = {n: self._run_ids([r for r, m in zip(rows, lengths) if m == n], n) for n in sorted(set(lengths))}
    order = np.argsort(np.concatenate([[i for i, m in enumerate(lengths) if m == n] for n in parts]), kind="stable")
    return {k: np.concatenate([parts[n][k] for n in parts], axis=0)[order] for k in next(iter(parts.values()))}

  def id_length(self, n: int) -> int:
    """The length a block_sparse model runs a row of `n` token ids at: the length `predict` packs a text at (the
    served seq_length, at most the id limits' max_length), or the id limits' max_length for a longer row (a model
    directory takes ids up to its positions)."""
    cap = int(self.id_limits.max_length) if self.id_limits is not None else n
    text_length = min(int(getattr(self, "seq_length", None) or cap), cap)
    return text_length if n <= text_length else cap

  def _run_ids(self, rows: Sequence[TokenIds], length: int) -> Dict[str, np.ndarray]:
    """`predict_ids` for `rows` padded with mask 0 to `length`."""
    pad = lambda values: list(values) + [0] * (length - len(values))  # noqa: E731
    inputs = {name: tf.constant(np.asarray([pad(getattr(r, field)) for r in rows], np.int32))
              for name, field in (("input_word_ids", "ids"), ("input_mask", "mask"), ("input_type_ids", "types"))}
    if self.head == ENCODER:
      out = self.model(inputs) if self.backend != "model_directory" else graph_call(self.model)(inputs)
      return {"sentence_embedding": np.asarray(out["sentence_embedding"], np.float32).reshape(len(rows), -1)}
    run = exit_runner(self.model, self.backend != "model_directory", self.patience, None,
                      self.exit_threshold if self.regression else None, None)
    logits, exits = run(inputs)
    out = self.finish_logits(np.asarray(logits), np.asarray(exits))
    if not self.has_exits:
      del out["exit_iteration"]
    return out

  def inputs_metadata(self) -> List[Dict[str, object]]:
    """OIP metadata of the inputs: the text inputs, then (for a model that takes them: not one served depth-wise,
    whose slots pack text) the token-id inputs, sent instead of the text ones."""
    if self.head in TASK_INPUTS:
      return [{"name": name, "datatype": "BYTES", "shape": [-1] * rank}
              for name, rank in TASK_INPUTS[self.head].items()]
    out = [{"name": "text", "datatype": "BYTES", "shape": [-1]}]
    if self.takes_pairs:
      out.append({"name": "text_pair", "datatype": "BYTES", "shape": [-1]})
    if self.id_limits is not None and self.slots is None:
      out += [{"name": name, "datatype": "INT32", "shape": [-1, -1]} for name in
              ("input_word_ids", "input_mask", "input_type_ids")]
    return out

  def outputs_metadata(self) -> List[Dict[str, object]]:
    """OIP metadata of the outputs (-1: the batch dimension)."""
    if self.head in TASK_OUTPUTS:
      return [{"name": name, "datatype": datatype, "shape": list(shape)}
              for name, datatype, shape in TASK_OUTPUTS[self.head]]
    if self.head == ENCODER:
      return [{"name": "sentence_embedding", "datatype": "FP32", "shape": [-1, self.embedding_width()]}]
    out = [{"name": "score", "datatype": "FP32", "shape": [-1]}] if self.regression else [
        {"name": "label", "datatype": "BYTES", "shape": [-1]}, {"name": "label_id", "datatype": "INT64", "shape": [-1]},
        {"name": "probabilities", "datatype": "FP32", "shape": [-1, len(self.labels)]}]
    if self.has_exits:
      out.append({"name": "exit_iteration", "datatype": "INT64", "shape": [-1]})
    return out

  def embedding_width(self) -> int:
    """The embedding width, from the warm-up batch (`official_albert.serve` runs one before serving)."""
    if self.width is None:
      self.predict(["width"])
    return self.width
