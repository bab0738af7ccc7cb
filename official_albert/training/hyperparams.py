"""Typed configs in the Model Garden `hyperparams` manner: dataclasses with checked overrides and YAML round trips.

`Config` is the base of every config dataclass. `override(params, overrides)` applies a dict, a YAML/JSON string,
`key=value,...` strings (one line or several) or a YAML/JSON file to a copy, checking every key against the dataclass
fields (unknown keys raise with the full key path and a "did you mean" hint) and every value against its type. A section
may reset itself from a named preset when an override sets its `preset` key (see `Config.apply_preset`), before the
other keys of the same override are applied. A key naming files or folders (its last part a path flag's name,
`cli.is_path_flag`, or `*_checkpoint`) has `~` / `~user` expanded (`file_io.expand_home`): bash leaves it after `=`.

YAML is read as the config's types need it (`config_yaml`: YAML 1.2 booleans and numbers, the text of typed scalars
kept); a string field keeps the text as written of a value YAML types (`init_checkpoint=20241130`) or that YAML would
change in a `key=value` (`label_separator=|`, `runs/exp #3/model`: `_kv_value`); an int field takes an integral float
(`train_steps=1e5`); a bool field still takes yes/no/on/off. A key written twice in one mapping, or a file that is not
UTF-8, is an error naming the place. A single-line source naming an existing file (`~` expanded) is that file,
whatever '=' or ':' its path holds (`lr=1e-4/`, `2026-11-30T05:00/`); one naming no file that reads as `key=value` (a
relative `lr=1e-4/config.yaml`) is overrides, whose error then says that no such file exists. A `ConfigFile` is
always a file (the train binary's --config_file: `[exp1]/config.yaml` would read as YAML text).

Long because: the override parsing (sources, `key=value` text) and the typed coercion belong together: each relies on
the other's conventions (`Raw` lives from the reading to `_coerce`).
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
from official_albert.training.config_yaml import ConfigError
from official_albert.training.config_yaml import load_yaml
from official_albert.training.config_yaml import parse_yaml
from official_albert.training.config_yaml import plain
from official_albert.training.config_yaml import QuotedText
from official_albert.training.config_yaml import Raw

logger = logging.getLogger(__name__)

OverrideSource = Union[None, str, Dict[str, Any], "Config", "ConfigFile"]


@dataclasses.dataclass
class Config:
  """Base of every typed config: dict/YAML round trip and checked overrides."""

  def as_dict(self) -> Dict[str, Any]:
    """Nested plain dict (only builtins), suitable for YAML/JSON."""
    return _to_builtin(self)

  def to_yaml(self) -> str:
    return yaml.safe_dump(self.as_dict(), sort_keys=False, default_flow_style=False)

  def override(self, overrides: OverrideSource, is_strict: bool = True, validate: bool = True) -> "Config":
    """Returns a copy with `overrides` applied (see module `override`)."""
    return override(self, overrides, is_strict=is_strict, validate=validate)

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


@dataclasses.dataclass(frozen=True)
class ConfigFile:
  """A source that is the YAML/JSON file at `path`, whatever its name holds (the train binary's --config_file): as a
  string, a relative `[exp1]/config.yaml` would be read as YAML text."""
  path: str


# ------------------------------------------------------------------------------------------------- overrides
_KV_SPLIT = re.compile(r",\s*(?=[A-Za-z_][\w.]*\s*=)")
_KV_START = re.compile(r"[A-Za-z_][\w.]*\s*=")
# A quoted or bracketed value right after '=': a comma inside it separates no overrides (`a='x,b=c'`).
_KV_WHOLE = re.compile(r"""=\s*(?:'(?:[^']|'')*'|"(?:[^"\\]|\\.)*"|\[[^\[\]]*\]|\{[^{}]*\})""")
_CONFIG_SUFFIXES = (".yaml", ".yml", ".json")


