"""The experiment configs: `ExperimentConfig(task, trainer, runtime)` and the model, data and task sections.

Configs are `hyperparams.Config` dataclasses (checked overrides, YAML round trips). `task.model` holds every
`AlbertConfig` field plus `preset`: setting `preset` first loads that preset's values, then the other keys of the
same override are applied on top (a fine-tuning recipe's model keeps its dropout, `RECIPE_MODEL_FIELDS`). The
effective config is written to `<model_dir>/params.yaml`, its first line a comment naming the experiment it was built
from (`# experiment: NAME`); reading the file back under another `--experiment` is refused, naming both (a comment,
not a key: older code still loads the file).

Task-specific configs subclass `TaskConfig` / `DataConfig` (see the tasks in `tasks/`).

Long because: the sections of one experiment config (model, data, task, trainer, runtime) and its params.yaml record
are one schema, read and checked together.
"""

from __future__ import annotations

import copy
import dataclasses
import logging
import math
import re
import typing
from typing import Any, Dict, List, Optional

from official_albert import file_io
from official_albert import model_directory
from official_albert.config import AlbertConfig
from official_albert.params_file import EXPERIMENT_LINE  # noqa: F401  (the names this module has always offered)
from official_albert.params_file import recorded_experiment
from official_albert.training import distribute
from official_albert.training import optimization
from official_albert.training.hyperparams import Config
from official_albert.training.hyperparams import ConfigError
from official_albert.training.hyperparams import ConfigFile
from official_albert.training.hyperparams import override

logger = logging.getLogger(__name__)


# ----------------------------------------------------------------------------------------------- model config
def _model_config_fields():
  hints = typing.get_type_hints(AlbertConfig)
  fields = [("preset", str, dataclasses.field(default=""))]
  for f in dataclasses.fields(AlbertConfig):
    if f.default is not dataclasses.MISSING:
      default = dataclasses.field(default=f.default)
    else:
      default = dataclasses.field(default_factory=f.default_factory)
    fields.append((f.name, hints[f.name], default))
  return fields


def _model_to_albert_config(self) -> AlbertConfig:
  """The validated `AlbertConfig` these fields describe."""
  values = {f.name: copy.deepcopy(getattr(self, f.name)) for f in dataclasses.fields(AlbertConfig)}
  try:
    return AlbertConfig(**values)
  except ValueError as e:
    raise ConfigError(f"task.model: {e}") from None


def _model_validate(self) -> None:
  self.to_albert_config()


def _model_from_albert_config(cls, albert_config: AlbertConfig, preset: str = ""):
  return cls(preset=preset, **copy.deepcopy(albert_config.to_dict()))


def _model_from_preset(cls, name: str, **changes):
  return cls.from_albert_config(AlbertConfig.from_preset(name, **changes), preset=name)


# The model fields a fine-tuning recipe chooses for itself (dropout, the new head's initializer; the same names as
# `model_source.TRAINING_FIELDS`, which an init_checkpoint never overrides): a preset set on a fine-tuning experiment
# leaves them at the recipe's (or at the value a key sets, before or after the preset).
RECIPE_MODEL_FIELDS = ("hidden_dropout_prob", "attention_probs_dropout_prob", "classifier_dropout_prob",
                       "initializer_range")


def _model_apply_preset(self, preset: Any, prefix: str = "") -> None:
  """Every model field from the named preset (None or '' keeps the fields and clears the name), except the
  `recipe_fields` (a fine-tuning recipe's `RECIPE_MODEL_FIELDS`): `task.model.preset=albert-large-v2` on glue/qqp
  reset Table 14's ALBERT dropout 0.1 to the preset's 0 without a word. A kept value the preset differs on is logged."""
  if preset:
    try:
      base = AlbertConfig.from_preset(str(preset))
    except ValueError as e:
      raise ConfigError(f"{prefix}preset: {e}") from None
    for name, value in base.to_dict().items():
      if name not in self.recipe_fields:
        setattr(self, name, value)
      elif getattr(self, name) != value:
        logger.info("%spreset=%s keeps the recipe's %s=%s (the preset has %s; set %s%s to choose).", prefix, preset,
                    name, getattr(self, name), value, prefix, name)
  self.preset = "" if preset is None else str(preset)


def _model_keep_recipe_fields(self):
  """This config, its `RECIPE_MODEL_FIELDS` kept by a preset (`apply_preset`): a fine-tuning recipe's model."""
  self.recipe_fields = RECIPE_MODEL_FIELDS
  return self


