"""Trains an ALBERT SentencePiece model with the reference recipe (reference §2.4).

The input lines are first normalised with the tokenizer's own preprocessing (`FullTokenizer.preprocess`: whitespace
collapse, NFKD + accent stripping, lower-casing, HF quote normalisation in the default mode), so the vocabulary is
learnt on exactly the strings the tokenizer will later feed to SentencePiece. `--user_defined_symbols` are
normalised the same way ("[URL]" becomes "[url]", "Café" "cafe", as in the text), and a symbol with whitespace is
refused: either would otherwise be a piece that is never produced. Lines longer than `--max_sentence_length` bytes
(SentencePiece's default, 4192) are left out by SentencePiece; they are counted and warned about, and a corpus of
nothing else is an error. The result is checked to have <pad>=0 <unk>=1 [CLS]=2 [SEP]=3 [MASK]=4.

`--mode` must be the `--tokenizer_mode` of the data tools: "hf" is the default of every tool of the recipe
(train_sentencepiece, create_pretraining_data, create_finetuning_data, export_saved_model, the SQuAD task), so a
vocabulary trained here sees the same strings as the data made from it (tests/data_prep/test_tokenizer_mode_default.py
fails when one default drifts).

Usage:
  python -m data_prep.train_sentencepiece --input=a.txt,b.txt --model_prefix=/tmp/30k-clean --vocab_size=30000
  python -m data_prep.train_sentencepiece --input='corpus/*.txt' --model_prefix=/tmp/30k-clean  # patterns too
"""

from __future__ import annotations

import logging
import os
import tempfile
from typing import Dict, List, Optional, Sequence
import unicodedata

from absl import flags
import sentencepiece as spm
from sentencepiece import sentencepiece_model_pb2

from data_prep import text_lines
from official_albert import cli
from official_albert import file_io
from official_albert import tokenization

logger = logging.getLogger(__name__)

DEFAULT_USER_DEFINED_SYMBOLS = ("(", ")", '"', "-", ".", "\u2013", "\u00a3", "\u20ac")  # ( ) " - . – £ €
DEFAULT_CONTROL_SYMBOLS = (tokenization.CLS, tokenization.SEP, tokenization.MASK)
DEFAULT_MAX_SENTENCE_LENGTH = 4192  # SentencePiece's default (bytes), so the reference recipe's


class _Normaliser:
  """`FullTokenizer.preprocess` without needing a model (the tokenizer's chunk preprocessing)."""

  def __init__(self, do_lower_case: bool, mode: str):
    self.do_lower_case = do_lower_case
    self.mode = mode

  def __call__(self, line: str) -> str:
    if self.mode == "hf" and self.do_lower_case:
      line = tokenization.lower_per_char(line)
    return tokenization.preprocess_text(line, remove_space=True, lower=self.do_lower_case,
                                        normalize_quotes=self.mode == "hf")


def preprocess_corpus(input_files: Sequence[str], output_file: str, do_lower_case: bool = True,
                      mode: str = "hf", max_sentence_length: Optional[int] = None) -> Dict[str, int]:
  """Writes the normalised non-empty lines of `input_files` to `output_file`; returns line counts.

  With `max_sentence_length`, the written lines longer than that many UTF-8 bytes are counted in
  `lines_too_long`: SentencePiece's trainer skips them without a word (its log is silenced), so the caller reports
  them.
  """
  normalise = _Normaliser(do_lower_case, mode)
  stats = {"lines_in": 0, "lines_out": 0, "empty_lines": 0}
  if max_sentence_length is not None:
    stats["lines_too_long"] = 0
  with open(output_file, "w", encoding="utf-8") as out:
    for path in input_files:
      for _, text in text_lines.iter_lines(path, replace_flag=None):
        stats["lines_in"] += 1
        text = normalise(text)
        if not text:
          stats["empty_lines"] += 1  # blank lines are document separators, not training sentences
          continue
        out.write(text + "\n")
        stats["lines_out"] += 1
        if max_sentence_length is not None and len(text.encode("utf-8")) > max_sentence_length:
          stats["lines_too_long"] += 1  # the trainer's own test: bytes > max_sentence_length
  return stats


