"""`python -m experiments.benchmark --workload=... --compare=...` (see experiments/benchmark/core.py)."""

from experiments.benchmark import core
from official_albert import cli


def console_main() -> None:
  """The `albert-benchmark` console script (pyproject.toml)."""
  cli.launch(core.define_flags, core.main)


if __name__ == "__main__":
  console_main()
