"""The model workloads: rows of `encoder_inference`, `pretrain_step` and `finetune_step` (ours in their variants,
and the peers) and of `gemm` (the encoder's dense shapes per framework). Each builder returns (runners, checks),
which `driver.run_workload` times in one rotation."""

from __future__ import annotations

import numpy as np

from experiments.benchmark.core import BenchSettings
from experiments.benchmark.core import cosine
from experiments.benchmark.core import encoder_flops_per_example
from experiments.benchmark.core import keras_policy
from experiments.benchmark.core import load_config
from experiments.benchmark.core import make_optimizer
from experiments.benchmark.core import module_available
from experiments.benchmark.core import NO_DROPOUT_NOTE
from experiments.benchmark.core import pretraining_heads_flops_per_example
from experiments.benchmark.core import random_batch
from experiments.benchmark.core import Runner
from experiments.benchmark.core import skipped
from experiments.benchmark.core import training_config
from experiments.benchmark.peers import cast_model
from experiments.benchmark.peers import hf_inference_runner
from experiments.benchmark.peers import hf_modes
from experiments.benchmark.peers import hf_row_name
from experiments.benchmark.peers import hf_torch_runners
from experiments.benchmark.peers import keras_hub_inference_runner
from experiments.benchmark.peers import make_hf_config
from experiments.benchmark.peers import peer_status
from experiments.benchmark.peers import torch_adamw_step
from experiments.benchmark.peers import torch_inputs


def reference_encoder(settings: BenchSettings):
  """(config, batch, features, reference, want): the inference config of --preset, a random batch, its encoder
  inputs as tensors, a seeded float32 `AlbertEncoder` whose weights every row copies, and its sequence_output."""
  import keras
  import tensorflow as tf

  from official_albert import AlbertEncoder
  config = load_config(settings.preset).inference_copy()
  batch = random_batch(config, settings.batch_size, settings.seq_length, settings.max_predictions_per_seq,
                       settings.seed)
  features = {k: tf.constant(batch[k]) for k in ("input_word_ids", "input_mask", "input_type_ids")}
  keras.utils.set_random_seed(settings.seed)
  reference = AlbertEncoder(config, name="reference_fp32")
  return config, batch, features, reference, reference(features)["sequence_output"].numpy()


def cosine_check(label: str, want, checks: dict):
  """A `Runner.check` recording the cosine and max |diff| of a row's output to the float32 reference `want`."""
  def check(output):
    output = np.asarray(output, np.float32)
    checks[label] = {"cosine_to_fp32_reference": cosine(output, want),
                     "max_abs_diff": float(np.max(np.abs(output - want)))}
    return checks[label]
  return check


def tf_encoder_runner(label: str, config, weights, features, dtype: str, xla: bool, flops: float, check,
                      **encoder_kwargs) -> Runner:
  """Our encoder's sequence_output under tf.function (XLA when `xla`), built under `dtype`'s Keras policy with
  `weights` copied in."""
  import tensorflow as tf

  from official_albert import AlbertEncoder
  b, s = features["input_word_ids"].shape

  def build():
    with keras_policy(dtype):
      encoder = AlbertEncoder(config, **encoder_kwargs)
    encoder.set_weights(weights)
    fn = tf.function(lambda x: encoder(x)["sequence_output"], jit_compile=xla)
    return lambda: fn(features).numpy()
  options = ", ".join(f"{k}={v}" for k, v in encoder_kwargs.items())
  return Runner(label, "ours", dtype, build, flops, b, b * s, check=check,
                note=f"AlbertEncoder {options}{', ' if options else ''}jit_compile={xla}")


def encoder_inference_runners(settings: BenchSettings):
  """Our encoder (tf.function / XLA, fused / unfused QKV, looped layers, fp32 / bf16) and the peers."""
  config, batch, features, reference, want = reference_encoder(settings)
  weights = reference.get_weights()  # Every variant copies them; `want` (fp32) is what they are checked against.
  flops = settings.batch_size * encoder_flops_per_example(config, settings.seq_length)
  checks = {}

  def ours(dtype, xla, fused_qkv=True, layer_loop=False):
    label = (f"ours_{'xla' if xla else 'tf_function'}{'' if fused_qkv else '_unfused_qkv'}"
             f"{'_layer_loop' if layer_loop else ''}_{dtype}")
    kwargs = {"layer_loop": True} if layer_loop else {}
    return tf_encoder_runner(label, config, weights, features, dtype, xla, flops, cosine_check(label, want, checks),
                             fused_qkv=fused_qkv, **kwargs)

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
      for mode, _ in hf_modes(dtype):
        runners.append(hf_inference_runner(config, batch, dtype, flops, settings, mode) if peers["hf_torch"] is None
                       else skipped(hf_row_name("hf_torch_eager", dtype, mode), "hf_torch", dtype, peers["hf_torch"]))
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


