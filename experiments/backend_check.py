"""The modeling package on Keras' JAX backend, on whatever device JAX sees: encoder inference and a training step.

  python -m experiments.backend_check --preset=albert-base-v2 --batch_size=8 --seq_length=128 \
      --dtypes=float32,bfloat16 --output_file=backend_check.json

Needs keras, jax, numpy and absl-py, and no TensorFlow, so a machine with JAX alone (a GPU or TPU host) runs it.
KERAS_BACKEND must be jax or unset (then this binary sets it before Keras is imported). The model has random
weights (`AlbertConfig.from_preset`, or `tiny`); each dtype's model holds the same values.

Rows, timed interleaved after every row is compiled and warmed up (repetition r runs every row once, so load from
elsewhere hits all rows alike; the benchmark's method, experiments/benchmark/core.py):
- `encoder_inference <dtype>`: `jax.jit` of `AlbertEncoder.stateless_call(training=False)` on a [B,S] batch (the last
  quarter of one row padding) → `sequence_output` and `pooled_output`.
- `pretrain_step <dtype>`: `jax.jit` of `jax.value_and_grad` of the MLM + SOP loss through
  `AlbertPretrainer.stateless_call(training=True)` plus the train binary's AdamW step, clipped at global norm 1.0
  (`experiments.jax_loop.adamw` and `train_step`), the
  state donated: one full optimizer step on the same batch each repetition.
- `matmul <dtype>`: an N×N `jnp.matmul`, the peak each row's MFU is measured against (same run, same conditions).
`bfloat16` is Keras' `mixed_bfloat16` (float32 variables, LayerNorm and logits; bfloat16 matmuls). FLOPs count
the work the model needs (experiments/benchmark/core.py's formulas; a training step is 3 × forward).

Checks, in the JSON beside the rows: the bfloat16 encoder's outputs against float32 (cosine); float32 at JAX's default
matmul precision against `highest` (on GPUs the default runs float32 matmuls as TF32); and the training loss on the
one fixed batch, which must fall over the timed steps (it learns).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import platform
import time
from typing import Any, Callable, Dict, List, Optional, Sequence

from absl import flags
import numpy as np

from experiments import jax_loop
from experiments.benchmark.core import encoder_flops_per_example
from experiments.benchmark.core import pretraining_heads_flops_per_example
from experiments.benchmark.core import random_batch
from experiments.benchmark.core import TINY
from official_albert import cli

ENCODER_INPUTS = ("input_word_ids", "input_mask", "input_type_ids")
DTYPES = ("float32", "bfloat16")


@dataclasses.dataclass
class CheckSettings:
  preset: str = "albert-base-v2"
  batch_size: int = 8
  seq_length: int = 128
  max_predictions_per_seq: int = 20
  dtypes: Sequence[str] = DTYPES
  repeats: int = 20
  warmup: int = 3
  matmul_n: int = 0  # 0: 8192 on an accelerator, 1024 on a CPU.
  learning_rate: float = 1e-4
  seed: int = 0


@dataclasses.dataclass
class Row:
  """One timed callable: `call()` runs one step and blocks until its result is ready."""
  name: str
  dtype: str
  flops: float
  examples: int
  tokens: int
  call: Callable[[], Any]
  first_call_s: float = 0.0
  times: List[float] = dataclasses.field(default_factory=list)


def _config(preset: str):
  from official_albert.config import AlbertConfig  # pylint: disable=g-import-not-at-top
  if preset == "tiny":
    return AlbertConfig.from_preset("albert-base-v2", **TINY)
  return AlbertConfig.from_preset(preset)


def _build(model_cls, config, dtype: str, like=None):
  """`model_cls(config)` under the dtype's Keras policy, with `like`'s weight values (all float32 variables)."""
  from official_albert import precision  # pylint: disable=g-import-not-at-top
  with precision.global_dtype_policy(precision.policy_for_dtype(dtype)):
    model = model_cls(config)
  if like is not None:
    for target, source in zip(model.weights, like.weights):
      target.assign(source.value)
  return model


def build_models(model_cls, config, dtypes: Sequence[str]) -> Dict[str, Any]:
  """{dtype: `model_cls(config)` under that dtype's policy}, every one holding the first built model's values.

  Copied from the first, whatever the order of `dtypes` (the bfloat16-vs-float32 check compares the same weights).
  """
  models: Dict[str, Any] = {}
  for dtype in dtypes:
    models[dtype] = _build(model_cls, config, dtype, like=next(iter(models.values()), None))
  return models


def _cosine(a, b) -> float:
  a, b = np.asarray(a, np.float64).ravel(), np.asarray(b, np.float64).ravel()
  return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def encoder_forward(encoder):
  """jit(state, inputs) → (sequence_output, pooled_output) of a stateless inference call."""
  import jax  # pylint: disable=g-import-not-at-top

  @jax.jit
  def forward(trainable, non_trainable, inputs):
    outputs, _ = encoder.stateless_call(trainable, non_trainable, inputs, training=False)
    return outputs["sequence_output"], outputs["pooled_output"]

  return forward


def pretraining_loss(outputs, batch):
  """Mean MLM cross-entropy over the weighted masked positions + SOP cross-entropy (the pretraining task's loss)."""
  import jax  # pylint: disable=g-import-not-at-top
  import jax.numpy as jnp  # pylint: disable=g-import-not-at-top
  log_probs = jax.nn.log_softmax(outputs["mlm_logits"].astype(jnp.float32), axis=-1)
  nll = -jnp.take_along_axis(log_probs, batch["masked_lm_ids"][..., None], axis=-1)[..., 0]
  weights = batch["masked_lm_weights"]
  mlm = jnp.sum(nll * weights) / (jnp.sum(weights) + 1e-5)
  sop_log_probs = jax.nn.log_softmax(outputs["sop_logits"].astype(jnp.float32), axis=-1)
  sop = -jnp.mean(jnp.take_along_axis(sop_log_probs, batch["next_sentence_labels"], axis=-1))
  return mlm + sop


def pretrain_step(pretrainer, learning_rate: float):
  """(step, initial optimizer variables): step(trainable, non_trainable, optimizer_vars, batch) → (..., loss), the
  experiments' JAX step (`experiments.jax_loop.train_step`) with its state donated."""
  optimizer = jax_loop.adamw(pretrainer, learning_rate)
  features = ENCODER_INPUTS + ("masked_lm_positions",)

  def loss_fn(trainable, non_trainable, batch):
    outputs, non_trainable = pretrainer.stateless_call(trainable, non_trainable, {k: batch[k] for k in features},
                                                       training=True)
    return pretraining_loss(outputs, batch), non_trainable

  return jax_loop.train_step(loss_fn, optimizer, donate=True), [v.value for v in optimizer.variables]


def _matmul_row(dtype: str, n: int, seed: int) -> Row:
  import jax  # pylint: disable=g-import-not-at-top
  import jax.numpy as jnp  # pylint: disable=g-import-not-at-top
  rng = np.random.default_rng(seed)
  a, b = (jnp.asarray(rng.standard_normal((n, n), np.float32), dtype=dtype) for _ in range(2))
  matmul = jax.jit(jnp.matmul)
  return Row(f"matmul {dtype}", dtype, 2.0 * n ** 3, 0, 0, lambda: matmul(a, b).block_until_ready())


def _time(fn) -> float:
  start = time.perf_counter()
  fn()
  return time.perf_counter() - start


# Long because: the report in the order it is made (build and compile each row, warm up, time the rows interleaved, then
# the checks that compare them); the rows share the compiled functions and the timing loop.
def run(settings: CheckSettings, log: Callable[[str], None] = print) -> Dict[str, Any]:
  """Builds, compiles, warms up and times every row; returns the report (rows, checks, device, versions)."""
  jax_loop.use_jax_backend()
  import jax  # pylint: disable=g-import-not-at-top
  import jax.numpy as jnp  # pylint: disable=g-import-not-at-top
  import keras  # pylint: disable=g-import-not-at-top

  from official_albert.modeling.encoder import AlbertEncoder  # pylint: disable=g-import-not-at-top
  from official_albert.modeling.models import AlbertPretrainer  # pylint: disable=g-import-not-at-top
  for dtype in settings.dtypes:
    if dtype not in DTYPES:
      raise ValueError(f"--dtypes: {dtype!r} is not one of {DTYPES}.")
  keras.utils.set_random_seed(settings.seed)
  config = _config(settings.preset)
  device = jax.devices()[0]
  b, s, p = settings.batch_size, settings.seq_length, settings.max_predictions_per_seq
  batch = {k: jnp.asarray(v) for k, v in random_batch(config, b, s, p, settings.seed).items()}
  encoder_inputs = {k: batch[k] for k in ENCODER_INPUTS}
  encoder_flops = encoder_flops_per_example(config, s) * b
  step_flops = 3 * (encoder_flops + pretraining_heads_flops_per_example(config, min(p, s - 1)) * b)
  matmul_n = settings.matmul_n or (1024 if device.platform == "cpu" else 8192)

  rows: List[Row] = []
  checks: Dict[str, Any] = {}
  encoders = build_models(AlbertEncoder, config, settings.dtypes)
  pretrainers = build_models(AlbertPretrainer, config, settings.dtypes)
  losses = {}
  for dtype in settings.dtypes:
    encoder, pretrainer = encoders[dtype], pretrainers[dtype]
    forward, state = encoder_forward(encoder), jax_loop.state(encoder)
    rows.append(Row(f"encoder_inference {dtype}", dtype, encoder_flops, b, b * s,
                    lambda f=forward, st=state: jax.block_until_ready(f(*st, encoder_inputs))))
    step, optimizer_vars = pretrain_step(pretrainer, settings.learning_rate)
    # Copies: the step donates its state, and the model's own variables must keep theirs.
    carry = jax.tree_util.tree_map(jnp.copy, [*jax_loop.state(pretrainer), optimizer_vars])
    losses[dtype] = []

    def train(step=step, carry=carry, record=losses[dtype]):
      carry[0], carry[1], carry[2], loss = step(*carry, batch)
      record.append(float(loss))  # float(): waits for the step's result

    rows.append(Row(f"pretrain_step {dtype}", dtype, step_flops, b, b * s, train))
    rows.append(_matmul_row(dtype, matmul_n, settings.seed))

  for row in rows:
    row.first_call_s = _time(row.call)
    log(f"compiled {row.name}: first call {row.first_call_s:.2f} s")
  for _ in range(settings.warmup):
    for row in rows:
      row.call()
  for dtype in settings.dtypes:
    losses[dtype].clear()
  for _ in range(settings.repeats):
    for row in rows:
      row.times.append(_time(row.call))

  peaks = {r.dtype: r.flops / float(np.median(r.times)) / 1e9 for r in rows if r.name.startswith("matmul")}
  results = []
  for row in rows:
    t = np.asarray(row.times)
    median = float(np.median(t))
    result = {"name": row.name, "impl": "ours_jax", "dtype": row.dtype, "device": device.device_kind,
              "first_call_s": row.first_call_s, "repeats": len(t), "median_s": median, "min_s": float(t.min()),
              "p50_ms": 1e3 * float(np.percentile(t, 50)), "p99_ms": 1e3 * float(np.percentile(t, 99)),
              "gflops": row.flops / median / 1e9, "times_s": [float(x) for x in t]}
    if row.examples:
      result.update(examples_per_s=row.examples / median, tokens_per_s=row.tokens / median,
                    mfu=result["gflops"] / peaks[row.dtype] if row.dtype in peaks else None)
    results.append(result)
    log(f"{row.name:28s} median {1e3 * median:9.2f} ms  p99 {result['p99_ms']:9.2f} ms  "
        f"{result['gflops']:10.1f} GFLOP/s" + (f"  MFU {result['mfu']:.3f}" if result.get("mfu") else ""))

  for dtype, record in losses.items():
    checks[f"pretrain_loss {dtype}"] = {"first": record[0], "last": record[-1], "falls": record[-1] < record[0]}
  if "float32" in encoders:
    f32_state = jax_loop.state(encoders["float32"])
    reference = jax.device_get(encoder_forward(encoders["float32"])(*f32_state, encoder_inputs))
    with jax.default_matmul_precision("highest"):
      highest = jax.device_get(encoder_forward(encoders["float32"])(*f32_state, encoder_inputs))
    checks["float32 default vs highest matmul precision"] = {
        "sequence_output_cosine": _cosine(reference[0], highest[0]),
        "sequence_output_max_abs": float(np.abs(np.asarray(reference[0]) - np.asarray(highest[0])).max())}
    if "bfloat16" in encoders:
      low = jax.device_get(encoder_forward(encoders["bfloat16"])(*jax_loop.state(encoders["bfloat16"]), encoder_inputs))
      checks["bfloat16 vs float32 (highest)"] = {"sequence_output_cosine": _cosine(low[0], highest[0]),
                                                 "pooled_output_cosine": _cosine(low[1], highest[1])}
  for name, check in checks.items():
    log(f"check {name}: {check}")
  return {"settings": dataclasses.asdict(settings), "matmul_n": matmul_n, "rows": results, "checks": checks,
          "device": {"platform": device.platform, "device_kind": device.device_kind, "count": jax.device_count(),
                     "host": platform.node()},
          "versions": {"jax": jax.__version__, "jaxlib": _version("jaxlib"), "keras": keras.__version__,
                       "numpy": np.__version__, "python": platform.python_version()},
          "default_matmul_precision": str(jax.config.jax_default_matmul_precision),
          "xla_flags": os.environ.get("XLA_FLAGS", "")}


def _version(distribution: str) -> Optional[str]:
  from importlib import metadata  # pylint: disable=g-import-not-at-top
  with contextlib.suppress(metadata.PackageNotFoundError):
    return metadata.version(distribution)
  return None


def define_flags(fv: flags.FlagValues = flags.FLAGS) -> None:
  """Defines the binary's flags (in a function, so that importing the module never clashes with other binaries)."""
  defaults = CheckSettings()
  flags.DEFINE_string("preset", defaults.preset, "An albert-* preset, or tiny.", flag_values=fv)
  flags.DEFINE_integer("batch_size", defaults.batch_size, "Sequences per step.", flag_values=fv)
  flags.DEFINE_integer("seq_length", defaults.seq_length, "Tokens per sequence.", flag_values=fv)
  flags.DEFINE_integer("max_predictions_per_seq", defaults.max_predictions_per_seq, "Masked positions per sequence.",
                       flag_values=fv)
  flags.DEFINE_list("dtypes", list(defaults.dtypes), f"Compute dtypes, of {DTYPES}.", flag_values=fv)
  flags.DEFINE_integer("repeats", defaults.repeats, "Timed repetitions of every row.", flag_values=fv)
  flags.DEFINE_integer("warmup", defaults.warmup, "Untimed repetitions after the first call.", flag_values=fv)
  flags.DEFINE_integer("matmul_n", defaults.matmul_n, "Size of the peak matmul (0: 8192 on an accelerator, 1024 "
                       "on a CPU).", flag_values=fv)
  flags.DEFINE_integer("seed", defaults.seed, "Seed of the weights and the batch.", flag_values=fv)
  flags.DEFINE_string("output_file", None, "Write the report here as JSON (also printed as rows).", flag_values=fv)


def main(argv, fv: flags.FlagValues = flags.FLAGS) -> None:
  del argv
  settings = CheckSettings(preset=fv.preset, batch_size=fv.batch_size, seq_length=fv.seq_length,
                           max_predictions_per_seq=fv.max_predictions_per_seq, dtypes=tuple(fv.dtypes),
                           repeats=fv.repeats, warmup=fv.warmup, matmul_n=fv.matmul_n, seed=fv.seed)
  report = run(settings)
  if fv.output_file:
    from official_albert import file_io  # pylint: disable=g-import-not-at-top
    file_io.atomic_write_json(fv.output_file, report)
  else:
    print(json.dumps({k: v for k, v in report.items() if k != "rows"}, indent=2))


def console_main() -> None:
  """`python -m experiments.backend_check`."""
  cli.launch(define_flags, main)


if __name__ == "__main__":
  console_main()
