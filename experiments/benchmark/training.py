r"""Throughput of the real training loop by `steps_per_loop`, and of the TFRecord input pipeline (issue 7).

Two workloads for `experiments.benchmark.driver` (same `BenchSettings`, same row layout, never timed in tests):

`train_loop_workload`: `train_lib.Trainer.train()` for the `pretraining` task on a temp TFRecord file read by the
shipped input pipeline, for every (jit_compile, steps_per_loop) pair. `steps_per_loop = 1` is the host loop (one
`tf.function` call, one host sync, one round of Python bookkeeping per step); larger values run the steps in one
call's `tf.range` loop. Every row runs the same number of steps per repetition (`steps_per_repeat`, by default the
largest steps_per_loop), so rows differ only in how the steps are grouped into calls. All Trainers are built first
(model, optimizer, iterator), then the repetitions run interleaved across rows (by `core.run_rotation`),
so load from other processes hits every row alike. A repetition is one `Trainer.train()` call, stopped from its
`on_loop_end` callback once it has done `steps_per_repeat` steps (no checkpoint is written, nothing is restored
between calls). The time of a repetition runs from just before `train()` to that last callback, so it holds every
host-side cost of the loop (metric reads, learning-rate read, logging) plus train()'s per-call set-up, which is
the same for every row.

`input_pipeline_workload`: records/s of `input_pipeline.pretraining_dataset` (batch → one vectorised
`parse_example` per batch, parallel map → prefetch; training mode with interleave + shuffle, and evaluation mode)
against per-record pipelines (`parse_single_example` per record, then batch): without parallelism or prefetch (the
naive one) and with both, which separates vectorisation from parallelism. Each row keeps one iterator over its
(repeated) pipeline and a timed call pulls one epoch's worth of batches from it inside a `tf.function` loop, as the
trainer does: steady state (no start-up, no shuffle-buffer fill) and no Python per batch.

    python -c "from experiments.benchmark import core, training as bt; \
        print(bt.train_loop_workload(core.BenchSettings(preset='tiny', seq_length=64, repeats=3)))"
"""

from __future__ import annotations

import os
import tempfile
import time
from typing import Any, Callable, Dict, List, Optional, Sequence, TYPE_CHECKING

import numpy as np

from experiments.benchmark import core as benchmark

if TYPE_CHECKING:  # For the annotations only; TensorFlow is imported where it runs.
  import tensorflow as tf


