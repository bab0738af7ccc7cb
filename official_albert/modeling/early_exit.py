"""Exit heads, patience-based early exit and static elastic depth over ALBERT's shared block.

ALBERT applies one block L times, so the number of iterations is a dial: an easy sentence can leave early. As PABEE
("BERT Loses Patience", Zhou et al. 2020) a sequence-level model gets one head per iteration (`exit_heads=True`: heads
`exit_classifier_0` … `exit_classifier_{L-2}` on the pooled output of iterations 1 … L-1; the head of iteration L is
the model's own `classifier`, so checkpoints with and without exit heads load into each other), trained with the loss
Σ(i+1)·L_i / Σ(i+1) over iterations i = 0 … L-1 (`tasks.classification`).

At inference with `patience=p > 0` a row stops after the first iteration at which its prediction has been the same
for p consecutive iterations (argmax; a regression score that moved less than `exit_threshold`; a multi-label set at
`multi_label_threshold`), and returns that iteration's head outputs and `exit_iteration` (1 … L). Unlike PABEE, which
stops a batch only when every row agrees, rows leave one by one: after an iteration at which some rows exit, they
are written to their place in the outputs and the batch is compacted to the rows still running (a gather), so the
remaining iterations cost only what is left, and wall time falls at any batch size. The check itself is kept small,
because at batch 1 it is paid on every iteration: no test during the first `patience` iterations (no row can leave
yet), the previous iteration's prediction kept rather than recomputed, and no gathers or scatters at an iteration
no row leaves. `patience=0` is the plain model,
bit for bit. `depth=k` runs k iterations for every row (static elastic depth; with exit heads, head k answers, else
the final head).

The compaction has data-dependent shapes: it runs eagerly on every Keras backend and in TF graphs (tf.function,
SavedModel, one `cond` per iteration so the iterations after the last row left cost nothing), not under XLA or
`jax.jit`.
"""

from __future__ import annotations

import math
from typing import Dict, List, Optional

import keras
from keras import ops

from official_albert.modeling.layers.heads import TransposedLogits

EXIT_HEAD_PREFIX = "exit_classifier_"
# The heads that can carry exit heads and take a patience or depth at inference (the sequence-level ones).
EXIT_HEAD_TYPES = ("classifier", "multiple_choice")
# Regression heads: a score that moved less than this (in label units) between two iterations counts as unchanged.
DEFAULT_EXIT_THRESHOLD = 0.1


def add_exit_heads(model, num_outputs: int) -> None:
  """Creates `exit_classifier_{l}` for iterations l = 0 … L-2 on `model` (attributes, for TF checkpoints)."""
  c = model.config
  names = []
  for layer in range(c.num_hidden_layers - 1):
    head = TransposedLogits(num_outputs, c.hidden_size, c.initializer_range, dropout_rate=model.dropout_rate,
                            name=f"{EXIT_HEAD_PREFIX}{layer}")
    head.build()
    setattr(model, head.name, head)
    names.append(head.name)
  model._exit_head_names = names


def exit_heads(model) -> List[TransposedLogits]:
  """The exit heads of iterations 1 … L-1 (empty for a model without them)."""
  return [getattr(model, name) for name in getattr(model, "_exit_head_names", [])]


def head_at(model, iteration: int) -> TransposedLogits:
  """The head that answers after `iteration` (1 … L) iterations: its exit head, or the final classifier."""
  heads = exit_heads(model)
  return heads[iteration - 1] if iteration <= len(heads) else model.classifier


def unreachable_patience(patience: int, iterations: int) -> Optional[str]:
  """Why `patience` can never end a row early on a model of `iterations` iterations, else None.

  A row's count of unchanged iterations is at most i - 1 after iteration i, and after the last iteration every row
  leaves anyway, so a row can leave early only with patience <= L - 2: a larger one runs every text at full depth
  (the plain model's answers, at the cost of the exit heads). Callers warn with this (the answers are right, only the
  setting does nothing).
  """
  if not patience or patience <= iterations - 2:
    return None
  reachable = f"only patience <= {iterations - 2} can" if iterations > 2 else "no patience can"
  return (f"patience={patience} can never end a row early on a model of {iterations} iterations ({reachable}): "
          "every text runs at full depth.")


