"""The tests' tiny sizes, texts and model directories, written once (issue 45 item 6).

Most tests need a model only to have one: an export, a pipeline or a server must give the Keras model's answers,
whatever its weights. They share these sizes instead of each spelling its own (~30 files did), and the session
fixture `tiny_model_dirs` (tests/conftest.py) saves one directory per head for all of them:
- `MODEL`: the serving-side model, read by the test SentencePiece model (1,000 pieces: tests/fixtures/test_spm.model)
  and small enough that building and saving it takes well under a second;
- `TRAIN_MODEL`: the same as a train binary's `task.model` override (no preset, dropout off, so that a few steps of
  training are deterministic);
- `GROUPED`: the encoder-side shape that exercises ALBERT's sharing (4 layers in 2 groups of 2 inner layers, an
  intermediate size that is no multiple of the hidden size) for tests of the modeling code itself.

A test that needs another size says so with an override (`dict(MODEL, num_hidden_layers=3)`). Tests assert on some of
these values (a hidden size of 32, 64 positions, 1,000 pieces): change one only together with them.

Nothing here builds anything at import; TensorFlow and Keras are imported by the functions that build.
"""

import json
import pathlib
import shutil

MODEL = dict(vocab_size=1000, embedding_size=16, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
             intermediate_size=64, max_position_embeddings=64)
