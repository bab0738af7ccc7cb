"""Odd-shaped user files through the raw row-file readers (`tasks.row_files` / `tasks.row_cells`).

Each test is one finding of a review of files as users make them: two exports joined with their columns in another
order, TSVs written by csv.writer / pandas (cells in CSV quoting), a CSV with a space after each comma, a
tab-separated `.csv`, a UTF-16 file, and multiple-choice rows as pandas writes them. The files are tiny and written
here; they are read through the entry points a task reads them with.
"""

import csv
import io
import json
import logging

import pytest

from tasks import row_files
from tasks.choice import data as choice_data
from tasks.embedding import data as embedding_data
from tasks.row_files import TextDataError
from tasks.text import data as text_data

CHOICE_COLUMNS = {"context": "context", "question": "question", "choices": "choices", "label": "label"}


def _write(tmp_path, name, data):
  path = tmp_path / name
  path.write_bytes(data if isinstance(data, bytes) else data.encode("utf-8"))
  return str(path)


def _tsv(rows):
  """The TSV that Python's csv module (and pandas' to_csv(sep='\\t')) writes: a cell holding a quote is quoted."""
  out = io.StringIO()
  csv.writer(out, delimiter="\t", lineterminator="\n").writerows(rows)
  return out.getvalue()


# --------------------------------------------------------------------------------- the header again, reordered
def test_a_reordered_header_is_the_header_of_the_rows_after_it(tmp_path, caplog):
  """`cat a.csv b.csv` with b's columns in another order: its header was read as a row (text 'label', label
  'text') and every row after it with a's columns (texts as labels, the label set one class per review)."""
  path = _write(tmp_path, "joined.csv", "text,label\nGreat fun film,pos\nDull mess,neg\n"
                                        "label,text\npos,Lovely warm story\nneg,Boring cold plot\n")
  with caplog.at_level(logging.WARNING):
    examples = text_data.read_examples([path], text_data.ReadOptions())
  assert [(e.line, e.text, e.label) for e in examples] == [
      (2, "Great fun film", "pos"), (3, "Dull mess", "neg"), (5, "Lovely warm story", "pos"),
      (6, "Boring cold plot", "neg")]
  assert text_data.label_set(examples) == ["neg", "pos"]
  assert f"{path}:4: the header again with its columns in another order" in caplog.text
  assert "(1 such row(s), lines 4)" in caplog.text


# ------------------------------------------------------------------------------------- TSV cells in CSV quoting
def test_tsv_cells_in_csv_quoting_are_read_as_their_text(tmp_path, caplog):
  texts = ['She said "great" twice', "plain text", '"Best" movie ever']
  path = _write(tmp_path, "export.tsv", _tsv([("text", "label")] + [(t, "pos") for t in texts]))
  assert '"She said ""great"" twice"' in open(path, encoding="utf-8").read()
  with caplog.at_level(logging.WARNING):
    examples = text_data.read_text_examples(path, text_data.ReadOptions())
  assert [e.text for e in examples] == texts
  assert f"{path}:2: read 2 TSV cell(s) written in CSV quoting" in caplog.text

  pairs = _write(tmp_path, "pairs.tsv", _tsv([("anchor", "positive"), ('what is "ALBERT"?', 'A "Lite" BERT')]))
  read = embedding_data.read_pairs(pairs, {"anchor": "anchor", "positive": "positive", "negative": ""})
  assert (read[0].anchor, read[0].positive) == ('what is "ALBERT"?', 'A "Lite" BERT')


def test_tsv_bare_quotes_are_text_as_glue_writes_them(tmp_path, caplog):
  """A cell not wholly in CSV quoting (a bare quote inside, GLUE's style) is read as written, and nothing is said."""
  rows = ['"best" movie ever', 'x "y"', '"a" and "b"', '"""', '"Great"']  # ("Great": no doubled quote, its own)
  path = _write(tmp_path, "glue_style.tsv", "text\tlabel\n" + "".join(f"{t}\tpos\n" for t in rows))
  with caplog.at_level(logging.WARNING):
    examples = text_data.read_text_examples(path, text_data.ReadOptions())
  assert [e.text for e in examples] == rows
  assert "CSV quoting" not in caplog.text


def test_a_tsv_cell_split_at_its_quoted_tab_names_the_cause(tmp_path):
  path = _write(tmp_path, "tab_in_cell.tsv", _tsv([("text", "label"), ("a\tb", "pos")]))
  with pytest.raises(TextDataError, match=r"tab_in_cell\.tsv:2: 3 fields, the header has 2; TSV is read without "
                                          r"quoting"):
    text_data.read_text_examples(path, text_data.ReadOptions())


