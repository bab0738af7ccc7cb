"""Bad input is named: every damaged, foreign or mis-sized TFRecord file is reported with its path, the index of its
first bad record, what is wrong and the fix — by `input_pipeline.scan_files`, by `--validate_input` before training
and whenever a read fails during training, evaluation or prediction (tf.data itself names no file:
`truncated record at 12772`). Input patterns of every split the mode reads are checked at start-up.

Records are tiny pretraining records (seq 32, 4 predictions) written here; models are H 32, 2 layers.
"""

import json
import logging

from absl import flags
import numpy as np
import pytest
import tensorflow as tf

from official_albert.data import input_pipeline
from official_albert.data.input_pipeline import InputDataError
from official_albert.train import build_params
from official_albert.training import train_lib

SEQ, PREDS = 32, 4


def _example(uid, seq=SEQ, ids_dtype="int64", drop=None):
  rng = np.random.default_rng(uid)
  ints = lambda v: tf.train.Feature(int64_list=tf.train.Int64List(value=[int(x) for x in v]))
  floats = lambda v: tf.train.Feature(float_list=tf.train.FloatList(value=[float(x) for x in v]))
  features = {"input_ids": (ints if ids_dtype == "int64" else floats)(rng.integers(5, 300, seq)),
              "input_mask": ints([1] * seq), "segment_ids": ints([0] * seq),
              "masked_lm_positions": ints([1, 2, 3, 0]), "masked_lm_ids": ints([7, 8, 9, 0]),
              "masked_lm_weights": floats([1, 1, 1, 0]), "next_sentence_labels": ints([uid % 2])}
  features.pop(drop, None)
  return tf.train.Example(features=tf.train.Features(feature=features)).SerializeToString()


def _write(path, records):
  with tf.io.TFRecordWriter(str(path)) as writer:
    for record in records:
      writer.write(record)
  return str(path)


def _good(path, n=20, seq=SEQ, start=0):
  return _write(path, [_example(start + i, seq) for i in range(n)])


def _record_offsets(path):
  """Byte offset of each record (a TFRecord is 8 length bytes + 4 CRC + data + 4 CRC)."""
  data, offsets, at = open(path, "rb").read(), [], 0
  while at < len(data):
    offsets.append(at)
    at += 16 + int.from_bytes(data[at:at + 8], "little")
  return offsets


def _truncate(path, keep):
  data = open(path, "rb").read()
  open(path, "wb").write(data[:keep])


def _decode(seq=SEQ):
  spec = input_pipeline.pretraining_feature_spec(seq, PREDS)
  return lambda records: input_pipeline.decode_record(records, spec, input_pipeline.PRETRAINING_RENAMES)


# ------------------------------------------------------------------------------------------------ the scanner
def test_scan_names_every_bad_file_its_first_bad_record_and_the_fix(tmp_path):
  good = _good(tmp_path / "good")
  not_records = tmp_path / "notes.txt"
  not_records.write_text('{"looks": "like json"}\n' * 20)
  truncated = _good(tmp_path / "truncated")
  _truncate(truncated, _record_offsets(truncated)[13] + 40)  # cut inside record 13's data
  in_header = _good(tmp_path / "in_header")
  _truncate(in_header, _record_offsets(in_header)[7] + 5)  # TensorFlow reads this file silently as 7 records
  corrupted = _good(tmp_path / "corrupted")
  data = bytearray(open(corrupted, "rb").read())
  data[_record_offsets(corrupted)[11] + 30] ^= 0xFF  # a flipped bit in record 11's data: its CRC fails
  open(corrupted, "wb").write(bytes(data))
  foreign = _write(tmp_path / "foreign", [_example(i) for i in range(4)] + [b"not an Example proto" * 3])
  short = _write(tmp_path / "short", [_example(i) for i in range(9)] + [_example(i, seq=16) for i in range(3)])
  missing = _write(tmp_path / "missing", [_example(0), _example(1, drop="masked_lm_ids")])
  dtype = _write(tmp_path / "dtype", [_example(0), _example(1), _example(2, ids_dtype="float")])
  files = [good, str(not_records), truncated, in_header, corrupted, foreign, short, missing, dtype]

  count, problems = input_pipeline.scan_files(files, _decode(), batch_size=4)
  got = {p.path.rsplit("/", 1)[1]: p for p in problems}
  assert sorted(got) == sorted(f.rsplit("/", 1)[1] for f in files[1:])  # every bad file, the good one not
  expect = {"notes.txt": ("not_tfrecord", 0), "truncated": ("truncated", 13), "in_header": ("truncated", 7),
            "corrupted": ("corrupted", 11), "foreign": ("not_example", 4), "short": ("length", 9),
            "missing": ("missing_feature", 1), "dtype": ("dtype", 2)}
  assert {name: (p.kind, p.record) for name, p in got.items()} == expect
  assert count == 20 + 13 + 7 + 11 + 4 + 9 + 1 + 2
  assert (got["short"].found, got["short"].expected) == ("16", "32")
  assert got["missing"].feature == "masked_lm_ids"
  text = got["notes.txt"].describe()
  assert text.startswith(f"{not_records}: record 0: not a TFRecord file") and "Fix: take it out of input_path" in text
  assert "Fix: rebuild the shard" in got["truncated"].describe()
  feature = got["short"].feature
  assert feature in ("input_ids", "input_mask", "segment_ids")
  assert got["short"].describe("task.train_data.seq_length", 16) == (
      f"{short}: record 9: feature {feature!r} has 16 values, the config expects 32. Fix: the records were built "
      "with other sizes: set task.train_data.seq_length=16 to read them as they are, or rebuild them with "
      "--max_seq_length matching task.train_data.seq_length.")
  # Without a decoder only the framing is checked (what a DataLossError needs): the parse problems pass.
  _, framing = input_pipeline.scan_files(files, None, batch_size=4)
  assert sorted(p.kind for p in framing) == ["corrupted", "not_tfrecord", "truncated", "truncated"]


