"""Loads a folder with `SentenceTransformer(folder)` as a user would (no overrides) and encodes texts: the oracle of
the converted-embedder test (tests/tasks/test_text_embedding.py).

Run in its own process with torch only (USE_TF=0):
  python sentence_transformers_encode.py FOLDER TEXTS.json OUT.npz [TRUNCATE_DIM]
Writes `embeddings` (encode(texts)), `truncated` (the same with truncate_dim, when given) and `modules` (the
module classes, in order) and `use_fast` (whether the loaded tokenizer is transformers' fast one).
"""

import json
import sys

import numpy as np
from sentence_transformers import SentenceTransformer


def main(folder, texts_path, out_path, truncate_dim=None):
  with open(texts_path, encoding="utf-8") as f:
    texts = json.load(f)
  model = SentenceTransformer(folder, device="cpu")
  out = {"embeddings": model.encode(texts, batch_size=8, convert_to_numpy=True),
         "modules": np.array([type(m).__name__ for m in model]), "use_fast": np.array(model[0].tokenizer.is_fast)}
  if truncate_dim:
    truncated = SentenceTransformer(folder, device="cpu", truncate_dim=int(truncate_dim))
    out["truncated"] = truncated.encode(texts, batch_size=8, convert_to_numpy=True)
  np.savez(out_path, **out)


if __name__ == "__main__":
  main(*sys.argv[1:])
