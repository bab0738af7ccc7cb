"""The long-range task (issue 30 item 5) at the tests' size: documents, labels, the three runs. Never a timing."""

import csv
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
  first = long_range.run("pretrained", str(tmp_path), settings, spm_model_file=spm_model_file, log=lambda *_: None)
  again = long_range.run("pretrained", str(tmp_path), settings, spm_model_file=spm_model_file, log=lambda *_: None)
  assert calls == ["chunked", "truncated"] and again == first
  summary = json.loads((tmp_path / "summary.json").read_text())
  assert summary["summary"]["truncated"]["dev_accuracy"] == {"mean": 0.52, "std": 0.0, "n": 1}
  long_range.run("pretrained", str(tmp_path), settings.replace(train_steps=3), spm_model_file=spm_model_file,
                 log=lambda *_: None)
  assert calls == ["chunked", "truncated", "chunked", "truncated"]  # other settings: run again
