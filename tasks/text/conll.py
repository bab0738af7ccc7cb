"""CoNLL files: one token per line in columns, a blank line between sentences.

Columns are split at tabs in a tab-separated file, else at ASCII spaces and tabs (`file_layout`: decided per file from
its first lines, or forced by `task.conll_separator`); `-DOCSTART-` lines and comment lines (`is_conll_comment`) carry
no token. A sentence's columns become its tokens and tags in `token_and_tag_columns`.
"""

from __future__ import annotations

import collections
import dataclasses
import itertools
import logging
import re
from typing import Iterable, Iterator, List, Optional, Tuple

from tasks.row_files import BadRows
from tasks.row_files import text_lines

logger = logging.getLogger(__name__)

_SEPARATORS = re.compile(r"[ \t]+")
SEPARATORS = ("auto", "tab", "space")  # task.conll_separator's values (`file_layout`)
LAYOUT_SAMPLE_LINES = 1000  # the token lines (not blank, -DOCSTART- or "#") a file's layout is decided from


@dataclasses.dataclass(frozen=True)
class Layout:
  """How a file's token lines split into columns (`file_layout`).

  Attributes:
    tabs: split at tabs only (a token may then hold a space), else at ASCII spaces and tabs.
    columns: the token lines' most common column count (0 without token lines).
    provisional: at spaces for now, in "auto", though every line sampled held a tab and none had a space inside
      a tab column (the two splits agreed): a later line whose tab columns hold a space turns it to tabs.
  """
  tabs: bool = False
  columns: int = 0
  provisional: bool = False


def conll_columns_of(raw: str, tabs: bool = False) -> List[str]:
  """The columns of one CoNLL line: at tabs in a `tabs` file (`file_layout`), else at ASCII spaces and tabs. Never
  at other whitespace: str.split() also splits at a no-break space, which a token may hold ("10\u00a0000")."""
  if tabs:
    return [c.strip(" ") for c in raw.strip(" \t").split("\t") if c.strip(" ")]
  return [c for c in _SEPARATORS.split(raw) if c]


def check_separator(separator: str) -> str:
  """`separator` when it is one of `SEPARATORS`, else a ValueError naming `task.conll_separator` and its values."""
  if separator not in SEPARATORS:
    raise ValueError(f"task.conll_separator={separator!r} is not one of {', '.join(SEPARATORS)} (auto: decided per "
                     "file from its first lines; tab: columns at tabs only, a token may hold spaces; space: at spaces "
                     "and tabs).")
  return separator


def file_layout(path: str, lines: Iterable[str], separator: str = "auto") -> Layout:
  """The layout of `path`'s token lines from `lines` (its first lines; blank, -DOCSTART- and "#" lines aside).

  `separator` "tab" or "space" decides; "auto" is tabs only when every line of more than one column holds a tab and
  the lines split at tabs into fewer distinct column counts than at any whitespace: so "Hà Nội<TAB>Np<TAB>B-LOC" of a
  tab-separated Vietnamese file keeps its token (split at spaces too it lost "Nội", or shifted the tag column onto
  it), while "EU NNP B-NP<TAB>B-ORG", a space-separated file with one tab before its last column, keeps four columns
  (split at tabs its token was "EU NNP B-NP"). A one-column line splits alike either way: it decides nothing (one
  such line in a tab file cut "Hà Nội" to "Hà"). As many distinct counts both ways, with spaces in the tab columns
  (every token holds as many spaces: one line, one sentence of two-word names), is a tie: read at spaces, as before,
  with a warning naming `task.conll_separator`, the setting that decides it.

  Why a sample: the layout was read from the whole file, a second reading of it, which doubled a file's reading
  time. Columns, not separator characters, are counted: a space file padded to align its columns ("EU   NNP  B-NP")
  holds other numbers of spaces per line, not other numbers of columns.
  """
  tab_counts, any_counts, sample = collections.Counter(), collections.Counter(), []
  all_tabs, spaced = True, None  # spaced: the first line whose tab columns hold a space
  for raw in lines:
    by_tabs, by_any = len(conll_columns_of(raw, tabs=True)), len(conll_columns_of(raw))
    if by_any > 1:  # (a one-column line splits alike either way: it decides nothing)
      all_tabs = all_tabs and "\t" in raw.strip(" \t")
    tab_counts[by_tabs] += 1  # (column counts, not separator counts: a space file padded to align its columns)
    any_counts[by_any] += 1
    if spaced is None and by_tabs > 1 and by_any > by_tabs:
      spaced = raw
    sample.append(raw)
  if separator == "auto":
    tabs = bool(tab_counts) and all_tabs and len(tab_counts) < len(any_counts)
    if all_tabs and spaced and len(tab_counts) == len(any_counts):
      logger.warning("%s: every token line holds a tab, but its column counts cannot tell a tab-separated file whose "
                     "tokens hold spaces from a space-separated one (e.g. %r): its columns are split at spaces and "
                     "tabs. Set task.conll_separator=tab to keep the spaces inside tokens (or =space to keep this "
                     "reading without this warning).", path, spaced)
  else:
    tabs = check_separator(separator) == "tab"
  counts = collections.Counter(len(conll_columns_of(raw, tabs)) for raw in sample)
  provisional = separator == "auto" and not tabs and bool(tab_counts) and all_tabs and spaced is None
  return Layout(tabs, counts.most_common(1)[0][0] if counts else 0, provisional)


