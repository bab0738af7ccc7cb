"""The CPU-dependent tests (`-m cpu_kind`) rerun as the other CPU kinds these machines have had (issue 42).

Every `cpu_kind` test asks TensorFlow or oneDNN what this CPU does and asserts that, so the suite passes on each kind
seen here: an AMD EPYC with AVX-512 BF16, one with AVX2 only, an Intel Xeon with AVX-512 BF16/FP16 and no AMX, a Xeon
with AMX. CI runs on one of them; this file reruns those tests in a child pytest as the kinds that can be reproduced
on a bigger CPU:
- `avx2_only`: oneDNN capped at AVX2 and TensorFlow's oneDNN kernels off (`precision.AVX2_ONLY_ENV`), as TensorFlow
  runs on an AVX2-only CPU;
- `avx512_no_bf16`: oneDNN capped at AVX-512 without its bf16 instructions (a CPU with AVX-512 VNNI, e.g. a Xeon
  before Cooper Lake), TensorFlow's oneDNN kernels left to its own CPU rule.
A kind needs its instructions on this CPU (a cap cannot add AMX or FP16 the CPU lacks): one this CPU cannot be is
skipped, naming the flag it needs.
"""

import os
import subprocess
import sys

import pytest

from official_albert import precision
from tests.conftest import REPO_ROOT

KINDS = {
    "avx2_only": ("avx2", precision.AVX2_ONLY_ENV),
    "avx512_no_bf16": ("avx512_vnni", {"ONEDNN_MAX_CPU_ISA": "AVX512_CORE_VNNI"}),
}


def _cpu_kind_files():
  """The test files holding a `cpu_kind` test (the child collects those only: collecting every file costs minutes)."""
  found = []
  for path in sorted((REPO_ROOT / "tests").rglob("test_*.py")):
    if path.name != "test_cpu_kinds.py" and "pytest.mark.cpu_kind" in path.read_text(encoding="utf-8"):
      found.append(str(path.relative_to(REPO_ROOT)))
  return found


def test_the_cpu_kind_tests_are_found():
  files = _cpu_kind_files()
  assert "tests/official_albert/test_precision.py" in files and "tests/experiments/test_benchmark.py" in files, files


@pytest.mark.large
@pytest.mark.slow
@pytest.mark.parametrize("kind", sorted(KINDS))
def test_cpu_dependent_tests_pass_as_another_cpu_kind(kind):
  flag, env_extra = KINDS[kind]
  if flag not in precision.cpu_flags():
    pytest.skip(f"this CPU cannot be capped to {kind}: it lacks {flag}")
  env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", **env_extra}
  env.pop("PYTEST_XDIST_WORKER", None)
  # (The tests' own `avx2_only` cases are deselected: the child is that kind or another, and the parent ran them.)
  done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-m", "cpu_kind", "-k", "not avx2_only", "-p",
                         "no:cacheprovider", *_cpu_kind_files()], cwd=str(REPO_ROOT), env=env, stdout=subprocess.PIPE,
                        stderr=subprocess.STDOUT, text=True, timeout=1800)
  assert done.returncode == 0, f"{kind} ({env_extra}):\n{done.stdout[-4000:]}"
  assert " passed" in done.stdout.splitlines()[-1], done.stdout[-1000:]
