"""A model directory carries its model (issue 28 item 1): `task.model` comes from `task.init_checkpoint` (native, HF,
TF1 directory or a checkpoint prefix) for training and from `model_dir` for eval / predict, unless the user sets it;
an explicit setting that disagrees is one error naming the key and both values."""

import json
import logging
import shutil

import numpy as np
import pytest

from official_albert import AlbertConfig
from official_albert import train
from official_albert.checkpoints.names import encoder_variable_map
from official_albert.training import base_task
from official_albert.training.hyperparams import ConfigError
from tests.official_albert.checkpoints.sources import pretrainer_in_every_format

# Deliberately unlike albert-base-v2 (the fine-tuning experiments' default) in every shape field.
SMALL = dict(vocab_size=1000, embedding_size=8, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
             intermediate_size=32, max_position_embeddings=64, hidden_dropout_prob=0.0,
             attention_probs_dropout_prob=0.0)
SHAPE_FIELDS = ("vocab_size", "embedding_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
                "intermediate_size", "max_position_embeddings")


@pytest.fixture(scope="module")
def source(tmp_path_factory):
  """One small pretrainer written as a native, HF and original-release (TF1) directory."""
  root = tmp_path_factory.mktemp("pretrained")
  model = pretrainer_in_every_format(root, SMALL, seed=5)
  return {"root": root, "encoder": {n: v.numpy() for n, v in encoder_variable_map(model.encoder).items()}}


def _override(**task):
  return json.dumps({"task": task})


def _shape(model):
  return {name: getattr(model, name) for name in SHAPE_FIELDS}


@pytest.mark.parametrize("form", ["native", "hf", "tf1", "tf1_prefix"])
def test_finetuning_takes_the_model_of_init_checkpoint(source, tmp_path, form):
  path = {"tf1_prefix": str(source["root"] / "tf1" / "model.ckpt")}.get(form, str(source["root"] / form))
  params = train.build_params("glue/rte", params_override=_override(init_checkpoint=path), mode="train",
                              model_dir=str(tmp_path / "run"))
  assert _shape(params.task.model) == _shape(AlbertConfig(**SMALL))
  # The recipe's own fields stay the experiment's (glue/rte fine-tunes with dropout 0.1).
  assert params.task.model.hidden_dropout_prob == 0.1 and params.task.model.preset == ""
  # glue/rte reads 512 pieces; this model has 64 positions: the data follows the model.
  assert params.task.train_data.seq_length == params.task.validation_data.seq_length == 64
  # ... and the run warm-starts from it, whatever the format (HF and TF1 included).
  task = base_task.create_task(params.task)
  model = task.build_model()
  model({k: np.zeros([1, 8], np.int32) for k in base_task.ENCODER_INPUT_KEYS})
  task.initialize(model)
  restored = {n: v.numpy() for n, v in encoder_variable_map(model.encoder).items()}
  assert restored.keys() == source["encoder"].keys()
  for name, value in source["encoder"].items():
    np.testing.assert_array_equal(restored[name], value, err_msg=name)


def test_a_checkpoint_prefix_of_a_run_gives_its_folders_config(source, tmp_path):
  params = train.build_params("text_classification", mode="train", model_dir=str(tmp_path / "m"),
                              params_override=_override(init_checkpoint=str(source["root"] / "native" / "model.ckpt")))
  assert _shape(params.task.model) == _shape(AlbertConfig(**SMALL))


def test_init_checkpoint_folders_named_like_numbers_give_the_run_their_model(source, tmp_path, monkeypatch):
  # The source lookup read the YAML-typed value (`20241130_1` as 202411301, `0755` as 493, `1.10` as 1.1), so the
  # model came from no folder (the experiment's default shape) while the restore read the folder as written.
  monkeypatch.chdir(tmp_path)
  config_file = tmp_path / "c.yaml"
  for name in ("20241130_1", "0755", "1.10"):
    shutil.copytree(source["root"] / "native", tmp_path / name)
    config_file.write_text(f"task:\n  init_checkpoint: {name}\n")
    for files, override_value in (([], f"task.init_checkpoint={name}"), ([str(config_file)], None)):
      params = train.build_params("glue/rte", files, override_value, mode="train",
                                  model_dir=str(tmp_path / "m"))
      assert params.task.init_checkpoint == name
      assert _shape(params.task.model) == _shape(AlbertConfig(**SMALL)), name
  task = base_task.create_task(params.task)  # ... and the run warm-starts from that folder
  model = task.build_model()
  model({k: np.zeros([1, 8], np.int32) for k in base_task.ENCODER_INPUT_KEYS})
  task.initialize(model)
  restored = {n: v.numpy() for n, v in encoder_variable_map(model.encoder).items()}
  for name, value in source["encoder"].items():
    np.testing.assert_array_equal(restored[name], value, err_msg=name)


