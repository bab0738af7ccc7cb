"""The retrieval study (issue 46): does fine-tuning a small pretrained ALBERT as a bi-encoder and a reranker retrieve
held-out documentation better than its raw MLM vectors, and how does it stand against BM25?

  python -m experiments.projects.retrieval.study --output_dir=out/retrieval_study [--quick] [--stage=STAGE]

Stages (each skipped when its output exists, so a rerun resumes; `--stage` stops after the one named; an output
made with other settings is refused, never reused: `recipes.py`):
- data: the demo corpus (`experiments.study`: train / held-out documents, a SentencePiece vocabulary, pretraining
  records), then the (first line → rest of the docstring) pairs of `pairs.py` (`pairs/train.csv` for the embedder,
  `pairs/heldout.jsonl`, `pairs/rerank_train.jsonl`: each training query with its passage and BM25's best wrong
  passages as hard negatives). `data.json`.
- pretrain: the demo's tiny ALBERT (`experiments.pretraining.TINY_MODEL`, H 128, 4 layers) pretrained on the records
  (`pretrained/`), or `--pretrained_dir` used as it is (any model directory of the same vocabulary).
- finetune: per seed, `text_embedding` (mnrl, in-batch negatives, Matryoshka widths [H, H/4, H/8]) from the
  pretrained model, and `text_ranking` (`rerank_loss`, listwise by default) from the pretrained model or that seed's
  bi-encoder (`rerank_init`), its hard negatives BM25's or the bi-encoder's (`rerank_mining`)
  (`ft/{embedder,reranker}_s<seed>`; a model directory and its rankings record their recipe and are not reused by
  another: `recipes.py`).
- evaluate: every held-out query against the held-out passages and every training passage, ranked by
  mean-pooled MLM vectors of the pretrained model (no retrieval training), BM25 (`bm25s`), the bi-encoder at full,
  1/4 and 1/8 width (`pipelines.embed(..., dim=K)`), the reranker over the bi-encoder's top `rerank_depth`, and
  that top reordered by the reciprocal-rank fusion of the two orders (`rankers.rank_fusion`); each
  ranking saved (`rankings/<method>.json`) and scored by `official_albert.retrieval.metrics`.
- report: mean ± std over the seeds, the issue's bars, `summary.json` and `report.md`.

Why the first line: a docstring's summary line is a short query-like text whose answer is the body below it, and
the corpus' held-out documents were never pretrained on, so the held-out queries test what the models learnt rather
than what they memorised. Why a 4-layer model: the study reruns on a 2-core CPU in under an hour.

Long because: the settings (every recipe knob the README's tables name), the five stages and the binary read in the
order the study runs; the pair rules, the reranker's groups and the report already live in their own modules.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import os
import time
from typing import Any, Dict, List, Optional, Tuple

from absl import flags

from experiments import study as study_kit
from experiments.projects.retrieval import pair_files
from experiments.projects.retrieval import pairs as pairs_lib
from experiments.projects.retrieval import rankers
from experiments.projects.retrieval import recipes
from experiments.projects.retrieval import report as report_lib
from experiments.projects.retrieval.recipes import check_recipe
from official_albert import cli
from official_albert import file_io
from official_albert import model_directory

logger = logging.getLogger(__name__)

STAGES = ("data", "pretrain", "finetune", "evaluate", "report")
# What the reranker starts from: the pretrained model, or the same seed's fine-tuned bi-encoder (its encoder).
RERANK_INITS = ("pretrained", "embedder")
# Where a reranker group's hard negatives come from: BM25's best wrong passages for the training query (the data
# stage's file), or passages drawn from the same seed's bi-encoder's top `rerank_depth` for it (the candidates a
# reranker meets at evaluation).
RERANK_MINING = ("bm25", "biencoder")
RERANK_LOSSES = ("listwise", "bce")


@dataclasses.dataclass
class StudySettings(study_kit.CorpusSettings):
  """One run's knobs (beside the kit's corpus knobs); `full()` is the measured run, `quick()` the test's."""
  pretrain_steps: int = 2000
  pretrain_batch_size: int = 64
  pretrain_learning_rate: float = 0.01
  embed_steps: int = 600
  embed_batch_size: int = 32
  embed_learning_rate: float = 2e-4
  embed_hard_negatives: bool = False
  matryoshka_weights: Tuple[float, ...] = ()  # one per width of `matryoshka_dims` ((): 1 each)
  rerank_steps: int = 600
  rerank_batch_size: int = 16
  rerank_negatives: int = 3
  rerank_hard_negatives: int = 1  # of rerank_negatives, from BM25 (the rest random)
  rerank_learning_rate: float = 3e-4
  rerank_init: str = "pretrained"  # one of RERANK_INITS
  rerank_mining: str = "bm25"  # one of RERANK_MINING
  rerank_cloze_queries: int = 0  # Inverse Cloze groups per training passage added to the reranker's (pairs.py)
  rerank_loss: str = "listwise"  # text_ranking's task.loss
  rerank_depth: int = 20
  max_heldout: int = 500
  max_train: int = 0
  seeds: Tuple[int, ...] = (1, 2, 3)
  mixed_precision: str = "auto"
  pretrained_dir: str = ""  # a pretrained model directory used as it is ('': pretrain one; recorded in the recipes)

  @classmethod
  def full(cls) -> "StudySettings":
    from data_prep import corpus  # noqa: PLC0415 (the corpus' package list; light import)
    return cls(packages=tuple(corpus.DEMO_PACKAGES))

  @classmethod
  def quick(cls) -> "StudySettings":
    return cls(corpus_bytes=300_000, vocab_size=800, dupe_factor=1, pretrain_steps=40, pretrain_batch_size=32,
               embed_steps=30, rerank_steps=20, max_heldout=48, mixed_precision="float32")

  def pair_options(self) -> pairs_lib.PairOptions:
    return pairs_lib.PairOptions(max_heldout=self.max_heldout, max_train=self.max_train)

  def rerank_recipe(self) -> Dict[str, Any]:
    """The settings the rerankers are trained by (`recipes.RERANK_RECIPE`)."""
    return recipes.recipe_of(self, recipes.RERANK_RECIPE)

  def embed_recipe(self) -> Dict[str, Any]:
    """The settings the embedders are trained by (`recipes.EMBED_RECIPE`)."""
    return recipes.recipe_of(self, recipes.EMBED_RECIPE)

  def reranker_recipe(self, evaluated: bool = False) -> Dict[str, Any]:
    """A reranker's recipe, with the embedder's when it depends on it: it starts from it or mines with it, or
    (`evaluated`: its rankings) it reorders the bi-encoder's top."""
    uses = evaluated or self.rerank_init == "embedder" or self.rerank_mining == "biencoder"
    return {**self.rerank_recipe(), **(self.embed_recipe() if uses else {})}

  def validate(self) -> None:
    if self.rerank_cloze_queries < 0:
      raise ValueError(f"rerank_cloze_queries={self.rerank_cloze_queries}: give 0 (none) or more Inverse Cloze "
                       "groups per training passage.")
    for name, allowed in (("rerank_init", RERANK_INITS), ("rerank_mining", RERANK_MINING),
                          ("rerank_loss", RERANK_LOSSES)):
      if getattr(self, name) not in allowed:
        raise ValueError(f"{name}={getattr(self, name)!r} is not one of {allowed}.")


