r"""Adds pieces to an ALBERT SentencePiece model and grows a model's word-embedding table to match.

  python -m data_prep.extend_vocabulary --spm_model_file=30k-clean.model --new_pieces_file=words.txt \
      --output_model_file=out/spiece.model [--model_dir=albert_base --output_model_dir=albert_base_extended]

`--new_pieces_file` holds one word or piece per line (UTF-8; a byte-order mark and CRLF line ends are fine). Each is
normalised as text is on its way to the pieces: the tokenizer's own preprocessing (lower-casing, accent stripping:
`--do_lower_case` / `--keep_accents`, by default as `--model_dir` records them, else ALBERT's uncased defaults),
then the model's normaliser (nmt_nfkc, which e.g. recomposes Hangul syllables that the preprocessing decomposed), so
the piece is the string SentencePiece actually matches; unless it already starts with "▁" or
`--add_word_boundary=false`, it gets the word-boundary mark "▁" prepended, so "covid" becomes the word-initial piece
"▁covid". The pieces are appended to the model proto after the existing ones, so every old id keeps its piece;
pieces the model already has (and repeats within the file, and blank lines) are skipped, counted and logged. Before
the extended model is written, every new whole word is encoded with it and must come out as exactly its new id
(USER_DEFINED pieces); the words that do not are named and nothing is written.

Piece type (`--piece_type`): USER_DEFINED by default. SentencePiece cuts user-defined pieces out of the normalised
text before the unigram segmentation runs, so a new word is *always* produced as its new id (by `FullTokenizer`, the
in-graph tokenizer and HF's slow tokenizer alike, since all run the same model). A NORMAL piece only wins where its
score beats every segmentation made of existing pieces; with a score below all existing ones (so old segmentations
are not disturbed) a word that already splits into two frequent pieces keeps its old split and the new row is never
trained. The price of USER_DEFINED: it is matched greedily inside longer words too ("▁covid" in "covidious").

With `--model_dir` (HF, native or original-release directory) the model is re-read with `vocab_size` grown to the new
vocabulary: old rows of `bert/embeddings/word_embeddings` (and of the MLM `cls/predictions/output_bias`, when the
model has one) are copied bit for bit; new embedding rows are drawn from the reference initializer (truncated normal,
stddev = `initializer_range`, `--seed`), new bias entries are zero like the reference's bias initializer. The result
is written to `--output_model_dir` as a native model directory (config.json with the new vocab_size, model.ckpt, the
new spiece.model, the input's side files, tokenizer_config.json: the options the pieces were normalised with; see
`data_prep.grown_model`), complete in a temporary directory, then moved in place (an earlier grown model there is
replaced, with a warning; refused: a folder holding files this tool does not write, such as a training run's,
`--model_dir` or a folder above it or an input, an `--output_model_file` in `--model_dir` or equal to
`--spm_model_file`). The head is the one the folder holds unless `--model_type` names it.

A table may hold more rows than the vocabulary has pieces (a preset's vocab_size over a small vocabulary: training
warns and goes on). The new pieces still take the ids after the last piece; rows that exist for those ids never
matched any piece, so they are re-initialised as new rows are (and logged), the table grows only past its size, and
the config's vocab_size is max(rows, pieces after extension). `--spm_model_file` must be the model's own: it may not
have more pieces than the table has rows, nor other pieces than the SentencePiece model recorded in `--model_dir`.

Long because: the vocabulary and the embedding table must change together, and their checks (the pieces as the model
normalises them, each produced as its new id, the model's own vocabulary, the rows kept or drawn) are one concept.
"""

from __future__ import annotations

import logging
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from absl import flags
import sentencepiece as spm
from sentencepiece import sentencepiece_model_pb2

from data_prep import grown_model
from data_prep import text_lines
from data_prep.grown_model import check_output_model_dir  # noqa: F401  (importable from here, as before)
from data_prep.grown_model import grow_model  # noqa: F401  (importable from here, as before)
from official_albert import cli
from official_albert import file_io
from official_albert import model_directory
from official_albert import tokenization
from official_albert.config import AlbertConfig
from official_albert.tokenization import FullTokenizer
from official_albert.tokenization import SPECIAL_TOKEN_IDS
from official_albert.tokenization import SPECIAL_TOKENS

logger = logging.getLogger(__name__)

PIECE_TYPES = ("user_defined", "normal")
WORD_BOUNDARY = "\u2581"
_MAX_LOGGED = 20


