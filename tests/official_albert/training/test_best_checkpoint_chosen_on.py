"""`model.ckpt-best` is ranked only among evaluations of the data it was chosen on (audit s31 item 1).

docs/recipe.md §4 evaluates a `glue/mnli` model_dir under `glue/mnli-mm`: that eval scored dev_mismatched against the
best chosen on dev_matched (same metric name) and could copy the latest checkpoint over `model.ckpt-best`, so
MNLI-mm.tsv and AX.tsv came from another checkpoint than MNLI-m.tsv. best_checkpoint.json now records `chosen_on`
(the task and the evaluation input); an evaluation of anything else leaves the best alone. A file written before the
record is taken as chosen on what model_dir's params.yaml (the training run's) records; without that, as before.
"""

import json
import os

import tensorflow as tf
import yaml

from official_albert.data import file_identity
from official_albert.training import checkpointing
from official_albert.training import evaluation

MATCHED = {"task": "glue/mnli", "validation_input": "/data/glue"}
MISMATCHED = {"task": "glue/mnli-mm", "validation_input": "/data/glue"}


def _keeper(model_dir):
  weights = tf.Variable(0.0)
  step = tf.Variable(0, dtype=tf.int64)
  keeper = checkpointing.CheckpointKeeper(str(model_dir), tf.distribute.get_strategy(),
                                          {"model": tf.train.Checkpoint(w=weights)}, step, max_to_keep=5)
  return keeper, weights, step


def _save(keeper, weights, step, n):
  step.assign(n)
  weights.assign(float(n))
  keeper.save()


def _best(model_dir):
  with open(os.path.join(model_dir, "best_checkpoint.json")) as f:
    return json.load(f)


def _best_weight(model_dir):
  return float(tf.train.load_checkpoint(os.path.join(model_dir, "model.ckpt-best")).get_tensor(
      "model/w/.ATTRIBUTES/VARIABLE_VALUE"))


def test_an_evaluation_of_other_data_leaves_the_best_alone(tmp_path):
  keeper, weights, step = _keeper(tmp_path)
  _save(keeper, weights, step, 2)
  assert keeper.update_best({"eval_accuracy": 0.2}, "eval_accuracy", True, chosen_on=MATCHED)
  assert _best(tmp_path)["chosen_on"] == MATCHED
  _save(keeper, weights, step, 6)
  before = _best(tmp_path)
  # The mismatched eval scores higher under the same metric name: not compared, nothing copied.
  assert not keeper.update_best({"eval_accuracy": 1.0}, "eval_accuracy", True, chosen_on=MISMATCHED)
  assert _best(tmp_path) == before and _best_weight(tmp_path) == 2.0
  # The same task and data still rank as before.
  assert keeper.update_best({"eval_accuracy": 0.5}, "eval_accuracy", True, chosen_on=dict(MATCHED))
  assert _best(tmp_path)["global_step"] == 6 and _best_weight(tmp_path) == 6.0


def test_a_best_file_without_the_record_is_taken_as_chosen_on_params_yaml(tmp_path):
  keeper, weights, step = _keeper(tmp_path)
  _save(keeper, weights, step, 2)
  assert keeper.update_best({"eval_accuracy": 0.2}, "eval_accuracy", True)  # an old run: no record written
  assert "chosen_on" not in _best(tmp_path)
  _save(keeper, weights, step, 6)
  assert not keeper.update_best({"eval_accuracy": 1.0}, "eval_accuracy", True, chosen_on=MISMATCHED,
                                legacy_chosen_on=MATCHED)
  assert _best(tmp_path)["global_step"] == 2
  assert keeper.update_best({"eval_accuracy": 1.0}, "eval_accuracy", True, chosen_on=MATCHED,
                            legacy_chosen_on=MATCHED)
  assert _best(tmp_path)["chosen_on"] == MATCHED and _best(tmp_path)["global_step"] == 6


def test_a_best_file_without_the_record_and_no_params_yaml_ranks_as_before(tmp_path):
  keeper, weights, step = _keeper(tmp_path)
  _save(keeper, weights, step, 2)
  assert keeper.update_best({"eval_accuracy": 0.2}, "eval_accuracy", True)
  _save(keeper, weights, step, 6)
  assert keeper.update_best({"eval_accuracy": 1.0}, "eval_accuracy", True, chosen_on=MISMATCHED,
                            legacy_chosen_on=None)
  assert _best(tmp_path)["global_step"] == 6


