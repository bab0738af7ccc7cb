"""TensorBoard after a kill: a run resumed from step C drops the killed run's events past C (`Summaries.drop_after`),
so that every reader sees each step once, with the values of the run that reached the end.

Unit tests on hand-made event files (steps 1..6, resume at 4), then one in-process train_and_eval run whose last
checkpoint is deleted (a kill after the summaries of steps 3 and 4, before their checkpoint) and resumed to the end.
"""

import glob
import logging
import os
import socket
import time

import pytest
import tensorflow as tf
from tensorflow.core.util import event_pb2

from official_albert.training import summaries
from official_albert.training import train_lib
from tests.official_albert.training.test_train_lib import tiny_params
from tests.processes import dead_pid

LOGGER = "official_albert.training.summaries"


def _write_run(model_dir, steps, offset=0.0):
  """A killed run's files: train/ and eval/ scalars "loss" = step + offset at `steps`, through `Summaries`."""
  writer = summaries.Summaries(model_dir, enabled=True)
  for step in steps:
    writer.write("train", {"loss": step + offset, "learning_rate": 0.5 * step}, step)
    writer.write("eval", {"loss": step + offset + 0.25}, step)
  writer.close()


def _records(path):
  return [bytes(r) for r in tf.data.TFRecordDataset(path).as_numpy_iterator()]


def _event_files(folder):
  return sorted(glob.glob(os.path.join(folder, "*tfevents*")))


def _scalars(folder, tag="loss"):
  """{step: [(value, wall_time), ...]} of `tag` over every event file of `folder`, read with summary_iterator."""
  out = {}
  for path in _event_files(folder):
    for event in tf.compat.v1.train.summary_iterator(path):
      for value in event.summary.value:
        if value.tag == tag:
          out.setdefault(event.step, []).append((float(tf.make_ndarray(value.tensor)), event.wall_time))
  return out


def _step(record):
  return event_pb2.Event.FromString(record).step


@pytest.mark.parametrize("folder", ["train", "eval"])
def test_events_past_the_resumed_step_are_dropped_and_the_rest_kept_byte_for_byte(tmp_path, folder):
  model_dir = str(tmp_path)
  _write_run(model_dir, range(1, 7))
  (tmp_path / folder / "notes.txt").write_text("not an event file")
  (path,) = _event_files(tmp_path / folder)
  before = _records(path)
  assert sorted({_step(r) for r in before}) == [0, 1, 2, 3, 4, 5, 6]  # (0: the file's version header)

  rewritten = summaries.Summaries(model_dir, enabled=True).drop_after(4)

  assert sorted(rewritten) == sorted(_event_files(tmp_path / "train") + _event_files(tmp_path / "eval"))
  assert _records(path) == [r for r in before if _step(r) <= 4]  # the same bytes, in the same order
  assert sorted(_scalars(tmp_path / folder)) == [1, 2, 3, 4]
  assert (tmp_path / folder / "notes.txt").read_text() == "not an event file"
  assert sorted(os.listdir(tmp_path / folder)) == sorted([os.path.basename(path), "notes.txt"])  # no temporary left


def test_a_resume_with_nothing_past_its_step_touches_nothing(tmp_path):
  _write_run(str(tmp_path), range(1, 5))
  paths = _event_files(tmp_path / "train") + _event_files(tmp_path / "eval")
  for path in paths:
    os.utime(path, (1_000_000, 1_000_000))
  before = {path: open(path, "rb").read() for path in paths}

  assert summaries.Summaries(str(tmp_path), enabled=True).drop_after(4) == []
  assert summaries.Summaries(str(tmp_path), enabled=False).drop_after(2) == []  # a non-chief worker writes nothing

  for path in paths:
    assert open(path, "rb").read() == before[path] and os.stat(path).st_mtime == 1_000_000
  assert summaries.Summaries(str(tmp_path / "empty"), enabled=True).drop_after(0) == []  # no folders yet


