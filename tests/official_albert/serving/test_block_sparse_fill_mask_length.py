"""A block-sparse model directory's `fill_mask` runs at its recorded length, as its export does (s33 fixC item 4).

A block_sparse model's pattern (the last global block, the random blocks) follows the padded length, so its rows are
padded to a fixed one (`pads_to_cap`). `fill_mask(model_dir)` padded to max_position_embeddings, while classify and
the other pipelines pad to the directory's recorded length (`default_seq_length`: params.yaml's predict length, else
the positions), which an export at that --seq_length runs at: the same text got another answer from the directory
than from its export, at more padding. The weights are perturbed: with the untrained ones the answers at the two
lengths agree and the test could not tell them apart.
"""

import keras
import numpy as np
import pytest

from official_albert import AlbertConfig
from official_albert import pipelines
from official_albert.checkpoints.loading import build_model
from official_albert.checkpoints.native import save_pretrained
from official_albert.serving import export
from official_albert.serving import pipelines as pipeline_module
from tests import tiny
from tests.official_albert.serving.random_models import perturb_weights

SPARSE = dict(attention_type="block_sparse", block_size=4, num_random_blocks=1, block_sparse_seed=7)
RECORDED = 48  # < the 64 positions, > the dense fallback's (5 + 2·1)·4 = 28: the sparse pattern runs
TEXT = "the invoice is wrong and it crashes on start, great work on the [MASK] fix"
LONG = "the invoice is wrong and it crashes on start " * 2 + "and great work [MASK] ."  # (57 pieces: past 48)


@pytest.fixture(scope="module")
def sparse_run(tmp_path_factory):
  root = tmp_path_factory.mktemp("sparse_fill_mask")
  keras.utils.set_random_seed(11)
  model = build_model("pretrainer", AlbertConfig(**dict(tiny.MODEL, **SPARSE)))
  perturb_weights(model, seed=4)
  model_dir = root / "run"
  save_pretrained(model, str(model_dir), spm_model_file=str(tiny.SPM_MODEL_FILE))
  (model_dir / "params.yaml").write_text(f"task:\n  train_data:\n    seq_length: {RECORDED}\n", encoding="utf-8")
  return str(model_dir), export.export_from_model_dir(str(model_dir), str(root / "sm"), head="pretrainer",
                                                      seq_length=RECORDED, top_k=5)


def _answer(words):
  return [w["token"] for w in words], [w["score"] for w in words]


@pytest.mark.slow  # (~40 s: the pretrainer SavedModel's text signatures trace the in-graph tokenizer)
def test_the_directory_answers_as_its_export_at_the_recorded_length(sparse_run):
  model_dir, exported = sparse_run
  ours_tokens, ours = _answer(pipelines.fill_mask(model_dir, TEXT, top_k=5))
  theirs_tokens, theirs = _answer(pipelines.fill_mask(exported, TEXT, top_k=5))
  assert ours_tokens == theirs_tokens
  np.testing.assert_allclose(ours, theirs, rtol=1e-4)  # (at 64: 0.5% apart; the scores are ~1/1,000 pieces)
  # A text longer than the recorded length runs at the positions, and does not change a shorter batch-mate's answer.
  batched = pipelines.fill_mask(model_dir, [TEXT, LONG], top_k=5)
  np.testing.assert_allclose(_answer(batched[0])[1], ours, rtol=1e-5)
  assert _answer(batched[1])[0] == _answer(pipelines.fill_mask(model_dir, LONG, top_k=5))[0]


def test_the_recorded_length_is_what_the_directory_pads_to(sparse_run, monkeypatch):
  """(Without the export: the rows `fill_mask` runs are RECORDED long, not the 64 positions.)"""
  model_dir, _ = sparse_run
  lengths = []
  real = pipeline_module.pack_ids

  def pack_ids(ids_a, ids_b, length):
    lengths.append(length)
    return real(ids_a, ids_b, length)

  monkeypatch.setattr(pipeline_module, "pack_ids", pack_ids)
  pipelines.fill_mask(model_dir, [TEXT, LONG], top_k=2)
  assert sorted(set(lengths)) == [RECORDED, tiny.MODEL["max_position_embeddings"]]
