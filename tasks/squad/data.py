"""SQuAD v1.1 / v2.0 data: the training order (§5.2) and the fine-tuning records.

Reading the JSON (with named errors) is in `tasks.squad.reading`; aligning pieces to characters is in
`official_albert.tokenization.alignment` and the windowed features in `official_albert.data.squad_features` (the
library's question-answering predictor shares them); their names are re-exported here.
"""


from __future__ import annotations

import collections
import logging
import random
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from official_albert import file_io
from official_albert.data.squad_features import convert_examples_to_features  # noqa: F401
from official_albert.data.squad_features import doc_spans  # noqa: F401
from official_albert.data.squad_features import features_to_arrays  # noqa: F401
from official_albert.data.squad_features import FeatureStats  # noqa: F401
from official_albert.data.squad_features import max_context_owners  # noqa: F401
from official_albert.data.squad_features import max_context_score  # noqa: F401
from official_albert.data.squad_features import SquadFeature  # noqa: F401
from official_albert.data.squad_features import UNIQUE_ID_START  # noqa: F401
from official_albert.tokenization.alignment import align_tokens  # noqa: F401
from official_albert.tokenization.alignment import Alignment  # noqa: F401
from official_albert.tokenization.alignment import answer_token_span  # noqa: F401
from official_albert.tokenization.alignment import preprocess_with_offsets  # noqa: F401
from official_albert.tokenization.tokenizer import SPIECE_UNDERLINE  # noqa: F401
from tasks import raw_inputs
from tasks.records import RecordOptions
from tasks.records import RecordWriter
from tasks.records import TOKENIZER_OPTION_DEFAULTS
from tasks.squad.reading import load_dataset  # noqa: F401
from tasks.squad.reading import read_squad_examples  # noqa: F401
from tasks.squad.reading import SquadDataError  # noqa: F401
from tasks.squad.reading import SquadExample  # noqa: F401

logger = logging.getLogger(__name__)

_Alignment = Alignment  # the name before the move
_max_context_score = max_context_score


def shuffle_training_order(examples: Sequence[SquadExample], features: Sequence[SquadFeature], seed: int
                           ) -> Tuple[List[SquadExample], List[SquadFeature]]:
  """The reference's training order: examples shuffled by `random.Random(seed).shuffle` (run_squad_v1/v2 use 12345,
  reference §5.2), then windowed — so each question's windows stay adjacent and unique ids count up in that order.

  The features are made in file order (paragraph tokenisation is cached per paragraph; shuffling first would redo it
  for every question) and then regrouped: `Random.shuffle` permutes by length and generator only, so permuting the
  indices gives the reference's order exactly. Everything stays in memory: the feature list exists already (SQuAD
  v1.1 train: 87,599 examples → ~88k features at 384), the permutation adds one index per example. Without it the
  records follow the file, so even after the reader's 100-record shuffle buffer a batch of 48 holds a few
  neighbouring articles instead of a sample of the whole set.

  Returns:
    (examples in the shuffled order, their features with `example_index` and `unique_id` renumbered in place).
  """
  order = list(range(len(examples)))
  random.Random(seed).shuffle(order)
  grouped: Dict[int, List[SquadFeature]] = collections.defaultdict(list)
  for f in features:
    grouped[f.example_index].append(f)
  out: List[SquadFeature] = []
  for new_index, old_index in enumerate(order):
    for f in grouped.get(old_index, ()):
      f.example_index, f.unique_id = new_index, UNIQUE_ID_START + len(out)
      out.append(f)
  return [examples[i] for i in order], out


def feature_record(feature: SquadFeature, is_training: bool) -> Dict[str, np.ndarray]:
  """One feature as a fine-tuning record: model inputs + `unique_ids` (+ span labels when training)."""
  record = {"unique_ids": np.asarray([feature.unique_id], np.int64),
            "input_word_ids": np.asarray(feature.input_word_ids, np.int32),
            "input_mask": np.asarray(feature.input_mask, np.int32),
            "input_type_ids": np.asarray(feature.input_type_ids, np.int32),
            "p_mask": np.asarray(feature.p_mask, np.int32)}
  if is_training:
    record.update(start_positions=np.asarray([feature.start_position], np.int32),
                  end_positions=np.asarray([feature.end_position], np.int32),
                  is_impossible=np.asarray([feature.is_impossible], np.int32))
  return record


