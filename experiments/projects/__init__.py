"""The research wing (issue 45, after Model Garden's `official/projects/<name>/`): one folder per study, each with a
README (its command, what it measures, its result tables), one binary and its tests mirrored under
`tests/experiments/projects/<name>/`. A project stands on the library, the tasks, the data tools and the shared study
pieces (`experiments.study`, `experiments.jax_loop`, `data_prep.corpus_tasks`), never on the demo or another project
(tests/test_architecture.py)."""