# Generated from AlbertConfig so that new model fields appear here without a second list to keep in sync.
ModelConfig = dataclasses.make_dataclass(
    "ModelConfig", _model_config_fields(), bases=(Config,),
    namespace={
        "__doc__": "`AlbertConfig` fields plus `preset` (a name for `AlbertConfig.from_preset`, or '').",
        "__module__": __name__,
        "to_albert_config": _model_to_albert_config,
        "validate": _model_validate,
        "from_albert_config": classmethod(_model_from_albert_config),
        "from_preset": classmethod(_model_from_preset),
        "apply_preset": _model_apply_preset,
        "keep_recipe_fields": _model_keep_recipe_fields,
        "recipe_fields": (),  # (a class attribute, not a field: params.yaml does not record it)
    })
ModelConfig.__module__ = __name__


# ------------------------------------------------------------------------------------------------ data / task
@dataclasses.dataclass
class DataConfig(Config):
  """Input pipeline settings shared by every task.

  Attributes:
    input_path: file pattern(s), comma separated, local or gs://.
    global_batch_size: batch over all replicas (each replica gets global / num_replicas).
    is_training: shuffle and repeat.
    seq_length: tokens per sequence (must match the TFRecords).
    drop_remainder: keep static batch shapes (needed on TPU and for XLA).
    shuffle_buffer_size: tf.data shuffle buffer (reference: 100 for pretraining).
    seed: shuffling seed; None → the runtime seed.
    pad_to_multiple_of: dynamic padding — cut each batch to its longest sequence rounded up to this multiple
      (0 = off: every batch is seq_length long, as the reference). Outputs at real tokens are unchanged; short
      fine-tuning sentences run several times faster. Not for SQuAD (its span logits are position-aligned), and
      refused for a block_sparse model (`TaskConfig.validate`: its outputs follow the padded length).
    length_bucket_window: training only — sort each window of this many batches by length before batching
      (0/1 = off, the reference's i.i.d. batches); combine with pad_to_multiple_of.
  """
  input_path: str = ""
  global_batch_size: int = 32
  is_training: bool = True
  seq_length: int = 128
  drop_remainder: bool = True
  shuffle_buffer_size: int = 100
  seed: Optional[int] = None
  pad_to_multiple_of: int = 0
  length_bucket_window: int = 0

  def validate(self) -> None:
    if self.global_batch_size <= 0:
      raise ConfigError(f"global_batch_size must be > 0, got {self.global_batch_size}.")
    if self.seq_length <= 0:
      raise ConfigError(f"seq_length must be > 0, got {self.seq_length}.")
    if self.pad_to_multiple_of < 0:
      raise ConfigError(f"pad_to_multiple_of must be >= 0 (0 = off), got {self.pad_to_multiple_of}.")
    if self.length_bucket_window < 0:
      raise ConfigError(f"length_bucket_window must be >= 0 (0 = off), got {self.length_bucket_window}.")
    if self.length_bucket_window > 1 and not self.is_training:
      raise ConfigError("length_bucket_window reorders examples: set it on training data only.")
    if self.is_training and self.shuffle_buffer_size < 1:  # (-2, tf.data's UNKNOWN, buffered forever: bad_alloc)
      raise ConfigError(f"shuffle_buffer_size must be >= 1 on training data (1 = no shuffling), got "
                        f"{self.shuffle_buffer_size}.")

  def padding_options(self) -> Dict[str, int]:
    """The dynamic padding / length bucketing keywords of `input_pipeline.make_dataset` for this config."""
    return {"pad_to_multiple_of": self.pad_to_multiple_of, "length_bucket_window": self.length_bucket_window}


# The training shuffle buffer of the fine-tuning recipes: the whole training set up to this many records (their
# records are written in a seeded random order, so a larger set needs no larger buffer). Pretraining keeps the
# reference's 100 (its records are shuffled by the data tool).
FINETUNING_SHUFFLE_BUFFER = 10000


def eval_data_config(global_batch_size: int = 8, seq_length: int = 512) -> DataConfig:
  """An evaluation/prediction DataConfig: every record once, in order (no drop_remainder)."""
  return DataConfig(global_batch_size=global_batch_size, seq_length=seq_length, is_training=False,
                    drop_remainder=False)


