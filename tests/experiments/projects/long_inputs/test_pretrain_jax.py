"""experiments.projects.long_inputs.pretrain_jax:
the masking of the long sequences is the pretraining data's (15 %, whole words,
80/10/10, never [CLS]/[SEP]); `prepare` keeps the corpus's pieces; `pretrain` runs under Keras' JAX backend with
TensorFlow and SentencePiece absent (the accelerator host's situation), learns, and the extended model before training
predicts the original model's short windows exactly as the original does (the copied position rows).

Never timed; a tiny model on the CPU, the pretraining in its own process (`sys.modules[name] = None` marks a module
missing, as tests/conftest.py `without_tensorflow`).
"""

import importlib.util
import json
import os
import pathlib
import random
import subprocess
import sys

import numpy as np
import pytest

from data_prep import pretraining_instances as pi
from experiments.projects.long_inputs import pretrain_jax as lp
from official_albert import AlbertConfig
from official_albert import AlbertPretrainer
from official_albert.checkpoints import native
from official_albert.tokenization import FullTokenizer
from tests.conftest import CHILD_PYTHONPATH

REPO_ROOT = pathlib.Path(__file__).resolve().parents[4]
_WITHOUT_TF_AND_SPM = ("import sys\n"
                       "for name in ('tensorflow', 'tensorflow_text', 'tf_keras', 'sentencepiece'):\n"
                       "  sys.modules[name] = None\n"
                       "from experiments.projects.long_inputs.pretrain_jax import console_main\n"
                       "console_main()\n")
_WORDS = ("the model reads every document and learns which word comes next in a long sequence of text while "
          "attention blocks look at their neighbours and a few random places far away").split()


def _write_corpus(path: pathlib.Path, documents: int, seed: int) -> None:
  """Documents of sentences drawn from a small vocabulary with skewed frequencies (something to learn)."""
  rng = np.random.default_rng(seed)
  p = 1.0 / np.arange(1, len(_WORDS) + 1)
  lines = []
  for _ in range(documents):
    for _ in range(rng.integers(4, 10)):
      lines.append(" ".join(rng.choice(_WORDS, size=rng.integers(6, 14), p=p / p.sum())) + ".")
    lines.append("")
  path.write_text("\n".join(lines), encoding="utf-8")


def _vocab(spm_model_file: str) -> pi.VocabInfo:
  sp = FullTokenizer(spm_model_file).sp_model
  return pi.VocabInfo.from_pieces([sp.IdToPiece(i) for i in range(sp.GetPieceSize())])


def test_masking_is_the_pretraining_datas_on_full_windows(tmp_path, spm_model_file):
  _write_corpus(tmp_path / "text.txt", 120, seed=1)
  tokenizer, vocab = FullTokenizer(spm_model_file), _vocab(spm_model_file)
  documents = lp.read_documents(str(tmp_path / "text.txt"))
  ids = [np.concatenate([tokenizer.encode_ids(line) for line in d]) for d in documents]
  offsets = np.cumsum([0] + [len(x) for x in ids])
  stream = lp.piece_stream(np.concatenate(ids).astype(np.uint16), offsets, vocab.sep_id)
  assert len(stream) == offsets[-1] + len(documents) - 1 and np.sum(stream == vocab.sep_id) == len(documents) - 1
  windows = lp.heldout_windows(stream, 128, len(stream), vocab.cls_id, vocab.sep_id)
  assert windows.shape[1] == 128 and len(windows) == len(stream) // 126
  np.testing.assert_array_equal(windows[1, 1:-1], stream[126:252])  # consecutive, contiguous
  data = lp.mask_windows(windows, vocab, 0.15, 3, random.Random(0))
  again = lp.mask_windows(windows, vocab, 0.15, 3, random.Random(0))
  for key in data:  # the held-out masking is fixed by its seed
    np.testing.assert_array_equal(data[key], again[key])
  assert data["masked_lm_positions"].shape == (len(windows), lp.num_predictions(128)) == (len(windows), 20)
  budget = round(128 * 0.15)
  counts = data["masked_lm_weights"].sum(axis=1)
  assert counts.max() <= budget and counts.mean() > budget - 1.5, counts  # 15 %, whole words may leave a slot
  replaced = {"mask": 0, "keep": 0, "random": 0}
  for row in range(len(windows)):
    n = int(counts[row])
    positions = data["masked_lm_positions"][row, :n]
    assert np.all(np.diff(positions) > 0) and np.all(data["masked_lm_weights"][row, n:] == 0)
    original = windows[row]
    assert not np.isin(original[positions], [vocab.cls_id, vocab.sep_id, 0]).any()  # never [CLS]/[SEP]/pad
    np.testing.assert_array_equal(data["masked_lm_ids"][row, :n], original[positions])
    words = data["input_word_ids"][row]
    unmasked = np.setdiff1d(np.arange(128), positions)
    np.testing.assert_array_equal(words[unmasked], original[unmasked])
    replaced["mask"] += int(np.sum(words[positions] == vocab.mask_id))
    replaced["keep"] += int(np.sum(words[positions] == original[positions]))
    replaced["random"] += int(np.sum((words[positions] != vocab.mask_id) & (words[positions] != original[positions])))
    # Whole words: a masked continuation piece has the piece before it (same word) masked too.
    chosen = set(positions.tolist())
    for p in positions:
      if not vocab.is_start[original[p]] and original[p - 1] not in (vocab.cls_id, vocab.sep_id):
        assert p - 1 in chosen, (row, p)
  total = sum(replaced.values())
  assert total > 2000
  assert abs(replaced["mask"] / total - 0.8) < 0.04 and abs(replaced["keep"] / total - 0.1) < 0.03, replaced
  assert abs(replaced["random"] / total - 0.1) < 0.03, replaced


