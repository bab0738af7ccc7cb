"""The ablation study's reruns and inputs (review s57 h4): what a rerun keeps, what it refuses, what it reads.

- A rerun that changes only the downstream tasks (or the fine-tuning settings) keeps the pretraining run: the run
  folder's key holds the pretraining settings only, and a changed pretraining setting is refused, never deleted.
- A `--glue_dir` without a requested task's files is refused before anything is built; the GLUE files' content is in
  the keys, so a corrected dev file is fine-tuned and scored again.
- The step-0 evaluation reaches curve.jsonl from the trainer's event files (a killed, resumed run kept no step 0).
- `--seq_length` below the fine-tuning length caps it; whitespace-only lines end documents; a corpus that is not
  UTF-8 is refused naming the file and the line.

Every test is unit-sized: the trainer, the probes and the record makers are stand-ins.
"""

import dataclasses
import json
import os
import pathlib

import pytest

SCORES = ("masked_lm_accuracy", "masked_lm_accuracy_nsp_set", "nsp_accuracy", "sop_accuracy", "heldout_examples")


def _data(fingerprint="data-a"):
  kinds = ("sop", "nsp")
  return {"fingerprint": fingerprint, "vocab_size": 800, "train": {k: {"pattern": f"{k}_train"} for k in kinds},
          "heldout": {k: {"pattern": f"{k}_heldout"} for k in kinds}}


def _fake_stages(monkeypatch, calls):
  """Stand-ins for the pretraining run (a checkpoint file, one loop, a step-0 evaluation), the probes and the
  fine-tuning; `calls` gets each pretraining run's model_dir."""
  from experiments.projects.ablations import runner

  def pretrain(experiment, mode, model_dir, params_override, on_loop_end):
    steps = json.loads(params_override)["trainer"]["train_steps"]
    os.makedirs(model_dir, exist_ok=True)
    pathlib.Path(model_dir, f"ckpt-{steps}.index").write_text("weights", encoding="utf-8")
    calls.append(model_dir)
    on_loop_end(steps, {"loss": 1.0, "masked_lm_accuracy": 0.2})
    return {"global_step": steps, "eval_history": [(0, {"masked_lm_accuracy": 0.001, "global_step": 0})]}

  monkeypatch.setattr(runner.train, "run", pretrain)
  monkeypatch.setattr(runner.probes, "score", lambda model_dir, heldout, settings: dict(
      {k: 0.5 for k in SCORES}, layers={}))
  monkeypatch.setattr(runner.probes, "parameter_count", lambda model: 1)
  monkeypatch.setattr(runner.downstream, "downstream_scores", lambda run_dir, model_dir, tasks, *_: {
      "tasks": {n: 0.6 for n, s in tasks.items() if "records" in s}, "average": 0.6 if tasks else None})


ORDER = {"records": {"train": "o/train", "dev": "o/dev"}, "counts": {"train": 400, "dev": 200}}
SST2 = {"records": {"train": "s/train", "dev": "s/dev"}, "counts": {"train": 120, "dev": 60},
        "sha256": {"train": "a" * 64, "dev": "b" * 64}}


def test_a_rerun_with_other_downstream_tasks_keeps_the_pretraining_run(tmp_path, monkeypatch):
  """Finding 1: the run key held the task list, and a key change deleted the run folder: a rerun that only dropped
  a task (or a mistyped --glue_dir) threw away every finished pretraining run and pretrained them all again."""
  from experiments.projects.ablations import runner
  from experiments.projects.ablations.studies import STUDIES
  from experiments.projects.ablations.studies import StudySettings
  calls = []
  _fake_stages(monkeypatch, calls)
  settings, variant, out = StudySettings.quick(), STUDIES["table5"].variant("SOP"), str(tmp_path)
  first = runner.run_variant(out, "table5", variant, 1, settings, _data(), {"order": ORDER})
  checkpoint = tmp_path / "runs" / "SOP" / "seed1" / "model" / f"ckpt-{settings.train_steps}.index"
  assert len(calls) == 1 and checkpoint.exists()
  assert [e["step"] for e in first["curve"]] == [0, settings.train_steps]
  for tasks in ({"order": ORDER, "sst-2": SST2}, {}, {"order": ORDER}):
    again = runner.run_variant(out, "table5", variant, 1, settings, _data(), tasks)
    assert set(again["downstream"]) == {n for n in tasks}
  assert again["run_id"] == first["run_id"]  # (the first task list again: the same result key)
  other_finetuning = dataclasses.replace(settings, ft_train_steps=7, probe_examples=9)
  runner.run_variant(out, "table5", variant, 1, other_finetuning, _data(), {"order": ORDER})
  assert len(calls) == 1 and checkpoint.exists()  # rescored and fine-tuned again, never pretrained again
  # A pretraining setting changed: refused, naming the field, the fix, and nothing deleted.
  for changed, field in ((dataclasses.replace(settings, train_steps=settings.train_steps + 1), "training.train_steps"),
                         (settings, "data")):
    data = _data("data-b") if field == "data" else _data()
    with pytest.raises(ValueError, match=rf"pretrained under other settings .*{field}.*another --output_dir"):
      runner.check_run_keys(out, [variant], 1, changed, data)
    with pytest.raises(ValueError, match=field):
      runner.run_variant(out, "table5", variant, 1, changed, data, {"order": ORDER})
  assert len(calls) == 1 and checkpoint.exists() and (checkpoint.parents[1] / runner.RESULT_FILE).exists()
  runner.check_run_keys(out, [variant], 1, settings, _data())  # the settings it was run with: accepted


