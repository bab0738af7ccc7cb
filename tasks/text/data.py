"""Your own labelled text: CSV / TSV / JSONL rows and CoNLL / JSONL token tags → examples → fine-tuning records.

Readers (one example per row / sentence, in file order):
- CSV (standard quoting; `;`-separated when the header has `;` and no `,`, as spreadsheets export in locales with a
  decimal comma, whose regression labels may then be written `4,8`) and TSV (no quoting, GLUE-style: texts may hold
  bare `"`): a header row names the columns; `text_column`, optional `text_pair_column`, `label_column` and
  `id_column` pick them. A row equal to the header (files concatenated) is skipped with a warning.
- JSONL: one JSON object per line; the same keys. Labels may be strings, numbers (a whole number is one label
  however written: `1` and `1.0` are the class "1") or (multi-label) lists; tokens and tags (token classification)
  are lists, the tags read as labels are (null / true / false refused). A null `text_pair_column` is an empty pair
  (one segment, as CSV's empty cell); another null key is a bad row saying so.

Labels and tags of every format are stripped and compared in Unicode NFC, so one typed in NFC and in NFD is one
label; labels equal but for case, width or spaces stay separate classes (as written) with a warning naming them.
- CoNLL: one token per line, tab- or space-separated columns (token in `conll_token_column`, tag in
  `conll_tag_column`, default first and last), a blank line between sentences, `-DOCSTART-` and comment lines
  ignored (`tasks.text.conll`).

Bad rows (a missing column, an empty text, a label that is not a number for regression, a label outside a fixed
label set, tokens and tags of different lengths) raise `TextDataError` naming `file:line`, the column and the fix —
or, with `skip_bad_rows`, are skipped, counted and logged with the first few reasons. Blank CSV/TSV/JSONL lines
carry no example and are passed over.

Token classification puts each word's tag on the word's first SentencePiece piece; every other position
(continuation pieces, [CLS], [SEP], padding) holds `IGNORE_LABEL` (-100) and is ignored by the loss and the
metrics. `word_starts` marks the first pieces, so predictions map back to words. A sentence whose pieces do not fit
in `max_seq_length` is split at word boundaries into consecutive sub-sentences (`alignment.sub_sentences`, as the
reference's `tagging_data_lib`), each its own record carrying `sentence_id` (the sentence's index in the records
file), `sub_sentence_id` and `records_id` (`sentence_ids`: files evaluated together never merge): every word is
trained on, scored and predicted (the task joins the sub-sentences back per sentence, `tasks.text.tagging`); a single
word longer than a sequence keeps its first pieces. A word that tokenizes to no piece (a lone zero-width space or
BOM, a JSONL "") is written as `<unk>`, as the reference does, so that its tag is scored too (counted and logged
with an example); splits and such words are logged.

Long because: the four raw formats (CSV, TSV, JSONL, CoNLL) share one bad-row policy, one label reading and one record
layout; a reader per file would repeat them or pass them around.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import os
import time
from typing import Any, Dict, Iterable, Iterator, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from official_albert import file_io
from official_albert.tokenization import pack_ids
from official_albert.tokenization.alignment import align_words  # shared with the tagging predictor
from official_albert.tokenization.alignment import sub_sentences
from official_albert.tokenization.alignment import unk_id
from tasks.row_files import BadRows
from tasks.row_files import check_columns  # noqa: F401  (the text tasks' readers, importable from here)
from tasks.row_files import decimal_comma_hint
from tasks.row_files import EXTENSIONS  # noqa: F401
from tasks.row_files import file_format
from tasks.row_files import FORMATS  # noqa: F401
from tasks.row_files import read_row_file
from tasks.row_files import read_rows  # noqa: F401
from tasks.row_files import RowProblem
from tasks.row_files import TextDataError
from tasks.text import conll
from tasks.text import label_cells
from tasks.text import repeated_rows
from tasks.text import sentence_ids
from tasks.text.label_lookup import label_text
from tasks.text.label_lookup import lookup
from tasks.text.label_names import label_set  # noqa: F401  (importable from here, as before)
from tasks.text.label_names import warn_empty_label_cells

logger = logging.getLogger(__name__)

IGNORE_LABEL = -100  # label id of positions the token-classification loss and metrics skip


@dataclasses.dataclass(frozen=True)
class ReadOptions:
  """How rows are read (the task config's fields of the same names).

  Attributes:
    text_column, text_pair_column, label_column, id_column: column names / JSON keys ('' = none).
    input_format: csv | tsv | jsonl | conll; '' = from the file extension.
    with_labels: read and check the label column (training and evaluation); False for prediction.
    label_kind: "class" (one string label), "multi" (a list, or strings joined by `label_separator`), "float"
      (regression) or "tags" (token classification).
    label_separator: multi-label CSV/TSV cells ("a|b"); '' = one label per cell.
    labels: the fixed label set; a label outside it is a bad row. Empty = any label (the training file's set).
    skip_bad_rows: skip, count and log bad rows instead of raising.
    conll_token_column, conll_tag_column: CoNLL columns (negative = from the end).
    conll_separator: CoNLL columns at tabs ("tab"), at spaces and tabs ("space"), or per file ("auto": `conll`).
    comparison: the run's tokenizer options and tokenizer_mode, by which repeated texts are compared (None: the
      tokenizer's defaults; a cased run's "US" and "us" are two texts).
  """
  text_column: str = "text"
  text_pair_column: str = ""
  label_column: str = "label"
  id_column: str = ""
  input_format: str = ""
  with_labels: bool = True
  label_kind: str = "class"
  label_separator: str = "|"
  labels: Tuple[str, ...] = ()
  skip_bad_rows: bool = False
  conll_token_column: int = 0
  conll_tag_column: int = -1
  conll_separator: str = "auto"
  comparison: Optional[Mapping[str, Any]] = None


@dataclasses.dataclass
class TextExample:
  """One row. `label`: str, float, list of str (multi-label / tags) or None; `tokens`: words (token tasks)."""
  path: str
  line: int
  guid: str
  text: str = ""
  text_pair: Optional[str] = None
  label: Any = None
  tokens: Optional[List[str]] = None


# ------------------------------------------------------------------------------------------------------ files
def split_paths(input_path: str) -> List[str]:
  """The comma-separated entries of an `input_path`."""
  return [p.strip() for p in (input_path or "").split(",") if p.strip()]


def is_raw_input(input_path: str, explicit: str = "") -> bool:
  """True when every entry of `input_path` is a raw text file (by extension, or `explicit` format)."""
  entries = split_paths(input_path)
  if not entries or input_path.strip() == "dummy":
    return False
  kinds = [file_format(p, explicit) is not None for p in entries]
  if any(kinds) and not all(kinds):
    raise ValueError(f"input_path {input_path!r} mixes raw text files and other files; list one kind.")
  return all(kinds)


def expand_paths(input_path: str) -> List[str]:
  """Files of a comma-separated list of paths / globs (each glob sorted); a pattern matching nothing raises. An entry
  that exists is that file, even when its name holds `[`, `*` or `?` (`reviews [2024].csv` as a pattern matches
  nothing); only an entry that does not exist is read as a glob. A file that several entries name
  (`dir/*.csv,dir/test.csv`) is read once, where it first appears (its rows would count twice in training and
  evaluation, and appear twice in its predictions file)."""
  files, seen, repeated = [], set(), []
  for entry in split_paths(input_path):
    if file_io.literal_path(entry):
      matched = [entry]
    else:
      matched = sorted(file_io.glob(entry)) if any(c in entry for c in "*?[") else []
    if not matched:
      raise FileNotFoundError(f"input_path entry {entry!r} matches no file.")
    for path in matched:
      key = os.path.realpath(path) if file_io.is_local(path) else path
      if key in seen:
        repeated.append(path)
        continue
      seen.add(key)
      files.append(path)
  if repeated:
    logger.warning("input_path %r names %d file(s) more than once (%s); each is read once.", input_path,
                   len(repeated), ", ".join(repeated[:5]))
  return files


def resolve_labels(values: Sequence[Any], labels: Sequence[str]) -> Tuple[List[str], List[str]]:
  """(labels, unknown): each value as the name of `labels` it maps to (`lookup`), or its `label_text` form when no
  fixed set is given; `unknown`: the `label_text` forms the fixed set lacks."""
  if not labels:
    return [label_text(v) for v in values], []
  ids = [lookup(labels, v) for v in values]
  return [labels[i] for i in ids if i is not None], [label_text(v) for v, i in zip(values, ids) if i is None]


def unknown_labels(found: Iterable[str], labels: Sequence[str]) -> List[str]:
  """The labels of `found` (read without a fixed set) that `labels` (labels.json) has no output for (sorted)."""
  named = set(map(label_text, labels))
  return sorted(f for f in set(found) if lookup(labels, f) is None and f not in named)


def _label(value: Any, options: ReadOptions) -> Any:
  """The parsed label of one cell / JSON value; `RowProblem` when it is not one."""
  column = options.label_column
  if options.label_kind == "float":
    try:  # (float() would take True as 1.0 and "1_000" as 1000.0)
      if isinstance(value, bool) or (isinstance(value, str) and "_" in value):
        raise ValueError
      score = float(value)
    except (TypeError, ValueError):
      raise RowProblem(f"column {column!r}: {value!r} is not a number (text_regression){decimal_comma_hint(value)}"
                       ) from None
    if not math.isfinite(score):
      raise RowProblem(f"column {column!r}: {value!r} is not a finite number")
    return score
  if options.label_kind == "multi":
    value = label_cells.listed(value)  # (a cell written as a list: pandas' to_csv of a list column)
    if isinstance(value, list):
      if not all(isinstance(v, (str, int, float)) and not isinstance(v, bool) and label_text(v) for v in value):
        raise RowProblem(f"column {column!r}: {value!r} holds a value that is not a label (null, true / false, NaN, "
                         "an empty string or a nested list)")
      labels = list(value)
    elif isinstance(value, str):
      labels = [p for p in (value.split(options.label_separator) if options.label_separator else [value]) if p.strip()]
    else:
      raise RowProblem(f"column {column!r}: {value!r} is not a list or a string of labels")
  else:
    if isinstance(value, (dict, list)) or value is None or isinstance(value, bool):
      raise RowProblem(f"column {column!r}: {value!r} is not a single label")
    labels = [value]
    if not label_text(value):
      raise RowProblem(f"column {column!r} is empty (or NaN: a missing value)")
  labels, unknown = resolve_labels(labels, options.labels)
  if unknown:
    raise RowProblem(f"column {column!r}: label {unknown[0]!r} was not seen in training (known labels: "
                     f"{list(options.labels)}); add it to the training data (or task.labels) and retrain")
  return labels if options.label_kind == "multi" else labels[0]


def read_text_examples(path: str, options: ReadOptions) -> List[TextExample]:
  """Reads a CSV / TSV / JSONL file of texts (and labels); see the module docstring."""
  wanted = {"text_column": options.text_column, "text_pair_column": options.text_pair_column,
            "id_column": options.id_column}
  if options.with_labels:
    wanted["label_column"] = options.label_column
  fmt = file_format(path, options.input_format)

  def parse(line: int, row: Dict[str, Any]) -> TextExample:
    if fmt == "jsonl" and options.text_pair_column and row.get(options.text_pair_column, "") is None:
      row = dict(row, **{options.text_pair_column: ""})  # no second text (pandas / datasets write null): CSV's ''
    missing = [c for c in wanted.values() if c and row.get(c) is None]
    if missing:
      if fmt != "jsonl":
        raise RowProblem(f"column {missing[0]!r} is missing")
      raise RowProblem(f"key {missing[0]!r} is null" if missing[0] in row else f"no {missing[0]!r} key")
    text = row[options.text_column]
    pair = row[options.text_pair_column] if options.text_pair_column else None
    if not isinstance(text, str) or not text.strip() or (pair is not None and not isinstance(pair, str)):
      raise RowProblem(f"column {options.text_column!r}: the text is empty or not a string")
    label = _label(row[options.label_column], options) if options.with_labels else None
    guid = str(row[options.id_column]) if options.id_column else str(line)
    return TextExample(path, line, guid, text, pair, label)

  numbers = [options.label_column] if options.with_labels and options.label_kind == "float" else []
  examples = read_row_file(path, options.input_format, options.skip_bad_rows, wanted,
                           "text classification / regression read", parse, "examples", numbers)
  if options.with_labels and options.label_kind == "multi":
    warn_empty_label_cells(path, options.label_column, examples)
  return examples


def _checked_tags(labels: Sequence[str], bad: BadRows, line: int, tokens: List[str], tags: Sequence[Any],
                  lines: Optional[List[int]] = None) -> Optional[List[str]]:
  """`tags` as `resolve_labels` names them, or None for a bad row (counted, or raised by `bad`); `lines`: each
  token's line (a CoNLL sentence's), so that an unseen tag's error names its own line."""
  given = list(tags)
  tags, unknown = resolve_labels(given, labels)
  if len(tags) + len(unknown) != len(tokens):
    bad(line, f"{len(tokens)} tokens but {len(tags)} tags")
  elif unknown:
    at = lines[next(i for i, t in enumerate(given) if lookup(labels, t) is None)] if lines else line
    bad(at, f"tag {unknown[0]!r} was not seen in training (known tags: {list(labels)}); add it to the training "
            "data (or task.labels) and retrain")
  else:
    return tags
  return None


