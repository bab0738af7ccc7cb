"""Every private TensorFlow / Keras / tensorflow_text internal this project relies on, behind one small module.

Public APIs do not expose what a faithful ALBERT needs in a few places: the optimizer update has to all-reduce
*before* clipping (Keras clips per replica), an exact resume needs the dropout RNG state, a checkpoint load has
to name every variable that found no value, and a failed read is diagnosed from TensorFlow's message text. Each
such use is one function here, so that a TensorFlow or Keras upgrade breaks in one file, and `check()` (run by
tests/official_albert/test_compat.py) fails loudly, naming the missing internal and the tested versions, instead of
letting training misbehave later.

Tested with `TESTED_VERSIONS` (major.minor). Bump them only after `make test` passes on the new versions.
"""

from __future__ import annotations

import importlib.metadata
import os
import re
import tempfile
from typing import Any, Dict, Iterable, List, Sequence, Tuple

import keras

TESTED_VERSIONS = {"tensorflow": "2.21", "keras": "3.15", "tensorflow_text": "2.21"}


class IncompatibleVersionError(ImportError):
  """A private internal this project uses is missing from the installed TensorFlow / Keras / tensorflow_text."""


# ------------------------------------------------------------------------------------------------ keras optimizer
# `official_albert.training.optimization._AlbertAdamBase` overrides the private `_backend_apply_gradients` of Keras'
# TensorFlow optimizer (to all-reduce, then clip once) and calls the internals below from it.
OPTIMIZER_OVERRIDES = ("_backend_apply_gradients",)
_OPTIMIZER_INTERNALS = ("_clip_gradients", "_distributed_tf_update_step", "_get_variable_index",
                        "_get_current_learning_rate", "_update_model_variables_moving_average",
                        "_overwrite_model_variables_with_average_value")


def keras_clip_gradients(optimizer, grads: Sequence[Any]) -> List[Any]:
  """Keras' own `clipnorm` / `clipvalue` handling (the base class's, not an override's)."""
  return keras.optimizers.Optimizer._clip_gradients(optimizer, grads)  # pylint: disable=protected-access


def distributed_update(optimizer, grads_and_vars: List[Tuple[Any, Any]], learning_rate) -> None:
  """Applies `update_step` to every (gradient, variable) pair the way Keras' TF backend does under a strategy."""
  import tensorflow as tf  # noqa: PLC0415 (TF-free module)
  tf.__internal__.distribute.interim.maybe_merge_call(
      optimizer._distributed_tf_update_step,  # pylint: disable=protected-access
      optimizer._distribution_strategy, grads_and_vars, learning_rate)  # pylint: disable=protected-access


def apply_ema(optimizer) -> None:
  """Keras' exponential moving average of the weights (`use_ema=True`), as its own `apply` would run it."""
  import tensorflow as tf  # noqa: PLC0415 (TF-free module)
  variables = optimizer._trainable_variables  # pylint: disable=protected-access
  optimizer._update_model_variables_moving_average(variables)  # pylint: disable=protected-access
  if optimizer.ema_overwrite_frequency:
    should_overwrite = (optimizer.iterations + 1) % optimizer.ema_overwrite_frequency == 0
    tf.cond(should_overwrite,
            lambda: optimizer._overwrite_model_variables_with_average_value(variables),  # pylint: disable=protected-access
            lambda: None)  # (both branches return nothing: a no_op here made tf.cond fail in a tf.function)


def variable_index(optimizer, variable) -> int:
  """Position of `variable` in the optimizer's variable list (`update_step` may get the backend tf.Variable)."""
  return optimizer._get_variable_index(variable)  # pylint: disable=protected-access


def current_learning_rate(optimizer) -> float:
  """The learning rate at the optimizer's current step (schedules evaluated), as a Python float."""
  optimizer = getattr(optimizer, "inner_optimizer", optimizer)
  lr = optimizer._get_current_learning_rate()  # pylint: disable=protected-access
  return float(lr.numpy() if hasattr(lr, "numpy") else lr)


