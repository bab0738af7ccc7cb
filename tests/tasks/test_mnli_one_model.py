"""MNLI-m, MNLI-mm and AX from one `glue/mnli` model (docs/recipe.md §4, audit s30 item 6): the documented eval /
predict commands read the model_dir that `glue/mnli` trained under `glue/mnli-mm` and `task.task_name=ax`, on a tiny
model and a tiny raw GLUE folder."""

import json
import os

import pytest

from official_albert import train
from tests import tiny

MNLI_COLS = ["index", "promptID", "pairID", "genre", "s1_bp", "s2_bp", "s1_p", "s2_p", "sentence1", "sentence2"]
LABELS = ("entailment", "neutral", "contradiction")
TRAINER = {"train_steps": 2, "steps_per_loop": 2, "checkpoint_interval": 2, "validation_interval": 2,
           "summary_interval": 2, "validation_steps": -1, "warmup_steps": 0}
RUNTIME = {"distribution_strategy": "one_device", "seed": 3}


def _tsv(path, header, rows):
  os.makedirs(os.path.dirname(path), exist_ok=True)
  with open(path, "w") as f:
    f.write("\t".join(header) + "\n" + "".join("\t".join(r) + "\n" for r in rows))


def _glue_folder(root):
  def row(i):
    return [str(i), "p", "q", "fiction", "x", "x", "x", "x", f"a film {i} was good", f"the film {i % 3} was fine"]
  labelled = MNLI_COLS + ["label1", "gold_label"]
  _tsv(f"{root}/MNLI/train.tsv", labelled, [row(i) + [LABELS[i % 3]] * 2 for i in range(8)])
  dev = MNLI_COLS + ["label1", "label2", "label3", "label4", "label5", "gold_label"]
  for name, n in (("dev_matched", 5), ("dev_mismatched", 3)):
    _tsv(f"{root}/MNLI/{name}.tsv", dev, [row(i) + [LABELS[i % 3]] * 6 for i in range(n)])
  for name, n in (("test_matched", 4), ("test_mismatched", 6)):
    _tsv(f"{root}/MNLI/{name}.tsv", MNLI_COLS, [row(100 + i) for i in range(n)])
  _tsv(f"{root}/diagnostic/diagnostic.tsv", ["index", "sentence1", "sentence2"],
       [[str(i), f"a film {i}", "a film"] for i in range(5)])


def _override(extra):
  return json.dumps({"task": extra, "trainer": TRAINER, "runtime": RUNTIME})


def _rows(path):
  with open(path) as f:
    return f.read().splitlines()[1:]


@pytest.mark.large
def test_one_mnli_model_gives_matched_mismatched_and_ax(tmp_path, spm_model_file):
  glue_data = str(tmp_path / "glue_data")
  _glue_folder(glue_data)
  model_dir = str(tmp_path / "runs" / "mnli")
  data = {"global_batch_size": 4, "seq_length": 32}
  train.run("glue/mnli", "train_and_eval", model_dir, params_override=_override(
      {"model": dict(tiny.TRAIN_MODEL), "spm_model_file": spm_model_file,
       "train_data": dict(data, input_path=glue_data), "validation_data": dict(data, input_path=glue_data)}))
  matched = json.load(open(f"{model_dir}/eval_results.json"))
  # The documented commands (docs/recipe.md §4), with the tiny batch and length of this model.
  small = {"global_batch_size": 4, "seq_length": 32}
  train.run("glue/mnli", "predict", model_dir, params_override=_override(
      {"predict_data": dict(small, input_path=glue_data)}))
  result = train.run("glue/mnli-mm", "eval", model_dir, params_override=_override(
      {"validation_data": dict(small, input_path=glue_data)}))
  train.run("glue/mnli-mm", "predict", model_dir, params_override=_override(
      {"predict_data": dict(small, input_path=glue_data)}))
  train.run("glue/mnli", "predict", model_dir, params_override=_override(
      {"task_name": "ax", "predict_data": dict(small, input_path=glue_data)}))
  predictions = f"{model_dir}/predictions"
  assert [len(_rows(f"{predictions}/{name}")) for name in ("MNLI-m.tsv", "MNLI-mm.tsv", "AX.tsv")] == [4, 6, 5]
  assert all(r.split("\t")[1] in LABELS for r in _rows(f"{predictions}/AX.tsv"))
  mismatched = json.load(open(f"{model_dir}/eval_results.json"))
  assert mismatched != matched and "eval_accuracy" in str(result)  # the mismatched numbers replace the matched ones


def _checksum(prefix):
  reader = __import__("tensorflow").train.load_checkpoint(prefix)
  return {name: reader.get_tensor(name).tobytes() for name in reader.get_variable_to_shape_map()
          if name.startswith("model/")}


@pytest.mark.large
def test_the_mismatched_eval_leaves_the_matched_best_checkpoint_alone(tmp_path, spm_model_file):
  """Audit s31 item 1: the documented mm eval compared dev_mismatched accuracy with the dev_matched best and could
  copy the last checkpoint over model.ckpt-best (MNLI-mm.tsv and AX.tsv from another checkpoint than MNLI-m.tsv).
  dev_mismatched is made to agree with the last checkpoint's predictions, so its accuracy (1.0) beats the best."""
  glue_data = str(tmp_path / "glue_data")
  _glue_folder(glue_data)
  model_dir = str(tmp_path / "runs" / "mnli")
  data = {"global_batch_size": 4, "seq_length": 32}
  trainer = dict(TRAINER, train_steps=6)
  train.run("glue/mnli", "train_and_eval", model_dir, params_override=json.dumps({"task": {
      "model": dict(tiny.TRAIN_MODEL), "spm_model_file": spm_model_file, "train_data": dict(data, input_path=glue_data),
      "validation_data": dict(data, input_path=glue_data)}, "trainer": trainer, "runtime": RUNTIME}))
  # GLUE training names its outputs (classify, the exports, a later eval read labels.json).
  assert json.load(open(f"{model_dir}/labels.json"))["labels"] == ["contradiction", "entailment", "neutral"]
  best = json.load(open(f"{model_dir}/best_checkpoint.json"))
  if best["global_step"] == 6:
    pytest.skip("the last step is the best here: nothing to replace")
  train.run("glue/mnli-mm", "predict", model_dir, checkpoint=f"{model_dir}/ckpt-6", params_override=_override(
      {"predict_split": "dev", "predict_data": dict(data, input_path=glue_data)}))
  predicted = [r.split("\t")[1] for r in _rows(f"{model_dir}/predictions/MNLI-mm.tsv")]

  def row(i):
    return [str(i), "p", "q", "fiction", "x", "x", "x", "x", f"a film {i} was good", f"the film {i % 3} was fine"]
  dev = MNLI_COLS + ["label1", "label2", "label3", "label4", "label5", "gold_label"]
  _tsv(f"{glue_data}/MNLI/dev_mismatched.tsv", dev, [row(i) + [p] * 6 for i, p in enumerate(predicted)])
  checksum = _checksum(f"{model_dir}/model.ckpt-best")
  result = train.run("glue/mnli-mm", "eval", model_dir, params_override=_override(
      {"validation_data": dict(data, input_path=glue_data)}))
  assert result["eval_accuracy"] == 1.0 and result["global_step"] == 6
  assert json.load(open(f"{model_dir}/best_checkpoint.json")) == best
  assert _checksum(f"{model_dir}/model.ckpt-best") == checksum
