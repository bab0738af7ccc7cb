"""The early-exit study's topic task (issue 31): which module family does a documentation sentence of the demo's
corpus describe? It was the demo's downstream task until the demo moved to its word-order task; the study keeps it
so that its numbers stay reproducible.
"""

from __future__ import annotations

import os
from typing import Any, Dict, List

import numpy as np

from data_prep import corpus
from experiments.demo_downstream import prose_lines
from experiments.long_range import TOPIC_FAMILIES
from official_albert import file_io


def make_topic_task(output_dir: str, settings) -> Dict[str, Any]:
  """Label 0 = files/OS modules, 1 = networking/email modules (`experiments.long_range.TOPIC_FAMILIES`).

  Sentences are the corpus' prose sentences of each family's documents (`data_prep.corpus.stdlib_documents`); every
  4th document of a family goes to dev, so no dev sentence shares a document with a training sentence. The larger
  family is subsampled (seeded) to the smaller one's size per split. Writes
  `<output_dir>/finetune/data/SST-2/{train,dev}.tsv` (GLUE SST-2 layout: header `sentence<TAB>label`).
  """

  rng = np.random.default_rng(settings.seed)
  per_split: Dict[str, List[List[str]]] = {"train": [], "dev": []}
  for _, modules in TOPIC_FAMILIES:
    split_sentences: Dict[str, List[str]] = {"train": [], "dev": []}
    for i, document in enumerate(corpus.stdlib_documents(modules)):
      split_sentences["dev" if i % 4 == 3 else "train"].extend(prose_lines(document))
    for split, sentences in split_sentences.items():
      per_split[split].append(sorted(set(sentences)))
  data_dir = os.path.join(output_dir, "finetune", "data")
  counts = {}
  for split, classes in per_split.items():
    size = min(len(c) for c in classes)
    if split == "train":
      size = min(size, settings.ft_max_train // 2)
    if size < 20:
      raise ValueError(f"Too few {split} sentences for the topic task: {[len(c) for c in classes]} per family.")
    rows = []
    for label, sentences in enumerate(classes):
      keep = np.sort(rng.choice(len(sentences), size, replace=False))
      rows += [f"{sentences[i]}\t{label}" for i in keep]
    rows = [rows[i] for i in rng.permutation(len(rows))]
    file_io.atomic_write_text(os.path.join(data_dir, "SST-2", f"{split}.tsv"),
                              "sentence\tlabel\n" + "\n".join(rows) + "\n")
    counts[split] = {"examples": len(rows), "per_class": size, "majority_accuracy": 0.5}
  return {"data_dir": data_dir, "counts": counts, "families": [name for name, _ in TOPIC_FAMILIES]}
