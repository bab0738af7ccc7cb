"""`TextRankingConfig`: what `--experiment=text_ranking` reads (columns, group size, loss).

Separate from the task so that the checks a user meets first (`validate`, run before any file is read or any model
built) read on one page: each names the `task.*` key at fault and the value that fixes it.
"""

from __future__ import annotations

import dataclasses
from typing import Optional

from official_albert.retrieval.ranking_record import LOSSES
from official_albert.training.experiment_config import ConfigError
from official_albert.training.experiment_config import DataConfig
from official_albert.training.experiment_config import eval_data_config
from official_albert.training.experiment_config import FINETUNING_SHUFFLE_BUFFER
from tasks import raw_inputs
from tasks.embedding.config import check_metric_convention


@dataclasses.dataclass
class TextRankingConfig(raw_inputs.RawInputTaskConfig):
  """A cross-encoder reranker trained on query groups (see `tasks.ranking`).

  Attributes:
    query_column, positive_column: CSV/TSV header names or JSONL keys of the query and its relevant document.
    negative_column: the non-relevant documents of the query: one text, or (JSONL) a list of texts.
    num_negatives: negatives per training group (the first ones of each row; a row with fewer is a bad row). A
      group is the positive and these negatives, in a seeded random order.
    eval_num_negatives: negatives per validation group; -1 = num_negatives. Evaluation reranks each group.
    input_format: csv | tsv | jsonl; '' = from each file's extension.
    skip_bad_rows: skip, count and log bad rows instead of raising.
    loss: listwise (softmax cross-entropy over the group) or bce (pointwise binary cross-entropy); None = as the
      model in model_dir was trained (its ranking_training.json, which training writes), else listwise. Its
      `eval_loss` is the trained loss's, so `--mode=eval` reports what training's evaluation did.
    record_shuffle_seed: training records are written in a seeded random order (and every group's candidates are
      shuffled with it, so the positive's place tells nothing); < 0 keeps the file's order.
    do_lower_case: None = as the model in model_dir was trained (its tokenizer_config.json, which training writes),
      else true; a value given explicitly that contradicts that file is an error naming both (`--mode=eval` on a
      cased reranker tokenizes cased without the setting repeated).
    validation_split, validation_candidates, rerank_depth: where task.validation_data.input_path is a BEIR-format
      folder (`tasks.ranking.beir_evaluation`): the qrels split scored (default dev), the run file of that split's
      first-stage candidates (TREC format; `tasks.retrieval_evaluate --run_file` writes one), and how many of each
      query's candidates the reranker reorders (the rest keep the run's order below them).
    predict_candidates: `--mode=predict` on a BEIR-format folder (task.predict_data.input_path; no judgments
      needed): the run file whose queries' first task.rerank_depth candidates are reranked and written to
      `<model_dir>/predictions/<folder>.reranked.trec`.
    metric_convention: how evaluation computes nDCG and MAP: "sentence_transformers" (default, binary gains) or
      "beir" (pytrec_eval's graded gains, MAP over all relevant documents); as text_embedding's.
  """
  query_column: str = "query"
  positive_column: str = "positive"
  negative_column: str = "negatives"
  num_negatives: int = 3
  eval_num_negatives: int = -1
  input_format: str = ""
  skip_bad_rows: bool = False
  loss: Optional[str] = None
  record_shuffle_seed: int = 12345
  do_lower_case: Optional[bool] = None
  validation_split: str = "dev"
  validation_candidates: str = ""
  rerank_depth: int = 100
  predict_candidates: str = ""
  metric_convention: str = "sentence_transformers"
  train_data: DataConfig = dataclasses.field(default_factory=lambda: DataConfig(
      global_batch_size=16, seq_length=256, shuffle_buffer_size=FINETUNING_SHUFFLE_BUFFER))
  validation_data: DataConfig = dataclasses.field(default_factory=lambda: eval_data_config(seq_length=256))
  predict_data: DataConfig = dataclasses.field(default_factory=lambda: eval_data_config(seq_length=256))

  def group_negatives(self, role: str) -> int:
    """Negatives per group of the `role` ("train" or "eval") records."""
    if role != "train" and self.eval_num_negatives >= 0:
      return self.eval_num_negatives
    return self.num_negatives

  def validate(self) -> None:
    super().validate()
    if self.input_format and self.input_format not in ("csv", "tsv", "jsonl"):
      raise ConfigError(f"task.input_format={self.input_format!r}: text_ranking reads csv, tsv or jsonl (or '' = "
                        "from the extension).")
    if self.loss is not None and self.loss not in LOSSES:
      raise ConfigError(f"task.loss={self.loss!r} is not one of {LOSSES}: listwise (softmax over each query's "
                        "group) or bce (each pair relevant or not).")
    for key in ("query_column", "positive_column", "negative_column"):
      if not getattr(self, key):
        raise ConfigError(f"task.{key} is empty: a group is a query, its positive and its negatives; name all three "
                          "columns (e.g. task.query_column=query,task.positive_column=positive,"
                          "task.negative_column=negatives).")
    if self.num_negatives < 1:
      raise ConfigError(f"task.num_negatives={self.num_negatives}: a group needs at least 1 negative to rank the "
                        "positive against; set task.num_negatives >= 1.")
    if not self.validation_split.strip() or "/" in self.validation_split:
      raise ConfigError(f"task.validation_split={self.validation_split!r} must name a split of a BEIR-format folder "
                        "(its qrels/<split>.tsv), e.g. dev.")
    check_metric_convention(self.metric_convention)
    if self.rerank_depth < 1:
      raise ConfigError(f"task.rerank_depth={self.rerank_depth}: rerank at least each query's first candidate; set "
                        ">= 1 (100: the first stage's top 100).")
    if self.eval_num_negatives == 0 or self.eval_num_negatives < -1:
      raise ConfigError(f"task.eval_num_negatives={self.eval_num_negatives}: set >= 1, or -1 for task.num_negatives.")
    for data in (self.train_data, self.validation_data, self.predict_data):
      if data.pad_to_multiple_of or data.length_bucket_window:
        raise ConfigError("text_ranking reads fixed-length records: set pad_to_multiple_of=0 and "
                          "length_bucket_window=0 in task.train_data / task.validation_data / task.predict_data.")
