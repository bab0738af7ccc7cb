"""The recipes the retrieval study's fine-tuned models are trained by, and the check that refuses to reuse a model
directory or a ranking made by another one.

A reranker directory (`ft/reranker_s<seed>`), an embedder directory (`ft/embedder_s<seed>`) and the rankings made
from them record the settings that trained them (`"recipe"` in their JSON). A rerun of the study into the same
`--output_dir` with other settings would otherwise return the old models and rankings while `summary.json` and
`report.md` record the new settings. What depends on the embedder (its rankings, the reranker's rankings over its
top, a reranker that starts from it or mines its negatives with it) carries the embedder's recipe too.
"""

from __future__ import annotations

from typing import Any, Dict

# The settings a reranker directory is trained by (its `study_finetune.json` records them; a rerun with others
# refuses to reuse it), and what a directory from before the recipe was recorded was trained by.
RERANK_RECIPE = ("rerank_init", "rerank_mining", "rerank_loss", "rerank_steps", "rerank_batch_size",
                 "rerank_negatives", "rerank_hard_negatives", "rerank_learning_rate", "rerank_cloze_queries")
UNRECORDED_RECIPE = {"rerank_init": "pretrained", "rerank_mining": "bm25", "rerank_loss": "listwise"}
# The settings an embedder directory is trained by (the pieces a text is read in included: the reranker's too).
EMBED_RECIPE = ("embed_steps", "embed_batch_size", "embed_learning_rate", "embed_hard_negatives",
                "matryoshka_weights", "seq_length")
# Settings added to the recipe later, with the value every model recorded before them was trained by: the
# embedder's are the measured run's (summary_2026-11-28.json), which no flag could change before they were recorded
# but --embed_steps, --embed_hard_negatives, --matryoshka_weights and --seq_length.
RECIPE_ADDED = {"rerank_cloze_queries": 0, "embed_steps": 600, "embed_batch_size": 32, "embed_learning_rate": 2e-4,
                "embed_hard_negatives": False, "matryoshka_weights": [], "seq_length": 64}

RERANKER_FIX = ("use another --output_dir, or remove the reranker directories (ft/reranker_s*) and their rankings "
                "(rankings/biencoder_rerank_s*.json, rankings/biencoder_fused_s*.json) to retrain them.")
EMBEDDER_FIX = ("use another --output_dir, or remove the embedder directories (ft/embedder_s*), the rankings made "
                "from them (rankings/biencoder_*_s*.json), the reranker groups mined with them "
                "(pairs/rerank_train_biencoder_*.jsonl) and the rerankers (ft/reranker_s*) to retrain them.")


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
  differ = {k: (made[k], recipe[k]) for k in made if k in recipe and made[k] != recipe[k]}
  if differ:
    named = ", ".join(f"{k}: {a!r} there, {b!r} now" for k, (a, b) in differ.items())
    kind, fix = ("embedder", EMBEDDER_FIX) if set(differ) & set(EMBED_RECIPE) else ("reranker", RERANKER_FIX)
    raise ValueError(f"{path} was made with another {kind} recipe ({named}); {fix}")
