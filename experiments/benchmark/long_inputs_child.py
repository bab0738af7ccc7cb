"""One process's share of the long_inputs workload: build one model, time it, report its memory.

`python -m experiments.benchmark.long_inputs_child SPEC.json` runs the rows of SPEC one after another and prints
one marked JSON line per row (experiments/benchmark/long_inputs.py starts it and reads them). It imports NumPy, Keras
with the chosen backend and `official_albert.config` / `official_albert.modeling` for our rows, torch and
transformers for the peers, and nothing else: never TensorFlow unless a row runs on it (each row records whether
TensorFlow was loaded).
"""

from __future__ import annotations

import dataclasses
import json
import os
import resource
import sys
import time
from typing import Any, Dict, Optional

import numpy as np

from official_albert.config import ATTENTION_TYPES  # the one list (TensorFlow-free, as this process must be)

SEQ_LENGTHS = (512, 1024, 2048, 4096, 8192)
MODES = ("inference", "train_step")
IMPLS = ("ours", "hf_bigbird", "hf_albert")
# Extra impl, not in the default rotation: HF AlbertModel with its eager attention (the [S,S] scores in memory).
OPTIONAL_IMPLS = ("hf_albert_eager",)
BLOCK_SIZE, NUM_RANDOM_BLOCKS = 64, 3
RESULT_MARK = "LONG_INPUTS_ROW "


@dataclasses.dataclass
class Row:
  """One measurement: which model, attention, precision, length and mode."""
  impl: str  # ours | hf_bigbird | hf_albert | hf_albert_eager
  attention: str  # dense | chunked | block_sparse
  dtype: str  # float32 | bfloat16
  seq_length: int
  mode: str  # inference | train_step
  backend: str = "tensorflow"  # ours: tensorflow | jax | openvino (inference; converted from TensorFlow); peers: torch

  @property
  def name(self) -> str:
    engine = f"ours_{self.backend}" if self.impl == "ours" else self.impl
    return f"{engine}_{self.attention}_{self.dtype}_s{self.seq_length}_{self.mode}"

  @property
  def group(self) -> str:
    """The process of `--isolate=group`: one per engine and dtype."""
    engine = f"ours_{self.backend}" if self.impl == "ours" else self.impl
    return f"{engine}_{self.dtype}"

  @property
  def priority(self) -> tuple:
    """Order inside a group process under a time budget: the issue's 4096 first, then 8192, then shorter."""
    return (PRIORITY.index(self.seq_length) if self.seq_length in PRIORITY else len(PRIORITY), -self.seq_length,
            ATTENTION_TYPES.index(self.attention), MODES.index(self.mode))


PRIORITY = (4096, 8192, 2048, 1024, 512)


def _rss_mib() -> float:
  with open("/proc/self/status") as f:
    for line in f:
      if line.startswith("VmRSS:"):
        return int(line.split()[1]) / 1024.0
  return float("nan")


def _peak_rss_mib() -> float:
  return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # Linux: KiB


class ProcessPeak:
  """The process's peak RSS across the per-row windows of a shared process.

  ru_maxrss cannot tell one row of a shared process from the rows before it, so each row starts a new window
  (Linux: `5` to /proc/self/clear_refs resets the high-water mark to the current RSS). That reset lowers ru_maxrss
  too, so the process's own peak is kept here, folded in before every reset.
  """

  def __init__(self):
    self.mib = 0.0

  def fold(self) -> float:
    """The process's peak so far (every window included)."""
    self.mib = max(self.mib, _peak_rss_mib())
    return self.mib

  def new_window(self) -> bool:
    """Starts a new peak window at the current RSS; False where the kernel refuses (no per-row figure then)."""
    self.fold()
    try:
      with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
      return True
    except OSError:
      return False


PROCESS_PEAK = ProcessPeak()
SHARED_RSS_NOTE = ("shared process (--isolate=group): peak_rss_process_mib is the peak of the whole process, earlier "
                   "rows included, so no peak-RSS ratio is computed from it; rss_growth_mib is this row's own peak "
                   "above its rss_setup_mib")


def loadavg() -> Optional[float]:
  try:
    return os.getloadavg()[0]
  except OSError:
    return None


def _random_inputs(seq_length: int, vocab_size: int, seed: int = 0) -> Dict[str, np.ndarray]:
  rng = np.random.default_rng(seed)
  return {"input_word_ids": rng.integers(5, vocab_size, (1, seq_length)).astype(np.int32),
          "input_mask": np.ones((1, seq_length), np.int32), "input_type_ids": np.zeros((1, seq_length), np.int32)}


# A config small enough for the workload's unit test (--preset=tiny).
TINY = dict(vocab_size=128, embedding_size=16, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
            intermediate_size=64)


def _our_config(row: Row, spec: Dict[str, Any]):
  from official_albert.config import AlbertConfig
  shape = TINY if spec["preset"] == "tiny" else {}
  base = "albert-base-v2" if spec["preset"] == "tiny" else spec["preset"]
  return AlbertConfig.from_preset(base, **shape, max_position_embeddings=spec["max_length"],
                                  attention_type=row.attention, block_size=spec["block_size"],
                                  num_random_blocks=spec["num_random_blocks"])


