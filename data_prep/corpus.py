r"""A real English corpus with no download: the docstrings of the installed Python's standard library.

The output is the pretraining-text format of the reference (§3.2): one sentence per line, a blank line between
documents. There is one document per module (its docstring plus those of its public functions), one per public
class (its docstring plus those of its public methods) and one per interactive help() topic (`pydoc_data.topics`,
the language reference's prose). Modules and members are visited in a fixed sorted order and
docstrings are read with `obj.__doc__` (no inheritance, no file paths, no addresses), so the same Python gives the
same bytes.

Sentence rule (simple on purpose, documented here because other data depends on it):
  1. A docstring is cleaned with `inspect.cleandoc` and cut into paragraphs at blank lines.
  2. A paragraph whose lines are indented, or that starts with a doctest prompt (">>>", "..."), or that looks like a
     list (lines starting with "-", "*", "+" or "N.") keeps each non-empty line as its own sentence (code, tables
     and list items are not prose).
  3. Any other paragraph is joined into one line (whitespace runs collapsed) and split after ".", "!" or "?" when
     whitespace follows and the next character is an upper-case letter, a digit, a quote or an opening bracket.

More text without a download (`packages=`, the demo's `--packages`): the docstrings of installed packages
(`DEMO_PACKAGES`: TensorFlow, Keras, NumPy, Matplotlib — ~9 MB, installed by requirements.txt anyway). They are read
from the packages' source files with `ast` (nothing is imported, so no side effects and no import time), after the
standard library and the help topics, with the same document and sentence rules: one document per module (its
docstring plus those of its public top-level functions) and one per public class (its docstring plus those of its
public methods). Folders and files are visited in sorted order; test, vendored and private (`_name`) folders and
modules, and `*_test.py` / `test_*.py` files, are skipped. The bytes depend on the installed versions only.

Usage:
  python -m data_prep.corpus --output=/tmp/pydocs.txt --max_bytes=2000000 [--packages=tensorflow,keras]
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import inspect
import itertools
import json
import logging
import os
import re
import subprocess
import sys
from typing import Iterable, Iterator, List, Optional, Sequence

from official_albert import file_io

logger = logging.getLogger(__name__)

# A fixed list of pure, side-effect-free stdlib modules (no GUI, no `this`/`antigravity`). Sorted when used.
STDLIB_MODULES = (
    "abc", "argparse", "array", "ast", "asyncio", "base64", "bdb", "binascii", "bisect", "bz2", "cProfile",
    "calendar", "cmath", "cmd", "codecs", "collections", "collections.abc", "colorsys", "concurrent.futures",
    "configparser", "contextlib", "contextvars", "copy", "copyreg", "csv", "dataclasses", "datetime", "dbm",
    "decimal", "difflib", "dis", "doctest", "email", "email.message", "email.utils", "enum", "filecmp",
    "fileinput", "fnmatch", "fractions", "ftplib", "functools", "gc", "getopt", "gettext", "glob", "graphlib",
    "gzip", "hashlib", "heapq", "hmac", "html", "html.parser", "http", "http.client", "http.cookies",
    "http.server", "imaplib", "importlib", "inspect", "io", "ipaddress", "itertools", "json", "keyword",
    "linecache", "locale", "logging", "logging.handlers", "lzma", "mailbox", "marshal", "math", "mimetypes",
    "multiprocessing", "netrc", "numbers", "operator", "optparse", "os", "os.path", "pathlib", "pdb", "pickle",
    "pickletools", "pkgutil", "platform", "plistlib", "poplib", "pprint", "profile", "pstats", "queue", "quopri",
    "random", "re", "reprlib", "sched", "secrets", "selectors", "shelve", "shlex", "shutil", "signal", "site",
    "smtplib", "socket", "socketserver", "sqlite3", "stat", "statistics", "string", "stringprep", "struct",
    "subprocess", "symtable", "sys", "sysconfig", "tabnanny", "tarfile", "tempfile", "textwrap", "threading",
    "time", "timeit", "token", "tokenize", "tomllib", "trace", "traceback", "tracemalloc", "types", "typing",
    "unicodedata", "unittest", "unittest.mock", "urllib.parse", "urllib.request", "uuid", "warnings", "wave",
    "weakref", "webbrowser", "wsgiref", "xml.dom.minidom", "xml.etree.ElementTree", "xml.sax", "zipfile",
    "zipimport", "zlib", "zoneinfo",
    # Submodules that define what their packages re-export (members are kept only where they are defined).
    "asyncio.base_events", "asyncio.events", "asyncio.futures", "asyncio.locks", "asyncio.queues",
    "asyncio.streams", "asyncio.subprocess", "asyncio.tasks", "builtins", "code", "codeop", "compileall",
    "concurrent.futures.process", "concurrent.futures.thread", "email.charset", "email.contentmanager",
    "email.errors", "email.feedparser", "email.generator", "email.header", "email.headerregistry",
    "email.policy", "errno", "faulthandler", "http.cookiejar", "importlib.abc", "importlib.machinery",
    "importlib.metadata", "importlib.resources", "importlib.util", "json.decoder", "json.encoder",
    "logging.config", "mmap", "modulefinder", "multiprocessing.connection", "multiprocessing.managers",
    "multiprocessing.pool", "multiprocessing.process", "multiprocessing.queues", "multiprocessing.synchronize",
    "py_compile", "pydoc", "runpy", "select", "ssl", "unittest.case", "unittest.loader", "unittest.result",
    "unittest.runner", "unittest.suite", "urllib.error", "urllib.robotparser", "xml.dom", "xml.sax.saxutils",
    "xmlrpc.client", "xmlrpc.server",
)

# Installed packages whose docstrings `make demo` adds (all in requirements.txt).
DEMO_PACKAGES = ("tensorflow", "keras", "numpy", "matplotlib")
_SKIPPED_FOLDERS = frozenset({"test", "tests", "testing", "third_party", "vendor", "_vendor", "include"})

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(\[`])")
_LIST_ITEM = re.compile(r"^\s*(?:[-*+]\s|\d+[.)]\s)")
_WHITESPACE = re.compile(r"\s+")
_RULE_LINE = re.compile(r"^\s*[*=~^-]{3,}\s*$")  # reST heading underlines carry no text.


def split_sentences(docstring: str) -> List[str]:
  """Splits one docstring into sentences with the rule in the module docstring."""
  text = inspect.cleandoc(docstring)
  sentences: List[str] = []
  for paragraph in re.split(r"\n\s*\n", text):
    lines = [line for line in paragraph.split("\n") if line.strip() and not _RULE_LINE.match(line)]
    if not lines:
      continue
    first = lines[0].lstrip()
    verbatim = (any(line.startswith((" ", "\t")) for line in lines) or first.startswith((">>>", "..."))
                or any(_LIST_ITEM.match(line) for line in lines))
    if verbatim:
      sentences.extend(_WHITESPACE.sub(" ", line).strip() for line in lines)
    else:
      joined = _WHITESPACE.sub(" ", " ".join(lines)).strip()
      sentences.extend(s for s in _SENTENCE_END.split(joined) if s)
  return sentences


def _own_doc(obj) -> Optional[str]:
  doc = getattr(obj, "__doc__", None)
  return doc if isinstance(doc, str) and doc.strip() else None


def _public_members(owner, module_name: str, want_classes: bool):
  """(name, obj) of public members defined in `module_name`, sorted by name."""
  out = []
  for name in sorted(vars(owner)):
    if name.startswith("_"):
      continue
    obj = vars(owner)[name]
    if isinstance(obj, (staticmethod, classmethod)):
      obj = obj.__func__
    if inspect.isclass(obj) != want_classes:
      continue
    if not (inspect.isclass(obj) or inspect.isroutine(obj)):
      continue
    if getattr(obj, "__module__", module_name) != module_name:
      continue
    out.append((name, obj))
  return out


def _unseen_sentences(docstrings: Iterable[Optional[str]], seen: set) -> List[str]:
  """The sentences of the docstrings not in `seen` (which then holds them): a docstring is used at most once."""
  out: List[str] = []
  for doc in docstrings:
    if not doc or not doc.strip() or doc in seen:
      continue
    seen.add(doc)
    out.extend(split_sentences(doc))
  return out


def iter_documents(modules: Sequence[str] = STDLIB_MODULES) -> Iterator[List[str]]:
  """Yields documents (lists of sentences) in a fixed order; a docstring is used at most once."""
  seen = set()

  def sentences_of(objs) -> List[str]:
    return _unseen_sentences((_own_doc(obj) for obj in objs), seen)

  for module_name in sorted(modules):
    try:
      module = importlib.import_module(module_name)
    except ImportError as e:  # e.g. a Python built without sqlite3: counted in the log, not silently dropped.
      logger.warning("corpus: skipping module %s (%s)", module_name, e)
      continue
    functions = [obj for _, obj in _public_members(module, module.__name__, want_classes=False)]
    document = sentences_of([module] + functions)
    if document:
      yield document
    for _, cls in _public_members(module, module.__name__, want_classes=True):
      methods = [obj for _, obj in _public_members(cls, module.__name__, want_classes=False)]
      document = sentences_of([cls] + methods)
      if document:
        yield document


def iter_topic_documents() -> Iterator[List[str]]:
  """Yields the interactive help() topics (`pydoc_data.topics`: language-reference prose), sorted by name."""
  try:
    from pydoc_data.topics import topics  # noqa: PLC0415 (optional: some Python builds lack pydoc_data)
  except ImportError as e:
    logger.warning("corpus: skipping pydoc_data.topics (%s)", e)
    return
  for name in sorted(topics):
    document = split_sentences(topics[name])
    if document:
      yield document


def package_dirs(packages: Sequence[str]) -> List[str]:
  """The source folders of installed top-level packages, found without importing them."""
  out = []
  for name in packages:
    if "." in name:
      raise ValueError(f"packages= takes top-level package names, got {name!r}.")
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
      raise ValueError(f"corpus: package {name!r} is not installed here (or is not a package); install it or drop it "
                       "from --packages.")
    out.append(sorted(spec.submodule_search_locations)[0])
  return out


def _source_files(root: str) -> Iterator[str]:
  for folder, subfolders, files in os.walk(root):
    subfolders[:] = sorted(d for d in subfolders if d not in _SKIPPED_FOLDERS and not d.startswith((".", "_")))
    for name in sorted(files):
      if (name.endswith(".py") and not name.endswith("_test.py") and not name.startswith("test_")
          and (name == "__init__.py" or not name.startswith("_"))):
        yield os.path.join(folder, name)


def iter_package_documents(roots: Sequence[str]) -> Iterator[List[str]]:
  """Yields documents from the docstrings in the source files under `roots` (see the module docstring)."""
  seen = set()

  def sentences_of(nodes) -> List[str]:
    return _unseen_sentences((ast.get_docstring(node, clean=False) for node in nodes), seen)

  def public(body, kinds):
    return [n for n in body if isinstance(n, kinds) and not n.name.startswith("_")]

  functions = (ast.FunctionDef, ast.AsyncFunctionDef)
  for root in roots:
    for path in _source_files(root):
      try:
        with open(path, "rb") as f:
          tree = ast.parse(f.read(), filename=path)
      except (SyntaxError, ValueError) as e:  # counted in the log, not silently dropped
        logger.warning("corpus: skipping %s (%s)", path, e)
        continue
      document = sentences_of([tree] + public(tree.body, functions))
      if document:
        yield document
      for cls in public(tree.body, ast.ClassDef):
        document = sentences_of([cls] + public(cls.body, functions))
        if document:
          yield document


def _assemble(max_bytes: Optional[int], modules: Sequence[str], roots: Sequence[str] = ()) -> str:
  parts: List[str] = []
  size = 0
  for document in itertools.chain(iter_documents(modules), iter_topic_documents(), iter_package_documents(roots)):
    block: List[str] = []
    for sentence in document:
      cost = len(sentence.encode("utf-8")) + 1 + (1 if not block and parts else 0)
      if max_bytes is not None and size + cost > max_bytes:
        break
      block.append(sentence)
      size += cost
    if block:
      parts.append("\n".join(block) + "\n")
    if max_bytes is not None and len(block) < len(document):
      break
  return "\n".join(parts)


_CHILD = """
import json, sys
sys.path.insert(0, sys.argv[1])
from data_prep import corpus
args = json.loads(sys.argv[2])
if args["what"] == "documents":
  out = json.dumps(list(corpus.iter_documents(args["modules"])), ensure_ascii=False)
