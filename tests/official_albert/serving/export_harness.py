"""The export harness's table: what every export format does with every head and every attention type.

The model harness's twin (tests/official_albert/modeling/test_model_harness.py): a cell is (format, model, attention
type), and `RULES` below is the one place that says what the cell must do:
- `Equal(atol=..., cosine=...)`: the exported folder, run by its runtime, gives the Keras model's outputs on the same
  packed real text (every output both have; integer outputs exactly where the runtime computes in float32);
- `Refuses(match)`: the export raises, and its message contains `match` (it names why and the way out);
- `Warns(match)`: the export is written with a logged warning containing `match`, because the format's runtime
  computes other numbers (the harness checks that it does, so that the warning stays true);
- `NoExport(why)`: the format has no writer for this model (HF-TF is read only; a sentence-transformers folder
  holds an encoder and its pooling).

Every cell is matched by exactly one rule (tests/official_albert/serving/test_export_harness.py keeps it so), and
each exporter's `supports(attention_type)` agrees with the table. `Exports` (the session fixture `tiny_exports` in
tests/conftest.py) builds each folder once per session; the OpenVINO and LiteRT tests read the same folders.

Runtimes: SavedModel (`tf.saved_model.load`, its `from_ids` signature), OpenVINO (the IR compiled at f32 / bf16 /
int8), LiteRT (`LiteRTExport`), HF (transformers' PyTorch classes), sentence-transformers folders (transformers'
AlbertModel, then the pooling and normalisation of the folder's modules.json), KerasHub presets (read back by our
loader: the parity with KerasHub's own classes is test_keras_hub_presets.py's).
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import json
import logging
import os
import pathlib
import shutil
from typing import Dict, Optional, Tuple

import numpy as np

from official_albert.config import ATTENTION_TYPES
from tests import tiny

SEQ = 48  # > block_sparse's dense-fallback length below ((5 + 2·1)·4 = 28): the sparse pattern runs
NUM_CHOICES = tiny.NUM_CHOICES
# The attention fields of each type's models (same weights as the dense model: attention types share weights).
ATTENTION = {"dense": {}, "chunked": dict(query_chunk_size=8, key_chunk_size=16),
             "block_sparse": dict(block_size=4, num_random_blocks=1, block_sparse_seed=7)}
# {model name: (head, num_labels, exit heads)}: tiny.HEADS's heads, and a classifier with exit heads exported with a
# patience (its rows leave at different depths).
MODELS = {**{name: (head, labels, False) for name, (head, labels) in tiny.HEADS.items()},
          "exit_classifier": ("classifier", tiny.NUM_LABELS, True)}
DONE = "done"  # the marker of a finished model directory or export folder
PATIENCE = 1  # exit_classifier's export and Keras call
EMBEDDING = dict(pooling=("cls", "mean"), normalize=True)  # the sentence-transformers folder's settings
FORMATS = ("saved_model", "openvino_f32", "openvino_bf16", "openvino_int8", "litert", "hf", "hf_tf", "keras_hub",
           "sentence_transformers")
# Real text: a padded row, a long one, non-ASCII; the second segments for pairs, questions and choices.
TEXTS = ("The quick brown fox jumps over the lazy dog.", "Naïve café — 日本語 Straße ✓ déjà vu, 1990, ok.",
         "In 1990, the library had 12 modules; by 2001 about 340, or 7%, of the files were parsed, and the parser "
         "was rewritten twice.", "short")
PAIRS = ("Who jumps?", "What is it?", "How many modules were there in 1990?", "a second segment here")


@dataclasses.dataclass(frozen=True)
class Equal:
  atol: Optional[float] = None  # float outputs within this absolute difference
  cosine: Optional[float] = None  # or each float output's cosine to Keras' at least this (reduced precisions)
  outputs: Optional[Tuple[str, ...]] = None  # the outputs the format carries (None: every output both have)
  full_depth: bool = False  # the format drops exit heads: compared with Keras at full depth


@dataclasses.dataclass(frozen=True)
class Refuses:
  match: str


@dataclasses.dataclass(frozen=True)
class Warns:
  match: str


@dataclasses.dataclass(frozen=True)
class NoExport:
  why: str


ALL_MODELS = tuple(MODELS)
ALL_ATTENTION = ATTENTION_TYPES
NOT_DENSE = tuple(a for a in ATTENTION_TYPES if a != "dense")
LITERT_MODELS = ("encoder", "classifier", "regression", "multiple_choice")
HF_MODELS = tuple(m for m in MODELS if m not in ("squad_v2", "exit_classifier"))
HF_ANY_DEPTH = HF_MODELS + ("exit_classifier",)
KERAS_HUB_MODELS = ("encoder", "pretrainer", "classifier", "regression")


@dataclasses.dataclass(frozen=True)
class Rule:
  format: str
  models: Tuple[str, ...]
  attention: Tuple[str, ...]
  outcome: object


# The table. One rule per line; a cell must match exactly one.
RULES = (
    Rule("saved_model", ALL_MODELS, ALL_ATTENTION, Equal(atol=1e-5)),
    Rule("openvino_f32", ALL_MODELS, ALL_ATTENTION, Equal(atol=1e-4)),
    Rule("openvino_bf16", tuple(m for m in ALL_MODELS if m != "multiple_choice"), ALL_ATTENTION, Equal(cosine=0.999)),
    # The tiny multiple-choice model's logits are ~1e-2 apart from each other (each weight's own initializer), where
    # bf16's rounding of the hidden states moves them by ~2e-3: 0.99 (0.991 measured on the AMX Xeon, 2026-12-01).
    Rule("openvino_bf16", ("multiple_choice",), ALL_ATTENTION, Equal(cosine=0.99)),
    Rule("openvino_int8", ALL_MODELS, ("dense", "chunked"), Equal(cosine=0.95)),
    Rule("openvino_int8", ALL_MODELS, ("block_sparse",), Refuses("--precision=int8 of attention_type='block_sparse'")),
    Rule("litert", LITERT_MODELS, ("dense",), Equal(atol=1e-4)),
    Rule("litert", LITERT_MODELS, NOT_DENSE, Refuses("the LiteRT export traces dense attention")),
    Rule("litert", ("pretrainer", "token_classifier", "span", "squad_v2"), ALL_ATTENTION,
         Refuses("--format=litert exports --head=encoder | classifier | multiple_choice")),
    Rule("litert", ("exit_classifier",), ALL_ATTENTION, Refuses("the LiteRT export runs every row at full depth")),
    # chunked computes dense's function: HF's dense AlbertModel gives its numbers too.
    Rule("hf", HF_MODELS, ("dense", "chunked"), Equal(atol=1e-4)),
    Rule("hf", HF_ANY_DEPTH, ("block_sparse",), Warns("transformers' AlbertModel ignores it")),
    Rule("hf", ("squad_v2",), ALL_ATTENTION, Refuses("has no Hugging Face class")),
    # HF's AlbertForSequenceClassification has no exit heads: the folder answers at full depth.
    Rule("hf", ("exit_classifier",), ("dense", "chunked"), Equal(atol=1e-4, full_depth=True)),
    Rule("hf_tf", ALL_MODELS, ALL_ATTENTION, NoExport("read only: transformers' TF classes do not run under Keras 3, "
                                                      "so HF-TF files are converted from, never written")),
    Rule("keras_hub", ("encoder", "classifier", "regression"), ("dense", "chunked"), Equal(atol=1e-5)),
    # KerasHub's AlbertMaskedLM has no sentence-order head: the preset carries the MLM and the encoder.
    Rule("keras_hub", ("pretrainer",), ("dense", "chunked"),
         Equal(atol=1e-5, outputs=("mlm_logits", "sequence_output", "pooled_output"))),
    Rule("keras_hub", KERAS_HUB_MODELS + ("exit_classifier",), ("block_sparse",),
         Refuses("KerasHub's TransformerEncoder computes dense")),
    Rule("keras_hub", ("token_classifier", "span", "squad_v2", "multiple_choice"), ALL_ATTENTION,
         Refuses("KerasHub has no ALBERT class for it")),
    Rule("keras_hub", ("exit_classifier",), ("dense", "chunked"),
         Refuses("A KerasHub preset cannot hold this model's 1 exit heads")),
    Rule("sentence_transformers", ("encoder",), ("dense", "chunked"), Equal(atol=1e-5)),
    Rule("sentence_transformers", ("encoder",), ("block_sparse",), Warns("transformers' AlbertModel ignores it")),
    Rule("sentence_transformers", tuple(m for m in MODELS if m != "encoder"), ALL_ATTENTION,
         NoExport("a sentence-transformers folder holds an encoder and its pooling")),
)


def cells():
  """Every (format, model, attention type)."""
  return [(f, m, a) for f in FORMATS for m in MODELS for a in ATTENTION_TYPES]


def matching_rules(cell):
  fmt, model, attention = cell
  return [r for r in RULES if r.format == fmt and model in r.models and attention in r.attention]


def expected(cell):
  rules = matching_rules(cell)
  if len(rules) != 1:
    raise KeyError(f"{cell}: {len(rules)} rules match (each cell needs exactly one in export_harness.RULES)")
  return rules[0].outcome


# ------------------------------------------------------------------------------------------------ models and inputs


def inputs_for(head: str, spm_model_file=tiny.SPM_MODEL_FILE) -> Dict[str, np.ndarray]:
  """`head`'s packed real text (a padded row included), as the exports' text paths pack it."""
  from official_albert.serving import openvino_quantize
  from official_albert.serving.openvino_ir import ID_NAMES
  from official_albert.tokenization import FullTokenizer
  from official_albert.tokenization import pack_ids
  tokenizer = FullTokenizer(str(spm_model_file))
  ids_a = [tokenizer.encode_ids(t) for t in TEXTS]
  ids_b = [tokenizer.encode_ids(t) for t in PAIRS]
  if head == "multiple_choice":
    rows = [[pack_ids(a, ids_b[(k + c) % len(ids_b)], SEQ) for c in range(NUM_CHOICES)] for k, a in enumerate(ids_a)]
    return {k: np.asarray([[r[k] for r in row] for row in rows], np.int32) for k in ID_NAMES}
  rows = [pack_ids(b, a, SEQ) if head in ("span", "squad_v2") else pack_ids(a, None, SEQ)
          for a, b in zip(ids_a, ids_b)]
  inputs = {k: np.asarray([r[k] for r in rows], np.int32) for k in ID_NAMES}
  if head == "pretrainer":
    inputs["masked_lm_positions"] = np.asarray([[1, 3, 0], [2, 4, 5], [1, 2, 3], [1, 0, 0]], np.int32)
  if head == "squad_v2":
    inputs["p_mask"] = openvino_quantize.squad_p_mask(inputs)
  return inputs


@contextlib.contextmanager
def _locked(path: pathlib.Path):
  """An exclusive lock on `path` (a file beside a folder being built): pytest-xdist workers share the folders."""
  with open(path, "a") as f:
    fcntl.flock(f, fcntl.LOCK_EX)
    try:
      yield
    finally:
      fcntl.flock(f, fcntl.LOCK_UN)


def with_text(name: str, attention: str = "dense") -> bool:
  """Whether the model directory has the SentencePiece model (and so its exports a text path)."""
  return attention == "dense" and name in tiny.HEADS


# The SavedModels other tests read through their text signatures; the other SavedModel cells are exported from a copy
# of the directory without the SentencePiece model (the harness calls `from_ids`; the text signatures' tracing is
# two thirds of an export's time).
TEXT_SAVED_MODELS = ("pretrainer", "classifier")


class Models:
  """One tiny model directory per (model name, attention type), built on first use and shared read-only.

  A model's weights are random (seed `tiny.SEED + 100 + its index in MODELS`) plus N(0, 0.1) noise on every weight:
  the biases and LayerNorms (constant at initialisation) count, so that an export dropping one shows, and the
  attention is far from uniform, so that block-sparse attention's outputs differ from dense attention's (by ~0.4 in
  the token vectors; with the initial weights only, by 0.005). The attention types' directories hold the dense
  model's weights with the attention fields of `ATTENTION`. The classifier's directory has label names.
  A directory another pytest-xdist worker built is read, not built again.
  """

  def __init__(self, root):
    self._root = pathlib.Path(root)
    self._root.mkdir(parents=True, exist_ok=True)
    self._models = {}

  def dir(self, name: str, attention: str = "dense") -> str:
    self.model(name, attention)
    return str(self._root / f"{name}-{attention}")

  def model(self, name: str, attention: str = "dense"):
    """The Keras model of the directory: the reference every cell is compared with (do not change its weights)."""
    key = (name, attention)
    if key not in self._models:
      head, num_labels, exit_heads = MODELS[name]
      directory = self._root / f"{name}-{attention}"
      with _locked(self._root / f"{name}-{attention}.lock"):
        if (self._root / f"{name}-{attention}.{DONE}").exists():
          from official_albert.checkpoints.loading import load_model
          self._models[key] = load_model(str(directory), head, num_labels=num_labels, num_choices=NUM_CHOICES)[0]
        else:
          self._models[key] = self._build(name, attention, directory)
          (self._root / f"{name}-{attention}.{DONE}").write_text("")
    return self._models[key]

  def _build(self, name, attention, directory):
    import keras

    from official_albert import AlbertConfig
    from official_albert.checkpoints.loading import build_model
    from official_albert.checkpoints.native import save_pretrained
    from tests.official_albert.serving.random_models import perturb_weights
    head, num_labels, exit_heads = MODELS[name]
    index = list(MODELS).index(name)
    dense = None if attention == "dense" else self.model(name)
    keras.utils.set_random_seed(tiny.SEED + 100 + index)
    config = AlbertConfig(**dict(tiny.MODEL, attention_type=attention, **ATTENTION[attention]))
    model = build_model(head, config, num_labels, NUM_CHOICES, exit_heads=exit_heads)
    if dense is None:
      perturb_weights(model, seed=index)
    else:
      model.set_weights(dense.get_weights())
    shutil.rmtree(directory, ignore_errors=True)  # (a worker that died half way)
    # Only the dense heads' directories have the SentencePiece model (text in: the pipelines' tests read their
    # folders); without it a SavedModel export has the id signatures only, in a third of the time.
    spm_model_file = str(tiny.SPM_MODEL_FILE) if with_text(name, attention) else None
    save_pretrained(model, str(directory), spm_model_file=spm_model_file)
    if name == "classifier":
      (directory / "labels.json").write_text(json.dumps({"labels": list(tiny.LABELS)}))
    return model

  def reference(self, name: str, attention: str = "dense", embedding=None, full_depth=False) -> Dict[str, np.ndarray]:
    """The Keras outputs a cell must give, on `inputs_for(head)` (`full_depth`: without the early exit)."""
    from official_albert.modeling.early_exit import with_exit_iteration
    from official_albert.modeling.embedder import AlbertEmbedder
    head, _, exit_heads = MODELS[name]
    model = self.model(name, attention)
    if head == "encoder":
      model = AlbertEmbedder(encoder=model, **(embedding or {}))
    call = dict(patience=PATIENCE) if exit_heads and not full_depth else {}
    outputs = model(inputs_for(head), training=False, **call)
    outputs = dict(outputs)
    if head in ("classifier", "multiple_choice"):
      outputs = with_exit_iteration(outputs, model.config.num_hidden_layers)
    return {k: np.asarray(v) for k, v in outputs.items() if not isinstance(v, (list, tuple))}


def calibration_file(root: pathlib.Path, head: str) -> str:
  """int8: real-text lines of `head`'s kind (a tab before the second segment; multiple choice: the choices)."""
  path = root / f"calibration-{head}.txt"
  if not path.exists():
    lines = []
    for i in range(10):
      for text, pair in zip(TEXTS, PAIRS):
        if head == "multiple_choice":
          lines.append("\t".join([f"{text} {i}"] + [PAIRS[(i + c) % len(PAIRS)] for c in range(NUM_CHOICES)]))
        elif head in ("span", "squad_v2"):
          lines.append(f"{pair}\t{text} {i}")
        else:
          lines.append(f"{text} {i}")
    partial = path.with_suffix(f".{os.getpid()}")
    partial.write_text("\n".join(lines) + "\n", encoding="utf-8")
    os.replace(partial, path)  # (workers may write it side by side)
  return str(path)


