r"""Prints what the model will see from pretraining data: static records or the on-the-fly pipeline.

Reads `--num_examples` examples, either from static TFRecords (`create_pretraining_data` or the reference tool; the
sequence length and prediction slots are read from the first record unless given) or, with `--dynamic_masking`,
from the pipeline over a tokenized corpus (`tokenize_corpus`), and prints a stats JSON: masked whole-word run
histogram (adjacent n-grams merge, identically for both paths), [MASK]/kept/random fractions, SOP label balance,
predictions per sequence, padding fraction, masked pieces of partly masked words, and a few decoded examples
(with `--spm_model_file`). `--output_file` writes those examples as TFRecords in the reference layout
(`input_ids`, `input_mask`, `segment_ids`, `token_boundary`, `masked_lm_positions`, `masked_lm_ids`,
`masked_lm_weights`, `next_sentence_labels`), so any reader of the reference's records can check them, and the
stats beside it (`<output_file>.stats.json`).

Usage:
  python -m data_prep.inspect_pretraining_data --input_path='tok/tokens-*' --dynamic_masking \
    --spm_model_file=30k-clean.model --max_seq_length=512 --max_predictions_per_seq=20 --seed=1 \
    --num_examples=10000 --output_file=/tmp/dynamic_sample.tfrecord
"""

from __future__ import annotations

import json
import logging
from typing import Dict, Iterator, List, Optional, Tuple

from absl import flags
import numpy as np

from data_prep import pretraining_records
from official_albert import cli
from official_albert import file_io
from official_albert import tokenization
from tasks.masking_options import MaskingOptions

logger = logging.getLogger(__name__)

REFERENCE_NAMES = {"input_word_ids": "input_ids", "input_type_ids": "segment_ids"}
_BATCH = 256


def _static_layout(pattern: str) -> Tuple[int, int]:
  """(seq_length, prediction slots) of the first record matching `pattern`."""
  import tensorflow as tf  # noqa: PLC0415 (binary: TF after launch)

  from official_albert.data import input_pipeline  # noqa: PLC0415 (binary: TF after launch)
  first = input_pipeline.list_files(pattern)[0]
  for record in tf.data.TFRecordDataset(first).take(1):
    example = tf.train.Example.FromString(record.numpy())
    feature = example.features.feature
    if "input_ids" not in feature or "masked_lm_positions" not in feature:
      raise ValueError(f"{first}: not a pretraining record (no input_ids / masked_lm_positions); for a tokenized "
                       "corpus pass --dynamic_masking.")
    return len(feature["input_ids"].int64_list.value), len(feature["masked_lm_positions"].int64_list.value)
  raise ValueError(f"{first} holds no record.")


def iter_batches(input_path: str, dynamic: bool, num_examples: int, seq_length: Optional[int],
                 max_predictions_per_seq: Optional[int], seed: int,
                 masked_lm_prob: float = MaskingOptions.masked_lm_prob,
                 short_seq_prob: float = MaskingOptions.short_seq_prob,
                 max_ngram: int = 3) -> Iterator[Dict[str, np.ndarray]]:
  """Batches (numpy, model names + token_boundary) holding exactly `num_examples` examples (fewer if the static
  records end first)."""
  from official_albert.data import input_pipeline  # noqa: PLC0415 (binary: TF after launch)
  from tasks import pretraining_dynamic  # noqa: PLC0415 (binary: TF after launch)
  if dynamic:
    dataset = pretraining_dynamic.dynamic_pretraining_dataset(
        input_path, seq_length or 512, max_predictions_per_seq or 20, _BATCH, is_training=True, seed=seed,
        masked_lm_prob=masked_lm_prob, short_seq_prob=short_seq_prob, max_ngram=max_ngram,
        include_token_boundary=True)
  else:
    seq, preds = _static_layout(input_path)
    if (seq_length and seq_length != seq) or (max_predictions_per_seq and max_predictions_per_seq != preds):
      raise ValueError(f"{input_path}: the records have seq_length={seq} and {preds} prediction slots, not "
                       f"--max_seq_length={seq_length} / --max_predictions_per_seq={max_predictions_per_seq}.")
    dataset = input_pipeline.pretraining_dataset(input_path, seq, preds, _BATCH, is_training=False,
                                                 include_token_boundary=True, drop_remainder=False)
  left = num_examples
  for batch in dataset:
    if left <= 0:
      break
    arrays = {k: v.numpy()[:left] for k, v in batch.items()}
    left -= arrays["input_word_ids"].shape[0]
    yield arrays


def decode_example(batch: Dict[str, np.ndarray], row: int, sp) -> Dict[str, object]:
  """One example as pieces: the input with its [MASK]s and each target (position, label, what the input shows)."""
  ids = batch["input_word_ids"][row][batch["input_mask"][row] > 0]
  weights = batch["masked_lm_weights"][row] > 0
  shown = batch["input_word_ids"][row]
  targets = [{"position": int(p), "label": sp.IdToPiece(int(t)), "input": sp.IdToPiece(int(shown[p]))}
             for p, t in zip(batch["masked_lm_positions"][row][weights], batch["masked_lm_ids"][row][weights])]
  return {"input": " ".join(sp.IdToPiece(int(i)) for i in ids), "targets": targets,
          "sop_label": int(batch["next_sentence_labels"][row][0])}


def to_reference_features(batch: Dict[str, np.ndarray]) -> Dict[str, np.ndarray]:
  """Model names → reference record names; int64 everywhere except the float weights."""
  out = {}
  for key, value in batch.items():
    if key in ("doc_index", "epoch"):
      continue
    out[REFERENCE_NAMES.get(key, key)] = value.astype(np.float32 if value.dtype.kind == "f" else np.int64)
  return out


