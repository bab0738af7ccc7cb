"""Matryoshka widths at inference: which prefixes of an embedding may be served, and the cut itself.

A model trained with `task.matryoshka_dims` (MatryoshkaLoss) has prefixes that are vectors of their own: the first K
dimensions, re-normalised. `pipelines.embed(..., dim=K)`, the encoder exports (`export_saved_model --dim=K`) and the
server's OpenAI `dimensions` all serve one through these two functions, so they agree: a width the directory was
trained at (its `embedding_training.json`, which the text_embedding task writes and the exports copy) or the full
width; any other is refused naming the trained ones, unless forced.

Numpy only (the exports apply the same cut in their graphs: `AlbertEmbedder(dim=K)`).
"""

from __future__ import annotations

from typing import List, Optional

import numpy as np

from official_albert import model_directory as md


def trained_dims(directory: Optional[str]) -> List[int]:
  """The Matryoshka widths `directory`'s embedding_training.json records ([] when it records none)."""
  record = (md.read_embedding_training_file(directory) if directory else None) or {}
  return [int(d) for d in record.get("matryoshka_dims") or ()]


def check_dim(directory: Optional[str], dim: int, width: int, force: bool, purpose: str = "embed") -> int:
  """`dim` when the directory was trained at that width (or `force`, or it is the full `width`); a model object
  (directory None) is not checked. Raises ValueError starting with `purpose` and naming the trained widths."""
  dim = int(dim)
  if not 0 < dim <= width:
    raise ValueError(f"{purpose}: dim={dim} is not in 1..{width} (the embedding width).")
  if directory is None or force or dim == width:
    return dim
  trained = trained_dims(directory)
  if dim not in trained:
    said = f"was trained at the widths {trained}" if trained else "was not trained with Matryoshka widths"
    raise ValueError(f"{purpose}: {directory} {said} ({md.EMBEDDING_TRAINING_FILE}), not at dim={dim}: its first "
                     f"{dim} dimensions are not trained to stand alone. Pick one of {trained or [width]}, or pass "
                     "force=True.")
  return dim


def truncate(vectors: np.ndarray, dim: int) -> np.ndarray:
  """The first `dim` dimensions of each vector, L2-normalised again (as the Matryoshka loss trained them)."""
  cut = np.asarray(vectors)[..., :dim].astype(np.float32)
  return cut / np.maximum(np.linalg.norm(cut, axis=-1, keepdims=True), 1e-12)
