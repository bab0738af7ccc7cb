"""Serving: SavedModel export with in-graph tokenization (export.py) and the inference pipelines (pipelines.py)."""