def normalise_user_defined_symbols(symbols: Sequence[str], do_lower_case: bool = True, mode: str = "hf") -> List[str]:
  """`symbols` as the training text will spell them; repeats (after normalisation) removed, order kept.

  A user-defined symbol is matched against the normalised text, so "[URL]" must be stored as "[url]" and "Café" as
  "cafe" when the text is lower-cased and accent-stripped, or the piece could never be produced. NFKC as well: the
  model's normaliser (nmt_nfkc) recomposes what the preprocessing's NFKD decomposed.

  Raises:
    ValueError: a symbol holds whitespace (SentencePiece sees spaces as "▁", so it would never match) or is empty
      after normalisation.
  """
  normalise = _Normaliser(do_lower_case, mode)
  out: List[str] = []
  for symbol in symbols:
    if not symbol or any(ch.isspace() for ch in symbol):
      raise ValueError(f"--user_defined_symbols: {symbol!r} is empty or contains whitespace; a symbol is one word "
                       "(SentencePiece sees spaces as '\u2581', so it would never be produced). Give it without "
                       "spaces.")
    normalised = unicodedata.normalize("NFKC", normalise(symbol))
    if not normalised:
      raise ValueError(f"--user_defined_symbols: {symbol!r} is empty after the text's normalisation "
                       f"(do_lower_case={do_lower_case}, mode={mode}); remove it.")
    if normalised != symbol:
      logger.info("train_sentencepiece: user-defined symbol %r is learnt as %r, as the text is normalised.", symbol,
                  normalised)
    if normalised not in out:
      out.append(normalised)
  return out


def _canonicalise_model(model_file: str, prefix_name: str, input_files: Sequence[str]) -> None:
  """Replaces the temporary paths that spm records in trainer_spec, so the same inputs give the same bytes."""
  proto = sentencepiece_model_pb2.ModelProto()
  with open(model_file, "rb") as f:
    proto.ParseFromString(f.read())
  del proto.trainer_spec.input[:]
  proto.trainer_spec.input.extend(os.path.basename(p) for p in input_files)
  proto.trainer_spec.model_prefix = prefix_name
  with open(model_file, "wb") as f:
    f.write(proto.SerializeToString(deterministic=True))


def expand_input_files(entries: Sequence[str]) -> List[str]:
  """`--input` entries → files, as the data tools read `--input_file` (recipe §2: `'corpus/*.txt'`): an existing
  path is read as written (`file_io.literal_path`: `data [v1].txt` is no pattern), anything else is a glob pattern
  whose matches are read; a file named twice, under any spelling (`a.txt,./a.txt`), is read once (it would
  weigh double in the vocabulary); a folder is refused by name. The files come back sorted by their absolute path
  as named: SentencePiece's pieces depend on the order of its input lines, so `--input=a,b` and
  `--input=b,a` gave two vocabularies with 209 of 2,000 ids apart.

  Raises:
    ValueError: no entry given; an entry or a match is a folder.
    FileNotFoundError: an entry is neither an existing file nor a pattern matching one (it is named).
  """
  entries = [e.strip() for e in entries if e and e.strip()]
  if not entries:
    raise ValueError("train_sentencepiece: no input files given.")
  files: List[str] = []
  seen = set()
  for entry in entries:
    matched = [entry] if file_io.literal_path(entry) else file_io.glob_visible(entry)[0]  # (no dotfiles, as a shell)
    if not matched:
      raise FileNotFoundError(f"train_sentencepiece: input file {entry} does not exist"
                              f"{' and matches no file' if any(c in entry for c in '*?[') else ''}.")
    for path in matched:
      if file_io.isdir(path):
        raise ValueError(f"train_sentencepiece: --input {path} is a directory, not a text file (give its files, "
                         f"e.g. '{path.rstrip('/')}/*.txt').")
      if file_io.location_key(path) not in seen:
        seen.add(file_io.location_key(path))
        files.append(path)
  return sorted(files, key=os.path.abspath)  # (as named: a symlink's hashed target would order a cache's files)


