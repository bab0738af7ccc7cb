r"""Throughput benchmarks of official_albert against its peers and against the machine's own matmul peak.

    python -m experiments.benchmark --workload=encoder_inference --preset=albert-base-v2 --batch_size=8 \
        --seq_length=128 --dtype=float32,bfloat16 --compare=hf_torch,keras_hub --output_dir=bench_out
    python -m experiments.benchmark --suite=default --output_dir=bench_out      # what `make bench` runs

Workloads: `encoder_inference`, `pretrain_step`, `finetune_step`, `finetune_padding` (a fine-tuning / evaluation pass
on real sentence lengths: full padding vs dynamic padding vs length bucketing; experiments/benchmark/padding.py),
`train_loop` (the real train_lib loop at steps_per_loop 1/10/100, XLA off/on) and `input_pipeline` (records/s of the
shipped tf.data reader vs a naive per-record one; both in experiments/benchmark/training.py),
`gemm` (fp32 GEMMs at the encoder's shapes [B·S, H]×[H, 3H | H | F] and [B·S, F]×[F, H] through TF's graph path,
XLA:CPU and PyTorch: where the fp32 ceiling of each framework lies),
`compile` (trace/compile time of the layer loop vs the unrolled stack), `tokenize` (sentences/s), `data_prep` (instances/s of create_pretraining_data, one worker),
`serving` (a reloaded classifier SavedModel, text in vs ids in, vs the in-process model).

Method. Every row of a workload is a *runner*: a callable doing one step that blocks until its result is on the
host. All runners of a workload are built first (the first call, which traces/compiles, is timed separately as
`first_call_s`), warmed up, then timed **interleaved** — repetition r runs every runner once, in a fixed order — so
load from other processes hits all rows alike. Two extra runners, TF 2048×2048 matmuls in float32 and bfloat16,
ride in the same rotation; their median GFLOP/s is the peak that MFU is measured against (same run, same
conditions). Reported per row: median, min, max, IQR of the step time, examples/s and tokens/s at the median,
achieved GFLOP/s and MFU, and the ratio of every row to every peer row.

FLOPs (multiply-add = 2), counted analytically for the work the model needs (useful FLOPs, the usual MFU
definition; an implementation doing extra work, e.g. MLM logits at all positions, gets no credit for it):
    encoder per example = S·2EH [if E≠H]  +  S·L·K·(8H² + 4HF + 4SH)  +  2H² [pooler]
        (per layer and token: Q,K,V 6H², output 2H², FFN 4HF, scores QKᵀ 2SH, context PV 2SH; K = inner_group_num)
    pretraining heads per example = P·(2HE + 2EV) + 4H   (MLM at the P masked positions, SOP)
    classifier head per example = 2H·num_labels
    training step = 3 × forward (backward costs two forward matmuls per forward matmul).
Embedding lookups, LayerNorm, softmax, GELU and the optimizer update are not counted (≪1%).

Peers (optional; a missing one gives a row with status "skipped" and the reason):
  hf_torch: transformers `AlbertModel` / `AlbertForPreTraining` / `AlbertForSequenceClassification`, PyTorch eager,
    same config, random weights, inference under `torch.inference_mode`; the bfloat16 row uses
    `torch.autocast("cpu", torch.bfloat16)`; training uses `torch.optim.AdamW`.
  keras_hub: `keras_hub.models.AlbertBackbone` (float32) under `tf.function` and under `tf.function(jit_compile=True)`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import importlib
import json
import os
import platform
import sys
import tempfile
import time
from typing import Any, Callable, Dict, List, Optional, Sequence

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")

import numpy as np  # noqa: E402

WORKLOADS = ("encoder_inference", "pretrain_step", "finetune_step", "finetune_padding", "train_loop", "input_pipeline",
             "gemm", "compile", "tokenize", "data_prep", "serving")
PEERS = ("hf_torch", "keras_hub")
# `make bench`: the "must show" numbers in one invocation (about 20-30 minutes on 2 busy cores).
SUITES = {
    "default": [
        dict(workload="encoder_inference", preset="albert-base-v2", dtype="float32,bfloat16"),
        dict(workload="pretrain_step", preset="albert-base-v2", dtype="float32,bfloat16",
             rows=("ours_xla_lamb_float32", "ours_tf_function_lamb_float32", "ours_xla_lamb_bfloat16",
                   "ours_tf_function_lamb_bfloat16", "ours_tf_function_mlm_all_positions_lamb_float32",
                   "ours_tf_function_unfused_qkv_lamb_float32")),
        dict(workload="finetune_step", preset="albert-base-v2", dtype="float32,bfloat16", variants="minimal",
             compare="hf_torch"),
        dict(workload="finetune_padding", preset="albert-base-v2", dtype="float32", compare="hf_torch", repeats=2,
             warmup=0),
        dict(workload="train_loop", preset="tiny", dtype="float32", repeats=3, warmup=0),
        dict(workload="input_pipeline"),
        dict(workload="gemm", repeats=7, compare="hf_torch"),
        dict(workload="compile", preset="albert-large-v2", dtype="float32", batch_size=2, repeats=1),
        dict(workload="serving", preset="albert-base-v2"),
        dict(workload="tokenize"),
        dict(workload="data_prep"),
    ],
    # Seconds, for a smoke test: a tiny config, the minimal rows.
    "smoke": [
        dict(workload="encoder_inference", preset="tiny", dtype="float32,bfloat16", batch_size=2, seq_length=16,
             variants="minimal"),
    ],
}
# A config small enough for unit tests; selected by --preset=tiny.
TINY = dict(vocab_size=128, embedding_size=16, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
            intermediate_size=64, max_position_embeddings=64)
MATMUL_N = 2048
COSINE_GOAL = 0.999


@dataclasses.dataclass
class BenchSettings:
  """What one workload invocation measures (one row of a suite)."""
  workload: str = "encoder_inference"
  preset: str = "albert-base-v2"
  batch_size: int = 8
  seq_length: int = 128
  max_predictions_per_seq: int = 20
  dtypes: Sequence[str] = ("float32",)
  compare: Sequence[str] = PEERS
  repeats: int = 5
  warmup: int = 1
  seed: int = 0
  matmul_peak: bool = True
  num_labels: int = 2
  variants: str = "all"  # "all": every ablation row; "minimal": ours with XLA per dtype, and the peers.
  rows: Sequence[str] = ()  # When set, only these rows of ours (by name); peers and matmuls are always kept.
  spm_model_file: Optional[str] = None
  text_file: Optional[str] = None


# ----------------------------------------------------------------------------------------------------- helpers
def load_config(preset: str):
  """`tiny`, an `albert-*` preset name, or a path to a config.json (original, HF or native)."""
  from official_albert.config import AlbertConfig
  if preset == "tiny":
    return AlbertConfig.from_preset("albert-base-v2", **TINY)
  if preset.endswith(".json"):
    return AlbertConfig.from_json_file(preset)
  return AlbertConfig.from_preset(preset)


def encoder_flops_per_example(config, seq_length: int) -> float:
  """Forward FLOPs of the encoder for one sequence (formula in the module docstring)."""
  h, f, e, s = config.hidden_size, config.intermediate_size, config.embedding_size, seq_length
  per_token_layer = 8 * h * h + 4 * h * f + 4 * s * h
  projection = 2 * e * h if e != h else 0
  return float(s * projection + s * config.num_hidden_layers * config.inner_group_num * per_token_layer
               + 2 * h * h)


def pretraining_heads_flops_per_example(config, num_predictions: int) -> float:
  h, e, v = config.hidden_size, config.embedding_size, config.vocab_size
  return float(num_predictions * (2 * h * e + 2 * e * v) + 4 * h)


def module_available(name: str) -> Optional[str]:
  """None when `name` imports, else the reason it does not."""
  try:
    importlib.import_module(name)
    return None
  except Exception as e:  # Any import failure means "not available", with the reason kept for the report.
    return f"{type(e).__name__}: {e}"


@contextlib.contextmanager
def keras_policy(dtype: str):
  """Builds models under float32 or mixed_bfloat16 and restores the previous global policy afterwards."""
  import keras
  previous = keras.config.dtype_policy().name
  keras.mixed_precision.set_global_policy("mixed_bfloat16" if dtype == "bfloat16" else "float32")
  try:
    yield
  finally:
    keras.mixed_precision.set_global_policy(previous)


def random_batch(config, batch_size: int, seq_length: int, num_predictions: int, seed: int) -> Dict[str, np.ndarray]:
  """Random ids with a pretraining layout; the last quarter of the second row is padding."""
  rng = np.random.default_rng(seed)
  b, s = batch_size, seq_length
  mask = np.ones((b, s), np.int32)
  if b > 1:
    mask[1, s - s // 4:] = 0
  p = min(num_predictions, s - 1)
  positions = np.sort(np.stack([rng.choice(np.arange(1, s), size=p, replace=False) for _ in range(b)]), axis=1)
  return {
      "input_word_ids": rng.integers(5, config.vocab_size, (b, s)).astype(np.int32),
      "input_mask": mask,
      "input_type_ids": np.concatenate([np.zeros((b, s // 2), np.int32), np.ones((b, s - s // 2), np.int32)], 1),
      "masked_lm_positions": positions.astype(np.int32),
      "masked_lm_ids": rng.integers(5, config.vocab_size, (b, p)).astype(np.int32),
      "masked_lm_weights": np.ones((b, p), np.float32),
      "next_sentence_labels": rng.integers(0, 2, (b, 1)).astype(np.int32),
      "label_ids": rng.integers(0, 2, (b,)).astype(np.int32),
  }


def cosine(a, b) -> Dict[str, float]:
  """Cosine similarity of two tensors, flattened and per token (min over tokens)."""
  a = np.asarray(a, np.float64).reshape(-1, np.shape(a)[-1])
  b = np.asarray(b, np.float64).reshape(-1, np.shape(b)[-1])
  flat = float(np.dot(a.ravel(), b.ravel()) / (np.linalg.norm(a) * np.linalg.norm(b)))
  per_token = np.sum(a * b, -1) / (np.linalg.norm(a, axis=-1) * np.linalg.norm(b, axis=-1))
  return {"flattened": flat, "min_per_token": float(per_token.min())}


# ------------------------------------------------------------------------------------------------------ rows
@dataclasses.dataclass
class Runner:
  """One row: `build()` returns the step callable (it must block until the result is on the host)."""
  name: str
  impl: str  # "ours", "hf_torch", "keras_hub", "matmul"
  dtype: str
  build: Callable[[], Callable[[], Any]]
  flops: float = 0.0  # Per step.
  examples: int = 0  # Per step.
  tokens: int = 0
  note: str = ""
  status: str = "ok"
  reason: str = ""
  check: Optional[Callable[[Any], Dict[str, Any]]] = None  # Called with the first call's output.
  step: Optional[Callable[[], Any]] = None
  first_call_s: float = float("nan")
  build_s: float = float("nan")
  times: List[float] = dataclasses.field(default_factory=list)
  extra: Dict[str, Any] = dataclasses.field(default_factory=dict)


def skipped(name, impl, dtype, reason) -> Runner:
  return Runner(name, impl, dtype, build=lambda: None, status="skipped", reason=reason)


def _tf_block(result):
  """Pulls a (nested) TF result to the host, so the timed call includes the computation."""
  import tensorflow as tf
  return tf.nest.map_structure(lambda t: t.numpy() if hasattr(t, "numpy") else t, result)


def matmul_runners(settings: BenchSettings) -> List[Runner]:
  import tensorflow as tf
  runners = []
  for dtype in ("float32", "bfloat16"):
    def build(dtype=dtype):
      rng = np.random.default_rng(settings.seed)
      a = tf.constant(rng.standard_normal((MATMUL_N, MATMUL_N)).astype(np.float32), dtype=dtype)
      b = tf.constant(rng.standard_normal((MATMUL_N, MATMUL_N)).astype(np.float32), dtype=dtype)
      fn = tf.function(lambda: tf.reduce_sum(tf.cast(tf.matmul(a, b), tf.float32)))
      return lambda: fn().numpy()
    runners.append(Runner(f"matmul_{MATMUL_N}_{dtype}", "matmul", dtype, build, flops=2.0 * MATMUL_N ** 3))
  return runners


def _hf_config(config):
  import transformers
  data = config.to_hf_dict()
  data.update(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, classifier_dropout_prob=0.0)
  data.pop("architectures", None)
  data.pop("model_type", None)
  return transformers.AlbertConfig(**data)


def _torch_inputs(batch):
  import torch
  return dict(input_ids=torch.from_numpy(batch["input_word_ids"]).long(),
              attention_mask=torch.from_numpy(batch["input_mask"]).long(),
              token_type_ids=torch.from_numpy(batch["input_type_ids"]).long())


def _torch_autocast(dtype):
  import torch
  if dtype == "bfloat16":
    return torch.autocast("cpu", dtype=torch.bfloat16)
  return contextlib.nullcontext()


def _torch_adamw_step(model, lr: float, dtype: str, loss_fn):
  """A callable doing one torch AdamW update per call: `loss_fn(*args)` gives the loss (under bf16 autocast for
  bfloat16); returns the loss as a float (which also waits for the step)."""
  import torch
  opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)

  def step(*args):
    with _torch_autocast(dtype):
      loss = loss_fn(*args)
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    return float(loss.detach())
  return step


def hf_torch_runners(settings: BenchSettings, runners: List[Runner]) -> List[Runner]:
  """The HF torch peer rows: `runners` when --compare names hf_torch and it imports, the same rows marked skipped
  (with the reason) when it does not import, none when it was not asked for."""
  if "hf_torch" not in settings.compare:
    return []
  reason = peer_status(["hf_torch"])["hf_torch"]
  return runners if reason is None else [skipped(r.name, r.impl, r.dtype, reason) for r in runners]


def hf_inference_runner(config, batch, dtype, flops, settings) -> Runner:
  def build():
    import torch
    import transformers
    torch.manual_seed(settings.seed)
    model = transformers.AlbertModel(_hf_config(config)).eval()
    inputs = _torch_inputs(batch)

    def step():
      with torch.inference_mode(), _torch_autocast(dtype):
        return model(**inputs).last_hidden_state.float().numpy()
    return step
  b, s = batch["input_word_ids"].shape
  return Runner(f"hf_torch_eager_{dtype}", "hf_torch", dtype, build, flops, b, b * s,
                note="transformers AlbertModel, PyTorch eager" + (", bf16 autocast" if dtype == "bfloat16" else ""))


def keras_hub_inference_runner(config, batch, xla, flops, settings) -> Runner:
  def build():
    import keras
    import keras_hub
    import tensorflow as tf
    keras.utils.set_random_seed(settings.seed)
    with keras_policy("float32"):
      backbone = keras_hub.models.AlbertBackbone(
          vocabulary_size=config.vocab_size, num_layers=config.num_hidden_layers,
          num_heads=config.num_attention_heads, embedding_dim=config.embedding_size, hidden_dim=config.hidden_size,
          intermediate_dim=config.intermediate_size, num_groups=config.num_hidden_groups,
          num_inner_repetitions=config.inner_group_num, dropout=0.0,
          max_sequence_length=config.max_position_embeddings, num_segments=config.type_vocab_size)
    inputs = {"token_ids": tf.constant(batch["input_word_ids"]), "segment_ids": tf.constant(batch["input_type_ids"]),
              "padding_mask": tf.constant(batch["input_mask"])}
    fn = tf.function(lambda x: backbone(x, training=False)["sequence_output"], jit_compile=xla)
    return lambda: fn(inputs).numpy()
  b, s = batch["input_word_ids"].shape
  return Runner(f"keras_hub_{'xla' if xla else 'tf_function'}_float32", "keras_hub", "float32", build, flops, b,
                b * s, note="keras_hub.models.AlbertBackbone" + (", jit_compile=True" if xla else ", tf.function"))


def peer_status(compare: Sequence[str]) -> Dict[str, Optional[str]]:
  """For each requested peer: None when usable, else why not."""
  status = {}
  for peer in compare:
    if peer == "hf_torch":
      status[peer] = module_available("torch") or module_available("transformers")
    elif peer == "keras_hub":
      status[peer] = module_available("keras_hub")
    else:
      raise ValueError(f"--compare: unknown peer {peer!r}; known: {PEERS}.")
  return status


# ---------------------------------------------------------------------------------------------- workloads
def encoder_inference_runners(settings: BenchSettings):
  """Our encoder (tf.function / XLA, fused / unfused QKV, looped layers, fp32 / bf16) and the peers."""
  import tensorflow as tf
  from official_albert import AlbertEncoder
  config = load_config(settings.preset).inference_copy()
  batch = random_batch(config, settings.batch_size, settings.seq_length, settings.max_predictions_per_seq,
                       settings.seed)
  features = {k: tf.constant(batch[k]) for k in ("input_word_ids", "input_mask", "input_type_ids")}
  flops = settings.batch_size * encoder_flops_per_example(config, settings.seq_length)
  b, s = settings.batch_size, settings.seq_length
  import keras
  keras.utils.set_random_seed(settings.seed)
  reference = AlbertEncoder(config, name="reference_fp32")  # Weights every variant copies; fp32 output to check.
  weights = reference.get_weights()
  want = reference(features)["sequence_output"].numpy()
  checks = {}

  def ours(dtype, xla, fused_qkv=True, layer_loop=False):
    label = (f"ours_{'xla' if xla else 'tf_function'}{'' if fused_qkv else '_unfused_qkv'}"
             f"{'_layer_loop' if layer_loop else ''}_{dtype}")

    def build():
      with keras_policy(dtype):
        kwargs = {"layer_loop": True} if layer_loop else {}
        encoder = AlbertEncoder(config, fused_qkv=fused_qkv, **kwargs)
      encoder.set_weights(weights)
      fn = tf.function(lambda x: encoder(x)["sequence_output"], jit_compile=xla)
      return lambda: fn(features).numpy()

    def check(output):
      checks[label] = {"cosine_to_fp32_reference": cosine(output, want),
                       "max_abs_diff": float(np.max(np.abs(output - want)))}
      return checks[label]
    return Runner(label, "ours", dtype, build, flops, b, b * s, check=check,
                  note=f"AlbertEncoder fused_qkv={fused_qkv} layer_loop={layer_loop} jit_compile={xla}")

  runners = []
  for dtype in settings.dtypes:
    runners.append(ours(dtype, xla=True))
    # XLA:CPU lowers bf16 dots without oneDNN's AVX-512 bf16 kernels; the graph path has them, so bf16 keeps both.
    if settings.variants == "all" or dtype == "bfloat16":
      runners.append(ours(dtype, xla=False))
    if dtype == "float32" and settings.variants == "all":
      runners += [ours(dtype, xla=True, fused_qkv=False), ours(dtype, xla=False, fused_qkv=False),
                  ours(dtype, xla=True, layer_loop=True)]
  peers = peer_status(settings.compare)
  if "hf_torch" in peers:
    for dtype in settings.dtypes:
      runners.append(hf_inference_runner(config, batch, dtype, flops, settings) if peers["hf_torch"] is None
                     else skipped(f"hf_torch_eager_{dtype}", "hf_torch", dtype, peers["hf_torch"]))
  if "keras_hub" in peers:
    for xla in (False, True):
      name = f"keras_hub_{'xla' if xla else 'tf_function'}_float32"
      runners.append(keras_hub_inference_runner(config, batch, xla, flops, settings) if peers["keras_hub"] is None
                     else skipped(name, "keras_hub", "float32", peers["keras_hub"]))
  return runners, checks


def _pretraining_loss_fn():
  """tasks.pretraining's loss when present (the real one), else the same formula inline."""
  import tensorflow as tf
  try:
    from tasks.pretraining import pretraining_losses
    return (lambda outputs, labels: pretraining_losses(outputs, labels)["loss"]), "tasks.pretraining"
  except ImportError as e:
    def loss(outputs, labels):
      w = tf.cast(labels["masked_lm_weights"], tf.float32)
      log_probs = tf.nn.log_softmax(tf.cast(outputs["mlm_logits"], tf.float32))
      nll = -tf.gather(log_probs, labels["masked_lm_ids"], axis=-1, batch_dims=2)
      sop = tf.nn.sparse_softmax_cross_entropy_with_logits(
          labels=tf.reshape(labels["next_sentence_labels"], [-1]), logits=tf.cast(outputs["sop_logits"], tf.float32))
      return tf.reduce_sum(w * nll) / (tf.reduce_sum(w) + 1e-5) + tf.reduce_mean(sop)
    return loss, f"inline stand-in (tasks.pretraining not available: {e})"


