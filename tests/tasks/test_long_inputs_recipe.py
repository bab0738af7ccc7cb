"""The recipe at long lengths, at a tiny width: an extended checkpoint, continued pretraining from it, fine-tuning on
raw text longer than the original table, SQuAD windows as long as the model, and SavedModel export.

"Long" here is 256 tokens for a model whose original table has 32 rows and whose blocks are 8 tokens (block-sparse
attention is sparse beyond (5 + 2·1)·8 = 56 tokens); docs/long_inputs.md has the same commands at 4096.
"""

import csv
import json

import keras
import numpy as np
import pytest

from official_albert import AlbertConfig
from official_albert import AlbertPretrainer
from official_albert import train
from official_albert.checkpoints import convert as convert_lib
from official_albert.checkpoints import native
from official_albert.checkpoints.loading import build_model
from official_albert.checkpoints.names import tf1_variable_map
from official_albert.serving import export
from official_albert.training.trainer import Trainer

LONG = 256
TINY = dict(vocab_size=1000, embedding_size=8, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
            intermediate_size=32, max_position_embeddings=32, hidden_dropout_prob=0.0,
            attention_probs_dropout_prob=0.0)
SPARSE = dict(attention_type="block_sparse", block_size=8, num_random_blocks=1)


@pytest.fixture(scope="module")
def extended(tmp_path_factory):
  """A 32-position pretrainer, extended to LONG positions with block-sparse attention."""
  root = tmp_path_factory.mktemp("extended")
  keras.utils.set_random_seed(7)
  model = AlbertPretrainer(AlbertConfig(**TINY))
  native.save_pretrained(model, str(root / "short"))
  convert_lib.convert("native", str(root / "short"), "native", str(root / "long"), max_position_embeddings=LONG,
                      attention=SPARSE)
  return {"root": root, "short": {n: v.numpy() for n, v in tf1_variable_map(model).items()}}


def _trainer_override(steps=2):
  return {"trainer": {"train_steps": steps, "steps_per_loop": 1, "checkpoint_interval": steps, "summary_interval": 1,
                      "validation_interval": steps, "validation_steps": 1, "warmup_steps": 0,
                      "learning_rate": 1e-3},
          "runtime": {"distribution_strategy": "one_device", "seed": 3}}


@pytest.mark.slow
def test_continued_pretraining_from_the_extended_checkpoint(extended, tmp_path):
  """task.init_checkpoint restores the extended model (table rows repeated); pretraining runs at LONG tokens with
  the predictions per sequence scaled with the length (docs/long_inputs.md)."""
  data = {"input_path": "dummy", "global_batch_size": 2, "seq_length": LONG, "max_predictions_per_seq": 16,
          "dummy_vocab_size": 1000}
  override = {"task": {"model": dict(TINY, preset="", max_position_embeddings=LONG, **SPARSE),
                       "init_checkpoint": str(extended["root"] / "long"), "train_data": data,
                       "validation_data": dict(data, is_training=False)}, **_trainer_override()}
  params = train.build_params("albert_tiny_pretrain", params_override=json.dumps(override))
  trainer = Trainer(params, str(tmp_path / "init"))
  trainer._initialize_or_resume()  # pylint: disable=protected-access
  table = trainer.model.encoder.embeddings.position_embeddings.numpy()
  short = extended["short"]["bert/embeddings/position_embeddings"]
  for start in range(0, LONG, 32):
    assert table[start:start + 32].tobytes() == short.tobytes()
  result = train.run("albert_tiny_pretrain", "train_and_eval", str(tmp_path / "run"),
                     params_override=json.dumps(override))
  assert result["global_step"] == 2
  assert np.isfinite(result["eval_results"]["masked_lm_loss"])
  saved = AlbertConfig.from_json_file(str(tmp_path / "run" / "config.json"))
  assert (saved.max_position_embeddings, saved.attention_type, saved.block_size) == (LONG, "block_sparse", 8)