# ------------------------------------------------------------------------------ a space before an opening quote
def test_a_space_before_an_opening_quote_is_said(tmp_path, caplog):
  """`pos, "Great film"`: the quotes stay in the text (reading with skipinitialspace would also strip the leading
  spaces of a correctly written file's cells), and a warning names file:line and the fix."""
  path = _write(tmp_path, "spaced.csv", 'label, text\npos, "Great film"\nneg, "Dull ""art"" film"\n')
  with caplog.at_level(logging.WARNING):
    examples = text_data.read_text_examples(path, text_data.ReadOptions())
  assert [e.text for e in examples] == [' "Great film"', ' "Dull ""art"" film"']
  assert f"{path}:2: 2 cell(s) begin with a space and a quote" in caplog.text
  assert "remove the spaces after the commas" in caplog.text

  comma = _write(tmp_path, "spaced_comma.csv", 'label, text\npos, "Great, fun film"\n')
  with pytest.raises(TextDataError, match=r"spaced_comma\.csv:2: 3 fields, the header has 2; the cell ' \"Great' "
                                          r"begins with a space and a quote.*remove the spaces after the commas"):
    text_data.read_text_examples(comma, text_data.ReadOptions())


# ------------------------------------------------------------------------------- the separator, the encoding
def test_a_tab_separated_csv_says_so(tmp_path):
  path = _write(tmp_path, "tabs.csv", "text\tlabel\nhello\tpos\n")
  with pytest.raises(TextDataError, match=r"tabs\.csv:1: .*looks tab-separated; set task\.input_format=tsv \(or "
                                          r"rename it to \.tsv\)"):
    text_data.read_text_examples(path, text_data.ReadOptions())
  comma = _write(tmp_path, "tabs_comma.csv", "text\tlabel\nhello, world\tpos\n")  # (2 fields in a 1-column file)
  with pytest.raises(TextDataError, match=r"tabs_comma\.csv:2: 2 fields, the header has 1; the header holds tabs"):
    text_data.read_text_examples(comma, text_data.ReadOptions())
  pairs = _write(tmp_path, "pairs_tab.csv", "anchor\tpositive\na\tb\n")
  with pytest.raises(TextDataError, match="looks tab-separated"):
    embedding_data.read_pairs(pairs, {"anchor": "anchor", "positive": "positive", "negative": ""})


@pytest.mark.parametrize("encoding,order,name", [
    ("utf-16-le", "LE", "a.csv"), ("utf-16-be", "BE", "a.csv"), ("utf-16", "LE", "bom.csv"),
    ("utf-16-le", "LE", "a.jsonl"), ("utf-16-le", "LE", "a.tsv")])
def test_a_utf16_file_says_it_is_utf16(tmp_path, encoding, order, name):
  """Without a BOM, UTF-16 text decodes as UTF-8 with a NUL between the letters: the header was 't\\x00e\\x00...'
  and the error 'no column text' pointed at the settings."""
  text = {"a.jsonl": '{"text": "hello", "label": "pos"}\n', "a.tsv": "text\tlabel\nhello\tpos\n"}.get(
      name, "text,label\nhello,pos\n")
  path = _write(tmp_path, name, text.encode(encoding))
  with pytest.raises(TextDataError, match=rf"{name}:1: .*looks UTF-16{order}.*re-save it as UTF-8"):
    text_data.read_text_examples(path, text_data.ReadOptions())


def test_nul_padding_is_not_read_as_utf16(tmp_path):
  path = _write(tmp_path, "pad.jsonl", '{"text": "hello", "label": "pos"}\n' + "\x00" * 20 + "\n")
  with pytest.raises(TextDataError) as error:
    text_data.read_text_examples(path, text_data.ReadOptions())
  assert "pad.jsonl:2: not valid JSON" in str(error.value) and "UTF-16" not in str(error.value)


# -------------------------------------------------------------------------------------------- multiple choice
def test_a_choice_row_without_the_context_key_names_the_setting(tmp_path):
  path = _write(tmp_path, "noctx.jsonl", '{"question": "q", "choices": ["a", "b"], "label": 0}\n')
  with pytest.raises(TextDataError, match=r"noctx\.jsonl:1: no key 'context' \(task\.context_column\); the row's "
                                          r"keys are \['choices', 'label', 'question'\].*or to '' if the file has "
                                          "none"):
    choice_data.read_choice_rows(path, CHOICE_COLUMNS, 4, True)


@pytest.mark.parametrize("label,format_,index", [("1.0", "auto", 1), ("0.0", "auto", 0), (" 1.00 ", "index", 1),
                                                 ("2.0", "index1", 1)])
