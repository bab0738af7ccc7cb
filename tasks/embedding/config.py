"""`TextEmbeddingConfig`: what `--experiment=text_embedding` reads (columns, loss, Matryoshka widths, pooling).

Separate from the task so that the checks a user meets first (`validate`, run before any file is read or any model
built) read on one page: each names the `task.*` key at fault and the value that fixes it.
"""

from __future__ import annotations

import dataclasses
from typing import List

from official_albert.modeling.layers.pooling import check_pooling_modes
from official_albert.retrieval.losses import LOSSES
from official_albert.training.experiment_config import ConfigError
from tasks import raw_inputs

# The losses that read a score per pair (`score_column`); MNRL reads (anchor, positive[, negative]) rows instead.
SCORED_LOSSES = ("cosent", "cosine")


@dataclasses.dataclass
class TextEmbeddingConfig(raw_inputs.RowFilesTaskConfig):
  """A bi-encoder trained on text pairs (see `tasks.embedding`).

  Attributes:
    anchor_column, positive_column: CSV/TSV header names or JSONL keys of the two texts of a pair (a query and its
      passage, a sentence and its paraphrase).
    negative_column: an optional hard negative per row ('' = in-batch negatives only); mnrl only.
    score_column: a similarity score per pair ('' = none); needed by, and only by, loss=cosent | cosine.
    input_format, skip_bad_rows, record_shuffle_seed, the splits' defaults: `raw_inputs.RowFilesTaskConfig` (this task
      reads csv, tsv or jsonl).
    loss: mnrl (MultipleNegativesRankingLoss), cosent or cosine (scored pairs); `official_albert.retrieval.losses`.
    scale: the cosine's multiplier of mnrl and cosent (1 / temperature; sentence-transformers' 20).
    symmetric: mnrl also ranks each positive against the batch's anchors (the per-direction symmetric form).
    matryoshka_dims: prefix widths trained together (MatryoshkaLoss: each prefix re-normalised), e.g.
      [64, 32, 16]; [] = the full width only. Each must be ≤ the embedding width (hidden_size × pooling modes).
    matryoshka_weights: one weight per width ([] = 1 each).
    pooling: the `POOLING_MODES` name (or comma-separated names, concatenated) of the sentence vector.
    normalize: L2-normalise the sentence vector the model directory serves (`pipelines.embed`); the losses use
      cosine similarity, so training is the same either way.
    predict_data: `--mode=predict` input: CSV / TSV / JSONL files of texts to embed (or records made earlier).
    predict_column: the column of those texts ('' = anchor_column).
    grad_cache_chunk: GradCache (`official_albert.retrieval.grad_cache`, sentence-transformers' Cached* losses'
      mini_batch_size): run the encoder this many rows (of each replica's batch, every side of a row together) at a
      time and cache the loss's gradient on the embeddings, so the in-batch negatives span a batch whose activations
      do not fit at once; the loss and gradient are the plain ones. 0 = off (one forward pass over the batch).
  """
  anchor_column: str = "anchor"
  positive_column: str = "positive"
  negative_column: str = ""
  score_column: str = ""
  loss: str = "mnrl"
  scale: float = 20.0
  symmetric: bool = False
  matryoshka_dims: List[int] = dataclasses.field(default_factory=list)
  matryoshka_weights: List[float] = dataclasses.field(default_factory=list)
  pooling: str = "mean"
  normalize: bool = True
  grad_cache_chunk: int = 0
  predict_column: str = ""

  @property
  def pooling_modes(self):
    """The pooling as the tuple of modes `AlbertEmbedder` takes."""
    return check_pooling_modes([m.strip() for m in self.pooling.split(",") if m.strip()])

  def embedding_width(self) -> int:
    return self.model.hidden_size * len(self.pooling_modes)

  def validate(self) -> None:
    super().validate()
    if self.input_format and self.input_format not in ("csv", "tsv", "jsonl"):
      raise ConfigError(f"task.input_format={self.input_format!r}: text_embedding reads csv, tsv or jsonl (or '' = "
                        "from the extension).")
    if self.loss not in LOSSES:
      raise ConfigError(f"task.loss={self.loss!r} is not one of {LOSSES}: mnrl for (anchor, positive[, negative]) "
                        "rows, cosent or cosine for pairs with a score (task.score_column).")
    if not self.anchor_column or not self.positive_column:
      raise ConfigError("task.anchor_column and task.positive_column name the two texts of a pair; set both (e.g. "
                        "task.anchor_column=query,task.positive_column=passage).")
    if self.loss == "mnrl" and self.score_column:
      raise ConfigError(f"task.score_column={self.score_column!r} with task.loss=mnrl: mnrl ranks each anchor's "
                        "positive above the batch's other texts and reads no score. Use task.loss=cosent (or cosine) "
                        "for scored pairs, or set task.score_column=''.")
    if self.loss in SCORED_LOSSES and not self.score_column:
      raise ConfigError(f"task.loss={self.loss} learns from a similarity score per pair: set task.score_column to "
                        "the score's column (or use task.loss=mnrl for unscored pairs).")
    if self.loss in SCORED_LOSSES and self.negative_column:
      raise ConfigError(f"task.negative_column={self.negative_column!r} is read by task.loss=mnrl only; set it to "
                        f"'' for task.loss={self.loss}.")
    if self.loss in SCORED_LOSSES and self.symmetric:
      raise ConfigError(f"task.symmetric=true is a form of mnrl; set it to false for task.loss={self.loss}.")
    if self.grad_cache_chunk < 0:
      raise ConfigError(f"task.grad_cache_chunk={self.grad_cache_chunk} must be >= 0: rows per encoder chunk of "
                        "GradCache (e.g. 32), or 0 for one forward pass over the batch.")
    if self.scale <= 0:
      raise ConfigError(f"task.scale={self.scale} must be > 0 (sentence-transformers' default is 20).")
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
    for data in (self.train_data, self.validation_data, self.predict_data):
      if data.pad_to_multiple_of or data.length_bucket_window:
        raise ConfigError("text_embedding reads fixed-length records: set pad_to_multiple_of=0 and "
                          "length_bucket_window=0 in task.train_data / task.validation_data / task.predict_data.")
