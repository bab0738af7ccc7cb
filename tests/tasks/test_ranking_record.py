"""A hand-edited ranking_training.json (`tasks.ranking.task.ranking_record`): each way it can record no valid loss is
an error naming the file, the key, the value, the allowed values and the fix, where the run leaves task.loss unset.

Before: a list, a string or an object without "loss" were ignored (the run used listwise, silently), `"loss": null`
left task.loss None (the loss then fell to listwise inside `group_loss`), `"loss": "pairwise"` was refused naming
the key but not the file, and a JSON syntax error named the file but not the key or the fix. A run that sets
task.loss is warned and uses its own (the file cannot say what the model was trained with).
"""

import functools
import logging
import re

import pytest

from official_albert.training.experiment_config import ConfigError
from tasks.ranking import TextRankingTask
from tasks.ranking.task import ranking_record
from tests import tiny

MODEL = dict(tiny.MODEL, preset="")
make_task = functools.partial(tiny.build_task, TextRankingTask, "text_ranking")
BROKEN = {
    "pairwise": ('{"task": "text_ranking", "loss": "pairwise"}', r"\"loss\" is 'pairwise', not one of"),
    "null": ('{"loss": null}', r"\"loss\" is None, not one of"),
    "missing": ('{"los": "bce"}', r"\"loss\" is missing, not one of"),
    "list": ('["bce"]', r"expected a JSON object whose \"loss\" is one of .*, got list \['bce'\]"),
    "string": ('"bce"', r"expected a JSON object whose \"loss\" is one of .*, got str 'bce'"),
    "syntax": ('{"loss": ', r"the text_ranking training record is not valid JSON: .* line 1, column 10"),
}


def _directory(tmp_path, text):
  (tmp_path / "ranking_training.json").write_text(text, encoding="utf-8")
  return str(tmp_path)


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_a_record_without_a_valid_loss_names_the_file_the_key_and_the_fix(tmp_path, case, caplog):
  text, problem = BROKEN[case]
  model_dir = _directory(tmp_path, text)
  with pytest.raises(ConfigError) as raised:  # (a ValueError)
    make_task({"task": {"model": MODEL}}, model_dir)  # (as --mode=eval there builds it)
  message = str(raised.value)
  assert isinstance(raised.value, ValueError) and message.startswith(f"{tmp_path}/ranking_training.json: ")
  for words in (problem, r"\"loss\": \"listwise\"", r"\"loss\": \"bce\"", "delete it", "set task.loss"):
    assert re.search(words, message), (words, message)
  with caplog.at_level(logging.WARNING):  # the run's own loss, told
    assert make_task({"task": {"model": MODEL, "loss": "bce"}}, model_dir).params.loss == "bce"
  assert f"{tmp_path}/ranking_training.json" in caplog.text and "task.loss='bce' is used" in caplog.text


def test_a_valid_record_is_read(tmp_path):
  model_dir = _directory(tmp_path, '{"task": "text_ranking", "loss": "bce"}')
  assert ranking_record(model_dir) == {"loss": ("bce", f"{model_dir}/ranking_training.json")}
  assert make_task({"task": {"model": MODEL}}, model_dir).params.loss == "bce"