# Long because: the rows of one workload, a block per variant and dtype in the order the table reports them; the blocks
# share the model and the batch built at the top.
def pretrain_step_runners(settings: BenchSettings):
  """One optimizer step of MLM+SOP pretraining: ours (LAMB) in several variants, HF torch (AdamW) as the peer."""
  import keras
  import tensorflow as tf

  from official_albert import AlbertPretrainer
  config = training_config(settings.preset)  # dropout 0, as the HF peer's
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
      opt, opt_source = make_optimizer(optimizer)
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
                       f"{'all positions' if all_positions else 'masked positions'}, fused_qkv={fused_qkv}, "
                       f"{NO_DROPOUT_NOTE}")

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
  def hf_build(dtype, mode, autocast):
    import torch
    import transformers
    torch.manual_seed(settings.seed)
    model = cast_model(transformers.AlbertForPreTraining(make_hf_config(config)).train(), dtype, mode)
    inputs = torch_inputs(batch)
    labels = torch.full((b, s), -100, dtype=torch.long)
    for row in range(b):
      labels[row, torch.from_numpy(batch["masked_lm_positions"][row]).long()] = torch.from_numpy(
          batch["masked_lm_ids"][row]).long()
    sop = torch.from_numpy(batch["next_sentence_labels"][:, 0]).long()
    return torch_adamw_step(model, 1e-4, dtype, lambda: model(**inputs, labels=labels, sentence_order_label=sop).loss,
                            autocast=autocast)

  runners += hf_torch_runners(settings, [
      Runner(hf_row_name("hf_torch_eager_adamw", dtype, mode), "hf_torch", dtype,
             lambda dtype=dtype, mode=mode, autocast=autocast: hf_build(dtype, mode, autocast), flops, b, b * s,
             note=f"transformers AlbertForPreTraining (MLM logits at all positions) + torch AdamW, {NO_DROPOUT_NOTE}"
                  + {"float32": "", "autocast": ", bf16 autocast", "pure": ", model.to(torch.bfloat16) (bf16 AdamW "
                     "state)"}["float32" if dtype == "float32" else mode])
      for dtype in settings.dtypes for mode, autocast in hf_modes(dtype)])
  return runners, checks


def finetune_step_runners(settings: BenchSettings):
  """One AdamW step of sentence classification (GLUE-style): ours (XLA, per dtype) and HF torch."""
  import keras
  import tensorflow as tf

  from official_albert import AlbertClassifier
  config = training_config(settings.preset)  # dropout 0 (the classifier head's too), as the HF peer's
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
        opt, checks[f"optimizer_{dtype}"] = make_optimizer("adamw")
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
                            b * s, note=f"AlbertClassifier + AdamW, jit_compile={xla}, {NO_DROPOUT_NOTE}"))
  def hf_build(dtype):
    import torch
    import transformers
    torch.manual_seed(settings.seed)
    hf_config = make_hf_config(config)
    hf_config.num_labels = settings.num_labels
    model = transformers.AlbertForSequenceClassification(hf_config).train()
    inputs = torch_inputs(batch)
    labels = torch.from_numpy(batch["label_ids"]).long()
    return torch_adamw_step(model, 1e-5, dtype, lambda: model(**inputs, labels=labels).loss)

  runners += hf_torch_runners(settings, [
      Runner(f"hf_torch_eager_adamw_{dtype}", "hf_torch", dtype, lambda dtype=dtype: hf_build(dtype), flops, b, b * s,
             note=f"transformers AlbertForSequenceClassification + torch AdamW, {NO_DROPOUT_NOTE}")
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
                            note="tf.matmul "
                            + ("under jit_compile (XLA:CPU)" if xla else "in a tf.function (oneDNN)")))
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
