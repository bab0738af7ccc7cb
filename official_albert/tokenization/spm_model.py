"""The SentencePiece model file and ALBERT's special tokens: reading the model (local or gfile) and checking that
its ids 0-4 are the ones every ALBERT task assumes (reference §2.3).

TensorFlow-free, like the Python tokenizer (`tokenizer.py`) that builds on it.
"""

from __future__ import annotations

import collections
import logging
from typing import Iterable, List, Optional, Tuple

import sentencepiece as spm

SPIECE_UNDERLINE = "\u2581"
PAD, UNK, CLS, SEP, MASK = "<pad>", "<unk>", "[CLS]", "[SEP]", "[MASK]"
# Reference §2.3: these ids follow from the spm training flags and are assumed by every task.
SPECIAL_TOKEN_IDS = collections.OrderedDict([(PAD, 0), (UNK, 1), (CLS, 2), (SEP, 3), (MASK, 4)])
# HF order of `all_special_tokens`; only [MASK] strips whitespace on its left (AddedToken lstrip=True).
SPECIAL_TOKENS = (CLS, SEP, UNK, PAD, MASK)
LSTRIP_TOKENS = frozenset({MASK})
# Above this fraction of <unk> ids the data tools warn (`warn_if_unknown_pieces`): a vocabulary trained on the text
# leaves far fewer (rare characters only); casing or another script leaves far more.
UNK_WARN_FRACTION = 0.01


def _read_bytes(path: str) -> bytes:
  if "://" not in path:  # local: plain open, so that FullTokenizer works without importing TensorFlow
    try:
      with open(path, "rb") as f:
        return f.read()
    except FileNotFoundError as e:
      raise FileNotFoundError(f"{path}: SentencePiece model file not found.") from e
  import tensorflow as tf  # noqa: PLC0415 (TF-free module)
  if not tf.io.gfile.exists(path):
    raise FileNotFoundError(f"{path}: SentencePiece model file not found.")
  with tf.io.gfile.GFile(path, "rb") as f:
    return f.read()


def load_sp_model(spm_model_file: str) -> Tuple[spm.SentencePieceProcessor, bytes]:
  """Loads a SentencePiece model from a local or gs:// path; returns (processor, serialized proto)."""
  proto = _read_bytes(spm_model_file)
  sp = spm.SentencePieceProcessor()
  try:
    sp.LoadFromSerializedProto(proto)
  except (RuntimeError, OSError) as e:
    raise ValueError(f"{spm_model_file}: not a SentencePiece model ({e}).") from e
  return sp, proto


# ModelProto.SentencePiece.Type values (sentencepiece_model.proto). The piece type is read straight from the
# protobuf wire format: sentencepiece 0.2 has no IsUserDefined, an encode (even n-best) cannot tell a score-0
# normal piece from a user-defined one, and its generated `sentencepiece_model_pb2` needs protobuf >= 7 (Apache
# Beam pins < 7).
_NORMAL, _USER_DEFINED = 1, 4


def _read_varint(buf: bytes, pos: int) -> Tuple[int, int]:
  value, shift = 0, 0
  while True:
    if pos >= len(buf):
      raise ValueError("truncated SentencePiece model proto (varint runs past the end).")
    byte = buf[pos]
    pos += 1
    value |= (byte & 0x7F) << shift
    if not byte & 0x80:
      return value, pos
    shift += 7


def _proto_fields(buf: bytes) -> Iterable[Tuple[int, int, object]]:
  """Yields (field number, wire type, value) of a serialized protobuf message; value is an int or bytes."""
  pos = 0
  while pos < len(buf):
    key, pos = _read_varint(buf, pos)
    field, wire = key >> 3, key & 7
    if wire == 0:
      value, pos = _read_varint(buf, pos)
    elif wire == 2:
      length, pos = _read_varint(buf, pos)
      value, pos = buf[pos:pos + length], pos + length
    elif wire in (1, 5):  # fixed 64 / 32 bit
      width = 8 if wire == 1 else 4
      value, pos = buf[pos:pos + width], pos + width
    else:
      raise ValueError(f"SentencePiece model proto: unsupported wire type {wire} (field {field}).")
    if pos > len(buf):
      raise ValueError(f"truncated SentencePiece model proto (field {field} runs past the end).")
    yield field, wire, value


def _piece_type(model_proto: bytes, index: int) -> int:
  """`ModelProto.pieces[index].type` of a serialized model (pieces come first, so only a prefix is read)."""
  seen = 0
  for field, wire, value in _proto_fields(model_proto):
    if field == 1 and wire == 2:  # repeated SentencePiece pieces = 1
      if seen == index:
        piece_type = _NORMAL  # the proto default
        for sub_field, sub_wire, sub_value in _proto_fields(value):
          if sub_field == 3 and sub_wire == 0:  # Type type = 3
            piece_type = sub_value
        return piece_type
      seen += 1
  raise IndexError(f"SentencePiece model proto has {seen} pieces; no piece {index}.")


def removes_extra_whitespaces(model_proto: bytes) -> bool:
  """`ModelProto.normalizer_spec.remove_extra_whitespaces` of a serialized model (true by the proto's default).

  Why read it: `spm.SentencePieceNormalizer(model_proto=...)` takes the model's own flags only on sentencepiece
  >= 0.2.1; earlier releases reset a flag not passed to False, so a caller passes this one on."""
  for field, wire, value in _proto_fields(model_proto):
    if field == 3 and wire == 2:  # NormalizerSpec normalizer_spec = 3
      for sub_field, sub_wire, sub_value in _proto_fields(value):
        if sub_field == 4 and sub_wire == 0:  # bool remove_extra_whitespaces = 4
          return bool(sub_value)
      return True
  return True


