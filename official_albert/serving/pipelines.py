"""Inference API mirroring the albert-large-v2 model card: fill-mask, feature extraction, classification.

  from official_albert.serving import pipelines
  pipelines.fill_mask("/tmp/albert_large", "Hello I'm a [MASK] model.", top_k=5)
  # [{'sequence': "hello i'm a modeling model.", 'score': 0.05, 'token': 12807, 'token_str': 'modeling'}, ...]
  pipelines.feature_extraction("/tmp/albert_large", ["Replace me by any text you'd like."])
  pipelines.classify("/tmp/albert_sst2", ["a gripping film"])

A model directory (native, HF or original release; see `checkpoints.loading.load_model`) must hold `spiece.model`
(or the release's `30k-clean.model`). Instead of a directory, an already built model may be passed together with
`tokenizer` (a `FullTokenizer`). Texts are tokenized with `FullTokenizer` (HF-compatible mode by default), packed as
`[CLS] A [SEP] (B [SEP])` and run in batches padded to the longest text of the batch (a block_sparse model's to the
full length, `pipeline_inputs.pads_to_cap`, since its attention pattern follows the padded length).

An export folder (`export_saved_model --format=openvino` or `--format=litert`, see `serving.export_folder`) may be
passed wherever a directory is: the pipelines run its model (OpenVINO's IR at the folder's precision, or the LiteRT
interpreter) and return the same structure, with the ids of `FullTokenizer` built from the folder's spiece.model and
settings (pretrainer folder: fill_mask and feature_extraction; encoder folder: feature_extraction and embed;
classifier folder: classify). The predictors of the other
fine-tuned heads (question answering, multiple choice, token classification) are in `serving.task_pipelines` and
share `resolve_model` here; a folder of the wrong head is refused naming its head and the one needed.

Long because: the public pipelines and the one model resolution they all share (directory, SavedModel, export
folder of either runtime) are one API whose pieces change together; classify also runs early exit.
"""

from __future__ import annotations

import os
from typing import Dict, List, Optional, Sequence, Union

import numpy as np
import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers TensorFlow Text's ops, which the exported SavedModels use)

from official_albert import file_io
from official_albert import model_directory as md
from official_albert.checkpoints import keras_hub_task
from official_albert.checkpoints.loading import load_model
from official_albert.checkpoints.sentence_transformers_folder import model_tokenizer_options
from official_albert.serving.exit_runner import exit_runner
from official_albert.serving.export_folder import export_format
from official_albert.serving.export_folder import ExportFolder
from official_albert.serving.export_folder import MODEL_FILES
from official_albert.serving.graph_call import graph_call
from official_albert.serving.litert_runtime import LiteRTExport
from official_albert.serving.openvino_runtime import OpenVINOExport
from official_albert.serving.pipeline_inputs import as_list
from official_albert.serving.pipeline_inputs import check_batch_size
from official_albert.serving.pipeline_inputs import check_seq_length
from official_albert.serving.pipeline_inputs import check_top_k
from official_albert.serving.pipeline_inputs import default_seq_length
from official_albert.serving.pipeline_inputs import empty_texts
from official_albert.serving.pipeline_inputs import log_cut_texts
from official_albert.serving.pipeline_inputs import pads_to_cap
from official_albert.serving.pipeline_inputs import warn_cut
from official_albert.serving.saved_model_pipelines import class_results
from official_albert.serving.saved_model_pipelines import classify_saved_model
from official_albert.serving.saved_model_pipelines import decode_ids
from official_albert.serving.saved_model_pipelines import fill_mask_saved_model
from official_albert.serving.saved_model_pipelines import is_saved_model
from official_albert.serving.saved_model_pipelines import LoadedSavedModel  # noqa: F401  (public name)
from official_albert.serving.saved_model_pipelines import token_str
from official_albert.serving.saved_model_runtime import saved_model_tokenizer  # noqa: F401  (public name)
from official_albert.serving.saved_model_runtime import SavedModelRuntime
from official_albert.serving.saved_model_runtime import TASK_HEADS as SAVED_MODEL_TASK_HEADS
from official_albert.tokenization import FullTokenizer
from official_albert.tokenization import pack_ids
from official_albert.tokenization import SPECIAL_TOKEN_IDS

