"""What a run does when it stops, restarts or is misconfigured: a refused resume keeps the run's record, a lost final
evaluation is made up on restart, evaluation settings fail at start-up (every task's metric names, stated before an
evaluation), resumes across precision and dropout switches, literal input paths with glob characters, and gradient
accumulation with dynamic padding.

The models and data are test_train_lib.py's (TINY: H 32, 2 layers, the task's synthetic "dummy" batches); the
fine-tuning tasks' are tests/tiny.py's model on a few rows of each task's raw files.
"""

import json
import logging
import os
import pathlib
import shutil
import types

import numpy as np
import pytest
import tensorflow as tf

from official_albert import train
from official_albert.training import base_task
from official_albert.training import evaluation
from official_albert.training import input_feed
from official_albert.training import train_lib
from official_albert.training.hyperparams import ConfigError
from official_albert.training.trainer import inner_optimizer
from tasks.glue import GlueTask
from tasks.glue import GlueTaskConfig
from tests import tiny
from tests.official_albert.training.test_train_lib import _model_tensors
from tests.official_albert.training.test_train_lib import _same_tensors
from tests.official_albert.training.test_train_lib import tiny_params

SHORT = {"train_steps": 2, "steps_per_loop": 2, "checkpoint_interval": 2, "validation_interval": 2}


def _files(model_dir, names=("params.yaml", "config.json")):
  return {name: pathlib.Path(model_dir, name).read_bytes() for name in names}


def test_a_refused_resume_leaves_params_yaml_and_config_json_as_they_were(tmp_path):
  """A resume that is refused (here: another global batch under input_resume=iterator) fails before the run's record
  is rewritten, so params.yaml still says what ckpt-2 was trained with and the original command still resumes."""
  model_dir = str(tmp_path / "run")
  train_lib.run_experiment(tiny_params(trainer=SHORT), model_dir, "train")
  before = _files(model_dir)
  changed = tiny_params(trainer=dict(SHORT, train_steps=4, learning_rate=0.5),
                        task={"train_data": {"global_batch_size": 8}})
  with pytest.raises(ValueError, match="input_resume=skip"):  # (allowed past check_resume_params to reach the trainer)
    train_lib.run_experiment(changed, model_dir, "train", allow_params_change=True)
  assert _files(model_dir) == before
  with pytest.raises(ConfigError, match=r"trainer.learning_rate: 0.01 \(params.yaml\) -> 0.5") as refused:
    train_lib.run_experiment(changed, model_dir, "train")  # (refused before anything is built)
  assert "--params_override='task.train_data.global_batch_size=4,trainer.learning_rate=0.01'" in str(refused.value)
  assert _files(model_dir) == before
  result = train_lib.run_experiment(tiny_params(trainer=dict(SHORT, train_steps=4)), model_dir, "train")
  assert result["global_step"] == 4


def test_a_resume_with_another_init_checkpoint_warns_and_params_yaml_keeps_the_recorded_one(tmp_path, caplog):
  """Re-running into a model_dir that holds checkpoints resumes them (as Model Garden does), so a new
  task.init_checkpoint is not used: the run says so, naming both, and params.yaml / the summary's "init" keep the one
  the weights came from (they claimed the new one, silently)."""
  from official_albert import AlbertPretrainer
  from official_albert import save_pretrained
  params = tiny_params(trainer=SHORT)
  pre_a, pre_b, model_dir = str(tmp_path / "preA"), str(tmp_path / "preB"), str(tmp_path / "run")
  save_pretrained(AlbertPretrainer(params.task.model.to_albert_config()), pre_a)
  shutil.copytree(pre_a, pre_b)
  train_lib.run_experiment(params.override({"task": {"init_checkpoint": pre_a}}), model_dir, "train")
  again = params.override({"task": {"init_checkpoint": pre_b}, "trainer": {"train_steps": 4}})
  with caplog.at_level(logging.WARNING):
    result = train_lib.run_experiment(again, model_dir, "train")
  assert result["global_step"] == 4 and result["init"] == pre_a
  assert f"task.init_checkpoint={pre_b!r} is NOT used" in caplog.text and repr(pre_a) in caplog.text
  assert "new --model_dir" in caplog.text
  assert f"init_checkpoint: {pre_a}" in pathlib.Path(model_dir, "params.yaml").read_text()
  caplog.clear()  # the same folder spelled otherwise is the same folder: no warning
  same = params.override({"task": {"init_checkpoint": f"{tmp_path}/./preA/"}, "trainer": {"train_steps": 5}})
  with caplog.at_level(logging.WARNING):
    train_lib.run_experiment(same, model_dir, "train")
  assert "is NOT used" not in caplog.text
  # An evaluation of the run's checkpoints names where its weights started (its own config said "random").
  train_lib.run_experiment(params, model_dir, "eval")
  assert os.path.normpath(json.loads(pathlib.Path(model_dir, "eval_results.json").read_text())["init"]) == pre_a


