"""The `text_embedding` task (issue 46 item 1): config checks, a bi-encoder that learns on real text, the served
model directory, the loss wired as `official_albert.retrieval.losses` defines it, and 2 replicas = 1 device.

Real text: the (first half → second half) pairs of the standard library's docstring sentences (`stdlib_pairs`); the
held-out pairs are never trained on. A 2-layer, 64-wide model from random init learns to retrieve a held-out
sentence's second half.
"""

import ast
import csv
import functools
import hashlib
import importlib.util
import json
import logging
import os
import pathlib
import re
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import tensorflow as tf

from official_albert import model_directory as md
from official_albert import pipelines
from official_albert import train
from official_albert.checkpoints import convert as convert_lib
from official_albert.checkpoints.sentence_transformers_folder import read_tokenizer_options
from official_albert.checkpoints.sentence_transformers_folder import write_tokenizer_options
from official_albert.retrieval import losses
from official_albert.tokenization import FullTokenizer
from official_albert.training.experiment_config import ConfigError
from tasks.embedding import data as pair_data
from tasks.embedding import TextEmbeddingTask
from tests import tiny
from tests.conftest import CHILD_PYTHONPATH

REPO = pathlib.Path(__file__).resolve().parents[2]
MODEL = {"preset": "", "vocab_size": 1000, "embedding_size": 16, "hidden_size": 64, "num_hidden_layers": 2,
         "num_attention_heads": 4, "intermediate_size": 128, "max_position_embeddings": 32,
         "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0}
HELD_OUT = 64


def stdlib_pairs():
  """(first half → second half) of every distinct prose sentence of 8+ words (headings, tables, Args: blocks out) of
  the docstrings of the installed Python's top-level standard-library modules, one row per query and per positive.

  Real prose that no edit here changes: the tests' pairs were this repository's docs and docstrings until an added
  README sentence flipped a learning check (a bar calibrated on stdlib text moves only with the Python version, and a
  docs edit no longer asks for these files to be rerun). A new list each call over pairs read once per process."""
  return list(_stdlib_pairs())


def stdlib_texts():
  """The docstrings of the installed Python's top-level standard-library modules, their classes and functions."""
  import sysconfig
  for path in sorted(pathlib.Path(sysconfig.get_paths()["stdlib"]).glob("*.py")):
    try:
      tree = ast.parse(path.read_text(encoding="utf-8"))
    except (SyntaxError, UnicodeDecodeError, ValueError):
      continue
    for node in ast.walk(tree):
      if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef)) and ast.get_docstring(node):
        yield ast.get_docstring(node)


@functools.lru_cache(maxsize=1)
def _stdlib_pairs():
  # (one row per query and per positive: the library repeats sentence halves, "Return the ..." among them)
  queries, positives, out = set(), set(), []
  for query, positive in _pairs_of(stdlib_texts()):
    if query.lower() not in queries and positive.lower() not in positives:
      queries.add(query.lower())
      positives.add(positive.lower())
      out.append((query, positive))
  return tuple(out)


