"""The manifests beside a tokenized corpus' shards (`data_prep.tokenize_corpus`): what vocabulary made them.

Each shard `tokens-*` has a `<shard>.manifest.json` with the SentencePiece model's vocabulary facts (size and the
special ids), its SHA-256 and the tokenization settings. The dynamic pretraining pipeline reads them to size and
check the model before a step; they must agree across shards (also the model's SHA-256 where recorded:
`one_spm_sha256`, which the pretraining task applies to the static records' stats too).
"""

from __future__ import annotations

import json
from typing import Dict, Iterable, Optional, Sequence, Tuple

from official_albert import file_io
from official_albert.training.vocabulary import VocabularyError

MANIFEST_SUFFIX = ".manifest.json"


def read_vocab_facts(files: Sequence[str]) -> Dict[str, object]:
  """The vocabulary facts and long-line policy in the `.manifest.json` of every shard (they must agree), with the
  shards' summed `documents` and `tokens`.

  Raises:
    ValueError: a shard has no manifest (not made by `data_prep.tokenize_corpus`, e.g. static records given to
      the dynamic pipeline) or the shards disagree; the message names the file and the fix.
  """
  facts: Optional[Dict[str, object]] = None
  first = None
  documents = tokens = 0
  for path in files:
    mpath = path + MANIFEST_SUFFIX
    if not file_io.exists(mpath):
      raise ValueError(f"{path}: no {MANIFEST_SUFFIX} beside it, so it is not a shard of `python -m "
                       "data_prep.tokenize_corpus`. task.*_data.dynamic_masking=true reads tokenized corpora: point "
                       "input_path at <output_dir>/tokens-* of that tool, or set dynamic_masking=false for records "
                       "of create_pretraining_data.")
    with file_io.open_file(mpath, "r") as f:
      manifest = json.load(f)
    vocab = manifest.get("vocab")
    if not isinstance(vocab, dict):
      raise ValueError(f"{path}: its manifest {mpath} has no 'vocab' entry, so it is not a shard of `python -m "
                       "data_prep.tokenize_corpus` (static records of create_pretraining_data?): point input_path at "
                       "<output_dir>/tokens-* of that tool, or set dynamic_masking=false.")
    vocab = {k: int(vocab[k]) for k in ("vocab_size", "cls_id", "sep_id", "mask_id")}
    vocab["long_line_policy"] = manifest.get("tokenization", {}).get("long_line_policy", "split")
    documents += int(manifest.get("counts", {}).get("documents", 0))
    tokens += int(manifest.get("counts", {}).get("tokens", 0))
    if facts is None:
      facts, first = vocab, path
    elif vocab != facts:
      raise ValueError(f"{path} was tokenized with another vocabulary ({vocab}) than {first} ({facts}); tokenize "
                       "the whole corpus with one SentencePiece model.")
  assert facts is not None
  return dict(facts, documents=documents, tokens=tokens)


def one_spm_sha256(recorded: Iterable[Tuple[str, Optional[str]]]) -> Optional[Tuple[str, str]]:
  """(SHA-256, the first file recording it) of the SentencePiece model that the files record (pairs of file and
  recorded hash, None where a file records none); None when no file records one (older files: not checked).

  Raises:
    VocabularyError: (a ValueError) two files record different hashes, naming one file of each and both hashes:
      their ids are pieces of two vocabularies, which one model cannot learn as one.
  """
  found: Optional[Tuple[str, str]] = None
  for path, sha in recorded:
    if not sha:
      continue
    if found is None:
      found = (sha, path)
    elif sha != found[0]:
      raise VocabularyError(f"The pretraining input was made with two SentencePiece models: {found[1]} with SHA-256 "
                            f"{found[0]} but {path} with {sha}, so the same id is another piece in each. Make the "
                            "whole input with one SentencePiece model (the one given as task.spm_model_file).")
  return found


def read_spm_sha256(files: Sequence[str]) -> Optional[Tuple[str, str]]:
  """(SHA-256, first shard recording it) of the SentencePiece model the shards were tokenized with (their manifests'
  `spm_model_sha256`, `one_spm_sha256`); None when no manifest records one (shards of an older tokenize_corpus).

  Raises:
    VocabularyError: shards record different models (`one_spm_sha256`).
  """

  def recorded():
    for path in files:
      with file_io.open_file(path + MANIFEST_SUFFIX, "r") as f:
        yield path, json.load(f).get("spm_model_sha256")

  return one_spm_sha256(recorded())
