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
        features from the JSON file and matches them by unique_id.
  RACE  input_word_ids, input_mask, input_type_ids [4*L] (row-major [4, L]); label_ids; level_ids (0 middle, 1 high)

Cache (fixes reference bug #25): an existing record is reused only when its meta.json has the same key — task,
split, max_seq_length (+ doc_stride / max_query_length / max_qa_length), do_lower_case, tokenizer mode, the spm
model's SHA-256 and the input files' sizes and modification times. Anything else rebuilds it. Files are written to a
temporary name and renamed.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from typing import Dict, Iterable, List, Optional, Sequence

from absl import app
from absl import flags
import numpy as np

from official_albert import file_io

logger = logging.getLogger(__name__)

DEFAULT_MAX_SEQ_LENGTH = {"glue": 512, "squad_v1": 384, "squad_v2": 384, "race": 512}


def _tf():
  import tensorflow as tf  # Lazy: keep `--help` fast.

  return tf


def _int_feature(values):
  tf = _tf()
  return tf.train.Feature(int64_list=tf.train.Int64List(value=[int(v) for v in values]))


def _float_feature(values):
  tf = _tf()
  return tf.train.Feature(float_list=tf.train.FloatList(value=[float(v) for v in values]))


def _serialize(record: Dict[str, object]) -> bytes:
  tf = _tf()
  feats = {}
  for key, value in record.items():
    arr = np.asarray(value)
    flat = arr.reshape(-1)
    feats[key] = _float_feature(flat) if arr.dtype.kind == "f" else _int_feature(flat)
  return tf.train.Example(features=tf.train.Features(feature=feats)).SerializeToString()


def write_tfrecord(path: str, records: Iterable[Dict[str, object]]) -> int:
  """Writes records to `path` through a temporary name; returns the count."""
  tf = _tf()
  count = 0
  with file_io.atomic_path(path) as tmp:
    with tf.io.TFRecordWriter(tmp) as writer:
      for record in records:
        writer.write(_serialize(record))
        count += 1
  return count


def _file_sha256(path: str) -> str:
  tf = _tf()
  h = hashlib.sha256()
  with tf.io.gfile.GFile(path, "rb") as f:
    h.update(f.read())
  return h.hexdigest()


def _input_fingerprint(paths: Sequence[str]) -> List[Dict[str, object]]:
  tf = _tf()
  out = []
  for p in sorted(paths):
    st = tf.io.gfile.stat(p)
    out.append({"path": p, "size": int(st.length), "mtime_nsec": int(st.mtime_nsec)})
  return out


def _cache_valid(meta_path: str, record_path: str, key: Dict[str, object]) -> bool:
  tf = _tf()
  if not (tf.io.gfile.exists(meta_path) and tf.io.gfile.exists(record_path)):
    return False
  with tf.io.gfile.GFile(meta_path, "r") as f:
    try:
      old = json.load(f)
    except json.JSONDecodeError:
      return False
  return old.get("cache_key") == key


def _task_family(task: str) -> str:
  if task.startswith("glue/"):
    return "glue"
  if task in ("squad_v1", "squad_v2", "race"):
    return task
  raise ValueError(f"--task must be glue/<name>, squad_v1, squad_v2 or race; got {task!r}.")


def _glue_inputs(task, input_dir, split):
  from tasks import glue
  spec = glue.get_spec(task.split("/", 1)[1])
  return [glue.task_file(spec, input_dir, split)]


def _race_inputs(input_dir, split, levels):
  from tasks import race
  tf = _tf()
  base = race._split_dir(input_dir, split)  # pylint: disable=protected-access
  paths = []
  for level in levels:
    level_dir = os.path.join(base, level)
    paths += [os.path.join(level_dir, n) for n in tf.io.gfile.listdir(level_dir) if n.endswith(".txt")]
  return paths


def create_finetuning_data(task: str, output_dir: str, spm_model_file: str, splits: Sequence[str] = ("train", "dev"),
                           input_dir: Optional[str] = None, input_file: Optional[str] = None,
                           max_seq_length: Optional[int] = None, do_lower_case: bool = True,
                           tokenizer_mode: str = "hf", doc_stride: int = 128, max_query_length: int = 64,
                           max_qa_length: int = 128, skip_bad_rows: Optional[bool] = None,
                           race_levels: Sequence[str] = ("middle", "high"),
                           overwrite: bool = False) -> Dict[str, Dict[str, object]]:
  """Builds (or reuses) the TFRecords of every requested split.

  Args:
    task: "glue/<name>" (cola, sst-2, mrpc, sts-b, qqp, mnli, mnli-mm, qnli, rte, wnli, ax), "squad_v1",
      "squad_v2" or "race".
    output_dir: where `<task>_<split>.tf_record` and `.meta.json` go.
    spm_model_file: SentencePiece model.
    splits: GLUE/RACE splits; for SQuAD the single split name ("train" writes training labels).
    input_dir: GLUE root / RACE parent folder.
    input_file: the SQuAD JSON file.
    max_seq_length: defaults to the reference (GLUE 512, SQuAD 384, RACE 512).
    overwrite: rebuild even when the cache key matches.

  Returns:
    split → meta dict (counts, paths, cache key, whether the cache was reused).
  """
  from official_albert.tokenization import FullTokenizer

  tf = _tf()
  family = _task_family(task)
  max_seq_length = max_seq_length or DEFAULT_MAX_SEQ_LENGTH[family]
  safe_name = task.replace("/", "_")
  tf.io.gfile.makedirs(output_dir)
  spm_sha = _file_sha256(spm_model_file)
  tokenizer = None
  results = {}
  for split in splits:
    if family == "glue":
      if not input_dir:
        raise ValueError("--input_dir (the GLUE root) is required for GLUE tasks.")
      inputs = _glue_inputs(task, input_dir, split)
    elif family == "race":
      if not input_dir:
        raise ValueError("--input_dir (the folder holding RACE/) is required for RACE.")
      inputs = _race_inputs(input_dir, split, race_levels)
    else:
      if not input_file:
        raise ValueError("--input_file (the SQuAD JSON) is required for SQuAD.")
      inputs = [input_file]
    key = {"task": task, "split": split, "max_seq_length": max_seq_length, "do_lower_case": do_lower_case,
           "tokenizer_mode": tokenizer_mode, "spm_sha256": spm_sha, "inputs": _input_fingerprint(inputs)}
    if family.startswith("squad"):
      key.update(doc_stride=doc_stride, max_query_length=max_query_length)
    if family == "race":
      key.update(max_qa_length=max_qa_length, levels=list(race_levels))
    if family == "glue":
      key.update(skip_bad_rows=skip_bad_rows)
    record_path = os.path.join(output_dir, f"{safe_name}_{split}.tf_record")
    meta_path = os.path.join(output_dir, f"{safe_name}_{split}.meta.json")
    if not overwrite and _cache_valid(meta_path, record_path, key):
      with tf.io.gfile.GFile(meta_path, "r") as f:
        meta = json.load(f)
      meta["reused_cache"] = True
      logger.info("Reusing %s (cache key matches).", record_path)
      results[split] = meta
      continue
    if tokenizer is None:
      tokenizer = FullTokenizer(spm_model_file, do_lower_case=do_lower_case, mode=tokenizer_mode)
    meta = {"task": task, "split": split, "record_path": record_path, "max_seq_length": max_seq_length}
    if family == "glue":
      from tasks import glue
      spec = glue.get_spec(task.split("/", 1)[1])
      examples = glue.read_examples(spec.name, input_dir, split, skip_bad_rows=skip_bad_rows)
      records = (glue.convert_example(e, spec, tokenizer, max_seq_length) for e in examples)
      meta.update(num_examples=len(examples), num_labels=spec.num_labels, is_regression=spec.is_regression,
                  labels=list(spec.labels) if spec.labels else None)
    elif family == "race":
      from tasks import race
      examples = race.read_examples(input_dir, split, race_levels)

      def _race_records(examples=examples):
        for e in examples:
          rec = race.convert_example(e, tokenizer, max_seq_length, max_qa_length)
          rec["level_ids"] = race.LEVELS.index(e.level)
          yield rec
      records = _race_records()
      meta.update(num_examples=len(examples), num_choices=race.NUM_CHOICES,
                  levels={lv: sum(e.level == lv for e in examples) for lv in race_levels})
    else:
      from tasks import squad
      is_training = split == "train"
      examples = squad.read_squad_examples(input_file, is_training=is_training,
                                           version_2_with_negative=family == "squad_v2")
      features, stats = squad.convert_examples_to_features(examples, tokenizer, max_seq_length, doc_stride,
                                                           max_query_length)
      arrays_keys = ["unique_ids", "input_word_ids", "input_mask", "input_type_ids", "p_mask"]
      if is_training:
        arrays_keys += ["start_positions", "end_positions", "is_impossible"]

      def _squad_records(features=features, keys=tuple(arrays_keys)):
        for f in features:
          rec = {"unique_ids": [f.unique_id], "input_word_ids": f.input_word_ids, "input_mask": f.input_mask,
                 "input_type_ids": f.input_type_ids, "p_mask": f.p_mask}
          if "start_positions" in keys:
            rec.update(start_positions=[f.start_position], end_positions=[f.end_position],
                       is_impossible=[f.is_impossible])
          yield rec
      records = _squad_records()
      meta.update(num_examples=len(examples), num_features=len(features),
                  num_mismatched_examples=len(stats.mismatched_examples),
                  num_answers_off_token_boundary=len(stats.answers_off_token_boundary),
                  num_out_of_span_features=stats.out_of_span_features, is_training=is_training,
                  doc_stride=doc_stride, max_query_length=max_query_length)
    meta["num_records"] = write_tfrecord(record_path, records)
    meta["cache_key"] = key
    file_io.atomic_write_json(meta_path, meta, sort_keys=False)
    meta["reused_cache"] = False
    logger.info("Wrote %d records to %s.", meta["num_records"], record_path)
    results[split] = meta
  return results


FLAGS = flags.FLAGS


def define_flags():
  """Defines the binary's flags; called only when run as a program (tests import this module without them)."""
  flags.DEFINE_string("task", None, "glue/<name>, squad_v1, squad_v2 or race.")
  flags.DEFINE_string("input_dir", None, "GLUE root (holding CoLA/, MRPC/, ...) or the folder holding RACE/.")
  flags.DEFINE_string("input_file", None, "SQuAD JSON file.")
  flags.DEFINE_list("splits", ["train", "dev"], "Splits to convert (GLUE/RACE); SQuAD uses --split.")
  flags.DEFINE_string("split", "train", "SQuAD: 'train' writes training labels, anything else writes eval features.")
  flags.DEFINE_string("spm_model_file", None, "SentencePiece model.")
  flags.DEFINE_string("output_dir", None, "Output folder.")
  flags.DEFINE_integer("max_seq_length", None, "Default: GLUE 512, SQuAD 384, RACE 512 (reference).")
  flags.DEFINE_bool("do_lower_case", True, "Lower-case the text.")
  flags.DEFINE_enum("tokenizer_mode", "hf", ["hf", "reference", "upstream_py3"], "FullTokenizer mode.")
  flags.DEFINE_integer("doc_stride", 128, "SQuAD window stride.")
  flags.DEFINE_integer("max_query_length", 64, "SQuAD question length cap.")
  flags.DEFINE_integer("max_qa_length", 128, "RACE question+option length cap (keeps the last tokens).")
  flags.DEFINE_bool("skip_bad_rows", None, "GLUE: skip and count rows with missing columns (default: reference "
                    "behaviour, True only for QQP).")
  flags.DEFINE_list("race_levels", ["middle", "high"], "RACE levels.")
  flags.DEFINE_bool("overwrite", False, "Rebuild even when the cache key matches.")


def main(argv):
  del argv
  for name in ("task", "spm_model_file", "output_dir"):
    if not getattr(FLAGS, name):
      raise app.UsageError(f"--{name} is required.")
  splits = [FLAGS.split] if FLAGS.task.startswith("squad") else FLAGS.splits
  results = create_finetuning_data(
      FLAGS.task, FLAGS.output_dir, FLAGS.spm_model_file, splits=splits, input_dir=FLAGS.input_dir,
      input_file=FLAGS.input_file, max_seq_length=FLAGS.max_seq_length, do_lower_case=FLAGS.do_lower_case,
      tokenizer_mode=FLAGS.tokenizer_mode, doc_stride=FLAGS.doc_stride, max_query_length=FLAGS.max_query_length,
      max_qa_length=FLAGS.max_qa_length, skip_bad_rows=FLAGS.skip_bad_rows, race_levels=FLAGS.race_levels,
      overwrite=FLAGS.overwrite)
  for split, meta in results.items():
    print(f"{split}: {meta['num_records']} records → {meta['record_path']}"
          f"{' (cache reused)' if meta['reused_cache'] else ''}")


if __name__ == "__main__":
  logging.basicConfig(level=logging.INFO)
  define_flags()
  app.run(main)
