r"""GLUE / SQuAD / RACE → fine-tuning TFRecords (+ a JSON of counts), cached safely.

Usage:
  python -m data_prep.create_finetuning_data --task=glue/mrpc --input_dir=glue_data \
      --spm_model_file=30k-clean.model --output_dir=/tmp/mrpc --max_seq_length=512
  python -m data_prep.create_finetuning_data --task=squad_v2 --input_file=train-v2.0.json --split=train ...
  python -m data_prep.create_finetuning_data --task=race --input_dir=RACE_parent --splits=train,dev ...

Output per split: `<task>_<split>.tf_record` and `<task>_<split>.meta.json` in `output_dir`. Feature names are the
model's input names (int64 on disk):
  GLUE  input_word_ids, input_mask, input_type_ids [L]; label_ids (int64; float for STS-B; -1 / nan when unlabelled)
  SQuAD unique_ids; input_word_ids, input_mask, input_type_ids, p_mask [L]; training files add start_positions,
        end_positions, is_impossible. Evaluation needs no pickle: post-processing rebuilds the (deterministic)
        features from the JSON file and matches them by unique_id. Training records come in the reference's order:
        the examples shuffled with random.Random(--squad_shuffle_seed=12345), each with its windows (§5.2).
  RACE  input_word_ids, input_mask, input_type_ids [4*L] (row-major [4, L]); label_ids; level_ids (0 middle, 1 high)

Cache (fixes reference bug #25): an existing record is reused only when its meta.json has the same key — task,
split, max_seq_length (+ doc_stride / max_query_length / max_qa_length), do_lower_case (and keep_accents /
remove_space when not the defaults), tokenizer mode, the spm model's SHA-256 and the input files' sizes and
modification times. Anything else rebuilds it, as does a meta that was written with another record file (the meta
records the record file's size and modification time: two runs with other settings into one --output_dir could leave
one's meta beside the other's records). Files are written to a temporary name and renamed.
"""

from __future__ import annotations

import logging
import os
from typing import Dict, Optional, Sequence, Type

from absl import app
from absl import flags

from official_albert import cli
from official_albert import file_io
from official_albert.data import records as records_lib
from official_albert.data import squad_features
from official_albert.tokenization import choices
from official_albert.tokenization import FullTokenizer

logger = logging.getLogger(__name__)

FAMILIES = ("glue/<name>", "squad_v1", "squad_v2", "race")


def writer_class(task: str) -> Type:
  """The `tasks.records.RecordWriter` of `task`'s family."""
  import tasks  # noqa: PLC0415 (shadow check first)
  cli.require_project_package(tasks)
  if task.startswith("glue/"):
    from tasks.glue.data import GlueRecords  # noqa: PLC0415 (binary: TF after launch)
    return GlueRecords
  if task in ("squad_v1", "squad_v2"):
    from tasks.squad import SquadRecords  # noqa: PLC0415 (binary: TF after launch)
    return SquadRecords
  if task == "race":
    from tasks.race.data import RaceRecords  # noqa: PLC0415 (binary: TF after launch)
    return RaceRecords
  raise ValueError(f"--task must be one of {', '.join(FAMILIES)}; got {task!r}.")


