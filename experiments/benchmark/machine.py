"""Which CPU ran a benchmark, as every results.json of the suite records it (TF-free: the standalone writers use it).

Why more than /proc/cpuinfo's "model name": on the cloud VMs these numbers come from it is often just "AMD EPYC"
for every EPYC generation, while what decides a row's speed differs between them (docs/performance.md, "Which CPU").
The vendor, family, model and stepping name the generation; the flags say which matrix instructions bfloat16 and
float16 rows could use (AVX-512, AVX-512 BF16 / FP16, AMX tiles).
"""

from __future__ import annotations

from typing import Any, Dict, Optional

# The /proc/cpuinfo flags that change what the benchmark's rows run on (recorded true/false, always all of them).
CPU_FLAGS = ("avx512f", "avx512_bf16", "avx512_fp16", "amx_bf16", "amx_tile")


def _number(value: Optional[str]) -> Optional[int]:
  """A cpuinfo number field ("26", or "0x1a" on some kernels) as an int; None when absent or not a number."""
  if value is None:
    return None
  try:
    return int(value, 0)
  except ValueError:
    return None


def cpu_info(cpuinfo_path: str = "/proc/cpuinfo") -> Dict[str, Any]:
  """The first processor of `cpuinfo_path`: vendor, model name, family, model, stepping and `CPU_FLAGS`.

  Returns:
    {"vendor", "model_name", "family", "model", "stepping" (None where the file lacks the field, e.g. on ARM),
    "flags": {flag: bool for CPU_FLAGS}}; where the file cannot be read (not Linux), {"error": why} instead.
  """
  fields: Dict[str, str] = {}
  try:
    with open(cpuinfo_path, encoding="utf-8", errors="replace") as f:
      for line in f:
        if not line.strip():
          if fields:
            break  # The first processor's block is enough: every core of these machines is the same kind.
          continue
        key, sep, value = line.partition(":")
        if sep:
          fields.setdefault(key.strip(), value.strip())
  except OSError as e:
    return {"error": f"{cpuinfo_path}: {e.strerror or e}"}
  flags = set(fields.get("flags", "").split())
  return {"vendor": fields.get("vendor_id"), "model_name": fields.get("model name"),
          "family": _number(fields.get("cpu family")), "model": _number(fields.get("model")),
          "stepping": _number(fields.get("stepping")), "flags": {flag: flag in flags for flag in CPU_FLAGS}}
