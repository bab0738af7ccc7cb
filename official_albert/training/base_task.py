"""The `Task` base class and the task registry (Model Garden `base_task.Task` manner).

A task owns everything specific to one training objective: its config (a `TaskConfig` subclass), the model, the
input pipeline, the loss, the metrics, and optional whole-dataset post-processing (`aggregate_logs` +
`reduce_aggregated_logs`, e.g. MCC or SQuAD F1). `official_albert.training.train_lib` drives any registered task with
the same distributed loop.

Contract for the per-replica step functions (they run inside `strategy.run`):
- `inputs` is either a dict (features and labels in one dict, as the pretraining records) or a
  `(features, labels)` tuple.
- Every loss is defined over the *global* batch. A loss term is a sum over examples (or masked positions) divided
  by a count over the whole batch: `loss_denominators(labels)` gives this replica's counts, the trainer sums them
  over all replicas and workers, and `build_losses(..., denominators=those sums)` divides this replica's sums by
  them. The replicas' losses then add up to the global-batch loss, and their gradients (summed by the all-reduce)
  to its gradient — so one device and N replicas train the same model. Without `denominators` (tests that step by hand)
  the counts are this batch's own.
- Evaluation and prediction batches carry `_valid` (`VALID_KEY`): 1 for real examples, 0 for the padding that fills
  the last global batch. Losses and metrics weight examples by it (`example_weights`); the trainer drops padding rows
  from the outputs it gathers for `aggregate_logs`.
- Metrics are Keras metrics updated in `process_metrics`; their `result()` is what gets logged.

Subclass checklist: set `config_cls`, implement `build_model`, `build_inputs`, `build_losses`, `build_metrics`,
`process_metrics`; override `model_input_keys` when the model takes more than the three encoder inputs; set
`best_metric` for `model.ckpt-best`; register with `@register_task("name", config_cls=MyTaskConfig)`. A task that
overrides `reduce_aggregated_logs` overrides `reduced_metric_names` too, so that `trainer.best_checkpoint_metric` is
checked at start-up (`eval_metric_names`), not at the first evaluation.

Long because: the contract above and the defaults every subclass inherits (inputs, global-batch losses, padding
weights, metrics, post-processing, the registry) are one page that task authors read together.
"""

from __future__ import annotations

import difflib
import logging
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Type

import keras
import tensorflow as tf

from official_albert import file_io
from official_albert import model_directory
from official_albert.checkpoints import loading
from official_albert.checkpoints import names
from official_albert.training.experiment_config import DataConfig
from official_albert.training.experiment_config import TaskConfig

logger = logging.getLogger(__name__)

ENCODER_INPUT_KEYS = ("input_word_ids", "input_mask", "input_type_ids")
VALID_KEY = "_valid"  # per-example weight: 0 for the padding rows of the last evaluation batch, else 1
EXAMPLES = "examples"  # the loss denominator of per-example losses
# Which of a task's inputs a DataConfig is: task.train_data, task.validation_data (or the training files it falls
# back to) or task.predict_data. Raw inputs read the role's split (`tasks.raw_inputs`).
ROLES = ("train", "eval", "predict")


def example_weights(labels: Any, like: tf.Tensor) -> tf.Tensor:
  """[B] float32 weights of the examples of a batch: `labels["_valid"]` when present, else ones like `like`[:, ...]."""
  if isinstance(labels, dict) and VALID_KEY in labels:
    return tf.cast(labels[VALID_KEY], tf.float32)
  return tf.ones(tf.shape(like)[:1], tf.float32)


def weighted_mean(values: tf.Tensor, weights: tf.Tensor, denominator: Optional[tf.Tensor] = None) -> tf.Tensor:
  """Σ weights·values / denominator (default Σ weights; 0 when it is 0), in float32."""
  values = tf.cast(values, tf.float32)
  total = tf.reduce_sum(values * tf.cast(weights, tf.float32))
  count = tf.reduce_sum(tf.cast(weights, tf.float32)) if denominator is None else denominator
  return tf.math.divide_no_nan(total, tf.cast(count, tf.float32))