def read_token_examples(path: str, options: ReadOptions) -> List[TextExample]:
  """Reads CoNLL or JSONL (`text_column` = token list, `label_column` = tag list) token-tagging examples."""
  fmt = file_format(path, options.input_format)
  if fmt not in ("conll", "jsonl"):
    raise TextDataError(f"{path}: {fmt or 'unknown'} format; token classification reads CoNLL or JSONL (set "
                        "task.input_format).")
  bad = BadRows(path, options.skip_bad_rows)
  examples, total = [], 0

  def check_tags(line, tokens, tags, lines=None) -> Optional[List[str]]:
    return _checked_tags(options.labels, bad, line, tokens, tags, lines)

  if fmt == "conll":
    for first, sentence in conll.sentences(path, options.conll_separator):
      total += 1
      tokens, tags = conll.token_and_tag_columns(sentence, options.conll_token_column, options.conll_tag_column,
                                                  options.with_labels, bad)
      lines = [line for line, _ in sentence]
      tags = check_tags(first, tokens, tags, lines) if options.with_labels and tags is not None else tags
      if tokens is None or (options.with_labels and tags is None):
        continue
      examples.append(TextExample(path, first, str(first), " ".join(tokens), None,
                                  tags if options.with_labels else None, tokens))
  else:
    for line, row, error in read_rows(path, "jsonl"):
      total += 1
      if error:
        bad(line, error)
        continue
      tokens = row.get(options.text_column)
      if not isinstance(tokens, list) or not tokens or not all(isinstance(t, str) for t in tokens):
        bad(line, f"key {options.text_column!r}: expected a non-empty list of token strings")
        continue
      tags = None
      if options.with_labels:
        tags = row.get(options.label_column)
        if not isinstance(tags, list):
          bad(line, f"key {options.label_column!r}: expected a list of tags")
          continue
        wrong = [t for t in tags if not isinstance(t, (str, int, float)) or isinstance(t, bool) or not label_text(t)]
        if wrong:  # (str() made null the tag 'None' and 1 / 1.0 two tags)
          bad(line, f"key {options.label_column!r}: tag {wrong[0]!r} is not a tag (null, true / false, NaN, an "
                    "empty string or a nested list); write each tag as a string or a number")
          continue
        tags = check_tags(line, tokens, tags)
        if tags is None:
          continue
      if options.id_column and row.get(options.id_column) is None:  # (a null id was written "None")
        bad(line, f"key {options.id_column!r} is null" if options.id_column in row else f"no {options.id_column!r} key")
        continue
      guid = str(row[options.id_column]) if options.id_column else str(line)
      examples.append(TextExample(path, line, guid, " ".join(tokens), None, tags, tokens))
  bad.log(total)
  logger.info("%s: read %d sentences (%s).", path, len(examples), fmt)
  return examples


