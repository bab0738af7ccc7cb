"""A SavedModel of a fine-tuned task head called as the pipelines call an export folder's runtime.

  from official_albert.serving import task_pipelines
  task_pipelines.question_answering("/tmp/squad_sm", "Who wrote it?", "It was written by Ann.")  # a SavedModel folder

The question answering, tagging and multiple-choice pipelines (`serving.task_pipelines`) window, pack and
post-process text around the model in Python, so they need the model on token ids, not on text: a SavedModel of
`export_saved_model` has that graph in every export, its `from_ids` signature, and its text signatures carry the
SentencePiece model and settings (`tokenization_info`) that the pipelines tokenize with. `SavedModelRuntime` wraps the
two as an `ExportFolder` (the OpenVINO / LiteRT runtimes' base), so the pipelines and the server take a SavedModel
folder wherever they take an OpenVINO one, through the same code path.

A SavedModel records no `AlbertConfig`: the runtime's `config` holds the three fields the pipelines read, the
vocabulary (the export checked its tokenizer against the model's), as positions, the export's --seq_length (the
longest row its text signatures pack, which the pipelines then pack at, as they do for an export folder), and the
attention type `tokenization_info` records (a block_sparse model's rows are padded to seq_length, as its graph runs
them; an export that did not record it is padded so too).
"""

from __future__ import annotations

import dataclasses
import logging
import os
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers TensorFlow Text's ops, which the exported SavedModels use)

from official_albert import model_directory as md
from official_albert.serving import qa_settings
from official_albert.serving.export_folder import ExportFolder
from official_albert.serving.served_heads import saved_model_head
from official_albert.tokenization import FullTokenizer
from official_albert.tokenization import SPECIAL_TOKEN_IDS

# The SavedModel heads served this way (the others have their own SavedModel paths: classify, embed,
# fill_mask_saved_model).
TASK_HEADS = ("span", "squad_v2", "token_classifier", "multiple_choice")


def saved_model_tokenizer(signatures) -> Tuple[Optional[FullTokenizer], Dict[str, object]]:
  """(the `FullTokenizer` of a SavedModel's text signatures, {seq_length, do_lower_case, tokenizer_mode,
  keep_accents, remove_space}) from its `tokenization_info` signature; (None, {}) for one exported without
  spiece.model (token ids only)."""
  if "tokenization_info" not in signatures:
    return None, {}
  info = signatures["tokenization_info"]()
  spm_model_file = info["spm_model_file"].numpy().decode("utf-8")  # ("" in an export without spiece.model)
  if not spm_model_file:
    return None, {}
  settings = {"seq_length": int(info["seq_length"].numpy()), "do_lower_case": bool(info["do_lower_case"].numpy()),
              "tokenizer_mode": info["tokenizer_mode"].numpy().decode("utf-8")}
  # (exports before keep_accents / remove_space were recorded tokenized at FullTokenizer's defaults)
  settings.update({k: bool(info[k].numpy()) if k in info else default
                   for k, default in (("keep_accents", False), ("remove_space", True))})
  if "max_qa_length" in info:  # (a multiple-choice export's cap, which its serve_text_pair packs with)
    settings["max_qa_length"] = int(info["max_qa_length"].numpy())
  settings.update({k: info[k].numpy().item() for k in qa_settings.QA_KEYS if k in info})  # (a SQuAD run's)
  return FullTokenizer(spm_model_file, do_lower_case=settings["do_lower_case"], mode=settings["tokenizer_mode"],
                       keep_accents=settings["keep_accents"], remove_space=settings["remove_space"]), settings


# -------------------------------------------------------------------------------- labels of an older export
def saved_model_label_file(folder: str, signatures) -> Optional[md.LabelFile]:
  """A classifier or token-classifier SavedModel's labels: its labels.json, else what its graph says.

  Exports made before they carried labels.json (commit 2eb83f0) hold the same facts in their text signatures: a
  multi-label classifier's `predictions` are multi-hot, [B, L] like its `logits` (one argmax per row would be [B]),
  and are its sigmoid `probabilities` at the training run's threshold; a single-label classifier's or a tagger's
  `labels` output gathers the argmax from a constant holding every label name. Reading them keeps a multi-label model
  from being answered as a softmax over its labels (silently other scores) and gives back its names. None for a
  folder with neither (an export without text signatures, a regression head): the callers' defaults then hold.
  """
  saved = md.read_label_file(folder)
  signature = next((signatures[k] for k in ("serve_text", "serve_examples") if k in signatures), None)
  if saved is not None or signature is None:
    return saved
  outputs = signature.structured_outputs
  if "logits" not in outputs or "predictions" not in outputs or (outputs["logits"].shape[-1] or 0) < 2:
    return None
  num_labels = int(outputs["logits"].shape[-1])
  multi_label = outputs["predictions"].shape.rank == outputs["logits"].shape.rank
  graph = _SignatureGraph(signature)
  names = None if multi_label else graph.label_names(num_labels)
  threshold = graph.threshold() if multi_label else md.MULTI_LABEL_THRESHOLD
  if names is None or threshold is None:
    logging.warning("%s has no labels.json (exported before exports carried it) and its graph does not give %s: "
                    "answers name them LABEL_0 .. LABEL_%d%s. Copy labels.json from the model directory it was "
                    "exported from next to saved_model.pb (or re-export it) to fix this.", folder,
                    "its label names" if threshold is not None else "its label names or threshold", num_labels - 1,
                    "" if threshold is not None else f" and predict at {md.MULTI_LABEL_THRESHOLD}")
  return md.LabelFile(names or [], multi_label, md.MULTI_LABEL_THRESHOLD if threshold is None else threshold)