def example_mean_loss(per_example: tf.Tensor, labels: Any, aux_losses=None, denominators=None) -> tf.Tensor:
  """A `build_losses` of per-example losses [B]: Σ over this replica's valid examples / the global batch's
  (`denominators[EXAMPLES]`; this batch's valid count without), plus the model's `aux_losses`."""
  loss = weighted_mean(per_example, example_weights(labels, per_example),
                       None if denominators is None else denominators[EXAMPLES])
  return loss + tf.add_n([tf.cast(a, tf.float32) for a in aux_losses]) if aux_losses else loss


class Task:
  """Base class of every training task.

  Attributes:
    config_cls: the TaskConfig subclass this task reads.
    name: the registered name (set by `register_task`).
    model_input_keys: feature keys passed to the model (the rest are labels/weights).
    best_metric: eval metric that selects `model.ckpt-best` ('' = none).
    best_metric_higher_is_better: direction of `best_metric`.
  """

  config_cls: Type[TaskConfig] = TaskConfig
  name: str = ""
  model_input_keys: Tuple[str, ...] = ENCODER_INPUT_KEYS
  best_metric: str = ""
  best_metric_higher_is_better: bool = True

  def __init__(self, params: TaskConfig, logging_dir: Optional[str] = None):
    if not isinstance(params, self.config_cls):
      raise TypeError(f"{type(self).__name__} needs a {self.config_cls.__name__}, got {type(params).__name__}.")
    self._params = params
    self._logging_dir = logging_dir

  @property
  def params(self) -> TaskConfig:
    return self._params

  @property
  def logging_dir(self) -> Optional[str]:
    """Where the task may write files during evaluation (SQuAD predictions); None = nowhere.

    The trainer sets it to None on every worker but the chief, so only one process writes.
    """
    return self._logging_dir

  @logging_dir.setter
  def logging_dir(self, value: Optional[str]) -> None:
    self._logging_dir = value

  # --------------------------------------------------------------------------------------------- building
  def build_model(self) -> keras.Model:
    """Creates the (unbuilt or built) Keras model. Called inside the strategy scope."""
    raise NotImplementedError

  def build_inputs(self, data_config: DataConfig, input_context: Optional[tf.distribute.InputContext] = None,
                   role: Optional[str] = None) -> tf.data.Dataset:
    """Returns the per-replica (or per-worker) batched dataset for `data_config`.

    With an `input_context` the dataset must be sharded for `input_context.input_pipeline_id` and batched with
    `input_context.get_per_replica_batch_size(data_config.global_batch_size)`. `role` is which of the task's inputs
    `data_config` is (`ROLES`; `input_role` resolves None): the caller knows it, the path does not tell it (one
    GLUE folder can be both the validation and the predict input, read as its dev and its test split).
    """
    raise NotImplementedError

  def loss_denominators(self, labels: Any) -> Dict[str, tf.Tensor]:
    """This batch's counts that normalise the loss terms (see the module docstring); default: valid examples."""
    first = tf.nest.flatten(labels)[0]
    return {EXAMPLES: tf.reduce_sum(example_weights(labels, first))}

  def build_losses(self, labels: Any, model_outputs: Dict[str, tf.Tensor],
                   aux_losses: Optional[Sequence[tf.Tensor]] = None,
                   denominators: Optional[Dict[str, tf.Tensor]] = None) -> tf.Tensor:
    """Scalar float32 loss: this batch's sums divided by `denominators` (global counts), else by its own counts."""
    raise NotImplementedError

  def build_metrics(self, training: bool = True) -> List[keras.metrics.Metric]:
    """Keras metrics, created inside the strategy scope."""
    return []

  def process_metrics(self, metrics: Sequence[keras.metrics.Metric], labels: Any,
                      model_outputs: Dict[str, tf.Tensor]) -> None:
    """Updates `metrics` from one replica's batch."""
    del metrics, labels, model_outputs

  def initialize(self, model: keras.Model) -> None:
    """Warm start from `params.init_checkpoint` (restores the encoder only; every encoder variable must match).

    Training resumes from `model_dir` checkpoints are handled by the train loop; this is only called when the run
    starts fresh.
    """
    path = getattr(self._params, "init_checkpoint", "")
    if not path:
      return
    encoder = getattr(model, "encoder", None)
    if encoder is None:
      raise ValueError(f"{type(model).__name__} has no .encoder attribute; cannot warm start from {path}.")
    restore_encoder(encoder, path)

  # ------------------------------------------------------------------------------------------- step helpers
  def split_inputs(self, inputs: Any) -> Tuple[Dict[str, tf.Tensor], Any]:
    """(features, labels) from a dict (both are the dict) or a (features, labels) tuple."""
    if isinstance(inputs, (tuple, list)):
      if len(inputs) != 2:
        raise ValueError(f"Expected (features, labels), got a sequence of {len(inputs)} items.")
      return inputs[0], inputs[1]
    return inputs, inputs

  def model_inputs(self, features: Dict[str, tf.Tensor]) -> Dict[str, tf.Tensor]:
    missing = [k for k in self.model_input_keys if k not in features]
    if missing:
      raise KeyError(f"{type(self).__name__}: the input batch lacks {missing}; it has {sorted(features)}.")
    return {k: features[k] for k in self.model_input_keys}

  def compute_gradients(self, inputs: Any, model: keras.Model, optimizer: Optional[keras.optimizers.Optimizer],
                        metrics: Sequence[keras.metrics.Metric],
                        denominators: Optional[Dict[str, tf.Tensor]] = None, share: float = 1.0,
                        aux_share: float = 1.0) -> Tuple[tf.Tensor, List[tf.Tensor]]:
    """One forward/backward pass; updates `metrics`.

    Args:
      inputs: one replica's batch (or one micro-batch of it).
      model: the task model.
      optimizer: used only for loss scaling (`keras.optimizers.LossScaleOptimizer`); may be None.
      metrics: from `build_metrics(training=True)`.
      denominators: the global counts (see the module docstring); None = this batch's own.
      share: factor on the task loss (1 with global denominators; 1/replicas for the reference's per-replica mean).
      aux_share: factor on the model's auxiliary losses (1/(replicas·micro-batches): they count once per step).

    Returns:
      (this pass's share of the loss, its gradients w.r.t. model.trainable_variables). With a LossScaleOptimizer
      the gradients are still multiplied by its current scale (`LossScaleOptimizer.apply` unscales them after the
      cross-replica sum).
    """
    features, labels = self.split_inputs(inputs)
    with tf.GradientTape() as tape:
      outputs = model(self.model_inputs(features), training=True)
      loss = tf.cast(self.build_losses(labels, outputs, denominators=denominators), tf.float32) * share
      if model.losses:
        loss += tf.add_n([tf.cast(aux, tf.float32) for aux in model.losses]) * aux_share
      scaled_loss = loss
      if isinstance(optimizer, keras.optimizers.LossScaleOptimizer):
        scaled_loss = optimizer.scale_loss(scaled_loss)
    tvars = model.trainable_variables
    grads = tape.gradient(scaled_loss, tvars)
    self.check_gradients(tvars, grads)
    self.process_metrics(metrics, labels, outputs)
    return loss, grads

  def check_gradients(self, tvars, grads) -> None:
    """Refuses a step in which a trainable variable got no gradient (a head or layer cut off from the loss)."""
    missing = [v.path for v, g in zip(tvars, grads) if g is None]
    if missing:
      raise ValueError(f"{type(self).__name__}: no gradient for trainable variables {missing[:5]}"
                       f"{' ...' if len(missing) > 5 else ''}.")

  def validation_step(self, inputs: Any, model: keras.Model,
                      metrics: Sequence[keras.metrics.Metric]) -> Dict[str, Any]:
    """Forward pass in inference mode; updates `metrics`. Returns the per-example `eval_outputs`."""
    features, labels = self.split_inputs(inputs)
    outputs = model(self.model_inputs(features), training=False)
    self.process_metrics(metrics, labels, outputs)
    return dict(self.eval_outputs(features, labels, outputs))

  def eval_outputs(self, features: Dict[str, tf.Tensor], labels: Any,
                   outputs: Dict[str, tf.Tensor]) -> Dict[str, tf.Tensor]:
    """Per-example tensors to hand to `aggregate_logs` (e.g. logits + labels for MCC). Default: none."""
    del features, labels, outputs
    return {}

  def inference_step(self, inputs: Any, model: keras.Model) -> Dict[str, tf.Tensor]:
    features, _ = self.split_inputs(inputs)
    return model(self.model_inputs(features), training=False)

  # ------------------------------------------------------------------------------- whole-dataset metrics
  def aggregate_logs(self, state: Any, step_outputs: Dict[str, Any]) -> Any:
    """Folds one eval step's outputs into `state` (None at the start).

    `step_outputs` holds numpy arrays of the real examples of one global batch, in stream order (the trainer gathers
    them from every replica and worker and drops the padding rows). Default: collects every key into lists.
    """
    if state is None:
      state = {}
    for key, value in step_outputs.items():
      if key == "loss":
        continue
      state.setdefault(key, []).append(value)
    return state

  def check_eval_settings(self, trainer_config) -> None:
    """Raises a ConfigError, naming the key and the fix, when `trainer_config` (the `trainer` section) cannot
    evaluate this task's validation input (checked at start-up; e.g. a retrieval set that must be read whole)."""
    del trainer_config

  def evaluation_input(self, data_config) -> str:
    """What an evaluation of `data_config` scores, as `model.ckpt-best` records it (`evaluation.chosen_on`): its
    input_path, unless one path holds several evaluations (a retrieval folder's splits)."""
    return data_config.input_path

  def reduce_aggregated_logs(self, aggregated_logs: Any, global_step: Optional[int] = None) -> Dict[str, float]:
    """Metrics that need every prediction at once (e.g. MCC, SQuAD F1). Default: none."""
    del aggregated_logs, global_step
    return {}

  def reduced_metric_names(self) -> Optional[List[str]]:
    """The keys `reduce_aggregated_logs` returns under this config, known before any evaluation so that a
    `trainer.best_checkpoint_metric` typo fails at start-up, not hours in (None: unknown until one has run)."""
    return []

  def eval_metric_names(self, metrics: Optional[Sequence[keras.metrics.Metric]] = None) -> Optional[List[str]]:
    """What an evaluation reports besides the trainer's `global_step` / `eval_steps` (`train_lib.check_eval_settings`
    reads it): the Keras metrics (`metrics`, default `build_metrics(training=False)`) and `reduced_metric_names()`.
    None when the task cannot tell: its names are None, or stale (`reduce_aggregated_logs` overridden below them)."""
    names = self.reduced_metric_names()
    if names is None or not stated_with(type(self), "reduced_metric_names", "reduce_aggregated_logs"):
      return None
    metrics = self.build_metrics(training=False) if metrics is None else metrics
    return sorted({m.name for m in metrics} | set(names))

  # ------------------------------------------------------------------------------------- --mode=predict
  def predict_outputs(self, features: Dict[str, tf.Tensor], outputs: Dict[str, tf.Tensor]) -> Dict[str, tf.Tensor]:
    """Per-example tensors that `--mode=predict` collects (via `aggregate_logs`) for `write_prediction_files`."""
    del features, outputs
    raise NotImplementedError(f"Task {self.name or type(self).__name__!r} does not support --mode=predict.")

  def write_prediction_files(self, aggregated_logs: Any, output_dir: str) -> Dict[str, str]:
    """Writes the task's prediction files into `output_dir` (atomically); returns {kind: path}."""
    del aggregated_logs, output_dir
    raise NotImplementedError(f"Task {self.name or type(self).__name__!r} does not support --mode=predict.")

  def predict(self, model: keras.Model, dataset: tf.data.Dataset) -> List[Dict[str, Any]]:
    """Runs `inference_step` over `dataset` and returns the outputs as numpy, one dict per batch."""
    step = tf.function(lambda batch: self.inference_step(batch, model), reduce_retracing=True, autograph=False)
    return [tf.nest.map_structure(lambda t: t.numpy(), step(batch)) for batch in dataset]


