"""Text pairs for `text_embedding`: CSV / TSV / JSONL rows → `PairExample`s → fixed-length records.

Rows are read with the text tasks' readers (`tasks.text.data`: the same formats, header / key checks and bad-row
policy, errors naming file:line and the fix). Each side (anchor, positive, optional hard negative) is tokenized on its
own as `[CLS] text [SEP]` to `seq_length`, exactly as `pipelines.embed` packs a text, so a vector made at training and
one served later come from the same ids. A record holds `<side>_input_word_ids` / `_input_mask` / `_input_type_ids`
per side, `example_index` (the row's position in the file list, which evaluation uses to name queries and
documents) and, for scored pairs, `score`. `text_keys` hashes a batch's records per side (equal ids, one key).

A hard negative that is its row's positive after the tokenizer's normalisation (`comparison_text`: SentencePiece's
nmt_nfkc, whitespace, accents and case as the run's tokenizer options treat them) is refused like a verbatim copy: both
give the same ids. Unscored pairs with an unread label column that marks some pairs non-matching (label 0) are
refused too (`unused_labels`): mnrl would train them as matches.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import math
from typing import Dict, Hashable, Iterator, List, Mapping, Optional, Sequence, Set, Tuple

import numpy as np
import tensorflow as tf

from official_albert.tokenization import pack_ids
from tasks import row_files
from tasks.comparison_text import comparison_text  # noqa: F401  (importable from here, as before)
from tasks.comparison_text import ComparisonKeys
from tasks.embedding.unused_labels import UnusedLabels

logger = logging.getLogger(__name__)

SIDES = ("anchor", "positive", "negative")
ENCODER_KEYS = ("input_word_ids", "input_mask", "input_type_ids")


def side_key(side: str, key: str) -> str:
  """The record feature of `side`'s encoder input `key` (e.g. anchor_input_word_ids)."""
  return f"{side}_{key}"


@dataclasses.dataclass
class PairExample:
  """One row: its file:line, the texts of its sides (negative: None when no negative column; positive: None in a
  file of texts to embed, `--mode=predict`) and its score.

  `keys`: (options, anchor key, positive key, negative key) as `read_pairs` compared them
  (`ComparisonKeys.row_keys`), so that `check_hard_negatives` and `warn_of_repeated_texts` need not normalise each
  text again; None when made otherwise (reset it when changing the texts). Neither compared nor shown."""
  path: str
  line: int
  anchor: str
  positive: Optional[str]
  negative: Optional[str] = None
  score: Optional[float] = None
  keys: Optional[tuple] = dataclasses.field(default=None, compare=False, repr=False)


# The text tasks' row readers (`read_rows`, `check_columns`, `BadRows`) are the house's one way to read rows; an
# embedding row differs only in which columns it wants, so they are reused rather than copied.
def read_pairs(path: str, columns: Dict[str, str], input_format: str = "", skip_bad_rows: bool = False,
               score_column: str = "", tokenizer_options: Optional[Mapping[str, object]] = None,
               check_label_columns: bool = True) -> List[PairExample]:
  """The pairs of one file.

  Args:
    path: a CSV, TSV or JSONL file.
    columns: side → column name ('' = the side is absent), for "anchor", "positive" and "negative".
    input_format: csv | tsv | jsonl; '' = from the extension.
    skip_bad_rows: count and log bad rows instead of raising.
    score_column: the column of a float score per pair ('' = none; in a `;`-separated CSV `4,8` is 4.8).
    tokenizer_options: the run's do_lower_case / keep_accents / remove_space / tokenizer_mode, for
      `comparison_text` (None = FullTokenizer's).
    check_label_columns: for pairs without a score (`score_column` ''), look at the columns named like a label that
      are not read (`unused_labels`: label 0 rows would be trained as matches); False = task.ignore_label_column.

  Raises:
    TextDataError: a missing column, an empty text, a score that is not a finite number, a negative equal to the
      positive after the tokenizer's normalisation (naming file:line); an unread label column with 0 / false on some
      rows (`UnusedLabels.check`).
  """
  wanted = {f"{side}_column": column for side, column in columns.items() if column}
  if score_column:
    wanted["score_column"] = score_column
  labels = None
  if check_label_columns and not score_column and columns.get("positive"):  # (texts to embed: no pairs to mislabel)
    labels = UnusedLabels(path, wanted.values())
  keys = ComparisonKeys(tokenizer_options)  # (each text normalised once per read, not once per comparison)

  def parse(line: int, row: Dict) -> PairExample:
    texts = {side: row_files.row_text(row, column, f"task.{side}_column") for side, column in columns.items()
             if column}
    row_keys = None  # (texts to embed, without positives: nothing to compare)
    if texts.get("positive") is not None:
      row_keys = keys.row_keys([texts.get(side) for side in SIDES])
    if row_keys is not None and row_keys[3] is not None and row_keys[3] == row_keys[2]:
      raise row_files.RowProblem(f"column {columns['negative']!r} (task.negative_column): the hard negative is the "
                                 "row's positive itself (it would be trained as unrelated to itself; compared as the "
                                 "tokenizer sees them: Unicode form, spaces, accents and case as it treats them); "
                                 "mine another")
    score = None
    if score_column:
      try:
        score = float(row.get(score_column))
      except (TypeError, ValueError):
        score = math.nan
      if not math.isfinite(score):
        raise row_files.RowProblem(f"column {score_column!r} (task.score_column): {row.get(score_column)!r} is not "
                                   f"a finite number{row_files.decimal_comma_hint(row.get(score_column))}")
    if labels is not None:
      labels.see(line, row)
    return PairExample(path, line, texts["anchor"], texts.get("positive"), texts.get("negative"), score, row_keys)

  examples = row_files.read_row_file(path, input_format, skip_bad_rows, wanted, "text_embedding reads", parse,
                                     "pairs", [score_column] if score_column else [])
  if labels is not None:
    labels.check()
  return examples


