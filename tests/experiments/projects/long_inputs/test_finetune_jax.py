"""experiments.projects.long_inputs.finetune_jax:
`prepare` writes the text_classification task's own records, and `finetune` runs under
Keras' JAX backend with TensorFlow absent (a GPU host's situation) and learns the long-range task's training set.

Never timed; a tiny model on the CPU, the fine-tuning in its own process (`sys.modules[name] = None` marks TensorFlow
missing, as tests/experiments/test_backend_check.py).
"""

import dataclasses
import importlib.util
import json
import os
import pathlib
import subprocess
import sys

import keras
import numpy as np
import pytest

from data_prep import corpus_tasks
from experiments.projects.long_inputs import finetune_jax as long_range_jax
from experiments.projects.long_inputs import pools as long_range_pools
from experiments.projects.long_inputs import study as long_range
from official_albert import AlbertConfig
from official_albert import AlbertPretrainer
from official_albert.checkpoints import hf
from official_albert.checkpoints import native
from official_albert.tokenization import FullTokenizer
from tasks.text import data as text_data
from tests.conftest import CHILD_PYTHONPATH
from tests.conftest import without_tensorflow

REPO_ROOT = pathlib.Path(__file__).resolve().parents[4]
_WITHOUT_TENSORFLOW = without_tensorflow("experiments.projects.long_inputs.finetune_jax")


def _finetune_without_tensorflow(out: pathlib.Path, summary_file: str, *flags: str) -> dict:
  """`--stage=finetune` of `out` in a process where TensorFlow cannot be imported (JAX on the CPU); its summary."""
  env = {k: v for k, v in os.environ.items() if k != "KERAS_BACKEND"}
  env.update(PYTHONPATH=CHILD_PYTHONPATH, JAX_PLATFORMS="cpu", OMP_NUM_THREADS="1")
  result = subprocess.run([sys.executable, "-c", _WITHOUT_TENSORFLOW, "--stage=finetune", f"--output_dir={out}",
                           f"--summary_file={summary_file}", *flags],
                          cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=1800)
  assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-5000:]
  return json.loads((out / summary_file).read_text())


