"""The recipes the retrieval study's fine-tuned models are trained by and the settings its data and pretrained model
are made with, and the checks that refuse to reuse a stage's output, a model directory or a ranking made by others.

A reranker directory (`ft/reranker_s<seed>`), an embedder directory (`ft/embedder_s<seed>`) and the rankings made
from them record the settings that trained them (`"recipe"` in their JSON). A rerun of the study into the same
`--output_dir` with other settings would otherwise return the old models and rankings while `summary.json` and
`report.md` record the new settings. What depends on the embedder (its rankings, the reranker's rankings over its
top, a reranker that starts from it or mines its negatives with it) carries the embedder's recipe too. Each
fine-tuned model and ranking carries the model it starts from (`pretrained_dir`: '' for the study's own).

The stages before them are keyed the same way: `data.json` records the settings its corpus, vocabulary, records and
pairs were made by (`DATA_RECIPE`) and `pretrain.json` those the model was pretrained by (`PRETRAIN_RECIPE`); a rerun
into the same `--output_dir` with others (`--seq_length`, `--quick`) is refused with the fix (`check_stage`)
instead of reading records or a model of another length. The reranker's BM25 groups of the data stage are used only
under the `rerank_negatives` / `rerank_hard_negatives` they were made with (`DATA_GROUPS`); other values get their own
file (`study.rerank_groups_file`).
"""

from __future__ import annotations

import os
from typing import Any, Dict

from official_albert import file_io

# The settings a reranker directory is trained by (its `study_finetune.json` records them; a rerun with others
# refuses to reuse it), and what a directory from before the recipe was recorded was trained by.
RERANK_RECIPE = ("rerank_init", "rerank_mining", "rerank_loss", "rerank_steps", "rerank_batch_size",
                 "rerank_negatives", "rerank_hard_negatives", "rerank_learning_rate", "rerank_cloze_queries",
                 "seq_length", "pretrained_dir")
UNRECORDED_RECIPE = {"rerank_init": "pretrained", "rerank_mining": "bm25", "rerank_loss": "listwise"}
# The settings an embedder directory is trained by (the pieces a text is read in included: the reranker's too).
EMBED_RECIPE = ("embed_steps", "embed_batch_size", "embed_learning_rate", "embed_hard_negatives",
                "matryoshka_weights", "seq_length", "pretrained_dir")
# What the pretrained model's own rankings (mlm_mean) depend on beside the data.
PRETRAINED_RECIPE = ("pretrained_dir",)
# The corpus knobs (`experiments.study.CorpusSettings`): the corpus, the vocabulary and the pretraining records.
CORPUS_RECIPE = ("corpus_bytes", "packages", "heldout_every", "vocab_size", "seq_length", "max_predictions_per_seq",
                 "dupe_factor", "seed")
# The data stage's outputs: the corpus knobs and the pairs' limits.
DATA_RECIPE = CORPUS_RECIPE + ("max_heldout", "max_train")
# The data stage's reranker groups (pairs/rerank_train.jsonl), and what a data.json from before they were recorded
# made them with (the settings' defaults).
DATA_GROUPS = ("rerank_negatives", "rerank_hard_negatives")
UNRECORDED_GROUPS = {"rerank_negatives": 3, "rerank_hard_negatives": 1}
# The pretrain stage's model: the records it read and its schedule.
PRETRAIN_RECIPE = CORPUS_RECIPE + ("pretrain_steps", "pretrain_batch_size", "pretrain_learning_rate")
# Settings added to the recipe later, with the value every model recorded before them was trained by: the
# embedder's are the measured run's (summary_2026-11-28.json), which no flag could change before they were recorded
# but --embed_steps, --embed_hard_negatives, --matryoshka_weights and --seq_length (the reranker's seq_length: the
# same flag). `pretrained_dir` is not here: a model or ranking from before it was recorded is not checked on it (the
# measured runs' folders, one of them made with --pretrained_dir, stay resumable).
RECIPE_ADDED = {"rerank_cloze_queries": 0, "embed_steps": 600, "embed_batch_size": 32, "embed_learning_rate": 2e-4,
                "embed_hard_negatives": False, "matryoshka_weights": [], "seq_length": 64}

RERANKER_FIX = ("use another --output_dir, or remove the reranker directories (ft/reranker_s*) and their rankings "
                "(rankings/biencoder_rerank_s*.json, rankings/biencoder_fused_s*.json) to retrain them.")
PRETRAINED_FIX = ("use another --output_dir, or remove the fine-tuned models (ft/) and the rankings (rankings/) to "
                  "make them from this model.")
DATA_FIX = ("remove data.json, corpus/, spm/, data/ and pairs/ and everything made from them (pretrain.json, "
            "pretrained/, ft/, rankings/) to make it again.")
PRETRAIN_FIX = "remove pretrain.json and pretrained/ and everything made from them (ft/, rankings/) to pretrain again."
EMBEDDER_FIX = ("use another --output_dir, or remove the embedder directories (ft/embedder_s*), the rankings made "
                "from them (rankings/biencoder_*_s*.json), the reranker groups mined with them "
                "(pairs/rerank_train_biencoder_*.jsonl) and the rerankers (ft/reranker_s*) to retrain them.")
# The stage settings a flag of the same name sets (`check_stage` names it); the other corpus knobs are --quick's.
STAGE_FLAGS = ("seq_length", "pretrain_steps")


