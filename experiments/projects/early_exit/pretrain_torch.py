r"""Pretrains the early-exit study's model (`experiments.projects.early_exit.study.STUDY_MODEL`) on a GPU, no TF.

    python experiments/projects/early_exit/pretrain_torch.py --arrays out/early_exit_study/pretrain_arrays.npz \
        --vocab_size 4000 --output_dir OUT/pretrained --steps 12000

The model gets as many positions as the arrays are wide when that is more than the study's 64 (arrays of records
at 128 pieces pretrain a 128-position model).

The study's CPU path pretrains with our own trainer (`--stage=pretrain`); this script is the alternative for a machine
with a GPU and PyTorch but no TensorFlow: Hugging Face's `AlbertForPreTraining` (the same architecture; our HF reader
checks every tensor) trained with MLM + SOP on the study's own pretraining records, exported by the study's data
stage as numpy arrays. It writes an HF model directory (`config.json` with ALBERT fields only, `model.safetensors`)
that `official_albert.checkpoints.loading` reads. Needs numpy, absl-py, torch, safetensors and transformers only.

It trains as the train binary pretrains (`official_albert.training`, restated here, held to it by
tests/experiments/projects/early_exit/test_study.py): the schedule of `AlbertLearningRateSchedule` (lr = peak·step/W
during the warm-up, from lr 0; then peak·(1 − step/T), the decay measured from step 0; `--warmup_steps=0`: no warm-up),
the binary's AdamW (reference §4.7: no bias correction; weight decay 0.01 except on the variables whose names match
LayerNorm, layer_norm or bias, as HF's `full_layer_layer_norm`; gradients clipped at global norm 1.0) and no dropout
anywhere, the SOP head's included (reference §1.6; the saved config.json keeps HF's `classifier_dropout_prob` 0.1 for
fine-tuning). Models trained before 2026-11-30 (the early-exit and retrieval READMEs' GPU models) used
torch's bias-corrected AdamW, a schedule one step ahead, weight decay on the FFN LayerNorm's gamma and SOP dropout 0.1.

Errors about the input (the arrays file, its ids over --vocab_size, a missing package) are one `error: <message>`
line on stderr, exit code 1, and `--verbose` shows their traceback, as every binary of the project (docs/design.md);
the script keeps that contract itself because it cannot import `official_albert.cli.launch` (see `console_main`).
"""

from __future__ import annotations

import json
import os
import re
import sys
import time

from absl import app
from absl import flags
import numpy as np

# The study's model (kept equal to study.STUDY_MODEL by a test; this script imports nothing of ours).
MODEL = dict(embedding_size=128, hidden_size=256, num_hidden_layers=12, num_hidden_groups=1, num_attention_heads=4,
             intermediate_size=1024, max_position_embeddings=64, hidden_dropout_prob=0.0,
             attention_probs_dropout_prob=0.0)
ALBERT_DEFAULTS = dict(inner_group_num=1, hidden_act="gelu_new", type_vocab_size=2, initializer_range=0.02,
                       layer_norm_eps=1e-12, classifier_dropout_prob=0.1, position_embedding_type="absolute",
                       pad_token_id=0, bos_token_id=2, eos_token_id=3)


# The train binary's AdamW (official_albert.training.optimization.create_optimizer, reference §4.6-§4.7), restated
# because this script imports nothing of ours; test_study.py checks they agree.
WEIGHT_DECAY_RATE = 0.01
EPSILON = 1e-6
BETA_1, BETA_2 = 0.9, 0.999
EXCLUDE_FROM_WEIGHT_DECAY = ("LayerNorm", "layer_norm", "bias")
CLIP_NORM = 1.0


def hf_config(vocab_size: int, max_positions: int = 0) -> dict:
  """The HF config of MODEL; `max_positions` (0: MODEL's) is the arrays' width when they are wider (another study's
  pretraining records, e.g. the retrieval study's at 128 pieces)."""
  positions = max(MODEL["max_position_embeddings"], max_positions)
  return {"architectures": ["AlbertForPreTraining"], "model_type": "albert", "vocab_size": vocab_size,
          **ALBERT_DEFAULTS, **MODEL, "max_position_embeddings": positions}


# The arrays the study's data stage writes (`experiments.pretraining_arrays.ARRAY_TYPES`; kept equal by a test).
ARRAY_NAMES = ("input_word_ids", "input_mask", "input_type_ids", "masked_lm_positions", "masked_lm_ids",
               "masked_lm_weights", "next_sentence_labels")