def read_examples(paths: Sequence[str], options: ReadOptions, training_input: str = "") -> List[TextExample]:
  """The examples of `paths`, in order. Labelled texts are checked for repeats (`warn_repeated_texts`): within the
  files, and, given `training_input` (an evaluation's: the run's training input_path), against its rows, compared
  as the run's tokenizer reads them (`options.comparison`)."""
  reader = read_token_examples if options.label_kind == "tags" else read_text_examples
  examples = [e for p in paths for e in reader(p, options)]
  if options.with_labels and options.label_kind == "multi":
    label_cells.warn_joined_labels(examples, options.label_separator)
  if options.with_labels and options.label_kind != "tags":
    training = []
    try:  # (only a raw training file other than these; one that cannot be read now is not this read's error)
      if training_input and is_raw_input(training_input, options.input_format):
        training_paths = expand_paths(training_input)
        if sorted(map(os.path.realpath, training_paths)) != sorted(map(os.path.realpath, paths)):
          training = [e for p in training_paths for e in reader(p, options)]
        else:
          logger.warning("The evaluation input is the training input (%s): its scores are not held-out scores.",
                         training_input)
    except (OSError, ValueError) as e:
      logger.info("Evaluation rows not compared with the training rows (%s): %s", training_input, e)
    repeated_rows.warn_repeated_texts(examples, training, options.comparison)
  return examples


