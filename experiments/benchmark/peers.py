"""The peer rows: HF transformers on PyTorch and KerasHub, with our config and random weights.

Peers (optional; a missing one gives a row with status "skipped" and the reason):
  hf_torch: transformers `AlbertModel` / `AlbertForPreTraining` / `AlbertForSequenceClassification`, PyTorch eager,
    same config, random weights, inference under `torch.inference_mode`; the bfloat16 row uses
    `torch.autocast("cpu", torch.bfloat16)`; training uses `torch.optim.AdamW`.
  keras_hub: `keras_hub.models.AlbertBackbone` (float32) under `tf.function` and under `tf.function(jit_compile=True)`.
"""

from __future__ import annotations

import contextlib
from typing import Dict, List, Optional, Sequence

from experiments.benchmark.core import PEERS, BenchSettings, Runner, keras_policy, module_available, skipped


def make_hf_config(config):
  """The transformers config of our `config`, dropout off (the peer runs the same model as ours, deterministically)."""
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


def torch_adamw_step(model, lr: float, dtype: str, loss_fn):
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
    model = transformers.AlbertModel(make_hf_config(config)).eval()
    inputs = torch_inputs(batch)

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
