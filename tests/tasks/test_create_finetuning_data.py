"""data_prep.create_finetuning_data: TFRecords equal the in-memory features; the cache is keyed, not stale."""

import json
import os
import shutil

from absl import flags
import numpy as np
import pytest
import tensorflow as tf

from data_prep import create_finetuning_data as cfd
from tasks import glue
from tasks import squad


def _read_records(path, spec):
  return [tf.io.parse_single_example(r, spec) for r in tf.data.TFRecordDataset(path)]


def test_glue_records_match_features_and_cache_is_keyed(shared_data_dir, spm_model_file, tmp_path):
  from official_albert.tokenization import FullTokenizer
  glue_dir = tmp_path / "glue"
  shutil.copytree(shared_data_dir / "glue" / "STS-B", glue_dir / "STS-B")
  out = str(tmp_path / "out")
  res = cfd.create_finetuning_data("glue/sts-b", out, spm_model_file, splits=["train", "dev"],
                                   input_dir=str(glue_dir), max_seq_length=32)
  assert res["dev"]["num_records"] == 9 and res["dev"]["reused_cache"] is False
  spec = {k: tf.io.FixedLenFeature([32], tf.int64) for k in ("input_word_ids", "input_mask", "input_type_ids")}
  spec["label_ids"] = tf.io.FixedLenFeature([], tf.float32)
  records = _read_records(res["dev"]["record_path"], spec)
  expected = glue.convert_examples(glue.read_examples("sts-b", str(glue_dir), "dev"), "sts-b",
                                   FullTokenizer(spm_model_file), 32)
  for key in spec:
    np.testing.assert_allclose(np.stack([r[key].numpy() for r in records]), expected[key])
  meta = json.load(open(os.path.join(out, "glue_sts-b_dev.meta.json")))
  assert meta["cache_key"]["max_seq_length"] == 32 and len(meta["cache_key"]["spm_sha256"]) == 64
  # Same key → reused; a different max_seq_length or a changed input file → rebuilt (reference bug #25).
  again = cfd.create_finetuning_data("glue/sts-b", out, spm_model_file, splits=["dev"], input_dir=str(glue_dir),
                                     max_seq_length=32)
  assert again["dev"]["reused_cache"] is True
  longer = cfd.create_finetuning_data("glue/sts-b", out, spm_model_file, splits=["dev"], input_dir=str(glue_dir),
                                      max_seq_length=40)
  assert longer["dev"]["reused_cache"] is False
  assert _read_records(longer["dev"]["record_path"], {"input_word_ids": tf.io.FixedLenFeature([40], tf.int64)})
  dev_tsv = glue_dir / "STS-B" / "dev.tsv"
  dev_tsv.write_text("\n".join(dev_tsv.read_text().splitlines()[:4]) + "\n")
  changed = cfd.create_finetuning_data("glue/sts-b", out, spm_model_file, splits=["dev"], input_dir=str(glue_dir),
                                       max_seq_length=40)
  assert changed["dev"]["reused_cache"] is False and changed["dev"]["num_records"] == 3
  assert not [n for n in os.listdir(out) if ".tmp" in n]


def test_squad_v2_training_records(shared_data_dir, spm_model_file, tmp_path):
  from official_albert.tokenization import FullTokenizer
  data = str(shared_data_dir / "squad" / "dev-v2.0.json")
  res = cfd.create_finetuning_data("squad_v2", str(tmp_path), spm_model_file, splits=["train"], input_file=data,
                                   max_seq_length=96, doc_stride=32, max_query_length=24)["train"]
  examples = squad.read_squad_examples(data, is_training=True)
  features, _ = squad.convert_examples_to_features(examples, FullTokenizer(spm_model_file), 96, 32, 24)
  _, features = squad.shuffle_training_order(examples, features, 12345)  # The default: the reference's order.
  assert res["num_records"] == len(features) and res["num_mismatched_examples"] == 0
  spec = {k: tf.io.FixedLenFeature([96], tf.int64) for k in ("input_word_ids", "input_mask", "input_type_ids",
                                                              "p_mask")}
  spec.update({k: tf.io.FixedLenFeature([], tf.int64) for k in ("unique_ids", "start_positions", "end_positions",
                                                                "is_impossible")})
  records = _read_records(res["record_path"], spec)
  arrays = squad.features_to_arrays(features, is_training=True)
  for key in spec:
    np.testing.assert_array_equal(np.stack([r[key].numpy() for r in records]), arrays[key])


