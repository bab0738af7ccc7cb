"""Reranking with a cross-encoder: `rerank(model_dir, query, documents, top_k=None)` → `[{index, score}]` best first.

  from official_albert import pipelines
  pipelines.rerank("runs/reranker", "How do I resume training?", ["Checkpoints are written every N steps.", ...])
  # [{'index': 0, 'score': 0.97}, {'index': 2, 'score': 0.41}, ...]

The model is a sentence-pair classifier with one output (what `--experiment=text_ranking` trains; any one-output
`AlbertClassifier` directory, HF or native, reads the same): each (query, document) pair is packed as
`[CLS] query [SEP] document [SEP]`, exactly as the training records were, and its logit is the pair's relevance.
Three steps, each its own function so that a server can batch the middle one: `preprocess` (tokenize and pack),
`forward` (the model's logits) and `postprocess` (order and cut).

`score` is the sigmoid of the logit, as sentence-transformers' CrossEncoder and TEI's /rerank report a one-output
reranker; the order follows the logits (a sigmoid saturates: two logits of 9 and 12 both round to 1.0), ties by the
documents' order.
"""

from __future__ import annotations

from typing import Dict, Iterator, List, Optional, Sequence, Tuple

import numpy as np
import tensorflow as tf

from official_albert.serving.graph_call import graph_call
from official_albert.serving.pipeline_inputs import default_seq_length
from official_albert.serving.pipeline_inputs import pads_to_cap
from official_albert.serving.pipelines import check_vocab
from official_albert.serving.pipelines import packed_batches
from official_albert.serving.pipelines import resolve_model
from official_albert.tokenization import FullTokenizer


def load_reranker(model_or_dir, tokenizer: Optional[FullTokenizer] = None, do_lower_case: Optional[bool] = None,
                  mode: str = "hf"):
  """(model, tokenizer, model_dir or None): a one-output classifier and the tokenizer it was trained with (a
  directory's tokenizer_config.json do_lower_case unless `do_lower_case` is given).

  Raises:
    ValueError: the model has more than one output (a label classifier, not a reranker).
  """
  model, tokenizer, model_dir = resolve_model(model_or_dir, "classifier", tokenizer, do_lower_case, mode, "rerank")
  if int(getattr(model, "num_labels", 1)) != 1:
    raise ValueError(f"rerank needs a classifier with one output (a relevance score per pair, as "
                     f"--experiment=text_ranking trains), but {model_dir or type(model).__name__} has "
                     f"{model.num_labels} labels; use pipelines.classify for a label classifier.")
  check_vocab(model, tokenizer)
  return model, tokenizer, model_dir


def preprocess(tokenizer: FullTokenizer, query: str, documents: Sequence[str], seq_length: int, max_positions: int,
               batch_size: int, pad_to_cap: bool = False) -> Iterator[Dict[str, tf.Tensor]]:
  """The model inputs of the (query, document) pairs, `batch_size` pairs at a time (padded to each batch's longest
  pair, capped at `seq_length`; longer pairs are cut longest-first, as the training records were, and logged).
  `pad_to_cap`: every pair at the cap (`pipelines.pads_to_cap`: block_sparse models)."""
  for _, inputs in packed_batches(tokenizer, [query] * len(documents), list(documents), batch_size, seq_length,
                                  max_positions, pad_to_cap):
    yield inputs


def forward(model, batches) -> np.ndarray:
  """[N] float32 logits of every pair of `batches`."""
  call = graph_call(model)
  logits = []
  for inputs in batches:
    batch = np.asarray(call(inputs)["logits"], np.float32)
    if batch.ndim == 2 and batch.shape[-1] != 1:  # (flattened, [N, 2] gave 2N scores: indices of other documents)
      raise ValueError(f"rerank needs one logit per pair (a one-output classifier), but the model gives "
                       f"{batch.shape[-1]} per pair; use pipelines.classify for a label classifier.")
    logits.append(batch.reshape(-1))
  return np.concatenate(logits) if logits else np.zeros([0], np.float32)


