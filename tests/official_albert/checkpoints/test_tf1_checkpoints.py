"""Original TF1 checkpoints: names, round trips, HF parity through an independent name table, error reports."""

import re

import keras
import numpy as np
import pytest
import tensorflow as tf

from official_albert import AlbertConfig
from official_albert import AlbertPretrainer
from official_albert.checkpoints.names import CheckpointMismatchError
from official_albert.checkpoints.names import tf1_variable_map
from official_albert.checkpoints.tf1 import load_tf1_checkpoint
from official_albert.checkpoints.tf1 import read_tf1_checkpoint
from official_albert.checkpoints.tf1 import save_tf1_checkpoint
from official_albert.checkpoints.tf1 import skip_reason
from tests.official_albert.inputs import padded_pair_inputs
from tests.official_albert.oracle import hf_config
from tests.official_albert.oracle import make_hf_model
from tests.official_albert.oracle import to_torch
from tests.official_albert.oracle import torch
from tests.official_albert.oracle import transformers

TINY = dict(vocab_size=97, embedding_size=16, hidden_size=32, num_hidden_layers=4, num_hidden_groups=2,
            inner_group_num=2, num_attention_heads=2, intermediate_size=64, max_position_embeddings=64)

# An independent HF -> TF1 table (reference §1.3), written separately from official_albert.checkpoints.names on purpose.
_BLOCK = r"albert\.encoder\.albert_layer_groups\.(\d+)\.albert_layers\.(\d+)\."
_T = "bert/encoder/transformer/group_{0}/inner_group_{1}/"
_HF_TO_TF1 = [
    (r"albert\.embeddings\.(word|position|token_type)_embeddings\.weight", "bert/embeddings/{0}_embeddings"),
    (r"albert\.embeddings\.LayerNorm\.", "bert/embeddings/LayerNorm/"),
    (r"albert\.encoder\.embedding_hidden_mapping_in\.", "bert/encoder/embedding_hidden_mapping_in/"),
    (_BLOCK + r"attention\.(query|key|value)\.", _T + "attention_1/self/{2}/"),
    (_BLOCK + r"attention\.dense\.", _T + "attention_1/output/dense/"),
    (_BLOCK + r"attention\.LayerNorm\.", _T + "LayerNorm/"),
    (_BLOCK + r"ffn\.", _T + "ffn_1/intermediate/dense/"),
    (_BLOCK + r"ffn_output\.", _T + "ffn_1/intermediate/output/dense/"),
    (_BLOCK + r"full_layer_layer_norm\.", _T + "LayerNorm_1/"),
    (r"albert\.pooler\.", "bert/pooler/dense/"),
    (r"predictions\.dense\.", "cls/predictions/transform/dense/"),
    (r"predictions\.LayerNorm\.", "cls/predictions/transform/LayerNorm/"),
    (r"predictions\.bias", "cls/predictions/output_bias"),
    (r"sop_classifier\.classifier\.weight", "cls/seq_relationship/output_weights"),
    (r"sop_classifier\.classifier\.bias", "cls/seq_relationship/output_bias"),
]


def hf_to_tf1_weights(state_dict):
  """HF torch state dict -> {original TF1 name: array} (Linear weights transposed to TF kernels)."""
  out = {}
  for name, tensor in state_dict.items():
    if name.startswith("predictions.decoder."):
      continue  # tied copies of the word table and predictions.bias
    array = tensor.detach().numpy().copy()
    for pattern, template in _HF_TO_TF1:
      match = re.match(pattern, name)
      if not match:
        continue
      rest = name[match.end():]
      tf1 = template.format(*match.groups())
      is_norm = "LayerNorm" in tf1
      if rest == "weight":
        tf1, array = (tf1 + "gamma", array) if is_norm else (tf1 + "kernel", array.T)
      elif rest == "bias":
        tf1 += "beta" if is_norm else "bias"
      else:
        assert rest == "", name
      out[tf1] = np.ascontiguousarray(array)
      break
    else:
      raise AssertionError(f"no TF1 name for HF weight {name}")
  return out


def write_tf1(prefix, arrays):
  """A checkpoint written by TF1's Saver with exactly these names (as the original release did)."""
  variables = {name: tf.Variable(value) for name, value in arrays.items()}
  tf.io.gfile.makedirs(str(prefix.parent))
  tf.compat.v1.train.Saver(var_list=variables).save(None, str(prefix), write_meta_graph=False, write_state=False)
  return str(prefix)


def _ours_vs_hf(model, hf_model, inputs):
  seq = inputs["input_word_ids"].shape[1]
  positions = np.tile(np.arange(seq, dtype="int32"), (inputs["input_word_ids"].shape[0], 1))
  ours = model({**inputs, "masked_lm_positions": positions})
  with torch.no_grad():
    theirs = hf_model(**to_torch(inputs))
  mask = inputs["input_mask"].astype(bool)
  np.testing.assert_allclose(ours["mlm_logits"].numpy()[mask], theirs.prediction_logits.numpy()[mask], atol=1e-4)
  np.testing.assert_allclose(ours["sop_logits"].numpy(), theirs.sop_logits.numpy(), atol=1e-4)


