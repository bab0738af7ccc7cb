"""Checkpoint conversion between the original TF1 release, Hugging Face (PyTorch and TensorFlow files), KerasHub
presets and our native model directory.

`convert(input_format, input, output_format, output_dir, ...)` loads the input into one of our models
(`loading.load_model_from`: full consumption, exact shapes) and writes it with the output format's writer
(`hf.write_hf`, `tf1.write_tf1`, `native.write_native`, `keras_hub_preset.write_keras_hub`); `format_summary` renders
what was read, skipped and written. Without a model type, the input's own record of its head decides (HF
`architectures`, a KerasHub task), else the pretrainer.
The binary `official_albert.convert_checkpoint` is a thin flag layer over these two functions.

What travels beside the weights, whatever the formats: the SentencePiece model, the label names and multi-label flag
(labels.json / labels.txt; an HF config's `id2label` / `problem_type` and a KerasHub classifier's
`activation="sigmoid"` both ways), the tokenizer's options
(tokenizer_config.json, else a GLUE/SQuAD/RACE run's params.yaml task.do_lower_case: a cased model stays cased), a
reranker's loss (text_ranking's ranking_training.json) and a sentence embedder's settings. Converting into a folder
that already holds a converted model removes the side files of the previous model that this conversion does not
write (`SIDE_FILES`, never another file), so the new model is never read with the old one's labels, tokenizer,
pooling, prompts or loss; a TF1 output also removes a previous model's config.json, which format detection would
otherwise read before the TF1 checkpoint.

Long because: `convert` and what travels beside the weights (labels, tokenizer options, a reranker's loss, an
embedder's folder, and the previous model's files to remove) are one concept: split, the list of what a conversion
writes and the list of what it removes would live apart, and a file added to one would be missed by the other.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from typing import Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from official_albert import file_io
from official_albert import model_directory as md
from official_albert.checkpoints import hf
from official_albert.checkpoints import keras_hub_preset
from official_albert.checkpoints import keras_hub_task
from official_albert.checkpoints import native
from official_albert.checkpoints import tf1
from official_albert.checkpoints.extend import extend_model
from official_albert.checkpoints.formats import FORMATS
from official_albert.checkpoints.formats import INPUT_FORMATS
from official_albert.checkpoints.formats import MODEL_TYPES
from official_albert.checkpoints.loading import infer_model_type
from official_albert.checkpoints.loading import input_dir
from official_albert.checkpoints.loading import load_model_from
from official_albert.checkpoints.sentence_transformers_folder import EmbeddingSettings
from official_albert.checkpoints.sentence_transformers_folder import NORMALIZE_DIR
from official_albert.checkpoints.sentence_transformers_folder import PROMPTS_CONFIG
from official_albert.checkpoints.sentence_transformers_folder import read_embedding_settings
from official_albert.checkpoints.sentence_transformers_folder import recorded_tokenizer_options
from official_albert.checkpoints.sentence_transformers_folder import write_embedding_settings
from official_albert.checkpoints.sentence_transformers_folder import write_hf_tokenizer_config
from official_albert.checkpoints.sentence_transformers_folder import write_tokenizer_options
from official_albert.retrieval.ranking_record import read_ranking_loss
from official_albert.retrieval.ranking_record import RECORD_FIX

logger = logging.getLogger(__name__)

# The heads whose outputs have label names.
_LABELED_TYPES = ("classifier", "token_classifier")
# The task a labels.json written from an HF config records for each (`loading.recorded_classifier_kind` reads it).
_LABELED_TASKS = {"classifier": "text_classification", "token_classifier": "token_classification"}
_MULTI_LABEL_PROBLEM = "multi_label_classification"
_REGRESSION_PROBLEM = "regression"
# The files this tool writes beside a model's weights (sentence_transformers_folder writes the embedder's: its
# modules.json, Pooling and Normalize folders, sentence_bert_config.json, the prompts' file; a KerasHub preset holds
# the SentencePiece model as its tokenizer asset, which SentencePiece lookup also finds). A conversion removes those
# of them that it does not write itself from its output folder: left there, they would belong to the previous model
# (the one place for the preset's tokenizer asset too: keras_hub_preset removes only the preset's other files).
SIDE_FILES = (md.SPM_FILE, md.LABELS_FILE, md.LABELS_TEXT_FILE, md.TOKENIZER_CONFIG_FILE,
              md.SENTENCE_TRANSFORMERS_MODULES_FILE, "sentence_bert_config.json", PROMPTS_CONFIG,
              os.path.join("1_Pooling", md.SENTENCE_TRANSFORMERS_POOLING_CONFIG), md.EMBEDDING_TRAINING_FILE,
              md.RANKING_TRAINING_FILE, md.KERAS_HUB_SPM_FILE)
# A tokenizer another tool saved beside a previous model (transformers' save_pretrained: tokenizer.json, which
# AutoTokenizer reads before spiece.model, and its maps), or a previous KerasHub preset's files: a conversion that
# does not write them removes them, or the new weights are read with the old vocabulary (review s50: 60 pieces read
# for a 1000-piece model, no error) or transformers cannot read the folder's tokenizer at all (a preset's
# tokenizer.json is a Keras config). Not from a folder converted in place (they are the input's).
# (PRESET_FILES holds tokenizer.json: KerasHub's name for its tokenizer is transformers' for its fast one.)
FOREIGN_FILES = ("special_tokens_map.json", "added_tokens.json") + keras_hub_preset.PRESET_FILES
# Folders of SIDE_FILES, removed when the removal leaves them empty (2_Normalize is empty as written), inner first.
SIDE_DIRS = ("1_Pooling", NORMALIZE_DIR, os.path.dirname(md.KERAS_HUB_SPM_FILE),
              os.path.dirname(os.path.dirname(md.KERAS_HUB_SPM_FILE)))


def convert(input_format: str, input_path: str, output_format: str, output_dir: str,
            albert_config_file: Optional[str] = None, model_type: Optional[str] = None,
            num_labels: Optional[int] = None, num_choices: int = 4, allow_missing: Sequence[str] = (),
            allow_unused: Sequence[str] = (), spm_model_file: Optional[str] = None,
            max_position_embeddings: Optional[int] = None, attention: Optional[Mapping[str, object]] = None
            ) -> Dict[str, object]:
  """Converts one checkpoint; returns the summary dict (also printed by the binary).

  Args:
    input_format: one of `INPUT_FORMATS`; output_format: one of `FORMATS`.
    input_path: TF1 checkpoint prefix or directory; HF, KerasHub preset or native model directory.
    output_dir: created if absent.
    albert_config_file: config JSON (original, HF or native form); default: the one beside the input.
    model_type: one of `MODEL_TYPES` (which head the checkpoint holds); default: `loading.infer_model_type`.
    num_labels: classifier outputs; default: read from the checkpoint's head (else 2).
    num_choices: for `multiple_choice`.
    allow_missing: globs (TF1 or HF names) of model variables the input may lack; they keep their initial values.
    allow_unused: globs of input tensors the model may ignore (e.g. `cls/*` when taking the encoder out of a
      pretraining checkpoint).
    spm_model_file: SentencePiece model to copy as `spiece.model`; default: one found beside the input.
    max_position_embeddings: extend (or cut) the position table to this many rows by repeating the trained rows
      (`checkpoints.extend`: a 4096-token model from a 512 one); None keeps it.
    attention: AlbertConfig attention fields for the output (`attention_type`, `block_size`, `num_random_blocks`,
      ...); None keeps the input's.

  Returns:
    dict with `input`, `output_dir`, `model_type`, `loaded`, `parameters`, `skipped` {name: reason},
    `missing_allowed`, `written`, `written_parameters`, `excluded` {name: reason}, `spm_model`, `files` (written)
    and `removed` (a previous model's side files taken out of `output_dir`).
  """
  _check_flags(input_format, output_format, spm_model_file)
  # A sentence-transformers folder: its pooling settings travel with the weights (an old folder keeps the weights in
  # its Transformer module's subfolder).
  embedding = read_embedding_settings(input_path) if file_io.isdir(input_path) else None
  if embedding and embedding.transformer_path and not file_io.exists(md.path(input_path, md.CONFIG_FILE)):
    input_path = md.path(input_path, embedding.transformer_path)
  if model_type is None:
    # A sentence embedder's weights are its encoder (a text_embedding directory's checkpoint holds no head).
    model_type = "encoder" if embedding else infer_model_type(input_format, input_path)
  if model_type not in MODEL_TYPES:
    raise ValueError(f"--model_type={model_type!r} is not one of {MODEL_TYPES}.")
  if output_format == "hf" and model_type not in hf.HF_ARCHITECTURES:
    raise ValueError(f"--model_type={model_type} has no Hugging Face class; use --output_format=native or tf1.")
  model, summary = load_model_from(input_format, input_path, albert_config_file, model_type, num_labels, num_choices,
                         allow_missing, allow_unused)
  warn_initial_values(summary, output_dir)
  source_dir = input_dir(input_format, input_path)
  if model_type == "classifier" and file_io.exists(md.path(source_dir, md.RANKING_TRAINING_FILE)):  # (before writes)
    read_ranking_loss(md.path(source_dir, md.RANKING_TRAINING_FILE), f"{RECORD_FIX}, then convert again.")
  labels, labels_from_config = (input_labels(source_dir, input_format, model.num_labels, model_type)
                                if model_type in _LABELED_TYPES else (None, False))
  if max_position_embeddings is not None or attention:
    before = model.config.max_position_embeddings
    model = extend_model(model, max_position_embeddings, dict(attention or {}))
    summary["extended"] = {"max_position_embeddings": [before, model.config.max_position_embeddings],
                           "attention_type": model.config.attention_type}
  spm_model = spm_model_file or md.find_spm_model(source_dir)
  writer = weights_writer(output_format, model, model_type, output_dir, spm_model, bool(labels and labels.multi_label))
  in_place = file_io.same_location(source_dir or ".", output_dir)  # (also through a symlinked folder)
  written, side_files, cleared = _write_replacing(output_dir, in_place, writer, lambda: write_side_files(
      model, model_type, output_format, output_dir, source_dir, spm_model, labels, labels_from_config, embedding))
  summary.update(written)
  summary["excluded"] = {**summary.get("excluded", {}),
                         **output_caveats(output_format, source_dir, spm_model, embedding)}
  summary["files"] = list(summary.get("files", [])) + side_files
  # A TF1 output's config is albert_config.json: a config.json left by a previous model (HF, KerasHub or native)
  # would be read first by format detection and by fine-tuning, i.e. the old model (a folder converted in place keeps
  # its own, which describes the same model).
  stale = (SIDE_FILES + ((md.CONFIG_FILE,) if output_format == "tf1" and not in_place else ())
           + (FOREIGN_FILES if not in_place else ()))
  summary["removed"] = (list(summary.get("removed", [])) + remove_stale_side_files(output_dir, summary["files"], stale)
                        + [name for name in cleared if name not in summary["files"]])
  summary.update(input=input_path, input_format=input_format, output_dir=output_dir, output_format=output_format,
                 model_type=model_type, spm_model=spm_model)
  return summary


def weights_writer(output_format: str, model, model_type: str, output_dir: str, spm_model: Optional[str],
                   multi_label: bool) -> Callable[[], Dict[str, object]]:
  """The output format's writer of `model`'s weights, once what it would refuse has been refused (`_check_writer`).

  KerasHub's model is built here, before anything is written: what a preset cannot hold (exit heads too) is refused
  by name while the output folder still holds the previous model; a multi-label classifier gets its sigmoid.
  """
  built = (keras_hub_preset.build_keras_hub_model(model, model_type, spm_model, multi_label)
           if output_format == "keras_hub" else None)
  _check_writer(output_format, output_dir)
  return {"hf": lambda: hf.write_hf(model, model_type, output_dir),
          "tf1": lambda: tf1.write_tf1(model, output_dir),
          "native": lambda: native.write_native(model, output_dir),
          # The SentencePiece model goes into the preset as its tokenizer's asset.
          "keras_hub": lambda: keras_hub_preset.write_keras_hub(model, model_type, output_dir, spm_model, built=built)
          }[output_format]


def _check_flags(input_format: str, output_format: str, spm_model_file: Optional[str]) -> None:
  """The flags `convert` can check before it reads or writes anything."""
  for flag, value, allowed in (("input_format", input_format, INPUT_FORMATS),
                               ("output_format", output_format, FORMATS)):
    if value not in allowed:
      raise ValueError(f"--{flag}={value!r} is not one of {allowed}.")
  if spm_model_file and not file_io.exists(spm_model_file):
    raise FileNotFoundError(f"--spm_model_file={spm_model_file}: no such file; give the SentencePiece model the "
                            "checkpoint was trained with, or leave the flag out to copy the one beside the input.")


def warn_initial_values(summary: Mapping[str, object], output_dir: str) -> None:
  """Warns that the output holds the initial values of the variables the input lacks (`missing_allowed`): e.g. a
  pretrainer read from AlbertForMaskedLM, whose SOP head and pooler are untrained, yet whose HF output is labelled
  AlbertForPreTraining."""
  if summary.get("missing_allowed"):
    logger.warning("%s: the output holds initial (untrained) values for %s, which the input does not have.",
                   output_dir, ", ".join(summary["missing_allowed"]))


def output_caveats(output_format: str, source_dir: str, spm_model: Optional[str],
                   embedding: Optional[EmbeddingSettings]) -> Dict[str, str]:
  """What the output format's own readers do otherwise than this model was trained, as `excluded` entries: a
  KerasHub preset's tokenizer and embedding settings, and transformers' fast tokenizer for an HF output with a
  SentencePiece model (an embedder's HF folder asks sentence-transformers for the slow one itself)."""
  if output_format == "keras_hub":
    return {**(keras_hub_tokenizer_caveat(source_tokenizer_options(source_dir)) if spm_model else {}),
            **(keras_hub_embedding_caveat() if embedding else {})}
  return hf_tokenizer_caveat() if output_format == "hf" and spm_model and not embedding else {}


def write_side_files(model, model_type: str, output_format: str, output_dir: str, source_dir: str,
                     spm_model: Optional[str], labels: Optional[md.LabelFile], labels_from_config: bool,
                     embedding: Optional[EmbeddingSettings]) -> List[str]:
  """Writes what travels beside the converted weights (module docstring); returns the names written."""
  side_files = []
  if spm_model and output_format != "keras_hub":  # (a KerasHub preset holds it as its tokenizer's asset)
    file_io.atomic_copy(spm_model, md.path(output_dir, md.SPM_FILE))
    side_files.append(md.SPM_FILE)
  if output_format == "hf" and labels is not None:
    # transformers reads the names and the multi-label flag from config.json (written by hf.write_hf with LABEL_i).
    config_path = md.path(output_dir, md.CONFIG_FILE)
    file_io.atomic_write_json(config_path, {**md.read_json(config_path), **hf.hf_label_config(
        model_type, model.num_labels, labels.labels, labels.multi_label)})
  side_files += write_labels(source_dir, output_dir, labels, labels_from_config)
  options = source_tokenizer_options(source_dir)
  if model_type == "classifier" and file_io.exists(md.path(source_dir, md.RANKING_TRAINING_FILE)):
    # A reranker's loss (text_ranking's record, which --mode=eval there reads), beside every format: each is also an
    # input format, so the record comes back with the weights (the reranker's head only: not an encoder taken out).
    file_io.atomic_copy(md.path(source_dir, md.RANKING_TRAINING_FILE), md.path(output_dir, md.RANKING_TRAINING_FILE))
    side_files.append(md.RANKING_TRAINING_FILE)
  if embedding:  # (every format: our readers read the settings beside any model's weights)
    side_files += write_embedding_folder(source_dir, output_dir, output_format, embedding, model.config)
  elif options:
    # The tokenizer's options (do_lower_case=false: a cased model) travel with every model, not only embedders.
    if output_format == "hf":
      write_hf_tokenizer_config(output_dir, options, model.config.max_position_embeddings)
    else:
      write_tokenizer_options(output_dir, options)
    side_files.append(md.TOKENIZER_CONFIG_FILE)
  return side_files


def source_tokenizer_options(source_dir: str) -> Dict[str, bool]:
  """The options the input's model was tokenized with (`recorded_tokenizer_options`: its tokenizer_config.json, else
  a GLUE/SQuAD/RACE run's params.yaml task.do_lower_case): written beside the output, a cased model stays cased."""
  return {key: value for key, (value, _) in recorded_tokenizer_options(source_dir).items()}


def input_labels(source_dir: str, input_format: str, num_labels: int,
                 model_type: str = "classifier") -> Tuple[Optional[md.LabelFile], bool]:
  """The input's label names and multi-label flag, and whether they come from an HF config.json (no label file).

  labels.json first (it also holds the columns training read and the threshold), else HF `id2label` /
  `problem_type` (transformers' record), else labels.txt; (None, False) when there are only LABEL_i defaults. A
  KerasHub classifier's `activation="sigmoid"` (`keras_hub_task.preset_multi_label`) is multi-label, as
  problem_type is: written as a labels.json, else the model would be read as softmax, one label per text.

  Raises:
    ValueError: labels.json names another number of labels than the model has outputs (naming the file); an HF
      classifier with problem_type="regression" and several outputs (a multi-output regressor: our classifier's
      regression is one output, so its outputs would be read as a softmax over classes).
  """
  config_path = md.path(source_dir, md.CONFIG_FILE)
  from_config = input_format in ("hf", "hf_tf") and file_io.exists(config_path)
  problem_type = md.read_json(config_path).get("problem_type") if from_config else None
  if model_type == "classifier" and problem_type == _REGRESSION_PROBLEM and num_labels > 1:
    raise ValueError(f"{config_path}: problem_type={_REGRESSION_PROBLEM!r} with {num_labels} outputs (a "
                     "multi-output regressor); official_albert's classifier regresses one output only and would read "
                     f"{num_labels} outputs as a softmax over classes. Convert it as --model_type=encoder (the "
                     "encoder without the head), or give it one output.")
  sigmoid = input_format == "keras_hub" and model_type == "classifier" and keras_hub_task.preset_multi_label(
      source_dir)
  saved = md.read_label_file(source_dir)
  if saved is not None:
    if saved.labels and len(saved.labels) != num_labels:
      raise ValueError(f"{md.path(source_dir, md.LABELS_FILE)}: {len(saved.labels)} labels but the model has "
                       f"{num_labels} outputs; the labels file belongs to another model (fix or remove it).")
    if sigmoid and not saved.multi_label:
      raise ValueError(f"{md.path(source_dir, md.LABELS_FILE)} says multi_label: false, but the preset's "
                       f"{md.KERAS_HUB_TASK_FILE} has activation \"sigmoid\" (multi-label): set \"multi_label\": true "
                       "in labels.json if the labels are independent, else save the preset without the sigmoid.")
    return saved, False
  names = md.fallback_label_names(source_dir, num_labels)
  multi_label = problem_type == _MULTI_LABEL_PROBLEM or sigmoid
  from_config = from_config or sigmoid  # (KerasHub's task.json, like an HF config.json, is written as labels.json)
  # An HF config names the head (`architectures`); the labels.json written from it records that as its task, so a
  # tagger converted from HF is refused when read as a sequence classifier, as a trained one is
  # (`loading.check_recorded_kind`): the two store the same variables. A tagger's record is written even with default
  # names (a sequence classifier's is what a classifier-style head is read as anyway).
  task = _LABELED_TASKS[model_type] if from_config else ""
  if names == [f"LABEL_{i}" for i in range(num_labels)] and not multi_label:
    return (md.LabelFile(names, False, task=task), True) if task == "token_classification" else (None, False)
  return md.LabelFile(names, bool(multi_label), task=task), from_config


def write_labels(source_dir: str, output_dir: str, labels: Optional[md.LabelFile], from_config: bool) -> List[str]:
  """The label files beside the converted weights; returns their names.

  A classifier's label names travel with the weights, whatever the formats: without them the answers would become
  LABEL_0, LABEL_1, ... (and a multi-label model would be read with a softmax). The input's labels.json / labels.txt
  are copied; an HF input's config.json names (`id2label`, `problem_type`) become a labels.json, which every reader
  here reads whatever the output format.
  """
  written = []
  for name in (md.LABELS_FILE, md.LABELS_TEXT_FILE):
    if file_io.exists(md.path(source_dir, name)):
      file_io.atomic_copy(md.path(source_dir, name), md.path(output_dir, name))
      written.append(name)
  if from_config and labels is not None and md.LABELS_FILE not in written:
    md.write_label_file(output_dir, labels)
    written.append(md.LABELS_FILE)
  return written


def keras_hub_tokenizer_caveat(options: Mapping[str, bool]) -> Dict[str, str]:
  """What a KerasHub preset's tokenizer does not do that the model's training did, as `excluded` entries.

  KerasHub's AlbertTokenizer runs the SentencePiece model on the text as given: it neither lower-cases nor strips
  accents, while ALBERT's models are trained with do_lower_case=True (and accents stripped, keep_accents=False): a
  preset's `predict(raw text)` then gives capitals and accents pieces the model never saw (<unk>). Whatever the
  options, it also lacks two of ALBERT's piece rules, so lower-casing alone does not give the training's pieces:
  the digit-comma re-split ("1,000" gives the piece "1," where FullTokenizer gives "1" ",") and the quote
  normalisation of FullTokenizer's default mode, as HF's (`` and '' become ").
  """
  pieces = ("KerasHub's AlbertTokenizer has neither ALBERT's digit-comma re-split (\"1,000\" gives the piece \"1,\" "
            "where the model's tokenizer gives \"1\" \",\") nor the quote normalisation of official_albert's default "
            "tokenizer mode (`` and '' become \"): text with a digit before a comma, or with `` or '', gets other "
            "pieces than in training; tokenize such text with official_albert's FullTokenizer")
  caveats = {"preprocessor (digit-comma and quote pieces)": pieces}
  steps = [step for step, needed in (("lower-cases", options.get("do_lower_case", True)),
                                     ("strips accents (NFKD, combining marks dropped)",
                                      not options.get("keep_accents", False))) if needed]
  if steps:
    caveats["preprocessor (text normalisation)"] = (
        f"KerasHub's AlbertTokenizer tokenizes the text as given, while this model's tokenizer "
        f"{' and '.join(steps)} (tokenizer_config.json, else ALBERT's default): do the same to the text before "
        "predict (or tokenize with official_albert's FullTokenizer), else capitals and accents become <unk>")
  for message in caveats.values():
    logger.warning("KerasHub preset: %s.", message)
  return caveats


def hf_tokenizer_caveat() -> Dict[str, str]:
  """What an HF output's reader must ask for to tokenize as the model was trained, as an `excluded` entry.

  transformers' `AutoTokenizer.from_pretrained(OUT)` loads the fast `AlbertTokenizerFast` (tokenizer_config.json's
  `tokenizer_class` names the slow class, but AutoTokenizer picks its fast twin), which splits text at
  SentencePiece's user-defined symbols ( ) " - . – £ € before the pieces: on such text it gives other pieces than
  FullTokenizer and the slow `AlbertTokenizer` (docs/conversion.md).
  """
  message = ("transformers' AutoTokenizer.from_pretrained loads the fast AlbertTokenizerFast, which tokenizes text "
             "holding ( ) \" - . – £ € differently from the model's training (FullTokenizer); load it with "
             "AutoTokenizer.from_pretrained(..., use_fast=False) (or AlbertTokenizer) for the original pieces")
  logger.warning("HF output: %s.", message)
  return {"tokenizer (transformers' fast AutoTokenizer)": message}


def keras_hub_embedding_caveat() -> Dict[str, str]:
  """What a KerasHub preset of a sentence embedder leaves to the reader, as an `excluded` entry: the settings are
  written beside the preset (official_albert's readers apply them), but KerasHub's classes do not read them."""
  message = ("the pooling, normalisation, prompts, length and Matryoshka widths are written beside the preset "
             "(modules.json, 1_Pooling/, sentence_bert_config.json, ...), which official_albert reads (embed, "
             "conversion back), but KerasHub's classes do not: a KerasHub backbone gives token vectors, pool them "
             "as those files say")
  logger.warning("KerasHub preset: %s.", message)
  return {"sentence embedding settings (KerasHub's classes)": message}


def _check_writer(output_format: str, output_dir: str) -> None:
  """What the writer would refuse (another Keras backend, a path TensorFlow reads as a glob, no KerasHub), refused
  before `_write_replacing` clears the previous model's files: a refusal left the folder without its config."""
  if output_format in ("native", "tf1"):
    native.check_can_save(output_dir, f"--output_format={output_format}")
  elif output_format == "keras_hub":
    keras_hub_preset.import_keras_hub()


def _write_replacing(output_dir: str, in_place: bool, write_weights: Callable[[], Dict[str, object]],
                     write_sides: Callable[[], List[str]]) -> Tuple[Dict[str, object], List[str], List[str]]:
  """(the weights' summary, the side files, the previous model's files removed first) of writing the output.

  A conversion failing midway (a full disk, an interrupt) left the new weights beside the old model's labels.json,
  which named their outputs with no error: a previous model's labels and configs go before anything is written (not
  a folder converted in place: they are the input's), and the new config when the side files fail, so such a folder
  has no config and is refused as incomplete.
  """
  descriptors = () if in_place else (md.CONFIG_FILE, md.TF1_CONFIG_FILE)
  cleared = _remove_files(output_dir, descriptors + ((md.LABELS_FILE, md.LABELS_TEXT_FILE) if descriptors else ()))
  try:
    return write_weights(), write_sides(), cleared
  except BaseException:
    _remove_files(output_dir, descriptors)
    raise


def _remove_files(output_dir: str, names: Sequence[str]) -> List[str]:
  """Removes the `names` in `output_dir` that exist; returns them."""
  removed = [name for name in names if file_io.exists(md.path(output_dir, name))]
  for name in removed:
    file_io.remove(md.path(output_dir, name))
  return removed


def remove_stale_side_files(output_dir: str, written: Sequence[str], names: Sequence[str] = SIDE_FILES) -> List[str]:
  """Removes the `names` (`SIDE_FILES`) in `output_dir` that this conversion did not write (a previous model's, when
  the folder is reused), and their folders once empty; returns what was removed. Files this tool does not write are
  kept."""
  removed = []
  for name in names:
    file_path = md.path(output_dir, name)
    if name not in written and file_io.exists(file_path) and not file_io.isdir(file_path):
      file_io.remove(file_path)
      removed.append(name)
  for name in SIDE_DIRS:
    folder = md.path(output_dir, name)
    if name in written or not file_io.isdir(folder):
      continue
    local = file_io.is_local(folder)
    # Listed, not globbed: a glob of `out[1]/1_Pooling/*` reads the `[1]` as a pattern, matches nothing, and the
    # non-empty folder's rmdir failed after the conversion was written.
    if not (os.listdir(folder) if local else file_io.gfile().listdir(folder)):
      if local:
        os.rmdir(folder)
      else:
        file_io.gfile().rmtree(folder)
      removed.append(name)
  if removed:
    logger.warning("%s: removed the previous model's %s (this conversion does not write them).", output_dir,
                   ", ".join(removed))
  return removed


def write_embedding_folder(source_dir: str, output_dir: str, output_format: str, embedding: EmbeddingSettings,
                           config) -> List[str]:
  """An embedder's settings beside its converted weights; returns the files written.

  A sentence embedder (a sentence-transformers folder, or a `text_embedding` model directory: both hold modules.json)
  keeps its pooling, normalisation and length, the tokenizer's options (a model trained cased stays cased) and its
  training record (embedding_training.json: the Matryoshka widths that `embed(dim=K)` and sentence-transformers'
  `truncate_dim` may use). An `hf` output is a sentence-transformers folder that `SentenceTransformer(output_dir)`
  loads as it is and that gives the vectors `pipelines.embed` gives: transformers' AlbertModel files, a
  tokenizer_config.json for the slow AlbertTokenizer over spiece.model, and modules.json → Pooling → Normalize.
  """
  positions = config.max_position_embeddings
  length = embedding.max_seq_length
  if length and length > positions:  # (a cut position table: a longer text would not fit the model)
    logger.warning("%s: max_seq_length %d of the embedder is cut to the model's %d positions.", output_dir, length,
                   positions)
    length = positions
  settings = dataclasses.replace(embedding, transformer_path="", max_seq_length=length)
  files = write_embedding_settings(output_dir, settings, config.hidden_size, slow_tokenizer=output_format == "hf")
  if settings.normalize:
    files.append(NORMALIZE_DIR)
  options = source_tokenizer_options(source_dir)
  if output_format == "hf":
    write_hf_tokenizer_config(output_dir, options, settings.max_seq_length or positions)
    files.append(md.TOKENIZER_CONFIG_FILE)
  elif options:
    write_tokenizer_options(output_dir, options)
    files.append(md.TOKENIZER_CONFIG_FILE)
  record = md.read_embedding_training_file(source_dir)
  if record is not None:
    md.write_embedding_training_file(output_dir, record)
    files.append(md.EMBEDDING_TRAINING_FILE)
  return files


def format_summary(summary: Mapping[str, object]) -> str:
  """Human-readable lines for the binary's output."""
  lines = [f"Converted {summary['input_format']}:{summary['input']} -> {summary['output_format']}:"
           f"{summary['output_dir']} (model_type={summary['model_type']})",
           f"  read    {summary['loaded']} tensors, {summary['parameters']:,} parameters from {summary['source']}",
           f"  wrote   {summary['written']} tensors, {summary['written_parameters']:,} parameters"]
  if summary.get("extended"):
    extended = summary["extended"]
    before, after = extended["max_position_embeddings"]
    lines.append(f"  positions {before} -> {after} (rows repeat the first {min(before, after)}), "
                 f"attention_type={extended['attention_type']}")
  skipped: Mapping[str, str] = summary.get("skipped") or {}
  if skipped:
    lines.append(f"  skipped (not model weights, or not used by this model type): {len(skipped)}")
    lines += [f"    {name}: {reason}" for name, reason in sorted(skipped.items())]
  for name in summary.get("missing_allowed") or []:
    lines.append(f"  not in the input (allowed; kept initial values): {name}")
  for name, reason in sorted((summary.get("excluded") or {}).items()):
    lines.append(f"  not written: {name}: {reason}")
  lines.append(f"  spiece.model: {'copied from ' + summary['spm_model'] if summary.get('spm_model') else 'none found'}")
  if summary.get("removed"):
    lines.append(f"  removed the previous model's {', '.join(summary['removed'])} from the output folder")
  return "\n".join(lines)