@pytest.mark.slow
def test_an_evaluation_lost_to_a_kill_or_a_preemption_is_made_up_on_restart(tmp_path, monkeypatch):
  """Killed during the final evaluation (step 4), the rerun of the finished run evaluates ckpt-4 and updates
  model.ckpt-best; preempted at the last step, before its evaluation, the restart evaluates it."""
  params = tiny_params(trainer=dict(SHORT, train_steps=4, best_checkpoint_metric="global_step",
                                    best_checkpoint_mode="max", eval_at_start=False))
  real = evaluation.Evaluator.evaluate

  def killed_at_4(self, steps=None, write_results=True):
    if self.trainer.step == 4:
      raise KeyboardInterrupt("killed during the final evaluation")
    return real(self, steps, write_results)

  killed = str(tmp_path / "killed")
  monkeypatch.setattr(evaluation.Evaluator, "evaluate", killed_at_4)
  with pytest.raises(KeyboardInterrupt):
    train_lib.run_experiment(params, killed, "train_and_eval")
  monkeypatch.setattr(evaluation.Evaluator, "evaluate", real)
  result = train_lib.run_experiment(params, killed, "train_and_eval")
  assert [step for step, _ in result["eval_history"]] == [4] and result["eval_results"]["global_step"] == 4
  assert json.load(open(os.path.join(killed, "eval_results.json")))["global_step"] == 4
  assert json.load(open(os.path.join(killed, "best_checkpoint.json")))["global_step"] == 4
  assert _same_tensors(_model_tensors(os.path.join(killed, "model.ckpt-best")),
                       _model_tensors(os.path.join(killed, "ckpt-4")))
  # Nothing to make up: a second rerun evaluates nothing.
  assert train_lib.run_experiment(params, killed, "train_and_eval")["eval_history"] == []

  preempted = str(tmp_path / "preempted")
  real_loop = train_lib.Trainer._run_loop

  def notice_at_4(self, num_steps, state):
    real_loop(self, num_steps, state)
    if self.step == 4:
      self.preemption.request()  # what the SIGTERM watcher does

  monkeypatch.setattr(train_lib.Trainer, "_run_loop", notice_at_4)
  first = train_lib.run_experiment(params, preempted, "train_and_eval")
  assert first["status"] == "preempted" and [step for step, _ in first["eval_history"]] == [2]
  monkeypatch.setattr(train_lib.Trainer, "_run_loop", real_loop)
  second = train_lib.run_experiment(params, preempted, "train_and_eval")
  assert second["status"] == "completed" and [step for step, _ in second["eval_history"]] == [4]
  assert json.load(open(os.path.join(preempted, "eval_results.json")))["global_step"] == 4


