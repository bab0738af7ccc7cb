"""Checkpoint tables and loading: native round trip, HF name table, full-consumption errors, allow_missing."""

import functools

import numpy as np
import pytest

from official_albert import AlbertClassifier
from official_albert import AlbertEncoder
from official_albert import AlbertPretrainer
from official_albert import load_pretrained
from official_albert import save_pretrained
from official_albert.checkpoints.hf import hf_state_dict
from official_albert.checkpoints.hf import load_hf_state_dict
from official_albert.checkpoints.names import CheckpointMismatchError
from official_albert.checkpoints.names import tf1_to_hf_name
from official_albert.checkpoints.names import tf1_variable_map
from tests.official_albert.modeling.test_encoder import make_inputs
from tests.official_albert.modeling.test_encoder import tiny_config


def _inputs():
  inputs = make_inputs()
  inputs["masked_lm_positions"] = np.array([[1, 2], [3, 4]], "int32")
  return inputs


def test_tf1_names_follow_the_original_release():
  names = tf1_variable_map(AlbertPretrainer(tiny_config(num_hidden_groups=2, inner_group_num=2)))
  expected = {
      "bert/embeddings/word_embeddings", "bert/embeddings/LayerNorm/gamma",
      "bert/encoder/embedding_hidden_mapping_in/kernel",
      "bert/encoder/transformer/group_1/inner_group_1/attention_1/self/query/kernel",
      "bert/encoder/transformer/group_0/inner_group_1/attention_1/output/dense/bias",
      "bert/encoder/transformer/group_0/inner_group_0/LayerNorm/beta",
      "bert/encoder/transformer/group_1/inner_group_0/ffn_1/intermediate/dense/kernel",
      "bert/encoder/transformer/group_1/inner_group_0/ffn_1/intermediate/output/dense/kernel",
      "bert/encoder/transformer/group_1/inner_group_0/LayerNorm_1/gamma",
      "bert/pooler/dense/kernel", "cls/predictions/transform/dense/kernel", "cls/predictions/output_bias",
      "cls/predictions/transform/LayerNorm/gamma", "cls/seq_relationship/output_weights",
  }
  assert expected <= set(names)
  assert names["cls/seq_relationship/output_weights"].shape == (2, 32)  # [2,H] transposed layout
  assert names["bert/encoder/transformer/group_0/inner_group_0/attention_1/self/query/kernel"].shape == (32, 32)
  assert len(names) == len(AlbertPretrainer(tiny_config(num_hidden_groups=2, inner_group_num=2)).weights)


def test_hf_table_examples():
  assert tf1_to_hf_name("bert/encoder/transformer/group_1/inner_group_0/ffn_1/intermediate/output/dense/kernel") == (
      "albert.encoder.albert_layer_groups.1.albert_layers.0.ffn_output.weight", True)
  assert tf1_to_hf_name("bert/embeddings/LayerNorm/gamma") == ("albert.embeddings.LayerNorm.weight", False)
  assert tf1_to_hf_name("cls/seq_relationship/output_weights") == ("sop_classifier.classifier.weight", False)
  with pytest.raises(KeyError, match="bert/encoder/transformer/layer_0"):
    tf1_to_hf_name("bert/encoder/transformer/layer_0/inner_group_0/LayerNorm/gamma")


def test_native_round_trip_reproduces_outputs(tmp_path):
  model = AlbertPretrainer(tiny_config())
  prefix = save_pretrained(model, str(tmp_path))
  assert prefix.endswith("model.ckpt") and (tmp_path / "config.json").exists()
  assert not [p for p in tmp_path.iterdir() if ".tmp" in p.name]
  restored = load_pretrained(str(tmp_path))
  for key in ("mlm_logits", "sop_logits", "pooled_output"):
    np.testing.assert_array_equal(restored(_inputs())[key].numpy(), model(_inputs())[key].numpy())


def test_save_pretrained_refuses_a_folder_named_like_a_glob_before_writing(tmp_path):
  # TensorFlow reads a checkpoint prefix as a glob: under `run[1]/` the checkpoint was written but its own move
  # (a `prefix.*` glob) found nothing, and no load could find it either. The folder is refused, naming the fix.
  folder = tmp_path / "run[1]"
  with pytest.raises(ValueError, match=r"save_pretrained directory=.*run\[1\].*glob character\(s\) \[ \].*/run1'"):
    save_pretrained(AlbertEncoder(tiny_config()), str(folder))
  assert not folder.exists()


