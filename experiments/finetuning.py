"""Registered fine-tuning experiments: GLUE (run_glue.sh table), SQuAD v1.1/v2.0 and RACE (reference §7.4).

Names: `glue/<task>` (cola, sst-2, mrpc, sts-b, qqp, mnli, mnli-mm, qnli, rte, wnli), `squad_v1`, `squad_v2`,
`squad_v2_paper`, `race`. Every recipe's model is albert-base-v2 until `task.init_checkpoint` names a converted or
pretrained model: the model is then that checkpoint's (its config file; `official_albert.training.model_source`),
with the recipe's dropout; data paths are left empty: make the TFRecords with
`python -m data_prep.create_finetuning_data` and set `task.train_data.input_path` / `task.validation_data.input_path`
(+ `task.predict_file` and `task.spm_model_file` for SQuAD). `--mode=predict` reads `task.predict_data.input_path`
(records of the test split) and writes `<model_dir>/predictions/` from `model.ckpt-best` (else the latest checkpoint);
`task.predict_file` (GLUE TSV, SQuAD JSON) or `task.predict_input_dir` (RACE) name the rows.

Protocol: a checkpoint is saved and evaluated every `save_checkpoints_steps` (run_glue.sh's 100/200); train_lib
tracks the best one (`best_checkpoint.json`, `model.ckpt-best`, the reference protocol: max over checkpoints) and
`eval_results.json` holds the FINAL checkpoint's numbers. Report the final ones unless stated otherwise.

Rates: the recipes' learning rates and warm-ups are the paper's for its sizes (albert-base … xxlarge), kept exactly for
a model of those shapes; another model (one's own small one) gets size-based ones where the run sets none
(`trainer.paper_recipe`, `training.finetuning_rates`, docs/recipe.md §4).
"""

from __future__ import annotations

from experiments.registry import register_experiment
from official_albert.training.experiment_config import DataConfig
from official_albert.training.experiment_config import ExperimentConfig
from official_albert.training.experiment_config import FINETUNING_SHUFFLE_BUFFER
from official_albert.training.experiment_config import ModelConfig
from official_albert.training.experiment_config import RuntimeConfig
from official_albert.training.experiment_config import TrainerConfig
from tasks import choice  # (registers text_multiple_choice)
from tasks import embedding  # (registers text_embedding)
from tasks import glue
from tasks import race
from tasks import ranking  # (registers text_ranking)
from tasks import squad
from tasks import text  # (registers text_classification, text_regression, token_classification)
from tasks.squad import schedule as squad_schedule

# run_glue.sh: (warmup, lr, train steps, save every, batch). msl 512, adamw. WNLI is not in the script: flag defaults.
GLUE_RECIPES = {
    "sst-2": (1256, 1e-5, 20935, 100, 32),
    "mnli": (1000, 3e-5, 10000, 100, 128),
    "mnli-mm": (1000, 3e-5, 10000, 100, 128),
    "cola": (320, 1e-5, 5336, 100, 16),
    "qnli": (1986, 1e-5, 33112, 200, 32),
    "qqp": (1000, 5e-5, 14000, 100, 128),
    "rte": (200, 3e-5, 800, 100, 32),
    "sts-b": (214, 2e-5, 3598, 100, 16),
    "mrpc": (200, 2e-5, 800, 100, 32),
    "wnli": (0, 5e-5, 1000, 1000, 32),
}
# Paper Table 14 [unverified]: ALBERT dropout 0.1 for QQP/RTE/WNLI/RACE, 0 elsewhere; classifier dropout 0.1 always.
_DROPOUT_TASKS = ("qqp", "rte", "wnli")


def _adamw(warmup, lr, steps, save_every):
  return TrainerConfig(optimizer="adamw", learning_rate=lr, warmup_steps=warmup, train_steps=steps,
                       checkpoint_interval=save_every, validation_interval=save_every, steps_per_loop=save_every,
                       summary_interval=save_every, validation_steps=-1, max_to_keep=5, weight_decay_rate=0.01,
                       clip_norm=1.0)


