"""A killed best copy's temporary is no checkpoint of the folder (s33 fixC item 2).

`_replace_best` copies a step to `.tmp-<pid>-<n>-model.ckpt-best` and then moves it in; a kill in between leaves that
temporary (with its index: the copy writes it last). `resolve_checkpoint`'s `*.index` listing (a directory without a
`checkpoint` state file: a release tarball, or a gs:// folder whose state file is missing) found it, because
TensorFlow's glob matches dot-files, locally and on gs:// alike: "several checkpoints" where there was one, and the
temporary read as the folder's checkpoint when its own could not be. Each case runs on a local folder and on the same
folder taken for a remote one (`file_io.is_local` False, as for gs://: listings and stats go through `tf.io.gfile`;
`ram://` cannot stand in here, as its directory test takes a checkpoint prefix for a folder).
"""

import pytest
import tensorflow as tf

from official_albert import checkpoint_files
from official_albert import file_io
from official_albert import model_directory as md


def _save(prefix, value=1.0):
  """A one-variable checkpoint written at exactly `prefix` (its `.index` and `.data-*`)."""
  tf.train.Checkpoint(v=tf.Variable(value)).write(prefix)


def _folder(kind, tmp_path, monkeypatch):
  if kind == "remote":
    monkeypatch.setattr(file_io, "is_local", lambda path: False)
  return str(tmp_path / "model")


def _killed_best_copy(folder):
  """What a best copy killed after writing its temporary's index leaves."""
  _save(f"{folder}/.tmp-4194000-0-{md.BEST_CHECKPOINT_PREFIX}", value=7.0)


@pytest.mark.parametrize("kind", ["local", "remote"])
def test_a_release_folder_with_a_dead_best_copy_resolves_to_its_checkpoint(kind, tmp_path, monkeypatch):
  folder = _folder(kind, tmp_path, monkeypatch)
  assert file_io.is_local(folder) == (kind == "local")
  _save(f"{folder}/{md.BEST_CHECKPOINT_PREFIX}")
  _killed_best_copy(folder)
  assert len(file_io.glob(f"{folder}/*.index")) == 2  # (the glob does see the dot-file)
  assert md.resolve_checkpoint(folder) == f"{folder}/{md.BEST_CHECKPOINT_PREFIX}"


@pytest.mark.parametrize("kind", ["local", "remote"])
def test_a_folder_without_its_state_file_resolves_to_its_only_step(kind, tmp_path, monkeypatch):
  folder = _folder(kind, tmp_path, monkeypatch)
  _save(f"{folder}/ckpt-2")
  _killed_best_copy(folder)
  assert md.resolve_checkpoint(folder) == f"{folder}/ckpt-2"


@pytest.mark.parametrize("kind", ["local", "remote"])
def test_an_unreadable_checkpoint_never_falls_back_to_a_temporary(kind, tmp_path, monkeypatch):
  folder = _folder(kind, tmp_path, monkeypatch)
  _save(f"{folder}/{md.BEST_CHECKPOINT_PREFIX}")
  data = file_io.glob(f"{folder}/{md.BEST_CHECKPOINT_PREFIX}.data-*")[0]
  with tf.io.gfile.GFile(data, "rb") as f:
    head = f.read()[:4]
  with tf.io.gfile.GFile(data, "wb") as f:  # (truncated: the read-through fails)
    f.write(head)
  _killed_best_copy(folder)
  with pytest.raises(md.UnreadableCheckpointError, match="model.ckpt-best") as raised:
    md.resolve_checkpoint(folder, prefer_best=True)
  assert ".tmp-" not in str(raised.value)


def test_which_names_are_temporaries():
  prefix = checkpoint_files.temporary_checkpoint_prefix("gs://b/run/model.ckpt-best")
  assert checkpoint_files.is_temporary_checkpoint(prefix)
  for name in ("gs://b/run/model.ckpt-best", "run/ckpt-12", "run/model.tmp-20241130", "run/.tmp-x-model.ckpt"):
    assert not checkpoint_files.is_temporary_checkpoint(name), name