@dataclasses.dataclass
class TaskConfig(Config):
  """Base task config: the model, the data and a warm-start checkpoint.

  Attributes:
    model: AlbertConfig fields + `preset`. The train binary takes them from `init_checkpoint` (training) or from
      model_dir (eval, predict) unless they are set explicitly (`official_albert.training.model_source`).
    init_checkpoint: a native, Hugging Face or original-release (TF1) model directory, or a checkpoint prefix (native
      `tf.train.Checkpoint(model=pretrainer)` or TF1); its encoder initialises this task's encoder. '' = random init.
    train_data / validation_data: input configs.
  """
  model: ModelConfig = dataclasses.field(default_factory=ModelConfig)
  init_checkpoint: str = ""
  train_data: DataConfig = dataclasses.field(default_factory=DataConfig)
  validation_data: DataConfig = dataclasses.field(
      default_factory=lambda: DataConfig(is_training=False, drop_remainder=False))

  def validate(self) -> None:
    """Also refuses dynamic padding for a block_sparse model: its attention pattern (the dense fallback below
    (5 + 2·num_random_blocks)·block_size tokens, the random blocks, the last global block) follows the padded length,
    so cutting a batch to its longest sequence changes the outputs at real tokens (evaluation metrics would depend on
    the batch's other examples, and predictions would disagree with the export, which runs at seq_length)."""
    super().validate()
    train = getattr(self, "train_data", None)
    if isinstance(train, DataConfig) and not train.is_training:
      raise ConfigError(
          "task.train_data.is_training=false: training reads its split shuffled and repeated (a single ordered pass "
          "ran out of data mid-run with a bare End of sequence error); remove the key, and for an unshuffled order "
          "set task.train_data.shuffle_buffer_size=1.")
    if getattr(self.model, "attention_type", "dense") != "block_sparse":
      return
    for field in dataclasses.fields(self):
      data = getattr(self, field.name)
      if isinstance(data, DataConfig) and data.pad_to_multiple_of:
        raise ConfigError(
            f"task.{field.name}.pad_to_multiple_of={data.pad_to_multiple_of} with task.model.attention_type="
            "block_sparse: block-sparse attention's pattern follows the padded length, so dynamic padding changes "
            f"the outputs at real tokens; set task.{field.name}.pad_to_multiple_of=0 (every batch at seq_length; "
            "length_bucket_window alone then changes nothing either), or use attention_type=dense.")


# ----------------------------------------------------------------------------------------- trainer / runtime
DISTRIBUTION_STRATEGIES = ("",) + distribute.STRATEGY_NAMES  # '' = auto
LOSS_NORMALIZATIONS = ("global_batch", "per_replica")
INPUT_RESUME_MODES = ("auto", "iterator", "skip")
PRECISIONS = ("", "float32", "mixed_float16", "mixed_bfloat16")
BEST_CHECKPOINT_MODES = ("auto", "max", "min")


def loss_like_metric(name: str) -> bool:
  """Whether the eval metric `name` reads as a loss (lower is better): it contains "loss" or ends in "mse",
  case-insensitively (`loss`, `eval_loss`, `masked_lm_loss`, STS-B's `MSE` / `mse`, `rmse`)."""
  lowered = name.lower()
  return "loss" in lowered or lowered.endswith("mse")


def best_checkpoint_higher_is_better(metric: str, mode: str) -> bool:
  """The direction `trainer.best_checkpoint_mode` gives `trainer.best_checkpoint_metric=metric`: max / min as
  written; auto (the default) min for a loss-like name (`loss_like_metric`), max otherwise. A default of max kept
  the worst checkpoint (the highest loss) for `best_checkpoint_metric=eval_loss`."""
  if mode == "auto":
    return not loss_like_metric(metric)
  return mode == "max"


