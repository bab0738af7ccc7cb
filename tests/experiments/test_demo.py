"""The end-to-end demo in its --quick form, which is also the learning test on real text.

Real English from the installed Python's documentation → SentencePiece → pretraining TFRecords → the train binary's
entry point (train_and_eval, step-0 evaluation included). The tiny ALBERT must learn: held-out masked_lm_accuracy
rises well above its step-0 value (and far above uniform chance) and the loss falls. Then the fine-tuning stage (the
word-order task, text_classification on CSV, from the pretrained model and from random init) runs on the whole dev
set, and the export-and-serve stage must answer a fill-mask query from the SavedModel in a new process. Whether
pretraining pays is measured at the demo's full size (README; 80 quick steps on 300 KB are too few to tell).
"""

import json
import os

import pytest


@pytest.fixture(scope="module")
def quick_demo(tmp_path_factory):
  import dataclasses

  from experiments import demo
  settings = dataclasses.replace(demo.DemoSettings.quick(), curve=True)
  output_dir = tmp_path_factory.mktemp("quick_demo")
  return settings, demo.run_demo(str(output_dir / "demo"), settings), output_dir


@pytest.mark.large
@pytest.mark.slow
def test_quick_demo_learns_and_writes_its_outputs(quick_demo):
  from experiments import demo
  from experiments import demo_downstream
  settings, summary, tmp_path = quick_demo

  first, last = summary["step0_eval"], summary["final_eval"]
  assert first["global_step"] == 0 and last["global_step"] == settings.train_steps
  print("learning margins:", {k: (round(first[k], 4), round(last[k], 4)) for k in ("masked_lm_accuracy",
                                                                                   "masked_lm_loss", "loss")})
  # Learning: MLM accuracy from ~1/V to well above it, and the losses fall.
  assert first["masked_lm_accuracy"] < 0.02
  assert last["masked_lm_accuracy"] > first["masked_lm_accuracy"] + 0.05
  assert last["masked_lm_accuracy"] > 20 * summary["baselines"]["uniform"]
  assert last["masked_lm_loss"] < first["masked_lm_loss"] - 1.0
  assert last["loss"] < first["loss"] - 1.0
  train_losses = [logs["loss"] for _, logs in summary["train_history"]]
  assert train_losses[-1] < train_losses[0]

  model_dir = summary["model_dir"]
  for name in ("curves.png", "eval_results.json", "params.yaml", "config.json", "spiece.model",
               "model.ckpt-best.index"):
    assert os.path.exists(os.path.join(model_dir, name)), name
  with open(os.path.join(model_dir, "curves.png"), "rb") as f:
    assert f.read(8) == b"\x89PNG\r\n\x1a\n"
  results = json.load(open(os.path.join(model_dir, "eval_results.json")))
  assert results["global_step"] == settings.train_steps
  assert json.load(open(tmp_path / "demo" / "demo_summary.json"))["final_eval"]["global_step"] == settings.train_steps

  # Fine-tuning stage: the word-order task, from the pretrained model and from random init, on the whole dev set.
  finetune = summary["finetune"]
  counts = finetune["task"]["counts"]
  assert counts["dev"]["majority_accuracy"] == 0.5 and counts["dev"]["examples"] == 2 * counts["dev"]["sentences"]
  for run, init in (("pretrained", model_dir), ("random_init", "random")):
    result = finetune[run]
    assert result["init"] == init and result["step0_eval"]["global_step"] == 0
    assert result["final_eval"]["global_step"] == settings.ft_train_steps
    assert result["final_eval"]["eval_steps"] == -(-counts["dev"]["examples"] // 64)  # the whole dev set
  assert finetune["gain"] == pytest.approx(finetune["pretrained"]["final_eval"]["eval_accuracy"]
                                           - finetune["random_init"]["final_eval"]["eval_accuracy"])
  params = open(os.path.join(finetune["pretrained"]["model_dir"], "params.yaml")).read()
  assert "init_checkpoint: " + model_dir in params
  # No task.model was given for the pretrained run: its shape is the pretrained model's (vocabulary, width).
  pretrained_config = json.load(open(os.path.join(model_dir, "config.json")))
  finetuned_config = json.load(open(os.path.join(finetune["pretrained"]["model_dir"], "config.json")))
  assert {k: finetuned_config[k] for k in ("vocab_size", "hidden_size", "num_hidden_layers")} == {
      k: pretrained_config[k] for k in ("vocab_size", "hidden_size", "num_hidden_layers")}
  # The curve: random init (step 0), each kept earlier checkpoint, the final model.
  curve = finetune["curve"]
  assert [step for step, _ in curve] == [0, settings.eval_interval, settings.train_steps]
  assert curve[0][1] == finetune["random_init"]["final_eval"]["eval_accuracy"]
  assert curve[-1][1] == finetune["pretrained"]["final_eval"]["eval_accuracy"]
  # Word identity alone carries nothing: each dev sentence is there in order and shuffled, with the same words.
  import csv
  with open(finetune["task"]["files"]["dev"], encoding="utf-8") as f:
    rows = list(csv.DictReader(f))
  assert len(rows) == counts["dev"]["examples"] and [r["label"] for r in rows[:2]] == ["original", "shuffled"]
  for original, shuffled in zip(rows[::2], rows[1::2]):
    assert sorted(original["text"].split()) == sorted(shuffled["text"].split())
    assert original["text"] != shuffled["text"]

  # Export-and-serve stage: k distinct tokens, best first, probabilities summing to <= 1.
  serving = summary["serving"]
  assert os.path.exists(os.path.join(serving["export_dir"], "saved_model.pb"))
  preds = serving["predictions"]
  scores = [p["score"] for p in preds]
  assert len(preds) == 5 and len({p["token"] for p in preds}) == 5
  assert scores == sorted(scores, reverse=True) and 0 < sum(scores) <= 1.0 + 1e-6
  assert all("[MASK]" not in p["sequence"] for p in preds)
  assert [a["query"] for a in serving["answers"]] == list(demo_downstream.FILL_MASK_QUERIES)  # each one answered
  assert all(len(a["predictions"]) == 5 for a in serving["answers"]) and serving["answers"][0]["predictions"] == preds

  assert set(summary["stage_cpu_seconds"]) == set(summary["stage_seconds"])
  report = demo.format_report(summary)
  assert "uniform 1/V" in report and "step 0" in report
  assert "from the pretrained model" in report and "from random init" in report and "vs pretraining steps" in report
  assert "answered by a new process" in report


def test_auto_precision_follows_what_the_probe_measures_not_the_cpu_flags(caplog):
  from official_albert import precision

  def probe_with(f32, bf16):
    calls = []

    def probe(shape):
      calls.append(tuple(shape))
      return precision.MatmulProbe(gflops={"float32": f32, "bfloat16": bf16}, shape=tuple(shape), seconds=0.1)
    return probe, calls

  # The Intel Xeon of issue 27 (avx512_bf16, no AMX): bf16 143 vs float32 238 GFLOP/s → float32, said in the log.
  slow_bf16, calls = probe_with(238.0, 143.0)
  with caplog.at_level("INFO", logger="official_albert.precision"):
    choice, record = precision.resolve_mixed_precision("auto", (4096, 128, 512), probe=slow_bf16)
  assert choice == "float32" and calls == [(4096, 128, 512)]
  assert record["gflops"] == {"float32": 238.0, "bfloat16": 143.0} and record["faster_policy"] == "float32"
  assert "demo: precision auto -> float32" in caplog.text
  assert "float32 238.0 GFLOP/s, bfloat16 143.0 GFLOP/s" in caplog.text
  # The AMD EPYC: bf16 about twice float32 → mixed_bfloat16; a tie is not enough.
  assert precision.resolve_mixed_precision("auto", probe=probe_with(190.0, 387.0)[0])[0] == "mixed_bfloat16"
  assert precision.resolve_mixed_precision("auto", probe=probe_with(200.0, 210.0)[0])[0] == "float32"
  never, calls = probe_with(1.0, 1000.0)
  assert precision.resolve_mixed_precision("float32", probe=never) == ("float32", None) and not calls  # explicit wins


@pytest.mark.cpu_kind
def test_the_matmul_probe_measures_both_dtypes_here():
  from official_albert import precision
  probe = precision.probe_matmul_speed((64, 32, 48), repeats=2)
  assert set(probe.gflops) == {"float32", "bfloat16"} and all(v > 0 for v in probe.gflops.values())
  assert probe.shape == (64, 32, 48) and probe.faster_policy() in ("float32", "mixed_bfloat16")
  assert probe.as_dict()["faster_policy"] == probe.faster_policy()


def test_both_variants_fine_tune_within_the_pretrained_positions():
  from experiments import demo
  for settings in (demo.DemoSettings.full(), demo.DemoSettings.quick()):
    assert settings.ft_seq_length <= settings.seq_length  # max_position_embeddings = seq_length
