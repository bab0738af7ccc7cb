"""Smoke test of `--workload=dynamic_data` (experiments/benchmark/dynamic_data.py) on a tiny corpus. Never timed:
the rows' layout and what the checks say about the examples are asserted, not the speed."""

import numpy as np
import pytest

from experiments.benchmark import core as benchmark
from experiments.benchmark import driver
from experiments.benchmark import dynamic_data as dd

STATIC_FEATURES = sorted(["input_word_ids", "input_mask", "input_type_ids", "masked_lm_positions", "masked_lm_ids",
                          "masked_lm_weights", "next_sentence_labels"])


@pytest.mark.slow
def test_dynamic_data_rows_and_static_feature_layout(spm_model_file):
  settings = benchmark.BenchSettings(workload="dynamic_data", batch_size=4, max_predictions_per_seq=5, repeats=1,
                                     warmup=0, spm_model_file=spm_model_file)
  result = dd.dynamic_data_workload(settings, log=lambda *_: None, seq_lengths=(32,), threads=(1, 2),
                                    examples_per_call=16, max_lines=120)
  rows = {r["name"]: r for r in result["rows"]}
  assert set(rows) == {"static_generator_seq32", "dynamic_seq32_threads1", "dynamic_seq32_threads2",
                       "static_reader_seq32_threads1", "static_reader_seq32_threads2"}
  for name, row in rows.items():
    assert row["status"] == "ok", row
    assert row["examples_per_s"] > 0 and row["examples_per_cpu_s"] > 0, name
  dynamic = rows["dynamic_seq32_threads1"]
  assert dynamic["examples_per_s"] == pytest.approx(16 / dynamic["median_s"])  # 4 batches of 4 per timed call
  assert dynamic["threads"] == 1 and dynamic["seq_length"] == 32
  # One thread = one core: the process is pinned during the timed calls, so it cannot use more CPU than wall time.
  for name in ("dynamic_seq32_threads1", "static_reader_seq32_threads1"):
    assert 0 < rows[name]["cpu_utilization"] <= 1.02, rows[name]
  assert rows["static_generator_seq32"]["instances"] > 0
  # The dynamic examples have exactly the static records' features (names, dtypes, shapes) and are well-formed.
  checks = result["checks"]["seq32"]
  assert checks.pop("features") == STATIC_FEATURES
  assert checks == {k: True for k in checks} and "element_spec_equals_static" in checks
  assert result["corpus"]["documents"] >= 6  # a document every 20 lines
  assert result["goals"][0]["status"] == "n/a"  # No seq-512 row in this run.


def _good_batch():
  return {"input_word_ids": np.array([[2, 7, 4, 3, 9, 3, 0, 0]]), "input_mask": np.array([[1] * 6 + [0, 0]]),
          "input_type_ids": np.array([[0, 0, 0, 0, 1, 1, 0, 0]]), "masked_lm_positions": np.array([[2, 0]]),
          "masked_lm_ids": np.array([[8, 0]]), "masked_lm_weights": np.array([[1.0, 0.0]]),
          "next_sentence_labels": np.array([[1]])}


@pytest.mark.parametrize("field,index,value,failing", [
    ("input_word_ids", (0, 1), 50, "ids_in_vocab"),
    ("input_word_ids", (0, 7), 5, "padding_after_tokens"),
    ("input_type_ids", (0, 7), 1, "types_are_0_or_1"),
    ("masked_lm_positions", (0, 0), 6, "masked_positions_inside_tokens"),
    ("masked_lm_weights", (0, 0), 0.0, "weights_are_0_or_1"),
    ("next_sentence_labels", (0, 0), 2, "sop_labels_are_0_or_1"),
])
def test_example_checks_catch_a_broken_example(field, index, value, failing):
  assert all(dd.example_checks(_good_batch(), vocab_size=10).values())
  batch = _good_batch()
  batch[field] = batch[field].copy()
  batch[field][index] = value
  got = dd.example_checks(batch, vocab_size=10)
  assert [k for k, ok in got.items() if not ok] == [failing]


def test_dynamic_goal_is_judged_on_the_one_thread_seq512_row():
  row = {"name": "dynamic_seq512_threads1", "status": "ok", "examples_per_s": 1200.0, "examples_per_cpu_s": 1800.0}
  assert dd.dynamic_goals([row])[0]["status"] == "met per CPU-second only (machine loaded?)"
  assert dd.dynamic_goals([dict(row, examples_per_s=1600.0)])[0]["status"] == "met"
  assert dd.dynamic_goals([dict(row, examples_per_cpu_s=900.0)])[0]["status"] == "not met"
  assert dd.dynamic_goals([dict(row, name="dynamic_seq512_threads2")])[0]["status"] == "n/a"


def test_default_suite_measures_dynamic_data_and_openvino():
  entries = [e for e in driver.SUITES["default"] if e["workload"] in ("dynamic_data", "openvino_inference")]
  assert [e["workload"] for e in entries] == ["dynamic_data"] + ["openvino_inference"] * 3
  assert [(e["batch_size"], e["seq_length"]) for e in entries[1:]] == [(1, 128), (8, 128), (32, 512)]
