"""Typed configs in the Model Garden `hyperparams` manner: dataclasses with checked overrides and YAML round trips.

`Config` is the base of every config dataclass. `override(params, overrides)` applies a dict, a YAML/JSON string, a
`key=value,...` string or a YAML/JSON file to a copy, checking every key against the dataclass fields (unknown keys
raise with the full key path and a "did you mean" hint) and every value against the field's type. A config section
may reset itself from a named preset when an override sets its `preset` key (see `Config.apply_preset`), before the
other keys of the same override are applied. A key naming files or folders (its last part a path flag's name,
`cli.is_path_flag`, or `*_checkpoint`) has `~` / `~user` expanded (`file_io.expand_home`): bash leaves it after `=`.

YAML is read as the config's types need it, not as YAML 1.1 types it: only true/false (True/TRUE, False/FALSE) are
booleans (`distribution_strategy: off` is 'off'); numbers are YAML 1.2's (`0127` is 127, not octal 87; `1:30` is no
number); a string field keeps the text as written of a value YAML types (`init_checkpoint=20241130`) or that YAML
would change in a `key=value` (`label_separator=|`, `runs/exp #3/model`: `_kv_value`); an int field takes an integral
float (`train_steps=1e5`); a bool field still takes yes/no/on/off. A key written twice in one mapping, or a file that
is not UTF-8, is an error naming the place. A single-line source naming an existing file is that file, whatever '='
or ':' its path holds (`lr=1e-4/`, `2026-11-30T05:00/`); one naming no file that reads as `key=value` (a relative
`lr=1e-4/config.yaml`) is overrides, whose error then says that no such file exists.

Long because: the YAML reading (loader, text-keeping scalars), the override parsing and the typed coercion belong
together: each relies on the others' conventions (`_Raw` lives from the loader to `_coerce`).
"""

from __future__ import annotations

import copy
import dataclasses
import datetime
import difflib
import errno
import logging
import os
import re
import typing
from typing import Any, Dict, List, Union

import yaml

from official_albert import cli
from official_albert import file_io

logger = logging.getLogger(__name__)

OverrideSource = Union[None, str, Dict[str, Any], "Config"]


class ConfigError(ValueError):
  """A config key or value is invalid; the message names the full key path."""


@dataclasses.dataclass
class Config:
  """Base of every typed config: dict/YAML round trip and checked overrides."""

  def as_dict(self) -> Dict[str, Any]:
    """Nested plain dict (only builtins), suitable for YAML/JSON."""
    return _to_builtin(self)

  def to_yaml(self) -> str:
    return yaml.safe_dump(self.as_dict(), sort_keys=False, default_flow_style=False)

  def override(self, overrides: OverrideSource, is_strict: bool = True) -> "Config":
    """Returns a copy with `overrides` applied (see module `override`)."""
    return override(self, overrides, is_strict=is_strict)

  def replace(self, **changes) -> "Config":
    return override(self, changes)

  def apply_preset(self, preset: Any, prefix: str = "") -> None:
    """Resets this section from the named preset (sections with a `preset` field implement it)."""
    raise ConfigError(f"{prefix}preset: this section has no presets.")

  def validate(self) -> None:
    """Checks cross-field constraints; subclasses extend. Raises ConfigError."""
    for field in dataclasses.fields(self):
      value = getattr(self, field.name)
      if isinstance(value, Config):
        value.validate()


# ------------------------------------------------------------------------------------------------- YAML reading
class _Raw:
  """A scalar YAML typed (int, float, date, bool) with the text it was written as: a string field takes the text
  (`20241130`, `1.10`, `2026-11-30` as written), every other field the typed value. Lives only inside `override`;
  `parse_overrides` returns plain values (or the texts)."""

  __slots__ = ("value", "text")

  def __init__(self, value: Any, text: str):
    self.value, self.text = value, text

  def __repr__(self) -> str:
    return repr(self.value)


