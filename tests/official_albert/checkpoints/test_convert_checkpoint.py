"""convert_checkpoint: HF <-> native <-> TF1 round trips, HF loading without missing keys, the binary's summary."""

import json
import os

from absl import flags
import numpy as np
import pytest
from safetensors.numpy import load_file
from safetensors.numpy import save_file

from official_albert import AlbertClassifier
from official_albert import AlbertConfig
from official_albert import AlbertSpanLabeler
from official_albert import convert_checkpoint
from official_albert.checkpoints import convert as convert_lib
from official_albert.checkpoints import hf
from official_albert.checkpoints import loading
from official_albert.checkpoints import tf1
from official_albert.checkpoints.names import CheckpointMismatchError
from official_albert.checkpoints.names import HF_DERIVED_KEYS
from official_albert.checkpoints.tf1 import load_tf1_checkpoint
from tests.official_albert.checkpoints.test_tf1_checkpoints import hf_to_tf1_weights
from tests.official_albert.checkpoints.test_tf1_checkpoints import TINY
from tests.official_albert.checkpoints.test_tf1_checkpoints import write_tf1
from tests.official_albert.oracle import hf_config
from tests.official_albert.oracle import make_hf_model
from tests.official_albert.oracle import save_hf
from tests.official_albert.oracle import to_torch
from tests.official_albert.oracle import torch
from tests.official_albert.oracle import transformers

SMALL = dict(TINY, num_hidden_layers=2, num_hidden_groups=1, inner_group_num=1)


