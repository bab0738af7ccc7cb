"""Checkpoint conversion between the original TF1 release, Hugging Face (PyTorch and TensorFlow files), KerasHub
presets and our native model directory.

`convert(input_format, input, output_format, output_dir, ...)` loads the input into one of our models
(`loading.load_model_from`: full consumption, exact shapes) and writes it with the output format's writer
(`hf.write_hf`, `tf1.write_tf1`, `native.write_native`, `keras_hub_preset.write_keras_hub`); `format_summary` renders
what was read, skipped and written. Without a model type, the input's own record of its head decides (HF
`architectures`, a KerasHub task), else the pretrainer.
The binary `official_albert.convert_checkpoint` is a thin flag layer over these two functions.
"""

from __future__ import annotations

import dataclasses
from typing import Dict, List, Mapping, Optional, Sequence

from official_albert import file_io
from official_albert import model_directory as md
from official_albert.checkpoints import hf
from official_albert.checkpoints import keras_hub_preset
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
from official_albert.checkpoints.sentence_transformers_folder import read_embedding_settings
from official_albert.checkpoints.sentence_transformers_folder import read_tokenizer_options
from official_albert.checkpoints.sentence_transformers_folder import write_embedding_settings
from official_albert.checkpoints.sentence_transformers_folder import write_hf_tokenizer_config
from official_albert.checkpoints.sentence_transformers_folder import write_tokenizer_options

# (transformers' and sentence_transformers_folder's name for the tokenizer's options file)
_TOKENIZER_CONFIG_FILE = "tokenizer_config.json"


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
    `missing_allowed`, `written`, `written_parameters`, `excluded` {name: reason}, `spm_model`.
  """
  for flag, value, allowed in (("input_format", input_format, INPUT_FORMATS),
                               ("output_format", output_format, FORMATS)):
    if value not in allowed:
      raise ValueError(f"--{flag}={value!r} is not one of {allowed}.")
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
  if output_format == "hf":
    if model_type not in hf.HF_ARCHITECTURES:
      raise ValueError(f"--model_type={model_type} has no Hugging Face class; use --output_format=native or tf1.")
  model, summary = load_model_from(input_format, input_path, albert_config_file, model_type, num_labels, num_choices,
                         allow_missing, allow_unused)
  if max_position_embeddings is not None or attention:
    before = model.config.max_position_embeddings
    model = extend_model(model, max_position_embeddings, dict(attention or {}))
    summary["extended"] = {"max_position_embeddings": [before, model.config.max_position_embeddings],
                           "attention_type": model.config.attention_type}
  if output_format == "keras_hub":
    # Before anything is written: what the preset cannot hold is refused by name.
    keras_hub_preset.check_expressible(model.config, model_type)
  spm_model = spm_model_file or md.find_spm_model(input_dir(input_format, input_path))
  writer = {"hf": lambda: hf.write_hf(model, model_type, output_dir),
            "tf1": lambda: tf1.write_tf1(model, output_dir),
            "native": lambda: native.write_native(model, output_dir),
            # The SentencePiece model goes into the preset as its tokenizer's asset.
            "keras_hub": lambda: keras_hub_preset.write_keras_hub(model, model_type, output_dir, spm_model)
            }[output_format]
  summary.update(writer())
  if spm_model and output_format != "keras_hub":
    file_io.atomic_copy(spm_model, md.path(output_dir, md.SPM_FILE))
  # A classifier's label names (labels.json also holds the columns training read and a multi-label threshold) travel
  # with the weights, whatever the formats: without them the answers would become LABEL_0, LABEL_1, ...
  for name in (md.LABELS_FILE, md.LABELS_TEXT_FILE):
    labels = md.path(input_dir(input_format, input_path), name)
    if file_io.exists(labels):
      file_io.atomic_copy(labels, md.path(output_dir, name))
      summary["files"] = list(summary.get("files", [])) + [name]
  if embedding and output_format in ("native", "hf"):
    summary["files"] = list(summary.get("files", [])) + write_embedding_folder(
        input_dir(input_format, input_path), output_dir, output_format, embedding, model.config)
  summary.update(input=input_path, input_format=input_format, output_dir=output_dir, output_format=output_format,
                 model_type=model_type, spm_model=spm_model)
  return summary


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
  settings = dataclasses.replace(embedding, transformer_path="")
  files = write_embedding_settings(output_dir, settings, config.hidden_size, slow_tokenizer=output_format == "hf")
  options = read_tokenizer_options(source_dir)
  if output_format == "hf":
    length = min(settings.max_seq_length or config.max_position_embeddings, config.max_position_embeddings)
    write_hf_tokenizer_config(output_dir, options, length)
    files.append(_TOKENIZER_CONFIG_FILE)
  elif options:
    write_tokenizer_options(output_dir, options)
    files.append(_TOKENIZER_CONFIG_FILE)
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
  return "\n".join(lines)
