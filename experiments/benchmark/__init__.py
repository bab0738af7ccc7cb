"""The benchmark suite (`python -m experiments.benchmark`, `make bench`): driver.py runs it (workload list, suites,
results, flags); core.py holds the settings, FLOP counts, rows and timing every workload shares, peers.py the HF
torch and KerasHub rows; the workloads live beside them (models.py, standalone.py, training.py, padding.py,
dynamic_data.py, ov_inference.py)."""
