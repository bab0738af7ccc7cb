"""Typed configs in the Model Garden `hyperparams` manner: dataclasses with checked overrides and YAML round trips.

`Config` is the base of every config dataclass. `override(params, overrides)` applies a dict, a YAML/JSON string, a
`key=value,...` string or a YAML/JSON file to a copy, checking every key against the dataclass fields (unknown keys
raise with the full key path and a "did you mean" hint) and every value against the field's type (YAML 1.1 quirks
such as `1e-4` read as a string are coerced). A config section may reset itself from a named preset when an override
sets its `preset` key (see `Config.apply_preset`), before the other keys of the same override are applied.
"""

from __future__ import annotations

import copy
import dataclasses
import difflib
import logging
import re
import typing
from typing import Any, Dict, List, Union

import yaml

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



# ------------------------------------------------------------------------------------------------- overrides
_KV_SPLIT = re.compile(r",\s*(?=[A-Za-z_][\w.]*\s*=)")



def parse_overrides(source: OverrideSource) -> Dict[str, Any]:
  """Turns an override source into a nested dict.

  Args:
    source: None/'' (nothing), a dict (keys may be dotted: {"task.model.preset": ...}), a Config, a path to a
      YAML/JSON file (local or gs://), a YAML/JSON string, or a `a.b=1,c.d=x` string.

  Returns:
    A nested dict.
  """
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
  origin = "<string>"
  if "\n" not in text and not text.startswith("{") and _looks_like_path(text) and file_io.exists(text):
    origin = text
    with file_io.open_file(text, "r") as f:
      text = f.read()
  try:
    data = yaml.safe_load(text)
  except yaml.YAMLError as e:
    mark = getattr(e, "problem_mark", None)
    where = f"{origin}:{mark.line + 1}" if mark is not None else origin
    raise ConfigError(f"{where}: invalid YAML/JSON ({getattr(e, 'problem', e)}).") from None
  if isinstance(data, str) and "=" in data and origin == "<string>":
    data = {}
    for item in _KV_SPLIT.split(text):
      key, sep, value = item.partition("=")
      if not sep or not key.strip():
        raise ConfigError(f"Override {item!r} is not of the form key=value.")
      data[key.strip()] = yaml.safe_load(value) if value.strip() else ""
  if data is None:
    return {}
  if not isinstance(data, dict):
    raise ConfigError(f"{origin}: overrides must be a mapping, got {type(data).__name__}: {text[:80]!r}.")
  return _expand_dotted(data, origin)


def _looks_like_path(text: str) -> bool:
  return "=" not in text and ":" not in text.replace("://", "") and (
      text.endswith((".yaml", ".yml", ".json")) or "/" in text)


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
  data = parse_overrides(overrides)
  result = copy.deepcopy(params)
  _apply(result, data, "", is_strict)
  result.validate()
  return result


def _apply(config: Config, data: Dict[str, Any], prefix: str, is_strict: bool) -> None:
  fields = {f.name: f for f in dataclasses.fields(config)}
  hints = typing.get_type_hints(type(config))
  items = list(data.items())
  if "preset" in data and "preset" in fields:
    # The preset resets the section first, so the keys given beside it win regardless of their order.
    config.apply_preset(data["preset"], prefix)
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
        raise ConfigError(f"Config key '{path}' is a section; expected a mapping, got {value!r}.")
      _apply(current, value, path + ".", is_strict)
      continue
    setattr(config, key, _coerce(value, hints[key], path))


def _coerce(value: Any, annotation: Any, path: str) -> Any:
  origin = typing.get_origin(annotation)
  args = typing.get_args(annotation)
  if annotation is Any:
    return value
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
    if isinstance(value, str):
      value = [v.strip() for v in value.split(",") if v.strip()]
    if not isinstance(value, (list, tuple)):
      raise ConfigError(f"Config key '{path}' expects a list, got {value!r}.")
    inner = args[0] if args else Any
    return [_coerce(v, inner, f"{path}[{i}]") for i, v in enumerate(value)]
  if origin in (dict, Dict):
    if not isinstance(value, dict):
      raise ConfigError(f"Config key '{path}' expects a mapping, got {value!r}.")
    return dict(value)
  if annotation in _SCALARS:
    return _SCALARS[annotation](value, path)
  if isinstance(annotation, type) and dataclasses.is_dataclass(annotation):
    raise ConfigError(f"Config key '{path}' is a section; expected a mapping.")
  return value


def _to_bool(value: Any, path: str) -> bool:
  if isinstance(value, bool):
    return value
  if isinstance(value, str) and value.lower() in ("true", "false"):
    return value.lower() == "true"
  raise ConfigError(f"Config key '{path}' expects a bool, got {value!r}.")


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
  if isinstance(value, str):
    return value
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
