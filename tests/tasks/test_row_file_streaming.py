"""The raw row files are read a line at a time, with the rows (and line numbers) of reading the whole file.

`tasks.row_files.read_rows` read a file whole (bytes, text, and the csv module's copy of it: ~5× the file's size,
1,148 MiB of peak RSS to iterate a 237 MB CSV) before its first row; `text_lines` streams it. These tests hold the
streamed rows to the whole-file reading of the standard library on files in the shapes users have (a BOM, CRLF,
old Mac \\r endings, mixed endings, quoted line breaks, U+2028 inside a cell, blank lines, no final newline), and
the memory to a fraction of the file.
"""

import csv
import gzip
import io
import json
import re
import tracemalloc

import pytest

from tasks import row_files
from tasks.text import data as text_data

BOM = b"\xef\xbb\xbf"
CSV_FILES = {
    "bom_crlf_quoted_breaks": (BOM + b'text,label\r\n"one, two",pos\r\n"a\r\nb\nc",neg\r\n'
                               b'"caf\xc3\xa9 \xe2\x80\xa8 x",pos'),
    "old_mac": b'text,label\r"x\ry",pos\rplain,neg\r\r"last",pos\r',
    "mixed_endings_blank_lines": b'\n\ntext,label\nfirst,pos\r\nsecond,neg\r\n\nthird,pos\rfourth,neg\n\n\n',
    "semicolons_after_blank_lines": b"\r\n\r\nsentence1;sentence2;score\r\nA;B;4,8\r\nC;D;1\r\n",
    "one_line_no_newline": b"text,label",
}


def _write(tmp_path, name, data):
  path = tmp_path / name
  path.write_bytes(data)
  return str(path)


def _whole_file_rows(path, delimiter=",", quoting=csv.QUOTE_MINIMAL):
  """The rows (line, cells) as the standard library reads the whole decoded file; the header first."""
  with open(path, "rb") as f:
    text = f.read().decode("utf-8-sig")
  reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter, quoting=quoting)
  rows, line = [], 1
  for row in reader:
    start, line = line, reader.line_num + 1
    if row and not (len(row) == 1 and not row[0].strip()):
      rows.append((start, row))
  return rows


@pytest.mark.parametrize("name", sorted(CSV_FILES))
def test_csv_rows_equal_the_whole_file_reading(tmp_path, name):
  path = _write(tmp_path, f"{name}.csv", CSV_FILES[name])
  delimiter = ";" if name.startswith("semicolons") else ","
  expected = _whole_file_rows(path, delimiter)
  header = expected[0][1]
  got = [(line, [row[h] for h in header] if row else error) for line, row, error in row_files.read_rows(path, "csv")]
  assert got == expected[1:]


def test_tsv_and_jsonl_rows_equal_the_whole_file_reading(tmp_path):
  tsv = _write(tmp_path, "a.tsv", BOM + b"text\tlabel\r\nx \"y\"\tpos\rz\tneg\n\nw\tpos")
  expected = _whole_file_rows(tsv, "\t", csv.QUOTE_NONE)
  assert [(line, list(row.values())) for line, row, _ in row_files.read_rows(tsv, "tsv")] == expected[1:]

  rows = [{"text": "first\u2028second", "label": "a"}, {"text": "caf\u0085e", "label": "b"}]
  lines = [json.dumps(r, ensure_ascii=False) for r in rows]
  jsonl = _write(tmp_path, "a.jsonl", BOM + ("\r\n\r\n" + lines[0] + "\r" + "{broken\n" + lines[1]).encode("utf-8"))
  with open(jsonl, "rb") as f:
    physical = re.split(r"\r\n|\r|\n", f.read().decode("utf-8-sig"))
  expected = [(n, text) for n, text in enumerate(physical, 1) if text.strip()]
  got = list(row_files.read_rows(jsonl, "jsonl"))
  assert [line for line, _, _ in got] == [n for n, _ in expected] == [3, 4, 5]
  assert [row for _, row, _ in got] == [rows[0], None, rows[1]]
  assert "not valid JSON" in got[1][2]


def test_not_utf8_names_the_line_and_the_byte(tmp_path):
  data = BOM + b"text,label\rok,pos\r\nfine,neg\ncaf\xe9,pos\n"
  path = _write(tmp_path, "latin1.csv", data)
  rows = row_files.read_rows(path, "csv")
  assert next(rows)[0] == 2  # rows before the bad line are read; the error comes at its line
  offset = data.index(b"\xe9")
  with pytest.raises(row_files.TextDataError, match=rf"latin1\.csv:4: not UTF-8 .* at byte {offset}\)"):
    list(rows)