_MASK_ID = SPECIAL_TOKEN_IDS["[MASK]"]


def _tokenizer_for_dir(model_dir: str, do_lower_case: Optional[bool], mode: str) -> FullTokenizer:
  """The tokenizer of the model in `model_dir`, with the options it records (`model_tokenizer_options`, which
  fine-tuning reads too); `do_lower_case` when given wins."""
  options = model_tokenizer_options(model_dir, do_lower_case)
  return FullTokenizer(md.require_spm_model(model_dir, "a pipeline"), mode=mode, **options)


# The outputs each pipeline reads from an export folder (whose head is fixed at export), by model type.
_EXPORT_NEEDS = {"pretrainer": ("mlm_logits",), "encoder": ("sequence_output", "pooled_output"),
                   "classifier": ("logits",), "token_classifier": ("logits",), "multiple_choice": ("logits",),
                   "span": ("start_logits", "end_logits"),
                   "squad_v2": ("start_top_log_probs", "start_top_index", "end_top_log_probs", "end_top_index",
                                "cls_logits")}
# Model types whose outputs other heads share (`logits`): the folder's head itself must be one the pipeline takes.
_HEAD_CHECKED = ("classifier", "token_classifier", "multiple_choice", "span", "squad_v2")


def resolve_model(model_or_dir, model_type, tokenizer: Optional[FullTokenizer], do_lower_case: Optional[bool],
                  mode: str,
                  purpose: Optional[str] = None, load_options: Optional[Dict[str, object]] = None):
  """(model, tokenizer, model_dir or None) from a directory, an export folder or a model + tokenizer.

  Args:
    model_type: the `MODEL_TYPES` head to load from a directory; a tuple names every head an export folder may hold
      (a directory then loads the first).
    purpose: the pipeline's name for errors (default: "<model_type> pipeline").
    load_options: keyword arguments of `load_model` (num_labels, num_choices).

  An export folder (OpenVINO or LiteRT, see `serving.export_folder`) gives its runtime (`OpenVINOExport`,
  `LiteRTExport`), called like our Keras models (numpy outputs), with the folder's `FullTokenizer` (its spiece.model
  and settings); a folder of another head raises naming its head and the one needed. For the question answering,
  tagging and multiple-choice heads a SavedModel folder (or `LoadedSavedModel`) is run the same way
  (`SavedModelRuntime`: its `from_ids` signature, with the tokenizer of its text signatures).
  """
  heads = (model_type,) if isinstance(model_type, str) else tuple(model_type)
  purpose = purpose or f"{heads[0]} pipeline"
  if any(h in SAVED_MODEL_TASK_HEADS for h in heads) and is_saved_model(model_or_dir):
    # A task head's SavedModel: its `from_ids` graph with the tokenizer of its text signatures, run as an export.
    model_or_dir = SavedModelRuntime(getattr(model_or_dir, "folder", model_or_dir), getattr(model_or_dir, "loaded",
                                                                                            None))
  elif is_saved_model(model_or_dir):  # (classify, embed and fill_mask take theirs before they get here)
    raise ValueError(f"{getattr(model_or_dir, 'folder', model_or_dir)}: the {purpose} does not run a SavedModel "
                     "folder; call its signatures (serve_text, from_ids), or pass the model directory or an OpenVINO "
                     "/ LiteRT export folder (export_saved_model --format=openvino).")
  if isinstance(model_or_dir, (str, os.PathLike)) and not os.path.isdir(os.fspath(model_or_dir)):
    raise FileNotFoundError(f"{os.fspath(model_or_dir)}: no such folder; the {purpose} takes a model directory "
                            "(training's model_dir, or a converted model) or a LiteRT or OpenVINO export folder"
                            + (" or a SavedModel folder" if purpose == "classify" else "") + ".")
  if is_export_folder(model_or_dir):
    model = model_or_dir if isinstance(model_or_dir, ExportFolder) else open_export_folder(model_or_dir)
    if any(h in _HEAD_CHECKED for h in heads) and model.head not in heads:
      raise ValueError(f"{purpose} needs a {' or '.join(heads)} export, but {model.export_dir} is a {model.head} "
                       f"export; export the model with --format={model.format_name} --head={heads[0]}.")
    model.require_outputs(_EXPORT_NEEDS[model.head if model.head in heads else heads[0]], purpose)
    if tokenizer is None and model.tokenizer is None:
      model.encode([""])  # raises: a folder without spiece.model
    return model, tokenizer or model.tokenizer, model.export_dir
  if isinstance(model_or_dir, (str, os.PathLike)):
    model_dir = os.fspath(model_or_dir)
    tokenizer = tokenizer or _tokenizer_for_dir(model_dir, do_lower_case, mode)
    model, _ = load_model(model_dir, heads[0], **(load_options or {}))
    return model, tokenizer, model_dir
  if tokenizer is None:
    raise ValueError("Pass `tokenizer` (a FullTokenizer) together with a model object.")
  return model_or_dir, tokenizer, None