def test_a_best_checkpoint_metric_typo_fails_before_the_first_step(tmp_path):
  model_dir = str(tmp_path / "typo")
  params = tiny_params(trainer=dict(SHORT, best_checkpoint_metric="masked_lm_acc", eval_at_start=True))
  with pytest.raises(ConfigError, match=r"best_checkpoint_metric='masked_lm_acc'.*did you mean 'masked_lm_accuracy'"):
    train_lib.run_experiment(params, model_dir, "train_and_eval")
  assert not tf.io.gfile.glob(os.path.join(model_dir, "ckpt-*"))
  # A Trainer driven directly (no start-up check) refuses the name at the eval_at_start evaluation, before step 1.
  with train_lib.runtime_scope(params):
    with pytest.raises(ConfigError, match=r"best_checkpoint_metric='masked_lm_acc' is not among the eval results"):
      train_lib.Trainer(params, model_dir).train(eval_every=2)
  assert not tf.io.gfile.glob(os.path.join(model_dir, "ckpt-*"))
  # A mode that does not evaluate does not read the setting.
  assert train_lib.run_experiment(params, model_dir, "train")["global_step"] == 2


# ------------------------------------------------------------------------ every task's eval metric names, at start-up
CONTEXT = "Ada Lovelace wrote the first program in London in 1843 ."
TEXTS = ["a good and fine film", "great fun", "a bad and dull film", "awful mess", "lovely warm story", "worst plot"]


def _write(path, lines):
  path.parent.mkdir(parents=True, exist_ok=True)
  path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
  return str(path)


def _jsonl(path, rows):
  return _write(path, [json.dumps(row) for row in rows])


def _squad(root, v2):
  """Two answerable questions (and, for v2, an unanswerable one) on one paragraph."""
  qas = [{"id": f"q{i}", "question": q, "is_impossible": False,
          "answers": [{"text": a, "answer_start": CONTEXT.index(a)}]}
         for i, (q, a) in enumerate([("Who wrote the first program ?", "Ada Lovelace"), ("Where ?", "London")])]
  qas += [{"id": "q9", "question": "Who built the engine ?", "is_impossible": True, "answers": []}] if v2 else []
  paragraphs = [{"context": CONTEXT, "qas": qas}]
  data = {"version": "v2.0" if v2 else "1.1", "data": [{"title": "t", "paragraphs": paragraphs}]}
  return _write(root / "squad.json", [json.dumps(data)])


def _race(root):
  for level in ("middle", "high"):
    _write(root / "dev" / level / "0.txt", [json.dumps({
        "article": f"A {level} school story about the sea .", "id": f"{level}0.txt", "questions": ["It is about _ ."],
        "options": [["school", "war", "food", "sea"]], "answers": ["D"]})])
  return str(root / "dev")


def _tags(root):
  sentences = [("John visited Paris .", "B-PER O B-LOC O"), ("Mary left London .", "B-PER O B-LOC O")] * 2
  return _write(root / "tags.conll", [f"{w} {t}" for text, tags in sentences
                                      for w, t in zip(text.split() + [""], tags.split() + [""])])


def _classes(root):
  return _write(root / "t.csv", ["text,label"] + [f"{t},{i % 2}" for i, t in enumerate(TEXTS)])


def _label_sets(root):
  return _jsonl(root / "t.jsonl", [{"text": t, "label": ["a", "b"][:i % 3]} for i, t in enumerate(TEXTS)])


def _scores(root):
  return _jsonl(root / "t.jsonl", [{"text": t, "label": i / 2} for i, t in enumerate(TEXTS)])


def _groups(root):
  rows = [{"query": t, "positive": TEXTS[i - 1], "negatives": [TEXTS[i - k] for k in (2, 3, 4)]}
          for i, t in enumerate(TEXTS)]
  return _jsonl(root / "g.jsonl", rows)


def _pairs(root, scored=False):
  return _write(root / "p.csv", ["anchor,positive" + (",score" if scored else "")]
                + [f"{t},{TEXTS[i - 1]}" + (f",{i / 5}" if scored else "") for i, t in enumerate(TEXTS)])