class _SignatureGraph:
  """The nodes of the function a loaded signature calls (`tf.saved_model.save` writes each signature as one call of
  it, each output an Identity of one of the call's outputs), to read the constants an export built its outputs from.
  A graph laid out otherwise reads as None."""

  def __init__(self, signature):
    self._signature = signature
    self._call, self._function, self._nodes = None, None, {}
    first = signature.outputs[0].op if signature.outputs else None
    if first is not None and first.type == "Identity" and first.inputs:
      self._call = first.inputs[0].op
    if self._call is not None and "f" in self._call.node_def.attr:
      functions = {f.signature.name: f for f in signature.graph.as_graph_def().library.function}
      self._function = functions.get(self._call.get_attr("f").name)
    if self._function is not None:
      self._nodes = {node.name: node for node in self._function.node_def}

  def _node(self, ref: str):
    """The node `ref` ("name:output:0") names, past Identity ops; None for a function argument."""
    node = self._nodes.get(ref.split(":")[0])
    while node is not None and node.op == "Identity":
      node = self._nodes.get(node.input[0].split(":")[0])
    return node

  def output(self, key: str):
    """The node that computes the signature's output `key`, None when it cannot be followed."""
    flat = tf.nest.flatten(self._signature.structured_outputs)
    index = next(i for i, spec in enumerate(flat) if spec is self._signature.structured_outputs[key])
    op = self._signature.outputs[index].op
    if self._function is None or op.type != "Identity" or not op.inputs or op.inputs[0].op.name != self._call.name:
      return None
    arg = self._function.signature.output_arg[op.inputs[0].value_index].name
    return self._node(self._function.ret[arg])

  def _constant(self, node, dtype):
    node = self._node(node) if isinstance(node, str) else node
    if node is None or node.op != "Const" or node.attr["dtype"].type != dtype.as_datatype_enum:
      return None
    return tf.make_ndarray(node.attr["value"].tensor)

  def label_names(self, num_labels: int) -> Optional[List[str]]:
    """The names `labels` gathers (tf.gather(names, argmax)), when it is that gather of a [num_labels] constant."""
    gather = self.output("labels") if "labels" in self._signature.structured_outputs else None
    names = self._constant(gather.input[0], tf.string) if gather is not None and gather.op == "GatherV2" else None
    if names is None or names.shape != (num_labels,):
      return None
    return [name.decode("utf-8") for name in names]

  def threshold(self) -> Optional[float]:
    """A multi-label export's threshold: `predictions` = cast(sigmoid(logits) >= threshold)."""
    cast = self.output("predictions")
    compare = self._node(cast.input[0]) if cast is not None and cast.op == "Cast" else None
    if compare is None or compare.op != "GreaterEqual" or getattr(self._node(compare.input[0]), "op", "") != "Sigmoid":
      return None
    value = self._constant(compare.input[1], tf.float32)
    return float(value) if value is not None and value.shape == () and 0 < value < 1 else None


def saved_model_embed_text(signatures) -> Tuple[str, Optional[int]]:
  """(the default prompt an encoder SavedModel's text signatures prepend to each text, '' for none; the tokens its
  `embed` signature packs a text into) as its `tokenization_info` records them, so that a client counts the tokens
  the model saw. ('', None) for an export without them: another head, one without spiece.model, or an encoder
  exported before they were recorded (whose prompt, if its folder had one, is then not known here)."""
  if "tokenization_info" not in signatures:
    return "", None
  info = signatures["tokenization_info"]()
  if "embed_prompt" not in info:
    return "", None
  return info["embed_prompt"].numpy().decode("utf-8"), int(info["embed_seq_length"].numpy())