def _optimizer(kind: str):
  """Our LAMB/AdamW when official_albert.training.optimization is present, else Keras AdamW as a stand-in."""
  try:
    from official_albert.training.optimization import create_optimizer
    return create_optimizer(kind, learning_rate=1e-4, weight_decay_rate=0.01), f"official_albert.training.optimization.{kind}"
  except ImportError as e:
    import keras
    return keras.optimizers.AdamW(1e-4, weight_decay=0.01), f"keras AdamW stand-in ({e})"


def pretrain_step_runners(settings: BenchSettings):
  """One optimizer step of MLM+SOP pretraining: ours (LAMB) in several variants, HF torch (AdamW) as the peer."""
  import keras
  import tensorflow as tf
  from official_albert import AlbertPretrainer
  config = load_config(settings.preset)
  b, s = settings.batch_size, settings.seq_length
  batch = random_batch(config, b, s, settings.max_predictions_per_seq, settings.seed)
  p = batch["masked_lm_positions"].shape[1]
  flops = 3 * b * (encoder_flops_per_example(config, s) + pretraining_heads_flops_per_example(config, p))
  loss_fn, loss_source = _pretraining_loss_fn()
  checks = {"loss": loss_source}

  def ours(dtype, xla, all_positions=False, fused_qkv=True, optimizer="lamb"):
    label = (f"ours_{'xla' if xla else 'tf_function'}{'_mlm_all_positions' if all_positions else ''}"
             f"{'' if fused_qkv else '_unfused_qkv'}_{optimizer}_{dtype}")

    def build():
      keras.utils.set_random_seed(settings.seed)
      with keras_policy(dtype):
        model = AlbertPretrainer(config, fused_qkv=fused_qkv)
      opt, opt_source = _optimizer(optimizer)
      opt.build(model.trainable_variables)
      checks[f"{label}.optimizer"] = opt_source
      features = {k: tf.constant(batch[k]) for k in ("input_word_ids", "input_mask", "input_type_ids",
                                                      "masked_lm_positions")}
      labels = {k: tf.constant(batch[k]) for k in ("masked_lm_ids", "masked_lm_weights", "next_sentence_labels")}
      if all_positions:
        # Before the gather-first head: logits at every position, the loss weights picking the masked ones.
        features.pop("masked_lm_positions")
        ids = np.zeros((b, s), np.int32)
        weights = np.zeros((b, s), np.float32)
        for row in range(b):
          ids[row, batch["masked_lm_positions"][row]] = batch["masked_lm_ids"][row]
          weights[row, batch["masked_lm_positions"][row]] = 1.0
        labels.update(masked_lm_ids=tf.constant(ids), masked_lm_weights=tf.constant(weights))

      @tf.function(jit_compile=xla)
      def step():
        with tf.GradientTape() as tape:
          loss = loss_fn(model(features, training=True), labels)
        grads = tape.gradient(loss, model.trainable_variables)
        opt.apply(grads, model.trainable_variables)
        return loss
      return lambda: step().numpy()
    return Runner(label, "ours", dtype, build, flops, b, b * s,
                  note=f"AlbertPretrainer + {optimizer}, jit_compile={xla}, MLM at "
                       f"{'all positions' if all_positions else 'masked positions'}, fused_qkv={fused_qkv}")

  runners = []
  for dtype in settings.dtypes:
    runners.append(ours(dtype, xla=True))
    if dtype == "bfloat16":
      runners.append(ours(dtype, xla=False))  # See encoder_inference_runners: XLA:CPU has no oneDNN bf16 dots.
    if dtype == "float32" and settings.variants == "all":
      for xla in (True, False):
        runners += [ours(dtype, xla=xla, all_positions=True), ours(dtype, xla=xla, fused_qkv=False),
                    ours(dtype, xla=xla, optimizer="adamw")]
      runners.append(ours(dtype, xla=False))
  def hf_build(dtype):
    import torch
    import transformers
    torch.manual_seed(settings.seed)
    model = transformers.AlbertForPreTraining(_hf_config(config)).train()
    inputs = _torch_inputs(batch)
    labels = torch.full((b, s), -100, dtype=torch.long)
    for row in range(b):
      labels[row, torch.from_numpy(batch["masked_lm_positions"][row]).long()] = torch.from_numpy(
          batch["masked_lm_ids"][row]).long()
    sop = torch.from_numpy(batch["next_sentence_labels"][:, 0]).long()
    return _torch_adamw_step(model, 1e-4, dtype, lambda: model(**inputs, labels=labels, sentence_order_label=sop).loss)

  runners += hf_torch_runners(settings, [
      Runner(f"hf_torch_eager_adamw_{dtype}", "hf_torch", dtype, lambda dtype=dtype: hf_build(dtype), flops, b, b * s,
             note="transformers AlbertForPreTraining (MLM logits at all positions) + torch AdamW"
                  + (", bf16 autocast" if dtype == "bfloat16" else ""))
      for dtype in settings.dtypes])
  return runners, checks


