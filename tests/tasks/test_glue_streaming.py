"""GLUE TSVs are read a line at a time (`tasks.glue.files.iter_tsv`) with the rows of the whole-file reading.

`read_tsv` read a file whole (bytes, decoded text, the csv module over a copy) and kept every column of every row:
an MNLI train file's parse columns are most of its bytes. These tests hold the streamed rows to the reference's
reading, the standard library's `csv.reader(quotechar=None)` over the whole decoded file with universal newlines, on
the real GLUE samples and on files in the shapes users have (CRLF, old Mac \\r, a BOM, U+2028 inside a text, bare
quotes, blank lines, empty cells, a cell over the csv module's 128 KiB limit, no final newline, gzip), and the memory
of reading an MNLI-shaped file to what its examples keep.
"""

import csv
import gzip
import io
import os
import sys
import tracemalloc

import pytest

from tasks import glue
from tasks.glue.files import iter_tsv

SHAPES = {
    "crlf": b"sentence\tlabel\r\nA \"quoted\" word.\t1\r\n\r\nno final newline\t0",
    "old_mac": b"sentence\tlabel\rone\t1\rtwo\t0\r",
    "bom_and_separators": "\ufeffsentence\tlabel\nfirst\u2028still first\t1\n\u0085x\t0\n".encode("utf-8"),
    "empty_cells_and_tabs": b"a\t\tb\n\t\n\n  \nc\td\t\n",
    "long_cell": b"sentence\tlabel\n" + b"w" * 200_000 + b"\t1\n",
}


def _whole_file_rows(path):
  """The reading read_tsv did: the whole file decoded, csv.reader(QUOTE_NONE) over universal newlines."""
  opener = gzip.open if path.endswith(".gz") else open
  with opener(path, "rb") as f:
    text = f.read().decode("utf-8-sig")
  previous = csv.field_size_limit(sys.maxsize)
  try:
    return list(csv.reader(io.StringIO(text, newline=None), delimiter="\t", quoting=csv.QUOTE_NONE))
  finally:
    csv.field_size_limit(previous)


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_rows_equal_the_whole_file_reading(tmp_path, name):
  path = tmp_path / f"{name}.tsv"
  path.write_bytes(SHAPES[name])
  streamed = list(iter_tsv(str(path)))
  assert [row for _, row in streamed] == _whole_file_rows(str(path))
  assert [line for line, _ in streamed] == list(range(1, len(streamed) + 1))
  packed = tmp_path / f"{name}.tsv.gz"
  packed.write_bytes(gzip.compress(SHAPES[name]))
  assert list(iter_tsv(str(packed))) == streamed


def test_the_real_glue_samples_read_as_before(shared_data_dir):
  files = sorted(os.path.join(root, f) for root, _, names in os.walk(os.path.join(shared_data_dir, "glue"))
                 for f in names if f.endswith(".tsv"))
  assert files
  for path in files:
    assert glue.read_tsv(path) == _whole_file_rows(path), path


def test_a_bad_byte_after_good_lines_names_its_line_with_a_bom_and_crlf(tmp_path):
  data = b"\xef\xbb\xbfsentence\tlabel\r\ngood\t1\r\nun caf\xe9\t0\r\n"
  path = tmp_path / "SST-2" / "train.tsv"
  path.parent.mkdir()
  path.write_bytes(data)
  offset = data.index(b"\xe9")
  column = offset - (data.rindex(b"\n", 0, offset) + 1) + 1
  with pytest.raises(glue.GlueDataError, match=rf"train\.tsv:3: invalid UTF-8 \(byte 0xe9 at byte {column} of the "
                                               rf"line, byte offset {offset} of the file\)"):
    glue.read_examples("sst-2", str(tmp_path), "train")


def test_an_mnli_shaped_file_costs_its_examples_not_its_parse_columns(tmp_path):
  """12 columns, 4 of them long parses: reading keeps sentence1, sentence2 and the label only."""
  header = ("index\tpromptID\tpairID\tgenre\tsentence1_binary_parse\tsentence2_binary_parse\tsentence1_parse\t"
            "sentence2_parse\tsentence1\tsentence2\tlabel1\tgold_label\n")
  parse = "( ( The cat ) ( sat ( on ( the mat ) ) ) )" * 8
  rows = "".join(f"{i}\t{i}\t{i}e\tfiction\t{parse}\t{parse}\t{parse}\t{parse}\tThe cat {i}.\tA mat {i}.\t"
                 "neutral\tneutral\n" for i in range(20_000))
  path = tmp_path / "MNLI" / "train.tsv"
  path.parent.mkdir()
  path.write_text(header + rows, encoding="utf-8")
  size = os.path.getsize(path)
  tracemalloc.start()
  try:
    examples = glue.read_examples("mnli", str(tmp_path), "train")
    _, peak = tracemalloc.get_traced_memory()
  finally:
    tracemalloc.stop()
  assert len(examples) == 20_000 and examples[-1].text_b == "A mat 19999."
  # (Read whole, as before, the peak was 7.5× the file here; streamed, 0.26×: the 20,000 examples.)
  assert peak < size / 2, f"peak {peak} bytes reading a {size}-byte file"


def test_a_gzip_task_file_is_a_raw_glue_input_with_the_plain_files_examples(tmp_path):
  from official_albert import train  # pylint: disable=import-outside-toplevel
  from tasks.glue import data as glue_data  # pylint: disable=import-outside-toplevel
  data = b"Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\r\n1\t1\t2\tA b.\tC d.\r\n0\t3\t4\tE \"f\".\tG h.\r\n"
  (tmp_path / "train.tsv").write_bytes(data)
  (tmp_path / "train.tsv.gz").write_bytes(gzip.compress(data))
  plain = glue.read_examples("mrpc", "", "train", path=str(tmp_path / "train.tsv"))
  assert glue.read_examples("mrpc", "", "train", path=str(tmp_path / "train.tsv.gz")) == plain and len(plain) == 2
  params = train.build_params("glue/mrpc")
  config = params.task.train_data.replace(input_path=str(tmp_path / "train.TSV.gz"))
  assert glue_data.raw_writer(params.task, config, "train") is not None  # (not taken for records)