def test_an_init_checkpoint_under_home_written_with_a_tilde_gives_the_run_its_model(source, tmp_path, monkeypatch):
  # The source lookup read `~/models/pre` as written (a folder named `~`): the experiment's default shape, while the
  # restore read the expanded path.
  monkeypatch.setenv("HOME", str(tmp_path))
  shutil.copytree(source["root"] / "native", tmp_path / "models" / "pre")
  params = train.build_params("glue/rte", params_override="task.init_checkpoint=~/models/pre", mode="train",
                              model_dir=str(tmp_path / "m"))
  assert params.task.init_checkpoint == str(tmp_path / "models" / "pre")
  assert _shape(params.task.model) == _shape(AlbertConfig(**SMALL))


def test_explicit_settings_agreeing_or_of_the_recipe_are_kept(source, tmp_path):
  init = str(source["root"] / "native")
  params = train.build_params("text_classification", mode="train", model_dir=str(tmp_path / "m"),
                              params_override=_override(init_checkpoint=init, model={
                                  "vocab_size": 1000, "hidden_size": 16, "hidden_dropout_prob": 0.3,
                                  "attention_type": "chunked"}))
  assert _shape(params.task.model) == _shape(AlbertConfig(**SMALL))
  # The recipe's dropout and the attention type (the same weights run under any) are the user's to choose.
  assert params.task.model.hidden_dropout_prob == 0.3 and params.task.model.attention_type == "chunked"


def test_an_explicit_setting_that_disagrees_is_one_error_naming_key_and_both_values(source, tmp_path):
  init = str(source["root"] / "native")
  with pytest.raises(ConfigError) as error:
    train.build_params("text_classification", mode="train", model_dir=str(tmp_path / "m"),
                       params_override=_override(init_checkpoint=init, model={"vocab_size": 30000,
                                                                                "num_attention_heads": 4}))
  message = str(error.value)
  assert "task.model.vocab_size=30000" in message and "vocab_size=1000" in message
  assert "task.model.num_attention_heads=4" in message and "num_attention_heads=2" in message
  assert f"task.init_checkpoint={init}" in message and "config.json" in message
  with pytest.raises(ConfigError, match=r"task\.model\.preset=albert-base-v2 sets hidden_size=768, but "
                                        r"task\.init_checkpoint="):
    train.build_params("text_classification", mode="train", model_dir=str(tmp_path / "m"),
                       params_override=_override(init_checkpoint=init, model={"preset": "albert-base-v2"}))


def test_an_explicit_seq_length_beyond_the_models_positions_is_an_error(source, tmp_path):
  with pytest.raises(ConfigError, match=r"task\.train_data\.seq_length=128 exceeds max_position_embeddings=64 of "
                                        r"the model of task\.init_checkpoint="):
    train.build_params("text_classification", mode="train", model_dir=str(tmp_path / "m"),
                       params_override=_override(init_checkpoint=str(source["root"] / "native"),
                                                 train_data={"seq_length": 128}))