@dataclasses.dataclass
class TrainerConfig(Config):
  """The training loop and optimizer (reference §4.1, §4.4–4.7).

  Attributes:
    train_steps: total optimizer steps (the LR decays to 0 here).
    steps_per_loop: steps run inside one `tf.function` call (reference `iterations_per_loop`).
    checkpoint_interval: save every N steps (rounded up to a loop boundary).
    max_to_keep: checkpoints kept by the CheckpointManager.
    validation_steps: eval batches (-1 = the whole validation set, which must then be finite).
    validation_interval: train_and_eval evaluates every N steps.
    summary_interval: `train/` TensorBoard scalars every N steps (rounded to a loop boundary); each point covers
      every step since the previous one (means of loss, metrics and global norm; the learning rate its last step
      applied; examples/s without a run's first step, logged as first_step_seconds).
    optimizer: lamb | adamw.
    learning_rate / warmup_steps / start_warmup_step / poly_power: the reference schedule (§4.4).
    weight_decay_rate, beta_1, beta_2, epsilon: optimizer constants (§4.6).
    exclude_from_weight_decay: regexes on full variable paths that get no decay and no trust ratio.
    clip_norm: global-norm clip (1.0 in the reference; <= 0 disables).
    gradient_accumulation_steps: micro-batches per optimizer step (1 = off).
    loss_normalization: global_batch (default: every loss is a mean over the whole global batch — summed counts of
      all replicas, workers and micro-batches — so any number of replicas trains the same model) | per_replica (the
      reference on TPU: each core normalises by its own batch and the cores' losses are averaged).
    best_checkpoint_metric: eval metric tracked for `model.ckpt-best` ('' = the task's default).
    best_checkpoint_mode: auto | max | min: whether a higher or a lower best_checkpoint_metric is better. auto
      (the default): min for a loss-like name (containing "loss" or ending in "mse", case-insensitive: eval_loss,
      loss, MSE), max for any other; set min for another lower-is-better metric. An explicit max is kept as written
      (params.yaml files of earlier runs record max), with a warning at start-up for a loss-like name. Unused when
      best_checkpoint_metric is '' (the task's default metric has its own direction).
    eval_at_start: train_and_eval also evaluates the step-0 model of a fresh run (curves start at 0).
    rates_by_model_size: a learning rate / warm-up the run does not set are chosen from the model's hidden size and
      train_steps (`training.finetuning_rates`; the fine-tuning experiments).
    paper_recipe: the learning rate and warm-up are the paper's per-task recipe (GLUE, SQuAD, RACE), tuned for the
      released sizes: a model of one of those shapes (albert-base … xxlarge) keeps them; with rates_by_model_size
      any other model (one's own small one) gets the size-based ones.
  """
  train_steps: int = 1000
  steps_per_loop: int = 100
  checkpoint_interval: int = 1000
  max_to_keep: int = 5
  validation_steps: int = 100
  validation_interval: int = 1000
  summary_interval: int = 100
  optimizer: str = "lamb"
  learning_rate: float = 0.00176
  warmup_steps: int = 0
  start_warmup_step: int = 0
  poly_power: float = 1.0
  weight_decay_rate: float = 0.01
  beta_1: float = 0.9
  beta_2: float = 0.999
  epsilon: float = 1e-6
  exclude_from_weight_decay: List[str] = dataclasses.field(
      default_factory=lambda: list(optimization.DEFAULT_EXCLUDE_FROM_WEIGHT_DECAY))
  clip_norm: float = 1.0
  gradient_accumulation_steps: int = 1
  loss_normalization: str = "global_batch"
  best_checkpoint_metric: str = ""
  best_checkpoint_mode: str = "auto"
  eval_at_start: bool = False
  rates_by_model_size: bool = False
  paper_recipe: bool = False

  def validate(self) -> None:
    if self.optimizer not in optimization.OPTIMIZER_NAMES:
      raise ConfigError(f"trainer.optimizer={self.optimizer!r} is not one of {optimization.OPTIMIZER_NAMES}.")
    for name in ("train_steps", "steps_per_loop", "checkpoint_interval", "validation_interval",
                 "summary_interval", "gradient_accumulation_steps", "max_to_keep"):
      if getattr(self, name) <= 0:
        raise ConfigError(f"trainer.{name} must be > 0, got {getattr(self, name)}.")
    if self.validation_steps == 0 or self.validation_steps < -1:
      raise ConfigError(f"trainer.validation_steps must be > 0 or -1, got {self.validation_steps}.")
    if self.warmup_steps < 0 or self.start_warmup_step < 0:
      raise ConfigError("trainer.warmup_steps and trainer.start_warmup_step must be >= 0.")
    if self.warmup_steps > 0 and self.start_warmup_step >= self.train_steps:
      raise ConfigError(f"trainer.start_warmup_step={self.start_warmup_step} >= trainer.train_steps="
                        f"{self.train_steps}: the warmup would start after the run ends, so the learning rate would "
                        "be 0 (or negative) at every step and no weight would change; lower start_warmup_step.")
    self._validate_optimizer_numbers()
    for i, pattern in enumerate(self.exclude_from_weight_decay):
      try:  # else the optimizer's re.compile failed at build time with a traceback naming no key
        re.compile(pattern)
      except re.error as e:
        raise ConfigError(f"trainer.exclude_from_weight_decay[{i}]={pattern!r} is not a regular expression ({e}); "
                          "write a Python regex matched against variable paths (e.g. LayerNorm, bias).") from None
    if self.best_checkpoint_mode not in BEST_CHECKPOINT_MODES:
      raise ConfigError(f"trainer.best_checkpoint_mode={self.best_checkpoint_mode!r} is not one of "
                        f"{BEST_CHECKPOINT_MODES} (auto: min for a loss-like best_checkpoint_metric, else max).")
    if self.loss_normalization not in LOSS_NORMALIZATIONS:
      raise ConfigError(f"trainer.loss_normalization={self.loss_normalization!r} is not one of "
                        f"{LOSS_NORMALIZATIONS}.")

  # (key, the range it must be in, the test): a negative, NaN or infinite learning rate trained without a word (a
  # negative one uphill, to a loss above the start), and so did a beta >= 1, a negative epsilon or decay.
  OPTIMIZER_RANGES = (
      ("learning_rate", "finite and >= 0 (0 freezes the weights)", lambda v: math.isfinite(v) and v >= 0),
      ("beta_1", "in [0, 1)", lambda v: 0 <= v < 1),
      ("beta_2", "in [0, 1)", lambda v: 0 <= v < 1),
      ("epsilon", "finite and > 0", lambda v: math.isfinite(v) and v > 0),
      ("weight_decay_rate", "finite and >= 0 (0 = no decay)", lambda v: math.isfinite(v) and v >= 0),
      ("poly_power", "finite and > 0", lambda v: math.isfinite(v) and v > 0),
      ("clip_norm", "finite, or <= 0 to disable clipping", lambda v: math.isfinite(v) or v < 0),
  )

  def _validate_optimizer_numbers(self) -> None:
    """Range-checks the optimizer and schedule constants (`OPTIMIZER_RANGES`); a NaN fails every test."""
    for name, wanted, ok in self.OPTIMIZER_RANGES:
      value = getattr(self, name)
      if not ok(value):
        raise ConfigError(f"trainer.{name} must be {wanted}, got {value}.")


