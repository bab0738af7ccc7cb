"""Typed experiment configs: overrides, typos, presets, YAML stacking, params.yaml round trip, registries."""

import json
import re

import pytest
import yaml

from official_albert.config import AlbertConfig
from official_albert.training.experiment_config import ExperimentConfig
from official_albert.training.experiment_config import load_params_yaml
from official_albert.training.experiment_config import ModelConfig
from official_albert.training.experiment_config import save_params_yaml
from official_albert.training.experiment_config import TrainerConfig
from official_albert.training.hyperparams import ConfigError
from official_albert.training.hyperparams import load_file
from official_albert.training.hyperparams import override
from official_albert.training.hyperparams import parse_overrides


def test_nested_dict_yaml_json_and_kv_overrides_agree():
  base = ExperimentConfig()
  as_dict = base.override({"trainer": {"train_steps": 7, "learning_rate": 0.5}, "task.train_data.seq_length": 64})
  as_yaml = base.override(
      "trainer:\n  train_steps: 7\n  learning_rate: 0.5\ntask:\n  train_data:\n    seq_length: 64\n")
  as_json = base.override(json.dumps({"trainer": {"train_steps": 7, "learning_rate": 0.5},
                                      "task": {"train_data": {"seq_length": 64}}}))
  as_kv = base.override("trainer.train_steps=7,trainer.learning_rate=0.5,task.train_data.seq_length=64")
  for params in (as_dict, as_yaml, as_json, as_kv):
    assert params.trainer.train_steps == 7
    assert params.trainer.learning_rate == 0.5
    assert params.task.train_data.seq_length == 64
  assert base.trainer.train_steps == TrainerConfig().train_steps  # the input is not mutated


def test_kv_values_may_contain_commas_and_yaml_exponents_become_floats():
  params = ExperimentConfig().override(
      "task.train_data.input_path=/a/*.tfrecord,/b/*.tfrecord,trainer.learning_rate=1e-4")
  assert params.task.train_data.input_path == "/a/*.tfrecord,/b/*.tfrecord"
  assert params.trainer.learning_rate == pytest.approx(1e-4)  # YAML 1.1 reads `1e-4` as a string
  assert isinstance(params.trainer.learning_rate, float)


def test_unknown_key_names_the_path_and_suggests():
  with pytest.raises(ConfigError, match=r"'trainer\.learnig_rate'.*did you mean 'trainer\.learning_rate'"):
    ExperimentConfig().override({"trainer": {"learnig_rate": 1e-3}})
  with pytest.raises(ConfigError, match=r"'task\.model\.hiden_size'.*did you mean 'task\.model\.hidden_size'"):
    ExperimentConfig().override("task.model.hiden_size=64")
  with pytest.raises(ConfigError, match=r"Unknown config key 'trainr'"):
    ExperimentConfig().override("trainr.train_steps=3")


def test_non_strict_skips_unknown_keys():
  params = ExperimentConfig().override({"trainer": {"bogus": 1, "train_steps": 3}}, is_strict=False)
  assert params.trainer.train_steps == 3


@pytest.mark.parametrize("override_value, message", [
    ({"trainer": {"train_steps": "many"}}, r"trainer\.train_steps' expects an int"),
    ({"trainer": {"train_steps": 2.5}}, r"trainer\.train_steps' expects an int"),
    ({"runtime": {"jit_compile": "maybe"}}, r"runtime\.jit_compile' expects a bool"),
    ({"trainer": 5}, r"'trainer' is a section"),
    ({"trainer": {"optimizer": "sgd"}}, r"trainer\.optimizer='sgd'"),
    ({"runtime": {"mixed_precision_dtype": "float16"}}, r"mixed_precision_dtype"),
    ({"task": {"model": {"hidden_size": 100, "num_attention_heads": 12}}}, r"task\.model.*divisible"),
    ({"task": {"train_data": {"is_training": False}}}, r"task\.train_data\.is_training=false.*shuffle_buffer_size=1"),
    ({"task": {"train_data": {"shuffle_buffer_size": -2}}}, r"shuffle_buffer_size must be >= 1 on training data"),
    ({"trainer": {"train_steps": 6, "warmup_steps": 2, "start_warmup_step": 6}}, r"start_warmup_step=6 >= "),
])
def test_bad_values_raise_clear_errors(override_value, message):
  with pytest.raises(ConfigError, match=message):
    ExperimentConfig().override(override_value)