def _openvino_step(row: Row, spec: Dict[str, Any]):
  """Our encoder exported as the serving path exports it (`to_openvino_model`: float32 IR, unrolled layers) and
  compiled for the CPU at the row's precision (bfloat16: OpenVINO's bf16 inference precision); inference only."""
  import keras

  from official_albert.modeling.encoder import AlbertEncoder
  from official_albert.serving import openvino_export
  from official_albert.serving import openvino_ir
  if row.mode != "inference":
    raise ValueError("the openvino backend times inference only (an OpenVINO IR has no training step).")
  keras.utils.set_random_seed(0)
  config = _our_config(row, spec)
  encoder = AlbertEncoder(config)
  inputs = _random_inputs(row.seq_length, config.vocab_size)
  start = time.perf_counter()
  ov_model = openvino_export.to_openvino_model(encoder, "encoder")
  compiled = openvino_ir.compile_openvino(ov_model, "bf16" if row.dtype == "bfloat16" else "f32")
  info = {"convert_compile_s": time.perf_counter() - start}
  request = compiled.create_infer_request()
  port = compiled.output("sequence_output")

  def step():
    request.infer(inputs)
    return float(request.get_tensor(port).data[0, 0, 0])
  return step, info


def _ours_step(row: Row, spec: Dict[str, Any]):
  """(step callable returning a host-synchronised result, extra info) for our encoder on row.backend."""
  if row.backend == "openvino":
    return _openvino_step(row, spec)
  import keras

  from official_albert.modeling.encoder import AlbertEncoder
  keras.config.set_dtype_policy("mixed_bfloat16" if row.dtype == "bfloat16" else "float32")
  if row.backend == "tensorflow":
    keras.utils.set_random_seed(0)  # (it imports TensorFlow wherever it is installed, so only on that backend)
  training = row.mode == "train_step"
  # The layer loop: one block in the compiled graph (the unrolled albert-base stack compiles 12× the code).
  config = _our_config(row, spec)
  encoder = AlbertEncoder(config, layer_loop=True)
  inputs = _random_inputs(row.seq_length, config.vocab_size)
  info: Dict[str, Any] = {}
  if row.backend == "tensorflow":
    import tensorflow as tf
    tensors = {k: tf.constant(v) for k, v in inputs.items()}

    @tf.function
    def run(x):
      if not training:
        return encoder(x)["sequence_output"][0, 0, 0]
      with tf.GradientTape() as tape:
        loss = tf.reduce_mean(tf.square(tf.cast(encoder(x, training=True)["sequence_output"], tf.float32)))
      grads = tape.gradient(loss, encoder.trainable_variables)
      return loss + tf.add_n([tf.reduce_sum(tf.cast(g, tf.float32)) * 0.0 for g in grads if g is not None])

    return lambda: float(run(tensors)), info
  if row.backend == "jax":
    import jax
    import jax.numpy as jnp
    trainable = [v.value for v in encoder.trainable_variables]
    non_trainable = [v.value for v in encoder.non_trainable_variables]
    feed = {k: jnp.asarray(v) for k, v in inputs.items()}

    def forward(trainable, x):
      outputs, _ = encoder.stateless_call(trainable, non_trainable, x, training=training)
      return outputs["sequence_output"]

    if training:
      def loss(trainable, x):
        return jnp.mean(jnp.square(forward(trainable, x).astype(jnp.float32)))
      fn = jax.jit(jax.grad(loss))
    else:
      fn = jax.jit(forward)
    compiled = fn.lower(trainable, feed).compile()
    try:
      analysis = compiled.memory_analysis()
      info["xla_temp_mib"] = analysis.temp_size_in_bytes / 2**20
      info["xla_argument_mib"] = analysis.argument_size_in_bytes / 2**20
      info["xla_output_mib"] = analysis.output_size_in_bytes / 2**20
    except Exception as e:  # Not every backend/plugin reports it; the row keeps its timings.
      info["xla_memory_analysis"] = f"unavailable: {type(e).__name__}: {e}"

    def step():
      jax.block_until_ready(compiled(trainable, feed))
    return step, info
  raise ValueError(f"--backend={row.backend!r}: ours runs on tensorflow, jax or openvino.")


