"""The end-to-end demo in its --quick form, which is also the learning test on real text.

Real English from the installed Python's documentation → SentencePiece → pretraining TFRecords → the train binary's
entry point (train_and_eval, step-0 evaluation included). The tiny ALBERT must learn: held-out masked_lm_accuracy
rises well above its step-0 value (and far above uniform chance) and the loss falls.
"""

import json
import os

import pytest


@pytest.mark.slow
def test_quick_demo_learns_and_writes_its_outputs(tmp_path):
  from experiments import demo
  settings = demo.DemoSettings.quick()
  summary = demo.run_demo(str(tmp_path / "demo"), settings)

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
  report = demo.format_report(summary)
  assert "uniform 1/V" in report and "step 0" in report
