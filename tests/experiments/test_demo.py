"""The end-to-end demo in its --quick form, which is also the learning test on real text.

Real English from the installed Python's documentation → SentencePiece → pretraining TFRecords → the train binary's
entry point (train_and_eval, step-0 evaluation included). The tiny ALBERT must learn: held-out masked_lm_accuracy
rises well above its step-0 value (and far above uniform chance) and the loss falls. Then the fine-tuning stage
(topic of a documentation sentence, GLUE SST-2 path, warm-started) runs on the whole dev set, and the
export-and-serve stage must answer a fill-mask query from the SavedModel in a new process. One demo run serves both
tests; `test_quick_demo_fine_tuning_learns` asserts that fine-tuning beats the majority baseline by 10 points.
"""

import json
import os

import pytest


@pytest.fixture(scope="module")
def quick_demo(tmp_path_factory):
  from experiments import demo
  settings = demo.DemoSettings.quick()
  output_dir = tmp_path_factory.mktemp("quick_demo")
  return settings, demo.run_demo(str(output_dir / "demo"), settings), output_dir


@pytest.mark.slow
def test_quick_demo_learns_and_writes_its_outputs(quick_demo):
  from experiments import demo, demo_downstream
  settings, summary, tmp_path = quick_demo

  first, last = summary["step0_eval"], summary["final_eval"]
  assert first["global_step"] == 0 and last["global_step"] == settings.train_steps
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

  # Fine-tuning stage: real labelled dev sentences (documents disjoint from training), balanced classes.
  finetune = summary["finetune"]
  dev = finetune["task"]["counts"]["dev"]
  assert dev["majority_accuracy"] == 0.5 and dev["examples"] == finetune["dev_records"] >= 100
  assert finetune["step0_eval"]["global_step"] == 0
  assert finetune["final_eval"]["global_step"] == settings.ft_train_steps
  assert finetune["final_eval"]["eval_steps"] == -(-dev["examples"] // 64)  # the whole dev set
  with open(os.path.join(finetune["task"]["data_dir"], "SST-2", "dev.tsv")) as f:
    assert f.readline() == "sentence\tlabel\n"
    assert sum(1 for _ in f) == dev["examples"]
  assert "init_checkpoint: " + model_dir in open(os.path.join(finetune["model_dir"], "params.yaml")).read()

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
  assert "majority baseline" in report and "answered by a new process" in report


@pytest.mark.slow
def test_quick_demo_fine_tuning_learns(quick_demo):
  """Held-out dev accuracy (documents disjoint from the training sentences, balanced classes) clearly above the
  majority baseline and above the step-0 model's, with a lower dev loss: fine-tuning learnt the task."""
  _, summary, _ = quick_demo
  finetune = summary["finetune"]
  majority = finetune["task"]["counts"]["dev"]["majority_accuracy"]
  first, last = finetune["step0_eval"], finetune["final_eval"]
  assert last["eval_accuracy"] >= majority + 0.1, finetune["eval_history"]
  assert last["eval_accuracy"] > first["eval_accuracy"] + 0.05
  assert last["eval_loss"] < first["eval_loss"]


def test_auto_precision_follows_the_cpu_flags(tmp_path):
  from experiments import demo
  amx, avx2 = tmp_path / "amx", tmp_path / "avx2"
  amx.write_text("processor\t: 0\nflags\t\t: fpu sse avx512f amx_bf16 amx_tile\n")
  avx2.write_text("processor\t: 0\nflags\t\t: fpu sse avx2 fma\n")
  assert demo.resolve_mixed_precision("auto", str(amx)) == "mixed_bfloat16"
  assert demo.resolve_mixed_precision("auto", str(avx2)) == "float32"
  assert demo.resolve_mixed_precision("auto", str(tmp_path / "missing")) == "float32"
  assert demo.resolve_mixed_precision("float32", str(amx)) == "float32"  # an explicit setting wins


def test_both_variants_fine_tune_within_the_pretrained_positions():
  from experiments import demo
  for settings in (demo.DemoSettings.full(), demo.DemoSettings.quick()):
    assert settings.ft_seq_length <= settings.seq_length  # max_position_embeddings = seq_length
