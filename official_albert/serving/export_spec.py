"""What the exporters take from a model directory: one specification, one precision check, one read of the directory.

The SavedModel export (`export.export_from_model_dir`), the OpenVINO export (`openvino_export.export_openvino`) and
the LiteRT export (`litert_export.export_litert`) serve the same model with the same text-in contract, so they share
what they read and how they check it: `ExportSpec` holds the shared settings (which directory and head, the packed
length, the tokenizer, the [MASK] slots, the encoder's sentence pooling, overwrite); `check_precision` is the one
check of every format's precision; `load_for_export` reads the model directory once (`model_directory.ModelDirectory`:
model, SentencePiece model, labels, embedding settings) and checks what all need checked (seq_length against the
position table, the tokenizer's vocabulary against the model's).

Long because: the specification and the one read of the directory are one concept that every format shares.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Dict, List, Optional, Sequence, Union

import tensorflow as tf

from official_albert import directory_io
from official_albert import file_io
from official_albert import model_directory as md
from official_albert.checkpoints.formats import MODEL_TYPES
from official_albert.checkpoints.loading import load_model
from official_albert.checkpoints.names import CheckpointMismatchError
from official_albert.checkpoints.sentence_transformers_folder import EmbeddingSettings
from official_albert.checkpoints.sentence_transformers_folder import model_tokenizer_options
from official_albert.checkpoints.sentence_transformers_folder import read_embedding_settings
from official_albert.checkpoints.sentence_transformers_folder import resolve_embedding_settings
from official_albert.modeling.early_exit import check_head_options
from official_albert.modeling.early_exit import DEFAULT_EXIT_THRESHOLD
from official_albert.modeling.early_exit import EXIT_HEAD_TYPES
from official_albert.modeling.early_exit import with_exit_iteration
from official_albert.modeling.embedder import AlbertEmbedder
from official_albert.precision import DTYPE_POLICIES
from official_albert.precision import global_dtype_policy
from official_albert.retrieval.matryoshka import check_dim
from official_albert.serving import openvino_ir
from official_albert.serving import qa_settings
from official_albert.tokenization import FullTokenizer
from official_albert.tokenization.choices import check_qa_length
from official_albert.tokenization.choices import fit_qa_length

logger = logging.getLogger(__name__)

# Each format's precisions: the SavedModel's compute dtype (a Keras policy), OpenVINO's inference precision,
# LiteRT's weight storage (int8: weights quantized, activations float).
PRECISIONS = {"saved_model": tuple(DTYPE_POLICIES), "openvino": openvino_ir.PRECISIONS, "litert": ("f32", "int8")}
# The packed length of an export that names none, when the model has that many positions (else all of them).
DEFAULT_SEQ_LENGTH = 128
# The argument that names the precision of each format (the SavedModel's is a dtype).
_PRECISION_ARGUMENT = {"saved_model": "dtype", "openvino": "precision", "litert": "precision"}


def check_precision(export_format: str, value: str) -> str:
  """`value` when it is one of `export_format`'s precisions; else a ValueError listing them."""
  allowed = PRECISIONS[export_format]
  if value not in allowed:
    raise ValueError(f"{_PRECISION_ARGUMENT[export_format]}={value!r} is not one of {allowed}.")
  return value


def export_seq_length(seq_length: Optional[int], max_position_embeddings: int) -> int:
  """The packed length of an export: `seq_length` when given, else `DEFAULT_SEQ_LENGTH` cut to the model's position
  table (logged), so the documented commands, which name none, export a model of fewer positions (the demo's 32).

  Raises:
    ValueError: an explicit `seq_length` beyond `max_position_embeddings` (the model has no position for it).
  """
  if seq_length is None:
    length = min(DEFAULT_SEQ_LENGTH, int(max_position_embeddings))
    if length < DEFAULT_SEQ_LENGTH:
      logger.info("seq_length %d -> %d: the model has max_position_embeddings %d (pass --seq_length to choose).",
                  DEFAULT_SEQ_LENGTH, length, max_position_embeddings)
    return length
  if seq_length > max_position_embeddings:
    raise ValueError(f"seq_length={seq_length} exceeds the model's max_position_embeddings "
                     f"({max_position_embeddings}): pass --seq_length={max_position_embeddings} or less, or leave "
                     f"it out (default: {DEFAULT_SEQ_LENGTH} cut to the model's positions).")
  return int(seq_length)