def test_round_trip_ours_tf1_ours_is_bit_identical(tmp_path):
  keras.utils.set_random_seed(0)
  config = AlbertConfig(**TINY)
  model = AlbertPretrainer(config)
  prefix, info = save_tf1_checkpoint(model, str(tmp_path / "tf1"))
  assert info["written"] == len(model.weights)
  assert tf.train.latest_checkpoint(str(tmp_path / "tf1")) == prefix  # the `checkpoint` state file works
  names = dict(tf.train.list_variables(prefix))
  assert set(names) == set(tf1_variable_map(model))
  assert names["bert/encoder/transformer/group_1/inner_group_1/attention_1/self/query/kernel"] == [32, 32]
  assert names["cls/seq_relationship/output_weights"] == [2, 32]
  keras.utils.set_random_seed(1)
  other = AlbertPretrainer(config)
  summary = load_tf1_checkpoint(other, str(tmp_path / "tf1"))  # a directory resolves to its checkpoint
  assert summary["loaded"] == len(model.weights) and summary["skipped"] == {}
  for (name, a), (_, b) in zip(tf1_variable_map(model).items(), tf1_variable_map(other).items()):
    assert a.numpy().tobytes() == b.numpy().tobytes(), name


@pytest.mark.parametrize("size", ["tiny", pytest.param("base", marks=pytest.mark.parity)])
def test_original_named_checkpoint_reproduces_hf_outputs(tmp_path, size):
  """HF weights -> original TF1 names (independent table) -> our loader: same outputs as HF within 1e-4."""
  shape = TINY if size == "tiny" else dict(AlbertConfig.from_preset("albert-base-v2").to_hf_dict())
  shape = {k: v for k, v in shape.items() if k not in ("architectures", "model_type")}
  hf_model = make_hf_model("AlbertForPreTraining", hf_config(**shape), seed=3)
  arrays = hf_to_tf1_weights(hf_model.state_dict())
  # What original checkpoints also hold: optimizer slots, global_step; plus the TF-Hub `module/` prefix.
  extra = {"global_step": np.array(1000, np.int64),
           "bert/pooler/dense/kernel/adam_m": np.zeros_like(arrays["bert/pooler/dense/kernel"]),
           "bert/pooler/dense/kernel/adam_v": np.zeros_like(arrays["bert/pooler/dense/kernel"])}
  prefix = write_tf1(tmp_path / "model.ckpt-best", {f"module/{k}": v for k, v in {**arrays, **extra}.items()})
  model = AlbertPretrainer(AlbertConfig.from_dict(dict(shape, hidden_act="gelu_new"), source="native"))
  summary = load_tf1_checkpoint(model, prefix)
  assert summary["loaded"] == len(arrays) == len(model.weights)
  assert summary["skipped"] == {"module/global_step": "training step counter",
                                "module/bert/pooler/dense/kernel/adam_m": "optimizer slot (AdamW/LAMB moment)",
                                "module/bert/pooler/dense/kernel/adam_v": "optimizer slot (AdamW/LAMB moment)"}
  _ours_vs_hf(model, hf_model, padded_pair_inputs(vocab=shape["vocab_size"]))


def test_written_checkpoint_loads_in_hf_tf1_loader(tmp_path, capsys):
  """Second oracle: HF's own `load_tf_weights_in_albert` reads what we write, giving back the HF weights exactly."""
  hf_model = make_hf_model("AlbertForPreTraining", hf_config(**TINY), seed=4)
  model = AlbertPretrainer(AlbertConfig(**TINY))
  load_tf1_checkpoint(model, write_tf1(tmp_path / "in.ckpt", hf_to_tf1_weights(hf_model.state_dict())))
  prefix, _ = save_tf1_checkpoint(model, str(tmp_path / "out"))
  torch.manual_seed(9)
  fresh = transformers.AlbertForPreTraining(hf_config(**TINY)).eval()
  transformers.load_tf_weights_in_albert(fresh, fresh.config, prefix)
  capsys.readouterr()  # the HF loader prints every name
  expected = hf_model.state_dict()
  for name, value in fresh.state_dict().items():
    assert torch.equal(value, expected[name]), name


def test_skip_rules():
  assert skip_reason("bert/embeddings/word_embeddings/adam_v") == "optimizer slot (AdamW/LAMB moment)"
  assert skip_reason("cls/squad/output_weights/lamb_m") == "optimizer slot (LAMB)"
  assert skip_reason("global_step") == "training step counter"
  assert skip_reason("bert/embeddings/word_embeddings") is None
  assert skip_reason("output_weights") is None


