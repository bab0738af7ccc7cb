"""Learning check (issue 16): the generic `text_classification` task on SST-2 rewritten as CSV reaches the same dev
accuracy as `glue/sst-2` on the same rows and settings (± 0.01).

Real SST-2 sample (shared data; skipped when absent): the first 3,000 training rows and the first 400 dev rows, a
throwaway 2k SentencePiece model trained on those training sentences, a tiny model from scratch, 250 steps. The GLUE
path goes through `create_finetuning_data` TFRecords; the generic path reads the CSV directly (records built and
cached behind the scenes). Labels sort to the GLUE order ("0", "1"), so both runs see the same records and seeds.
"""

import csv
import json

import pytest

TRAIN_ROWS, DEV_ROWS, STEPS = 3000, 400, 250


@pytest.mark.large
@pytest.mark.slow
def test_generic_csv_task_matches_glue_sst2_dev_accuracy(shared_data_dir, tmp_path):
  glue_dir = shared_data_dir / "glue" / "SST-2"
  if not (glue_dir / "dev.tsv").exists():
    pytest.skip(f"no SST-2 sample under {glue_dir}")
  from data_prep import create_finetuning_data as cfd
  from data_prep import train_sentencepiece
  from official_albert import train

  sub = tmp_path / "glue" / "SST-2"
  sub.mkdir(parents=True)
  for split, rows in (("train", TRAIN_ROWS), ("dev", DEV_ROWS)):
    lines = (glue_dir / f"{split}.tsv").read_text(encoding="utf-8").splitlines()[:rows + 1]
    (sub / f"{split}.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    with open(tmp_path / f"{split}.csv", "w", newline="", encoding="utf-8") as f:
      writer = csv.writer(f)
      writer.writerow(["sentence", "label"])
      writer.writerows(line.split("\t") for line in lines[1:])
  sentences = tmp_path / "sentences.txt"
  sentences.write_text("".join(r[0] + "\n" for r in csv.reader(open(tmp_path / "train.csv", encoding="utf-8"))),
                       encoding="utf-8")
  spm_model_file = train_sentencepiece.train_sentencepiece(
      [str(sentences)], str(tmp_path / "spm"), vocab_size=2000, hard_vocab_limit=False, seed=1, num_threads=1)
  dev_labels = [r[1] for r in csv.reader(open(tmp_path / "dev.csv", encoding="utf-8"))][1:]
  majority = max(dev_labels.count("0"), dev_labels.count("1")) / len(dev_labels)
  records = cfd.create_finetuning_data("glue/sst-2", str(tmp_path / "records"), spm_model_file,
                                       splits=("train", "dev"), input_dir=str(tmp_path / "glue"), max_seq_length=64)

  model = dict(preset="", vocab_size=2000, embedding_size=64, hidden_size=64, num_hidden_layers=2,
               num_attention_heads=4, intermediate_size=256, max_position_embeddings=64, hidden_dropout_prob=0.0,
               attention_probs_dropout_prob=0.0)
  trainer = {"train_steps": STEPS, "steps_per_loop": STEPS, "checkpoint_interval": STEPS,
             "validation_interval": STEPS, "summary_interval": STEPS, "validation_steps": -1, "learning_rate": 3e-4,
             "warmup_steps": STEPS // 10, "max_to_keep": 1}

  def run(experiment, train_path, dev_path, **task):
    data = {"global_batch_size": 32, "seq_length": 64, "seed": 1}
    override = {"task": dict({"model": model, "classifier_dropout": 0.0,
                              "train_data": dict(data, input_path=train_path),
                              "validation_data": dict(data, input_path=dev_path, global_batch_size=100,
                                                      is_training=False, drop_remainder=False)}, **task),
                "trainer": trainer, "runtime": {"seed": 1, "enable_op_determinism": True}}
    result = train.run(experiment, "train_and_eval", str(tmp_path / experiment.replace("/", "_")),
                       params_override=json.dumps(override))
    return result["eval_results"]["eval_accuracy"]

  glue_accuracy = run("glue/sst-2", records["train"]["record_path"], records["dev"]["record_path"])
  text_accuracy = run("text_classification", str(tmp_path / "train.csv"), str(tmp_path / "dev.csv"),
                      text_column="sentence", spm_model_file=spm_model_file)
  assert abs(glue_accuracy - text_accuracy) <= 0.01, (glue_accuracy, text_accuracy)
  assert text_accuracy >= majority + 0.08, (text_accuracy, majority)  # it learned
  labels = json.load(open(tmp_path / "text_classification" / "labels.json"))["labels"]
  assert labels == ["0", "1"]
  print(f"SST-2 dev accuracy ({DEV_ROWS} rows, {STEPS} steps): glue {glue_accuracy:.4f}, text {text_accuracy:.4f}, "
        f"majority {majority:.4f}")
