"""Tests for official_albert.file_io: atomic writes leave the old file or the new one, never a partial one."""

import os
import pathlib
import re
import subprocess
import sys
import time

import pytest

from official_albert import checkpoint_files
from official_albert import directory_io
from official_albert import file_io
from tests.processes import dead_pid

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _leftovers(directory):
  return [n for n in os.listdir(directory) if ".tmp" in n]


def test_atomic_write_replaces_and_leaves_no_temporary(tmp_path):
  path = str(tmp_path / "sub" / "a.json")
  file_io.atomic_write_json(path, {"b": 1, "a": [1, 2]})
  assert open(path).read() == '{\n  "a": [\n    1,\n    2\n  ],\n  "b": 1\n}\n'
  file_io.atomic_write_text(path, "new")
  assert open(path).read() == "new"
  assert not _leftovers(tmp_path / "sub")
  umask = os.umask(0)
  os.umask(umask)
  assert os.stat(path).st_mode & 0o777 == 0o666 & ~umask  # not mkstemp's 0600


def test_a_failed_write_keeps_the_old_file_and_removes_the_temporary(tmp_path):
  path = str(tmp_path / "a.txt")
  file_io.atomic_write_text(path, "old")
  with pytest.raises(RuntimeError, match="boom"):
    with file_io.atomic_path(path) as tmp:
      with open(tmp, "w") as f:
        f.write("half")
      assert os.path.basename(tmp).startswith("a.txt.tmp-")  # found by a `<path>.tmp-*` cleanup glob
      raise RuntimeError("boom")
  assert open(path).read() == "old"
  assert not _leftovers(tmp_path)


def test_checkpoint_move_and_copy_put_the_index_last(tmp_path, monkeypatch):
  src = str(tmp_path / "src")
  for suffix in (".index", ".data-00000-of-00001", ".unrelated"):
    with open(src + suffix, "w") as f:
      f.write(suffix)
  order = []
  real_rename = file_io.rename
  monkeypatch.setattr(file_io, "rename", lambda a, b: (order.append(os.path.basename(b)), real_rename(a, b)))
  checkpoint_files.copy_checkpoint(src, str(tmp_path / "copy"))
  assert [n for n in order if n.startswith("copy")] == ["copy.data-00000-of-00001", "copy.index"]
  order.clear()
  checkpoint_files.move_checkpoint(src, str(tmp_path / "moved"))
  assert order == ["moved.data-00000-of-00001", "moved.index"]
  assert sorted(os.listdir(tmp_path)) == ["copy.data-00000-of-00001", "copy.index", "moved.data-00000-of-00001",
                                          "moved.index", "src.unrelated"]
  with pytest.raises(FileNotFoundError, match="No checkpoint files for"):
    checkpoint_files.move_checkpoint(src, str(tmp_path / "again"))
  # Over an existing checkpoint, its index goes first: a kill after the data rename left the old index over the new
  # data (no reader could open either model); now it leaves data without an index, which readers see as none.
  for suffix in (".index", ".data-00000-of-00001"):
    (tmp_path / f"new{suffix}").write_text("new" + suffix)

  def killed(a, b):
    if b.endswith(".index"):
      raise KeyboardInterrupt
    real_rename(a, b)
  monkeypatch.setattr(file_io, "rename", killed)
  with pytest.raises(KeyboardInterrupt):
    checkpoint_files.move_checkpoint(str(tmp_path / "new"), str(tmp_path / "moved"))
  assert not (tmp_path / "moved.index").exists()
  assert (tmp_path / "moved.data-00000-of-00001").read_text() == "new.data-00000-of-00001"