@dataclasses.dataclass
class RuntimeConfig(Config):
  """Where and how the computation runs.

  Attributes:
    distribution_strategy: '' (auto: tpu if `tpu` is set, else mirrored over >1 GPU, else one_device) or one of
      off (the default strategy) | one_device | mirrored | multi_worker_mirrored | tpu.
    tpu: TPU name/address for `TPUClusterResolver` ('local' on a TPU VM).
    num_gpus: GPUs to use with mirrored (-1 = all visible).
    num_cpu_devices: > 1 splits the host CPU into this many logical devices and runs MirroredStrategy over them
      (multi-replica training on a laptop, and the tests); 0 = the devices as they are.
    all_reduce_alg: the gradient all-reduce: auto | ring | nccl (multi_worker_mirrored: the collective
      implementation; mirrored: nccl = NcclAllReduce) | hierarchical_copy | reduction_to_one_device (mirrored).
    mixed_precision_dtype: '' (auto: mixed_bfloat16 on TPU, else float32) | float32 | mixed_float16 (dynamic loss
      scaling) | mixed_bfloat16.
    jit_compile: XLA-compile the per-replica forward/backward and evaluation steps (the all-reduce and the optimizer
      update run outside XLA, so any number of replicas works).
    enable_op_determinism: `tf.config.experimental.enable_op_determinism()` (bit-exact reruns; slower).
    seed: global seed for weights init, dropout and shuffling.
    input_resume: how a restarted run finds its place in the training data: auto | iterator (checkpoint each
      worker's tf.data iterator) | skip (rebuild the stream and skip the global batches already consumed; what
      auto picks on TPU and with tf.data service, whose iterators cannot be checkpointed).
    tf_data_service_address: '' or a tf.data service dispatcher (`grpc://host:port`) that produces the training
      stream for every worker (for input-bound jobs).
  """
  distribution_strategy: str = ""
  tpu: str = ""
  num_gpus: int = -1
  num_cpu_devices: int = 0
  all_reduce_alg: str = "auto"
  mixed_precision_dtype: str = "float32"
  jit_compile: bool = False
  enable_op_determinism: bool = False
  seed: int = 42
  input_resume: str = "auto"
  tf_data_service_address: str = ""

  def validate(self) -> None:
    if self.distribution_strategy not in DISTRIBUTION_STRATEGIES:
      raise ConfigError(f"runtime.distribution_strategy={self.distribution_strategy!r} is not one of "
                        f"{DISTRIBUTION_STRATEGIES[1:]} (or '' for auto).")
    if self.mixed_precision_dtype not in PRECISIONS:
      raise ConfigError(f"runtime.mixed_precision_dtype={self.mixed_precision_dtype!r} is not one of {PRECISIONS}.")
    if self.input_resume not in INPUT_RESUME_MODES:
      raise ConfigError(f"runtime.input_resume={self.input_resume!r} is not one of {INPUT_RESUME_MODES}.")
    if self.all_reduce_alg not in distribute.ALL_REDUCE_ALGORITHMS:
      raise ConfigError(f"runtime.all_reduce_alg={self.all_reduce_alg!r} is not one of "
                        f"{distribute.ALL_REDUCE_ALGORITHMS}.")
    if self.num_cpu_devices < 0 or self.num_cpu_devices == 1:
      raise ConfigError(f"runtime.num_cpu_devices must be 0 (off) or >= 2, got {self.num_cpu_devices}.")
    if self.tpu and self.distribution_strategy not in ("", "tpu"):
      raise ConfigError(f"runtime.tpu={self.tpu!r} is set but runtime.distribution_strategy="
                        f"{self.distribution_strategy!r}: that strategy never uses the TPU. Set "
                        "runtime.distribution_strategy=tpu (or ''), or runtime.tpu='' to run without it.")
    if self.num_cpu_devices and self.distribution_strategy not in ("", "mirrored"):
      raise ConfigError(f"runtime.num_cpu_devices={self.num_cpu_devices} runs MirroredStrategy over logical CPUs; "
                        f"it cannot be combined with distribution_strategy={self.distribution_strategy!r}.")


