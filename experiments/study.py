"""The study kit's shared stage: the demo corpus → a SentencePiece vocabulary → pretraining records.

The demo and the research projects (`experiments/projects/`) pretrain on the same data, made the same way; they
used to share it through the demo's own functions, so a project depended on the demo (issue 45). Here each step takes
the numbers it needs as arguments, so any study can call it with its own settings:

- `make_corpus`: the Python documentation corpus (`data_prep.corpus`), split into a training part and a held-out part
  (every `heldout_every`-th document), written as `<output_dir>/corpus/{train,heldout}.txt`;
- `make_vocab`: a SentencePiece unigram model trained on the training part (`<output_dir>/spm/spiece.model`);
- `make_records`: pretraining TFRecords (n-gram masking + in-document SOP, `data_prep.create_pretraining_data`)
  under `<output_dir>/data/`.

Seeded and single-threaded, so the same installed packages and seed give the same bytes.
"""

from __future__ import annotations

import os
from typing import Any, Dict, Optional, Sequence, Tuple

from data_prep import corpus
from data_prep import create_pretraining_data as cpd
from data_prep import pretraining_instances as pi
from data_prep import train_sentencepiece
from official_albert import file_io


def make_corpus(output_dir: str, corpus_bytes: Optional[int], packages: Sequence[str] = (),
                heldout_every: int = 20) -> Tuple[str, str, Dict[str, int]]:
  """Writes train.txt and heldout.txt (documents separated by blank lines); returns their paths and counts.

  Args:
    corpus_bytes: the corpus' size cap (None: all of it).
    packages: installed packages whose docstrings follow the standard library's (`data_prep.corpus.DEMO_PACKAGES`).
    heldout_every: every n-th document is held out (never trained on: the held-out evaluations and tasks).
  """
  text = corpus.python_docs_corpus_text(max_bytes=corpus_bytes, packages=packages)
  documents = [d for d in text.split("\n\n") if d.strip()]
  heldout = documents[heldout_every - 1::heldout_every]
  train = [d for i, d in enumerate(documents) if (i + 1) % heldout_every]
  if not heldout or not train:
    raise ValueError(f"The corpus has too few documents ({len(documents)}) to hold some out.")
  train_path = os.path.join(output_dir, "corpus", "train.txt")
  heldout_path = os.path.join(output_dir, "corpus", "heldout.txt")
  file_io.atomic_write_text(train_path, "\n\n".join(train) + "\n")
  file_io.atomic_write_text(heldout_path, "\n\n".join(heldout) + "\n")
  counts = {"documents": len(documents), "train_documents": len(train), "heldout_documents": len(heldout),
            "bytes": len(text.encode("utf-8"))}
  return train_path, heldout_path, counts


def make_vocab(output_dir: str, train_path: str, vocab_size: int, seed: int) -> str:
  """A SentencePiece unigram model of `vocab_size` pieces (a soft limit) trained on `train_path`; its path."""
  return train_sentencepiece.train_sentencepiece(
      [train_path], os.path.join(output_dir, "spm", "spiece"), vocab_size=vocab_size,
      hard_vocab_limit=False, seed=seed, num_threads=1)


def make_records(output_dir: str, text_path: str, spm_model: str, name: str, seq_length: int,
                 max_predictions_per_seq: int, seed: int, dupe_factor: int) -> Dict[str, Any]:
  """Pretraining records of `text_path` as `<output_dir>/data/<name>.tfrecord` (shards); create_pretraining_data's
  statistics, `output_files` among them."""
  config = cpd.GenerationConfig(
      input_file=text_path, output_file=os.path.join(output_dir, "data", f"{name}.tfrecord"),
      spm_model_file=spm_model,
      options=pi.InstanceOptions(max_seq_length=seq_length, max_predictions_per_seq=max_predictions_per_seq),
      random_seed=seed, dupe_factor=dupe_factor, num_workers=1, progress=False)
  return cpd.create_pretraining_data(config)
