"""Both halves of the Keras-backend equivalence test (tests/official_albert/modeling/test_backends.py).

`write_reference(dir)` runs under TensorFlow (the pytest process): every model type with random weights, saved as a
native model directory (and as an HF directory where HF has the class), its outputs and the pretrainer's gradients.
`python -m tests.official_albert.modeling.backend_harness --dir=DIR` runs under the backend named by KERAS_BACKEND,
in its own process (Keras reads KERAS_BACKEND once, at its first import), and writes DIR/<backend>.npz:
  1. with TensorFlow made absent (`TensorFlowAbsent`): import the modeling package, build every model type, load the HF
     directories (safetensors + numpy) and the SQuAD 2.0 model's weights by their TF1 names (HF has no class for
     it), run every head  → keys `hf/<model_type>/<output>`;
  2. with TensorFlow importable again (its checkpoint reader reads the native files): load every native directory
     and run every head → `native/<model_type>/<output>`, plus the pretrainer's gradients → `grad/<TF1 name>`,
     and the pretrainer under mixed_bfloat16: outputs `bf16/pretrainer/<output>`, gradients `bf16_grad/<TF1 name>`;
     the pretrainer read from its original-release (TF1) copy has the native one's weights
     (`check/tf1_vs_native_max_abs`).
`encoder_loop` is the encoder's weights run with `layer_loop=True`. The test compares everything with the reference.
"""

import argparse
import os
import sys

import numpy as np

CONFIG = dict(vocab_size=64, embedding_size=8, hidden_size=16, num_hidden_layers=3, num_hidden_groups=2,
              num_attention_heads=2, intermediate_size=32, max_position_embeddings=16, classifier_dropout_prob=0.0)
NUM_LABELS, NUM_CHOICES = 3, 2
BATCH, SEQ, PREDICTIONS = 2, 8, 3
_BLOCKED = ("tensorflow", "tensorflow_text", "tf_keras")


class TensorFlowAbsent:
  """Within the block, TensorFlow (and tensorflow_text, tf_keras) look uninstalled to this process.

  `sys.modules[name] = None` is Python's own mark of an absent module: `import tensorflow` raises
  ModuleNotFoundError and `importlib.util.find_spec` returns None (torch probes for TensorFlow that way; a meta-path
  finder that raises would break the probe instead of answering it).
  """

  def __enter__(self):
    loaded = sorted(m for m in sys.modules if m.split(".")[0] in _BLOCKED)
    if loaded:
      raise RuntimeError(f"already imported: {loaded}")
    for name in _BLOCKED:
      sys.modules[name] = None
    return self

  def __exit__(self, *exc):
    for name in _BLOCKED:
      if sys.modules.get(name, 0) is None:
        del sys.modules[name]