@pytest.fixture(scope="module")
def tiny_tf1_arrays():
  keras.utils.set_random_seed(5)
  model = AlbertPretrainer(AlbertConfig(**TINY))
  return {name: v.numpy() for name, v in tf1_variable_map(model).items()}


@pytest.mark.parametrize("damage, expected", [
    ("truncate", "missing (in the model, not in the file):\n    cls/predictions/output_bias (97,)"),
    ("rename", "unexpected (in the file, not in the model):\n    bert/pooler/dense/kernl (32, 32)"),
    ("reshape", "wrong shape:\n    bert/embeddings/word_embeddings: file (96, 16), model (97, 16)"),
])
def test_damaged_checkpoint_fails_with_the_offending_names(tmp_path, tiny_tf1_arrays, damage, expected):
  arrays = dict(tiny_tf1_arrays)
  if damage == "truncate":
    del arrays["cls/predictions/output_bias"]
  elif damage == "rename":
    arrays["bert/pooler/dense/kernl"] = arrays.pop("bert/pooler/dense/kernel")
  else:
    arrays["bert/embeddings/word_embeddings"] = arrays["bert/embeddings/word_embeddings"][:96]
  prefix = write_tf1(tmp_path / "bad.ckpt", arrays)
  model = AlbertPretrainer(AlbertConfig(**TINY))
  before = [w.numpy().copy() for w in model.weights]
  with pytest.raises(CheckpointMismatchError) as error:
    load_tf1_checkpoint(model, prefix)
  assert expected in str(error.value)
  assert prefix in str(error.value)
  if damage == "rename":  # the renamed tensor also leaves its model variable without a value
    assert "bert/pooler/dense/kernel (32, 32)" in str(error.value)
  # Nothing is assigned when the checkpoint does not match.
  assert all(np.array_equal(a, w.numpy()) for a, w in zip(before, model.weights))


def test_allow_missing_and_allow_unused(tmp_path, tiny_tf1_arrays):
  """A Hub-style checkpoint without the SOP head, and a pretraining checkpoint read into a classifier."""
  from official_albert import AlbertClassifier
  arrays = {k: v for k, v in tiny_tf1_arrays.items() if not k.startswith("cls/seq_relationship/")}
  prefix = write_tf1(tmp_path / "nosop.ckpt", arrays)
  with pytest.raises(CheckpointMismatchError, match="cls/seq_relationship/output_weights"):
    load_tf1_checkpoint(AlbertPretrainer(AlbertConfig(**TINY)), prefix)
  summary = load_tf1_checkpoint(AlbertPretrainer(AlbertConfig(**TINY)), prefix,
                                allow_missing=["cls/seq_relationship/*"])
  assert summary["missing_allowed"] == ["cls/seq_relationship/output_bias", "cls/seq_relationship/output_weights"]
  classifier = AlbertClassifier(AlbertConfig(**TINY), num_labels=3)
  summary = load_tf1_checkpoint(classifier, prefix, allow_missing=["output_*"], allow_unused=["cls/*"])
  assert sorted(summary["unused"]) == sorted(k for k in arrays if k.startswith("cls/"))
  np.testing.assert_array_equal(classifier.encoder.embeddings.word_embeddings.numpy(),
                                arrays["bert/embeddings/word_embeddings"])


def test_read_reports_ambiguous_module_prefix(tmp_path):
  prefix = write_tf1(tmp_path / "dup.ckpt", {"bert/pooler/dense/bias": np.zeros(3, np.float32),
                                             "module/bert/pooler/dense/bias": np.ones(3, np.float32)})
  with pytest.raises(ValueError, match="both with and without"):
    read_tf1_checkpoint(prefix)


def test_checkpoint_directory_layouts(tmp_path):
  """Release tarball (`model.ckpt-best`, no state file), TF-Hub module (`variables/variables`), ambiguous dirs."""
  from official_albert.model_directory import resolve_checkpoint as resolve_checkpoint_path
  arrays = {"bert/pooler/dense/bias": np.arange(3, dtype=np.float32)}
  release = write_tf1(tmp_path / "release" / "model.ckpt-best", arrays)
  assert resolve_checkpoint_path(str(tmp_path / "release")) == release
  hub = write_tf1(tmp_path / "hub" / "variables" / "variables", {"module/" + k: v for k, v in arrays.items()})
  weights, _, prefix = read_tf1_checkpoint(str(tmp_path / "hub"))
  assert prefix == hub and list(weights) == ["bert/pooler/dense/bias"]
  write_tf1(tmp_path / "release" / "model.ckpt-100", arrays)
  with pytest.raises(ValueError, match="several checkpoints .*model.ckpt-100.index"):
    resolve_checkpoint_path(str(tmp_path / "release"))
  with pytest.raises(FileNotFoundError, match="no TF checkpoint"):
    resolve_checkpoint_path(str(tmp_path / "nothing"))
