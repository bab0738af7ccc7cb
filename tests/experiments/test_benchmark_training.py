"""Smoke tests of experiments.benchmark.training on a tiny config: well-formed rows, real training, same features.

Never timed: only the shape of the results and the behaviour behind them are checked.
"""

import numpy as np
import pytest

from experiments.benchmark import core as benchmark
from experiments.benchmark import training as bt

ROW_KEYS = {"name", "impl", "dtype", "status", "note", "repeats", "median_s", "min_s", "max_s", "iqr_s", "times_s",
            "first_call_s", "build_s", "examples_per_s", "tokens_per_s"}


def _settings(**changes):
  base = dict(preset="tiny", batch_size=2, seq_length=16, max_predictions_per_seq=4, repeats=1, warmup=0, seed=3)
  return benchmark.BenchSettings(**{**base, **changes})


@pytest.mark.slow
def test_train_loop_rows_trained_the_expected_steps():
  result = bt.train_loop_workload(_settings(), log=lambda *_: None, steps_per_loop=(1, 2), jit_compile=(False,),
                                  num_records=16)
  rows = {r["name"]: r for r in result["rows"]}
  assert set(rows) == {"train_loop_tf_function_spl1_float32", "train_loop_tf_function_spl2_float32"}
  for row in rows.values():
    assert row["status"] == "ok", row
    assert ROW_KEYS | {"steps_per_s", "steps_per_loop", "jit_compile", "global_step"} <= set(row)
    # First call (one loop) + 1 timed repetition of 2 steps: the optimizer really took every step.
    assert row["global_step"] == row["expected_global_step"] == row["steps_per_loop"] + 2
    assert np.isfinite(row["last_loss"]) and row["last_loss"] > 0
    assert row["median_s"] > 0 and row["steps_per_s"] == pytest.approx(1 / row["median_s"])
    assert row["examples_per_s"] == pytest.approx(2 / row["median_s"])  # batch 2, time per step
    assert row["tokens_per_s"] == pytest.approx(32 / row["median_s"])
  assert rows["train_loop_tf_function_spl2_float32"]["steps_per_loop"] == 2
  ratio = result["ratio_to_steps_per_loop_1"]
  assert set(ratio) == {"train_loop_tf_function_spl2_float32"}
  assert ratio["train_loop_tf_function_spl2_float32"]["ratio_of_medians"] == pytest.approx(
      rows["train_loop_tf_function_spl1_float32"]["median_s"] / rows["train_loop_tf_function_spl2_float32"]["median_s"])


def test_train_loop_rejects_steps_per_repeat_not_a_multiple():
  with pytest.raises(ValueError, match="multiple"):
    bt.train_loop_workload(_settings(), log=lambda *_: None, steps_per_loop=(2, 3), steps_per_repeat=4)


def test_input_pipeline_rows_and_identical_features():
  result = bt.input_pipeline_workload(_settings(batch_size=4), log=lambda *_: None, num_records=66, num_files=2)
  assert result["records"] == 64  # Full batches only.
  rows = {r["name"]: r for r in result["rows"]}
  assert set(rows) == {"naive_per_record", "per_record_parallel_prefetch", "shipped_eval", "shipped_training"}
  for row in rows.values():
    assert row["status"] == "ok", row
    assert ROW_KEYS <= set(row)
    assert row["examples_per_s"] == pytest.approx(64 / row["median_s"])
  assert result["ratio_to_naive"]["naive_per_record"] == 1.0
  for check in result["checks"].values():
    assert check == {"records": 64, "identical": True, "keys_equal": True, "dtypes_equal": True}


def test_compare_pipelines_detects_a_changed_record(tmp_path):
  files = bt.write_pretraining_records(str(tmp_path / "r"), 8, seq_length=16, max_predictions_per_seq=4,
                                       vocab_size=50, seed=0)
  naive = [{k: v.numpy() for k, v in b.items()} for b in bt.per_record_dataset(files, 16, 4, 4, parallel=False)]
  assert naive[0]["input_word_ids"].dtype == np.int32 and naive[0]["masked_lm_weights"].dtype == np.float32
  reversed_order = [{k: v[::-1] for k, v in b.items()} for b in naive[::-1]]
  assert bt.compare_pipelines(naive, reversed_order, ordered=False)["identical"]
  assert not bt.compare_pipelines(naive, reversed_order, ordered=True)["identical"]
  changed = [dict(b) for b in naive]
  changed[1]["masked_lm_ids"] = changed[1]["masked_lm_ids"] + 1
  assert not bt.compare_pipelines(naive, changed, ordered=False)["identical"]


def test_synthetic_records_have_the_reference_layout():
  data = bt.synthetic_pretraining_examples(50, seq_length=16, max_predictions_per_seq=4, vocab_size=50, seed=1)
  mask = data["input_mask"]
  # Trailing padding only, ids zero there, masked positions inside the real tokens, weights 1 then 0.
  assert np.all(np.diff(mask, axis=1) <= 0)
  assert np.all(data["input_ids"][mask == 0] == 0)
  lengths = mask.sum(1)
  w = data["masked_lm_weights"]
  assert np.all(np.diff(w, axis=1) <= 0) and np.all(w.sum(1) >= 1)
  assert np.all((data["masked_lm_positions"] < lengths[:, None]) | (w == 0))


def test_per_step_rows_give_every_time_field_per_optimizer_step():
  """A repetition is `steps` optimizer steps: median/min/max and p50/p99 alike are per step (the table's columns)."""
  runner = benchmark.Runner("train_loop_xla_spl100_float32", "ours", "float32", build=lambda: None, flops=1e11,
                            examples=800, tokens=800 * 128)
  runner.times = [2.0, 2.1, 2.2, 2.3, 2.4]  # seconds per repetition of 100 steps
  row = bt.per_step_row(runner, 100)
  assert row["median_s"] == pytest.approx(0.022) and row["p50_ms"] == pytest.approx(22.0)
  assert row["p99_ms"] == pytest.approx(1e3 * np.percentile(runner.times, 99) / 100)
  assert row["min_s"] * 1e3 <= row["p50_ms"] <= row["p99_ms"] <= row["max_s"] * 1e3
  assert row["times_s"] == pytest.approx([0.020, 0.021, 0.022, 0.023, 0.024])
