"""Vocabulary and label checks at start-up, before a step (issue 28 item 3): token files, static records, the
SentencePiece model, the init checkpoint's embedding table and `vocab_size` agree, or one error names the files, the
sizes and the fix; a label seen only in the dev file is reported before training, not after the first steps."""

import json
import logging
import os

import keras
import numpy as np
import pytest

from data_prep import create_pretraining_data as cpd
from data_prep import pretraining_instances as pi
from data_prep import tokenize_corpus as tc
from data_prep import train_sentencepiece
from official_albert import AlbertConfig
from official_albert import AlbertPretrainer
from official_albert import train
from official_albert.checkpoints import native
from official_albert.training.vocabulary import VocabularyError
from tasks.text import TextDataError

SMALL = {"preset": "", "embedding_size": 8, "hidden_size": 16, "num_hidden_layers": 1, "num_attention_heads": 2,
         "intermediate_size": 32, "max_position_embeddings": 32}
WORDS = ("the module returns a value when the function is called with arguments and the result is cached for later "
         "use by other threads in the process while errors are raised as exceptions").split()


def _corpus(path, docs=30):
  rng = np.random.default_rng(0)
  text = "\n\n".join("\n".join(" ".join(rng.choice(WORDS, rng.integers(4, 14))).capitalize() + "."
                               for _ in range(rng.integers(2, 6))) for _ in range(docs))
  path.write_text(text + "\n", encoding="utf-8")
  return str(path)


@pytest.fixture(scope="module")
def data(tmp_path_factory, spm_model_file):
  """A corpus tokenized (dynamic) and as static records with the 1,000-piece test model, and another SentencePiece
  model of a different vocabulary."""
  root = tmp_path_factory.mktemp("vocab")
  corpus = _corpus(root / "corpus.txt")
  tc.tokenize_corpus(tc.TokenizeConfig(input_file=corpus, spm_model_file=spm_model_file, output_dir=str(root / "tok"),
                                       progress=False))
  cpd.create_pretraining_data(cpd.GenerationConfig(
      input_file=corpus, output_file=str(root / "static"), spm_model_file=spm_model_file,
      options=pi.InstanceOptions(max_seq_length=32, max_predictions_per_seq=4), dupe_factor=2, progress=False))
  other = train_sentencepiece.train_sentencepiece([corpus], str(root / "other"), vocab_size=60, hard_vocab_limit=False)
  return {"root": root, "tokens": str(root / "tok" / "tokens-*"), "static": str(root / "static*"), "other": other,
          "spm": spm_model_file}


def _pretrain(data_path, vocab_size, dynamic=False, **task):
  section = {"input_path": data_path, "global_batch_size": 4, "seq_length": 32, "max_predictions_per_seq": 4,
             "dynamic_masking": dynamic}
  return json.dumps({"task": dict({"model": dict(SMALL, vocab_size=vocab_size), "train_data": section,
                                   "validation_data": dict(section, is_training=False)}, **task),
                     "trainer": {"train_steps": 1, "steps_per_loop": 1, "checkpoint_interval": 1,
                                 "summary_interval": 1, "validation_steps": 1},
                     "runtime": {"distribution_strategy": "one_device"}})


def _nothing_trained(model_dir):
  return not os.path.exists(model_dir) or not [f for f in os.listdir(model_dir) if f.startswith(("ckpt", "spiece"))]


@pytest.mark.slow
def test_token_files_of_another_sentencepiece_model_are_refused_before_a_step(data, tmp_path):
  model_dir = str(tmp_path / "m")
  with pytest.raises(VocabularyError) as error:
    train.run("albert_tiny_pretrain", "train", model_dir,
              params_override=_pretrain(data["tokens"], 1000, dynamic=True, spm_model_file=data["other"]))
  message = str(error.value)
  assert "tokens-000000" in message and "another SentencePiece model" in message
  assert f"task.spm_model_file={data['other']}" in message
  assert _nothing_trained(model_dir)  # and, above all, the wrong spiece.model was not copied into model_dir
  # The same files with their own model train.
  result = train.run("albert_tiny_pretrain", "train", str(tmp_path / "ok"),
                     params_override=_pretrain(data["tokens"], 1000, dynamic=True, spm_model_file=data["spm"]))
  assert result["global_step"] == 1


def test_static_records_with_ids_beyond_the_vocabulary_are_named_at_start_up(data, tmp_path):
  model_dir = str(tmp_path / "m")
  with pytest.raises(VocabularyError) as error:
    train.run("albert_tiny_pretrain", "train", model_dir, params_override=_pretrain(data["static"], 100))
  message = str(error.value)
  assert "task.train_data:" in message and "static" in message and "record " in message
  assert "not in [0, 100)" in message and "task.model.vocab_size=100" in message and "Remake them" in message
  assert _nothing_trained(model_dir)


def test_a_sentencepiece_model_larger_than_the_model_is_refused(data, tmp_path):
  with pytest.raises(VocabularyError, match=r"test_spm\.model has 1000 pieces but task\.model\.vocab_size is 500"):
    train.run("albert_tiny_pretrain", "train", str(tmp_path / "m"),
              params_override=_pretrain(data["static"], 500, spm_model_file=data["spm"]))