def test_preset_then_field_overrides_regardless_of_key_order():
  params = ExperimentConfig().override({"task": {"model": {"hidden_size": 1024, "num_attention_heads": 16,
                                                           "preset": "albert-base-v2"}}})
  model = params.task.model
  assert model.preset == "albert-base-v2"
  assert (model.hidden_size, model.num_attention_heads, model.num_hidden_layers) == (1024, 16, 12)
  assert model.to_albert_config() == AlbertConfig.from_preset("albert-base-v2", hidden_size=1024,
                                                              num_attention_heads=16)
  # A later preset resets every field to that preset.
  again = params.override("task.model.preset=albert-large-v2")
  assert again.task.model.to_albert_config() == AlbertConfig.from_preset("albert-large-v2")
  with pytest.raises(ConfigError, match="albert-bse-v2"):
    ExperimentConfig().override("task.model.preset=albert-bse-v2")


def test_model_config_has_every_albert_config_field():
  import dataclasses
  names = {f.name for f in dataclasses.fields(ModelConfig)}
  assert names == {f.name for f in dataclasses.fields(AlbertConfig)} | {"preset"}
  assert ModelConfig.from_preset("albert-xxlarge-v2").to_albert_config() == AlbertConfig.from_preset(
      "albert-xxlarge-v2")


def test_yaml_file_stacking_and_params_yaml_round_trip(tmp_path):
  first = tmp_path / "a.yaml"
  second = tmp_path / "b.json"
  first.write_text("trainer:\n  train_steps: 10\n  warmup_steps: 2\ntask:\n  model:\n    preset: albert-base-v2\n")
  second.write_text(json.dumps({"trainer": {"train_steps": 20}}))
  params = ExperimentConfig().override(str(first)).override(str(second)).override("trainer.steps_per_loop=5")
  assert (params.trainer.train_steps, params.trainer.warmup_steps, params.trainer.steps_per_loop) == (20, 2, 5)
  path = save_params_yaml(params, str(tmp_path / "model"))
  assert yaml.safe_load(open(path))["trainer"]["train_steps"] == 20
  reloaded = load_params_yaml(ExperimentConfig(), path)
  assert reloaded == params


def test_file_errors_name_the_line(tmp_path):
  bad = tmp_path / "bad.yaml"
  bad.write_text("trainer:\n  train_steps: [1, 2\n")
  with pytest.raises(ConfigError, match=r"bad\.yaml:\d+"):
    ExperimentConfig().override(str(bad))
  with pytest.raises(ConfigError, match="mapping"):
    parse_overrides("- just\n- a list\n")


def test_override_function_and_empty_sources():
  params = ExperimentConfig()
  assert override(params, None) == params
  assert override(params, "") == params
  assert override(params, {}) == params


def test_experiment_registry_recipes_and_unknown_names():
  from experiments import registry
  names = registry.registered_experiments()
  for size in ("base", "large", "xlarge", "xxlarge"):
    name = f"albert_{size}_v2_pretrain"
    assert name in names
    params = registry.get_experiment(name)
    data, trainer = params.task.train_data, params.trainer
    assert (data.global_batch_size, data.seq_length, data.max_predictions_per_seq) == (4096, 512, 20)
    assert (trainer.optimizer, trainer.learning_rate, trainer.train_steps, trainer.warmup_steps) == (
        "lamb", 0.00176, 125000, 3125)
    assert trainer.checkpoint_interval == 5000 and trainer.clip_norm == 1.0 and trainer.weight_decay_rate == 0.01
    assert params.task.model.to_albert_config() == AlbertConfig.from_preset(f"albert-{size}-v2")
  assert "albert_tiny_pretrain" in names
  with pytest.raises(ValueError, match=r"Unknown experiment 'albert_base_v2_pretrian'.*Did you mean "
                                       r"'albert_base_v2_pretrain'.*Known experiments: .*albert_tiny_pretrain"):
    registry.get_experiment("albert_base_v2_pretrian")