# ------------------------------------------------------------------------------------------------ keras layers
def seed_generator_states(model) -> List[Any]:
  """The state variables of every Keras `SeedGenerator` (dropout) in `model`.

  They are not model variables, but an exact resume needs them: otherwise a restarted run draws the dropout masks
  of step 1 again.
  """
  states = []
  for layer in model._flatten_layers(include_self=True, recursive=True):  # pylint: disable=protected-access
    for generator in getattr(layer, "_seed_generators", ()):
      states.append(generator.state)
  return states


# ------------------------------------------------------------------------------------------------ tensorflow
def in_multi_worker_mode(strategy) -> bool:
  """True when `strategy` spans several worker processes (MultiWorkerMirroredStrategy with a cluster)."""
  return bool(strategy.extended._in_multi_worker_mode())  # pylint: disable=protected-access


def restored_object_ids(status) -> set:
  """`id()`s of the Python objects that a `tf.train.Checkpoint(...).read(...)` status matched to saved values."""
  return {id(obj) for obj in status._checkpoint.object_by_proto_id.values()}  # pylint: disable=protected-access


def onednn_custom_ops_enabled() -> bool:
  """Whether TensorFlow runs its oneDNN custom kernels in this process (`_pywrap_util_port.IsMklEnabled`).

  TensorFlow decides once, at start-up: `TF_ENABLE_ONEDNN_OPTS` when set, else its own CPU rule (on for x86 CPUs
  with AVX512_VNNI, AVX512_BF16, AVX_VNNI or AMX; off on an AVX2-only CPU, where its MatMul calls oneDNN's GEMM API
  only). `precision.onednn_custom_ops_enabled` is the public name.
  """
  from tensorflow.python.util import _pywrap_util_port  # noqa: PLC0415 (TF-free module)
  return bool(_pywrap_util_port.IsMklEnabled())


def gradient_registrations() -> Dict[str, Any]:
  """TensorFlow's process-wide gradient registry (name → entry), where `tf.custom_gradient` adds a
  `CustomGradient-<uid>` at every graph trace and never removes it (`train_lib.forget_custom_gradients` and
  `custom_gradients.release` do)."""
  from tensorflow.python.framework import ops  # noqa: PLC0415 (TF-free module)
  return ops.gradient_registry._registry  # pylint: disable=protected-access


def function_graphs(graph) -> List[Any]:
  """The Python graphs (FuncGraphs) of the functions in `graph`'s library: while / map bodies, cond branches, nested
  tf.functions, at every depth (TensorFlow adds a nested function to each outer graph; `Graph._functions`)."""
  functions = graph._functions.values()  # pylint: disable=protected-access
  return [function.graph for function in functions if getattr(function, "graph", None) is not None]


def pin_registered_gradient(op) -> bool:
  """Gives graph op `op` the gradient registered under its `_gradient_op_type` as its own (`Operation.
  _gradient_function`, which TensorFlow reads before the registry; its SavedModel loader sets it the same way), so
  that the op still differentiates once the name leaves the registry. False when the name is not registered."""
  entry = gradient_registrations().get(op.get_attr("_gradient_op_type").decode())
  if entry is None:
    return False
  op._gradient_function = entry["type"]  # pylint: disable=protected-access
  return True


def regex_split_op():
  """tensorflow_text's raw `regex_split_with_offsets` op, or None when this tensorflow_text lays it out otherwise.

  The public `tf_text.regex_split` wraps the op's output in validated ragged tensors (9 Assert ops per trace); the
  in-graph tokenizer builds one unvalidated ragged tensor from the op instead.
  """
  try:
    from tensorflow_text.python.ops import regex_split_ops  # noqa: PLC0415 (TF-free module)
  except ImportError:
    return None
  gen_ops = getattr(regex_split_ops, "gen_regex_split_ops", None)
  return getattr(gen_ops, "regex_split_with_offsets", None)


