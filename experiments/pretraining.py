"""Registered pretraining experiments: the paper recipe for every v2 size, and a tiny CPU one.

Paper / README recipe (reference §4.1, §7.5): batch 4096, seq 512, 20 predictions per sequence, LAMB lr 0.00176,
125k steps, 3125 warmup, checkpoint every 5000 steps (keep 5), 1000 iterations per loop, eval batch 64 for 100
steps; mixed_bfloat16 on TPU. Data paths are left empty: set `task.train_data.input_path` (and optionally
`task.validation_data.input_path`; evaluation falls back to the training files like the reference).

`*_pretrain_dynamic`: the same recipes fed by the on-the-fly pipeline (`task.train_data.dynamic_masking=true`,
`tasks.pretraining_dynamic`): input_path is a tokenized corpus (`python -m data_prep.tokenize_corpus`,
`<dir>/tokens-*`), new n-gram masks and segments every epoch, nothing but the tokens on disk. Examples of one
document come out together, so the example shuffle buffer is larger (10000) than the reference's 100.
"""

from __future__ import annotations

from experiments.registry import register_experiment
from official_albert.training.experiment_config import ExperimentConfig
from official_albert.training.experiment_config import ModelConfig
from official_albert.training.experiment_config import RuntimeConfig
from official_albert.training.experiment_config import TrainerConfig
from tasks.pretraining import PretrainingDataConfig
from tasks.pretraining import PretrainingTaskConfig

PAPER_TRAINER = dict(train_steps=125000, warmup_steps=3125, learning_rate=0.00176, optimizer="lamb",
                     checkpoint_interval=5000, max_to_keep=5, steps_per_loop=1000, summary_interval=1000,
                     validation_steps=100, validation_interval=5000, clip_norm=1.0, weight_decay_rate=0.01)


def paper_pretraining(preset: str) -> ExperimentConfig:
  """The README pretraining command for `preset` (an `albert-*-v2` name)."""
  return ExperimentConfig(
      task=PretrainingTaskConfig(
          model=ModelConfig.from_preset(preset),
          train_data=PretrainingDataConfig(global_batch_size=4096, seq_length=512, max_predictions_per_seq=20,
                                           is_training=True),
          validation_data=PretrainingDataConfig(global_batch_size=64, seq_length=512, max_predictions_per_seq=20,
                                                is_training=False)),
      trainer=TrainerConfig(**PAPER_TRAINER),
      # '' = auto: mixed_bfloat16 on TPU (what the cores compute in; no loss scaling), float32 elsewhere.
      runtime=RuntimeConfig(mixed_precision_dtype=""))


for _size in ("base", "large", "xlarge", "xxlarge"):
  register_experiment(f"albert_{_size}_v2_pretrain")(lambda _size=_size: paper_pretraining(f"albert-{_size}-v2"))


# A model small enough to learn something in minutes on 2 CPU cores (the demo's model).
TINY_MODEL = dict(vocab_size=4000, embedding_size=64, hidden_size=128, num_hidden_layers=4, num_hidden_groups=1,
                  num_attention_heads=4, intermediate_size=512, max_position_embeddings=128,
                  hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)


@register_experiment("albert_tiny_pretrain")
def tiny_pretraining() -> ExperimentConfig:
  """A tiny ALBERT (H 128, 4 layers) pretrained at seq 128 with batch 32 on CPU."""
  model = ModelConfig().replace(**TINY_MODEL)
  return ExperimentConfig(
      task=PretrainingTaskConfig(
          model=model,
          train_data=PretrainingDataConfig(global_batch_size=32, seq_length=128, max_predictions_per_seq=20),
          validation_data=PretrainingDataConfig(global_batch_size=32, seq_length=128, max_predictions_per_seq=20,
                                                is_training=False)),
      # LAMB at 0.01 (tuned on the demo corpus: 0.005 and 0.002/AdamW stayed longer on the unigram plateau).
      trainer=TrainerConfig(train_steps=1000, warmup_steps=100, learning_rate=0.01, optimizer="lamb",
                            checkpoint_interval=200, max_to_keep=3, steps_per_loop=50, summary_interval=50,
                            validation_steps=10, validation_interval=200),
      runtime=RuntimeConfig())


def dynamic(config: ExperimentConfig, shuffle_buffer_size: int) -> ExperimentConfig:
  """`config` with both data sections switched to the on-the-fly pipeline."""
  config.task.train_data = config.task.train_data.replace(dynamic_masking=True,
                                                          shuffle_buffer_size=shuffle_buffer_size)
  config.task.validation_data = config.task.validation_data.replace(dynamic_masking=True)
  return config


for _size in ("base", "large", "xlarge", "xxlarge"):
  register_experiment(f"albert_{_size}_v2_pretrain_dynamic")(
      lambda _size=_size: dynamic(paper_pretraining(f"albert-{_size}-v2"), 10000))


@register_experiment("albert_tiny_pretrain_dynamic")
def tiny_pretraining_dynamic() -> ExperimentConfig:
  """`albert_tiny_pretrain` fed by the on-the-fly pipeline."""
  return dynamic(tiny_pretraining(), 1000)