@pytest.mark.large
@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("jax") is None, reason="jax is not installed (requirements-jax.txt)")
def test_prepare_then_finetune_without_tensorflow(tmp_path, spm_model_file):
  pretrained, out = tmp_path / "pretrained", tmp_path / "out"
  # A seeded draw: the weights were whatever the worker's earlier tests left the generators at, and one draw in CI
  # (first epoch's loss 1.03) stayed at 0.65; seeds 0-3 all memorise (last epoch 0.002-0.12), seed 0 to 0.002-0.003.
  keras.utils.set_random_seed(0)
  original_model = AlbertPretrainer(AlbertConfig(
      vocab_size=1000, embedding_size=8, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
      intermediate_size=32, max_position_embeddings=32, initializer_range=0.5))
  native.save_pretrained(original_model, str(pretrained))
  # initializer_range 0.5: at 0.02 this untrained model's [CLS] output hardly depends on its input (attention near
  # uniform over 256 small values), so its loss stayed at ln 2 and a learning check could only compare noise.
  settings = dataclasses.replace(long_range.LongRangeSettings.quick(), train_steps=48, learning_rate=3e-3)
  info = long_range_jax.prepare(str(pretrained), str(out), settings, spm_model_file=spm_model_file,
                                log=lambda *_: None)
  assert 0 <= info["dev_key_within_truncation"] <= 1
  # What the records came from (review s56: a summary of runs on another prepared model was merged with these), and
  # the model's casing they were tokenized with (uncased here: no tokenizer_config.json).
  assert info["pretrained"]["dir"] == str(pretrained) and info["pretrained"]["stamp"]
  assert info["tokenizer"]["do_lower_case"] is True
  with np.load(out / long_range_jax.RECORDS_FILE) as f:
    records = dict(f.items())
  # The records are the task's: the same CSV read and packed by tasks.text.data at each length.
  examples = text_data.read_text_examples(str(out / "data" / "train.csv"), text_data.ReadOptions())
  tokenizer = FullTokenizer(spm_model_file)
  for length in (settings.seq_length, settings.truncated_length):
    expected = list(text_data.records(examples, tokenizer, length, "class", ["0", "1"]))
    np.testing.assert_array_equal(records[f"train_{length}_input_word_ids"],
                                  np.stack([r["input_word_ids"] for r in expected]))
    np.testing.assert_array_equal(records[f"train_{length}_label_ids"], [r["label_ids"] for r in expected])
  assert json.loads((out / long_range_jax.MODEL_DIR / "config.json").read_text())["max_position_embeddings"] == 512

  summary = _finetune_without_tensorflow(out, long_range_jax.SUMMARY_FILE, "--attention_types=block_sparse,truncated",
                                         f"--save_weights_dir={out / 'stage1'}")
  assert set(summary["runs"]) == {"block_sparse", "truncated"}  # chunked: test_study.py here
  assert summary["device"]
  for name, run in summary["runs"].items():
    assert run["seq_length"] == (32 if name == "truncated" else 256)
    assert [step for step, _ in run["eval_history"]] == [0, 12, 24, 36, 48]
    loss = np.asarray(run["train_loss"])
    assert np.all(np.isfinite(loss)) and len(loss) == 48
    # Learns: 16 training documents are seen 12 times (4 steps an epoch); the last epoch's loss is far below chance
    # (ln 2) and the first epoch's (measured on an AMD EPYC: about 0.01 against 0.9).
    assert loss[-4:].mean() < min(0.3, loss[:4].mean() / 2), (name, loss)
    assert set(run["probes"]) == {"dev_keys_alone", "train_keys_alone", "seen_keys_documents"}
    assert all(0 <= p["accuracy"] <= 1 and p["examples"] > 0 for p in run["probes"].values())
  # A curriculum's next stage starts where this one ended: its step-0 accuracy is this stage's last one.
  stage2 = _finetune_without_tensorflow(out, "stage2.json", "--attention_types=block_sparse", "--train_steps=0",
                                        f"--init_weights_dir={out / 'stage1'}")["runs"]["block_sparse"]
  assert stage2["eval_history"] == [[0, summary["runs"]["block_sparse"]["dev_accuracy"]]]
  # Another model of the same pieces replaces the prepared one (the original at its 32 positions, as an HF directory:
  # the truncated run reads only those, so its step-0 accuracy is the prepared model's); one with too few positions or
  # another vocabulary is refused by name.
  original = tmp_path / "original_hf"
  hf.write_hf(original_model, "pretrainer", str(original))
  other = _finetune_without_tensorflow(out, "other.json", "--attention_types=truncated", "--train_steps=0",
                                       f"--pretrained_model_dir={original}")["runs"]["truncated"]
  assert other["pretrained_model"] == str(original)
  assert other["eval_history"] == [summary["runs"]["truncated"]["eval_history"][0]]
  with pytest.raises(ValueError, match="32 positions, fewer than the task's 256"):
    long_range_jax._classifier(str(original), {"attention_type": "dense"}, 256)  # pylint: disable=protected-access
  native.save_pretrained(AlbertPretrainer(AlbertConfig(
      vocab_size=900, embedding_size=8, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
      intermediate_size=32, max_position_embeddings=256)), str(tmp_path / "other_vocab"))
  with pytest.raises(ValueError, match="vocabulary of 900 pieces, the prepared documents use 1000"):
    long_range_jax._classifier(str(tmp_path / "other_vocab"), {"attention_type": "dense"}, 256,  # pylint: disable=protected-access
                               str(out / long_range_jax.MODEL_DIR))