def test_task_registry_raises_on_unknown_names():
  from official_albert.training import base_task
  from official_albert.training.experiment_config import TaskConfig
  import tasks.pretraining  # noqa: F401  (registers "pretraining")
  assert base_task.get_task("pretraining").name == "pretraining"
  with pytest.raises(ValueError, match=r"Unknown task 'pretrainig'.*Did you mean 'pretraining'"):
    base_task.get_task("pretrainig")
  with pytest.raises(ValueError, match="No task is registered for config class TaskConfig"):
    base_task.get_task_for_config(TaskConfig())


def test_build_params_applies_files_then_override_then_flags(tmp_path):
  from official_albert import train
  config_file = tmp_path / "c.yaml"
  config_file.write_text("trainer:\n  train_steps: 11\n  steps_per_loop: 3\n")
  params = train.build_params("albert_tiny_pretrain", [str(config_file)], "trainer.train_steps=12",
                              tpu="my-tpu")
  assert (params.trainer.train_steps, params.trainer.steps_per_loop) == (12, 3)
  assert (params.runtime.tpu, params.runtime.distribution_strategy) == ("my-tpu", "tpu")
  params = train.build_params("albert_tiny_pretrain", distribution_strategy="mirrored")
  assert params.runtime.distribution_strategy == "mirrored"


def test_paper_recipes_train_in_bfloat16_on_tpu_and_float32_elsewhere(monkeypatch):
  import tensorflow as tf

  from official_albert import train
  from official_albert.training import distribute
  from official_albert.training import train_lib
  params = train.build_params("albert_base_v2_pretrain", tpu="local")
  assert params.runtime.mixed_precision_dtype == ""  # auto, decided once the strategy is known
  strategy = tf.distribute.get_strategy()
  assert train_lib.resolve_runtime(params, strategy).runtime.mixed_precision_dtype == "float32"
  monkeypatch.setattr(distribute, "is_tpu", lambda s: True)
  assert train_lib.resolve_runtime(params, strategy).runtime.mixed_precision_dtype == "mixed_bfloat16"
  with pytest.raises(ValueError, match="mixed_float16 on TPU"):
    train_lib.resolve_runtime(params.override("runtime.mixed_precision_dtype=mixed_float16"), strategy)
  # An explicit choice wins over auto.
  explicit = params.override("runtime.mixed_precision_dtype=float32")
  assert train_lib.resolve_runtime(explicit, strategy).runtime.mixed_precision_dtype == "float32"


def test_yaml_booleans_are_true_false_only_and_string_fields_keep_the_text_as_written(tmp_path):
  # YAML 1.1 reads off/on/yes/no as booleans, digits as ints and 2026-11-30 as a date: the documented
  # `distribution_strategy=off` was refused ("expects a string, got False").
  assert ExperimentConfig().override("runtime.distribution_strategy=off").runtime.distribution_strategy == "off"
  config_file = tmp_path / "off.yaml"
  config_file.write_text("runtime:\n  distribution_strategy: off\n  jit_compile: true\n")
  params = ExperimentConfig().override(str(config_file))
  assert (params.runtime.distribution_strategy, params.runtime.jit_compile) == ("off", True)
  params = ExperimentConfig().override("task.init_checkpoint=20241130,task.train_data.input_path=2026-11-30,"
                                       "task.validation_data.input_path=1.10,trainer.best_checkpoint_metric=on")
  assert (params.task.init_checkpoint, params.task.train_data.input_path) == ("20241130", "2026-11-30")
  assert (params.task.validation_data.input_path, params.trainer.best_checkpoint_metric) == ("1.10", "on")
  assert ExperimentConfig().override({"task": {"init_checkpoint": 20241130}}).task.init_checkpoint == "20241130"
  # An int field takes an integral float (YAML 1.1 reads `1e5` as a string); a fractional one names the key.
  assert ExperimentConfig().override("trainer.train_steps=1e5").trainer.train_steps == 100000
  assert ExperimentConfig().override("trainer:\n  train_steps: 2.0e+3\n").trainer.train_steps == 2000
  with pytest.raises(ConfigError, match=r"'trainer\.train_steps' expects an int, got 1\.5"):
    ExperimentConfig().override("trainer.train_steps=1.5")
  assert parse_overrides("a.b=off,a.c=true,a.d=7") == {"a": {"b": "off", "c": True, "d": 7}}