def check_head_options(head: str, patience: int, depth: Optional[int]) -> None:
  """Raises ValueError for a patience / depth given to a head that has no exit heads, or a negative patience (what an
  export can tell from its settings, before a model is at hand; `check_options` checks a model's call)."""
  if (patience or depth is not None) and head not in EXIT_HEAD_TYPES:
    raise ValueError(f"patience / depth apply to the {EXIT_HEAD_TYPES} heads, not head={head!r}.")
  if patience < 0:
    raise ValueError(f"patience={patience} must be >= 0 (0 = full depth).")


def check_options(model, training: bool, patience: int, depth: Optional[int], return_exit_logits: bool = False) -> None:
  """Raises ValueError for a patience / depth / return_exit_logits the model cannot run."""
  if isinstance(patience, bool) or int(patience) != patience or patience < 0:
    raise ValueError(f"{model.name}: patience={patience!r} must be an integer >= 0 (0 = full depth).")
  if patience and depth is not None:
    raise ValueError(f"{model.name}: pass patience (early exit) or depth (static elastic depth), not both.")
  if (patience or depth is not None) and training:
    raise ValueError(f"{model.name}: patience and depth are for inference (training=False).")
  if patience and not exit_heads(model):
    raise ValueError(f"{model.name}: patience={patience} needs exit heads (a model trained with task.exit_heads=true, "
                     "built with exit_heads=True); without them use depth=k (static elastic depth).")
  if return_exit_logits and not exit_heads(model):
    raise ValueError(f"{model.name}: return_exit_logits=True needs exit heads (a model built with exit_heads=True); "
                     "this model has none, so it has no per-iteration logits to return.")
  if return_exit_logits and (patience or depth is not None):
    raise ValueError(f"{model.name}: return_exit_logits=True returns every iteration's logits from one full pass; "
                     "call it without patience / depth.")
  if training and exit_heads(model) and model.encoder.layer_loop:
    raise ValueError(f"{model.name}: training the exit heads needs every iteration's output, which layer_loop=True "
                     "does not keep; build the model with layer_loop=False.")


def encode_every_iteration(model, inputs, training: bool) -> Dict:
  """The encoder's outputs with every block output in `encoder_outputs` (what `all_exit_logits` reads).

  The looped encoder (layer_loop=True) keeps only the last block output, so its iterations are run here unrolled
  (`run_layers`, the same numbers as the loop); other encoders are called as they are.
  """
  encoder = model.encoder
  if not encoder.layer_loop:
    return encoder(inputs, training=training)
  x, mask, batch, seq = encoder.embed(inputs, training=training)
  blocks = encoder.run_layers(x, mask, 0, encoder.config.num_hidden_layers, training=training)
  blocks = [ops.reshape(h, (batch, seq, encoder.config.hidden_size)) for h in blocks]
  return {"sequence_output": blocks[-1], "pooled_output": encoder.pooler(blocks[-1][:, 0, :]),
          "encoder_outputs": blocks}


def all_exit_logits(model, encoder_outputs, final_logits, training: bool, choices: int = 1):
  """Every iteration's head outputs [N, L, K] from one full forward pass (training, evaluation of every depth).

  `encoder_outputs` are the encoder's block outputs [B, S, H], every one of them (`encode_every_iteration`); the
  last iteration's logits are `final_logits` (the model's own head, computed once). Multiple choice (`choices`
  C > 1): B = N·C rows, K = C.
  """
  c = model.config
  if len(encoder_outputs) != c.num_hidden_layers * c.inner_group_num:
    raise ValueError(f"{model.name}: exit logits need every iteration's block output ({c.num_hidden_layers} x "
                     f"{c.inner_group_num}), got {len(encoder_outputs)}; encode with early_exit.encode_every_iteration "
                     "(a layer_loop=True encoder keeps only the last).")
  logits = []
  for layer, head in enumerate(exit_heads(model)):
    hidden = encoder_outputs[(layer + 1) * c.inner_group_num - 1]
    logits.append(ops.reshape(head(model.encoder.pooler(hidden[:, 0, :]), training=training),
                              (ops.shape(final_logits)[0], -1)))
  logits.append(final_logits)
  return ops.stack(logits, axis=1)


