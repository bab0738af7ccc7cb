"""GradCache: the exact gradient of an in-batch-negatives loss over a batch whose activations do not fit at once.

An in-batch-negatives loss (MNRL: every row's positive is every other row's negative) gets harder, and better, as
the batch grows, but it is not a sum over rows, so gradient accumulation over micro-batches computes another loss
(each micro-batch ranked against itself). GradCache (Gao et al. 2021; sentence-transformers'
CachedMultipleNegativesRankingLoss) splits the *encoder* instead of the loss:

1. embed the batch chunk by chunk without a tape (only the [rows, D] embeddings are kept);
2. compute the loss on the whole batch's embeddings and its gradient with respect to them, d(loss)/d(embeddings)
   (the loss's own graph is small: a [rows, rows] similarity matrix);
3. embed each chunk again under a tape and add the gradient of Σ embeddings · d(loss)/d(embeddings) with respect to
   the weights: by the chain rule the sum over chunks is d(loss)/d(weights).

Activations live for one chunk at a time, at the price of a second forward pass. The result is the plain loss's
gradient (tests/tasks/test_text_embedding.py: within 1e-5), dropout included: each chunk's second pass draws the
masks of its first (the dropout seed generators' states are saved before each chunk and restored for its second
pass, then left as the first pass left them).

The chunks run in a `tf.while_loop` (one copy of the encoder in the graph for any number of chunks; the first chunk
and a shorter last one run outside it), so a step's graph does not grow with the batch.
"""

from __future__ import annotations

from typing import Callable, Dict, List, Sequence, Tuple

import tensorflow as tf


def _rows(inputs) -> int:
  sizes = {int(t.shape[0]) if t.shape.rank and t.shape[0] is not None else None for t in tf.nest.flatten(inputs)}
  if None in sizes or len(sizes) != 1:
    raise ValueError(f"GradCache needs one static batch size across the inputs, got leading dims {sizes} "
                     "(the trainer's batches have one; drop_remainder keeps it static).")
  return sizes.pop()


def _take(inputs, begin, size: int):
  """Rows [begin, begin + size) of every tensor (`begin` may be a tensor; `size` is static)."""
  return tf.nest.map_structure(
      lambda t: tf.slice(t, tf.concat([[begin], tf.zeros([t.shape.rank - 1], tf.int32)], 0),
                         [size] + t.shape.as_list()[1:]), inputs)


def _read(variable) -> tf.Tensor:
  """A variable's current value as a tensor (a Keras variable's `.value` is a property, a tf.Variable's a method)."""
  value = variable.value
  return tf.identity(value() if callable(value) else value)


def _densify(grad):
  return tf.convert_to_tensor(grad) if isinstance(grad, tf.IndexedSlices) else grad


def cached_gradients(embed: Callable, loss_fn: Callable, inputs, variables: Sequence[tf.Variable], chunk: int,
                     rng_states: Sequence = ()) -> Tuple[tf.Tensor, Dict[str, tf.Tensor], List]:
  """The loss over `inputs` and its gradient with respect to `variables`, the encoder run `chunk` rows at a time.

  Args:
    embed: `inputs` rows -> {name: [rows, D] embedding}, the model's forward pass in training mode.
    loss_fn: {name: [B, D] float32 embedding of the whole batch} -> (the loss, the scalar to differentiate: the loss
      times a loss scale, or the loss itself); any cross-replica gathering inside (the gradient of the second with
      respect to the embeddings is what is cached).
    inputs: a nest of [B, ...] tensors (B static).
    variables: what to differentiate with respect to (the model's trainable variables).
    chunk: rows per chunk (>= 1; a last chunk of B mod chunk rows when it does not divide B).
    rng_states: the dropout seed generators' state variables (`compat.seed_generator_states`).

  Returns:
    (the loss, the whole batch's embeddings (float32, no gradient), the gradients: one per variable, dense, None where
    the loss does not depend on it).
  """
  if int(chunk) < 1:
    raise ValueError(f"GradCache chunk must be >= 1 rows, got {chunk}.")
  chunks = _Chunks(inputs, int(chunk), list(rng_states))
  embeddings, saved_states = chunks.embed_without_tape(embed)
  end_states = [_read(s) for s in chunks.states]

  # The loss on the whole batch and its gradient with respect to the embeddings.
  with tf.GradientTape() as tape:
    tape.watch(list(embeddings.values()))
    loss, differentiated = loss_fn(embeddings)
  cached = tape.gradient(differentiated, embeddings)
  cached = {k: tf.zeros_like(embeddings[k]) if g is None else tf.cast(g, tf.float32) for k, g in cached.items()}

  grads = chunks.weight_gradients(embed, cached, variables, saved_states)
  for s, end in zip(chunks.states, end_states):  # (the seed generators as the first pass left them)
    s.assign(end)
  return loss, embeddings, grads