def test_config_files_are_read_as_files_whatever_their_path_holds(tmp_path):
  from official_albert.training import model_source
  from tasks.text.config import params_yaml_task
  from tasks.text.config import TextClassificationConfig
  for folder in ("lr=1e-4", "2026-11-30T05:00"):  # run directories: '=' read as key=value, ':' as YAML
    run_dir = tmp_path / folder
    run_dir.mkdir()
    (run_dir / "config.yaml").write_text("trainer:\n  train_steps: 6\n")
    assert ExperimentConfig().override(str(run_dir / "config.yaml")).trainer.train_steps == 6
    (run_dir / "params.yaml").write_text("task:\n  classifier_dropout: 0.0\n")
    assert params_yaml_task(str(run_dir)) == {"classifier_dropout": 0.0}
    params = ExperimentConfig(task=TextClassificationConfig())
    assert model_source.task_settings_of(str(run_dir), params, []) == {"classifier_dropout": 0.0}
  for missing in (tmp_path / "missing.yaml", tmp_path / "lr=3e-4" / "config.yaml", tmp_path / "T05:00" / "c.yaml"):
    with pytest.raises(FileNotFoundError, match=re.escape(str(missing))):
      ExperimentConfig().override(str(missing))


def test_kv_values_that_are_not_yaml_alone_are_kept_as_written():
  params = ExperimentConfig().override("task.train_data.input_path=*.tfrecord,task.init_checkpoint='my model,"
                                       "task.validation_data.input_path=*/dev-*")
  assert (params.task.train_data.input_path, params.task.init_checkpoint) == ("*.tfrecord", "'my model")
  assert params.task.validation_data.input_path == "*/dev-*"


def test_kv_values_that_yaml_would_change_keep_the_text_as_written():
  # Each value went through YAML alone: `|` / `>` are block-scalar headers (''), `#` starts a comment (None, or a cut
  # path), `!` is a tag (None). `task.label_separator=|` became '', i.e. one label per cell.
  from tasks.text.config import TextClassificationConfig
  base = ExperimentConfig(task=TextClassificationConfig())
  for text in ("|", ">", "#", "!", "-", "&x", "a #b"):
    assert base.override(f"task.label_separator={text}").task.label_separator == text
  params = base.override("task.init_checkpoint=runs/exp #3/model,task.train_data.input_path=d/*.rec # all")
  assert (params.task.init_checkpoint, params.task.train_data.input_path) == ("runs/exp #3/model", "d/*.rec # all")
  # null / ~ still mean None where the key allows it ('' for a plain string key); quotes, lists and typed scalars
  # are YAML's.
  assert base.override("task.label_separator=null").task.label_separator is None
  assert base.override("task.label_separator=~,task.init_checkpoint=~").task.init_checkpoint == ""
  assert base.override("task.label_separator='#',task.init_checkpoint=\"a #b\"").task.label_separator == "#"
  assert base.override("task.init_checkpoint=\"a #b\"").task.init_checkpoint == "a #b"
  params = base.override("trainer.train_steps=5 #note,trainer.exclude_from_weight_decay=[bias, gamma]")
  assert (params.trainer.train_steps, params.trainer.exclude_from_weight_decay) == (5, ["bias", "gamma"])
  assert parse_overrides("a.b=|,a.c=true,a.d=null,a.e=x #y") == {"a": {"b": "|", "c": True, "d": None, "e": "x #y"}}
  # A number key given such a value names it instead of taking None.
  with pytest.raises(ConfigError, match=r"'task\.train_data\.seed' expects an int, got '#'"):
    base.override("task.train_data.seed=#")


