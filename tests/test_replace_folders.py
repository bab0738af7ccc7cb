"""Replacing a folder never loses both copies: `directory_io.replace_directory` into a symlinked folder (an
`exports/current -> v3` pointer: rmtree refused the link after the whole export was built) and into a mount point
(rmtree emptied it, then its rmdir failed with EBUSY and the caller deleted the new copy). extend_vocabulary refuses
an --output_model_dir that reaches --model_dir through a symlink (the input model was replaced), warns when it replaces
another folder, and leaves the grown model readable to others (mkdtemp's 0700 was moved into place). convert_checkpoint
knows an in-place conversion spelled through a symlink, and lists (not globs) a side folder under a path with `[`.
The fine-tuning record cache without a model_dir is per user; an unwritable one names task.records_dir."""

import errno
import logging
import os
import shutil
import stat

import pytest

from data_prep import extend_vocabulary as ev
from official_albert import directory_io
from official_albert import model_directory as md
from official_albert.checkpoints import convert as convert_lib
from tasks import raw_inputs
from tests import tiny


def _folder(path, files):
  os.makedirs(os.path.join(path, "variables"), exist_ok=True)
  for name, text in files.items():
    with open(os.path.join(path, name), "w", encoding="utf-8") as f:
      f.write(text)
  return str(path)


def _contents(path):
  found = {}
  for root, _, names in os.walk(path):
    for name in names:
      with open(os.path.join(root, name), encoding="utf-8") as f:
        found[os.path.relpath(os.path.join(root, name), path)] = f.read()
  return found


NEW = {"saved_model.pb": "new graph", os.path.join("variables", "v.index"): "new index"}
OLD = {"saved_model.pb": "old graph", os.path.join("variables", "v.index"): "old index", "stale.json": "old"}


def test_a_symlinked_folder_has_the_folder_it_points_to_replaced(tmp_path):
  target = _folder(tmp_path / "v3", OLD)
  link = tmp_path / "current"
  link.symlink_to("v3")
  new = _folder(tmp_path / "current.tmp-1-export", NEW)
  directory_io.replace_directory(new, str(link))
  assert os.path.islink(link) and os.readlink(link) == "v3"
  assert _contents(target) == NEW
  assert sorted(os.listdir(tmp_path)) == ["current", "v3"]  # the temporary and the old folder gone


def _busy_mount(monkeypatch, mount, fail_on=None):
  """os.rename / os.rmdir of `mount` raise EBUSY, as for a mount point; `fail_on`: the first rename of an entry of
  that name into `mount` fails too."""
  rename, rmdir = os.rename, os.rmdir
  failed = []

  def busy_rename(src, dst, *args, **kwargs):
    into_mount = os.path.basename(os.fspath(src)) == fail_on and os.path.dirname(os.fspath(dst)) == mount
    if os.fspath(src) == mount or (into_mount and not any(failed)):
      failed.append(into_mount)
      raise OSError(errno.EBUSY, "Device or resource busy", os.fspath(src))
    return rename(src, dst, *args, **kwargs)

  def busy_rmdir(path, *args, **kwargs):
    if os.fspath(path) == mount:
      raise OSError(errno.EBUSY, "Device or resource busy", os.fspath(path))
    return rmdir(path, *args, **kwargs)

  monkeypatch.setattr(os, "rename", busy_rename)
  monkeypatch.setattr(os, "rmdir", busy_rmdir)


def test_a_mount_point_has_its_contents_swapped(tmp_path, monkeypatch):
  mount = _folder(tmp_path / "serving", OLD)
  new = _folder(tmp_path / "serving.tmp-1-export", NEW)
  _busy_mount(monkeypatch, mount)
  directory_io.replace_directory(new, mount)
  assert _contents(mount) == NEW
  assert sorted(os.listdir(mount)) == ["saved_model.pb", "variables"]  # no hidden staging folders left
  assert sorted(os.listdir(tmp_path)) == ["serving"]


def test_a_failed_swap_keeps_the_old_export_and_the_new_copy(tmp_path, monkeypatch):
  mount = _folder(tmp_path / "serving", OLD)
  new = _folder(tmp_path / "serving.tmp-1-export", NEW)
  _busy_mount(monkeypatch, mount, fail_on="variables")  # (the old ones moved aside, then a new entry fails)
  with pytest.raises(OSError, match="busy"):
    directory_io.replace_directory(new, mount)
  assert _contents(mount) == OLD and sorted(os.listdir(mount)) == ["saved_model.pb", "stale.json", "variables"]
  assert _contents(new) == NEW


def test_a_plain_folder_is_replaced_and_a_failed_move_keeps_the_old_one(tmp_path, monkeypatch):
  final = _folder(tmp_path / "export", OLD)
  directory_io.replace_directory(_folder(tmp_path / "a", NEW), final)
  assert _contents(final) == NEW and sorted(os.listdir(tmp_path)) == ["export"]
  monkeypatch.setattr(directory_io.shutil, "move", lambda *a, **k: (_ for _ in ()).throw(OSError("disk full")))
  with pytest.raises(OSError, match="disk full"):
    directory_io.replace_directory(_folder(tmp_path / "b", {"saved_model.pb": "newer"}), final)
  assert _contents(final) == NEW and sorted(os.listdir(tmp_path)) == ["b", "export"]


@pytest.fixture(scope="module")
def saved_model_dir(tmp_path_factory):
  directory = tmp_path_factory.mktemp("ext") / "m"
  tiny.save_model_dir(directory, "classifier", tiny.NUM_LABELS, num_hidden_layers=1)
  return str(directory)


