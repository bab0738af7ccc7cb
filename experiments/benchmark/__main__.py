"""`python -m experiments.benchmark --workload=... --compare=...` (see experiments/benchmark/core.py)."""

from absl import app

from experiments.benchmark import core

if __name__ == "__main__":
  core.define_flags()
  app.run(core.main)