def test_checkpoint_files_are_found_in_a_folder_named_like_a_glob(tmp_path):
  # `run[1]/src.*` as a glob matches nothing (`[1]` is a character class): the files are listed, not globbed.
  folder = tmp_path / "run[1]"
  folder.mkdir()
  src = str(folder / "src")
  for suffix in (".index", ".data-00000-of-00001", ".unrelated"):
    (folder / ("src" + suffix)).write_text(suffix)
  checkpoint_files.copy_checkpoint(src, str(folder / "copy"))
  checkpoint_files.move_checkpoint(src, str(folder / "moved"))
  assert sorted(os.listdir(folder)) == ["copy.data-00000-of-00001", "copy.index", "moved.data-00000-of-00001",
                                        "moved.index", "src.unrelated"]
  missing = str(tmp_path / "missing")
  assert checkpoint_files.checkpoint_read_error(missing + "/ckpt").startswith(missing)


def test_replace_directory_on_an_object_store_copies_every_level(tmp_path):
  # ram:// goes through tf.io.gfile like gs://: the tree is walked (a `/**` glob matched one level, and nothing
  # under a folder named like a glob). (ram:// lists by name prefix, so neither name may start with the other.)
  gfile = file_io.gfile()
  for tmp, final in (("ram://replace/tmp-v1", "ram://replace/v1"), ("ram://replace/tmp-v[1]", "ram://replace/v[1]")):
    gfile.makedirs(f"{tmp}/variables")
    gfile.makedirs(final)
    for name, text in (("saved_model.pb", "a"), ("variables/variables.index", "b"), (f"{final}/old", "c")):
      with gfile.GFile(name if name.startswith("ram://") else f"{tmp}/{name}", "w") as f:
        f.write(text)
    directory_io.replace_directory(tmp, final)
    assert sorted(gfile.listdir(final)) == ["saved_model.pb", "variables"] and not gfile.exists(tmp), final
    with gfile.GFile(f"{final}/variables/variables.index") as f:
      assert f.read() == "b"


def test_replace_directory(tmp_path):
  final, tmp = tmp_path / "final", tmp_path / "final.tmp-1"
  final.mkdir()
  (final / "old").write_text("x")
  tmp.mkdir()
  (tmp / "new").write_text("y")
  directory_io.replace_directory(str(tmp), str(final))
  assert sorted(os.listdir(final)) == ["new"] and not tmp.exists()


def test_local_writes_do_not_import_tensorflow(tmp_path):
  code = ("import sys; sys.path.insert(0, sys.argv[1]); from official_albert import file_io; "
          "file_io.atomic_write_json(sys.argv[2], {'a': 1}); file_io.atomic_copy(sys.argv[2], sys.argv[2] + '.b'); "
          "assert 'tensorflow' not in sys.modules")
  result = subprocess.run([sys.executable, "-c", code, REPO_ROOT, str(tmp_path / "x.json")], capture_output=True,
                          text=True, check=False)
  assert result.returncode == 0, result.stderr[-2000:]
  assert (tmp_path / "x.json.b").read_text() == '{\n  "a": 1\n}\n'


class _StrictRemote:
  """A remote file system that refuses a glob as an object name in `exists` (as an object store may) but globs it."""

  def exists(self, path):
    import tensorflow as tf  # noqa: PLC0415
    if any(c in path for c in "*?["):
      raise tf.errors.InvalidArgumentError(None, None, f"invalid object name: {path}")
    return False

  def glob(self, pattern):
    return ["gs://b/b.csv", "gs://b/a.csv"] if pattern == "gs://b/*.csv" else []


def test_an_existing_path_is_literal_in_one_place_that_survives_a_remote_glob(monkeypatch, tmp_path):
  """(The raw text readers had their own unguarded copies: `gs://b/*.csv` raised the store's OpError there.)"""
  from official_albert.data import input_pipeline  # noqa: PLC0415
  from tasks import raw_inputs  # noqa: PLC0415
  from tasks.text import data as text_data  # noqa: PLC0415
  (tmp_path / "train [v1].csv").write_text("text\nhi\n", encoding="utf-8")
  assert file_io.literal_path(str(tmp_path / "train [v1].csv")) and not file_io.literal_path(str(tmp_path / "*.csv"))
  monkeypatch.setattr(file_io, "gfile", _StrictRemote)
  assert not file_io.literal_path("gs://b/*.csv") and input_pipeline.literal_path is file_io.literal_path
  assert text_data.expand_paths("gs://b/*.csv") == ["gs://b/a.csv", "gs://b/b.csv"]
  assert raw_inputs.single_path("gs://b/*.csv") is None
  assert raw_inputs.single_path("gs://b/train [v1].csv") is None  # the store refuses `[` in a name: a pattern