def _inputs(batch=2, seq=10, vocab=97, seed=2, choices=None):
  rng = np.random.default_rng(seed)
  shape = (batch, seq) if choices is None else (batch, choices, seq)
  ids = rng.integers(5, vocab, shape).astype("int32")
  mask = np.ones(shape, "int32")
  mask[1, ..., seq - 3:] = 0
  types = np.zeros(shape, "int32")
  types[..., seq // 2:] = 1
  return {"input_word_ids": ids, "input_mask": mask, "input_type_ids": types}


# model_type -> (HF class, extra HF config, [(our output, HF output attribute)])
CASES = {
    "pretrainer": ("AlbertForPreTraining", {}, [("sop_logits", "sop_logits")]),
    "classifier": ("AlbertForSequenceClassification", {"num_labels": 3}, [("logits", "logits")]),
    "token_classifier": ("AlbertForTokenClassification", {"num_labels": 5}, [("logits", "logits")]),
    "span": ("AlbertForQuestionAnswering", {}, [("start_logits", "start_logits"), ("end_logits", "end_logits")]),
    "multiple_choice": ("AlbertForMultipleChoice", {}, [("logits", "logits")]),
    "encoder": ("AlbertModel", {}, [("pooled_output", "pooler_output")]),
}


@pytest.mark.parametrize("model_type", sorted(CASES))
def test_hf_to_native_to_hf_is_bit_identical(tmp_path, model_type):
  hf_class, extra, outputs = CASES[model_type]
  hf_model = make_hf_model(hf_class, hf_config(**SMALL, **extra), seed=11)
  src = save_hf(hf_model, tmp_path / "hf_in")
  native = convert_lib.convert("hf", src, "native", str(tmp_path / "native"), model_type=model_type)
  back = convert_lib.convert("native", str(tmp_path / "native"), "hf", str(tmp_path / "hf_out"),
                                    model_type=model_type)
  assert back["written"] == native["loaded"]
  original = load_file(os.path.join(src, "model.safetensors"))
  ours = load_file(str(tmp_path / "hf_out" / "model.safetensors"))
  assert set(original) - set(ours) <= set(HF_DERIVED_KEYS)  # only tied/buffer copies may be left out
  assert set(ours) <= set(original)
  for key, value in ours.items():
    assert value.dtype == original[key].dtype and value.tobytes() == original[key].tobytes(), key
  # HF loads the written directory with no missing or unexpected keys, heads included.
  reloaded, info = getattr(transformers, hf_class).from_pretrained(str(tmp_path / "hf_out"),
                                                                   output_loading_info=True)
  assert {k: v for k, v in info.items() if v} == {}
  # And our model read from the intermediate native directory computes what HF computes.
  choices = 4 if model_type == "multiple_choice" else None
  inputs = _inputs(choices=choices)
  model, _ = loading.load_model(str(tmp_path / "native"), model_type)
  feed = dict(inputs)
  if model_type == "pretrainer":
    feed["masked_lm_positions"] = np.tile(np.arange(10, dtype="int32"), (2, 1))
  ours_out = model(feed)
  with torch.no_grad():
    theirs = reloaded.eval()(**to_torch(inputs))
  for our_name, hf_name in outputs:
    np.testing.assert_allclose(ours_out[our_name].numpy(), getattr(theirs, hf_name).numpy(), atol=1e-4)
  if model_type == "pretrainer":
    np.testing.assert_allclose(ours_out["mlm_logits"].numpy(), theirs.prediction_logits.numpy(), atol=1e-4)


def test_hf_output_of_span_model_leaves_out_the_pooler(tmp_path):
  model = loading.build_model("span", AlbertConfig(**SMALL))
  summary = hf.write_hf(model, "span", str(tmp_path))
  assert summary["excluded"] == {
      "albert.pooler.bias": "AlbertForQuestionAnswering has no pooler (add_pooling_layer=False)",
      "albert.pooler.weight": "AlbertForQuestionAnswering has no pooler (add_pooling_layer=False)"}
  config = json.loads((tmp_path / "config.json").read_text())
  assert config["architectures"] == ["AlbertForQuestionAnswering"] and config["hidden_act"] == "gelu_new"
  with pytest.raises(ValueError, match="no Hugging Face class"):
    convert_lib.convert("native", str(tmp_path), "hf", str(tmp_path / "x"), model_type="squad_v2")


def test_binary_tf1_classifier_to_hf(tmp_path, capsys, spm_model_file):
  """A fine-tuned TF1 classifier (root `output_weights`, Adam slots, Hub prefix) -> HF, via the binary's main."""
  hf_model = make_hf_model("AlbertForSequenceClassification", hf_config(**SMALL, num_labels=3), seed=12)
  state = hf_model.state_dict()
  arrays = hf_to_tf1_weights({k: v for k, v in state.items() if not k.startswith("classifier.")})
  arrays["output_weights"] = state["classifier.weight"].numpy()  # [num_labels, H], as run_classifier.py stores it
  arrays["output_bias"] = state["classifier.bias"].numpy()
  arrays["output_weights/adam_m"] = np.zeros_like(arrays["output_weights"])
  arrays["global_step"] = np.array(7, np.int64)
  release = tmp_path / "release"
  release.mkdir()
  prefix = write_tf1(release / "model.ckpt-best", arrays)
  (release / "albert_config.json").write_text(json.dumps(tf1.original_config_dict(
      AlbertConfig(**SMALL))))
  (release / "30k-clean.model").write_bytes(open(spm_model_file, "rb").read())
  fv = flags.FlagValues()
  convert_checkpoint.define_flags(fv)
  fv(["convert", "--input_format=tf1", f"--input={prefix}", "--output_format=hf",
      f"--output_dir={tmp_path / 'hf'}", "--model_type=classifier"])
  convert_checkpoint.main([], fv)
  printed = capsys.readouterr().out
  assert "  skipped (not model weights, or not used by this model type): 2" in printed
  assert "global_step: training step counter" in printed
  assert "output_weights/adam_m: optimizer slot (AdamW/LAMB moment)" in printed
  assert "spiece.model: copied from" in printed
  assert (tmp_path / "hf" / "spiece.model").read_bytes() == open(spm_model_file, "rb").read()
  reloaded, info = transformers.AlbertForSequenceClassification.from_pretrained(str(tmp_path / "hf"),
                                                                                output_loading_info=True)
  assert {k: v for k, v in info.items() if v} == {} and reloaded.config.num_labels == 3
  for key, value in reloaded.state_dict().items():
    assert torch.equal(value, state[key]), key


def test_tf1_output_round_trip_and_original_config(tmp_path):
  src_model = loading.build_model("span", AlbertConfig(**SMALL))
  from official_albert.checkpoints.native import save_pretrained
  save_pretrained(src_model, str(tmp_path / "native"))
  summary = convert_lib.convert("native", str(tmp_path / "native"), "tf1", str(tmp_path / "tf1"),
                                       model_type="span")
  assert summary["written"] == len(src_model.weights)
  config = json.loads((tmp_path / "tf1" / "albert_config.json").read_text())
  assert config["hidden_act"] == "gelu" and "sharing" not in config  # the original file's spelling
  assert AlbertConfig.from_json_file(str(tmp_path / "tf1" / "albert_config.json")) == AlbertConfig(**SMALL)
  back = AlbertSpanLabeler(AlbertConfig(**SMALL))
  load_tf1_checkpoint(back, str(tmp_path / "tf1"))
  assert {w.path: w.numpy().tobytes() for w in back.weights} == {w.path: w.numpy().tobytes()
                                                                  for w in src_model.weights}
  import tensorflow as tf
  assert ("cls/squad/output_weights", [2, 32]) in tf.train.list_variables(str(tmp_path / "tf1" / "model.ckpt"))


@pytest.mark.parametrize("damage", ["truncate", "rename", "reshape"])
def test_damaged_hf_file_fails_with_the_offending_names(tmp_path, damage):
  model = loading.build_model("classifier", AlbertConfig(**SMALL), num_labels=3)
  hf.write_hf(model, "classifier", str(tmp_path))
  path = str(tmp_path / "model.safetensors")
  state = load_file(path)
  if damage == "truncate":
    del state["albert.pooler.bias"]
    expected = "albert.pooler.bias (= bert/pooler/dense/bias)"
  elif damage == "rename":
    state["albert.poolr.bias"] = state.pop("albert.pooler.bias")
    expected = "albert.poolr.bias"
  else:
    state["classifier.weight"] = state["classifier.weight"][:2]
    expected = "classifier.weight (= output_weights): file (2, 32)"
  save_file(state, path)
  with pytest.raises(CheckpointMismatchError) as error:
    convert_lib.convert("hf", str(tmp_path), "native", str(tmp_path / "out"), model_type="classifier",
                               num_labels=3)
  assert expected in str(error.value)
  assert not (tmp_path / "out").exists()  # nothing written on a mismatch


def test_pytorch_bin_input(tmp_path):
  hf_model = make_hf_model("AlbertForSequenceClassification", hf_config(**SMALL, num_labels=2), seed=13)
  hf_model.save_pretrained(str(tmp_path / "bin"), safe_serialization=False)
  assert (tmp_path / "bin" / "pytorch_model.bin").exists()
  convert_lib.convert("hf", str(tmp_path / "bin"), "native", str(tmp_path / "native"),
                             model_type="classifier")
  model, _ = loading.load_model(str(tmp_path / "native"), "classifier")
  assert isinstance(model, AlbertClassifier) and model.num_labels == 2
  np.testing.assert_array_equal(model.classifier.output_weights.numpy(),
                                hf_model.classifier.weight.detach().numpy())


def test_encoder_out_of_a_classifier_directory(tmp_path):
  """`--model_type=encoder` takes the encoder out of a task model's directory; the head is reported as skipped."""
  from official_albert.checkpoints.native import save_pretrained
  classifier = loading.build_model("classifier", AlbertConfig(**SMALL), num_labels=3)
  save_pretrained(classifier, str(tmp_path / "cls"))
  summary = convert_lib.convert("native", str(tmp_path / "cls"), "hf", str(tmp_path / "hf"),
                                       model_type="encoder")
  assert summary["skipped"] == {"2 model tensors": "not part of this model type (another head)"}
  assert summary["missing_allowed"] == []
  assert "    2 model tensors: not part of this model type (another head)" in convert_lib.format_summary(
      summary).splitlines()
  encoder, info = transformers.AlbertModel.from_pretrained(str(tmp_path / "hf"), output_loading_info=True)
  assert {k: v for k, v in info.items() if v} == {}
  np.testing.assert_array_equal(encoder.pooler.weight.detach().numpy(),
                                classifier.encoder.pooler.kernel.numpy().T)


def test_one_list_of_model_types():
  assert tuple(loading._BUILDERS) == loading.MODEL_TYPES  # pylint: disable=protected-access


@pytest.mark.parametrize("flag", ["input", "output_dir"])
def test_binary_refuses_a_tf_checkpoint_path_with_glob_characters(tmp_path, flag):
  """A native / TF1 checkpoint is read through a prefix TensorFlow globs: a model directory named `v[1]` (a run
  trained there) read as "no TF checkpoint", and a native model written there could never be read back. The binary
  refuses both at start-up, naming the characters and the fix; an HF folder (files read by name) is not refused."""
  from official_albert.checkpoints.native import save_pretrained
  source = tmp_path / "src"
  save_pretrained(loading.build_model("encoder", AlbertConfig(**SMALL)), str(source))
  if flag == "input":  # (renamed after the save: save_pretrained itself cannot write there)
    source = source.rename(tmp_path / "v[1]")
  output = tmp_path / ("out" if flag == "input" else "out [v1]")

  def run(output_format):
    fv = flags.FlagValues()
    convert_checkpoint.define_flags(fv)
    fv(["convert", "--input_format=native", f"--input={source}", f"--output_format={output_format}",
        f"--output_dir={output}", "--model_type=encoder"])
    convert_checkpoint.main([], fv)

  with pytest.raises(ValueError, match=rf"--{flag}=.* contains the glob character\(s\) \[ \]: .*rename the folder"):
    run("native")
  assert not output.exists()
  if flag == "output_dir":
    run("hf")
    assert (output / "model.safetensors").exists()
