"""Keras' global dtype policy, set for one block of code and restored after it.

Keras layers take their compute and variable dtypes from the *global* policy when they are created, so building a
model in bfloat16 (an export, a benchmark row, a mixed-precision training run) means setting that global. Left set,
it would leak: the caller's next model (the next test, the next benchmark row, the training run after an export)
would silently be built in another precision. `global_dtype_policy` is the one place that sets it and puts the
previous policy back, also when the block raises.
"""

from __future__ import annotations

import contextlib
import os
from typing import FrozenSet, Iterator, Mapping, Optional

import keras

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


# ------------------------------------------------------------------------------------ oneDNN frozen-weight kernels
# TF's oneDNN MatMul+bias(+GELU) kernel runs an inner product. With weights it may not assume constant, it hands
# oneDNN the plain [K, N] layout, which oneDNN 3.7 (TF 2.21) serves with its BLAS-style `gemm:jit` driver: both
# operands are packed on every call (the bf16 micro-kernel is AMX on AMX CPUs; ONEDNN_VERBOSE cannot tell). With
# this variable set, TF asks oneDNN for its preferred blocked layout (the `brgemm` inner product), reorders each
# weight once and caches it inside the kernel. Measured on a 2-core AVX-512-bf16 EPYC, albert-base
# bf16 inference: +18% at batch 1, +5% at batch 8 (make bench, `frozen_weight_kernels` rows). The cache is never
# refreshed, so it is for processes that only serve.
FROZEN_WEIGHTS_ENV = "TF_ONEDNN_ASSUME_FROZEN_WEIGHTS"


def frozen_weight_kernels_enabled(environ: Optional[Mapping[str, str]] = None) -> bool:
  """Whether `FROZEN_WEIGHTS_ENV` is on in `environ` (default: this process), read the way TF reads it."""
  value = (os.environ if environ is None else environ).get(FROZEN_WEIGHTS_ENV, "")
  return value.strip().lower() in ("1", "true")


def check_weights_may_change(owner: str) -> None:
  """Refuses to train or evaluate checkpoints in a process whose oneDNN kernels cache their weights.

  Why: under `FROZEN_WEIGHTS_ENV` each fused MatMul keeps the weights of its first call, so a training run would keep
  computing its forward pass with the initial weights and an evaluator would score the first checkpoint it restored
  every time — silently (tests/official_albert/test_precision.py shows the stale output).

  Raises:
    RuntimeError: the variable is on; the message names it and the fix.
  """
  if frozen_weight_kernels_enabled():
    raise RuntimeError(
        f"{owner}: {FROZEN_WEIGHTS_ENV}={os.environ[FROZEN_WEIGHTS_ENV]!r} is set. With it TensorFlow's oneDNN "
        "MatMul kernels cache each weight at their first call and never read it again, so training would run with "
        "the initial weights and evaluation would score the first checkpoint only. It is for serving-only "
        f"processes; unset it for this run (`unset {FROZEN_WEIGHTS_ENV}`).")
