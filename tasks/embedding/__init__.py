"""Sentence embedders trained on text pairs: the `text_embedding` task (a bi-encoder sharing one encoder).

config.py (`TextEmbeddingConfig` and its checks), data.py (CSV / TSV / JSONL pairs → records), task.py (the bi-encoder,
the losses of `official_albert.retrieval` over the global batch, retrieval evaluation, the served model directory).
docs/retrieval.md is the user's page.
"""

from tasks.embedding.config import TextEmbeddingConfig
from tasks.embedding.data import PairExample
from tasks.embedding.data import read_pairs
from tasks.embedding.task import BiEncoder
from tasks.embedding.task import TextEmbeddingTask
