"""`python -m experiments.early_exit_study` forwards to the early-exit project's binary.

The study moved to `experiments/projects/early_exit/` (issue 45: a research wing, one folder per project); its earlier
notes and running jobs name this command, so it keeps working. Use `python -m experiments.projects.early_exit.study`.
"""

from experiments.projects.early_exit.study import console_main

if __name__ == "__main__":
  console_main()
