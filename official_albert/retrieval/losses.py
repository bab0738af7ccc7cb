"""Embedding-training losses, written as sentence-transformers defines them (its values and gradients are the oracle).

Each takes embeddings (not a model), so a task computes the encoder's vectors once and any loss — or Matryoshka's sum
of a loss over several prefix widths — reads them:

- `mnrl_loss` (MultipleNegativesRankingLoss): anchor i's positive is candidate i; every other row's positive and every
  hard negative in the batch are its negatives; cross-entropy over cosine × `scale`. `symmetric=True` averages the
  anchor→candidate and positive→anchor directions, each with its own softmax (sentence-transformers'
  `directions=("query_to_doc", "doc_to_query"), partition_mode="per_direction"`, formerly
  MultipleNegativesSymmetricRankingLoss).
- `cosent_loss` (CoSENTLoss): for scored pairs, log(1 + Σ exp(scale·(cos_j − cos_i))) over the pairs (i, j) whose
  label says i is more similar than j.
- `cosine_loss` (CosineSimilarityLoss): mean squared error between the pair's cosine and its label.
- `matryoshka_loss` (MatryoshkaLoss): Σ_d w_d · loss(embeddings cut to their first d dimensions, re-normalised).

Why the formulas of sentence-transformers and not our own: users compare embedders trained here with ones trained
there, and its defaults (scale 20, the per-direction symmetric form) are what the field reports.
"""

from __future__ import annotations

from typing import Callable, Optional, Sequence

from keras import ops

LOSSES = ("mnrl", "cosent", "cosine")


def l2_normalize(x, epsilon: float = 1e-12):
  """x / max(‖x‖, epsilon) along the last axis (torch's `F.normalize`, which sentence-transformers' cosine uses)."""
  norm = ops.sqrt(ops.sum(ops.square(x), axis=-1, keepdims=True))
  return x / ops.maximum(norm, epsilon)


def cosine_matrix(a, b):
  """[N, M] cosine similarities of the rows of `a` [N, D] and `b` [M, D]."""
  return ops.matmul(l2_normalize(a), ops.transpose(l2_normalize(b)))


def pairwise_cosine(a, b):
  """[N] cosine similarity of row i of `a` with row i of `b`."""
  return ops.sum(l2_normalize(a) * l2_normalize(b), axis=-1)


def in_batch_false_negatives(anchor_keys, positive_keys, negative_keys: Sequence = ()):
  """Which in-batch "negatives" repeat a text of the row they are negatives for (`mnrl_loss`'s `false_negatives`).

  Keys identify texts (equal keys = the same model input: a hash of the token ids). Candidate c of row r is
  masked when c is not r's positive and c's text is r's anchor or r's positive, or c is the positive of another row
  with r's anchor (an anchor with several positives: each is relevant to it). In the symmetric direction, anchor j
  is masked for positive r when j is not r and j's text is r's anchor or r's positive, or j's positive is r's
  positive. These are the repeats sentence-transformers' `BatchSamplers.NO_DUPLICATES` keeps out of a batch.

  Args:
    anchor_keys, positive_keys: [G] the keys of the batch's rows (gathered across replicas as the embeddings are).
    negative_keys: [G] tensors, the hard negatives' keys.

  Returns:
    (forward [G, G·(1 + negatives)], backward [G, G]) boolean masks, row r for the batch's row r.
  """
  count = ops.shape(anchor_keys)[0]
  candidates = ops.concatenate([positive_keys, *negative_keys], axis=0) if len(negative_keys) else positive_keys
  rows, columns = ops.arange(count), ops.arange(ops.shape(candidates)[0])
  anchor, positive = ops.expand_dims(anchor_keys, 1), ops.expand_dims(positive_keys, 1)  # [G, 1]: row r's
  candidate = ops.expand_dims(candidates, 0)
  # Column c's anchor, for the positive columns (c < G); the negatives' columns get none (never equal: & below).
  column_is_positive = ops.expand_dims(columns < count, 0)
  column_anchor = ops.expand_dims(ops.take(anchor_keys, ops.minimum(columns, count - 1), axis=0), 0)
  forward = ((candidate == anchor) | (candidate == positive) | ((column_anchor == anchor) & column_is_positive))
  forward = forward & (ops.expand_dims(rows, 1) != ops.expand_dims(columns, 0))
  other_anchor, other_positive = ops.expand_dims(anchor_keys, 0), ops.expand_dims(positive_keys, 0)
  backward = (other_anchor == anchor) | (other_anchor == positive) | (other_positive == positive)
  backward = backward & (ops.expand_dims(rows, 1) != ops.expand_dims(rows, 0))
  return forward, backward