def model_normaliser(tokenizer: FullTokenizer) -> Callable[[str], str]:
  """A function giving a word as the model sees it: the tokenizer's preprocessing, then the model's own normaliser.

  User-defined pieces are matched against SentencePiece's normalised text, not against the tokenizer's output: ALBERT
  models normalise with nmt_nfkc, which recomposes what the preprocessing's NFKD took apart (a Hangul syllable is
  three jamo after the preprocessing, one character again after NFKC), so a piece stored in the preprocessing's form
  would never match. An explicit leading "▁" is kept; the dummy-prefix "▁" the normaliser adds is not.
  """
  sp = tokenizer.sp_model

  def normalise(text: str) -> str:
    pre = tokenizer.preprocess(text)
    marked = pre.startswith(WORD_BOUNDARY)
    body = pre[1:] if marked else pre
    if not body.strip():
      return ""
    out = sp.normalize(body)
    out = out[1:] if out.startswith(WORD_BOUNDARY) else out  # the dummy prefix (the body has no leading space)
    return WORD_BOUNDARY + out if marked and out else out

  return normalise


def read_new_pieces(path: str, normalise, add_word_boundary: bool = True,
                    sources: Optional[Dict[str, str]] = None) -> Tuple[List[str], Dict[str, int]]:
  """The normalised pieces of `path` in file order (repeats removed); and counts of what was skipped.

  Read by the corpus tools' reader (`text_lines.iter_lines`: a byte-order mark never joins the first piece); each
  word goes through `normalise` (`model_normaliser`), gets "▁" in front with `add_word_boundary`, and `sources`, when
  given, maps each piece to the word it was made from (for `check_new_words`).
  """
  if not file_io.exists(path):
    raise FileNotFoundError(f"--new_pieces_file={path} does not exist; give a text file with one new word per line.")
  pieces, seen = [], set()
  stats = {"lines": 0, "skipped_blank": 0, "skipped_repeated": 0}
  for line_no, line in text_lines.iter_lines(path, replace_flag=None):
    stats["lines"] += 1
    text = line.rstrip("\r\n")
    special = [t for t in SPECIAL_TOKENS if t in text or (t.startswith("<") and t in text.lower())]
    if special:
      raise ValueError(f"{path}:{line_no}: {text.strip()!r} holds the special token {special[0]} (id "
                       f"{SPECIAL_TOKEN_IDS[special[0]]}): the tokenizer makes that text the token's id before "
                       "SentencePiece runs, so the piece could never match. Remove the line (every vocabulary has it).")
    word = text.strip()
    if any(ch.isspace() for ch in word):
      raise ValueError(f"{path}:{line_no}: {text!r} contains whitespace; a piece is one word. Put one word per line "
                       f"(multi-word units would never match: SentencePiece sees spaces as {WORD_BOUNDARY!r}).")
    piece = normalise(word)
    if not piece:
      stats["skipped_blank"] += 1
      continue
    if any(ch.isspace() for ch in piece) or WORD_BOUNDARY in piece[1:]:
      raise ValueError(f"{path}:{line_no}: {text!r} becomes {piece!r} in the model's normalisation, more than one "
                       "word; a piece is one word. Put one word per line.")
    if add_word_boundary and not piece.startswith(WORD_BOUNDARY):
      piece = WORD_BOUNDARY + piece
    if piece in seen:
      stats["skipped_repeated"] += 1
      logger.info("%s:%d: %r repeats an earlier line; skipped.", path, line_no, piece)
      continue
    seen.add(piece)
    pieces.append(piece)
    if sources is not None:
      sources[piece] = word
  if not pieces:
    raise ValueError(f"--new_pieces_file={path} holds no pieces ({stats['lines']} lines, all blank); write one new "
                     "word per line.")
  return pieces, stats


def check_new_words(model_file: str, added: Dict[str, int], sources: Dict[str, str], do_lower_case: bool,
                    tokenizer_mode: str, new_pieces_file: str, keep_accents: bool = False,
                    remove_space: bool = True) -> None:
  """Raises unless every new whole word (user-defined "▁" piece) encodes to exactly its new id with `model_file`.

  The module's promise, checked on the model itself rather than assumed: a normalisation the piece does not follow,
  or an existing user-defined piece that wins the greedy match, would leave a new row that is never trained.

  Raises:
    ValueError: naming the words, what they encode to, and the fix.
  """
  tokenizer = FullTokenizer(model_file, do_lower_case=do_lower_case, mode=tokenizer_mode, keep_accents=keep_accents,
                            remove_space=remove_space)
  words = [(sources.get(piece, piece).lstrip(WORD_BOUNDARY), piece, index) for piece, index in added.items()
           if piece.startswith(WORD_BOUNDARY)]
  encoded = tokenizer.encode_ids_batch([word for word, _, _ in words])
  bad = [f"{word!r} -> {tokenizer.convert_ids_to_tokens(ids)} (not {piece!r}, id {index})"
         for (word, piece, index), ids in zip(words, encoded) if ids != [index]]
  if bad:
    raise ValueError(f"--new_pieces_file={new_pieces_file}: {len(bad)} new word(s) would never be produced as their "
                     f"new id: {'; '.join(bad[:_MAX_LOGGED])}. Remove them from the file (the extended model was not "
                     "written).")


