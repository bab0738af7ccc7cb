"""data_prep.text_lines: the corpus tools' one reader of text files."""

import gzip
import logging
import re

import pytest

from data_prep import text_lines


def test_old_mac_line_endings_are_read_as_one_line_and_named(tmp_path, caplog):
  """Lines end at "\\n" only (the reference tool's reading, kept); a file with "\\r" and no "\\n" would silently be
  one sentence and one document, so the reader names the file and the fix."""
  mac = tmp_path / "mac.txt"
  mac.write_bytes(b"First sentence.\rSecond one.\r\rNext document.\r")
  caplog.set_level(logging.WARNING, logger=text_lines.__name__)
  assert [n for n, _ in text_lines.iter_lines(str(mac))] == [1]
  assert f"{mac} has carriage returns" in caplog.text and "tr '\\r' '\\n'" in caplog.text
  caplog.clear()
  windows = tmp_path / "windows.txt"
  windows.write_bytes(b"First sentence.\r\nSecond one.\r\n")
  assert [t for _, t in text_lines.iter_lines(str(windows))] == ["First sentence.\r\n", "Second one.\r\n"]
  assert not caplog.records


def test_a_gzip_file_reads_as_its_plain_text_and_a_plain_one_named_gz_is_an_error(tmp_path):
  data = b"\xef\xbb\xbfFirst sentence.\r\nSecond one.\n\nNext document, no final newline."
  (tmp_path / "corpus.txt").write_bytes(data)
  (tmp_path / "corpus.txt.gz").write_bytes(gzip.compress(data))
  counts_plain, counts_gz = {}, {}
  assert (list(text_lines.iter_lines(str(tmp_path / "corpus.txt.gz"), counts=counts_gz)) ==
          list(text_lines.iter_lines(str(tmp_path / "corpus.txt"), counts=counts_plain)))
  assert counts_gz == counts_plain == {"lines_read": 4, "lines_with_decode_errors": 0}
  (tmp_path / "plain.txt.gz").write_bytes(data)
  with pytest.raises(text_lines.InputError, match=r"plain\.txt\.gz: not a readable gzip file after line 0 "
                                                  r"\(BadGzipFile.*rename it without \.gz"):
    list(text_lines.iter_lines(str(tmp_path / "plain.txt.gz"), counts=counts_gz))  # (counts of another file before)


@pytest.mark.parametrize("data,words", [
    (gzip.compress(b"some text\n", mtime=0), "is gzip-compressed: name it with .gz"),  # (mtime=0: one test id)
    (b"BZh91AY&SY\x00\x01binary", "is bzip2-compressed"),
    (b"\xfd7zXZ\x00\x00binary", "is xz-compressed"),
    (b"\x28\xb5\x2f\xfd\x00binary", "is zstd-compressed"),
    (b"PK\x03\x04binary", "is a zip archive"),
    ("some text\n".encode("utf-16"), "is UTF-16 or UTF-32"),
    ("some text\n".encode("utf-16-le"), "holds a NUL byte (at column 2 of line 1)"),
])
def test_a_file_that_is_no_text_is_named_whatever_errors_says(tmp_path, data, words):
  """Review s50: a gzip file without .gz, bzip2, UTF-16... got "invalid UTF-8 ... or pass --errors=replace", and
  following that advice made training records of noise (or, for UTF-16 without a BOM, passed as text)."""
  path = tmp_path / "corpus.txt"
  path.write_bytes(data)
  for errors in ("strict", "replace"):
    with pytest.raises(text_lines.InputError, match=re.escape(f"{path} {words}")):
      list(text_lines.iter_lines(str(path), errors))
  path.write_bytes(b"BZh is a word here.\n")  # (a text that starts like bzip2's magic is text)
  assert [t for _, t in text_lines.iter_lines(str(path))] == ["BZh is a word here.\n"]
