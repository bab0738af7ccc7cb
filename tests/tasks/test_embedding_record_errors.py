"""A hand-edited embedding_training.json (`tasks.embedding.record`): each way it can be wrong is an error naming the
file, the key, the value, what is allowed and the fix (correct or delete it, or set the task key).

Before: a list or a string raised an AttributeError / TypeError naming nothing, a JSON syntax error named the file
but not the fix, `"scale": "x"` raised float()'s own ValueError, `"pooling": "mean"` (a string, not a list) was read
as the modes m,e,a,n, and `"loss": "pairwise"` named task.loss but not the file it came from.
"""

import functools
import logging
import re

import pytest

from official_albert.training.experiment_config import ConfigError
from tasks.embedding.task import TextEmbeddingTask
from tests import tiny

MODEL = dict(tiny.MODEL, preset="")
make_task = functools.partial(tiny.build_task, TextEmbeddingTask, "text_embedding")
FIX = r"correct it, or delete it|Correct or delete"
BROKEN = {
    "list": ('["mnrl"]', r"expected a JSON object .*the text_embedding training record\), got list"),
    "syntax": ('{"loss": ', r"the text_embedding training record is not valid JSON: .* line 1, column 10"),
    "scale": ('{"scale": "x"}', r"scale='x' is not a valid task.scale: could not convert string to float"),
    "pooling": ('{"pooling": "mean"}', r"\"pooling\" is 'mean', expected a list of pooling modes"),
    "loss": ('{"loss": "pairwise"}', r"task.loss='pairwise' is not one of \('mnrl', 'cosent', 'cosine'\)(.|\n)*"
                                     r"recorded settings: loss='pairwise' \(.*embedding_training.json\)"),
}


def _directory(tmp_path, text):
  (tmp_path / "embedding_training.json").write_text(text, encoding="utf-8")
  return str(tmp_path)


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_a_broken_record_names_the_file_the_key_and_the_fix(tmp_path, case):
  text, problem = BROKEN[case]
  with pytest.raises(ValueError) as raised:  # (ConfigError is one)
    make_task({"task": {"model": MODEL}}, _directory(tmp_path, text))  # (as --mode=eval / predict there builds it)
  message = str(raised.value)
  for words in (re.escape(f"{tmp_path}/embedding_training.json"), problem, FIX):
    assert re.search(words, message), (words, message)


def test_a_set_key_replaces_its_broken_value_with_a_warning(tmp_path, caplog):
  model_dir = _directory(tmp_path, '{"scale": "x", "loss": "mnrl"}')
  with caplog.at_level(logging.WARNING):
    params = make_task({"task": {"model": MODEL, "scale": 10.0}}, model_dir).params
  assert (params.scale, params.loss) == (10.0, "mnrl")
  assert "scale='x' is not a valid task.scale" in caplog.text and "task.scale=10.0 is used" in caplog.text
  with pytest.raises(ConfigError, match="scale='x'"):
    make_task({"task": {"model": MODEL}}, model_dir)


def test_a_valid_matryoshka_record_is_read(tmp_path):
  """The keys are checked one by one for their type, together for how they go (weights one per width)."""
  model_dir = _directory(tmp_path, '{"loss": "mnrl", "matryoshka_dims": [32, 16], "matryoshka_weights": [1.0, 0.5], '
                                   '"scale": 20.0, "pooling": ["mean"], "normalize": true}')
  params = make_task({"task": {"model": MODEL}}, model_dir).params
  assert (params.matryoshka_dims, params.matryoshka_weights, params.pooling) == ([32, 16], [1.0, 0.5], "mean")
