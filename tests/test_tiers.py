"""The test tiers and the shared tiny models (issue 45 item 6) keep their promises.

- `make test` stays the whole suite (CI's `.ci/run` runs it) and `make test-fast` is it less the tests marked `large`
  or `slow`, nothing else: a second selection would be a second suite to keep whole.
- `tiny_model_dirs` (tests/tiny.py) gives one directory per head, the same path on every request, whose saved weights
  are the Keras model it hands out as the reference, and a private copy to write into.
"""

import pathlib
import re

import numpy as np

from tests import tiny

REPO_ROOT = pathlib.Path(__file__).resolve().parent.parent


def _recipe(target):
  """The command lines of a Makefile target."""
  text = (REPO_ROOT / "Makefile").read_text(encoding="utf-8")
  match = re.search(rf"^{re.escape(target)}:[^\n]*\n((?:\t[^\n]*\n)+)", text, re.M)
  assert match, f"Makefile has no target {target}"
  return match.group(1)


def test_make_test_runs_everything_and_test_fast_leaves_out_only_large_and_slow():
  test, fast = _recipe("test"), _recipe("test-fast")
  selection = test.replace("$(PY) -m pytest", "")
  assert " -m " not in selection and " -k " not in selection and " --deselect" not in selection, test
  assert fast.replace(' -m "not large and not slow"', "") == test, (test, fast)
  ini = (REPO_ROOT / "pytest.ini").read_text(encoding="utf-8")
  assert "large:" in ini and "slow:" in ini  # registered (--strict-markers)
  assert "make test" in (REPO_ROOT / ".ci" / "run").read_text(encoding="utf-8")


def test_model_dirs_are_shared_and_hold_the_reference_model(tiny_model_dirs, tmp_path):
  from official_albert.checkpoints import loading
  folder = tiny_model_dirs["classifier"]
  assert tiny_model_dirs["classifier"] == folder  # built once
  loaded = loading.load_model(folder, "classifier")[0]
  assert loaded.config.hidden_size == tiny.MODEL["hidden_size"]
  ids = {"input_word_ids": np.array([[2, 40, 41, 3, 0]], np.int32), "input_mask": np.array([[1, 1, 1, 1, 0]], np.int32),
         "input_type_ids": np.zeros((1, 5), np.int32)}
  np.testing.assert_allclose(loaded(ids, training=False)["logits"],
                             tiny_model_dirs.model("classifier")(ids, training=False)["logits"], atol=1e-6)
  copy = tiny_model_dirs.copy("classifier", tmp_path / "mine")
  (pathlib.Path(copy) / "labels.json").write_text("{}")
  assert not (pathlib.Path(folder) / "labels.json").exists()