def _plain(value: Any, keep_text: bool = False) -> Any:
  """`value` with every `_Raw` replaced by its typed value (by its text with `keep_text`), recursively."""
  if isinstance(value, _Raw):
    return value.text if keep_text else value.value
  if isinstance(value, dict):
    return {k: _plain(v, keep_text) for k, v in value.items()}
  if isinstance(value, list):
    return [_plain(v, keep_text) for v in value]
  return value


class _ConfigLoader(yaml.SafeLoader):
  """SafeLoader with YAML 1.2 booleans (true/false only: YAML 1.1 also reads off/on/yes/no/y/n as booleans, so the
  documented `distribution_strategy: off` became False) and numbers (below), scalars kept with their text (`_Raw`)
  and duplicate keys refused (PyYAML keeps the last one silently, dropping a whole section written twice)."""

  origin = "<string>"

  def construct_mapping(self, node, deep=False):
    seen = {}
    for key_node, _ in node.value:
      if isinstance(key_node, yaml.ScalarNode) and key_node.tag != "tag:yaml.org,2002:merge":
        line = key_node.start_mark.line + 1
        if key_node.value in seen:
          raise ConfigError(f"{self.origin}:{line}: duplicate key {key_node.value!r} (first at line "
                            f"{seen[key_node.value]}); PyYAML would keep only the last one. Merge the two into one.")
        seen[key_node.value] = line
    mapping = super().construct_mapping(node, deep=deep)
    return {_plain(k): v for k, v in mapping.items()}


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
                                lambda loader, node, construct=_construct: _Raw(construct(loader, node), node.value))


def _yaml(text: str, origin: str) -> Any:
  """`text` as YAML/JSON with `_ConfigLoader` (raises yaml.YAMLError, and ConfigError for a duplicate key)."""
  loader = _ConfigLoader(text)
  loader.origin = origin
  try:
    return loader.get_single_data()
  finally:
    loader.dispose()


def _load_yaml(text: str, origin: str) -> Any:
  """`_yaml`, with a syntax error turned into a ConfigError naming origin and line."""
  try:
    return _yaml(text, origin)
  except yaml.YAMLError as e:
    mark = getattr(e, "problem_mark", None)
    where = f"{origin}:{mark.line + 1}" if mark is not None else origin
    raise ConfigError(f"{where}: invalid YAML/JSON ({getattr(e, 'problem', e)}).") from None


# ------------------------------------------------------------------------------------------------- overrides
_KV_SPLIT = re.compile(r",\s*(?=[A-Za-z_][\w.]*\s*=)")
_KV_START = re.compile(r"[A-Za-z_][\w.]*\s*=")
_CONFIG_SUFFIXES = (".yaml", ".yml", ".json")


def parse_overrides(source: OverrideSource, keep_text: bool = False) -> Dict[str, Any]:
  """Turns an override source into a nested dict.

  Args:
    source: None/'' (nothing), a dict (keys may be dotted: {"task.model.preset": ...}), a Config, a path to a
      YAML/JSON file (local or gs://; an existing path is read as the file whatever '=' or ':' it holds), a YAML/JSON
      string, or a `a.b=1,c.d=x` string (a value that is not valid YAML on its own, such as `*.tfrecord`, is kept
      as written).
    keep_text: scalars YAML types are their text as written, as a string key reads them (`0755`, not 493).

  Returns:
    A nested dict.

  Raises:
    ConfigError: invalid YAML (naming the file and line), a key written twice, or a non-mapping source.
    FileNotFoundError: a single-line source shaped like a file path (a '/' or a .yaml/.yml/.json suffix, and not
      `key=value`) that does not exist. A `key=value` source shaped like a path (a relative `lr=1e-4/config.yaml`)
      is read as overrides; `override` adds to its ConfigError that no such file exists.
  """
  return _plain(_parse(source), keep_text)


def load_file(path: str) -> Dict[str, Any]:
  """The nested dict of the YAML/JSON config file at `path`, read as a file whatever its name holds (params.yaml of
  a `runs/lr=1e-4/` directory): `parse_overrides` would have to guess. Raises FileNotFoundError naming `path`."""
  return _plain(_read_file(path))


