"""Query groups for `text_ranking`: CSV / TSV / JSONL rows → `RankingExample`s → fixed-length records.

Rows are read with the text tasks' readers (`tasks.text.data`: the same formats, header / key checks and bad-row
policy, errors naming file:line and the fix). A row is a query, its positive and its negatives: one text or a list
of texts (in CSV / TSV, a cell holding a JSON list or a Python one: `_texts`); a negative equal to the positive as
the tokenizer sees them (`tasks.comparison_text`: SentencePiece's nmt_nfkc, whitespace, accents and
case per the run's tokenizer options) is dropped (counted, logged): its ids would be labelled both relevant and
not; so is a negative that is a positive of the same query in another row of the split (`drop_query_positives`: a
query with several relevant documents, one row each, whose mined negatives hold the others).
Each group becomes one record: the positive and the first `negatives` negatives in a random order drawn from (seed,
the row's index), each packed with the query as `[CLS] query [SEP] document [SEP]` to `seq_length` (as
`pipelines.rerank` packs a pair), so `input_word_ids` / `input_mask` / `input_type_ids` are [group, seq_length];
`labels` [group] is 1 at the positive, 0 elsewhere; `example_index` is the row's position in the file list.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Dict, Iterator, List, Mapping, Optional, Sequence

import numpy as np

from official_albert.tokenization import pack_ids
from tasks import row_cells
from tasks import row_files
from tasks.comparison_text import ComparisonKeys

logger = logging.getLogger(__name__)

ENCODER_KEYS = ("input_word_ids", "input_mask", "input_type_ids")


@dataclasses.dataclass
class RankingExample:
  """One row: its file:line, the query, the positive and the negatives.

  `keys`: (options, query key, positive key, *negative keys) as `read_groups` compared them
  (`ComparisonKeys.row_keys`), so that `drop_query_positives` need not normalise each text again; None when made
  otherwise (reset it when changing the texts). Neither compared nor shown."""
  path: str
  line: int
  query: str
  positive: str
  negatives: List[str]
  keys: Optional[tuple] = dataclasses.field(default=None, compare=False, repr=False)


def _texts(value, column: str, cells: bool) -> Optional[List[str]]:
  """A negative column's value as texts: one text, or a list of texts; None when it is neither (or holds a blank).

  A CSV / TSV cell is a string: one written as a list, `[...]`, is read as that list, since a cell cannot hold
  several texts otherwise — JSON (`["n1", "n2"]`) or Python's repr of a list (`['n1', 'n2']`: what pandas' and
  datasets' `to_csv` write for a list column); `[]` is no negative. A JSONL string that is a list of texts in either
  spelling is that list too (a stringified list column, which was read as one negative); any other JSONL string is
  one text. A
  cell that is a list of anything but non-empty texts is refused, naming the item; one that parses as neither is one
  text (a passage in brackets).

  Raises:
    RowProblem: a list cell holding a non-text or an empty text.
  """
  if not cells and isinstance(value, str):
    stripped = value.strip()
    parsed = row_cells.list_cell(stripped) if stripped.startswith("[") and stripped.endswith("]") else None
    if isinstance(parsed, list) and all(isinstance(v, str) and v.strip() for v in parsed):
      value = parsed
  elif isinstance(value, str) and value.strip().startswith("[") and value.strip().endswith("]"):
    parsed = row_cells.list_cell(value.strip())
    if parsed is not None:
      bad = next(((i, v) for i, v in enumerate(parsed) if not (isinstance(v, str) and v.strip())), None)
      if bad is not None:
        raise row_files.RowProblem(f"column {column!r} (task.negative_column): the cell is a list, but its item "
                                   f"{bad[0]} is {bad[1]!r:.40}, not a non-empty text; write each negative as a "
                                   'string: ["n1", "n2"]')
      value = parsed
  values = [value] if isinstance(value, str) else value
  if not isinstance(values, list) or not all(isinstance(v, str) and v.strip() for v in values):
    return None
  return values


def read_groups(path: str, columns: Dict[str, str], num_negatives: int, input_format: str = "",
                skip_bad_rows: bool = False, tokenizer_options: Optional[Mapping[str, object]] = None,
                trim: bool = True) -> List[RankingExample]:
  """The groups of one file.

  Args:
    path: a CSV, TSV or JSONL file.
    columns: {"query": name, "positive": name, "negative": name} (the task.*_column settings).
    num_negatives: the negatives a row must have (it may have more; the first ones are kept, or all with `trim`
      False: `drop_query_positives` then keeps the first ones of those it does not drop).
    input_format: csv | tsv | jsonl; '' = from the extension.
    skip_bad_rows: count and log bad rows instead of raising.
    tokenizer_options: the run's do_lower_case / keep_accents / remove_space / tokenizer_mode, for
      `comparison_text` (None = FullTokenizer's).
    trim: cut each row's negatives to `num_negatives`.

  Raises:
    TextDataError: a missing column, an empty text, too few negatives (naming file:line, the key and the fix).
  """
  wanted = {f"{side}_column": column for side, column in columns.items()}
  cells = row_files.file_format(path, input_format) in ("csv", "tsv")
  how = ('a cell holds one text or a JSON list of texts (["n1", "n2"]), or write JSONL' if cells else
         "a JSON list of texts")
  dropped = [0, 0]  # negatives equal to their row's positive, rows they were in
  repeated = [0, 0]  # negatives equal to an earlier one of their row, rows they were in
  stringified = [0]  # JSONL rows whose negatives are a string written as a list
  keys = ComparisonKeys(tokenizer_options)  # (each text normalised once per read, not once per comparison)

  def parse(line: int, row: Dict) -> RankingExample:
    query, positive = (row_files.row_text(row, columns[side], f"task.{side}_column") for side in ("query", "positive"))
    if columns["negative"] not in row:  # (a JSONL row without the key: name the keys it has)
      raise row_files.RowProblem(f"no key {columns['negative']!r} (task.negative_column); the row's keys are "
                                 f"{sorted(row)[:10]}: set task.negative_column to the one holding the negatives")
    value = row[columns["negative"]]
    negatives = _texts(value, columns["negative"], cells)
    if negatives is None:
      raise row_files.RowProblem(f"column {columns['negative']!r} (task.negative_column): expected a text or a list "
                                 f"of texts, none empty; got {row.get(columns['negative'])!r:.80}")
    if not cells and isinstance(value, str) and negatives != [value]:
      stringified[0] += 1
    row_keys = keys.row_keys([query, positive] + negatives)  # (options, query, positive, *negatives)
    kept = [(n, key) for n, key in zip(negatives, row_keys[3:]) if key != row_keys[2]]  # (one id labelled 1 and 0)
    if len(kept) < len(negatives):
      dropped[0] += len(negatives) - len(kept)
      dropped[1] += 1
    unique: Dict[str, str] = {}  # key → the first negative with it
    for negative, key in kept:
      unique.setdefault(key, negative)
    if len(unique) < len(kept):  # (a repeated negative filled the group with one candidate scored twice)
      repeated[0] += len(kept) - len(unique)
      repeated[1] += 1
    if len(unique) < num_negatives:
      notes = [f"{count} more {what} and are not counted" for count, what in (
          (len(negatives) - len(kept), "equal the positive"), (len(kept) - len(unique), "repeat another"))
               if count]
      same = f" ({'; '.join(notes)})" if notes else ""
      raise row_files.RowProblem(f"column {columns['negative']!r} (task.negative_column): {len(unique)} "
                                 f"negative(s){same}, but a group takes {num_negatives} (task.num_negatives / "
                                 f"task.eval_num_negatives); give each row that many ({how}), or lower the setting")
    kept = list(unique.items())[:num_negatives if trim else len(unique)]
    return RankingExample(path, line, query, positive, [n for _, n in kept], (*row_keys[:3], *(k for k, _ in kept)))

  examples = row_files.read_row_file(path, input_format, skip_bad_rows, wanted, "text_ranking reads", parse,
                                     "query groups")
  if dropped[0]:
    logger.warning("%s: dropped %d negative(s) equal to their row's positive, in %d row(s) (a candidate cannot be "
                   "both relevant and not; compared as the tokenizer sees them: Unicode form, spaces, accents, "
                   "case).", path, dropped[0], dropped[1])
  if repeated[0]:
    logger.warning("%s: dropped %d negative(s) repeating an earlier one of their row, in %d row(s) (compared as the "
                   "tokenizer sees them).", path, repeated[0], repeated[1])
  if stringified[0]:
    logger.warning("%s: %d row(s) hold their negatives as a string written as a list (%r); read as that list.",
                   path, stringified[0], columns["negative"])
  return examples


def drop_query_positives(examples: List[RankingExample], num_negatives: int, skip_bad_rows: bool = False,
                         tokenizer_options: Optional[Mapping[str, object]] = None) -> List[RankingExample]:
  """The groups with each negative that is a positive of the same query in another row dropped, then cut to the
  first `num_negatives` negatives (`read_groups`' rows of every file of a split).

  A query with several relevant documents is written one row per positive (MS MARCO's and BEIR's qrels, a mined
  negatives file): negatives mined by BM25 or a bi-encoder for that query then often hold its other positives, and a
  group would train the reranker to score a relevant document below the positive, and score it as irrelevant at eval.
  Queries and texts are compared as the tokenizer sees them (`comparison_text`). A row left with fewer than
  `num_negatives` is bad (an error naming file:line, or skipped, counted and logged with skip_bad_rows). The keys
  `read_groups` kept on the rows are reused, and left off the groups returned (training holds those).
  """
  keys = ComparisonKeys(tokenizer_options)
  row_keys = [keys.row_keys([e.query, e.positive] + e.negatives, e.keys) for e in examples]
  positives: Dict[str, set] = {}
  for key in row_keys:
    positives.setdefault(key[1], set()).add(key[2])
  settled, dropped, rows, skipped = [], 0, 0, []
  for example, key in zip(examples, row_keys):
    relevant = positives[key[1]]
    kept = [n for n, k in zip(example.negatives, key[3:]) if k not in relevant]
    if len(kept) < len(example.negatives):
      dropped, rows = dropped + len(example.negatives) - len(kept), rows + 1
    if len(kept) < num_negatives:
      where = (f"{example.path}:{example.line}: {len(kept)} negative(s) once {len(example.negatives) - len(kept)} "
               f"that are positives of the same query in other rows are dropped, but a group takes {num_negatives} "
               "(task.num_negatives / task.eval_num_negatives)")
      if not skip_bad_rows:
        raise row_files.TextDataError(f"{where}; give the row more negatives, or lower the setting (or set "
                                      "task.skip_bad_rows=true to skip and count such rows).")
      skipped.append(where)
      continue
    settled.append(dataclasses.replace(example, negatives=kept[:num_negatives], keys=None))
  if dropped:
    logger.warning("dropped %d negative(s) that are a positive of the same query in another row, in %d row(s) (a "
                   "query's relevant document is not a negative of it).", dropped, rows)
  if skipped:
    logger.warning("skipped %d row(s) left with too few negatives (task.skip_bad_rows=true); first: %s",
                   len(skipped), " | ".join(skipped[:3]))
  return settled


def candidate_order(index: int, size: int, seed: int) -> np.ndarray:
  """The order of a group's candidates (the positive is candidate 0): a permutation drawn from (seed, index)."""
  return np.random.default_rng([max(seed, 0), index]).permutation(size)


def records(examples: Sequence[RankingExample], indices: Sequence[int], tokenizer, seq_length: int,
            seed: int) -> Iterator[Dict[str, np.ndarray]]:
  """The records of `examples` (record i carries `example_index` indices[i]), tokenized in chunks of 256 groups."""
  chunk = 256
  for begin in range(0, len(examples), chunk):
    batch = examples[begin:begin + chunk]
    queries = tokenizer.encode_ids_batch([e.query for e in batch])
    documents = tokenizer.encode_ids_batch([d for e in batch for d in [e.positive] + e.negatives])
    start = 0
    for offset, example in enumerate(batch):
      size = 1 + len(example.negatives)
      order = candidate_order(int(indices[begin + offset]), size, seed)
      packed = [pack_ids(queries[offset], documents[start + int(i)], seq_length) for i in order]
      start += size
      record = {k: np.asarray([p[k] for p in packed], np.int32) for k in ENCODER_KEYS}
      record["labels"] = (order == 0).astype(np.float32)
      record["example_index"] = np.int64(indices[begin + offset])
      yield record