def check_special_tokens(sp_model: spm.SentencePieceProcessor, name: str = "spm model") -> None:
  """Raises ValueError unless ids 0..4 are <pad>, <unk>, [CLS], [SEP], [MASK] (reference §2.3).

  [CLS], [SEP] and [MASK] must also be control or user-defined symbols, so that text never splits them.
  """
  size = sp_model.GetPieceSize()
  problems = []
  for piece, want in SPECIAL_TOKEN_IDS.items():
    got = sp_model.PieceToId(piece)
    actual = sp_model.IdToPiece(want) if want < size else "<out of range>"
    if got != want or actual != piece:
      problems.append(f"{piece!r} has id {got} (id {want} is {actual!r})")
    elif (piece in (CLS, SEP, MASK) and not sp_model.IsControl(want) and
          _piece_type(sp_model.serialized_model_proto(), want) != _USER_DEFINED):
      problems.append(f"{piece!r} (id {want}) is a normal piece, not a control/user-defined symbol")
  if problems:
    raise ValueError(
        f"{name}: ALBERT needs <pad>=0 <unk>=1 [CLS]=2 [SEP]=3 [MASK]=4; " + "; ".join(problems) +
        ". Train it with data_prep.train_sentencepiece (pad_id=0 unk_id=1 bos_id=-1 eos_id=-1 "
        "control_symbols=[CLS],[SEP],[MASK]).")


def check_spm_model_file(spm_model_file: str) -> None:
  """Loads `spm_model_file` and runs `check_special_tokens` on it (error names the file)."""
  sp, _ = load_sp_model(spm_model_file)
  check_special_tokens(sp, name=spm_model_file)


def uppercase_pieces(sp_model: spm.SentencePieceProcessor) -> List[str]:
  """The model's non-control pieces holding an upper-case letter (ALBERT's released vocabularies have none)."""
  return [piece for piece in (sp_model.IdToPiece(i) if not sp_model.IsControl(i) else ""
                              for i in range(sp_model.GetPieceSize())) if any(c.isupper() for c in piece)]


def warn_if_cased_vocabulary(spm_model_file: str, do_lower_case: bool, log: logging.Logger, examples: int = 5
                             ) -> bool:
  """Logs one warning when `do_lower_case` meets a vocabulary with upper-case pieces; returns whether it warned.

  Lower-cased text never produces such a piece, so a vocabulary trained cased (`train_sentencepiece
  --do_lower_case=false`) and data made with the tools' default `--do_lower_case=true` leave every one of them unused,
  silently. A warning, not an error: a mostly lower-case vocabulary with a few cased pieces may be intended. `log` is
  the calling tool's logger; the tool calls this once per run, in its main process.
  """
  if not do_lower_case:
    return False
  sp, _ = load_sp_model(spm_model_file)
  cased = uppercase_pieces(sp)
  if cased:
    log.warning(
        "--do_lower_case=true lower-cases the text, but the SentencePiece model %s has %d of %d pieces with "
        "upper-case letters (e.g. %s) that lower-cased text never produces: they stay unused. If the vocabulary was "
        "trained cased (train_sentencepiece --do_lower_case=false), pass --do_lower_case=false here too.",
        spm_model_file, len(cased), sp.GetPieceSize(), ", ".join(repr(p) for p in cased[:examples]))
  return bool(cased)


def warn_if_unknown_pieces(unk_tokens: int, tokens: int, do_lower_case: bool, log: logging.Logger,
                           spm_model_file: Optional[str] = None, threshold: float = UNK_WARN_FRACTION) -> bool:
  """Logs one warning when the tokenized text holds many <unk> ids; returns whether it warned.

  Text the vocabulary cannot spell becomes <unk>, silently: the model then learns one token for every such character.
  The usual cause is casing (an uncased vocabulary, as ALBERT's released ones, with `--do_lower_case=false` makes every
  capital letter <unk>); `warn_if_cased_vocabulary` cannot see it before the text is read. Warns when more than
  `threshold` of the tokens are <unk>, or, given `spm_model_file` with `do_lower_case` False and no piece of the model
  holding an upper-case letter, at any <unk> (the text has a character the model lacks; capitals are the likely one).
  `log` is the calling tool's logger; the tool calls this once per run, with the run's totals.
  """
  if unk_tokens <= 0:
    return False
  uncased = bool(spm_model_file) and not do_lower_case and not uppercase_pieces(load_sp_model(spm_model_file)[0])
  if not uncased and unk_tokens <= threshold * tokens:
    return False
  if uncased:
    cause = (f"the SentencePiece model {spm_model_file} has no piece with an upper-case letter, so with "
             "--do_lower_case=false every capital letter of the text becomes <unk>: pass --do_lower_case=true (the "
             "vocabulary is uncased)")
  elif not do_lower_case:
    cause = ("with --do_lower_case=false an uncased SentencePiece model (no piece with an upper-case letter, as "
             "ALBERT's released ones) makes every capital letter <unk>: pass --do_lower_case=true then; else the model "
             "lacks characters of this text: train it on this text (data_prep.train_sentencepiece)")
  else:
    cause = ("the SentencePiece model lacks characters of this text (another script or alphabet?): train it on this "
             "text (data_prep.train_sentencepiece), or check --input_file")
  log.warning("%d of %d tokens (%.2f%%) of the data are <unk> (id %d), one id for every character the vocabulary "
              "cannot spell: %s.", unk_tokens, tokens, 100.0 * unk_tokens / max(1, tokens), SPECIAL_TOKEN_IDS[UNK],
              cause)
  return True
