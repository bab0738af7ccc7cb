"""Tests of the tf.data readers in official_albert.data.input_pipeline."""

import collections
import re

import numpy as np
import pytest
import tensorflow as tf

from official_albert.data import input_pipeline

SEQ, PREDS = 16, 4
PER_FILE = 10


def _example(uid):
  """A reference-layout record written the way the original tool does (tf.train.Example, insertion order)."""
  rng = np.random.default_rng(uid)
  ints = lambda v: tf.train.Feature(int64_list=tf.train.Int64List(value=[int(x) for x in v]))
  features = collections.OrderedDict()
  features["input_ids"] = ints([uid] + rng.integers(5, 1000, SEQ - 1).tolist())
  features["input_mask"] = ints([1] * 12 + [0] * 4)
  features["segment_ids"] = ints([0] * 6 + [1] * 6 + [0] * 4)
  features["token_boundary"] = ints(rng.integers(0, 2, SEQ))
  features["masked_lm_positions"] = ints([1, 3, 7, 0])
  features["masked_lm_ids"] = ints(rng.integers(5, 1000, 3).tolist() + [0])
  features["masked_lm_weights"] = tf.train.Feature(float_list=tf.train.FloatList(value=[1.0, 1.0, 1.0, 0.0]))
  features["next_sentence_labels"] = ints([uid % 2])
  return tf.train.Example(features=tf.train.Features(feature=features)).SerializeToString()


@pytest.fixture(scope="module")
def record_files(tmp_path_factory):
  d = tmp_path_factory.mktemp("records")
  paths = []
  for f in range(4):
    path = str(d / f"data-{f:05d}-of-00004")
    with tf.io.TFRecordWriter(path) as w:
      for i in range(PER_FILE):
        w.write(_example(f * PER_FILE + i))
    paths.append(path)
  return paths


def _uids(dataset, batches=None):
  out = []
  for i, batch in enumerate(dataset):
    if batches is not None and i >= batches:
      break
    out.extend(batch["input_word_ids"][:, 0].numpy().tolist())
  return out


def test_pretraining_batch_contract(record_files):
  ds = input_pipeline.pretraining_dataset(record_files, SEQ, PREDS, batch_size=8, is_training=False,
                                          include_token_boundary=True)
  batch = next(iter(ds))
  expected = {"input_word_ids": (tf.int32, [8, SEQ]), "input_mask": (tf.int32, [8, SEQ]),
              "input_type_ids": (tf.int32, [8, SEQ]), "token_boundary": (tf.int32, [8, SEQ]),
              "masked_lm_positions": (tf.int32, [8, PREDS]), "masked_lm_ids": (tf.int32, [8, PREDS]),
              "masked_lm_weights": (tf.float32, [8, PREDS]), "next_sentence_labels": (tf.int32, [8, 1])}
  assert set(batch) == set(expected)
  for name, (dtype, shape) in expected.items():
    assert batch[name].dtype == dtype and batch[name].shape.as_list() == shape, name
  # Static shapes (drop_remainder) for XLA.
  assert ds.element_spec["input_word_ids"].shape.as_list() == [8, SEQ]
  first = tf.train.Example.FromString(_example(0)).features.feature
  np.testing.assert_array_equal(batch["input_word_ids"][0], first["input_ids"].int64_list.value)
  np.testing.assert_array_equal(batch["input_type_ids"][0], first["segment_ids"].int64_list.value)
  np.testing.assert_allclose(batch["masked_lm_weights"][0], [1, 1, 1, 0])
  assert "token_boundary" not in next(iter(input_pipeline.pretraining_dataset(
      record_files, SEQ, PREDS, batch_size=2, is_training=False)))


