"""The benchmark suite (`python -m experiments.benchmark`, `make bench`): core.py holds the settings, timing, FLOP
counts, peers and the runner; the workload families live beside it (training.py, padding.py)."""