def _paper_recipe(warmup, lr, steps, save_every):
  """The paper's rates for its sizes; another model (one's own small one) gets size-based ones where the run sets
  none (`training.finetuning_rates`)."""
  return _adamw(warmup, lr, steps, save_every).replace(rates_by_model_size=True, paper_recipe=True)


def _model(dropout: float) -> ModelConfig:
  """albert-base-v2 with the recipe's ALBERT dropout, which `task.model.preset` keeps (`keep_recipe_fields`): the
  dropout is the recipe's choice (Table 14), not the preset's."""
  return ModelConfig.from_preset("albert-base-v2", hidden_dropout_prob=dropout,
                                 attention_probs_dropout_prob=dropout).keep_recipe_fields()


def glue_experiment(task_name: str) -> ExperimentConfig:
  warmup, lr, steps, save_every, batch = GLUE_RECIPES[task_name]
  return ExperimentConfig(
      task=glue.GlueTaskConfig(
          task_name=task_name, model=_model(0.1 if task_name in _DROPOUT_TASKS else 0.0),
          train_data=DataConfig(global_batch_size=batch, seq_length=512, is_training=True,
                                shuffle_buffer_size=FINETUNING_SHUFFLE_BUFFER),
          validation_data=DataConfig(global_batch_size=8, seq_length=512, is_training=False, drop_remainder=False)),
      trainer=_paper_recipe(warmup, lr, steps, save_every),
      runtime=RuntimeConfig())


for _name in GLUE_RECIPES:
  register_experiment(f"glue/{_name}")(lambda _name=_name: glue_experiment(_name))


def squad_experiment(v2: bool, num_examples: int, epochs: float, lr: float, seq_length: int) -> ExperimentConfig:
  """README: batch 48, lr 5e-5, 2 epochs, warmup 0.1, msl 384 (v1 and v2); steps = int(#examples / 48 · epochs).

  The steps are the reference's for its training set (`num_examples` questions) at batch 48; `task.train_epochs`
  records the epochs, from which a run on another file or batch resolves its own steps at start-up
  (`tasks.squad.schedule.resolve_steps`). Prediction packs at the evaluation's length (the model is chosen at it)."""
  steps, warmup = squad.epoch_steps(num_examples, 48, epochs)
  return ExperimentConfig(
      task=squad.SquadTaskConfig(
          version_2_with_negative=v2, model=_model(0.0), doc_stride=128, max_query_length=64, n_best_size=20,
          max_answer_length=30, train_epochs=epochs,
          train_data=DataConfig(global_batch_size=48, seq_length=seq_length, is_training=True),
          validation_data=DataConfig(global_batch_size=8, seq_length=seq_length, is_training=False,
                                     drop_remainder=False),
          predict_data=DataConfig(global_batch_size=8, seq_length=seq_length, is_training=False,
                                  drop_remainder=False)),
      trainer=_paper_recipe(warmup, lr, steps, 1000),
      runtime=RuntimeConfig())


_QUESTIONS = squad_schedule.REFERENCE_TRAIN_QUESTIONS  # (v1.1's 87,599, v2.0's 130,319 training questions)
register_experiment("squad_v1")(lambda: squad_experiment(False, _QUESTIONS[False], 2.0, 5e-5, 384))  # 3649 steps
register_experiment("squad_v2")(lambda: squad_experiment(True, _QUESTIONS[True], 2.0, 5e-5, 384))  # README command
register_experiment("squad_v2_paper")(lambda: squad_experiment(True, _QUESTIONS[True], 3.0, 3e-5, 512))  # Table 14


@register_experiment("race")
def race_experiment() -> ExperimentConfig:
  """README: msl 512, max_qa 128, batch 32, lr 1e-5, 12000 steps, warmup 1000; v2 models: ALBERT dropout 0."""
  return ExperimentConfig(
      task=race.RaceTaskConfig(
          model=_model(0.0),
          train_data=DataConfig(global_batch_size=32, seq_length=512, is_training=True,
                                shuffle_buffer_size=FINETUNING_SHUFFLE_BUFFER),
          validation_data=DataConfig(global_batch_size=8, seq_length=512, is_training=False, drop_remainder=False)),
      trainer=_paper_recipe(1000, 1e-5, 12000, 100),
      runtime=RuntimeConfig())


