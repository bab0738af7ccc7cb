"""official_albert's registered experiments (pretraining.py, finetuning.py; looked up by registry.py), the demo,
the benchmark suite (benchmark/), the research projects (projects/: long_inputs, early_exit, ablations), the studies'
shared pieces (study.py: the study kit; jax_loop.py) and the JAX-backend check (backend_check.py)."""

PROJECT = "official_albert"  # marks this top-level package as official_albert's (see cli.require_project_package)