def _done(path: str) -> bool:
  return os.path.exists(path)


def _read_json(path: str) -> Any:
  with open(path, encoding="utf-8") as f:
    return json.load(f)


# ------------------------------------------------------------------------------------------------------ data
def stage_data(output_dir: str, settings: StudySettings) -> Dict[str, Any]:
  """Corpus, vocabulary, pretraining records and the pair files; `data.json` (paths and counts)."""
  done = os.path.join(output_dir, "data.json")
  if _done(done):
    return recipes.check_data(done, _read_json(done), settings)
  start = time.time()
  made = study_kit.make_pretraining_data(output_dir, settings)
  train_text, heldout_text = made["train_text"], made["heldout_text"]
  with open(train_text, encoding="utf-8") as f:
    train_documents = pairs_lib.split_documents(f.read())
  with open(heldout_text, encoding="utf-8") as f:
    heldout_documents = pairs_lib.split_documents(f.read())
  built = pairs_lib.build_pairs(train_documents, heldout_documents, settings.pair_options())
  files = pair_files.write_pair_files(output_dir, built, settings.rerank_negatives,
                                      settings.rerank_hard_negatives, settings.seed)
  data = {"spm_model": made["spm_model"], "train_records": made["train_records"],
          "heldout_records": made["heldout_records"], "corpus": made["corpus"], "train_pairs": len(built["train"]),
          "heldout_pairs": len(built["heldout"]), "wall_s": time.time() - start, **files,
          "recipe": recipes.recipe_of(settings, recipes.DATA_RECIPE),
          "rerank_groups": recipes.recipe_of(settings, recipes.DATA_GROUPS)}
  file_io.atomic_write_json(done, data)
  return data


