"""A user's folder whose name holds glob characters (`run[1]`, `squad[v2]`) is read and cleaned as written, or, for
a checkpoint, which TensorFlow's own reader globs, refused with the fix: never a neighbour's files in its place.

Why: as a glob, `run[1]/*.index` matches `run1/*.index`, so a sweep's `run[1]` loaded its neighbour `run1`'s weights
under its own config, `create_pretraining_data --output_file=g/run[2]/...` deleted `g/run2/`'s shards (another run's)
while keeping its own stale ones, and SQuAD's record check read a neighbour's `.meta.json`. Each case puts the
neighbour that such a glob matches beside the folder.
"""

import json
import os
import re

import pytest
import tensorflow as tf

from data_prep import pretraining_files
from data_prep import tokenize_corpus as tc
from official_albert import model_directory as md
from tasks.squad import data as squad_data
from tests.data_prep.test_create_pretraining_data import corpus_docs
from tests.data_prep.test_create_pretraining_data import write_corpus


def _trainer_checkpoints(folder, value, step):
  """A trainer's folder: `ckpt-<step>` and TF's state file, holding `v` = value."""
  manager = tf.train.CheckpointManager(tf.train.Checkpoint(v=tf.Variable(tf.fill([8], float(value)))), str(folder),
                                       max_to_keep=None, checkpoint_name=md.CHECKPOINT_NAME)
  manager.save(checkpoint_number=step)


@pytest.mark.parametrize("location", ["run[1]", "run[1]/ckpt-5", "rel[1]", "run?"])
def test_a_checkpoint_path_with_glob_characters_is_refused_not_read_from_a_neighbour(tmp_path, location):
  # TensorFlow's reader globs the prefix itself (`tf.train.load_checkpoint('run[1]/ckpt-5')` finds no file), so the
  # folder's own checkpoint cannot be read under this name: the answer is a refusal naming the characters and the
  # fix, never a sibling's weights (run1/ matches `run[1]/*.index`; `run?` matches run1/ too).
  _trainer_checkpoints(tmp_path / "run[1]", 1, 5)
  tf.train.Checkpoint(v=tf.Variable(tf.fill([8], 3.0))).write(str(tmp_path / "rel[1]" / md.BEST_CHECKPOINT_PREFIX))
  (tmp_path / "run?").mkdir()
  _trainer_checkpoints(tmp_path / "run1", 2, 7)
  _trainer_checkpoints(tmp_path / "rel1", 4, 9)
  with pytest.raises(ValueError, match=r"contains the glob character\(s\) .*rename the folder"):
    md.resolve_checkpoint(str(tmp_path / location))
  with pytest.raises(ValueError, match=r"glob character"):
    _ = md.ModelDirectory(str(tmp_path / location)).checkpoint
  # The same folder through a name without them reads its own weights.
  os.symlink(tmp_path / "run[1]", tmp_path / "alias")
  prefix = md.resolve_checkpoint(str(tmp_path / "alias"))
  assert prefix == str(tmp_path / "alias" / "ckpt-5")
  assert float(tf.train.load_checkpoint(prefix).get_tensor("v/.ATTRIBUTES/VARIABLE_VALUE")[0]) == 1.0


def _touch(*paths):
  for p in paths:
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text("x")


def test_other_shard_counts_are_removed_in_the_output_folder_only(tmp_path):
  own, neighbour = tmp_path / "run[2]", tmp_path / "run2"
  # (a run writes each shard with its manifest; a file so named without one is no run's, and stays: review s50)
  stale = [own / f"pretrain.tfrecord-{i:05d}-of-00004{s}" for i in range(4) for s in ("", ".manifest.json")]
  new = [own / f"pretrain.tfrecord-{i:05d}-of-00002" for i in range(2)]
  not_ours = own / "pretrain.tfrecord-00000-of-00003"
  others = [neighbour / f"pretrain.tfrecord-{i:05d}-of-00004{s}" for i in range(4) for s in ("", ".manifest.json")]
  _touch(*stale, *new, not_ours, *others)
  pretraining_files.remove_other_shard_counts(str(own / "pretrain.tfrecord"), 2)
  assert sorted(os.listdir(own)) == sorted([p.name for p in new] + [not_ours.name])  # the run's own stale shards go
  assert all(p.exists() for p in others)  # another run's output is untouched