def test_a_killed_processs_temporaries_are_removed_and_a_live_ones_kept(tmp_path, caplog, live_pid):
  """`<path>.tmp-<pid>...` of a dead process (a file, or an export's folder) is removed and logged; a live process's
  (another run writing the same target now) is kept, and so is one naming no process unless the caller owns them, and
  a name that is not one of the project's temporaries (a user's `m.tmp-20241130` backup, a bare `m.tmp-<pid>`)."""
  target, dead, live = str(tmp_path / "m"), dead_pid(), live_pid
  os.makedirs(f"{target}.tmp-{dead}-export/variables")
  os.makedirs(f"{target}.tmp-20241130/variables")
  os.makedirs(f"{target}.tmp-99999999-export/variables")  # (no pid is that large: not a temporary of ours)
  for name in (f"m.tmp-{dead}-0-abc", f"m.tmp-{live}-0-def", f"m.tmp-{live}-export", f"m.tmp-{dead}", "m.tmp-x",
               "mm.tmp-1-0", "m"):
    (tmp_path / name).write_text("partial")
  with caplog.at_level("INFO", logger="official_albert.file_io"):
    removed = file_io.remove_dead_temporaries(target)
  assert sorted(removed) == [f"{target}.tmp-{dead}-0-abc", f"{target}.tmp-{dead}-export"]
  kept = ["m", "m.tmp-x", "mm.tmp-1-0", f"m.tmp-{live}-export", f"m.tmp-{live}-0-def", f"m.tmp-{dead}",
          "m.tmp-20241130", "m.tmp-99999999-export"]
  assert sorted(os.listdir(tmp_path)) == sorted(kept)
  assert caplog.text.count("the temporary of a killed run") == 2 and "is being written by a live process" in caplog.text
  assert sorted(file_io.remove_dead_temporaries(target, owned=True)) == sorted(
      [f"{target}.tmp-x", f"{target}.tmp-{dead}", f"{target}.tmp-20241130", f"{target}.tmp-99999999-export"])
  assert file_io.remove_dead_temporaries(str(tmp_path / "missing" / "m")) == []


def test_a_record_build_removes_the_partial_file_of_a_killed_build(tmp_path):
  """A fine-tuning record build killed mid-write left `<record>.tmp-<pid>-<n>-*` (a split's size) forever; the next
  build of the same split removes it (`records.build_or_reuse`: create_finetuning_data's `build_split` here, the
  text and row tasks' record caches alike)."""
  from tasks import records  # noqa: PLC0415

  class Writer(records.RecordWriter):
    def input_files(self, split):
      return []

    def records(self, split, tokenizer):
      return [{"input_ids": [1, 2]}], {"num_examples": 1}

  record_path = str(tmp_path / "train.tf_record")
  leftover = f"{record_path}.tmp-{dead_pid()}-0-ji0jjk2k"
  pathlib.Path(leftover).write_bytes(b"partial")
  fresh = f"{record_path}.tmp-{dead_pid()}-1-abcdefgh"  # idle < 10 min: maybe another host's worker writing it
  pathlib.Path(fresh).write_bytes(b"being written")
  os.utime(leftover, (time.time() - 3600, time.time() - 3600))
  meta = records.build_split(Writer(records.RecordOptions(task="glue/x")), "train", record_path,
                             record_path[:-len(".tf_record")] + ".meta.json", {"k": 1}, tokenizer=lambda: None)
  assert meta["num_records"] == 1
  assert sorted(os.listdir(tmp_path)) == sorted(["train.meta.json", "train.tf_record", os.path.basename(fresh)])