def test_numbers_are_yaml_1_2_decimal_not_octal_or_base_60(tmp_path):
  # YAML 1.1 read `0127` as octal 87, `0042` as 34 and `1:30` as base-60 90, silently.
  params = ExperimentConfig().override("task.train_data.seq_length=0127,runtime.seed=0042,trainer.warmup_steps=0x10,"
                                       "trainer.train_steps=1_000,trainer.learning_rate=.5e-3")
  assert (params.task.train_data.seq_length, params.runtime.seed) == (127, 42)
  assert (params.trainer.warmup_steps, params.trainer.train_steps, params.trainer.learning_rate) == (16, 1000, 5e-4)
  for key, kind in (("trainer.train_steps", "an int"), ("trainer.learning_rate", "a float")):
    with pytest.raises(ConfigError, match=rf"'{re.escape(key)}' expects {kind}, got '1:30'"):
      ExperimentConfig().override(f"{key}=1:30")
  config_file = tmp_path / "numbers.yaml"
  config_file.write_text("runtime:\n  seed: 0042\ntask:\n  init_checkpoint: 0755\n  train_data:\n"
                         "    seq_length: 0127\ntrainer:\n  learning_rate: 1e-4\n")
  params = ExperimentConfig().override(str(config_file))
  assert (params.runtime.seed, params.task.train_data.seq_length, params.task.init_checkpoint) == (42, 127, "0755")
  assert params.trainer.learning_rate == pytest.approx(1e-4)
  with pytest.raises(ConfigError, match=r"'trainer\.train_steps' expects an int, got '1:30'"):
    ExperimentConfig().override("trainer:\n  train_steps: 1:30\n")


def test_a_config_file_that_is_not_utf8_is_an_error_naming_it_the_byte_and_the_fix(tmp_path):
  # A cp1252 / latin-1 editor's file gave a UnicodeDecodeError traceback that named no file.
  latin1 = tmp_path / "latin1.yaml"
  text = "trainer:\n  train_steps: 5\ntask:\n  init_checkpoint: /models/caf\u00e9\n"
  latin1.write_bytes(text.encode("latin-1"))  # one byte a character: the offset is the character's index
  offset = text.index("\u00e9")
  message = re.escape(f"{latin1}: not UTF-8 text (byte 0xe9 at offset {offset}:") + r".*save it as UTF-8"
  with pytest.raises(ConfigError, match=message):
    ExperimentConfig().override(str(latin1))
  with pytest.raises(ConfigError, match=message):
    load_file(str(latin1))
  latin1.write_bytes(b"\xef\xbb\xbftrainer:\r\n  train_steps: 5\r\n")  # a BOM and CRLF are still fine
  assert ExperimentConfig().override(str(latin1)).trainer.train_steps == 5


def test_a_key_written_twice_is_an_error_naming_it_the_lines_and_the_file(tmp_path):
  twice = tmp_path / "twice.yaml"
  twice.write_text("trainer:\n  train_steps: 5\nruntime:\n  seed: 3\ntrainer:\n  learning_rate: 0.001\n")
  with pytest.raises(ConfigError, match=r"twice\.yaml:5: duplicate key 'trainer' \(first at line 1\)"):
    ExperimentConfig().override(str(twice))
  with pytest.raises(ConfigError, match=r"duplicate key 'train_steps'"):
    parse_overrides('{"trainer": {"train_steps": 5, "train_steps": 6}}')


