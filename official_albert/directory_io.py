"""Replacing a folder whole (an export, a model directory): the old copy stays until the new one is complete.

Local folders are swapped by renames (through a symlink and into a mount point too); object stores cannot rename a
folder, so there it is copied file by file, the descriptor files last (`replace_directory`). The temporaries these
moves leave when killed are `file_io`'s (`.tmp-<pid>-<n>-<random>` names): `file_io.remove_dead_temporaries` removes
them. Split from `official_albert.file_io` (which holds the single-file writes) by concept.
"""

from __future__ import annotations

import itertools
import os
import shutil
import threading
from typing import Mapping, Optional
import uuid

from official_albert import file_io

_COUNTER = itertools.count()
_REPLACE_LOCK = threading.Lock()  # (two threads replacing one folder: one rmtree + move at a time)

# What a reader opens first to recognize a folder: a SavedModel's graph (.pb), a model directory's or an export's
# config (.json). On object stores `replace_directory` deletes a folder's top-level ones first and copies them last.
_DESCRIPTOR_SUFFIXES = (".json", ".pb")


def _replace_local_directory(tmp_dir: str, final_dir: str) -> None:
  """`replace_directory` on this machine: the old folder is renamed aside and deleted only once the new one is in.

  A symlinked `final_dir` (`exports/current -> v3`) has the folder it points to replaced and keeps the link (rmtree
  refuses a link: the finished export was thrown away). A folder that cannot be renamed (a mount point: EBUSY) keeps
  its name and has its contents swapped (`_swap_contents`); rmtree then move had emptied the mount before failing at
  its rmdir, and the caller then deleted the new copy: both exports lost.
  """
  final_dir = os.path.realpath(final_dir)
  if not os.path.isdir(final_dir):
    shutil.move(tmp_dir, final_dir)
    return
  aside = f"{final_dir}.tmp-{os.getpid()}-{next(_COUNTER)}-{uuid.uuid4().hex[:8]}"  # (a remove_dead_temporaries name)
  file_io.mark_in_use(aside, True)  # (another thread's cleanup must not take the old folder while it may go back)
  try:
    try:
      os.rename(final_dir, aside)
    except OSError:  # a mount point (EBUSY), a folder in a read-only parent
      _swap_contents(tmp_dir, final_dir)
      return
    try:
      shutil.move(tmp_dir, final_dir)
    except BaseException:
      if os.path.isdir(final_dir) and os.path.isdir(tmp_dir):  # (a partial copy to another file system)
        shutil.rmtree(final_dir)
      os.rename(aside, final_dir)  # the old folder back; the new one stays complete at tmp_dir
      raise
    shutil.rmtree(aside, ignore_errors=True)
  finally:
    file_io.mark_in_use(aside, False)


def _swap_contents(tmp_dir: str, final_dir: str) -> None:
  """Replaces what `final_dir` holds by what `tmp_dir` holds, `final_dir` itself staying (a mount point).

  The new copy is first copied into a hidden folder inside `final_dir` (the same file system, nothing old touched
  yet; a failure removes only that copy), then renames move the old entries into a second hidden folder and the new
  ones out of the first; a failing rename undoes the renames done, so `final_dir` holds the old export or the new
  one, never neither. A kill midway can leave `.tmp-*-new` / `.tmp-*-old` folders inside `final_dir`.
  """
  tag = f".tmp-{os.getpid()}-{next(_COUNTER)}-{uuid.uuid4().hex[:8]}"
  new, old = os.path.join(final_dir, f"{tag}-new"), os.path.join(final_dir, f"{tag}-old")
  try:
    shutil.copytree(tmp_dir, new, symlinks=True)
    os.mkdir(old)
  except BaseException:
    shutil.rmtree(new, ignore_errors=True)
    raise
  moves = [(os.path.join(final_dir, n), os.path.join(old, n)) for n in os.listdir(final_dir) if not n.startswith(tag)]
  moves += [(os.path.join(new, n), os.path.join(final_dir, n)) for n in os.listdir(new)]
  done = []
  try:
    for src, dst in moves:
      os.rename(src, dst)
      done.append((src, dst))
  except BaseException:
    for src, dst in reversed(done):
      os.rename(dst, src)
    shutil.rmtree(new, ignore_errors=True)
    os.rmdir(old)
    raise
  for folder in (old, new, tmp_dir):
    shutil.rmtree(folder, ignore_errors=True)


