"""HF directories as transformers writes them beyond the plain float32 file: E == H models (transformers always has the
E→H projection), bfloat16 safetensors, sharded checkpoints, pooler-less heads read as an encoder, tf_model.h5 only."""

import json
import os

import numpy as np
import pytest

from official_albert import AlbertConfig
from official_albert import load_pretrained
from official_albert.checkpoints import hf
from official_albert.checkpoints import loading
from official_albert.checkpoints.names import CheckpointMismatchError
from tests.official_albert.checkpoints.test_convert_checkpoint import _inputs
from tests.official_albert.checkpoints.test_convert_checkpoint import SMALL
from tests.official_albert.checkpoints.test_hf_tf_checkpoints import FIXTURES
from tests.official_albert.oracle import hf_config
from tests.official_albert.oracle import make_hf_model
from tests.official_albert.oracle import save_hf
from tests.official_albert.oracle import to_torch
from tests.official_albert.oracle import torch
from tests.official_albert.oracle import transformers

E_EQUALS_H = dict(SMALL, embedding_size=SMALL["hidden_size"])
PROJECTION = ("embedding_hidden_mapping_in.weight", "embedding_hidden_mapping_in.bias")


def _hf_sequence_output(directory, inputs):
  model, info = transformers.AlbertModel.from_pretrained(directory, output_loading_info=True)
  with torch.no_grad():
    return model.eval()(**to_torch(inputs)).last_hidden_state.numpy(), {k: v for k, v in info.items() if v}


def test_e_equals_h_export_gives_transformers_the_identity_projection(tmp_path):
  """Ours (like the reference) has no projection when E == H; transformers' would stay random without one."""
  model = loading.build_model("encoder", AlbertConfig(**E_EQUALS_H))
  inputs = _inputs()
  ours = model(inputs)["sequence_output"].numpy()
  hf.write_hf(model, "encoder", str(tmp_path / "hf"))
  theirs, info = _hf_sequence_output(str(tmp_path / "hf"), inputs)
  assert info == {}
  np.testing.assert_allclose(ours, theirs, atol=1e-5)
  # And back: the identity is dropped, reported as skipped, and the outputs are the same.
  back, summary = loading.load_model(str(tmp_path / "hf"), "encoder")
  assert summary["skipped"] == {f"albert.encoder.{k}": "identity (E == H: ALBERT has no projection)"
                                for k in PROJECTION}
  np.testing.assert_array_equal(back(inputs)["sequence_output"].numpy(), ours)


def test_hf_e_equals_h_folder_reads_an_identity_projection_and_refuses_a_trained_one(tmp_path):
  hf_model = make_hf_model("AlbertModel", hf_config(**E_EQUALS_H), seed=5)
  trained = save_hf(hf_model, tmp_path / "trained")
  with pytest.raises(CheckpointMismatchError, match=r"embedding_hidden_mapping_in.weight \(32, 32\) is not the "
                                                    r"identity and .*embedding_hidden_mapping_in.bias is not zero"):
    loading.load_model(trained, "encoder")
  with torch.no_grad():
    hf_model.encoder.embedding_hidden_mapping_in.weight.copy_(torch.eye(32))
    hf_model.encoder.embedding_hidden_mapping_in.bias.zero_()
  identity = save_hf(hf_model, tmp_path / "identity")
  model, summary = loading.load_model(identity, "encoder")
  assert sorted(summary["skipped"]) == sorted(f"albert.encoder.{k}" for k in PROJECTION)
  inputs = _inputs()
  theirs, _ = _hf_sequence_output(identity, inputs)
  np.testing.assert_allclose(model(inputs)["sequence_output"].numpy(), theirs, atol=1e-5)


def test_bfloat16_safetensors_are_read_as_float32(tmp_path):
  hf_model = make_hf_model("AlbertForPreTraining", hf_config(**SMALL), seed=6).to(torch.bfloat16)
  directory = save_hf(hf_model, tmp_path / "bf16")
  with open(os.path.join(directory, "model.safetensors"), "rb") as f:
    assert '"dtype":"BF16"' in f.read(int.from_bytes(f.read(8), "little")).decode()  # the header
  expected = hf_model.albert.embeddings.word_embeddings.weight.detach().float().numpy()
  model, _ = loading.load_model(directory)
  np.testing.assert_array_equal(model.encoder.embeddings.word_embeddings.numpy(), expected)
  np.testing.assert_array_equal(load_pretrained(directory).encoder.embeddings.word_embeddings.numpy(), expected)