def test_conll_line_numbers_do_not_depend_on_the_line_endings(tmp_path):
  options = text_data.ReadOptions(label_kind="tags", input_format="conll")
  text = "-DOCSTART- O\n\nAnn B-PER\nlives O\n\nParis B-LOC\n"
  sentences = {}
  for name, ending in (("lf", "\n"), ("crlf", "\r\n"), ("cr", "\r")):
    path = _write(tmp_path, f"{name}.conll", text.replace("\n", ending).encode("utf-8"))
    sentences[name] = [(e.line, e.tokens, e.label) for e in text_data.read_token_examples(path, options)]
  assert sentences["lf"] == [(3, ["Ann", "lives"], ["B-PER", "O"]), (6, ["Paris"], ["B-LOC"])]
  assert sentences["crlf"] == sentences["cr"] == sentences["lf"]


@pytest.mark.parametrize("compressed", [False, True], ids=["plain", "gzip"])
def test_reading_holds_a_few_rows_not_the_file(tmp_path, compressed):
  row = '"a review of some length, with a comma",positive\n'
  data = ("text,label\n" + row * 100_000).encode("utf-8")
  path = _gzip(tmp_path, "big.csv", data) if compressed else _write(tmp_path, "big.csv", data)
  size = 100_000 * len(row)
  tracemalloc.start()
  try:
    count = sum(1 for _ in row_files.read_rows(path, "csv"))
    _, peak = tracemalloc.get_traced_memory()
  finally:
    tracemalloc.stop()
  assert count == 100_000
  assert peak < size / 4, f"peak {peak} bytes while reading a {size}-byte file"  # (a 64 KiB block: ~0.33 MB)


def test_a_gfile_path_reads_every_byte_as_a_local_one(tmp_path):
  """tf.io.gfile.GFile's line iteration drops every \\r (a CRLF file, a \\r in a quoted cell, old Mac endings):
  lines are split from its bytes instead, so gs:// and s3:// files read as local ones."""
  import tensorflow as tf  # pylint: disable=import-outside-toplevel

  for name, data in CSV_FILES.items():
    local = _write(tmp_path, f"{name}.csv", data)
    remote = f"ram://row_file_streaming/{name}.csv"
    with tf.io.gfile.GFile(remote, "wb") as f:
      f.write(data)
    assert list(row_files.read_rows(remote, "csv")) == list(row_files.read_rows(local, "csv")), name
    assert [p for _, p in row_files.text_lines(remote)] == [p for _, p in row_files.text_lines(local)], name


def _gzip(tmp_path, name, data):
  return _write(tmp_path, name + ".gz", gzip.compress(data))


def test_a_gzip_file_reads_as_its_plain_text_with_its_format_from_the_inner_name(tmp_path):
  """`pairs.csv.gz`: the rows and line numbers of `pairs.csv` (BOM, CRLF, old Mac endings, quoted breaks), read
  as it decompresses; the format comes from the name without .gz, on a local disk and through tf.io.gfile."""
  import tensorflow as tf  # pylint: disable=import-outside-toplevel

  for name, data in CSV_FILES.items():
    plain, packed = _write(tmp_path, f"{name}.csv", data), _gzip(tmp_path, f"{name}.csv", data)
    assert row_files.file_format(packed) == "csv" and text_data.is_raw_input(packed)
    assert list(row_files.read_rows(packed, "csv")) == list(row_files.read_rows(plain, "csv")), name
    remote = f"ram://row_file_streaming_gz/{name}.csv.gz"
    with tf.io.gfile.GFile(remote, "wb") as f:
      f.write(gzip.compress(data))
    assert list(row_files.text_lines(remote)) == list(row_files.text_lines(plain)), name
  data = BOM + b"text\tlabel\r\nx\tpos\rz\tneg\n"
  assert (list(row_files.read_rows(_gzip(tmp_path, "a.tsv", data), "tsv")) ==
          list(row_files.read_rows(_write(tmp_path, "a.tsv", data), "tsv")))
  assert row_files.file_format("x.JSONL.GZ") == "jsonl" and row_files.file_format("records.tfrecord.gz") is None
  assert row_files.file_stem("data/reviews.csv.gz") == row_files.file_stem("data/reviews.csv") == "reviews"


def test_a_gzip_name_on_a_plain_or_cut_file_names_the_file_the_line_and_the_fix(tmp_path):
  plain_named_gz = _write(tmp_path, "plain.csv.gz", b"text,label\nx,pos\n")
  with pytest.raises(row_files.TextDataError, match=r"plain\.csv\.gz: not a readable gzip file after line 0 "
                                                    r"\(BadGzipFile.*rename it without \.gz if it is plain text"):
    list(row_files.read_rows(plain_named_gz, "csv"))
  rows = b"text,label\n" + b"".join(b"row %d with some words,pos\n" % i for i in range(20_000))
  packed = gzip.compress(rows)
  cut = _write(tmp_path, "cut.csv.gz", packed[:len(packed) // 2])
  with pytest.raises(row_files.TextDataError, match=r"cut\.csv\.gz: not a readable gzip file after line \d+ "
                                                    r"\(EOFError") as error:
    list(row_files.read_rows(cut, "csv"))
  assert int(re.search(r"after line (\d+)", str(error.value)).group(1)) > 1000  # (the rows before the cut were read)