# ------------------------------------------------------------------------------------------------------- exports


def export_options(fmt: str, name: str) -> dict:
  """The `ExportSpec` options of a cell's export (a test exporting the same model otherwise passes them too)."""
  head, _, exit_heads = MODELS[name]
  options = dict(seq_length=SEQ, num_choices=NUM_CHOICES, **(dict(patience=PATIENCE) if exit_heads else {}))
  if fmt == "saved_model" and head == "classifier":
    options["text_pair"] = True  # (test_export.py reads its text-pair signature)
  return options


class ExportError(Exception):
  """A cell with no export (`NoExport`)."""


def export_key(fmt: str, name: str, attention: str = "dense") -> Tuple[str, str, str]:
  """The folder a cell reads: OpenVINO's f32 and bf16 cells share one IR (its precision is chosen at compile time)."""
  return ("openvino" if fmt in ("openvino_f32", "openvino_bf16") else fmt, name, attention)


class Exports:
  """Each cell's export folder, written once per session (`tiny_exports`) and shared read-only.

  `folder(format, model, attention)` returns the folder, or raises what the export raised (the same exception object
  on each ask in a process); `warnings(...)` the warnings the export logged. The pretrainer's IR carries the bf16
  hint (the export's default), the others f32. Under pytest-xdist the workers share one root: a folder one worker
  wrote is read by the others (a lock file per folder), so that each export is written once per run.
  """

  def __init__(self, root, models: Models):
    self._root = pathlib.Path(root)
    self._root.mkdir(parents=True, exist_ok=True)
    self.models = models
    self._errors = {}

  def folder(self, fmt: str, name: str, attention: str = "dense") -> str:
    key = export_key(fmt, name, attention)
    if key in self._errors:
      raise self._errors[key]
    out = self._root / "-".join(key)
    with _locked(self._root / ("-".join(key) + ".lock")):
      if not (self._root / ("-".join(key) + "." + DONE)).exists():
        shutil.rmtree(out, ignore_errors=True)  # (a worker that died half way)
        records = []
        handler = _ListHandler(records)
        logging.getLogger().addHandler(handler)
        try:
          self._write(key[0], name, attention, out)
        except Exception as e:  # pylint: disable=broad-except
          self._errors[key] = e
          raise
        finally:
          logging.getLogger().removeHandler(handler)
        (self._root / ("-".join(key) + ".warnings")).write_text("\n".join(records), encoding="utf-8")
        (self._root / ("-".join(key) + "." + DONE)).write_text("")
    return str(out)

  def warnings(self, fmt: str, name: str, attention: str = "dense") -> str:
    """The warnings the export of the cell's folder logged."""
    self.folder(fmt, name, attention)
    return (self._root / ("-".join(export_key(fmt, name, attention)) + ".warnings")).read_text(encoding="utf-8")

  def _write(self, fmt, name, attention, out) -> str:
    head, num_labels, exit_heads = MODELS[name]
    model_dir = self.models.dir(name, attention)
    options = export_options(fmt, name)
    if fmt == "saved_model":
      from official_albert.serving import export
      if with_text(name, attention) and not (name in TEXT_SAVED_MODELS and attention == "dense"):
        source = self._root / f"ids-only-{name}-{attention}"
        shutil.rmtree(source, ignore_errors=True)
        shutil.copytree(model_dir, source, ignore=shutil.ignore_patterns("spiece.model"))
        model_dir = str(source)
      return export.export_from_model_dir(model_dir, str(out), head=head, **options)
    if fmt in ("openvino", "openvino_int8"):
      from official_albert.serving import openvino_export
      if fmt == "openvino_int8":
        return openvino_export.export_openvino(model_dir, str(out), head, "int8", max_accuracy_drop=1.0,
                                               calibration_file=calibration_file(self._root, head),
                                               spm_model_file=str(tiny.SPM_MODEL_FILE), **options)
      return openvino_export.export_openvino(model_dir, str(out), head, "bf16" if name == "pretrainer" else "f32",
                                             **options)
    if fmt == "litert":
      from official_albert.serving import litert_export
      return litert_export.export_litert(model_dir, str(out), head, **options)
    if fmt in ("hf", "keras_hub"):
      from official_albert.checkpoints import convert
      convert.convert("native", model_dir, fmt, str(out), model_type=head, num_labels=num_labels,
                      num_choices=NUM_CHOICES)
      return str(out)
    if fmt == "sentence_transformers":
      if name != "encoder":
        raise ExportError(expected((fmt, name, attention)).why)
      from official_albert.checkpoints import convert
      from official_albert.checkpoints.sentence_transformers_folder import EmbeddingSettings
      from official_albert.checkpoints.sentence_transformers_folder import write_embedding_settings
      source = self._root / f"st-source-{attention}"
      shutil.copytree(model_dir, source)
      write_embedding_settings(str(source), EmbeddingSettings(**EMBEDDING), tiny.MODEL["hidden_size"])
      convert.convert("native", str(source), "hf", str(out))
      return str(out)
    raise ExportError(expected((fmt, name, attention)).why)