def model_inputs(model_type: str):
  """The same seeded inputs on every backend (a padded row, both segment ids)."""
  rng = np.random.default_rng(7)
  shape = (BATCH, NUM_CHOICES, SEQ) if model_type == "multiple_choice" else (BATCH, SEQ)
  mask = np.ones(shape, np.int32)
  mask[0, ..., SEQ - 3:] = 0
  inputs = {"input_word_ids": rng.integers(0, CONFIG["vocab_size"], shape).astype(np.int32) * mask,
            "input_mask": mask, "input_type_ids": (np.arange(SEQ) >= SEQ // 2).astype(np.int32) * mask}
  if model_type == "pretrainer":
    inputs["masked_lm_positions"] = rng.integers(0, SEQ, (BATCH, PREDICTIONS)).astype(np.int32)
  if model_type == "squad_v2":
    # Fewer answerable tokens (p_mask 0) than start_n_top = 5: the masked positions tie at −1e30 and every backend
    # must pick among them as TensorFlow does (lowest index first), or the top-k indices and end candidates differ.
    p_mask = np.ones(shape, np.float32)
    p_mask[0, [2, 3]] = 0.0
    p_mask[1, [1, 4, 6]] = 0.0
    inputs["p_mask"] = p_mask
  return inputs


def _arrays(outputs):
  """{output name: numpy array}; `encoder_outputs` (a list) as `encoder_outputs_<i>`."""
  import keras  # pylint: disable=g-import-not-at-top
  arrays = {}
  for name, value in outputs.items():
    for i, item in enumerate(value) if isinstance(value, list) else ((None, value),):
      array = keras.ops.convert_to_numpy(item)
      # bfloat16 (the pooler's output under mixed precision) as float32: .npz files cannot hold it.
      is_bfloat16 = array.dtype.name == "bfloat16"
      arrays[name if i is None else f"{name}_{i}"] = array.astype(np.float32) if is_bfloat16 else array
  return arrays


def _state(model):
  return [v.value for v in model.trainable_variables], [v.value for v in model.non_trainable_variables]


def make_forward(template):
  """forward(models) → {model_type: {output: array}}, inference. `template`: {model_type: model} of the same types.

  Under JAX one `jax.jit` of a stateless call of all of them (how JAX runs a Keras model; op-by-op eager JAX
  compiles each op for each shape and takes several times longer here); the function is traced from `template` and
  takes any same-shaped models' variable values, so phase 2 reuses phase 1's compilation. Elsewhere eager calls.
  """
  import keras  # pylint: disable=g-import-not-at-top
  if keras.backend.backend() != "jax":
    return lambda models: {t: _arrays(m(model_inputs(t), training=False)) for t, m in models.items()}
  import jax  # pylint: disable=g-import-not-at-top

  @jax.jit
  def stateless(states):
    return {t: template[t].stateless_call(*states[t], model_inputs(t), training=False)[0] for t in states}

  return lambda models: {t: _arrays(out) for t, out in stateless({t: _state(m) for t, m in models.items()}).items()}


def loss_weights():
  rng = np.random.default_rng(11)
  return (rng.normal(size=(BATCH, PREDICTIONS, CONFIG["vocab_size"])).astype(np.float32),
          rng.normal(size=(BATCH, 2)).astype(np.float32))


def pretrainer_loss(outputs):
  """A scalar that reaches every pretrainer weight: fixed random projections of the MLM and SOP logits."""
  from keras import ops  # pylint: disable=g-import-not-at-top
  mlm, sop = (ops.convert_to_tensor(w) for w in loss_weights())
  return ops.sum(outputs["mlm_logits"] * mlm) + ops.sum(outputs["sop_logits"] * sop)


def pretrainer_training_step(model):
  """({output: array}, {TF1 name: gradient}) of `pretrainer_loss` with training=True, by the backend's autodiff.

  The config has no dropout, so training=True is deterministic; under mixed precision it takes the training paths
  (float32 softmax, the closed-form LayerNorm's custom gradient).
  """
  import keras  # pylint: disable=g-import-not-at-top

  from official_albert.checkpoints.names import tf1_variable_map  # pylint: disable=g-import-not-at-top
  inputs = model_inputs("pretrainer")
  names = {id(v): n for n, v in tf1_variable_map(model).items()}
  variables = model.trainable_variables
  backend = keras.backend.backend()
  if backend == "tensorflow":
    import tensorflow as tf  # pylint: disable=g-import-not-at-top
    with tf.GradientTape() as tape:
      outputs = model(inputs, training=True)
      loss = pretrainer_loss(outputs)
    grads = [tf.convert_to_tensor(g).numpy() for g in tape.gradient(loss, [v.value for v in variables])]
  elif backend == "jax":
    import jax  # pylint: disable=g-import-not-at-top

    def loss_fn(trainable, non_trainable):
      outputs, _ = model.stateless_call(trainable, non_trainable, inputs, training=True)
      return pretrainer_loss(outputs), outputs

    grads, outputs = jax.jit(jax.grad(loss_fn, has_aux=True))(*_state(model))
    grads = [np.asarray(g) for g in grads]
  elif backend == "torch":
    model.zero_grad()
    outputs = model(inputs, training=True)
    pretrainer_loss(outputs).backward()
    outputs = {k: v.detach() for k, v in outputs.items()}
    grads = [v.value.grad.detach().cpu().numpy() for v in variables]
  else:
    raise ValueError(f"no gradient recipe for backend {backend!r}")
  return _arrays(outputs), {names[id(v)]: g for v, g in zip(variables, grads)}


def mixed_precision_pretrainer(directory: str):
  """The pretrainer under `mixed_bfloat16` (float32 variables, bfloat16 compute) from its native directory."""
  import keras  # pylint: disable=g-import-not-at-top

  from official_albert.checkpoints.loading import load_model  # pylint: disable=g-import-not-at-top
  keras.mixed_precision.set_global_policy("mixed_bfloat16")
  try:
    return load_model(os.path.join(directory, "pretrainer"), "pretrainer")[0]
  finally:
    keras.mixed_precision.set_global_policy("float32")


def _add_looped_encoder(models):
  """`encoder_loop`: the encoder's weights in an `AlbertEncoder(layer_loop=True)` (a graph loop per hidden group)."""
  from official_albert.modeling.encoder import AlbertEncoder  # pylint: disable=g-import-not-at-top
  encoder = models["encoder"]
  looped = AlbertEncoder(encoder.config, layer_loop=True)
  for target, source in zip(looped.weights, encoder.weights):
    target.assign(source)
  return {**models, "encoder_loop": looped}


def write_reference(directory: str) -> None:
  """TensorFlow side: every model type (perturbed random weights), saved natively (+ HF; the pretrainer also as an
  original TF1 release), outputs + gradients."""
  from official_albert.checkpoints import hf  # pylint: disable=g-import-not-at-top
  from official_albert.checkpoints import native  # pylint: disable=g-import-not-at-top
  from official_albert.checkpoints import tf1  # pylint: disable=g-import-not-at-top
  from official_albert.checkpoints.formats import MODEL_TYPES  # pylint: disable=g-import-not-at-top
  from official_albert.checkpoints.loading import build_model  # pylint: disable=g-import-not-at-top
  from official_albert.checkpoints.names import tf1_variable_map  # pylint: disable=g-import-not-at-top
  from official_albert.config import AlbertConfig  # pylint: disable=g-import-not-at-top
  config = AlbertConfig(**CONFIG)
  rng = np.random.default_rng(3)
  models = {}
  for model_type in MODEL_TYPES:
    model = models[model_type] = build_model(model_type, config, NUM_LABELS, NUM_CHOICES)
    # Seeded weights, not the initializers' (σ 0.02, LayerNorm 1/0: near-constant outputs, and unseeded): N(0, 0.2)
    # around LayerNorm's 1/0 makes every head's outputs O(1) and distinct, so a wrong variable or op shows.
    for variable in model.weights:
      center = 1.0 if variable.path.endswith("gamma") else 0.0
      variable.assign((center + rng.normal(0.0, 0.2, variable.shape)).astype(np.float32))
    native.save_pretrained(model, os.path.join(directory, model_type))
    if model_type in hf.HF_ARCHITECTURES:
      hf.write_hf(model, model_type, os.path.join(directory, model_type + "_hf"))
    else:
      np.savez(os.path.join(directory, model_type + "_tf1_weights.npz"),
               **{name: v.numpy() for name, v in tf1_variable_map(model).items()})
  tf1.write_tf1(models["pretrainer"], os.path.join(directory, "pretrainer_tf1"))
  outputs = make_forward(None)(_add_looped_encoder(models))
  reference = {f"{t}/{k}": v for t, arrays in outputs.items() for k, v in arrays.items()}
  reference.update({f"grad/{k}": v for k, v in pretrainer_training_step(models["pretrainer"])[1].items()})
  np.savez(os.path.join(directory, "reference.npz"), **reference)


def _load_without_tensorflow(directory: str):
  """Phase 1 models: HF directories (safetensors + numpy) and, for the SQuAD 2.0 model, TF1-named arrays."""
  from official_albert.checkpoints import hf  # pylint: disable=g-import-not-at-top
  from official_albert.checkpoints.formats import MODEL_TYPES  # pylint: disable=g-import-not-at-top
  from official_albert.checkpoints.loading import build_model  # pylint: disable=g-import-not-at-top
  from official_albert.checkpoints.loading import load_model  # pylint: disable=g-import-not-at-top
  from official_albert.checkpoints.names import tf1_variable_map  # pylint: disable=g-import-not-at-top
  from official_albert.config import AlbertConfig  # pylint: disable=g-import-not-at-top
  models = {}
  for model_type in MODEL_TYPES:
    if model_type in hf.HF_ARCHITECTURES:
      models[model_type], _ = load_model(os.path.join(directory, model_type + "_hf"), model_type,
                                         num_choices=NUM_CHOICES)
      continue
    model = models[model_type] = build_model(model_type, AlbertConfig(**CONFIG), NUM_LABELS, NUM_CHOICES)
    weights = np.load(os.path.join(directory, model_type + "_tf1_weights.npz"))
    variables = tf1_variable_map(model)
    assert sorted(variables) == sorted(weights.files), (sorted(variables), weights.files)
    for name, variable in variables.items():
      variable.assign(weights[name])
  return _add_looped_encoder(models)


def _load_native(directory: str):
  """Phase 2 models: every native directory through `load_model` (TensorFlow's checkpoint reader)."""
  from official_albert.checkpoints.formats import MODEL_TYPES  # pylint: disable=g-import-not-at-top
  from official_albert.checkpoints.loading import load_model  # pylint: disable=g-import-not-at-top
  models = {}
  for model_type in MODEL_TYPES:
    models[model_type], summary = load_model(os.path.join(directory, model_type), model_type,
                                             num_choices=NUM_CHOICES)
    assert not summary["missing_allowed"], summary
  return _add_looped_encoder(models)


def main(argv=None) -> None:
  parser = argparse.ArgumentParser(description=__doc__)
  parser.add_argument("--dir", required=True)
  args = parser.parse_args(argv)
  if "keras" in sys.modules:
    raise RuntimeError("Keras was imported before KERAS_BACKEND could take effect.")
  backend = os.environ.get("KERAS_BACKEND", "tensorflow")
  with TensorFlowAbsent():
    import keras  # pylint: disable=g-import-not-at-top
    assert keras.backend.backend() == backend, (keras.backend.backend(), backend)
    models = _load_without_tensorflow(args.dir)
    forward = make_forward(models)
    outputs = {f"hf/{t}/{k}": v for t, arrays in forward(models).items() for k, v in arrays.items()}
  models = _load_native(args.dir)
  # The original-release reader: the same weights as the native directory's, tensor for tensor.
  from official_albert.checkpoints.loading import load_model  # pylint: disable=g-import-not-at-top
  from official_albert.checkpoints.names import tf1_variable_map  # pylint: disable=g-import-not-at-top
  released = tf1_variable_map(load_model(os.path.join(args.dir, "pretrainer_tf1"), "pretrainer")[0])
  native_weights = tf1_variable_map(models["pretrainer"])
  assert sorted(released) == sorted(native_weights)
  outputs["check/tf1_vs_native_max_abs"] = np.array(max(
      float(np.abs(keras.ops.convert_to_numpy(released[n]) - keras.ops.convert_to_numpy(v)).max())
      for n, v in native_weights.items()))
  outputs.update({f"native/{t}/{k}": v for t, arrays in forward(models).items() for k, v in arrays.items()})
  outputs.update({f"grad/{k}": v for k, v in pretrainer_training_step(models["pretrainer"])[1].items()})
  bf16_outputs, bf16_grads = pretrainer_training_step(mixed_precision_pretrainer(args.dir))
  outputs.update({f"bf16/pretrainer/{k}": v for k, v in bf16_outputs.items()})
  outputs.update({f"bf16_grad/{k}": v for k, v in bf16_grads.items()})
  np.savez(os.path.join(args.dir, f"{backend}.npz"), **outputs)


if __name__ == "__main__":
  main()