# ------------------------------------------------------------------------------------------------------ data
def synthetic_pretraining_examples(num_records: int, seq_length: int, max_predictions_per_seq: int, vocab_size: int,
                                   seed: int) -> Dict[str, np.ndarray]:
  """Random records in the reference pretraining layout: varied lengths, trailing padding, padded MLM slots."""
  rng = np.random.default_rng(seed)
  n, s, p = num_records, seq_length, max_predictions_per_seq
  lengths = rng.integers(max(2, s // 2), s + 1, size=n)
  positions = np.arange(s)[None, :]
  mask = (positions < lengths[:, None]).astype(np.int64)
  ids = rng.integers(5, vocab_size, size=(n, s)) * mask
  segment = ((positions >= (lengths // 2)[:, None]) & (mask == 1)).astype(np.int64)
  num_masked = np.minimum(rng.integers(1, p + 1, size=n), lengths - 1)
  slot = np.arange(p)[None, :] < num_masked[:, None]
  # Inside the real tokens, after [CLS].
  mlm_positions = np.sort(1 + (rng.random((n, p)) * (lengths[:, None] - 1)).astype(np.int64), axis=1) * slot
  return {
      "input_ids": ids, "input_mask": mask, "segment_ids": segment,
      "masked_lm_positions": mlm_positions.astype(np.int64),
      "masked_lm_ids": (rng.integers(5, vocab_size, size=(n, p)) * slot).astype(np.int64),
      "masked_lm_weights": slot.astype(np.float32),
      "next_sentence_labels": rng.integers(0, 2, size=(n, 1)).astype(np.int64),
  }


def write_pretraining_records(path_prefix: str, num_records: int, seq_length: int, max_predictions_per_seq: int,
                              vocab_size: int, seed: int, num_files: int = 1) -> List[str]:
  """Writes `num_records` synthetic tf.train.Examples round-robin over `num_files` files; returns the paths."""
  import tensorflow as tf
  data = synthetic_pretraining_examples(num_records, seq_length, max_predictions_per_seq, vocab_size, seed)
  paths = [f"{path_prefix}-{i:05d}-of-{num_files:05d}.tfrecord" for i in range(num_files)]
  writers = [tf.io.TFRecordWriter(p) for p in paths]
  try:
    for i in range(num_records):
      feature = {}
      for name, values in data.items():
        row = values[i].tolist()
        feature[name] = (tf.train.Feature(float_list=tf.train.FloatList(value=row)) if values.dtype == np.float32
                         else tf.train.Feature(int64_list=tf.train.Int64List(value=row)))
      writers[i % num_files].write(tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString())
  finally:
    for w in writers:
      w.close()
  return paths


# ------------------------------------------------------------------------------------------------- rotation
def per_step_row(runner: benchmark.Runner, steps: int) -> Dict[str, Any]:
  """`benchmark.summarize_row`, with every time field divided by the steps of one repetition (per step): the
  seconds and the p50 / p99 milliseconds alike, so the table's columns describe the same unit."""
  row = benchmark.summarize_row(runner, {})
  if row["status"] != "ok":
    return row
  for key in ("median_s", "min_s", "max_s", "iqr_s", "p50_ms", "p99_ms"):
    row[key] /= steps
  row["times_s"] = [t / steps for t in row["times_s"]]
  row["gflop_per_step"] /= steps
  row["steps_per_s"] = 1.0 / row["median_s"]
  return row


# ---------------------------------------------------------------------------------------------- train loop
class _StopRepetition(Exception):
  """Raised from `on_loop_end` to end a `Trainer.train()` call after a repetition's steps."""


def _pretraining_params(config, settings: benchmark.BenchSettings, input_path: str, seq_length: int,
                        steps_per_loop: int, jit_compile: bool, dtype: str):
  from official_albert.precision import policy_for_dtype
  from official_albert.training.experiment_config import ExperimentConfig
  from official_albert.training.experiment_config import ModelConfig
  from official_albert.training.experiment_config import RuntimeConfig
  from official_albert.training.experiment_config import TrainerConfig
  from tasks.pretraining import PretrainingDataConfig
  from tasks.pretraining import PretrainingTaskConfig
  data = PretrainingDataConfig(input_path=input_path, global_batch_size=settings.batch_size, seq_length=seq_length,
                               max_predictions_per_seq=settings.max_predictions_per_seq, is_training=True)
  never = 10 ** 9  # No checkpoint, summary or end of schedule inside the benchmark.
  return ExperimentConfig(
      task=PretrainingTaskConfig(model=ModelConfig.from_albert_config(config), train_data=data),
      trainer=TrainerConfig(train_steps=never, steps_per_loop=steps_per_loop, checkpoint_interval=never,
                            summary_interval=never, validation_interval=never, warmup_steps=0,
                            learning_rate=1e-4, optimizer="lamb"),
      runtime=RuntimeConfig(distribution_strategy="one_device", jit_compile=jit_compile, seed=settings.seed,
                            mixed_precision_dtype=policy_for_dtype(dtype)))


def _train_loop_runner(config, settings, input_path, seq_length, model_dir, steps_per_loop, jit_compile, dtype,
                       steps_per_repeat, flops_per_step, trainers) -> benchmark.Runner:
  name = f"train_loop_{'xla' if jit_compile else 'tf_function'}_spl{steps_per_loop}_{dtype}"

  def build() -> Callable[[], float]:
    from official_albert.training import train_lib
    params = _pretraining_params(config, settings, input_path, seq_length, steps_per_loop, jit_compile, dtype)
    with benchmark.keras_policy(dtype):  # = params.runtime.mixed_precision_dtype
      trainer = train_lib.Trainer(params, os.path.join(model_dir, name))
    state = {}
    trainers[name] = (trainer, state)

    def on_loop_end(step, logs):
      state["end"] = time.perf_counter()
      state["loss"] = logs["loss"]
      if step >= state["target"]:
        raise _StopRepetition()

    def repetition() -> float:
      # The first call (trace/compile, timed as first_call_s by `run_rotation`) runs one loop only.
      state["target"] = trainer.step + (steps_per_repeat if "target" in state else steps_per_loop)
      start = time.perf_counter()
      try:
        trainer.train(on_loop_end=on_loop_end)
      except _StopRepetition:
        pass
      if trainer.step != state["target"]:
        raise RuntimeError(f"{name}: a repetition ended at step {trainer.step}, not {state['target']}.")
      if not np.isfinite(state["loss"]):
        raise FloatingPointError(f"{name}: non-finite loss {state['loss']} at step {trainer.step}.")
      return state["end"] - start
    return repetition

  b = settings.batch_size
  return benchmark.Runner(name, "ours", dtype, build, flops=flops_per_step * steps_per_repeat,
                          examples=b * steps_per_repeat, tokens=b * seq_length * steps_per_repeat,
                          note=f"Trainer.train(), pretraining task, TFRecord input, LAMB, steps_per_loop="
                               f"{steps_per_loop}, jit_compile={jit_compile}",
                          extra=dict(steps_per_loop=steps_per_loop, jit_compile=jit_compile))


def train_loop_workload(settings: benchmark.BenchSettings, log=print,
                        steps_per_loop: Sequence[int] = (1, 10, 100), jit_compile: Sequence[bool] = (False, True),
                        steps_per_repeat: Optional[int] = None, num_records: int = 1024) -> Dict[str, Any]:
  """Steady-state steps/s and examples/s of the real training loop for each (jit_compile, steps_per_loop).

  Args:
    settings: preset, batch_size, seq_length (capped at the model's max_position_embeddings),
      max_predictions_per_seq, dtypes, repeats, warmup, seed.
    log: progress printer.
    steps_per_loop: the values compared (each must divide `steps_per_repeat`).
    jit_compile: runtime.jit_compile values.
    steps_per_repeat: optimizer steps per timed repetition; None = max(steps_per_loop).
    num_records: records in the temp TFRecord file (the pipeline repeats it).

  Returns:
    {"rows": [...], "ratio_to_steps_per_loop_1": {row: {...}}, "steps_per_repeat", "seq_length", "unit", ...}:
    rows as `benchmark.summarize_row` gives them with the times per optimizer step, plus steps_per_s,
    steps_per_loop, jit_compile, global_step (after the run; expected_global_step is what the loop should have
    done), last_loss. first_call_s is trace/compile plus one loop (steps_per_loop steps).
  """
  import tensorflow as tf
  config = benchmark.load_config(settings.preset)
  seq_length = min(settings.seq_length, config.max_position_embeddings)
  if seq_length != settings.seq_length:
    log(f"  seq_length {settings.seq_length} > max_position_embeddings of {settings.preset}: using {seq_length}")
  spls = sorted(set(int(n) for n in steps_per_loop))
  steps = int(steps_per_repeat or max(spls))
  if any(steps % n for n in spls):
    raise ValueError(f"steps_per_repeat={steps} must be a multiple of every steps_per_loop {spls}.")
  p = settings.max_predictions_per_seq
  flops_per_step = 3 * settings.batch_size * (benchmark.encoder_flops_per_example(config, seq_length)
                                              + benchmark.pretraining_heads_flops_per_example(config, p))
  tf.keras.utils.set_random_seed(settings.seed)
  trainers: Dict[str, Any] = {}
  with tempfile.TemporaryDirectory(prefix="albert_bench_train_loop_") as tmp:
    files = write_pretraining_records(os.path.join(tmp, "train"), num_records, seq_length, p, config.vocab_size,
                                      settings.seed)
    runners = [_train_loop_runner(config, settings, files[0], seq_length, tmp, n, xla, dtype, steps,
                                  flops_per_step, trainers)
               for dtype in settings.dtypes for xla in jit_compile for n in spls]
    benchmark.run_rotation(runners, settings, log, self_timed=True)  # Each repetition times itself.
    rows = []
    for runner in runners:
      row = per_step_row(runner, steps)
      row.update(runner.extra, steps_per_repeat=steps)  # Also on error rows.
      if runner.name in trainers:
        trainer, state = trainers[runner.name]
        row["global_step"] = trainer.step
        row["last_loss"] = state.get("loss")
        if row["status"] == "ok":  # An error row's repetitions stopped where it failed.
          row["expected_global_step"] = row["steps_per_loop"] + steps * (settings.warmup + len(runner.times))
      rows.append(row)
    trainers.clear()  # Frees the models before the next workload.
  return {"rows": rows, "ratio_to_steps_per_loop_1": _ratios_to_spl1(rows), "steps_per_repeat": steps,
          "seq_length": seq_length, "num_records": num_records, "unit": "examples",
          "note": "times are per optimizer step (a repetition's time / steps_per_repeat)"}


def _ratios_to_spl1(rows: List[Dict[str, Any]]) -> Dict[str, Dict[str, float]]:
  """Speed-up of each row over the steps_per_loop=1 row of the same jit_compile and dtype (>1 = faster)."""
  ok = [r for r in rows if r["status"] == "ok"]
  out = {}
  for row in ok:
    base = next((r for r in ok if r["steps_per_loop"] == 1 and r["jit_compile"] == row["jit_compile"]
                 and r["dtype"] == row["dtype"]), None)
    if base is None or base is row:
      continue
    paired = np.asarray(base["times_s"]) / np.asarray(row["times_s"])
    out[row["name"]] = {"vs": base["name"], "ratio_of_medians": base["median_s"] / row["median_s"],
                        "paired_median_ratio": float(np.median(paired))}
  return out


# ------------------------------------------------------------------------------------------ input pipeline
def per_record_dataset(files: Sequence[str], seq_length: int, max_predictions_per_seq: int, batch_size: int,
                       parallel: bool) -> "tf.data.Dataset":
  """The per-record reader the shipped one replaces: `parse_single_example` per record, then batch.

  parallel=False: sequential map, no prefetch (naive); True: parallel map and prefetch, still one record per call.
  """
  import tensorflow as tf

  from official_albert.data import input_pipeline
  spec = input_pipeline.pretraining_feature_spec(seq_length, max_predictions_per_seq)
  dataset = tf.data.TFRecordDataset(list(files))
  dataset = dataset.map(lambda r: input_pipeline.decode_record(r, spec, input_pipeline.PRETRAINING_RENAMES),
                        num_parallel_calls=tf.data.AUTOTUNE if parallel else None)
  dataset = dataset.batch(batch_size, drop_remainder=True)
  return dataset.prefetch(tf.data.AUTOTUNE) if parallel else dataset


def compare_pipelines(expected, got, ordered: bool) -> Dict[str, Any]:
  """Whether two lists of feature batches hold the same records (every `got` record among `expected` when unordered).

  Returns:
    {"records", "identical" (bool), "keys_equal", "dtypes_equal"} (`records` counts `got`'s records).
  """
  def stack(batches):
    return {k: np.concatenate([np.asarray(b[k]) for b in batches]) for k in batches[0]}

  want, have = stack(expected), stack(got)
  keys_equal = sorted(want) == sorted(have)
  dtypes_equal = keys_equal and all(want[k].dtype == have[k].dtype for k in want)
  n = len(next(iter(have.values())))
  identical = keys_equal and dtypes_equal
  if identical and ordered:
    identical = all(np.array_equal(want[k][:n], have[k]) for k in want) and len(next(iter(want.values()))) >= n
  elif identical:
    def keyed(data):
      return [b"".join(np.ascontiguousarray(data[k][i]).tobytes() for k in sorted(data))
              for i in range(len(next(iter(data.values()))))]
    identical = set(keyed(have)) <= set(keyed(want))
  return {"records": int(n), "identical": bool(identical), "keys_equal": keys_equal, "dtypes_equal": dtypes_equal}


def input_pipeline_workload(settings: benchmark.BenchSettings, log=print, num_records: int = 20000,
                            num_files: int = 8) -> Dict[str, Any]:
  """Records/s of the shipped pretraining reader vs per-record readers on `num_records` synthetic records.

  Args:
    settings: batch_size, seq_length, max_predictions_per_seq, repeats, warmup, seed.
    log: progress printer.
    num_records: records written (each timed pass reads them all once).
    num_files: files they are spread over (the training reader interleaves files).

  Returns:
    {"rows": [...] (examples = records; a timed call reads `records` records, one epoch's worth, from the
    row's persistent iterator), "ratio_to_naive": {row: ratio}, "checks": {...}, "unit": "records"}.
  """
  from official_albert.data import input_pipeline
  from tasks.pretraining import PretrainingDataConfig
  s, p, b = settings.seq_length, settings.max_predictions_per_seq, settings.batch_size
  records = num_records // b * b  # Full batches only, so every pipeline reads the same records.
  with tempfile.TemporaryDirectory(prefix="albert_bench_input_") as tmp:
    start = time.perf_counter()
    files = write_pretraining_records(os.path.join(tmp, "train"), records, s, p, vocab_size=30000,
                                      seed=settings.seed, num_files=num_files)
    log(f"  wrote {records} records in {num_files} files in {time.perf_counter() - start:.1f}s")

    def shipped(training: bool):
      # The shuffle buffer of the pretraining task's default data config (not the reader's own default).
      return input_pipeline.pretraining_dataset(files, s, p, b, is_training=training, seed=settings.seed,
                                                shuffle_buffer_size=PretrainingDataConfig().shuffle_buffer_size)

    pipelines = {
        "naive_per_record": (lambda: per_record_dataset(files, s, p, b, parallel=False),
                             "TFRecordDataset → map(parse_single_example), sequential → batch; no prefetch"),
        "per_record_parallel_prefetch": (lambda: per_record_dataset(files, s, p, b, parallel=True),
                                         "TFRecordDataset → map(parse_single_example, AUTOTUNE) → batch → "
                                         "prefetch"),
        "shipped_eval": (lambda: shipped(False), "pretraining_dataset(is_training=False): files in order → batch → "
                                                 "parse_example (vectorised, AUTOTUNE map) → prefetch"),
        "shipped_training": (lambda: shipped(True), "pretraining_dataset(is_training=True): shuffled files → "
                                                    "interleave → shuffle → batch → parse_example → prefetch"),
    }
    runners = []
    for name, (make, note) in pipelines.items():
      def build(make=make):
        drain = benchmark.drain_fn(make(), records // b)

        def step():
          start = time.perf_counter()
          got = drain()
          if got != records:
            raise RuntimeError(f"read {got} records, expected {records}")
          return time.perf_counter() - start
        return step
      runners.append(benchmark.Runner(name, "ours" if name.startswith("shipped") else "baseline", "n/a", build,
                                      examples=records, tokens=records * s, note=note))
    benchmark.run_rotation(runners, settings, log, self_timed=True)  # Each repetition times itself.
    rows = [benchmark.summarize_row(r, {}) for r in runners]
    naive = list(per_record_dataset(files, s, p, b, parallel=False))
    checks = {"shipped_eval_vs_naive_ordered": compare_pipelines(naive, list(shipped(False)), ordered=True),
              "shipped_training_records_among_naive": compare_pipelines(
                  naive, list(shipped(True).take(records // b)), ordered=False)}
  by_name = {r["name"]: r for r in rows if r["status"] == "ok"}
  ratio = {}
  if "naive_per_record" in by_name:
    ratio = {n: r["examples_per_s"] / by_name["naive_per_record"]["examples_per_s"] for n, r in by_name.items()}
  return {"rows": rows, "ratio_to_naive": ratio, "checks": checks, "records": records, "num_files": num_files,
          "unit": "records", "note": "records/s = examples_per_s; one timed pass reads every record once, in-graph"}