@pytest.fixture
def model_dir(saved_model_dir, tmp_path):
  """A private copy (a test that failed to protect its input leaves the next one a good input)."""
  return str(shutil.copytree(saved_model_dir, tmp_path / "real" / "m"))


def _words(tmp_path):
  path = tmp_path / "new.txt"
  path.write_text("zzyzxword\n", encoding="utf-8")
  return str(path)


def test_extend_vocabulary_refuses_an_output_reaching_the_input_through_a_symlink(tmp_path, model_dir):
  link = tmp_path / "link"
  link.symlink_to(os.path.dirname(model_dir))
  before = _contents_bytes(model_dir)
  with pytest.raises(ValueError, match=r"--output_model_dir=.*link/m is --model_dir=.*real/m; write the grown model "
                                       r"to a new directory"):
    ev.extend_vocabulary(str(tiny.SPM_MODEL_FILE), _words(tmp_path), str(tmp_path / "out.model"),
                         model_dir=model_dir, output_model_dir=str(link / "m"), model_type="classifier")
  assert _contents_bytes(model_dir) == before
  assert not os.path.exists(tmp_path / "out.model")  # refused before anything is written


def test_extend_vocabulary_warns_replacing_a_folder_and_leaves_it_readable(tmp_path, model_dir, caplog):
  out = tmp_path / "grown"
  out.mkdir(mode=0o700)  # an earlier grown model's folder (a folder of other files is refused: test_data_tool_outputs)
  (out / "config.json").write_text("{}", encoding="utf-8")
  (out / "labels.txt").write_text("x", encoding="utf-8")  # (the earlier model's; this one has none)
  umask = os.umask(0o022)
  try:
    with caplog.at_level(logging.WARNING, logger="data_prep"):  # (the grow logs from data_prep.grown_model)
      ev.extend_vocabulary(str(tiny.SPM_MODEL_FILE), _words(tmp_path), str(tmp_path / "out.model"),
                           model_dir=model_dir, output_model_dir=str(out), model_type="classifier")
  finally:
    os.umask(umask)
  assert f"--output_model_dir={out} exists: replacing it" in caplog.text
  assert stat.S_IMODE(os.stat(out).st_mode) == 0o755
  assert "config.json" in os.listdir(out) and "labels.txt" not in os.listdir(out)


def _contents_bytes(path):
  found = {}
  for root, _, names in os.walk(path):
    for name in names:
      with open(os.path.join(root, name), "rb") as f:
        found[os.path.relpath(os.path.join(root, name), path)] = f.read()
  return found


def test_an_in_place_tf1_conversion_through_a_symlink_keeps_the_folders_config(tmp_path, model_dir):
  """In place (the folder's own config.json describes the same model) is known however the folder is spelled; a
  symlinked spelling had its config.json deleted as a previous model's."""
  link = tmp_path / "link"
  link.symlink_to(os.path.dirname(model_dir))
  summary = convert_lib.convert("native", model_dir, "tf1", str(link / "m"), model_type="classifier")
  assert md.CONFIG_FILE not in summary["removed"] and os.path.exists(os.path.join(model_dir, md.CONFIG_FILE))


def test_a_side_folder_under_a_path_with_brackets_is_listed_not_globbed(tmp_path):
  out = tmp_path / "run[1]"
  (out / "1_Pooling").mkdir(parents=True)
  (out / "1_Pooling" / "mine.txt").write_text("kept", encoding="utf-8")  # not a file this tool writes
  (out / "2_Normalize").mkdir()
  assert convert_lib.remove_stale_side_files(str(out), [], names=()) == ["2_Normalize"]
  assert sorted(os.listdir(out)) == ["1_Pooling"]


def test_the_record_cache_without_a_model_dir_is_this_users(tmp_path, monkeypatch):
  monkeypatch.setattr(raw_inputs.tempfile, "tempdir", str(tmp_path))
  root = raw_inputs.records_root("", None)
  assert root == str(tmp_path / f"albert_finetuning_records-{os.getuid()}") and os.path.isdir(root)
  # Another user's folder of that name (made before, or by someone else): refused, not written into.
  monkeypatch.setattr(raw_inputs.os, "getuid", lambda: 4242)
  os.makedirs(tmp_path / "albert_finetuning_records-4242")
  with pytest.raises(PermissionError, match=r"albert_finetuning_records-4242: .* belongs to another user; set "
                                            r"task.records_dir"):
    raw_inputs.records_root("", None)


def test_an_unwritable_record_cache_names_task_records_dir(tmp_path, monkeypatch):
  model_dir = str(tmp_path / "read_only_model")

  def denied(path):
    raise PermissionError(errno.EACCES, "Permission denied", path)

  monkeypatch.setattr(raw_inputs.file_io, "makedirs", denied)
  with pytest.raises(PermissionError, match=r"read_only_model/records: cannot write the cached fine-tuning records "
                                            r"there \(Permission denied: .*\); set task.records_dir to a writable"):
    raw_inputs.records_root("", model_dir)
  root = str(tmp_path / "records")

  def build_into(folder):
    return lambda record, meta, key: denied(os.path.join(folder, ".tmp-1-x"))

  with pytest.raises(PermissionError, match="set task.records_dir"):
    raw_inputs.cached_records(root, "train", {"a": 1}, build_into(root), "train.csv")
  with pytest.raises(PermissionError) as raised:  # an unreadable input is not the cache's fault
    raw_inputs.cached_records(root, "train", {"a": 1}, build_into(str(tmp_path / "data")), "train.csv")
  assert "records_dir" not in str(raised.value)
