"""`python -m experiments.ablations --study=... --output_dir=...` (see experiments/ablations/driver.py)."""

from experiments.ablations import driver
from official_albert import cli


def console_main() -> None:
  """The `albert-ablations` console script (pyproject.toml)."""
  cli.launch(driver.define_flags, driver.main)


if __name__ == "__main__":
  console_main()
