"""How config sources combine and read (audit s29): several override lines, quoted values, the stack validated at its
end, `~` and bracketed paths, tab-indented JSON, tokenizer_mode and the experiment params.yaml records."""

import json
import re

import pytest
import yaml

from official_albert import train
from official_albert.training.experiment_config import load_params_yaml
from official_albert.training.experiment_config import save_params_yaml
from official_albert.training.hyperparams import ConfigError
from official_albert.training.hyperparams import load_file
from official_albert.training.hyperparams import parse_overrides


# ------------------------------------------------------------------------------------------- 1: key=value text
def test_key_value_overrides_on_several_lines_give_every_key():
  # A shell script's "a=x<newline>b=33" was folded by YAML into one string: spm_model_file held the second line.
  assert parse_overrides("a.b=x\nc.d=1") == {"a": {"b": "x"}, "c": {"d": 1}}
  assert parse_overrides("\n  a.b=x, e=2\n\n  # a note\n  c.d=1\n") == {"a": {"b": "x"}, "e": 2, "c": {"d": 1}}
  params = train.build_params("albert_tiny_pretrain",
                              params_override="task.spm_model_file=x.model\ntrainer.train_steps=33")
  assert (params.task.spm_model_file, params.trainer.train_steps) == ("x.model", 33)


def test_lines_ending_in_commas_and_lists_broken_over_lines_read_as_one_list():
  # (review s29) "a=1,<newline>b=2" as YAML folded it: the comma ends the first value, it is not part of it.
  assert parse_overrides("task.init_checkpoint=runs/x,\ntrainer.train_steps=5") == {
      "task": {"init_checkpoint": "runs/x"}, "trainer": {"train_steps": 5}}
  assert parse_overrides("trainer.train_steps=1000,\n  trainer.warmup_steps=10") == {
      "trainer": {"train_steps": 1000, "warmup_steps": 10}}
  assert parse_overrides("trainer.exclude_from_weight_decay=[LayerNorm,\n  bias]\nx=1") == {
      "trainer": {"exclude_from_weight_decay": ["LayerNorm", "bias"]}, "x": 1}


def test_a_glob_starting_with_a_bracket_is_a_value_as_written():
  assert parse_overrides("task.train_data.input_path=[0-9]*.tfrecord") == {
      "task": {"train_data": {"input_path": "[0-9]*.tfrecord"}}}
  assert parse_overrides("task.train_data.input_path=[0-9]*.tfrecord,trainer.train_steps=5") == {
      "task": {"train_data": {"input_path": "[0-9]*.tfrecord"}}, "trainer": {"train_steps": 5}}


def test_a_line_that_is_no_key_value_among_key_value_lines_is_refused_naming_it():
  with pytest.raises(ConfigError, match=r"<string>:3: 'oops' is not key=value"):
    parse_overrides("a.b=x\nc.d=1\noops")


def test_a_quoted_value_keeps_its_commas():
  assert parse_overrides("task.init_checkpoint='a,b=c',x=1") == {"task": {"init_checkpoint": "a,b=c"}, "x": 1}
  assert parse_overrides('a="p, q=r"') == {"a": "p, q=r"}
  assert parse_overrides("a=x,b=y") == {"a": "x", "b": "y"}  # unquoted: still two overrides


def test_an_unclosed_list_value_is_refused_naming_the_key():
  with pytest.raises(ConfigError, match=r"trainer\.exclude_from_weight_decay=\[LayerNorm, bias.*does not parse"):
    parse_overrides("trainer.exclude_from_weight_decay=[LayerNorm, bias")


def test_a_bad_regex_in_exclude_from_weight_decay_is_refused_naming_the_key():
  with pytest.raises(ConfigError, match=r"trainer\.exclude_from_weight_decay\[1\]='a\(b' is not a regular"):
    train.build_params("albert_tiny_pretrain", params_override="trainer.exclude_from_weight_decay=[LayerNorm, a(b]")


