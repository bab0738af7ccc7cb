"""`export_saved_model --max_qa_length` (s33 fixC item 1): the multiple-choice export's question+option cap had an
`ExportSpec` field and a recorded setting but no flag, so a binary's export could only take the run's recorded cap
(or RACE's 128 fitted to its length). The flag fills the spec's field; below 1, or on a head without choices, it is
refused before anything loads or is written."""

from absl import flags
import numpy as np
import pytest

from official_albert import export_saved_model
from official_albert import pipelines
from official_albert.serving.saved_model_runtime import SavedModelRuntime
from official_albert.serving.served_rows import choice_options
from official_albert.tokenization.choices import fit_qa_length
from tests.tiny import NUM_CHOICES

CONTEXT = "Tom has a red ball. He plays with it every day after school in the park near his house."
QUESTION = "On which days of the week and at what time of the day does Tom play with his ball _ ?"
CHOICES = ["every day", "never at all"]


def _export_binary(*args):
  fv = flags.FlagValues()
  export_saved_model.define_flags(fv)
  fv(["x", *args])
  export_saved_model.main([], fv)


def test_the_flag_sets_the_cap_the_export_packs_with(tmp_path, tiny_model_dirs):
  import tensorflow as tf
  model_dir, export_dir = tiny_model_dirs["multiple_choice"], tmp_path / "race"
  _export_binary(f"--model_dir={model_dir}", f"--export_dir={export_dir}", "--head=multiple_choice",
                 f"--num_choices={NUM_CHOICES}", "--seq_length=32", "--max_qa_length=5")
  loaded = tf.saved_model.load(str(export_dir))
  assert int(loaded.signatures["tokenization_info"]()["max_qa_length"]) == 5
  # What the folder's pipeline packs with (not RACE's 128 fitted to 32 = 8), and its answer: the model directory's at
  # that cap.
  assert choice_options(SavedModelRuntime(str(export_dir), loaded), str(export_dir)) == {
      "max_seq_length": 32, "max_qa_length": 5}
  assert fit_qa_length(32) == 8
  ours = pipelines.multiple_choice(str(export_dir), CONTEXT, QUESTION, CHOICES)
  theirs = pipelines.multiple_choice(model_dir, CONTEXT, QUESTION, CHOICES, max_seq_length=32, max_qa_length=5)
  np.testing.assert_allclose(ours["scores"], theirs["scores"], atol=1e-6)


@pytest.mark.parametrize("bad", ["0", "-3"])
def test_a_cap_below_one_is_refused_before_anything_is_written(tmp_path, tiny_model_dirs, bad):
  with pytest.raises(ValueError, match=f"max_qa_length={bad}: .* at least 1 .*--max_qa_length"):
    _export_binary(f"--model_dir={tiny_model_dirs['multiple_choice']}", f"--export_dir={tmp_path / 'race'}",
                   "--head=multiple_choice", f"--num_choices={NUM_CHOICES}", f"--max_qa_length={bad}")
  assert not (tmp_path / "race").exists()


@pytest.mark.parametrize("fmt", ["saved_model", "openvino"])
def test_a_cap_on_a_head_without_choices_is_refused(tmp_path, tiny_model_dirs, fmt):
  if fmt == "openvino":
    pytest.importorskip("openvino")
  with pytest.raises(ValueError, match="max_qa_length caps multiple-choice rows; head='classifier' packs no choices"):
    _export_binary(f"--model_dir={tiny_model_dirs['classifier']}", f"--export_dir={tmp_path / 'cls'}",
                   "--head=classifier", f"--format={fmt}", "--max_qa_length=8")
  assert not (tmp_path / "cls").exists()
