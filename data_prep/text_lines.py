"""The corpus tools' one reader of text files: UTF-8 line by line, a clear error or a counted substitution.

`create_pretraining_data`, `tokenize_corpus`, `beam_pipeline` (through `pretraining_shards.iter_documents`) and
`train_sentencepiece` read users' text through `iter_lines`, so an undecodable byte is reported the same way
(file:line, the byte and its column, the fix) and a byte-order mark at the top of a file never becomes text.
"""

from __future__ import annotations

import logging
from typing import Dict, Iterator, Optional, Tuple

from official_albert import file_io

logger = logging.getLogger(__name__)

ERROR_MODES = ("strict", "replace")
# What a file that is not UTF-8 text starts with, and the fix: refused whatever --errors says (replacing its bytes
# trained on noise). Checked on the first line as read (a `.gz` file's after decompression).
_NOT_TEXT = (
    (b"\x1f\x8b", "is gzip-compressed: name it with .gz (it is then decompressed as it is read)"),
    (b"\xfd7zXZ\x00", "is xz-compressed: decompress it (`xz -d`), or recompress it as .gz"),
    (b"\x28\xb5\x2f\xfd", "is zstd-compressed: decompress it (`zstd -d`), or recompress it as .gz"),
    (b"PK\x03\x04", "is a zip archive: extract its text files and name them"),
    (b"\xff\xfe", "is UTF-16 or UTF-32 (its byte-order mark): convert it, e.g. `iconv -f utf-16 -t utf-8`"),
    (b"\xfe\xff", "is UTF-16 (its byte-order mark): convert it, e.g. `iconv -f utf-16 -t utf-8`"),
)


class InputError(ValueError):
  """Bad input (missing files, empty corpus, undecodable bytes); the message names the file and line."""


def iter_lines(path: str, errors: str = "strict", counts: Optional[Dict[str, int]] = None,
               replace_flag: Optional[str] = "--errors=replace") -> Iterator[Tuple[int, str]]:
  """Yields (1-based line number, decoded line with its line ending) for every line of `path`.

  Args:
    path: a local or gfile path.
    errors: "strict" raises InputError at the first undecodable line; "replace" substitutes U+FFFD and counts the
      line in `counts["lines_with_decode_errors"]`.
    counts: updated in place: "lines_read" and "lines_with_decode_errors".
    replace_flag: the calling tool's flag for errors="replace", named in the error (None: the tool has none).

  A `.gz` file (`wiki.txt.gz`) is gzip-decompressed as it is read; one that is not gzip, or is cut short, is an
  InputError naming the line reached. A file that is no text at all — compressed without its .gz name (gzip, bzip2,
  xz, zstd, zip), UTF-16 / UTF-32, or binary (a NUL byte in its first line) — is an InputError naming what it is and
  the fix, under either `errors`: substituting its bytes would make training text of noise.

  Lines end at "\n" only, as in the reference tool. A file with carriage returns but no "\n" (old Mac line endings)
  is therefore one line, one sentence and one document; that is logged as a warning naming the file and the fix.
  """
  if errors not in ERROR_MODES:
    raise ValueError(f"errors must be one of {ERROR_MODES}, got {errors!r}.")
  counts = counts if counts is not None else {}
  for key in ("lines_read", "lines_with_decode_errors"):
    counts.setdefault(key, 0)
  before = counts["lines_read"]  # (a caller's counts may run over several files)
  try:
    yield from _lines(path, errors, counts, replace_flag)
  except file_io.GZIP_ERRORS as e:
    raise InputError(file_io.gzip_error(path, e, counts["lines_read"] - before)) from None


def _lines(path: str, errors: str, counts: Dict[str, int], replace_flag: Optional[str]) -> Iterator[Tuple[int, str]]:
  """`iter_lines` of a checked `errors` and initialised `counts`."""
  with file_io.open_bytes(path) as f:
    for lineno, raw in enumerate(f, start=1):
      counts["lines_read"] += 1
      if lineno == 1:
        _check_text(path, raw)
      try:
        text = raw.decode("utf-8")
      except UnicodeDecodeError as e:
        if errors != "replace":
          fix = (f"or pass {replace_flag} to substitute U+FFFD (counted in the stats)" if replace_flag else
                 "(re-encode it as UTF-8, e.g. `iconv -f latin1 -t utf-8`)")
          raise InputError(f"{path}:{lineno}: invalid UTF-8 (byte 0x{raw[e.start]:02x} at column {e.start + 1}); "
                           f"fix the file {fix}.") from None
        text = raw.decode("utf-8", "replace")
        counts["lines_with_decode_errors"] += 1
      if lineno == 1 and text.startswith("\ufeff"):
        text = text[1:]
      if lineno == 1 and not raw.endswith(b"\n") and b"\r" in raw:  # the first line is the whole file
        logger.warning("%s has carriage returns (\\r) but no line feed (\\n): old Mac line endings, so the whole "
                       "file is read as one line (one sentence, one document). Convert it first, e.g. "
                       "`tr '\\r' '\\n' < IN > OUT`.", path)
      yield lineno, text


def _check_text(path: str, first_line: bytes) -> None:
  """Raises InputError when `first_line` shows that `path` is not UTF-8 text (`_NOT_TEXT`, bzip2, a NUL byte)."""
  what = next((fix for magic, fix in _NOT_TEXT if first_line.startswith(magic)), None)
  if what is None and first_line[:3] == b"BZh" and first_line[4:10] == b"1AY&SY":
    what = "is bzip2-compressed: decompress it (`bzip2 -d`), or recompress it as .gz"
  nul = first_line.find(b"\x00")
  if what is None and nul >= 0:
    what = (f"holds a NUL byte (at column {nul + 1} of line 1): a binary file, or UTF-16 / "
            "UTF-32 text without a byte-order mark; give UTF-8 text (e.g. `iconv -f utf-16le -t utf-8`)")
  if what is not None:
    raise InputError(f"{path} {what}; it is not UTF-8 text.")