@pytest.fixture(scope="module")
def pretrained(tmp_path_factory, spm_model_file):
  root = tmp_path_factory.mktemp("pretrained")
  keras.utils.set_random_seed(1)
  shape = {k: v for k, v in SMALL.items() if k != "preset"}
  model = AlbertPretrainer(AlbertConfig(**shape, vocab_size=1000))
  model({"input_word_ids": np.ones([1, 8], np.int32), "input_mask": np.ones([1, 8], np.int32),
         "input_type_ids": np.zeros([1, 8], np.int32), "masked_lm_positions": np.zeros([1, 2], np.int32)})
  native.save_pretrained(model, str(root / "model"), spm_model_file=spm_model_file)
  return str(root / "model")


def _csv(path, rows):
  path.write_text("text,label\n" + "".join(f"{t},{y}\n" for t, y in rows), encoding="utf-8")
  return str(path)


def _finetune(init, train_csv, dev_csv, **task):
  return json.dumps({"task": dict({"init_checkpoint": init, "train_data": {"input_path": train_csv,
                                                                           "global_batch_size": 4},
                                   "validation_data": {"input_path": dev_csv, "global_batch_size": 4}}, **task),
                     "trainer": {"train_steps": 2, "steps_per_loop": 2, "checkpoint_interval": 2,
                                 "validation_interval": 2, "summary_interval": 2, "warmup_steps": 0},
                     "runtime": {"distribution_strategy": "one_device"}})


def test_init_checkpoint_embedding_table_and_its_sentencepiece_model_are_checked(pretrained, data, tmp_path):
  train_csv = _csv(tmp_path / "train.csv", [("good film", "pos"), ("bad film", "neg")] * 4)
  # A config.json that disagrees with the weights beside it.
  broken = tmp_path / "broken"
  broken.mkdir()
  for name in os.listdir(pretrained):
    (broken / name).write_bytes(open(os.path.join(pretrained, name), "rb").read())
  config = json.loads((broken / "config.json").read_text())
  (broken / "config.json").write_text(json.dumps(dict(config, vocab_size=2000)))
  with pytest.raises(VocabularyError, match=r"word-embedding table .*model\.ckpt\) has 1000 rows but "
                                            r"task\.model\.vocab_size is 2000"):
    train.run("text_classification", "train", str(tmp_path / "a"), params_override=_finetune(str(broken), train_csv,
                                                                                               train_csv))
  # task.spm_model_file that is not the checkpoint's own SentencePiece model.
  with pytest.raises(VocabularyError, match=r"is not the SentencePiece model of task\.init_checkpoint"):
    train.run("text_classification", "train", str(tmp_path / "b"),
              params_override=_finetune(pretrained, train_csv, train_csv, spm_model_file=data["other"]))


def test_a_label_seen_only_in_dev_is_reported_before_training(pretrained, tmp_path):
  train_csv = _csv(tmp_path / "train.csv", [("good film", "pos"), ("bad film", "neg")] * 4)
  dev_csv = _csv(tmp_path / "dev.csv", [("good film", "pos"), ("so so film", "neutral")])
  model_dir = str(tmp_path / "m")
  with pytest.raises(TextDataError, match=r"dev\.csv:3: column 'label': label 'neutral' was not seen in training"):
    train.run("text_classification", "train_and_eval", model_dir,
              params_override=_finetune(pretrained, train_csv, dev_csv))
  assert _nothing_trained(model_dir)


@pytest.mark.parametrize("feature", ["input_ids", "masked_lm_ids"])
def test_the_vocabulary_boundary_an_id_equal_to_vocab_size_is_refused_one_below_accepted(tmp_path, feature):
  """Ids run 0 … vocab_size − 1: a record whose largest id is vocab_size (the one id with no embedding row) is
  refused, vocab_size − 1 passes; far-off ids alone would not catch a `>` written for `>=`."""
  import types

  import tensorflow as tf

  from official_albert.training.vocabulary import check_vocabulary
  path = str(tmp_path / "records.tfrecord")
  with tf.io.TFRecordWriter(path) as writer:
    for top in (7, 41, 12):  # the largest id, 41, in the second record
      ids = tf.train.Feature(int64_list=tf.train.Int64List(value=[2, top, 3]))
      writer.write(tf.train.Example(features=tf.train.Features(feature={feature: ids})).SerializeToString())
  read = types.SimpleNamespace(files=(path,), compression_type="")

  def check(vocab_size):
    params = types.SimpleNamespace(task=types.SimpleNamespace(
        model=types.SimpleNamespace(vocab_size=vocab_size), init_checkpoint="", spm_model_file=""))
    check_vocabulary(params, "train", object(), reads=[("task.train_data", read)])

  with pytest.raises(VocabularyError, match=rf"record 1: {feature} holds id 41, not in \[0, 41\)"):
    check(41)
  check(42)  # 41 is the last row of a 42-row table


@pytest.mark.slow
def test_a_new_model_much_larger_than_its_sentencepiece_model_is_warned(data, tmp_path, caplog):
  """Issue 44: the tiny preset's 4,000 rows with a 2,000-piece model said nothing; now the start-up names the fix."""
  with caplog.at_level(logging.WARNING):
    train.run("albert_tiny_pretrain", "train", str(tmp_path / "m"),
              params_override=_pretrain(data["static"], 3000, spm_model_file=data["spm"]))
  assert ("has 1000 pieces but the new model's task.model.vocab_size is 3000: 2000 embedding rows will never be used"
          in caplog.text) and "Set task.model.vocab_size=1000." in caplog.text
