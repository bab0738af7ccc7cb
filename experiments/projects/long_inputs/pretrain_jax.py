r"""Continued MLM pretraining of the demo model extended to 4,096 positions (Longformer's recipe) on Keras' JAX.

    # 1. where TensorFlow and SentencePiece run: the corpus as piece ids, the model extended to --seq_length positions
    python -m experiments.projects.long_inputs.pretrain_jax --stage=prepare --pretrained_dir=demo_out/model \
        --spm_model_file=demo_out/spm/spiece.model --corpus_dir=demo_out/corpus --output_dir=long_pretrain
    # 2. where JAX runs (keras, jax, numpy, absl-py, safetensors; no TensorFlow, no SentencePiece)
    python -m experiments.projects.long_inputs.pretrain_jax --stage=pretrain --output_dir=long_pretrain \
        --attention_type=block_sparse

`prepare` tokenizes the demo's training and held-out corpus (one sentence per line, a blank line between documents,
as `data_prep` writes it) with the model's SentencePiece model into piece ids (`pieces.npz`: uint16 ids and document
offsets, with the vocabulary's whole-word start table), converts the pretrained model to an HF directory twice — as
it is (`model_short/`, the short-model baseline) and with its position table extended to `--seq_length` rows by
copying the trained rows (`model/`, `checkpoints.extend`) — and writes `settings.json`. For the demo that is ~3 MB.

`pretrain` continues pretraining the extended model with MLM at `--seq_length`: each sequence is `[CLS]` + a window
of contiguous pieces of the training stream + `[SEP]` (documents concatenated, a `[SEP]` between two documents),
masked on the host for every batch with the pretraining data's own masker (`data_prep.pretraining_instances`: 15 %
of the pieces, whole-word n-grams up to 3 with p(n) ∝ 1/n, 80/10/10 [MASK]/keep/random). Masked-LM slots per
sequence are ceil(0.15 × length) — 615 at 4,096, 5 at the demo's 32 — so the 15 % budget is never cut (the
reference's 20 slots at 128 is the same rule). Held-out MLM accuracy (masked pieces predicted exactly) is measured
on one fixed masking of the held-out text: (a) the original model at its own length on that text cut into windows
of its length, (b) the extended model at `--seq_length` before training, then every quarter and at the end; and the
extended model (dense) on (a)'s windows, which must equal (a) — the copied rows keep the old ones bit-identical.

SOP is left out: continued pretraining follows Longformer (MLM only), and ALBERT's SOP at 4,096 would need two
segments of ~2,000 pieces from one document, longer than most demo documents; the SOP head is not trained (its
weights get no gradient; only the weight decay moves its kernel, as it would in the train binary, its bias stays).
The training loop is `experiments.jax_loop`'s (`stateless_call` under `jax.value_and_grad`, the train binary's AdamW
— no bias correction, LayerNorm and biases not decayed, clipped at global norm 1.0 — and its warmup/linear-decay
schedule), shared with `finetune_jax`: the train binary needs TensorFlow (docs/backends.md). The train binary
pretrains with LAMB by default; this continued pretraining uses its AdamW. Results measured before 2026-11-30 used
Keras' bias-corrected AdamW (every variable decayed) and a shifted schedule (the README says which).

Long because: the two stages run on two hosts and share one layout (the piece arrays, the windows, the masking and
the settings), which two files would have to keep in step.
"""

from __future__ import annotations

import dataclasses
import json
import os
import random
import time
from typing import Any, Callable, Dict, List, Optional, Sequence

from absl import flags
import numpy as np

from data_prep import pretraining_instances as pi
from experiments import jax_loop
from official_albert import cli
from official_albert import file_io
from official_albert import model_directory as md
from tasks.masking_options import MaskingOptions
from tasks.masking_options import num_predictions

PIECES_FILE = "pieces.npz"
SETTINGS_FILE = "settings.json"
MODEL_DIR = "model"
SHORT_MODEL_DIR = "model_short"
SUMMARY_FILE = "long_pretrain_summary.json"
SPLITS = ("train", "heldout")
_ENCODER_FEATURES = ("input_word_ids", "input_mask", "input_type_ids", "masked_lm_positions")