def create_finetuning_data(task: str, output_dir: str, spm_model_file: str, splits: Sequence[str] = ("train", "dev"),
                           input_dir: Optional[str] = None, input_file: Optional[str] = None,
                           max_seq_length: Optional[int] = None, do_lower_case: bool = True,
                           tokenizer_mode: str = "hf", keep_accents: bool = False, remove_space: bool = True,
                           doc_stride: Optional[int] = None,
                           max_query_length: Optional[int] = None, max_qa_length: Optional[int] = None,
                           skip_bad_rows: Optional[bool] = None,
                           race_levels: Sequence[str] = ("middle", "high"),
                           overwrite: bool = False, squad_shuffle_seed: Optional[int] = 12345,
                           train_shuffle_seed: Optional[int] = 12345) -> Dict[str, Dict[str, object]]:
  """Builds (or reuses) the TFRecords of every requested split.

  Args:
    task: "glue/<name>" (cola, sst-2, mrpc, sts-b, qqp, mnli, mnli-mm, qnli, rte, wnli, ax), "squad_v1",
      "squad_v2" or "race".
    output_dir: where `<task>_<split>.tf_record` and `.meta.json` go.
    spm_model_file: SentencePiece model.
    splits: GLUE/RACE splits; for SQuAD the single split name ("train" writes training labels).
    input_dir: GLUE root / RACE parent folder.
    input_file: the SQuAD JSON file; for GLUE one split's file, instead of `input_dir` (then `splits` must name
      exactly one split: each split would otherwise be built from this one file).
    max_seq_length: defaults to the reference (GLUE 512, SQuAD 384, RACE 512).
    keep_accents, remove_space: FullTokenizer options (defaults: ALBERT's); a cased, accented model's folder records
      others in its tokenizer_config.json, which a fine-tuning run from raw files uses: pass the same here so the
      records are those (keyed and recorded in the meta's cache key when not the defaults).
    doc_stride, max_query_length, max_qa_length: default the reference's 128 / 64 / 128 where they fit, else (a
      length of 67 or less for SQuAD, under 132 for RACE) the reference's proportions, logged: what the fine-tuning
      run fits for the same length (`model_source.fit_question_caps`), so its records and its features agree.
    overwrite: rebuild even when the cache key matches.
    squad_shuffle_seed: SQuAD train split: write the examples' windows in `random.Random(seed).shuffle` order
      (reference §5.2: 12345); None / negative = file order.
    train_shuffle_seed: GLUE / RACE train split: write the examples in the order of a permutation drawn with this
      seed (`tasks.records.training_order`), so a file sorted by label trains as the same rows shuffled; None /
      negative = file order. The other splits keep the file's order.

  Returns:
    split → meta dict (counts, paths, cache key, whether the cache was reused).
  """
  cls = writer_class(task)  # checks first that `tasks` is this project's package
  if input_file and task.startswith("glue/") and len(splits) != 1:
    raise ValueError(one_file_one_split(task, input_file, splits))
  from tasks.records import build_split  # noqa: PLC0415 (shadow check first)
  from tasks.records import RecordOptions  # noqa: PLC0415 (shadow check first)
  from tasks.records import split_cache_key  # noqa: PLC0415 (shadow check first)
  max_seq_length = max_seq_length or cls.default_max_seq_length
  given = {"doc_stride": doc_stride, "max_query_length": max_query_length, "max_qa_length": max_qa_length}
  doc_stride, max_query_length = squad_features.fit_windows(max_seq_length, doc_stride, max_query_length)
  max_qa_length = choices.fit_qa_length(max_seq_length, max_qa_length)
  chosen = {"doc_stride": doc_stride, "max_query_length": max_query_length, "max_qa_length": max_qa_length}
  reference = {"doc_stride": squad_features.REFERENCE_DOC_STRIDE,
               "max_query_length": squad_features.REFERENCE_QUERY_LENGTH, "max_qa_length": choices.REFERENCE_QA_LENGTH}
  used = {"squad_v1": ("doc_stride", "max_query_length"), "squad_v2": ("doc_stride", "max_query_length"),
          "race": ("max_qa_length",)}.get(task, ())
  fitted = [f"--{k}={chosen[k]}" for k in used if given[k] is None and chosen[k] != reference[k]]
  if fitted:
    logger.info("%s: max_seq_length=%d leaves no room for the reference's %s.", ", ".join(fitted), max_seq_length,
                ", ".join(f"{k} {reference[k]}" for k in used))
  writer = cls(RecordOptions(task=task, input_dir=input_dir, input_file=input_file, max_seq_length=max_seq_length,
                             doc_stride=doc_stride, max_query_length=max_query_length, max_qa_length=max_qa_length,
                             skip_bad_rows=skip_bad_rows, race_levels=tuple(race_levels),
                             squad_shuffle_seed=squad_shuffle_seed, train_shuffle_seed=train_shuffle_seed))
  safe_name = task.replace("/", "_")
  file_io.makedirs(output_dir)
  spm_sha = records_lib.file_sha256(spm_model_file)
  tokenizer = []  # built on the first split that is not cached

  def get_tokenizer():
    if not tokenizer:
      tokenizer.append(FullTokenizer(spm_model_file, do_lower_case=do_lower_case, mode=tokenizer_mode,
                                     keep_accents=keep_accents, remove_space=remove_space))
    return tokenizer[0]

  results = {}
  for split in splits:
    key = split_cache_key(writer, split, spm_sha, do_lower_case, tokenizer_mode, keep_accents, remove_space)
    results[split] = build_split(writer, split, os.path.join(output_dir, f"{safe_name}_{split}.tf_record"),
                                 os.path.join(output_dir, f"{safe_name}_{split}.meta.json"), key, get_tokenizer,
                                 overwrite=overwrite)
  return results