def training_config(config: dict) -> dict:
  """`config` (the saved one) as the training builds the model: no SOP dropout either. HF's `AlbertSOPHead` applies
  `classifier_dropout_prob` to the pooled output in training; the reference's SOP head has none (§1.6)."""
  return {k: v for k, v in config.items() if k != "architectures"} | {"classifier_dropout_prob": 0.0}


def learning_rate(step: int, peak: float, warmup: int, total: int) -> float:
  """The train binary's schedule (`AlbertLearningRateSchedule(peak, total, num_warmup_steps=warmup)`) at `step`
  (0 for the first update, as the optimizer's iteration count): peak·step/W during the warm-up, then
  peak·(1 − min(step, T)/T), measured from step 0; `warmup` 0 is no warm-up."""
  total = max(total, 1)
  if step < warmup:
    return peak * step / warmup
  return peak * (1.0 - min(step, total) / total)


def decays(name: str) -> bool:
  """Whether the variable `name` takes weight decay: not when a pattern of EXCLUDE_FROM_WEIGHT_DECAY is found in it
  (a regex search, as the train binary: HF's `full_layer_layer_norm.weight` is a LayerNorm gamma too)."""
  return not any(re.search(pattern, name) for pattern in EXCLUDE_FROM_WEIGHT_DECAY)


class AdamW:
  """The train binary's AdamW on torch tensors: the global-norm clip at CLIP_NORM, then for each weight w with
  gradient g, m = β1·m + (1−β1)·g, v = β2·v + (1−β2)·g², w −= lr·(m/(√v + ε) + 0.01·w if `decays`) — no bias
  correction (torch's AdamW has it: ~3× larger first updates at β2 0.999).

  Args:
    named_parameters: (name, parameter) pairs, as `model.named_parameters()` gives them.
  """

  def __init__(self, named_parameters):
    self.parameters = [(name, p) for name, p in named_parameters if p.requires_grad]
    self.decay = {name: WEIGHT_DECAY_RATE if decays(name) else 0.0 for name, _ in self.parameters}
    self.moments = {name: (p.detach().new_zeros(p.shape), p.detach().new_zeros(p.shape)) for name, p in self.parameters}

  def step(self, lr: float) -> None:
    """One update at learning rate `lr` from the parameters' `.grad` (None: no gradient, not updated)."""
    present = [(name, p, p.grad.detach()) for name, p in self.parameters if p.grad is not None]
    if not present:
      return
    norm = sum(g.float().square().sum() for _, _, g in present).sqrt()  # on the device: no host sync per step
    scale = CLIP_NORM / norm.clamp(min=CLIP_NORM)  # tf.clip_by_global_norm's rule
    for name, p, g in present:
      g = g * scale
      m, v = self.moments[name]
      m.mul_(BETA_1).add_(g, alpha=1.0 - BETA_1)
      v.mul_(BETA_2).add_(g * g, alpha=1.0 - BETA_2)
      update = m / (v.sqrt() + EPSILON)
      if self.decay[name]:
        update = update + self.decay[name] * p.detach()
      p.detach().sub_(lr * update)

  def zero_grad(self) -> None:
    """Drops the gradients (None, as torch's `set_to_none=True`: the next backward writes them afresh)."""
    for _, p in self.parameters:
      p.grad = None


class InputError(ValueError):
  """An error about what the user gave: one `error: ...` line unless `--verbose` (`official_albert.cli`'s rule,
  which this script cannot import)."""


def load_arrays(path: str):
  """The study's pretraining arrays as HF `AlbertForPreTraining` inputs (MLM labels -100 where not masked)."""
  if not os.path.isfile(path):
    raise InputError(f"--arrays {path}: no such file. Pass the early-exit study's pretrain_arrays.npz (its data stage "
                     "writes it: python -m experiments.projects.early_exit.study --stage=data).")
  data = np.load(path)
  missing = [name for name in ARRAY_NAMES if name not in data.files]
  if missing:
    raise InputError(f"--arrays {path} lacks the arrays {missing}: not the early-exit study's pretrain_arrays.npz "
                     "(its data stage writes it).")
  ids = data["input_word_ids"].astype(np.int64)
  labels = np.full(ids.shape, -100, np.int64)
  positions, targets, weights = data["masked_lm_positions"], data["masked_lm_ids"], data["masked_lm_weights"]
  rows = np.repeat(np.arange(len(ids))[:, None], positions.shape[1], 1)
  keep = weights > 0
  labels[rows[keep], positions[keep].astype(np.int64)] = targets[keep]
  return {"input_ids": ids, "attention_mask": data["input_mask"].astype(np.int64),
          "token_type_ids": data["input_type_ids"].astype(np.int64), "labels": labels,
          "sentence_order_label": data["next_sentence_labels"].astype(np.int64)}