@pytest.mark.parametrize("folder", ["model", "model_short"])
def test_saving_over_the_prepared_model_is_refused_before_training(tmp_path, folder):
  """Review s56: --save_model_dir=<output_dir>/model replaced the prepared model; the next run started from trained
  weights, its baselines wrong."""
  with pytest.raises(ValueError, match="is the prepared model this stage starts from"):
    lp.pretrain(str(tmp_path), save_model_dir=str(tmp_path / folder))


def test_masked_slots_scale_with_length():
  assert [lp.num_predictions(n) for n in (32, 128, 512, 4096)] == [5, 20, 77, 615]


@pytest.mark.large
@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("jax") is None, reason="jax is not installed (requirements-jax.txt)")
def test_prepare_then_pretrain_without_tensorflow_learns_and_keeps_the_short_model(tmp_path, spm_model_file):
  pretrained, corpus, out = tmp_path / "pretrained", tmp_path / "corpus", tmp_path / "out"
  corpus.mkdir()
  _write_corpus(corpus / "train.txt", 300, seed=2)
  _write_corpus(corpus / "heldout.txt", 30, seed=3)
  native.save_pretrained(AlbertPretrainer(AlbertConfig(
      vocab_size=1000, embedding_size=16, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
      intermediate_size=64, max_position_embeddings=32)), str(pretrained))
  info = lp.prepare(str(pretrained), str(corpus), str(out), lp.PretrainSettings(seq_length=256),
                    spm_model_file=spm_model_file, log=lambda *_: None)
  assert info["short_seq_length"] == 32
  assert json.loads((out / lp.MODEL_DIR / "config.json").read_text())["max_position_embeddings"] == 256
  # The pieces are the tokenizer's, document by document.
  tokenizer = FullTokenizer(spm_model_file)
  with np.load(out / lp.PIECES_FILE) as f:
    ids, offsets = f["heldout_ids"], f["heldout_offsets"]
  documents = lp.read_documents(str(corpus / "heldout.txt"))
  assert ids.dtype == np.uint16 and len(offsets) == len(documents) + 1
  np.testing.assert_array_equal(ids[offsets[2]:offsets[3]], [i for line in documents[2]
                                                              for i in tokenizer.encode_ids(line)])

  env = {k: v for k, v in os.environ.items() if k != "KERAS_BACKEND"}
  env.update(PYTHONPATH=CHILD_PYTHONPATH, JAX_PLATFORMS="cpu", OMP_NUM_THREADS="1")
  result = subprocess.run([sys.executable, "-c", _WITHOUT_TF_AND_SPM, "--stage=pretrain", f"--output_dir={out}",
                           "--attention_type=block_sparse", "--block_size=16", "--train_steps=40", "--batch_size=4",
                           "--learning_rate=1e-2", f"--save_model_dir={out / 'continued'}"],
                          cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=1800)
  assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-5000:]
  summary = json.loads((out / lp.SUMMARY_FILE).read_text())
  assert json.loads(result.stdout.strip().splitlines()[-1])["extended_after"] == round(summary["final"]["accuracy"], 4)
  assert summary["device"] and summary["settings"]["max_predictions_per_seq"] == 39
  # Equivalence: the extended model (rows 0-31 copied bit for bit) on the original's 32-piece windows is the original.
  original, extended = summary["evaluations"]["original_at_short"], summary["evaluations"]["extended_at_short"]
  assert original["masked"] == extended["masked"] > 100
  assert original["accuracy"] == extended["accuracy"] and abs(original["loss"] - extended["loss"]) < 1e-6
  # Both evaluation lengths read the same held-out text.
  assert summary["eval_history"][0]["windows"] * 254 == summary["heldout_text_pieces"] == original["windows"] * 30
  assert [e["step"] for e in summary["eval_history"]] == [0, 10, 20, 30, 40]
  # Learns (block_sparse at 256 > the dense fallback's 176): training and held-out MLM loss fall clearly.
  loss = np.asarray(summary["train_loss"])
  assert np.all(np.isfinite(loss)) and len(loss) == 40
  assert loss[-5:].mean() < loss[:5].mean() - 1.0, loss
  history = summary["eval_history"]
  assert history[-1]["loss"] < history[0]["loss"] - 1.0 and history[-1]["accuracy"] > history[0]["accuracy"], history
  # The saved model is the trained one: reloaded here (TensorFlow backend), it scores the held-out text as the run's
  # last evaluation did (the same masking; float32 TF vs JAX may flip a near-tie).
  continued = lp.load_pretrainer(str(out / "continued"), {"attention_type": "block_sparse", "block_size": 16,
                                                          "num_random_blocks": 3})
  assert continued.config.max_position_embeddings == 256
  info, arrays, vocab = lp.load_prepared(str(out))
  settings = lp.PretrainSettings(**{k: v for k, v in summary["settings"].items() if k != "max_predictions_per_seq"})
  heldout, _ = lp.heldout_sets(lp.piece_stream(arrays["heldout_ids"], arrays["heldout_offsets"], vocab.sep_id), vocab,
                               settings, info["short_seq_length"])
  data = heldout[256]
  logits = np.asarray(continued({k: data[k] for k in lp._ENCODER_FEATURES}, training=False)["mlm_logits"])  # pylint: disable=protected-access
  hits = np.sum((logits.argmax(-1) == data["masked_lm_ids"]) * data["masked_lm_weights"])
  assert abs(hits - summary["final"]["accuracy"] * summary["final"]["masked"]) <= 2, (hits, summary["final"])