def parse_overrides(source: OverrideSource, keep_text: bool = False) -> Dict[str, Any]:
  """Turns an override source into a nested dict.

  Args:
    source: None/'' (nothing), a dict (keys may be dotted: {"task.model.preset": ...}), a Config, a `ConfigFile`,
      a path to a YAML/JSON file (local or gs://, `~` expanded; an existing path is read as the file whatever '=' or
      ':' it holds), a YAML/JSON string, or a `a.b=1,c.d=x` string, or one such per line (blank and `#` lines
      skipped; a value that is not valid YAML on its own, such as `*.tfrecord`, is kept as written; a quoted one
      keeps its commas).
    keep_text: scalars YAML types are their text as written, as a string key reads them (`0755`, not 493).

  Returns:
    A nested dict.

  Raises:
    ConfigError: invalid YAML (naming the file and line), a key written twice, a non-mapping source, a line of a
      multi-line `key=value` list that is none (naming it), or a `[` / `{` value that does not parse (naming the key).
    FileNotFoundError: a single-line source shaped like a file path (a '/' or a .yaml/.yml/.json suffix, and not
      `key=value`) that does not exist. A `key=value` source shaped like a path (a relative `lr=1e-4/config.yaml`)
      is read as overrides; `override` adds to its ConfigError that no such file exists.
  """
  return plain(_parse(source), keep_text)


def load_file(path: str) -> Dict[str, Any]:
  """The nested dict of the YAML/JSON config file at `path`, read as a file whatever its name holds (params.yaml of
  a `runs/lr=1e-4/` directory): `parse_overrides` would have to guess. Raises FileNotFoundError naming `path`."""
  return plain(_read_file(path))


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
  return _as_mapping(load_yaml(text, path), path, text)


def _parse(source: OverrideSource) -> Dict[str, Any]:
  """`parse_overrides` with `Raw` scalars kept (for `override`, whose string fields take the text as written)."""
  if source is None:
    return {}
  if isinstance(source, Config):
    return source.as_dict()
  if isinstance(source, ConfigFile):
    return _read_file(source.path)
  if isinstance(source, dict):
    return _expand_dotted(source, "<dict>")
  if not isinstance(source, str):
    raise ConfigError(f"Cannot use a {type(source).__name__} as config overrides.")
  text = source.strip()
  if not text:
    return {}
  single_line = "\n" not in text
  if single_line and text.startswith("~") and "/" in text and not file_io.exists(text):
    text = file_io.expand_home(text, "--params_override")  # bash leaves `~` after `--params_override=`
  if single_line and not text.startswith(("{", "[")) and file_io.exists(text) and not file_io.isdir(text):
    return _read_file(text)  # before any '='/':' reading: run directories are named `lr=1e-4` or `...T05:00`
  lines = [(n, line.strip()) for n, line in enumerate(text.splitlines(), 1) if line.strip()[:1] not in ("", "#")]
  if lines and _KV_START.match(lines[0][1]):  # on several lines too (a shell script's): YAML folds them into one
    items = []  # one key=value per line, or several split by commas; a line ending in `,` continues the list
    for n, line in lines:
      if items and _unclosed(items[-1]):  # (a list value broken over lines: `[LayerNorm,` / `bias]`)
        items[-1] += "," + line
      elif _KV_START.match(line):
        items.append(line)
      else:
        raise ConfigError(f"<string>:{n}: {line!r} is not key=value, but line {lines[0][0]} is: write one key=value "
                          "per line (or a YAML mapping throughout).")
      if n != lines[-1][0]:
        items[-1] = items[-1].rstrip(",").rstrip()
    return _expand_dotted(_parse_kv(",".join(items)), "<string>")
  data = load_yaml(text, "<string>")
  if isinstance(data, str) and single_line and ("/" in text or text.endswith(_CONFIG_SUFFIXES)):
    raise FileNotFoundError(errno.ENOENT, "Config file not found (nor is it a key=value list or a YAML/JSON "
                            "mapping of overrides)", text)
  if isinstance(data, str) and "=" in data:
    data = _parse_kv(text)
  return _as_mapping(data, "<string>", text)