_FLAG_NAMES = ("arrays", "vocab_size", "output_dir", "steps", "batch_size", "learning_rate", "warmup_steps", "seed",
               "max_seconds")


def define_flags(fv: flags.FlagValues = flags.FLAGS) -> None:
  """Defines the binary's flags on `fv` (absl, as every binary of the project; `--name value` and `--name=value`)."""
  flags.DEFINE_string("arrays", None, "The study's pretraining arrays (its data stage's pretrain_arrays.npz).",
                      flag_values=fv)
  flags.DEFINE_integer("vocab_size", None, "The SentencePiece model's vocabulary size.", flag_values=fv)
  flags.DEFINE_string("output_dir", None, "Where the HF directory is written.", flag_values=fv)
  flags.DEFINE_integer("steps", 10000, "Training steps.", flag_values=fv)
  flags.DEFINE_integer("batch_size", 256, "Sequences per step.", flag_values=fv)
  flags.DEFINE_float("learning_rate", 1e-3, "AdamW peak learning rate.", flag_values=fv)
  flags.DEFINE_integer("warmup_steps", 1000, "Linear warmup steps (0: none).", flag_values=fv)
  flags.DEFINE_integer("seed", 12345, "Seed of the weights and the batch order.", flag_values=fv)
  flags.DEFINE_float("max_seconds", 0.0, "Fewer steps when steps 10-40 say that --steps would take longer (0 = no "
                     "limit).", flag_values=fv)
  flags.DEFINE_boolean("verbose", False, "Show the traceback of an error about the input (the arrays file, a missing "
                       "package); without it such an error is one `error: ...` line.", flag_values=fv)
  for name in ("arrays", "vocab_size", "output_dir"):
    flags.mark_flag_as_required(name, flag_values=fv)


def _save(output_dir: str, model, config: dict, record: dict) -> None:
  """model.safetensors (float32, HF names), config.json and pretrain_log.json: an HF directory our reader loads."""
  from safetensors.torch import save_file  # noqa: PLC0415 (optional extra)
  os.makedirs(output_dir, exist_ok=True)
  state = {k: v.detach().float().cpu().contiguous().clone() for k, v in model.state_dict().items()}
  # Each file whole or not at all (a temporary renamed into place; a kill mid-write left a cut safetensors that a
  # rerun's reader took for the model), the log last: it says the directory is complete.
  _write_atomically(os.path.join(output_dir, "model.safetensors"),
                    lambda path: save_file(state, path, metadata={"format": "pt"}))
  for name, value in (("config.json", config), ("pretrain_log.json", record)):
    _write_atomically(os.path.join(output_dir, name), lambda path, value=value: _write_json(path, value))


def _write_json(path: str, value: dict) -> None:
  with open(path, "w", encoding="utf-8") as f:
    json.dump(value, f, indent=2)


def _write_atomically(path: str, write) -> None:
  """`write(temporary)` then the temporary renamed to `path` (same folder: one filesystem); removed on failure."""
  temporary = f"{path}.tmp-{os.getpid()}"
  try:
    write(temporary)
    os.replace(temporary, path)
  finally:
    if os.path.exists(temporary):
      os.remove(temporary)


def _torch_and_hf():
  """torch and transformers' `AlbertConfig`, `AlbertForPreTraining`; safetensors is checked too (`_save` needs it
  after the training). A missing one is an InputError naming what to install."""
  try:
    import safetensors.torch  # noqa: F401,PLC0415 (optional extra; `_save`'s, checked before the training)
    import torch  # noqa: PLC0415 (optional extra)
    from transformers import AlbertConfig  # noqa: PLC0415 (optional extra)
    from transformers import AlbertForPreTraining  # noqa: PLC0415 (optional extra)
  except ImportError as e:
    raise InputError(f"{e}: this script needs torch, transformers and safetensors (pip install torch transformers "
                     "safetensors).") from e
  return torch, AlbertConfig, AlbertForPreTraining