@dataclasses.dataclass(frozen=True)
class PretrainSettings:
  """One continued-pretraining run (prepare fixes seq_length; every field can be overridden at `pretrain`)."""
  seq_length: int = 4096
  attention_type: str = "block_sparse"
  block_size: int = 64
  num_random_blocks: int = 3
  train_steps: int = 3000
  batch_size: int = 8
  learning_rate: float = 5e-4
  masked_lm_prob: float = MaskingOptions.masked_lm_prob
  ngram: int = 3
  eval_windows: int = 0  # held-out windows at seq_length evaluated (0: all of the held-out text)
  eval_batch_size: int = 8
  seed: int = 0

  @property
  def max_predictions_per_seq(self) -> int:
    return num_predictions(self.seq_length, self.masked_lm_prob)


def read_documents(path: str) -> List[List[str]]:
  """Documents of a corpus file: lists of non-empty lines, a blank line between documents."""
  documents, current = [], []
  with open(path, encoding="utf-8") as f:
    for line in f:
      line = line.strip()
      if line:
        current.append(line)
      elif current:
        documents.append(current)
        current = []
  if current:
    documents.append(current)
  if not documents:
    raise ValueError(f"{path}: no text (expected one sentence per line, a blank line between documents).")
  return documents


def prepare(pretrained_dir: str, corpus_dir: str, output_dir: str, settings: PretrainSettings,
            spm_model_file: Optional[str] = None, log: Callable[[str], None] = print) -> Dict[str, Any]:
  """Corpus → piece ids; the pretrained model → HF directories at its own length and at `settings.seq_length`."""
  from official_albert.checkpoints import convert as convert_lib  # pylint: disable=g-import-not-at-top
  from official_albert.checkpoints.sentence_transformers_folder import model_tokenizer_options  # noqa: PLC0415
  from official_albert.tokenization import FullTokenizer  # pylint: disable=g-import-not-at-top
  spm_model_file = spm_model_file or md.require_spm_model(pretrained_dir, "prepare (or pass --spm_model_file)")
  options = model_tokenizer_options(pretrained_dir)  # (the model's casing: a cased model reads cased pieces)
  tokenizer = FullTokenizer(spm_model_file, **options)
  sp = tokenizer.sp_model
  vocab = pi.VocabInfo.from_pieces([sp.IdToPiece(i) for i in range(sp.GetPieceSize())])
  dtype = np.uint16 if vocab.vocab_size <= np.iinfo(np.uint16).max + 1 else np.int32
  arrays = {"is_start": vocab.is_start}
  info = {"settings": dataclasses.asdict(settings), "pretrained_dir": os.path.abspath(pretrained_dir),
          "spm_model_file": os.path.abspath(spm_model_file), "tokenizer": options, "vocab_size": vocab.vocab_size,
          "cls_id": vocab.cls_id, "sep_id": vocab.sep_id, "mask_id": vocab.mask_id}
  for split in SPLITS:
    path = os.path.join(corpus_dir, f"{split}.txt")
    documents = read_documents(path)
    ids = tokenizer.encode_ids_batch([line for document in documents for line in document])
    lengths = np.asarray([len(x) for x in ids], np.int64)
    line_ends = np.cumsum([len(d) for d in documents])
    per_document = np.add.reduceat(lengths, np.concatenate([[0], line_ends[:-1]])) if len(lengths) else lengths
    arrays[f"{split}_ids"] = np.concatenate([np.asarray(x, dtype) for x in ids])
    arrays[f"{split}_offsets"] = np.concatenate([[0], np.cumsum(per_document)]).astype(np.int64)
    info[split] = {"file": os.path.abspath(path), "documents": len(documents), "pieces": int(lengths.sum())}
    log(f"[long_pretrain_jax] {split}: {len(documents)} documents, {int(lengths.sum())} pieces")
  os.makedirs(output_dir, exist_ok=True)
  with file_io.atomic_path(os.path.join(output_dir, PIECES_FILE)) as tmp, open(tmp, "wb") as f:
    np.savez_compressed(f, **arrays)
  convert_lib.convert("native", pretrained_dir, "hf", os.path.join(output_dir, SHORT_MODEL_DIR))
  convert_lib.convert("native", pretrained_dir, "hf", os.path.join(output_dir, MODEL_DIR),
                      max_position_embeddings=settings.seq_length)
  short_config = md.read_json(md.path(os.path.join(output_dir, SHORT_MODEL_DIR), md.CONFIG_FILE))
  info["short_seq_length"] = int(short_config["max_position_embeddings"])
  file_io.atomic_write_json(os.path.join(output_dir, SETTINGS_FILE), info)
  return info


