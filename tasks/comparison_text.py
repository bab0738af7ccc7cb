"""Texts as the tokenizer sees them (`comparison_text`): whether two texts are one model input, without a tokenizer
call per row.

The row tasks refuse a hard negative that is its row's positive and drop a ranking negative equal to its positive by
it (`tasks.embedding.data`, `tasks.ranking.data`), and the text and row tasks count evaluation rows that are training
rows by it (`tasks.text.repeated_rows`, `tasks.overlap`): "Great film" and "great film " are one input to a
lower-casing tokenizer. Below the task packages, so that the text tasks need not import the embedding task's package.
"""

from __future__ import annotations

import functools
from typing import Callable, Mapping, Optional, Sequence, Tuple

import sentencepiece as spm

from official_albert import file_io
from official_albert.tokenization import preprocess_text
from official_albert.tokenization import spm_model
from official_albert.tokenization.tokenizer import special_chunks


def comparison_text(text: str, tokenizer_options: Optional[Mapping[str, object]] = None) -> str:
  """`text` as the tokenizer sees it, to tell whether two texts are one model input without a tokenizer call per row.

  FullTokenizer's steps in its order for the run's `tokenizer_mode` ("hf" unless `tokenizer_options` says
  otherwise): in "hf", special tokens written in the text (`[MASK]`, ...) split out after per-character
  lower-casing (so `[mask]` is no `[MASK]`) and `[MASK]`'s left strip (the reference modes keep the text whole and
  do not normalise quotes); then each other chunk through `preprocess_text` with the run's `do_lower_case` /
  `keep_accents` / `remove_space` (FullTokenizer's defaults, True / False / True, where `tokenizer_options` has
  none) and SentencePiece's normaliser last: the rule of the run's model (`tokenizer_options["spm_model_file"]`,
  `RowTask.comparison_options`), nmt_nfkc without one (`_sentencepiece_normalizer`; it comes after the
  lower-casing: "𝐇" stays "H"). "Café" and "CAFE\u0301 " are one text for a lower-casing, accent-stripping
  tokenizer; "a b" and "a\u200bb" under nmt_nfkc (a zero-width space, a BOM, a control character, a run of spaces
  even with remove_space False: the normaliser makes them one space or nothing) are one text, as in the ids (two
  under an identity-rule model, as its ids are); "ß" stays apart from "ss", as in the ids; `'' x ''` and `" x "` are
  one text in "hf" mode only, as in the ids.

  A reader comparing many texts under one set of options uses `ComparisonKeys` (the options read once, a text
  repeated on nearby rows normalised once).
  """
  options = _resolved(tokenizer_options)
  return _compared(text, options, _sentencepiece_normalizer(options[4], options[5]).normalize)


class ComparisonKeys:
  """`comparison_text` under one run's options, for one read: `keys(text)` is `comparison_text(text, options)`.

  Why: a row reader compares each text several times (a ranking negative against its positive, its row's other
  negatives, then its query's positives in other rows), and at ~10 µs a text, recomputing the key per comparison cost
  minutes per million rows. The options (and the model file's version: one stat) are read once here, and the keys of
  the last `memo_size` distinct texts are kept (a query or positive repeated on nearby rows, as mined triplets write
  them, is normalised once and its rows share one key string). The memo belongs to this object, not the process, so
  it is freed with the read. A key equal to its text is the text itself (no second copy kept on the row).
  """

  def __init__(self, tokenizer_options: Optional[Mapping[str, object]] = None, memo_size: int = 1 << 16):
    self.options = options = _resolved(tokenizer_options)
    normalize = _sentencepiece_normalizer(options[4], options[5]).normalize

    def key(text: str) -> str:
      compared = _compared(text, options, normalize)
      return text if compared == text else compared

    self._key = functools.lru_cache(maxsize=memo_size)(key)  # (a closure, not a bound method: no cycle to collect)

  def __call__(self, text: str) -> str:
    return self._key(text)

  def row_keys(self, texts: Sequence[Optional[str]], stored: Optional[tuple] = None) -> tuple:
    """(these options, the key of each of a row's `texts` in order, None for None): `stored` itself where a reader
    kept it on the row under these options for as many texts (the checks after a read reuse the read's keys), else
    computed. A row whose texts were changed after its keys were kept must have them reset (None)."""
    if stored is not None and len(stored) == len(texts) + 1 and stored[0] == self.options:
      return stored
    return (self.options, *(None if text is None else self(text) for text in texts))


# (do_lower_case, keep_accents, tokenizer_mode, remove_space, SentencePiece model file, its version): what a key
# depends on, so rows' stored keys are reused only under the options they were made with.
_Options = Tuple[object, object, object, object, str, Optional[Tuple[int, int, int]]]


def _resolved(tokenizer_options: Optional[Mapping[str, object]]) -> _Options:
  options = tokenizer_options or {}
  model = str(options.get("spm_model_file") or "")
  version = options["spm_model_version"] if "spm_model_version" in options else file_io.local_file_version(model)
  return (options.get("do_lower_case", True), options.get("keep_accents", False), options.get("tokenizer_mode", "hf"),
          options.get("remove_space", True), model, version)


def _compared(text: str, options: _Options, normalize: Callable[[str], str]) -> str:
  lower, keep_accents, mode, remove_space = options[:4]
  chunks = [chunk if special else normalize(preprocess_text(
      chunk, remove_space=remove_space, lower=lower, keep_accents=keep_accents, normalize_quotes=mode == "hf"))
            for special, chunk in special_chunks(text, lower, mode)]
  return "\x00".join(c for c in chunks if c)  # (a special token is its own chunk, as its own id)


@functools.lru_cache(maxsize=8)
def _sentencepiece_normalizer(spm_model_file: str = "",
                              version: Optional[Tuple[int, int, int]] = None) -> spm.SentencePieceNormalizer:
  """The normaliser `spm_model_file` applies before it cuts pieces: its own rule and whitespace handling, without the
  dummy prefix and "▁" escapes (they change no comparison). Why the model's own: a model trained with another
  normalisation rule (identity, nmt_nfkc_cf, a rule TSV) gives two ids where nmt_nfkc sees one text ("a\u200bb" and
  "a b" under identity), so under nmt_nfkc a valid hard negative was refused and a ranking negative dropped.

  Without a model: every ALBERT SentencePiece model's, nmt_nfkc (NFKC, plus zero-width and other space-like
  characters to a space and C0 controls removed) with runs of spaces collapsed (the models' `remove_extra_whitespaces`,
  whatever the tokenizer's `remove_space`); texts that differ only there give the same ids, so a negative equal to its
  positive would be kept and labelled both 1 and 0.

  `version` (`file_io.local_file_version`; `RowTask.comparison_options` reads it once per read, not per row) only
  keys the cache: a model rewritten at the same path is read again (a notebook that retrains its model in place)."""
  del version
  if spm_model_file:
    with file_io.open_file(spm_model_file, "rb") as f:  # (gs:// too: the tokenizer reads it the same way)
      proto = f.read()
    return spm.SentencePieceNormalizer(model_proto=proto, add_dummy_prefix=False, escape_whitespaces=False,
                                       remove_extra_whitespaces=spm_model.removes_extra_whitespaces(proto))
  return spm.SentencePieceNormalizer(rule_name="nmt_nfkc", add_dummy_prefix=False, escape_whitespaces=False,
                                     remove_extra_whitespaces=True)
