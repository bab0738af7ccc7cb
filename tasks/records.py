"""How a task family turns one split of its raw data into fine-tuning records: one `RecordWriter` per family.

`data_prep.create_finetuning_data` picks the writer of `--task` (glue.GlueRecords, squad.SquadRecords,
race.RaceRecords) and does the rest the same way for all of them: the cache key (inputs, tokenizer, the writer's
settings), the TFRecord file and its `.meta.json` (official_albert.data.records).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple


@dataclasses.dataclass(frozen=True)
class RecordOptions:
  """The settings of `create_finetuning_data` that writers read (each family uses its own subset).

  Attributes:
    task: "glue/<name>", "squad_v1", "squad_v2" or "race".
    input_dir: GLUE root / folder holding RACE/.
    input_file: the SQuAD JSON file.
    max_seq_length: packed length (already resolved to the family default when unset).
    doc_stride, max_query_length: SQuAD windows.
    max_qa_length: RACE question+option cap.
    skip_bad_rows: GLUE rows with missing columns (None = the task's reference default).
    race_levels: RACE levels to read.
    squad_shuffle_seed: SQuAD training split — examples (with their windows) are written in the order of
      `random.Random(seed).shuffle`, as run_squad_v1/v2 do with 12345 (reference §5.2); None or negative keeps the
      file order (a deviation: batches then hold few articles).
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