def _read_file(path: str) -> Dict[str, Any]:
  if not file_io.exists(path):
    raise FileNotFoundError(errno.ENOENT, "Config file not found", path)
  with file_io.open_file(path, "rb") as f:
    data = f.read()
  try:  # decoded whole: the offset is the file's. A cp1252 file gave a traceback inside codecs naming no file.
    text = data.decode("utf-8")
  except UnicodeDecodeError as e:
    raise ConfigError(f"{path}: not UTF-8 text (byte 0x{data[e.start]:02x} at offset {e.start}: {e.reason}); save "
                      "it as UTF-8.") from None
  return _as_mapping(_load_yaml(text, path), path, text)


def _parse(source: OverrideSource) -> Dict[str, Any]:
  """`parse_overrides` with `_Raw` scalars kept (for `override`, whose string fields take the text as written)."""
  if source is None:
    return {}
  if isinstance(source, Config):
    return source.as_dict()
  if isinstance(source, dict):
    return _expand_dotted(source, "<dict>")
  if not isinstance(source, str):
    raise ConfigError(f"Cannot use a {type(source).__name__} as config overrides.")
  text = source.strip()
  if not text:
    return {}
  single_line = "\n" not in text
  if single_line and not text.startswith(("{", "[")) and file_io.exists(text) and not file_io.isdir(text):
    return _read_file(text)  # before any '='/':' reading: run directories are named `lr=1e-4` or `...T05:00`
  if single_line and _KV_START.match(text):
    return _expand_dotted(_parse_kv(text), "<string>")
  data = _load_yaml(text, "<string>")
  if isinstance(data, str) and single_line and ("/" in text or text.endswith(_CONFIG_SUFFIXES)):
    raise FileNotFoundError(errno.ENOENT, "Config file not found (nor is it a key=value list or a YAML/JSON "
                            "mapping of overrides)", text)
  if isinstance(data, str) and "=" in data:
    data = _parse_kv(text)
  return _as_mapping(data, "<string>", text)


def _parse_kv(text: str) -> Dict[str, Any]:
  """A `a.b=1,c.d=x` string as a flat dict; each value read by `_kv_value`."""
  data: Dict[str, Any] = {}
  for item in _KV_SPLIT.split(text):
    key, sep, value = item.partition("=")
    if not sep or not key.strip():
      raise ConfigError(f"Override {item!r} is not of the form key=value.")
    data[key.strip()] = _kv_value(value, key.strip())
  return data


def _kv_value(value: str, key: str) -> Any:
  """One `key=value` value: typed scalars (`_Raw`), lists, mappings, quoted strings and null/~ as YAML reads them;
  any other value YAML would change is the text as written. YAML reads `|` / `>` as '' (`label_separator=|` meant one
  label per cell), `#...` as a comment (`runs/exp #3/model` lost ` #3/model`), `!` as None, `&a x` as 'x', and
  refuses `*.tfrecord` and `'my model`. A typed scalar with more (`5 #note`) keeps its value, and that text."""
  text = value.strip()
  if not text:
    return ""
  try:
    data = _yaml(value, f"<override {key}>")
  except yaml.YAMLError:
    return text
  if isinstance(data, _Raw):
    return data if data.text == text else _Raw(data.value, text)
  if data is None:
    return None if text in ("null", "Null", "NULL", "~") else text
  if isinstance(data, str):
    return data if data == text or text.startswith(("'", '"')) else text
  if data in ([None], {None: None}):  # a lone `-` or `?` (block-collection indicators), not a list or a mapping
    return text
  return data


def _as_mapping(data: Any, origin: str, text: str) -> Dict[str, Any]:
  if data is None:
    return {}
  if not isinstance(data, dict):
    data = _plain(data)
    raise ConfigError(f"{origin}: overrides must be a mapping, got {type(data).__name__}: {text[:80]!r}.")
  return _expand_dotted(data, origin)