def stated_with(cls: type, names_method: str, method: str) -> bool:
  """Whether `cls`'s `names_method` (which states `method`'s keys) is defined where `method` is, or below it."""
  owner = lambda name: next(k for k in cls.__mro__ if name in vars(k))  # noqa: E731
  return issubclass(owner(names_method), owner(method))


def input_role(data_config: DataConfig, role: Optional[str] = None) -> str:
  """`role` checked against `ROLES`; None: "train" for a training config (`is_training`), else "eval"."""
  if role is None:
    return "train" if data_config.is_training else "eval"
  if role not in ROLES:
    raise ValueError(f"role={role!r} is not one of {ROLES}.")
  return role


# ------------------------------------------------------------------------------------------- warm start


def init_checkpoint_format(path: str) -> str:
  """"native" (an object-based TF checkpoint, ours), "hf" (a Hugging Face directory) or "tf1" (the original release:
  a directory with albert_config.json, or a name-based checkpoint prefix)."""
  if file_io.isdir(path):
    found = model_directory.detect_format(path) if model_directory.model_config_file(path) else "native"
    if found != "native":
      return found
  prefix = model_directory.resolve_checkpoint(path, "init_checkpoint")
  object_based = any(name == "_CHECKPOINTABLE_OBJECT_GRAPH" for name, _ in tf.train.list_variables(prefix))
  return "native" if object_based else "tf1"


