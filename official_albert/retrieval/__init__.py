"""Retrieval: the training objectives of embedders and the metrics retrieval is judged by.

- `losses`: in-batch-negatives ranking (MNRL, symmetric), CoSENT and cosine-similarity losses for scored pairs, and
  Matryoshka's sum over truncated, re-normalised prefixes — the formulas of sentence-transformers, in Keras ops (so
  TensorFlow and JAX both run them).
- `grad_cache`: GradCache, the exact gradient of such a loss over a batch whose encoder activations do not fit at
  once (the encoder run a chunk of rows at a time, the loss's gradient on the embeddings cached).
- `matryoshka`: which Matryoshka widths a directory may serve (`embed(..., dim=K)`, the exports, the server's
  `dimensions`) and the cut itself.
- `ranking_record`: the loss a reranker was trained with, as its directory records it (ranking_training.json), read
  by the runs there and by the converter that carries it.
- `metrics`: accuracy / precision / recall@k, MRR@k, nDCG@k and MAP@k over a corpus, as sentence-transformers'
  `InformationRetrievalEvaluator` computes them, from a score matrix, from the embeddings a block at a time, or
  from ranked lists of ids.
- `bm25`: BM25 over a corpus (bm25s, the `retrieval` extra), the classical first stage and anchor.
- `run_files`: rankings in TREC's run format, read strictly and written atomically (a first stage's candidates for
  a reranker's evaluation, and the form other retrieval tools read).

docs/retrieval.md says what each is for; tests/official_albert/retrieval compares both with sentence-transformers.
"""