def _expand_dotted(data: Dict[str, Any], origin: str) -> Dict[str, Any]:
  out: Dict[str, Any] = {}
  for key, value in data.items():
    if not isinstance(key, str):
      raise ConfigError(f"{origin}: config keys must be strings, got {key!r}.")
    if isinstance(value, dict):
      value = _expand_dotted(value, origin)
    parts = key.split(".")
    node = out
    for part in parts[:-1]:
      node = node.setdefault(part, {})
      if not isinstance(node, dict):
        raise ConfigError(f"{origin}: key {key!r} conflicts with a non-mapping value.")
    leaf = parts[-1]
    if isinstance(value, dict) and isinstance(node.get(leaf), dict):
      node[leaf] = _merge(node[leaf], value)
    else:
      node[leaf] = value
  return out


def _merge(a: Dict[str, Any], b: Dict[str, Any]) -> Dict[str, Any]:
  out = dict(a)
  for k, v in b.items():
    out[k] = _merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
  return out


def override(params: Config, overrides: OverrideSource, is_strict: bool = True) -> Config:
  """Returns a deep copy of `params` with `overrides` applied; `params` itself is unchanged.

  Args:
    params: a Config.
    overrides: see `parse_overrides`.
    is_strict: unknown keys raise ConfigError (with the key path and a "did you mean" hint); with False they are
      logged and skipped.

  Returns:
    The new config (validated).
  """
  data = _parse(overrides)
  result = copy.deepcopy(params)
  try:
    _apply(result, data, "", is_strict)
  except ConfigError as e:
    note = _missing_file_note(overrides)
    if not note:
      raise
    raise ConfigError(f"{e}{note}") from None
  result.validate()
  return result


def _missing_file_note(source: OverrideSource) -> str:
  """For a source read as `key=value` that is also shaped like a path naming no file (`lr=1e-4/config.yaml`,
  relative): a note that it may have been meant as that missing file; '' otherwise. `_parse` must read it as
  `key=value` (`task.train_data.input_path=data/*.tfrecord` is an override), so only its failure can tell."""
  if not isinstance(source, str):
    return ""
  text = source.strip()
  if ("\n" in text or not _KV_START.match(text) or len(_KV_SPLIT.split(text)) > 1
      or not ("/" in text or text.endswith(_CONFIG_SUFFIXES)) or file_io.exists(text)):
    return ""
  where = "" if not file_io.is_local(text) or os.path.isabs(text) else f" (relative to {os.getcwd()})"
  return (f" [{text!r} was read as key=value overrides because no such file exists{where}; if it was meant as a "
          "config file, fix the path (the train binary's --config_file is always read as a file).]")


def _apply(config: Config, data: Dict[str, Any], prefix: str, is_strict: bool) -> None:
  fields = {f.name: f for f in dataclasses.fields(config)}
  hints = typing.get_type_hints(type(config))
  items = list(data.items())
  if "preset" in data and "preset" in fields:
    # The preset resets the section first, so the keys given beside it win regardless of their order.
    config.apply_preset(_plain(data["preset"]), prefix)
    items = [(k, v) for k, v in items if k != "preset"]
  for key, value in items:
    path = f"{prefix}{key}"
    if key not in fields:
      close = difflib.get_close_matches(key, sorted(fields), n=1, cutoff=0.6)
      hint = f" (did you mean '{prefix}{close[0]}'?)" if close else ""
      message = (f"Unknown config key '{path}'{hint}. Known keys under '{prefix or '<root>'}': "
                 f"{', '.join(sorted(fields))}.")
      if is_strict:
        raise ConfigError(message)
      logger.warning("%s Skipping it.", message)
      continue
    current = getattr(config, key)
    if isinstance(current, Config):
      if isinstance(value, Config):
        value = value.as_dict()
      if not isinstance(value, dict):
        raise ConfigError(f"Config key '{path}' is a section; expected a mapping, got {_plain(value)!r}.")
      _apply(current, value, path + ".", is_strict)
      continue
    setattr(config, key, _coerce(value, hints[key], path))