def test_fresh_documents_hold_one_training_key_and_fill_to_length(tmp_path, spm_model_file):
  settings = long_range.LongRangeSettings.full()
  tokenizer = FullTokenizer(spm_model_file)
  pools = corpus_tasks.sentence_pools()
  info = long_range_pools.write_pools(tokenizer, pools, str(tmp_path / "pools.npz"), 0)
  assert info["joined_equals_concatenated"] > 0.95  # a document's pieces are its sentences' pieces, end to end
  with np.load(tmp_path / "pools.npz") as f:
    arrays = dict(f.items())
  documents = long_range_pools.FreshDocuments(arrays, settings, 4096, seed=0)
  batch = documents.batch(16)
  assert batch["input_word_ids"].shape == (16, 4096) and 0 < batch["label_ids"].sum() < 16
  keys = [{tuple(ids) for ids in tokenizer.encode_ids_batch(pools["train"][label])} for label in (0, 1)]
  for ids, mask, label in zip(batch["input_word_ids"], batch["input_mask"], batch["label_ids"]):
    length = int(mask.sum())
    assert settings.min_pieces + 2 <= length <= 4096 and ids[0] == 2 and ids[length - 1] == 3
    text = " ".join(map(str, ids[1:length - 1])) + " "
    assert any(" ".join(map(str, k)) + " " in text for k in keys[label] if len(k) > 6), label


def test_probe_sets_hold_the_keys_alone_and_seen_keys_in_long_documents(tmp_path, spm_model_file):
  settings = long_range.LongRangeSettings.full()
  tokenizer = FullTokenizer(spm_model_file)
  pools = corpus_tasks.sentence_pools()
  long_range_pools.write_pools(tokenizer, pools, str(tmp_path / "pools.npz"), 0)
  with np.load(tmp_path / "pools.npz") as f:
    arrays = dict(f.items())
  probes = long_range_pools.probe_sets(arrays, settings, 4096, count=8)
  dev_keys = [{tuple(ids) for ids in tokenizer.encode_ids_batch(pools["dev"][label])} for label in (0, 1)]
  alone = probes["dev_keys_alone"]
  balanced = min(len(pools["dev"][0]), len(pools["dev"][1]))
  assert alone["label_ids"].tolist() == [0] * balanced + [1] * balanced
  for ids, mask, label in zip(alone["input_word_ids"], alone["input_mask"], alone["label_ids"]):
    length = int(mask.sum())
    assert ids[0] == 2 and ids[length - 1] == 3 and tuple(ids[1:length - 1]) in dev_keys[label]
  train_keys = [{tuple(ids) for ids in tokenizer.encode_ids_batch(pools["train"][label])} for label in (0, 1)]
  assert probes["train_keys_alone"]["label_ids"].tolist() == [0] * 8 + [1] * 8
  for ids, mask, label in zip(*(probes["train_keys_alone"][k] for k in ("input_word_ids", "input_mask", "label_ids"))):
    assert tuple(ids[1:int(mask.sum()) - 1]) in train_keys[label]
  documents = probes["seen_keys_documents"]
  assert documents["input_word_ids"].shape == (8, 4096)
  for ids, mask, label in zip(documents["input_word_ids"], documents["input_mask"], documents["label_ids"]):
    assert int(mask.sum()) >= settings.min_pieces + 2
    text = " ".join(map(str, ids[1:int(mask.sum()) - 1])) + " "
    assert any(" ".join(map(str, k)) + " " in text for k in train_keys[label] if len(k) > 6), label
  # Its own stream: not the training documents' first batch.
  first = long_range_pools.FreshDocuments(arrays, settings, 4096, seed=0).batch(8)
  assert not np.array_equal(first["input_word_ids"], documents["input_word_ids"])