NO_DROPOUT = dict(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
TRAIN_MODEL = dict(MODEL, preset="", **NO_DROPOUT)
GROUPED = dict(vocab_size=97, embedding_size=16, hidden_size=32, num_hidden_layers=4, num_hidden_groups=2,
               inner_group_num=2, num_attention_heads=4, intermediate_size=37, max_position_embeddings=64)

# Support-ticket texts of several lengths (one a single piece) and their label names, as the classifier, label and
# server tests feed them.
TEXTS = ("the invoice is wrong", "it crashes on start", "great work", "a")
LABELS = ("billing", "bug", "praise")
NUM_LABELS = len(LABELS)
NUM_CHOICES = 2

# {directory name: (head, num_labels)} of `tiny_model_dirs`; every name is also the head it is built as, except
# "regression" (a 1-output classifier).
HEADS = {"encoder": ("encoder", None), "pretrainer": ("pretrainer", None), "classifier": ("classifier", NUM_LABELS),
         "regression": ("classifier", 1), "token_classifier": ("token_classifier", NUM_LABELS), "span": ("span", None),
         "squad_v2": ("squad_v2", None), "multiple_choice": ("multiple_choice", None)}
SPM_MODEL_FILE = pathlib.Path(__file__).resolve().parent / "fixtures" / "test_spm.model"
SEED = 45  # each head's directory is built with SEED + its index in HEADS


def save_model_dir(directory, head, num_labels=None, seed=SEED, spm_model_file=None, **fields):
  """Builds `head` on `MODEL` (`fields` override it) from `seed` and saves it as a model directory; returns the model.

  `spm_model_file` defaults to the committed test SentencePiece model, so the directory is usable by the pipelines.
  """
  import keras

  from official_albert import AlbertConfig
  from official_albert.checkpoints.loading import build_model
  from official_albert.checkpoints.native import save_pretrained
  keras.utils.set_random_seed(seed)
  model = build_model(head, AlbertConfig(**dict(MODEL, **fields)), num_labels, NUM_CHOICES)
  save_pretrained(model, str(directory), spm_model_file=spm_model_file or str(SPM_MODEL_FILE))
  return model


class ModelDirs:
  """One saved tiny model directory per head of `HEADS`, built on first use and then shared (read-only).

  Built lazily so that a test file needing one head does not pay for eight; the first request builds under the
  global Keras seed `SEED + index`, so a directory is the same whichever test asks first (ask from a fixture: the
  seed is set again on that first request). Treat a directory as read-only: `copy` gives a private one to write a
  labels file into. Under pytest-xdist each worker process has its own.
  """

  def __init__(self, root):
    self._root = pathlib.Path(root)
    self._models = {}

  def __getitem__(self, name):
    """The directory of `name` (a key of `HEADS`)."""
    self.model(name)
    return str(self._root / name)

  def model(self, name):
    """The Keras model saved as `name`'s directory: the reference an export or a pipeline must equal. Do not change
    its weights (it is shared)."""
    if name not in self._models:
      head, num_labels = HEADS[name]
      self._models[name] = save_model_dir(self._root / name, head, num_labels, seed=SEED + list(HEADS).index(name))
    return self._models[name]

  def copy(self, name, destination):
    """A private copy of `name`'s directory at `destination` (a test that writes labels.json or deletes a file)."""
    shutil.copytree(self[name], destination)
    return str(destination)


def write_labels(directory, labels=LABELS, multi_label=False):
  """Writes `directory/labels.json` as text_classification training does (through the library's own writer, so a
  test's label file is the trainer's format); returns the directory as a string."""
  from official_albert import model_directory
  model_directory.write_label_file(str(directory), model_directory.LabelFile(
      list(labels), multi_label=multi_label, task="text_classification"))
  return str(directory)


def exit_head_classifier(inputs, scale, spread, num_labels=NUM_LABELS, **fields):
  """A `MODEL`-sized (`fields` override it) classifier with exit heads whose rows leave at different iterations.

  A random encoder gives nearly the same pooled output for every text: the heads get large weights (a shared part
  times `scale` plus `spread` times each head's own), and biases that take each iteration's mean logits over `inputs`
  away, so that texts differ in their answers and some keep theirs from one iteration to the next (they leave early)
  while others do not. Built from the Keras seed 11 and the NumPy seed 5.
  """
  import keras
  import numpy as np

  from official_albert import AlbertConfig
  from official_albert.checkpoints.loading import build_model
  from official_albert.modeling import early_exit
  keras.utils.set_random_seed(11)
  model = build_model("classifier", AlbertConfig(**dict(MODEL, **fields)), num_labels=num_labels, exit_heads=True)
  rng = np.random.default_rng(5)
  base = rng.normal(size=model.classifier.output_weights.shape) * scale
  heads = early_exit.exit_heads(model) + [model.classifier]
  for head in heads:
    head.output_weights.assign((base + spread * rng.normal(size=base.shape)).astype("float32"))
  for head, mean in zip(heads, model(inputs, return_exit_logits=True)["exit_logits"].numpy().mean(0)):
    head.output_bias.assign(-mean)
  return model


def finetune_override(model, train_file, dev_file, spm_model_file, steps, lr, data, loop=None, warmup_steps=None,
                      **task):
  """The train binary's override of a short fine-tuning run on raw files (the task tests' learning checks).

  One loop of `steps` (or loops of `loop`), evaluated and saved at the end on the whole dev file; `data` is the
  shared part of train_data and validation_data (batch, seq_length, seed); warm-up 10% of the steps unless given;
  `task` adds task settings. One device, seed 3.
  """
  return {"task": {"model": model, "spm_model_file": spm_model_file, **task,
                   "train_data": dict(data, input_path=train_file),
                   "validation_data": dict(data, input_path=dev_file, is_training=False, drop_remainder=False)},
          "trainer": {"train_steps": steps, "steps_per_loop": loop or steps, "checkpoint_interval": steps,
                      "validation_interval": steps, "summary_interval": loop or steps, "validation_steps": -1,
                      "warmup_steps": steps // 10 if warmup_steps is None else warmup_steps, "learning_rate": lr},
          "runtime": {"distribution_strategy": "one_device", "seed": 3}}


def train_run(experiment, model_dir, config, mode="train_and_eval"):
  """The train binary's `run` of `experiment` in `model_dir` with `config` (e.g. a `finetune_override`)."""
  from official_albert import train  # noqa: PLC0415 (nothing built at import)
  return train.run(experiment, mode, str(model_dir), params_override=json.dumps(config))


def build_task(task_class, experiment, config, model_dir=None):
  """A `task_class` of `experiment`'s params with `config` applied, as the train binary resolves them."""
  from official_albert import train  # noqa: PLC0415 (nothing built at import)
  params = train.build_params(experiment, params_override=json.dumps(config))
  return task_class(params.task, logging_dir=model_dir)