def test_a_choice_answer_written_as_a_whole_float_is_its_index(tmp_path, label, format_, index):
  """pandas writes an integer column with a missing value as floats ("1.0"): the index, as the JSON number 1.0 is
  and as text_classification reads the label 1.0 as the class 1."""
  path = _write(tmp_path, "float.csv", f'context,question,choices,label\nc,q,"[""a"", ""b""]",{label}\n')
  [example] = choice_data.read_choice_rows(path, CHOICE_COLUMNS, 4, True, label_format=format_)
  assert example.label == index


def test_a_whole_float_answer_that_is_also_a_choice_text_is_refused_as_ambiguous(tmp_path):
  path = _write(tmp_path, "float_text.csv", 'context,question,choices,label\nc,q,"[""1.0"", ""2.0""]",1.0\n')
  with pytest.raises(TextDataError, match="names different choices"):
    choice_data.read_choice_rows(path, CHOICE_COLUMNS, 4, True)


def test_a_choices_cell_written_as_a_python_list_is_that_list(tmp_path):
  """pandas' / datasets' to_csv of a list column writes `['a', 'b']` (Python's repr), as text_ranking's negatives
  are read."""
  path = _write(tmp_path, "repr.csv", "context,question,choices,label\n"
                                      "c,q,\"['a', 'b']\",1\n"
                                      "c,q,\"[\"\"it's\"\", 'b c']\",0\n")
  examples = choice_data.read_choice_rows(path, CHOICE_COLUMNS, 4, True)
  assert [(e.choices, e.label) for e in examples] == [(["a", "b"], 1), (["it's", "b c"], 0)]
  jsonl = _write(tmp_path, "repr.jsonl", json.dumps({"context": "c", "question": "q", "choices": "['a', 'b']",
                                                     "label": 0}) + "\n")
  assert choice_data.read_choice_rows(jsonl, CHOICE_COLUMNS, 4, True)[0].choices == ["a", "b"]
  bad = _write(tmp_path, "bad.csv", "context,question,choices,label\nc,q,\"['a', 1]\",0\n")
  with pytest.raises(TextDataError, match=r"bad\.csv:2: .*Python \['a', 'b'\]"):
    choice_data.read_choice_rows(bad, CHOICE_COLUMNS, 4, True)


def test_a_tsv_written_with_every_cell_quoted_is_read_as_its_text(tmp_path):
  """QUOTE_ALL quotes every cell, a quote inside or not: a row wholly of such cells is read unquoted."""
  path = tmp_path / "all.tsv"
  with open(path, "w", newline="", encoding="utf-8") as f:
    csv.writer(f, delimiter="\t", quoting=csv.QUOTE_ALL).writerows([("text", "label"), ("Great", "pos"),
                                                                     ('a "b" c', "neg")])
  examples = text_data.read_text_examples(str(path), text_data.ReadOptions())
  assert [(e.text, e.label) for e in examples] == [("Great", "pos"), ('a "b" c', "neg")]


def test_shapes_that_are_data_stay_data(tmp_path, caplog):
  """From the review of these rules: pandas' default header `0,1` with the data row `1,0` (a permutation) is data;
  csv.writer's own quoting of a text that begins with ` "` is no space before a quote; a TSV whose header is not
  quoted is no QUOTE_ALL file, so a row of quoted quotations keeps its quotes as its neighbours' do."""
  numbered = _write(tmp_path, "numbered.csv", "0,1\nhello,pos\n1,0\nbye,neg\n")
  rows = [(line, row) for line, row, _ in row_files.read_rows(numbered, "csv")]
  assert rows == [(2, {"0": "hello", "1": "pos"}), (3, {"0": "1", "1": "0"}), (4, {"0": "bye", "1": "neg"})]
  written = tmp_path / "written.csv"
  with open(written, "w", newline="", encoding="utf-8") as f:
    csv.writer(f).writerows([("text", "label"), (' "Best film ever" - a critic', "pos")])
  with caplog.at_level(logging.WARNING):
    assert [e.text for e in text_data.read_text_examples(str(written), text_data.ReadOptions())] == [
        ' "Best film ever" - a critic']
  assert "space" not in caplog.text
  quotes = _write(tmp_path, "quotes.tsv", 'text\tlabel\n"Carpe diem"\t"Seize the day"\n"Carpe diem"\tx\n')
  read = [(line, row) for line, row, _ in row_files.read_rows(quotes, "tsv")]
  assert [row["text"] for _, row in read] == ['"Carpe diem"', '"Carpe diem"']
