"""The peer rows: HF transformers on PyTorch and KerasHub, with our config and random weights.

Peers (optional; a missing one gives a row with status "skipped" and the reason):
  hf_torch: transformers `AlbertModel` / `AlbertForPreTraining` / `AlbertForSequenceClassification`, PyTorch eager,
    same config, random weights, inference under `torch.inference_mode`; training uses `torch.optim.AdamW`. In
    bfloat16 HF's two recommended CPU usages are both rows of encoder_inference and pretrain_step (issue 13: the goals
    take the faster): `autocast` (`torch.autocast("cpu", torch.bfloat16)`, float32 weights and optimizer state) and
    `pure` (`model.to(torch.bfloat16)`: bf16 weights, no casts; in training also bf16 AdamW state).
    finetune_step keeps one bf16 row (autocast).
  keras_hub: `keras_hub.models.AlbertBackbone` (float32) under `tf.function` and under `tf.function(jit_compile=True)`.
`hf_albert_model` can also load our weights (openvino_inference compares engines on the same weights), and
`torch_matmul_runners` puts torch's 2048² matmul in a rotation (the in-run peak is then the faster framework's).
"""

from __future__ import annotations

import contextlib
from typing import Dict, List, Optional, Sequence

import numpy as np

from experiments.benchmark.core import BenchSettings
from experiments.benchmark.core import keras_policy
from experiments.benchmark.core import MATMUL_N
from experiments.benchmark.core import module_available
from experiments.benchmark.core import PEERS
from experiments.benchmark.core import Runner
from experiments.benchmark.core import skipped


def make_hf_config(config):
  """The transformers config of our `config`, dropout off (the peer runs the same model as ours, deterministically;
  our training rows take their config from core.training_config, dropout off too)."""
  import transformers
  data = config.to_hf_dict()
  data.update(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, classifier_dropout_prob=0.0)
  data.pop("architectures", None)
  data.pop("model_type", None)
  return transformers.AlbertConfig(**data)


def torch_inputs(batch):
  """The encoder inputs of a `core.random_batch` as torch tensors under the transformers argument names."""
  import torch
  return dict(input_ids=torch.from_numpy(batch["input_word_ids"]).long(),
              attention_mask=torch.from_numpy(batch["input_mask"]).long(),
              token_type_ids=torch.from_numpy(batch["input_type_ids"]).long())


def _torch_autocast(dtype):
  import torch
  if dtype == "bfloat16":
    return torch.autocast("cpu", dtype=torch.bfloat16)
  return contextlib.nullcontext()


# The ways a bfloat16 HF row runs: torch autocast over float32 weights, or the model cast to bfloat16 ("pure").
BF16_MODES = ("autocast", "pure")


def hf_row_name(prefix: str, dtype: str, mode: str = "autocast") -> str:
  """`{prefix}_float32`, or `{prefix}_{mode}_bfloat16` (mode in BF16_MODES)."""
  if dtype != "bfloat16":
    return f"{prefix}_{dtype}"
  if mode not in BF16_MODES:
    raise ValueError(f"unknown bf16 mode {mode!r}; known: {BF16_MODES}.")
  return f"{prefix}_{mode}_{dtype}"


def hf_modes(dtype: str):
  """The HF rows of one dtype: (mode, autocast?) pairs — float32 has one, bfloat16 both BF16_MODES."""
  return [("autocast", True), ("pure", False)] if dtype == "bfloat16" else [("autocast", False)]


def cast_model(model, dtype: str, mode: str):
  """`model` as the row runs it: cast to torch.bfloat16 for a pure-bf16 row, else unchanged (float32)."""
  import torch
  return model.to(torch.bfloat16) if dtype == "bfloat16" and mode == "pure" else model


def torch_adamw_step(model, lr: float, dtype: str, loss_fn, autocast: bool = True):
  """A callable doing one torch AdamW update per call: `loss_fn(*args)` gives the loss (under bf16 autocast for
  bfloat16 when `autocast`; a pure-bf16 model is given already cast); returns the loss as a float (which also waits
  for the step)."""
  import torch
  opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)

  def step(*args):
    with _torch_autocast(dtype if autocast else "float32"):
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


def hf_albert_model(config, seed: int, state=None):
  """transformers `AlbertModel` (eval mode) of our `config`: seeded random weights, or `state` (an HF state dict of
  numpy arrays, e.g. `official_albert.checkpoints.hf.hf_output_state(encoder, "encoder")[0]`: the same weights as
  ours). Raises when `state` leaves a weight unset or has a key the model lacks."""
  import torch
  import transformers
  torch.manual_seed(seed)
  model = transformers.AlbertModel(make_hf_config(config)).eval()
  if state is not None:
    result = model.load_state_dict({k: torch.from_numpy(v.copy()) for k, v in state.items()}, strict=False)
    missing = [k for k in result.missing_keys if not k.endswith("position_ids")]  # a buffer, not a weight
    if missing or result.unexpected_keys:
      raise ValueError(f"HF AlbertModel weights: missing {missing[:5]}, unexpected {result.unexpected_keys[:5]}.")
  return model


def hf_inference_runner(config, batch, dtype, flops, settings, mode: str = "autocast", state=None,
                        check=None) -> Runner:
  """The HF AlbertModel forward row: float32, or bfloat16 by `mode` (BF16_MODES); `state` as `hf_albert_model`."""
  def build():
    import torch
    model = cast_model(hf_albert_model(config, settings.seed, state), dtype, mode)
    inputs = torch_inputs(batch)
    autocast = dtype if mode == "autocast" else "float32"

    def step():
      with torch.inference_mode(), _torch_autocast(autocast):
        return model(**inputs).last_hidden_state.float().numpy()
    return step
  b, s = batch["input_word_ids"].shape
  how = {"autocast": ", bf16 autocast", "pure": ", model.to(torch.bfloat16)"}[mode] if dtype == "bfloat16" else ""
  return Runner(hf_row_name("hf_torch_eager", dtype, mode), "hf_torch", dtype, build, flops, b, b * s, check=check,
                note="transformers AlbertModel, PyTorch eager" + how)


def torch_matmul_runners(settings: BenchSettings, dtypes=("bfloat16",)) -> List[Runner]:
  """torch 2048² matmuls in the rotation (impl "matmul"): with TF's, the in-run peak is the larger of the two."""
  runners = []
  for dtype in dtypes:
    def build(dtype=dtype):
      import torch
      rng = np.random.default_rng(settings.seed)
      a, b = (torch.from_numpy(rng.standard_normal((MATMUL_N, MATMUL_N)).astype(np.float32)).to(getattr(torch, dtype))
              for _ in range(2))
      return lambda: float((a @ b).float().sum())
    runners.append(Runner(f"torch_matmul_{MATMUL_N}_{dtype}", "matmul", dtype, build, flops=2.0 * MATMUL_N ** 3,
                          note="torch.matmul"))
  return runners


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
