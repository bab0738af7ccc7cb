"""`--mode=eval / predict --model_dir=NEW --checkpoint=RUN/ckpt-N` reads RUN's records (training/checkpoint_records).

The regression: a classifier trained with `task.labels=[pos, neg]` (not the sorted order) and evaluated from another
model_dir was scored against [neg, pos], accuracy 1.0 → 0.0, with no warning. Now NEW adopts RUN's records: eval and
predict there equal eval and predict in RUN itself; a record NEW holds otherwise is refused before anything is
written or built.
"""

import csv
import json
import os

from absl import flags
import pytest
import tensorflow as tf

from official_albert import train
from official_albert.training import checkpoint_records
from tests import tiny

MODEL = {"preset": "", "vocab_size": 1000, "embedding_size": 16, "hidden_size": 32, "num_hidden_layers": 1,
         "num_attention_heads": 2, "intermediate_size": 64, "max_position_embeddings": 64,
         "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0}
ROWS = [("good film great fun", "pos"), ("bad film awful mess", "neg"), ("great acting good", "pos"),
        ("awful plot bad", "neg")] * 8


@pytest.fixture(scope="module")
def trained(tmp_path_factory, spm_model_file):
  """A tiny classifier trained with its labels in a non-sorted order, the config of a later run, its checkpoint."""
  root = tmp_path_factory.mktemp("records")
  data_file = str(root / "rows.csv")
  with open(data_file, "w", newline="", encoding="utf-8") as f:
    writer = csv.writer(f, lineterminator="\n")
    writer.writerow(["text", "label"])
    writer.writerows(ROWS)
  data = {"global_batch_size": 8, "seq_length": 16, "seed": 1}
  config = tiny.finetune_override(MODEL, data_file, data_file, spm_model_file, 40, 3e-3, data, labels=["pos", "neg"],
                                  classifier_dropout=0.0)
  run_dir = str(root / "run")
  result = tiny.train_run("text_classification", run_dir, config)["eval_results"]
  assert result["eval_accuracy"] == 1.0, result
  later = tiny.finetune_override(MODEL, data_file, data_file, spm_model_file, 40, 3e-3, data)  # labels unset
  later["task"]["predict_data"] = {"input_path": data_file, "global_batch_size": 8, "seq_length": 16}
  return {"root": root, "run": run_dir, "config": later, "checkpoint": tf.train.latest_checkpoint(run_dir)}


def _run(mode, model_dir, trained):
  return train.run("text_classification", mode, str(model_dir), params_override=json.dumps(trained["config"]),
                   checkpoint=trained["checkpoint"])


def test_eval_and_predict_elsewhere_equal_them_in_the_run(trained):
  other = trained["root"] / "eval_elsewhere"
  assert _run("eval", other, trained) == _run("eval", trained["run"], trained)
  assert json.load(open(other / "labels.json"))["labels"] == ["pos", "neg"]
  here = _run("predict", trained["run"], trained)["files"]
  there = _run("predict", other, trained)["files"]
  assert [os.path.basename(p) for p in here.values()] == [os.path.basename(p) for p in there.values()]
  for a, b in zip(here.values(), there.values()):
    assert open(a, encoding="utf-8").read() == open(b, encoding="utf-8").read()


def test_a_record_held_otherwise_is_refused_before_anything_is_written(trained):
  other = trained["root"] / "stale"
  other.mkdir()
  (other / "labels.json").write_text(json.dumps({"labels": ["neg", "pos"]}))
  with pytest.raises(checkpoint_records.RecordConflictError) as error:
    _run("eval", other, trained)
  message = str(error.value)
  assert str(other / "labels.json") in message and os.path.join(trained["run"], "labels.json") in message
  assert sorted(os.listdir(other)) == ["labels.json"]
  # The binary names it and exits 1 (no traceback).
  fv = flags.FlagValues()
  train.define_flags(fv)
  fv(["train", "--experiment=text_classification", "--mode=eval", f"--model_dir={other}",
      f"--checkpoint={trained['checkpoint']}", f"--params_override={json.dumps(trained['config'])}"])
  assert train.main(["train"], fv) == 1


def test_nothing_is_copied_from_the_run_itself_or_a_folder_without_records(trained, tmp_path):
  assert checkpoint_records.adopt_records(trained["checkpoint"], trained["run"]) == []
  assert checkpoint_records.adopt_records(trained["checkpoint"], trained["run"] + "/") == []
  bare = tmp_path / "bare"
  bare.mkdir()
  assert checkpoint_records.adopt_records(str(bare / "ckpt-1"), str(tmp_path / "new")) == []
  assert not (tmp_path / "new").exists()


def test_eval_and_predict_run_again_in_the_folder_they_adopted_records_into(trained):
  """A second eval or predict with the same checkpoint finds the records it adopted, not a conflict (neither mode
  rewrites params.yaml where one exists: train_lib.run_experiment)."""
  again = trained["root"] / "again"
  first = _run("predict", again, trained)["files"]
  assert _run("predict", again, trained)["files"] == first
  assert _run("eval", again, trained) == _run("eval", again, trained)


def test_a_refused_command_leaves_model_dir_as_it_was(trained):
  """(The records were copied before the overrides and the checkpoint were checked: the corrected command, naming
  another run's checkpoint, was then refused for records the refused one had left.)"""
  other = trained["root"] / "refused"
  bad = json.loads(json.dumps(trained["config"]))
  bad["trainer"] = dict(bad.get("trainer", {}), train_stepz=3)
  with pytest.raises(Exception, match="train_stepz"):
    train.run("text_classification", "eval", str(other), params_override=json.dumps(bad),
              checkpoint=trained["checkpoint"])
  assert not other.exists() or os.listdir(other) == []
  with pytest.raises(FileNotFoundError, match=r"ckpt-999\.index is missing"):
    train.run("text_classification", "eval", str(other), params_override=json.dumps(trained["config"]),
              checkpoint=os.path.join(trained["run"], "ckpt-999"))
  assert not other.exists() or os.listdir(other) == []


def test_training_into_the_init_checkpoint_folder_is_refused(trained):
  """(The run's ckpt-N and records landed beside the weights it started from, in a folder pipelines then read the
  wrong way.)"""
  config = json.loads(json.dumps(trained["config"]))
  config["task"]["init_checkpoint"] = trained["run"]
  before = sorted(os.listdir(trained["run"]))
  with pytest.raises(train.app.UsageError, match="is the folder of task.init_checkpoint"):
    train.run("text_classification", "train", trained["run"] + "/", params_override=json.dumps(config))
  assert sorted(os.listdir(trained["run"])) == before


def test_a_restore_that_fails_names_the_experiment_params_yaml_records(trained, tmp_path):
  """(text_regression on a text_classification folder failed on a tensor's shape, naming neither experiment.)"""
  scores = tmp_path / "scores.csv"
  scores.write_text("text,label\n" + "".join(f"{text},{i % 3}\n" for i, (text, _) in enumerate(ROWS)))
  config = json.loads(json.dumps(trained["config"]))
  config["task"].pop("labels", None)
  for section in ("train_data", "validation_data", "predict_data"):
    config["task"][section]["input_path"] = str(scores)
  with pytest.raises(Exception, match="records the experiment 'text_classification'"):
    train.run("text_regression", "eval", trained["run"], params_override=json.dumps(config))