def test_the_task_model_has_no_encoder_dropout_as_the_tensorflow_run(tmp_path):
  """Audit jax24 F4: only the head's dropout was zeroed, so a pretrained model with encoder dropout (ALBERT v1's 0.1)
  fine-tuned under JAX with it while study.py's TensorFlow run, which these runs are compared with, had none."""
  native.save_pretrained(AlbertPretrainer(AlbertConfig(
      vocab_size=50, embedding_size=8, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
      intermediate_size=32, max_position_embeddings=16, hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1)),
      str(tmp_path / "pretrained"))
  classifier = long_range_jax._classifier  # pylint: disable=protected-access
  model = classifier(str(tmp_path / "pretrained"), {"attention_type": "dense"}, 16)
  assert (model.config.hidden_dropout_prob, model.config.attention_probs_dropout_prob) == (0.0, 0.0)
  inputs = {"input_word_ids": np.full((2, 16), 7, np.int32), "input_mask": np.ones((2, 16), np.int32),
            "input_type_ids": np.zeros((2, 16), np.int32)}
  np.testing.assert_array_equal(np.asarray(model(inputs, training=True)["logits"]),
                                np.asarray(model(inputs, training=True)["logits"]))


def test_a_batch_larger_than_the_training_records_is_refused_by_name():
  """Audit jax24 F5: with more --batch_size than prepared training documents (a --quick preparation has 16) no epoch
  yielded a batch and the loop waited forever; the call is refused, naming both numbers."""
  settings = long_range.LongRangeSettings.quick()
  train = {"input_word_ids": np.arange(16 * 8, dtype=np.int32).reshape(16, 8), "label_ids": np.zeros(16, np.int32)}
  training_batches = long_range_jax._training_batches  # pylint: disable=protected-access
  with pytest.raises(ValueError, match="--batch_size=32: the prepared records hold 16 training documents; give at "
                                       "most 16"):
    training_batches(train, settings.replace(batch_size=32), 8, None)  # at the call: no generator to wait on
  batches = training_batches(train, settings.replace(batch_size=16), 8, None)  # as many as the records: one a batch
  assert [sorted(next(batches)["input_word_ids"][:, 0]) for _ in range(2)] == [list(range(0, 128, 8))] * 2


def test_a_wrong_folder_or_attention_type_is_refused_before_any_run(tmp_path):
  """Each named before JAX is chosen or a run starts (an unknown name failed after the runs before it; a folder of
  another binary gave a bare KeyError)."""
  with pytest.raises(ValueError, match=r"attention_types=\['dense'\]: give one or more of \['block_sparse', "):
    long_range_jax.finetune(str(tmp_path), ("dense",))
  with pytest.raises(FileNotFoundError, match=rf"{tmp_path}: no settings.json and .* run --stage=prepare"):
    long_range_jax.finetune(str(tmp_path))
  (tmp_path / long_range_jax.SETTINGS_FILE).write_text('{"train_steps": 3}')
  (tmp_path / long_range_jax.RECORDS_FILE).write_bytes(b"")
  with pytest.raises(ValueError, match=r"settings.json: not the settings of --stage=prepare"):
    long_range_jax.finetune(str(tmp_path))


def test_a_summary_keeps_the_earlier_runs_of_the_same_settings_and_origin(tmp_path):
  """A call for one attention type adds its run to the summary's others (it replaced them) when they were made
  under the same settings, model, weights, documents and device; else they are replaced."""
  settings = long_range.LongRangeSettings.quick()
  origin = {"pretrained_model_dir": "", "init_weights_dir": "", "fresh_documents": False, "device": "cpu"}
  path = tmp_path / "summary.json"
  path.write_text(json.dumps({"settings": dataclasses.asdict(settings), "origin": origin,
                              "runs": {"chunked": {"dev_accuracy": 0.7}}}))
  earlier = long_range_jax._earlier_runs  # pylint: disable=protected-access
  assert earlier(str(path), settings.replace(attention_types=("truncated",)), origin, print) == {
      "chunked": {"dev_accuracy": 0.7}}
  assert earlier(str(path), settings.replace(train_steps=3), origin, print) == {}
  assert earlier(str(path), settings, dict(origin, pretrained_model_dir="other"), print) == {}
  assert earlier(str(tmp_path / "none.json"), settings, origin, print) == {}