def warn_below_recorded_length(model_dir: str, seq_length: int, max_position_embeddings: int) -> None:
  """Logs a warning when an export at the default length packs shorter than the run that wrote `model_dir` recorded
  (`model_directory.recorded_seq_length`, which the pipelines pack the directory at): its texts between the two lengths
  would get other answers from the export than from the directory. The default stays documented (128 cut to the
  positions); the warning names the --seq_length that matches the directory."""
  recorded = md.recorded_seq_length(model_dir or None)
  if recorded is None:
    return
  target = min(recorded, int(max_position_embeddings))
  if seq_length < target:
    logger.warning("%s: params.yaml records seq_length=%d (the predict length the pipelines pack this directory at) "
                   "but the export packs at the default %d: texts longer than %d pieces get other answers than from "
                   "the directory; pass --seq_length=%d to export at the recorded length.",
                   model_dir, recorded, seq_length, seq_length, target)


@dataclasses.dataclass(frozen=True)
class ExportSpec:
  """The settings both exports share.

  Attributes:
    model_dir: a native, HF or original-release directory (`checkpoints.loading.load_model`).
    export_dir: where the export goes (written beside it under a temporary name, then renamed into place).
    head: one of `MODEL_TYPES`; num_labels (default: from the checkpoint) and num_choices shape the head.
    seq_length: the packed length text is cut to; None (the binary's default) = `DEFAULT_SEQ_LENGTH` cut to the
      model's max_position_embeddings (logged: `export_seq_length`), with a warning when the run recorded a longer
      predict length (`warn_below_recorded_length`). A value beyond the model's positions is refused.
    spm_model_file: default: the directory's SentencePiece model; without one the export takes ids only.
    do_lower_case, tokenizer_mode, keep_accents, remove_space: the tokenizer's settings for text in (as
      `FullTokenizer`); do_lower_case / keep_accents / remove_space None: as the directory's model was trained (its
      tokenizer_config.json — an old sentence-transformers folder's in its Transformer subfolder —, for do_lower_case
      else its params.yaml), else FullTokenizer's defaults True / False / True (`tokenizer_options`).
    max_predictions_per_seq: [MASK] slots of the pretrainer's text in.
    text_pair: serving_default takes `text` and `text_b`.
    pooling, normalize: the encoder's sentence embedding (`sentence_embedding` output, `embed` signature): a
      `POOLING_MODES` name or list and L2 normalisation; default: the directory's sentence-transformers settings,
      else mean pooling without normalisation. Encoder head only.
    dim: the encoder's Matryoshka width: the sentence embedding cut to its first `dim` dimensions and re-normalised
      in the graph (`AlbertEmbedder(dim=...)`, what `pipelines.embed(..., dim=K)` returns). Refused when the
      directory was not trained at that width (its embedding_training.json) unless `force_dim`. None = the whole
      vector. Fixed at export: a TF Serving signature has no optional inputs (the OpenVINO / LiteRT folders also
      take `embed(folder, texts, dim=K)` per call, and the server OpenAI's `dimensions`).
    force_dim: export a `dim` the directory records no training at.
    overwrite: replace an existing export_dir.
    patience, depth, exit_threshold: classifier / multiple choice: the early exit (`modeling.early_exit`; needs exit
      heads) or a static depth k, fixed at export; both formats then also return `exit_iteration` [B] (L, k or each
      row's). Fixed, not a request input: a TF Serving signature has no optional inputs, so a patience input would
      change every client's request; patience 0 exports today's graph.
    max_qa_length: multiple choice: the question+option pieces the text signatures' rows keep (`qa_length`); None:
      the run's recorded task.max_qa_length, else RACE's 128 fitted to seq_length, as the pipelines pick it.
  """
  model_dir: str
  export_dir: str
  head: str = "pretrainer"
  seq_length: Optional[int] = None
  spm_model_file: Optional[str] = None
  num_labels: Optional[int] = None
  num_choices: int = 4
  do_lower_case: Optional[bool] = None
  tokenizer_mode: str = "hf"
  max_predictions_per_seq: int = 20
  text_pair: bool = False
  pooling: Optional[Union[str, Sequence[str]]] = None
  normalize: Optional[bool] = None
  overwrite: bool = False
  dim: Optional[int] = None
  force_dim: bool = False
  patience: int = 0
  depth: Optional[int] = None
  exit_threshold: float = DEFAULT_EXIT_THRESHOLD
  keep_accents: Optional[bool] = None
  remove_space: Optional[bool] = None
  max_qa_length: Optional[int] = None

  def weights_dir(self) -> str:
    """The folder of the model's files: model_dir, or for the encoder of an old sentence-transformers folder its
    Transformer subfolder (`0_Transformer/`: its weights, spiece.model and tokenizer_config.json). '' for a model in
    hand (no folder is read then)."""
    if self.head != "encoder" or not self.model_dir:
      return self.model_dir
    settings = read_embedding_settings(self.model_dir)
    return md.path(self.model_dir, settings.transformer_path) if settings and settings.transformer_path else (
        self.model_dir)

  def tokenizer_options(self) -> Dict[str, bool]:
    """The in-graph tokenizer's do_lower_case, keep_accents and remove_space (`FullTokenizer`'s keywords): the
    spec's, else as `weights_dir` records them (what `embed` and HF's AlbertTokenizer read there), else the
    defaults. Every export records all three (tokenization_info, serving_config.json), so it tokenizes as the
    directory does."""
    options = model_tokenizer_options(self.weights_dir(), self.do_lower_case)
    for key in ("keep_accents", "remove_space"):
      if getattr(self, key) is not None:
        options[key] = bool(getattr(self, key))
    return options

  def lower_case(self) -> bool:
    """The in-graph tokenizer's do_lower_case (`tokenizer_options`)."""
    return self.tokenizer_options()["do_lower_case"]

  def qa_length(self, seq_length: int) -> int:
    """Multiple choice: the question+option cap of rows of `seq_length` pieces (RACE's `pack_choices`, which the
    records and the pipelines pack with): the spec's; else the run's recorded task.max_qa_length, else RACE's 128,
    fitted to `seq_length` (`choices.fit_qa_length`: 32 at 128), as `pipelines.multiple_choice` picks it for the
    folder. A recorded value that leaves the article no piece at this length (a 512 / 128 run exported at the default
    128) is fitted instead, with a warning; a given one is refused, naming the fix."""
    if self.max_qa_length is not None:
      if not 1 <= self.max_qa_length <= seq_length - 4:
        raise ValueError(f"max_qa_length={self.max_qa_length} must be between 1 and seq_length - 4 = "
                         f"{seq_length - 4} (the article keeps at least one piece): pass a smaller max_qa_length or "
                         "a larger seq_length.")
      return int(self.max_qa_length)
    recorded = md.recorded_task_int(self.model_dir or None, "max_qa_length")
    qa = fit_qa_length(seq_length, recorded)
    if recorded is not None and qa + 4 > seq_length:
      qa = fit_qa_length(seq_length)
      logger.warning("%s records task.max_qa_length=%d, which leaves no article piece at seq_length=%d: the text "
                     "signatures keep %d question+option pieces (export at --seq_length=%d or more to keep %d).",
                     self.model_dir, recorded, seq_length, qa, recorded + 4, recorded)
    return qa

  def qa_settings(self) -> Dict[str, Union[int, float]]:
    """A SQuAD head's windows and post-processing as its run recorded them (`qa_settings.recorded_qa_settings`):
    the export carries them, so the pipelines and the server answer as the run's --mode=predict did."""
    return qa_settings.recorded_qa_settings(self.model_dir or None) if self.head in qa_settings.QA_HEADS else {}

  def check(self) -> None:
    """What can be told before anything loads: the head, the pooling, a max_qa_length below 1 or for a head without
    choices, a model_dir whose TF checkpoint could not be read (glob characters in its path), an export_dir that
    holds the model_dir (`directory_io.check_apart`), and an export_dir that is there without `overwrite`."""
    if self.model_dir and _holds_tf_checkpoint(self.model_dir):
      file_io.check_checkpoint_path(self.model_dir, "--model_dir")
    if self.head not in MODEL_TYPES:
      raise ValueError(f"head={self.head!r} is not one of {MODEL_TYPES}.")
    if self.head != "encoder" and (self.pooling is not None or self.normalize is not None):
      raise ValueError(f"pooling / normalize shape the encoder's sentence embedding; head={self.head!r} has none "
                       "(export --head=encoder).")
    if self.head != "encoder" and self.dim is not None:
      raise ValueError(f"dim={self.dim} cuts the encoder's sentence embedding; head={self.head!r} has none "
                       "(export --head=encoder).")
    if self.max_qa_length is not None:  # (refused before the model loads, not at its first multiple-choice row)
      if self.head != "multiple_choice":
        raise ValueError(f"max_qa_length caps multiple-choice rows; head={self.head!r} packs no choices.")
      check_qa_length(int(self.max_qa_length))
    check_head_options(self.head, self.patience, self.depth)
    directory_io.check_apart(self.export_dir, "export_dir", {"model_dir": self.model_dir})
    if file_io.exists(self.export_dir) and not self.overwrite:
      raise FileExistsError(f"{self.export_dir} exists; pass overwrite=True (--overwrite) to replace it.")