@pytest.mark.slow
def test_text_classification_on_texts_longer_than_the_original_table(extended, tmp_path, spm_model_file):
  rng = np.random.default_rng(0)
  words = "the a film story long plot scene actor music night day city road light".split()
  with open(tmp_path / "train.csv", "w", newline="", encoding="utf-8") as f:
    writer = csv.writer(f)
    writer.writerow(["text", "label"])
    for i in range(8):
      writer.writerow([" ".join(rng.choice(words, 150)) + (" great" if i % 2 else " awful"), "pos" if i % 2 else "neg"])
  data = {"input_path": str(tmp_path / "train.csv"), "global_batch_size": 4, "seq_length": LONG, "seed": 1}
  task = {"model": dict(TINY, preset="", max_position_embeddings=LONG, attention_type="chunked", key_chunk_size=64),
          "init_checkpoint": str(extended["root"] / "long"), "spm_model_file": spm_model_file,
          "classifier_dropout": 0.0, "train_data": dict(data, is_training=True, drop_remainder=True),
          "validation_data": dict(data, is_training=False)}
  result = train.run("text_classification", "train_and_eval", str(tmp_path / "model"),
                     params_override=json.dumps({"task": task, **_trainer_override()}))
  assert result["global_step"] == 2 and 0.0 <= result["eval_results"]["eval_accuracy"] <= 1.0
  records = [p for p in (tmp_path / "model" / "records").iterdir() if p.name.endswith(".meta.json")]
  assert json.loads(records[0].read_text())  # the cached records were written at seq_length LONG


def test_squad_windows_as_long_as_the_model(spm_model_file):
  from official_albert.data.squad_features import convert_examples_to_features
  from official_albert.tokenization import FullTokenizer
  from tasks.squad.reading import SquadExample
  tokenizer = FullTokenizer(spm_model_file)
  paragraph = " ".join(["the quiet river ran past the old mill by the long road"] * 60) + " the answer is Paris."
  example = SquadExample("q1", "what is the answer?", paragraph, "Paris", paragraph.index("Paris"))
  short, _ = convert_examples_to_features([example], tokenizer, max_seq_length=128, doc_stride=64)
  long, _ = convert_examples_to_features([example], tokenizer, max_seq_length=4096, doc_stride=1024)
  assert len(short) > 8 and len(long) == 1  # one window holds the whole paragraph
  assert len(long[0].input_word_ids) == 4096 and long[0].start_position > 0


@pytest.mark.parametrize("attention", [SPARSE, dict(attention_type="chunked", query_chunk_size=64, key_chunk_size=32)])
def test_saved_model_export_at_long_length_equals_keras(tmp_path, attention):
  import tensorflow as tf
  keras.utils.set_random_seed(3)
  model = build_model("classifier", AlbertConfig(**dict(TINY, max_position_embeddings=LONG, **attention)),
                      num_labels=3)
  module = export.AlbertServingModule(model, "classifier", seq_length=LONG)
  if attention["attention_type"] == "block_sparse":
    assert module.pad_to_multiple_of == 0  # its pattern follows the padded length: never trimmed
  tf.saved_model.save(module, str(tmp_path / "sm"), signatures=module.signatures())
  served = tf.saved_model.load(str(tmp_path / "sm")).signatures["from_ids"]
  rng = np.random.default_rng(2)
  for length in (LONG, 40):  # 40: the dense-fallback branch of the same graph
    feats = {"input_word_ids": rng.integers(5, 1000, (2, length)).astype(np.int32),
             "input_mask": np.ones((2, length), np.int32), "input_type_ids": np.zeros((2, length), np.int32)}
    feats["input_mask"][1, length - 30:] = 0
    got = served(**{k: tf.constant(v) for k, v in feats.items()})["logits"].numpy()
    np.testing.assert_allclose(got, model(feats)["logits"].numpy(), atol=1e-5)
