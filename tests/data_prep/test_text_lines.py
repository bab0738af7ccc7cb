"""data_prep.text_lines: the corpus tools' one reader of text files."""

import logging

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