def test_without_a_model_source_the_data_fits_task_models_positions(tmp_path, caplog):
  """A random-init run (or task.model set) longer than the model's positions failed at the first long batch inside
  the encoder, naming no key: an unset length is cut, as from a source, and an explicit one refused."""
  model = {"preset": "", "max_position_embeddings": 64}
  with caplog.at_level(logging.INFO):
    params = train.build_params("text_classification", mode="train", model_dir=str(tmp_path / "m"),
                                params_override=_override(model=model))
  assert params.task.train_data.seq_length == 64 and params.task.validation_data.seq_length == 64
  assert "task.train_data.seq_length 128 -> 64: the model (task.model) has max_position_embeddings 64" in caplog.text
  with pytest.raises(ConfigError, match=r"task\.train_data\.seq_length=128 exceeds max_position_embeddings=64 of "
                                        r"the model of task\.model"):
    train.build_params("text_classification", mode="train", model_dir=str(tmp_path / "m"),
                       params_override=_override(model=model, train_data={"seq_length": 128}))


def test_squad_and_race_fit_their_question_caps_to_a_short_model(source, tmp_path, caplog):
  """Issue 44 (long models at their length, the short side): SQuAD and RACE from a 64-position model. Before: the
  data sections were cut to 64 but the reference's caps kept (64-piece questions in 64-piece windows, 128-piece
  question+option in 64-piece rows), so records and predictions were refused. After: the caps follow the length,
  logged; a cap the run sets is kept; a model long enough keeps the reference's (what create_finetuning_data's
  defaults made)."""
  init = str(source["root"] / "native")
  with caplog.at_level(logging.INFO):
    squad = train.build_params("squad_v1", mode="train", model_dir=str(tmp_path / "q"),
                               params_override=_override(init_checkpoint=init)).task
    race = train.build_params("race", mode="train", model_dir=str(tmp_path / "r"),
                              params_override=_override(init_checkpoint=init)).task
  assert (squad.train_data.seq_length, squad.doc_stride, squad.max_query_length) == (64, 21, 10)
  assert (race.train_data.seq_length, race.max_qa_length) == (64, 16)
  assert "task.doc_stride 128 -> 21, task.max_query_length 64 -> 10: the data's 64-piece sequences" in caplog.text
  assert "task.max_qa_length 128 -> 16" in caplog.text
  # --mode=predict of the run fits the same way (the records and the predictions' features agree).
  predict = train.build_params("squad_v1", mode="predict", model_dir=str(tmp_path / "q"),
                               params_override=_override(init_checkpoint=init)).task
  assert (predict.predict_data.seq_length, predict.doc_stride, predict.max_query_length) == (64, 21, 10)
  kept = train.build_params("squad_v1", mode="train", model_dir=str(tmp_path / "q2"),
                            params_override=_override(init_checkpoint=init, max_query_length=20)).task
  # The set cap fits, so the stride stays the reference's too (as create_finetuning_data's default makes it).
  assert (kept.doc_stride, kept.max_query_length) == (128, 20)
  long_enough = train.build_params("race", mode="train", model_dir=str(tmp_path / "r2"))  # albert-base: 512
  assert (long_enough.task.train_data.seq_length, long_enough.task.max_qa_length) == (512, 128)


def test_eval_and_predict_take_the_model_of_model_dir(source, tmp_path):
  model_dir = tmp_path / "run"
  model_dir.mkdir()
  config = AlbertConfig(**dict(SMALL, hidden_dropout_prob=0.1))
  config.to_json_file(str(model_dir / "config.json"))
  for mode in ("eval", "predict"):
    params = train.build_params("text_classification", mode=mode, model_dir=str(model_dir))
    assert params.task.model.to_albert_config() == config
  # The classifier's dropout (its seed state is a variable of the checkpoint) comes from the run's params.yaml.
  (model_dir / "params.yaml").write_text("task:\n  classifier_dropout: 0.0\n")
  saved = train.build_params("text_classification", mode="predict", model_dir=str(model_dir))
  assert saved.task.classifier_dropout == 0.0
  assert train.build_params("text_classification", mode="predict", model_dir=str(model_dir),
                            params_override=_override(classifier_dropout=0.2)).task.classifier_dropout == 0.2
  # Training in a fresh model_dir (config.json but no checkpoint yet) is not a resume: the experiment's default.
  params = train.build_params("text_classification", mode="train", model_dir=str(model_dir))
  assert params.task.model.hidden_size == 768
  # Without a mode (a library caller building params itself) nothing is resolved.
  assert train.build_params("text_classification").task.model.hidden_size == 768