# ---------------------------------------------------------------------------------------------------- records
def text_record(example: TextExample, ids_a: Sequence[int], ids_b: Optional[Sequence[int]], seq_length: int,
                label_kind: str, labels: Sequence[str]) -> Dict[str, np.ndarray]:
  """`[CLS] A [SEP] (B [SEP])` (as GLUE: a B without pieces, an empty pair cell, packs as one segment, the reference's
  `if tokens_b:`) and `label_ids`: class index (-1 unlabelled), float score (nan), or a multi-hot float vector over
  `labels` (multi-label)."""
  ids_b = ids_b if ids_b is not None and len(ids_b) else None
  record = {k: np.asarray(v, np.int32) for k, v in pack_ids(ids_a, ids_b, seq_length).items()}
  if label_kind == "float":
    record["label_ids"] = np.float32(np.nan if example.label is None else example.label)
  elif label_kind == "multi":
    hot = np.zeros([len(labels)], np.float32)
    for v in example.label or ():
      hot[lookup(labels, v)] = 1.0
    record["label_ids"] = hot
  else:
    record["label_ids"] = np.int32(-1 if example.label is None else lookup(labels, example.label))
  return record


def token_record(example: TextExample, word_pieces: Sequence[Sequence[int]], seq_length: int,
                 labels: Sequence[str], unk: Optional[int] = None) -> Tuple[Dict[str, np.ndarray], int]:
  """(record, words cut): encoder inputs, `label_ids` [S] (tag on first pieces, IGNORE_LABEL elsewhere; all
  IGNORE_LABEL when unlabelled) and `word_starts` [S] of all of `example`'s words in one sequence (`token_records`
  splits a sentence that does not fit); `unk`: the id a word without pieces is written as (`align_words`)."""
  ids, first = align_words(word_pieces, seq_length, unk)
  record = {k: np.asarray(v, np.int32) for k, v in pack_ids(ids, None, seq_length).items()}
  label_ids = np.full([seq_length], IGNORE_LABEL, np.int32)
  starts = np.zeros([seq_length], np.int32)
  for i, position in enumerate(first):
    if position is None:
      continue
    starts[position] = 1
    if example.label is not None:
      label_ids[position] = lookup(labels, example.label[i])
  record["label_ids"], record["word_starts"] = label_ids, starts
  return record, sum(1 for i, p in enumerate(first) if p is None and word_pieces[i])