def train_sentencepiece(input_files: Sequence[str], model_prefix: str, vocab_size: int = 30000,
                        do_lower_case: bool = True, mode: str = "hf", model_type: str = "unigram",
                        character_coverage: float = 0.99995, input_sentence_size: int = 10_000_000,
                        shuffle_input_sentence: bool = True,
                        user_defined_symbols: Sequence[str] = DEFAULT_USER_DEFINED_SYMBOLS,
                        control_symbols: Sequence[str] = DEFAULT_CONTROL_SYMBOLS, num_threads: int = 1,
                        seed: int = 12345, hard_vocab_limit: bool = True,
                        max_sentence_length: int = DEFAULT_MAX_SENTENCE_LENGTH,
                        extra_options: Optional[Dict[str, object]] = None) -> str:
  """Trains `<model_prefix>.model` / `.vocab` and returns the model path.

  Args:
    input_files: text files (local or gs://), one sentence per line, or glob patterns (`expand_input_files`).
    model_prefix: output prefix (local or gs://).
    vocab_size: pieces in the model (30000 in the reference).
    do_lower_case, mode: the tokenizer settings whose preprocessing is applied to the input first.
    model_type, character_coverage, input_sentence_size, shuffle_input_sentence, user_defined_symbols,
      control_symbols: SentencePiece options; the defaults are the reference recipe. The user-defined symbols are
      normalised as the text is (`normalise_user_defined_symbols`).
    num_threads: trainer threads. 1 makes the result deterministic (multi-threaded EM sums in varying order).
    seed: SentencePiece's random generator seed (sentence sampling/shuffling).
    hard_vocab_limit: False lets a small corpus produce fewer pieces instead of failing.
    max_sentence_length: lines longer than this many UTF-8 bytes (after the preprocessing) are left out of training
      by SentencePiece; they are counted and reported. SentencePiece's default, as in the reference recipe.
    extra_options: further `SentencePieceTrainer.train` keyword arguments (override the above).

  Returns:
    The path of the trained `.model` file, already checked with `tokenization.check_special_tokens`.
  """
  input_files = expand_input_files(input_files)
  for output in (model_prefix + ".model", model_prefix + ".vocab"):  # (an earlier run's, matched by a glob)
    clash = next((path for path in input_files if file_io.same_location(path, output)), None)
    if clash:
      raise ValueError(f"--input matches {clash}, this run's own output (--model_prefix={model_prefix}): narrow the "
                       "pattern to the corpus files, or write the model elsewhere.")
  user_defined_symbols = normalise_user_defined_symbols(user_defined_symbols, do_lower_case, mode)
  max_sentence_length = int((extra_options or {}).get("max_sentence_length", max_sentence_length))
  with tempfile.TemporaryDirectory(prefix="albert_spm_") as tmp:
    corpus = os.path.join(tmp, "normalised.txt")
    stats = preprocess_corpus(input_files, corpus, do_lower_case=do_lower_case, mode=mode,
                              max_sentence_length=max_sentence_length)
    if not stats["lines_out"]:
      raise ValueError(f"train_sentencepiece: {list(input_files)} contain no non-empty lines.")
    too_long = stats["lines_too_long"]
    if too_long == stats["lines_out"]:
      raise ValueError(f"train_sentencepiece: every one of the {too_long} non-empty lines of {list(input_files)} is "
                       f"longer than --max_sentence_length={max_sentence_length} bytes, and SentencePiece skips such "
                       "lines. Put one sentence per line, or raise --max_sentence_length above the longest line.")
    if too_long:
      logger.warning("train_sentencepiece: %d of %d lines are longer than --max_sentence_length=%d bytes; "
                     "SentencePiece leaves them out of training (their text may become <unk>). Put one sentence per "
                     "line, or raise --max_sentence_length.", too_long, stats["lines_out"], max_sentence_length)
    logger.info("train_sentencepiece: %s", stats)
    local_prefix = os.path.join(tmp, "spm")
    options = dict(
        input=corpus, model_prefix=local_prefix, vocab_size=vocab_size, model_type=model_type,
        character_coverage=character_coverage, input_sentence_size=input_sentence_size,
        shuffle_input_sentence=shuffle_input_sentence, pad_id=0, unk_id=1, bos_id=-1, eos_id=-1,
        # Lists, not "a,b" strings: spm parses strings as CSV, where a '"' symbol starts a quoted field.
        control_symbols=list(control_symbols), user_defined_symbols=list(user_defined_symbols),
        num_threads=num_threads, hard_vocab_limit=hard_vocab_limit, minloglevel=2)
    if max_sentence_length != DEFAULT_MAX_SENTENCE_LENGTH:  # set only when needed: a set field changes the bytes
      options["max_sentence_length"] = max_sentence_length
    options.update(extra_options or {})
    spm.set_random_generator_seed(seed)
    spm.SentencePieceTrainer.train(**options)
    _canonicalise_model(local_prefix + ".model", os.path.basename(model_prefix), input_files)
    sp = spm.SentencePieceProcessor(model_file=local_prefix + ".model")
    tokenization.check_special_tokens(sp, name=f"trained model {model_prefix}.model")
    for suffix in (".model", ".vocab"):
      file_io.atomic_copy(local_prefix + suffix, model_prefix + suffix)  # a reader never sees a half-written model
  logger.info("train_sentencepiece: wrote %s.model (%d pieces)", model_prefix, sp.GetPieceSize())
  return model_prefix + ".model"