# ------------------------------------------------------------------------------------------ tensorflow's messages
# A read that fails inside tf.data names no file; `data.input_pipeline` finds the bad file and says what is wrong from
# TensorFlow's message text, which is no API. The patterns are here, with the versions they were read from, and
# `message_patterns_missing()` (part of `check()`) provokes each error on the installed TensorFlow and matches it.
READ_ERROR_PATTERNS = {
    # (truncated|corrupted), the byte offset: a damaged file (DataLossError).
    "damaged": r"(truncated|corrupted) record at (\d+)",
    # feature, values found, the expected shape: a record of other sizes.
    "length": (r"Key: (\S+), Index: \d+\.\s+Number of \w+ values != expected\.\s+Values size: (\d+) "
               r"but output shape: \[([\d, ]*)\]"),
    # feature, its dtype: a record without a feature the task reads.
    "missing_feature": r"Feature: (\S+) \(data type: (\w+)\) is required but could not be found",
    # feature, found dtype, expected dtype.
    "dtype": r"Key: (\S+), Index: \d+\.\s+Data types don't match\. Data type: (\w+) but expected type: (\w+)",
    # bytes that are no serialized tf.train.Example.
    "not_example": r"Could not parse example input",
}
# Any of TensorFlow's words for a failed record read or parse (a wider net than the kinds above: an error that
# matches none of them is still an input problem, told as "other"); anything else is not an input problem.
READ_ERROR_ANY = (r"truncated record at|corrupted record at|Could not parse example input|Key: \S+, Index: \d+\.|"
                  r"Feature: \S+ \(data type: \w+\) is required|Can't parse serialized Example|Name: <unknown>")


def read_error_samples() -> List[Tuple[str, str]]:
  """(kind of `READ_ERROR_PATTERNS`, the message the installed TensorFlow gives for it), each provoked through
  tf.data: a TFRecord file cut short and one with a flipped bit; records parsed with a spec they do not match."""

  import tensorflow as tf  # noqa: PLC0415 (TF-free module)

  def example(**features):
    return tf.train.Example(features=tf.train.Features(feature=features)).SerializeToString()

  def ints(n):
    return tf.train.Feature(int64_list=tf.train.Int64List(value=[1] * n))

  def error_of(dataset) -> str:
    try:
      for _ in dataset:
        pass
    except tf.errors.OpError as e:
      return e.message or ""
    return ""

  spec = {"ids": tf.io.FixedLenFeature([4], tf.int64)}
  parse = lambda records: tf.io.parse_example(records, spec)  # noqa: E731
  samples = []
  with tempfile.TemporaryDirectory() as tmp:
    path = os.path.join(tmp, "records.tf_record")
    with tf.io.TFRecordWriter(path) as writer:
      writer.write(example(ids=ints(4)))
    with open(path, "rb") as f:
      data = f.read()
    flipped = data[:20] + bytes([data[20] ^ 0xFF]) + data[21:]  # in the record's data: its checksum fails
    for damaged in (data[:-6], flipped):  # cut inside the record's data; a flipped bit
      with open(path, "wb") as f:
        f.write(damaged)
      samples.append(("damaged", error_of(tf.data.TFRecordDataset(path))))
  for kind, record in (("length", example(ids=ints(2))), ("missing_feature", example(other=ints(4))),
                       ("dtype", example(ids=tf.train.Feature(float_list=tf.train.FloatList(value=[1.0] * 4)))),
                       ("not_example", b"not an Example proto")):
    samples.append((kind, error_of(tf.data.Dataset.from_tensors([record]).map(parse))))
  return samples


