"""CoNLL files: one token per line in columns, a blank line between sentences.

Columns are split at tabs in a tab-separated file, else at ASCII spaces and tabs (`file_layout`); `-DOCSTART-` lines
and comment lines (`is_conll_comment`) carry no token. A sentence's columns become its tokens and tags in
`token_and_tag_columns`.
"""

from __future__ import annotations

import collections
import dataclasses
import logging
import re
from typing import Iterator, List, Optional, Tuple

from tasks.row_files import BadRows
from tasks.row_files import text_lines

logger = logging.getLogger(__name__)

_SEPARATORS = re.compile(r"[ \t]+")


@dataclasses.dataclass(frozen=True)
class Layout:
  """How a file's token lines split into columns (`file_layout`).

  Attributes:
    tabs: split at tabs only (a token may then hold a space), else at ASCII spaces and tabs.
    columns: the token lines' most common column count (0 without token lines).
  """
  tabs: bool = False
  columns: int = 0


def conll_columns_of(raw: str, tabs: bool = False) -> List[str]:
  """The columns of one CoNLL line: at tabs in a `tabs` file (`file_layout`), else at ASCII spaces and tabs. Never
  at other whitespace: str.split() also splits at a no-break space, which a token may hold ("10\u00a0000")."""
  if tabs:
    return [c.strip(" ") for c in raw.strip(" \t").split("\t") if c.strip(" ")]
  return [c for c in _SEPARATORS.split(raw) if c]


def file_layout(path: str) -> Layout:
  """The layout of a file's token lines (blank, -DOCSTART- and "#" lines aside), read once before its sentences.

  Tabs only when every token line holds one and the lines split at tabs into fewer distinct column counts than at
  any whitespace: so "Hà Nội<TAB>Np<TAB>B-LOC" of a tab-separated Vietnamese file keeps its token (split at spaces
  too it lost "Nội", or shifted the tag column onto it), while "EU NNP B-NP<TAB>B-ORG", a space-separated file with
  one tab before its last column, keeps four columns (split at tabs its token was "EU NNP B-NP").
  """
  all_tabs, tab_counts, any_counts = True, collections.Counter(), collections.Counter()
  for _, piece in text_lines(path):
    raw = piece.rstrip("\r\n")
    if not raw.strip() or raw.lstrip().startswith(("#", "-DOCSTART-")):
      continue
    if len(conll_columns_of(raw)) > 1:  # (a one-column line splits alike either way: it decides nothing)
      all_tabs = all_tabs and "\t" in raw.strip(" \t")
    tab_counts[len(conll_columns_of(raw, tabs=True))] += 1
    any_counts[len(conll_columns_of(raw))] += 1
  tabs = bool(tab_counts) and all_tabs and len(tab_counts) < len(any_counts)
  counts = tab_counts if tabs else any_counts
  return Layout(tabs, counts.most_common(1)[0][0] if counts else 0)


def is_conll_comment(columns: List[str], sentence_started: bool, layout: Layout = Layout()) -> bool:
  """Whether a line is a comment: before a sentence's first token, a first column starting with "#" on a line with
  another column count than the file's token lines (CoNLL-U's "# newdoc", GermEval's "#<TAB>url [date]") or with
  "=" past its first column (CoNLL-U's "# text = ...", MultiCoNER's "# id ...<TAB>domain=en"). Read as a token, it
  added a "#" word to each sentence and a made-up tag ("domain=en") that inflated entity F1, or failed the sentence;
  a "#" token of a tweet corpus ("#<TAB>O", "#=<TAB>O") stays a token."""
  if sentence_started or not columns[0].startswith("#"):
    return False
  return (layout.columns and len(columns) != layout.columns) or any("=" in c for c in columns[1:])


def sentences(path: str) -> Iterator[Tuple[int, List[Tuple[int, List[str]]]]]:
  """(first line, [(line, columns)]) per blank-line-separated sentence; -DOCSTART- and comment lines are dropped
  (the comments counted in the log)."""
  layout = file_layout(path)
  sentence: List[Tuple[int, List[str]]] = []
  comments = 0
  for number, piece in text_lines(path):
    raw = piece.rstrip("\r\n")
    columns = conll_columns_of(raw, layout.tabs) if raw.strip() else []
    if columns and columns[0] == "-DOCSTART-":
      columns = []
    if columns and is_conll_comment(columns, bool(sentence), layout):
      comments += 1
      continue
    if columns:
      sentence.append((number, columns))
    elif sentence:
      yield sentence[0][0], sentence
      sentence = []
  if sentence:
    yield sentence[0][0], sentence
  if comments:
    logger.info("%s: skipped %d comment lines (\"#\" lines before a sentence's first token, with another column "
                "count than its tokens or a \"=\").", path, comments)


def token_and_tag_columns(sentence: List[Tuple[int, List[str]]], token_column: int, tag_column: int,
                          with_labels: bool, bad: BadRows) -> Tuple[Optional[List[str]], Optional[List[str]]]:
  """(tokens, tags) of one CoNLL sentence from the configured columns (tags: [] without labels); None for the one
  a line lacks, which is a bad row (an empty token would be tagged; a missing tag would shift the rest)."""
  tokens, tags = [], []
  for line, columns in sentence:
    if not -len(columns) <= token_column < len(columns):
      bad(line, f"no token column {token_column} (the line has {len(columns)} columns); set "
                "task.conll_token_column")
      return None, None
    tokens.append(columns[token_column])
    if with_labels:
      if len(columns) < 2 or not -len(columns) <= tag_column < len(columns):
        bad(line, f"no tag column {tag_column} (the line has {len(columns)} columns)")
        return tokens, None
      tags.append(columns[tag_column])
  return tokens, tags
