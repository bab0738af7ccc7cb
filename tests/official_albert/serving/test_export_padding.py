"""Exports' numbers through the pipelines (audit s30): a block_sparse SavedModel is padded to its seq_length, as its
graph runs it, so a text's answer does not change with its batch-mates; an export folder encodes an empty batch;
an export below the run's recorded predict length says so.

The block-sparse model's weights are perturbed (`random_models.perturb_weights`): with the untrained ones, or a text
within the first block, the trimmed and padded answers agree and the test could not see the trimming.
"""

import logging
import types

import keras
import numpy as np
import pytest

from official_albert import AlbertConfig
from official_albert import pipelines
from official_albert.checkpoints.loading import build_model
from official_albert.checkpoints.native import save_pretrained
from official_albert.serving import export
from official_albert.serving.export_folder import ExportFolder
from official_albert.serving.export_spec import ExportSpec
from official_albert.serving.export_spec import load_for_export
from official_albert.serving.pipeline_inputs import pads_to_cap
from official_albert.serving.saved_model_runtime import ExportedShape
from official_albert.serving.saved_model_runtime import SavedModelRuntime
from official_albert.tokenization import FullTokenizer
from tests import tiny
from tests.official_albert.serving.random_models import perturb_weights

SPARSE = dict(attention_type="block_sparse", block_size=4, num_random_blocks=1, block_sparse_seed=7)
SHORT = "the invoice is wrong and it crashes on start, great work on the fix"  # (35 pieces)
LONG = "a b c d e f g h i j k l m n o p q r s t u v w x y z " * 2


def _scores(words):
  return [w["score"] for w in words]


@pytest.mark.slow  # (~40 s: the SavedModel's text signatures trace the in-graph tokenizer)
def test_a_block_sparse_tagger_saved_model_answers_a_text_alike_whatever_its_batch_mates(tmp_path):
  keras.utils.set_random_seed(5)
  model = build_model("token_classifier", AlbertConfig(**dict(tiny.MODEL, **SPARSE)), 3, 2)
  perturb_weights(model, seed=3)
  model_dir = str(tmp_path / "tok")
  save_pretrained(model, model_dir, spm_model_file=str(tiny.SPM_MODEL_FILE))
  out = export.export_from_model_dir(model_dir, str(tmp_path / "sm"), head="token_classifier", seq_length=48)
  alone = _scores(pipelines.token_classification(out, SHORT))
  with_mate = _scores(pipelines.token_classification(out, [SHORT, LONG])[0])
  directory = _scores(pipelines.token_classification(model_dir, SHORT, seq_length=48))
  np.testing.assert_allclose(alone, with_mate, atol=1e-5)
  np.testing.assert_allclose(alone, directory, atol=1e-5)
  assert SavedModelRuntime(out).config.attention_type == "block_sparse"  # (recorded by tokenization_info)


def test_a_saved_model_that_records_no_attention_type_is_padded_to_its_seq_length():
  class _Runtime:
    config = ExportedShape(vocab_size=30, max_position_embeddings=48)  # (an export before attention_type)

  assert pads_to_cap(_Runtime())
  _Runtime.config = ExportedShape(30, 48, "dense")
  assert not pads_to_cap(_Runtime())


def test_an_export_folder_encodes_an_empty_batch(tmp_path):
  runtime = ExportFolder.__new__(ExportFolder)  # (`encode` reads only its tokenizer, settings and config)
  runtime.export_dir, runtime.tokenizer = str(tmp_path), FullTokenizer(str(tiny.SPM_MODEL_FILE))
  runtime.settings, runtime.config = {"seq_length": 16}, types.SimpleNamespace(attention_type="dense")
  empty = runtime.encode([])
  assert set(empty) == {"input_word_ids", "input_mask", "input_type_ids"}
  assert all(v.shape == (0, 2) and v.dtype == np.int32 for v in empty.values())
  assert runtime.encode([], []).keys() == empty.keys()


def test_an_export_below_the_runs_recorded_length_warns_naming_it(tmp_path, caplog):
  model_dir = tmp_path / "cls"
  tiny.save_model_dir(str(model_dir), "classifier", num_labels=2, max_position_embeddings=160)
  (model_dir / "params.yaml").write_text("task:\n  predict_data:\n    seq_length: 144\n")
  with caplog.at_level(logging.WARNING):
    loaded = load_for_export(ExportSpec(str(model_dir), str(tmp_path / "sm"), "classifier"))
  assert loaded.seq_length == 128  # (the documented default, cut to the positions)
  assert "records seq_length=144" in caplog.text and "--seq_length=144" in caplog.text