SQUAD = {"doc_stride": 16, "max_query_length": 16}
# case → (experiment, its raw file for training and evaluation, task settings); each case one kind of names.
EVAL_CASES = {
    **{glue: (glue, lambda root: "dummy", {}) for glue in ("glue/cola", "glue/mrpc", "glue/sts-b", "glue/sst-2")},
    "race": ("race", _race, {"max_qa_length": 16}),
    "squad_v1": ("squad_v1", lambda root: _squad(root, False), SQUAD),
    "squad_v2": ("squad_v2", lambda root: _squad(root, True), SQUAD),
    "text_classification": ("text_classification", _classes, {}),
    "text_classification/multi_label": ("text_classification", _label_sets, {"multi_label": True}),
    "text_regression": ("text_regression", _scores, {}),
    "token_classification": ("token_classification", _tags, {}),
    "text_ranking": ("text_ranking", _groups, {}),
    "text_embedding": ("text_embedding", _pairs, {}),
    "text_embedding/scored": ("text_embedding", lambda root: _pairs(root, scored=True),
                              {"score_column": "score", "loss": "cosent"}),
}


def _eval_params(case, root, spm_model_file, **trainer):
  experiment, files, settings = EVAL_CASES[case]
  path = files(root)
  config = tiny.finetune_override(tiny.TRAIN_MODEL, path, path, spm_model_file, 1, 1e-3,
                                  {"global_batch_size": 4, "seq_length": 48, "seed": 1}, **settings)
  config["trainer"].update(trainer)
  return train.build_params(experiment, params_override=json.dumps(config))


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(EVAL_CASES))
def test_every_task_states_its_eval_metric_names_and_a_typo_fails_at_start_up(case, tmp_path, spm_model_file):
  """`Task.eval_metric_names` (the names a task's `reduce_aggregated_logs` adds included: GLUE's per-task metric,
  SQuAD v1 or v2, RACE's levels, the text tasks' label kinds) equals what a real evaluation reports, so
  `check_eval_settings` refuses a `trainer.best_checkpoint_metric` typo before the first step, with the close match."""
  params = _eval_params(case, tmp_path, spm_model_file)
  with train_lib.runtime_scope(params):
    trainer = train_lib.Trainer(params, str(tmp_path / "model"))
    stated = trainer.task.eval_metric_names()
    assert stated is not None and trainer.task.best_metric in stated
    typo = trainer.task.best_metric.replace("_", "") + "s"
    settings = types.SimpleNamespace(params=params.override({"trainer": {"best_checkpoint_metric": typo}}),
                                     num_replicas=1, task=trainer.task, eval_metrics=trainer.eval_metrics)
    with pytest.raises(ConfigError, match=rf"best_checkpoint_metric='{typo}'.*did you mean "
                                          rf"'{trainer.task.best_metric}'"):
      train_lib.check_eval_settings(settings, "train_and_eval")
    results = trainer.evaluate(write_results=False)
  assert set(stated) | {"global_step", "eval_steps"} == set(results)


def test_a_glue_metric_typo_fails_before_the_model_directory_is_written(tmp_path, spm_model_file):
  params = _eval_params("glue/cola", tmp_path, spm_model_file, best_checkpoint_metric="mcc")
  with pytest.raises(ConfigError, match=r"best_checkpoint_metric='mcc' is not an eval metric of task 'glue'.*"
                                        r"'matthew_corr'"):
    train_lib.run_experiment(params, str(tmp_path / "model"), "train_and_eval")
  assert not tf.io.gfile.exists(str(tmp_path / "model" / "params.yaml"))


class _Opaque(base_task.Task):
  """A task whose whole-dataset metrics are not stated: known only at its first evaluation."""

  def reduce_aggregated_logs(self, aggregated_logs, global_step=None):
    return {"secret": 1.0}


