"""Labelled tasks made from the demo corpus (`data_prep.corpus`: the Python documentation), no download needed.

The demo, the ablations and the studies each need a task whose labels come from the corpus itself; they share the
pieces here, in one room below them all (issue 45: they used to import them from the demo and from each other):

- `prose_lines`: the corpus lines that are prose sentences (6-30 words, capitalised, ending with '.', mostly letters).
- The word-order task (`make_order_task`, the demo's and the ablations' downstream task): is a documentation sentence
  in its own word order, or are its words shuffled? Word identity alone is at chance by construction.
- Two topic families of standard-library modules (`TOPIC_FAMILIES`: files/OS vs networking/email) and the words that
  mark each (`FAMILY_MARKERS`):
  - `make_topic_task`: which family does a sentence describe (the early-exit study's task, once the demo's);
  - `sentence_pools`: the long-range task's key sentences (one family's) and filler sentences (neither family's).

Every task is seeded and reads the corpus in its fixed order, so the same Python and seed give the same files.
"""

from __future__ import annotations

import os
import re
from typing import Any, Dict, List

import numpy as np

from data_prep import corpus
from official_albert import file_io


def prose_lines(lines: List[str]) -> List[str]:
  """Unique prose sentences among corpus lines: 6-30 words, capitalised, ending with '.'."""
  seen, out = set(), []
  for line in lines:
    line = " ".join(line.split())
    words = line.split()
    if not 6 <= len(words) <= 30 or not line[0].isupper() or not line.endswith("."):
      continue
    if sum(c.isalpha() or c == " " for c in line) < 0.9 * len(line):
      continue  # Code, tables and signatures are not prose.
    if line not in seen:
      seen.add(line)
      out.append(line)
  return out


# --------------------------------------------------------------------------------------------- the word-order task
ORIGINAL, SHUFFLED = "original", "shuffled"


def _words(sentence: str) -> List[str]:
  """The words of a prose sentence, lower-cased, without its final full stop (which would mark the last word)."""
  return sentence.lower().rstrip(".").split()


def _shuffled(words: List[str], rng) -> List[str]:
  """A permutation of `words` that differs from their order (sentences of 6+ words always have one)."""
  while True:
    order = rng.permutation(len(words))
    if any(int(i) != j for j, i in enumerate(order)):
      return [words[i] for i in order]


def _sample_sentences(path: str, rng, limit: int, exclude: frozenset = frozenset()) -> List[str]:
  """Up to `limit` prose sentences of the corpus file at `path` (documents separated by blank lines), seeded; a
  sentence whose `_words` form is in `exclude` is never drawn."""
  with open(path, encoding="utf-8") as f:
    sentences = [s for s in prose_lines(f.read().splitlines()) if " ".join(_words(s)) not in exclude]
  keep = np.sort(rng.choice(len(sentences), min(limit, len(sentences)), replace=False))
  return [sentences[i] for i in keep]