def test_read_errors_are_told_from_other_errors():
  assert input_pipeline.is_read_error(tf.errors.DataLossError(None, None, "corrupted record at 599847"))
  assert input_pipeline.is_read_error(tf.errors.InvalidArgumentError(
      None, None, "Name: <unknown>, Key: input_ids, Index: 0.  Number of int64 values != expected."))
  assert not input_pipeline.is_read_error(tf.errors.InvalidArgumentError(None, None, "Matrix size-incompatible"))


# ------------------------------------------------------------------------------------------------ runs
TINY_MODEL = {"vocab_size": 300, "embedding_size": 16, "hidden_size": 32, "num_hidden_layers": 2,
              "num_attention_heads": 2, "intermediate_size": 64, "max_position_embeddings": 512}


def _params(train, validation="", seq=SEQ, steps=2, **trainer):
  data = {"global_batch_size": 4, "seq_length": seq, "max_predictions_per_seq": PREDS}
  override = {"task": {"model": TINY_MODEL, "train_data": dict(data, input_path=train),
                       "validation_data": dict(data, input_path=validation)},
              "trainer": dict({"train_steps": steps, "steps_per_loop": 1, "checkpoint_interval": 100,
                               "validation_interval": 100, "validation_steps": -1, "summary_interval": 100,
                               "warmup_steps": 0}, **trainer),
              "runtime": {"distribution_strategy": "one_device"}}
  return build_params("albert_tiny_pretrain", params_override=json.dumps(override))


def test_a_truncated_shard_met_in_training_is_named(tmp_path):
  files = [_good(tmp_path / f"train-{k:05d}-of-00003", n=12, start=100 * k) for k in range(3)]
  _truncate(files[1], _record_offsets(files[1])[8] + 30)
  with pytest.raises(tf.errors.DataLossError) as raised:
    train_lib.run_experiment(_params(str(tmp_path / "train-*"), steps=30), str(tmp_path / "model"), "train")
  message = str(raised.value)
  assert "truncated record at" in message  # TensorFlow's words, kept
  assert f"task.train_data: {files[1]}: record 8: the file ends inside this record" in message
  assert files[0] not in message and files[2] not in message


def test_records_of_another_length_name_file_feature_lengths_and_config_key(tmp_path):
  # Records built at max_seq_length=64, read by a config that expects 512.
  path = _good(tmp_path / "train-00000-of-00001", n=8, seq=64)
  with pytest.raises(tf.errors.InvalidArgumentError) as raised:
    train_lib.run_experiment(_params(path, seq=512), str(tmp_path / "model"), "train")
  message = str(raised.value)
  assert f"task.train_data: {path}: record 0: feature '" in message
  assert "has 64 values, the config expects 512" in message
  assert "set task.train_data.seq_length=64 to read them as they are" in message


def test_a_file_that_is_not_a_tfrecord_met_in_evaluation_is_named(tmp_path):
  train = _good(tmp_path / "train", n=8)
  dev = [_good(tmp_path / "dev-00000-of-00002", n=6), str(tmp_path / "dev-00001-of-00002")]
  (tmp_path / "dev-00001-of-00002").write_text("index\tsentence\n0\tnot a record\n")
  with pytest.raises(tf.errors.DataLossError) as raised:
    train_lib.run_experiment(_params(train, str(tmp_path / "dev-*")), str(tmp_path / "model"), "train_and_eval")
  message = str(raised.value)
  assert f"task.validation_data: {dev[1]}: record 0: not a TFRecord file" in message
  assert dev[0] not in message and f": {train}:" not in message


