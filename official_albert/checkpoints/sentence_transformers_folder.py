"""sentence-transformers folders: the embedding settings (pooling, normalisation, length) around an ALBERT encoder.

A sentence-transformers model folder is an HF model directory (config.json, model.safetensors, spiece.model) plus a
module list, `modules.json`: the Transformer (the folder itself, or an old `0_Transformer/` subfolder), a Pooling
module whose `config.json` names the pooling, and optionally Normalize. Two generations of these files exist and
both are read: sentence-transformers 2-4 (`sentence_transformers.models.Pooling`, boolean `pooling_mode_*_tokens`
keys, `max_seq_length` in sentence_bert_config.json) and 5 (module types under `sentence_transformers.base` /
`.sentence_transformer`, one `pooling_mode` name or list, the length as the tokenizer's `model_max_length`).
Modules this project does not compute (Dense projections, word weights, CNN/LSTM layers...) are refused by name.

`write_embedding_settings` writes the legacy form when it can express the settings (one mode, or several in the
legacy order), which every sentence-transformers version reads, so that a model directory converted or exported here
loads in `SentenceTransformer(...)` with the same pooling.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from typing import Dict, List, Optional, Tuple

from official_albert import file_io
from official_albert import model_directory as md
from official_albert.modeling.layers.pooling import check_pooling_modes
from official_albert.modeling.layers.pooling import POOLING_MODES

logger = logging.getLogger(__name__)

# Legacy Pooling config keys → mode (sentence-transformers' own table, in its concatenation order).
_LEGACY_POOLING_KEYS = {"pooling_mode_cls_token": "cls", "pooling_mode_max_tokens": "max",
                        "pooling_mode_mean_tokens": "mean", "pooling_mode_mean_sqrt_len_tokens": "mean_sqrt_len_tokens",
                        "pooling_mode_weightedmean_tokens": "weightedmean", "pooling_mode_lasttoken": "lasttoken"}
_SENTENCE_BERT_CONFIG = "sentence_bert_config.json"
# `FullTokenizer`'s options where a model folder records none (HF AlbertTokenizer's defaults too).
TOKENIZER_DEFAULTS = {"do_lower_case": True, "keep_accents": False, "remove_space": True}
# The folder's prompts (sentence-transformers 2.4+): `encode` prepends the default one to every text.
PROMPTS_CONFIG = "config_sentence_transformers.json"
_POOLING_DIR = "1_Pooling"
NORMALIZE_DIR = "2_Normalize"
# HF's "no limit" model_max_length (int(1e30)) and anything like it is not a length.
_NO_LENGTH = 10**6


@dataclasses.dataclass(frozen=True)
class EmbeddingSettings:
  """How a sentence embedding is made from the encoder's token vectors.

  Attributes:
    pooling: `POOLING_MODES`, concatenated in this order.
    normalize: L2-normalise the pooled vector.
    max_seq_length: tokens per text, [CLS] and [SEP] included (None: the model's max_position_embeddings).
    transformer_path: the folder of the encoder's files, relative to the model folder ('' = the folder itself).
    prompts: (name, text) pairs of config_sentence_transformers.json's `prompts` (a dict is taken too): the texts
      `SentenceTransformer.encode(prompt_name=...)` prepends.
    default_prompt_name: the prompt `encode` prepends to every text when no prompt is asked for (None: none).
    similarity_fn_name: config_sentence_transformers.json's `similarity_fn_name` ("cosine", "dot", "euclidean",
      "manhattan"; None: unset, which sentence-transformers reads as cosine): how the model's vectors are compared.
      Carried through conversion; official_albert's own evaluation scores by cosine whatever it says.
  """
  pooling: Tuple[str, ...] = ("mean",)
  normalize: bool = False
  max_seq_length: Optional[int] = None
  transformer_path: str = ""
  prompts: Tuple[Tuple[str, str], ...] = ()
  default_prompt_name: Optional[str] = None
  similarity_fn_name: Optional[str] = None

  def __post_init__(self):
    object.__setattr__(self, "pooling", check_pooling_modes(self.pooling))
    # (a tuple of pairs, not a dict: the settings stay hashable; a None text is '' as sentence-transformers reads it)
    object.__setattr__(self, "prompts", tuple((str(k), "" if v is None else str(v))
                                              for k, v in dict(self.prompts).items()))
    resolve_prompt(self.prompts, self.default_prompt_name)  # (an unknown default name is refused here)

  def prompt(self, prompt_name: Optional[str] = None, prompt: Optional[str] = None) -> str:
    """The text `embed` prepends (`resolve_prompt` over these prompts; '' = none)."""
    return resolve_prompt(self.prompts, self.default_prompt_name, prompt_name, prompt)


def resolve_prompt(prompts, default_prompt_name: Optional[str] = None, prompt_name: Optional[str] = None,
                   prompt: Optional[str] = None, where: str = "embed") -> str:
  """The prompt prepended to each text, as `SentenceTransformer.encode` picks it: an explicit `prompt` wins, else
  `prompt_name` looked up in `prompts` (a dict or (name, text) pairs), else the default prompt; '' when none.

  Raises:
    ValueError: `prompt_name` (or the default name) is not one of the prompts (the error lists them).
  """
  if prompt is not None:
    return str(prompt)
  table = dict(prompts or ())
  name = prompt_name if prompt_name is not None else default_prompt_name
  if name is None:
    return ""
  if name not in table:
    what = "prompt_name" if prompt_name is not None else "default_prompt_name"
    raise ValueError(f"{where}: {what}={name!r} is not one of the folder's prompts {sorted(table)} "
                     f"({PROMPTS_CONFIG}'s `prompts`); pass one of those names or prompt='...'.")
  return table[name]


def resolve_embedding_settings(model_dir: Optional[str], pooling=None, normalize: Optional[bool] = None,
                               max_seq_length: Optional[int] = None) -> EmbeddingSettings:
  """The directory's settings (its sentence-transformers files; else mean pooling, no normalisation, no length), with
  the given arguments taking precedence."""
  saved = (read_embedding_settings(model_dir) if model_dir else None) or EmbeddingSettings()
  return EmbeddingSettings(pooling=saved.pooling if pooling is None else pooling,
                           normalize=saved.normalize if normalize is None else bool(normalize),
                           max_seq_length=max_seq_length or saved.max_seq_length,
                           transformer_path=saved.transformer_path, prompts=saved.prompts,
                           default_prompt_name=saved.default_prompt_name,
                           similarity_fn_name=saved.similarity_fn_name)


def settings_record(settings: EmbeddingSettings, seq_length: int) -> dict:
  """The settings as an export records them (serving_config.json): what `embed` needs to reproduce the vectors (the
  prompts, when the folder has some: `embed` on the export prepends the default one, as on the folder)."""
  record = {"pooling": list(settings.pooling), "normalize": settings.normalize,
            "max_seq_length": int(min(seq_length, settings.max_seq_length or seq_length))}
  if settings.prompts:
    record.update(prompts=dict(settings.prompts), default_prompt_name=settings.default_prompt_name)
  return record


def _kind(module_type: str) -> str:
  return str(module_type).rsplit(".", 1)[-1]


def read_embedding_settings(directory: str) -> Optional[EmbeddingSettings]:
  """The folder's `EmbeddingSettings` from its sentence-transformers files; None when it has no `modules.json`.

  Raises:
    ValueError: a module this project cannot compute, a pooling mode it does not know, or a malformed file (each
      naming the file).
  """
  modules_file = md.path(directory, md.SENTENCE_TRANSFORMERS_MODULES_FILE)
  if not file_io.exists(modules_file):
    return None
  modules = md.read_json(modules_file)
  if not isinstance(modules, list) or not modules:
    raise ValueError(f"{modules_file}: expected a list of modules.")
  pooling, normalize, transformer_path, pooling_dir = None, False, None, None
  if not all(isinstance(module, dict) for module in modules):
    raise ValueError(f"{modules_file}: expected a list of module objects ({{\"type\": ..., \"path\": ...}}), got "
                     f"{modules!r:.120}.")
  for position, module in enumerate(sorted(modules, key=lambda m: m.get("idx", 0))):
    kind, path = _kind(module.get("type", "")), module.get("path", "")
    if kind == "Transformer" and transformer_path is None and position == 0:
      transformer_path = path
    elif kind == "Pooling" and pooling is None:
      pooling_dir = path
      pooling = _read_pooling(md.path(directory, md.path(path, md.SENTENCE_TRANSFORMERS_POOLING_CONFIG)))
    elif kind == "Normalize" and pooling is not None:
      normalize = True
    else:
      raise ValueError(f"{modules_file}: module {module.get('name', position)!r} of type {module.get('type')!r} is "
                       "not computed here (an ALBERT sentence embedder is Transformer → Pooling → optional "
                       "Normalize); only such folders are read.")
  if transformer_path is None or pooling is None:
    raise ValueError(f"{modules_file}: expected a Transformer module first and a Pooling module ({pooling_dir}).")
  max_seq_length = _read_max_seq_length(md.path(directory, transformer_path) if transformer_path else directory)
  return EmbeddingSettings(pooling, normalize, max_seq_length, transformer_path, *_read_prompts(directory))


def _read_prompts(directory: str) -> Tuple[Tuple[Tuple[str, str], ...], Optional[str], Optional[str]]:
  """(prompts, default_prompt_name, similarity_fn_name) of the folder's config_sentence_transformers.json (none
  without the file). A similarity other than cosine is warned about: official_albert's evaluation (the embedding
  task's retrieval and pair metrics) scores by cosine, which ranks an unnormalised "dot" model's vectors otherwise."""
  file_path = md.path(directory, PROMPTS_CONFIG)
  if not file_io.exists(file_path):
    return (), None, None
  data = file_io.read_json_object(file_path, "sentence-transformers settings")
  similarity = data.get("similarity_fn_name")
  if similarity is not None and not isinstance(similarity, str):
    raise ValueError(f"{file_path}: similarity_fn_name must be a name (\"cosine\", \"dot\", ...), got "
                     f"{similarity!r}.")
  if similarity not in (None, "cosine"):
    logger.warning("%s: similarity_fn_name=%r; official_albert's own evaluation scores embeddings by cosine, not "
                   "by %s (kept in conversions for sentence-transformers).", file_path, similarity, similarity)
  prompts, default = data.get("prompts") or {}, data.get("default_prompt_name")
  if not isinstance(prompts, dict) or not all(isinstance(v, (str, type(None))) for v in prompts.values()):
    raise ValueError(f"{file_path}: `prompts` must map prompt names to texts, got {prompts!r}.")
  if default is not None and default not in prompts:
    raise ValueError(f"{file_path}: default_prompt_name={default!r} is not one of its prompts {sorted(prompts)}; "
                     "name one of them or set it to null.")
  return tuple((str(k), v or "") for k, v in prompts.items()), default, similarity


def _read_pooling(config_file: str) -> Tuple[str, ...]:
  data = file_io.read_json_object(config_file, "pooling configuration")
  if "pooling_mode" in data:
    modes = data["pooling_mode"]
  else:
    modes = [mode for key, mode in _LEGACY_POOLING_KEYS.items() if data.get(key)]
    unknown = [k for k, v in data.items() if k.startswith("pooling_mode_") and v and k not in _LEGACY_POOLING_KEYS]
    if unknown:
      raise ValueError(f"{config_file}: pooling {unknown} is not one of {sorted(_LEGACY_POOLING_KEYS)}.")
  if not data.get("include_prompt", True):
    raise ValueError(f"{config_file}: include_prompt=false (prompt tokens left out of the pooling) is not supported.")
  try:
    return check_pooling_modes(modes)
  except ValueError as e:
    raise ValueError(f"{config_file}: {e}") from None


def _read_max_seq_length(transformer_dir: str) -> Optional[int]:
  """sentence_bert_config.json's `max_seq_length`, else the tokenizer's `model_max_length` (None when unlimited)."""
  for name, key in ((_SENTENCE_BERT_CONFIG, "max_seq_length"), (md.TOKENIZER_CONFIG_FILE, "model_max_length")):
    file_path = md.path(transformer_dir, name)
    if file_io.exists(file_path):
      value = file_io.read_json_object(file_path, "tokenizer settings").get(key)
      if isinstance(value, (int, float)) and 0 < value < _NO_LENGTH:
        return int(value)
  return None


def read_tokenizer_options(directory: str) -> dict:
  """`FullTokenizer` options an HF tokenizer_config.json records (do_lower_case, remove_space, keep_accents); a
  sentence-transformers Transformer folder whose sentence_bert_config.json says `"do_lower_case": true` lower-cases
  whatever the tokenizer's file says (sentence-transformers lower-cases the text before its tokenizer). An empty
  `directory` (a model in hand, no folder) records nothing: {} (not the current directory's files)."""
  if not directory:
    return {}
  file_path = md.path(directory, md.TOKENIZER_CONFIG_FILE)
  options = {}
  if file_io.exists(file_path):
    data = file_io.read_json_object(file_path, "tokenizer settings")
    options = {k: bool(data[k]) for k in ("do_lower_case", "remove_space", "keep_accents") if k in data}
  sentence_bert = md.path(directory, _SENTENCE_BERT_CONFIG)
  if file_io.exists(sentence_bert) and file_io.read_json_object(
      sentence_bert, "tokenizer settings").get("do_lower_case") is True:
    options["do_lower_case"] = True
  return options


def recorded_tokenizer_options(directory: Optional[str]) -> Dict[str, Tuple[bool, str]]:
  """option -> (value, the file recording it) of what `directory`'s model was tokenized with: the options of its
  tokenizer_config.json (`read_tokenizer_options`: written by the text / embedding training runs and conversions),
  and, when that records no do_lower_case, its params.yaml's task.do_lower_case (GLUE, SQuAD and RACE runs record it
  only there). {} for a directory that records none (or no directory)."""
  if not directory:
    return {}
  config = md.path(directory, md.TOKENIZER_CONFIG_FILE)
  out = {key: (value, config) for key, value in read_tokenizer_options(directory).items()}
  if "do_lower_case" not in out:
    recorded = md.recorded_task_bool(directory, "do_lower_case")
    if recorded is not None:
      out["do_lower_case"] = (recorded, md.path(directory, md.PARAMS_FILE))
  return out


def finetuning_tokenizer_record(model_dir: Optional[str], init_checkpoint: str = "") -> Dict[str, Tuple[bool, str]]:
  """`recorded_tokenizer_options` of the model a run tokenizes for: model_dir's (a trained or resumed model), else,
  when model_dir records none, the folder of `init_checkpoint` (`md.checkpoint_folder`, where fine-tuning finds the
  SentencePiece model too): a cased model converted there is fine-tuned cased. One folder's record, except that a
  model_dir recording only params.yaml's task.do_lower_case (a GLUE / SQuAD / RACE run, which tokenized with the
  init folder's keep_accents / remove_space) takes those two from the init folder: else a resumed or --mode=eval run
  there would tokenize with the defaults, not as training did."""
  found = recorded_tokenizer_options(model_dir)
  if init_checkpoint and not read_tokenizer_options(model_dir or ""):
    init = recorded_tokenizer_options(md.checkpoint_folder(init_checkpoint))
    found = {**init, **found} if found else init
  return found


def model_tokenizer_options(directory: Optional[str], do_lower_case: Optional[bool] = None,
                            init_checkpoint: str = "") -> Dict[str, bool]:
  """`FullTokenizer`'s do_lower_case, keep_accents and remove_space for the model in `directory` (and, for a run
  that starts from `init_checkpoint`, that folder's when `directory` records none: `finetuning_tokenizer_record`),
  each as recorded, else `TOKENIZER_DEFAULTS` (ALBERT's uncased vocabularies); `do_lower_case` when given wins."""
  options = {**TOKENIZER_DEFAULTS, **{key: value for key, (value, _) in
                                      finetuning_tokenizer_record(directory, init_checkpoint).items()}}
  if do_lower_case is not None:
    options["do_lower_case"] = bool(do_lower_case)
  return options


def recorded_do_lower_case(directory: str, do_lower_case: Optional[bool] = None) -> bool:
  """`do_lower_case` when given, else as the directory's model was trained (`recorded_tokenizer_options`), else True
  (ALBERT's uncased vocabularies). A cased model read lower-cased gets pieces it never saw in training."""
  return model_tokenizer_options(directory, do_lower_case)["do_lower_case"]


def write_tokenizer_options(directory: str, options: dict) -> str:
  """Writes the `FullTokenizer` options `read_tokenizer_options` reads (an HF tokenizer_config.json's keys), so that
  `embed` tokenizes as training did (e.g. do_lower_case=false); returns the file's path."""
  file_path = md.path(directory, md.TOKENIZER_CONFIG_FILE)
  file_io.atomic_write_json(file_path, {k: bool(v) for k, v in options.items()}, sort_keys=False)
  return file_path


def write_hf_tokenizer_config(directory: str, options: dict, model_max_length: int) -> str:
  """Writes the tokenizer_config.json of an HF folder that transformers' slow `AlbertTokenizer` reads as
  `FullTokenizer` tokenizes: the options (do_lower_case, remove_space, keep_accents; FullTokenizer's defaults when
  absent) and the length. No added tokens are listed: transformers would split the text at them first (the
  user-defined symbols, docs/embeddings.md). Returns the file's path."""
  data = {"tokenizer_class": "AlbertTokenizer", "do_lower_case": True, "remove_space": True, "keep_accents": False}
  data.update({k: bool(v) for k, v in options.items()})
  data["model_max_length"] = int(model_max_length)
  file_path = md.path(directory, md.TOKENIZER_CONFIG_FILE)
  file_io.atomic_write_json(file_path, data, sort_keys=False)
  return file_path


def write_embedding_settings(directory: str, settings: EmbeddingSettings, embedding_dimension: int,
                             slow_tokenizer: bool = False) -> List[str]:
  """Writes modules.json, the Pooling (and Normalize) folders, sentence_bert_config.json and (with prompts or a
  similarity_fn_name) config_sentence_transformers.json; returns the files.

  The encoder's files are the folder itself (`transformer_path` ''), as `convert_checkpoint` writes them.
  `slow_tokenizer` asks sentence-transformers to load transformers' slow tokenizer (`tokenizer_args`
  {"use_fast": false}): the fast one splits text at SentencePiece's user-defined symbols before the pieces, so it
  tokenizes differently from the original ALBERT (and from `embed`) on text holding ( ) " - . – £ €.
  """
  legacy = list(settings.pooling) == [m for m in POOLING_MODES if m in settings.pooling]
  modules = [{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
             {"idx": 1, "name": "1", "path": _POOLING_DIR, "type": "sentence_transformers.models.Pooling"}]
  if legacy:
    pooling = {"word_embedding_dimension": embedding_dimension,
               **{key: mode in settings.pooling for key, mode in _LEGACY_POOLING_KEYS.items()}}
  else:
    pooling = {"embedding_dimension": embedding_dimension, "pooling_mode": list(settings.pooling),
               "include_prompt": True}
  files = {os.path.join(_POOLING_DIR, md.SENTENCE_TRANSFORMERS_POOLING_CONFIG): pooling}
  if settings.normalize:
    modules.append({"idx": 2, "name": "2", "path": NORMALIZE_DIR, "type": "sentence_transformers.models.Normalize"})
  bert_config = {"do_lower_case": False}
  if settings.max_seq_length:
    bert_config["max_seq_length"] = settings.max_seq_length
  if slow_tokenizer:
    bert_config["tokenizer_args"] = {"use_fast": False}
  files[_SENTENCE_BERT_CONFIG] = bert_config
  if settings.prompts or settings.similarity_fn_name:
    # (sentence-transformers then prepends the same default prompt as `embed` and compares as the input did)
    files[PROMPTS_CONFIG] = {"prompts": dict(settings.prompts), "default_prompt_name": settings.default_prompt_name}
    if settings.similarity_fn_name:
      files[PROMPTS_CONFIG]["similarity_fn_name"] = settings.similarity_fn_name
  files[md.SENTENCE_TRANSFORMERS_MODULES_FILE] = modules  # last: what marks the folder
  for name, data in files.items():
    file_io.atomic_write_json(md.path(directory, name), data, sort_keys=False)
  if settings.normalize:
    file_io.makedirs(md.path(directory, NORMALIZE_DIR))
  return list(files)