def extend_sentencepiece(spm_model_file: str, new_pieces: Sequence[str], output_model_file: str,
                         piece_type: str = "user_defined",
                         verify: Optional[Callable[[str, Dict[str, int]], None]] = None) -> Dict[str, object]:
  """Appends `new_pieces` to the model proto and writes it atomically; returns the counts and the new ids.

  `verify(temporary model path, {piece: new id})` runs on the complete model before it takes its final name, so a
  model that fails the check is never left at `output_model_file`.
  """

  if piece_type not in PIECE_TYPES:
    raise ValueError(f"--piece_type={piece_type!r} is not one of {PIECE_TYPES}.")
  if not file_io.exists(spm_model_file):
    raise FileNotFoundError(f"--spm_model_file={spm_model_file} does not exist.")
  proto = sentencepiece_model_pb2.ModelProto()
  with file_io.open_file(spm_model_file, "rb") as f:
    proto.ParseFromString(f.read())
  old_size = len(proto.pieces)
  if not old_size:
    raise ValueError(f"--spm_model_file={spm_model_file} is not a SentencePiece model (no pieces).")
  existing = {p.piece for p in proto.pieces}
  kind = sentencepiece_model_pb2.ModelProto.SentencePiece
  # NORMAL pieces sit below every existing score, so no existing segmentation gets worse; USER_DEFINED ignore scores
  # (0.0, as the trainer writes them).
  score = (min(p.score for p in proto.pieces) - 1.0) if piece_type == "normal" else 0.0
  added, present = {}, []
  for piece in new_pieces:
    if piece in existing:
      present.append(piece)
      continue
    entry = proto.pieces.add()
    entry.piece, entry.score = piece, score
    entry.type = kind.USER_DEFINED if piece_type == "user_defined" else kind.NORMAL
    added[piece] = len(proto.pieces) - 1
    existing.add(piece)
  if present:
    logger.info("Skipped %d pieces already in %s: %s%s", len(present), spm_model_file,
                ", ".join(map(repr, present[:_MAX_LOGGED])), " ..." if len(present) > _MAX_LOGGED else "")
  data = proto.SerializeToString()
  processor = spm.SentencePieceProcessor(model_proto=data)  # fails here, not at use, if the proto is unusable
  tokenization.check_special_tokens(processor, name=output_model_file)
  with file_io.atomic_path(output_model_file) as tmp:
    with file_io.open_file(tmp, "wb") as f:
      f.write(data)
    if verify is not None:
      verify(tmp, added)
  return {"old_vocab_size": old_size, "new_vocab_size": len(proto.pieces), "added": added,
          "skipped_present": present, "piece_type": piece_type}


def _model_vocab_size(model_dir: str) -> int:
  return AlbertConfig.from_json_file(model_directory.config_file(model_dir)).vocab_size


def _pieces(spm_model_file: str) -> List[str]:
  proto = sentencepiece_model_pb2.ModelProto()
  with file_io.open_file(spm_model_file, "rb") as f:
    proto.ParseFromString(f.read())
  return [p.piece for p in proto.pieces]


def check_model_vocabulary(model_dir: str, spm_model_file: str) -> int:
  """Raises unless `spm_model_file` can be the vocabulary of `model_dir`'s model; returns the model's rows.

  The piece count alone cannot tell: a table may have more rows than its vocabulary has pieces (see module doc). So
  the count may not pass the rows, and when the directory records its SentencePiece model (the train binary and the
  converters copy it there) the pieces must be those, in order.
  """
  rows = _model_vocab_size(model_dir)
  pieces = _pieces(spm_model_file)
  if len(pieces) > rows:
    raise ValueError(grown_model.too_many_pieces(model_dir, spm_model_file, len(pieces), rows))
  own = model_directory.find_spm_model(model_dir)
  if own is not None and not file_io.same_location(own, spm_model_file):
    own_pieces = _pieces(own)
    if own_pieces != pieces:
      first = next((i for i, (a, b) in enumerate(zip(own_pieces, pieces)) if a != b), min(len(pieces), len(own_pieces)))
      raise ValueError(f"--spm_model_file={spm_model_file} ({len(pieces)} pieces) is not the SentencePiece model of "
                       f"--model_dir={model_dir}: its recorded {own} ({len(own_pieces)} pieces) differs from id "
                       f"{first} on. Pass --spm_model_file={own}.")
  return rows