def test_race_records_are_4_by_l(spm_model_file, tmp_path):
  level_dir = tmp_path / "RACE" / "dev" / "high"
  level_dir.mkdir(parents=True)
  (tmp_path / "RACE" / "dev" / "middle").mkdir()
  (level_dir / "1.txt").write_text(json.dumps({"article": "A cat sat .", "questions": ["The cat _ .", "Who ?"],
                                               "options": [["sat", "ran", "ate", "hid"], ["cat", "dog", "x", "y"]],
                                               "answers": ["A", "D"], "id": "high1.txt"}))
  (tmp_path / "RACE" / "dev" / "middle" / "2.txt").write_text(json.dumps(
      {"article": "B .", "questions": ["Q ?"], "options": [["a", "b", "c", "d"]], "answers": ["C"], "id": "m2"}))
  res = cfd.create_finetuning_data("race", str(tmp_path / "out"), spm_model_file, splits=["dev"],
                                   input_dir=str(tmp_path), max_seq_length=32, max_qa_length=8)["dev"]
  assert res["num_records"] == 3 and res["levels"] == {"middle": 1, "high": 2}
  spec = {"input_word_ids": tf.io.FixedLenFeature([4 * 32], tf.int64),
          "label_ids": tf.io.FixedLenFeature([], tf.int64), "level_ids": tf.io.FixedLenFeature([], tf.int64)}
  records = _read_records(res["record_path"], spec)
  assert [int(r["label_ids"]) for r in records] == [2, 0, 3] and [int(r["level_ids"]) for r in records] == [0, 1, 1]
  ids = records[1]["input_word_ids"].numpy().reshape(4, 32)
  assert (ids[:, 0] == 2).all()


def test_unknown_task_is_rejected(spm_model_file, tmp_path):
  with pytest.raises(ValueError, match="--task must be"):
    cfd.create_finetuning_data("mnli", str(tmp_path), spm_model_file)


def test_a_short_length_fits_the_question_caps_as_the_fine_tuning_run_does(spm_model_file, tmp_path):
  """Issue 44: records for a 64-position model. Before: refused with the default caps (SQuAD: 64 must exceed 64 + 3;
  RACE: at least 128 + 4). After: the reference's proportions (stride 21, questions 10; question+option 16), the
  values the fine-tuning run fits at the same length (test_model_source), so records and features agree."""
  from official_albert.tokenization import FullTokenizer
  context = " ".join(["The heron nested on the roof of the west wing every spring."] * 12)
  data = tmp_path / "train.json"
  data.write_text(json.dumps({"version": "1.1", "data": [{"title": "t", "paragraphs": [{"context": context, "qas": [
      {"id": "q1", "question": "Where did the heron nest every single spring of the year?",
       "answers": [{"text": "the roof", "answer_start": context.index("the roof")}]}]}]}]}), encoding="utf-8")
  res = cfd.create_finetuning_data("squad_v1", str(tmp_path / "squad"), spm_model_file, splits=["dev"],
                                   input_file=str(data), max_seq_length=64)["dev"]
  examples = squad.read_squad_examples(str(data), is_training=False)
  features, _ = squad.convert_examples_to_features(examples, FullTokenizer(spm_model_file), 64, 21, 10)
  assert res["num_records"] == len(features) > 3
  records = _read_records(res["record_path"], {"input_word_ids": tf.io.FixedLenFeature([64], tf.int64)})
  np.testing.assert_array_equal(np.stack([r["input_word_ids"].numpy() for r in records]),
                                squad.features_to_arrays(features, is_training=False)["input_word_ids"])
  race_dir = tmp_path / "RACE" / "dev" / "high"
  race_dir.mkdir(parents=True)
  (race_dir / "1.txt").write_text(json.dumps({"article": context, "questions": ["Where did the heron nest _ ?"],
                                              "options": [["on the roof", "in a tree", "x", "y"]], "answers": ["A"],
                                              "id": "h1"}))
  res = cfd.create_finetuning_data("race", str(tmp_path / "race"), spm_model_file, splits=["dev"],
                                   input_dir=str(tmp_path), max_seq_length=64, race_levels=["high"])["dev"]
  assert res["num_records"] == 1