def test_same_location_reads_spellings_of_one_folder(tmp_path, monkeypatch):
  monkeypatch.chdir(tmp_path)
  (tmp_path / "pre").mkdir()
  assert file_io.same_location("pre", f"{tmp_path}/./pre/") and file_io.same_location("./pre", "pre/")
  assert not file_io.same_location("pre", "other") and not file_io.same_location("gs://b/pre", "gs://b/other")
  assert file_io.same_location("gs://b/pre/", "gs://b/pre")


def test_two_hosts_writing_one_remote_target_with_the_same_pid_and_counter_both_finish(monkeypatch):
  """Audit s29 (safety) 4: every worker of a multi-worker run builds the same record cache; in containers their pids
  are often equal (1) and their counters too, so `<target>.tmp-<pid>-<n>` named one object for both: the first rename
  (copy + delete on an object store) removed it and the second worker's rename raised NotFoundError."""
  import itertools  # noqa: PLC0415
  import threading  # noqa: PLC0415
  monkeypatch.setattr(os, "getpid", lambda: 1)
  monkeypatch.setattr(file_io, "_COUNTER", itertools.repeat(0))
  target, both_written, errors = "ram://two_hosts/train.tf_record", threading.Barrier(2, timeout=30), []

  def worker(text):
    try:
      with file_io.atomic_path(target) as tmp:
        with file_io.open_file(tmp, "w") as f:
          f.write(text)
        both_written.wait()  # both temporaries written before either is renamed
    except Exception as e:  # pylint: disable=broad-except
      errors.append(e)

  threads = [threading.Thread(target=worker, args=(text * 1000,)) for text in "ab"]
  for thread in threads:
    thread.start()
  for thread in threads:
    thread.join()
  assert not errors, errors
  with file_io.open_file(target) as f:
    assert f.read() in ("a" * 1000, "b" * 1000)
  assert file_io.gfile().listdir("ram://two_hosts") == ["train.tf_record"]


class _KilledCopy:
  """tf.io.gfile whose `copy` raises (a kill) at call `at` (at -1: while deleting the old folder)."""

  def __init__(self, at):
    self.at, self.calls, self.real = at, 0, file_io.gfile()

  def __getattr__(self, name):
    return getattr(self.real, name)

  def copy(self, *args, **kwargs):
    if self.calls == self.at:
      raise KeyboardInterrupt("killed")
    self.calls += 1
    return self.real.copy(*args, **kwargs)

  def rmtree(self, path):
    if self.at == -1:
      raise KeyboardInterrupt("killed")
    return self.real.rmtree(path)


def test_replace_directory_on_an_object_store_killed_midway_leaves_no_folder_that_looks_complete(monkeypatch):
  """Audit s29 (safety) 5: the old folder is deleted, then the files are copied one by one; a kill in between left a
  partial SavedModel under the final name that looked like one. Its descriptors (saved_model.pb, labels.json, ...)
  are now deleted first and copied last, the graph last of all: a killed copy's folder never has saved_model.pb."""
  gfile = file_io.gfile()
  files = {"variables/variables.index": "i", "variables/variables.data-00000-of-00001": "d", "saved_model.pb": "g",
           "labels.json": "l", "fingerprint.pb": "f", "assets/spiece.model": "s", "keras_metadata": "k"}
  for at in range(-1, len(files)):
    tmp, final = f"ram://killed{at}/x-tmp", f"ram://killed{at}/final"
    paths = [(f"{tmp}/{name}", text) for name, text in files.items()]
    for path, text in paths + [(f"{final}/saved_model.pb", "old"), (f"{final}/old.bin", "o")]:  # (+ the old model)
      gfile.makedirs(os.path.dirname(path))
      with gfile.GFile(path, "w") as f:
        f.write(text)
    monkeypatch.setattr(file_io, "gfile", lambda killed=_KilledCopy(at): killed)
    with pytest.raises(KeyboardInterrupt):
      directory_io.replace_directory(tmp, final)
    monkeypatch.undo()
    copied = {os.path.relpath(f"{d}/{n}", final) for d, _, names in gfile.walk(final) for n in names}
    assert "saved_model.pb" not in copied, at  # (neither the old one nor the new)
    if copied & {"labels.json", "fingerprint.pb"}:  # the descriptors come after every other file
      assert copied >= {name for name in files if not name.endswith((".json", ".pb"))}, at
    directory_io.replace_directory(tmp, final)  # the rerun
    copied = {os.path.relpath(f"{d}/{n}", final) for d, _, names in gfile.walk(final) for n in names}
    assert copied == set(files), at