def check_hard_negatives(examples: List[PairExample], skip_bad_rows: bool = False,
                         tokenizer_options: Optional[Mapping[str, object]] = None) -> List[PairExample]:
  """`examples` (every file of a split) once no row's hard negative is a positive of its anchor in another row.

  An anchor with several relevant texts is written one row per positive (as qrels are), and negatives mined by BM25
  or a bi-encoder then hold its other positives: mnrl would push the anchor away from a text it is paired with in
  the next row. Compared as the tokenizer sees them (`comparison_text`), as `read_pairs` compares a row's own
  positive. Such a row is bad: an error naming both rows' file:line, or skipped, counted and logged with
  skip_bad_rows.
  """
  keys = ComparisonKeys(tokenizer_options)
  row_keys = [keys.row_keys([e.anchor, e.positive, e.negative], e.keys)
              if e.positive is not None or e.negative is not None else None for e in examples]
  positives: Dict[str, Dict[str, PairExample]] = {}
  for example, key in zip(examples, row_keys):
    if example.positive is not None:
      positives.setdefault(key[1], {}).setdefault(key[2], example)
  kept, skipped = [], []
  for example, key in zip(examples, row_keys):
    other = None
    if example.negative is not None:
      other = positives.get(key[1], {}).get(key[3])
    if other is None:
      kept.append(example)
      continue
    where = (f"{example.path}:{example.line}: the hard negative (task.negative_column) is a positive of the same "
             f"anchor at {other.path}:{other.line} (it would be trained as unrelated to a text the anchor is paired "
             "with; compared as the tokenizer sees them)")
    if not skip_bad_rows:
      raise row_files.TextDataError(f"{where}; mine another negative for the row (fix the row, or set "
                                    "task.skip_bad_rows=true to skip and count such rows).")
    skipped.append(where)
  if skipped:
    logger.warning("skipped %d of %d rows whose hard negative is a positive of their anchor in another row "
                   "(task.skip_bad_rows=true); first: %s", len(skipped), len(examples), " | ".join(skipped[:3]))
  return kept


def warn_of_repeated_texts(examples: List[PairExample], tokenizer_options=None) -> int:
  """Logs, and returns, how many rows repeat another row's anchor or positive, on either side (as the tokenizer sees
  them).

  Mined triplets are such files: one row per (query, positive, negative), so a query with 7 negatives is on 7 rows.
  Two of them in one batch make each other's positive an in-batch "negative" of a text it is paired with, which mnrl
  then pushes away. `task.mask_false_negatives=true` leaves those out of the softmax (sentence-transformers avoids
  them with its NO_DUPLICATES batch sampler)."""
  seen: Dict[str, PairExample] = {}
  repeated, first = 0, None
  comparer = ComparisonKeys(tokenizer_options)
  for example in examples:
    # By text alone, whatever its side: (a, b) and (b, a) in one batch put each anchor's own text among its
    # negatives.
    stored = comparer.row_keys([example.anchor, example.positive, example.negative], example.keys)
    keys = [key for key in stored[1:3] if key is not None]
    earlier = next((seen[k] for k in keys if k in seen), None)
    if earlier is not None:
      repeated += 1
      first = first or (example, earlier)
    for key in keys:
      seen.setdefault(key, example)
  if repeated:
    example, earlier = first
    logger.warning("%d of %d training rows repeat the anchor or positive of another row (the first: %s:%d repeats "
                   "%s:%d; mined triplets write one row per negative): mnrl would train two such rows in one batch "
                   "as each other's negatives. Set task.mask_false_negatives=true to leave those out of the loss.",
                   repeated, len(examples), example.path, example.line, earlier.path, earlier.line)
  return repeated


