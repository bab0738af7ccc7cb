"""Which head the server serves a folder as, and what each head takes: read from a model directory (its checkpoint or
config), a SavedModel (its `from_ids` signature) or an export folder (its serving_config.json).

Kept apart from `served_model` (a folder loaded once, and its calls) so that the rules naming a head read in one
place, with the reason a folder is refused: a SavedModel exported without spiece.model has no text signatures, and
the pipelines of the question answering, tagging and multiple-choice heads (`serving.task_pipelines`), which
window, pack and post-process text around the model, tokenize with the SentencePiece model those signatures carry.
"""

from __future__ import annotations

import os
from typing import Optional

from official_albert import model_directory as md
from official_albert.checkpoints import native
from official_albert.checkpoints.loading import recorded_classifier_kind

CLASSIFIER = "classifier"
ENCODER = "encoder"
QUESTION_ANSWERING = "question_answering"
TOKEN_CLASSIFIER = "token_classifier"
MULTIPLE_CHOICE = "multiple_choice"
FILL_MASK = "fill_mask"
RERANKER = "reranker"
# The heads `--model_head` may name (a native checkpoint's classifier-style heads store the same variables: a token
# classifier must be named; the others are read from the folder).
HEADS = (CLASSIFIER, ENCODER, QUESTION_ANSWERING, TOKEN_CLASSIFIER, MULTIPLE_CHOICE, FILL_MASK, RERANKER)
# The BYTES inputs of the heads served through `task_pipelines` (name → rank), in their pipeline's argument order.
TASK_INPUTS = {QUESTION_ANSWERING: {"question": 1, "context": 1}, TOKEN_CLASSIFIER: {"text": 1},
               MULTIPLE_CHOICE: {"context": 1, "question": 1, "choices": 2}, FILL_MASK: {"text": 1}}
# The outputs of the heads whose outputs do not depend on the model (name, datatype, shape; -1: any size).
TASK_OUTPUTS = {QUESTION_ANSWERING: (("answer", "BYTES", (-1,)), ("score", "FP32", (-1,)), ("start", "INT64", (-1,)),
                                     ("end", "INT64", (-1,))),
                TOKEN_CLASSIFIER: (("words", "BYTES", (-1,)),), FILL_MASK: (("predictions", "BYTES", (-1,)),),
                MULTIPLE_CHOICE: (("label", "INT64", (-1,)), ("choice", "BYTES", (-1,)), ("scores", "FP32", (-1, -1))),
                RERANKER: (("score", "FP32", (-1,)), ("logit", "FP32", (-1,)))}
# An export's head (serving_config.json, `checkpoints.formats.MODEL_TYPES`) → the head it is served as: every head
# the pipelines read from an OpenVINO or LiteRT folder (a pretrainer's: fill_mask).
EXPORT_HEADS = {"classifier": CLASSIFIER, "encoder": ENCODER, "span": QUESTION_ANSWERING,
                "squad_v2": QUESTION_ANSWERING, "token_classifier": TOKEN_CLASSIFIER,
                "multiple_choice": MULTIPLE_CHOICE, "pretrainer": FILL_MASK}
# The pipeline that answers each head from text (the folders a user can serve it from name it in refusals).
PIPELINES = {QUESTION_ANSWERING: "question_answering", TOKEN_CLASSIFIER: "token_classification",
             MULTIPLE_CHOICE: "multiple_choice", FILL_MASK: "fill_mask", ENCODER: "embed", CLASSIFIER: "classify"}


class ModelLoadError(Exception):
  """A folder the server cannot serve; the message names the folder and the reason."""


