"""`python -m experiments.benchmark --workload=... --compare=...` (see experiments/benchmark/driver.py)."""

from experiments.benchmark import driver
from official_albert import cli


def console_main() -> None:
  """The `albert-benchmark` console script (pyproject.toml)."""
  cli.launch(driver.define_flags, driver.main)


if __name__ == "__main__":
  console_main()