def check_apart(final_dir: str, flag: str, inputs: Mapping[str, Optional[str]]) -> None:
  """Refuses a `final_dir` that `replace_directory` would replace with one of `inputs` (flag -> path) inside it, or
  that is one of them, however spelled (`file_io.location_key`: also through a symlink): an export with
  `--export_dir=runs --overwrite` of `--model_dir=runs/mrpc` deleted the model and everything beside it.

  Raises:
    ValueError: naming both flags.
  """
  for input_flag, path in inputs.items():
    if path and file_io.is_within(path, final_dir):
      raise ValueError(f"{flag}={final_dir} holds {input_flag}={path}: writing it replaces that folder whole, and the "
                       f"input with it. Write to a folder outside {path}.")


def replace_directory(tmp_dir: str, final_dir: str) -> None:
  """Puts the complete directory `tmp_dir` at `final_dir` (replacing it), removing `tmp_dir`.

  Local: the old directory renamed aside, the new one in, then the old deleted (`_replace_local_directory`: also
  through a symlink and into a mount point). Object stores cannot rename directories: the old directory is
  deleted and the files are copied one by one (the temporary copy stays complete until then), then the temporary
  directory is deleted. A kill in between leaves a partial folder under the final name; its top-level descriptor
  files (`*.json`, `*.pb`: the SavedModel graph, the model's config, an export's serving config) are deleted first
  and copied last, so such a folder holds none and readers refuse it as incomplete instead of loading half a model
  (write it again; an export needs --overwrite). The files are found by walking `tmp_dir`, not by globbing
  `tmp_dir/**`: a glob reads `[`, `*`, `?` of the folder's name as a pattern (and matched nothing), and `**` matches
  one level only (a SavedModel's `variables/` was left behind). `tmp_dir` is no longer in use afterwards
  (`export_temporary`); two threads replacing one local folder do it one after the other (the last one's stays).
  """
  if file_io.is_local(tmp_dir) and file_io.is_local(final_dir):
    with _REPLACE_LOCK:  # (else both moved the old aside, and the second move put its folder inside the first's)
      _replace_local_directory(tmp_dir, final_dir)
    file_io.mark_in_use(tmp_dir, False)
    return
  g = file_io.gfile()
  tmp_dir, final_dir = tmp_dir.rstrip("/"), final_dir.rstrip("/")
  if g.exists(final_dir):
    for name in sorted(g.listdir(final_dir), key=lambda n: not n.endswith(".pb")):  # (the graph first)
      if name.endswith(_DESCRIPTOR_SUFFIXES):
        g.remove(f"{final_dir}/{name}")
    g.rmtree(final_dir)
  copies = []
  for directory, _, names in g.walk(tmp_dir):
    target = final_dir + directory.rstrip("/")[len(tmp_dir):]
    g.makedirs(target)
    copies += [(f"{directory.rstrip('/')}/{name}", f"{target}/{name}") for name in names]

  def descriptor_last(copy):  # (the graph after labels.json; sorted is stable: the rest keep their order)
    top = copy[1] == f"{final_dir}/{os.path.basename(copy[1])}"
    return top and copy[1].endswith(_DESCRIPTOR_SUFFIXES), top and copy[1].endswith(".pb")

  for src, dst in sorted(copies, key=descriptor_last):
    g.copy(src, dst, overwrite=True)
  g.rmtree(tmp_dir)
  file_io.mark_in_use(tmp_dir, False)
