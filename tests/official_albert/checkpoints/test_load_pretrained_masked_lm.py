"""`load_pretrained` reads an HF AlbertForMaskedLM folder (what the Hub's albert-base-v2 is) as `load_model` does.

AlbertForMaskedLM saves neither a pooler nor a sentence-order head; `load_model` allows both for such a folder, and
`load_pretrained` used to refuse it with a mismatch naming the four variables (and the README's `allow_missing` hint
did not cover the pooler).
"""

import numpy as np

from official_albert import load_pretrained
from official_albert.checkpoints import loading
from tests.official_albert.checkpoints.test_convert_checkpoint import _inputs
from tests.official_albert.checkpoints.test_convert_checkpoint import SMALL
from tests.official_albert.oracle import hf_config
from tests.official_albert.oracle import make_hf_model
from tests.official_albert.oracle import save_hf
from tests.official_albert.oracle import to_torch
from tests.official_albert.oracle import torch

ABSENT = ["bert/pooler/dense/bias", "bert/pooler/dense/kernel", "cls/seq_relationship/output_bias",
          "cls/seq_relationship/output_weights"]


def test_load_pretrained_reads_a_masked_lm_folder_as_load_model_does(tmp_path):
  hf_model = make_hf_model("AlbertForMaskedLM", hf_config(**SMALL), seed=3)
  directory = save_hf(hf_model, tmp_path / "hf_mlm")
  model = load_pretrained(directory)
  reference, summary = loading.load_model(directory)
  assert model.load_summary["missing_allowed"] == summary["missing_allowed"] == ABSENT

  ours = {v.path: v.numpy() for v in model.encoder.weights if "pooler" not in v.path}
  theirs = {v.path: v.numpy() for v in reference.encoder.weights if "pooler" not in v.path}
  assert ours.keys() == theirs.keys() and ours
  for name, value in ours.items():
    np.testing.assert_array_equal(value, theirs[name], err_msg=name)

  inputs = _inputs()
  with torch.no_grad():
    hidden = hf_model.albert(**to_torch(inputs)).last_hidden_state.numpy()
  np.testing.assert_allclose(model.encoder(inputs)["sequence_output"].numpy(), hidden, atol=1e-5)


def test_into_a_given_pretrainer_the_absent_heads_must_be_named(tmp_path):
  # Continued pretraining (restore_pretrainer) loads into its own model: a random SOP head and pooler must not start
  # silently there; `allow_missing` (task.init_checkpoint_allow_missing) names them.
  import pytest

  from official_albert import AlbertConfig
  from official_albert import AlbertPretrainer
  from official_albert.checkpoints.names import CheckpointMismatchError
  directory = save_hf(make_hf_model("AlbertForMaskedLM", hf_config(**SMALL), seed=3), tmp_path / "hf_mlm")
  config = AlbertConfig.from_json_file(f"{directory}/config.json")
  with pytest.raises(CheckpointMismatchError, match="pooler"):
    load_pretrained(directory, model=AlbertPretrainer(config))
  model = load_pretrained(directory, model=AlbertPretrainer(config),
                          allow_missing=["bert/pooler/*", "cls/seq_relationship/*"])
  assert model.load_summary["missing_allowed"] == ABSENT