else:
  out = corpus._assemble(args["max_bytes"], args["modules"], args["roots"])
sys.stdout.buffer.write(out.encode("utf-8"))
"""


def _in_fresh_interpreter(args: dict) -> str:
  """Runs `_CHILD` in a `python -S -E` child (no site-packages, so nothing has rewritten a stdlib docstring)."""
  root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
  result = subprocess.run([sys.executable, "-S", "-E", "-c", _CHILD, root, json.dumps(args)], capture_output=True,
                          check=False)
  if result.returncode:
    raise RuntimeError(f"corpus: the docstring reader failed (exit {result.returncode}): "
                       f"{result.stderr.decode('utf-8', 'replace')[-2000:]}")
  for line in result.stderr.decode("utf-8", "replace").splitlines():
    if line.strip():
      logger.warning("corpus child: %s", line)  # e.g. skipped modules
  return result.stdout.decode("utf-8")


def stdlib_documents(modules: Sequence[str] = STDLIB_MODULES) -> List[List[str]]:
  """`iter_documents(modules)` as a list, read in a fresh interpreter: the same documents whatever the caller imported.

  Keras 3 rewrites `collections.abc.Mapping.get.__doc__` when imported, so reading the docstrings in a process that
  has loaded it gives other sentences than a bare one (see `python_docs_corpus_text`'s `isolated`).
  """
  return json.loads(_in_fresh_interpreter({"what": "documents", "modules": list(modules)}))


def python_docs_corpus_text(max_bytes: Optional[int] = None, modules: Sequence[str] = STDLIB_MODULES,
                            isolated: bool = True, packages: Sequence[str] = ()) -> str:
  """Returns the corpus text, cut at a sentence boundary so that its UTF-8 size is <= max_bytes.

  Args:
    max_bytes: size limit in UTF-8 bytes (None: everything, about 1.4 MB on Python 3.11).
    modules: the stdlib modules to read.
    isolated: read the docstrings in a fresh `python -S -E` child process. Third-party packages rewrite stdlib
      docstrings when imported (Keras replaces `collections.abc.Mapping.get.__doc__`), so reading them in the
      calling process would make the bytes depend on what it imported before.
    packages: installed top-level packages whose docstrings follow (read from source, e.g. `DEMO_PACKAGES`).
  """
  if max_bytes is not None and max_bytes <= 0:
    raise ValueError(f"max_bytes must be positive, got {max_bytes}.")
  roots = package_dirs(packages)
  if not isolated:
    return _assemble(max_bytes, modules, roots)
  return _in_fresh_interpreter({"what": "text", "max_bytes": max_bytes, "modules": list(modules), "roots": roots})


def write_python_docs_corpus(path: str, max_bytes: Optional[int] = None,
                             modules: Sequence[str] = STDLIB_MODULES, packages: Sequence[str] = ()) -> dict:
  """Writes the corpus to `path` atomically and returns counts {"bytes", "documents", "sentences"}."""

  text = python_docs_corpus_text(max_bytes=max_bytes, modules=modules, packages=packages)
  file_io.atomic_write_text(path, text)
  stats = {
      "bytes": len(text.encode("utf-8")),
      "documents": len([d for d in text.split("\n\n") if d.strip()]),
      "sentences": sum(1 for line in text.split("\n") if line),
  }
  logger.info("corpus: wrote %s: %s", path, stats)
  return stats


# absl is imported inside the functions below: the docstring reader runs this module in a bare interpreter (`-S`).
def define_flags(fv=None) -> None:
  """Defines the binary's flags on `fv` (default: absl's global FLAGS; never at import time)."""
  from absl import flags  # noqa: PLC0415 (runs under python -S)
  fv = flags.FLAGS if fv is None else fv
  flags.DEFINE_string("output", None, "Output text file (one sentence per line, blank line between documents).",
                      flag_values=fv)
  flags.DEFINE_integer("max_bytes", 0, "Cut the corpus at a sentence boundary at this many UTF-8 bytes (0 = all).",
                       flag_values=fv)
  flags.DEFINE_list("packages", [], "Installed packages whose docstrings follow the standard library's (read from "
                    f"source, nothing imported), e.g. {','.join(DEMO_PACKAGES)}.", flag_values=fv)
  flags.mark_flag_as_required("output", flag_values=fv)


def main(argv, fv=None) -> None:
  del argv
  from absl import flags  # noqa: PLC0415 (runs under python -S)
  fv = flags.FLAGS if fv is None else fv
  stats = write_python_docs_corpus(fv.output, max_bytes=fv.max_bytes or None, packages=fv.packages)
  print(stats)


def console_main() -> None:
  """The `albert-python-docs-corpus` console script (pyproject.toml)."""
  from official_albert import cli  # noqa: PLC0415 (runs under python -S)
  cli.launch(define_flags, main)


if __name__ == "__main__":
  console_main()