# ----------------------------------------------------------------------------------------------------- sequences
def piece_stream(ids: np.ndarray, offsets: np.ndarray, sep_id: int) -> np.ndarray:
  """The documents end to end with a `[SEP]` between two documents (int32)."""
  ids = ids.astype(np.int32)
  return np.insert(ids, offsets[1:-1], sep_id) if len(offsets) > 2 else ids


def windows_at(stream: np.ndarray, starts: Sequence[int], seq_length: int, cls_id: int, sep_id: int) -> np.ndarray:
  """[N, seq_length]: `[CLS]` + stream[start : start + seq_length - 2] + `[SEP]` for each start."""
  body = seq_length - 2
  if len(stream) < body:
    raise ValueError(f"the text has {len(stream)} pieces, fewer than one sequence of {seq_length} needs ({body}).")
  out = np.empty((len(starts), seq_length), np.int32)
  out[:, 0], out[:, -1] = cls_id, sep_id
  for row, start in enumerate(starts):
    out[row, 1:-1] = stream[start:start + body]
  return out


def heldout_windows(stream: np.ndarray, seq_length: int, text_pieces: int, cls_id: int, sep_id: int) -> np.ndarray:
  """The first `text_pieces` pieces of the held-out stream cut into consecutive windows of `seq_length`."""
  body = seq_length - 2
  return windows_at(stream, range(0, text_pieces - body + 1, body), seq_length, cls_id, sep_id)


def mask_windows(windows: np.ndarray, vocab, masked_lm_prob: float, ngram: int, rng: random.Random
                 ) -> Dict[str, np.ndarray]:
  """The pretrainer's inputs for full windows, masked by the pretraining data's masker (`vocab`: a `VocabInfo`)."""
  count, seq_length = windows.shape
  slots = num_predictions(seq_length, masked_lm_prob)
  options = pi.InstanceOptions(max_seq_length=seq_length, max_predictions_per_seq=slots,
                               masked_lm_prob=masked_lm_prob, ngram=ngram)
  words = windows.copy()
  positions = np.zeros((count, slots), np.int32)
  labels = np.zeros((count, slots), np.int32)
  weights = np.zeros((count, slots), np.float32)
  for row in range(count):
    chosen, replacements = pi.create_masked_lm_predictions(windows[row], options, vocab, rng)
    n = len(chosen)
    positions[row, :n], labels[row, :n], weights[row, :n] = chosen, windows[row, chosen], 1.0
    words[row, chosen] = replacements
  return {"input_word_ids": words, "input_mask": np.ones_like(words), "input_type_ids": np.zeros_like(words),
          "masked_lm_positions": positions, "masked_lm_ids": labels, "masked_lm_weights": weights}


class TrainingBatches:
  """Endless batches of windows at seeded random offsets of the training stream, masked afresh for every batch."""

  def __init__(self, stream: np.ndarray, vocab, settings: PretrainSettings):
    self.stream, self.vocab, self.settings = stream, vocab, settings
    self.starts = np.random.default_rng([settings.seed, 1])
    self.masks = random.Random(settings.seed * 1_000_003 + 1)
    self.last_start = len(stream) - (settings.seq_length - 2)
    if self.last_start < 0:
      raise ValueError(f"the training text has {len(stream)} pieces, fewer than one sequence of "
                       f"{settings.seq_length}; prepare a larger corpus or a shorter --seq_length.")

  def __next__(self) -> Dict[str, np.ndarray]:
    starts = self.starts.integers(self.last_start + 1, size=self.settings.batch_size)
    windows = windows_at(self.stream, starts, self.settings.seq_length, self.vocab.cls_id, self.vocab.sep_id)
    return mask_windows(windows, self.vocab, self.settings.masked_lm_prob, self.settings.ngram, self.masks)

  def __iter__(self):
    return self


# ----------------------------------------------------------------------------------------------------- the model
def load_pretrainer(model_dir: str, attention: Dict[str, Any]):
  """The HF directory's pretrainer rebuilt with `attention` (the weights do not depend on it)."""
  from official_albert.checkpoints import loading  # pylint: disable=g-import-not-at-top
  from official_albert.modeling.models import AlbertPretrainer  # pylint: disable=g-import-not-at-top
  loaded = loading.load_pretrained(model_dir)
  model = AlbertPretrainer(loaded.config.replace(**attention))
  if [tuple(w.shape) for w in model.weights] != [tuple(w.shape) for w in loaded.weights]:
    raise ValueError(f"{model_dir}: the pretrainer's variables differ with attention {attention}.")
  for target, source in zip(model.weights, loaded.weights):
    target.assign(source.value)
  return model


