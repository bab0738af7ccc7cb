"""HF TensorFlow checkpoints (`tf_model.h5` of every TFAlbert* class) → native: outputs equal HF's, bad files named.

The fixtures (tests/fixtures/hf_tf/<TF class>/) were written by transformers 4.57.6's own TF classes with their
outputs (tests/fixtures/make_hf_tf_fixtures.py, run in an environment with tf-keras); the project's environment has
no tf-keras, and reading needs none.
"""

import os
import shutil

from absl import flags
import h5py
import numpy as np
import pytest

from official_albert import convert_checkpoint
from official_albert import model_directory as md
from official_albert.checkpoints import convert as convert_lib
from official_albert.checkpoints import hf_tf
from official_albert.checkpoints import loading
from official_albert.checkpoints.names import CheckpointMismatchError

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "fixtures",
                        "hf_tf")
# TF class → (our model type, [(our output, HF output)]).
CASES = {
    "TFAlbertModel": ("encoder", [("sequence_output", "last_hidden_state"), ("pooled_output", "pooler_output")]),
    "TFAlbertForPreTraining": ("pretrainer", [("mlm_logits", "prediction_logits"), ("sop_logits", "sop_logits")]),
    "TFAlbertForMaskedLM": ("pretrainer", [("mlm_logits", "logits")]),
    "TFAlbertForSequenceClassification": ("classifier", [("logits", "logits")]),
    "TFAlbertForTokenClassification": ("token_classifier", [("logits", "logits")]),
    "TFAlbertForQuestionAnswering": ("span", [("start_logits", "start_logits"), ("end_logits", "end_logits")]),
    "TFAlbertForMultipleChoice": ("multiple_choice", [("logits", "logits")]),
}


def _fixture(class_name):
  return os.path.join(FIXTURES, class_name)


def _expected(class_name):
  with np.load(os.path.join(_fixture(class_name), "expected.npz")) as data:
    return {k: data[k] for k in data.files}


def _feed(expected, model_type):
  feed = {"input_word_ids": expected["input_input_ids"], "input_mask": expected["input_attention_mask"],
          "input_type_ids": expected["input_token_type_ids"]}
  if model_type == "pretrainer":
    batch, seq = feed["input_word_ids"].shape
    feed["masked_lm_positions"] = np.tile(np.arange(seq, dtype="int32"), (batch, 1))
  return feed


@pytest.mark.parametrize("class_name", sorted(CASES))
def test_tf_model_h5_to_native_computes_what_hf_tf_computed(tmp_path, class_name):
  model_type, outputs = CASES[class_name]
  summary = convert_lib.convert("hf_tf", _fixture(class_name), "native", str(tmp_path / "native"))
  assert summary["model_type"] == model_type  # from config.json's architectures
  assert summary["source"].endswith(md.HF_TF_WEIGHTS_FILE)
  if class_name in ("TFAlbertForPreTraining", "TFAlbertForMaskedLM"):
    assert any("predictions/bias" in k for k in summary["skipped"])  # unused by TFAlbertMLMHead
  if class_name == "TFAlbertForMaskedLM":
    assert summary["missing_allowed"] == ["bert/pooler/dense/bias", "bert/pooler/dense/kernel",
                                          "cls/seq_relationship/output_bias", "cls/seq_relationship/output_weights"]
  else:
    assert summary["missing_allowed"] == ([] if model_type not in ("span", "token_classifier")
                                          else ["bert/pooler/dense/bias", "bert/pooler/dense/kernel"])
  expected = _expected(class_name)
  model, _ = loading.load_model(str(tmp_path / "native"), model_type, num_choices=expected["input_input_ids"].shape[1])
  ours = model(_feed(expected, model_type))
  for our_name, hf_name in outputs:
    np.testing.assert_allclose(np.asarray(ours[our_name]), expected[f"output_{hf_name}"], atol=1e-5, rtol=0,
                               err_msg=f"{class_name}: {our_name} vs {hf_name}")


