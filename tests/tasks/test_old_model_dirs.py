"""Model directories written by earlier versions of this project, read by this one."""

import json
import os

import yaml

from official_albert import model_directory as md
from official_albert import train
from official_albert.checkpoints.sentence_transformers_folder import read_tokenizer_options
from tasks import text
from tests.tasks.test_text_classification import TINY_MODEL


def test_a_resumed_directory_of_an_earlier_version_gets_its_tokenizer_record(tmp_path, spm_model_file):
  """Directories written before tokenizer_config.json hold labels.json and params.yaml only; the tokenizer record
  was written only beside a new labels.json, so a resume (which rewrites params.yaml with the run's own, unset
  do_lower_case) left a cased model with no record of its casing: later pipelines, exports and predict runs read it
  lower-cased. The record is written wherever it is missing."""
  model_dir = str(tmp_path / "old_run")
  os.makedirs(model_dir)
  md.write_label_file(model_dir, md.LabelFile(["neg", "pos"], task="text_classification"))
  with open(os.path.join(model_dir, md.PARAMS_FILE), "w", encoding="utf-8") as f:
    yaml.safe_dump({"task": {"do_lower_case": False}}, f)
  params = train.build_params("text_classification", params_override=json.dumps({"task": {
      "model": TINY_MODEL, "spm_model_file": spm_model_file}}))
  task = text.TextClassificationTask(params.task, logging_dir=model_dir)
  task.save_assets()
  assert read_tokenizer_options(model_dir)["do_lower_case"] is False