def is_conll_comment(columns: List[str], sentence_started: bool, layout: Layout = Layout()) -> bool:
  """Whether a line is a comment: before a sentence's first token, a first column starting with "#" on a line with
  another column count than the file's token lines (CoNLL-U's "# newdoc", GermEval's "#<TAB>url [date]") or with
  "=" past its first column (CoNLL-U's "# text = ...", MultiCoNER's "# id ...<TAB>domain=en"). Read as a token, it
  added a "#" word to each sentence and a made-up tag ("domain=en") that inflated entity F1, or failed the sentence;
  a "#" token of a tweet corpus ("#<TAB>O", "#=<TAB>O") stays a token."""
  if sentence_started or not columns[0].startswith("#"):
    return False
  return (layout.columns and len(columns) != layout.columns) or any("=" in c for c in columns[1:])


def sentences(path: str, separator: str = "auto") -> Iterator[Tuple[int, List[Tuple[int, List[str]]]]]:
  """(first line, [(line, columns)]) per blank-line-separated sentence; -DOCSTART- and comment lines are dropped
  (the comments counted in the log). The layout (`file_layout`, under `separator`) is decided from the first
  `LAYOUT_SAMPLE_LINES` token lines, kept while the file is read on: the file is read once."""
  check_separator(separator)
  lines = ((number, piece.rstrip("\r\n")) for number, piece in text_lines(path))
  head, sampled = [], 0
  for number, raw in lines:
    head.append((number, raw))
    sampled += _is_token_line(raw)
    if sampled >= LAYOUT_SAMPLE_LINES:
      break
  layout = file_layout(path, (raw for _, raw in head if _is_token_line(raw)), separator)
  sentence: List[Tuple[int, List[str]]] = []
  comments, untabbed = 0, layout.tabs and separator == "auto"  # untabbed: no line without a tab warned about yet
  for number, raw in itertools.chain(head, lines):
    columns = conll_columns_of(raw, layout.tabs) if raw.strip() else []
    if layout.provisional and len(columns) > 1 and _is_token_line(raw):
      layout = _past_the_sample(path, number, raw, columns, layout)
      columns = conll_columns_of(raw, layout.tabs)
      untabbed = layout.tabs
    if untabbed and len(columns) == 1 and " " in columns[0] and _is_token_line(raw):
      untabbed = False  # (past the sample: its first lines said tabs, this one is split at spaces only)
      logger.warning("%s:%d: no tab, but spaces, in a file read as tab-separated (from its first %d token lines): "
                     "the line is one column %r. Set task.conll_separator=space if the file is space-separated.",
                     path, number, LAYOUT_SAMPLE_LINES, columns[0])
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


def _past_the_sample(path: str, number: int, raw: str, columns: List[str], layout: Layout) -> Layout:
  """`layout` for a provisional file's line past its sample: tabs from here on when the line's tab columns hold a
  space (the lines before split alike either way, so reading them at spaces changed nothing: as the whole file's
  columns decided before its layout was sampled); no longer provisional once a line holds no tab."""
  if "\t" not in raw.strip(" \t"):
    return dataclasses.replace(layout, provisional=False)
  if len(conll_columns_of(raw, tabs=True)) < len(columns):
    logger.warning("%s:%d: a token with a space inside, in a file whose lines before all held tabs: its columns are "
                   "split at tabs from here (%r). Set task.conll_separator to tab or space to decide it for the "
                   "whole file.", path, number, raw)
    return dataclasses.replace(layout, tabs=True, provisional=False)
  return layout


def _is_token_line(raw: str) -> bool:
  """Whether a line counts toward the layout: not blank, not -DOCSTART-, not starting with "#"."""
  return bool(raw.strip()) and not raw.lstrip().startswith(("#", "-DOCSTART-"))


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
