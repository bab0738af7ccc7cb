"""The long-range task (issue 30 item 5) at the tests' size: documents, labels, the three runs. Never a timing."""

import csv
import functools
import json

import numpy as np
import pytest

from data_prep import corpus_tasks
from experiments.projects.long_inputs import study as long_range
from official_albert import AlbertConfig
from official_albert import AlbertPretrainer
from official_albert.checkpoints import native
from official_albert.tokenization import FullTokenizer


@pytest.fixture(scope="module")
def pools():
  return corpus_tasks.sentence_pools()


def test_documents_hold_one_key_sentence_anywhere(pools, spm_model_file):
  settings = long_range.LongRangeSettings.full()
  tokenizer = FullTokenizer(spm_model_file)
  documents = long_range.make_documents(tokenizer, settings, "dev", 40, pools)
  assert sorted(d["label"] for d in documents) == ["0"] * 20 + ["1"] * 20
  train_keys = set(pools["train"][0]) | set(pools["train"][1])
  filler = set(pools["filler"])
  for d in documents:
    assert settings.min_pieces <= d["pieces"] <= settings.max_pieces + 200
    keys = [s for s in pools["dev"][int(d["label"])] if s in d["text"]]
    assert keys and not any(s in d["text"] for s in pools["dev"][1 - int(d["label"])]), d["label"]
    assert not (set(keys) & train_keys) and not (set(keys) & filler)  # dev keys never seen in training
  offsets = np.array([d["key_offset"] / d["pieces"] for d in documents])
  assert offsets.min() < 0.25 and offsets.max() > 0.75  # anywhere, not at the start
  assert np.mean([d["key_offset"] < 512 for d in documents]) < 0.5  # truncation to 512 mostly misses it


@pytest.mark.large
@pytest.mark.slow
def test_quick_run_trains_the_three_variants(tmp_path, spm_model_file):
  pretrained = tmp_path / "pretrained"
  model = AlbertPretrainer(AlbertConfig(vocab_size=1000, embedding_size=8, hidden_size=16, num_hidden_layers=1,
                                        num_attention_heads=2, intermediate_size=32, max_position_embeddings=32))
  native.save_pretrained(model, str(pretrained))
  summary = long_range.run(str(pretrained), str(tmp_path / "out"), long_range.LongRangeSettings.quick(),
                           spm_model_file=spm_model_file, log=lambda *_: None)
  assert set(summary["runs"]) == {"block_sparse", "chunked", "truncated"}
  assert summary["runs"]["truncated"]["seq_length"] == 32 and summary["runs"]["chunked"]["seq_length"] == 256
  for run in summary["runs"].values():
    assert 0.0 <= run["dev_accuracy"] <= 1.0 and run["wall_s"] > 0
  rows = list(csv.DictReader(open(tmp_path / "out" / "data" / "train.csv", encoding="utf-8")))
  assert len(rows) == 16 and {r["label"] for r in rows} == {"0", "1"}


def test_the_flags_come_from_the_settings():
  """The binary's flags are made from LongRangeSettings' fields (experiments.study): unset, the size's values."""
  from absl import flags
  fv = flags.FlagValues()
  long_range.define_flags(fv)
  fv(["long_range", "--pretrained_dir=m"])
  assert long_range.study.settings_from_flags(long_range.LongRangeSettings, fv, long_range.FLAG_FIELDS) == \
      long_range.LongRangeSettings.full()
  fv = flags.FlagValues()
  long_range.define_flags(fv)
  fv(["long_range", "--pretrained_dir=m", "--quick", "--keys=marked", "--attention_types=truncated",
      "--num_train=8", "--train_steps=3"])
  assert long_range.study.settings_from_flags(long_range.LongRangeSettings, fv, long_range.FLAG_FIELDS) == \
      long_range.LongRangeSettings.quick().replace(keys="marked", attention_types=("truncated",), num_train=8,
                                                   train_steps=3)


def test_a_rerun_resumes_its_finished_stages(tmp_path, spm_model_file, monkeypatch):
  """The documents and each attention's run are named stages: a rerun of the same settings trains nothing again,
  and summary.json holds each run's dev accuracy."""
  calls = []

  def fake_finetune(name, *args):
    calls.append(name)
    return {"seq_length": 1, "dev_accuracy": 0.5 + len(calls) / 100, "wall_s": 1.0}

  monkeypatch.setattr(long_range, "finetune", fake_finetune)
  settings = long_range.LongRangeSettings.quick().replace(attention_types=("chunked", "truncated"))
  pretrained = tmp_path / "pretrained"
  pretrained.mkdir()
  (pretrained / "weights").write_text("v1")
  out = str(tmp_path / "out")
  first = long_range.run(str(pretrained), out, settings, spm_model_file=spm_model_file, log=lambda *_: None)
  again = long_range.run(str(pretrained), out, settings, spm_model_file=spm_model_file, log=lambda *_: None)
  assert calls == ["chunked", "truncated"] and again == first
  summary = json.loads((tmp_path / "out" / "summary.json").read_text())
  assert summary["summary"]["truncated"]["dev_accuracy"] == {"mean": 0.52, "std": 0.0, "n": 1}
  long_range.run(str(pretrained), out, settings.replace(train_steps=3), spm_model_file=spm_model_file,
                 log=lambda *_: None)
  assert calls == ["chunked", "truncated"] * 2  # other settings: run again
  (pretrained / "weights").write_text("v2, trained again")  # the same folder, another model: run again
  long_range.run(str(pretrained), out, settings.replace(train_steps=3), spm_model_file=spm_model_file,
                 log=lambda *_: None)
  assert calls == ["chunked", "truncated"] * 3