def with_exit_iteration(outputs: Dict, iterations: int) -> Dict:
  """`outputs` with `exit_iteration` int32 [N] = `iterations` for every row, unless the early exit set it (serving
  returns it from every classifier and multiple-choice model: full depth L, a static depth k, or each row's)."""
  if "exit_iteration" in outputs:
    return outputs
  rows = ops.shape(outputs["logits"])[0]
  return {**outputs, "exit_iteration": ops.full((rows,), iterations, "int32")}


def elastic_depth(model, inputs, depth: int, choices: int = 1) -> Dict:
  """The first `depth` iterations for every row; the head of that iteration answers."""
  depth = model.encoder.check_depth(depth)
  outputs = model.encoder(inputs, training=False, depth=depth)
  logits = head_at(model, depth)(outputs["pooled_output"], training=False)
  return {"logits": ops.reshape(logits, (-1, choices * logits.shape[-1])) if choices > 1 else logits,
          "pooled_output": outputs["pooled_output"]}


def exit_criterion(num_outputs: int, exit_threshold: float, multi_label_threshold: Optional[float]):
  """(key, same): `key(logits)` is what a row's prediction is compared by (kept from the previous iteration, so
  each iteration computes it once), `same(previous key, key)` → bool [b] whether the prediction did not change.
  The exit rule of every runner of exit heads (here, and the server's depth-wise slots, serving.depthwise_slots)."""
  if multi_label_threshold is not None:
    if not 0.0 < multi_label_threshold < 1.0:
      raise ValueError(f"multi_label_threshold={multi_label_threshold} must be in (0, 1).")
    cut = math.log(multi_label_threshold / (1.0 - multi_label_threshold))  # sigmoid(z) >= t  ⟺  z >= logit(t)
    return (lambda logits: logits >= cut), (lambda previous, key: ops.all(ops.equal(previous, key), axis=-1))
  if num_outputs == 1:
    if isinstance(exit_threshold, (int, float)) and not (math.isfinite(exit_threshold) and exit_threshold > 0):
      raise ValueError(f"exit_threshold={exit_threshold!r} must be a finite number > 0: the score change a regression "
                       "head's row may move by and still count as unchanged (0, a negative or NaN never exits).")
    return (lambda logits: logits), (lambda previous, key: ops.all(ops.abs(key - previous) < exit_threshold, axis=-1))
  return _argmax, ops.equal


def _argmax(logits):
  """The first index of the largest value along the last axis (NumPy's argmax).

  Not `ops.argmax`: on TF it bitcasts (to order −0.0 below 0.0), an op OpenVINO cannot convert.
  """
  is_max = ops.cast(logits >= ops.max(logits, axis=-1, keepdims=True), "int32")
  return ops.argmax(is_max, axis=-1)


def _branch(condition, if_true, if_false):
  """`if_true()` when the scalar `condition` holds, else `if_false()`.

  The one backend-specific spot: TF (eager and graphs) and torch branch with `ops.cond`, whose TF form accepts
  branches of different shapes (the compaction shrinks the batch); JAX's `lax.cond` does not, so JAX (eager only:
  data-dependent shapes cannot exist under `jax.jit`) branches in Python on the concrete value.
  """
  if keras.backend.backend() == "jax":
    return if_true() if bool(condition) else if_false()
  return ops.cond(condition, if_true, if_false)


def _settle(running: Dict, done: Dict, pooled, logits, leave, layer: int):
  """The rows that `leave` written to their original place in `done` (`pooled_output` too when `done` keeps it);
  the rows that stay compacted, in order. Returns (running, done)."""
  leaving = ops.nonzero(leave)[0]
  places = ops.expand_dims(ops.take(running["rows"], leaving, axis=0), -1)
  done = dict(done)
  done["logits"] = ops.scatter_update(done["logits"], places, ops.take(logits, leaving, axis=0))
  done["exit_iteration"] = ops.scatter_update(done["exit_iteration"], places,
                                              ops.full_like(ops.take(running["unchanged"], leaving, axis=0), layer + 1))
  if "pooled_output" in done:
    done["pooled_output"] = ops.scatter_update(done["pooled_output"], places, ops.take(pooled, leaving, axis=0))
  staying = ops.nonzero(ops.logical_not(leave))[0]
  return {k: ops.take(v, staying, axis=0) for k, v in running.items()}, done


