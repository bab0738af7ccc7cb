"""Gradient helpers of the training step: densify, the reference global-norm clip, micro-batch accumulation.

Reference order per optimizer step (§4.5): gradients → (all-reduce across replicas) → global-norm clip → update. The
all-reduce and the clip happen inside the optimizers (`optimization.py`), once per optimizer step, so that k
micro-batches or N replicas clip the same global gradient that one device with the whole batch would.
"""

from __future__ import annotations

from typing import Callable, List, Optional, Sequence, Tuple

import tensorflow as tf


def densify(grad):
  """IndexedSlices (embedding gathers) → dense: the reference's update touches the whole table (m and v decay)."""
  if grad is None:
    return None
  if isinstance(grad, tf.IndexedSlices):
    return tf.convert_to_tensor(grad)
  return grad


def clip_by_global_norm(grads: Sequence[Optional[tf.Tensor]],
                        clip_norm: float = 1.0) -> Tuple[List[Optional[tf.Tensor]], tf.Tensor]:
  """Reference clipping (`tf.clip_by_global_norm(grads, 1.0)`); `None` entries pass through.

  Returns:
    (clipped gradients, global norm before clipping) — the norm is what a trainer logs.
  """
  grads = list(grads)
  present = [i for i, g in enumerate(grads) if g is not None]
  if not present:
    raise ValueError("clip_by_global_norm: every gradient is None.")
  clipped, norm = tf.clip_by_global_norm([grads[i] for i in present], clip_norm)
  out = list(grads)
  for i, g in zip(present, clipped):
    out[i] = g
  return out, norm


def accumulate_micro_batch_gradients(grad_fn: Callable, batch, num_micro_batches: int):
  """Splits `batch` into `num_micro_batches` equal parts and sums `grad_fn` over them with a `tf.while_loop`.

  Only one micro-batch's activations live at a time, so a small device reaches a large effective batch inside a
  single `tf.function` (XLA-friendly: static shapes, no variables). `grad_fn` returns each micro-batch's *share* of
  the batch loss: its sums divided by the whole batch's counts (the trainer passes the global denominators, see
  `base_task`), so the sum over micro-batches is exactly the full-batch loss and gradient — ratio losses such as the
  MLM loss Σ(w·nll)/(Σw + 1e-5) included.

  Args:
    grad_fn: `micro_batch -> (loss share, [gradients])`, a pure function of its input (gradients dense or None).
    batch: A nest of tensors with a static leading dimension divisible by `num_micro_batches`.
    num_micro_batches: k >= 1.

  Returns:
    (summed loss, list of summed gradients), None where `grad_fn` returned None.
  """
  k = int(num_micro_batches)
  if k < 1:
    raise ValueError(f"num_micro_batches must be >= 1, got {num_micro_batches!r}.")
  leaves = tf.nest.flatten(batch)
  sizes = {int(t.shape[0]) if t.shape.rank and t.shape[0] is not None else None for t in leaves}
  if None in sizes or len(sizes) != 1:
    raise ValueError(f"accumulate_micro_batch_gradients needs one static batch size, got leading dims {sizes}.")
  size = sizes.pop()
  if size % k:
    raise ValueError(f"Batch size {size} (one replica's) is not divisible by num_micro_batches={k} "
                     "(trainer.gradient_accumulation_steps): make task.train_data.global_batch_size a multiple of the "
                     "replicas in sync × that.")
  micro = size // k

  def take(i):
    return tf.nest.map_structure(lambda t: t[i * micro:(i + 1) * micro], batch)

  if k == 1:
    loss, grads = grad_fn(batch)
    return loss, [densify(g) for g in grads]

  # The first micro-batch fixes which gradients are None and their shapes/dtypes.
  loss0, grads0 = grad_fn(take(0))
  grads0 = [densify(g) for g in grads0]
  present = [i for i, g in enumerate(grads0) if g is not None]

  def body(i, loss_sum, sums):
    # -1 (to the end) for the other axes: with dynamic padding (pad_to_multiple_of) the sequence axis has no
    # static length.
    loss_i, grads_i = grad_fn(tf.nest.map_structure(
        lambda t: tf.slice(t, [i * micro] + [0] * (t.shape.rank - 1), [micro] + [-1] * (t.shape.rank - 1)), batch))
    grads_i = [densify(g) for g in grads_i]
    return (i + 1, loss_sum + tf.cast(loss_i, loss_sum.dtype),
            [s + tf.cast(grads_i[j], s.dtype) for s, j in zip(sums, present)])

  _, loss_sum, sums = tf.while_loop(lambda i, *_: i < k, body,
                                    (tf.constant(1), tf.convert_to_tensor(loss0), [grads0[j] for j in present]))
  summed: List[Optional[tf.Tensor]] = [None] * len(grads0)
  for s, j in zip(sums, present):
    summed[j] = s
  return loss_sum, summed