def test_hf_directory_with_only_tf_model_h5_is_read_from_it(tmp_path):
  """`--input_format=hf` (and format detection) on a TF-only HF folder reads tf_model.h5."""
  src = shutil.copytree(_fixture("TFAlbertForSequenceClassification"), tmp_path / "hf")
  assert md.detect_format(str(src)) == "hf"
  model, summary = loading.load_model(str(src), "classifier")
  assert summary["source"].endswith(md.HF_TF_WEIGHTS_FILE) and model.num_labels == 3
  expected = _expected("TFAlbertForSequenceClassification")
  np.testing.assert_allclose(np.asarray(model(_feed(expected, "classifier"))["logits"]), expected["output_logits"],
                             atol=1e-5, rtol=0)


def test_binary_contract_command(tmp_path, capsys):
  fv = flags.FlagValues()
  convert_checkpoint.define_flags(fv)
  fv(["convert", "--input_format=hf_tf", f"--input={_fixture('TFAlbertForQuestionAnswering')}",
      "--output_format=native", f"--output_dir={tmp_path / 'out'}"])
  convert_checkpoint.main([], fv)
  printed = capsys.readouterr().out
  assert "(model_type=span)" in printed and "tf_model.h5" in printed
  assert md.detect_format(str(tmp_path / "out")) == "native"


def test_truncated_tf_model_h5_is_a_named_error(tmp_path):
  src = shutil.copytree(_fixture("TFAlbertModel"), tmp_path / "hf")
  path = src / md.HF_TF_WEIGHTS_FILE
  data = path.read_bytes()
  path.write_bytes(data[:len(data) // 2])
  with pytest.raises(hf_tf.HFTFCheckpointError, match=r"tf_model\.h5.*(truncated|damaged)"):
    convert_lib.convert("hf_tf", str(src), "native", str(tmp_path / "out"))
  assert not (tmp_path / "out").exists()


def test_foreign_h5_files_are_named_errors(tmp_path):
  src = shutil.copytree(_fixture("TFAlbertModel"), tmp_path / "hf")
  path = src / md.HF_TF_WEIGHTS_FILE
  # Another model's tf_model.h5 (BERT's layer names).
  with h5py.File(path, "w") as f:
    f.attrs["layer_names"] = np.array([b"bert"])
    group = f.create_group("bert")
    group.attrs["weight_names"] = np.array([b"tf_bert_model/bert/embeddings/word_embeddings/weight:0"])
    group.create_dataset("tf_bert_model/bert/embeddings/word_embeddings/weight:0", data=np.zeros((4, 2), "f4"))
  with pytest.raises(hf_tf.HFTFCheckpointError, match=r"no ALBERT weights \(top-level layers \['bert'\]"):
    convert_lib.convert("hf_tf", str(src), "native", str(tmp_path / "out"))
  # An HDF5 file that is no Keras-2 weights file at all.
  with h5py.File(path, "w") as f:
    f.create_dataset("x", data=np.zeros(3))
  with pytest.raises(hf_tf.HFTFCheckpointError, match="without Keras' `layer_names`"):
    convert_lib.convert("hf_tf", str(src), "native", str(tmp_path / "out"))
  # Not HDF5.
  path.write_text("version https://git-lfs.github.com/spec/v1\n")
  with pytest.raises(hf_tf.HFTFCheckpointError, match="not a readable HDF5 file"):
    convert_lib.convert("hf_tf", str(src), "native", str(tmp_path / "out"))


def test_wrong_head_lists_the_names(tmp_path):
  """An ALBERT file of another head than asked: the usual mismatch error, with the HF names."""
  with pytest.raises(CheckpointMismatchError, match=r"2 unexpected[^\n]*\n\s+qa_outputs\.bias\n\s+qa_outputs\.weight"):
    convert_lib.convert("hf_tf", _fixture("TFAlbertForQuestionAnswering"), "native", str(tmp_path / "out"),
                        model_type="classifier")