def extend_vocabulary(spm_model_file: str, new_pieces_file: str, output_model_file: str,
                      model_dir: Optional[str] = None, output_model_dir: Optional[str] = None,
                      piece_type: str = "user_defined", add_word_boundary: bool = True,
                      do_lower_case: Optional[bool] = None, tokenizer_mode: str = "hf", seed: int = 12345,
                      model_type: Optional[str] = None, allow_missing: Sequence[str] = (),
                      keep_accents: Optional[bool] = None) -> Dict[str, object]:
  """The binary's work: extend the SentencePiece model, then (with `model_dir`) grow the model. Returns a summary.

  `do_lower_case` / `keep_accents` None: as `model_dir` records them (tokenizer_config.json, params.yaml), else
  ALBERT's defaults (lower-cased, accents stripped); the grown directory records the options used.
  """
  if (model_dir is None) != (output_model_dir is None):
    raise ValueError("--model_dir and --output_model_dir go together: give both to grow a model, or neither.")
  if model_dir is not None and not file_io.exists(model_dir):
    raise FileNotFoundError(f"--model_dir={model_dir} does not exist.")
  if not file_io.exists(spm_model_file):
    raise FileNotFoundError(f"--spm_model_file={spm_model_file} does not exist.")
  if file_io.same_location(output_model_file, spm_model_file):  # (replaced before the model grew: a rerun refused)
    raise ValueError(f"--output_model_file={output_model_file} is --spm_model_file: write the extended vocabulary "
                     "to a new file (the input vocabulary would be replaced).")
  if model_dir is not None:  # checked before anything is written
    check_output_model_dir(model_dir, output_model_dir, {"--spm_model_file": spm_model_file,
                                                         "--new_pieces_file": new_pieces_file,
                                                         "--output_model_file": output_model_file})
    check_model_vocabulary(model_dir, spm_model_file)
    model_type = model_type or grown_model.model_type_of(model_dir)
    if file_io.is_within(output_model_file, model_dir):
      raise ValueError(f"--output_model_file={output_model_file} is inside --model_dir={model_dir}: it would replace "
                       "the input's vocabulary before the grown model is checked. Write it elsewhere (the grown model "
                       "folder gets its own copy).")
  options = tokenizer_options(model_dir, do_lower_case, keep_accents)
  tokenizer = FullTokenizer(spm_model_file, mode=tokenizer_mode, **options)
  sources: Dict[str, str] = {}
  pieces, stats = read_new_pieces(new_pieces_file, model_normaliser(tokenizer), add_word_boundary, sources)

  def verify(model_file: str, added: Dict[str, int]) -> None:
    if piece_type == "user_defined":  # a NORMAL piece is produced only where it out-scores the old splits (doc)
      check_new_words(model_file, added, sources, options["do_lower_case"], tokenizer_mode, new_pieces_file,
                      options["keep_accents"], options["remove_space"])

  result = extend_sentencepiece(spm_model_file, pieces, output_model_file, piece_type, verify=verify)
  result.update(stats)
  if model_dir is not None:
    try:
      result["model"] = grow_model(model_dir, output_model_dir, result["new_vocab_size"], output_model_file,
                                   seed=seed, model_type=model_type, allow_missing=allow_missing,
                                   old_vocab_size=result["old_vocab_size"], tokenizer_options=options)
    except BaseException:  # (a vocabulary with no grown model beside it, taken for a finished run)
      logger.error("The model did not grow: removing --output_model_file=%s.", output_model_file)
      file_io.remove(output_model_file)
      raise
  result["tokenizer_options"] = options
  return result


def tokenizer_options(model_dir: Optional[str], do_lower_case: Optional[bool],
                      keep_accents: Optional[bool]) -> Dict[str, bool]:
  """do_lower_case, keep_accents and remove_space the new pieces are normalised with: as given, else as `model_dir`
  records them, else ALBERT's defaults; a given one that contradicts the record is warned of (the new pieces then
  follow the flag, and the model's training text did not)."""
  from official_albert.checkpoints import sentence_transformers_folder as st  # noqa: PLC0415 (binary: TF later)
  recorded = st.recorded_tokenizer_options(model_dir)
  options = st.model_tokenizer_options(model_dir)
  for key, given in (("do_lower_case", do_lower_case), ("keep_accents", keep_accents)):
    if given is None:
      continue
    if key in recorded and recorded[key][0] != bool(given):
      logger.warning("--%s=%s, but %s records %s=%s: the new pieces are normalised as the flag says, not as the "
                     "model was trained.", key, bool(given), recorded[key][1], key, recorded[key][0])
    options[key] = bool(given)
  return options


