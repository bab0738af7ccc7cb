"""The data every variant of a study shares, built once in `<output_dir>/data` and reused by every run.

1. corpus — the demo's documentation corpus (`data_prep.corpus`, no download) or `--corpus` files (UTF-8, one
   sentence per line, a blank line — whitespace-only counts — between documents); every `heldout_every`-th document
   is held out, never trained on;
2. spm — one SentencePiece vocabulary from the training documents;
3. records — `create_pretraining_data` on the training documents: SOP records (in-document order swaps), and NSP
   records (`--random_next_sentence`: B from a random document) when a variant trains NSP; on the held-out documents
   both kinds, always, so that every model is scored on both tasks;
4. balance — every held-out set is subsampled (seeded) to 50/50 labels and capped at `heldout_max` examples, so 0.5
   is chance for every model whatever its bias; with `balance_train` the training records are too. At 32 pieces
   BERT's NSP rule gives a one-sentence chunk a random-document partner every time, so NSP records come out ~65%
   label 1 (the paper's 512 pieces rarely have one-sentence chunks). Every set's label counts, before and after, are
   in `data.json` and in results.json.

`data.json` is written last (atomically) with a fingerprint of the settings and the corpus: a rerun with the same
ones reuses everything; another one rebuilds. Data built for more training kinds than a study needs (table5's NSP and
SOP, for a study that trains SOP only) is reused as it is: each kind's records are made alone, from the same corpus,
vocabulary and seed, so the SOP records of an NSP + SOP build are those a SOP-only build writes.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
from typing import Any, Dict, List, Optional, Sequence

import numpy as np
import sentencepiece as spm
import tensorflow as tf

from data_prep import corpus
from experiments import study
from official_albert import file_io

logger = logging.getLogger(__name__)

DATA_FILE = "data.json"


# A document break: a blank line, whitespace-only ones included, as `create_pretraining_data` reads its input
# (`data_prep.pretraining_shards.iter_documents`); "\n\n" alone merged documents separated by a line of spaces.
DOCUMENT_BREAK = re.compile(r"\n\s*\n")
# A whitespace-only line that is not empty: where that rule and the "\n\n" one split a corpus differently.
_SPACES_LINE = re.compile(r"^[^\S\n]+$", re.M)


def split_documents(text: str, heldout_every: int) -> Dict[str, List[str]]:
  """{"train": documents, "heldout": every `heldout_every`-th document}; documents are separated by blank lines
  (`DOCUMENT_BREAK`)."""
  text = "\n" + text.replace("\r\n", "\n") + "\n"  # (a blank line at either end is a break too)
  documents = [d.strip("\n") for d in DOCUMENT_BREAK.split(text) if d.strip()]
  heldout = documents[heldout_every - 1::heldout_every]
  train = [d for i, d in enumerate(documents) if (i + 1) % heldout_every]
  if len(heldout) < 2 or len(train) < 2:
    raise ValueError(f"The corpus has {len(documents)} documents (blank-line separated): too few to hold every "
                     f"{heldout_every}th out. Give a corpus with one sentence per line and a blank line between "
                     "documents.")
  return {"train": train, "heldout": heldout}


def corpus_text(corpus_files: Sequence[str], settings) -> str:
  """The `--corpus` files joined (documents of different files never merge), or the demo's corpus."""
  if not corpus_files:
    return corpus.python_docs_corpus_text(max_bytes=settings.corpus_bytes, packages=settings.packages)
  parts = []
  for path in corpus_files:
    try:
      with file_io.open_file(path, "r") as f:
        parts.append(f.read().strip("\n"))
    except UnicodeDecodeError:
      raise ValueError(_not_utf8(path)) from None
  return "\n\n".join(parts) + "\n"


def _not_utf8(path: str) -> str:
  """The error message of a `--corpus` file that is not UTF-8: the file, the line and the byte, and the fix."""
  with file_io.open_file(path, "rb") as f:
    raw = f.read()
  try:
    raw.decode("utf-8")
    where = ""
  except UnicodeDecodeError as error:
    line = raw[:error.start].count(b"\n") + 1
    where = f", line {line} (byte {error.start}: {raw[error.start:error.start + 4]!r}, {error.reason})"
  return (f"--corpus file {path}{where} is not UTF-8 text. Convert it to UTF-8 (e.g. `iconv -f latin1 -t utf-8 "
          f"{path} > {path}.utf8`, with the file's real encoding after -f) and pass the converted file.")


def label_counts(files: Sequence[str]) -> Dict[str, Any]:
  """{"examples", "label_1", "label_1_fraction"} of pretraining records (their `next_sentence_labels`)."""
  labels = read_labels(files)
  return {"examples": int(labels.size), "label_1": int(labels.sum()),
          "label_1_fraction": float(labels.mean()) if labels.size else 0.0}


def read_labels(files: Sequence[str]) -> np.ndarray:
  spec = {"next_sentence_labels": tf.io.FixedLenFeature([1], tf.int64)}
  dataset = tf.data.TFRecordDataset(list(files)).batch(4096).map(lambda r: tf.io.parse_example(r, spec))
  return np.concatenate([b["next_sentence_labels"].numpy().reshape(-1) for b in dataset] or [np.zeros(0, np.int64)])