class _Chunks:
  """The batch's chunks: the first (outside the loop: it fixes names and shapes), `full - 1` more of `size` rows in
  a `tf.while_loop`, and a last one of `tail` rows when `size` does not divide the batch."""

  def __init__(self, inputs, size: int, states: List):
    self.inputs, self.states = inputs, states
    rows = _rows(inputs)
    self.size = min(size, rows)
    self.full, self.tail = divmod(rows, self.size)

  def embed_without_tape(self, embed) -> Tuple[Dict[str, tf.Tensor], List[tf.Tensor]]:
    """Pass 1: ({name: [B, D] float32 embeddings}, [per state variable: its value before each chunk, [chunks, ...]])."""
    size, full = self.size, self.full

    def run(begin, rows):
      saved = [_read(s) for s in self.states]
      out = embed(_take(self.inputs, begin, rows))
      return saved, {k: tf.stop_gradient(tf.cast(v, tf.float32)) for k, v in out.items()}

    saved0, out0 = run(0, size)
    names = sorted(out0)
    saved_parts = [[s[None]] for s in saved0]
    parts = {k: [out0[k]] for k in names}
    if full > 1:
      state_arrays = [tf.TensorArray(s.dtype, size=full - 1, element_shape=s.shape) for s in saved0]
      out_arrays = [tf.TensorArray(tf.float32, size=full - 1, element_shape=out0[k].shape) for k in names]

      def body(i, state_arrays, out_arrays):
        saved, out = run(i * size, size)
        return (i + 1, [a.write(i - 1, s) for a, s in zip(state_arrays, saved)],
                [a.write(i - 1, out[k]) for a, k in zip(out_arrays, names)])

      _, state_arrays, out_arrays = tf.while_loop(lambda i, *_: i < full, body,
                                                  (tf.constant(1), state_arrays, out_arrays), parallel_iterations=1)
      for part, array in zip(saved_parts, state_arrays):
        part.append(array.stack())
      for k, array in zip(names, out_arrays):
        parts[k].append(tf.reshape(array.stack(), [(full - 1) * size] + out0[k].shape.as_list()[1:]))
    if self.tail:
      saved_tail, out_tail = run(full * size, self.tail)
      for part, s in zip(saved_parts, saved_tail):
        part.append(s[None])
      for k in names:
        parts[k].append(out_tail[k])
    return ({k: tf.concat(parts[k], axis=0) for k in names},
            [tf.concat(part, axis=0) for part in saved_parts])

  def weight_gradients(self, embed, cached: Dict[str, tf.Tensor], variables, saved_states) -> List:
    """Pass 3: Σ over chunks of d(Σ embedding · cached gradient)/d(variables), each chunk from its pass-1 RNG state."""
    size, full = self.size, self.full

    def run(index, begin, rows):
      for s, saved in zip(self.states, saved_states):
        s.assign(saved[index])
      with tf.GradientTape() as tape:
        out = embed(_take(self.inputs, begin, rows))
        surrogate = tf.add_n([tf.reduce_sum(tf.cast(out[k], tf.float32) * _take(cached[k], begin, rows))
                              for k in sorted(cached)])
      return [_densify(g) for g in tape.gradient(surrogate, variables)]

    grads0 = run(0, 0, size)
    present = [i for i, g in enumerate(grads0) if g is not None]
    sums = [grads0[i] for i in present]
    if full > 1:
      def accumulate(i, sums):
        grads = run(i, i * size, size)
        return i + 1, [s + grads[j] for s, j in zip(sums, present)]
      _, sums = tf.while_loop(lambda i, *_: i < full, accumulate, (tf.constant(1), sums), parallel_iterations=1)
    if self.tail:
      grads = run(full, full * size, self.tail)
      sums = [s + grads[j] for s, j in zip(sums, present)]
    out: List = [None] * len(grads0)
    for s, j in zip(sums, present):
      out[j] = s
    return out
