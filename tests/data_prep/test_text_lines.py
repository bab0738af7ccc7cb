"""data_prep.text_lines: the corpus tools' one reader of text files."""

import gzip
import logging

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