def test_expand_home_expands_each_comma_separated_part_after_a_space(monkeypatch, tmp_path):
  """Audit s29 (config) 8: "a.tfrecord, ~/b.tfrecord" (the space people type) kept its `~`; the part's spaces stay."""
  monkeypatch.setenv("HOME", str(tmp_path))
  home = str(tmp_path)
  assert (file_io.expand_home("a.tfrecord, ~/b.tfrecord,~/c,  ~", "x")
          == f"a.tfrecord, {home}/b.tfrecord,{home}/c,  {home}")
  assert file_io.expand_home("gs://b/a, ./~x", "x") == "gs://b/a, ./~x"
  with pytest.raises(ValueError, match="x=a, ~no_such_user_s29/b: no user 'no_such_user_s29'"):
    file_io.expand_home("a, ~no_such_user_s29/b", "x")


def test_a_remote_checkpoint_seen_mid_write_is_read_again_once_complete(tmp_path, monkeypatch):
  """Audit s32 (threads) 4: for a remote prefix the check was remembered by the prefix alone, so a long-lived process
  that saw `model.ckpt-best` while `update_best` copied it (the index not there yet), or on a network error, called
  it damaged for its whole life and `resolve_checkpoint` fell back to an older checkpoint. (A local folder read
  through `gfile` stands for gs:// here.)"""
  import tensorflow as tf  # noqa: PLC0415
  prefixes = [tf.train.Checkpoint(v=tf.Variable([1.0, 2.0])).write(str(tmp_path / name)) for name in ("best", "flaky")]
  os.rename(prefixes[0] + ".index", str(tmp_path / "index.copying"))
  monkeypatch.setattr(file_io, "is_local", lambda path: False)
  assert "cannot be read" in checkpoint_files.checkpoint_read_error(prefixes[0])
  os.rename(str(tmp_path / "index.copying"), prefixes[0] + ".index")  # the copy finished
  assert checkpoint_files.checkpoint_read_error(prefixes[0]) is None
  load, calls = tf.train.load_checkpoint, []

  def unavailable_once(prefix):
    calls.append(prefix)
    if len(calls) == 1:
      raise tf.errors.UnavailableError(None, None, "connection reset")
    return load(prefix)

  monkeypatch.setattr(tf.train, "load_checkpoint", unavailable_once)
  assert "UnavailableError" in checkpoint_files.checkpoint_read_error(prefixes[1])
  assert checkpoint_files.checkpoint_read_error(prefixes[1]) is None  # same files: read again, not kept as damaged
  assert checkpoint_files.checkpoint_read_error(prefixes[1]) is None and len(calls) == 2  # a readable one is read once


def test_an_exports_temporary_is_its_own_and_kept_while_in_use(tmp_path):
  """Audit s32 (threads) 5: every export of a process named its temporary `<export_dir>.tmp-<pid>-export`, and
  `remove_dead_temporaries` took the process's own pid for a dead one, so a second export to the same folder from
  another thread deleted the first one's half-written folder. Each call now has its own name, kept while in use; once
  moved into place, a leftover of this pid (a killed run's in a container, where every run is pid 1) is removed."""
  target = str(tmp_path / "out")
  first, second = file_io.export_temporary(target), file_io.export_temporary(target)
  assert first != second and all(t.startswith(f"{target}.tmp-{os.getpid()}-") for t in (first, second))
  os.makedirs(os.path.join(first, "variables"))
  assert file_io.remove_dead_temporaries(target) == [] and os.path.isdir(first)
  directory_io.replace_directory(first, target)
  leftover = f"{target}.tmp-{os.getpid()}-7-0a1b2c3d-export"
  os.makedirs(leftover)
  assert file_io.remove_dead_temporaries(target) == [leftover]
  assert sorted(os.listdir(tmp_path)) == ["out"] and os.listdir(target) == ["variables"]


