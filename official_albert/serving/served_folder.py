"""How the server opens a model folder: its backend, its head, and what the head's pipeline needs from it.

`ServedFolder` is the part of `served_model.ServedModel` that runs once, at start-up: it tells a SavedModel, an export
folder (OpenVINO, LiteRT, ...) and a model directory apart, loads the model and tokenizer each needs, reads the head
(the folder's, or the server's --model_head checked against it), its labels, widths and token-id limits, and the
options a task head's pipeline would pick for the folder's path; a folder that cannot be served is refused here as a
`ModelLoadError` naming it and the fix. It is its own file because it is a concept apart from answering batches
(`ServedModel.predict` and the batcher's rows), with a branch per backend and head that changes when a folder format
is added; `ServedModel` inherits it, so the attributes it sets are the served model's own.
"""

from __future__ import annotations

import os
from typing import Optional

from official_albert import model_directory as md
from official_albert.modeling import early_exit
from official_albert.serving import embedding
from official_albert.serving import pipelines
from official_albert.serving import rerank
from official_albert.serving import task_pipelines
from official_albert.serving.pipeline_inputs import default_seq_length
from official_albert.serving.remembered_ids import RememberedIds
from official_albert.serving.saved_model_runtime import saved_model_label_file
from official_albert.serving.saved_model_runtime import saved_model_tokenizer
from official_albert.serving.saved_model_runtime import SavedModelRuntime
from official_albert.serving.saved_model_runtime import TASK_HEADS as SAVED_MODEL_TASK_HEADS
from official_albert.serving.served_heads import CLASSIFIER
from official_albert.serving.served_heads import directory_head
from official_albert.serving.served_heads import ENCODER
from official_albert.serving.served_heads import EXPORT_HEADS
from official_albert.serving.served_heads import FILL_MASK
from official_albert.serving.served_heads import ModelLoadError
from official_albert.serving.served_heads import MULTIPLE_CHOICE
from official_albert.serving.served_heads import QUESTION_ANSWERING
from official_albert.serving.served_heads import refused_saved_model
from official_albert.serving.served_heads import RERANKER
from official_albert.serving.served_heads import saved_model_head
from official_albert.serving.served_heads import TASK_INPUTS
from official_albert.serving.served_heads import TOKEN_CLASSIFIER
from official_albert.serving.served_rows import choice_options
from official_albert.serving.served_rows import protocol_id_limits
from official_albert.serving.served_rows import qa_options


def choice_view(model, num_choices: int):
  """`model` (an `AlbertMultipleChoice`) for rows of `num_choices` choices, sharing its layers and variables.

  The choice count only reshapes the logits ([B·k, 1] → [B, k]), so no weight depends on it. The view is a second
  object of the model's class holding the model's attributes (its layers: the same variables) with its own
  `num_choices`; `graph_call` keeps a graph per object, so each count gets its graph with its reshape. It is set
  with `object.__setattr__` and nothing else is ever set on the view: Keras' attribute tracking, which the two share,
  never sees it.
  """
  view = object.__new__(type(model))
  view.__dict__.update(model.__dict__)
  object.__setattr__(view, "num_choices", int(num_choices))
  return view


