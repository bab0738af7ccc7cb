"""Tests for data_prep.corpus: the Python-docs corpus is real, deterministic, sized and well formed."""

import sys

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


def _fake_package(root):
  """A package tree with a public module, a class, and everything the reader must skip."""
  pkg = root / "fakepkg"
  (pkg / "tests").mkdir(parents=True)
  (pkg / "_impl").mkdir()
  (pkg / "__init__.py").write_text('"""The fake package. It has two modules."""\n')
  (pkg / "alpha.py").write_text(
      '"""Alpha module docstring."""\n\n'
      'def public_fn():\n  """Public function. Second sentence."""\n\n'
      'def _private_fn():\n  """Private function text."""\n\n'
      'class Widget:\n  """A widget class."""\n\n'
      '  def render(self):\n    """Render the widget."""\n\n'
      '  def _hidden(self):\n    """Hidden method text."""\n\n'
      'def copy_fn():\n  """Public function. Second sentence."""\n')  # a repeated docstring is used once
  (pkg / "broken.py").write_text('"""Never read."""\ndef (:\n')
  (pkg / "_private.py").write_text('"""Private module text."""\n')
  (pkg / "alpha_test.py").write_text('"""Test module text."""\n')
  (pkg / "tests" / "helpers.py").write_text('"""Test folder text."""\n')
  (pkg / "_impl" / "core.py").write_text('"""Private folder text."""\n')
  return pkg


def test_package_documents_are_read_from_source_without_importing(tmp_path, caplog, monkeypatch):
  pkg = _fake_package(tmp_path)
  documents = list(corpus.iter_package_documents([str(pkg)]))
  assert documents == [
      ["The fake package.", "It has two modules."],
      ["Alpha module docstring.", "Public function.", "Second sentence."],
      ["A widget class.", "Render the widget."],
  ]
  assert "broken.py" in caplog.text  # a file that does not parse is named in the log, not silently dropped
  text = " ".join(" ".join(d) for d in documents)
  for skipped in ("Private", "Hidden", "Test", "Never read"):
    assert skipped not in text

  # Through the corpus entry point: found by name on sys.path (never imported), after the standard library.
  monkeypatch.syspath_prepend(str(tmp_path))
  full = corpus.python_docs_corpus_text(modules=["abc"], packages=["fakepkg"])  # in the isolated child
  stdlib_only = corpus.python_docs_corpus_text(modules=["abc"])
  assert full.startswith(stdlib_only.rstrip("\n") + "\n\n")
  assert full.endswith("\n\n".join("\n".join(d) for d in documents) + "\n")
  assert "fakepkg" not in sys.modules
  with pytest.raises(ValueError, match="'no_such_package_xyz' is not installed"):
    corpus.python_docs_corpus_text(packages=["no_such_package_xyz"])
  with pytest.raises(ValueError, match="top-level"):
    corpus.python_docs_corpus_text(packages=["os.path"])


@pytest.mark.large
def test_demo_packages_add_megabytes_of_text():
  """The demo's packages (requirements.txt) add ~9 MB of documentation to the ~1.4 MB of the standard library."""
  roots = corpus.package_dirs(corpus.DEMO_PACKAGES)
  size = 0
  for document in corpus.iter_package_documents(roots):
    size += sum(len(s.encode("utf-8")) + 1 for s in document)
    if size > 5_000_000:
      break  # enough to show megabytes; reading all ~9 MB took ~70 s of the suite
  assert size > 5_000_000


def test_stdlib_documents_do_not_depend_on_what_the_caller_imported():
  import keras  # noqa: F401,PLC0415 (the import under test: Keras 3 rewrites collections.abc.Mapping.get.__doc__)

  documents = corpus.stdlib_documents(["collections.abc"])
  assert documents == corpus.stdlib_documents(["collections.abc"])
  sentences = {s for d in documents for s in d}
  assert any(s.startswith("D.get(k[,d]) -> D[k] if k in D, else d.") for s in sentences)
  assert not any("layout" in s.lower() for s in sentences)  # Keras' LayoutMap text stays out