def _unclosed(item: str) -> bool:
  """Whether a `key=value` item's value opened more brackets than it closed (a list continued on the next line)."""
  value = item.partition("=")[2]
  return value.count("[") + value.count("{") > value.count("]") + value.count("}")


def _parse_kv(text: str) -> Dict[str, Any]:
  """A `a.b=1,c.d=x` string as a flat dict; each value read by `_kv_value`."""
  data: Dict[str, Any] = {}
  for item in _kv_items(text):
    key, sep, value = item.partition("=")
    if not sep or not key.strip():
      raise ConfigError(f"Override {item!r} is not of the form key=value.")
    data[key.strip()] = _kv_value(value, key.strip())
  return data


def _kv_items(text: str) -> List[str]:
  """`text` split at each `,` before a `key=`, except inside a quoted or bracketed value (`_KV_WHOLE`)."""
  whole = [m.span() for m in _KV_WHOLE.finditer(text)]
  cuts = [m.span() for m in _KV_SPLIT.finditer(text) if not any(a <= m.start() < b for a, b in whole)]
  return [text[a:b] for a, b in zip([0] + [end for _, end in cuts], [start for start, _ in cuts] + [len(text)])]


def _kv_value(value: str, key: str) -> Any:
  """One `key=value` value: typed scalars (`Raw`), lists, mappings, quoted strings and null/~ as YAML reads them;
  any other value YAML would change is the text as written. YAML reads `|` / `>` as '' (`label_separator=|` meant one
  label per cell), `#...` as a comment (`runs/exp #3/model` lost ` #3/model`), `!` as None, `&a x` as 'x', and
  refuses `*.tfrecord` and `'my model`. A typed scalar with more (`5 #note`) keeps its value, and that text. A value
  opening a list or mapping that does not parse (`[LayerNorm, bias`) is refused: as text it would split at commas; one
  without a comma or a closing bracket (`[0-9]*.tfrecord`, a glob) is the text as written."""
  text = value.strip()
  if not text:
    return ""
  try:
    data = parse_yaml(value, f"<override {key}>")
  except yaml.YAMLError as e:
    if text.startswith(("[", "{")) and ("," in text or text.endswith(("]", "}"))):  # (`[0-9]*.tfrecord` is a glob)
      raise ConfigError(f"Override {key}={text}: a value starting with {text[0]!r} is a YAML/JSON "
                        f"{'list' if text[0] == '[' else 'mapping'}, and this one does not parse "
                        f"({getattr(e, 'problem', e)}); close it, or quote the value if it is text.") from None
    return text
  if isinstance(data, Raw):
    return data if data.text == text else Raw(data.value, text)
  if data is None:
    return None if text in ("null", "Null", "NULL", "~") else text
  if isinstance(data, str):
    if text.startswith(("'", '"')):
      return QuotedText(data)
    return data if data == text else text
  if data in ([None], {None: None}):  # a lone `-` or `?` (block-collection indicators), not a list or a mapping
    return text
  return data


def _as_mapping(data: Any, origin: str, text: str) -> Dict[str, Any]:
  if data is None:
    return {}
  if not isinstance(data, dict):
    data = plain(data)
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
    if leaf not in node:
      node[leaf] = value
    elif isinstance(value, dict) and isinstance(node[leaf], dict):
      node[leaf] = _merge_apart(node[leaf], value, origin, key)
    else:
      _twice(origin, key)
  return out