def test_glue_input_file_builds_one_split_only(shared_data_dir, spm_model_file, tmp_path):
  """One GLUE `--input_file` is one split's file: with the default `--splits=train,dev` the dev records were built
  from the train file (rc 0); now several splits with one file are refused, on the command line and in the API."""
  from absl import flags
  train_tsv = str(shared_data_dir / "glue" / "STS-B" / "train.tsv")
  with pytest.raises(ValueError, match=r"is one split's file: pass one split.*not --splits=train,dev"):
    cfd.create_finetuning_data("glue/sts-b", str(tmp_path), spm_model_file, input_file=train_tsv, max_seq_length=32)
  assert not os.listdir(tmp_path)
  fv = flags.FlagValues()
  cfd.define_flags(fv)
  fv(["create_finetuning_data", "--task=glue/sts-b", "--spm_model_file=m", "--output_dir=o",
      f"--input_file={train_tsv}"])
  with pytest.raises(Exception, match=r"is one split's file: pass one split"):
    cfd.command_line_splits(fv)
  fv(["create_finetuning_data", "--task=glue/sts-b", "--splits=dev", f"--input_file={train_tsv}"])
  assert cfd.command_line_splits(fv) == ["dev"]
  res = cfd.create_finetuning_data("glue/sts-b", str(tmp_path), spm_model_file, splits=["dev"], input_file=train_tsv,
                                   max_seq_length=32)
  assert list(res) == ["dev"] and res["dev"]["num_records"] > 0


def test_keep_accents_and_remove_space_flags_reach_the_tokenizer_and_the_key(spm_model_file, tmp_path):
  """--keep_accents / --remove_space (a cased, accented model's tokenizer_config.json) tokenize the records and key
  the cache where not the defaults, so the raw route's records (which take them from the model) are this tool's; a
  default run's key stays as it was (it had no such flags: an accented model's records lost their accents)."""
  from official_albert.tokenization import FullTokenizer
  folder = tmp_path / "glue" / "SST-2"
  folder.mkdir(parents=True)
  (folder / "dev.tsv").write_text("sentence\tlabel\nUn café très  bon\t1\nÜber schlecht\t0\n")
  fv = flags.FlagValues()
  cfd.define_flags(fv)
  fv(["prog", "--task=glue/sst-2", f"--input_dir={tmp_path / 'glue'}", f"--spm_model_file={spm_model_file}",
      f"--output_dir={tmp_path / 'out'}", "--splits=dev", "--max_seq_length=32", "--do_lower_case=false",
      "--keep_accents", "--noremove_space"])
  cfd.main([], fv)
  meta = json.load(open(tmp_path / "out" / "glue_sst-2_dev.meta.json"))
  assert (meta["cache_key"]["keep_accents"], meta["cache_key"]["remove_space"]) == (True, False)
  spec = {"input_word_ids": tf.io.FixedLenFeature([32], tf.int64)}
  ids = [r["input_word_ids"].numpy() for r in _read_records(meta["record_path"], spec)]
  tokenizer = FullTokenizer(spm_model_file, do_lower_case=False, keep_accents=True, remove_space=False)
  expected = glue.convert_examples(glue.read_examples("sst-2", str(tmp_path / "glue"), "dev"), "sst-2", tokenizer, 32)
  np.testing.assert_array_equal(np.stack(ids), expected["input_word_ids"])
  plain = cfd.create_finetuning_data("glue/sst-2", str(tmp_path / "out"), spm_model_file, splits=["dev"],
                                     input_dir=str(tmp_path / "glue"), max_seq_length=32, do_lower_case=False)["dev"]
  assert plain["reused_cache"] is False and not {"keep_accents", "remove_space"} & set(plain["cache_key"])
  assert not np.array_equal(np.stack([r["input_word_ids"].numpy() for r in _read_records(plain["record_path"], spec)]),
                            np.stack(ids))
