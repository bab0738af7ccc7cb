"""Where a row's time goes: per-op-type time of one step under TF's profiler (`--op_profile`).

Issue 13 asks for the bf16 breakdown (GEMMs vs casts, LayerNorm, softmax, transposes, ...) on the machine the
numbers come from, and a ratio alone cannot say why ours trails or leads on a CPU nobody profiled. With the option,
each of our TF rows runs `calls` more steps after its timed repetitions (so the timings are untouched) with the
profiler on, and the result gains `op_profiles[row]`: op time per step, the GEMM share and the top op types.

Op time is the sum of the executor's op events, so it exceeds the step's wall time where small ops run beside the
GEMMs; shares are of op time. An XLA row's step is one compiled executable whose contents the TF profiler does not
see: its profile says so (status "opaque") instead of reporting a GEMM share of 0.

With `ONEDNN_VERBOSE=1` in the environment (oneDNN reads it once, at start-up), the profiled step's oneDNN log lines
are captured too and the profile gains `onednn`: calls and milliseconds per (primitive, implementation), e.g.
`inner_product brgemm:avx512_core_amx` vs `gemm:jit`, and every `reorder` into a blocked layout. That says which
kernels a CPU actually ran. The verbose lines of the other calls (build, timed repetitions) still go to stdout and
cost time, so read the timings of such a run with that in mind.
"""

import collections
import contextlib
import ctypes
import glob
import os
import re
import sys
import tempfile
from typing import Any, Dict, List

# Op types that are matrix multiplications (TF's oneDNN rewrites included: _MklMatMul, _MklNativeFusedMatMul,
# _MklFusedBatchMatMulV2, ...).
GEMM_MARKERS = ("MatMul", "Einsum", "Conv2D")
# Ops that contain other ops: their events would count their contents twice.
CONTAINER_OPS = frozenset({"PartitionedCall", "StatefulPartitionedCall", "While", "StatelessWhile", "If",
                           "StatelessIf"})
TOP = 15
# Op types of XLA-compiled functions and clusters (a jit_compile'd tf.function runs as "__inference_<name>_<id>").
COMPILED_MARKERS = ("__inference_", "XlaLaunch", "_XlaRun")
# An op event's name: "<node name>:<op type>" (the node name has no colon; the type is an identifier).
OP_EVENT = re.compile(r"^[^:\s][^:]*:([A-Za-z_]\w*)$")
# oneDNN's switch for its per-call log lines (DNNL_ is the pre-3.0 name).
ONEDNN_VERBOSE_VARS = ("ONEDNN_VERBOSE", "DNNL_VERBOSE")


def onednn_verbose_on() -> bool:
  return any(os.environ.get(var, "0").strip().lower() not in ("", "0", "none") for var in ONEDNN_VERBOSE_VARS)


def onednn_summary(text: str) -> Dict[str, Any]:
  """{"ms", "calls", "primitives": [{"primitive", "impl", "calls", "ms"}, ...] by time} from oneDNN's exec lines.

  An exec line is "onednn_verbose[,v1],primitive,exec,<engine>,<primitive>,<implementation>,...,<ms>"; creation
  lines, informational lines and anything else on stdout are not counted.
  """
  totals: Dict[tuple, List[float]] = collections.defaultdict(lambda: [0, 0.0])
  for line in text.splitlines():
    fields = line.strip().split(",")
    if not fields[0].endswith("_verbose") or "exec" not in fields[:4]:
      continue
    at = fields.index("exec")
    if len(fields) < at + 5:
      continue
    try:
      ms = float(fields[-1])
    except ValueError:
      continue
    key = (fields[at + 2], fields[at + 3])
    totals[key][0] += 1
    totals[key][1] += ms
  ranked = sorted(totals.items(), key=lambda item: -item[1][1])
  return {"ms": sum(ms for _, ms in totals.values()), "calls": sum(n for n, _ in totals.values()),
          "primitives": [{"primitive": kind, "impl": impl, "calls": n, "ms": ms}
                         for (kind, impl), (n, ms) in ranked[:TOP]]}


@contextlib.contextmanager
def captured_stdout_fd():
  """Redirects file descriptor 1 (where oneDNN's C code prints) to a temporary file; yields a list that receives
  the captured text on exit."""
  libc = ctypes.CDLL(None)
  sys.stdout.flush()
  libc.fflush(None)
  text: List[str] = []
  with tempfile.TemporaryFile() as tmp:
    saved = os.dup(1)
    os.dup2(tmp.fileno(), 1)
    try:
      yield text
    finally:
      libc.fflush(None)
      os.dup2(saved, 1)
      os.close(saved)
      tmp.seek(0)
      text.append(tmp.read().decode("utf-8", "replace"))