def _holds_tf_checkpoint(model_dir: str) -> bool:
  """Whether `model_dir` is read through a TF checkpoint (native, original release); HF and KerasHub weights are
  files read by name. A directory of neither answers False: loading it says what is missing."""
  try:
    return md.detect_format(model_dir) in ("native", "tf1")
  except FileNotFoundError:
    return False


@dataclasses.dataclass
class LoadedExport:
  """The model directory as an export needs it.

  Attributes:
    model: the Keras model of the spec's head, weights loaded.
    spm_model_file: the SentencePiece model for text in (None: ids only).
    tokenizer: its `FullTokenizer` (vocabulary checked against the model's), or None.
    labels: the argmax's names (classifier / token classifier: labels.json, else HF id2label / labels.txt); None
      for regression, multi-label and unnamed outputs.
    multi_label: a classifier whose labels are independent sigmoids (labels.json says so).
    threshold: the probability at which such a label is predicted.
    label_file: the directory's labels.json, None without one.
    embedding: the encoder's sentence-embedding settings (the model is then an `AlbertEmbedder`); None for the
      other heads.
    seq_length: the export's packed length (`export_seq_length`: the spec's, else the default cut to the model);
      None for a model in hand (`AlbertServingModule` resolves it).
  """
  model: object
  spm_model_file: Optional[str]
  tokenizer: Optional[FullTokenizer]
  labels: Optional[List[str]]
  multi_label: bool
  threshold: float
  label_file: Optional[md.LabelFile]
  embedding: Optional[EmbeddingSettings] = None
  seq_length: Optional[int] = None

  def at_length(self, spec: ExportSpec) -> ExportSpec:
    """`spec` with its seq_length resolved as this load resolved it (what the folder's files record)."""
    return dataclasses.replace(spec, seq_length=self.seq_length)

  def export_label_file(self) -> Optional[md.LabelFile]:
    """The labels.json an export folder carries (read by `pipelines.classify`): the names, and for a multi-label
    model that its outputs are per-label sigmoids and the threshold; None without names."""
    if self.multi_label:
      return md.LabelFile(self.label_file.labels, True, self.threshold)
    return md.LabelFile(self.labels) if self.labels is not None else None


