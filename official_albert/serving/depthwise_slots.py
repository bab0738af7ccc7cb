"""Depth-wise continuous batching: rows at different iterations of ALBERT's shared block share one block call.

ALBERT applies the same block L times, so one call of the block can advance rows that are at *different* iterations:
a row at iteration 2 and a row at iteration 9 need the same weights. With exit heads (`modeling.early_exit`) a row
leaves once its prediction has been the same for `patience` iterations; here its slot is then handed to a waiting
text, which enters (embedding) and runs its first iteration in the next step, beside rows in the middle of theirs.
The block thus runs on as many rows as there are texts in flight, instead of on a batch that waits for its slowest
row and is refilled only between calls (the in-call exit runner, `early_exit.early_exit`).

`DepthwiseSlots` holds `slots` rows. Every `step()`, per length bucket with rows, one graph call (`tf.function`):
1. drops the rows that left at the last step (a gather), embeds the texts added since, and appends them at
   iteration 0 — in the graph, so the rows' state stays in tensors and a step is one call whatever joins or leaves;
2. runs `iterations_per_step` (k) iterations of the block on all rows (each with its own mask and hidden
   state), after each the pooler, the head of each row's own iteration (exit head i, the model's classifier at
   iteration L) and the exit rule of `early_exit.exit_criterion` — the same rule, key and counters as the in-call
   runner. A row that leaves at an inner iteration keeps that iteration's logits, exit iteration and counter
   (frozen while the others go on), so a text's label, probabilities and exit iteration depend neither on k nor on
   what it shared its steps with (tests/official_albert/serving/test_depthwise.py holds them to `pipelines.classify`);
3. rows that left are returned (their logits and exit iteration); their slots are free for the next step.
A step of k iterations pays the call's fixed cost (the call, the host work, the admission) once for k iterations;
the price is that newcomers wait up to k iterations for a slot and a row that leaves mid-step holds its slot until
the step ends (docs/serving.md measures the trade).

Length buckets: a row is packed to the smallest bucket length that holds it (powers of two from 16 up to the served
length, and that length, unless `length_buckets` says otherwise), so a long text does not pad every row; each bucket
is its own block call per step.

Runtimes: TensorFlow (`runtime="tensorflow"`, the step as one `tf.function`, the rows' state as tensors) or OpenVINO
(`runtime="openvino"`: the embedding and the k iterations with their heads and exit rule, the hidden state an input
and an output, converted once, at start-up, to two OpenVINO models compiled for f32 on the CPU; the state as numpy
arrays, joined and compacted on the host). An OpenVINO export folder cannot run depth-wise: its graph is the whole
loop.

Which models: the block must be the same at every iteration — one hidden group with every part shared (the
released models' `sharing="all"`) — and the attention must not depend on the iteration (block-sparse attention draws
its random blocks per layer application), else `check_model` says why.
"""

from __future__ import annotations

from typing import Dict, List, NamedTuple, Optional, Sequence

import numpy as np
import tensorflow as tf

from official_albert import custom_gradients
from official_albert.modeling import early_exit
from official_albert.tokenization.tokenizer import pack_ids

SMALLEST_BUCKET = 16
RUNTIMES = ("tensorflow", "openvino")
_STATE = ("hidden", "mask", "iteration", "unchanged", "logits")
EMBED_INPUTS = ("input_word_ids", "input_mask", "input_type_ids")
# (Not the input names: a graph's output named as an input is renamed, and OpenVINO's ports are matched by name.)
ADVANCE_OUTPUTS = ("next_hidden", "next_iteration", "next_unchanged", "logits", "leave")
# The TensorFlow step's extra inputs: the rows kept from the last step (indices into its state), then the newcomers.
STEP_INPUTS = _STATE + ("keep",) + EMBED_INPUTS


class Finished(NamedTuple):
  """A row that left: the `owner` given to `add`, its head's `logits` [K] and `exit_iteration` (1 … L)."""
  owner: object
  logits: np.ndarray
  exit_iteration: int