def restore_encoder(encoder: keras.Model, path: str) -> str:
  """Restores `encoder` from a native, Hugging Face or original-release (TF1) checkpoint.

  Args:
    encoder: a built AlbertEncoder.
    path: a model directory (native, HF or TF1) or a checkpoint prefix (native: `tf.train.Checkpoint(model=...)`;
      TF1: name-based).

  Returns:
    What was read (the checkpoint prefix, or the HF weights file).

  Raises:
    ValueError: if any encoder variable is missing from the checkpoint (no silent partial load, reference §8 #9).
  """
  if not encoder.built or not encoder.variables:
    raise ValueError("restore_encoder needs a built encoder (call the model once first).")
  input_format = init_checkpoint_format(path)
  if input_format != "native":
    loaded, summary = loading.load_model_from(input_format, path, None, "encoder", None, 4, (), ())
    source, target = names.encoder_variable_map(loaded), names.encoder_variable_map(encoder)
    for name, variable in target.items():
      if tuple(variable.shape) != tuple(source[name].shape):
        raise ValueError(f"init_checkpoint {path}: {name} has shape {tuple(source[name].shape)} there, "
                         f"{tuple(variable.shape)} in this model.")
      variable.assign(source[name])
    logger.info("Warm-started %d encoder variables from %s (%s).", len(target), summary["source"], input_format)
    return summary["source"]
  prefix = model_directory.resolve_checkpoint(path, "init_checkpoint")
  reader = tf.train.Checkpoint(model=tf.train.Checkpoint(encoder=encoder))
  status = reader.read(prefix)
  try:
    status.assert_existing_objects_matched()
  except AssertionError as e:
    raise ValueError(f"init_checkpoint {prefix}: encoder variables not found in the checkpoint: {e}") from None
  status.expect_partial()  # The pretraining heads and optimizer slots in the checkpoint are not needed here.
  logger.info("Warm-started %d encoder variables from %s.", len(encoder.variables), prefix)
  return prefix


