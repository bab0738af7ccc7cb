"""experiments/projects/retrieval/study.py: the README's `--quick` command end to end, and its summary checked against
metrics recomputed here from the rankings it saved; each stage's output refused under other settings (recipes.py)."""

import csv
import dataclasses
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from experiments.projects.retrieval import rankers
from experiments.projects.retrieval import report
from experiments.projects.retrieval import study

SEEDS = (1, 2)


def _by_hand(rankings, k=10):
  """recall@10, nDCG@10, MRR@10 and MAP@100 when query i's one relevant passage is passage i (the study's held-out
  pairs): with one relevant passage, AP@100 is 1 / its rank when it is in the top 100, else 0."""
  recall, ndcg, mrr, average_precision = [], [], [], []
  for i, ranking in enumerate(rankings):
    rank = list(ranking[:k]).index(i) if i in ranking[:k] else None
    recall.append(0.0 if rank is None else 1.0)
    ndcg.append(0.0 if rank is None else 1.0 / np.log2(rank + 2))
    mrr.append(0.0 if rank is None else 1.0 / (rank + 1))
    average_precision.append(1.0 / (list(ranking[:100]).index(i) + 1) if i in ranking[:100] else 0.0)
  return {"recall@10": np.mean(recall), "ndcg@10": np.mean(ndcg), "mrr@10": np.mean(mrr),
          "map@100": np.mean(average_precision)}


def test_ranking_metrics_of_lists_are_the_hand_computed_ones():
  rankings = [[2, 0, 1], [1, 2, 0], [0, 1, 2], [3, 2, 1]]  # query 3's passage is first; query 2's is last
  got = rankers.ranking_metrics(rankings, [[0], [1], [2], [3]], corpus_size=4)
  for key, value in _by_hand(rankings).items():
    assert got[key] == pytest.approx(value, abs=1e-12), key