class _Reweighed(GlueTask):
  """GLUE with its own `compute_metrics` but GLUE's (now stale) names."""

  def compute_metrics(self, logits, labels, extras):
    return {"weighted": 1.0}


def test_a_task_that_cannot_state_its_metric_names_is_checked_at_its_first_evaluation():
  cola = GlueTaskConfig(task_name="cola")
  for task in (_Opaque(tiny_params().task), _Reweighed(cola)):
    assert task.eval_metric_names() is None
    params = tiny_params(trainer={"best_checkpoint_metric": "secret"})
    train_lib.check_eval_settings(types.SimpleNamespace(params=params, num_replicas=1, task=task, eval_metrics=[]),
                                  "train_and_eval")
  assert GlueTask(cola).eval_metric_names() == ["cls_accuracy", "eval_accuracy", "eval_loss", "matthew_corr"]


def test_a_validation_batch_the_replicas_do_not_divide_fails_at_start_up():
  """Checked at start-up over the splits the mode reads (`input_feed.check_global_batches`, it needs only the
  replica count), not by the first evaluation's input stream."""
  params = tiny_params(task={"validation_data": {"global_batch_size": 5}})
  for mode in ("eval", "train_and_eval"):
    with pytest.raises(ConfigError, match=r"validation_data.global_batch_size=5 is not divisible by the 2 replicas"):
      input_feed.check_global_batches(train_lib.input_splits(params, mode), 2)
  input_feed.check_global_batches(train_lib.input_splits(params, "train"), 2)
  input_feed.check_global_batches(train_lib.input_splits(tiny_params(), "eval"), 2)


def test_an_existing_input_path_with_glob_characters_is_read_literally(tmp_path):
  from official_albert.data import input_pipeline
  folder = tmp_path / "data [v1]"
  folder.mkdir()
  path = str(folder / "train.tfrecord")
  with tf.io.TFRecordWriter(path) as writer:
    writer.write(b"x")
  assert not tf.io.gfile.glob(path)  # as a glob, [v1] is a character class
  assert input_pipeline.list_files(path) == [path]
  params = tiny_params(task={"train_data": {"input_path": path}})
  train_lib.check_input_paths(params, "train")
  missing = tiny_params(task={"train_data": {"input_path": str(folder / "other [x].tfrecord")}})
  with pytest.raises(input_pipeline.InputDataError, match="matches no file"):
    train_lib.check_input_paths(missing, "train")


def _restored(params, model_dir):
  """(trainable weights, optimizer variables) of a Trainer for `params` resumed from `model_dir`'s latest ckpt."""
  with train_lib.runtime_scope(params):
    trainer = train_lib.Trainer(params, model_dir)
    assert trainer.restore_latest().endswith("ckpt-2") and trainer.step == 2
    return ([v.numpy() for v in trainer.model.trainable_variables],
            [v.numpy() for v in inner_optimizer(trainer.optimizer).variables])


def _assert_same(a, b):
  assert len(a) == len(b)
  for x, y in zip(a, b):
    np.testing.assert_array_equal(x, y)


@pytest.mark.slow
def test_resume_and_eval_across_mixed_float16(tmp_path):
  """A mixed_float16 checkpoint wraps the optimizer in a LossScaleOptimizer; the weights and slots are float32 in
  every precision, so fp16 → bf16 (what the loss-scale error recommends) and fp32 → fp16 resume from ckpt-2 with the
  same weights and optimizer state as a same-precision resume, and a float32 eval reads a float16-trained run."""
  for before, after in (("mixed_float16", "mixed_bfloat16"), ("float32", "mixed_float16")):
    model_dir = str(tmp_path / f"{before}_{after}")
    first = tiny_params(trainer=SHORT, runtime={"mixed_precision_dtype": before})
    train_lib.run_experiment(first, model_dir, "train")
    params = tiny_params(trainer=dict(SHORT, train_steps=4), runtime={"mixed_precision_dtype": after})
    same, switched = _restored(first, model_dir), _restored(params, model_dir)
    _assert_same(same[0], switched[0])
    _assert_same(same[1], switched[1])
    if before == "mixed_float16":
      results = train_lib.run_experiment(tiny_params(trainer={"validation_steps": 1}), model_dir, "eval")
      assert results["global_step"] == 2
    result = train_lib.run_experiment(params, model_dir, "train")
    assert result["global_step"] == 4 and np.isfinite(result["train_logs"]["loss"])