def test_the_documents_follow_the_models_casing_and_an_earlier_calls_runs_stay(tmp_path, spm_model_file, monkeypatch):
  """Review s56: the documents were sized with a lower-casing tokenizer whatever the model's casing (a cased model's
  long documents went past seq_length, their key cut away), and a call for one attention type rewrote the summary
  with its run alone."""
  monkeypatch.setattr(long_range, "finetune", lambda name, *args: {"dev_accuracy": 0.5, "wall_s": 1.0})
  lowered = []
  make_documents = long_range.make_documents
  monkeypatch.setattr(long_range, "make_documents",
                      lambda tokenizer, *args: lowered.append(tokenizer.do_lower_case) or make_documents(tokenizer,
                                                                                                           *args))
  pretrained = tmp_path / "cased"
  pretrained.mkdir()
  (pretrained / "tokenizer_config.json").write_text('{"do_lower_case": false}')
  settings = long_range.LongRangeSettings.quick()
  run = functools.partial(long_range.run, str(pretrained), str(tmp_path / "out"), spm_model_file=spm_model_file,
                          log=lambda *_: None)
  run(settings.replace(attention_types=("block_sparse",)))
  assert lowered == [False, False]  # (train and dev)
  summary = run(settings.replace(attention_types=("truncated",)))
  assert set(summary["runs"]) == {"block_sparse", "truncated"}
  assert set(json.loads((tmp_path / "out" / "summary.json").read_text())["summary"]) == {"block_sparse", "truncated"}


def test_document_lengths_that_cannot_be_drawn_or_do_not_fit_are_refused():
  settings = long_range.LongRangeSettings.quick()
  with pytest.raises(ValueError, match="min_pieces=300 is above max_pieces=240"):
    settings.replace(min_pieces=300)
  with pytest.raises(ValueError, match=r"max_pieces=300: .* seq_length=256 .*--max_pieces <= 254"):
    settings.replace(max_pieces=300)


def _fake_training(monkeypatch, calls, evaluates=True):
  """finetune with the conversion and the trainer stubbed: the trainer records whether its model folder held an
  earlier run's checkpoint (it would resume it) and leaves one behind."""
  import os

  from official_albert import model_directory as md
  from official_albert.checkpoints import convert as convert_lib

  def convert(src_format, src, dst_format, dst, **_):
    os.makedirs(dst, exist_ok=True)
    AlbertConfig(vocab_size=1000, embedding_size=8, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                 intermediate_size=32).to_json_file(md.path(dst, md.CONFIG_FILE))

  def run(experiment, mode, model_dir, params_override):
    steps = json.loads(params_override)["trainer"]["train_steps"]
    resumed = os.path.exists(os.path.join(model_dir, "ckpt"))
    calls.append((model_dir.split(os.sep)[-2], resumed))
    os.makedirs(model_dir, exist_ok=True)
    open(os.path.join(model_dir, "ckpt"), "w").close()
    history = [(steps, {"eval_accuracy": 0.6})] if evaluates else []
    return {"global_step": steps, "eval_history": history, "eval_results": {}}

  monkeypatch.setattr(convert_lib, "convert", convert)
  monkeypatch.setattr(long_range.train, "run", run)


def test_a_run_under_new_settings_starts_from_the_pretrained_model(tmp_path, spm_model_file, monkeypatch):
  """Audit F3: a stage rerun under a new key resumed the old `<out>/<name>/model` (IndexError on an empty history,
  or the old model continued and reported as the new run); adding an attention type re-keyed the finished runs."""
  calls = []
  _fake_training(monkeypatch, calls)
  settings = long_range.LongRangeSettings.quick().replace(attention_types=("truncated",))
  run = functools.partial(long_range.run, "pretrained", str(tmp_path), spm_model_file=spm_model_file,
                          log=lambda *_: None)
  run(settings)
  assert calls == [("truncated", False)]
  run(settings.replace(learning_rate=0.5))  # another run key: a fresh run, not the old checkpoint resumed
  assert calls[-1] == ("truncated", False) and len(calls) == 2
  summary = run(settings.replace(learning_rate=0.5, attention_types=("truncated", "chunked")))
  assert calls[2:] == [("chunked", False)]  # the finished truncated run is kept
  assert set(summary["runs"]) == {"truncated", "chunked"}


def test_a_run_that_evaluates_nothing_says_so(tmp_path, monkeypatch):
  calls = []
  _fake_training(monkeypatch, calls, evaluates=False)
  settings = long_range.LongRangeSettings.quick()
  with pytest.raises(RuntimeError, match="evaluated nothing.*delete"):
    long_range.finetune("truncated", "pretrained", str(tmp_path / "data"), "spm", str(tmp_path), settings, "key")