# The head of the models each fine-tuning task trains (labels.json's "task" names the task that wrote it).
HEAD_OF_TASK = {"text_classification": "classifier", "text_regression": "classifier",
                "token_classification": "token_classifier"}
HEADS_OF_RUNS = ("pretrainer (a pretraining run), classifier (glue/*, text_classification, text_regression), "
                 "token_classifier (token_classification), span (squad_v1), squad_v2 (squad_v2), "
                 "multiple_choice (race, text_multiple_choice), encoder (any); left out, the directory's own")


def wrong_head_message(directory: md.ModelDirectory, head: str, error: Exception) -> str:
  """The checkpoint-mismatch `error` of loading `head`, told as what a command-line user can change: the --head."""
  lines = [line for line in str(error).splitlines() if "allow_missing" not in line]
  saved = directory.label_file if file_io.exists(directory.file(md.LABELS_FILE)) else None
  trained = HEAD_OF_TASK.get(saved.task) if saved is not None else None
  hint = (f" {directory.file(md.LABELS_FILE)} says the model was trained by {saved.task}: use --head={trained}."
          if trained and trained != head else "")
  return (f"--head={head}: {directory.path} does not hold a {head} model.{hint} --head names the model the run "
          f"trained: {HEADS_OF_RUNS}.\n" + "\n".join(lines))


