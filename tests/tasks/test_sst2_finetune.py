"""A short fine-tune on the real SST-2 sample learns (issue 5 must-show).

The whole fine-tuning path on real data: SST-2 TSVs (shared data, skipped when absent) → a throwaway SentencePiece
model trained on the SST-2 training sentences → `data_prep.create_finetuning_data` TFRecords → `glue/sst-2` through
the train binary's entry point (train_and_eval) with a tiny `AlbertClassifier` from scratch.

Settings that learn: AdamW at 3e-4 (the reference AdamW has no bias correction, so early updates are ~3x the
learning rate; at 1e-3 a warm-started tiny classifier stayed at chance in the demo), no dropout, seq 64, H 64 /
2 layers, ~2 epochs. Measured dev accuracy with this seed: 0.763 (300 steps) vs the 0.509 majority (444/872 positive).
"""

import json
import os

import pytest

DEV_MAJORITY = 444 / 872


@pytest.mark.large
@pytest.mark.slow
def test_sst2_short_finetune_beats_majority(shared_data_dir, tmp_path):
  glue_dir = shared_data_dir / "glue"
  if not (glue_dir / "SST-2" / "dev.tsv").exists():
    pytest.skip(f"no SST-2 sample under {glue_dir}")
  from data_prep import create_finetuning_data as cfd
  from data_prep import train_sentencepiece
  from official_albert import train
  from tasks import glue

  train_examples = glue.read_examples("sst-2", str(glue_dir), "train")
  dev_examples = glue.read_examples("sst-2", str(glue_dir), "dev")
  dev_positive = sum(e.label == "1" for e in dev_examples)
  assert (len(dev_examples), dev_positive) == (872, 444)

  text_file = tmp_path / "sst2_train.txt"
  text_file.write_text("".join(e.text_a + "\n" for e in train_examples), encoding="utf-8")
  spm_model = train_sentencepiece.train_sentencepiece(
      [str(text_file)], str(tmp_path / "spm"), vocab_size=2000, hard_vocab_limit=False, seed=1, num_threads=1)
  records = cfd.create_finetuning_data("glue/sst-2", str(tmp_path / "records"), spm_model, splits=("train", "dev"),
                                       input_dir=str(glue_dir), max_seq_length=64)
  assert records["dev"]["num_records"] == 872

  steps = 300
  model = dict(preset="", vocab_size=2000, embedding_size=64, hidden_size=64, num_hidden_layers=2,
               num_hidden_groups=1, num_attention_heads=4, intermediate_size=256, max_position_embeddings=64,
               hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
  override = {
      "task": {"model": model, "classifier_dropout": 0.0,
               "train_data": {"input_path": records["train"]["record_path"], "global_batch_size": 32,
                              "seq_length": 64, "seed": 1},
               "validation_data": {"input_path": records["dev"]["record_path"], "global_batch_size": 128,
                                   "seq_length": 64}},
      "trainer": {"train_steps": steps, "steps_per_loop": steps // 2, "checkpoint_interval": steps // 2,
                  "validation_interval": steps // 2, "summary_interval": steps // 2, "validation_steps": -1,
                  "learning_rate": 3e-4, "warmup_steps": steps // 10, "max_to_keep": 1},
      "runtime": {"seed": 1, "enable_op_determinism": True},
  }
  model_dir = tmp_path / "model"
  result = train.run("glue/sst-2", "train_and_eval", str(model_dir), params_override=json.dumps(override))

  final = result["eval_history"][-1][1]
  assert final["global_step"] == steps
  assert final["eval_steps"] == 7  # all 872 dev examples, batch 128
  assert final["eval_accuracy"] >= DEV_MAJORITY + 0.12, final
  saved = json.load(open(os.path.join(model_dir, "eval_results.json")))
  assert saved["eval_accuracy"] == pytest.approx(final["eval_accuracy"])