def finetune_step_runners(settings: BenchSettings):
  """One AdamW step of sentence classification (GLUE-style): ours (XLA, per dtype) and HF torch."""
  import keras
  import tensorflow as tf
  from official_albert import AlbertClassifier
  config = load_config(settings.preset)
  b, s = settings.batch_size, settings.seq_length
  batch = random_batch(config, b, s, settings.max_predictions_per_seq, settings.seed)
  flops = 3 * b * (encoder_flops_per_example(config, s) + 2 * config.hidden_size * settings.num_labels)
  checks = {}
  runners = []
  for dtype in settings.dtypes:
    # bf16 keeps the graph path too: XLA:CPU has no oneDNN bf16 dots (see encoder_inference_runners).
    for xla in ((True, False) if settings.variants == "all" or dtype == "bfloat16" else (True,)):
      def build(dtype=dtype, xla=xla):
        keras.utils.set_random_seed(settings.seed)
        with keras_policy(dtype):
          model = AlbertClassifier(config, num_labels=settings.num_labels)
        opt, checks[f"optimizer_{dtype}"] = _optimizer("adamw")
        opt.build(model.trainable_variables)
        features = {k: tf.constant(batch[k]) for k in ("input_word_ids", "input_mask", "input_type_ids")}
        labels = tf.constant(batch["label_ids"])

        @tf.function(jit_compile=xla)
        def step():
          with tf.GradientTape() as tape:
            logits = tf.cast(model(features, training=True)["logits"], tf.float32)
            loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits))
          opt.apply(tape.gradient(loss, model.trainable_variables), model.trainable_variables)
          return loss
        return lambda: step().numpy()
      runners.append(Runner(f"ours_{'xla' if xla else 'tf_function'}_adamw_{dtype}", "ours", dtype, build, flops, b,
                            b * s, note=f"AlbertClassifier + AdamW, jit_compile={xla}"))
  def hf_build(dtype):
    import torch
    import transformers
    torch.manual_seed(settings.seed)
    hf_config = _hf_config(config)
    hf_config.num_labels = settings.num_labels
    model = transformers.AlbertForSequenceClassification(hf_config).train()
    inputs = _torch_inputs(batch)
    labels = torch.from_numpy(batch["label_ids"]).long()
    return _torch_adamw_step(model, 1e-5, dtype, lambda: model(**inputs, labels=labels).loss)

  runners += hf_torch_runners(settings, [
      Runner(f"hf_torch_eager_adamw_{dtype}", "hf_torch", dtype, lambda dtype=dtype: hf_build(dtype), flops, b, b * s,
             note="transformers AlbertForSequenceClassification + torch AdamW")
      for dtype in settings.dtypes])
  return runners, checks