class _ListHandler(logging.Handler):

  def __init__(self, records):
    super().__init__(logging.WARNING)
    self._records = records

  def emit(self, record):
    self._records.append(record.getMessage())


# ------------------------------------------------------------------------------------------------------- runtimes


def run(fmt: str, folder: str, name: str, inputs: Dict[str, np.ndarray]) -> Dict[str, np.ndarray]:
  """The folder's outputs on `inputs`, run by the format's runtime."""
  head, num_labels, _ = MODELS[name]
  if fmt == "saved_model":
    import tensorflow as tf
    loaded = tf.saved_model.load(folder)
    out = loaded.signatures["from_ids"](**{k: tf.constant(v) for k, v in inputs.items()})
    return {k: v.numpy() for k, v in out.items()}
  if fmt.startswith("openvino"):
    from official_albert.serving import openvino_ir
    precision = {"openvino_f32": "f32", "openvino_bf16": "bf16", "openvino_int8": "f32"}[fmt]
    return openvino_ir.run_compiled(openvino_ir.compile_openvino(folder, precision=precision), inputs)
  if fmt == "litert":
    from official_albert.serving.litert_runtime import LiteRTExport
    return LiteRTExport(folder)(inputs)
  if fmt == "hf":
    return _run_transformers(folder, head, inputs)
  if fmt == "keras_hub":
    from official_albert.checkpoints.loading import load_model
    model, _ = load_model(folder, head, num_labels=num_labels, num_choices=NUM_CHOICES)
    return {k: np.asarray(v) for k, v in model(inputs, training=False).items() if not isinstance(v, (list, tuple))}
  if fmt == "sentence_transformers":
    return _run_sentence_transformers(folder, inputs)
  raise ValueError(f"no runtime for {fmt!r}")