def test_a_validation_glob_that_matches_nothing_fails_at_start_up(tmp_path):
  train = _good(tmp_path / "train-00000-of-00001", n=8)
  model_dir = tmp_path / "model"
  with pytest.raises(InputDataError) as raised:
    train_lib.run_experiment(_params(train, str(tmp_path / "dev-*"), steps=4), str(model_dir), "train_and_eval")
  assert "task.validation_data.input_path=" in str(raised.value) and "dev-*" in str(raised.value)
  assert not model_dir.exists()  # refused before anything was built, trained or written
  # Every comma-separated pattern must match: one that matches nothing is a typo, not "fewer files".
  with pytest.raises(InputDataError, match=r"task.train_data.input_path=.*trian-\*"):
    train_lib.run_experiment(_params(f"{train},{tmp_path}/trian-*"), str(model_dir), "train")
  assert not model_dir.exists()


def _run_binary_main(argv):
  from official_albert import train
  fv = flags.FlagValues()
  train.define_flags(fv)
  fv(["train"] + argv)
  return train.main(["train"], fv)


def test_validate_input_reports_every_bad_file_and_exits_non_zero(tmp_path, caplog):
  shards = [_good(tmp_path / f"train-{k:05d}-of-00004", n=10, start=10 * k) for k in range(4)]
  _truncate(shards[1], _record_offsets(shards[1])[6] + 20)
  data = bytearray(open(shards[2], "rb").read())
  data[_record_offsets(shards[2])[3] + 25] ^= 0x01
  open(shards[2], "wb").write(bytes(data))
  _write(shards[3], [_example(i) for i in range(5)] + [_example(5, seq=16)])
  (tmp_path / "train-notes.txt").write_text("these are my notes\n")  # matched by train-*
  dev = _write(tmp_path / "dev", [_example(0, seq=16)])
  override = json.dumps({"task": {"model": TINY_MODEL,
                                  "train_data": {"input_path": str(tmp_path / "train-*"), "seq_length": SEQ,
                                                 "max_predictions_per_seq": PREDS},
                                  "validation_data": {"input_path": dev, "seq_length": SEQ,
                                                      "max_predictions_per_seq": PREDS}},
                         "runtime": {"distribution_strategy": "one_device"}})
  model_dir = tmp_path / "model"
  with caplog.at_level(logging.INFO):
    status = _run_binary_main(["--experiment=albert_tiny_pretrain", "--mode=train_and_eval",
                               f"--model_dir={model_dir}", f"--params_override={override}", "--validate_input"])
  assert status == 1
  report = "\n".join(r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR)
  assert "5 bad input file(s); nothing was trained" in report
  for line in (f"task.train_data: {shards[1]}: record 6: the file ends inside this record",
               f"task.train_data: {shards[2]}: record 3: the record fails its checksum",
               f"task.train_data: {shards[3]}: record 5: feature '",
               f"task.train_data: {tmp_path / 'train-notes.txt'}: record 0: not a TFRecord file",
               f"task.validation_data: {dev}: record 0: feature '"):
    assert line in report, line
  assert "set task.validation_data.seq_length=16" in report and shards[0] + ":" not in report
  assert not (model_dir / "checkpoint").exists()


def test_validate_input_on_good_data_goes_on_with_the_run(tmp_path):
  train = _good(tmp_path / "train-00000-of-00001", n=8)
  result = train_lib.run_experiment(_params(train), str(tmp_path / "model"), "train", validate_input=True)
  assert result["status"] == "completed" and result["global_step"] == 2


@pytest.mark.slow
def test_a_damaged_predict_file_is_named(tmp_path):
  # GLUE SST-2: 2 training steps on the synthetic data, then --mode=predict over records with a damaged record 5.
  from official_albert.data import records
  rng = np.random.default_rng(0)
  path = str(tmp_path / "test.tf_record")
  records.write_tfrecord(path, [{"input_word_ids": rng.integers(5, 300, 16), "input_mask": np.ones(16, np.int32),
                                 "input_type_ids": np.zeros(16, np.int32), "label_ids": np.int32(-1)}
                                for _ in range(9)])
  data = bytearray(open(path, "rb").read())
  data[_record_offsets(path)[5] + 20] ^= 0x10
  open(path, "wb").write(bytes(data))
  small = {"global_batch_size": 4, "seq_length": 16}
  override = {"task": {"model": dict(TINY_MODEL, max_position_embeddings=16),
                       "train_data": dict(small, input_path="dummy"),
                       "validation_data": dict(small, input_path="dummy"),
                       "predict_data": dict(small, input_path=path)},
              "trainer": {"train_steps": 2, "steps_per_loop": 2, "checkpoint_interval": 2, "warmup_steps": 0},
              "runtime": {"distribution_strategy": "one_device"}}
  params = build_params("glue/sst-2", params_override=json.dumps(override))
  train_lib.run_experiment(params, str(tmp_path / "model"), "train")
  with pytest.raises(tf.errors.DataLossError) as raised:
    train_lib.run_experiment(params, str(tmp_path / "model"), "predict")
  assert f"task.predict_data: {path}: record 5: the record fails its checksum" in str(raised.value)
