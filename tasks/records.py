"""How a task family turns one split of its raw data into fine-tuning records: one `RecordWriter` per family.

`data_prep.create_finetuning_data` picks the writer of `--task` (glue.GlueRecords, squad.SquadRecords,
race.RaceRecords) and does the rest the same way for all of them: the cache key (inputs, tokenizer, the writer's
settings), the TFRecord file and its `.meta.json` (official_albert.data.records). `split_cache_key` and
`build_split` are that rest; the fine-tuning tasks call the same two functions when `input_path` names raw files
(`tasks.raw_inputs`), so records cached behind the scenes are those the explicit step writes, byte for byte.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from typing import Any, Callable, Dict, Iterable, Iterator, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from official_albert import file_io
from official_albert.data import records as records_lib

logger = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class RecordOptions:
  """The settings of `create_finetuning_data` that writers read (each family uses its own subset).

  Attributes:
    task: "glue/<name>", "squad_v1", "squad_v2" or "race".
    input_dir: GLUE root (or task folder) / folder holding RACE/ (or RACE/ itself, or one split's folder).
    input_file: the SQuAD JSON file; for GLUE, one TSV read with the split's layout instead of input_dir's file.
    max_seq_length: packed length (already resolved to the family default when unset).
    doc_stride, max_query_length: SQuAD windows.
    max_qa_length: RACE question+option cap.
    skip_bad_rows: GLUE rows with missing columns (None = the task's reference default).
    race_levels: RACE levels to read.
    squad_shuffle_seed: SQuAD training split — examples (with their windows) are written in the order of
      `random.Random(seed).shuffle`, as run_squad_v1/v2 do with 12345 (reference §5.2); None or negative keeps the
      file order (a deviation: batches then hold few articles).
    train_shuffle_seed: GLUE and RACE training split — examples are written in the order of a permutation drawn
      with this seed (`training_order`, over the row positions), so a file sorted by label trains shuffled; the same
      rows in another order train in another sequence (the same distribution, not the same batches). None or
      negative keeps the file order. Other splits keep it always.
  """
  task: str
  input_dir: Optional[str] = None
  input_file: Optional[str] = None
  max_seq_length: int = 512
  doc_stride: int = 128
  max_query_length: int = 64
  max_qa_length: int = 128
  skip_bad_rows: Optional[bool] = None
  race_levels: Sequence[str] = ("middle", "high")
  squad_shuffle_seed: Optional[int] = 12345
  train_shuffle_seed: Optional[int] = 12345


class RecordWriter:
  """One task family's reading and conversion, for `create_finetuning_data`.

  Attributes:
    default_max_seq_length: the reference's max_seq_length for the family.
  """

  default_max_seq_length: int = 512

  def __init__(self, options: RecordOptions):
    self.options = options

  def input_files(self, split: str) -> List[str]:
    """The raw files `split` is read from (their sizes and mtimes go into the cache key)."""
    raise NotImplementedError

  def cache_settings(self) -> Dict[str, Any]:
    """The family's settings that change the records (beyond task, split, max_seq_length and the tokenizer)."""
    return {}

  def records(self, split: str, tokenizer) -> Tuple[Iterable[Mapping[str, Any]], Dict[str, Any]]:
    """(records of `split`, meta fields such as counts) — records may be a generator."""
    raise NotImplementedError


def training_order(examples: Sequence[Any], split: str, seed: Optional[int]) -> List[Any]:
  """`examples` in the order their records are written: a permutation drawn with `seed` for the train split (the
  fine-tuning families' answer to files sorted by label), the file's order for every other split or without a seed."""
  if split != "train" or seed is None or seed < 0:
    return list(examples)
  return [examples[i] for i in np.random.default_rng(seed).permutation(len(examples))]


# The records options of a split written for prediction: file order, whatever the split (predictions are paired with
# the rows read in that order; a train split's records, shuffled, gave each prediction another row's id).
FILE_ORDER = {"train_shuffle_seed": None}


def check_record_order(record_path: str, what: str) -> None:
  """Refuses predict records of a training split written shuffled (`training_order`: their `.meta.json` keys split
  "train" with a seed): predictions are paired with rows read in file order, so each would go to another row's id.

  Raises:
    ValueError: naming the records and the two ways out.
  """
  meta = record_path[:-len(".tf_record")] + ".meta.json" if record_path.endswith(".tf_record") else ""
  if not meta or not file_io.exists(meta):
    return
  try:
    key = file_io.read_json(meta).get("cache_key") or {}
  except ValueError:
    return
  seed = key.get("train_shuffle_seed")
  if key.get("split") == "train" and seed is not None and seed >= 0:
    raise ValueError(f"{what}: {record_path} holds the train split written in a shuffled order "
                     f"(train_shuffle_seed={seed}, its .meta.json), so its predictions cannot be paired with the "
                     "file's rows. Predict from the raw folder or file (written in file order for prediction), or "
                     "write the records with create_finetuning_data --train_shuffle_seed=-1.")


# FullTokenizer's defaults of the options a key holds only when not these (the keys of default runs stay as they were)
TOKENIZER_OPTION_DEFAULTS = {"keep_accents": False, "remove_space": True}


def split_cache_key(writer: RecordWriter, split: str, spm_sha256: str, do_lower_case: bool,
                    tokenizer_mode: str, keep_accents: bool = False, remove_space: bool = True) -> Dict[str, Any]:
  """Everything that changes `split`'s records: task, split, lengths, tokenizer, input files, writer settings.
  keep_accents / remove_space are keyed only when not `TOKENIZER_OPTION_DEFAULTS`, so a reader of the key (the SQuAD
  records check) takes an absent one as the default."""
  o = writer.options
  options = {"keep_accents": bool(keep_accents), "remove_space": bool(remove_space)}
  return {"task": o.task, "split": split, "max_seq_length": o.max_seq_length, "do_lower_case": do_lower_case,
          "tokenizer_mode": tokenizer_mode, "spm_sha256": spm_sha256,
          "inputs": records_lib.input_fingerprint(writer.input_files(split)), **writer.cache_settings(),
          **{k: v for k, v in options.items() if v != TOKENIZER_OPTION_DEFAULTS[k]}}


def with_progress(records: Iterable[Mapping[str, Any]], what: str, total: Optional[int] = None,
                  every: float = 10.0) -> Iterator[Mapping[str, Any]]:
  """Yields `records` unchanged, logging `what: n / total records (r/s)` every `every` seconds and at the end."""
  start = last = time.monotonic()
  count = 0
  for record in records:
    yield record
    count += 1
    now = time.monotonic()
    if now - last >= every:
      last = now
      logger.info("%s: %d%s records (%.0f/s)", what, count, f" / {total}" if total else "",
                  count / max(now - start, 1e-6))
  logger.info("%s: %d records in %.1f s", what, count, time.monotonic() - start)


def build_split(writer: RecordWriter, split: str, record_path: str, meta_path: str, key: Mapping[str, Any],
                tokenizer: Callable[[], Any], overwrite: bool = False) -> Dict[str, Any]:
  """Reuses `record_path` when its `.meta.json` holds `key`, else writes `split`'s records (with progress lines).

  Args:
    writer: the family's RecordWriter.
    split: "train", "dev", "test", ...
    record_path, meta_path: the TFRecord file and its meta.
    key: `split_cache_key(...)`.
    tokenizer: () -> FullTokenizer, called only when the records are built.
    overwrite: rebuild even when the cache key matches.

  Returns:
    The meta dict (`num_records`, `record_path`, `cache_key`, `reused_cache`, the writer's counts).

  `records_lib.build_or_reuse` first removes the partial files a killed build of the split left.
  """
  o = writer.options

  def build():
    files = sorted(writer.input_files(split))
    logger.info("Building %s %s records (max_seq_length %d) from %s into %s ...", o.task, split, o.max_seq_length,
                ", ".join(files[:3]) + (f" and {len(files) - 3} more files" if len(files) > 3 else ""), record_path)
    records, meta = writer.records(split, tokenizer())
    total = meta.get("num_features", meta.get("num_examples"))
    return (with_progress(records, f"{o.task} {split}", total),
            {"task": o.task, "split": split, "max_seq_length": o.max_seq_length, **meta})

  return records_lib.build_or_reuse(record_path, meta_path, key, build, overwrite=overwrite)
