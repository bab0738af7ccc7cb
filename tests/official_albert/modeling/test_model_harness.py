"""One harness over every model type: the promises the README makes of each model, checked on each.

Every `Case` (a model type + the model's and the config's options) is run through the same five checks:
- config round trip: `from_config(get_config())` through JSON gives the same config and, with the same weights, the
  same outputs;
- `.keras`: saved and loaded, the same class, config and outputs, bit for bit;
- XLA: `tf.function(jit_compile=True)` gives the outputs and the gradients of `tf.function` without it;
- bf16: built under `mixed_bfloat16` with the float32 weights, float32 variables, float32 logits, and outputs close to
  float32's;
- weight names: the checkpoint names table (`checkpoints/names.py`) names every weight exactly once, with the
  model's shapes; the heads' names are the type's (pinned below); every name has a Hugging Face name where HF has
  the model.

Adding a model type is one row of `MODEL_TYPES` (its inputs and its head's checkpoint names); adding an option is one
line of `CASES`, e.g. `Case(AlbertClassifier, model=dict(num_labels=3), config=dict(attention_type="chunked"))`.
KerasHub's `run_backbone_test` and HF's `ModelTesterMixin` are the examples; the numbers checks each model type makes
beyond these (oracle parity, heads computed by hand) stay in their own files.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import json
from typing import Any, Callable, Dict, Optional, Tuple

import keras
import numpy as np
import pytest
import tensorflow as tf

import official_albert
from official_albert import AlbertClassifier
from official_albert import AlbertConfig
from official_albert import AlbertEncoder
from official_albert import AlbertMultipleChoice
from official_albert import AlbertPretrainer
from official_albert import AlbertSpanLabeler
from official_albert import AlbertSquadV2Model
from official_albert import AlbertTokenClassifier
from official_albert.checkpoints.names import tf1_to_hf_name
from official_albert.checkpoints.names import tf1_variable_map
from official_albert.modeling.embedder import AlbertEmbedder
from official_albert.precision import global_dtype_policy

# Two groups of two inner blocks, E != H (the projection exists), no dropout: every path of the encoder, with as few
# blocks as that takes (XLA compiles each unrolled block: compile time is most of this file's time).
TINY = dict(vocab_size=97, embedding_size=16, hidden_size=32, num_hidden_layers=2, num_hidden_groups=2,
            num_attention_heads=4, intermediate_size=37, inner_group_num=2, max_position_embeddings=64,
            hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
BATCH, SEQ, CHOICES = 2, 9, 3


def _encoder_inputs(batch=BATCH, seq=SEQ, seed=0):
  rng = np.random.RandomState(seed)
  mask = np.ones((batch, seq), "int32")
  mask[-1, 6:] = 0  # one padded row
  types = np.zeros((batch, seq), "int32")
  types[:, seq // 2:] = 1
  return {"input_word_ids": rng.randint(5, TINY["vocab_size"], size=(batch, seq)).astype("int32"),
          "input_mask": mask, "input_type_ids": types}


def _pretrainer_inputs(seq=SEQ):
  return {**_encoder_inputs(seq=seq), "masked_lm_positions": np.array([[1, 2, 0], [3, 4, 5]], "int32")}


def _choice_inputs(seq=SEQ):
  return {k: v.reshape(BATCH, CHOICES, seq) for k, v in _encoder_inputs(batch=BATCH * CHOICES, seq=seq).items()}


def _squad_v2_inputs(seq=SEQ):
  p_mask = np.zeros((BATCH, seq), "float32")
  p_mask[:, 1:4] = 1.0  # question tokens may not be answers
  return {**_encoder_inputs(seq=seq), "p_mask": p_mask}


@dataclasses.dataclass(frozen=True)
class ModelType:
  """What the harness needs to know of a model class: its inputs and the checkpoint names of its head.

  `head_names`: globs of the checkpoint names outside the encoder's `bert/` scope; each must name at least one weight
  and every head weight must match one. `hf`: Hugging Face has this model (its names must all convert).
  `argmax_outputs`: outputs chosen by an argmax / top-k (equal under XLA, not compared across precisions).
  `encoder_weights`: every weight is the `.encoder`'s (a checkpoint restores into it as into an encoder: the
  embedder, whose pooling is configuration), so the names are the encoder's table.
  """
  inputs: Callable[..., Dict[str, np.ndarray]]  # (seq=...) -> the model's input dict
  head_names: Tuple[str, ...] = ()
  hf: bool = True
  argmax_outputs: Tuple[str, ...] = ()
  encoder_weights: bool = False


MODEL_TYPES = {
    AlbertEncoder: ModelType(_encoder_inputs),
    AlbertPretrainer: ModelType(_pretrainer_inputs, ("cls/predictions/*", "cls/seq_relationship/*")),
    AlbertClassifier: ModelType(_encoder_inputs, ("output_weights", "output_bias")),
    AlbertTokenClassifier: ModelType(_encoder_inputs, ("output_weights", "output_bias")),
    AlbertSpanLabeler: ModelType(_encoder_inputs, ("cls/squad/*",)),
    AlbertMultipleChoice: ModelType(_choice_inputs, ("output_weights", "output_bias")),
    AlbertSquadV2Model: ModelType(_squad_v2_inputs, ("start_logits/*", "end_logits/*", "answer_class/*"), hf=False,
                                  argmax_outputs=("start_top_index", "end_top_index", "start_top_log_probs",
                                                  "end_top_log_probs")),
    AlbertEmbedder: ModelType(_encoder_inputs, encoder_weights=True),
}
# Model classes with a harness row that the package's top level does not export (official_albert.modeling.embedder).
NOT_EXPORTED = {AlbertEmbedder}


@dataclasses.dataclass(frozen=True)
class Case:
  """A model type with options: `model` (constructor keywords), `config` (AlbertConfig fields over `TINY`), `call`
  (keywords of the inference call), `head_names` (more head globs than the type's, for heads an option adds), `seq`
  (the inputs' length, for options that act only on longer sequences), `xla` (False where the shapes depend on the
  data)."""
  model_cls: type
  model: Dict[str, Any] = dataclasses.field(default_factory=dict)
  config: Dict[str, Any] = dataclasses.field(default_factory=dict)
  call: Dict[str, Any] = dataclasses.field(default_factory=dict)
  head_names: Tuple[str, ...] = ()
  seq: int = SEQ
  xla: bool = True  # False: a path whose shapes depend on the data (early exit's compaction) cannot compile

  @property
  def id(self) -> str:
    options = {**self.model, **self.config, **self.call, **({"seq": self.seq} if self.seq != SEQ else {})}
    return self.model_cls.__name__ + "".join(f"-{k}={v}" for k, v in options.items())

  def inputs(self) -> Dict[str, np.ndarray]:
    return self.type.inputs(seq=self.seq)

  @property
  def type(self) -> ModelType:
    return MODEL_TYPES[self.model_cls]

  def build(self):
    return self.model_cls(AlbertConfig(**{**TINY, **self.config}), **self.model)

  def run(self, model, inputs=None) -> Dict[str, np.ndarray]:
    outputs = model(self.inputs() if inputs is None else inputs, training=False, **self.call)
    return _numpy(outputs)


# One line a case. Options that change which code runs belong here (a new attention, a head option, a layout).
CASES = [
    Case(AlbertEncoder),
    Case(AlbertEncoder, model=dict(layer_loop=True)),
    Case(AlbertEncoder, model=dict(fused_qkv=False), config=dict(sharing="none", num_hidden_groups=1)),
    Case(AlbertPretrainer),
    Case(AlbertClassifier, model=dict(num_labels=3)),
    Case(AlbertClassifier, model=dict(num_labels=1)),  # regression (STS-B)
    Case(AlbertTokenClassifier, model=dict(num_labels=5)),
    Case(AlbertSpanLabeler),
    Case(AlbertMultipleChoice, model=dict(num_choices=CHOICES)),
    Case(AlbertSquadV2Model, model=dict(start_n_top=3, end_n_top=2)),
    Case(AlbertEncoder, config=dict(attention_type="chunked", query_chunk_size=4, key_chunk_size=4)),
    # Block-sparse above its dense-fallback length ((5 + 2r)·block = 14 tokens); a seed that is not the default, so
    # that `.keras` and the config round trip must carry the random layout.
    Case(AlbertClassifier, config=dict(attention_type="block_sparse", block_size=2, num_random_blocks=1,
                                       block_sparse_seed=11), seq=17),
    # Exit heads (issue 31): patience 0 is the plain graph; a patience exits rows by data (no XLA); a static depth.
    Case(AlbertClassifier, model=dict(num_labels=3, exit_heads=True), head_names=("exit_heads/*",)),
    Case(AlbertClassifier, model=dict(num_labels=3, exit_heads=True), call=dict(patience=1),
         head_names=("exit_heads/*",), xla=False),
    Case(AlbertMultipleChoice, model=dict(num_choices=CHOICES, exit_heads=True), call=dict(depth=1),
         head_names=("exit_heads/*",)),
    # The sentence embedder: its pooling, normalisation, Matryoshka width and encoder option are configuration that
    # must travel. One case, and not layer_loop (its XLA compile alone costs ~25 s): the options travel through the
    # encoder's `encoder_options_config` alike, and the encoder's paths have their own cases above.
    Case(AlbertEmbedder, model=dict(pooling=("mean", "cls"), normalize=True, dim=12, fused_qkv=False)),
]


def _numpy(outputs) -> Dict[str, np.ndarray]:
  """A model's output dict as numpy; list outputs (`encoder_outputs`) become `name/i`."""
  flat = {}
  for key, value in outputs.items():
    if isinstance(value, (list, tuple)):
      flat.update({f"{key}/{i}": np.asarray(v) for i, v in enumerate(value)})
    else:
      flat[key] = np.asarray(value)
  return flat


_REFERENCES: Dict[str, Tuple[keras.Model, Dict[str, np.ndarray]]] = {}


def _reference(case: Case):
  """(model, outputs) of a case, seeded: built once per case for all checks (no check changes its weights)."""
  if case.id not in _REFERENCES:
    keras.utils.set_random_seed(0)
    model = case.build()
    _REFERENCES[case.id] = model, case.run(model)
  return _REFERENCES[case.id]


def _assert_same(got: Dict[str, np.ndarray], want: Dict[str, np.ndarray], atol=0.0):
  assert sorted(got) == sorted(want)
  for key in want:
    if atol and np.issubdtype(want[key].dtype, np.floating):
      np.testing.assert_allclose(got[key], want[key], atol=atol, rtol=0, err_msg=key)
    else:
      np.testing.assert_array_equal(got[key], want[key], err_msg=key)


def _cases(marks: Optional[Callable[[Case], Any]] = None):
  return [pytest.param(c, id=c.id, marks=marks(c) if marks else ()) for c in CASES]


def test_every_model_type_has_a_case():
  """Every model class the package exports is a row of MODEL_TYPES, and every row has a case."""
  exported = [getattr(official_albert, n) for n in official_albert.__all__]
  assert {c for c in exported if isinstance(c, type) and issubclass(c, keras.Model)} | NOT_EXPORTED == set(MODEL_TYPES)
  assert {c.model_cls for c in CASES} == set(MODEL_TYPES)
  assert len({c.id for c in CASES}) == len(CASES), "two cases with the same id"


@pytest.mark.parametrize("case", _cases())
def test_config_round_trip(case):
  model, want = _reference(case)
  config = json.loads(json.dumps(model.get_config()))
  clone = case.model_cls.from_config(config)
  assert clone.get_config() == model.get_config()
  assert clone.config == model.config
  clone.set_weights(model.get_weights())
  _assert_same(case.run(clone), want)


@pytest.mark.parametrize("case", _cases())
def test_keras_file_round_trip(case, tmp_path):
  model, want = _reference(case)
  path = str(tmp_path / "model.keras")
  model.save(path)
  restored = keras.saving.load_model(path)
  assert type(restored) is case.model_cls
  assert restored.get_config() == model.get_config()
  _assert_same(case.run(restored), want)


def _loss_and_grads(case, model):
  """The outputs and the gradient of a scalar of every float output, as a function of the inputs.

  tanh keeps the scalar finite where an output is -1e30 by design (log-probs of masked positions)."""
  def fn(inputs):
    with tf.GradientTape() as tape:
      outputs = model(inputs, training=False, **case.call)
      floats = [tf.cast(v, tf.float32) for v in tf.nest.flatten(outputs) if v.dtype.is_floating]
      loss = tf.add_n([tf.reduce_mean(tf.tanh(v)) for v in floats])
    grads = tape.gradient(loss, model.trainable_variables)  # None: a weight this output does not use (the pooler)
    return outputs, [tf.zeros(v.shape) if g is None else tf.convert_to_tensor(g)
                     for v, g in zip(model.trainable_variables, grads)]
  return fn


@pytest.mark.parametrize("case", _cases(lambda c: () if c.xla else pytest.mark.skip("shapes depend on the data")))
def test_xla_compiles_and_equals_graph(case):
  model, _ = _reference(case)
  inputs = {k: tf.constant(v) for k, v in case.inputs().items()}
  graph_out, graph_grads = tf.function(_loss_and_grads(case, model))(inputs)
  xla_out, xla_grads = tf.function(_loss_and_grads(case, model), jit_compile=True)(inputs)
  _assert_same(_numpy(xla_out), _numpy(graph_out), atol=1e-5)
  for variable, want, got in zip(model.trainable_variables, graph_grads, xla_grads):
    np.testing.assert_allclose(got.numpy(), want.numpy(), atol=1e-5, rtol=1e-4, err_msg=variable.path)


def _cosine(a, b):
  a, b = np.ravel(a).astype(np.float64), np.ravel(b).astype(np.float64)
  norms = np.linalg.norm(a) * np.linalg.norm(b)
  return 1.0 if norms == 0 else float(np.dot(a, b) / norms)


@pytest.mark.parametrize("case", _cases())
def test_mixed_bfloat16_is_close_to_float32(case):
  reference, want = _reference(case)
  with global_dtype_policy("mixed_bfloat16"):
    model = case.build()
  model.set_weights(reference.get_weights())
  assert all(v.dtype == "float32" for v in model.weights)
  outputs = model(case.inputs(), training=False, **case.call)
  for key, value in outputs.items():
    if key.endswith(("logits", "log_probs")) or key == "sequence_output":
      assert value.dtype == tf.float32, f"{key} is {value.dtype} under mixed_bfloat16"
    if key.endswith("logits"):
      # Computed in float32, not cast from bfloat16 afterwards: not every value is a bfloat16 (low 16 bits zero).
      bits = np.ascontiguousarray(value.numpy(), np.float32).view(np.uint32)
      assert np.any(bits & 0xFFFF), f"{key} was computed in bfloat16 and cast to float32"
  got = _numpy(outputs)
  for key in want:
    if key in case.type.argmax_outputs or not np.issubdtype(want[key].dtype, np.floating):
      continue
    a, b = got[key].astype(np.float32), want[key]
    assert _cosine(a, b) > 0.999, key
    assert np.max(np.abs(a - b)) <= 0.05 * max(1.0, np.max(np.abs(b))), key


@pytest.mark.parametrize("case", _cases())
def test_weight_names_are_the_checkpoint_table(case):
  model, _ = _reference(case)
  names = tf1_variable_map(model.encoder if case.type.encoder_weights else model)
  assert len(names) == len(model.weights), "a weight without a checkpoint name, or one named twice"
  assert {id(v) for v in names.values()} == {id(v) for v in model.weights}
  head = [n for n in names if not n.startswith("bert/")]
  globs = case.type.head_names + case.head_names
  assert [n for n in head if not any(fnmatch.fnmatchcase(n, g) for g in globs)] == [], "head names outside the type's"
  assert [g for g in globs if not any(fnmatch.fnmatchcase(n, g) for n in head)] == [], "a head glob names nothing"
  if case.type.hf and model.config.sharing == "all":
    hf_names = [tf1_to_hf_name(n)[0] for n in names]
    assert len(set(hf_names)) == len(hf_names)