def _mlm_terms(model, trainable, non_trainable, batch, training: bool):
  """(per-slot negative log-likelihood [B,P], per-slot hit [B,P], non_trainable) of one batch."""
  import jax  # pylint: disable=g-import-not-at-top
  import jax.numpy as jnp  # pylint: disable=g-import-not-at-top
  outputs, non_trainable = model.stateless_call(trainable, non_trainable,
                                                {k: batch[k] for k in _ENCODER_FEATURES}, training=training)
  logits = outputs["mlm_logits"].astype(jnp.float32)
  log_probs = jax.nn.log_softmax(logits, axis=-1)
  nll = -jnp.take_along_axis(log_probs, batch["masked_lm_ids"][..., None], axis=-1)[..., 0]
  hits = (jnp.argmax(logits, axis=-1) == batch["masked_lm_ids"]).astype(jnp.float32)
  return nll, hits, non_trainable


def evaluator(model, data: Dict[str, np.ndarray], batch_size: int) -> Callable[[Any], Dict[str, float]]:
  """evaluate((trainable, non_trainable)) → held-out MLM accuracy and loss over every masked slot of `data`."""
  import jax  # pylint: disable=g-import-not-at-top
  import jax.numpy as jnp  # pylint: disable=g-import-not-at-top

  @jax.jit
  def sums(trainable, non_trainable, batch):
    nll, hits, _ = _mlm_terms(model, trainable, non_trainable, batch, training=False)
    w = batch["masked_lm_weights"]
    return jnp.sum(hits * w), jnp.sum(nll * w), jnp.sum(w)

  def evaluate(state) -> Dict[str, float]:
    totals = np.zeros(3)
    for begin in range(0, len(data["input_word_ids"]), batch_size):
      batch = {k: jnp.asarray(v[begin:begin + batch_size]) for k, v in data.items()}
      totals += [float(x) for x in sums(*state, batch)]
    return {"accuracy": float(totals[0] / totals[2]), "loss": float(totals[1] / totals[2]), "masked": int(totals[2]),
            "windows": int(len(data["input_word_ids"]))}

  return evaluate


def load_prepared(output_dir: str):
  """(settings.json, piece arrays, the `VocabInfo`) of a prepared directory."""
  with open(os.path.join(output_dir, SETTINGS_FILE), encoding="utf-8") as f:
    info = json.load(f)
  with np.load(os.path.join(output_dir, PIECES_FILE)) as f:
    arrays = dict(f.items())
  vocab = pi.VocabInfo(is_start=arrays["is_start"], cls_id=info["cls_id"], sep_id=info["sep_id"],
                       mask_id=info["mask_id"])
  return info, arrays, vocab


def heldout_sets(stream: np.ndarray, vocab, settings: PretrainSettings, short: int):
  """({length: masked held-out data}, pieces of text): one held-out text for every evaluation, whole windows at
  seq_length (at most eval_windows) cut again at `short`, each masked once with its own fixed seed."""
  body = settings.seq_length - 2
  long_count = len(stream) // body
  if long_count == 0:
    raise ValueError(f"the held-out text has {len(stream)} pieces, fewer than one window of {settings.seq_length}.")
  if settings.eval_windows:
    long_count = min(long_count, settings.eval_windows)
  text = long_count * body
  return {length: mask_windows(heldout_windows(stream, length, text, vocab.cls_id, vocab.sep_id), vocab,
                               settings.masked_lm_prob, settings.ngram, random.Random(settings.seed * 7 + length))
          for length in (short, settings.seq_length)}, text


