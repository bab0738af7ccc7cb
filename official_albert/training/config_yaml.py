"""How config text is read: YAML/JSON as the config's types need it, not as YAML 1.1 types it (`hyperparams`).

Only true/false (True/TRUE, False/FALSE) are booleans (`distribution_strategy: off` is 'off'); numbers are YAML 1.2's
(`0127` is 127, not octal 87; `1:30` is no number); every typed scalar keeps the text it was written as (`Raw`), so
that a string field can take the text (`init_checkpoint: 20241130`, `1.10`); a key written twice in one mapping is an
error naming the line (PyYAML keeps the last one); JSON indented with tabs loads (PyYAML refuses tabs).
"""

from __future__ import annotations

import json
import re
from typing import Any

import yaml


class ConfigError(ValueError):
  """A config key or value is invalid; the message names the full key path."""


class Raw:
  """A scalar YAML typed (int, float, date, bool) with the text it was written as: a string field takes the text
  (`20241130`, `1.10`, `2026-11-30` as written), every other field the typed value. Lives only inside `override`;
  `parse_overrides` returns plain values (or the texts)."""

  __slots__ = ("value", "text")

  def __init__(self, value: Any, text: str):
    self.value, self.text = value, text

  def __repr__(self) -> str:
    return repr(self.value)


class QuotedText(str):
  """A `key=value` override's quoted string (`trainer.exclude_from_weight_decay='bias{1,2}'`): one list element,
  never split at its commas as an unquoted `a,b` is. Lives only inside `override`, like `Raw`."""


def plain(value: Any, keep_text: bool = False) -> Any:
  """`value` with every `Raw` replaced by its typed value (by its text with `keep_text`), recursively."""
  if isinstance(value, Raw):
    return value.text if keep_text else value.value
  if isinstance(value, QuotedText):
    return str(value)
  if isinstance(value, dict):
    return {k: plain(v, keep_text) for k, v in value.items()}
  if isinstance(value, list):
    return [plain(v, keep_text) for v in value]
  return value


class _ConfigLoader(yaml.SafeLoader):
  """SafeLoader with YAML 1.2 booleans (true/false only: YAML 1.1 also reads off/on/yes/no/y/n as booleans, so the
  documented `distribution_strategy: off` became False) and numbers (below), scalars kept with their text (`Raw`)
  and duplicate keys refused (PyYAML keeps the last one silently, dropping a whole section written twice)."""

  origin = "<string>"

  def construct_mapping(self, node, deep=False):
    seen = {}
    for key_node, value_node in node.value:
      if isinstance(key_node, yaml.ScalarNode) and key_node.tag != "tag:yaml.org,2002:merge":
        line = key_node.start_mark.line + 1
        if (isinstance(value_node, yaml.ScalarNode) and value_node.style in ("|", ">")
            and not value_node.value.strip()):  # (`label_separator: |` read as '', silently)
          raise ConfigError(f"{self.origin}:{line}: {key_node.value}: {value_node.style} opens an empty YAML block "
                            f"scalar (the value ''); to give the character itself, quote it: "
                            f"{key_node.value}: \"{value_node.style}\"")
        if key_node.value in seen:
          raise ConfigError(f"{self.origin}:{line}: duplicate key {key_node.value!r} (first at line "
                            f"{seen[key_node.value]}); PyYAML would keep only the last one. Merge the two into one.")
        seen[key_node.value] = line
    mapping = super().construct_mapping(node, deep=deep)
    return {plain(k): v for k, v in mapping.items()}


_YAML11_NUMBERS = ("tag:yaml.org,2002:bool", "tag:yaml.org,2002:int", "tag:yaml.org,2002:float")
_ConfigLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag not in _YAML11_NUMBERS]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()}
_ConfigLoader.add_implicit_resolver("tag:yaml.org,2002:bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"),
                                    list("tTfF"))
# YAML 1.2 numbers (decimal with `_`, 0x, 0o; `1e5` a float): YAML 1.1 read a seed `0127` as 87 and `1:30` as 90.
_ConfigLoader.add_implicit_resolver("tag:yaml.org,2002:int", re.compile(
    r"^[-+]?(?:[0-9][0-9_]*|0x[0-9a-fA-F_]+|0o[0-7_]+)$"), list("-+0123456789"))
_ConfigLoader.add_implicit_resolver("tag:yaml.org,2002:float", re.compile(
    r"^(?:[-+]?(?:\.[0-9][0-9_]*|[0-9][0-9_]*(?:\.[0-9_]*)?)(?:[eE][-+]?[0-9]+)?|[-+]?\.(?:inf|Inf|INF)"
    r"|\.(?:nan|NaN|NAN))$"), list("-+.0123456789"))


def _yaml12_number(loader, node) -> Any:
  text = loader.construct_scalar(node).replace("_", "")
  try:  # `0127` is decimal 127, as YAML 1.2 and Python's int() read it
    if node.tag.endswith(":int"):
      return int(text, 0) if text.lstrip("+-")[:2] in ("0x", "0o") else int(text, 10)
    return float(text.lower().replace(".inf", "inf").replace(".nan", "nan"))
  except ValueError:  # only an explicit `!!int` / `!!float` tag reaches here with other text
    raise yaml.constructor.ConstructorError(None, None, f"{text!r} is not a number", node.start_mark) from None


for _tag, _construct in (("int", _yaml12_number), ("float", _yaml12_number),
                         ("bool", yaml.SafeLoader.construct_yaml_bool),
                         ("timestamp", yaml.SafeLoader.construct_yaml_timestamp)):
  _ConfigLoader.add_constructor(f"tag:yaml.org,2002:{_tag}",
                                lambda loader, node, construct=_construct: Raw(construct(loader, node), node.value))


def parse_yaml(text: str, origin: str) -> Any:
  """`text` as YAML/JSON with `_ConfigLoader` (raises yaml.YAMLError, and ConfigError for a duplicate key)."""
  loader = _ConfigLoader(text)
  loader.origin = origin
  try:
    return loader.get_single_data()
  finally:
    loader.dispose()


def load_yaml(text: str, origin: str) -> Any:
  """`parse_yaml`, with a syntax error turned into a ConfigError naming origin and line. JSON indented with tabs (valid
  JSON; PyYAML refuses tabs as indentation, yaml/pyyaml#450) is read with them as spaces: JSON holds no raw tab in a
  string, so only whitespace between tokens changes."""
  try:
    return parse_yaml(text, origin)
  except yaml.YAMLError as e:
    if "\t" in text and text.lstrip().startswith(("{", "[")) and _is_json(text):
      return load_yaml(text.replace("\t", " "), origin)
    mark = getattr(e, "problem_mark", None)
    where = f"{origin}:{mark.line + 1}" if mark is not None else origin
    raise ConfigError(f"{where}: invalid YAML/JSON ({getattr(e, 'problem', e)}).") from None


def _is_json(text: str) -> bool:
  try:
    json.loads(text)
  except ValueError:
    return False
  return True