def _peer_step(row: Row, spec: Dict[str, Any]):
  import torch
  import transformers
  torch.manual_seed(0)
  device = "cuda" if torch.cuda.is_available() else "cpu"
  ours = _our_config(row, spec)
  common = dict(vocab_size=ours.vocab_size, hidden_size=ours.hidden_size, num_hidden_layers=ours.num_hidden_layers,
                num_attention_heads=ours.num_attention_heads, intermediate_size=ours.intermediate_size,
                hidden_act="gelu_new", hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                max_position_embeddings=spec["max_length"], type_vocab_size=2)
  if row.impl == "hf_bigbird":
    config = transformers.BigBirdConfig(**common, attention_type="block_sparse", block_size=spec["block_size"],
                                        num_random_blocks=spec["num_random_blocks"])
    model = transformers.BigBirdModel(config)
  else:
    config = transformers.AlbertConfig(**common, embedding_size=ours.embedding_size)
    if row.impl == "hf_albert_eager":
      config._attn_implementation = "eager"  # pylint: disable=protected-access
    model = transformers.AlbertModel(config)
  model = model.to(device)
  training = row.mode == "train_step"
  model.train(training)  # (BigBird: eval mode replaces its random blocks by block 0; dropout is 0 either way)
  feed = _random_inputs(row.seq_length, ours.vocab_size)
  inputs = {"input_ids": torch.from_numpy(feed["input_word_ids"]).long().to(device),
            "attention_mask": torch.from_numpy(feed["input_mask"]).long().to(device)}
  autocast = torch.autocast(device, dtype=torch.bfloat16, enabled=row.dtype == "bfloat16")
  info = {"attn_implementation": getattr(model.config, "_attn_implementation", None), "torch_device": device}

  def sync():
    if device == "cuda":
      torch.cuda.synchronize()

  def step():
    if training:
      model.zero_grad(set_to_none=True)
      with autocast:
        loss = model(**inputs).last_hidden_state.float().square().mean()
      loss.backward()
    else:
      with torch.inference_mode(), autocast:
        model(**inputs).last_hidden_state[0, 0, 0].item()
    sync()
  return step, info


def _device_peak(row: Row, reset: bool = False) -> Optional[float]:
  """Device memory peak in MiB (None on CPU); `reset` starts a new peak where the framework allows it."""
  if row.impl != "ours":
    import torch
    if not torch.cuda.is_available():
      return None
    if reset:
      torch.cuda.reset_peak_memory_stats()
      return None
    return torch.cuda.max_memory_allocated() / 2**20
  if row.backend == "jax":
    import jax
    device = jax.devices()[0]
    if device.platform == "cpu":
      return None
    stats = device.memory_stats() or {}
    return stats.get("peak_bytes_in_use", 0) / 2**20
  return None


def run_row(row: Row, spec: Dict[str, Any], shared_process: bool = False) -> Dict[str, Any]:
  """Builds and times one row in this process (`spec`: the run's settings; `shared_process`: other rows share
  this process, so its peak RSS is `peak_rss_process_mib`, the row's own `rss_growth_mib`)."""
  warmup, repeats = spec["warmup"], spec["repeats"]
  result: Dict[str, Any] = {**dataclasses.asdict(row), "name": row.name, "loadavg_start": loadavg()}
  window = False
  try:
    start = time.perf_counter()
    _device_peak(row, reset=True)
    step, info = (_ours_step if row.impl == "ours" else _peer_step)(row, spec)
    result.update(info, build_s=time.perf_counter() - start, rss_setup_mib=_rss_mib())
    window = shared_process and PROCESS_PEAK.new_window()
    start = time.perf_counter()
    step()
    result["first_call_s"] = time.perf_counter() - start
    for _ in range(warmup):
      step()
    times = []
    for _ in range(repeats):
      start = time.perf_counter()
      step()
      times.append(time.perf_counter() - start)
    median = float(np.median(times))
    result.update(status="ok", times_s=times, median_s=median, min_s=min(times), max_s=max(times),
                  tokens_per_s=row.seq_length / median)
  except Exception as e:  # A row that fails (e.g. out of device memory) is reported, the others still run.
    result.update(status="failed", reason=f"{type(e).__name__}: {str(e)[:500]}")
  result.update(loadavg_end=loadavg(), tensorflow_imported="tensorflow" in sys.modules)
  if not shared_process:
    result["peak_rss_mib"] = _peak_rss_mib()
  else:  # ru_maxrss is the process's (the rows before this one included): reported as such, plus this row's growth
    if window:
      result["rss_growth_mib"] = max(0.0, _peak_rss_mib() - result["rss_setup_mib"])
    result.update(peak_rss_process_mib=PROCESS_PEAK.fold(), note=SHARED_RSS_NOTE + (
        "" if window else " (not measured: /proc/self/clear_refs refused the reset, or the row failed in its build)"))
  device_peak = _device_peak(row)
  if device_peak is not None:
    # torch resets its peak per row; JAX cannot, so in a shared process its figure is the process's peak so far.
    exact = row.impl != "ours" or not shared_process
    result["device_peak_mib" if exact else "device_peak_process_mib"] = device_peak
  return result


def child_main(spec_path: str) -> None:
  """Runs the rows of `spec_path` (JSON) one after another, printing one marked JSON line per row; starts no row
  after the spec's `deadline` (seconds since the epoch), reporting those rows as not run."""
  with open(spec_path) as f:
    spec = json.load(f)
  for data in spec["rows"]:
    row = Row(**data)
    if spec.get("deadline") and time.time() > spec["deadline"]:
      result = {**data, "name": row.name, "status": "not_run", "reason": "--time_budget_s spent"}
    else:
      result = run_row(row, spec, shared_process=len(spec["rows"]) > 1)
    print(RESULT_MARK + json.dumps(result, default=float), flush=True)


if __name__ == "__main__":
  child_main(sys.argv[1])