def test_resume_with_dropout_switched_on_starts_its_rng_states_fresh(tmp_path, caplog):
  """A dropout-free checkpoint has no dropout RNG states: a resume with hidden_dropout_prob > 0 restores the weights
  and the optimizer and starts the RNG states fresh, instead of calling the checkpoint unreadable."""
  model_dir = str(tmp_path / "dropout")
  plain = tiny_params(trainer=SHORT, task={"model": {"hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0}})
  train_lib.run_experiment(plain, model_dir, "train")
  dropout = plain.override({"task": {"model": {"hidden_dropout_prob": 0.1}}, "trainer": {"train_steps": 4}})
  with caplog.at_level(logging.INFO):
    switched = _restored(dropout, model_dir)
  assert "holds no rng_states" in caplog.text
  same = _restored(plain, model_dir)
  _assert_same(same[0], switched[0])
  _assert_same(same[1], switched[1])
  assert train_lib.run_experiment(dropout, model_dir, "train")["global_step"] == 4


def _varying_length_records(path, n=16, seq=32, p=4, vocab=300, seed=0):
  """Pretraining records whose real lengths (8..seq) and MLM target counts (1..p) vary, so dynamic padding trims."""
  rng = np.random.default_rng(seed)
  ints = lambda v: tf.train.Feature(int64_list=tf.train.Int64List(value=[int(x) for x in v]))  # noqa: E731
  with tf.io.TFRecordWriter(path) as writer:
    for _ in range(n):
      length, k = int(rng.integers(8, seq + 1)), int(rng.integers(1, p + 1))
      ids, mask, segments = np.zeros(seq), np.zeros(seq), np.zeros(seq)
      ids[:length], ids[0], mask[:length], segments[length // 2:length] = rng.integers(5, vocab, length), 2, 1, 1
      positions, labels, weights = np.zeros(p), np.zeros(p), np.zeros(p, np.float32)
      positions[:k] = np.sort(rng.choice(np.arange(1, length), k, replace=False))
      labels[:k], weights[:k] = rng.integers(5, vocab, k), 1
      feature = {"input_ids": ints(ids), "input_mask": ints(mask), "segment_ids": ints(segments),
                 "masked_lm_positions": ints(positions), "masked_lm_ids": ints(labels),
                 "masked_lm_weights": tf.train.Feature(float_list=tf.train.FloatList(value=list(weights))),
                 "next_sentence_labels": ints([rng.integers(0, 2)])}
      writer.write(tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString())


@pytest.mark.slow
def test_gradient_accumulation_with_dynamic_padding_equals_the_full_batch(tmp_path):
  """pad_to_multiple_of leaves the sequence axis without a static length; 2 micro-batches of 2 still train the same
  weights as one step on the batch of 4 (the MLM loss is normalised by the whole batch's target count)."""
  path = str(tmp_path / "varying.tfrecord")
  _varying_length_records(path)
  weights = {}
  for k in (1, 2):
    params = tiny_params(task={"train_data": {"input_path": path, "pad_to_multiple_of": 8},
                               "validation_data": {"input_path": path}},
                         trainer={"train_steps": 2, "steps_per_loop": 2, "gradient_accumulation_steps": k})
    with train_lib.runtime_scope(params):
      trainer = train_lib.Trainer(params, str(tmp_path / f"k{k}"))
      summary = trainer.train()
    assert summary["global_step"] == 2 and np.isfinite(summary["train_logs"]["loss"])
    weights[k] = [v.numpy() for v in trainer.model.trainable_variables]
  for a, b in zip(weights[1], weights[2]):
    np.testing.assert_allclose(a, b, atol=2e-5)


def test_a_run_killed_during_its_first_save_starts_over_and_a_checkpoint_of_another_model_is_refused(tmp_path, caplog):
  """TF fills `ckpt-N.index` in place and writes the state file that lists a finished save after it: a run killed
  during its first save leaves an index too short to read and no state file. Its restart starts from step 0 with a
  warning (it raised "No checkpoint ... could be restored", so the run could never restart); a readable checkpoint
  that does not fit the model, listed or not, is still an error."""
  params = tiny_params(trainer=SHORT, runtime={"input_resume": "skip"})
  killed, other = str(tmp_path / "killed"), str(tmp_path / "other")
  for model_dir in (killed, other):
    train_lib.run_experiment(params, model_dir, "train")
    os.remove(os.path.join(model_dir, "checkpoint"))
  with open(os.path.join(killed, "ckpt-2.index"), "r+b") as f:
    f.truncate(7)
  with caplog.at_level(logging.WARNING), train_lib.runtime_scope(params):
    trainer = train_lib.Trainer(params, killed)
    assert trainer.restore_latest() is None and trainer.step == 0
  assert "finished saving" in caplog.text
  wider = params.override({"task": {"model": {"hidden_size": 48}}})
  with train_lib.runtime_scope(wider), pytest.raises(RuntimeError, match="could be restored"):
    train_lib.Trainer(wider, other).restore_latest()


def test_a_relative_model_dir_resumes_and_evaluates(tmp_path, monkeypatch):
  """Every documented command names a relative --model_dir (`runs/mrpc`): TF's checkpoint state already joins its
  listed names to the directory, and joining them again (`runs/pre/runs/pre/ckpt-2`) failed every resume and eval
  of a relative directory with "No checkpoint ... could be restored"."""
  monkeypatch.chdir(tmp_path)
  params = tiny_params(trainer=SHORT)
  train_lib.run_experiment(params, os.path.join("runs", "pre"), "train")
  resumed = train_lib.run_experiment(params.override({"trainer": {"train_steps": 4}}), os.path.join("runs", "pre"),
                                     "train")
  assert resumed["global_step"] == 4
  results = train_lib.run_experiment(tiny_params(trainer={"validation_steps": 1}), os.path.join("runs", "pre"), "eval")
  assert results["global_step"] == 4


@pytest.mark.parametrize("mode", train_lib.MODES)
def test_a_model_dir_with_glob_characters_is_refused_at_start_up_in_every_mode(tmp_path, mode):
  """TensorFlow globs checkpoint prefixes: under `runs/my [v1] run` a run trained and saved, then could never be
  resumed, evaluated or converted ("No checkpoint ... could be restored", though the checkpoints were there). Every
  mode refuses such a model_dir first, naming the characters and the fix, before anything is written; `*`, `?` and
  gs:// paths too (an existing input path with glob characters is another rule: it is read literally)."""
  model_dir = tmp_path / "runs" / "my [v1] run"
  with pytest.raises(ValueError, match=r"--model_dir=.* contains the glob character\(s\) \[ \]: TensorFlow reads "
                     r"checkpoint paths .* Fix: rename the folder without them \(e\.g\. '.*my v1 run'\)"):
    train_lib.run_experiment(tiny_params(trainer=SHORT), str(model_dir), mode)
  assert not (tmp_path / "runs").exists()
  for other, named in ((tmp_path / "runs" / "v*?", r"\* \?"), ("gs://bucket/runs/v[2]", r"\[ \]")):
    with pytest.raises(ValueError, match=rf"contains the glob character\(s\) {named}:"):
      train_lib.run_experiment(tiny_params(trainer=SHORT), str(other), mode)
  assert not (tmp_path / "runs").exists()