def open_export_folder(export_dir: str, **options) -> ExportFolder:
  """The runtime of the folder's format (`OpenVINOExport` or `LiteRTExport`), built with `options`."""
  runtimes = {"openvino": OpenVINOExport, "litert": LiteRTExport}
  fmt = export_format(export_dir)
  if fmt not in runtimes:
    raise FileNotFoundError(f"{export_dir}: no {' or '.join(MODEL_FILES.values())} (not an export folder).")
  return runtimes[fmt](export_dir, **options)


def is_export_folder(model_or_dir) -> bool:
  """An export folder (OpenVINO or LiteRT, `export_folder.export_format`) or a runtime built from one."""
  return isinstance(model_or_dir, ExportFolder) or export_format(model_or_dir) is not None


def check_vocab(model, tokenizer: FullTokenizer) -> None:
  if tokenizer.vocab_size > model.config.vocab_size:  # fewer pieces: rows never used
    raise ValueError(f"{tokenizer.spm_model_file} has {tokenizer.vocab_size} pieces but the model's vocab_size is "
                     f"{model.config.vocab_size}: the ids beyond it have no embedding row.")


def _batch_inputs(rows: Sequence[Dict[str, List[int]]]) -> Dict[str, tf.Tensor]:
  return {k: tf.constant(np.asarray([r[k] for r in rows], np.int32)) for k in rows[0]}


def _pack_all(tokenizer: FullTokenizer, texts: Sequence[str], text_pairs: Optional[Sequence[str]],
              seq_length: Optional[int], max_positions: int, cut: Optional[List[int]] = None,
              pad_to_cap: bool = False) -> List[Dict[str, List[int]]]:
  """Packs every text to the batch's longest length, or to the cap with `pad_to_cap`; cut lengths → `cut`.

  A pair with no pieces (`""`, blank) packs one segment, `[CLS] A [SEP]`, as GLUE's records are written (the
  reference's `if tokens_b:`); `[CLS] A [SEP] [SEP]` was a row the classifier never saw in training. The
  SavedModel's in-graph packer packs it alike.
  """
  ids_a = tokenizer.encode_ids_batch(list(texts))
  ids_b = tokenizer.encode_ids_batch(list(text_pairs)) if text_pairs is not None else [None] * len(ids_a)
  ids_b = [b or None for b in ids_b]
  cap = min(seq_length or max_positions, max_positions)
  lengths = [len(a) + (len(b) + 1 if b is not None else 0) + 2 for a, b in zip(ids_a, ids_b)]
  length = cap if pad_to_cap else min(max(lengths), cap)
  (cut if cut is not None else []).extend(n for n in lengths if n > cap)
  return [pack_ids(a, b, length) for a, b in zip(ids_a, ids_b)]