def _merge_apart(a: Dict[str, Any], b: Dict[str, Any], origin: str, key: str) -> Dict[str, Any]:
  """`a` and `b`, two spellings in one mapping (`trainer.x: 1` beside `trainer: {y: 2}`): a key both set is refused,
  as the YAML reader refuses a key written twice (one of the two values would be dropped)."""
  out = dict(a)
  for k, v in b.items():
    if k not in out:
      out[k] = v
    elif isinstance(v, dict) and isinstance(out[k], dict):
      out[k] = _merge_apart(out[k], v, origin, f"{key}.{k}")
    else:
      _twice(origin, f"{key}.{k}")
  return out


def _twice(origin: str, key: str) -> None:
  raise ConfigError(f"{origin}: the key {key!r} is set twice in one mapping (dotted and nested spellings of one key: "
                    "`a.b: 1` beside `a: {b: 2}`); only one value would be kept. Give it once.")


def override(params: Config, overrides: OverrideSource, is_strict: bool = True, validate: bool = True) -> Config:
  """Returns a deep copy of `params` with `overrides` applied; `params` itself is unchanged.

  Args:
    params: a Config.
    overrides: see `parse_overrides`.
    is_strict: unknown keys raise ConfigError (with the key path and a "did you mean" hint); with False they are
      logged and skipped.
    validate: check the cross-field constraints (`Config.validate`) of the result. A stack of sources is applied
      with False and validated once at its end: a later source may complete what an earlier one starts
      (num_attention_heads=12, then hidden_size=768).

  Returns:
    The new config (validated unless `validate` is False).
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
  if validate:
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
    config.apply_preset(plain(data["preset"]), prefix)
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
        raise ConfigError(f"Config key '{path}' is a section; expected a mapping, got {plain(value)!r}.")
      _apply(current, value, path + ".", is_strict)
      continue
    setattr(config, key, _coerce(value, hints[key], path))


def _coerce(value: Any, annotation: Any, path: str) -> Any:
  origin = typing.get_origin(annotation)
  args = typing.get_args(annotation)
  if annotation is Any:
    return plain(value)
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
    if isinstance(value, (Raw, QuotedText)):
      value = [plain(value, keep_text=True)]  # one element, read by the element type below
    if isinstance(value, str):
      value = [v.strip() for v in value.split(",") if v.strip()]
    if not isinstance(value, (list, tuple)):
      raise ConfigError(f"Config key '{path}' expects a list, got {value!r}.")
    inner = args[0] if args else Any
    return [_coerce(v, inner, f"{path}[{i}]") for i, v in enumerate(value)]
  if origin in (dict, Dict):
    if not isinstance(value, dict):
      raise ConfigError(f"Config key '{path}' expects a mapping, got {value!r}.")
    return plain(dict(value))
  if annotation is str:
    return _to_str(value, path)
  value = plain(value)
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


def _number(value: Any) -> Any:
  """A string's number (an int, else a float: YAML 1.1 reads `1e5` / `1e-4`, no dot, as strings); else `value`."""
  for kind in (int, float):
    try:
      return kind(value) if isinstance(value, str) else value
    except ValueError:
      pass
  return value


def _to_int(value: Any, path: str) -> int:
  number = _number(value)
  if not isinstance(number, bool) and (isinstance(number, int) or isinstance(number, float) and number.is_integer()):
    return int(number)
  raise ConfigError(f"Config key '{path}' expects an int, got {value!r}.")


def _to_float(value: Any, path: str) -> float:
  number = _number(value)
  if isinstance(number, (int, float)) and not isinstance(number, bool):
    return float(number)
  raise ConfigError(f"Config key '{path}' expects a float, got {value!r}.")


def _to_str(value: Any, path: str) -> str:
  if value is None:
    return ""
  if isinstance(value, str):  # `~` expanded in a key naming files or folders (module docstring)
    leaf, value = path.rsplit(".", 1)[-1], str(value)  # (a QuotedText as the plain string)
    return file_io.expand_home(value, path) if cli.is_path_flag(leaf) or leaf.endswith("_checkpoint") else value
  if isinstance(value, Raw):
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