class SquadRecords(RecordWriter):
  """`create_finetuning_data --task=squad_v1|squad_v2`: one record per window (`convert_examples_to_features`).

  `--split=train` writes training features (with span labels) in the reference's shuffled order
  (`shuffle_training_order`, seed `--squad_shuffle_seed`, default 12345; negative = file order, a deviation); any
  other split writes evaluation features in file order, which post-processing rebuilds from the same JSON and matches
  by `unique_ids` (no pickle).
  """

  default_max_seq_length = 384

  def __init__(self, options):
    super().__init__(options)
    if not options.input_file:
      raise ValueError("--input_file (the SQuAD JSON) is required for SQuAD.")

  def input_files(self, split: str) -> List[str]:
    del split
    return [self.options.input_file]

  def cache_settings(self):
    return {"doc_stride": self.options.doc_stride, "max_query_length": self.options.max_query_length,
            "squad_shuffle_seed": self._shuffle_seed()}

  def _shuffle_seed(self) -> Optional[int]:
    seed = self.options.squad_shuffle_seed
    return None if seed is None or seed < 0 else int(seed)

  def records(self, split: str, tokenizer):
    o = self.options
    is_training = split == "train"
    examples = read_squad_examples(o.input_file, is_training=is_training,
                                   version_2_with_negative=o.task == "squad_v2")
    features, stats = convert_examples_to_features(examples, tokenizer, o.max_seq_length, o.doc_stride,
                                                   o.max_query_length)
    seed = self._shuffle_seed() if is_training else None
    if seed is not None:
      examples, features = shuffle_training_order(examples, features, seed)
      logger.info("SQuAD train: %d examples (%d features) shuffled with random.Random(%d) (reference §5.2).",
                  len(examples), len(features), seed)
    elif is_training:
      logger.warning("SQuAD train: records written in file order (--squad_shuffle_seed < 0): batches will hold few "
                     "articles unless the reader's shuffle buffer spans the whole file.")
    records = (feature_record(f, is_training) for f in features)
    return records, {"num_examples": len(examples), "num_features": len(features),
                     "num_mismatched_examples": len(stats.mismatched_examples),
                     "num_answers_off_token_boundary": len(stats.answers_off_token_boundary),
                     "num_out_of_span_features": stats.out_of_span_features, "is_training": is_training,
                     "shuffle_seed": seed,
                     "doc_stride": o.doc_stride, "max_query_length": o.max_query_length}


# -------------------------------------------------------------------------------------------------- raw inputs
def raw_writer(params, data_config, role: str):
  """The `SquadRecords` and split of a raw SQuAD input (`tasks.raw_inputs`), None for records: one `.json` (or
  `.json.gz`) file; training features (shuffled as the reference) for the train role, evaluation features
  otherwise."""
  path = raw_inputs.single_path(data_config.input_path)
  if not raw_inputs.ends_with(path, (".json", ".json.gz")):
    return None
  options = RecordOptions(task="squad_v2" if params.version_2_with_negative else "squad_v1", input_file=path,
                          max_seq_length=data_config.seq_length, doc_stride=params.doc_stride,
                          max_query_length=params.max_query_length, squad_shuffle_seed=params.squad_shuffle_seed)
  return SquadRecords(options), "train" if role == "train" else "dev"


# ------------------------------------------------------------------------------------------ prebuilt records
RECORD_SUFFIX, META_SUFFIX = ".tf_record", ".meta.json"