def test_a_missing_config_file_is_an_error_naming_it_even_when_it_reads_as_an_override(tmp_path, monkeypatch):
  # build_params hands the config files and --params_override to `override` as one list of strings, which read a
  # missing relative `lr=1e-4/config.yaml` as the override `lr: ...` and `trainer.train_steps=7` as a silent override.
  from official_albert import train
  monkeypatch.chdir(tmp_path)
  with pytest.raises(FileNotFoundError, match=r"--config_file=trainer\.train_steps=7: does not exist \(relative to "
                     r".*It would read as the override \{'trainer': \{'train_steps': 7\}\}.*--params_override"):
    train.build_params("albert_tiny_pretrain", ["trainer.train_steps=7"])
  # The --params_override hint only where that override applies: `lr` is no key, `train_steps=0` is refused.
  for path in ("lr=1e-4/config.yaml", "trainer.train_steps=0"):
    with pytest.raises(FileNotFoundError, match=rf"--config_file={re.escape(path)}: does not exist") as raised:
      train.build_params("albert_tiny_pretrain", [path])
    assert "--params_override" not in str(raised.value) and "would read as" not in str(raised.value)
  with pytest.raises(IsADirectoryError, match=r"--config_file=runs: is a directory"):
    (tmp_path / "runs").mkdir()
    train.build_params("albert_tiny_pretrain", ["runs"])
  # The existing file wins, relative or not; --params_override still takes key=value with '/' in the value.
  (tmp_path / "lr=1e-4").mkdir()
  (tmp_path / "lr=1e-4" / "config.yaml").write_text("trainer:\n  train_steps: 6\n")
  params = train.build_params("albert_tiny_pretrain", ["lr=1e-4/config.yaml"], "task.train_data.input_path=d/*.rec")
  assert (params.trainer.train_steps, params.task.train_data.input_path) == (6, "d/*.rec")


def test_a_path_shaped_key_value_override_that_fails_says_no_such_file_exists(tmp_path, monkeypatch):
  monkeypatch.chdir(tmp_path)
  with pytest.raises(ConfigError, match=r"Unknown config key 'lr'.*'lr=3e-4/config\.yaml' was read as key=value "
                     r"overrides because no such file exists \(relative to "):
    ExperimentConfig().override("lr=3e-4/config.yaml")
  with pytest.raises(ConfigError) as raised:  # a plain typo gets no note
    ExperimentConfig().override("trainer.train_stps=3")
  assert "no such file" not in str(raised.value)


def test_a_leading_tilde_in_a_key_naming_files_is_expanded_from_every_source(tmp_path, monkeypatch):
  # bash leaves `~` after `--params_override=task.init_checkpoint=`: the run looked for a folder named `~`.
  from official_albert import train
  from tasks.pretraining import PretrainingTaskConfig
  monkeypatch.setenv("HOME", str(tmp_path))
  params = train.build_params("albert_tiny_pretrain", params_override=[
      "task.init_checkpoint=~/models/pre,task.train_data.input_path=~/data/a.tfrecord,~/data/b-*.tfrecord",
      "task.validation_data.input_path=gs://bucket/~x/dev.tfrecord,trainer.best_checkpoint_metric=~loss"])
  assert params.task.init_checkpoint == f"{tmp_path}/models/pre"
  assert params.task.train_data.input_path == f"{tmp_path}/data/a.tfrecord,{tmp_path}/data/b-*.tfrecord"
  # A URL, a key that names no file and a lone `~` (null: '') are kept.
  assert params.task.validation_data.input_path == "gs://bucket/~x/dev.tfrecord"
  assert (params.trainer.best_checkpoint_metric, params.override("task.init_checkpoint=~").task.init_checkpoint) == (
      "~loss", "")
  config_file = tmp_path / "c.yaml"  # config files and dicts alike
  config_file.write_text("task:\n  spm_model_file: ~/spm/30k.model\n")
  base = ExperimentConfig(task=PretrainingTaskConfig())
  assert base.override(str(config_file)).task.spm_model_file == f"{tmp_path}/spm/30k.model"
  assert base.override({"task.train_data.input_path": "~"}).task.train_data.input_path == str(tmp_path)
  with pytest.raises(ValueError, match=r"task\.init_checkpoint=~no_such_user_s23/m: no user 'no_such_user_s23'.*"
                     r"write the full path"):
    base.override("task.init_checkpoint=~no_such_user_s23/m")


