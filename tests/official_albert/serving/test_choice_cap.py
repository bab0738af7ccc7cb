"""Multiple choice: an export folder's pipelines pack with the question+option cap its export recorded (a
SavedModel's `tokenization_info`, an OpenVINO / LiteRT folder's serving_config.json), as its own serve_text_pair does;
an export folder has no params.yaml, so before they packed at RACE's default whatever the run's cap was."""

import pytest

from official_albert.serving import pipeline_inputs
from official_albert.serving.served_rows import choice_options
from official_albert.tokenization.choices import fit_qa_length


class _Exported:
  """A loaded export as the pipelines see it: its settings (and no config)."""

  def __init__(self, settings):
    self.settings = settings


def test_the_exports_cap_comes_before_the_trainer_directorys(tmp_path):
  (tmp_path / "params.yaml").write_text("task:\n  max_qa_length: 9\n", encoding="utf-8")
  assert pipeline_inputs.recorded_qa_length(_Exported({"max_qa_length": 7}), str(tmp_path)) == 7
  assert pipeline_inputs.recorded_qa_length(_Exported({}), str(tmp_path)) == 9
  assert pipeline_inputs.recorded_qa_length(_Exported({}), str(tmp_path / "none")) is None
  # The server's options for such a folder: the export's cap, not the 128 fitted to the length.
  assert choice_options(_Exported({"max_qa_length": 7}), str(tmp_path / "none"))["max_qa_length"] == 7
  assert fit_qa_length(128) != 7


def test_a_saved_models_cap_is_read_from_its_tokenization_info(spm_model_file):
  """What `SavedModelRuntime` reads (its settings) from a multiple-choice export's tokenization_info (that the export
  writes it is test_export.py's)."""
  import tensorflow as tf

  from official_albert.serving.saved_model_runtime import saved_model_tokenizer
  info = {"spm_model_file": tf.constant(spm_model_file), "seq_length": tf.constant(48),
          "do_lower_case": tf.constant(True), "tokenizer_mode": tf.constant("hf")}
  _, settings = saved_model_tokenizer({"tokenization_info": lambda: info})
  assert "max_qa_length" not in settings  # (another head's, or an export from before the cap was recorded)
  _, settings = saved_model_tokenizer({"tokenization_info": lambda: {**info, "max_qa_length": tf.constant(11)}})
  assert settings["max_qa_length"] == 11
  assert choice_options(_Exported(settings), "/nonexistent")["max_qa_length"] == 11


def test_an_openvino_exports_recorded_cap_is_what_its_pipelines_read(tiny_exports):
  """The export writes the cap its spec picked for its length (here RACE's default fitted) to serving_config.json,
  and loading the folder gives it to the pipelines."""
  pytest.importorskip("openvino")
  from official_albert.serving.openvino_runtime import OpenVINOExport
  folder = tiny_exports.folder("openvino", "multiple_choice")
  export = OpenVINOExport(folder)
  length = int(export.settings["seq_length"])
  assert export.settings["max_qa_length"] == fit_qa_length(length)
  assert choice_options(export, folder)["max_qa_length"] == fit_qa_length(length)


def test_a_length_too_short_for_any_cap_without_a_recorded_one_is_no_type_error(tmp_path):
  """(review s29) The warning for a recorded cap that does not fit formatted None when nothing was recorded."""
  from official_albert.serving.export_spec import ExportSpec
  spec = ExportSpec(model_dir=str(tmp_path), export_dir=str(tmp_path / "out"), head="multiple_choice")
  assert spec.qa_length(4) == fit_qa_length(4)
  (tmp_path / "params.yaml").write_text("task:\n  max_qa_length: 128\n", encoding="utf-8")
  assert spec.qa_length(64) == fit_qa_length(64)  # (recorded 128 does not fit at 64: fitted, warned)