def define_flags(fv: flags.FlagValues = flags.FLAGS) -> None:
  """Defines the binary's flags on `fv` (never at import time)."""
  flags.DEFINE_string("task", None, "glue/<name>, squad_v1, squad_v2 or race.", flag_values=fv)
  flags.DEFINE_string("input_dir", None, "GLUE root (holding CoLA/, MRPC/, ...) or the folder holding RACE/.",
                      flag_values=fv)
  flags.DEFINE_string("input_file", None, "SQuAD JSON file; GLUE: one split's file (with one --splits name).",
                      flag_values=fv)
  flags.DEFINE_list("splits", ["train", "dev"], "Splits to convert (GLUE/RACE); SQuAD: one name (or --split).",
                    flag_values=fv)
  flags.DEFINE_string("split", "train", "SQuAD: 'train' writes training labels, anything else writes eval features.",
                      flag_values=fv)
  flags.DEFINE_string("spm_model_file", None, "SentencePiece model.", flag_values=fv)
  flags.DEFINE_string("output_dir", None, "Output folder.", flag_values=fv)
  flags.DEFINE_integer("max_seq_length", None, "Default: GLUE 512, SQuAD 384, RACE 512 (reference).", flag_values=fv)
  flags.DEFINE_bool("do_lower_case", True, "Lower-case the text.", flag_values=fv)
  flags.DEFINE_bool("keep_accents", False, "Keep accents (a cased, accented model: as its tokenizer_config.json).",
                    flag_values=fv)
  flags.DEFINE_bool("remove_space", True, "Collapse and strip whitespace (as the model's tokenizer_config.json).",
                    flag_values=fv)
  flags.DEFINE_enum("tokenizer_mode", "hf", ["hf", "reference", "upstream_py3"],
                    "FullTokenizer mode; the same in every tool of the recipe (hf is the default of all of them).",
                    flag_values=fv)
  flags.DEFINE_integer("doc_stride", None, "SQuAD window stride. Default: 128 (at --max_seq_length 67 or less, "
                       "the reference's proportion: 21 at 64).", flag_values=fv)
  flags.DEFINE_integer("max_query_length", None, "SQuAD question length cap. Default: 64 (at --max_seq_length 67 "
                       "or less, the reference's proportion: 10 at 64).", flag_values=fv)
  flags.DEFINE_integer("max_qa_length", None, "RACE question+option length cap (keeps the last tokens). Default: "
                       "128 (at --max_seq_length under 132, a quarter of it).", flag_values=fv)
  flags.DEFINE_bool("skip_bad_rows", None, "GLUE: skip and count rows with missing columns (default: reference "
                    "behaviour, True only for QQP).", flag_values=fv)
  flags.DEFINE_list("race_levels", ["middle", "high"], "RACE levels.", flag_values=fv)
  flags.DEFINE_bool("overwrite", False, "Rebuild even when the cache key matches.", flag_values=fv)
  flags.DEFINE_integer("squad_shuffle_seed", 12345, "SQuAD --split=train: shuffle the examples (each with its windows) "
                       "with random.Random(seed) before writing, as the reference (12345); negative = file order.",
                       flag_values=fv)
  flags.DEFINE_integer("train_shuffle_seed", 12345, "GLUE / RACE train split: write the examples in a seeded random "
                       "order, so a sorted file trains shuffled (a permutation of row positions: the same rows in "
                       "another order train in another sequence); negative = file order.", flag_values=fv)


def one_file_one_split(task: str, input_file: str, splits: Sequence[str]) -> str:
  """The error for one `--input_file` with several splits: every split would be built from that one file (a GLUE
  dev set that is its train set)."""
  return (f"--task={task} --input_file={input_file} is one split's file: pass one split, --splits=train or "
          f"--splits=dev, not --splits={','.join(splits)} (or --input_dir for the GLUE folder's own split files).")


def command_line_splits(fv: flags.FlagValues) -> Sequence[str]:
  """The splits to build: GLUE / RACE `--splits`; SQuAD one split, from `--split` or a one-name `--splits` (its file is
  one split: a `--splits` it cannot honour is refused, never ignored)."""
  if not fv.task.startswith("squad"):
    if fv["split"].present:
      raise app.UsageError(f"--split is SQuAD's flag; --task={fv.task} takes --splits (e.g. --splits=train,dev).")
    if fv.input_file and fv.task.startswith("glue/") and len(fv.splits) != 1:
      raise app.UsageError(one_file_one_split(fv.task, fv.input_file, fv.splits))
    return fv.splits
  if fv["splits"].present:
    if fv["split"].present or len(fv.splits) != 1:
      raise app.UsageError(f"--task={fv.task} converts one file into one split: pass --splits=train (training "
                           f"features) or --splits=dev (evaluation features), not --splits={','.join(fv.splits)}"
                           + (" together with --split" if fv["split"].present else "") + ".")
    return list(fv.splits)
  return [fv.split]


def main(argv, fv: flags.FlagValues = flags.FLAGS) -> None:
  del argv
  for name in ("task", "spm_model_file", "output_dir"):
    if not getattr(fv, name):
      raise app.UsageError(f"--{name} is required.")
  splits = command_line_splits(fv)
  results = create_finetuning_data(
      fv.task, fv.output_dir, fv.spm_model_file, splits=splits, input_dir=fv.input_dir,
      input_file=fv.input_file, max_seq_length=fv.max_seq_length, do_lower_case=fv.do_lower_case,
      tokenizer_mode=fv.tokenizer_mode, keep_accents=fv.keep_accents, remove_space=fv.remove_space,
      doc_stride=fv.doc_stride, max_query_length=fv.max_query_length,
      max_qa_length=fv.max_qa_length, skip_bad_rows=fv.skip_bad_rows, race_levels=fv.race_levels,
      overwrite=fv.overwrite, squad_shuffle_seed=fv.squad_shuffle_seed, train_shuffle_seed=fv.train_shuffle_seed)
  for split, meta in results.items():
    print(f"{split}: {meta['num_records']} records → {meta['record_path']}"
          f"{' (cache reused)' if meta['reused_cache'] else ''}")


def console_main() -> None:
  """The `albert-create-finetuning-data` console script (pyproject.toml)."""
  cli.launch(define_flags, main)


if __name__ == "__main__":
  console_main()