def directory_head(folder: str) -> str:
  """The head of a model directory: "classifier" when it holds a sequence-classification head (a native
  checkpoint's `classifier` attribute), "reranker" for a `text_ranking` run's directory (a one-output classifier
  scored as `pipelines.rerank` scores), "question_answering" for a SQuAD head (span or squad_v2),
  "token_classifier" / "multiple_choice" for an HF directory of that architecture or a native one whose records
  name that task (a token classifier and a multiple-choice model store the same `classifier` variables as a
  sequence classifier, so only the run's records tell them apart: `loading.recorded_classifier_kind`; without
  records they are named with --model_head), else "encoder" (sentence embeddings from the encoder of any other
  directory: pretrainer, encoder, sentence-transformers)."""
  if os.path.exists(md.path(folder, md.SENTENCE_TRANSFORMERS_MODULES_FILE)):
    return ENCODER
  model_format = md.detect_format(folder)
  if model_format == "native":
    if native.has_submodule(folder, "span_head") or native.has_submodule(folder, "squad_head"):
      return QUESTION_ANSWERING
    if native.has_submodule(folder, "classifier") and md.recorded_task_int(folder, "num_negatives") is not None:
      return RERANKER  # a `text_ranking` run's directory (its params.yaml records the negatives per query)
    if not native.has_submodule(folder, "classifier"):
      return ENCODER
    return {"token_classifier": TOKEN_CLASSIFIER, "multiple_choice": MULTIPLE_CHOICE}.get(
        recorded_classifier_kind(folder), CLASSIFIER)
  if model_format in ("hf", "hf_tf"):
    architectures = (md.read_json(md.path(folder, md.CONFIG_FILE)) or {}).get("architectures") or []
    for marker, head in (("SequenceClassification", CLASSIFIER), ("QuestionAnswering", QUESTION_ANSWERING),
                         ("TokenClassification", TOKEN_CLASSIFIER), ("MultipleChoice", MULTIPLE_CHOICE)):
      if any(marker in a for a in architectures):
        return head
  return ENCODER


def saved_model_head(signatures) -> Optional[str]:
  """The export head (`checkpoints.formats.MODEL_TYPES`) of a SavedModel of `export_saved_model`, read from its
  `from_ids` signature (every export has it, with or without text signatures): its extra inputs (a pretrainer's
  `masked_lm_positions`, squad_v2's `p_mask`, multiple choice's [B, C, S] ids) and outputs (a span head's
  `start_logits`, a token classifier's [B, S, K] `logits`); None for a SavedModel without it (not ours)."""
  if "from_ids" not in signatures:
    return None
  signature = signatures["from_ids"]
  inputs, outputs = signature.structured_input_signature[1], signature.structured_outputs
  if "masked_lm_positions" in inputs:
    return "pretrainer"
  if "p_mask" in inputs:
    return "squad_v2"
  if "start_logits" in outputs:
    return "span"
  if "logits" not in outputs:
    return "encoder"
  if inputs["input_word_ids"].shape.rank == 3:
    return "multiple_choice"
  return "token_classifier" if outputs["logits"].shape.rank == 3 else "classifier"


def refused_saved_model(folder: str, head: Optional[str]) -> str:
  """Why the server does not serve a SavedModel of `head`: not one of `export_saved_model` (head None), or one
  exported without spiece.model, which has no text signatures; and which folders it serves instead."""
  if head is None:
    return (f"{folder}: a SavedModel without the `from_ids` signature of export_saved_model; this server takes the "
            "SavedModels of official_albert.export_saved_model.")
  served = EXPORT_HEADS[head]
  why = {FILL_MASK: "it has no text signature to find the [MASK]s in",
         CLASSIFIER: "its signatures take token ids, and the server serves a SavedModel's text signatures",
         ENCODER: "its signatures take token ids, and the server serves a SavedModel's `embed` signature"}.get(
             served, f"the server answers it from text, as pipelines.{PIPELINES.get(served)} does, with the "
             "tokenizer of its text signatures")
  instead = (", or serve its OpenVINO / LiteRT export, which takes token ids" if served in (CLASSIFIER, ENCODER) else
             ", or serve the model directory")
  article = "an" if head[0] in "aeiou" else "a"
  return (f"{folder}: {article} {head} SavedModel without text signatures (exported from a directory without "
          f"spiece.model) is not served ({why}); re-export it with --spm_model_file{instead}.")