def test_chosen_on_tells_mnli_from_mnli_mm_on_one_folder_and_reads_params_yaml(tmp_path, monkeypatch):
  monkeypatch.chdir(tmp_path)
  matched = evaluation.chosen_on("glue", {"task_name": "mnli", "validation_data": {"input_path": "glue_data/"}})
  assert matched == {"task": "glue/mnli", "validation_input": str(tmp_path / "glue_data")}
  assert evaluation.chosen_on("glue", {"task_name": "mnli-mm", "validation_data": {"input_path": "glue_data"}}) != (
      matched)
  # No validation input: the evaluation reads the training files, and so does the record.
  assert evaluation.chosen_on("race", {"validation_data": {"input_path": ""}, "train_data": {"input_path": "a,b"}})[
      "validation_input"] == f"{tmp_path}/a,{tmp_path}/b"
  assert evaluation.recorded_chosen_on(str(tmp_path), "glue") is None
  with open(tmp_path / "params.yaml", "w") as f:
    f.write("# experiment: glue/mnli\n" + yaml.safe_dump(
        {"task": {"task_name": "mnli", "validation_data": {"input_path": str(tmp_path / "glue_data")}}}))
  assert evaluation.recorded_chosen_on(str(tmp_path), "glue") == matched


def test_the_same_files_under_another_folder_rank_as_one_evaluation(tmp_path):
  """Dev data copied to a local disk (or read through a fuse mount) after a resume is the same data: the best kept
  on it keeps being ranked (review s31: every later update_best returned False, the best frozen for the run)."""
  keeper, weights, step = _keeper(tmp_path)
  _save(keeper, weights, step, 2)
  on_gcs = {"task": "glue/sst-2", "validation_input": "/gcs/bucket/glue"}
  assert keeper.update_best({"eval_accuracy": 0.2}, "eval_accuracy", True, chosen_on=on_gcs)
  _save(keeper, weights, step, 6)
  on_ssd = {"task": "glue/sst-2", "validation_input": "/mnt/ssd/glue/"}
  assert keeper.update_best({"eval_accuracy": 0.9}, "eval_accuracy", True, chosen_on=on_ssd)
  assert _best(tmp_path)["global_step"] == 6
  # Other file names (a test set) are other data.
  _save(keeper, weights, step, 8)
  assert not keeper.update_best({"eval_accuracy": 1.0}, "eval_accuracy", True,
                                chosen_on={"task": "glue/sst-2", "validation_input": "/mnt/ssd/glue_test"})
  assert _best(tmp_path)["global_step"] == 6


def test_a_dev_file_of_other_bytes_is_other_data(tmp_path):
  """Review s56 (the journey): another folder's dev.csv (a 4-row unrelated file) ranked as the best's dev.csv by its
  name and replaced model.ckpt-best; so did a dev.csv corrected in place. The evaluation records its input's bytes:
  other bytes are other data, the same bytes elsewhere the same; a best recorded before the bytes were is compared
  by its file's bytes where that file is still there."""
  for folder, text in (("data", "text,label\na,0\n"), ("other", "text,label\nb,1\n"), ("copy", "text,label\na,0\n")):
    (tmp_path / folder).mkdir()
    (tmp_path / folder / "dev.csv").write_text(text)

  def on(folder):
    path = str(tmp_path / folder / "dev.csv")
    return {"task": "text_classification", "validation_input": evaluation.input_key(path),
            file_identity.VALIDATION_CONTENT_KEY: file_identity.content_digest(path)}

  assert file_identity.same_evaluation(on("data"), on("copy"))
  assert not file_identity.same_evaluation(on("data"), on("other"))
  legacy = {k: v for k, v in on("data").items() if k != file_identity.VALIDATION_CONTENT_KEY}
  assert not file_identity.same_evaluation(legacy, on("other")) and file_identity.same_evaluation(legacy, on("copy"))
  keeper, weights, step = _keeper(tmp_path / "run")
  _save(keeper, weights, step, 2)
  assert keeper.update_best({"eval_accuracy": 0.5}, "eval_accuracy", True, chosen_on=on("data"))
  _save(keeper, weights, step, 4)
  assert not keeper.update_best({"eval_accuracy": 1.0}, "eval_accuracy", True, chosen_on=on("other"))
  (tmp_path / "data" / "dev.csv").write_text("text,label\na,1\n")  # corrected in place
  assert not keeper.update_best({"eval_accuracy": 1.0}, "eval_accuracy", True, chosen_on=on("data"))
  assert _best(tmp_path / "run")["global_step"] == 2
  assert keeper.update_best({"eval_accuracy": 0.9}, "eval_accuracy", True, chosen_on=on("copy"))


def test_a_glue_alias_is_one_task():
  """`sst2` and `sst-2` name one GLUE task (review s31: a best chosen under one spelling froze under the other)."""
  from tasks.glue.data import get_spec  # noqa: PLC0415 (tasks: the library's tests reach into them here only)

  def canonical(name):
    return get_spec(name).name

  ours = evaluation.chosen_on("glue", {"task_name": "sst2", "validation_data": {"input_path": "/d/glue"}}, canonical)
  assert ours == evaluation.chosen_on("glue", {"task_name": "SST-2", "validation_data": {"input_path": "/d/glue"}},
                                      canonical)
  assert ours["task"] == "glue/sst-2"
  # An unknown name is kept as written (the task refuses it itself).
  assert evaluation.chosen_on("glue", {"task_name": "nope"}, canonical)["task"] == "glue/nope"