def test_remove_stale_shards_lists_a_prefix_without_folder(tmp_path, monkeypatch):
  monkeypatch.chdir(tmp_path)
  _touch(tmp_path / "tokens-000000", tmp_path / "tokens-000003", tmp_path / "tokens-000003.manifest.json")
  removed = pretraining_files.remove_stale_shards(tc.SHARD_PREFIX, re.compile(r"tokens-(\d{6})"),
                                                  lambda m, _: int(m.group(1)) >= 1)
  assert removed == ["tokens-000003", "tokens-000003.manifest.json"]
  assert os.listdir(tmp_path) == ["tokens-000000"]


def test_tokenize_corpus_removes_its_own_stale_shards_not_a_neighbours(tmp_path, spm_model_file):
  neighbour = [tmp_path / "tok2" / f"tokens-{i:06d}{s}" for i in range(6) for s in ("", ".manifest.json")]
  _touch(*neighbour, tmp_path / "tok[2]" / "tokens-000005")  # an earlier run's shard past this run's end
  config = tc.TokenizeConfig(input_file=write_corpus(tmp_path / "c.txt", corpus_docs(25)),
                             spm_model_file=spm_model_file, output_dir=str(tmp_path / "tok[2]"),
                             documents_per_shard=10, progress=False)
  assert tc.tokenize_corpus(config)["shards"] == 3
  assert sorted(n for n in os.listdir(tmp_path / "tok[2]") if n.startswith("tokens-0") and "." not in n) == [
      "tokens-000000", "tokens-000001", "tokens-000002"]
  assert all(p.exists() for p in neighbour)


def test_squad_record_meta_of_a_bracketed_folder_is_its_own(tmp_path):
  for folder, stride in (("squad[v2]", 128), ("squadv", 64)):  # `squad[v2]/dev.tf_record` matches squadv/'s
    (tmp_path / folder).mkdir()
    (tmp_path / folder / "dev.tf_record").write_bytes(b"")
    (tmp_path / folder / "dev.meta.json").write_text(json.dumps({"doc_stride": stride}))
  metas = squad_data.record_metas(str(tmp_path / "squad[v2]" / "dev.tf_record"))
  assert metas == [(str(tmp_path / "squad[v2]" / "dev.meta.json"), {"doc_stride": 128})]
  # A pattern the user means as a glob still is one.
  assert [m for _, m in squad_data.record_metas(str(tmp_path / "squad*" / "dev.tf_record"))] == [
      {"doc_stride": 128}, {"doc_stride": 64}]
  assert squad_data.record_metas(str(tmp_path / "nowhere[1]" / "dev.tf_record")) == []


def test_pretraining_records_read_their_own_folders_statistics(tmp_path):
  """A record file in `data/run[2]/` with no stats file of its own name is matched to a stats file listed in its
  folder; `run[2]/*.stats.json` as a glob lists `run2/`'s, whose `output_files` name the same basename."""
  from tasks import pretraining  # noqa: PLC0415 (TensorFlow-heavy; only this test needs it)
  for folder, lower in (("run2", False), ("run[2]", True)):
    (tmp_path / folder).mkdir()
    (tmp_path / folder / "x.tfrecord").write_bytes(b"")
  (tmp_path / "run2" / "made.stats.json").write_text(json.dumps(
      {"output_files": ["x.tfrecord"], "generation": {"do_lower_case": False}}))
  options, unrecorded = pretraining.records_tokenizer_options([str(tmp_path / "run[2]" / "x.tfrecord")])
  assert (options, unrecorded) == ({}, [str(tmp_path / "run[2]" / "x.tfrecord")])
  (tmp_path / "run[2]" / "made.stats.json").write_text(json.dumps(
      {"output_files": ["x.tfrecord"], "generation": {"do_lower_case": True}}))
  assert pretraining.records_tokenizer_options([str(tmp_path / "run[2]" / "x.tfrecord")])[0] == {
      "do_lower_case": True}