class StepFailed(RuntimeError):
  """A `DepthwiseSlots.step` that raised in one length bucket: `error` is what it raised, `finished` the rows that
  left in the buckets run before it in the same step (no longer in the slots: answer them). Every row still in the
  slots — the failing bucket's, the later buckets', the joining ones — is returned by `clear`."""

  def __init__(self, length: int, error: Exception, finished: List[Finished]):
    super().__init__(f"depth-wise batching: the step failed in the {length}-token bucket: {type(error).__name__}: "
                     f"{error}")
    self.error, self.finished = error, finished


def check_model(model) -> Optional[str]:
  """Why `model` cannot run depth-wise (rows at different iterations in one block call), else None."""
  c = model.config
  if not early_exit.exit_heads(model):
    return ("it has no exit heads (depth-wise batching serves a classifier fine-tuned with task.exit_heads=true; "
            "without them every row runs L iterations: serve it without --depthwise_batching)")
  if c.num_hidden_groups != 1 or getattr(c, "sharing", "all") != "all":
    return (f"its iterations do not share one block (num_hidden_groups={c.num_hidden_groups}, "
            f"sharing={getattr(c, 'sharing', 'all')!r}); rows at different iterations would need different weights")
  if c.attention_type == "block_sparse":
    return ("its block-sparse attention draws different random blocks at each iteration; rows at different "
            "iterations cannot share a call (serve it without --depthwise_batching)")
  return None


def bucket_lengths(seq_length: int, lengths: Optional[Sequence[int]] = None) -> List[int]:
  """The bucket lengths: `lengths` below `seq_length` (default: powers of two from SMALLEST_BUCKET), then
  `seq_length` itself (`lengths=()`: one bucket, every text padded to `seq_length`)."""
  if lengths is not None:
    if any(int(n) < 3 for n in lengths):
      raise ValueError(f"depth-wise batching: length buckets {list(lengths)} must be >= 3 tokens.")
    return sorted({int(n) for n in lengths if int(n) < seq_length}) + [seq_length]
  lengths, n = [], SMALLEST_BUCKET
  while n < seq_length:
    lengths.append(n)
    n *= 2
  return lengths + [seq_length]


class _Bucket:
  """The rows of one packed length: their state as tensors (row r = owners[r]) and the texts waiting to join."""

  def __init__(self, length: int):
    self.length = length
    self.owners: List[object] = []
    self.state: Optional[Dict[str, tf.Tensor]] = None  # hidden, mask, iteration, unchanged, logits
    self.keep: Optional[np.ndarray] = None  # rows of `state` still in flight (None: all); the next step gathers them
    self.joining: List[tuple] = []  # (owner, packed inputs)