def gemm_runners(settings: BenchSettings):
  """fp32 matmuls of the encoder's dense layers, one row per (framework, shape); FLOPs = 2mkn."""
  import tensorflow as tf
  config = load_config(settings.preset)
  m, h, f = settings.batch_size * settings.seq_length, config.hidden_size, config.intermediate_size
  shapes = [(m, h, 3 * h), (m, h, h), (m, h, f), (m, f, h)]
  rng = np.random.default_rng(settings.seed)
  runners = []
  torch_reason = module_available("torch") if "hf_torch" in settings.compare else "not requested (--compare)"
  for (mm, k, n) in shapes:
    a = rng.standard_normal((mm, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    label = f"{mm}x{k}x{n}"
    for xla in (False, True):
      def build(a=a, b=b, xla=xla):
        ta, tb = tf.constant(a), tf.constant(b)
        fn = tf.function(lambda: tf.reduce_sum(tf.matmul(ta, tb)), jit_compile=xla)
        return lambda: fn().numpy()
      runners.append(Runner(f"tf_{'xla' if xla else 'graph'}_{label}", "ours", "float32", build, 2.0 * mm * k * n,
                            note="tf.matmul " + ("under jit_compile (XLA:CPU)" if xla else "in a tf.function (oneDNN)")))
    if torch_reason is None:
      def build_torch(a=a, b=b):
        import torch
        pa, pb = torch.from_numpy(a), torch.from_numpy(b)
        return lambda: float((pa @ pb).sum())
      runners.append(Runner(f"torch_{label}", "hf_torch", "float32", build_torch, 2.0 * mm * k * n,
                            note="torch.matmul (the kernels HF transformers runs on)"))
    else:
      runners.append(skipped(f"torch_{label}", "hf_torch", "float32", torch_reason))
  return runners, {"shapes_mkn": shapes}


def _finetune_padding_runners(settings: BenchSettings):
  from experiments.benchmark.padding import finetune_padding_runners  # Its own module; it imports this one.
  return finetune_padding_runners(settings)


# ------------------------------------------------------------------------------------------------- timing
def _time_call(fn) -> float:
  start = time.perf_counter()
  fn()
  return time.perf_counter() - start


def run_rotation(runners: List[Runner], settings: BenchSettings, log=print, self_timed: bool = False) -> None:
  """Builds every runnable row, then times all of them interleaved (see the module docstring).

  With `self_timed`, each step returns its own duration in seconds (e.g. the part of a training run after its
  set-up), which is recorded instead of the wall time of the call.
  """
  active = []
  for runner in runners:
    if runner.status != "ok":
      continue
    try:
      start = time.perf_counter()
      runner.step = runner.build()
      runner.build_s = time.perf_counter() - start
      start = time.perf_counter()
      output = runner.step()
      runner.first_call_s = time.perf_counter() - start
      if runner.check is not None:
        runner.extra["check"] = runner.check(output)
      for _ in range(settings.warmup):
        runner.step()
      active.append(runner)
      log(f"  built {runner.name}: build {runner.build_s:.1f}s, first call {runner.first_call_s:.2f}s")
    except Exception as e:  # A failing row is reported as such; the others still run.
      runner.status, runner.reason = "error", f"{type(e).__name__}: {str(e)[:500]}"
      log(f"  ERROR {runner.name}: {runner.reason}")
  for rep in range(settings.repeats):
    for runner in active:
      runner.times.append(float(runner.step()) if self_timed else _time_call(runner.step))
    log(f"  repetition {rep + 1}/{settings.repeats}: "
        + ", ".join(f"{r.name}={r.times[-1]:.3f}s" for r in active))


def summarize_row(runner: Runner, peaks: Dict[str, float]) -> Dict[str, Any]:
  row = {"name": runner.name, "impl": runner.impl, "dtype": runner.dtype, "status": runner.status,
         "note": runner.note}
  if runner.status != "ok":
    row["reason"] = runner.reason
    return row
  t = np.asarray(runner.times)
  median = float(np.median(t))
  row.update(repeats=len(t), median_s=median, min_s=float(t.min()), max_s=float(t.max()),
             iqr_s=float(np.percentile(t, 75) - np.percentile(t, 25)), times_s=[float(x) for x in t],
             first_call_s=runner.first_call_s, build_s=runner.build_s,
             gflop_per_step=runner.flops / 1e9, gflops=runner.flops / median / 1e9)
  if runner.examples:
    row.update(examples_per_s=runner.examples / median, tokens_per_s=runner.tokens / median)
  peak = peaks.get(runner.dtype)
  if peak and runner.impl != "matmul":
    row["mfu"] = row["gflops"] / peak
  row.update(runner.extra)
  return row


def ratios(rows: List[Dict[str, Any]], paired: bool = False) -> Dict[str, Dict[str, float]]:
  """Throughput of each row over each peer row's: ratio of medians, or (paired) the median over repetitions of
  the per-repetition ratio — rows of one repetition ran back to back, so pairing cancels slow load drift."""
  ok = [r for r in rows if r["status"] == "ok" and r["impl"] != "matmul"]
  peers = [r for r in ok if r["impl"] not in ("ours",)]
  if paired:
    return {r["name"]: {p["name"]: float(np.median(np.asarray(p["times_s"]) / np.asarray(r["times_s"])))
                        for p in peers if p is not r} for r in ok}
  return {r["name"]: {p["name"]: p["median_s"] / r["median_s"] for p in peers if p is not r} for r in ok}


def goals(workload: str, rows: List[Dict[str, Any]], checks: Dict[str, Any]) -> List[Dict[str, Any]]:
  """The issue's "must show" comparisons, evaluated on this run's rows (missing rows give status "n/a")."""
  by_name = {r["name"]: r for r in rows if r["status"] == "ok"}

  def best(prefix_list, dtype):
    cands = [r for r in by_name.values() if r["impl"] == "ours" and r["dtype"] == dtype
             and any(r["name"].startswith(p) for p in prefix_list)]
    return max(cands, key=lambda r: r["examples_per_s"]) if cands else None

  def goal(text, ours_row, peer_name, target, extra_ok=True, extra=None):
    peer = by_name.get(peer_name)
    if not ours_row or not peer:
      return {"goal": text, "status": "n/a", "reason": f"missing row {'ours' if not ours_row else peer_name}"}
    ratio = peer["median_s"] / ours_row["median_s"]
    out = {"goal": text, "ours": ours_row["name"], "peer": peer_name, "ratio": ratio, "target": target,
           "paired_ratio": (float(np.median(np.asarray(peer["times_s"]) / np.asarray(ours_row["times_s"])))
                            if "times_s" in peer and "times_s" in ours_row else None),
           "status": "met" if ratio >= target and extra_ok else "not met"}
    if extra:
      out.update(extra)
    return out

  result = []
  if workload == "encoder_inference":
    fp32 = best(["ours_xla_float32", "ours_tf_function_float32"], "float32")
    bf16 = best(["ours_xla_bfloat16", "ours_tf_function_bfloat16"], "bfloat16")
    result.append(goal("fp32 >= 1.0x KerasHub XLA", fp32, "keras_hub_xla_float32", 1.0))
    result.append(goal("fp32 >= 1.5x HF torch", fp32, "hf_torch_eager_float32", 1.5))
    cos = checks.get(bf16["name"], {}).get("cosine_to_fp32_reference", {}).get("flattened") if bf16 else None
    result.append(goal("bf16 >= 1.6x KerasHub fp32 (XLA) with cosine >= 0.999", bf16, "keras_hub_xla_float32", 1.6,
                       extra_ok=cos is not None and cos >= COSINE_GOAL, extra={"cosine": cos}))
  elif workload == "pretrain_step":
    fp32 = best(["ours_xla_lamb_float32", "ours_tf_function_lamb_float32"], "float32")
    bf16 = best(["ours_xla_lamb_bfloat16", "ours_tf_function_lamb_bfloat16"], "bfloat16")
    result.append(goal("pretraining step fp32 >= 1.5x HF torch", fp32, "hf_torch_eager_adamw_float32", 1.5))
    result.append(goal("pretraining step bf16 >= 2x HF torch fp32", bf16, "hf_torch_eager_adamw_float32", 2.0))
  return result


# ----------------------------------------------------------------------------------- non-model workloads
def compile_workload(settings: BenchSettings, log=print) -> Dict[str, Any]:
  """Trace and XLA-compile time of the encoder (inference and a gradient step), layer loop vs unrolled."""
  import keras
  import tensorflow as tf
  from official_albert import AlbertEncoder
  config = load_config(settings.preset).inference_copy()
  batch = random_batch(config, settings.batch_size, settings.seq_length, 1, settings.seed)
  features = {k: tf.constant(batch[k]) for k in ("input_word_ids", "input_mask", "input_type_ids")}
  keras.utils.set_random_seed(settings.seed)
  rows = []
  outputs = {}
  for layer_loop in (False, True):
    encoder = AlbertEncoder(config, layer_loop=layer_loop)
    if layer_loop:
      encoder.set_weights(weights)
    else:
      weights = encoder.get_weights()
    for mode in ("inference", "gradient"):
      def fn(x, encoder=encoder, mode=mode):
        if mode == "inference":
          return encoder(x)["sequence_output"]
        with tf.GradientTape() as tape:
          outputs = encoder(x)
          loss = tf.reduce_mean(tf.square(outputs["sequence_output"])) + tf.reduce_mean(outputs["pooled_output"])
        grads = tape.gradient(loss, encoder.trainable_variables)
        return tf.add_n([tf.reduce_sum(tf.convert_to_tensor(g)) for g in grads])  # One scalar to fetch.
      for xla in (False, True):
        f = tf.function(fn, jit_compile=xla)
        start = time.perf_counter()
        concrete = f.get_concrete_function(features)
        trace_s = time.perf_counter() - start
        graph_def = concrete.graph.as_graph_def()
        nodes = len(graph_def.node) + sum(len(fn_def.node_def) for fn_def in graph_def.library.function)
        first = _time_call(lambda: _tf_block(f(features)))
        steady = [_time_call(lambda: _tf_block(f(features))) for _ in range(max(1, min(settings.repeats, 3)))]
        name = f"{'layer_loop' if layer_loop else 'unrolled'}_{mode}_{'xla' if xla else 'tf_function'}"
        if mode == "inference" and xla:
          outputs[layer_loop] = _tf_block(f(features))
        row = {"name": name, "layer_loop": layer_loop, "mode": mode, "jit_compile": xla, "trace_s": trace_s,
               "graph_nodes": nodes, "first_call_s": first, "steady_step_s": float(np.median(steady)),
               "compile_s": max(0.0, first - float(np.median(steady)))}
        rows.append(row)
        log(f"  {name}: trace {trace_s:.2f}s, graph nodes {nodes}, first call {first:.2f}s, "
            f"steady {row['steady_step_s']:.2f}s")
  cmp = {}
  for mode in ("inference", "gradient"):
    for xla in (False, True):
      unrolled = next(r for r in rows if not r["layer_loop"] and r["mode"] == mode and r["jit_compile"] == xla)
      looped = next(r for r in rows if r["layer_loop"] and r["mode"] == mode and r["jit_compile"] == xla)
      key = f"{mode}_{'xla' if xla else 'tf_function'}"
      cmp[key] = {"trace_plus_compile_s_unrolled": unrolled["trace_s"] + unrolled["compile_s"],
                  "trace_plus_compile_s_loop": looped["trace_s"] + looped["compile_s"],
                  "speedup": (unrolled["trace_s"] + unrolled["compile_s"])
                  / max(1e-9, looped["trace_s"] + looped["compile_s"]),
                  "steady_step_ratio_loop_over_unrolled": looped["steady_step_s"] / unrolled["steady_step_s"]}
  checks = {"loop_vs_unrolled_max_abs_diff": float(np.max(np.abs(outputs[True] - outputs[False])))}
  return {"rows": rows, "comparison": cmp, "checks": checks}


def _bench_texts(settings: BenchSettings, min_lines: int = 2000) -> List[str]:
  """Text lines: --text_file, else the GLUE/SQuAD samples in ../shared/data, else this Python's stdlib docstrings."""
  import tensorflow as tf
  if settings.text_file:
    with tf.io.gfile.GFile(settings.text_file) as f:
      return [line.strip() for line in f if line.strip()]
  lines = []
  for module_name in ("argparse", "collections", "json", "os", "pathlib", "re", "string", "textwrap", "typing",
                      "unittest", "logging", "email", "http", "subprocess", "inspect", "dataclasses", "decimal"):
    try:
      module = importlib.import_module(module_name)
    except ImportError:
      continue
    for obj in [module] + [getattr(module, n, None) for n in dir(module)]:
      doc = getattr(obj, "__doc__", None)
      if isinstance(doc, str):
        lines += [" ".join(p.split()) for p in doc.split("\n\n") if len(p.split()) >= 5]
  lines = list(dict.fromkeys(lines))  # Stable de-duplication.
  while lines and len(lines) < min_lines:
    lines = lines + lines
  return lines


def _shared_data_dir() -> str:
  return os.environ.get("OFFICIAL_ALBERT_SHARED_DATA", os.path.join(
      os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "..", "shared", "data"))


def _sentences(settings: BenchSettings):
  """(texts, source): short real sentences — GLUE SST-2 dev from ../shared/data when present (and no --text_file),
  else `_bench_texts`. For the workloads where text length matters (serving, finetune_padding)."""
  sst2 = os.path.join(_shared_data_dir(), "glue", "SST-2", "dev.tsv")
  if not settings.text_file and os.path.exists(sst2):
    with open(sst2, encoding="utf-8") as f:
      return [line.split("\t")[0] for line in f.read().splitlines()[1:] if line.strip()], "GLUE SST-2 dev"
  return _bench_texts(settings), settings.text_file or "stdlib docstrings"


def _default_spm(settings: BenchSettings) -> str:
  if settings.spm_model_file:
    return settings.spm_model_file
  return os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests", "fixtures",
                      "test_spm.model")


def tokenize_workload(settings: BenchSettings, log=print) -> Dict[str, Any]:
  """Sentences/s and tokens/s of FullTokenizer (Python) vs raw sentencepiece and HF's AlbertTokenizer (slow)."""
  reason = module_available("official_albert.tokenization")
  if reason:
    return {"status": "skipped", "reason": f"official_albert.tokenization not available: {reason}"}
  from official_albert.tokenization import FullTokenizer
  spm_file = _default_spm(settings)
  texts = _bench_texts(settings)[:2000]
  candidates = {"ours_full_tokenizer_encode_ids_batch": None, "sentencepiece_raw_encode": None,
                "hf_albert_tokenizer_slow": None}
  tokenizer = FullTokenizer(spm_file)
  candidates["ours_full_tokenizer_encode_ids_batch"] = lambda: tokenizer.encode_ids_batch(texts)
  import sentencepiece as spm
  raw = spm.SentencePieceProcessor(model_file=spm_file)
  candidates["sentencepiece_raw_encode"] = lambda: raw.encode([t.lower() for t in texts])
  reasons = {}
  hf_reason = module_available("transformers")
  if hf_reason is None:
    import transformers
    hf = transformers.AlbertTokenizer(vocab_file=spm_file, do_lower_case=True, keep_accents=False)
    candidates["hf_albert_tokenizer_slow"] = lambda: [hf.convert_tokens_to_ids(hf.tokenize(t)) for t in texts]
  else:
    reasons["hf_albert_tokenizer_slow"] = hf_reason
  num_tokens = sum(len(x) for x in candidates["ours_full_tokenizer_encode_ids_batch"]())
  rows = []
  runners = [Runner(name, name.split("_")[0], "n/a", (lambda fn=fn: fn), examples=len(texts), tokens=num_tokens)
             for name, fn in candidates.items() if fn is not None]
  run_rotation(runners, settings, log)
  rows = [summarize_row(r, {}) for r in runners]
  rows += [{"name": n, "status": "skipped", "reason": r} for n, r in reasons.items()]
  return {"rows": rows, "texts": len(texts), "tokens": num_tokens, "spm_model_file": spm_file, "unit": "sentences"}


def data_prep_workload(settings: BenchSettings, log=print) -> Dict[str, Any]:
  """Instances/s of data_prep.create_pretraining_data on one worker (its goal: >= 3,300/s at seq 128)."""
  reason = module_available("data_prep.create_pretraining_data")
  if reason:
    return {"status": "skipped", "reason": f"data_prep.create_pretraining_data not available: {reason}"}
  from data_prep import create_pretraining_data as cpd
  texts = _bench_texts(settings, min_lines=4000)[:4000]
  with tempfile.TemporaryDirectory(prefix="albert_bench_") as tmp:
    corpus = os.path.join(tmp, "corpus.txt")
    with open(corpus, "w", encoding="utf-8") as f:
      for i, line in enumerate(texts):
        f.write(line + "\n")
        if i % 20 == 19:
          f.write("\n")  # A document every 20 lines.
    rows = []
    for rep in range(max(1, settings.repeats // 2)):
      out = os.path.join(tmp, f"out_{rep}", "train.tfrecord")
      from data_prep import pretraining_instances as pi
      config = cpd.GenerationConfig(
          input_file=corpus, output_file=out, spm_model_file=_default_spm(settings),
          options=pi.InstanceOptions(max_seq_length=settings.seq_length,
                                     max_predictions_per_seq=settings.max_predictions_per_seq),
          dupe_factor=3, random_seed=settings.seed, num_workers=1, progress=False)
      start = time.perf_counter()
      summary = cpd.create_pretraining_data(config)
      elapsed = time.perf_counter() - start
      instances = int(summary["records"])
      rows.append({"elapsed_s": elapsed, "instances": instances, "instances_per_s": instances / elapsed})
      log(f"  data_prep repetition {rep + 1}: {instances} instances in {elapsed:.2f}s")
  rates = [r["instances_per_s"] for r in rows]
  return {"rows": rows, "median_instances_per_s": float(np.median(rates)), "target_instances_per_s": 3300,
          "corpus_lines": len(texts), "note": "one worker, seq_length=%d, dupe_factor=3, test SentencePiece model"
          % settings.seq_length}


def serving_workload(settings: BenchSettings, log=print) -> Dict[str, Any]:
  """A reloaded classifier SavedModel: text in (in-graph SentencePiece + packing) vs token ids in, and the
  in-process Keras model on the same ids — the cost of tokenization inside the graph and of the SavedModel hop —
  with dynamic padding (the export default, `pad_to_multiple_of=16`) and without it (`pad_to_multiple_of=0`).
  Texts: short real sentences (`_sentences`); FLOPs are the useful ones (each text at its packed length)."""
  reason = module_available("official_albert.serving.export") or module_available("tensorflow_text")
  if reason:
    return {"status": "skipped", "reason": f"official_albert.serving.export not available: {reason}"}
  import keras
  import tensorflow as tf
  import tensorflow_text  # noqa: F401  (registers the SentencePiece ops the reloaded SavedModel needs)
  from official_albert import AlbertClassifier
  from official_albert.serving.export import AlbertServingModule, export_saved_model
  from official_albert.tokenization import FullTokenizer
  spm_file = _default_spm(settings)
  vocab_size = FullTokenizer(spm_file).vocab_size
  # The preset's shape with the benchmark tokenizer's vocabulary (the table size barely changes the cost).
  config = load_config(settings.preset).inference_copy().replace(vocab_size=vocab_size)
  all_texts, source = _sentences(settings)
  texts = [all_texts[i] for i in np.random.default_rng(settings.seed).permutation(len(all_texts))]
  texts = texts[:settings.batch_size]
  b, s = len(texts), settings.seq_length
  keras.utils.set_random_seed(settings.seed)
  model = AlbertClassifier(config, num_labels=settings.num_labels)
  with tempfile.TemporaryDirectory(prefix="albert_bench_serving_") as tmp:
    loaded = {}
    for multiple in (16, 0):
      module = AlbertServingModule(model, "classifier", seq_length=s, spm_model_file=spm_file,
                                   pad_to_multiple_of=multiple)
      loaded[multiple] = tf.saved_model.load(export_saved_model(module, os.path.join(tmp, f"saved_model_{multiple}")))
    text_fn = loaded[16].signatures["serving_default"]
    text_tensor = tf.constant(texts)
    packed = text_fn(text=text_tensor)
    ids = {k: tf.cast(packed[k], tf.int32) for k in ("input_word_ids", "input_mask", "input_type_ids")}
    lengths = packed["input_mask"].numpy().sum(-1)
    flops = float(sum(encoder_flops_per_example(config, int(n)) for n in lengths)
                  + b * 2 * config.hidden_size * settings.num_labels)
    tokens = int(lengths.sum())
    keras_fn = tf.function(lambda x: model(x)["logits"])
    runners = []
    for multiple, label in ((16, "dynamic_padding"), (0, "full_padding")):
      text_sig, ids_sig = loaded[multiple].signatures["serving_default"], loaded[multiple].signatures["from_ids"]
      runners += [
          Runner(f"saved_model_text_in_{label}", "ours", "float32",
                 lambda f=text_sig: (lambda: _tf_block(f(text=text_tensor))), flops, b, tokens,
                 note=f"reloaded SavedModel serving_default: raw text, in-graph tokenizer, pad_to_multiple_of={multiple}"),
          Runner(f"saved_model_ids_in_{label}", "ours", "float32", lambda f=ids_sig: (lambda: _tf_block(f(**ids))),
                 flops, b, tokens, note=f"reloaded SavedModel from_ids, pad_to_multiple_of={multiple}")]
    runners.append(Runner("keras_model_ids_in", "ours", "float32", lambda: (lambda: keras_fn(ids).numpy()), flops, b,
                          tokens, note="the in-process AlbertClassifier under tf.function, full padding"))
    runners = (matmul_runners(settings) if settings.matmul_peak else []) + runners
    run_rotation(runners, settings, log)
    got = text_fn(text=text_tensor)["logits"].numpy()
    got_full = loaded[0].signatures["serving_default"](text=text_tensor)["logits"].numpy()
    want = keras_fn(ids).numpy()
  peaks = {r.dtype: r.flops / float(np.median(r.times)) / 1e9 for r in runners if r.impl == "matmul" and r.times}
  rows = [summarize_row(r, peaks) for r in runners]
  return {"rows": rows, "matmul_peak_gflops": peaks, "vocab_size": vocab_size, "spm_model_file": spm_file,
          "text_source": source, "mean_packed_length": float(lengths.mean()),
          "checks": {"text_in_vs_keras_max_abs_logit_diff": float(np.max(np.abs(got - want))),
                     "full_padding_text_in_vs_keras_max_abs_logit_diff": float(np.max(np.abs(got_full - want)))}}


# --------------------------------------------------------------------------------------------------- driver
def environment_info() -> Dict[str, Any]:
  import keras
  import tensorflow as tf
  info = {"python": sys.version.split()[0], "platform": platform.platform(), "cpu_count": os.cpu_count(),
          "tensorflow": tf.__version__, "keras": keras.__version__,
          "time_utc": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")}
  try:
    info["loadavg_start"] = os.getloadavg()
  except OSError:
    pass
  try:
    with open("/proc/cpuinfo") as f:
      cpuinfo = f.read()
    info["cpu_model"] = next((l.split(":", 1)[1].strip() for l in cpuinfo.splitlines() if l.startswith("model name")),
                             "")
    flags = next((l for l in cpuinfo.splitlines() if l.startswith("flags")), "")
    info["avx512_bf16"] = "avx512_bf16" in flags
    info["amx"] = "amx_bf16" in flags
  except OSError:
    pass
  for name in ("torch", "transformers", "keras_hub"):
    try:
      info[name] = importlib.import_module(name).__version__
    except Exception:  # Optional peers: absence is recorded, not an error.
      info[name] = None
  return info


def run_workload(settings: BenchSettings, log=print) -> Dict[str, Any]:
  """Runs one workload; returns its JSON-ready result."""
  if settings.workload not in WORKLOADS:
    raise ValueError(f"--workload={settings.workload!r} is not one of {WORKLOADS}.")
  log(f"[{settings.workload}] preset={settings.preset} batch={settings.batch_size} seq={settings.seq_length} "
      f"dtypes={list(settings.dtypes)} compare={list(settings.compare)}")
  result: Dict[str, Any] = {"settings": dataclasses.asdict(settings)}
  builders = {"encoder_inference": encoder_inference_runners, "pretrain_step": pretrain_step_runners,
              "finetune_step": finetune_step_runners, "finetune_padding": _finetune_padding_runners,
              "gemm": gemm_runners}
  if settings.workload in builders:
    reason = module_available("official_albert.modeling.models")
    if reason:
      result.update(status="skipped", reason=f"official_albert.modeling.models not available: {reason}")
      return result
    import tensorflow as tf
    tf.keras.utils.set_random_seed(settings.seed)
    runners, checks = builders[settings.workload](settings)
    if settings.rows:
      unknown = sorted(set(settings.rows) - {r.name for r in runners})
      if unknown:
        raise ValueError(f"--rows: no such row(s) {unknown} in {settings.workload}; known: "
                         f"{[r.name for r in runners if r.impl == 'ours']}.")
      runners = [r for r in runners if r.impl != "ours" or r.name in settings.rows]
    if settings.matmul_peak:
      runners = matmul_runners(settings) + runners
    run_rotation(runners, settings, log)
    peaks = {r.dtype: r.flops / float(np.median(r.times)) / 1e9 for r in runners
             if r.impl == "matmul" and r.status == "ok" and r.times}
    rows = [summarize_row(r, peaks) for r in runners]
    result.update(status="ok", rows=rows, matmul_peak_gflops=peaks, ratio_to_peers=ratios(rows),
                  paired_ratio_to_peers=ratios(rows, paired=True),
                  checks=checks,
                  flops_per_example=next((r.flops / r.examples for r in runners if r.impl != "matmul" and r.examples),
                                         0.0))
    bf16_checks = {k: v for k, v in checks.items() if isinstance(v, dict) and "bfloat16" in k
                   and "cosine_to_fp32_reference" in v}
    if bf16_checks:
      result["bf16_cosine_ok"] = all(v["cosine_to_fp32_reference"]["flattened"] >= COSINE_GOAL
                                     for v in bf16_checks.values())
    result["goals"] = goals(settings.workload, rows, checks)
  elif settings.workload == "compile":
    result.update(status="ok", **compile_workload(settings, log))
  elif settings.workload == "tokenize":
    result.update({"status": "ok", **tokenize_workload(settings, log)})
  elif settings.workload == "data_prep":
    result.update({"status": "ok", **data_prep_workload(settings, log)})
  elif settings.workload == "serving":
    result.update({"status": "ok", **serving_workload(settings, log)})
  elif settings.workload in ("train_loop", "input_pipeline"):
    from experiments.benchmark import training as benchmark_training  # Its own module; it imports this one.
    workload = getattr(benchmark_training, f"{settings.workload}_workload")
    result.update({"status": "ok", **workload(settings, log)})
  return result


def plot(result: Dict[str, Any], path: str) -> Optional[str]:
  """A bar chart of examples/s (median, min-max whiskers) for a row-based workload; None when there is nothing."""
  rows = [r for r in result.get("rows", []) if r.get("status") == "ok" and "examples_per_s" in r]
  if not rows:
    return None
  import matplotlib
  matplotlib.use("Agg")
  from matplotlib import pyplot as plt
  names = [r["name"] for r in rows]
  values = [r["examples_per_s"] for r in rows]
  low = [r["examples_per_s"] - r["examples_per_s"] * r["median_s"] / r["max_s"] for r in rows]
  high = [r["examples_per_s"] * r["median_s"] / r["min_s"] - r["examples_per_s"] for r in rows]
  colors = {"ours": "tab:blue", "hf_torch": "tab:orange", "keras_hub": "tab:green"}
  fig, ax = plt.subplots(figsize=(9, 0.4 * len(rows) + 1.5))
  ax.barh(range(len(rows)), values, xerr=[low, high], color=[colors.get(r["impl"], "tab:gray") for r in rows])
  ax.set_yticks(range(len(rows)), names, fontsize=8)
  ax.invert_yaxis()
  s = result["settings"]
  unit = result.get("unit", "examples")
  ax.set_xlabel(f"{unit}/s (median; whiskers min-max)")
  ax.set_title(f"{s['workload']} {s.get('preset', '')} batch={s['batch_size']} seq={s['seq_length']}", fontsize=10)
  for i, r in enumerate(rows):
    label = f"{r['examples_per_s']:.2f}" + (f"  MFU {r['mfu']:.0%}" if "mfu" in r else "")
    ax.text(r["examples_per_s"], i, " " + label, va="center", fontsize=7)
  fig.tight_layout()
  from official_albert import file_io
  with file_io.atomic_path(path) as tmp:
    fig.savefig(tmp, dpi=110, format="png")
  plt.close(fig)
  return path


def write_results(results: Dict[str, Any], output_dir: str, log=print) -> str:
  """Writes results.json (atomically) and one PNG per row-based workload; returns the JSON path."""
  from official_albert import file_io
  file_io.makedirs(output_dir)
  for key, result in results["workloads"].items():
    if "://" in output_dir:
      continue  # matplotlib writes local files only.
    png = plot(result, os.path.join(output_dir, f"{key}.png"))
    if png:
      result["chart"] = os.path.basename(png)
  path = os.path.join(output_dir, "results.json")
  file_io.atomic_write_text(path, json.dumps(results, indent=2, sort_keys=False, default=float) + "\n")
  log(f"wrote {path}")
  return path


def format_table(results: Dict[str, Any]) -> str:
  """A markdown table of every row (the README performance section is made from it)."""
  lines = ["| workload | row | dtype | median s | ex/s | tokens/s | GFLOP/s | MFU | first call s |",
           "|---|---|---|---|---|---|---|---|---|"]
  for key, result in results["workloads"].items():
    for r in result.get("rows", []):
      if "status" not in r:
        continue  # compile/data_prep rows have their own layout (see results.json).
      if r.get("status") != "ok" or "median_s" not in r:
        if "name" in r and r.get("status") != "ok":
          lines.append(f"| {key} | {r['name']} | {r.get('dtype', '')} | {r.get('status')}: "
                       f"{r.get('reason', '')[:60]} | | | | | |")
        continue
      mfu = f"{r['mfu']:.0%}" if "mfu" in r else ""
      lines.append(f"| {key} | {r['name']} | {r['dtype']} | {r['median_s']:.3f} | "
                   f"{r.get('examples_per_s', 0):.2f} | {r.get('tokens_per_s', 0):.0f} | {r['gflops']:.1f} | {mfu} | "
                   f"{r['first_call_s']:.1f} |")
  return "\n".join(lines)


def run(settings_list: Sequence[BenchSettings], output_dir: str, log=print) -> Dict[str, Any]:
  """Runs the workloads in order and writes the results; returns them."""
  results = {"environment": environment_info(), "command": " ".join(sys.argv), "workloads": {}}
  for settings in settings_list:
    key = settings.workload if settings.workload not in results["workloads"] else \
        f"{settings.workload}_{len(results['workloads'])}"
    results["workloads"][key] = run_workload(settings, log)
  try:
    results["environment"]["loadavg_end"] = os.getloadavg()
  except OSError:
    pass
  write_results(results, output_dir, log)
  log(format_table(results))
  for key, result in results["workloads"].items():
    for g in result.get("goals", []):
      log(f"[{key}] goal {g['goal']}: {g['status']}" + (f" (ratio of medians {g['ratio']:.2f}, paired "
                                                        f"{g['paired_ratio']:.2f})" if "ratio" in g else ""))
    if "comparison" in result:
      log(f"[{key}] " + json.dumps(result["comparison"]))
    if "median_instances_per_s" in result:
      log(f"[{key}] {result['median_instances_per_s']:.0f} instances/s (target 3300)")
  return results


def settings_from_flags(flag_values) -> List[BenchSettings]:
  def split(value):
    return tuple(x.strip() for x in value.split(",") if x.strip()) if value else ()

  compare = () if flag_values.compare in ("", "none") else split(flag_values.compare)
  for peer in compare:
    if peer not in PEERS:
      raise ValueError(f"--compare: unknown peer {peer!r}; known: {PEERS}.")
  dtypes = split(flag_values.dtype)
  for dtype in dtypes:
    if dtype not in ("float32", "bfloat16"):
      raise ValueError(f"--dtype: unknown dtype {dtype!r}; expected float32 and/or bfloat16.")
  base = dict(batch_size=flag_values.batch_size, seq_length=flag_values.seq_length,
              max_predictions_per_seq=flag_values.max_predictions_per_seq, compare=compare,
              repeats=flag_values.repeats, warmup=flag_values.warmup, seed=flag_values.seed,
              matmul_peak=flag_values.matmul_peak, spm_model_file=flag_values.spm_model_file,
              text_file=flag_values.text_file, variants=flag_values.variants, rows=split(flag_values.rows))
  if flag_values.suite:
    if flag_values.suite not in SUITES:
      raise ValueError(f"--suite={flag_values.suite!r} is not one of {sorted(SUITES)}.")
    out = []
    for entry in SUITES[flag_values.suite]:
      entry = dict(entry)
      if "dtype" in entry:
        entry["dtypes"] = split(entry.pop("dtype"))
      if "compare" in entry:  # The suite narrows the peers to those that matter here; --compare still limits them.
        entry["compare"] = tuple(p for p in split(entry.pop("compare")) if p in compare)
      out.append(BenchSettings(**{**base, **entry}))
    return out
  return [BenchSettings(workload=flag_values.workload, preset=flag_values.preset, dtypes=dtypes, **base)]


def define_flags(fv=None) -> None:
  """Defines the binary's flags on `fv` (never at import time)."""
  from absl import flags
  fv = flags.FLAGS if fv is None else fv
  flags.DEFINE_enum("workload", "encoder_inference", list(WORKLOADS), "What to measure.", flag_values=fv)
  flags.DEFINE_string("suite", None, f"A named list of workloads instead of --workload: {sorted(SUITES)}.", flag_values=fv)
  flags.DEFINE_string("preset", "albert-base-v2", "albert-* preset, 'tiny', or a config.json path.", flag_values=fv)
  flags.DEFINE_integer("batch_size", 8, "Batch size.", flag_values=fv)
  flags.DEFINE_integer("seq_length", 128, "Sequence length.", flag_values=fv)
  flags.DEFINE_integer("max_predictions_per_seq", 20, "Masked positions per sequence (pretrain_step).", flag_values=fv)
  flags.DEFINE_string("dtype", "float32", "Comma-separated: float32, bfloat16 (bf16 = mixed_bfloat16 for ours).", flag_values=fv)
  flags.DEFINE_string("compare", ",".join(PEERS), "Comma-separated peers to run alongside ('none' for none).", flag_values=fv)
  flags.DEFINE_integer("repeats", 5, "Timed repetitions per row (interleaved across rows).", flag_values=fv)
  flags.DEFINE_integer("warmup", 1, "Untimed calls per row after the first (compiling) call.", flag_values=fv)
  flags.DEFINE_enum("variants", "all", ["all", "minimal"],
                    "all: every ablation row (tf.function/XLA, unfused QKV, layer loop, MLM at all positions); "
                    "minimal: ours with XLA per dtype, and the peers.", flag_values=fv)
  flags.DEFINE_string("rows", None, "Comma-separated names of our rows to keep (default: all of --variants).", flag_values=fv)
  flags.DEFINE_integer("seed", 0, "Seed of the weights and inputs.", flag_values=fv)
  flags.DEFINE_bool("matmul_peak", True, "Time the fp32/bf16 matmul peak in the same rotation (for MFU).", flag_values=fv)
  flags.DEFINE_string("spm_model_file", None, "SentencePiece model for tokenize/data_prep (default: test fixture).", flag_values=fv)
  flags.DEFINE_string("text_file", None, "Text lines for tokenize/data_prep (default: stdlib docstrings).", flag_values=fv)
  flags.DEFINE_string("output_dir", "bench_out", "Where results.json and the PNG charts go.", flag_values=fv)


def main(argv, fv=None) -> None:
  del argv
  from absl import flags
  import tensorflow as tf
  fv = flags.FLAGS if fv is None else fv
  tf.get_logger().setLevel("ERROR")  # Each row is its own tf.function; the retracing warning does not apply.
  run(settings_from_flags(fv), fv.output_dir)