def test_native_pretrainer_into_classifier_needs_explicit_allow(tmp_path):
  model = AlbertPretrainer(tiny_config())
  save_pretrained(model, str(tmp_path))
  with pytest.raises(CheckpointMismatchError, match="output_weights"):
    load_pretrained(str(tmp_path), model=AlbertClassifier(tiny_config(), num_labels=3))
  classifier = load_pretrained(str(tmp_path), model=AlbertClassifier(tiny_config(), num_labels=3),
                               allow_missing=["output_*"])
  assert classifier.load_summary["missing_allowed"] == ["output_bias", "output_weights"]
  np.testing.assert_array_equal(classifier.encoder.embedding_table.numpy(), model.encoder.embedding_table.numpy())


def test_hf_state_dict_round_trip_is_exact():
  model = AlbertPretrainer(tiny_config())
  state = hf_state_dict(model)
  other = AlbertPretrainer(tiny_config())
  summary = load_hf_state_dict(other, state)
  assert summary["loaded"] == len(state) == len(model.weights)
  for a, b in zip(model.weights, other.weights):
    np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_hf_missing_unexpected_and_misshaped_are_listed():
  state = hf_state_dict(AlbertPretrainer(tiny_config()))
  broken = dict(state)
  del broken["albert.pooler.weight"]
  broken["albert.pooler.wieght"] = state["albert.pooler.weight"]
  broken["predictions.bias"] = np.zeros((5,), "float32")
  with pytest.raises(CheckpointMismatchError) as error:
    load_hf_state_dict(AlbertPretrainer(tiny_config()), broken, source="broken.safetensors")
  message = str(error.value)
  assert "broken.safetensors" in message
  assert "albert.pooler.weight (= bert/pooler/dense/kernel)" in message  # missing
  assert "albert.pooler.wieght" in message  # unexpected
  assert "predictions.bias" in message and "(5,)" in message  # wrong shape


def test_hf_allow_missing_sop_head_like_hub_checkpoints():
  state = {k: v for k, v in hf_state_dict(AlbertPretrainer(tiny_config())).items()
           if not k.startswith("sop_classifier.")}
  model = AlbertPretrainer(tiny_config())
  with pytest.raises(CheckpointMismatchError, match="sop_classifier.classifier.weight"):
    load_hf_state_dict(model, state)
  summary = load_hf_state_dict(model, state, allow_missing=["cls/seq_relationship/*"])
  assert summary["missing_allowed"] == ["cls/seq_relationship/output_bias", "cls/seq_relationship/output_weights"]


def test_hf_base_model_without_prefix_and_untied_decoder():
  encoder_state = {k[len("albert."):]: v for k, v in hf_state_dict(AlbertPretrainer(tiny_config())).items()
                   if k.startswith("albert.")}
  encoder = AlbertEncoder(tiny_config())
  assert load_hf_state_dict(encoder, encoder_state)["loaded"] == len(encoder.weights)
  state = hf_state_dict(AlbertPretrainer(tiny_config()))
  state["predictions.decoder.weight"] = state["albert.embeddings.word_embeddings.weight"] + 1.0
  with pytest.raises(CheckpointMismatchError, match="tied"):
    load_hf_state_dict(AlbertPretrainer(tiny_config()), state)


def test_load_pretrained_errors(tmp_path):
  with pytest.raises(FileNotFoundError, match="config.json"):
    load_pretrained(str(tmp_path))
  tiny_config().to_json_file(str(tmp_path / "config.json"))
  with pytest.raises(FileNotFoundError, match="checkpoint"):
    load_pretrained(str(tmp_path))


