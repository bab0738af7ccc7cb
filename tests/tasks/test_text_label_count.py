"""A text classifier of one label is refused, wherever the label comes from (audit s31, finding 1).

Before: `task.labels=["only"]` skipped the >= 2 check and trained a one-output softmax (loss always 0), and a
one-label `task.multi_label=true` task trained one sigmoid that every serving path reads as a regression score (its
raw logit), while `--mode=predict` wrote its probability.
"""

import json

import pytest

from official_albert.training.experiment_config import ConfigError
from official_albert.training.experiment_config import DataConfig
from tasks import text


def _labels(**params):
  return text.TextClassificationTask(text.TextClassificationConfig(**params), None).labels


def test_explicit_task_labels_with_one_label_are_refused_for_single_label():
  with pytest.raises(ConfigError, match=r"task\.labels=\['only'\].*needs at least 2"):
    _labels(labels=["only"])
  assert _labels(labels=["no", "yes"]) == ["no", "yes"]


def test_a_one_label_multi_label_task_is_refused_with_how_to_train_it():
  with pytest.raises(ConfigError, match=r"task\.labels=\['spam'\]: task\.multi_label=true.*two classes.*text_regr"):
    _labels(labels=["spam"], multi_label=True)
  assert _labels(labels=["a", "b"], multi_label=True) == ["a", "b"]


def test_a_training_file_with_one_multi_label_label_is_refused_naming_file_and_key(tmp_path):
  path = tmp_path / "train.jsonl"
  path.write_text("".join(json.dumps({"text": t, "label": tags}) + "\n"
                          for t, tags in [("buy now", ["spam"]), ("hello", []), ("win big", ["spam"])]))
  with pytest.raises(ConfigError, match=r"train\.jsonl: column 'label'.*task\.multi_label=true"):
    _labels(multi_label=True, train_data=DataConfig(input_path=str(path)))