def balance_records(files: Sequence[str], output_file: str, seed: int, cap: Optional[int] = None) -> Dict[str, Any]:
  """Writes the records of `files` with the majority label subsampled to the minority's count (seeded; the kept
  records stay in their order), at most `cap` in all (half per label). Returns the label counts before and after."""
  labels = read_labels(files)
  rng = np.random.default_rng(seed)
  per_label = int(min((labels == 0).sum(), (labels == 1).sum()))
  if cap:
    per_label = min(per_label, cap // 2)
  if per_label == 0:
    raise ValueError(f"{list(files)}: the records hold one label only ({labels.size} records): nothing to balance.")
  keep = np.zeros(labels.size, bool)
  for label in (0, 1):
    index = np.flatnonzero(labels == label)
    keep[rng.choice(index, per_label, replace=False)] = True
  with file_io.atomic_path(output_file) as tmp:
    with tf.io.TFRecordWriter(tmp) as writer:
      for record, kept in zip(tf.data.TFRecordDataset(list(files)).as_numpy_iterator(), keep):
        if kept:
          writer.write(record)
  return {"before": {"examples": int(labels.size), "label_1": int(labels.sum()),
                     "label_1_fraction": float(labels.mean())},
          "after": {"examples": 2 * per_label, "label_1": per_label, "label_1_fraction": 0.5}}


def _fingerprint(settings, text: str, objectives: Sequence[str]) -> str:
  key = {"settings": settings.data_key(), "objectives": sorted(set(objectives)),
         "corpus_sha256": hashlib.sha256(text.encode("utf-8")).hexdigest()}
  if _SPACES_LINE.search(text.replace("\r\n", "\n")):
    # Split otherwise since whitespace-only lines end documents: data built before is not reused. Only then, so
    # that every other corpus keeps its fingerprint (and its finished runs).
    key["document_break"] = DOCUMENT_BREAK.pattern
  return hashlib.sha256(json.dumps(key, sort_keys=True, default=str).encode()).hexdigest()


def _make_records(data_dir: str, text_path: str, spm_model: str, name: str, settings, nsp: bool,
                  dupe_factor: int) -> Dict[str, Any]:
  stats = study.make_records(data_dir, text_path, spm_model, name, settings.seq_length,
                             settings.max_predictions_per_seq, settings.seed, dupe_factor,
                             random_next_sentence=nsp, folder="records")
  return {"files": list(stats["output_files"]), "records": int(stats["records"])}


# Long because: the shared data's stages in the order they run (corpus, vocabulary, records, balancing, the marker);
# each is a call, and they share the paths made at the top.
def prepare_data(output_dir: str, settings, corpus_files: Sequence[str] = (),
                 objectives: Sequence[str] = ("sop",)) -> Dict[str, Any]:
  """Builds (or reuses) the shared data; returns `data.json`'s content.

  Returns:
    {"fingerprint", "spm_model", "vocab_size", "corpus": counts, "train": {"sop"|"nsp": {"pattern", "records",
    "labels"}}, "heldout": {"sop", "nsp": the same}} — `pattern` is what a data config's input_path takes.
  """
  data_dir = os.path.join(output_dir, "data")
  marker = os.path.join(data_dir, DATA_FILE)
  text = corpus_text(corpus_files, settings)
  train_kinds = sorted({"nsp" if o == "nsp" else "sop" for o in objectives})
  fingerprint = _fingerprint(settings, text, train_kinds)
  if file_io.exists(marker):
    with file_io.open_file(marker, "r") as f:
      done = json.load(f)
    built_kinds = sorted(done.get("train", {}))
    if done.get("fingerprint") == fingerprint or (
        set(train_kinds) <= set(built_kinds) and done.get("fingerprint") == _fingerprint(settings, text, built_kinds)):
      logger.info("ablations: reusing the shared data in %s", data_dir)
      return done
    logger.warning("ablations: the settings or the corpus changed since %s was built: rebuilding it", data_dir)
  split = split_documents(text, settings.heldout_every)
  paths = {}
  for part, documents in split.items():
    paths[part] = os.path.join(data_dir, "corpus", f"{part}.txt")
    file_io.atomic_write_text(paths[part], "\n\n".join(documents) + "\n")
  spm_model = study.make_vocab(data_dir, paths["train"], settings.vocab_size, settings.seed)
  out: Dict[str, Any] = {
      "fingerprint": fingerprint, "spm_model": spm_model,
      "vocab_size": spm.SentencePieceProcessor(model_file=spm_model).GetPieceSize(),
      "corpus": {"files": list(corpus_files) or ["(the demo's documentation corpus)"],
                 "bytes": len(text.encode("utf-8")), "train_documents": len(split["train"]),
                 "heldout_documents": len(split["heldout"])},
      "train": {}, "heldout": {}}
  for part, kinds, dupe in (("train", train_kinds, settings.dupe_factor), ("heldout", ("nsp", "sop"), 1)):
    for kind in kinds:
      made = _make_records(data_dir, paths[part], spm_model, f"{kind}_{part}", settings, kind == "nsp", dupe)
      entry: Dict[str, Any] = {"records": made["records"], "labels": label_counts(made["files"]),
                               "pattern": ",".join(made["files"])}
      if part == "heldout" or settings.balance_train:
        balanced = os.path.join(data_dir, "records", f"{kind}_{part}.balanced.tfrecord")
        cap = settings.heldout_max if part == "heldout" else None
        entry["balancing"] = balance_records(made["files"], balanced, settings.seed, cap)
        entry.update(pattern=balanced, records=entry["balancing"]["after"]["examples"],
                     labels=entry["balancing"]["after"])
      out[part][kind] = entry
      logger.info("ablations: %s %s records: %d (label 1: %.3f)", kind, part, entry["records"],
                  entry["labels"]["label_1_fraction"])
  file_io.atomic_write_json(marker, out)
  return out