@pytest.mark.parametrize("key_value, message", [
    ("trainer.learning_rate=-1e-3", r"trainer\.learning_rate must be finite and >= 0.*got -0\.001"),
    ("trainer.learning_rate=nan", r"trainer\.learning_rate must be finite and >= 0.*got nan"),
    ("trainer.learning_rate=inf", r"trainer\.learning_rate must be finite and >= 0.*got inf"),
    ("trainer.beta_1=1.5", r"trainer\.beta_1 must be in \[0, 1\), got 1\.5"),
    ("trainer.beta_2=1.0", r"trainer\.beta_2 must be in \[0, 1\), got 1\.0"),
    ("trainer.beta_1=-0.1", r"trainer\.beta_1 must be in \[0, 1\)"),
    ("trainer.epsilon=-1", r"trainer\.epsilon must be finite and > 0, got -1"),
    ("trainer.epsilon=0", r"trainer\.epsilon must be finite and > 0, got 0"),
    ("trainer.weight_decay_rate=-0.1", r"trainer\.weight_decay_rate must be finite and >= 0.*got -0\.1"),
    ("trainer.poly_power=-1", r"trainer\.poly_power must be finite and > 0, got -1"),
    ("trainer.clip_norm=nan", r"trainer\.clip_norm must be finite, or <= 0 to disable clipping, got nan"),
    ("trainer.warmup_steps=-1", r"trainer\.warmup_steps and trainer\.start_warmup_step must be >= 0"),
])
def test_optimizer_numbers_out_of_range_are_refused_naming_the_key(key_value, message):
  # A negative learning rate trained uphill to exit 0 (CLI audit F10); NaN / inf / beta >= 1 trained too.
  with pytest.raises(ConfigError, match=message):
    ExperimentConfig().override(key_value)


def test_optimizer_numbers_at_the_edges_of_their_ranges_are_accepted():
  # learning_rate 0 is used on purpose (a frozen model's chance-level checks); clip_norm <= 0 disables clipping.
  params = ExperimentConfig().override("trainer.learning_rate=0,trainer.beta_1=0,trainer.weight_decay_rate=0,"
                                       "trainer.clip_norm=-1,trainer.warmup_steps=0")
  assert (params.trainer.learning_rate, params.trainer.clip_norm) == (0.0, -1.0)


def test_runtime_tpu_with_a_strategy_that_never_uses_it_is_refused():
  with pytest.raises(ConfigError, match=r"runtime\.tpu='my-tpu' is set but runtime\.distribution_strategy="
                     r"'one_device'.*runtime\.tpu=''"):
    ExperimentConfig().override("runtime.tpu=my-tpu,runtime.distribution_strategy=one_device")
  for strategy in ("", "tpu"):
    params = ExperimentConfig().override({"runtime": {"tpu": "local", "distribution_strategy": strategy}})
    assert params.runtime.tpu == "local"


def test_dynamic_padding_is_refused_for_a_block_sparse_model():
  """Block-sparse attention's pattern follows the padded length: pad_to_multiple_of would change the outputs at real
  tokens (metrics depending on the batch's other examples), so the pair is refused naming both keys and the fix."""
  sparse = {"task.model.attention_type": "block_sparse", "task.model.block_size": 4}
  for data in ("train_data", "validation_data"):
    with pytest.raises(ConfigError, match=rf"task\.{data}\.pad_to_multiple_of=16 with task\.model\.attention_type="
                                          rf"block_sparse.*set task\.{data}\.pad_to_multiple_of=0"):
      ExperimentConfig().override({**sparse, f"task.{data}.pad_to_multiple_of": 16}).validate()
  ExperimentConfig().override({**sparse, "task.train_data.length_bucket_window": 8}).validate()  # (no trimming)
  ExperimentConfig().override({"task.train_data.pad_to_multiple_of": 16}).validate()  # dense: fine
