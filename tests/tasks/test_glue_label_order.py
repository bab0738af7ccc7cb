"""GLUE reads a converted classifier in the task's label order (audit s31 item 2).

A Hugging Face MNLI fine-tune names its outputs (entailment, neutral, contradiction), the converter writes that to
labels.json, and GLUE's order is the reference's (contradiction, entailment, neutral): eval and predict took output i
as the task's label i, so accuracy and the submission's label strings were silently permuted. The restored head is
now permuted into the task's order (same set), or refused naming both lists (another set).
"""

import json

import numpy as np
import pytest

from official_albert import model_directory
from official_albert import train
from tasks.glue import GlueDataError
from tasks.glue import head_order
from tests import tiny
from tests.tasks.test_mnli_one_model import _glue_folder
from tests.tasks.test_mnli_one_model import _override
from tests.tasks.test_mnli_one_model import _rows
from tests.tasks.test_mnli_one_model import _tsv
from tests.tasks.test_mnli_one_model import MNLI_COLS

HF_ORDER = ["entailment", "neutral", "contradiction"]


def test_head_order_maps_each_task_label_to_its_output():
  assert head_order("mnli", HF_ORDER, "labels.json") == [2, 0, 1]
  assert head_order("mnli", ["CONTRADICTION", "Entailment", " neutral"], "labels.json") is None  # the task's order
  assert head_order("mnli", ["LABEL_0", "LABEL_1", "LABEL_2"], "config.json") is None  # names nothing
  assert head_order("sts-b", ["score"], "labels.json") is None
  # A binary task's labels are 0 / 1: a converted model's names for them are read in index order (HF's GLUE
  # fine-tunes), with a warning, not refused (review s31: every such converted checkpoint was refused).
  assert head_order("sst-2", ["negative", "positive"], "x/labels.json") is None
  assert head_order("mrpc", ["not_equivalent", "equivalent"], "x/labels.json") is None
  with pytest.raises(GlueDataError, match=r"x/labels.json names the classifier's outputs \['no', 'maybe', 'yes'\], "
                                          r"but GLUE sst-2 has the labels \['0', '1'\]"):
    head_order("sst-2", ["no", "maybe", "yes"], "x/labels.json")
  with pytest.raises(GlueDataError, match=r"names the classifier's outputs \['a', 'b', 'c'\], but GLUE mnli"):
    head_order("mnli", ["a", "b", "c"], "x/labels.json")


def _converted_hf_mnli(directory):
  """A native classifier directory as the converter writes one from an HF MNLI model in HF's label order, whose
  head always answers output 0 (HF's "entailment")."""
  import keras

  from official_albert import AlbertConfig
  from official_albert.checkpoints.loading import build_model
  from official_albert.checkpoints.native import save_pretrained
  keras.utils.set_random_seed(0)
  model = build_model("classifier", AlbertConfig(**dict(tiny.MODEL, **tiny.NO_DROPOUT)), 3)
  model.classifier.output_weights.assign(np.zeros(model.classifier.output_weights.shape, np.float32))
  model.classifier.output_bias.assign(np.asarray([5.0, 0.0, 0.0], np.float32))
  save_pretrained(model, str(directory), spm_model_file=str(tiny.SPM_MODEL_FILE))
  model_directory.write_label_file(str(directory), model_directory.LabelFile(HF_ORDER))
  return str(directory)


@pytest.mark.slow
def test_a_converted_hf_mnli_model_is_read_in_the_task_order(tmp_path):
  model_dir = _converted_hf_mnli(tmp_path / "native")
  glue_data = str(tmp_path / "glue_data")
  _glue_folder(glue_data)

  def row(i):
    return [str(i), "p", "q", "fiction", "x", "x", "x", "x", f"a film {i} was good", f"the film {i % 3} was fine"]
  dev = MNLI_COLS + ["label1", "label2", "label3", "label4", "label5", "gold_label"]
  _tsv(f"{glue_data}/MNLI/dev_matched.tsv", dev, [row(i) + ["entailment"] * 6 for i in range(5)])
  small = {"global_batch_size": 4, "seq_length": 32}
  result = train.run("glue/mnli", "eval", model_dir, checkpoint=model_directory.resolve_checkpoint(model_dir),
                     params_override=_override({"validation_data": dict(small, input_path=glue_data)}))
  assert result["eval_accuracy"] == 1.0
  train.run("glue/mnli", "predict", model_dir, params_override=_override(
      {"predict_data": dict(small, input_path=glue_data)}))
  assert {r.split("\t")[1] for r in _rows(f"{model_dir}/predictions/MNLI-m.tsv")} == {"entailment"}
  # Another label set: one error naming both lists and the file.
  with open(f"{model_dir}/labels.json", "w") as f:
    json.dump({"labels": ["yes", "maybe", "no"]}, f)
  with pytest.raises(GlueDataError, match=r"labels.json names the classifier's outputs \['yes', 'maybe', 'no'\], but "
                                          r"GLUE mnli has the labels \['contradiction', 'entailment', 'neutral'\]"):
    train.run("glue/mnli", "predict", model_dir, params_override=_override(
        {"predict_data": dict(small, input_path=glue_data)}))


def test_glue_training_refuses_a_model_dir_whose_labels_json_has_another_order(tmp_path):
  from tasks.glue import GlueTask
  from tasks.glue import GlueTaskConfig
  model_dir = tmp_path / "run"
  task = GlueTask(GlueTaskConfig(task_name="mnli"), logging_dir=str(model_dir))
  task.save_assets()
  assert model_directory.read_label_file(str(model_dir)).labels == ["contradiction", "entailment", "neutral"]
  task.save_assets()  # the same order: kept
  model_directory.write_label_file(str(model_dir), model_directory.LabelFile(HF_ORDER))
  with pytest.raises(ValueError, match=r"names the outputs \['entailment', 'neutral', 'contradiction'\], but GLUE "
                                       r"mnli trains the labels"):
    task.save_assets()