# The settings evaluation rebuilds the features with: meta key → (where the meta holds it, the task's setting).
_REBUILD_SETTINGS = {
    "max_seq_length": ((), "task.{split}.seq_length"), "doc_stride": ((), "task.doc_stride"),
    "max_query_length": ((), "task.max_query_length"), "do_lower_case": (("cache_key",), "task.do_lower_case"),
    "tokenizer_mode": (("cache_key",), "task.tokenizer_mode"),
    "spm_sha256": (("cache_key",), "task.spm_model_file (SHA-256 of the SentencePiece model)"),
    "keep_accents": (("cache_key",), "the model's tokenizer_config.json (model_dir's, else task.init_checkpoint's "
                                     "folder's; create_finetuning_data --keep_accents)"),
    "remove_space": (("cache_key",), "the model's tokenizer_config.json (model_dir's, else task.init_checkpoint's "
                                     "folder's; create_finetuning_data --remove_space)")}
# What a key holds when absent (keyed only when not FullTokenizer's default: records made before, or with defaults).
_ABSENT_MEANS = TOKENIZER_OPTION_DEFAULTS


def record_metas(input_path: str) -> List[Tuple[str, Dict[str, Any]]]:
  """(meta path, meta) of each record file of `input_path` (comma list / globs) that has a `.meta.json` beside it
  (create_finetuning_data and the raw-input cache write one; records from elsewhere may have none). An existing path
  is read as written (`file_io.literal_path`), as the readers do: as a glob, `squad[v2]/dev.tf_record` matches
  `squadv/dev.tf_record`, and that folder's meta would be checked instead of this one's."""
  out = []
  for pattern in (p.strip() for p in (input_path or "").split(",")):
    if not pattern:
      continue
    for path in [pattern] if file_io.literal_path(pattern) else file_io.glob(pattern) or [pattern]:
      if not path.endswith(RECORD_SUFFIX):
        continue
      meta_path = path[:-len(RECORD_SUFFIX)] + META_SUFFIX
      if file_io.exists(meta_path):
        out.append((meta_path, file_io.read_json(meta_path, "records' meta file")))
  return out


def check_eval_records(input_path: str, split: str, expected: Mapping[str, Any]) -> None:
  """Raises unless the records of `input_path` are evaluation features made with the `expected` settings.

  Why: evaluation and prediction map the model's outputs back to text by rebuilding the features from the JSON with
  the task's settings and matching unique ids; records windowed with another doc_stride, question cap, length or
  tokenizer carry the same ids for other windows, and training records are shuffled and renumbered, so either would
  score the wrong spans without any error.

  Args:
    input_path: the split's input_path (record files; their `.meta.json` is read where there is one).
    split: the task's data field, for the message ("validation_data", "predict_data").
    expected: the task's values of the `_REBUILD_SETTINGS` keys (a key left out is not compared); a tokenizer option
      the records' key lacks was FullTokenizer's default (`TOKENIZER_OPTION_DEFAULTS`: keyed only otherwise).
  """
  for meta_path, meta in record_metas(input_path):
    if meta.get("is_training"):
      raise ValueError(f"{meta_path}: these are training records (create_finetuning_data --split=train: shuffled, "
                       f"with renumbered unique ids), but task.{split} needs evaluation records: make them with "
                       "--split=dev (or --split=test), or set the input_path to the SQuAD JSON itself.")
    diffs = []
    for key, (where, setting) in _REBUILD_SETTINGS.items():
      holder = meta
      for k in where:
        holder = holder.get(k) or {}
      recorded = holder.get(key, _ABSENT_MEANS.get(key) if holder else None)
      if key in expected and recorded is not None and recorded != expected[key]:
        diffs.append(f"{key}: records {recorded!r}, {setting.format(split=split)} {expected[key]!r}")
    if diffs:
      raise ValueError(f"{meta_path}: task.{split}'s records were made with other settings than the task rebuilds "
                       f"their features with ({'; '.join(diffs)}); the outputs would be mapped to the wrong "
                       "windows. Set the task's values to the records' (or rebuild the records with create_"
                       "finetuning_data and the task's values, or point input_path at the SQuAD JSON).")