def mnrl_loss(anchors, positives, negatives: Sequence = (), scale: float = 20.0, symmetric: bool = False,
              all_anchors=None, offset=0, false_negatives=None):
  """MultipleNegativesRankingLoss: cross-entropy of each anchor over every candidate of the batch.

  Args:
    anchors: [B, D] the anchors of this replica's rows.
    positives: [G, D] the positives of the batch the negatives span: G = B on one device; under `tf.distribute` the
      positives of every replica (the global batch, gathered), so that in-batch negatives span the global batch.
    negatives: [G, D] tensors, the hard negatives (column `negative_column`), gathered as `positives` are.
    scale: the cosine's multiplier (1 / temperature; sentence-transformers' default 20).
    symmetric: also score each of this replica's positives against every anchor of the batch.
    all_anchors: [G, D] the batch's anchors for the symmetric direction (gathered); default `anchors`.
    offset: where this replica's rows start in the gathered batch (replica id × B).
    false_negatives: None (every other candidate is a negative, as sentence-transformers computes), or the
      (forward, backward) masks of `in_batch_false_negatives`: masked candidates leave the softmax.

  Returns:
    The mean loss over this replica's anchors (a scalar). Averaged over replicas, it is the global batch's loss.
  """
  batch = ops.shape(anchors)[0]
  candidates = ops.concatenate([positives, *negatives], axis=0) if len(negatives) else positives
  rows = ops.arange(batch) + offset
  forward = cosine_matrix(anchors, candidates) * scale  # [B, G·(1 + negatives)]
  if false_negatives is not None:
    forward = _left_out(forward, ops.take(false_negatives[0], rows, axis=0))
  positive = ops.take_along_axis(forward, ops.expand_dims(rows, -1), axis=1)[:, 0]
  log_z = ops.logsumexp(forward, axis=1)
  if symmetric:
    own_positives = ops.take(positives, rows, axis=0)
    others = anchors if all_anchors is None else all_anchors
    backward = cosine_matrix(own_positives, others) * scale  # [B, G]: positive i against every anchor
    if false_negatives is not None:
      backward = _left_out(backward, ops.take(false_negatives[1], rows, axis=0))
    log_z = (log_z + ops.logsumexp(backward, axis=1)) / 2.0
  return ops.mean(log_z - positive)


def _left_out(logits, mask):
  """`logits` with the masked entries at -1e9 (out of a float32 softmax; their gradient is zero)."""
  return ops.where(mask, ops.full_like(logits, -1e9), logits)


def cosent_loss(a, b, labels, scale: float = 20.0):
  """CoSENTLoss over the pairs (a_i, b_i) with similarity labels [N] (any scale: only their order is used)."""
  scores = pairwise_cosine(a, b) * scale
  differences = ops.expand_dims(scores, 1) - ops.expand_dims(scores, 0)  # [i, j] = s_i − s_j
  labels = ops.cast(labels, scores.dtype)
  wanted = ops.cast(ops.expand_dims(labels, 1) < ops.expand_dims(labels, 0), scores.dtype)  # label_i < label_j
  differences = differences - (1.0 - wanted) * 1e12
  flat = ops.concatenate([ops.zeros((1,), scores.dtype), ops.reshape(differences, (-1,))], axis=0)
  return ops.logsumexp(flat, axis=0)


def cosine_loss(a, b, labels):
  """CosineSimilarityLoss: mean((cos(a_i, b_i) − label_i)²)."""
  return ops.mean(ops.square(pairwise_cosine(a, b) - ops.cast(labels, a.dtype)))


def truncate(embeddings, dim: int):
  """The first `dim` dimensions, re-normalised (a Matryoshka prefix; sentence-transformers' `shrink`)."""
  if dim > embeddings.shape[-1]:
    raise ValueError(f"matryoshka dimension {dim} is larger than the embedding ({embeddings.shape[-1]}).")
  return l2_normalize(embeddings[..., :dim])


def matryoshka_loss(loss: Callable[..., object], embeddings: Sequence, dims: Sequence[int],
                    weights: Optional[Sequence[float]] = None):
  """MatryoshkaLoss: Σ_d w_d · loss(*[truncate(e, d) for e in embeddings]).

  Args:
    loss: a function of the embedding tensors (labels and options bound), e.g.
      `lambda a, p: mnrl_loss(a, p, scale=20.0)`.
    embeddings: the tensors `loss` takes, full width.
    dims: the prefix widths (the full width included if it is to be trained, as sentence-transformers' users list
      it, e.g. [768, 512, 256, 128, 64]).
    weights: one per width (default 1 each).
  """
  weights = list(weights) if weights is not None else [1.0] * len(dims)
  if len(weights) != len(dims):
    raise ValueError(f"{len(weights)} matryoshka weights for {len(dims)} dimensions.")
  total = 0.0
  for dim, weight in zip(dims, weights):
    total = total + weight * loss(*[truncate(e, int(dim)) for e in embeddings])
  return total