def check_output_apart(input_path: str, output_file: str) -> None:
  """Refuses an `output_file` (or its `.stats.json`) that is a file `input_path` matches: the records were replaced
  by the first `--num_examples` of themselves, without a word."""
  patterns = [p.strip() for p in input_path.split(",") if p.strip()]
  inputs = [m for p in patterns for m in ([p] if file_io.literal_path(p) else file_io.glob(p))]
  for target in (output_file, f"{output_file}.stats.json"):
    clash = next((path for path in inputs if file_io.same_location(path, target)), None)
    if clash:
      raise ValueError(f"--output_file={output_file}: {target} is {clash}, an input of --input_path={input_path}; "
                       "write the inspected examples to another file.")


def inspect(input_path: str, num_examples: int, dynamic: bool = False, spm_model_file: Optional[str] = None,
            seq_length: Optional[int] = None, max_predictions_per_seq: Optional[int] = None, seed: int = 0,
            output_file: Optional[str] = None, num_decoded: int = 3, **dynamic_options) -> Dict[str, object]:
  """Reads the examples, returns the stats dict (and writes `output_file` + its stats when given)."""
  from tasks import pretraining_dynamic  # noqa: PLC0415 (binary: TF after launch)
  if num_examples < 1:
    raise ValueError(f"--num_examples must be >= 1, got {num_examples}.")
  if output_file:
    check_output_apart(input_path, output_file)
  batches: List[Dict[str, np.ndarray]] = list(iter_batches(input_path, dynamic, num_examples, seq_length,
                                                           max_predictions_per_seq, seed, **dynamic_options))
  stats = pretraining_dynamic.feature_statistics(batches)
  stats["source"] = {"input_path": input_path, "dynamic_masking": dynamic, "seed": seed if dynamic else None}
  if spm_model_file and batches:
    sp = tokenization.FullTokenizer(spm_model_file).sp_model
    stats["examples_decoded"] = [decode_example(batches[0], r, sp)
                                 for r in range(min(num_decoded, batches[0]["input_word_ids"].shape[0]))]
  if output_file:
    import tensorflow as tf  # noqa: PLC0415 (binary: TF after launch)
    with file_io.atomic_path(output_file) as tmp:
      with tf.io.TFRecordWriter(tmp) as writer:
        for batch in batches:
          for record in pretraining_records.encode_examples(to_reference_features(batch)):
            writer.write(record)
    file_io.atomic_write_json(f"{output_file}.stats.json", stats)
  return stats


def define_flags(fv: flags.FlagValues = flags.FLAGS) -> None:
  """Defines the binary's flags on `fv` (never at import time)."""
  flags.DEFINE_string("input_path", None, "Static TFRecords, or with --dynamic_masking a tokenized corpus "
                      "(<dir>/tokens-*); comma-separated patterns.", flag_values=fv)
  flags.DEFINE_bool("dynamic_masking", False, "Read through the on-the-fly pipeline.", flag_values=fv)
  flags.DEFINE_string("spm_model_file", None, "SentencePiece model for the decoded examples (optional).",
                      flag_values=fv)
  flags.DEFINE_integer("max_seq_length", None, "Sequence length (static: read from the records).", flag_values=fv)
  flags.DEFINE_integer("max_predictions_per_seq", None, "Prediction slots (static: read from the records).",
                       flag_values=fv)
  flags.DEFINE_float("masked_lm_prob", MaskingOptions.masked_lm_prob, "Dynamic: masked LM probability.",
                     flag_values=fv)
  flags.DEFINE_float("short_seq_prob", MaskingOptions.short_seq_prob,
                     "Dynamic: probability of a shorter target length.", flag_values=fv)
  flags.DEFINE_integer("max_ngram", 3, "Dynamic: longest masked n-gram (whole words).", flag_values=fv)
  flags.DEFINE_integer("seed", 0, "Dynamic: the pipeline seed.", flag_values=fv)
  flags.DEFINE_integer("num_examples", 10000, "Examples to read.", flag_values=fv)
  flags.DEFINE_string("output_file", None, "Write the examples here as reference-layout TFRecords.", flag_values=fv)
  flags.mark_flag_as_required("input_path", flag_values=fv)


def main(argv, fv: flags.FlagValues = flags.FLAGS) -> None:
  del argv
  dynamic_only = [name for name in ("masked_lm_prob", "short_seq_prob", "max_ngram", "seed") if fv[name].present]
  if dynamic_only and not fv.dynamic_masking:  # (static records were read as written, the flags unused)
    raise flags.ValidationError(f"{', '.join('--' + n for n in dynamic_only)} apply with --dynamic_masking only: "
                                "static records are read as they were written.")
  stats = inspect(fv.input_path, fv.num_examples, dynamic=fv.dynamic_masking, spm_model_file=fv.spm_model_file,
                  seq_length=fv.max_seq_length, max_predictions_per_seq=fv.max_predictions_per_seq, seed=fv.seed,
                  output_file=fv.output_file, masked_lm_prob=fv.masked_lm_prob, short_seq_prob=fv.short_seq_prob,
                  max_ngram=fv.max_ngram)
  print(json.dumps(stats, indent=1, ensure_ascii=False))


def console_main() -> None:
  """The `albert-inspect-pretraining-data` console script (pyproject.toml)."""
  cli.launch(define_flags, main)


if __name__ == "__main__":
  console_main()