# ------------------------------------------------------------------------------------- 2: validated at the end
def test_the_stack_is_validated_once_at_its_end(tmp_path):
  # Each source alone leaves 128 / 12 (not divisible); the stack is valid.
  params = train.build_params("albert_tiny_pretrain", params_override=["task.model.num_attention_heads=12",
                                                                       "task.model.hidden_size=768"])
  assert (params.task.model.hidden_size, params.task.model.num_attention_heads) == (768, 12)
  (tmp_path / "a.yaml").write_text("task:\n  model:\n    num_attention_heads: 12\n")
  (tmp_path / "b.yaml").write_text("task:\n  model:\n    hidden_size: 768\n")
  params = train.build_params("albert_tiny_pretrain", [str(tmp_path / "a.yaml"), str(tmp_path / "b.yaml")])
  assert params.task.model.hidden_size == 768


def test_an_invalid_final_stack_still_fails_naming_the_key():
  with pytest.raises(ConfigError, match=r"hidden_size \(128\) is not divisible by num_attention_heads \(12\)"):
    train.build_params("albert_tiny_pretrain", params_override=["task.model.hidden_size=768",
                                                                "task.model.num_attention_heads=12",
                                                                "task.model.hidden_size=128"])
  with pytest.raises(ConfigError, match="trainer.train_steps must be > 0"):
    train.build_params("albert_tiny_pretrain", params_override=["trainer.train_steps=0"], mode="train")


def test_an_embedding_loss_then_its_score_column_in_the_next_flag():
  params = train.build_params("text_embedding", params_override=["task.loss=cosent", "task.score_column=s"])
  assert (params.task.loss, params.task.score_column) == ("cosent", "s")


# --------------------------------------------------------------------------------------------- 3, 4, 5: files
def test_a_params_override_file_with_a_tilde_is_read(tmp_path, monkeypatch):
  monkeypatch.setenv("HOME", str(tmp_path))
  (tmp_path / "o.yaml").write_text("trainer:\n  train_steps: 21\n")
  assert train.build_params("albert_tiny_pretrain", params_override="~/o.yaml").trainer.train_steps == 21


def test_a_relative_config_file_starting_with_a_bracket_is_read_as_a_file(tmp_path, monkeypatch):
  (tmp_path / "[exp1]").mkdir()
  (tmp_path / "[exp1]" / "config.yaml").write_text("trainer:\n  train_steps: 33\n")
  monkeypatch.chdir(tmp_path)
  assert train.build_params("albert_tiny_pretrain", ["[exp1]/config.yaml"]).trainer.train_steps == 33


def test_a_tab_indented_json_config_loads(tmp_path):
  path = tmp_path / "c.json"
  path.write_text(json.dumps({"trainer": {"train_steps": 44, "learning_rate": 1e-4}}, indent="\t"))
  params = train.build_params("albert_tiny_pretrain", [str(path)])
  assert (params.trainer.train_steps, params.trainer.learning_rate) == (44, 1e-4)
  assert load_file(str(path)) == {"trainer": {"train_steps": 44, "learning_rate": 1e-4}}


# ---------------------------------------------------------------------------------------- 7: tokenizer_mode
def test_tokenizer_mode_is_checked_at_config_time_naming_the_key():
  with pytest.raises(ConfigError, match=r"task\.tokenizer_mode='referense' is not one of"):
    train.build_params("text_classification", params_override="task.tokenizer_mode=referense")
  assert train.build_params("text_classification",
                            params_override="task.tokenizer_mode=reference").task.tokenizer_mode == "reference"


# -------------------------------------------------------------------------------------- 9: params.yaml's name
def test_params_yaml_records_its_experiment_and_another_experiment_is_refused(tmp_path):
  params = train.build_params("text_regression")
  path = save_params_yaml(params, str(tmp_path))
  text = (tmp_path / "params.yaml").read_text()
  assert text.splitlines()[0] == "# experiment: text_regression"
  assert yaml.safe_load(text) == params.as_dict()  # older readers: the name is a comment
  assert train.build_params("text_regression", [path]).as_dict() == params.as_dict()
  with pytest.raises(ConfigError, match=r"experiment 'text_regression'.*--experiment=text_classification"):
    train.build_params("text_classification", [path])
  with pytest.raises(ConfigError, match=r"experiment 'text_regression'.*--experiment=text_classification"):
    train.build_params("text_classification", params_override=path)
  with pytest.raises(ConfigError, match="text_regression"):
    load_params_yaml(train.build_params("text_classification"), path)
  # A byte-order mark (Windows editors, PowerShell) or a blank line before the comment hid it, and the guard.
  for prefix in (b"\xef\xbb\xbf", b"\n", b"\xef\xbb\xbf\r\n"):
    edited = tmp_path / "edited.yaml"
    edited.write_bytes(prefix + (tmp_path / "params.yaml").read_bytes())
    with pytest.raises(ConfigError, match=r"experiment 'text_regression'.*--experiment=text_classification"):
      train.build_params("text_classification", [str(edited)])