def packed_batches(tokenizer: FullTokenizer, texts: Sequence[str], text_pairs: Optional[Sequence[str]],
                    batch_size: int, seq_length: Optional[int], max_positions: int, pad_to_cap: bool = False):
  """Yields (packed rows, model inputs) for each batch of `texts` (and `text_pairs`), packed by `_pack_all`."""
  if text_pairs is not None and len(text_pairs) != len(texts):
    raise ValueError(f"text_pairs has {len(text_pairs)} entries but texts has {len(texts)}.")
  check_batch_size(batch_size)
  warn_cut(seq_length, max_positions)
  cut = []
  for start in range(0, len(texts), batch_size):
    pairs = None if text_pairs is None else text_pairs[start:start + batch_size]
    packed = _pack_all(tokenizer, texts[start:start + batch_size], pairs, seq_length, max_positions, cut, pad_to_cap)
    yield packed, _batch_inputs(packed)
  log_cut_texts(cut, len(texts), min(seq_length or max_positions, max_positions))


# ---------------------------------------------------------------------------------------------------- fill-mask
def fill_mask(model_or_dir, text: Union[str, Sequence[str]], top_k: int = 5,
              tokenizer: Optional[FullTokenizer] = None, do_lower_case: Optional[bool] = None, mode: str = "hf",
              batch_size: int = 16):
  """Predicts the tokens at the `[MASK]`s of `text` (like HF's fill-mask pipeline).

  Args:
    model_or_dir: a model directory, a pretrainer SavedModel (`fill_mask_saved_model`), or an `AlbertPretrainer`
      (then pass `tokenizer`).
    text: one text or a list; each must contain at least one `[MASK]`.
    top_k: predictions per mask.
    tokenizer: a `FullTokenizer` (default: the directory's spiece.model).
    do_lower_case, mode: tokenizer settings when built from the directory (do_lower_case None: as the directory
      records it, `model_tokenizer_options`).
    batch_size: texts per forward pass (a SavedModel's: per `serve_text` call); at least 1.

  Returns:
    For one text with one mask: a list of `top_k` dicts `sequence` (the text with the mask filled, special tokens
    left out), `score` (probability), `token` (id), `token_str`, best first. A text with several masks gives one
    such list per mask; a list of texts gives one result per text.

  Raises:
    ValueError: a text without `[MASK]`, or longer than the model's max_position_embeddings.
  """
  check_top_k(top_k)
  check_batch_size(batch_size)  # (0 was range()'s "arg 3 must not be zero", -1 an empty answer for every text)
  if is_saved_model(model_or_dir):  # (a pretrainer SavedModel: its graph tokenizes, so do_lower_case / mode are moot)
    return fill_mask_saved_model(model_or_dir, text, top_k, tokenizer, batch_size)
  model, tokenizer, model_dir = resolve_model(model_or_dir, "pretrainer", tokenizer, do_lower_case, mode, "fill_mask")
  check_vocab(model, tokenizer)
  texts = as_list(text)
  # Ranked over the SentencePiece model's pieces: a model may have more embedding rows than its vocabulary has
  # pieces (check_vocab), and those rows have no token to name.
  pieces = min(tokenizer.vocab_size, model.config.vocab_size)
  top_k = min(top_k, pieces)
  results = {}
  call = graph_call(model)
  max_positions = model.config.max_position_embeddings
  # Padded to the batch's longest text; a block_sparse model to a fixed length (`pads_to_cap`: its pattern follows
  # the padded length, so a text's predictions would change with its batch-mates, e.g. the server's other clients):
  # the directory's recorded length, or an export folder's (`default_seq_length`, as classify packs it and as an
  # export at that --seq_length runs it), a longer text to the positions.
  cap = default_seq_length(model, model_dir) if pads_to_cap(model) else None
  for start in range(0, len(texts), batch_size):
    chunk = texts[start:start + batch_size]
    all_ids = tokenizer.encode_ids_with_masks_batch(chunk)
    for t, row in zip(chunk, all_ids):
      if _MASK_ID not in row:
        raise ValueError(f"fill_mask: no [MASK] token in text {t!r}.")
      if len(row) + 2 > max_positions:
        raise ValueError(f"fill_mask: text of {len(row) + 2} tokens exceeds max_position_embeddings "
                         f"({max_positions}): {t[:60]!r}...")
    pad_to = [None if cap is None else cap if len(r) + 2 <= cap else max_positions for r in all_ids]
    for group_length in dict.fromkeys(pad_to):
      group = [start + i for i, n in enumerate(pad_to) if n == group_length]
      _fill_masks(call, [all_ids[i - start] for i in group], group, group_length, tokenizer, pieces, top_k, results)
  results = [results[i] for i in range(len(texts))]
  return results[0] if isinstance(text, (str, bytes)) else results


