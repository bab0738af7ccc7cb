"""`TextEmbeddingConfig`: what `--experiment=text_embedding` reads (columns, loss, Matryoshka widths, pooling).

Separate from the task so that the checks a user meets first (`validate`, run before any file is read or any model
built) read on one page: each names the `task.*` key at fault and the value that fixes it.
"""

from __future__ import annotations

import copy
import dataclasses
import math
from typing import Any, Dict, List, Optional

from official_albert.modeling.layers.pooling import check_pooling_modes
from official_albert.retrieval.losses import LOSSES
from official_albert.retrieval.query_metrics import CONVENTIONS
from official_albert.training.experiment_config import ConfigError
from tasks import raw_inputs

# The losses that read a score per pair (`score_column`); MNRL reads (anchor, positive[, negative]) rows instead.
SCORED_LOSSES = ("cosent", "cosine")
# The recorded settings' values where neither the run nor the model directory gives one (see TextEmbeddingConfig).
RECORDED_DEFAULTS: Dict[str, Any] = {
    "anchor_column": "anchor", "positive_column": "positive", "negative_column": "", "score_column": "",
    "loss": "mnrl", "scale": 20.0, "symmetric": False, "matryoshka_dims": [], "matryoshka_weights": [],
    "pooling": "mean", "normalize": True, "do_lower_case": True}


