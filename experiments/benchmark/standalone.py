"""The workloads that time themselves and return their own result layout: `compile` (trace/compile time of the
layer loop vs the unrolled stack), `tokenize`, `data_prep` and `serving`; `driver.run_workload` adds their status."""

from __future__ import annotations

import os
import tempfile
import time
from typing import Any, Dict

import numpy as np

from experiments.benchmark.core import bench_texts
from experiments.benchmark.core import BenchSettings
from experiments.benchmark.core import cosine
from experiments.benchmark.core import default_spm
from experiments.benchmark.core import encoder_flops_per_example
from experiments.benchmark.core import keras_policy
from experiments.benchmark.core import load_config
from experiments.benchmark.core import matmul_peaks
from experiments.benchmark.core import matmul_runners
from experiments.benchmark.core import module_available
from experiments.benchmark.core import random_batch
from experiments.benchmark.core import run_rotation
from experiments.benchmark.core import Runner
from experiments.benchmark.core import sentences
from experiments.benchmark.core import summarize_row
from experiments.benchmark.core import time_call


def _tf_block(result):
  """Pulls a (nested) TF result to the host, so the timed call includes the computation."""
  import tensorflow as tf
  return tf.nest.map_structure(lambda t: t.numpy() if hasattr(t, "numpy") else t, result)


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
  weights = None  # The unrolled encoder's (built first), copied into the layer-loop one.
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
        first = time_call(lambda: _tf_block(f(features)))
        steady = [time_call(lambda: _tf_block(f(features))) for _ in range(max(1, min(settings.repeats, 3)))]
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


def tokenize_workload(settings: BenchSettings, log=print) -> Dict[str, Any]:
  """Sentences/s and tokens/s of FullTokenizer (Python) vs raw sentencepiece and HF's AlbertTokenizer (slow)."""
  reason = module_available("official_albert.tokenization")
  if reason:
    return {"status": "skipped", "reason": f"official_albert.tokenization not available: {reason}"}
  from official_albert.tokenization import FullTokenizer
  spm_file = default_spm(settings)
  texts = bench_texts(settings)[:2000]
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
  texts = bench_texts(settings, min_lines=4000)[:4000]
  with tempfile.TemporaryDirectory(prefix="albert_bench_") as tmp:
    corpus = os.path.join(tmp, "corpus.txt")
    with open(corpus, "w", encoding="utf-8") as f:
      for i, line in enumerate(texts):
        f.write(line + "\n")
        if i % 20 == 19:
          f.write("\n")  # A document every 20 lines.
    rows, spm = [], default_spm(settings)
    for rep in range(settings.repeats):
      out = os.path.join(tmp, f"out_{rep}", "train.tfrecord")
      from data_prep import pretraining_instances as pi
      config = cpd.GenerationConfig(
          input_file=corpus, output_file=out, spm_model_file=spm,
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
          "corpus_lines": len(texts), "spm_model_file": spm,
          "note": f"one worker, seq_length={settings.seq_length}, dupe_factor=3, SentencePiece model "
                  f"{os.path.basename(spm)}"}


# Long because: one measurement on one SavedModel exported to a temporary directory: the export, the reload and the rows
# that time it live in that directory's scope.
def serving_workload(settings: BenchSettings, log=print) -> Dict[str, Any]:
  """A reloaded classifier SavedModel: text in (in-graph SentencePiece + packing) vs token ids in, and the
  in-process Keras model on the same ids — the cost of tokenization inside the graph and of the SavedModel hop —
  with dynamic padding (the export default, `pad_to_multiple_of=16`) and without it (`pad_to_multiple_of=0`).
  Texts: short real sentences (`core.sentences`); FLOPs are the useful ones (each text at its packed length)."""
  reason = module_available("official_albert.serving.export") or module_available("tensorflow_text")
  if reason:
    return {"status": "skipped", "reason": f"official_albert.serving.export not available: {reason}"}
  import keras
  import tensorflow as tf
  import tensorflow_text  # noqa: F401  (registers the SentencePiece ops the reloaded SavedModel needs)

  from official_albert import AlbertClassifier
  from official_albert.serving.export import AlbertServingModule
  from official_albert.serving.export import export_saved_model
  from official_albert.tokenization import FullTokenizer
  spm_file = default_spm(settings)
  vocab_size = FullTokenizer(spm_file).vocab_size
  # The preset's shape with the benchmark tokenizer's vocabulary (the table size barely changes the cost).
  config = load_config(settings.preset).inference_copy().replace(vocab_size=vocab_size)
  all_texts, source = sentences(settings)
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
    # The bf16 export (`export_saved_model --dtype=bfloat16`): the same weights under mixed_bfloat16, full padding.
    with keras_policy("bfloat16"):
      model_bf16 = AlbertClassifier(config, num_labels=settings.num_labels)
    model_bf16.set_weights(model.get_weights())
    module = AlbertServingModule(model_bf16, "classifier", seq_length=s, spm_model_file=spm_file, pad_to_multiple_of=0)
    loaded["bf16"] = tf.saved_model.load(export_saved_model(module, os.path.join(tmp, "saved_model_bf16")))
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
                 note=f"reloaded SavedModel serving_default: raw text, in-graph tokenizer, "
                      f"pad_to_multiple_of={multiple}"),
          Runner(f"saved_model_ids_in_{label}", "ours", "float32", lambda f=ids_sig: (lambda: _tf_block(f(**ids))),
                 flops, b, tokens, note=f"reloaded SavedModel from_ids, pad_to_multiple_of={multiple}")]
    bf16_sig = loaded["bf16"].signatures["serving_default"]
    runners.append(Runner("saved_model_text_in_full_padding_bfloat16", "ours", "bfloat16",
                          lambda: (lambda: _tf_block(bf16_sig(text=text_tensor))), flops, b, tokens,
                          note="reloaded bf16 SavedModel (--dtype=bfloat16) serving_default, pad_to_multiple_of=0"))
    runners.append(Runner("keras_model_ids_in", "ours", "float32", lambda: (lambda: keras_fn(ids).numpy()), flops, b,
                          tokens, note="the in-process AlbertClassifier under tf.function, full padding"))
    runners = (matmul_runners(settings) if settings.matmul_peak else []) + runners
    run_rotation(runners, settings, log)
    got = text_fn(text=text_tensor)["logits"].numpy()
    got_full = loaded[0].signatures["serving_default"](text=text_tensor)["logits"].numpy()
    want = keras_fn(ids).numpy()
    got_bf16 = loaded["bf16"].signatures["serving_default"](text=text_tensor)["logits"].numpy()
  peaks = matmul_peaks(runners)
  rows = [summarize_row(r, peaks) for r in runners]
  return {"rows": rows, "matmul_peak_gflops": peaks, "vocab_size": vocab_size, "spm_model_file": spm_file,
          "text_source": source, "mean_packed_length": float(lengths.mean()),
          "checks": {"text_in_vs_keras_max_abs_logit_diff": float(np.max(np.abs(got - want))),
                     "full_padding_text_in_vs_keras_max_abs_logit_diff": float(np.max(np.abs(got_full - want))),
                     "bf16_text_in_vs_float32_logit_cosine": cosine(got_bf16, got_full)}}
