"""`python -m experiments.ablations --study=table5 ...`: the ablation study's binary under its issue-33 name.

Issue 33's contract command is `python -m experiments.ablations --study=table5 --corpus=FILE --seeds=K --steps=N
--output_dir=OUT`; issue 45 moved the study into its project folder (`experiments.projects.ablations.study`, console
script `albert-ablations`). This module keeps the published command working by launching that binary's own
`define_flags` + `main`, so the two names are one binary (same flags, same outputs), not two that can drift apart.
It defines no flags and no `main` of its own; importing it does nothing but import the study.
"""

from experiments.projects.ablations import study
from official_albert import cli


def console_main() -> None:
  """Runs `experiments.projects.ablations.study` (the `albert-ablations` console script) under the old name."""
  cli.launch(study.define_flags, study.main)


if __name__ == "__main__":
  console_main()