def _train(model, settings: PretrainSettings, batches, evaluate, log) -> Dict[str, Any]:
  """The training loop (`experiments.jax_loop`: the train binary's AdamW and warmup + linear decay, clipped at global
  norm 1): history,
  losses and timings; the trained state is written back into `model` (for --save_model_dir)."""
  import jax.numpy as jnp  # pylint: disable=g-import-not-at-top
  optimizer = jax_loop.adamw(model, jax_loop.warmup_linear_decay(settings.learning_rate, settings.train_steps),
                             global_clipnorm=1.0)

  def loss_fn(trainable, non_trainable, batch):
    nll, _, non_trainable = _mlm_terms(model, trainable, non_trainable, batch, training=True)
    w = batch["masked_lm_weights"]
    return jnp.sum(nll * w) / (jnp.sum(w) + 1e-5), non_trainable

  def on_evaluation(step, loss, result):
    if step == 0:
      log(f"[long_pretrain_jax] extended model at {settings.seq_length} before training: {dict(step=0, **result)}")
    else:
      log(f"[long_pretrain_jax] step {step}: loss {float(loss):.4f} held-out {dict(step=step, **result)}")

  loop = jax_loop.run(jax_loop.train_step(loss_fn, optimizer), model, optimizer, batches, settings.train_steps,
                      evaluate, every=max(settings.train_steps // 4, 1), on_evaluation=on_evaluation)
  jax_loop.write_back(model, *loop.state)
  history = [{"step": step, **result} for step, result in loop.history]
  return {"eval_history": history, "final": history[-1], "train_loss": [float(x) for x in loop.losses],
          "first_step_s": loop.first_step_s, "train_s": loop.train_s, "eval_s": loop.eval_s,
          # Steps after the first (compiled) one, evaluations left out; the batches' masking on the host included.
          "step_s": loop.step_s}


def pretrain(output_dir: str, overrides: Optional[Dict[str, Any]] = None, summary_file: str = SUMMARY_FILE,
             save_model_dir: str = "", log: Callable[[str], None] = print) -> Dict[str, Any]:
  """Evaluates the baselines, continues pretraining, evaluates every quarter; writes and returns the summary, and
  the continued-pretrained model as an HF directory in `save_model_dir` when given (the long-range task's
  `--pretrained_model_dir`)."""
  for prepared in (MODEL_DIR, SHORT_MODEL_DIR):  # (before training: the stage reads both at its next call)
    if save_model_dir and os.path.realpath(save_model_dir) == os.path.realpath(os.path.join(output_dir, prepared)):
      raise ValueError(f"--save_model_dir={save_model_dir} is the prepared model this stage starts from "
                       f"({os.path.join(output_dir, prepared)}): writing there would replace it, and the next run "
                       "would start from trained weights; give another folder.")
  jax_loop.use_jax_backend()
  import jax  # pylint: disable=g-import-not-at-top
  import keras  # pylint: disable=g-import-not-at-top
  start_time = time.time()
  info, arrays, vocab = load_prepared(output_dir)
  settings = PretrainSettings(**info["settings"])
  settings = dataclasses.replace(settings, **{k: v for k, v in (overrides or {}).items() if v is not None})
  short = info["short_seq_length"]
  streams = {split: piece_stream(arrays[f"{split}_ids"], arrays[f"{split}_offsets"], vocab.sep_id)
             for split in SPLITS}
  heldout, text = heldout_sets(streams["heldout"], vocab, settings, short)
  attention = {"attention_type": settings.attention_type}
  if settings.attention_type == "block_sparse":
    attention.update(block_size=settings.block_size, num_random_blocks=settings.num_random_blocks)
  summary = {**info, "settings": {**dataclasses.asdict(settings),
                                  "max_predictions_per_seq": settings.max_predictions_per_seq},
             "device": jax.devices()[0].device_kind, "platform": jax.devices()[0].platform,
             "heldout_text_pieces": text, "evaluations": {}}

  original = load_pretrainer(os.path.join(output_dir, SHORT_MODEL_DIR), {"attention_type": "dense"})
  summary["evaluations"]["original_at_short"] = evaluator(
      original, heldout[short], max(settings.eval_batch_size, 256))(jax_loop.state(original))
  dense = load_pretrainer(os.path.join(output_dir, MODEL_DIR), {"attention_type": "dense"})
  summary["evaluations"]["extended_at_short"] = evaluator(
      dense, heldout[short], max(settings.eval_batch_size, 256))(jax_loop.state(dense))
  del original, dense
  log(f"[long_pretrain_jax] original model at {short}: {summary['evaluations']['original_at_short']}")

  keras.utils.set_random_seed(settings.seed)
  model = load_pretrainer(os.path.join(output_dir, MODEL_DIR), attention)
  evaluate = evaluator(model, heldout[settings.seq_length], settings.eval_batch_size)
  summary.update(_train(model, settings, TrainingBatches(streams["train"], vocab, settings), evaluate, log))
  if save_model_dir:
    from official_albert.checkpoints import hf  # pylint: disable=g-import-not-at-top
    summary["saved_model"] = {"dir": save_model_dir, **hf.write_hf(model, "pretrainer", save_model_dir)}
  summary.update(wall_s=time.time() - start_time,
                 gap_to_original=summary["evaluations"]["original_at_short"]["accuracy"] - summary["final"]["accuracy"])
  file_io.atomic_write_json(os.path.join(output_dir, summary_file), summary)
  return summary


def define_flags(fv: flags.FlagValues = flags.FLAGS) -> None:
  d = PretrainSettings()
  flags.DEFINE_enum("stage", None, ["prepare", "pretrain"], "prepare (TensorFlow, SentencePiece) or pretrain (JAX).",
                    flag_values=fv)
  flags.DEFINE_string("pretrained_dir", None, "prepare: a native model directory (the demo's model).", flag_values=fv)
  flags.DEFINE_string("spm_model_file", None, "prepare: its SentencePiece model (default: <pretrained_dir>/"
                      "spiece.model).", flag_values=fv)
  flags.DEFINE_string("corpus_dir", None, "prepare: a directory with train.txt and heldout.txt (the demo's corpus/).",
                      flag_values=fv)
  flags.DEFINE_string("output_dir", "long_pretrain", "Where prepare writes and pretrain reads and writes.",
                      flag_values=fv)
  flags.DEFINE_integer("seq_length", d.seq_length, "prepare: the extended model's positions and the training length.",
                       flag_values=fv)
  flags.DEFINE_enum("attention_type", None, ["block_sparse", "chunked", "dense"], "pretrain: the attention (default: "
                    f"{d.attention_type}, block {d.block_size}, {d.num_random_blocks} random blocks).", flag_values=fv)
  flags.DEFINE_integer("block_size", None, "pretrain: block_sparse block size.", flag_values=fv)
  flags.DEFINE_integer("train_steps", None, f"pretrain: steps (default {d.train_steps}).", flag_values=fv)
  flags.DEFINE_integer("batch_size", None, f"pretrain: sequences per step (default {d.batch_size}).", flag_values=fv)
  flags.DEFINE_float("learning_rate", None, f"pretrain: AdamW peak learning rate (default {d.learning_rate}).",
                     flag_values=fv)
  flags.DEFINE_integer("eval_windows", None, "pretrain: held-out windows at --seq_length (default: all).",
                       flag_values=fv)
  flags.DEFINE_integer("seed", None, "pretrain: seed of the windows, the masking and the model.", flag_values=fv)
  flags.DEFINE_string("summary_file", SUMMARY_FILE, "pretrain: the summary's file name in --output_dir.",
                      flag_values=fv)
  flags.DEFINE_string("save_model_dir", "", "pretrain: write the continued-pretrained model there as an HF directory "
                      "(config.json + model.safetensors; e.g. finetune_jax's --pretrained_model_dir).",
                      flag_values=fv)
  flags.mark_flag_as_required("stage", flag_values=fv)


def main(argv, fv: flags.FlagValues = flags.FLAGS) -> None:
  del argv
  if fv.stage == "prepare":
    if not fv.pretrained_dir or not fv.corpus_dir:
      raise flags.ValidationError("--stage=prepare needs --pretrained_dir (a native model directory) and --corpus_dir "
                                  "(train.txt and heldout.txt).")
    prepare(fv.pretrained_dir, fv.corpus_dir, fv.output_dir, PretrainSettings(seq_length=fv.seq_length),
            fv.spm_model_file)
    return
  overrides = {"attention_type": fv.attention_type, "block_size": fv.block_size, "train_steps": fv.train_steps,
               "batch_size": fv.batch_size, "learning_rate": fv.learning_rate, "eval_windows": fv.eval_windows,
               "seed": fv.seed}
  s = pretrain(fv.output_dir, overrides, fv.summary_file, fv.save_model_dir)
  print(json.dumps({"original_at_short": round(s["evaluations"]["original_at_short"]["accuracy"], 4),
                    "extended_before": round(s["eval_history"][0]["accuracy"], 4),
                    "extended_after": round(s["final"]["accuracy"], 4), "steps": s["settings"]["train_steps"],
                    "train_s": round(s["train_s"], 1),
                    "step_s": s["step_s"] and round(s["step_s"], 4), "device": s["device"]}))


def console_main() -> None:
  cli.launch(define_flags, main)


if __name__ == "__main__":
  console_main()