def _fill_masks(call, ids, indexes, length, tokenizer, pieces, top_k, results) -> None:
  """`fill_mask`'s answers for the rows `ids` of texts `indexes`, run at `length` (None: their longest), put in
  `results` by text index."""
  packed = [pack_ids(r, None, length or max(len(r) for r in ids) + 2) for r in ids]
  # Positions in the packed row: +1 for [CLS].
  positions = [[i + 1 for i, x in enumerate(r) if x == _MASK_ID] for r in ids]
  width = max(len(p) for p in positions)
  inputs = _batch_inputs(packed)
  inputs["masked_lm_positions"] = tf.constant([p + [0] * (width - len(p)) for p in positions], tf.int32)
  probs = tf.nn.softmax(call(inputs)["mlm_logits"], axis=-1).numpy()
  for b, (row, pos) in enumerate(zip(ids, positions)):
    per_mask = []
    for m, p in enumerate(pos):
      order = np.argsort(-probs[b, m, :pieces], kind="stable")[:top_k]
      preds = []
      for token in order:
        filled = packed[b]["input_word_ids"][:len(row) + 2]
        filled[p] = int(token)
        # Like HF: with one mask the sequence drops special tokens; with several it keeps them (and the other
        # masks) verbatim.
        sequence = decode_ids(tokenizer, filled, skip_special_tokens=len(pos) == 1)
        preds.append({"sequence": sequence, "score": float(probs[b, m, token]),
                      "token": int(token), "token_str": token_str(tokenizer, int(token))})
      per_mask.append(preds)
    results[indexes[b]] = per_mask[0] if len(per_mask) == 1 else per_mask


# --------------------------------------------------------------------------------------------- feature extraction
def feature_extraction(model_or_dir, texts: Union[str, Sequence[str]], text_pairs: Optional[Sequence[str]] = None,
                       tokenizer: Optional[FullTokenizer] = None, seq_length: Optional[int] = None,
                       do_lower_case: Optional[bool] = None, mode: str = "hf",
                       batch_size: int = 16) -> List[Dict[str, object]]:
  """Sequence and pooled embeddings per text.

  Args:
    model_or_dir: a model directory (its encoder is used whatever the head), or any model with `.encoder` / an
      `AlbertEncoder` (then pass `tokenizer`).
    texts: one text or a list; `text_pairs` optional second segments.
    seq_length: truncate longer inputs to this many tokens (default: max_position_embeddings).

  Returns:
    One dict per text: `input_word_ids` (the packed ids without padding), `tokens` (their pieces),
    `sequence_output` [n, H] float32 (n = the text's tokens incl. [CLS]/[SEP]) and `pooled_output` [H].
  """
  model, tokenizer, _ = resolve_model(model_or_dir, "encoder", tokenizer, do_lower_case, mode,
                                      "feature_extraction")
  encoder = getattr(model, "encoder", model)
  check_vocab(encoder, tokenizer)
  results = []
  call = graph_call(encoder)
  pairs = None if text_pairs is None else as_list(text_pairs, "text_pairs")
  for packed, inputs in packed_batches(tokenizer, as_list(texts), pairs, batch_size, seq_length,
                                        encoder.config.max_position_embeddings, pads_to_cap(encoder)):
    out = call(inputs)
    sequence, pooled = np.asarray(out["sequence_output"]), np.asarray(out["pooled_output"])
    for b, row in enumerate(packed):
      n = int(sum(row["input_mask"]))
      ids = row["input_word_ids"][:n]
      results.append({"input_word_ids": ids, "tokens": tokenizer.convert_ids_to_tokens(ids),
                      "sequence_output": sequence[b, :n], "pooled_output": pooled[b]})
  return results


