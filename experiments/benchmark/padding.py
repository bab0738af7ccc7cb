"""The `finetune_padding` benchmark workload: dynamic padding and length bucketing on real sentence lengths.

Fine-tuning data is short: GLUE SST-2 dev sentences are ~25 SentencePiece tokens against a max_seq_length of 128,
so a model fed full-length batches spends most of its FLOPs on padding. This workload times one pass over the same
examples (lengths from real text: the GLUE SST-2 dev set in ../shared/data when present, else this Python's stdlib
docstrings, tokenized with the benchmark's SentencePiece model) in three layouts built by the real
`official_albert.data.input_pipeline` functions:

  full_padding          every batch `seq_length` long (the reference);
  dynamic_padding       each batch cut to its longest sequence, rounded up to 16 (`DataConfig.pad_to_multiple_of`);
  dynamic_bucketed      + length bucketing over the whole pass (`DataConfig.length_bucket_window`), training only.

for a training step (AlbertClassifier + AdamW, XLA) and for evaluation (forward only), and HF torch with its usual
`DataCollatorWithPadding` behaviour (pad to the longest in the batch) and with full padding as the peer. Examples/s
is the figure of merit; FLOPs are the *useful* ones (each example at its own length), so MFU shows how much of
the machine goes to real tokens.
"""

from __future__ import annotations

from typing import Any, Dict, List, Tuple

import numpy as np

from experiments.benchmark import core as B
from experiments.benchmark import peers

PAD_MULTIPLE = 16
NUM_BATCHES = 8  # Per timed pass (and the bucketing window).


def sentence_lengths(settings: B.BenchSettings, count: int) -> Tuple[np.ndarray, str]:
  """Packed lengths ([CLS] text [SEP]) of `count` real sentences, truncated to seq_length; and the source name."""
  from official_albert.tokenization import FullTokenizer
  texts, source = B.sentences(settings)
  tokenizer = FullTokenizer(B.default_spm(settings))
  rng = np.random.default_rng(settings.seed)
  chosen = [texts[i] for i in rng.permutation(len(texts))[:count]]
  while len(chosen) < count:
    chosen += chosen[:count - len(chosen)]
  lengths = np.array([min(len(ids) + 2, settings.seq_length) for ids in tokenizer.encode_ids_batch(chosen)])
  return lengths, source


def _batches(config, lengths: np.ndarray, batch_size: int, seq_length: int, layout: str, seed: int):
  """Feature batches (numpy) of one pass in `layout` (see the module docstring), made by input_pipeline."""
  import tensorflow as tf

  from official_albert.data import input_pipeline
  rng = np.random.default_rng(seed)
  n = len(lengths)
  mask = (np.arange(seq_length)[None, :] < lengths[:, None]).astype(np.int32)
  ids = rng.integers(5, config.vocab_size, (n, seq_length)).astype(np.int32) * mask
  features = {"input_word_ids": ids, "input_mask": mask, "input_type_ids": np.zeros_like(mask),
              "label_ids": rng.integers(0, 2, n).astype(np.int32)}
  if layout == "dynamic_bucketed":
    window = n // batch_size
    dataset = input_pipeline.bucket_by_length(tf.data.Dataset.from_tensors(features), batch_size, window, seed=seed)
  else:
    dataset = tf.data.Dataset.from_tensor_slices(features).batch(batch_size)
  if layout != "full_padding":
    multiple = 1 if layout == "longest" else PAD_MULTIPLE
    dataset = dataset.map(lambda f: input_pipeline.trim_to_longest(f, multiple))
  return [{k: v.numpy() for k, v in b.items()} for b in dataset]