@pytest.mark.large
def test_quick_study_summary_equals_metrics_recomputed_from_its_rankings(tmp_path):
  out = tmp_path / "study"
  subprocess.run([sys.executable, "-m", "experiments.projects.retrieval.study", "--quick",
                  f"--seeds={','.join(map(str, SEEDS))}", f"--output_dir={out}"], check=True, timeout=1500,
                 env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
  summary = json.loads((out / "summary.json").read_text())
  queries = [json.loads(line) for line in (out / "pairs" / "heldout.jsonl").read_text().splitlines()]
  assert summary["heldout_queries"] == len(queries) > 0
  with open(out / "pairs" / "train.csv", newline="") as f:
    train = list(csv.DictReader(f))
  assert not {q["query"] for q in queries} & {row["anchor"] for row in train}
  assert not {q["passage"] for q in queries} & {row["positive"] for row in train}

  depth = min(rankers.RANKING_DEPTH, len(queries) + len(train))  # the corpus: held-out and training passages
  rankings = {}
  for name, _ in report.METHODS:
    entry = summary["methods"][name]
    runs = [name] if name in ("mlm_mean", "bm25") else [f"{name}_s{s}" for s in SEEDS]
    values = {m: [] for m in report.METRICS}
    for run in runs:
      saved = json.loads((out / "rankings" / f"{run}.json").read_text())
      rankings[run] = saved["rankings"]
      assert len(saved["rankings"]) == len(queries)
      assert all(len(r) == depth and len(set(r)) == depth for r in saved["rankings"])
      for metric, value in _by_hand(saved["rankings"]).items():
        assert saved["metrics"][metric] == pytest.approx(value, abs=1e-12), (run, metric)
        if run != name:
          assert entry["per_seed"][run.rsplit("_s", 1)[1]][metric] == pytest.approx(value, abs=1e-12)
        values[metric].append(value)
    for metric in report.METRICS:
      assert entry[metric]["n"] == len(runs)
      assert entry[metric]["mean"] == pytest.approx(np.mean(values[metric]), abs=1e-12)
      assert entry[metric]["std"] == pytest.approx(np.std(values[metric], ddof=1) if len(runs) > 1 else 0.0,
                                                   abs=1e-12)
  for seed in SEEDS:  # the reranker reorders the bi-encoder's top 20 and leaves the rest as it was
    first, reranked = rankings[f"biencoder_full_s{seed}"], rankings[f"biencoder_rerank_s{seed}"]
    top = study.StudySettings.quick().rerank_depth
    for a, b in zip(first, reranked):
      assert sorted(a[:top]) == sorted(b[:top]) and a[top:] == b[top:]

  recall = {name: summary["methods"][name]["recall@10"]["mean"] for name, _ in report.METHODS}
  bars = summary["bars"]
  assert bars[0]["value"] == pytest.approx(recall["biencoder_full"] - recall["mlm_mean"])
  assert bars[0]["met"] == (bars[0]["value"] >= report.MLM_MARGIN)
  assert bars[1]["value"] == pytest.approx(recall["biencoder_quarter"] / recall["biencoder_full"])
  for seed in SEEDS:  # the fusion reorders the same top 20 again
    assert rankings[f"biencoder_fused_s{seed}"] == rankers.rank_fusion(
        rankings[f"biencoder_full_s{seed}"], rankings[f"biencoder_rerank_s{seed}"], top)
  assert [type(b["met"]) for b in bars] == [bool, bool, bool, bool, type(None)]
  text = (out / "report.md").read_text()
  assert "| bi-encoder + reranker (top 20) |" in text and "rank fusion (RRF, top 20) |" in text
  assert summary["cpu"] in text


def test_rank_fusion_sums_reciprocal_ranks_over_the_top_and_keeps_the_rest():
  first = [[4, 1, 2, 0, 3, 5]]
  reranked = [[0, 2, 1, 4, 3, 5]]  # the top 5 reordered
  # 1/(k+r) summed: 4 and 0 → 1/61 + 1/64, 1 and 2 → 1/62 + 1/63 (ties keep the first stage's order), 3 → 2/65.
  assert rankers.rank_fusion(first, reranked, depth=5, k=60) == [[4, 0, 1, 2, 3, 5]]
  # k = 0 by hand: 2 → 1/3 + 1, 4 → 1 + 1/4, 1 → 1/2 + 1/3, 0 → 1/4 + 1/2, 3 → 2/5.
  assert rankers.rank_fusion(first, [[2, 0, 1, 4, 3, 5]], depth=5, k=0) == [[2, 4, 1, 0, 3, 5]]
  assert rankers.rank_fusion(first, first, depth=5) == first  # agreeing orders stay
  # The default k is the paper's 60 (mutation audit 24 F2: every other case gives k or keeps agreeing orders). By hand:
  # 0 → 1/61 + 1/64, 4 → 1/65 + 1/61, 3 → 1/64 + 1/62, 2 → 2/63, 1 → 1/62 + 1/65 (k = 1 puts 1 above 2 and 3 below 4).
  assert rankers.RRF_K == 60
  assert rankers.rank_fusion([[0, 1, 2, 3, 4]], [[4, 3, 2, 0, 1]], depth=5) == [[0, 4, 3, 2, 1]]
  with pytest.raises(ValueError, match="top 5"):
    rankers.rank_fusion(first, [[5, 2, 1, 4, 3, 0]], depth=5)


def test_a_reranker_made_by_another_recipe_is_not_reused(tmp_path):
  settings = study.StudySettings.quick()
  recipe = settings.rerank_recipe()
  path = str(tmp_path / "study_finetune.json")
  study.check_recipe(path, {"recipe": recipe}, recipe)
  study.check_recipe(path, {"steps": 600}, recipe)  # before recipes were recorded: pretrained, bm25, listwise
  other = dataclasses.replace(settings, rerank_init="embedder", rerank_learning_rate=1e-4)
  for recorded in ({"recipe": recipe}, {"steps": 600}):
    with pytest.raises(ValueError, match="rerank_init: 'pretrained' there, 'embedder' now.*another --output_dir"):
      study.check_recipe(path, recorded, other.rerank_recipe())
  with pytest.raises(ValueError, match="rerank_mining"):
    dataclasses.replace(settings, rerank_mining="bm26").validate()
  # A setting added to the recipe later: a recipe recorded before it was trained without it.
  before = {k: v for k, v in recipe.items() if k != "rerank_cloze_queries"}
  study.check_recipe(path, {"recipe": before}, recipe)
  with pytest.raises(ValueError, match="rerank_cloze_queries: 0 there, 2 now"):
    study.check_recipe(path, {"recipe": before}, dataclasses.replace(settings, rerank_cloze_queries=2).rerank_recipe())
  with pytest.raises(ValueError, match="Inverse Cloze"):
    dataclasses.replace(settings, rerank_cloze_queries=-1).validate()


def test_a_model_pretrained_for_other_steps_is_not_reused(tmp_path):
  (tmp_path / "pretrain.json").write_text(json.dumps({"steps": 2000}))
  settings = study.StudySettings.quick()
  with pytest.raises(ValueError, match="pretrained for 2000 steps, 40 are asked.*--pretrain_steps=2000"):
    study.stage_pretrain(str(tmp_path), settings, data={})
  assert study.stage_pretrain(str(tmp_path), dataclasses.replace(settings, pretrain_steps=2000), data={}) == str(
      tmp_path / "pretrained")


def test_flags_reach_the_settings(monkeypatch):
  from absl import flags
  seen = {}
  monkeypatch.setattr(study, "run_study", lambda out, settings, stage, pretrained: seen.update(settings=settings))
  fv = flags.FlagValues()
  study.define_flags(fv)
  fv(["study", "--output_dir=/tmp/x", "--seq_length=128", "--pretrain_steps=9000", "--rerank_cloze_queries=3"])
  study.main([], fv)
  settings = seen["settings"]
  assert (settings.seq_length, settings.max_predictions_per_seq) == (128, 20)  # 15% of the pieces, as at 64: 10
  assert (settings.pretrain_steps, settings.rerank_cloze_queries) == (9000, 3)
  assert settings.rerank_recipe()["rerank_cloze_queries"] == 3


def _finetune_inputs(tmp_path):
  """(a stand-in pretrained model directory, the data stage's files, quick settings with one seed, the study folder)
  for stage_finetune with `train.run` stubbed."""
  from official_albert import model_directory
  pretrained = tmp_path / "pretrained"
  pretrained.mkdir()
  (pretrained / model_directory.CONFIG_FILE).write_text(json.dumps({"hidden_size": 16, "intermediate_size": 32}))
  data = {"train_pairs_file": "train.csv", "rerank_train_file": "rerank.jsonl"}
  return pretrained, data, dataclasses.replace(study.StudySettings.quick(), seeds=(1,)), str(tmp_path / "out")


def test_an_embedder_made_by_another_recipe_is_not_reused(tmp_path, monkeypatch):
  """Audit F6: ft/embedder_s<k> and its rankings were reused under another embedder recipe (--embed_steps,
  --embed_hard_negatives, --matryoshka_weights, --seq_length) while summary.json recorded the new one."""
  from official_albert import train
  trained = []
  monkeypatch.setattr(train, "run", lambda experiment, mode, model_dir, params_override: trained.append(
      os.path.basename(model_dir)) or {"history": [(1, {"loss": 1.0})]})
  pretrained, data, settings, out = _finetune_inputs(tmp_path)
  study.stage_finetune(out, settings, data, str(pretrained))
  study.stage_finetune(out, settings, data, str(pretrained))  # the same recipe: reused
  assert trained == ["embedder_s1", "reranker_s1"]
  for changes, named in (({"embed_steps": 60}, "embed_steps: 30 there, 60 now"),
                         ({"embed_hard_negatives": True}, "embed_hard_negatives: False there, True now"),
                         ({"matryoshka_weights": (1.0, 0.5, 0.25)}, r"matryoshka_weights: \[\] there"),
                         ({"seq_length": 128}, "seq_length: 64 there, 128 now")):
    with pytest.raises(ValueError, match=f"embedder_s1.*another embedder recipe.*{named}.*ft/embedder_s"):
      study.stage_finetune(out, dataclasses.replace(settings, **changes), data, str(pretrained))
  assert len(trained) == 2
  # A reranker that starts from the embedder, and the reranker's rankings (over the bi-encoder's top), carry it too.
  recorded = {"recipe": settings.reranker_recipe(evaluated=True)}
  other = dataclasses.replace(settings, embed_steps=60)
  with pytest.raises(ValueError, match="another embedder recipe"):
    study.check_recipe("rankings/biencoder_rerank_s1.json", recorded, other.reranker_recipe(evaluated=True))
  study.check_recipe("ft/reranker_s1", recorded, other.reranker_recipe())  # starts from the pretrained model
  with pytest.raises(ValueError, match="another embedder recipe"):
    study.check_recipe("ft/reranker_s1", recorded, dataclasses.replace(other, rerank_init="embedder").reranker_recipe())
  # Made before the recipe was recorded: the measured run's embedder (600 steps, no hard negatives, 64 pieces).
  study.check_recipe("rankings/biencoder_full_s1.json", {"method": "x"}, study.StudySettings.full().embed_recipe())
  with pytest.raises(ValueError, match="embed_steps: 600 there, 30 now"):
    study.check_recipe("rankings/biencoder_full_s1.json", {"method": "x"}, settings.embed_recipe())
  old = tmp_path / "old" / "embedder_s1"  # an embedder marker from before: known by its steps
  old.mkdir(parents=True)
  (old / "study_finetune.json").write_text(json.dumps({"steps": 30, "wall_s": 1.0}))
  assert study._finetune("text_embedding", str(old), {}, 30, 2e-4, 1, "float32", settings.embed_recipe())["steps"] == 30
  with pytest.raises(ValueError, match="embed_steps: 30 there, 600 now"):
    study._finetune("text_embedding", str(old), {}, 600, 2e-4, 1, "float32", study.StudySettings.full().embed_recipe())


# Six training pairs and two held-out ones of distinct words: enough for BM25's negatives and the data stage's files.
_TRAIN_PAIRS = [(f"{w} summary line.", f"The {w} passage explains {w} and {v} at length.")
                for w, v in (("convolution", "filters"), ("pickle", "bytes"), ("radio", "button"),
                             ("socket", "network"), ("thread", "lock"), ("decimal", "rounding"))]
_HELDOUT_PAIRS = [("zipfile summary line.", "The zipfile passage explains archives."),
                  ("calendar summary line.", "The calendar passage explains months.")]


def _stage_data(out, settings, monkeypatch, made):
  """study.stage_data with the corpus, vocabulary and records step and the pair rules stubbed (`made` counts the
  calls): the pair files are written for real."""
  from experiments import study as study_kit
  from experiments.projects.retrieval import pairs as pairs_lib

  def make_pretraining_data(output_dir, settings):
    made.append(settings.seq_length)
    corpus = os.path.join(output_dir, "corpus")
    os.makedirs(corpus, exist_ok=True)
    for part in ("train", "heldout"):
      with open(os.path.join(corpus, f"{part}.txt"), "w") as f:
        f.write("a document\n")
    return {"train_text": os.path.join(corpus, "train.txt"), "heldout_text": os.path.join(corpus, "heldout.txt"),
            "spm_model": "spiece.model", "train_records": "train.tfrecord", "heldout_records": "heldout.tfrecord",
            "corpus": {"documents": 2}}

  monkeypatch.setattr(study_kit, "make_pretraining_data", make_pretraining_data)
  monkeypatch.setattr(pairs_lib, "build_pairs", lambda *args: {"train": _TRAIN_PAIRS, "heldout": _HELDOUT_PAIRS})
  return study.stage_data(str(out), settings)


def test_the_data_stage_is_not_reused_under_other_settings(tmp_path, monkeypatch):
  """Audit (fix_config 2): data.json was reused whatever the settings, so a rerun with another --seq_length read
  records of the old length (and pretrained a model on them)."""
  settings, made, out = study.StudySettings.quick(), [], tmp_path / "out"
  data = _stage_data(out, settings, monkeypatch, made)
  assert _stage_data(out, settings, monkeypatch, made) == data and made == [64]  # the same settings: reused
  longer = dataclasses.replace(settings, seq_length=128, max_predictions_per_seq=20)
  with pytest.raises(ValueError, match=r"data\.json: the data there was made with other settings \(seq_length: 64 "
                     r"there, 128 now, max_predictions_per_seq: 10 there, 20 now\); use another --output_dir, rerun "
                     r"with the settings it was made with \(--seq_length=64\), or remove data\.json.*pretrained/"):
    _stage_data(out, longer, monkeypatch, made)
  with pytest.raises(ValueError, match=r"vocab_size: 800 there, 4000 now.*\(--quick or not, as then\)"):
    _stage_data(out, dataclasses.replace(study.StudySettings.full(), packages=()), monkeypatch, made)
  assert made == [64]
  # A data.json from before the recipe was recorded: its records' layout, from their stats file.
  old = tmp_path / "old"
  (old / "data").mkdir(parents=True)
  (old / "data.json").write_text(json.dumps({k: v for k, v in data.items() if k not in ("recipe", "rerank_groups")}))
  assert _stage_data(old, longer, monkeypatch, made)["train_pairs"] == 6  # nothing known: not checked
  (old / "data" / "train.tfrecord.stats.json").write_text(json.dumps({"generation": {"options": {
      "max_seq_length": 64, "max_predictions_per_seq": 10}}}))
  _stage_data(old, settings, monkeypatch, made)
  with pytest.raises(ValueError, match=r"seq_length: 64 there, 128 now"):
    _stage_data(old, longer, monkeypatch, made)
  assert made == [64]


def test_the_pretrained_model_is_not_reused_under_other_settings(tmp_path, monkeypatch, spm_model_file):
  """Audit (fix_config 2): pretrain.json was checked on its steps only: another --seq_length (or --quick's corpus)
  reused a model whose position table was the old length."""
  from official_albert import model_directory
  from official_albert import train
  runs = []

  def run(experiment, mode, model_dir, params_override):
    runs.append(json.loads(params_override)["task"]["model"]["max_position_embeddings"])
    os.makedirs(model_dir, exist_ok=True)
    return {"eval_results": {}}

  monkeypatch.setattr(train, "run", run)
  settings, out = study.StudySettings.quick(), str(tmp_path / "out")
  data = {"spm_model": spm_model_file, "train_records": "t", "heldout_records": "h"}
  study.stage_pretrain(out, settings, data)
  assert study.stage_pretrain(out, settings, data) == os.path.join(out, "pretrained") and runs == [64]
  for changes, named in (({"seq_length": 128, "max_predictions_per_seq": 20}, "seq_length: 64 there, 128 now"),
                         ({"vocab_size": 4000}, "vocab_size: 800 there, 4000 now"),
                         ({"pretrain_learning_rate": 0.02}, "pretrain_learning_rate: 0.01 there, 0.02 now")):
    with pytest.raises(ValueError, match=f"pretrain.json: the pretrained model there was made with other settings "
                       f"\\({named}.*\\); use another --output_dir.*remove pretrain.json and pretrained/"):
      study.stage_pretrain(out, dataclasses.replace(settings, **changes), data)
  assert runs == [64]
  # A pretrain.json from before the recipe was recorded: the model's own position table tells its seq_length.
  old = tmp_path / "old"
  (old / "pretrained").mkdir(parents=True)
  (old / "pretrain.json").write_text(json.dumps({"steps": 40}))
  (old / "pretrained" / model_directory.CONFIG_FILE).write_text(json.dumps({"max_position_embeddings": 64}))
  study.stage_pretrain(str(old), settings, data)
  with pytest.raises(ValueError, match="seq_length: 64 there, 128 now"):
    study.stage_pretrain(str(old), dataclasses.replace(settings, seq_length=128), data)


def test_fine_tuned_models_and_rankings_are_keyed_on_the_pretrained_model_and_seq_length(tmp_path, monkeypatch):
  """Audit (fix_config 2): a rerun with --pretrained_dir reused models fine-tuned from another model (and the
  mlm_mean ranking of another model); a reranker from the pretrained model was reused at another --seq_length."""
  from official_albert import train
  monkeypatch.setattr(train, "run", lambda experiment, mode, model_dir, params_override: {"history": []})
  pretrained, data, settings, out = _finetune_inputs(tmp_path)
  study.stage_finetune(out, settings, data, str(pretrained))
  elsewhere = dataclasses.replace(settings, pretrained_dir="/models/other")
  with pytest.raises(ValueError, match=r"embedder_s1.*another pretrained model recipe \(pretrained_dir: '' there, "
                     r"'/models/other' now\); use another --output_dir, or remove the fine-tuned models"):
    study.stage_finetune(out, elsewhere, data, str(pretrained))  # (the settings name the model)
  with pytest.raises(ValueError, match="seq_length: 64 there, 128 now"):  # a reranker from the pretrained model
    study.check_recipe("ft/reranker_s1", {"recipe": settings.reranker_recipe()},
                       dataclasses.replace(settings, seq_length=128).reranker_recipe())
  os.makedirs(os.path.join(out, "rankings"))
  with open(os.path.join(out, "rankings", "mlm_mean.json"), "w") as f:
    json.dump({"rankings": [], "metrics": {}, "recipe": {"pretrained_dir": ""}}, f)
  heldout = tmp_path / "heldout.jsonl"
  heldout.write_text("".join(json.dumps({"query": q, "passage": p}) + "\n" for q, p in _HELDOUT_PAIRS))
  (tmp_path / "train.csv").write_text("anchor,positive,negative\n")
  with pytest.raises(ValueError, match=r"mlm_mean\.json.*pretrained_dir: '' there, '/models/other' now"):
    study.stage_evaluate(out, elsewhere, {"heldout_pairs_file": str(heldout),
                                          "train_pairs_file": str(tmp_path / "train.csv")}, "/models/other")


def test_bm25_reranker_groups_of_other_negatives_are_made_not_the_data_stages_reused(tmp_path, monkeypatch):
  """Audit (fix_config 2): with --rerank_hard_negatives=N and BM25 mining, the reranker trained on the data stage's
  groups of the old N while its recipe recorded the new one."""
  settings, out = study.StudySettings.quick(), tmp_path / "out"
  data = _stage_data(out, settings, monkeypatch, [])
  assert study.rerank_groups_file(str(out), settings, data, 1) == data["rerank_train_file"]
  harder = dataclasses.replace(settings, rerank_hard_negatives=2)
  path = study.rerank_groups_file(str(out), harder, data, 1)
  assert path == str(out / "pairs" / "rerank_train_bm25_n3h2.jsonl")
  with open(path) as f:
    groups = [json.loads(line) for line in f]
  with open(data["rerank_train_file"]) as f:
    first = [json.loads(line) for line in f]
  assert [g["query"] for g in groups] == [q for q, _ in _TRAIN_PAIRS]
  for new, old in zip(groups, first):  # BM25's best wrong passage stays first; the second is BM25's next, not random
    assert new["negatives"][0] == old["negatives"][0] and len(new["negatives"]) == 3