# -------------------------------------------------------------------------------------------------- classification
def classify(model_or_dir, texts: Union[str, Sequence[str]], text_pairs: Optional[Sequence[str]] = None,
             tokenizer: Optional[FullTokenizer] = None, seq_length: Optional[int] = None,
             labels: Optional[Sequence[str]] = None,
             do_lower_case: Optional[bool] = None, mode: str = "hf", batch_size: int = 16,
             threshold: Optional[float] = None, patience: Optional[int] = None, depth: Optional[int] = None,
             exit_threshold: Optional[float] = None) -> List[Dict[str, object]]:
  """Sentence(-pair) classification with a fine-tuned `AlbertClassifier` (HF text-classification style).

  Args:
    model_or_dir: a fine-tuned classifier directory (number of labels read from its head), an OpenVINO or
      SavedModel export folder of one (`export_saved_model --head=classifier`; the SavedModel tokenizes in-graph and
      its packed length is the export's --seq_length; a `LoadedSavedModel` of it answers without reloading), or an
      `AlbertClassifier` (then pass `tokenizer`).
    texts, text_pairs: first and optional second segments (each one string or a list; an item that is not a string
      is an error naming it, e.g. `text_pairs[1]`).
    seq_length: longest packed sequence; default: a trainer directory's --mode=predict length (its params.yaml),
      else the model's max_position_embeddings (an export folder: its export's; a SavedModel's is fixed at its
      export, so none is taken). One above max_position_embeddings is cut there, with a warning; texts cut are
      logged; one below 3 is an error.
    labels: label names (default: the directory's `labels.json` as the text tasks write it, else its HF
      `id2label` or `labels.txt`, else `LABEL_i`).
    threshold: probability at which a label of a multi-label model (`labels.json` says `multi_label`) is predicted
      (default: the training run's `multi_label_threshold` saved there, else 0.5).
    patience: early exit (a model fine-tuned with `task.exit_heads=true`; `modeling.early_exit`): each text leaves
      the shared block once its prediction has not changed for `patience` iterations; 0 = full depth. None: full
      depth, or an export folder's patience (fixed at its export; another value is an error; one never reached warns).
    depth: run every text through this many iterations (static elastic depth; any classifier).
    exit_threshold: with patience on a regression head, the score change that counts as unchanged.

  Returns:
    One dict per text: `label`, `label_id`, `score` (probability of the label), `probabilities` (all labels) and
    `exit_iteration` (the iterations of the shared block it ran: L at full depth); a multi-label model's
    probabilities are per-label sigmoids and its dicts add `labels`, every label at `threshold` or above (as the
    text task's predict files); a regression head (one output) gives `score` = the predicted value and
    `exit_iteration`. A blank text (and pair) is answered, but its dict adds `"empty": True`, with a warning.
  """
  texts = as_list(texts)
  text_pairs = None if text_pairs is None else as_list(text_pairs, "text_pairs")  # (a str is one pair, as a text)
  empty = empty_texts(texts, text_pairs, "classify")
  results = _classify(model_or_dir, texts, text_pairs, tokenizer, seq_length, labels, do_lower_case, mode,
                      batch_size, threshold, patience, depth, exit_threshold)
  for i in empty:
    results[i]["empty"] = True
  return results


