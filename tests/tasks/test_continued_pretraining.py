"""Continued pretraining (issue 16): `task.init_checkpoint` on the pretraining task restores the whole pretrainer.

The encoder, the MLM head (transform, LayerNorm, output bias) and the SOP head come back bit-exactly from a native
model dir, a previous run's checkpoint prefix, a Hugging Face directory and an original TF1 release; the optimizer
(and the step) start fresh.
"""

import json

import numpy as np
import pytest

from official_albert import train
from official_albert.checkpoints import hf
from official_albert.checkpoints.names import tf1_variable_map
from official_albert.training.trainer import Trainer
from tests.official_albert.checkpoints.sources import pretrainer_in_every_format

TINY = dict(vocab_size=100, embedding_size=8, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
            intermediate_size=32, max_position_embeddings=32, hidden_dropout_prob=0.0,
            attention_probs_dropout_prob=0.0)


def _params(init_checkpoint, steps=1, **task):
  data = {"input_path": "dummy", "global_batch_size": 4, "seq_length": 16, "max_predictions_per_seq": 3,
          "dummy_vocab_size": 100}
  override = {"task": dict({"model": dict(TINY, preset=""), "init_checkpoint": init_checkpoint, "train_data": data,
                            "validation_data": dict(data, is_training=False)}, **task),
              "trainer": {"train_steps": steps, "steps_per_loop": 1, "checkpoint_interval": steps,
                          "summary_interval": 1, "warmup_steps": 0, "optimizer": "lamb"},
              "runtime": {"distribution_strategy": "one_device", "seed": 3}}
  return json.dumps(override)


@pytest.fixture(scope="module")
def source(tmp_path_factory):
  """A pretrainer with its own random weights (seed 11, not the run's seed 3) in native, HF and TF1 form."""
  root = tmp_path_factory.mktemp("source")
  model = pretrainer_in_every_format(root, TINY, seed=11)
  return {"root": root, "weights": {n: v.numpy() for n, v in tf1_variable_map(model).items()}}


def _initialized(init_checkpoint, model_dir, **task):
  params = train.build_params("albert_tiny_pretrain", params_override=_params(init_checkpoint, **task))
  trainer = Trainer(params, str(model_dir))
  trainer._initialize_or_resume()  # pylint: disable=protected-access
  return trainer


@pytest.mark.parametrize("form", ["native", "hf", "tf1"])
def test_init_checkpoint_restores_encoder_mlm_and_sop_heads_bit_exactly(source, tmp_path, form):
  trainer = _initialized(str(source["root"] / form), tmp_path / "run")
  restored = {n: v.numpy() for n, v in tf1_variable_map(trainer.model).items()}
  assert set(restored) == set(source["weights"])
  heads = [n for n in restored if n.startswith("cls/predictions/") or n.startswith("cls/seq_relationship/")]
  assert len(heads) >= 6, heads  # MLM transform dense + LayerNorm + output bias, SOP weights + bias
  for name, value in source["weights"].items():
    np.testing.assert_array_equal(restored[name], value, err_msg=name)
  assert trainer.step == 0  # a fresh optimizer


@pytest.mark.slow
def test_continued_pretraining_from_a_runs_checkpoint_starts_a_fresh_optimizer(tmp_path):
  first = train.run("albert_tiny_pretrain", "train", str(tmp_path / "a"), params_override=_params("", steps=2))
  assert first["global_step"] == 2
  prefix = f"{tmp_path / 'a'}/ckpt-2"
  reference = Trainer(train.build_params("albert_tiny_pretrain", params_override=_params("")), str(tmp_path / "a"))
  reference.restore_latest()
  expected = {n: v.numpy() for n, v in tf1_variable_map(reference.model).items()}
  for init in (prefix, str(tmp_path / "a")):  # a checkpoint prefix, and the run's model_dir itself
    trainer = _initialized(init, tmp_path / f"b{len(init)}")
    assert trainer.step == 0
    slots = [v for v in trainer.optimizer.variables if len(v.shape) and v.shape[0] > 1]
    assert slots and all(int(np.count_nonzero(v.numpy())) == 0 for v in slots)  # no moments carried over
    for name, value in tf1_variable_map(trainer.model).items():
      np.testing.assert_array_equal(value.numpy(), expected[name], err_msg=name)
  result = train.run("albert_tiny_pretrain", "train", str(tmp_path / "c"), params_override=_params(prefix, steps=1))
  assert result["global_step"] == 1


def test_missing_head_is_named_unless_allowed(source, tmp_path):
  state, _ = hf.read_hf_weights(str(source["root"] / "hf"))
  from safetensors.numpy import save_file
  hub = tmp_path / "hub"
  hub.mkdir()
  (hub / "config.json").write_text((source["root"] / "hf" / "config.json").read_text())
  save_file({k: v for k, v in state.items() if not k.startswith("sop_classifier")}, str(hub / "model.safetensors"))
  with pytest.raises(ValueError, match="seq_relationship"):
    _initialized(str(hub), tmp_path / "r1")
  trainer = _initialized(str(hub), tmp_path / "r2", init_checkpoint_allow_missing=["cls/seq_relationship/*"])
  restored = {n: v.numpy() for n, v in tf1_variable_map(trainer.model).items()}
  name = "cls/predictions/output_bias"
  np.testing.assert_array_equal(restored[name], source["weights"][name])