def test_a_run_keyed_in_the_earlier_format_is_resumed_not_deleted(tmp_path, monkeypatch):
  """A finished study's run_key.json holds every setting and the downstream tasks under an id of the earlier formula:
  its pretraining fields still match, so the run is kept (the rmtree emptied it)."""
  from experiments.projects.ablations import runner
  from experiments.projects.ablations.studies import STUDIES
  from experiments.projects.ablations.studies import StudySettings
  calls = []
  _fake_stages(monkeypatch, calls)
  settings, variant = StudySettings.quick(), STUDIES["table5"].variant("None")
  run_dir = tmp_path / "runs" / "None" / "seed1"
  (run_dir / "model").mkdir(parents=True)
  sentinel = run_dir / "model" / "ckpt-100.data-00000-of-00001"
  sentinel.write_text("trained weights", encoding="utf-8")
  earlier = {"variant": variant.describe(), "seed": 1, "training": dataclasses.asdict(settings), "data": "data-a",
             "downstream": [["order", ORDER["counts"], ORDER["records"]]], "id": "0123456789abcdef"}
  (run_dir / "run_key.json").write_text(json.dumps(earlier, default=str), encoding="utf-8")
  (run_dir / runner.RESULT_FILE).write_text(json.dumps({"run_id": "0123456789abcdef"}), encoding="utf-8")
  runner.run_variant(str(tmp_path), "table5", variant, 1, settings, _data(), {"order": ORDER})
  assert sentinel.read_text(encoding="utf-8") == "trained weights"
  key = json.loads((run_dir / "run_key.json").read_text(encoding="utf-8"))
  assert key == runner.pretraining_key(variant, 1, settings, _data())  # rewritten in the current format
  # A run folder with a model but no key is refused too, not emptied.
  (run_dir / "run_key.json").unlink()
  with pytest.raises(ValueError, match="no run_key.json"):
    runner.check_run_keys(str(tmp_path), [variant], 1, settings, _data())
  assert sentinel.exists()


def test_a_run_finished_before_pretrain_json_keeps_its_timing_and_is_not_trained_again(tmp_path, monkeypatch):
  """A study finished by the earlier version has no pretrain.json: its rerun called the trainer on the finished model
  and froze that no-op call's 0 s as the pretraining's time (review s57 h7)."""
  from experiments.projects.ablations import runner
  from experiments.projects.ablations.studies import STUDIES
  from experiments.projects.ablations.studies import StudySettings
  calls = []
  _fake_stages(monkeypatch, calls)
  settings, variant = StudySettings.quick(), STUDIES["table5"].variant("None")
  run_dir = tmp_path / "runs" / "None" / "seed1"
  (run_dir / "model").mkdir(parents=True)
  earlier = {"variant": variant.describe(), "seed": 1, "training": dataclasses.asdict(settings), "data": "data-a",
             "id": "0123456789abcdef"}
  (run_dir / "run_key.json").write_text(json.dumps(earlier, default=str), encoding="utf-8")
  (run_dir / runner.RESULT_FILE).write_text(json.dumps({"run_id": "0123456789abcdef", "pretrain_seconds": 123.5,
                                                        "global_step": settings.train_steps}), encoding="utf-8")
  result = runner.run_variant(str(tmp_path), "table5", variant, 1, settings, _data(), {"order": ORDER})
  assert calls == [] and result["pretrain_seconds"] == 123.5 and result["global_step"] == settings.train_steps
  assert json.loads((run_dir / runner.PRETRAIN_FILE).read_text(encoding="utf-8"))["pretrain_seconds"] == 123.5