def checked_tokenizer(spm_model_file: str, spec: ExportSpec, config) -> FullTokenizer:
  """The `FullTokenizer` of `spm_model_file` at the spec's settings, refused when it has more pieces than the model
  (`config`) has embedding rows (fewer pieces: rows never used)."""
  tokenizer = FullTokenizer(spm_model_file, mode=spec.tokenizer_mode, **spec.tokenizer_options())
  if tokenizer.vocab_size > config.vocab_size:
    raise ValueError(f"{spm_model_file} has {tokenizer.vocab_size} pieces but the model's vocab_size is "
                     f"{config.vocab_size}: the ids beyond it have no embedding row.")
  return tokenizer


def masks_in_graph(head: str, tokenizer: FullTokenizer) -> FullTokenizer:
  """`tokenizer`, refused for a pretrainer's SavedModel text signatures in a mode other than "hf": the graph's
  tokenizer keeps [MASK] as one token only in that mode (no call found a mask). An OpenVINO or LiteRT folder
  tokenizes in Python, where every mode keeps it (`FullTokenizer.encode_ids_with_masks_batch`)."""
  if head == "pretrainer" and tokenizer.mode != "hf":
    raise ValueError(f"tokenizer_mode={tokenizer.mode!r}: a pretrainer SavedModel's text signatures fill [MASK]s, and "
                     "the in-graph tokenizer keeps [MASK] as one token only in tokenizer_mode='hf'; export it with "
                     "--tokenizer_mode=hf (or without spiece.model: id signatures only; or --format=openvino).")
  return tokenizer


def load_for_export(spec: ExportSpec, dtype: str = "float32") -> LoadedExport:
  """Reads `spec.model_dir` once for an export; the model is built under `dtype`'s Keras policy (float32 | bfloat16)."""
  directory = md.ModelDirectory(spec.model_dir)
  embedding = None
  if spec.head == "encoder":
    embedding = resolve_embedding_settings(spec.model_dir, spec.pooling, spec.normalize)
    # (an old sentence-transformers folder: the encoder's files are in a subfolder)
    directory = md.ModelDirectory(spec.weights_dir())
  with global_dtype_policy(DTYPE_POLICIES[check_precision("saved_model", dtype)]):
    try:
      model, summary = load_model(directory, spec.head, num_labels=spec.num_labels, num_choices=spec.num_choices)
    except CheckpointMismatchError as e:
      raise CheckpointMismatchError(wrong_head_message(directory, spec.head, e)) from None
    if embedding is not None:
      dim = None
      if spec.dim is not None:
        width = model.config.hidden_size * len(embedding.pooling)
        dim = check_dim(spec.model_dir, spec.dim, width, spec.force_dim, purpose="export --dim")
      model = AlbertEmbedder(pooling=embedding.pooling, normalize=embedding.normalize, encoder=model, dim=dim)
  logger.info("Loaded %s: %s", spec.model_dir, {k: summary[k] for k in ("loaded", "parameters")})
  config = model.config
  if spec.patience and not getattr(model, "exit_heads", False):
    raise ValueError(f"{spec.model_dir} has no exit heads: patience={spec.patience} needs a model fine-tuned with "
                     "task.exit_heads=true (or export a static depth with depth=k).")
  if spec.depth is not None:
    model.encoder.check_depth(spec.depth)
  seq_length = export_seq_length(spec.seq_length, config.max_position_embeddings)
  if spec.seq_length is None:
    warn_below_recorded_length(spec.model_dir, seq_length, config.max_position_embeddings)
  spm_model_file = spec.spm_model_file or directory.spm_model
  tokenizer = None
  if spm_model_file:
    tokenizer = checked_tokenizer(spm_model_file, spec, config)
  else:
    logger.warning("%s has no %s: the export takes token ids only (no text in).", spec.model_dir, md.SPM_FILE)
  labels, multi_label, threshold = _labels(directory, model, spec.head)
  return LoadedExport(model, spm_model_file, tokenizer, labels, multi_label, threshold, directory.label_file,
                      embedding, seq_length)