@dataclasses.dataclass
class TextEmbeddingConfig(raw_inputs.RowFilesTaskConfig):
  """A bi-encoder trained on text pairs (see `tasks.embedding`).

  The settings a trained model directory records (`tasks.embedding.record`: the columns, loss, scale, symmetric,
  Matryoshka widths and weights, pooling, normalize, do_lower_case) are None by default: not set, so that a run in a
  trained model_dir (`--mode=predict` / `eval`, a resumed training run) computes as the model was trained without
  repeating them; a value given explicitly — the default's too — must agree with the record (else an error naming
  both and the file). Where nothing is recorded (a first training run) None is the default given below.

  Attributes:
    anchor_column, positive_column: CSV/TSV header names or JSONL keys of the two texts of a pair (a query and its
      passage, a sentence and its paraphrase); defaults `anchor`, `positive`.
    negative_column: an optional hard negative per row (default '' = in-batch negatives only); mnrl only.
    score_column: a similarity score per pair (default '' = none); needed by, and only by, loss=cosent | cosine
      (cosine: in [-1, 1], a cosine's range; a file's score outside is refused when read, `data.check_scores`).
    ignore_label_column: without a score_column, a pairs file's unread column named like a label (label, score,
      is_duplicate, ...) with 0 / false on some rows is refused, since mnrl would train those pairs as matches
      (`unused_labels`); true = the column means something else: read the rows as pairs (default false).
    input_format, skip_bad_rows, record_shuffle_seed, the splits' defaults: `raw_inputs.RowFilesTaskConfig` (this task
      reads csv, tsv or jsonl).
    loss: mnrl (MultipleNegativesRankingLoss, the default), cosent or cosine (scored pairs);
      `official_albert.retrieval.losses`.
    scale: the cosine's multiplier of mnrl and cosent (1 / temperature; default sentence-transformers' 20).
    symmetric: mnrl also ranks each positive against the batch's anchors (the per-direction symmetric form; default
      false).
    matryoshka_dims: prefix widths trained together (MatryoshkaLoss: each prefix re-normalised), e.g.
      [64, 32, 16]; [] (the default) = the full width only. Each must be ≤ the embedding width (hidden_size ×
      pooling modes).
    matryoshka_weights: one weight > 0 per width ([] = 1 each, the default).
    pooling: the `POOLING_MODES` name (or comma-separated names, concatenated) of the sentence vector (default
      mean).
    normalize: L2-normalise the sentence vector the model directory serves (`pipelines.embed`; default true); the
      losses use cosine similarity, so training is the same either way.
    do_lower_case: lower-case the texts before tokenizing (default true).
    predict_data: `--mode=predict` input: CSV / TSV / JSONL files of texts to embed (or records made earlier).
    predict_column: the column of those texts ('' = anchor_column).
    grad_cache_chunk: GradCache (`official_albert.retrieval.grad_cache`, sentence-transformers' Cached* losses'
      mini_batch_size): run the encoder this many rows (of each replica's batch, every side of a row together) at a
      time and cache the loss's gradient on the embeddings, so the in-batch negatives span a batch whose activations
      do not fit at once; the loss and gradient are the plain ones. 0 = off (one forward pass over the batch).
    validation_split: the qrels split (`qrels/<split>.tsv`) evaluation scores when task.validation_data.input_path
      is a BEIR-format folder (`tasks.embedding.beir`; default dev: the split to choose checkpoints on, test kept
      for the end).
    mask_false_negatives: mnrl leaves out of each row's softmax the in-batch candidates that repeat its anchor's or
      positive's text, or are the positive of another row with its anchor (`losses.in_batch_false_negatives`);
      default false: every other candidate is a negative, as sentence-transformers computes.
    metric_convention: how evaluation computes nDCG and MAP: "sentence_transformers" (default: the
      InformationRetrievalEvaluator's binary gains) or "beir" (pytrec_eval's graded gains, MAP over all relevant
      documents: the published BEIR / MTEB numbers on graded sets); `official_albert.retrieval.query_metrics`.
  """
  anchor_column: Optional[str] = None
  positive_column: Optional[str] = None
  negative_column: Optional[str] = None
  score_column: Optional[str] = None
  loss: Optional[str] = None
  scale: Optional[float] = None
  symmetric: Optional[bool] = None
  matryoshka_dims: Optional[List[int]] = None
  matryoshka_weights: Optional[List[float]] = None
  pooling: Optional[str] = None
  normalize: Optional[bool] = None
  do_lower_case: Optional[bool] = None
  grad_cache_chunk: int = 0
  mask_false_negatives: bool = False
  ignore_label_column: bool = False
  predict_column: str = ""
  validation_split: str = "dev"
  metric_convention: str = "sentence_transformers"

  def with_defaults(self) -> "TextEmbeddingConfig":
    """A view of this config with every unset recorded setting at its default (what `validate` checks)."""
    view = copy.copy(self)
    for key, default in RECORDED_DEFAULTS.items():
      if getattr(view, key) is None:
        setattr(view, key, copy.copy(default))
    return view

  @property
  def pooling_modes(self):
    """The pooling as the tuple of modes `AlbertEmbedder` takes (unset: the default's)."""
    pooling = RECORDED_DEFAULTS["pooling"] if self.pooling is None else self.pooling
    return check_pooling_modes([m.strip() for m in pooling.split(",") if m.strip()])

  def embedding_width(self) -> int:
    return self.model.hidden_size * len(self.pooling_modes)

  def validate(self) -> None:
    """The checks, on the settings given (an unset one at its default; the loss's checks only once the loss is known:
    a run in a trained model_dir takes it from there, and the task validates the config again when it has)."""
    super().validate()
    if not self.validation_split.strip() or "/" in self.validation_split:
      raise ConfigError(f"task.validation_split={self.validation_split!r} must name a split of a BEIR-format folder "
                        "(its qrels/<split>.tsv), e.g. dev.")
    check_metric_convention(self.metric_convention)
    self.with_defaults().check(loss_known=self.loss is not None)

  def check(self, loss_known: bool = True) -> None:
    """`validate`'s checks on a config whose recorded settings are all set."""
    if self.input_format and self.input_format not in ("csv", "tsv", "jsonl"):
      raise ConfigError(f"task.input_format={self.input_format!r}: text_embedding reads csv, tsv or jsonl (or '' = "
                        "from the extension).")
    if loss_known and self.loss not in LOSSES:
      raise ConfigError(f"task.loss={self.loss!r} is not one of {LOSSES}: mnrl for (anchor, positive[, negative]) "
                        "rows, cosent or cosine for pairs with a score (task.score_column).")
    if not self.anchor_column or not self.positive_column:
      raise ConfigError("task.anchor_column and task.positive_column name the two texts of a pair; set both (e.g. "
                        "task.anchor_column=query,task.positive_column=passage).")
    if loss_known and self.loss == "mnrl" and self.score_column:
      raise ConfigError(f"task.score_column={self.score_column!r} with task.loss=mnrl: mnrl ranks each anchor's "
                        "positive above the batch's other texts and reads no score. Use task.loss=cosent (or cosine) "
                        "for scored pairs, or set task.score_column=''.")
    if loss_known and self.loss in SCORED_LOSSES and not self.score_column:
      raise ConfigError(f"task.loss={self.loss} learns from a similarity score per pair: set task.score_column to "
                        "the score's column (or use task.loss=mnrl for unscored pairs).")
    if loss_known and self.loss in SCORED_LOSSES and self.negative_column:
      raise ConfigError(f"task.negative_column={self.negative_column!r} is read by task.loss=mnrl only; set it to "
                        f"'' for task.loss={self.loss}.")
    if loss_known and self.loss in SCORED_LOSSES and self.symmetric:
      raise ConfigError(f"task.symmetric=true is a form of mnrl; set it to false for task.loss={self.loss}.")
    if loss_known and self.loss in SCORED_LOSSES and self.mask_false_negatives:
      raise ConfigError(f"task.mask_false_negatives=true masks mnrl's in-batch negatives; set it to false for "
                        f"task.loss={self.loss}.")
    if self.grad_cache_chunk < 0:
      raise ConfigError(f"task.grad_cache_chunk={self.grad_cache_chunk} must be >= 0: rows per encoder chunk of "
                        "GradCache (e.g. 32), or 0 for one forward pass over the batch.")
    # (NaN / inf passed: the loss was NaN at step 1, a "Non-finite training loss" that reads as a divergence.)
    if not (math.isfinite(self.scale) and self.scale > 0):
      raise ConfigError(f"task.scale={self.scale} must be finite and > 0: the cosine's multiplier (1 / temperature; "
                        "sentence-transformers' default is 20).")
    try:
      modes = self.pooling_modes
    except ValueError as e:
      raise ConfigError(f"task.pooling={self.pooling!r}: {e}") from None
    width = self.model.hidden_size * len(modes)
    bad = [d for d in self.matryoshka_dims if not 0 < int(d) <= width]
    if bad:
      raise ConfigError(f"task.matryoshka_dims={list(self.matryoshka_dims)}: {bad} not in 1..{width}, the embedding "
                        f"width (hidden_size {self.model.hidden_size} × {len(modes)} pooling mode(s)); list widths "
                        f"up to {width}, e.g. [{width}, {max(width // 2, 1)}, {max(width // 4, 1)}].")
    if len(set(self.matryoshka_dims)) != len(self.matryoshka_dims):
      raise ConfigError(f"task.matryoshka_dims={list(self.matryoshka_dims)} has duplicates.")
    if self.matryoshka_weights and len(self.matryoshka_weights) != len(self.matryoshka_dims):
      raise ConfigError(f"task.matryoshka_weights has {len(self.matryoshka_weights)} weights for "
                        f"{len(self.matryoshka_dims)} task.matryoshka_dims; give one per width (or [] = 1 each).")
    bad = [w for w in self.matryoshka_weights or () if not (math.isfinite(float(w)) and float(w) > 0)]  # (NaN too)
    if bad:  # (0 trains nothing at its width yet records it as trained; < 0 maximises that width's loss; inf: NaN)
      raise ConfigError(f"task.matryoshka_weights={list(self.matryoshka_weights)}: {bad} not > 0 or not finite; "
                        "a weight of 0 trains nothing at its width (yet the width is recorded as trained), a "
                        "negative one pushes that width's loss up and an infinite one makes the loss non-finite at "
                        "step 1. Give each width a finite weight > 0, or leave the width out of "
                        "task.matryoshka_dims.")
    for data in (self.train_data, self.validation_data, self.predict_data):
      if data.pad_to_multiple_of or data.length_bucket_window:
        raise ConfigError("text_embedding reads fixed-length records: set pad_to_multiple_of=0 and "
                          "length_bucket_window=0 in task.train_data / task.validation_data / task.predict_data.")


def check_metric_convention(convention: str) -> None:
  """task.metric_convention of the retrieval tasks (text_embedding, text_ranking), or a ConfigError naming them."""
  if convention not in CONVENTIONS:
    raise ConfigError(f"task.metric_convention={convention!r}: use one of {list(CONVENTIONS)} (sentence_transformers: "
                      "the InformationRetrievalEvaluator's binary gains; beir: pytrec_eval's graded nDCG and MAP).")
