"""The model side of `extend_vocabulary`: a model directory re-read with its word-embedding table grown to an
extended vocabulary, and written as a native directory (`grow_model`).

Old rows of `bert/embeddings/word_embeddings` (and of the MLM `cls/predictions/output_bias`) are copied bit for bit;
new embedding rows are drawn from the reference initializer, new bias entries are zero. Every other variable of the
input, exit heads included, is copied as it is (one the grown model has no place for is an error, not a silent
drop), and so are the input's side files (`convert.SIDE_FILES`: labels, tokenizer options, the sentence-embedding
and ranking records). The output folder is replaced whole, so it may hold only what this tool writes
(`check_output_model_dir`).
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from typing import Dict, Optional, Sequence

import numpy as np

from official_albert import directory_io
from official_albert import file_io
from official_albert import model_directory

logger = logging.getLogger(__name__)

# Variables whose first dimension is the vocabulary (TF1 names), and how new rows are initialised.
_VOCAB_VARIABLES = {"bert/embeddings/word_embeddings": "initializer", "cls/predictions/output_bias": "zeros"}


def grow_model(model_dir: str, output_model_dir: str, new_vocab_size: int, spm_model_file: str, seed: int = 12345,
               model_type: Optional[str] = None, allow_missing: Sequence[str] = (),
               old_vocab_size: Optional[int] = None,
               tokenizer_options: Optional[Dict[str, bool]] = None) -> Dict[str, object]:
  """Re-reads `model_dir` with the new pieces' rows and writes it as a native directory (see module doc).

  `tokenizer_options` (do_lower_case, keep_accents, remove_space), when given, are recorded in the output's
  tokenizer_config.json (else the input's file is copied, when it has one). `model_type` None: the head the folder
  holds (`model_type_of`).

  `old_vocab_size` (the unextended SentencePiece model's pieces; default: the model's vocab_size) may not exceed the
  model's rows: those ids would have no row, so the model was not trained with that vocabulary. The new pieces take
  ids old_vocab_size..new_vocab_size-1; the config's vocab_size becomes max(rows, new_vocab_size).
  """

  from official_albert.checkpoints import loading  # noqa: PLC0415 (binary: TF after launch)
  from official_albert.checkpoints.names import tf1_variable_map  # noqa: PLC0415 (binary: TF after launch)
  check_output_model_dir(model_dir, output_model_dir)
  model_type = model_type or model_type_of(model_dir)
  old, summary = loading.load_model(model_dir, model_type, allow_missing=allow_missing)
  config = old.config
  old_vocab = config.vocab_size
  pieces = old_vocab if old_vocab_size is None else old_vocab_size
  if pieces > old_vocab:
    raise ValueError(too_many_pieces(model_dir, spm_model_file, pieces, old_vocab))
  if new_vocab_size < pieces:
    raise ValueError(f"{model_dir}: new_vocab_size={new_vocab_size} is below the {pieces} pieces of the unextended "
                     "vocabulary; pieces are only ever added. Pass the extended SentencePiece model's size.")
  reused = max(0, min(new_vocab_size, old_vocab) - pieces)
  if reused:
    logger.warning("%s: the word-embedding table has %d rows but the vocabulary had %d pieces; the new pieces take "
                   "ids %d..%d, and the %d existing rows among them were never trained on any piece: re-initialised "
                   "as new rows.", model_dir, old_vocab, pieces, pieces, new_vocab_size - 1, reused)
  new_config = config.replace(vocab_size=max(old_vocab, new_vocab_size))
  old_vars = tf1_variable_map(old)
  num_labels = next((int(v.shape[0]) for n, v in old_vars.items() if n == "output_weights"), 2)
  new = loading.build_model(model_type, new_config, num_labels, getattr(old, "num_choices", 4),
                            exit_heads=bool(getattr(old, "exit_heads", False)))
  new_vars = tf1_variable_map(new)
  dropped = sorted(set(old_vars) - set(new_vars))
  if dropped:  # (the exit heads were built without, and dropped silently)
    raise ValueError(f"{model_dir}: the grown {model_type} has no place for {dropped[:5]}; pass the --model_type "
                     "that holds them.")
  grown, reinitialised = {}, {}
  for name, variable in new_vars.items():
    value = old_vars[name].numpy()
    if name in _VOCAB_VARIABLES and new_vocab_size > pieces:
      value = _with_new_rows(value, _VOCAB_VARIABLES[name], pieces, new_vocab_size, config.initializer_range, seed)
      grown[name] = value.shape[0] - old_vocab
      reinitialised[name] = reused
    if tuple(value.shape) != tuple(variable.shape):
      raise ValueError(f"{model_dir}: {name} has shape {value.shape}, expected {tuple(variable.shape)}.")
    variable.assign(value)
  grown = {name: rows for name, rows in grown.items() if rows}
  reinitialised = {name: rows for name, rows in reinitialised.items() if rows}
  written = _write_grown(new, model_type, model_dir, output_model_dir, spm_model_file, tokenizer_options)
  return {"model_dir": model_dir, "output_model_dir": output_model_dir, "old_vocab_size": old_vocab,
          "new_vocab_size": new_config.vocab_size, "grown": grown, "reinitialised": reinitialised,
          "loaded": summary.get("loaded"), "written": written["written"]}


def _write_grown(model, model_type: str, model_dir: str, output_model_dir: str, spm_model_file: str,
                 tokenizer_options: Optional[Dict[str, bool]]) -> Dict[str, object]:
  """Writes the grown `model` with its vocabulary and side files in a temporary folder, then in place of
  `output_model_dir`; returns `write_native`'s summary."""
  from official_albert.checkpoints import native  # noqa: PLC0415 (binary: TF after launch)
  parent = os.path.dirname(os.path.abspath(output_model_dir))
  file_io.makedirs(parent)
  tmp_dir = tempfile.mkdtemp(dir=parent, prefix=f".{os.path.basename(output_model_dir)}.tmp-")
  umask = os.umask(0)
  os.umask(umask)
  os.chmod(tmp_dir, 0o777 & ~umask)  # (mkdtemp's 0700 would be the model folder's: unreadable to other users)
  if file_io.exists(output_model_dir):
    logger.warning("--output_model_dir=%s exists: replacing it with the grown model.", output_model_dir)
  try:
    written = native.write_native(model, tmp_dir)
    file_io.atomic_copy(spm_model_file, model_directory.path(tmp_dir, model_directory.SPM_FILE))
    _write_side_files(model_dir, tmp_dir, tokenizer_options, model, model_type)
    directory_io.replace_directory(tmp_dir, output_model_dir)
  except BaseException:
    shutil.rmtree(tmp_dir, ignore_errors=True)
    raise
  return written


def model_type_of(model_dir: str) -> str:
  """The head `model_dir` holds, as the exports read it (`export_heads.export_head`): every folder was read as a
  pretrainer, so a fine-tuned classifier or an HF AlbertModel failed to load after the extended vocabulary was
  written, advising to omit the --model_type that was not given."""
  from official_albert.serving import export_heads  # noqa: PLC0415 (binary: TF after launch)
  try:
    return export_heads.export_head(model_dir)
  except ValueError as error:
    raise ValueError(str(error).replace("--head=", "--model_type=")) from None


def _write_side_files(model_dir: str, tmp_dir: str, tokenizer_options: Optional[Dict[str, bool]], model,
                      model_type: str) -> None:
  """`side_files` copied from `model_dir` (and an embedder's empty Normalize folder), an HF classifier's label
  names and multi-label flag as a labels.json (`convert.input_labels`: its config.json's id2label / problem_type,
  which the native output does not keep: it answered LABEL_i with a softmax), then `tokenizer_options` (when given)
  as the tokenizer record."""
  from official_albert.checkpoints import convert  # noqa: PLC0415 (binary: TF after launch)
  for name in side_files():
    if file_io.exists(os.path.join(model_dir, name)):
      file_io.makedirs(os.path.dirname(os.path.join(tmp_dir, name)))
      file_io.atomic_copy(os.path.join(model_dir, name), os.path.join(tmp_dir, name))
  if file_io.isdir(os.path.join(model_dir, convert.NORMALIZE_DIR)):
    file_io.makedirs(os.path.join(tmp_dir, convert.NORMALIZE_DIR))
  num_labels = getattr(model, "num_labels", None)
  if num_labels and not file_io.exists(os.path.join(tmp_dir, model_directory.LABELS_FILE)):
    if model_directory.detect_format(model_dir) in ("hf", "hf_tf"):
      labels, from_config = convert.input_labels(model_dir, "hf", int(num_labels), model_type)
      if from_config and labels is not None:
        model_directory.write_label_file(tmp_dir, labels)
  if tokenizer_options is not None:
    from official_albert.checkpoints import sentence_transformers_folder as st  # noqa: PLC0415 (binary: TF later)
    st.write_tokenizer_options(tmp_dir, tokenizer_options)


def side_files() -> Sequence[str]:
  """The files copied beside the grown model: `convert.SIDE_FILES` but the SentencePiece model (the extended one is
  written) and KerasHub's copy of it (the output is native). labels.txt, the sentence-embedding and ranking records
  were dropped (a classifier's names became LABEL_i, a reranker forgot what it was)."""
  from official_albert.checkpoints import convert  # noqa: PLC0415 (binary: TF after launch)
  return [name for name in convert.SIDE_FILES
          if name not in (model_directory.SPM_FILE, model_directory.KERAS_HUB_SPM_FILE)]


def check_output_model_dir(model_dir: str, output_model_dir: str, inputs: Optional[Dict[str, str]] = None) -> None:
  """Raises if `output_model_dir` is `model_dir` however spelled (also through a symlinked folder), holds it or one
  of `inputs` (flag -> file), or is a folder of other files than a model directory's: it is replaced whole (a
  working folder holding the vocabulary and the word list was emptied)."""
  if file_io.same_location(model_dir, output_model_dir):
    raise ValueError(f"--output_model_dir={output_model_dir} is --model_dir={model_dir}; write the grown model to a "
                     "new directory (the input is replaced only after you check the result).")
  directory_io.check_apart(output_model_dir, "--output_model_dir", {"--model_dir": model_dir, **(inputs or {})})
  config = model_directory.path(output_model_dir, model_directory.CONFIG_FILE)
  if not file_io.isdir(output_model_dir) or not file_io.gfile().listdir(output_model_dir):
    return
  if not file_io.exists(config):
    raise ValueError(f"--output_model_dir={output_model_dir} holds files and no {model_directory.CONFIG_FILE}: it "
                     "would be replaced whole. Give a new folder (or an earlier grown model's, to replace it).")
  from official_albert.checkpoints import convert  # noqa: PLC0415 (binary: TF after launch)
  ours = {model_directory.CONFIG_FILE, model_directory.SPM_FILE, convert.NORMALIZE_DIR}
  ours |= {n.split("/")[0] for n in side_files()}
  others = sorted(n.rstrip("/") for n in file_io.gfile().listdir(output_model_dir)
                  if n.rstrip("/") not in ours and not n.startswith(model_directory.NATIVE_CHECKPOINT_PREFIX + "."))
  if others:  # (a training run's folder has a config.json too: its checkpoints, records and results were deleted)
    raise ValueError(f"--output_model_dir={output_model_dir} holds files this tool does not write ({others[:5]}): it "
                     "would be replaced whole, and they lost. Give a new folder (or an earlier grown model's, to "
                     "replace it).")


def _with_new_rows(value: np.ndarray, kind: str, start: int, stop: int, initializer_range: float,
                   seed: int) -> np.ndarray:
  """`value` with rows start..stop-1 drawn afresh (`kind`: "initializer" or "zeros"), grown as far as `stop`.

  One draw of stop - start rows, whether they replace unused rows or extend the table, so the rows a seed gives a
  piece do not depend on the table's size.
  """
  from official_albert.modeling.layers.initializers import kernel_initializer  # noqa: PLC0415 (binary: TF later)
  shape = (stop - start,) + value.shape[1:]
  if kind == "initializer":
    fresh = np.asarray(kernel_initializer(initializer_range, seed=seed)(shape=shape, dtype="float32"))
  else:
    fresh = np.zeros(shape, value.dtype)
  return np.concatenate([value[:start], fresh.astype(value.dtype), value[stop:]], axis=0)


def too_many_pieces(model_dir: str, spm_model_file: str, pieces: int, rows: int) -> str:
  """The error for a vocabulary with more pieces than the model's table has rows (its ids past the table)."""
  own = model_directory.find_spm_model(model_dir) or "the one its training run used"
  return (f"--spm_model_file={spm_model_file} has {pieces} pieces but --model_dir={model_dir}'s word-embedding table "
          f"has {rows} rows (config vocab_size={rows}): ids {rows}..{pieces - 1} have no row, so the model was not "
          f"trained with this SentencePiece model. Pass the model's own spiece.model ({own}).")