def test_an_atomic_write_is_synced_before_its_rename_and_the_rename_after_it(tmp_path, monkeypatch):
  """A power loss or a preempted VM could keep the rename but not the data (a zero-length params.yaml): the temporary
  is fsynced before the rename, the folder after it; `durable=False` skips both."""
  events, real_fsync, real_replace = [], os.fsync, os.replace

  def fsync(fd):
    events.append(("fsync", os.path.realpath(os.readlink(f"/proc/self/fd/{fd}"))))
    real_fsync(fd)

  def replace(src, dst):
    events.append(("replace", os.path.realpath(dst)))
    real_replace(src, dst)

  monkeypatch.setattr(os, "fsync", fsync)
  monkeypatch.setattr(os, "replace", replace)
  folder, target = os.path.realpath(tmp_path), os.path.realpath(tmp_path / "params.yaml")
  file_io.atomic_write_text(target, "a: 1\n")
  assert [kind for kind, _ in events] == ["fsync", "replace", "fsync"]
  assert events[0][1].startswith(f"{target}.tmp-") and events[1:] == [("replace", target), ("fsync", folder)]
  events.clear()
  with file_io.atomic_path(target, durable=False) as tmp:
    pathlib.Path(tmp).write_text("a: 2\n")
  assert events == [("replace", target)] and pathlib.Path(target).read_text() == "a: 2\n"

  broken = []

  def refused(fd):  # a folder that cannot be synced (some fuse mounts) is best effort; a file that cannot, fails
    if os.path.isdir(os.readlink(f"/proc/self/fd/{fd}")):
      raise OSError(22, "Invalid argument")
    if broken:
      raise OSError(5, "Input/output error")
    real_fsync(fd)

  monkeypatch.setattr(os, "fsync", refused)
  file_io.atomic_write_text(target, "a: 3\n")
  assert pathlib.Path(target).read_text() == "a: 3\n"
  broken.append(True)
  with pytest.raises(OSError, match="Input/output"):
    file_io.atomic_write_text(target, "a: 4\n")
  assert pathlib.Path(target).read_text() == "a: 3\n" and _leftovers(tmp_path) == []


def test_a_hidden_temporary_holds_no_part_of_its_targets_name_and_a_killed_ones_is_removed(tmp_path):
  """TensorBoard reads every "*tfevents*" file, a half-written `<events file>.tmp-...` too: `hide_name` writes
  `.tmp-<pid>-<n>-<random>`, which `remove_dead_temporaries(hidden=True)` finds again by its pid."""
  target = str(tmp_path / "events.out.tfevents.1.host.7.0.v2")
  with file_io.atomic_path(target, hide_name=True) as tmp:
    assert os.path.dirname(tmp) == str(tmp_path)
    assert re.fullmatch(rf"\.tmp-{os.getpid()}-\d+-[a-z0-9_]+", os.path.basename(tmp)), tmp
    assert file_io.remove_dead_temporaries(target, hidden=True) == []  # (this write's: in use)
    pathlib.Path(tmp).write_bytes(b"events")
  assert pathlib.Path(target).read_bytes() == b"events" and _leftovers(tmp_path) == []
  dead = dead_pid()
  for name in (f".tmp-{dead}-0-abcd1234", f".tmp-{dead}-0-model.ckpt-best.index", f"x.tmp-{dead}-0-abcd1234"):
    (tmp_path / name).write_bytes(b"partial")
  assert file_io.remove_dead_temporaries(target, hidden=True) == [str(tmp_path / f".tmp-{dead}-0-abcd1234")]
  assert sorted(_leftovers(tmp_path)) == [f".tmp-{dead}-0-model.ckpt-best.index", f"x.tmp-{dead}-0-abcd1234"]