def test_load_pretrained_on_a_fine_tuned_directory_names_the_load_model_call_and_the_unused_head(tmp_path):
  """load_pretrained on one's own fine-tuned directory gave the Hub hint `allow_missing`, which returned a pretrainer
  with random MLM/SOP heads and dropped the trained classifier unnamed. Now the error names the head (labels.json tells
  the classifier-style heads apart), the `load_model` call and the file's unused variables, allow_missing or not; a
  pretrainer read from it on purpose lists them in load_summary["unused"]."""
  from official_albert import AlbertSpanLabeler
  from official_albert.checkpoints.hf import write_hf
  classifier = str(tmp_path / "tickets")
  save_pretrained(AlbertClassifier(tiny_config(), num_labels=3), classifier)
  unnamed = r"'classifier'\) \(or 'token_classifier' / 'multiple_choice'"
  for allow_missing in ((), ["cls/*"]):
    with pytest.raises(CheckpointMismatchError, match=unnamed) as error:
      load_pretrained(classifier, allow_missing=allow_missing)
    assert "2 unused (in the file, not in the model)" in str(error.value)
    assert "model/classifier/output_weights" in str(error.value)
  (tmp_path / "tickets" / "labels.json").write_text('{"task": "token_classification", "labels": ["O", "B", "I"]}')
  with pytest.raises(CheckpointMismatchError, match=r"load_model\('.*tickets', model_type='token_classifier'\), or "):
    load_pretrained(classifier)
  save_pretrained(AlbertSpanLabeler(tiny_config()), str(tmp_path / "squad"))
  with pytest.raises(CheckpointMismatchError, match="model_type='span'"):
    load_pretrained(str(tmp_path / "squad"))
  write_hf(AlbertClassifier(tiny_config(), num_labels=3), "classifier", str(tmp_path / "hf"))
  with pytest.raises(CheckpointMismatchError, match="config.json's architectures.*model_type='classifier'"):
    load_pretrained(str(tmp_path / "hf"))
  with pytest.raises(CheckpointMismatchError, match=r"(?s)missing.*cls/predictions.*unused.*output_bias"):
    load_pretrained(classifier, model=AlbertPretrainer(tiny_config()))
  pretrainer = load_pretrained(classifier, model=AlbertPretrainer(tiny_config()), allow_missing=["cls/*"])
  unused = pretrainer.load_summary["unused"]
  assert sorted(unused) == ["model/classifier/output_bias", "model/classifier/output_weights"]
  save_pretrained(AlbertPretrainer(tiny_config()), str(tmp_path / "pre"))
  assert load_pretrained(str(tmp_path / "pre")).load_summary["unused"] == {}


@pytest.mark.parametrize("field", ["num_hidden_groups", "inner_group_num"])
def test_a_native_config_with_fewer_blocks_than_its_checkpoint_is_refused(tmp_path, field):
  """A config.json edited to fewer groups / inner blocks restored the blocks it named and dropped the rest (every
  output changed, no error); the same mismatch read from TF1 or HF was already an 'unexpected' error."""
  save_pretrained(AlbertPretrainer(tiny_config(num_hidden_groups=2, inner_group_num=2)), str(tmp_path))
  config = tiny_config(**{"num_hidden_groups": 2, "inner_group_num": 2, field: 1})
  (tmp_path / "config.json").write_text(config.to_json_string())
  with pytest.raises(CheckpointMismatchError, match=r"group_1_inner_group_1_attention[\s\S]*use the config it was"):
    load_pretrained(str(tmp_path))


def test_an_unshared_native_config_with_fewer_layers_than_its_checkpoint_is_refused(tmp_path):
  unshared = functools.partial(tiny_config, sharing="none", num_hidden_groups=1)
  save_pretrained(AlbertPretrainer(unshared(num_hidden_layers=3)), str(tmp_path))
  (tmp_path / "config.json").write_text(unshared(num_hidden_layers=2).to_json_string())
  with pytest.raises(CheckpointMismatchError, match=r"layer_2_inner_group_0_attention"):
    load_pretrained(str(tmp_path))


def test_a_native_config_with_other_shapes_names_the_config(tmp_path):
  save_pretrained(AlbertPretrainer(tiny_config()), str(tmp_path))
  (tmp_path / "config.json").write_text(tiny_config(intermediate_size=40).to_json_string())
  with pytest.raises(CheckpointMismatchError, match=r"wrong shape: [\s\S]*intermediate[\s\S]*config.json"):
    load_pretrained(str(tmp_path))