def token_records(example: TextExample, word_pieces: Sequence[Sequence[int]], seq_length: int, labels: Sequence[str],
                  sentence_id: int, unk: Optional[int] = None, records_id: int = -1) -> List[Dict[str, np.ndarray]]:
  """The records of one sentence: one per sub-sentence (`sub_sentences`), each with `sentence_id`, `records_id` and
  its `sub_sentence_id` (0, 1, ...), so that the task joins them back in order whatever order they come back in."""
  out = []
  for sub, (start, end) in enumerate(sub_sentences(word_pieces, seq_length, unk)):
    part = dataclasses.replace(example, tokens=example.tokens[start:end],
                               label=None if example.label is None else example.label[start:end])
    record, _ = token_record(part, word_pieces[start:end], seq_length, labels, unk)
    record.update(sentence_id=np.int32(sentence_id), sub_sentence_id=np.int32(sub), records_id=np.int32(records_id))
    out.append(record)
  return out


def placed_words(word_pieces: Sequence[Sequence[int]], seq_length: int, unk: Optional[int] = None) -> List[int]:
  """The indices of the words that have a first piece in `token_records`' records, in record order (every word
  but those without pieces when no `unk` id stands in for them): a sentence's joined predictions are these words'."""
  placed = []
  for start, end in sub_sentences(word_pieces, seq_length, unk):
    _, first = align_words(word_pieces[start:end], seq_length, unk)
    placed += [start + i for i, position in enumerate(first) if position is not None]
  return placed