_HF_OUTPUTS = {"encoder": {"last_hidden_state": "sequence_output", "pooler_output": "pooled_output"},
               "classifier": {"logits": "logits"}, "token_classifier": {"logits": "logits"},
               "multiple_choice": {"logits": "logits"},
               "span": {"start_logits": "start_logits", "end_logits": "end_logits"},
               "pretrainer": {"sop_logits": "sop_logits", "prediction_logits": "mlm_logits"}}


def _run_transformers(folder: str, head: str, inputs: Dict[str, np.ndarray]) -> Dict[str, np.ndarray]:
  os.environ.setdefault("USE_TF", "0")
  import torch
  import transformers

  from official_albert.checkpoints.hf import HF_ARCHITECTURES
  model = getattr(transformers, HF_ARCHITECTURES[head][0]).from_pretrained(folder).eval()
  feed = {"input_ids": torch.tensor(inputs["input_word_ids"], dtype=torch.long),
          "attention_mask": torch.tensor(inputs["input_mask"], dtype=torch.long),
          "token_type_ids": torch.tensor(inputs["input_type_ids"], dtype=torch.long)}
  flat = {k: v.reshape(-1, v.shape[-1]) for k, v in feed.items()}
  with torch.no_grad():
    out = model(**feed)
    # (every head's encoder: its token vectors, and the pooled [CLS] where the head has the pooler)
    base = model(**flat) if head == "encoder" else model.albert(**flat)
  got = {ours: out[theirs].numpy() for theirs, ours in _HF_OUTPUTS[head].items()}
  got["sequence_output"] = base.last_hidden_state.numpy()
  if base.pooler_output is not None:
    got["pooled_output"] = base.pooler_output.numpy()
  if head == "multiple_choice":  # (HF's encoder runs on the [B·C, S] rows)
    got.update({k: v.reshape(inputs["input_word_ids"].shape[:2] + v.shape[1:]) for k, v in got.items()
                if k in ("sequence_output", "pooled_output")})
  if head == "pretrainer":  # HF scores every position; ours the masked ones
    positions = inputs["masked_lm_positions"]
    got["mlm_logits"] = np.take_along_axis(got["mlm_logits"], positions[..., None], axis=1)
  return got


def _run_sentence_transformers(folder: str, inputs: Dict[str, np.ndarray]) -> Dict[str, np.ndarray]:
  """What sentence-transformers computes from the folder: transformers' AlbertModel, then the pooling modes and the
  normalisation its modules.json names (the library itself does not import beside Keras 3 here; its parity with
  `embed` is test_embedding.py's, in a child process)."""
  from official_albert.checkpoints.sentence_transformers_folder import read_embedding_settings
  settings = read_embedding_settings(folder)
  got = _run_transformers(folder, "encoder", inputs)
  tokens, mask = got["sequence_output"].astype(np.float64), inputs["input_mask"][..., None].astype(np.float64)
  modes = {"cls": lambda: tokens[:, 0], "mean": lambda: (tokens * mask).sum(1) / mask.sum(1),
           "max": lambda: np.where(mask > 0, tokens, -1e9).max(1)}
  vector = np.concatenate([modes[m]() for m in settings.pooling], axis=-1)
  if settings.normalize:
    vector = vector / np.linalg.norm(vector, axis=-1, keepdims=True)
  return {**got, "sentence_embedding": vector.astype(np.float32)}