def check_scores(examples: List[PairExample], score_column: str, loss: Optional[str]) -> List[PairExample]:
  """`examples`, once their scores fit `loss`: outside [-1, 1] is refused for cosine, which regresses the cosine on it.

  A cosine cannot leave [-1, 1], so a pair scored 4.8 (STS-B's 0–5 scale) would be pulled towards a value it can
  never reach: every such pair trains towards cosine 1 at an ever-growing loss, and the model learns nothing of the
  scale. This is the file's scale, not one bad row, so it is refused even with `task.skip_bad_rows` (skipping would
  drop every row of a 0–5 file).

  Args:
    examples: the pairs read (`read_pairs`), with their scores.
    score_column: the score's column ('' = unscored pairs: nothing to check), for the message.
    loss: the run's task.loss (cosent reads only the scores' order: any finite score fits it).

  Raises:
    TextDataError: naming the first out-of-range row's file:line, its score, how many rows are out of range and the
      two fixes (rescale, or `task.loss=cosent`, which reads only the scores' order).
  """
  if not score_column or loss != "cosine":
    return examples
  outside = [e for e in examples if e.score is not None and not -1.0 <= e.score <= 1.0]
  if outside:
    first = outside[0]
    low, high = min(e.score for e in outside), max(e.score for e in outside)
    raise row_files.TextDataError(
        f"{first.path}:{first.line}: column {score_column!r} (task.score_column): score {first.score:g} is outside "
        f"[-1, 1] ({len(outside)} of {len(examples)} rows, from {low:g} to {high:g}); task.loss=cosine regresses "
        "the cosine of each pair on its score, and a cosine never leaves [-1, 1]. Rescale the scores to [-1, 1] "
        "(0–5 scores such as STS-B's: s / 2.5 - 1), or use task.loss=cosent, which reads only their order.")
  return examples


def pack_text(ids: Sequence[int], seq_length: int) -> Dict[str, np.ndarray]:
  """`[CLS] ids [SEP]`, cut and zero-padded to `seq_length` (what `pipelines.embed` feeds the model)."""
  return {k: np.asarray(v, np.int32) for k, v in pack_ids(ids, None, seq_length).items()}


def records(examples: Sequence[PairExample], indices: Sequence[int], tokenizer, seq_length: int,
            sides: Sequence[str], with_score: bool) -> Iterator[Dict[str, np.ndarray]]:
  """The records of `examples` (record i carries `example_index` indices[i]), tokenized in chunks of 1024."""
  chunk = 1024
  for begin in range(0, len(examples), chunk):
    batch = examples[begin:begin + chunk]
    ids = {side: tokenizer.encode_ids_batch([getattr(e, side) for e in batch]) for side in sides}
    for offset, example in enumerate(batch):
      record = {"example_index": np.int64(indices[begin + offset])}
      for side in sides:
        for key, value in pack_text(ids[side][offset], seq_length).items():
          record[side_key(side, key)] = value
      if with_score:
        record["score"] = np.float32(example.score)
      yield record


def check_evaluated(index: np.ndarray, rows: int, input_path: str, scored: bool = False) -> None:
  """Raises when the evaluated records do not fit the validation files; warns when they cover only some of the rows.

  Fewer records than rows is trainer.validation_steps ending evaluation early (a count of batches; the experiments'
  default, -1, reads every row), not an error: the metrics are then over the K rows evaluated (their anchors against
  those rows' positives; the other rows' positives have no vectors). An index past the rows, or a row evaluated
  twice, means records of other files.

  Args:
    index: the `example_index` of every evaluated record.
    rows: how many rows the validation files hold.
    input_path: the validation files, for the messages.
    scored: scored pairs (Spearman / Pearson): warn only, as their metrics read the records alone (score and vectors),
      never the texts, so records that do not fit the files cannot mislabel them.

  Raises:
    ValueError: an index outside 0..rows-1 or a repeated one (naming the files and the fix), unless `scored`.
  """
  index = np.asarray(index)
  repeated = len(index) - len(np.unique(index))
  if not scored and len(index) and (int(index.max()) >= rows or int(index.min()) < 0 or repeated):
    raise ValueError(f"the evaluated records name rows {int(index.min())}..{int(index.max())} ({len(index)} records, "
                     f"{repeated} repeated) but {input_path} has {rows} rows; the records are stale — delete "
                     "task.records_dir.")
  if len(index) < rows:
    over = ("spearman, pearson and eval_loss are over those pairs" if scored else "the retrieval metrics and "
            "eval_loss are over those rows: their anchors are the queries, their positives the corpus")
    logger.warning("text_embedding eval: evaluated %d of %d rows of %s (trainer.validation_steps ended evaluation "
                   "early); %s. Set trainer.validation_steps=-1 to evaluate every row.", len(index), rows, input_path,
                   over)