def word_pieces(tokenizer, examples: Sequence[TextExample]) -> List[List[List[int]]]:
  """Piece ids of every word of every token example (one batched SentencePiece call)."""
  words = [w for e in examples for w in e.tokens]
  ids = iter(tokenizer.encode_ids_batch(words) if words else [])
  return [[next(ids) for _ in e.tokens] for e in examples]


def records(examples: Sequence[TextExample], tokenizer, seq_length: int, label_kind: str, labels: Sequence[str],
            progress_every: float = 10.0) -> Iterator[Dict[str, np.ndarray]]:
  """The records of `examples` in order, tokenized in chunks, with a progress line every `progress_every` s. Token
  examples give one record per sub-sentence (`token_records`; `sentence_id` = the example's index here, `records_id`
  = `sentence_ids.records_id` of `examples`)."""
  start = last = time.time()
  chunk, split, pieceless = 1024, [0, 0], []  # split: sentences split, their records; pieceless: (word, file:line)
  unk, build = (unk_id(tokenizer), sentence_ids.records_id(examples)) if label_kind == "tags" else (None, -1)
  for begin in range(0, len(examples), chunk):
    batch = examples[begin:begin + chunk]
    if label_kind == "tags":
      for index, (e, pieces) in enumerate(zip(batch, word_pieces(tokenizer, batch)), begin):
        parts = token_records(e, pieces, seq_length, labels, index, unk, records_id=build)
        if len(parts) > 1:
          split[0], split[1] = split[0] + 1, split[1] + len(parts)
        pieceless += [(ascii(w), f"{e.path}:{e.line}") for w, p in zip(e.tokens, pieces) if not p]
        yield from parts
    else:
      ids_a = tokenizer.encode_ids_batch([e.text for e in batch])
      pairs = [e.text_pair for e in batch if e.text_pair is not None]
      ids_b = iter(tokenizer.encode_ids_batch(pairs) if pairs else [])
      for e, a in zip(batch, ids_a):
        yield text_record(e, a, next(ids_b) if e.text_pair is not None else None, seq_length, label_kind, labels)
    now = time.time()
    if now - last >= progress_every or begin + chunk >= len(examples):
      done = min(begin + chunk, len(examples))
      logger.info("records: %d / %d examples (%.0f/s)", done, len(examples), done / max(now - start, 1e-6))
      last = now
  if split[0]:
    logger.warning("token_classification: %d sentences are longer than max_seq_length=%d pieces and were split into "
                   "%d records at word boundaries (every word is still tagged and scored; raise seq_length to give "
                   "the model the whole sentence at once).", split[0], seq_length, split[1])
  if pieceless:
    logger.warning("token_classification: %d words have no SentencePiece piece (e.g. %s at %s): each is written as "
                   "<unk> and tagged, and its tag is scored; remove them or write them visibly.", len(pieceless),
                   *pieceless[0])