class ServedFolder:
  """The opening of a folder for `ServedModel` (its base class): `open_folder` and the per-head loading it runs."""

  def open_folder(self) -> None:
    """Opens `self.folder` (its `folder`, `requested_head`, `patience` and `id_limits` set first): sets the
    attributes `ServedModel` describes, or raises ModelLoadError naming the folder and the reason."""
    if not os.path.isdir(self.folder):
      raise ModelLoadError(f"{self.folder}: no such folder.")
    try:
      self._open_folder()
    except ModelLoadError:
      raise
    except Exception as e:  # any reason a folder does not load: one start-up error naming the folder
      raise ModelLoadError(f"{self.folder}: cannot be served: {type(e).__name__}: {e}") from e
    if not isinstance(self.model, pipelines.LoadedSavedModel):  # (one encoding of a text for counts and the pipeline)
      self.tokenizer = RememberedIds(self.tokenizer)
    self.packed_length = (self._encoder_length() if self.head == ENCODER
                          else self._pair_length() if self.head in (CLASSIFIER, RERANKER) else None)

  # Long because: one branch per kind of folder (SavedModel, export folder, model directory) and head, each a few lines.
  def _open_folder(self) -> None:
    self.has_exits, self.labels, self.width, self.regression = False, None, None, False
    self.takes_pairs = False  # a classifier's `text_pair` input (every classifier but a SavedModel without it)
    if pipelines.is_saved_model(self.folder):
      self._open_saved_model()
      return
    if pipelines.is_export_folder(self.folder):
      self.model = pipelines.open_export_folder(self.folder)
      self.backend, self.tokenizer = self.model.format_name, self.model.tokenizer
      self.head = EXPORT_HEADS.get(self.model.head)
      if self.head is None:
        raise ModelLoadError(self._unsupported(f"a {self.model.head} export"))
      self._check_requested(self.head)
      if self.head in TASK_INPUTS and self.tokenizer is None:
        raise ModelLoadError(f"{self.folder}: a {self.model.head} export without {md.SPM_FILE} takes token ids, and "
                             f"the server answers this head from text; re-export it with --spm_model_file.")
      if self.head in (ENCODER, CLASSIFIER):
        positions = int(self.model.config.max_position_embeddings)
        self.id_limits = protocol_id_limits(self.model.config, min(positions, int(
            self.model.settings.get("seq_length") or positions)))
      if self.head == ENCODER:
        self.model.require_outputs(("sentence_embedding",), "the server's embeddings")
      elif self.head == CLASSIFIER:
        self.has_exits = "exit_iteration" in self.model.output_names
        self.takes_pairs = True  # (the folder's tokenizer packs the pair; the graph takes ids)
        self._set_labels(int(self.model.num_labels), self.folder)
        self._check_patience()
      else:  # the task heads: their pipelines on the opened folder, with the options they pick for its path
        self._open_task_head()
      return
    self.backend, found = "model_directory", directory_head(self.folder)
    self.head = self.requested_head or found
    # (A classifier's variables may be a tagger's or a multiple-choice model's; a pretrainer is read as an encoder.)
    if self.requested_head and found not in (self.requested_head, CLASSIFIER, RERANKER,
                                             ENCODER if self.requested_head == FILL_MASK else None):
      raise ModelLoadError(f"{self.folder}: --model_head={self.requested_head}, but the folder holds a {found} head "
                           "(its checkpoint, or the task its run's records name); leave out --model_head to serve "
                           "it as that.")
    if self.head == CLASSIFIER:
      self.model, self.tokenizer, _ = pipelines.resolve_model(self.folder, CLASSIFIER, None, None, "hf", "classify")
      self.has_exits = bool(early_exit.exit_heads(self.model))
      self.takes_pairs = True
      # The length `classify(folder)` packs at (a trainer directory's predict length, else the positions): passed
      # on every batch, since `classify` cannot read it from the opened model.
      self.seq_length = default_seq_length(self.model, self.folder)
      self._set_labels(int(self.model.num_labels), self.folder)
    elif self.head == RERANKER:  # a one-output classifier (else refused, naming its labels), as `rerank` loads it
      self.model, self.tokenizer, _ = rerank.load_reranker(self.folder)
      self.seq_length, self.takes_pairs, self.width = default_seq_length(self.model, self.folder), True, 1
      return
    elif self.head == QUESTION_ANSWERING:
      self.model, self.tokenizer, _ = pipelines.resolve_model(
          self.folder, task_pipelines.qa_head_of_dir(self.folder), None, None, "hf", "question_answering")
      self._open_task_head()
      return
    elif self.head == FILL_MASK:
      self.model, self.tokenizer, _ = pipelines.resolve_model(self.folder, "pretrainer", None, None, "hf",
                                                              "fill_mask")
      return
    elif self.head == MULTIPLE_CHOICE:
      self.choice_models = {}  # choices per row → the model built for that count (the same weights)
      self.model = self.choice_model(4)
      self._open_task_head()
      return
    elif self.head == TOKEN_CLASSIFIER:
      self.model, self.tokenizer, _ = pipelines.resolve_model(self.folder, TOKEN_CLASSIFIER, None, None, "hf",
                                                              "token_classification")
      self._open_task_head()
      return
    else:
      self.model, self.tokenizer, settings = embedding.load_embedder(self.folder)
      self.seq_length = settings.max_seq_length
      # The folder's default prompt, which `predict` passes to `embed` (the embedder object has no prompts; an
      # export's runtime applies its own, a SavedModel's graph its own).
      self.embed_prompt = settings.prompt()
    self.id_limits = protocol_id_limits(self.model.config, int(self.model.config.max_position_embeddings))

  def choice_model(self, num_choices: int):
    """The multiple-choice model for rows of `num_choices` choices: the folder's, loaded once (at start-up, for 4),
    and for another count a `choice_view` of it made the first time a request brings that count (one set of
    weights whatever the counts: loading the folder per count kept a copy of them for each, up to 15)."""
    if num_choices not in self.choice_models:
      if self.choice_models:
        self.choice_models[num_choices] = choice_view(next(iter(self.choice_models.values())), num_choices)
      else:
        self.choice_models[num_choices], self.tokenizer, _ = pipelines.resolve_model(
            self.folder, MULTIPLE_CHOICE, None, None, "hf", "multiple_choice", {"num_choices": num_choices})
    return self.choice_models[num_choices]

  def _open_task_head(self) -> None:
    """The options a task head's pipeline picks when called on the folder's path (the server passes the opened
    model, from which the pipeline could not read them): QA's windows, the multiple-choice packing, the tagger's
    length and labels; an export's choice count is fixed (`choice_model` serves that one)."""
    if self.head == QUESTION_ANSWERING:
      self.qa_options = qa_options(self.model, self.folder)
    elif self.head == MULTIPLE_CHOICE:
      if self.backend != "model_directory":
        self.choice_models = {int(self.model.num_choices): self.model}
      self.choice_options = choice_options(self.model, self.folder)
    elif self.head == TOKEN_CLASSIFIER:
      self.seq_length = default_seq_length(self.model, self.folder)
      self.labels = task_pipelines.token_labels(self.model, self.folder, None)

  def _open_saved_model(self) -> None:
    """A SavedModel of `export_saved_model`: a classifier (`classify`), an encoder (`embed`), a pretrainer for
    fill-mask (`fill_mask_saved_model`), or a task head (its `from_ids` run by the task pipelines as an export
    folder: `SavedModelRuntime`); one without the text signatures its head needs is refused naming the fix."""
    self.backend, self.model = "saved_model", pipelines.LoadedSavedModel(self.folder)
    signatures = self.model.loaded.signatures
    found = saved_model_head(signatures)
    if found in SAVED_MODEL_TASK_HEADS:
      self.model = SavedModelRuntime(self.folder, self.model.loaded)
      self.head, self.tokenizer = EXPORT_HEADS[found], self.model.tokenizer
      self._check_requested(self.head)
      if self.tokenizer is None:
        raise ModelLoadError(refused_saved_model(self.folder, found))
      self._open_task_head()
      return
    self.head = {"classifier": CLASSIFIER, "pretrainer": FILL_MASK, "encoder": ENCODER}.get(found)
    if self.head is None or ("embed" if self.head == ENCODER else "serve_text") not in signatures:
      raise ModelLoadError(refused_saved_model(self.folder, found))
    self._check_requested(self.head)
    self.tokenizer, settings = saved_model_tokenizer(signatures)
    self.seq_length = settings["seq_length"]
    outputs = signatures["serve_text"].structured_outputs
    if self.head == ENCODER:  # (the width the export wrote: its --dim, or the whole vector)
      self.width = signatures["embed"].structured_outputs["sentence_embedding"].shape[-1]
      return
    if self.head == FILL_MASK:
      self.max_top_k = int(outputs["mlm_top_k_ids"].shape[-1])
      return
    self.has_exits = "exit_iteration" in outputs
    self.takes_pairs = "serve_text_pair" in signatures
    self._set_labels(int(outputs["logits"].shape[-1]), self.folder, saved_model_label_file(self.folder, signatures))
    self._check_patience()

  def _encoder_length(self) -> int:
    """The tokens an encoder packs a text into at most, as `embedding.embed` packs it for this folder: a SavedModel's
    export --seq_length; an export folder's recorded max_seq_length (else its --seq_length); a directory's
    max_seq_length (else its positions); never more than the model's positions."""
    if self.backend == "saved_model":
      return int(self.seq_length)
    positions = int(self.model.config.max_position_embeddings)
    if self.backend == "model_directory":
      return min(int(self.seq_length or positions), positions)
    record = self.model.settings.get("embedding") or {}
    return min(int(record.get("max_seq_length") or self.model.settings.get("seq_length") or positions), positions)

  def _pair_length(self) -> int:
    """The tokens a classifier or reranker packs a text and its pair into at most ([CLS] A [SEP] B [SEP], cut as
    `classify` / `rerank` cut it): a directory's or SavedModel's seq_length; an export folder's export length."""
    if self.backend in ("model_directory", "saved_model"):
      return int(self.seq_length)
    return int(default_seq_length(self.model, self.folder))

  def _check_requested(self, head: str) -> None:
    if self.requested_head not in (None, head):
      raise ModelLoadError(f"{self.folder}: --model_head={self.requested_head}, but the folder is a {head} export; "
                           "--model_head names the head of a model directory.")

  def _check_patience(self) -> None:
    if self.patience is not None:
      raise ModelLoadError(f"{self.folder}: --patience is fixed in an export ({self.backend}); serve it without "
                           "--patience, or re-export it with --patience.")

  def _set_labels(self, num_labels: int, folder: str, saved: Optional[md.LabelFile] = None) -> None:
    """The classifier's labels (or its regression width); `saved`: a SavedModel's, as `saved_model_label_file` reads
    them (an export made before exports carried labels.json: its graph's); else the folder's labels.json."""
    saved = (saved or md.read_label_file(folder)) if num_labels > 1 else None
    # (without labels.json, an HF folder's config.json problem_type says it: it was served as a softmax classifier)
    if (saved.multi_label if saved is not None else
        num_labels > 1 and pipelines.hf_problem_type(folder) == pipelines.MULTI_LABEL):
      raise ModelLoadError(self._unsupported("a multi-label classifier"))
    if num_labels == 1:  # a regression head: `score`, the predicted value, as classify answers it
      self.regression, self.width = True, 1
      return
    self.labels = list(saved.labels) if saved is not None and saved.labels else md.fallback_label_names(
        folder, num_labels)
    self.width = num_labels

  def _unsupported(self, what: Optional[str] = None) -> str:
    return (f"{self.folder}: {what or 'a ' + str(self.head) + ' head'} is not served yet (this server takes "
            "classifiers with one label per text, encoders, rerankers, and the question answering, token "
            "classification, multiple choice and fill-mask heads); use the in-process pipelines "
            "(official_albert.serving).")