def _text_recipe(task_cls, dropout: float, batch: int, seq_length: int, lr: float, predict: bool = False,
                 **trainer) -> ExperimentConfig:
  """The recipe of the tasks on one's own rows: `batch` × `seq_length`, AdamW at `lr` with 100 warm-up steps over
  1,000, a checkpoint every 200 and a loop of 20 steps (`trainer` overrides more of the trainer's fields)."""
  def data(is_training: bool) -> DataConfig:
    if is_training:
      return DataConfig(global_batch_size=batch, seq_length=seq_length, is_training=True,
                        shuffle_buffer_size=FINETUNING_SHUFFLE_BUFFER)
    return DataConfig(global_batch_size=batch, seq_length=seq_length, is_training=False, drop_remainder=False)

  splits = dict(train_data=data(True), validation_data=data(False))
  if predict:
    splits["predict_data"] = data(False)
  # A loop of 20 steps: the first progress line (loss, steps/s, ETA) comes after 20 steps, not after the 200 of the
  # first checkpoint; the host overhead of a loop (~3-6 ms) is nothing next to a fine-tuning step.
  return ExperimentConfig(task=task_cls(model=_model(dropout), **splits),
                          trainer=_adamw(100, lr, 1000, 200).replace(steps_per_loop=20, summary_interval=20, **trainer),
                          runtime=RuntimeConfig())


# Your own data (tasks/text): raw CSV / TSV / JSONL / CoNLL files in task.*_data.input_path. A fine-tuning recipe
# in the reference's range (AdamW 2e-5, 10% warmup, seq 128, batch 32); set trainer.train_steps to ~3 epochs.
def text_experiment(config_cls) -> ExperimentConfig:
  # albert-base's rates; a smaller model, or a run of other length, gets its own unless set
  # (`training.finetuning_rates`).
  return _text_recipe(config_cls, 0.0, 32, 128, 2e-5, predict=True, rates_by_model_size=True)


register_experiment("text_classification")(lambda: text_experiment(text.TextClassificationConfig))
register_experiment("text_regression")(lambda: text_experiment(text.TextRegressionConfig))
register_experiment("token_classification")(lambda: text_experiment(text.TokenClassificationConfig))


# Multiple choice on your own rows (tasks/choice): the text recipe at seq 256 and batch 16 (each row is
# task.num_choices sequences, 4 by default), dropout 0.1 before the scorer as RACE's.
@register_experiment("text_multiple_choice")
def text_multiple_choice_experiment() -> ExperimentConfig:
  return _text_recipe(choice.TextMultipleChoiceConfig, 0.0, 16, 256, 2e-5, predict=True, rates_by_model_size=True)


# Sentence embedders (tasks/embedding, docs/retrieval.md): pairs in task.train_data.input_path; the text recipe with
# a larger learning rate, as sentence-transformers trains bi-encoders (no predict_data: an embedder is served by
# pipelines.embed).
@register_experiment("text_embedding")
def text_embedding_experiment() -> ExperimentConfig:
  return _text_recipe(embedding.TextEmbeddingConfig, 0.0, 32, 128, 5e-5)


# Rerankers (tasks/ranking, docs/retrieval.md): query groups in task.train_data.input_path; the text recipe (a
# cross-encoder is a sentence-pair classifier) at sentence-transformers' CrossEncoder rate, with the encoder's dropout
# at 0.1 (the classification recipe's is 0.0): sentence-transformers' CrossEncoder trains with BERT's 0.1.
@register_experiment("text_ranking")
def text_ranking_experiment() -> ExperimentConfig:
  return _text_recipe(ranking.TextRankingConfig, 0.1, 16, 256, 2e-5)