MULTI_LABEL = "multi_label_classification"


def hf_problem_type(model_dir: Optional[str]) -> Optional[str]:
  """An HF directory's `problem_type` (config.json), None without one; a KerasHub preset's sigmoid classifier
  (`keras_hub_task.preset_multi_label`) reads as MULTI_LABEL: it was served as a softmax, one label per text."""
  config = md.path(model_dir, md.CONFIG_FILE) if model_dir else None
  data = md.read_json(config) if config and file_io.exists(config) else None
  if data is not None and md.is_keras_hub_config(config):
    return MULTI_LABEL if keras_hub_task.preset_multi_label(model_dir) else None
  return data.get("problem_type") if isinstance(data, dict) else None


def _classify(model_or_dir, texts, text_pairs, tokenizer, seq_length, labels, do_lower_case, mode, batch_size,
              threshold, patience, depth, exit_threshold) -> List[Dict[str, object]]:
  check_seq_length(seq_length)
  if is_saved_model(model_or_dir):
    if patience or depth is not None or seq_length is not None:
      raise ValueError(f"classify: a SavedModel's patience, depth and packed length are fixed at its export "
                       f"(export_saved_model --patience / --depth / --seq_length); call {model_or_dir} without them.")
    return classify_saved_model(model_or_dir, as_list(texts), text_pairs, labels, batch_size, threshold)
  model, tokenizer, model_dir = resolve_model(model_or_dir, "classifier", tokenizer, do_lower_case, mode, "classify")
  check_vocab(model, tokenizer)
  num_labels = int(model.num_labels)
  # labels.json as text_classification training writes it (an OpenVINO export folder keeps one too): the names,
  # and whether the labels are independent sigmoids. Explicit `labels` override the names only.
  saved = md.read_label_file(model_dir) if model_dir and num_labels > 1 else None
  # (without labels.json, an HF directory's config.json problem_type: transformers' sigmoid; it was read as softmax)
  multi_label = bool(saved.multi_label if saved else num_labels > 1 and hf_problem_type(model_dir) == MULTI_LABEL)
  if labels is None and saved is not None:
    labels = saved.labels
  if multi_label and threshold is None:
    threshold = saved.threshold if saved else md.MULTI_LABEL_THRESHOLD
  names = list(labels) if labels is not None else md.fallback_label_names(model_dir, num_labels)
  if len(names) != num_labels:
    raise ValueError(f"{len(names)} label names for a classifier with {num_labels} outputs.")
  # The exit rule compares label sets at the model's own threshold (as its exports do), not the caller's display one.
  model_threshold = (saved.threshold if saved else md.MULTI_LABEL_THRESHOLD) if multi_label else None
  run = exit_runner(model, is_export_folder(model), patience, depth, exit_threshold, model_threshold)
  results = []
  if seq_length is None:
    seq_length = default_seq_length(model, model_dir)
  for _, inputs in packed_batches(tokenizer, as_list(texts), text_pairs, batch_size, seq_length,
                                   model.config.max_position_embeddings, pads_to_cap(model)):
    logits, exits = run(inputs)
    if num_labels == 1:
      results.extend({"score": float(v), "exit_iteration": int(e)} for v, e in zip(np.asarray(logits)[:, 0], exits))
      continue
    probs = (tf.sigmoid(logits) if multi_label else tf.nn.softmax(logits, axis=-1)).numpy()
    results.extend({**result, "exit_iteration": int(e)}
                   for result, e in zip(class_results(probs, names, threshold if multi_label else None), exits))
  return results