def _labels(directory: md.ModelDirectory, model, head: str):
  """(names of the argmax or None, multi_label, threshold) of a classifier / token classifier; a regression head
  (one output) has none: its score is the answer."""
  if head not in ("classifier", "token_classifier"):
    return None, False, md.MULTI_LABEL_THRESHOLD
  outputs = int(model.classifier.output_weights.shape[0])
  if head == "classifier" and outputs == 1:
    return None, False, md.MULTI_LABEL_THRESHOLD
  saved = directory.label_file
  if saved is not None and saved.multi_label:
    return None, head == "classifier", saved.threshold
  if saved is not None and saved.labels:
    names = list(saved.labels)
  else:
    names = md.fallback_label_names(directory.path, outputs)
    if names == [f"LABEL_{i}" for i in range(outputs)]:
      return None, False, md.MULTI_LABEL_THRESHOLD
  if len(names) != outputs:
    raise ValueError(f"{len(names)} labels {names[:5]}... but the {head} has {outputs} outputs; the labels file "
                     "belongs to another model.")
  return names, False, md.MULTI_LABEL_THRESHOLD


def ids_function(model, head: str, num_choices: Optional[int] = None, outputs: Optional[Sequence[str]] = None,
                 float32_outputs: bool = False, patience: int = 0, depth: Optional[int] = None,
                 exit_threshold: float = DEFAULT_EXIT_THRESHOLD, multi_label_threshold: Optional[float] = None):
  """The graph the OpenVINO and LiteRT converters take: `model` on token ids, as the SavedModel's `from_ids`.

  Returns (a `tf.function` with `openvino_ir.input_names(head)` as int32 inputs — ids `[B, S]`, multiple choice
  `[B, C, S]`, the other inputs `[B, S]` — returning {name: output} for `outputs` (default the head's
  `OUTPUT_NAMES`), cast to float32 when `float32_outputs`), the input names, the output names).
  patience, depth, exit_threshold, multi_label_threshold: classifier / multiple choice (`ExportSpec`), whose graph
  also returns `exit_iteration` (L, k or each row's).
  """
  if head == "multiple_choice":
    num_choices = num_choices or getattr(model, "num_choices", None)
    if not num_choices:
      raise ValueError("head='multiple_choice' needs num_choices (the model's, or pass num_choices=).")
  shape = [None, int(num_choices), None] if head == "multiple_choice" else [None, None]
  names = openvino_ir.input_names(head)
  specs = [tf.TensorSpec(shape if n in openvino_ir.ID_NAMES else [None, None], tf.int32, name=n) for n in names]
  wanted = tuple(outputs or openvino_ir.OUTPUT_NAMES[head])
  options = {}
  if head in EXIT_HEAD_TYPES:
    options = {"patience": patience, "depth": depth}
    if patience and head == "classifier":
      options.update(exit_threshold=exit_threshold, multi_label_threshold=multi_label_threshold)

  @tf.function(input_signature=specs, autograph=False)
  def from_ids(*args):
    out = model(dict(zip(names, args)), training=False, **options)
    if head in EXIT_HEAD_TYPES:
      out = with_exit_iteration(dict(out), depth or model.config.num_hidden_layers)
    missing = [k for k in wanted if k not in out]
    if missing:
      raise ValueError(f"head={head!r}: the model returned {sorted(out)} without {missing}; is it a {head} model?")
    return {k: tf.cast(out[k], tf.float32) if float32_outputs else out[k] for k in wanted}

  return from_ids, names, wanted