def score_pairs(model, tokenizer: FullTokenizer, queries: Sequence[str], documents: Sequence[str],
                seq_length: int) -> Tuple[np.ndarray, np.ndarray]:
  """(scores, logits), float32 [N], of (query, document) pairs that each bring their own query (a server's batch of
  several requests' pairs), in one forward pass, packed as `preprocess` packs them; score = sigmoid(logit)."""
  batches = (inputs for _, inputs in packed_batches(tokenizer, list(queries), list(documents), max(1, len(queries)),
                                                    seq_length, model.config.max_position_embeddings,
                                                    pads_to_cap(model)))
  logits = forward(model, batches)
  return (1.0 / (1.0 + np.exp(-logits.astype(np.float64)))).astype(np.float32), logits


def postprocess(logits: np.ndarray, top_k: Optional[int] = None) -> List[Dict[str, object]]:
  """`[{index, score}]` best first (order by logit, ties by index; score = sigmoid), the first `top_k` when set."""
  order = np.argsort(-logits, kind="stable")
  if top_k is not None:
    order = order[:max(int(top_k), 0)]
  scores = 1.0 / (1.0 + np.exp(-logits.astype(np.float64)))
  return [{"index": int(i), "score": float(scores[i])} for i in order]


def rerank(model_or_dir, query: str, documents: Sequence[str], top_k: Optional[int] = None,
           tokenizer: Optional[FullTokenizer] = None, seq_length: Optional[int] = None,
           do_lower_case: Optional[bool] = None, mode: str = "hf", batch_size: int = 32,
           return_documents: bool = False) -> List[Dict[str, object]]:
  """The documents ordered by relevance to the query.

  Args:
    model_or_dir: a reranker's model directory (`--experiment=text_ranking`'s model_dir, or a one-output classifier
      converted from HF), or an `AlbertClassifier` with one output (then pass `tokenizer`).
    query: the query.
    documents: the candidates (e.g. a first-stage retriever's top k).
    top_k: keep the best `top_k` (default: all).
    seq_length: longest packed pair; default: the trainer directory's evaluation length (its params.yaml), else the
      model's max_position_embeddings.
    do_lower_case: default: the directory's tokenizer_config.json (as training tokenized), else True.
    batch_size: pairs per forward pass.
    return_documents: add each document's `text`.

  Returns:
    `[{"index": i, "score": sigmoid(logit)}, ...]` best first (indices into `documents`).

  Raises:
    ValueError: the query is not a string, documents is a string or holds a non-string, top_k or batch_size is not
      a whole number in range, or the model is not a one-output classifier.
  """
  if not isinstance(query, str):
    raise ValueError(f"rerank: query must be one string, got {type(query).__name__}.")
  if isinstance(documents, (str, bytes)):
    raise ValueError("rerank: documents must be a list of strings (got one string; wrap it in a list).")
  documents = list(documents)
  bad = next((i for i, d in enumerate(documents) if not isinstance(d, str)), None)
  if bad is not None:
    raise ValueError(f"rerank: documents[{bad}] is a {type(documents[bad]).__name__}, not a string.")
  if top_k is not None and (isinstance(top_k, bool) or not isinstance(top_k, (int, np.integer)) or top_k < 0):
    raise ValueError(f"rerank: top_k={top_k!r}; give a whole number >= 0, or None for every document.")
  if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) or batch_size < 1:
    raise ValueError(f"rerank: batch_size={batch_size!r}; give a whole number >= 1.")
  if not documents:
    return []
  model, tokenizer, model_dir = load_reranker(model_or_dir, tokenizer, do_lower_case, mode)
  if seq_length is None:
    seq_length = default_seq_length(model, model_dir)
  batches = preprocess(tokenizer, query, documents, seq_length, model.config.max_position_embeddings, batch_size,
                       pads_to_cap(model))
  results = postprocess(forward(model, batches), top_k)
  if return_documents:
    for result in results:
      result["text"] = documents[result["index"]]
  return results



def loaded_reranker(model_or_dir, batch_size: int = 32):
  """`order_of(query, documents, top_k=None)`: `rerank(model_or_dir, ...)`'s answer with the reranker loaded once
  (`rerank` given a directory loads it per call: per query, over a query set) and its pairs packed as the directory
  records (its evaluation length)."""
  model, tokenizer, model_dir = load_reranker(model_or_dir)
  seq_length = default_seq_length(model, model_dir)

  def order_of(query: str, documents: Sequence[str], top_k: Optional[int] = None) -> List[Dict[str, object]]:
    return rerank(model, query, documents, top_k=top_k, tokenizer=tokenizer, seq_length=seq_length,
                  batch_size=batch_size)

  return order_of