@pytest.mark.parametrize("damage", ["bad_crc", "bad_crc_of_the_last_record", "bad_length_crc"])
def test_a_damaged_event_file_is_logged_and_left_as_it_is(tmp_path, caplog, damage):
  _write_run(str(tmp_path), range(1, 7))
  (path,) = _event_files(tmp_path / "train")
  data = bytearray(open(path, "rb").read())
  if damage == "bad_crc":
    data[len(data) // 2] ^= 0xFF
  elif damage == "bad_crc_of_the_last_record":  # (complete, so no truncated tail: damage)
    data[-1] ^= 0xFF
  else:
    data[len(_records(path)[0]) + 16] ^= 0x01  # the second record's length: its header CRC no longer matches
  open(path, "wb").write(bytes(data))

  with caplog.at_level(logging.WARNING, logger=LOGGER):
    rewritten = summaries.Summaries(str(tmp_path), enabled=True).drop_after(4)

  assert open(path, "rb").read() == bytes(data)
  assert f"Left the event file {path} as it is: it is damaged" in caplog.text
  assert rewritten == _event_files(tmp_path / "eval")  # the undamaged folder is still fixed
  assert sorted(os.listdir(tmp_path / "train")) == [os.path.basename(path)]


@pytest.mark.parametrize("cut", ["data", "data_crc", "header"])  # where in the last record the file ends
def test_a_truncated_last_record_ends_the_file_and_goes_with_the_events_past_the_step(tmp_path, caplog, cut):
  """A kill in the middle of a summary write: the file ends inside its last record. It was "damaged: left", so the
  killed run's steps past the checkpoint stayed and showed twice after the resume."""
  _write_run(str(tmp_path), range(1, 7))
  (path,) = _event_files(tmp_path / "train")
  before = _records(path)
  data = open(path, "rb").read()
  last = len(before[-1]) + 16
  open(path, "wb").write(data[:-{"data": 5, "data_crc": 2, "header": last - 6}[cut]])

  with caplog.at_level(logging.WARNING, logger=LOGGER):
    rewritten = summaries.Summaries(str(tmp_path), enabled=True).drop_after(4)

  assert path in rewritten and "damaged" not in caplog.text
  assert open(path, "rb").read() == data[:len(data) - sum(len(r) + 16 for r in before if _step(r) > 4)]
  assert _records(path) == [r for r in before if _step(r) <= 4]


def test_a_truncated_tail_with_nothing_past_the_step_is_left_untouched(tmp_path, caplog):
  _write_run(str(tmp_path), range(1, 5))
  (path,) = _event_files(tmp_path / "train")
  data = open(path, "rb").read()[:-5]
  open(path, "wb").write(data)
  os.utime(path, (1_000_000, 1_000_000))

  with caplog.at_level(logging.WARNING, logger=LOGGER):
    assert path not in summaries.Summaries(str(tmp_path), enabled=True).drop_after(4)

  assert open(path, "rb").read() == data and os.stat(path).st_mtime == 1_000_000 and "damaged" not in caplog.text




def test_a_killed_rewrites_temporaries_are_removed_and_a_live_ones_kept(tmp_path, live_pid):
  """A rewrite killed midway left its temporary (atomic_path's hidden `.tmp-<pid>-<n>-<random>`, or the earlier
  `.summaries-rewrite-<uuid>.tmp`, which names no process: taken once untouched for 10 minutes) beside the events."""
  _write_run(str(tmp_path), range(1, 5))
  train = tmp_path / "train"
  dead, live = f".tmp-{dead_pid()}-0-abcd1234", f".tmp-{live_pid}-3-efgh5678"
  old, fresh = f".summaries-rewrite-{'a' * 32}.tmp", f".summaries-rewrite-{'b' * 32}.tmp"
  for name in (dead, live, old, fresh, ".tmp-1-0-model.ckpt-best.index"):
    (train / name).write_bytes(b"partial")
  os.utime(train / old, (time.time() - 700, time.time() - 700))

  assert summaries.Summaries(str(tmp_path), enabled=True).drop_after(4) == []

  left = {name for name in os.listdir(train) if "tfevents" not in name}
  assert left == {live, fresh, ".tmp-1-0-model.ckpt-best.index"}  # (not a temporary of atomic_path's: kept)


def test_an_event_file_a_live_process_of_this_host_appends_to_is_left_alone(tmp_path, caplog, live_pid):
  """An evaluation job beside the trainer holds its `eval/` file open: a rewrite (os.replace) sent its next events
  to the deleted inode. The file's name says whose it is: a live process here keeps it whole."""
  _write_run(str(tmp_path), range(1, 7))
  (path,) = _event_files(tmp_path / "eval")
  name = os.path.basename(path)
  assert f".{socket.gethostname()}.{os.getpid()}." in name  # (TF names it <time>.<host>.<pid>.<n>.v2)
  theirs = path.replace(f".{os.getpid()}.", f".{live_pid}.")
  os.rename(path, theirs)
  data = open(theirs, "rb").read()

  with caplog.at_level(logging.WARNING, logger=LOGGER):
    rewritten = summaries.Summaries(str(tmp_path), enabled=True).drop_after(4)

  assert rewritten == _event_files(tmp_path / "train") and open(theirs, "rb").read() == data
  assert f"process {live_pid} of this host still appends to it" in caplog.text
  dead = theirs.replace(f".{live_pid}.", f".{dead_pid()}.")  # once that job has ended, the next resume fixes it
  os.rename(theirs, dead)
  assert summaries.Summaries(str(tmp_path), enabled=True).drop_after(4) == [dead]


def test_the_restored_steps_evaluation_written_again_replaces_the_old_one(tmp_path):
  """A kill between the evaluation's summary and eval_results.json: the resumed run evaluates step C again."""
  _write_run(str(tmp_path), range(1, 7))
  writer = summaries.Summaries(str(tmp_path), enabled=True)
  writer.drop_after(4)
  writer.write("eval", {"loss": 40.0}, 4)
  writer.write("train", {"loss": 50.0}, 5)
  writer.close()

  evals = _scalars(tmp_path / "eval")
  assert {step: [v for v, _ in values] for step, values in evals.items()} == {
      1: [1.25], 2: [2.25], 3: [3.25], 4: [40.0]}
  trains = _scalars(tmp_path / "train")
  assert {step: [v for v, _ in values] for step, values in trains.items()} == {
      1: [1.0], 2: [2.0], 3: [3.0], 4: [4.0], 5: [50.0]}


@pytest.mark.slow
def test_kill_after_summaries_past_the_checkpoint_then_resume_shows_each_step_once(tmp_path):
  """4 steps, a summary every step, a checkpoint and an evaluation every 2; ckpt-4 deleted as a kill before its
  save would have left the run: the resume from ckpt-2 evaluates step 2 again (eval_results.json says 4) and writes
  train 3, 4 and eval 4 again. Each step once, with the resumed run's numbers."""
  model_dir = str(tmp_path)
  override = {"trainer": {"train_steps": 4, "steps_per_loop": 1, "checkpoint_interval": 2, "summary_interval": 1,
                          "validation_interval": 2, "validation_steps": 1, "max_to_keep": 5}}
  train_lib.run_experiment(tiny_params(**override), model_dir, "train_and_eval")
  for path in glob.glob(os.path.join(model_dir, "**", "*ckpt-4*"), recursive=True):
    os.remove(path)
  resumed_at = time.time()
  result = train_lib.run_experiment(tiny_params(**override), model_dir, "train_and_eval")
  assert result["global_step"] == 4 and [step for step, _ in result["history"]] == [3, 4]

  train, evals = _scalars(os.path.join(model_dir, "train")), _scalars(os.path.join(model_dir, "eval"))
  assert {step: len(values) for step, values in train.items()} == {1: 1, 2: 1, 3: 1, 4: 1}
  assert {step: len(values) for step, values in evals.items()} == {2: 1, 4: 1}
  for step, logs in result["history"]:
    assert train[step][0][0] == pytest.approx(logs["loss"]) and train[step][0][1] >= resumed_at
  assert all(train[step][0][1] < resumed_at for step in (1, 2))
  for step, results in result["eval_history"]:
    assert evals[step][0][0] == pytest.approx(results["loss"]) and evals[step][0][1] >= resumed_at
  assert [step for step, _ in result["eval_history"]] == [2, 4]



def test_a_preemption_between_summary_steps_writes_the_steps_since_the_last_one():
  """The Preemption action writes the train/ summary of the steps since the last write (they were lost: the restart
  starts a new window), then saves; with no such steps it writes nothing. (A fake trainer: an in-process SIGTERM run
  of this took down its xdist worker once.)"""
  import types  # pylint: disable=g-import-not-at-top

  from official_albert.training import actions  # pylint: disable=g-import-not-at-top
  calls = []
  trainer = types.SimpleNamespace(
      all_workers=lambda requested, require_all: requested, preemption=types.SimpleNamespace(requested=True),
      save_checkpoint=lambda: calls.append("save"),
      summaries=types.SimpleNamespace(write=lambda name, logs, step: calls.append((name, dict(logs), step))))
  state = actions.LoopState(total=4, step=2, last_saved=None, logs={"loss": 0.5})
  state.window.steps = 2
  actions.Preemption(trainer)(state)
  assert calls == [("train", {"loss": 0.5}, 2), "save"] and state.status == "preempted" and not state.window.steps
  calls.clear()
  actions.Preemption(trainer)(actions.LoopState(total=4, step=4, last_saved=4))
  assert calls == []
