"""Precision on this machine: Keras' dtype policy for a block of code, which precision is faster here, oneDNN caching.

- `global_dtype_policy`: Keras layers take their compute and variable dtypes from the *global* policy when they are
  created, so building a model in bfloat16 (an export, a benchmark row, a mixed-precision training run) means setting
  that global. Left set, it would leak: the caller's next model (the next test, the next benchmark row, the training
  run after an export) would silently be built in another precision. `global_dtype_policy` is the one place that sets
  it and puts the previous policy back, also when the block raises.
- `probe_matmul_speed`: whether bfloat16 pays is measured on the machine, not read off a CPU flag;
  `resolve_mixed_precision` turns it into the "auto" precision of the demo and the studies (the benchmark's machine
  record keeps the probe too).
- `onednn_custom_ops_enabled`: whether TensorFlow runs its oneDNN kernels here at all (not on an AVX2-only CPU by
  default), which decides the kernels a profile shows and whether `FROZEN_WEIGHTS_ENV` does anything.
- `FROZEN_WEIGHTS_ENV`: oneDNN kernels that cache their weights, for serving-only processes.

On an AVX2-only CPU (no AVX-512, no AMX) TensorFlow leaves its oneDNN kernels off, bfloat16 has no hardware
instructions and is emulated, and the probe picks float32 (docs/performance.md, "Which CPU"). `AVX2_ONLY_ENV`
reproduces that CPU on a bigger one, for tests.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import statistics
import time
from typing import Callable, Dict, FrozenSet, Iterator, Mapping, Optional, Sequence, Tuple

import keras
import numpy as np

from official_albert import compat

logger = logging.getLogger(__name__)

# The user-facing compute dtypes of exports and benchmarks → the Keras policy that runs them: bfloat16 GEMMs with
# float32 weights, LayerNorm and logits (`mixed_bfloat16`), not a pure bfloat16 model.
DTYPE_POLICIES = {"float32": "float32", "bfloat16": "mixed_bfloat16"}


def policy_for_dtype(dtype: str) -> str:
  """The Keras policy name for a compute dtype of `DTYPE_POLICIES` (float32 | bfloat16).

  Raises:
    ValueError: `dtype` is not a key of `DTYPE_POLICIES`; the message lists the accepted ones.
  """
  if dtype not in DTYPE_POLICIES:
    raise ValueError(f"dtype={dtype!r} is not one of {tuple(DTYPE_POLICIES)}.")
  return DTYPE_POLICIES[dtype]


@contextlib.contextmanager
def global_dtype_policy(name: str) -> Iterator[None]:
  """Sets Keras' global dtype policy to `name` inside the block and restores the previous policy on exit.

  Why a context manager: layers read the global policy when they are built, so the policy must be set while the
  model is built, and restoring it in a `finally` keeps a model built in one precision from changing the precision
  of every model the caller builds afterwards, even when building or running raises.

  Args:
    name: a Keras policy name ("float32", "mixed_bfloat16", "mixed_float16", ...; see `policy_for_dtype` for the
      float32 | bfloat16 shorthand).

  Yields:
    Nothing; the block runs under `name`.
  """
  previous = keras.config.dtype_policy()
  keras.config.set_dtype_policy(name)
  try:
    yield
  finally:
    keras.config.set_dtype_policy(previous)


def cpu_flags(cpuinfo_path: str = "/proc/cpuinfo") -> FrozenSet[str]:
  """The CPU feature flags of /proc/cpuinfo (empty where it cannot be read, e.g. not Linux).

  Why: whether bfloat16 pays on a CPU depends on its matrix instructions (`amx_bf16`, `avx512_bf16`); without them
  TF emulates bf16 and it runs slower than float32.
  """
  try:
    with open(cpuinfo_path) as f:
      line = next((line for line in f if line.startswith("flags")), "")
  except OSError:
    return frozenset()
  return frozenset(line.split(":", 1)[-1].split())


# An AVX2-only CPU as TensorFlow sees one, on a bigger x86 CPU: oneDNN capped at AVX2 (it honours the cap: its ISA
# line and kernels say AVX2) and TensorFlow's oneDNN kernels off, as TensorFlow's own CPU rule leaves them on such a
# CPU. The cap alone is not that CPU: TensorFlow still runs its oneDNN kernels (it reads the CPU, not the cap), and
# its bfloat16 MatMul then aborts the process ("could not create a primitive descriptor for the matmul primitive").
AVX2_ONLY_ENV = {"ONEDNN_MAX_CPU_ISA": "AVX2", "TF_ENABLE_ONEDNN_OPTS": "0"}


def onednn_custom_ops_enabled() -> bool:
  """Whether TensorFlow runs its oneDNN kernels (fused MatMul, blocked inner products) in this process.

  Why it matters: with them off — TensorFlow's default on an AVX2-only CPU, or `TF_ENABLE_ONEDNN_OPTS=0` — MatMul
  runs TensorFlow's own kernel, which calls oneDNN's GEMM API only (a profile shows `gemm_api`, no `inner_product` or
  `matmul` primitives), and `FROZEN_WEIGHTS_ENV` changes nothing. TensorFlow decides once per process.
  """
  return compat.onednn_custom_ops_enabled()


# ------------------------------------------------------------------------------------ which precision is faster here
# bfloat16 must beat float32 by this factor before "auto" picks it: bf16 rounds the activations, so a tie is a loss.
BF16_MIN_SPEEDUP = 1.1


@dataclasses.dataclass(frozen=True)
class MatmulProbe:
  """What `probe_matmul_speed` measured: TensorFlow's matmul throughput per dtype on this machine.

  Attributes:
    gflops: {"float32": GFLOP/s, "bfloat16": GFLOP/s}, the median of interleaved repetitions.
    shape: (m, k, n) of the probed [m,k]×[k,n] product.
    seconds: wall time of the whole probe (tracing and warm-up included).
  """
  gflops: Mapping[str, float]
  shape: Tuple[int, int, int]
  seconds: float

  @property
  def bf16_speedup(self) -> float:
    return self.gflops["bfloat16"] / max(self.gflops["float32"], 1e-9)

  def faster_policy(self, min_speedup: float = BF16_MIN_SPEEDUP) -> str:
    """"mixed_bfloat16" when bf16 matmuls ran at least `min_speedup`× the float32 ones, else "float32"."""
    return "mixed_bfloat16" if self.bf16_speedup >= min_speedup else "float32"

  def describe(self) -> str:
    m, k, n = self.shape
    return (f"matmul probe [{m}x{k}]x[{k}x{n}]: float32 {self.gflops['float32']:.1f} GFLOP/s, bfloat16 "
            f"{self.gflops['bfloat16']:.1f} GFLOP/s (bf16/f32 {self.bf16_speedup:.2f}x, {self.seconds:.2f} s)")

  def as_dict(self) -> Dict[str, object]:
    return {"gflops": dict(self.gflops), "shape": list(self.shape), "seconds": round(self.seconds, 3),
            "bf16_speedup": round(self.bf16_speedup, 3), "faster_policy": self.faster_policy()}


def probe_matmul_speed(shape: Sequence[int] = (1024, 1024, 1024), repeats: int = 7) -> MatmulProbe:
  """Times TensorFlow's float32 and bfloat16 matmul of `shape` (m, k, n) on this machine, interleaved.

  Why a measurement and not a CPU flag: `avx512_bf16` in /proc/cpuinfo does not make bf16 fast (on one Xeon with
  that flag and no AMX, TF's bf16 matmul runs slower than float32; on an EPYC with the same flag, faster: the
  demo logs both figures of its own probe); on an AVX2-only CPU bf16 is emulated and the probe picks float32. The
  probe runs the MatMul kernel the model's dense layers run, inside a `tf.function` (graph mode, as in training), in
  well under a second for the default shape. Repetitions alternate the dtypes so that load from other processes hits
  both alike.

  Args:
    shape: (m, k, n); pass the model's own GEMM (e.g. batch·seq, hidden, intermediate) to probe what it runs.
    repeats: timed products per dtype (after two warm-up calls each); the median is reported.
  """
  import tensorflow as tf  # noqa: PLC0415 (TF-free module)

  start = time.perf_counter()
  m, k, n = (int(d) for d in shape)
  rng = np.random.default_rng(0)
  a32 = rng.standard_normal((m, k)).astype(np.float32)
  b32 = rng.standard_normal((k, n)).astype(np.float32)
  calls = {}
  for dtype in ("float32", "bfloat16"):
    a, b = tf.constant(a32, dtype=dtype), tf.constant(b32, dtype=dtype)
    fn = tf.function(lambda a=a, b=b: tf.reduce_sum(tf.cast(tf.matmul(a, b), tf.float32)), autograph=False)
    for _ in range(2):
      fn().numpy()
    calls[dtype] = fn
  times: Dict[str, list] = {dtype: [] for dtype in calls}
  for _ in range(max(1, repeats)):
    for dtype, fn in calls.items():
      t0 = time.perf_counter()
      fn().numpy()
      times[dtype].append(time.perf_counter() - t0)
  flops = 2.0 * m * k * n
  gflops = {dtype: flops / max(statistics.median(t), 1e-12) / 1e9 for dtype, t in times.items()}
  return MatmulProbe(gflops=gflops, shape=(m, k, n), seconds=time.perf_counter() - start)


def resolve_mixed_precision(setting: str, probe_shape: Tuple[int, int, int] = (4096, 128, 512),
                            probe: Optional[Callable[..., MatmulProbe]] = None,
                            owner: str = "demo") -> Tuple[str, Optional[Dict[str, object]]]:
  """The runtime's `mixed_precision_dtype` for `setting`, and the probe that decided it ("auto" only, else None).

  "auto" → mixed_bfloat16 where this machine's bf16 matmul at the model's own GEMM shape (`probe_shape`: batch·seq,
  hidden, intermediate) runs at least `BF16_MIN_SPEEDUP`× its float32 one, else float32; the choice and both figures
  are logged under `owner`'s name. Why measured: a CPU flag is not a speed. With bf16 the demo's tiny model trains
  ~1.3x faster where the CPU has fast bf16 kernels (AMD EPYC with AVX512-BF16), but on a Xeon with the same flag and
  no AMX bf16 ran slower than float32 (the demo's pretraining took 2.6x as long), and an AVX2-only CPU emulates it.
  Any other `setting` ("float32", "mixed_bfloat16", ...) is returned as given.
  """
  if setting != "auto":
    return setting, None
  result = (probe or probe_matmul_speed)(probe_shape)
  choice = result.faster_policy()
  logger.info("%s: precision auto -> %s. %s; bfloat16 is chosen when it is at least %.2fx float32.", owner, choice,
              result.describe(), BF16_MIN_SPEEDUP)
  return choice, result.as_dict()


# ------------------------------------------------------------------------------------ oneDNN frozen-weight kernels
# TF's oneDNN MatMul+bias(+GELU) kernel runs an inner product. With weights it may not assume constant, it hands
# oneDNN the plain [K, N] layout, which oneDNN 3.7 (TF 2.21) serves with its BLAS-style `gemm:jit` driver: both
# operands are packed on every call. With this variable set, TF asks oneDNN for its preferred blocked layout (the
# `brgemm` inner product, `brgemm:avx10_1_512_amx` on an AMX CPU), reorders each weight once and caches it inside
# the kernel: albert-base bf16 inference +5-18% on an AVX-512-bf16 EPYC, 1.4x on an AMX Xeon, where the plain
# driver's inner products take 2.7x the brgemm's time (docs/performance.md). The cache is never
# refreshed, so it is for processes that only serve. Where TensorFlow's oneDNN kernels are off (an AVX2-only CPU by
# default, `onednn_custom_ops_enabled`), the variable has no kernel to act on and weights are read on every call;
# training still refuses it, since `TF_ENABLE_ONEDNN_OPTS=1` turns the kernels on there too.
FROZEN_WEIGHTS_ENV = "TF_ONEDNN_ASSUME_FROZEN_WEIGHTS"


def frozen_weight_kernels_enabled(environ: Optional[Mapping[str, str]] = None) -> bool:
  """Whether `FROZEN_WEIGHTS_ENV` is on in `environ` (default: this process), read the way TF reads it."""
  value = (os.environ if environ is None else environ).get(FROZEN_WEIGHTS_ENV, "")
  return value.strip().lower() in ("1", "true")


def weight_updates_reach_the_kernels() -> bool:
  """Whether a weight update reaches TensorFlow's fused MatMul kernels in this process: a probe, run here.

  Why a probe and not `frozen_weight_kernels_enabled()`: TensorFlow reads `FROZEN_WEIGHTS_ENV` once per process, at
  its first fused oneDNN MatMul kernel (`AreWeightsFrozen`, a `call_once`), so a process that served with the
  variable on and then unset it (a notebook, a script that evaluates and then fine-tunes) still has kernels that
  keep their first weights. The probe runs what the model's dense layers run — one MatMul+bias+GELU `tf.function` over a
  variable, on the CPU — assigns the variable a new value and runs it again: an unchanged output is a stale kernel.
  Its 4×16·16×32 product takes milliseconds.

  The answer is fixed for the process, so it is computed once: TensorFlow never reads the variable again once a
  kernel has read it, and where its oneDNN kernels are off (`onednn_custom_ops_enabled`) none ever caches a weight.
  Run while the variable is on, the probe itself would make this process's kernels keep their weights, so
  `check_weights_may_change` refuses on the variable before it probes; run with it off, the probe settles "weights
  change" for every kernel built afterwards. It runs ops, so TensorFlow initialises its devices: call it after any
  logical-device setup (the `Trainer` probes right after it has built its strategy).
  """
  global _weight_updates_reach_the_kernels
  if _weight_updates_reach_the_kernels is None:
    import tensorflow as tf  # noqa: PLC0415 (TF-free module)

    with tf.device("/CPU:0"):
      w = tf.Variable(np.ones((16, 32), np.float32), trainable=False)
      b = tf.Variable(np.zeros(32, np.float32), trainable=False)
      x = tf.constant(np.ones((4, 16), np.float32))
      dense = tf.function(lambda: tf.nn.gelu(tf.matmul(x, w) + b, approximate=True),  # one fused oneDNN kernel
                          autograph=False)
      before = dense().numpy()
      w.assign(2 * w)
      _weight_updates_reach_the_kernels = not np.allclose(before, dense().numpy())
  return _weight_updates_reach_the_kernels


_weight_updates_reach_the_kernels: Optional[bool] = None  # `weight_updates_reach_the_kernels`' answer, once probed


def check_weights_may_change(owner: str, probe: bool = True) -> None:
  """Refuses to train or evaluate checkpoints in a process whose oneDNN kernels cache their weights.

  Why: under `FROZEN_WEIGHTS_ENV` each fused MatMul keeps the weights of its first call, so a training run would keep
  computing its forward pass with the initial weights and an evaluator would score the first checkpoint it restored
  every time — silently (tests/official_albert/test_precision.py shows the stale output). The variable is checked
  first (its value now), then what the process does (`weight_updates_reach_the_kernels`): TensorFlow read the
  variable at its first oneDNN kernel, and a process that had it on then still caches weights after unsetting it.
  `probe=False` checks the variable only: for callers that run before the distribution strategy exists (the probe
  runs ops, which fixes TensorFlow's devices; `train_lib.runtime_scope`); the `Trainer` probes once it has built its
  strategy.

  Raises:
    RuntimeError: the variable is on, or was when TensorFlow read it; the message names it and the fix.
  """
  consequence = ("training would run with the initial weights and evaluation would score the first checkpoint "
                 "only. It is for serving-only processes; ")
  if frozen_weight_kernels_enabled():
    raise RuntimeError(
        f"{owner}: {FROZEN_WEIGHTS_ENV}={os.environ[FROZEN_WEIGHTS_ENV]!r} is set. With it TensorFlow's oneDNN "
        f"MatMul kernels cache each weight at their first call and never read it again, so {consequence}"
        f"unset it for this run (`unset {FROZEN_WEIGHTS_ENV}`).")
  if probe and not weight_updates_reach_the_kernels():
    raise RuntimeError(
        f"{owner}: this process's oneDNN MatMul kernels keep their first weights (a probe assigned a weight and "
        f"the kernel's output did not change): {FROZEN_WEIGHTS_ENV} was on when TensorFlow read it, at its first "
        "fused MatMul kernel, and TensorFlow reads it once per process, so unsetting it afterwards changes nothing: "
        f"{consequence}train in a new process started without {FROZEN_WEIGHTS_ENV}.")