def _pairs_of(texts):
  sentences = []
  for text in texts:
    for paragraph in re.split(r"\n\s*\n", text):
      lines = [line.strip() for line in paragraph.splitlines()]
      if not lines or lines[0].startswith(("#", "|", "Args:", "Returns:", "Raises:", "Attributes:")):
        continue
      sentences += [s for s in re.split(r"(?<=[.!?])\s+(?=[A-Z])", " ".join(lines).lstrip("-* "))
                    if len(s.split()) >= 8]
  out = []
  for sentence in dict.fromkeys(sentences):
    words = sentence.split()
    out.append((" ".join(words[:len(words) // 2]), " ".join(words[len(words) // 2:])))
  return tuple(out)


def write_pairs(path, rows, header=("anchor", "positive")):
  with open(path, "w", newline="", encoding="utf-8") as f:
    writer = csv.writer(f)
    writer.writerow(header)
    writer.writerows(rows)
  return str(path)


def hash_order(rows):
  """Pairs in the order of a hash of each query: the first N are a held-out set that an edit elsewhere in
  the docs leaves as it was. (A seeded permutation of the list reshuffled the whole split at every added sentence:
  one docs edit moved the reranker check's gain from 0.085 to 0.059 against its bar of 0.06; with this order, 0.099 and
  0.093 on the same two texts.)"""
  return sorted(rows, key=lambda row: hashlib.sha256(row[0].encode("utf-8")).hexdigest())


def split_pairs(tmp_path):
  rows = stdlib_pairs()
  assert len(rows) >= 1000, len(rows)
  rows = hash_order(rows)
  return write_pairs(tmp_path / "train.csv", rows[HELD_OUT:]), write_pairs(tmp_path / "dev.csv", rows[:HELD_OUT])


def override(train_file, dev_file, spm_model_file, steps, lr=1e-3, batch=32, loop=None, **task):
  data = {"global_batch_size": batch, "seq_length": 32, "seed": 7}
  return tiny.finetune_override(MODEL, train_file, dev_file, spm_model_file, steps, lr, data, loop, **task)


run = functools.partial(tiny.train_run, "text_embedding")  # run(model_dir, config, mode="train_and_eval")
make_task = functools.partial(tiny.build_task, TextEmbeddingTask, "text_embedding")  # make_task(config, model_dir=None)


# ----------------------------------------------------------------------------------------------------- config
@pytest.mark.parametrize("task,words", [
    ({"loss": "triplet"}, ["task.loss='triplet'", "mnrl", "cosent"]),
    ({"loss": "mnrl", "score_column": "score"}, ["task.score_column='score'", "task.loss=cosent", "score_column=''"]),
    ({"loss": "cosent"}, ["task.loss=cosent", "task.score_column"]),
    ({"positive_column": ""}, ["task.positive_column", "set both"]),
    ({"matryoshka_dims": [64, 128]}, ["task.matryoshka_dims", "[128]", "1..64", "[64, 32, 16]"]),
    ({"matryoshka_dims": [64, 32], "matryoshka_weights": [1.0]}, ["task.matryoshka_weights", "one per width"]),
    ({"matryoshka_dims": [64, 32], "matryoshka_weights": [1.0, 0.0]}, ["task.matryoshka_weights=[1.0, 0.0]", "[0.0]",
                                                                     "not > 0", "trains nothing"]),
    ({"matryoshka_dims": [64, 32], "matryoshka_weights": [-1.0, 1.0]}, ["task.matryoshka_weights", "[-1.0] not > 0"]),
    ({"loss": "cosine", "score_column": "s", "negative_column": "n"}, ["task.negative_column", "mnrl only"]),
    ({"pooling": "median"}, ["task.pooling='median'"]),
    ({"validation_split": "qrels/dev"}, ["task.validation_split='qrels/dev'", "qrels/<split>.tsv", "e.g. dev"]),
])
def test_config_errors_name_the_key_and_the_fix(task, words):
  with pytest.raises(ConfigError) as error:  # (build_params validates the whole experiment config)
    train.build_params("text_embedding", params_override=json.dumps({"task": {"model": MODEL, **task}}))
  for word in words:
    assert word in str(error.value), (word, str(error.value))


def test_a_missing_column_names_the_file_and_the_key(tmp_path, spm_model_file):
  path = write_pairs(tmp_path / "pairs.csv", [("a question", "an answer")], header=("query", "positive"))
  task = make_task(override(path, path, spm_model_file, 1))
  with pytest.raises(ValueError, match=r"pairs.csv:1: no column 'anchor'.*Set task.anchor_column"):
    task.build_inputs(task.params.train_data)


def test_a_hard_negative_that_is_the_anchors_positive_in_another_row_is_named(tmp_path, spm_model_file, caplog):
  """An anchor with two positives, one row each, in two files: a hard negative that is the other positive (the anchor
  and the texts compared as the tokenizer sees them) names both rows; the same text stays another anchor's negative;
  skip_bad_rows skips and counts the row."""
  header = ("anchor", "positive", "negative")
  first = write_pairs(tmp_path / "a.csv", [("What is ALBERT?", "a lite BERT", "a car"), ("q2", "p2", "A lite  BERT")],
                      header=header)
  second = write_pairs(tmp_path / "b.csv", [("what is albert?", "Parameter sharing.", "a lite bert")], header=header)
  files = f"{first},{second}"
  task = make_task(override(files, files, spm_model_file, 1, negative_column="negative"), str(tmp_path / "m"))
  with pytest.raises(ValueError, match=r"b.csv:2: the hard negative \(task.negative_column\) is a positive of the "
                                       r"same anchor at .*a.csv:2 .*mine another negative"):
    task.read(task.params.train_data, ("anchor", "positive", "negative"))
  task = make_task(override(files, files, spm_model_file, 1, negative_column="negative", skip_bad_rows=True),
                   str(tmp_path / "skip"))
  rows = task.read(task.params.train_data, ("anchor", "positive", "negative"))
  assert [(r.anchor, r.negative) for r in rows] == [("What is ALBERT?", "a car"), ("q2", "A lite  BERT")]
  assert "skipped 1 of 3 rows whose hard negative is a positive of their anchor" in caplog.text


# ----------------------------------------------------------------------------------------------------- learning
@pytest.mark.large
@pytest.mark.slow
def test_a_bi_encoder_learns_to_retrieve_held_out_text_and_serves_its_vectors(tmp_path, spm_model_file):
  """250 MNRL steps (batch 32, in-batch negatives) on ~6,000 real pairs: the held-out recall@10 and MRR@10 clearly
  beat the same model before training (one step at a vanishing learning rate: the init, evaluated by the same code).
  (2026-12-04, AMD EPYC, 2 shared cores: recall@10 0.25 -> 0.67, MRR@10 0.062 -> 0.32; one training row left out at
  three places, 0.69-0.73 and 0.26-0.32; 150 steps 0.63-0.66 and 0.25-0.28. On this repository's docs, its text until
  then, 800 steps gave only 0.12 -> 0.15 MRR@10 after one wave of doc edits.) Then `pipelines.embed` on the trained
  directory gives the model's own vectors, normalised."""
  train_file, dev_file = split_pairs(tmp_path)
  before = run(tmp_path / "init", override(train_file, dev_file, spm_model_file, 1, lr=1e-9))["eval_results"]
  result = run(tmp_path / "trained", override(train_file, dev_file, spm_model_file, 250, lr=1e-3))
  after = result["eval_results"]
  assert after["queries"] == after["corpus"] == HELD_OUT
  assert after["recall@10"] >= before["recall@10"] + 0.3, (before, after)
  assert after["mrr@10"] >= before["mrr@10"] + 0.12, (before, after)
  saved = json.loads((tmp_path / "trained" / md.EVAL_RESULTS_FILE).read_text())
  assert saved["recall@10"] == after["recall@10"] and "eval_loss" in saved

  # The served directory: spiece.model, the pooling files, the training record; embed = the model's vectors.
  model_dir = tmp_path / "trained"
  assert (model_dir / md.SPM_FILE).exists()
  assert md.read_embedding_training_file(str(model_dir))["matryoshka_dims"] == []
  texts = [a for a, _ in stdlib_pairs()[:5]] + ["a short one"]
  served = pipelines.embed(str(model_dir), texts)
  task, embedder = result["trainer"].task, result["trainer"].model.embedder
  packed = [pair_data.pack_text(ids, 32) for ids in task.tokenizer.encode_ids_batch(texts)]
  direct = embedder({k: np.stack([p[k] for p in packed]) for k in pair_data.ENCODER_KEYS})["sentence_embedding"]
  np.testing.assert_allclose(served, np.asarray(direct), atol=1e-5)
  np.testing.assert_allclose(np.linalg.norm(served, axis=1), 1.0, atol=1e-5)


# ----------------------------------------------------------------------------------------------------- the loss
def _one_batch(tmp_path, spm_model_file, **task_options):
  rows = stdlib_pairs()[:64]
  header = ("anchor", "positive")
  if task_options.get("negative_column"):
    rows = [(a, p, rows[(i + 7) % len(rows)][1]) for i, (a, p) in enumerate(rows)]
    header += ("negative",)
  path = write_pairs(tmp_path / "pairs.csv", rows, header)
  task = make_task(override(path, path, spm_model_file, 1, batch=8, **task_options), str(tmp_path / "m"))
  tf.keras.utils.set_random_seed(5)
  model = task.build_model()
  batch = next(iter(task.build_inputs(task.params.train_data)))
  outputs = model(task.model_inputs(batch), training=False)
  side = {s: model.embedder({k: batch[pair_data.side_key(s, k)] for k in pair_data.ENCODER_KEYS})["sentence_embedding"]
          for s in ("anchor", "positive", "negative") if pair_data.side_key(s, "input_word_ids") in batch}
  return task, batch, outputs, side


@pytest.mark.parametrize("options", [{}, {"matryoshka_dims": [64, 16], "matryoshka_weights": [1.0, 0.5]},
                                     {"negative_column": "negative", "symmetric": True, "scale": 10.0}])
def test_the_task_loss_is_mnrl_on_the_embedders_vectors(tmp_path, spm_model_file, options):
  task, batch, outputs, side = _one_batch(tmp_path, spm_model_file, **options)
  got = float(task.build_losses(batch, outputs))
  negatives = [side["negative"]] if "negative" in side else []
  scale, symmetric = options.get("scale", 20.0), options.get("symmetric", False)
  fn = lambda a, p, *n: losses.mnrl_loss(a, p, n, scale=scale, symmetric=symmetric)
  if "matryoshka_dims" in options:
    want = losses.matryoshka_loss(fn, [side["anchor"], side["positive"], *negatives], options["matryoshka_dims"],
                                  options["matryoshka_weights"])
  else:
    want = fn(side["anchor"], side["positive"], *negatives)
  assert got == pytest.approx(float(want), abs=1e-5)
  assert got > 0.1


# ----------------------------------------------------------------------------------------------------- GradCache
def _model_and_batch(tmp_path, spm_model_file, model=None, **task_options):
  """A task with `task_options`, its model (seed 5) and one training batch of 8 rows (64 pairs of real text)."""
  rows = stdlib_pairs()[:64]
  header = ("anchor", "positive")
  if task_options.get("negative_column"):
    rows = [(a, p, rows[(i + 7) % len(rows)][1]) for i, (a, p) in enumerate(rows)]
    header += ("negative",)
  if task_options.get("score_column"):
    rows = [(*r, str(i % 3)) for i, r in enumerate(rows)]
    header += ("score",)
  path = write_pairs(tmp_path / "pairs.csv", rows, header)
  config = override(path, path, spm_model_file, 1, batch=8, **task_options)
  config["task"]["model"] = dict(MODEL, **(model or {}))
  task = make_task(config, str(tmp_path / "m"))
  tf.keras.utils.set_random_seed(5)
  built = task.build_model()
  return task, built, next(iter(task.build_inputs(task.params.train_data)))


def _assert_same_gradients(got, want, atol=1e-5):
  assert len(got) == len(want)
  for g, w in zip(got, want):
    w = np.asarray(tf.convert_to_tensor(w))
    # (relative to the variable's largest gradient when above 1: CoSENT x 20 has large ones)
    np.testing.assert_allclose(np.asarray(g), w, atol=atol * max(1.0, float(np.max(np.abs(w)))))


@pytest.mark.slow
@pytest.mark.parametrize("options", [{}, {"symmetric": True, "negative_column": "negative", "scale": 10.0},
                                     {"matryoshka_dims": [64, 16], "matryoshka_weights": [1.0, 0.5]},
                                     {"loss": "cosent", "score_column": "score", "matryoshka_dims": [64, 32]}])
def test_grad_cache_gives_the_plain_loss_and_gradient(tmp_path, spm_model_file, options):
  """task.grad_cache_chunk=2 (four chunks: the first, two in the loop) and 3 (two chunks and a tail of 2): the loss
  and every weight's gradient equal the one-pass ones within 1e-5 (CoSENT 3e-5), eagerly and inside a tf.function
  (the trainer's graph)."""
  task, model, batch = _model_and_batch(tmp_path, spm_model_file, **options)
  want_loss, want = task.compute_gradients(batch, model, None, [])
  for chunk, graph in ((2, False), (3, True)):
    task.params.grad_cache_chunk = chunk
    step = tf.function(lambda b: task.compute_gradients(b, model, None, [])) if graph else (
        lambda b: task.compute_gradients(b, model, None, []))
    loss, grads = step(batch)
    assert float(loss) == pytest.approx(float(want_loss), abs=1e-5), chunk
    # CoSENT's x20 pairwise exponents amplify float32 summation order: its chunked gradient has been seen 1.1e-5
    # (relative) from the one-pass one after changes elsewhere in the graph; a wrong chunk is off by far more.
    _assert_same_gradients(grads, want, atol=3e-5 if options.get("loss") == "cosent" else 1e-5)
  assert float(want_loss) > 0.1


def test_grad_cache_redraws_each_chunks_dropout_masks(tmp_path, spm_model_file):
  """With dropout on, each chunk's second pass must draw the masks of its first: GradCache then equals the loss and
  gradient of the same chunks run under one tape from the same seed-generator state, and leaves that state where
  one pass over the chunks leaves it. (Restoring nothing, the second pass draws other masks and this fails.)"""
  task, model, batch = _model_and_batch(tmp_path, spm_model_file, model={"hidden_dropout_prob": 0.1})
  from official_albert import compat
  states = compat.seed_generator_states(model)
  assert states
  start = [np.asarray(s.value) for s in states]
  inputs = task.model_inputs(batch)
  with tf.GradientTape() as tape:
    parts = [model({k: v[b:b + 3] for k, v in inputs.items()}, training=True) for b in (0, 3, 6)]
    embeddings = {k: tf.concat([p[k] for p in parts], 0) for k in parts[0]}
    want_loss = task.build_losses(batch, embeddings)
  want = tape.gradient(want_loss, model.trainable_variables)
  end = [np.asarray(s.value) for s in states]
  for s, value in zip(states, start):
    s.assign(value)
  task.params.grad_cache_chunk = 3
  loss, grads = task.compute_gradients(batch, model, None, [])
  assert float(loss) == pytest.approx(float(want_loss), abs=1e-5)
  _assert_same_gradients(grads, want)
  for s, value in zip(states, end):
    np.testing.assert_array_equal(np.asarray(s.value), value)
  # The masks matter: without dropout the loss is another.
  task.params.grad_cache_chunk = 0
  assert abs(float(task.build_losses(batch, model(inputs, training=False))) - float(want_loss)) > 1e-4


def test_grad_cache_chunk_is_checked():
  with pytest.raises(ConfigError, match=r"task.grad_cache_chunk=-1 must be >= 0"):
    train.build_params("text_embedding", params_override=json.dumps({"task": {"model": MODEL,
                                                                              "grad_cache_chunk": -1}}))


# ----------------------------------------------------------------------------------------------------- scale-out
_TWO_REPLICAS = textwrap.dedent("""
    import json, sys
    import numpy as np
    import tensorflow as tf
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    from official_albert import train
    from official_albert.training import base_task
    from tasks.embedding import TextEmbeddingTask
    # One strategy for all cases: strategies made directly (not by distribute.mirrored_strategy) one after another
    # in a process reuse collective instance keys.
    strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    results = []
    for config, model_dir in json.loads(sys.argv[1]):  # each case from its own task and model (seed 5)
      params = train.build_params("text_embedding", params_override=json.dumps(config))
      task = TextEmbeddingTask(params.task, logging_dir=model_dir)
      with strategy.scope():
        tf.keras.utils.set_random_seed(5)
        model = task.build_model()
      batch = next(iter(task.build_inputs(params.task.train_data)))
      half = params.task.train_data.global_batch_size // 2
      local = lambda ctx: {k: v[ctx.replica_id_in_sync_group * half:(ctx.replica_id_in_sync_group + 1) * half]
                           for k, v in batch.items()}

      def step(inputs):
        ctx = tf.distribute.get_replica_context()
        denominators = ctx.all_reduce(tf.distribute.ReduceOp.SUM, task.loss_denominators(inputs))
        loss, grads = task.compute_gradients(inputs, model, None, [], denominators)
        return loss, ctx.all_reduce(tf.distribute.ReduceOp.SUM, [tf.convert_to_tensor(g) for g in grads])

      inputs = strategy.experimental_distribute_values_from_function(local)
      losses, grads = strategy.run(tf.function(step), args=(inputs,))
      two = float(strategy.reduce(tf.distribute.ReduceOp.SUM, losses, axis=None))
      two_grads = [np.asarray(strategy.experimental_local_results(g)[0]) for g in grads]
      task.params.grad_cache_chunk = 0  # (the one-device reference is the plain pass, GradCache or not above)
      one, one_grads = task.compute_gradients(batch, model, None, [])
      one_grads = [np.asarray(tf.convert_to_tensor(g)) for g in one_grads]
      # The largest difference relative to the variable's largest gradient (at least 1): CoSENT x 20 has large ones.
      worst = max(float(np.max(np.abs(a - b)) / max(1.0, np.max(np.abs(b)))) for a, b in zip(two_grads, one_grads))
      results.append({"one": float(one), "two": two, "grad_diff": worst})
    print(json.dumps(results))
""")
# (The mnrl cases read one file with the cosent case: its score column, 0 on some rows, is unread there on purpose.)
TWO_REPLICA_OPTIONS = [{"symmetric": True, "negative_column": "negative", "ignore_label_column": True},
                       {"loss": "cosent", "score_column": "score", "matryoshka_dims": [64, 32]},
                       {"symmetric": True, "negative_column": "negative", "matryoshka_dims": [64, 16],
                        "grad_cache_chunk": 1, "ignore_label_column": True},
                       # (row i's negative is row i + 5's positive: the batches of 8 hold repeats to mask)
                       {"symmetric": True, "negative_column": "negative", "mask_false_negatives": True,
                        "ignore_label_column": True}]


@pytest.fixture(scope="module")
def two_replica_results(tmp_path_factory, spm_model_file):
  """The 2-logical-CPU check of every case of TWO_REPLICA_OPTIONS, in one child process (the logical CPUs must be
  set before TensorFlow starts; one process instead of one per case saves two TensorFlow starts)."""
  root = tmp_path_factory.mktemp("two_replicas")
  rows = stdlib_pairs()[:32]
  rows = [(a, p, rows[(i + 5) % len(rows)][1], str(i % 3)) for i, (a, p) in enumerate(rows)]
  path = write_pairs(root / "pairs.csv", rows, ("anchor", "positive", "negative", "score"))
  cases = [(override(path, path, spm_model_file, 1, batch=8, **options), str(root / f"m{i}"))
           for i, options in enumerate(TWO_REPLICA_OPTIONS)]
  env = dict(os.environ, PYTHONPATH=CHILD_PYTHONPATH, TF_CPP_MIN_LOG_LEVEL="2")
  done = subprocess.run([sys.executable, "-c", _TWO_REPLICAS, json.dumps(cases)], env=env, capture_output=True,
                        text=True, timeout=600, check=False)
  assert done.returncode == 0, done.stderr[-3000:]
  results = json.loads(done.stdout.strip().splitlines()[-1])
  assert len(results) == len(TWO_REPLICA_OPTIONS)
  return results


@pytest.mark.large
@pytest.mark.parametrize("case", range(len(TWO_REPLICA_OPTIONS)),
                         ids=[f"options{i}" for i in range(len(TWO_REPLICA_OPTIONS))])
def test_two_replicas_give_the_one_device_loss_and_gradient(two_replica_results, case):
  """The in-batch negatives (CoSENT's comparisons) span the global batch: replica 0's anchors are ranked against
  replica 1's positives too, so the sum of the replicas' shares is the one-device loss, and so is the gradient.
  GradCache on 2 replicas (4 chunks of one row each per replica, the embeddings gathered for the loss) gives the
  plain one-device loss and gradient too. (The cases of TWO_REPLICA_OPTIONS; computed by `two_replica_results`.)"""
  result = two_replica_results[case]
  assert result["two"] == pytest.approx(result["one"], abs=1e-5), result
  assert result["grad_diff"] < 1e-5, result
  assert result["one"] > 0.1, result


def _trained_weights(prefix):
  """{key: value} of every weight in a trainer checkpoint of the bi-encoder. The trainable ones are keyed by the
  optimizer's path to them (`optimizer/_trainable_variables/<i>`: the checkpoint names a variable by the first path
  it finds); checked to be there, so that the comparison cannot silently shrink to the frozen pooler."""
  reader = tf.train.load_checkpoint(prefix)
  names = [n for n in reader.get_variable_to_dtype_map() if n.endswith("VARIABLE_VALUE") and "OPTIMIZER_SLOT" not in n
           and (n.startswith("model/") or n.startswith("optimizer/_trainable_variables/"))]
  assert sum(n.startswith("optimizer/_trainable_variables/") for n in names) > 10, names
  return {n: reader.get_tensor(n) for n in names}


def _worst_difference(a, b):
  """The largest ‖a − b‖ / max(‖a‖, 0.1) over the variables. (The floor: the attention key biases get no gradient —
  softmax ignores a shift shared by every key — and hold rounding noise of ~1e-8, whose relative difference from
  run to run is ~1; every other variable's norm is well above 0.1.)"""
  assert set(a) == set(b), set(a) ^ set(b)
  return max(float(np.linalg.norm(a[n] - b[n]) / max(np.linalg.norm(a[n]), 0.1)) for n in a)


@pytest.mark.large
@pytest.mark.timing
def test_one_device_two_replicas_and_two_workers_train_the_same_embedder(tmp_path, spm_model_file):
  """20 steps of the train binary (symmetric MNRL with hard negatives, batch 8, lr 1e-3, op determinism) on one
  device, 2 replicas (logical CPUs), 2 MultiWorkerMirroredStrategy workers and one device with GradCache (chunks of
  3 rows: two and a tail of 2): the same weights at every checkpoint (steps 5, 10, 15, 20; within 2e-5 relative per
  variable: float32 sums in another order; measured 2026-11-29 at most 7.7e-6) and the same logged loss. Replica
  0's anchors are ranked against the positives of the whole global batch, whichever process holds them (ranking
  against a replica's own rows is another loss: a loss of 4 rows, not 8). Bounded by the harness's process waits
  and timeout, not a speed."""
  from tests.official_albert.training import scale_out_harness as H
  pairs = stdlib_pairs()[:400]
  rows = [(a, p, pairs[(i + 5) % len(pairs)][1]) for i, (a, p) in enumerate(pairs)]
  path = write_pairs(tmp_path / "pairs.csv", rows, ("anchor", "positive", "negative"))
  config = override(path, path, spm_model_file, 20, lr=1e-3, batch=8, loop=5, symmetric=True,
                    negative_column="negative")
  config = H.deep_merge(config, {"trainer": {"checkpoint_interval": 5, "max_to_keep": 10},
                                 "runtime": {"enable_op_determinism": True}})
  single = lambda **runtime: H.deep_merge(config, {"runtime": runtime})  # noqa: E731
  runs = {"one": single(distribution_strategy="one_device"),
          "mirrored": single(distribution_strategy="", num_cpu_devices=2),
          "grad_cache": H.deep_merge(single(distribution_strategy="one_device"), {"task": {"grad_cache_chunk": 3}})}
  procs = {name: H.start(tmp_path / name, c, experiment="text_embedding", log=tmp_path / f"{name}.log")
           for name, c in runs.items()}
  logs = [tmp_path / f"w{i}.log" for i in range(2)]
  workers = H.start_workers(tmp_path / "workers", H.deep_merge(config, {"runtime": {"distribution_strategy": ""}}),
                            H.free_ports(2), logs, experiment="text_embedding")
  try:
    H.finish(list(procs.values()), [tmp_path / f"{k}.log" for k in procs])
    H.finish(workers, logs)
  finally:
    H.kill(list(procs.values()) + workers)
  for step in (5, 10, 15, 20):
    one = _trained_weights(str(tmp_path / "one" / f"ckpt-{step}"))
    for name in ("mirrored", "workers", "grad_cache"):
      other = _trained_weights(str(tmp_path / name / f"ckpt-{step}"))
      assert _worst_difference(one, other) < 2e-5, (name, step)
  first = _trained_weights(str(tmp_path / "one" / "ckpt-5"))
  assert _worst_difference(first, one) > 1e-2  # (the weights moved: the comparison can fail)
  loss = H.logged(tmp_path / "one.log", 20, "loss")
  for log in (tmp_path / "mirrored.log", tmp_path / "grad_cache.log", logs[0], logs[1]):
    # The log prints 4 decimals: losses a round-off apart may print one last digit apart (0.6123 / 0.6124).
    assert H.logged(log, 20, "loss") == pytest.approx(loss, abs=1.5e-4), log


# ----------------------------------------------------------------------------------------------------- CoSENT
@pytest.mark.slow
def test_cosent_on_scored_pairs_trains(tmp_path, spm_model_file):
  """Scored pairs (1 for a sentence's own second half, 0 for another's): CoSENT runs and its loss falls; the eval
  reports Spearman / Pearson of cosine vs score."""
  pairs = stdlib_pairs()[:600]
  rows = [(a, p, "1") if i % 2 else (a, pairs[(i + 11) % len(pairs)][1], "0") for i, (a, p) in enumerate(pairs)]
  path = write_pairs(tmp_path / "scored.csv", rows, ("anchor", "positive", "score"))
  dev = write_pairs(tmp_path / "dev.csv", rows[:64], ("anchor", "positive", "score"))
  logs = []
  config = override(path, dev, spm_model_file, 120, lr=1e-3, loop=30, loss="cosent", score_column="score")
  result = train.run("text_embedding", "train_and_eval", str(tmp_path / "m"), params_override=json.dumps(config),
                     on_loop_end=lambda step, log: logs.append(log["loss"]))
  assert len(logs) == 4 and logs[-1] < logs[0], logs
  assert {"spearman", "pearson", "eval_loss"} <= set(result["eval_results"]), result["eval_results"]


# ----------------------------------------------------------------------------------------------------- model dirs
@pytest.fixture(scope="module")
def matryoshka_run(tmp_path_factory, spm_model_file):
  """2 steps on 36 pairs with Matryoshka widths [64, 16], cased, and no validation file (evaluated on the training
  pairs): one trained directory (read-only), its config and its final eval results, shared by the embed(dim=...),
  predict-mode, sentence-transformers and evaluation-fallback tests (each trained the same one before)."""
  root = tmp_path_factory.mktemp("matryoshka")
  path = write_pairs(root / "pairs.csv", stdlib_pairs()[:36])
  config = override(path, "", spm_model_file, 2, batch=8, matryoshka_dims=[64, 16], do_lower_case=False)
  return str(root / "m"), config, run(root / "m", config)["eval_results"]


def test_init_checkpoint_starts_the_encoder_from_a_pretrained_directory(tmp_path, spm_model_file):
  """A native model directory of another head (a classifier here) warm-starts the bi-encoder's shared encoder, and
  its spiece.model is the one tokenized with (no task.spm_model_file)."""
  from official_albert.checkpoints.native import save_pretrained
  from official_albert.modeling import models
  path = write_pairs(tmp_path / "pairs.csv", stdlib_pairs()[:16])
  config = override(path, path, "", 1, batch=8)
  params = train.build_params("text_embedding", params_override=json.dumps(config))
  tf.keras.utils.set_random_seed(1)
  pretrained = models.AlbertClassifier(params.task.model.to_albert_config(), num_labels=2)
  pretrained({k: tf.zeros([1, 8], tf.int32) for k in pair_data.ENCODER_KEYS})
  save_pretrained(pretrained, str(tmp_path / "pretrained"), spm_model_file)
  config["task"]["init_checkpoint"] = str(tmp_path / "pretrained")
  task = make_task(config, str(tmp_path / "m"))
  tf.keras.utils.set_random_seed(2)
  model = task.build_model()
  task.initialize(model)
  want = {v.path: v.numpy() for v in pretrained.encoder.variables}
  got = {v.path: v.numpy() for v in model.encoder.variables}
  assert sorted(got) == sorted(want)
  for name, value in want.items():
    np.testing.assert_array_equal(got[name], value, err_msg=name)
  assert task.sentencepiece_model_file() == str(tmp_path / "pretrained" / md.SPM_FILE)
  assert next(iter(task.build_inputs(task.params.train_data)))["anchor_input_word_ids"].shape == (8, 32)


@pytest.mark.slow
def test_embed_dim_serves_a_trained_matryoshka_width_and_refuses_others(matryoshka_run):
  model_dir = matryoshka_run[0]
  assert md.read_embedding_training_file(model_dir)["matryoshka_dims"] == [64, 16]
  # embed tokenizes as training did: cased here.
  assert read_tokenizer_options(model_dir) == {"do_lower_case": False, "keep_accents": False, "remove_space": True}
  upper, lower = pipelines.embed(model_dir, ["The Records Cache", "the records cache"])
  assert np.max(np.abs(upper - lower)) > 1e-3
  texts = ["the records cache is reused", "a short one", "pooling and normalisation"]
  full = pipelines.embed(model_dir, texts)
  short = pipelines.embed(model_dir, texts, dim=16)
  want = full[:, :16] / np.linalg.norm(full[:, :16], axis=1, keepdims=True)
  np.testing.assert_allclose(short, want, atol=1e-6)
  np.testing.assert_allclose(pipelines.embed(model_dir, texts, dim=64), full, atol=1e-6)
  with pytest.raises(ValueError, match=r"trained at the widths \[64, 16\].*not at dim=32.*force=True"):
    pipelines.embed(model_dir, texts, dim=32)
  assert pipelines.embed(model_dir, texts, dim=32, force=True).shape == (3, 32)
  with pytest.raises(ValueError, match=r"dim=65 is not in 1..64"):
    pipelines.embed(model_dir, texts, dim=65)


def test_predict_mode_writes_the_vectors_embed_gives(tmp_path, matryoshka_run):
  """`--mode=predict` on a file of texts (its own column, `task.predict_column`) writes `<stem>.embeddings.npy` in
  the file's order — 11 texts, so the last batch of 4 is padded — and `<stem>.embeddings.jsonl` naming each row's
  line and text; the vectors are `pipelines.embed(model_dir, texts)`'s (same length, 32). (On a copy of the shared
  trained directory: predict writes into it.)"""
  shutil.copytree(matryoshka_run[0], tmp_path / "m")
  config = json.loads(json.dumps(matryoshka_run[1]))
  texts = [a for a, _ in stdlib_pairs()[40:50]] + ["a short one"]
  with open(tmp_path / "texts.csv", "w", newline="", encoding="utf-8") as f:
    csv.writer(f).writerows([("id", "sentence")] + [(str(i), t) for i, t in enumerate(texts)])
  config["task"].update(predict_column="sentence", predict_data={
      "input_path": str(tmp_path / "texts.csv"), "global_batch_size": 4, "seq_length": 32, "is_training": False,
      "drop_remainder": False})
  result = run(tmp_path / "m", config, mode="predict")
  vectors = np.load(result["files"]["embeddings"])
  assert result["files"]["embeddings"].endswith("predictions/texts.embeddings.npy") and vectors.shape == (11, 64)
  rows = [json.loads(line) for line in open(result["files"]["texts"], encoding="utf-8")]
  assert [(r["line"], r["text"]) for r in rows] == [(i + 2, t) for i, t in enumerate(texts)]
  np.testing.assert_allclose(vectors, pipelines.embed(str(tmp_path / "m"), texts), atol=1e-5)
  # (the training run's record is kept: embed(dim=16) still serves the trained width)
  assert md.read_embedding_training_file(str(tmp_path / "m"))["matryoshka_dims"] == [64, 16]


# What a trained directory records of its training run (2_Normalize/ absent: trained with normalize=false).
RECORD_FILES = ("modules.json", "1_Pooling/config.json", "sentence_bert_config.json", "embedding_training.json",
                "tokenizer_config.json", "params.yaml", "config.json", "2_Normalize")


def _record_bytes(model_dir):
  return {name: (pathlib.Path(model_dir, name).read_bytes() if pathlib.Path(model_dir, name).is_file()
                 else pathlib.Path(model_dir, name).exists()) for name in RECORD_FILES}


@pytest.fixture(scope="module")
def recorded_run(tmp_path_factory, spm_model_file):
  """2 steps with every recorded setting away from its default (cls pooling, unnormalised, Matryoshka widths, scale
  10, cased, columns `q` / `p`): one trained directory (read-only), its pairs file and its final eval results."""
  root = tmp_path_factory.mktemp("recorded")
  path = write_pairs(root / "pairs.csv", stdlib_pairs()[:32], header=("q", "p"))
  config = override(path, path, spm_model_file, 2, batch=8, pooling="cls", normalize=False, matryoshka_dims=[64, 16],
                    scale=10.0, do_lower_case=False, anchor_column="q", positive_column="p")
  return str(root / "m"), path, run(root / "m", config)["eval_results"]


def test_predict_and_eval_read_the_trained_settings_and_leave_the_directory_as_it_is(tmp_path, recorded_run):
  """`--mode=predict` and `--mode=eval` naming only their input (the model's settings not repeated): the vectors are
  `pipelines.embed`'s of the trained folder (cls pooling, unnormalised, cased, the anchors' column `q`), eval gives
  the training run's own final results (scale and Matryoshka widths in its loss), and the record files are
  byte-identical after both (they were rewritten from the run's defaults: mean pooling, no widths, lower-cased)."""
  model_dir = str(tmp_path / "m")
  shutil.copytree(recorded_run[0], model_dir)
  record = _record_bytes(model_dir)
  texts = ["The Records Cache Is Reused", "a short one", "Pooling and Normalisation", "GradCache"]
  before = pipelines.embed(model_dir, texts)
  write_pairs(tmp_path / "texts.csv", [(t,) for t in texts], header=("q",))
  data = {"global_batch_size": 4, "seq_length": 32, "is_training": False, "drop_remainder": False}
  runtime = {"distribution_strategy": "one_device"}
  result = run(model_dir, {"task": {"predict_data": dict(data, input_path=str(tmp_path / "texts.csv"))},
                           "runtime": runtime}, mode="predict")
  np.testing.assert_allclose(np.load(result["files"]["embeddings"]), before, atol=1e-5)
  assert _record_bytes(model_dir) == record
  results = run(model_dir, {"task": {"validation_data": dict(data, input_path=recorded_run[1], global_batch_size=8)},
                            "runtime": runtime}, mode="eval")
  for key, value in recorded_run[2].items():
    assert results[key] == pytest.approx(value, abs=1e-5), (key, results, recorded_run[2])
  assert _record_bytes(model_dir) == record
  np.testing.assert_allclose(pipelines.embed(model_dir, texts), before, atol=1e-6)
  assert pipelines.embed(model_dir, texts, dim=16).shape == (4, 16)  # (the trained widths still served)


def test_a_setting_that_contradicts_the_trained_one_is_an_error_naming_both(recorded_run):
  """Explicit settings the record agrees with are taken; ones it contradicts (a default's value too) are refused,
  each with both values and its file, before anything is read or written."""
  model_dir = recorded_run[0]
  task = make_task({"task": {"model": MODEL, "pooling": "cls", "matryoshka_dims": [64, 16]}}, model_dir)
  assert (task.params.pooling, task.params.normalize, task.params.do_lower_case) == ("cls", False, False)
  assert (task.params.anchor_column, task.params.scale, task.params.loss) == ("q", 10.0, "mnrl")
  with pytest.raises(ConfigError) as error:
    make_task({"task": {"model": MODEL, "pooling": "mean", "do_lower_case": True, "matryoshka_dims": [64, 16]}},
              model_dir)
  message = str(error.value)
  for words in ("task.pooling='mean', but ", "embedding_training.json records pooling='cls'",
                "task.do_lower_case=True, but ", "tokenizer_config.json records do_lower_case=False",
                "train in a new --model_dir"):
    assert words in message, (words, message)
  assert "matryoshka_dims" not in message


def test_a_fresh_run_tokenizes_as_its_init_checkpoint_folder_records(tmp_path, spm_model_file, caplog):
  """Fine-tuning from a folder a cased, accented model was converted into (tokenizer_config.json: do_lower_case
  false, keep_accents true), with nothing set and a model_dir that records nothing, tokenizes as that folder records
  and as the pipelines read it (it lower-cased and stripped accents, and wrote do_lower_case=true for embed), keys
  the records on the three options and records them in model_dir. The folder's record is a default only: an
  explicit do_lower_case that differs is used with a warning naming the folder's file (it was refused, unlike the
  text, GLUE, SQuAD and RACE tasks; a model_dir's own record still refuses one). Without a model_dir the casing comes
  from the folder too (it defaulted to true beside the folder's keep_accents)."""
  init = tmp_path / "cased"
  init.mkdir()
  shutil.copy(spm_model_file, init / "spiece.model")
  write_tokenizer_options(str(init), {"do_lower_case": False, "keep_accents": True})
  model_dir = str(tmp_path / "m")
  task = make_task({"task": {"model": MODEL, "init_checkpoint": str(init)}}, model_dir)
  cased = {"do_lower_case": False, "keep_accents": True, "remove_space": True}
  text = "Café Über Straße"
  assert task.tokenizer.encode_ids(text) == FullTokenizer(spm_model_file, **cased).encode_ids(text)
  assert task.params.do_lower_case is False
  key = task.record_key(task.params.train_data, [spm_model_file])
  assert {k: key[k] for k in cased} == cased
  task.save_assets()
  assert read_tokenizer_options(model_dir) == cased
  with caplog.at_level(logging.WARNING):
    lowered = make_task({"task": {"model": MODEL, "init_checkpoint": str(init), "do_lower_case": True}},
                        str(tmp_path / "n"))
  assert lowered.params.do_lower_case is True and lowered.tokenizer_options()["keep_accents"] is True
  assert "task.do_lower_case=True, but " in caplog.text and "cased/tokenizer_config.json" in caplog.text
  assert make_task({"task": {"model": MODEL, "init_checkpoint": str(init)}}).params.do_lower_case is False
  with pytest.raises(ConfigError, match=r"task.do_lower_case=True, but .*m.tokenizer_config.json records "
                                        r"do_lower_case=False"):
    make_task({"task": {"model": MODEL, "init_checkpoint": str(init), "do_lower_case": True}}, model_dir)


ST_ENCODE = REPO / "tests" / "official_albert" / "retrieval" / "sentence_transformers_encode.py"


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("sentence_transformers") is None,
                    reason="sentence-transformers (requirements-test.txt) is not installed")
def test_convert_checkpoint_writes_a_sentence_transformers_folder_with_our_vectors(tmp_path, matryoshka_run):
  """A trained embedder directory → `convert_checkpoint --output_format=hf` → a folder `SentenceTransformer(folder)`
  loads with no overrides (Transformer → Pooling → Normalize, the slow tokenizer, cased as trained) whose `encode`
  is `pipelines.embed` of the directory (cosine >= 0.9999, issue 46's bar), and whose `truncate_dim=16`,
  re-normalised, is `embed(dim=16)` (the Matryoshka width recorded in the copied embedding_training.json).
  Texts hold the user-defined symbols the fast tokenizer would split differently, upper case, and one cut at
  seq_length."""
  model_dir, folder = matryoshka_run[0], str(tmp_path / "st")
  summary = convert_lib.convert("native", model_dir, "hf", folder)  # (the model type: encoder, from modules.json)
  assert summary["model_type"] == "encoder"
  assert md.read_embedding_training_file(folder)["matryoshka_dims"] == [64, 16]
  texts = ["The Records Cache (see docs) is reused.", "the records cache is reused", "pass -m to it: £5 – or €6.",
           'He said "yes".', " ".join(a for a, _ in stdlib_pairs()[:4])]
  (tmp_path / "texts.json").write_text(json.dumps(texts), encoding="utf-8")
  env = {**os.environ, "USE_TF": "0", "TF_CPP_MIN_LOG_LEVEL": "2"}
  done = subprocess.run([sys.executable, str(ST_ENCODE), folder, str(tmp_path / "texts.json"),
                         str(tmp_path / "out.npz"), "16"], env=env, capture_output=True, text=True, timeout=600)
  assert done.returncode == 0, done.stderr[-3000:]
  out = np.load(tmp_path / "out.npz")
  assert list(out["modules"]) == ["Transformer", "Pooling", "Normalize"] and not out["use_fast"]
  ours = pipelines.embed(model_dir, texts)
  assert np.sum(ours * out["embeddings"], axis=1).min() >= 0.9999
  np.testing.assert_allclose(out["embeddings"], ours, atol=1e-5)
  # (sentence-transformers truncates after Normalize and does not re-normalise; cosine similarity is the same.)
  truncated = out["truncated"] / np.linalg.norm(out["truncated"], axis=1, keepdims=True)
  np.testing.assert_allclose(truncated, pipelines.embed(model_dir, texts, dim=16), atol=1e-5)
  # A native copy keeps what embed reads: the same vectors, still cased.
  convert_lib.convert("native", model_dir, "native", str(tmp_path / "native"))
  assert read_tokenizer_options(str(tmp_path / "native"))["do_lower_case"] is False
  np.testing.assert_allclose(pipelines.embed(str(tmp_path / "native"), texts, dim=16),
                             pipelines.embed(model_dir, texts, dim=16), atol=1e-6)


# ----------------------------------------------------------------------------------------------------- rows
def test_bad_rows_name_file_line_and_key(tmp_path):
  path = tmp_path / "pairs.jsonl"
  path.write_text(json.dumps({"q": "a question", "p": "an answer", "s": 0.5}) + "\n"
                  + json.dumps({"q": "another", "p": "", "s": 1}) + "\n"
                  + json.dumps({"q": "third", "p": "fine", "s": "high"}) + "\n", encoding="utf-8")
  columns = {"anchor": "q", "positive": "p"}
  with pytest.raises(ValueError, match=r"pairs.jsonl:2: column 'p' \(task.positive_column\).*empty.*skip_bad_rows"):
    pair_data.read_pairs(str(path), columns)
  with pytest.raises(ValueError, match=r"pairs.jsonl:3: column 's' \(task.score_column\): 'high' is not a finite"):
    pair_data.read_pairs(str(path), {"anchor": "q", "positive": "q"}, score_column="s")
  kept = pair_data.read_pairs(str(path), columns, skip_bad_rows=True, score_column="s")
  assert [(e.line, e.anchor, e.positive, e.score) for e in kept] == [(1, "a question", "an answer", 0.5)]
  path.write_text(json.dumps({"q": "a question", "p": "an answer", "n": "an answer "}) + "\n", encoding="utf-8")
  with pytest.raises(ValueError, match=r"pairs.jsonl:1: column 'n' \(task.negative_column\): the hard negative is "
                                       "the row's positive itself"):
    pair_data.read_pairs(str(path), {**columns, "negative": "n"})


def test_a_hard_negative_the_tokenizer_makes_the_positive_is_refused(tmp_path):
  # Before: compared verbatim (after strip), so an NFD or upper-case copy of the positive was trained as unrelated to
  # it although the lower-casing tokenizer gives both the same ids.
  path = tmp_path / "pairs.csv"
  columns = {"anchor": "anchor", "positive": "positive", "negative": "negative"}
  for negative in ("the cafe\u0301 opens", "THE CAF\u00c9  OPENS"):
    path.write_text(f"anchor,positive,negative\nwhen,The caf\u00e9 opens,{negative}\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"pairs.csv:2: column 'negative' \(task.negative_column\): the hard negative "
                                         r"is the row's positive itself"):
      pair_data.read_pairs(str(path), columns)
    assert pair_data.read_pairs(str(path), columns, skip_bad_rows=True) == []
  cased = {"do_lower_case": False, "keep_accents": True}
  assert len(pair_data.read_pairs(str(path), columns, tokenizer_options=cased)) == 1
  # SentencePiece's own normaliser too: a zero-width space is a space to it (before: kept, the ids being equal).
  path.write_text("anchor,positive,negative\nwhen,a b,a\u200bb\n", encoding="utf-8")
  with pytest.raises(ValueError, match=r"pairs.csv:2: column 'negative' .*the hard negative is the row's positive"):
    pair_data.read_pairs(str(path), columns)


def test_a_repeated_header_is_skipped_and_a_semicolon_csv_score_takes_a_decimal_comma(tmp_path, caplog):
  """(Concatenated exports trained the pair ('anchor', 'positive'); a `;` CSV's `0,5` score rejected every row.)"""
  path = tmp_path / "pairs.csv"
  path.write_text("anchor;positive;s\nhow old is the sun;4,6 billion years;0,5\nanchor;positive;s\n"
                  "what is rust;iron oxide;1\n", encoding="utf-8")
  with caplog.at_level(logging.INFO):
    pairs = pair_data.read_pairs(str(path), {"anchor": "anchor", "positive": "positive"}, score_column="s")
  assert [(e.line, e.anchor, e.positive, e.score) for e in pairs] == [
      (2, "how old is the sun", "4,6 billion years", 0.5), (4, "what is rust", "iron oxide", 1.0)]
  assert "pairs.csv:3: the header again: files concatenated?" in caplog.text
  path.write_text('anchor,positive,s\na,b,"0,5"\n', encoding="utf-8")
  with pytest.raises(ValueError, match=r"pairs.csv:2: column 's' \(task.score_column\): '0,5' is not a finite "
                                       r"number; a decimal comma is read only in a ';'-separated CSV .*write 0\.5"):
    pair_data.read_pairs(str(path), {"anchor": "anchor", "positive": "positive"}, score_column="s")


def test_without_validation_data_evaluation_reads_the_training_pairs(matryoshka_run):
  """As every task: an empty task.validation_data.input_path evaluates on the training files (read in order; 36
  pairs in batches of 8: the last one partial). The shared run has no validation file."""
  assert matryoshka_run[1]["task"]["validation_data"]["input_path"] == ""
  results = matryoshka_run[2]
  assert results["queries"] == results["corpus"] == 36 and 0 <= results["recall@10"] <= 1, results


def test_gradient_accumulation_is_refused_for_in_batch_negatives(tmp_path, spm_model_file):
  path = write_pairs(tmp_path / "pairs.csv", stdlib_pairs()[:16])
  config = override(path, path, spm_model_file, 1, batch=8)
  config["trainer"]["gradient_accumulation_steps"] = 2
  with pytest.raises(ValueError, match=r"gradient_accumulation_steps=2 with task.loss=mnrl.*one micro-batch"):
    run(tmp_path / "m", config)


def test_an_anchor_on_several_rows_is_one_query_with_several_relevant_passages(tmp_path, spm_model_file):
  """As InformationRetrievalEvaluator with merged qrels (sentence-transformers 5.x gives these numbers on these
  vectors): an ideal embedder scores 1.0, not 0.83 as when each row was a query missing its other positive."""
  path = tmp_path / "dev.csv"
  path.write_text("anchor,positive\nwhat is a cat,cats are small felines\nwhat is a cat,a cat is a pet animal\n"
                  "what is a dog,dogs bark\n", encoding="utf-8")
  task = tiny.build_task(TextEmbeddingTask, "text_embedding", override(str(path), str(path), spm_model_file, 1))
  positives = np.eye(3)
  anchors = np.array([[1.0, 1.0, 0.0], [1.0, 1.0, 0.0], [0.0, 0.0, 1.0]])  # the cat query between its two passages
  results = task.retrieval_results(anchors, positives, np.arange(3))
  assert results == {"recall@1": 0.75, "recall@10": 1.0, "mrr@10": 1.0, "ndcg@10": 1.0, "map@100": 1.0, "queries": 2,
                     "corpus": 3}