def _glue(root, dev_labels=None):
  folder = root / "SST-2"
  folder.mkdir(parents=True, exist_ok=True)
  (folder / "train.tsv").write_text("sentence\tlabel\n" + "".join(f"train {i}\t{i % 2}\n" for i in range(120)),
                                    encoding="utf-8")
  labels = dev_labels or [i % 2 for i in range(60)]
  (folder / "dev.tsv").write_text("sentence\tlabel\n" + "".join(f"dev {i}\t{x}\n" for i, x in enumerate(labels)),
                                  encoding="utf-8")
  return str(root)


def _fake_records(monkeypatch):
  from experiments.projects.ablations import downstream
  monkeypatch.setattr(downstream.cfd, "create_finetuning_data", lambda experiment, out, *a, **k: {
      s: {"record_path": os.path.join(out, f"{s}.tfrecord")} for s in ("train", "dev")})


def test_a_glue_dir_without_the_task_is_refused_before_anything_is_built(tmp_path, monkeypatch):
  """Finding 2: a mistyped --glue_dir (or one a level too deep) skipped SST-2 / MRPC without a word."""
  from experiments.projects.ablations import downstream
  from experiments.projects.ablations import study as driver
  from experiments.projects.ablations.studies import StudySettings
  _fake_records(monkeypatch)
  settings, glue = StudySettings.quick(), _glue(tmp_path / "glue")
  typo = str(tmp_path / "glu")
  with pytest.raises(FileNotFoundError, match=rf"{typo}/SST-2/train.tsv is missing\. Give --glue_dir the folder"):
    downstream.prepare_tasks(str(tmp_path), ["sst-2"], typo, "x.model", settings)
  with pytest.raises(FileNotFoundError, match="holds train.tsv itself: give its parent folder"):
    downstream.prepare_tasks(str(tmp_path), ["sst-2"], os.path.join(glue, "SST-2"), "x.model", settings)
  with pytest.raises(FileNotFoundError, match="MRPC/train.tsv is missing"):
    downstream.prepare_tasks(str(tmp_path), ["sst-2", "mrpc"], glue, "x.model", settings)
  assert "skipped" in downstream.prepare_tasks(str(tmp_path), ["sst-2"], "", "x.model", settings)["sst-2"]
  assert "records" in downstream.prepare_tasks(str(tmp_path), ["sst-2"], glue, "x.model", settings)["sst-2"]
  monkeypatch.setattr(driver.shared_data, "prepare_data", lambda *a, **k: pytest.fail("built the data first"))
  with pytest.raises(FileNotFoundError, match="SST-2/train.tsv is missing"):
    driver.run_study("table5", str(tmp_path / "out"), settings, 1, tasks=("order", "sst-2"), glue_dir=typo)


def test_a_corrected_glue_dev_file_is_fine_tuned_and_scored_again(tmp_path, monkeypatch):
  """Finding 3: the keys held the record paths and row counts only: every dev label flipped, the same rows, and a
  rerun returned the old scores."""
  from experiments.projects.ablations import downstream
  from experiments.projects.ablations import runner
  from experiments.projects.ablations.studies import STUDIES
  from experiments.projects.ablations.studies import StudySettings
  _fake_records(monkeypatch)
  settings, variant = StudySettings.quick(), STUDIES["table5"].variant("SOP")
  glue = _glue(tmp_path / "glue")
  before = downstream.prepare_tasks(str(tmp_path), ["sst-2"], glue, "x.model", settings)
  _glue(tmp_path / "glue", dev_labels=[1 - i % 2 for i in range(60)])
  after = downstream.prepare_tasks(str(tmp_path), ["sst-2"], glue, "x.model", settings)
  assert before["sst-2"]["counts"] == after["sst-2"]["counts"]
  assert before["sst-2"]["sha256"]["train"] == after["sst-2"]["sha256"]["train"]
  assert before["sst-2"]["sha256"]["dev"] != after["sst-2"]["sha256"]["dev"]
  key = lambda tasks: runner.run_key("table5", variant, 1, settings, _data(), tasks)["id"]  # noqa: E731
  assert key(before) != key(after)
  trained = []
  monkeypatch.setattr(downstream.train, "run", lambda experiment, mode, model_dir, params_override: (
      trained.append(model_dir) or {"eval_history": [(30, {"eval_accuracy": 0.5, "global_step": 30})]}))
  for tasks in (before, before, after):
    downstream.random_init_scores(str(tmp_path), tasks, settings, {"vocab_size": 800}, 1, "data-a")
  assert len(trained) == 2  # the same files: reused; the corrected dev file: trained again