# -------------------------------------------------------------------------------------------------- pretrain
def _precision(settings: StudySettings, batch: int, model: Dict[str, Any]) -> str:
  from official_albert.precision import resolve_mixed_precision  # noqa: PLC0415 (binary: TF after launch)
  precision, _ = resolve_mixed_precision(settings.mixed_precision,
                                         (batch * settings.seq_length, model["hidden_size"],
                                          model["intermediate_size"]), owner="retrieval_study")
  return precision


def stage_pretrain(output_dir: str, settings: StudySettings, data: Dict[str, Any], pretrained_dir: str = "") -> str:
  """The pretrained model directory: `pretrained_dir` (or the settings') when given, else `output_dir/pretrained`
  (trained here; one pretrained with other settings is refused)."""
  pretrained_dir = pretrained_dir or settings.pretrained_dir
  if pretrained_dir:
    model_directory.require_spm_model(pretrained_dir, "the retrieval study's --pretrained_dir")
    return pretrained_dir
  target = os.path.join(output_dir, "pretrained")
  done = os.path.join(output_dir, "pretrain.json")
  if _done(done):
    recipes.check_pretrain(done, _read_json(done), settings, model_directory.path(target, model_directory.CONFIG_FILE))
    return target
  import sentencepiece as spm  # noqa: PLC0415

  from experiments.pretraining import TINY_MODEL  # noqa: PLC0415 (binary: TF after launch)
  from official_albert import train  # noqa: PLC0415 (binary: TF after launch)
  start = time.time()
  vocab_size = spm.SentencePieceProcessor(model_file=data["spm_model"]).GetPieceSize()
  model = {**TINY_MODEL, "vocab_size": vocab_size, "max_position_embeddings": settings.seq_length}
  steps = settings.pretrain_steps
  override = {
      "task": {"model": model, **study_kit.pretraining_data_override(data, settings, settings.pretrain_batch_size)},
      "trainer": {"train_steps": steps, "steps_per_loop": min(50, steps), "checkpoint_interval": steps,
                  "validation_interval": steps, "summary_interval": min(50, steps), "validation_steps": 20,
                  "learning_rate": settings.pretrain_learning_rate, "warmup_steps": max(steps // 10, 1),
                  "max_to_keep": 1},
      "runtime": {"seed": settings.seed,
                  "mixed_precision_dtype": _precision(settings, settings.pretrain_batch_size, model)}}
  result = train.run("albert_tiny_pretrain", "train_and_eval", target, params_override=json.dumps(override))
  file_io.atomic_copy(data["spm_model"], model_directory.path(target, model_directory.SPM_FILE))
  file_io.atomic_write_json(done, {"eval": result.get("eval_results"), "wall_s": time.time() - start,
                                   "steps": steps, "recipe": recipes.recipe_of(settings, recipes.PRETRAIN_RECIPE)})
  return target


# -------------------------------------------------------------------------------------------------- finetune
def hidden_size(model_dir: str) -> int:
  return int(_read_json(model_directory.path(model_dir, model_directory.CONFIG_FILE))["hidden_size"])


def matryoshka_dims(width: int) -> List[int]:
  """[H, H/4, H/8]: the widths the issue's table compares."""
  return [width, width // 4, width // 8]


def embedder_dir(output_dir: str, seed: int) -> str:
  return os.path.join(output_dir, "ft", f"embedder_s{seed}")


def reranker_dir(output_dir: str, seed: int) -> str:
  return os.path.join(output_dir, "ft", f"reranker_s{seed}")


def _finetune(experiment: str, model_dir: str, task: Dict[str, Any], steps: int, learning_rate: float, seed: int,
              precision: str, recipe: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
  from official_albert import train  # noqa: PLC0415 (binary: TF after launch)
  done = os.path.join(model_dir, "study_finetune.json")
  if _done(done):
    record = _read_json(done)
    if recipe is not None:
      # An embedder from before its recipe was recorded is known by its steps.
      steps = {} if "recipe" in record or experiment != "text_embedding" else {"embed_steps": record.get("steps")}
      check_recipe(done, {"recipe": steps} if steps else record, recipe)
    return record
  start, load = time.time(), os.getloadavg()
  loop = min(100, steps)
  override = {"task": task,
              "trainer": {"train_steps": steps, "steps_per_loop": loop, "checkpoint_interval": steps,
                          "summary_interval": loop, "learning_rate": learning_rate,
                          "warmup_steps": max(steps // 10, 1), "max_to_keep": 1},
              "runtime": {"seed": seed, "mixed_precision_dtype": precision}}
  result = train.run(experiment, "train", model_dir, params_override=json.dumps(override))
  history = result.get("history") or []
  record = {"wall_s": time.time() - start, "loadavg_start": load, "loadavg_end": os.getloadavg(), "steps": steps,
            "precision": precision, "last_train": history[-1][1] if history else None}
  if recipe is not None:
    record["recipe"] = recipe
  file_io.atomic_write_json(done, record)
  return record


def stage_finetune(output_dir: str, settings: StudySettings, data: Dict[str, Any], pretrained: str) -> Dict[str, Any]:
  """The embedder and the reranker of every seed; {model dir: wall time and last training logs}."""
  width = hidden_size(pretrained)
  config = _read_json(model_directory.path(pretrained, model_directory.CONFIG_FILE))
  results = {}
  for seed in settings.seeds:
    data_config = {"global_batch_size": settings.embed_batch_size, "seq_length": settings.seq_length, "seed": seed}
    task = {"init_checkpoint": pretrained, "loss": "mnrl", "matryoshka_dims": matryoshka_dims(width),
            "matryoshka_weights": list(settings.matryoshka_weights),
            "anchor_column": "anchor", "positive_column": "positive",
            "negative_column": "negative" if settings.embed_hard_negatives else "",
            "train_data": dict(data_config, input_path=data["train_pairs_file"])}
    results[embedder_dir(output_dir, seed)] = _finetune(
        "text_embedding", embedder_dir(output_dir, seed), task, settings.embed_steps, settings.embed_learning_rate,
        seed, _precision(settings, 2 * settings.embed_batch_size, config), settings.embed_recipe())
    data_config = {"global_batch_size": settings.rerank_batch_size, "seq_length": settings.seq_length, "seed": seed}
    init = embedder_dir(output_dir, seed) if settings.rerank_init == "embedder" else pretrained
    task = {"init_checkpoint": init, "loss": settings.rerank_loss, "num_negatives": settings.rerank_negatives,
            "query_column": "query", "positive_column": "positive", "negative_column": "negatives",
            "train_data": dict(data_config, input_path=rerank_groups_file(output_dir, settings, data, seed))}
    results[reranker_dir(output_dir, seed)] = _finetune(
        "text_ranking", reranker_dir(output_dir, seed), task, settings.rerank_steps, settings.rerank_learning_rate,
        seed, _precision(settings, settings.rerank_batch_size * (1 + settings.rerank_negatives), config),
        settings.reranker_recipe())
  return results


def rerank_groups_file(output_dir: str, settings: StudySettings, data: Dict[str, Any], seed: int) -> str:
  """The reranker's training groups: the data stage's BM25 groups, or groups made here once per setting (and seed,
  for the bi-encoder's) under `pairs/rerank_train_*.jsonl`: with `rerank_mining="biencoder"` the
  `rerank_hard_negatives` are drawn from the seed's bi-encoder's top `rerank_depth` for each training query, and
  `rerank_cloze_queries=N` adds up to N Inverse Cloze groups a training passage (`pairs.cloze_rows`: a sentence
  against the passage without it), their negatives mined the same way, never the passage they were cut from. BM25
  groups of other `rerank_negatives` / `rerank_hard_negatives` than the data stage's get their own file too."""
  cloze = settings.rerank_cloze_queries
  groups = recipes.recipe_of(settings, recipes.DATA_GROUPS)  # the data stage's are used only if made with these
  if settings.rerank_mining == "bm25" and not cloze and data.get("rerank_groups", recipes.UNRECORDED_GROUPS) == groups:
    return data["rerank_train_file"]
  if settings.rerank_mining == "bm25":
    name = f"rerank_train_bm25_n{settings.rerank_negatives}h{settings.rerank_hard_negatives}"
  else:
    name = (f"rerank_train_biencoder_s{seed}_n{settings.rerank_negatives}h{settings.rerank_hard_negatives}"
            f"k{settings.rerank_depth}")
  path = os.path.join(output_dir, "pairs", name + (f"_cloze{cloze}" if cloze else "") + ".jsonl")
  if _done(path):
    return path
  train = pair_files.read_train(data)
  heldout_queries, _ = pair_files.read_heldout(data)
  rows = pairs_lib.cloze_rows(train, set(heldout_queries), cloze, settings.pair_options())
  queries = [q for q, _ in train] + [q for q, _, _ in rows]
  own = list(range(len(train))) + [i for _, _, i in rows]
  passages = [p for _, p in train]
  if settings.rerank_mining == "bm25":
    ranked = rankers.bm25_rankings(passages, queries, max(settings.rerank_hard_negatives, 1) + 1)
    sample_from, draw_seed = 0, settings.seed  # as the data stage's groups: best wrong passages, the data seed
  else:
    from official_albert import pipelines  # noqa: PLC0415 (binary: TF after launch)
    model_dir = embedder_dir(output_dir, seed)
    ranked = rankers.dense_rankings(pipelines.embed(model_dir, queries), pipelines.embed(model_dir, passages),
                                    settings.rerank_depth + 1)
    sample_from, draw_seed = settings.rerank_depth, seed
  groups = pair_files.choose_negatives(ranked, settings.rerank_negatives, settings.rerank_hard_negatives,
                                       len(passages), draw_seed, sample_from=sample_from, own=own)
  pair_files.write_groups(path, train, groups, rows=[(q, p) for q, p, _ in rows])
  logger.info("reranker groups: %d training pairs and %d Inverse Cloze rows -> %s", len(train), len(rows), path)
  return path


# -------------------------------------------------------------------------------------------------- evaluate
def _save_ranking(output_dir: str, name: str, rankings: List[List[int]], metrics: Dict[str, float],
                  recipe: Optional[Dict[str, Any]] = None) -> None:
  extra = {} if recipe is None else {"recipe": recipe}
  file_io.atomic_write_json(os.path.join(output_dir, "rankings", f"{name}.json"),
                            {"method": name, "rankings": rankings, "metrics": metrics, **extra})


def stage_evaluate(output_dir: str, settings: StudySettings, data: Dict[str, Any], pretrained: str
                   ) -> Dict[str, Dict[str, float]]:
  """Every method's held-out rankings (`rankings/<name>.json`) and metrics; {name: metrics}."""
  from official_albert import pipelines  # noqa: PLC0415 (binary: TF after launch)
  from official_albert.retrieval import matryoshka  # noqa: PLC0415 (binary: TF after launch)
  queries, corpus = pair_files.read_heldout(data)
  relevant = [[i] for i in range(len(queries))]
  depth = min(rankers.RANKING_DEPTH, len(corpus))
  results = {}

  def record(name, make, recipe=None):
    path = os.path.join(output_dir, "rankings", f"{name}.json")
    if _done(path):
      saved = _read_json(path)
      if recipe is not None:
        check_recipe(path, saved, recipe)
      results[name] = saved["metrics"]
      return saved["rankings"]
    start = time.time()
    rankings = make()
    results[name] = dict(rankers.ranking_metrics(rankings, relevant, len(corpus)), wall_s=time.time() - start)
    _save_ranking(output_dir, name, rankings, results[name], recipe)
    logger.info("%s: %s", name, {k: round(results[name][k], 4) for k in report_lib.METRICS})
    return rankings

  record("mlm_mean", lambda: rankers.dense_rankings(pipelines.embed(pretrained, queries, pooling="mean"),
                                            pipelines.embed(pretrained, corpus, pooling="mean"), depth),
         recipes.recipe_of(settings, recipes.PRETRAINED_RECIPE))
  record("bm25", lambda: rankers.bm25_rankings(corpus, queries, depth))
  width = hidden_size(pretrained)
  for seed in settings.seeds:
    model_dir = embedder_dir(output_dir, seed)
    full, vectors = None, []

    def at_width(dim, model_dir=model_dir, vectors=vectors):
      # embed(dim=K) is embed()'s vectors cut by matryoshka.truncate after check_dim: the queries and the corpus are
      # embedded once per seed (on first need: a resumed run embeds nothing) and cut per width, the same arrays.
      if not vectors:
        vectors += [pipelines.embed(model_dir, queries), pipelines.embed(model_dir, corpus)]
      return [matryoshka.truncate(v, matryoshka.check_dim(model_dir, dim, int(v.shape[-1]), force=False))
              for v in vectors]

    for dim, label in zip(matryoshka_dims(width), ("full", "quarter", "eighth")):
      ranked = record(f"biencoder_{label}_s{seed}", lambda dim=dim: rankers.dense_rankings(*at_width(dim), depth),
                      settings.embed_recipe())
      full = ranked if full is None else full
    reranked = record(f"biencoder_rerank_s{seed}", lambda: rankers.rerank_rankings(
        reranker_dir(output_dir, seed), queries, corpus, full, settings.rerank_depth),
        settings.reranker_recipe(evaluated=True))
    record(f"biencoder_fused_s{seed}", lambda: rankers.rank_fusion(full, reranked, settings.rerank_depth),
           settings.reranker_recipe(evaluated=True))
  return results


# ---------------------------------------------------------------------------------------------------- report
def stage_report(output_dir: str, settings: StudySettings, data: Dict[str, Any],
                 finetune: Dict[str, Any], results: Dict[str, Dict[str, float]], wall_s: float) -> Dict[str, Any]:
  summary = report_lib.summarize(results, settings.seeds)
  pretrain = os.path.join(output_dir, "pretrain.json")
  summary.update({"settings": dataclasses.asdict(settings), "cpu": report_lib.cpu_name(), "cores": os.cpu_count(),
                  "heldout_queries": data["heldout_pairs"], "train_pairs": data["train_pairs"],
                  "corpus": data["corpus"], "data_wall_s": data.get("wall_s"),
                  "pretrain": _read_json(pretrain) if _done(pretrain) else None, "finetune": finetune,
                  "results": results, "wall_s_this_run": wall_s})
  file_io.atomic_write_json(os.path.join(output_dir, "summary.json"), summary)
  text = (f"# Retrieval study ({summary['cpu']}, {summary['cores']} cores)\n\n{data['heldout_pairs']} held-out "
          f"queries against a corpus of their {data['heldout_pairs']} passages and the {data['train_pairs']} training "
          f"passages; {data['train_pairs']} training pairs; seeds "
          f"{list(settings.seeds)}.\n\n{report_lib.format_table(summary)}\n")
  file_io.atomic_write_text(os.path.join(output_dir, "report.md"), text)
  print(text)
  return summary


def run_study(output_dir: str, settings: StudySettings, stage: str = "report", pretrained_dir: str = "") -> None:
  """Runs the stages up to `stage` (each skipped when its output exists)."""
  start = time.time()
  pretrained_dir = pretrained_dir or settings.pretrained_dir
  if pretrained_dir and file_io.is_local(pretrained_dir):
    pretrained_dir = os.path.abspath(pretrained_dir)  # recorded in the recipes: the same folder from any cwd
  settings = dataclasses.replace(settings, pretrained_dir=pretrained_dir)
  settings.validate()
  last = STAGES.index(stage)
  data = stage_data(output_dir, settings)
  if last < 1:
    return
  pretrained = stage_pretrain(output_dir, settings, data)
  if last < 2:
    return
  finetune = stage_finetune(output_dir, settings, data, pretrained)
  if last < 3:
    return
  results = stage_evaluate(output_dir, settings, data, pretrained)
  if last < 4:
    return
  stage_report(output_dir, settings, data, finetune, results, time.time() - start)


def define_flags(fv: flags.FlagValues = flags.FLAGS) -> None:
  """Defines the binary's flags on `fv` (never at import time)."""
  flags.DEFINE_string("output_dir", "out/retrieval_study", "Where every stage writes.", flag_values=fv)
  flags.DEFINE_bool("quick", False, "The small variant the test suite runs (minutes, meaningless numbers).",
                    flag_values=fv)
  flags.DEFINE_enum("stage", "report", list(STAGES), "Run the stages up to this one.", flag_values=fv)
  flags.DEFINE_list("seeds", None, "Fine-tuning seeds (default 1,2,3).", flag_values=fv)
  flags.DEFINE_string("pretrained_dir", "", "Use this pretrained model directory (with its spiece.model) instead of "
                      "pretraining one.", flag_values=fv)
  flags.DEFINE_integer("seq_length", None, "Pieces a text is read in (pretraining records, positions, fine-tuning; "
                       "default 64), with 15% of them masked at most.", flag_values=fv)
  flags.DEFINE_integer("pretrain_steps", None, "Override the pretraining steps (the pretrain stage; not with "
                       "--pretrained_dir).", flag_values=fv)
  flags.DEFINE_integer("embed_steps", None, "Override the embedder's training steps.", flag_values=fv)
  flags.DEFINE_integer("rerank_steps", None, "Override the reranker's training steps.", flag_values=fv)
  flags.DEFINE_list("matryoshka_weights", None, "The Matryoshka loss' weights of the widths [H, H/4, H/8] (default "
                    "1 each).", flag_values=fv)
  flags.DEFINE_bool("embed_hard_negatives", False, "Train the embedder with one BM25 hard negative per pair.",
                    flag_values=fv)
  flags.DEFINE_enum("rerank_init", None, list(RERANK_INITS), "What the reranker starts from: the pretrained model "
                    "or the same seed's fine-tuned bi-encoder (default: the settings').", flag_values=fv)
  flags.DEFINE_enum("rerank_mining", None, list(RERANK_MINING), "Where the reranker's hard negatives come from: "
                    "BM25's best wrong passages, or the bi-encoder's top rerank_depth (default: the settings').",
                    flag_values=fv)
  flags.DEFINE_enum("rerank_loss", None, list(RERANK_LOSSES), "The reranker's loss (default: the settings').",
                    flag_values=fv)
  flags.DEFINE_integer("rerank_hard_negatives", None, "Hard negatives per reranker group with "
                       "--rerank_mining=biencoder (the rest random; the BM25 groups are the data stage's).",
                       flag_values=fv)
  flags.DEFINE_float("rerank_learning_rate", None, "Override the reranker's learning rate.", flag_values=fv)
  flags.DEFINE_integer("rerank_cloze_queries", None, "Add up to N Inverse Cloze groups per training passage to the "
                       "reranker's (a sentence as the query, the passage without it as the positive).",
                       flag_values=fv)


def main(argv, fv: flags.FlagValues = flags.FLAGS) -> None:
  del argv
  if not fv.output_dir:
    raise ValueError("--output_dir is empty: name the folder the study writes to (e.g. out/retrieval_study).")
  settings = StudySettings.quick() if fv.quick else StudySettings.full()
  changes = {}
  if fv.seeds:
    changes["seeds"] = cli.number_list(fv, "seeds")
  if fv.seq_length:
    changes.update(seq_length=fv.seq_length, max_predictions_per_seq=math.ceil(0.15 * fv.seq_length))
  if fv.pretrain_steps:
    changes["pretrain_steps"] = fv.pretrain_steps
  if fv.embed_steps:
    changes["embed_steps"] = fv.embed_steps
  if fv.rerank_steps:
    changes["rerank_steps"] = fv.rerank_steps
  if fv.embed_hard_negatives:
    changes["embed_hard_negatives"] = True
  if fv.matryoshka_weights:
    changes["matryoshka_weights"] = cli.number_list(fv, "matryoshka_weights", float)
  for name in ("rerank_init", "rerank_mining", "rerank_loss", "rerank_hard_negatives", "rerank_learning_rate",
               "rerank_cloze_queries"):
    if getattr(fv, name) is not None:
      changes[name] = getattr(fv, name)
  run_study(fv.output_dir, dataclasses.replace(settings, **changes), fv.stage, fv.pretrained_dir)


def console_main() -> None:
  """The `albert-retrieval-study` console script (pyproject.toml)."""
  cli.launch(define_flags, main)


if __name__ == "__main__":
  console_main()