@dataclasses.dataclass
class ExperimentConfig(Config):
  """task + trainer + runtime. `task` holds the registered task's own TaskConfig subclass.

  `experiment_name` (set by the train binary, kept by `override`'s copies) is the registered experiment the config
  was built from, '' when not known: no field, so that params.yaml records it as a comment (`save_params_yaml`).
  """
  task: TaskConfig = dataclasses.field(default_factory=TaskConfig)
  trainer: TrainerConfig = dataclasses.field(default_factory=TrainerConfig)
  runtime: RuntimeConfig = dataclasses.field(default_factory=RuntimeConfig)
  experiment_name = ""  # no annotation: a class attribute, not a dataclass field


# ---------------------------------------------------------------------------------------------------- io


def save_params_yaml(params: Config, model_dir: str, filename: str = model_directory.PARAMS_FILE) -> str:
  """Writes the effective config to `<model_dir>/params.yaml` atomically; returns the path.

  An empty `model_dir` is refused: `''.rstrip('/') + '/params.yaml'` is `/params.yaml`, the file system root. The
  first line names the experiment (`# experiment: NAME`) when the config knows it: one experiment's config can load
  silently under another (text_regression's under text_classification: a classifier over the distinct scores).
  """
  if not str(model_dir).strip():
    raise ValueError(f"model_dir={model_dir!r} is empty: params.yaml would go to the file system root. Name the "
                     "run's directory.")
  path = f"{model_dir.rstrip('/')}/{filename}"
  name = getattr(params, "experiment_name", "")
  file_io.atomic_write_text(path, (f"# experiment: {name}\n" if name else "") + params.to_yaml())
  return path


def check_recorded_experiment(path: str, experiment: str) -> None:
  """Raises ConfigError naming both when the config file at `path` records another experiment than `experiment`."""
  recorded = recorded_experiment(path)
  if recorded and experiment and recorded != experiment:
    raise ConfigError(f"{path} is the config of experiment {recorded!r} (its '# experiment: {recorded}' line), not "
                      f"of --experiment={experiment}: its settings would build another task's model. Rerun it with "
                      f"--experiment={recorded}, or delete that line to use the settings under {experiment}.")


def load_params_yaml(base: Config, path: str, is_strict: bool = True) -> Config:
  """`base` overridden by the YAML file at `path` (the inverse of `save_params_yaml` given the same base type); a
  file recording another experiment than `base` knows is refused (`check_recorded_experiment`)."""
  if not file_io.exists(path):
    raise FileNotFoundError(f"Config file not found: {path}")
  check_recorded_experiment(path, getattr(base, "experiment_name", ""))
  return override(base, ConfigFile(path), is_strict=is_strict)