# ----------------------------------------------------------------------------------------------- registry
_TASKS: Dict[str, Type[Task]] = {}
_TASKS_BY_CONFIG: Dict[type, Type[Task]] = {}


def register_task(name: str, config_cls: Optional[Type[TaskConfig]] = None) -> Callable[[Type[Task]], Type[Task]]:
  """Class decorator: registers a Task under `name` (and under its config class)."""

  def decorator(cls: Type[Task]) -> Type[Task]:
    if name in _TASKS and _TASKS[name] is not cls:
      raise ValueError(f"Task name {name!r} is already registered to {_TASKS[name].__name__}.")
    cls.name = name
    if config_cls is not None:
      cls.config_cls = config_cls
    _TASKS[name] = cls
    _TASKS_BY_CONFIG[cls.config_cls] = cls
    return cls

  return decorator


def get_task(name: str) -> Type[Task]:
  """The Task class registered as `name`; unknown names raise with the known ones."""
  if name not in _TASKS:
    close = difflib.get_close_matches(name, sorted(_TASKS), n=1)
    hint = f" Did you mean {close[0]!r}?" if close else ""
    raise ValueError(f"Unknown task {name!r}.{hint} Registered tasks: {', '.join(sorted(_TASKS)) or '(none)'}.")
  return _TASKS[name]


def get_task_for_config(params: TaskConfig) -> Type[Task]:
  """The Task class registered for type(params) (or its nearest registered base)."""
  for klass in type(params).__mro__:
    if klass in _TASKS_BY_CONFIG and klass is not TaskConfig:
      return _TASKS_BY_CONFIG[klass]
  raise ValueError(f"No task is registered for config class {type(params).__name__}. "
                   f"Registered tasks: {', '.join(sorted(_TASKS)) or '(none)'}.")


def create_task(params: TaskConfig, logging_dir: Optional[str] = None) -> Task:
  """Instantiates the task registered for `params`."""
  return get_task_for_config(params)(params, logging_dir=logging_dir)