def test_evaluation_is_one_ordered_pass_with_full_batches(record_files):
  ds = input_pipeline.pretraining_dataset(",".join(record_files), SEQ, PREDS, batch_size=8, is_training=False)
  uids = _uids(ds)
  assert uids == list(range(40))[:40 // 8 * 8]
  ds = input_pipeline.pretraining_dataset(record_files, SEQ, PREDS, batch_size=7, is_training=False)
  assert len(_uids(ds)) == 35  # remainder dropped


def test_training_repeats_shuffles_and_is_seeded(record_files):
  make = lambda seed: input_pipeline.pretraining_dataset(record_files, SEQ, PREDS, batch_size=8, is_training=True,
                                                         seed=seed, shuffle_buffer_size=16)
  a = _uids(make(1), batches=12)
  assert len(a) == 96  # more than one epoch: it repeats
  assert a[:40] != list(range(40))
  assert sorted(a[:40]) != a[:40]
  assert _uids(make(1), batches=12) == a
  assert _uids(make(2), batches=12) != a


@pytest.mark.parametrize("num_files", [4, 1])
def test_input_context_shards_are_disjoint_and_complete(record_files, num_files):
  files = record_files[:num_files]
  seen = []
  for pipeline_id in range(2):
    ctx = tf.distribute.InputContext(num_input_pipelines=2, input_pipeline_id=pipeline_id, num_replicas_in_sync=2)
    seen.append(_uids(input_pipeline.pretraining_dataset(files, SEQ, PREDS, batch_size=1, is_training=False,
                                                         input_context=ctx)))
  assert not set(seen[0]) & set(seen[1])
  assert sorted(seen[0] + seen[1]) == list(range(num_files * PER_FILE))
  assert len(seen[0]) == len(seen[1])


def test_iterator_checkpoint_resumes_exactly(record_files, tmp_path):
  ds = input_pipeline.pretraining_dataset(record_files, SEQ, PREDS, batch_size=4, is_training=True, seed=7,
                                          shuffle_buffer_size=8)
  it = iter(ds)
  for _ in range(3):
    next(it)
  ckpt = tf.train.Checkpoint(iterator=it)
  path = ckpt.write(str(tmp_path / "it"))
  expected = [next(it)["input_word_ids"].numpy() for _ in range(3)]
  it2 = iter(input_pipeline.pretraining_dataset(record_files, SEQ, PREDS, batch_size=4, is_training=True, seed=7,
                                                shuffle_buffer_size=8))
  tf.train.Checkpoint(iterator=it2).read(path).assert_consumed()
  for want in expected:
    np.testing.assert_array_equal(next(it2)["input_word_ids"].numpy(), want)


def test_no_matching_files_is_a_clear_error(tmp_path):
  with pytest.raises(ValueError, match="No input files match"):
    input_pipeline.pretraining_dataset([str(tmp_path / "missing-*")], SEQ, PREDS, 2, is_training=True)


def test_wildcards_leave_out_the_sidecar_files_data_prep_writes(record_files, tmp_path):
  # create_pretraining_data writes `<shard>.manifest.json` beside each shard and `<prefix>.stats.json`; a killed
  # writer leaves `<shard>.tmp-*`. `data-*` matches them all; only the records may reach the reader.
  import shutil
  for path in record_files[:2]:
    shutil.copy(path, tmp_path)
    (tmp_path / (path.rsplit("/", 1)[1] + ".manifest.json")).write_text("{}")
  (tmp_path / "data.stats.json").write_text("{}")
  (tmp_path / "data-00002-of-00004.tmp-12-0-abc").write_bytes(b"partial")
  files = input_pipeline.list_files(str(tmp_path / "data*"))
  assert [f.rsplit("/", 1)[1] for f in files] == ["data-00000-of-00004", "data-00001-of-00004"]
  dataset = input_pipeline.pretraining_dataset(str(tmp_path / "data-*"), SEQ, PREDS, 4, is_training=False)
  assert sum(int(b["input_word_ids"].shape[0]) for b in dataset) == 2 * PER_FILE
  # Named literally, a file is the user's choice; a wildcard that matches only sidecars says so.
  assert input_pipeline.list_files(str(tmp_path / "data.stats.json")) == [str(tmp_path / "data.stats.json")]
  with pytest.raises(ValueError, match="only sidecar files"):
    input_pipeline.list_files(str(tmp_path / "*.json"))


def test_one_file_named_two_ways_is_read_once(record_files, monkeypatch):
  """list_files de-duplicates on the normalised path (first spelling kept): a glob plus the same file named literally
  (`./`, `//`, relative vs absolute) must not feed its records twice, which would count them twice in evaluation."""
  folder, first = record_files[0].rsplit("/", 1)
  monkeypatch.chdir(folder.rsplit("/", 1)[0])
  relative = folder.rsplit("/", 1)[1]
  spellings = [f"./{relative}/{first}", f"{relative}//{first}", record_files[0], f"{relative}/../{relative}/{first}"]
  pattern = ",".join([f"{relative}/data-0000[01]-*"] + spellings)
  assert input_pipeline.list_files(pattern) == [f"{relative}/{first}", f"{relative}/data-00001-of-00004"]
  assert input_pipeline.list_files(spellings) == [spellings[0]]  # the first spelling is the one kept
  dataset = input_pipeline.pretraining_dataset(pattern, SEQ, PREDS, 4, is_training=False, drop_remainder=False)
  assert _uids(dataset) == list(range(2 * PER_FILE))
  assert input_pipeline.path_key("gs://bucket/a//b/./c") == input_pipeline.path_key("gs://bucket/a/b/c")
  assert input_pipeline.path_key("gs://bucket/a/b") != input_pipeline.path_key("s3://bucket/a/b")


def test_a_folder_as_input_path_is_refused_naming_the_glob_to_use(record_files):
  """A folder named as input_path was kept as a file: TFRecordDataset opened it and the run failed at its first step
  with a raw `Is a directory` graph error. list_files (called when the inputs are built at start-up) refuses it."""
  folder = record_files[0].rsplit("/", 1)[0]
  escaped = re.escape(folder)
  for pattern in (folder, folder + "/", f"{record_files[1]},{folder}"):
    with pytest.raises(ValueError, match=f"input_path '{escaped}/?' is a folder.*e.g. '{escaped}/\\*'"):
      input_pipeline.list_files(pattern)
  with pytest.raises(ValueError, match="is a folder"):
    input_pipeline.pretraining_dataset(folder, SEQ, PREDS, 4, is_training=False)
  assert len(input_pipeline.list_files(folder + "/*")) == 4


def test_generic_decode_and_make_dataset(record_files):
  spec = {"next_sentence_labels": tf.io.FixedLenFeature([1], tf.int64),
          "masked_lm_weights": tf.io.FixedLenFeature([PREDS], tf.float32)}
  single = input_pipeline.decode_record(tf.constant(_example(3)), spec, {"next_sentence_labels": "label"})
  assert single["label"].dtype == tf.int32 and single["label"].numpy().tolist() == [1]
  ds = input_pipeline.make_dataset(record_files[1], lambda r: input_pipeline.decode_record(r, spec), batch_size=5,
                                   is_training=False)
  labels = [b["next_sentence_labels"].numpy().ravel().tolist() for b in ds]
  assert labels == [[0, 1, 0, 1, 0], [1, 0, 1, 0, 1]]


def test_pipelines_run_without_the_autotune_model_thread(record_files):
  """Dropping a tf.data iterator waits for its autotuning thread, which sleeps up to 60 s between optimizations and
  was seen not to wake: the drop blocked a process, GIL held, for up to 60 s (docs/performance.md). The readers'
  pipelines and the input feed's streams (over any task's dataset, here one built without our options) are built
  with the model off, and still read the same rows."""
  from official_albert.training import input_feed

  class _Data:
    global_batch_size = 4
    pad_to_multiple_of = 0

    def replace(self, **kwargs):
      del kwargs
      return self

  plain = lambda config: tf.data.Dataset.from_tensor_slices(
      {"input_word_ids": np.arange(4 * PER_FILE).reshape(-1, 1)}).batch(4)
  assert plain(None).options().autotune.enabled is not False  # tf.data's default: only the feed can turn it off
  datasets = {
      "training": input_pipeline.pretraining_dataset(record_files, SEQ, PREDS, 4, is_training=True, seed=3),
      "evaluation": input_pipeline.pretraining_dataset(record_files, SEQ, PREDS, 4, is_training=False),
      "training_stream": input_feed.training_stream(plain, _Data(), input_feed.Topology()),
      "evaluation_stream": input_feed.evaluation_stream(plain, _Data(), input_feed.Topology()),
  }
  for name, dataset in datasets.items():
    assert dataset.options().autotune.enabled is False, name
  assert _uids(datasets["evaluation"]) == _uids(datasets["evaluation_stream"]) == list(range(4 * PER_FILE))


def test_one_file_reached_through_a_symlinked_folder_is_read_once(record_files, tmp_path):
  """list_files de-duplicated by abspath: `latest/` a symlink to the records' folder (a usual "current run" link)
  fed one file's records twice, counted twice in training and evaluation. It keys local files by their real path
  (`file_io.location_key`), as the data tools' readers do; the first spelling is kept."""
  folder, first = record_files[0].rsplit("/", 1)
  link = tmp_path / "latest"
  link.symlink_to(folder, target_is_directory=True)
  pattern = f"{folder}/data-0000[01]-*,{link}/{first}"
  assert input_pipeline.list_files(pattern) == sorted(record_files[:2])
  dataset = input_pipeline.pretraining_dataset(pattern, SEQ, PREDS, 4, is_training=False, drop_remainder=False)
  assert _uids(dataset) == list(range(2 * PER_FILE))


@pytest.mark.parametrize("position", [-1, SEQ], ids=["negative", "past-the-end"])
def test_a_masked_position_outside_the_sequence_stops_the_input_naming_it(tmp_path, position):
  """The MLM head gathers at masked_lm_positions; a negative one wrapped around (−1 predicted the last token's word)
  without an error. Records from another tool or damaged ones now stop the input, naming the field and the fix."""
  example = tf.train.Example.FromString(_example(3))
  example.features.feature["masked_lm_positions"].int64_list.value[1] = position
  path = str(tmp_path / "bad.tfrecord")
  with tf.io.TFRecordWriter(path) as w:
    w.write(_example(1))
    w.write(example.SerializeToString())
  ds = input_pipeline.pretraining_dataset([path], SEQ, PREDS, batch_size=2, is_training=False)
  with pytest.raises(tf.errors.InvalidArgumentError, match=r"masked_lm_positions outside \[0, seq_length\).*"
                                                           r"create_pretraining_data"):
    next(iter(ds))