def main(argv, fv: flags.FlagValues = flags.FLAGS) -> None:
  del argv
  args = fv
  inputs = load_arrays(args.arrays)  # before the slow imports: a wrong path fails at once
  largest = int(max(inputs["input_ids"].max(), inputs["labels"].max()))
  if args.vocab_size <= largest:  # else an IndexError in torch.embedding (a device-side assert on CUDA)
    raise InputError(f"--vocab_size={args.vocab_size}: the arrays hold ids up to {largest} (give {largest + 1} or "
                     "more: the SentencePiece model's size; gpu_pretraining --step=arrays prints it).")
  if args.warmup_steps < 0:
    raise InputError(f"--warmup_steps={args.warmup_steps}: give 0 (no warm-up) or more.")
  torch, AlbertConfig, AlbertForPreTraining = _torch_and_hf()
  torch.manual_seed(args.seed)
  device = "cuda" if torch.cuda.is_available() else "cpu"
  arrays = {k: torch.from_numpy(v) for k, v in inputs.items()}
  count = len(arrays["input_ids"])
  config = hf_config(args.vocab_size, inputs["input_ids"].shape[1])  # wider arrays: as many positions
  model = AlbertForPreTraining(AlbertConfig(**training_config(config))).to(device)
  optimizer = AdamW(model.named_parameters())
  total = {"steps": args.steps}  # may shrink after the timing probe (--max_seconds)
  generator = torch.Generator().manual_seed(args.seed)
  order = torch.randperm(count, generator=generator)
  cursor, start, log = 0, time.time(), []
  model.train()
  step = 0
  while step < total["steps"]:
    if step == 10:
      probe_start = time.time()
    if step == 40 and args.max_seconds:  # (steps 10-40: after the first steps' start-up cost)
      per_step = (time.time() - probe_start) / 30
      total["steps"] = min(args.steps, int((args.max_seconds - (time.time() - start)) / per_step) + 40)
      print(f"{per_step * 1e3:.1f} ms/step: {total['steps']} steps", flush=True)
    if cursor + args.batch_size > count:
      order, cursor = torch.randperm(count, generator=generator), 0
    index = order[cursor:cursor + args.batch_size]
    cursor += args.batch_size
    batch = {k: v[index].to(device, non_blocking=True) for k, v in arrays.items()}
    with torch.autocast(device_type=device, dtype=torch.bfloat16, enabled=device == "cuda"):
      out = model(**batch)
    out.loss.backward()
    optimizer.step(learning_rate(step, args.learning_rate, args.warmup_steps, total["steps"]))
    optimizer.zero_grad()
    if step % 500 == 0 or step == total["steps"] - 1:
      with torch.no_grad():
        mlm = out.prediction_logits.argmax(-1)
        masked = batch["labels"] != -100
        mlm_acc = float((mlm[masked] == batch["labels"][masked]).float().mean())
        sop_acc = float((out.sop_logits.argmax(-1) == batch["sentence_order_label"]).float().mean())
      log.append({"step": step, "loss": float(out.loss.detach()), "mlm_accuracy": mlm_acc, "sop_accuracy": sop_acc,
                  "seconds": time.time() - start})
      print(json.dumps(log[-1]), flush=True)
    step += 1
  _save(args.output_dir, model, config,
        {"args": {name: fv[name].value for name in _FLAG_NAMES}, "steps": total["steps"], "instances": count,
         "device": device,
         "gpu": torch.cuda.get_device_name() if device == "cuda" else None, "log": log,
         "epochs": total["steps"] * args.batch_size / count, "wall_s": time.time() - start})
  print("wrote", args.output_dir, f"{time.time() - start:.0f}s, {total['steps'] * args.batch_size / count:.1f} "
        "epochs", flush=True)


def run_main(argv, fv: flags.FlagValues = flags.FLAGS) -> int:
  """`main`, with an `InputError` as one `error: ...` line on stderr and exit code 1 unless `--verbose`."""
  try:
    main(argv, fv)
  except InputError as e:
    if fv["verbose"].value:
      raise
    sys.stdout.flush()
    sys.stderr.write(f"error: {e}\n")
    sys.stderr.flush()
    return 1
  return 0


def console_main() -> None:
  """`albert-early-exit-pretrain-torch` (pyproject.toml), or this file run by path. absl's `app.run` directly, not
  `official_albert.cli.launch`: the script imports nothing of ours, so that a PyTorch host needs no checkout (run by
  path, the project is not importable). `define_flags` and `run_main` keep the launcher's `--verbose` and
  `error: ...` contract instead."""
  before = set(flags.FLAGS)
  define_flags(flags.FLAGS)
  # --help lists the main module's key flags only, and the console script's main module is its bin/ wrapper, not
  # this module: mark them as the script's own (as cli.launch does), or --help shows none.
  for name in sorted(set(flags.FLAGS) - before):
    flags.FLAGS.register_key_flag_for_module(sys.argv[0], flags.FLAGS[name])
  app.run(lambda argv: run_main(argv, flags.FLAGS))


if __name__ == "__main__":
  console_main()