class DepthwiseSlots:
  """`slots` rows of a classifier with exit heads, each at its own iteration of the shared block (module docstring).

  Not thread-safe: one thread adds and steps (the server's depth-wise worker, serving.depthwise_batching).

  Args:
    model: an `AlbertClassifier` built with exit heads (`check_model`).
    patience: as `pipelines.classify`'s (0: every row runs L iterations; the plain model's answers).
    slots: most rows in flight.
    seq_length: the longest packed text (longer ones are cut, as `classify` cuts them).
    exit_threshold / multi_label_threshold: a regression / multi-label head's exit rule (`early_exit.early_exit`).
    runtime: "tensorflow" or "openvino" (module docstring).
    length_buckets: the bucket lengths (`bucket_lengths`; default powers of two; `()` one bucket). Each bucket is
      one block call per step: fewer buckets pad more, more buckets cost more calls.
    iterations_per_step: k, the iterations a step runs (module docstring): larger k spreads a call's fixed
      cost over more iterations, but newcomers join only every k iterations and a row that leaves mid-step keeps
      its slot to the step's end. The answers do not depend on it.
  """

  def __init__(self, model, patience: int, slots: int, seq_length: int,
               exit_threshold: float = early_exit.DEFAULT_EXIT_THRESHOLD,
               multi_label_threshold: Optional[float] = None, runtime: str = "tensorflow",
               length_buckets: Optional[Sequence[int]] = None, iterations_per_step: int = 1):
    why = check_model(model)
    if why:
      raise ValueError(f"depth-wise batching: {model.name} cannot run depth-wise: {why}.")
    early_exit.check_options(model, False, patience, None)
    if slots < 1:
      raise ValueError(f"depth-wise batching: slots={slots} must be >= 1.")
    if runtime not in RUNTIMES:
      raise ValueError(f"depth-wise batching: runtime={runtime!r} is not one of {RUNTIMES}.")
    self.model, self.patience, self.slots = model, int(patience), int(slots)
    self.iterations = model.config.num_hidden_layers
    if isinstance(iterations_per_step, bool) or int(iterations_per_step) != iterations_per_step or not (
        1 <= iterations_per_step <= self.iterations):
      raise ValueError(f"depth-wise batching: iterations_per_step={iterations_per_step!r} must be an integer in "
                       f"1..{self.iterations} (the model's iterations).")
    self.iterations_per_step = int(iterations_per_step)
    self.seq_length = min(int(seq_length), model.config.max_position_embeddings)
    self.buckets = {n: _Bucket(n) for n in bucket_lengths(self.seq_length, length_buckets)}
    self.num_outputs = int(model.classifier.output_weights.shape[0])
    self._key, self._same = early_exit.exit_criterion(self.num_outputs, exit_threshold, multi_label_threshold)
    self._heads = early_exit.exit_heads(model) + [model.classifier]
    self.runtime = runtime
    size = model.config.hidden_size
    # Named inputs, dict outputs and no autograph: the form OpenVINO's converter takes (as export_spec.ids_function).
    ids_spec = [tf.TensorSpec([None, None], tf.int32, name=name) for name in EMBED_INPUTS]
    state_spec = [tf.TensorSpec(shape, dtype, name=name) for name, shape, dtype in (
        ("hidden", [None, None, size], tf.float32), ("mask", [None, None], tf.int32),
        ("iteration", [None], tf.int32), ("unchanged", [None], tf.int32),
        ("previous_logits", [None, self.num_outputs], tf.float32))]
    if runtime == "tensorflow":
      # Every dim None: one trace serves every bucket length and row count.
      self._step_function = tf.function(self._step_rows, autograph=False, input_signature=state_spec + [
          tf.TensorSpec([None], tf.int32, name="keep")] + ids_spec)
      self._released = False  # (`_step`: the trace's custom gradients leave TF's registry once it is made)
    else:
      embed = tf.function(self._embed_rows, autograph=False, input_signature=ids_spec)
      advance = tf.function(self._advance_rows, autograph=False, input_signature=state_spec)
      self._embed, self._advance = _openvino_function(model, embed), _openvino_function(model, advance)

  # ----------------------------------------------------------------------------------------------- the public side
  def occupied(self) -> int:
    """Rows in flight (in the block or joining at the next step)."""
    return sum(len(b.owners) + len(b.joining) for b in self.buckets.values())

  def free(self) -> int:
    return self.slots - self.occupied()

  def pack(self, ids_a: Sequence[int], ids_b: Optional[Sequence[int]] = None) -> Dict[str, List[int]]:
    """A tokenized text (and pair) packed to its bucket's length (cut at `seq_length` as classify cuts)."""
    tokens = len(ids_a) + 2 + (len(ids_b) + 1 if ids_b is not None else 0)
    length = next(n for n in self.buckets if n >= min(tokens, self.seq_length))
    return pack_ids(ids_a, ids_b, length)

  def add(self, owner, packed: Dict[str, List[int]]) -> None:
    """Puts a packed text (`pack`) in a free slot; it joins at the next `step`. Raises when no slot is free."""
    if self.free() <= 0:
      raise RuntimeError(f"depth-wise batching: all {self.slots} slots are taken; add after a step frees one.")
    length = len(packed["input_word_ids"])
    if length not in self.buckets:
      raise ValueError(f"depth-wise batching: a text packed to {length} tokens; pack it with DepthwiseSlots.pack.")
    self.buckets[length].joining.append((owner, packed))

  def step(self) -> List[Finished]:
    """`iterations_per_step` iterations for every row (the joining ones' first); the rows that left, in no
    particular order. Raises StepFailed when a bucket's call fails, carrying the rows that already left in the
    buckets before it (they are out of the slots, so `clear` cannot return them); the rest stay for `clear`."""
    finished: List[Finished] = []
    for bucket in self.buckets.values():
      if bucket.owners or bucket.joining:
        run = self._step_bucket if self.runtime == "tensorflow" else self._step_bucket_on_host
        try:
          finished.extend(run(bucket))
        except Exception as e:
          raise StepFailed(bucket.length, e, finished) from e
    return finished

  def clear(self) -> List[object]:
    """Drops every row (after a failed step); returns their owners."""
    owners = []
    for bucket in self.buckets.values():
      owners += bucket.owners + [owner for owner, _ in bucket.joining]
      bucket.owners, bucket.joining, bucket.state, bucket.keep = [], [], None, None
    return owners

  # ------------------------------------------------------------------------------------------------- the steps
  def _newcomers(self, bucket: _Bucket):
    """The joining texts' owners and packed inputs [n, length] (EMBED_INPUTS order). `bucket.joining` is left as
    it is: the caller empties it once the newcomers are in `bucket.owners`, so a call that fails before leaves
    them where `clear` finds them."""
    owners = [owner for owner, _ in bucket.joining]
    inputs = [np.asarray([p[k] for _, p in bucket.joining], np.int32).reshape(len(owners), bucket.length)
              for k in EMBED_INPUTS]
    return owners, inputs

  def _step_bucket(self, bucket: _Bucket) -> List[Finished]:
    """TensorFlow: the compaction, the newcomers' embedding and the k iterations as one graph call."""
    owners, inputs = self._newcomers(bucket)
    if bucket.state is None:
      state = self._empty_state(bucket.length)
      keep = np.zeros((0,), np.int32)
    else:
      state = [bucket.state[k] for k in _STATE]
      keep = np.arange(len(bucket.owners), dtype=np.int32) if bucket.keep is None else bucket.keep
    out = self._step(*state, keep, *inputs)
    bucket.owners, bucket.joining = bucket.owners + owners, []
    bucket.state, bucket.keep = {k: out[k] for k in _STATE}, None
    return self._settle(bucket, out["leave"].numpy(), out["logits"], out["iteration"], lambda staying: staying)

  def _step(self, *args):
    """The TensorFlow step (`_step_rows` as one graph), traced at the first call (one trace: every dim None) and its
    custom gradients released right after (a chunked-attention model's, `custom_gradients.release`; the ops keep
    their gradients): left registered, each entry would hold the traced graph, so a runner dropped by a model reload
    kept it for the life of the process."""
    if not self._released:
      custom_gradients.release(self._step_function.get_concrete_function().graph)
      self._released = True
    return self._step_function(*args)

  def _step_bucket_on_host(self, bucket: _Bucket) -> List[Finished]:
    """OpenVINO: newcomers embedded and appended on the host, the k iterations one call, the compaction on the
    host."""
    if bucket.joining:
      owners, inputs = self._newcomers(bucket)
      rows = len(owners)
      new = {"hidden": self._embed(*inputs)["embedded"], "mask": inputs[EMBED_INPUTS.index("input_mask")],
             "iteration": np.zeros((rows,), np.int32), "unchanged": np.zeros((rows,), np.int32),
             "logits": np.zeros((rows, self.num_outputs), np.float32)}
      state = bucket.state
      bucket.state = new if state is None else {k: np.concatenate([state[k], new[k]], 0) for k in new}
      bucket.owners, bucket.joining = bucket.owners + owners, []
    state = bucket.state
    out = self._advance(*(state[k] for k in _STATE))
    hidden, iteration, unchanged, logits, leave = (out[k] for k in ADVANCE_OUTPUTS)
    bucket.state = {"hidden": hidden, "mask": state["mask"], "iteration": iteration, "unchanged": unchanged,
                    "logits": logits}

    def compact(staying):
      bucket.state = {k: np.take(v, staying, axis=0) for k, v in bucket.state.items()}
      return None

    return self._settle(bucket, np.asarray(leave, bool), logits, iteration, compact)

  def _settle(self, bucket: _Bucket, leave: np.ndarray, logits, iteration, compact) -> List[Finished]:
    """The rows that `leave` as Finished; the bucket's owners cut to the rows that stay, and `compact(staying)` →
    the rows of the state the next step keeps (None: the state was compacted already)."""
    if not leave.any():
      return []
    leaving = np.flatnonzero(leave)
    logits_np, iteration_np = np.asarray(logits), np.asarray(iteration)
    finished = [Finished(bucket.owners[r], logits_np[r], int(iteration_np[r])) for r in leaving]
    staying = np.flatnonzero(~leave).astype(np.int32)
    bucket.owners = [bucket.owners[r] for r in staying]
    if not len(staying):
      bucket.state, bucket.keep = None, None
    else:
      bucket.keep = compact(staying)
    return finished

  def _empty_state(self, length: int):
    """No rows: the state inputs of a bucket that only has newcomers."""
    size = self.model.config.hidden_size
    return [np.zeros((0, length, size), np.float32), np.zeros((0, length), np.int32), np.zeros((0,), np.int32),
            np.zeros((0,), np.int32), np.zeros((0, self.num_outputs), np.float32)]

  def _embed_rows(self, *ids):
    """Packed inputs (EMBED_INPUTS) → {"embedded": [n, T, H] float32, the hidden state entering iteration 1}."""
    encoder = self.model.encoder
    x, _, rows, length = encoder.embed(dict(zip(EMBED_INPUTS, ids)), training=False)
    # float32 as in early_exit.early_exit: a row keeps one dtype across iterations (blocks return float32).
    return {"embedded": tf.reshape(tf.cast(x, tf.float32), (rows, length, encoder.config.hidden_size))}

  def _step_rows(self, hidden, mask, iteration, unchanged, logits, keep, *ids):
    """The TensorFlow step: the kept rows of the last step's state (`keep`), the newcomers (`ids`, EMBED_INPUTS)
    embedded and appended at iteration 0, then `_iterate`. Returns {name: ...} of _STATE and
    "leave"."""
    state = [tf.gather(t, keep) for t in (hidden, mask, iteration, unchanged, logits)]
    rows = tf.shape(ids[0])[0]
    new = [self._embed_rows(*ids)["embedded"], ids[EMBED_INPUTS.index("input_mask")], tf.zeros((rows,), tf.int32),
           tf.zeros((rows,), tf.int32), tf.zeros((rows, self.num_outputs), tf.float32)]
    hidden, mask, iteration, unchanged, logits = [tf.concat([a, b], 0) for a, b in zip(state, new)]
    hidden, iteration, unchanged, logits = self._iterate(hidden, mask, iteration, unchanged, logits)
    return {"hidden": hidden, "mask": mask, "iteration": iteration, "unchanged": unchanged, "logits": logits,
            "leave": self._left(iteration, unchanged)}

  def _advance_rows(self, hidden, mask, iteration, unchanged, previous_logits):
    """The OpenVINO step's block part: `_iterate`. Returns {name: ...} of ADVANCE_OUTPUTS."""
    hidden, iteration, unchanged, logits = self._iterate(hidden, mask, iteration, unchanged, previous_logits)
    return dict(zip(ADVANCE_OUTPUTS, (hidden, iteration, unchanged, logits, self._left(iteration, unchanged))))

  def _left(self, iteration, unchanged):
    """Whether each row has left: after iteration L, or (patience > 0) once its prediction held `patience` times."""
    leave = iteration >= self.iterations
    return tf.logical_or(leave, unchanged >= self.patience) if self.patience else leave

  def _iterate(self, hidden, mask, iteration, unchanged, logits):
    """k iterations of the shared block on rows at any iterations, each followed by the head of each row's new
    iteration and the exit rule. A row that has left keeps its iteration, counter and logits (its hidden state goes
    on, unused). Unrolled, not a `while_loop` that could stop once every row has left: on 2 EPYC cores an iteration
    inside a loop body ran ~20% slower (docs/serving.md), and the converter takes no loop."""
    encoder = self.model.encoder
    size = encoder.config.hidden_size
    rows, length = tf.shape(hidden)[0], tf.shape(hidden)[1]
    weights = encoder.layer_weights(False, prepare_now=1)  # once for the k iterations

    def one(hidden, iteration, unchanged, logits):
      running = tf.logical_not(self._left(iteration, unchanged))
      # Iteration 0's block stands for every iteration's (check_model: one block, the layer index unused).
      out = encoder.run_layers(tf.reshape(hidden, (-1, size)), mask, 0, 1, weights=weights)[-1]
      hidden = tf.reshape(tf.cast(out, tf.float32), (rows, length, size))
      pooled = encoder.pooler(hidden[:, 0, :])
      following = tf.minimum(iteration + 1, self.iterations)  # (a row that left would be past L: clamped, unused)
      every_head = tf.stack([head(pooled, training=False) for head in self._heads], axis=1)  # [n, L, K]
      new_logits = tf.gather(every_head, following - 1, axis=1, batch_dims=1)
      same = tf.convert_to_tensor(self._same(self._key(logits), self._key(new_logits)))
      counted = tf.where(tf.logical_and(following > 1, same), unchanged + 1, tf.zeros_like(unchanged))
      return (hidden, tf.where(running, following, iteration), tf.where(running, counted, unchanged),
              tf.where(running[:, None], new_logits, logits))

    for _ in range(self.iterations_per_step):
      hidden, iteration, unchanged, logits = one(hidden, iteration, unchanged, logits)
    return hidden, iteration, unchanged, logits


