"""Tests for data_prep.corpus: the Python-docs corpus is real, deterministic, sized and well formed."""

import pytest

from data_prep import corpus


@pytest.fixture(scope="module")
def text():
  return corpus.python_docs_corpus_text(max_bytes=1_000_000)


def test_deterministic_and_sized(text):
  assert corpus.python_docs_corpus_text(max_bytes=1_000_000) == text
  size = len(text.encode("utf-8"))
  assert 900_000 < size <= 1_000_000  # cut at a sentence boundary just under the limit
  small = corpus.python_docs_corpus_text(max_bytes=5_000)
  assert len(small.encode("utf-8")) <= 5_000 and text.startswith(small.rstrip("\n"))
  with pytest.raises(ValueError, match="max_bytes"):
    corpus.python_docs_corpus_text(max_bytes=0)


def test_format_sentences_and_documents(text):
  assert not text.startswith("\n") and text.endswith("\n") and "\n\n\n" not in text
  documents = [d for d in text.split("\n\n") if d.strip()]
  lines = [line for line in text.split("\n") if line]
  assert len(documents) > 200 and len(lines) > 10_000
  assert all(line == line.strip() and "  " not in line for line in lines)
  assert sum(len(d.split("\n")) >= 2 for d in documents) > 100  # most documents have several sentences
  assert "Return the absolute value of the argument." in lines  # abs(): a real docstring sentence


def test_split_sentences_rule():
  doc = """First sentence. Second one! Third? lower case stays. 4 digits start

      indented code line
      second code line

  - item one
  - item two
  =========="""
  assert corpus.split_sentences(doc) == [
      "First sentence.", "Second one!", "Third? lower case stays.", "4 digits start", "indented code line",
      "second code line", "- item one", "- item two"]


def test_write_python_docs_corpus(tmp_path):
  path = tmp_path / "sub" / "corpus.txt"
  stats = corpus.write_python_docs_corpus(str(path), max_bytes=20_000)
  data = path.read_bytes()
  assert stats["bytes"] == len(data) <= 20_000
  assert stats["sentences"] == sum(1 for line in data.decode("utf-8").split("\n") if line)
  assert stats["documents"] >= 2
  assert not [p for p in path.parent.iterdir() if ".tmp" in p.name]  # atomic write left no temporary file