def define_flags(fv: flags.FlagValues = flags.FLAGS) -> None:
  """Defines the binary's flags on `fv` (never at import time)."""
  flags.DEFINE_list("input", None, "Comma-separated text files or glob patterns (as create_pretraining_data's "
                    "--input_file), one sentence per line.", flag_values=fv)
  flags.DEFINE_string("model_prefix", None, "Output prefix: writes PREFIX.model and PREFIX.vocab.", flag_values=fv)
  flags.DEFINE_integer("vocab_size", 30000, "Number of pieces.", flag_values=fv)
  flags.DEFINE_bool("do_lower_case", True, "Lower-case the text before training (must match the tokenizer).",
                    flag_values=fv)
  flags.DEFINE_enum("mode", "hf", tokenization.MODES, "Tokenizer mode whose preprocessing is applied; give the data "
                    "tools the same --tokenizer_mode (hf is the default of all of them).", flag_values=fv)
  flags.DEFINE_string("model_type", "unigram", "SentencePiece model type.", flag_values=fv)
  flags.DEFINE_float("character_coverage", 0.99995, "SentencePiece character_coverage.", flag_values=fv)
  flags.DEFINE_integer("input_sentence_size", 10_000_000, "Sentences sampled for training.",
                       flag_values=fv)
  flags.DEFINE_bool("shuffle_input_sentence", True, "Shuffle before sampling input_sentence_size sentences.",
                    flag_values=fv)
  # A plain string split at commas, not DEFINE_list: that parses CSV, where the reference's `"` symbol opens a quoted
  # field ('(,),",-,.' failed with "unexpected end of data").
  flags.DEFINE_string("user_defined_symbols", ",".join(DEFAULT_USER_DEFINED_SYMBOLS), "Comma-separated pieces never "
                      "split (a comma cannot be one); empty for none.", flag_values=fv)
  flags.DEFINE_integer("num_threads", 1, "Trainer threads (1 = deterministic).", flag_values=fv)
  flags.DEFINE_integer("seed", 12345, "SentencePiece random seed.", flag_values=fv)
  flags.DEFINE_bool("hard_vocab_limit", True, "false: a corpus too small for --vocab_size pieces gives fewer (a "
                    "model's vocab_size may exceed its pieces: the extra rows are never used) instead of an error.",
                    flag_values=fv)
  flags.DEFINE_integer("max_sentence_length", DEFAULT_MAX_SENTENCE_LENGTH, "Lines longer than this many UTF-8 "
                       "bytes are left out of training by SentencePiece (counted and warned about).", flag_values=fv)
  flags.mark_flags_as_required(["input", "model_prefix"], flag_values=fv)


def main(argv, fv: flags.FlagValues = flags.FLAGS) -> None:
  del argv
  train_sentencepiece(
      input_files=fv.input, model_prefix=fv.model_prefix, vocab_size=fv.vocab_size, do_lower_case=fv.do_lower_case,
      mode=fv.mode, model_type=fv.model_type, character_coverage=fv.character_coverage,
      input_sentence_size=fv.input_sentence_size, shuffle_input_sentence=fv.shuffle_input_sentence,
      user_defined_symbols=user_defined_symbols_of(fv.user_defined_symbols), num_threads=fv.num_threads, seed=fv.seed,
      hard_vocab_limit=fv.hard_vocab_limit, max_sentence_length=fv.max_sentence_length)


def user_defined_symbols_of(value) -> List[str]:
  """The --user_defined_symbols value as symbols: split at commas (a list, as the API takes it, is kept)."""
  if isinstance(value, (list, tuple)):
    return list(value)
  return [s.strip() for s in value.split(",") if s.strip()] if value else []  # (as DEFINE_list: "(, )" is two)


def console_main() -> None:
  """The `albert-train-sentencepiece` console script (pyproject.toml)."""
  cli.launch(define_flags, main)


if __name__ == "__main__":
  console_main()