def message_patterns_missing() -> List[str]:
  """The kinds of `READ_ERROR_PATTERNS` (and `READ_ERROR_ANY`) that the installed TensorFlow's messages no longer
  match, each with the message it gave."""
  missing = []
  for kind, message in read_error_samples():
    for name, pattern in ((kind, READ_ERROR_PATTERNS[kind]), ("any read error", READ_ERROR_ANY)):
      if not re.search(pattern, message):
        said = (message.splitlines() or [""])[0][-200:]  # the end of the first line: past TF's function prefix
        missing.append(f"tensorflow's {kind} read error message no longer matches READ_ERROR_PATTERNS[{name!r}]: "
                       f"{said!r}")
  return missing


# ------------------------------------------------------------------------------------------------ the check
def _versions() -> Dict[str, str]:
  out = {}
  for name, dist in (("tensorflow", "tensorflow"), ("keras", "keras"), ("tensorflow_text", "tensorflow-text")):
    try:
      out[name] = importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
      out[name] = "not installed"
  return out


def missing_internals() -> List[str]:
  """The private internals used above that the installed packages do not have (empty when all are present)."""
  import tensorflow as tf  # noqa: PLC0415 (TF-free module)
  missing = []
  optimizer_cls = type(keras.optimizers.SGD())
  for name in OPTIMIZER_OVERRIDES + _OPTIMIZER_INTERNALS:
    if not callable(getattr(optimizer_cls, name, None)):
      missing.append(f"keras optimizer {optimizer_cls.__name__}.{name}")
  if not hasattr(getattr(tf, "__internal__", None), "distribute") or not callable(
      getattr(getattr(tf.__internal__.distribute, "interim", None), "maybe_merge_call", None)):
    missing.append("tf.__internal__.distribute.interim.maybe_merge_call")
  layer = keras.layers.Dropout(0.5, seed=1)
  if not callable(getattr(keras.Model, "_flatten_layers", None)):
    missing.append("keras.Model._flatten_layers")
  if not getattr(layer, "_seed_generators", None):
    missing.append("keras layer ._seed_generators (Dropout)")
  if not callable(getattr(tf.distribute.get_strategy().extended, "_in_multi_worker_mode", None)):
    missing.append("tf.distribute StrategyExtended._in_multi_worker_mode")
  try:
    onednn_custom_ops_enabled()
  except (ImportError, AttributeError):
    missing.append("tensorflow.python.util._pywrap_util_port.IsMklEnabled")
  try:
    registry = gradient_registrations()
  except (ImportError, AttributeError):
    registry = None
  if not isinstance(registry, dict):
    missing.append("tensorflow.python.framework.ops.gradient_registry._registry")
  with tf.Graph().as_default() as graph:
    op = tf.constant(0.0).op
  if not isinstance(getattr(graph, "_functions", None), dict):
    missing.append("tensorflow Graph._functions")
  if not hasattr(op, "_gradient_function"):
    missing.append("tensorflow Operation._gradient_function")
  if regex_split_op() is None:
    missing.append("tensorflow_text.python.ops.regex_split_ops.gen_regex_split_ops.regex_split_with_offsets "
                   "(falls back to the validated public op)")
  return missing + message_patterns_missing()


def check() -> None:
  """Raises `IncompatibleVersionError` naming every missing internal and the installed vs tested versions."""
  missing = missing_internals()
  if missing:
    versions = _versions()
    raise IncompatibleVersionError(
        "official_albert relies on private internals that the installed packages lack:\n  "
        + "\n  ".join(missing) + f"\nInstalled: {versions}; tested: {TESTED_VERSIONS}. Install the tested versions "
        "(requirements.txt) or update official_albert/compat.py for the new ones.")


def version_drift() -> Iterable[str]:
  """'name installed (tested X)' for each package whose major.minor differs from `TESTED_VERSIONS`."""
  for name, installed in _versions().items():
    tested = TESTED_VERSIONS[name]
    if not installed.startswith(tested + ".") and installed != tested:
      yield f"{name} {installed} (tested {tested})"