def test_an_empty_yaml_block_scalar_is_refused_naming_the_quoted_form(tmp_path):
  """`label_separator: |` in a config file read as '' (an empty block scalar): multi-label cells were not split."""
  path = tmp_path / "multi.yaml"
  path.write_text("task:\n  multi_label: true\n  label_separator: |\n")
  with pytest.raises(ConfigError, match=r"multi\.yaml:3: label_separator: \| opens an empty YAML block scalar.*"
                                        r"label_separator: \"\|\""):
    train.build_params("text_classification", [str(path)])
  path.write_text('task:\n  multi_label: true\n  label_separator: "|"\n')
  assert train.build_params("text_classification", [str(path)]).task.label_separator == "|"


def test_a_params_yaml_given_with_a_tilde_is_checked_too(tmp_path, monkeypatch):
  # (review s29) the check looked for "~/run/params.yaml" literally, which _parse reads after expanding `~`.
  monkeypatch.setenv("HOME", str(tmp_path))
  (tmp_path / "run").mkdir()
  save_params_yaml(train.build_params("text_regression"), str(tmp_path / "run"))
  with pytest.raises(ConfigError, match=r"experiment 'text_regression'"):
    train.build_params("text_classification", params_override="~/run/params.yaml")


def test_a_quoted_list_value_is_one_element():
  """Before: 'bias{1,2}' was split at its comma into two regexes, 'bias{1' and '2}'."""
  params = train.build_params("albert_tiny_pretrain", params_override="trainer.exclude_from_weight_decay='bias{1,2}'")
  assert params.trainer.exclude_from_weight_decay == ["bias{1,2}"]
  params = train.build_params("albert_tiny_pretrain", params_override="trainer.exclude_from_weight_decay=LayerNorm")
  assert params.trainer.exclude_from_weight_decay == ["LayerNorm"]
  params = train.build_params("albert_tiny_pretrain",
                              params_override="trainer.exclude_from_weight_decay=[LayerNorm, 'bias{1,2}']")
  assert params.trainer.exclude_from_weight_decay == ["LayerNorm", "bias{1,2}"]
  assert parse_overrides("a='x,y'") == {"a": "x,y"} and type(parse_overrides("a='x,y'")["a"]) is str


@pytest.mark.parametrize("text, key", [
    ("trainer.train_steps: 5\ntrainer:\n  train_steps: 7\n", "trainer.train_steps"),
    ("trainer:\n  train_steps: 7\ntrainer.train_steps: 5\n", "trainer.train_steps"),
    ("task.model.hidden_size: 8\ntask:\n  model:\n    hidden_size: 16\n", "task.model.hidden_size"),
    ("task:\n  model.hidden_size: 8\n  model:\n    hidden_size: 16\n", "model.hidden_size"),
], ids=["dotted-first", "nested-first", "deep", "inner"])
def test_one_key_spelled_dotted_and_nested_in_one_file_is_refused(tmp_path, text, key):
  """The YAML reader refuses a key written twice; written once dotted and once nested it was merged and the later
  value kept silently. Different keys of one section still merge."""
  path = tmp_path / "c.yaml"
  path.write_text(text)
  with pytest.raises(ConfigError, match=rf"c\.yaml: the key '{re.escape(key)}' is set twice in one mapping"):
    train.build_params("albert_tiny_pretrain", [str(path)])
  path.write_text("trainer.train_steps: 5\ntrainer:\n  warmup_steps: 1\n")
  params = train.build_params("albert_tiny_pretrain", [str(path)])
  assert (params.trainer.train_steps, params.trainer.warmup_steps) == (5, 1)