@pytest.mark.parametrize("safe", [True, False], ids=["safetensors", "pytorch_bin"])
def test_sharded_checkpoint_reads_every_shard(tmp_path, safe):
  hf_model = make_hf_model("AlbertForPreTraining", hf_config(**SMALL), seed=7)
  directory = str(tmp_path / "sharded")
  hf_model.save_pretrained(directory, max_shard_size="20KB", safe_serialization=safe)
  index = os.path.join(directory, hf.HF_WEIGHTS_INDEX_FILE if safe else hf.HF_TORCH_WEIGHTS_INDEX_FILE)
  shards = sorted(set(json.load(open(index))["weight_map"].values()))
  assert len(shards) > 2
  model, summary = loading.load_model(directory)
  assert summary["source"] == index and summary["loaded"] == len(model.weights)
  np.testing.assert_array_equal(model.sop_head.output_weights.numpy(),
                                hf_model.sop_classifier.classifier.weight.detach().numpy())
  os.remove(os.path.join(directory, shards[-1]))
  with pytest.raises(FileNotFoundError, match=f"names the shard {shards[-1]}, which is not in"):
    loading.load_model(directory)


def test_no_weights_error_names_the_sharded_layouts(tmp_path):
  with pytest.raises(FileNotFoundError, match="model.safetensors.index.json or pytorch_model.bin.index.json"):
    hf.read_hf_weights(str(tmp_path))


@pytest.mark.parametrize("hf_class", ["AlbertForTokenClassification", "AlbertForQuestionAnswering"])
def test_encoder_out_of_a_pooler_less_hf_head(tmp_path, hf_class):
  """These HF classes are saved without a pooler (add_pooling_layer=False): the encoder's is reported missing."""
  hf_model = make_hf_model(hf_class, hf_config(**SMALL), seed=8)
  directory = save_hf(hf_model, tmp_path / "hf")
  encoder, summary = loading.load_model(directory, "encoder")
  assert summary["missing_allowed"] == ["bert/pooler/dense/bias", "bert/pooler/dense/kernel"]
  inputs = _inputs()
  with torch.no_grad():
    theirs = hf_model.albert(**to_torch(inputs)).last_hidden_state.numpy()
  np.testing.assert_allclose(encoder(inputs)["sequence_output"].numpy(), theirs, atol=1e-5)


def test_load_pretrained_reads_an_hf_folder_with_only_tf_model_h5():
  directory = os.path.join(FIXTURES, "TFAlbertForPreTraining")
  expected, _ = loading.load_model(directory)
  model = load_pretrained(directory)
  assert model.load_summary["loaded"] == len(model.weights)
  assert {w.path: w.numpy().tobytes() for w in model.weights} == {w.path: w.numpy().tobytes()
                                                                   for w in expected.weights}


def _bf16_file(header, payload=b"\x80\x3f" * 4):
  """A safetensors file's bytes with `header` as written (8-byte size, JSON padded to 8, data)."""
  text = json.dumps(header).encode()
  text += b" " * (-len(text) % 8)
  return len(text).to_bytes(8, "little") + text + payload


@pytest.mark.parametrize("data, message", [
    (None, "not a readable safetensors file"),  # a truncated float32 file (safetensors' own error named no file)
    (_bf16_file({"w": {"dtype": "BF16", "shape": [4], "data_offsets": [-8, 0]}}), r"data_offsets \[-8, 0\]"),
    (_bf16_file({"w": {"dtype": "BF16", "shape": [4], "data_offsets": [6, 2]}}), r"data_offsets \[6, 2\]"),
    (_bf16_file({"w": {"dtype": "BF16", "shape": [4], "data_offsets": [0, 16]}}), r"data_offsets \[0, 16\]"),
    (_bf16_file({"w": {"dtype": "BF16", "shape": [-2, -2], "data_offsets": [0, 8]}}), r"shape \[-2, -2\]"),
    (_bf16_file({"w": {"dtype": "BF16", "shape": [4]}}), "has no 'data_offsets'"),
    (_bf16_file({"w": {"shape": [4], "data_offsets": [0, 8]}, "v": {"dtype": "BF16", "shape": [0],
                                                                   "data_offsets": [8, 8]}}), "has no 'dtype'"),
], ids=["truncated", "negative_offset", "begin_after_end", "past_the_data", "negative_dims", "no_offsets", "no_dtype"])
def test_a_damaged_safetensors_file_is_refused_naming_the_file_and_tensor(tmp_path, data, message):
  """(Before: a truncated file raised SafetensorError naming no file; offsets [-8, 0] read header bytes as 4 weights;
  a negative shape failed in numpy's reshape; a missing key was a bare KeyError.)"""
  from safetensors.numpy import save  # noqa: PLC0415
  path = tmp_path / "model.safetensors"
  path.write_bytes(save({"a": np.ones((4, 4), np.float32)})[:-10] if data is None else data)
  with pytest.raises(ValueError, match=message) as raised:
    hf._read_weights_file(str(path))  # pylint: disable=protected-access
  assert str(raised.value).startswith(f"{path}: ") and (data is None or "tensor w" in str(raised.value))