def _coerce(value: Any, annotation: Any, path: str) -> Any:
  origin = typing.get_origin(annotation)
  args = typing.get_args(annotation)
  if annotation is Any:
    return _plain(value)
  if origin is Union:
    if value is None and type(None) in args:
      return None
    errors = []
    for arg in args:
      if arg is type(None):
        continue
      try:
        return _coerce(value, arg, path)
      except ConfigError as e:
        errors.append(str(e))
    raise ConfigError(errors[0] if errors else f"Config key '{path}': invalid value {value!r}.")
  if origin in (list, tuple, List):
    if isinstance(value, _Raw):
      value = value.text  # one element, read by the element type below
    if isinstance(value, str):
      value = [v.strip() for v in value.split(",") if v.strip()]
    if not isinstance(value, (list, tuple)):
      raise ConfigError(f"Config key '{path}' expects a list, got {value!r}.")
    inner = args[0] if args else Any
    return [_coerce(v, inner, f"{path}[{i}]") for i, v in enumerate(value)]
  if origin in (dict, Dict):
    if not isinstance(value, dict):
      raise ConfigError(f"Config key '{path}' expects a mapping, got {value!r}.")
    return _plain(dict(value))
  if annotation is str:
    return _to_str(value, path)
  value = _plain(value)
  if annotation in _SCALARS:
    return _SCALARS[annotation](value, path)
  if isinstance(annotation, type) and dataclasses.is_dataclass(annotation):
    raise ConfigError(f"Config key '{path}' is a section; expected a mapping.")
  return value


_BOOL_WORDS = {"true": True, "false": False, "yes": True, "no": False, "on": True, "off": False}


def _to_bool(value: Any, path: str) -> bool:
  if isinstance(value, bool):
    return value
  if isinstance(value, str) and value.lower() in _BOOL_WORDS:
    return _BOOL_WORDS[value.lower()]  # yes/no/on/off: YAML 1.1 booleans, still meant as such where a bool is due
  raise ConfigError(f"Config key '{path}' expects a bool (true or false), got {value!r}.")


def _to_int(value: Any, path: str) -> int:
  if isinstance(value, bool):
    raise ConfigError(f"Config key '{path}' expects an int, got {value!r}.")
  if isinstance(value, int):
    return value
  if isinstance(value, float) and value.is_integer():
    return int(value)
  if isinstance(value, str):
    try:
      return int(value)
    except ValueError:
      pass
    try:  # YAML 1.1 reads `1e5` (no dot) as a string
      number = float(value)
    except ValueError:
      number = None
    if number is not None and number.is_integer():
      return int(number)
  raise ConfigError(f"Config key '{path}' expects an int, got {value!r}.")


def _to_float(value: Any, path: str) -> float:
  if isinstance(value, bool):
    raise ConfigError(f"Config key '{path}' expects a float, got {value!r}.")
  if isinstance(value, (int, float)):
    return float(value)
  if isinstance(value, str):
    try:  # YAML 1.1 reads `1e-4` (no dot) as a string.
      return float(value)
    except ValueError:
      pass
  raise ConfigError(f"Config key '{path}' expects a float, got {value!r}.")


def _to_str(value: Any, path: str) -> str:
  if value is None:
    return ""
  if isinstance(value, str):  # `~` expanded in a key naming files or folders (module docstring)
    leaf = path.rsplit(".", 1)[-1]
    return file_io.expand_home(value, path) if cli.is_path_flag(leaf) or leaf.endswith("_checkpoint") else value
  if isinstance(value, _Raw):
    return value.text  # as written: `20241130`, `2026-11-30`, `1.10`, `off`
  if isinstance(value, (int, float, datetime.date)) and not isinstance(value, bool):
    return str(value)  # a dict source's number (no text to keep)
  raise ConfigError(f"Config key '{path}' expects a string, got {value!r} ({type(value).__name__}).")


_SCALARS = {bool: _to_bool, int: _to_int, float: _to_float, str: _to_str}


def _to_builtin(value: Any) -> Any:
  if dataclasses.is_dataclass(value) and not isinstance(value, type):
    return {f.name: _to_builtin(getattr(value, f.name)) for f in dataclasses.fields(value)}
  if isinstance(value, (list, tuple)):
    return [_to_builtin(v) for v in value]
  if isinstance(value, dict):
    return {str(k): _to_builtin(v) for k, v in value.items()}
  return value