def make_order_task(output_dir: str, train_text: str, heldout_text: str, seed: int, max_train: int,
                    max_dev: int) -> Dict[str, Any]:
  """A task word identity cannot solve: is a documentation sentence in its own word order, or are its words shuffled?

  Every sentence is in the data twice, once in order (label "original") and once with its words permuted (label
  "shuffled"), so the two classes hold the same words: a bag-of-words model, or anything that reads word identity
  alone, is at chance (0.5) by construction, and what tells them apart is the order of the words, which is what a
  masked-LM learns from raw text. Training sentences come from the pretraining corpus' training documents (up to
  `max_train // 2` of them: few labelled examples), dev sentences (up to `max_dev // 2`) from its held-out documents,
  which neither pretraining nor fine-tuning saw: a held-out sentence that is also a line of `train_text` (the same
  docstring sentence in several documents; compared lower-cased, without the final stop) is left out. Sentences are
  lower-cased without their final full stop (else the stop, and the capital of the first word, would mark the order).
  Written as CSV (`text,label`) for text_classification under `<output_dir>/finetune/data/`, each sentence's two rows
  side by side.
  """
  rng = np.random.default_rng(seed)
  data_dir = os.path.join(output_dir, "finetune", "data")
  counts, files = {}, {}
  # The held-out split is by document, and one docstring sentence can sit in several documents: a held-out sentence
  # that is also a line of the pretraining text (hence maybe a training row) is left out of dev.
  with open(train_text, encoding="utf-8") as f:
    seen = frozenset(" ".join(_words(line)) for line in f.read().splitlines() if line.strip())
  for split, path, limit in (("train", train_text, max_train // 2), ("dev", heldout_text, max_dev // 2)):
    sentences = _sample_sentences(path, rng, limit, exclude=seen if split == "dev" else frozenset())
    if len(sentences) < 20:
      raise ValueError(f"Too few prose sentences in {path} for the word-order task: {len(sentences)}.")
    lines = ["text,label"]
    for sentence in sentences:
      words = _words(sentence)
      for text, label in ((" ".join(words), ORIGINAL), (" ".join(_shuffled(words, rng)), SHUFFLED)):
        lines.append(f"\"{text.replace(chr(34), chr(34) * 2)}\",{label}")
    files[split] = os.path.join(data_dir, f"{split}.csv")
    file_io.atomic_write_text(files[split], "\n".join(lines) + "\n")
    counts[split] = {"examples": 2 * len(sentences), "sentences": len(sentences), "majority_accuracy": 0.5}
  return {"data_dir": data_dir, "files": files, "counts": counts, "labels": [ORIGINAL, SHUFFLED],
          "name": "word order of a documentation sentence (original vs shuffled words)"}


# ------------------------------------------------------------------------------------------- the topic families
# Two families of standard-library modules; a sentence's label is the family of the module it documents.
TOPIC_FAMILIES = (
    ("files", ("bz2", "filecmp", "fileinput", "fnmatch", "glob", "gzip", "lzma", "os", "os.path", "pathlib",
               "shutil", "stat", "tarfile", "tempfile", "zipfile", "zipimport")),
    ("networking", ("email", "email.charset", "email.contentmanager", "email.errors", "email.feedparser",
                    "email.generator", "email.header", "email.headerregistry", "email.message", "email.utils",
                    "ftplib", "http", "http.client", "http.cookies", "http.server", "imaplib", "ipaddress",
                    "mailbox", "poplib", "smtplib", "socket", "socketserver", "urllib.parse", "urllib.request",
                    "webbrowser", "wsgiref")),
)

# `sentence_pools(keys="marked")`: the key sentences that name a word of their family (and none of the other's), in
# documents whose filler names none of these words — a sentence alone then decides the label, so the long-range task
# measures the reading and not the classification of an ambiguous docstring sentence (the default `topic` keys:
# 0.85-0.89 alone).
FAMILY_MARKERS = (
    ("archive", "archives", "directories", "directory", "file", "filename", "filenames", "files", "path", "paths"),
    ("email", "host", "hosts", "http", "mail", "message", "messages", "network", "networking", "server", "servers",
     "socket", "sockets", "url", "urls"),
)
KEY_KINDS = ("topic", "marked")
_WORD = re.compile(r"[a-z]+")


def marker_families(sentence: str) -> set:
  """The families (0, 1) whose marker words (`FAMILY_MARKERS`) `sentence` names."""
  words = set(_WORD.findall(sentence.lower()))
  return {label for label, markers in enumerate(FAMILY_MARKERS) if words.intersection(markers)}


def _family_sentences() -> Dict[str, List[List[str]]]:
  """{split: [family 0's prose sentences, family 1's]}: every 4th document of a family goes to dev, so no dev sentence
  shares a document with a training sentence (duplicates kept; the callers dedupe as they need)."""
  per_split: Dict[str, List[List[str]]] = {"train": [[], []], "dev": [[], []]}
  for label, (_, modules) in enumerate(TOPIC_FAMILIES):
    for i, document in enumerate(corpus.stdlib_documents(modules)):
      per_split["dev" if i % 4 == 3 else "train"][label].extend(prose_lines(document))
  return per_split


def make_topic_task(output_dir: str, seed: int, max_train: int) -> Dict[str, Any]:
  """Label 0 = files/OS modules, 1 = networking/email modules (`TOPIC_FAMILIES`).

  Sentences are the corpus' prose sentences of each family's documents (`data_prep.corpus.stdlib_documents`); every
  4th document of a family goes to dev, so no dev sentence shares a document with a training sentence, and a dev
  sentence found in either family's training pool (the same sentence in several documents) is dropped. The larger
  family is subsampled (seeded) to the smaller one's size per split, the training split to at most `max_train // 2`
  per family. Writes `<output_dir>/finetune/data/SST-2/{train,dev}.tsv` (GLUE SST-2 layout: header
  `sentence<TAB>label`).
  """
  rng = np.random.default_rng(seed)
  per_split = {split: [sorted(set(s)) for s in families] for split, families in _family_sentences().items()}
  # The same docstring sentence can sit in several documents: a dev sentence in either family's training pool would
  # be a training row too (as `sentence_pools`, dev keeps none of them).
  trained = set(per_split["train"][0]) | set(per_split["train"][1])
  per_split["dev"] = [[x for x in family if x not in trained] for family in per_split["dev"]]
  data_dir = os.path.join(output_dir, "finetune", "data")
  counts = {}
  for split, classes in per_split.items():
    size = min(len(c) for c in classes)
    if split == "train":
      size = min(size, max_train // 2)
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


def sentence_pools(keys: str = "topic") -> Dict[str, Any]:
  """{"filler": [...], "train": ([family 0], [family 1]), "dev": (...)}: the long-range task's sentences.

  Filler: prose sentences of modules outside both families. Keys: each family's prose sentences, split by document
  as `make_topic_task`'s. The same docstring sentence can sit in several documents: a dev key is never a training key
  or a filler sentence, a training key never a filler sentence, and no key belongs to both families. `keys="marked"`
  keeps the keys that name a word of their family only and the filler that names none (`FAMILY_MARKERS`).
  """
  if keys not in KEY_KINDS:
    raise ValueError(f"keys={keys!r} is not one of {KEY_KINDS}.")
  family_modules = {m for _, modules in TOPIC_FAMILIES for m in modules}
  filler = []
  for document in corpus.stdlib_documents([m for m in corpus.STDLIB_MODULES if m not in family_modules]):
    filler.extend(prose_lines(document))
  pools: Dict[str, Any] = {split: tuple(families) for split, families in _family_sentences().items()}
  filler = sorted(set(filler))
  seen = set(filler)
  for split in ("train", "dev"):
    both = set(pools[split][0]) & set(pools[split][1])  # a sentence of both families would be either label
    pools[split] = tuple(sorted(set(k) - seen - both) for k in pools[split])
    seen |= set(pools[split][0]) | set(pools[split][1]) | both
  if keys == "marked":
    filler = [x for x in filler if not marker_families(x)]
    for split in ("train", "dev"):
      pools[split] = tuple([x for x in pools[split][label] if marker_families(x) == {label}] for label in (0, 1))
  return {"filler": filler, **pools}