def _openvino_function(model, function):
  """`function` (a tf.function with a named input signature and dict outputs) converted to an OpenVINO model and
  compiled for f32: a callable on numpy arrays (in the signature's order) returning {output name: numpy array}."""
  from official_albert.serving import openvino_export  # noqa: PLC0415 (the optional OpenVINO extra)
  from official_albert.serving import openvino_ir  # noqa: PLC0415
  ov = openvino_ir.require_openvino()
  with openvino_export.shaped_for_openvino(model, "mvn", False):
    concrete = function.get_concrete_function()
  inputs = [spec.name for spec in function.input_signature]
  outputs = list(concrete.structured_outputs)
  compiled = openvino_ir.compile_openvino(ov.convert_model(concrete), precision="f32")
  custom_gradients.release(concrete.graph)  # (converted: the trace is dropped with its custom gradients)
  places = []  # our argument index of each port of the compiled model
  for port in compiled.inputs:
    match = [i for i, name in enumerate(inputs) if name in port.get_names() or f"{name}:0" in port.get_names()]
    if len(match) != 1:
      raise RuntimeError(f"depth-wise batching: cannot tell which input the OpenVINO port {port.get_names()} is.")
    places.append(match[0])
  names = []
  for port in compiled.outputs:
    match = [name for name in outputs if name in port.get_names()]
    if len(match) != 1:
      raise RuntimeError(f"depth-wise batching: cannot tell which output the OpenVINO port {port.get_names()} is.")
    names.append(match[0])
  request = compiled.create_infer_request()

  def run(*arrays):
    request.infer([np.ascontiguousarray(arrays[i]) for i in places])
    return {name: np.array(request.get_output_tensor(k).data) for k, name in enumerate(names)}

  return run