def test_the_step0_evaluation_reaches_the_curve_file(tmp_path):
  """Finding 4: the step-0 point came from the trainer's in-memory history only, so a run killed after its first
  checkpoint and resumed had none. It is taken from the evaluation's event files on the first loop's callback."""
  import tensorflow as tf

  from experiments.projects.ablations import runner
  from official_albert.training import summaries
  model_dir = tmp_path / "model"
  writer = tf.summary.create_file_writer(str(model_dir / "eval"))
  for step, accuracy in ((0, 0.001), (25, 0.1)):
    with writer.as_default(step=step):
      summaries.write_scalar("masked_lm_accuracy", accuracy, step)
      summaries.write_scalar("eval_steps", 5.0, step)
  writer.flush()
  path = tmp_path / "curve.jsonl"
  recorder = runner.CurveRecorder(str(path), str(model_dir))
  recorder(50, {"loss": 2.0})  # the resumed run's first loop
  recorder(75, {"loss": 1.5})
  curve = runner.read_curve(str(path))
  assert [e["step"] for e in curve] == [0, 50, 75]
  assert curve[0]["eval"] == {"masked_lm_accuracy": pytest.approx(0.001)}
  runner.record_step0(str(path), str(model_dir), [(0, {"masked_lm_accuracy": 0.5})])  # already there: unchanged
  assert len(path.read_text(encoding="utf-8").splitlines()) == 3
  other = tmp_path / "other.jsonl"
  runner.record_step0(str(other), str(tmp_path / "no_model"), [(0, {"masked_lm_accuracy": 0.5, "global_step": 0})])
  assert runner.read_curve(str(other)) == [{"step": 0, "eval": {"masked_lm_accuracy": 0.5}}]


def test_a_sequence_length_below_the_fine_tuning_length_caps_it(tmp_path, monkeypatch):
  """Finding 5: --seq_length=16 pretrained the first variant, then fine-tuning at 32 pieces failed."""
  from absl import flags

  from experiments.projects.ablations import study as driver
  from experiments.projects.ablations.studies import StudySettings
  for argv, seq, ft in ((["--seq_length=16"], 16, 16), (["--seq_length=64"], 64, 32), ([], 32, 32)):
    fv = flags.FlagValues()
    driver.define_flags(fv)
    fv(["ablations", "--output_dir=x", "--quick"] + argv)
    settings = driver.settings_from_flags(fv)
    assert (settings.seq_length, settings.ft_seq_length) == (seq, ft), argv
  short = dataclasses.replace(StudySettings.quick(), seq_length=16)
  driver.check_settings(short, ())  # no fine-tuning: nothing to refuse
  monkeypatch.setattr(driver.shared_data, "prepare_data", lambda *a, **k: pytest.fail("built the data first"))
  with pytest.raises(ValueError, match=r"ft_seq_length=32 is longer than seq_length=16"):
    driver.run_study("smoothness", str(tmp_path), short, 1, tasks=("order",))


def test_whitespace_only_lines_end_documents(tmp_path):
  """Finding 6: the split took "\\n\\n" only, so documents separated by a line of spaces merged (the pipeline's
  create_pretraining_data reads any whitespace-only line as a break)."""
  from experiments.projects.ablations import data
  from experiments.projects.ablations.studies import StudySettings
  docs = [f"Document {i} says one thing.\nDocument {i} says another thing." for i in range(1, 201)]
  mixed = "".join(d + "\n" + ("\n" if i % 2 else " \t\n") for i, d in enumerate(docs))
  split = data.split_documents(mixed, heldout_every=20)
  assert len(split["heldout"]) == 10 and len(split["train"]) == 190
  assert split["heldout"][0] == docs[19] and "\n \t\n" not in "".join(split["train"])
  assert len(data.split_documents(" \n" + "\n \n".join(docs) + "\n  \n", heldout_every=20)["train"]) == 190
  # A corpus without whitespace-only lines keeps the fingerprint of its data (and of its finished runs); one with
  # them gets another (its data, split the old way, is rebuilt).
  import hashlib
  settings = StudySettings.quick()

  def earlier(text):
    key = {"settings": settings.data_key(), "objectives": ["sop"],
           "corpus_sha256": hashlib.sha256(text.encode("utf-8")).hexdigest()}
    return hashlib.sha256(json.dumps(key, sort_keys=True, default=str).encode()).hexdigest()

  plain = "\n\n".join(docs) + "\n"
  assert data._fingerprint(settings, plain, ["sop"]) == earlier(plain)
  assert data._fingerprint(settings, mixed, ["sop"]) != earlier(mixed)


def test_a_corpus_that_is_not_utf8_is_refused_naming_the_file_and_line(tmp_path):
  """Finding 7: a Latin-1 --corpus failed with a bare UnicodeDecodeError."""
  from experiments.projects.ablations import data
  path = tmp_path / "latin1.txt"
  path.write_bytes(b"One.\nTwo.\n\nCaf\xe9 three.\n")
  with pytest.raises(ValueError, match=rf"--corpus file {path}, line 4 .*Convert it to UTF-8"):
    data.corpus_text([str(path)], None)