def recipe_of(settings, names) -> Dict[str, Any]:
  """{name: setting} for `names`, as JSON reads it back (tuples as lists), so a recorded recipe compares equal."""
  return {name: list(getattr(settings, name)) if isinstance(getattr(settings, name), tuple) else
          getattr(settings, name) for name in names}


def check_recipe(path: str, recorded: Dict[str, Any], recipe: Dict[str, Any]) -> None:
  """Refuses to reuse `path` (a model's marker or a ranking) made by another recipe than `recipe`.

  `recorded` is the file's JSON; one without a "recipe" predates it and was made by `UNRECORDED_RECIPE`, one
  without a setting added to the recipe later by its `RECIPE_ADDED` value. Only the settings in `recipe` count.

  Raises:
    ValueError: naming the settings that differ and the fix (the embedder's when an embedder setting differs:
      everything made from the embedder goes with it).
  """
  made = {**RECIPE_ADDED, **recorded.get("recipe", UNRECORDED_RECIPE)}
  differ = _differ(made, recipe)
  if differ:
    if "pretrained_dir" in differ:
      kind, fix = "pretrained model", PRETRAINED_FIX
    elif set(differ) & set(EMBED_RECIPE):
      kind, fix = "embedder", EMBEDDER_FIX
    else:
      kind, fix = "reranker", RERANKER_FIX
    raise ValueError(f"{path} was made with another {kind} recipe ({_named(differ)}); {fix}")


def check_stage(path: str, what: str, made: Dict[str, Any], recipe: Dict[str, Any], fix: str) -> None:
  """Refuses to reuse a stage's output (`path`: data.json, pretrain.json) made with other settings than `recipe`.

  Args:
    what: the output, for the message ("the data", "the pretrained model").
    made: the settings it was made with (its recorded "recipe"; for one from before the recipe was recorded, what
      is known of them: only those are checked).
    fix: what to remove to make it again (`DATA_FIX`, `PRETRAIN_FIX`).

  Raises:
    ValueError: naming the settings that differ (the flag that sets them: --seq_length, --quick) and the fix.
  """
  differ = _differ(made, recipe)
  if differ:
    flags = [f"--{k}={a}" for k, (a, _) in differ.items() if k in STAGE_FLAGS]
    if set(differ) - set(STAGE_FLAGS) - {"max_predictions_per_seq"}:  # max_predictions_per_seq: from --seq_length
      flags.append("--quick or not, as then")
    raise ValueError(f"{path}: {what} there was made with other settings ({_named(differ)}); use another "
                     f"--output_dir, rerun with the settings it was made with ({', '.join(flags)}), or {fix}")


def _differ(made: Dict[str, Any], recipe: Dict[str, Any]) -> Dict[str, Any]:
  return {k: (made[k], recipe[k]) for k in recipe if k in made and made[k] != recipe[k]}


def _named(differ: Dict[str, Any]) -> str:
  return ", ".join(f"{k}: {a!r} there, {b!r} now" for k, (a, b) in differ.items())


def check_data(path: str, record: Dict[str, Any], settings) -> Dict[str, Any]:
  """`record` (the data stage's data.json at `path`) when it was made with `settings`' `DATA_RECIPE`; else
  ValueError (`check_stage`). One from before the recipe was recorded is checked on its records' layout."""
  stats = os.path.join(os.path.dirname(path), "data", "train.tfrecord.stats.json")  # experiments.study.make_records'
  check_stage(path, "the data", data_made_with(record, stats), recipe_of(settings, DATA_RECIPE), DATA_FIX)
  return record


def check_pretrain(path: str, record: Dict[str, Any], settings, config_path: str) -> None:
  """Raises ValueError unless the model of `record` (pretrain.json at `path`; the model's config.json at
  `config_path`) was pretrained with `settings`' `PRETRAIN_RECIPE` (its steps first, with their own flag)."""
  steps = record.get("steps")
  if steps != settings.pretrain_steps:
    raise ValueError(f"{path}: the model there was pretrained for {steps} steps, {settings.pretrain_steps} are asked "
                     f"now; use another --output_dir, or pass --pretrain_steps={steps} to reuse it.")
  check_stage(path, "the pretrained model", pretrain_made_with(record, config_path),
              recipe_of(settings, PRETRAIN_RECIPE), PRETRAIN_FIX)


def data_made_with(record: Dict[str, Any], stats_path: str) -> Dict[str, Any]:
  """The settings a data.json's outputs were made with: its "recipe"; for one from before it was recorded, the
  records' layout read from their stats file (`stats_path`: create_pretraining_data's, with its `generation`
  options), else nothing known."""
  if "recipe" in record:
    return record["recipe"]
  if not os.path.exists(stats_path):
    return {}
  options = file_io.read_json(stats_path).get("generation", {}).get("options", {})
  names = {"seq_length": "max_seq_length", "max_predictions_per_seq": "max_predictions_per_seq"}
  return {name: options[key] for name, key in names.items() if key in options}


def pretrain_made_with(record: Dict[str, Any], config_path: str) -> Dict[str, Any]:
  """The settings a pretrain.json's model was pretrained with: its "recipe"; for one from before it was recorded,
  its steps and (from the model's `config_path`, whose position table the study sizes to it) its seq_length."""
  if "recipe" in record:
    return record["recipe"]
  made = {"pretrain_steps": record.get("steps")}
  if os.path.exists(config_path):
    made["seq_length"] = file_io.read_json(config_path)["max_position_embeddings"]
  return made