def format_summary(result: Dict[str, object]) -> str:
  lines = [f"vocabulary: {result['old_vocab_size']} -> {result['new_vocab_size']} pieces "
           f"({len(result['added'])} added as {result['piece_type']})",
           f"  skipped: {len(result['skipped_present'])} already in the model, {result['skipped_repeated']} repeated "
           f"lines, {result['skipped_blank']} blank lines"]
  lines += [f"  {piece} -> id {index}" for piece, index in list(result["added"].items())[:_MAX_LOGGED]]
  if len(result["added"]) > _MAX_LOGGED:
    lines.append(f"  ... and {len(result['added']) - _MAX_LOGGED} more")
  if "model" in result:
    m = result["model"]
    lines.append(f"model: {m['model_dir']} -> {m['output_model_dir']} (native, vocab_size {m['new_vocab_size']}), "
                 "grown rows: " + (", ".join(f"{k} +{v}" for k, v in sorted(m["grown"].items())) or "none"))
    if m.get("reinitialised"):
      lines.append("  re-initialised rows (in the table, never trained on any piece): "
                   + ", ".join(f"{k} {v}" for k, v in sorted(m["reinitialised"].items())))
  return "\n".join(lines)


def define_flags(fv: flags.FlagValues = flags.FLAGS) -> None:
  """Defines the binary's flags (in a function, so that importing the module never clashes with other binaries)."""
  flags.DEFINE_string("spm_model_file", None, "SentencePiece model to extend.", flag_values=fv)
  flags.DEFINE_string("new_pieces_file", None, "UTF-8 text file, one new word/piece per line.", flag_values=fv)
  flags.DEFINE_string("output_model_file", None, "Where to write the extended SentencePiece model.", flag_values=fv)
  flags.DEFINE_string("model_dir", None, "Optional HF / native / original-release model directory to grow.",
                      flag_values=fv)
  flags.DEFINE_string("output_model_dir", None, "Native model directory for the grown model.", flag_values=fv)
  flags.DEFINE_enum("piece_type", "user_defined", PIECE_TYPES, "How new pieces enter the model (see the module "
                    "docstring: user_defined is always produced; normal only where it out-scores old splits).",
                    flag_values=fv)
  flags.DEFINE_boolean("add_word_boundary", True, "Prepend '\u2581' to pieces that lack it (whole words).",
                       flag_values=fv)
  flags.DEFINE_boolean("do_lower_case", None, "Normalise pieces as the tokenizer will (must match fine-tuning); "
                       "default: as --model_dir records it, else true.", flag_values=fv)
  flags.DEFINE_boolean("keep_accents", None, "Keep accents in the pieces (a keep_accents tokenizer); default: as "
                       "--model_dir records it, else false.", flag_values=fv)
  flags.DEFINE_enum("tokenizer_mode", "hf", ("hf", "reference", "upstream_py3"), "FullTokenizer mode.",
                    flag_values=fv)
  flags.DEFINE_integer("seed", 12345, "Seed of the new embedding rows' initializer.", flag_values=fv)
  flags.DEFINE_string("model_type", None, "Which model/head --model_dir holds (convert_checkpoint's --model_type); "
                      "default: the one the folder records or holds.", flag_values=fv)
  flags.DEFINE_list("allow_missing", [], "Globs of model variables --model_dir may lack.", flag_values=fv)
  flags.mark_flags_as_required(["spm_model_file", "new_pieces_file", "output_model_file"], flag_values=fv)


def main(argv: List[str], fv: flags.FlagValues = flags.FLAGS) -> None:
  del argv
  result = extend_vocabulary(fv.spm_model_file, fv.new_pieces_file, fv.output_model_file, model_dir=fv.model_dir,
                             output_model_dir=fv.output_model_dir, piece_type=fv.piece_type,
                             add_word_boundary=fv.add_word_boundary, do_lower_case=fv.do_lower_case,
                             tokenizer_mode=fv.tokenizer_mode, seed=fv.seed, model_type=fv.model_type,
                             allow_missing=fv.allow_missing, keep_accents=fv.keep_accents)
  print(format_summary(result))


def console_main() -> None:
  """The `albert-extend-vocabulary` console script (pyproject.toml)."""
  cli.launch(define_flags, main)


if __name__ == "__main__":
  console_main()
