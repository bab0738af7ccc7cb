"""CoNLL files: one token per line in columns, a blank line between sentences.

Columns are split at tabs on a line that holds one, else at ASCII spaces; `-DOCSTART-` lines and comment lines
(`is_conll_comment`) carry no token. A sentence's columns become its tokens and tags in `token_and_tag_columns`.
"""

from __future__ import annotations

import logging
import re
from typing import Iterator, List, Optional, Tuple

from tasks.row_files import BadRows
from tasks.row_files import text_lines

logger = logging.getLogger(__name__)

_SEPARATORS = re.compile(r"[ \t]+")


def conll_columns_of(raw: str) -> List[str]:
  """The columns of one CoNLL line: at tabs for a line that holds one (a token may hold a space: "Hà Nội" of a
  tab-separated file lost "Nội", or shifted the tag column onto it), else at ASCII spaces. Never at other
  whitespace: str.split() also splits at a no-break space, which a token may hold ("10\u00a0000")."""
  if "\t" in raw.strip(" \t"):
    return [c.strip(" ") for c in raw.strip(" \t").split("\t") if c.strip(" ")]
  return [c for c in _SEPARATORS.split(raw) if c]


def is_conll_comment(columns: List[str], sentence_started: bool) -> bool:
  """Whether a line is a comment: before a sentence's first token, a first column starting with "#" on a line that
  holds "=" (CoNLL-U's "# text = ...", MultiCoNER's "# id ...<TAB>domain=en"). Read as a token, it added a "#" word
  to each sentence and a made-up tag ("domain=en") that inflated entity F1; a "#" token of a tweet corpus ("#\tO")
  holds no "=" and stays a token."""
  return not sentence_started and columns[0].startswith("#") and any("=" in c for c in columns)


def sentences(path: str) -> Iterator[Tuple[int, List[Tuple[int, List[str]]]]]:
  """(first line, [(line, columns)]) per blank-line-separated sentence; -DOCSTART- and comment lines are dropped
  (the comments counted in the log)."""
  sentence: List[Tuple[int, List[str]]] = []
  comments = 0
  for number, piece in text_lines(path):
    raw = piece.rstrip("\r\n")
    columns = conll_columns_of(raw) if raw.strip() else []
    if columns and columns[0] == "-DOCSTART-":
      columns = []
    if columns and is_conll_comment(columns, bool(sentence)):
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
    logger.info("%s: skipped %d comment lines (a \"#\" line holding \"=\" before a sentence's first token).", path,
                comments)


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