# Long because: the rows of one workload, a block per layout and dtype in the order the table reports them; the blocks
# share the sentences, the model and the padded-token ratio built at the top.
def finetune_padding_runners(settings: B.BenchSettings):
  """Rows of the `finetune_padding` workload (see the module docstring)."""
  import keras
  import tensorflow as tf

  from official_albert import AlbertClassifier
  config = B.training_config(settings.preset)  # dropout 0 (the classifier head's too), as the HF peer's
  b, s = settings.batch_size, settings.seq_length
  lengths, source = sentence_lengths(settings, b * NUM_BATCHES)
  layouts = {name: _batches(config, lengths, b, s, name, settings.seed)
             for name in ("full_padding", "dynamic_padding", "dynamic_bucketed", "longest")}
  n = len(lengths)
  head = 2 * config.hidden_size * settings.num_labels
  useful = float(sum(B.encoder_flops_per_example(config, int(length)) + head for length in lengths))
  checks: Dict[str, Any] = {
      "length_source": source, "examples_per_pass": n, "mean_length": float(lengths.mean()),
      "median_length": float(np.median(lengths)), "max_length": int(lengths.max()),
      "padded_tokens_per_pass": {k: int(sum(x["input_mask"].size for x in v)) for k, v in layouts.items()},
      "real_tokens_per_pass": int(lengths.sum()),
      "spm_model_file": B.default_spm(settings)}
  # Padded-token ratio: the FLOPs the layout pays per useful FLOP (roughly; attention grows faster).
  checks["padding_overhead"] = {k: v / checks["real_tokens_per_pass"]
                                for k, v in checks["padded_tokens_per_pass"].items()}
  runners: List[B.Runner] = []

  def ours(mode, layout, dtype):
    def build():
      keras.utils.set_random_seed(settings.seed)
      with B.keras_policy(dtype):
        model = AlbertClassifier(config, num_labels=settings.num_labels)
      batches = [{k: tf.constant(v) for k, v in x.items()} for x in layouts[layout]]
      keys = ("input_word_ids", "input_mask", "input_type_ids")
      if mode == "train":
        optimizer, _ = B.make_optimizer("adamw")
        optimizer.build(model.trainable_variables)

        # XLA compiles once per distinct batch length (at most seq_length / 16 of them; first pass).
        @tf.function(jit_compile=True, reduce_retracing=True)
        def step(batch):
          with tf.GradientTape() as tape:
            logits = tf.cast(model({k: batch[k] for k in keys}, training=True)["logits"], tf.float32)
            loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=batch["label_ids"],
                                                                                 logits=logits))
          optimizer.apply(tape.gradient(loss, model.trainable_variables), model.trainable_variables)
          return loss
      else:
        # XLA for fp32; bf16 runs through the graph path (XLA:CPU has no oneDNN bf16 dots, see
        # models.encoder_inference_runners).
        @tf.function(jit_compile=dtype == "float32", reduce_retracing=True)
        def step(batch):
          return tf.reduce_sum(tf.cast(model({k: batch[k] for k in keys}, training=False)["logits"], tf.float32))

      def one_pass():
        out = [step(x) for x in batches]
        return float(tf.add_n(out).numpy())
      return one_pass

    flops = useful * (3 if mode == "train" else 1)
    return B.Runner(f"ours_{mode}_{layout}_{dtype}", "ours", dtype, build, flops, n, int(lengths.sum()),
                    note=f"AlbertClassifier {'+ AdamW step' if mode == 'train' else 'forward'}, {layout}, "
                         f"{NUM_BATCHES} batches of {b}, {B.NO_DROPOUT_NOTE}")

  for dtype in settings.dtypes:
    for layout in ("full_padding", "dynamic_padding", "dynamic_bucketed"):
      runners.append(ours("train", layout, dtype))
    for layout in ("full_padding", "dynamic_padding"):
      runners.append(ours("eval", layout, dtype))

  def hf_build(layout):
    import torch
    import transformers
    torch.manual_seed(settings.seed)
    hf_config = peers.make_hf_config(config)
    hf_config.num_labels = settings.num_labels
    model = transformers.AlbertForSequenceClassification(hf_config).train()
    step = peers.torch_adamw_step(model, 1e-5, "float32", lambda inputs, labels: model(**inputs, labels=labels).loss)
    batches = [(peers.torch_inputs(x), torch.from_numpy(x["label_ids"]).long()) for x in layouts[layout]]
    return lambda: sum(step(inputs, labels) for inputs, labels in batches)

  runners += peers.hf_torch_runners(settings, [
      B.Runner(f"hf_torch_train_{layout}_float32", "hf_torch", "float32", lambda layout=layout: hf_build(layout),
               useful * 3, n, int(lengths.sum()),
               note=f"transformers AlbertForSequenceClassification + torch AdamW, {B.NO_DROPOUT_NOTE}, "
                    + ("pad to longest in batch (DataCollatorWithPadding)" if layout == "longest" else "full padding"))
      for layout in ("full_padding", "longest")])
  return runners, checks