def is_gemm(op_type: str) -> bool:
  return any(marker in op_type for marker in GEMM_MARKERS)


def is_compiled(op_type: str) -> bool:
  return any(op_type.startswith(marker) for marker in COMPILED_MARKERS)


def op_times(xspace) -> Dict[str, List[float]]:
  """{op type: [total ms, count]} over the host plane's op events (named "<node name>:<op type>")."""
  totals: Dict[str, List[float]] = collections.defaultdict(lambda: [0.0, 0])
  for plane in xspace.planes:
    metadata = plane.event_metadata
    for line in plane.lines:
      for event in line.events:
        match = OP_EVENT.match(metadata[event.metadata_id].name)
        if not match or match.group(1) in CONTAINER_OPS:
          continue  # host tracing (executor and thread-pool scopes, "Class::Method", "Eager...: fn"), not an op
        op_type = match.group(1)
        totals[op_type][0] += event.duration_ps / 1e9
        totals[op_type][1] += 1
  return totals


def summarize(totals: Dict[str, List[float]], calls: int) -> Dict[str, Any]:
  """Per-step op time, GEMM share and the TOP op types (ms per step, share, events per step)."""
  total = sum(ms for ms, _ in totals.values())
  if not total:
    return {"status": "empty", "reason": "the profiler recorded no op events"}
  compiled = sum(ms for op, (ms, _) in totals.items() if is_compiled(op)) / total
  if compiled > 0.5:
    return {"status": "opaque", "compiled_share": compiled,
            "reason": f"{compiled:.0%} of op time is inside XLA executables, which the TF profiler does not open; "
                      "profile the row's tf_function twin"}
  ranked = sorted(totals.items(), key=lambda item: -item[1][0])
  return {"status": "ok", "calls": calls, "op_ms_per_step": total / calls,
          "gemm_share": sum(ms for op, (ms, _) in totals.items() if is_gemm(op)) / total,
          "top": [{"op": op, "ms_per_step": ms / calls, "share": ms / total, "events_per_step": count / calls}
                  for op, (ms, count) in ranked[:TOP]]}


def profile_step(step, calls: int = 1) -> Dict[str, Any]:
  """Runs `step` `calls` times under the TF profiler and summarizes its op events."""
  import tensorflow as tf
  try:
    from tensorflow.tsl.profiler.protobuf import xplane_pb2
  except ImportError as e:  # the protobuf module moved between TF releases
    return {"status": "unavailable", "reason": f"{type(e).__name__}: {e}"}
  verbose = onednn_verbose_on()
  with tempfile.TemporaryDirectory(prefix="op_profile-") as logdir:
    with captured_stdout_fd() if verbose else contextlib.nullcontext([]) as printed:
      tf.profiler.experimental.start(logdir)
      try:
        for _ in range(calls):
          step()
      finally:
        tf.profiler.experimental.stop()
    paths = sorted(glob.glob(os.path.join(logdir, "plugins", "profile", "*", "*.xplane.pb")))
    if not paths:
      return {"status": "empty", "reason": f"no .xplane.pb written under {logdir}"}
    xspace = xplane_pb2.XSpace()
    with open(paths[-1], "rb") as f:
      xspace.ParseFromString(f.read())
  profile = summarize(op_times(xspace), calls)
  if verbose:
    profile["onednn"] = onednn_summary("".join(printed))
  return profile


def profile_rows(runners, log=print, calls: int = 1) -> Dict[str, Dict[str, Any]]:
  """`profile_step` for each of our built TF rows; one log line per row (GEMM share and the top 4 op types)."""
  profiles = {}
  for runner in runners:
    if runner.impl != "ours" or runner.status != "ok" or runner.step is None:
      continue
    profiles[runner.name] = profile = profile_step(runner.step, calls)
    if profile["status"] == "ok":
      log(f"  op profile {runner.name}: {profile['op_ms_per_step']:.1f} ms of ops per step, GEMM "
          f"{profile['gemm_share']:.0%}; " + ", ".join(f"{t['op']} {t['share']:.0%}" for t in profile["top"][:4]))
    else:
      log(f"  op profile {runner.name}: {profile['status']}: {profile['reason']}")
    if "onednn" in profile:
      onednn = profile["onednn"]
      log(f"  oneDNN {runner.name}: {onednn['calls']} calls, {onednn['ms']:.1f} ms; " + ", ".join(
          f"{p['primitive']} {p['impl']} ×{p['calls']} {p['ms']:.1f} ms" for p in onednn["primitives"][:4]))
  return profiles