def early_exit(model, inputs, patience: int, exit_threshold: float = DEFAULT_EXIT_THRESHOLD,
               multi_label_threshold: Optional[float] = None, choices: int = 1) -> Dict:
  """Patience-based early exit, row by row, the batch compacted after each iteration some row leaves (module
  docstring).

  Args:
    model: a classifier-style model with exit heads (`.encoder`, `.classifier`, `exit_classifier_*`).
    inputs: the encoder's inputs, [N·C, S] (multiple choice: the choices of a question are C consecutive rows).
    patience: iterations with an unchanged prediction before a row leaves (≥ 1).
    choices: C; a question (its C rows) exits as one, on the argmax over its choices.

  Returns:
    `logits` [N, K] (multiple choice [N, C]) of each row's exit iteration, `exit_iteration` int32 [N] (1 … L), and
    for C = 1 `pooled_output` [N, H] of the exit iteration.
  """
  encoder = model.encoder
  c = encoder.config
  layers, hidden_size = c.num_hidden_layers, c.hidden_size
  x, mask, batch, seq = encoder.embed(inputs, training=False)
  weights = encoder.layer_weights(training=False, prepare_now=layers)  # outside the per-iteration branches
  num_rows = batch // choices
  width = choices * int(model.classifier.output_weights.shape[0])
  key, same = exit_criterion(width, exit_threshold, multi_label_threshold)
  # Blocks return float32 (post-LN), and a row's hidden state must keep one dtype across iterations; entering in
  # float32 is exact (the first block casts its input to float32 for the residual anyway).
  running = {"hidden": ops.reshape(ops.cast(x, "float32"), (num_rows, choices, seq, hidden_size)),
             "mask": ops.reshape(mask, (num_rows, choices, seq)),
             "rows": ops.arange(num_rows, dtype="int32"),
             "unchanged": ops.zeros((num_rows,), "int32"),
             "previous": key(ops.zeros((num_rows, width), "float32"))}
  done = {"logits": ops.zeros((num_rows, width), "float32"),
          "exit_iteration": ops.zeros((num_rows,), "int32")}
  if choices == 1:
    done["pooled_output"] = ops.zeros((num_rows, hidden_size), encoder.pooler.compute_dtype)

  def advance(running, layer):
    """One iteration on the running rows: their new state (the prediction's key, the count of unchanged
    iterations), pooled output and logits."""
    rows = ops.shape(running["rows"])[0]
    flat_mask = ops.reshape(running["mask"], (-1, seq))
    hidden = encoder.run_layers(ops.reshape(running["hidden"], (-1, hidden_size)), flat_mask, layer, layer + 1,
                                weights=weights)[-1]
    hidden = ops.reshape(hidden, (rows, choices, seq, hidden_size))
    pooled = encoder.pooler(ops.reshape(hidden[:, :, 0, :], (-1, hidden_size)))
    logits = ops.reshape(head_at(model, layer + 1)(pooled, training=False), (rows, width))
    prediction = key(logits)
    unchanged = running["unchanged"]
    if layer:
      unchanged = ops.where(same(running["previous"], prediction), unchanged + 1, 0)
    return {**running, "hidden": hidden, "unchanged": unchanged, "previous": prediction}, pooled, logits

  for layer in range(layers):
    last = layer == layers - 1
    if layer < patience and not last:
      # A row's count of unchanged iterations is at most `layer`, so none can leave yet: no test, no branch.
      running = advance(running, layer)[0]
      continue

    def step(state, layer=layer, last=last):
      running, done = state
      running, pooled, logits = advance(running, layer)
      if last:
        return _settle(running, done, pooled, logits, ops.ones_like(running["unchanged"], "bool"), layer)
      leave = running["unchanged"] >= patience
      # The compaction (gathers and scatters) only at the iterations where some row leaves.
      return _branch(ops.any(leave), lambda: _settle(running, done, pooled, logits, leave, layer),
                     lambda: (running, done))

    running, done = _branch(ops.shape(running["rows"])[0] > 0, lambda: step((running, done)),
                            lambda: (running, done))
  return done