def check_masks_answered(folder: str, texts: Sequence[str], tokenizer: FullTokenizer,
                         out: Dict[str, np.ndarray]) -> None:
  """Raises when a pretrainer SavedModel's `serve_text` answered fewer [MASK]s of a text than the text holds (its
  graph keeps the first --max_predictions_per_seq masks within --seq_length tokens, and a fill-mask answer without
  the others would look complete), when a text is longer than --seq_length (the graph cut it), or when its
  tokenizer mode cannot see a [MASK]. `out`: serve_text's outputs (numpy) for `texts`; `tokenizer`: its settings."""
  limit, seq_length = out["masked_lm_positions"].shape[-1], out["input_word_ids"].shape[-1]
  if getattr(tokenizer, "mode", "hf") != "hf":  # (exports made before the exporter refused it)
    raise ValueError(f"fill_mask: {folder} was exported with tokenizer_mode={tokenizer.mode!r}, whose in-graph "
                     "tokenizer does not keep [MASK] as one token: re-export it with --tokenizer_mode=hf.")
  for b, ids in enumerate(tokenizer.encode_ids_batch(list(texts))):
    if len(ids) + 2 > seq_length:  # (a model directory refuses a text beyond its positions; this one cut it)
      raise ValueError(f"fill_mask: text {b} ({texts[b][:60]!r}...) packs to {len(ids) + 2} tokens but {folder} "
                       f"was exported with --seq_length={seq_length}: its answer would see, and its `sequence` "
                       "give back, only the first ones; re-export with a larger --seq_length, or shorten the text.")
    masks, answered = ids.count(SPECIAL_TOKEN_IDS["[MASK]"]), int(out["masked_lm_weights"][b].sum())
    if masks > answered:
      raise ValueError(f"fill_mask: text {b} has {masks} [MASK]s but {folder} answers {answered}: the export takes "
                       f"at most --max_predictions_per_seq={limit} masks within --seq_length={seq_length} tokens "
                       f"(this one packs to {len(ids) + 2}); re-export with larger ones, or split the text.")


def saved_model_attention_type(signatures) -> Optional[str]:
  """The model's attention type as a SavedModel's `tokenization_info` records it; None for an export made before
  it was recorded (the pipelines then pad every row to seq_length, `pipeline_inputs.pads_to_cap`: right for a
  block_sparse model, whose pattern follows the padded length, and the same answers for a dense one)."""
  if "tokenization_info" not in signatures:
    return None
  info = signatures["tokenization_info"]()
  if "attention_type" in info:
    return info["attention_type"].numpy().decode("utf-8")
  logging.info("This SavedModel records no attention type (exported before it was recorded): the pipelines pad every "
               "row to its seq_length (same answers for a dense model, more compute for short texts); re-export it "
               "to let a dense model's batches be cut to their longest row.")
  return None


@dataclasses.dataclass(frozen=True)
class ExportedShape:
  """The fields of `AlbertConfig` the pipelines read from a model (a SavedModel keeps no config).

  Attributes:
    vocab_size: the tokenizer's pieces (0 without spiece.model).
    max_position_embeddings: the export's --seq_length.
    attention_type: the model's, as the export recorded it; None when it did not (the pipelines pad to seq_length).
  """
  vocab_size: int
  max_position_embeddings: int
  attention_type: Optional[str] = None


class SavedModelRuntime(ExportFolder):
  """A SavedModel folder of `export_saved_model`, loaded once; call it with {input name: int array} (its `from_ids`
  inputs). Built for the `TASK_HEADS`; a folder of another head gets the pipelines' "needs a ... export" error.

  Args:
    folder: the SavedModel folder. loaded: its `tf.saved_model.load` object, when already loaded.

  Attributes: those of `ExportFolder` (head, settings — seq_length, do_lower_case, tokenizer_mode —, config as
  `ExportedShape`, labels from labels.json — a tagger exported before it: its graph's —, tokenizer — None for an
  export without spiece.model —, num_labels / num_choices, input_names, output_names).
  """

  format_name = "saved_model"

  # (ExportFolder's constructor reads an export folder's files; a SavedModel's settings are in its graph.)
  def __init__(self, folder, loaded=None):  # pylint: disable=super-init-not-called
    self.export_dir = os.fspath(folder)
    self.loaded = loaded if loaded is not None else tf.saved_model.load(self.export_dir)
    signatures = self.loaded.signatures
    self.head = saved_model_head(signatures)
    if self.head is None:
      raise ValueError(f"{self.export_dir}: a SavedModel without the `from_ids` signature of export_saved_model; "
                       "export the model with python -m official_albert.export_saved_model.")
    self._from_ids = signatures["from_ids"]
    inputs = self._from_ids.structured_input_signature[1]
    self.input_names = list(inputs)
    self.output_names = list(self._from_ids.structured_outputs)
    self.precision = None
    self.tokenizer, settings = saved_model_tokenizer(signatures)
    self.settings: Dict[str, object] = {"head": self.head, **settings}
    self.config = ExportedShape(self.tokenizer.vocab_size if self.tokenizer is not None else 0,
                                int(settings.get("seq_length") or 0), saved_model_attention_type(signatures))
    # (a tagger exported before exports carried labels.json: the names its graph's `labels` output gathers from)
    saved = (saved_model_label_file(self.export_dir, signatures) if self.head == "token_classifier"
             else md.read_label_file(self.export_dir))
    self.labels = saved.labels if saved is not None and saved.labels else None
    self.num_choices = int(inputs["input_word_ids"].shape[1]) if self.head == "multiple_choice" else None
    self.num_labels = None
    if self.head == "token_classifier":
      self.num_labels = int(self._from_ids.structured_outputs["logits"].shape[-1])

  def _run(self, feed: Dict[str, np.ndarray]) -> Dict[str, np.ndarray]:
    out = self._from_ids(**{k: tf.constant(v, tf.int32) for k, v in feed.items()})
    return {k: v.numpy() for k, v in out.items()}