def input_keys(examples: Sequence[PairExample], tokenizer, seq_length: int) -> List[Tuple[bytes, bytes]]:
  """Each row's (anchor, positive) as the model reads them: a digest of the encoder inputs its record holds.

  Built by `records` itself (the same tokenizer call and packing at `seq_length`), so two texts are one key exactly
  when they are one model input: alike after the tokenizer's normalisation (case, accents, its tokenizer_mode's
  quotes), cut alike at seq_length, or differing only in characters that both become <unk>. A digest, not the ids:
  a large validation set's keys stay small.
  """
  def digest(record: Dict[str, np.ndarray], side: str) -> bytes:
    return hashlib.blake2b(b"".join(record[side_key(side, k)].tobytes() for k in ENCODER_KEYS),
                           digest_size=16).digest()
  return [(digest(r, "anchor"), digest(r, "positive"))
          for r in records(examples, range(len(examples)), tokenizer, seq_length, ("anchor", "positive"), False)]


def evaluation_sets(keys: Sequence[Tuple[Hashable, Hashable]]
                    ) -> Tuple[List[int], List[int], Dict[str, Set[str]], Dict[str, Set[str]]]:
  """(query rows, document rows, relevant, ignore) of the evaluated rows' (anchor key, positive key), in row order.

  Rows with one anchor key are one query and rows with one positive key one document (the first such row's vector).
  The keys are `input_keys` (what the model reads): "The stone." and "the stone. " are one input to a lower-casing
  tokenizer, so one document; as two, both with the same vector, the second could never rank first. `relevant`:
  query number → its documents' numbers (as strings, as `retrieval_metrics` takes them).

  `ignore`: query number → the document that is the query's own text, where it is not relevant to it (as BEIR's
  ignore_identical_ids drops it): paraphrases written both ways, (a, b) and (b, a), or chains, (a, b) and (b, c),
  make an anchor another row's positive, and that document, the same input, scores cosine 1.0 against the query and
  would rank first, not relevant, for every model (recall@1 0). Both sides are packed alike, so equal keys are one
  text. A row whose anchor is its own positive keeps that document: it is relevant.
  """
  corpus: Dict[Hashable, int] = {}
  queries: Dict[Hashable, int] = {}
  documents: List[int] = []
  query_rows: List[int] = []
  relevant: Dict[str, Set[str]] = {}
  for row, (question, text) in enumerate(keys):
    if text not in corpus:
      corpus[text] = len(corpus)
      documents.append(row)
    if question not in queries:
      queries[question] = len(queries)
      query_rows.append(row)
    relevant.setdefault(str(queries[question]), set()).add(str(corpus[text]))
  ignore = {str(q): {str(corpus[question])} for question, q in queries.items()
            if question in corpus and str(corpus[question]) not in relevant[str(q)]}
  return query_rows, documents, relevant, ignore


def text_keys(features: Dict[str, tf.Tensor], sides) -> Dict[str, tf.Tensor]:
  """{side: [B] int64}: a hash of each row's token ids per side present (equal ids, equal keys: one text).

  Σ ids[j] · w[j] mod 2^64 with fixed random odd weights: two different rows collide with probability about 2^-49 or
  less (ids differ by < 2^15), and it compiles under XLA (`runtime.jit_compile`), which `tf.fingerprint` does not.
  """
  keys = {}
  for side in sides:
    ids = features.get(side_key(side, "input_word_ids"))
    if ids is not None:
      ids = tf.cast(ids, tf.int64)
      keys[side] = tf.reduce_sum(ids * tf.constant(_key_weights(ids.shape[-1])), axis=-1)
  return keys


def _key_weights(length: int) -> np.ndarray:
  """`text_keys`' weights for rows of `length` ids (the same every call: the keys of one run's batches agree)."""
  return np.random.default_rng(20261203).integers(1, 2**62, size=length, dtype=np.int64) | 1
