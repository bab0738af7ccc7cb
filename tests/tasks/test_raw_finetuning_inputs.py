"""GLUE / SQuAD / RACE straight from raw files (issue 16, deliver 2): `input_path` names the GLUE folder or TSV, the
SQuAD JSON or the RACE folder; the records are built with create_finetuning_data's code, cached and reused.

Tiny model, 2 steps: the point is the path (raw data → cached records → train / eval / predict files), the cache
(reused, rebuilt when a setting or an input changes) and equality with the explicit tool's output, not accuracy.
"""

import json
import logging
import os
import shutil

import pytest

from data_prep import create_finetuning_data as cfd
from official_albert import model_directory
from official_albert import train
from official_albert.checkpoints.sentence_transformers_folder import read_tokenizer_options
from official_albert.checkpoints.sentence_transformers_folder import write_tokenizer_options
from official_albert.training import train_lib
from official_albert.training.experiment_config import DataConfig
from tasks import glue
from tasks import race
from tasks import raw_inputs
from tasks import squad

TINY_MODEL = {"preset": "", "vocab_size": 1000, "embedding_size": 16, "hidden_size": 32, "num_hidden_layers": 1,
              "num_attention_heads": 2, "intermediate_size": 64, "max_position_embeddings": 64,
              "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0}
SEQ = 48
SENTENCES = [("a good and fine film", "1"), ("an awful mess", "0"), ("lovely , warm story", "1"),
             ("boring , cold plot", "0"), ("the best movie ever", "1"), ("the worst movie ever", "0")]


def _data(path, batch=4, training=False, seq=SEQ):
  return {"input_path": str(path), "global_batch_size": batch, "seq_length": seq, "is_training": training,
          "drop_remainder": training, "seed": 1}


def _override(task, steps=2):
  return json.dumps({"task": dict({"model": TINY_MODEL}, **task),
                     "trainer": {"train_steps": steps, "steps_per_loop": steps, "checkpoint_interval": steps,
                                 "validation_interval": steps, "summary_interval": steps, "validation_steps": -1,
                                 "warmup_steps": 0, "learning_rate": 1e-3, "optimizer": "adamw"},
                     "runtime": {"distribution_strategy": "one_device", "seed": 3}})


# ------------------------------------------------------------------------------------------------- fixtures
def _glue_dir(root):
  folder = root / "glue" / "SST-2"
  folder.mkdir(parents=True)
  rows = "".join(f"{t}\t{y}\n" for t, y in SENTENCES)
  (folder / "train.tsv").write_text("sentence\tlabel\n" + rows)
  (folder / "dev.tsv").write_text("sentence\tlabel\n" + rows)
  (folder / "test.tsv").write_text("index\tsentence\n" + "".join(f"{10 + i}\t{t}\n" for i, (t, _) in
                                                                  enumerate(SENTENCES[:4])))
  return root / "glue"


def _squad_file(path):
  paragraphs = []
  for i, (subject, place) in enumerate([("The module", "the library"), ("A function", "the file"),
                                        ("The class", "the package")]):
    context = f"{subject} number {i} is defined in {place} and returns a list of strings for the user ."
    qas = [{"id": f"q{i}a", "question": f"Where is {subject.lower()} number {i} defined ?", "is_impossible": False,
            "answers": [{"text": place, "answer_start": context.index(place)}]},
           {"id": f"q{i}b", "question": "What does it return ?", "is_impossible": False,
            "answers": [{"text": "a list of strings", "answer_start": context.index("a list of strings")}]}]
    paragraphs.append({"context": context, "qas": qas})
  path.write_text(json.dumps({"version": "1.1", "data": [{"title": "t", "paragraphs": paragraphs}]}))
  return path


def _race_dir(root):
  words = ["school", "war", "food", "sea"]
  for split in ("train", "dev", "test"):
    for level in race.LEVELS:
      d = root / "RACE" / split / level
      d.mkdir(parents=True)
      for i in range(2):
        a = (i + len(level)) % 4
        (d / f"{i}.txt").write_text(json.dumps({
            "article": f"Article {i} about {level} school life .", "id": f"{level}{i}.txt",
            "questions": ["The story is about _ .", "Which is true ?"],
            "options": [words[-a:] + words[:-a] if a else words, words],
            "answers": ["ABCD"[a], "A"]}))
  return root


def _records(folder):
  return sorted(n for n in os.listdir(folder) if n.endswith(".tf_record"))


# ------------------------------------------------------------------------------------------------- end to end
@pytest.mark.large
def test_glue_trains_evaluates_and_predicts_from_the_raw_folder(tmp_path, spm_model_file, caplog):
  data = _glue_dir(tmp_path)
  task = {"task_name": "sst-2", "spm_model_file": spm_model_file, "train_data": _data(data, 4, True),
          "validation_data": _data(data, 4), "predict_data": _data(data, 4)}
  model_dir = tmp_path / "m"
  with caplog.at_level(logging.INFO):
    result = train.run("glue/sst-2", "train_and_eval", str(model_dir), params_override=_override(task))
  assert result["global_step"] == 2 and result["eval_results"]["eval_steps"] == 2  # 6 dev rows, batch 4
  assert {"eval_accuracy", "eval_loss"} <= set(result["eval_results"])
  assert _records(model_dir / "records") == [n for n in _records(model_dir / "records") if n.startswith(
      ("glue_sst-2_train-", "glue_sst-2_dev-"))] and len(_records(model_dir / "records")) == 2
  assert "records (max_seq_length 48)" in caplog.text and "glue/sst-2 train: 6 records" in caplog.text  # progress
  # The train binary put the SentencePiece model beside the checkpoints (no `cp ... spiece.model` step).
  assert (model_dir / "spiece.model").read_bytes() == open(spm_model_file, "rb").read()
  # predict: the folder's test.tsv, submission ids from its index column; needs no training data.
  task_predict = dict(task, train_data=_data(tmp_path / "nowhere", 4, True), validation_data=_data("", 4))
  caplog.clear()
  with caplog.at_level(logging.INFO):
    out = train.run("glue/sst-2", "predict", str(model_dir), params_override=_override(task_predict))
  lines = open(out["files"]["submission"]).read().splitlines()
  assert lines[0] == "index\tprediction" and [x.split("\t")[0] for x in lines[1:]] == ["10", "11", "12", "13"]
  assert "no cached records for these settings" in caplog.text and "glue_sst-2_test-" in caplog.text
  # A second evaluation reuses the cached dev records and says so.
  caplog.clear()
  with caplog.at_level(logging.INFO):
    train.run("glue/sst-2", "eval", str(model_dir), params_override=_override(task))
  assert "reusing cached records" in caplog.text and len(_records(model_dir / "records")) == 3


@pytest.mark.large
def test_squad_trains_evaluates_and_predicts_from_the_raw_json(tmp_path, spm_model_file):
  data = _squad_file(tmp_path / "tiny-v1.1.json")
  task = {"version_2_with_negative": False, "doc_stride": 16, "max_query_length": 16,
          "spm_model_file": spm_model_file, "train_data": _data(data, 4, True), "validation_data": _data(data, 8),
          "predict_data": _data(data, 8)}
  model_dir = tmp_path / "m"
  result = train.run("squad_v1", "train_and_eval", str(model_dir), params_override=_override(task))
  assert {"exact_match", "f1"} <= set(result["eval_results"])
  qids = {f"q{i}{x}" for i in range(3) for x in "ab"}
  assert set(json.load(open(model_dir / "predictions.json"))) == qids  # eval mapped back to the JSON's questions
  out = train.run("squad_v1", "predict", str(model_dir), params_override=_override(task))
  assert set(json.load(open(out["files"]["predictions"]))) == qids
  names = _records(model_dir / "records")
  assert len(names) == 2 and names[0].startswith("squad_v1_dev-") and names[1].startswith("squad_v1_train-")


@pytest.mark.large
def test_race_trains_evaluates_and_predicts_from_the_raw_folder(tmp_path, spm_model_file):
  data = _race_dir(tmp_path / "data")
  task = {"spm_model_file": spm_model_file, "max_qa_length": 16, "train_data": _data(data, 4, True, seq=32),
          "validation_data": _data(data, 4, seq=32), "predict_data": _data(data / "RACE" / "test", 4, seq=32)}
  model_dir = tmp_path / "m"
  result = train.run("race", "train_and_eval", str(model_dir), params_override=_override(task))
  assert result["eval_results"]["num_middle"] == 4 and result["eval_results"]["num_high"] == 4
  out = train.run("race", "predict", str(model_dir), params_override=_override(task))
  preds = json.load(open(out["files"]["predictions"]))  # a split folder; ids from its files
  assert sorted(preds) == sorted(f"{lv}{i}.txt-{q}" for lv in race.LEVELS for i in range(2) for q in range(2))
  assert set(preds.values()) <= set("ABCD")


# ------------------------------------------------------------------------------------------------- cache
def _glue_task(data, tmp_path, spm_model_file, **extra):
  return glue.GlueTask(glue.GlueTaskConfig(task_name="sst-2", spm_model_file=spm_model_file,
                                           records_dir=str(tmp_path / "cache"), **extra))


def test_cache_is_reused_and_rebuilt_when_a_setting_or_an_input_changes(tmp_path, spm_model_file, caplog):
  data = _glue_dir(tmp_path)
  task = _glue_task(data, tmp_path, spm_model_file)
  train_config = DataConfig(input_path=str(data), seq_length=SEQ, is_training=True)
  first = task.raw_to_records(train_config).input_path
  caplog.clear()
  with caplog.at_level(logging.INFO):
    assert task.raw_to_records(train_config).input_path == first
  assert "reusing cached records" in caplog.text and "Building" not in caplog.text
  assert task.raw_to_records(train_config.replace(seq_length=SEQ + 8)).input_path != first  # seq length
  skip = _glue_task(data, tmp_path, spm_model_file, skip_bad_rows=True)  # a writer setting
  assert skip.raw_to_records(train_config).input_path != first
  lower = _glue_task(data, tmp_path, spm_model_file, do_lower_case=False)  # a tokenizer setting
  assert lower.raw_to_records(train_config).input_path != first
  tsv = data / "SST-2" / "train.tsv"
  tsv.write_text(tsv.read_text() + "one more good film\t1\n")  # an input file
  changed = task.raw_to_records(train_config).input_path
  assert changed != first and json.load(open(changed[:-len(".tf_record")] + ".meta.json"))["num_records"] == 7
  assert not [n for n in os.listdir(tmp_path / "cache") if ".tmp" in n]


def test_raw_glue_tokenizes_with_the_init_checkpoint_folders_options(tmp_path, spm_model_file, caplog):
  """A GLUE run from a folder a cased, accented model was converted into (tokenizer_config.json: do_lower_case
  false, keep_accents true) keeps its accents (they were stripped: the tokenizer took no options from the folder),
  keys the cache on them and records them in model_dir for the pipelines; task.do_lower_case, which these configs
  always hold (true by default, as create_finetuning_data's flag), stays the setting, and a contradicting one is
  logged naming the folder's file and the fix."""
  init = tmp_path / "cased"
  init.mkdir()
  shutil.copy(spm_model_file, init / "spiece.model")
  write_tokenizer_options(str(init), {"do_lower_case": False, "keep_accents": True})
  data = _glue_dir(tmp_path)
  train_config = DataConfig(input_path=str(data), seq_length=SEQ, is_training=True)
  plain = _glue_task(data, tmp_path, spm_model_file).raw_to_records(train_config).input_path
  model_dir = tmp_path / "m"
  task = glue.GlueTask(glue.GlueTaskConfig(task_name="sst-2", init_checkpoint=str(init), do_lower_case=False,
                                           records_dir=str(tmp_path / "cache")), logging_dir=str(model_dir))
  tokenizer = task.raw_tokenizer(str(data))
  assert (tokenizer.do_lower_case, tokenizer.keep_accents, tokenizer.remove_space) == (False, True, True)
  accented = task.raw_to_records(train_config).input_path
  assert accented != plain
  assert json.load(open(accented[:-len(".tf_record")] + ".meta.json"))["cache_key"]["keep_accents"] is True
  assert read_tokenizer_options(str(model_dir)) == {"do_lower_case": False, "keep_accents": True,
                                                    "remove_space": True}
  with caplog.at_level(logging.WARNING):
    lowered = glue.GlueTask(glue.GlueTaskConfig(task_name="sst-2", init_checkpoint=str(init),
                                                records_dir=str(tmp_path / "cache")), logging_dir=None)
    assert lowered.raw_tokenizer(str(data)).do_lower_case is True
  assert "task.do_lower_case=true, but " in caplog.text and "set task.do_lower_case=false" in caplog.text
  assert os.path.join(str(init), "tokenizer_config.json") in caplog.text


def _accented_glue_dir(root):
  folder = root / "glue" / "SST-2"
  folder.mkdir(parents=True)
  rows = "".join(f"{t}\t{y}\n" for t, y in [("Un café très bon", "1"), ("Über schlecht", "0")] * 2)
  for split in ("train", "dev"):
    (folder / f"{split}.tsv").write_text("sentence\tlabel\n" + rows)
  return root / "glue"


def test_a_model_dir_recording_only_params_do_lower_case_keeps_the_init_folders_accents(tmp_path, spm_model_file):
  """A GLUE / SQuAD / RACE model_dir trained from prebuilt records records do_lower_case only in params.yaml: a
  resumed or --mode=eval run there (role eval, no tokenizer_config.json written) tokenizes with the init folder's
  keep_accents, as training did (params.yaml counted as model_dir's whole record: keep_accents fell back to False)."""
  init = tmp_path / "cased"
  init.mkdir()
  shutil.copy(spm_model_file, init / "spiece.model")
  write_tokenizer_options(str(init), {"do_lower_case": False, "keep_accents": True})
  model_dir = tmp_path / "m"
  model_dir.mkdir()
  (model_dir / "params.yaml").write_text("task:\n  do_lower_case: false\n")
  data = _accented_glue_dir(tmp_path)
  task = glue.GlueTask(glue.GlueTaskConfig(task_name="sst-2", init_checkpoint=str(init), do_lower_case=False,
                                           records_dir=str(tmp_path / "cache")), logging_dir=str(model_dir))
  tokenizer = task.raw_tokenizer(str(data))
  assert (tokenizer.do_lower_case, tokenizer.keep_accents, tokenizer.remove_space) == (False, True, True)
  dev = task.raw_to_records(DataConfig(input_path=str(data), seq_length=SEQ), role="eval").input_path
  assert json.load(open(dev[:-len(".tf_record")] + ".meta.json"))["cache_key"]["keep_accents"] is True


def test_raw_records_of_an_accented_model_equal_create_finetuning_data_with_its_flags(tmp_path, spm_model_file):
  """The raw route from a cased, accented folder writes the bytes `create_finetuning_data --do_lower_case=false
  --keep_accents` writes, under the same cache key (the tool had no such flag: its records stripped accents)."""
  init = tmp_path / "cased"
  init.mkdir()
  shutil.copy(spm_model_file, init / "spiece.model")
  write_tokenizer_options(str(init), {"do_lower_case": False, "keep_accents": True})
  data = _accented_glue_dir(tmp_path)
  task = glue.GlueTask(glue.GlueTaskConfig(task_name="sst-2", init_checkpoint=str(init), do_lower_case=False,
                                           records_dir=str(tmp_path / "cache")))
  cached = task.raw_to_records(DataConfig(input_path=str(data), seq_length=SEQ, is_training=True)).input_path
  ref = cfd.create_finetuning_data("glue/sst-2", str(tmp_path / "ref"), spm_model_file, splits=["train"],
                                   input_dir=str(data), max_seq_length=SEQ, do_lower_case=False,
                                   keep_accents=True)["train"]
  assert _bytes(cached) == _bytes(ref["record_path"])
  assert json.load(open(cached[:-len(".tf_record")] + ".meta.json"))["cache_key"] == ref["cache_key"]
  plain = cfd.create_finetuning_data("glue/sst-2", str(tmp_path / "plain"), spm_model_file, splits=["train"],
                                     input_dir=str(data), max_seq_length=SEQ, do_lower_case=False)["train"]
  assert _bytes(plain["record_path"]) != _bytes(cached) and "keep_accents" not in plain["cache_key"]


def test_an_existing_path_whose_name_holds_brackets_is_raw_data_not_a_pattern(tmp_path, spm_model_file):
  """(Any `*?[` made the path a pattern: a `glue [v2]` folder or its .tsv was then taken for records.)"""
  data = _glue_dir(tmp_path / "glue [v2]")
  task = _glue_task(data, tmp_path, spm_model_file)
  for path in (data, data / "SST-2" / "train.tsv"):
    config = DataConfig(input_path=str(path), seq_length=SEQ, is_training=True)
    assert task.raw_to_records(config).input_path.endswith(".tf_record")
  assert raw_inputs.single_path(str(tmp_path / "missing [1].tsv")) is None  # a pattern, as before
  assert raw_inputs.single_path(f"{data}/SST-2/*.tsv") is None


def test_the_split_follows_the_role_the_caller_passes_not_the_path(tmp_path, spm_model_file):
  """One GLUE folder as the validation and the predict input: read as eval it is dev.tsv, as predict test.tsv."""
  data = _glue_dir(tmp_path)
  task = _glue_task(data, tmp_path, spm_model_file, validation_data=DataConfig(input_path=str(data)),
                    predict_data=DataConfig(input_path=str(data)))
  config = DataConfig(input_path=str(data), seq_length=SEQ, is_training=False)
  dev, test = (task.raw_to_records(config, role).input_path for role in ("eval", "predict"))
  assert os.path.basename(dev).startswith("glue_sst-2_dev-") and os.path.basename(test).startswith("glue_sst-2_test-")
  assert task.raw_to_records(config).input_path == dev  # no role: eval (train for a training config)
  with pytest.raises(ValueError, match="role='test' is not one of"):
    task.raw_to_records(config, "test")


def test_race_and_squad_settings_are_in_the_key(tmp_path, spm_model_file):
  data = _race_dir(tmp_path / "data")
  params = race.RaceTaskConfig(spm_model_file=spm_model_file, records_dir=str(tmp_path / "cache"), max_qa_length=8)
  config = DataConfig(input_path=str(data), seq_length=32, is_training=False)
  first = race.RaceTask(params).raw_to_records(config).input_path
  assert race.RaceTask(params.replace(max_qa_length=12)).raw_to_records(config).input_path != first
  assert race.RaceTask(params.replace(levels=["high"])).raw_to_records(config).input_path != first
  squad_json = str(_squad_file(tmp_path / "s.json"))
  sp = squad.SquadTaskConfig(spm_model_file=spm_model_file, records_dir=str(tmp_path / "cache"), doc_stride=16,
                             max_query_length=16)
  config = DataConfig(input_path=squad_json, seq_length=SEQ, is_training=True)
  first = squad.SquadTask(sp).raw_to_records(config).input_path
  for change in ({"doc_stride": 8}, {"max_query_length": 12}, {"squad_shuffle_seed": -1}):
    assert squad.SquadTask(sp.replace(**change)).raw_to_records(config).input_path != first, change


# ------------------------------------------------------------------------------------------------- equivalence
def _bytes(path):
  with open(path, "rb") as f:
    return f.read()


def test_cached_records_equal_create_finetuning_data_byte_for_byte(tmp_path, spm_model_file):
  glue_data, race_data = _glue_dir(tmp_path), _race_dir(tmp_path / "race")
  squad_json = str(_squad_file(tmp_path / "s.json"))
  cache = str(tmp_path / "cache")
  gp = glue.GlueTaskConfig(task_name="sst-2", spm_model_file=spm_model_file, records_dir=cache)
  for config, split in ((DataConfig(input_path=str(glue_data), seq_length=SEQ, is_training=True), "train"),
                        (DataConfig(input_path=str(glue_data / "SST-2" / "dev.tsv"), seq_length=SEQ,
                                    is_training=False), "dev")):
    cached = glue.GlueTask(gp).raw_to_records(config).input_path
    ref = cfd.create_finetuning_data("glue/sst-2", str(tmp_path / "ref"), spm_model_file, splits=[split],
                                     input_dir=str(glue_data), max_seq_length=SEQ)[split]["record_path"]
    assert _bytes(cached) == _bytes(ref), split
  sp = squad.SquadTaskConfig(spm_model_file=spm_model_file, records_dir=cache, doc_stride=16, max_query_length=16,
                             version_2_with_negative=True)
  for training, split in ((True, "train"), (False, "dev")):  # shuffled training features; evaluation features
    cached = squad.SquadTask(sp).raw_to_records(DataConfig(input_path=squad_json, seq_length=SEQ,
                                                            is_training=training)).input_path
    ref = cfd.create_finetuning_data("squad_v2", str(tmp_path / f"ref_{split}"), spm_model_file, splits=[split],
                                     input_file=squad_json, max_seq_length=SEQ, doc_stride=16,
                                     max_query_length=16)[split]["record_path"]
    assert _bytes(cached) == _bytes(ref), split
  rp = race.RaceTaskConfig(spm_model_file=spm_model_file, records_dir=cache, max_qa_length=16)
  cached = race.RaceTask(rp).raw_to_records(DataConfig(input_path=str(race_data), seq_length=32,
                                                       is_training=False)).input_path
  ref = cfd.create_finetuning_data("race", str(tmp_path / "ref_race"), spm_model_file, splits=["dev"],
                                   input_dir=str(race_data), max_seq_length=32, max_qa_length=16)["dev"]["record_path"]
  assert _bytes(cached) == _bytes(ref)


def test_raw_input_without_a_sentencepiece_model_is_a_named_error(tmp_path):
  data = _glue_dir(tmp_path)
  task = glue.GlueTask(glue.GlueTaskConfig(task_name="sst-2", records_dir=str(tmp_path / "cache")))
  with pytest.raises(ValueError, match=r"glue: tokenizing raw data needs a SentencePiece model: set "
                                       r"task\.spm_model_file \(or put spiece\.model in task\.init_checkpoint"):
    task.raw_to_records(DataConfig(input_path=str(data), seq_length=SEQ, is_training=True))
  # Records are read as before.
  records = DataConfig(input_path=str(tmp_path / "x.tf_record"), seq_length=SEQ, is_training=True)
  assert task.raw_to_records(records) is records


# ------------------------------------------------------------------------------------------------- spiece.model
def test_train_binary_copies_the_sentencepiece_model_when_absent_or_different(tmp_path, spm_model_file, caplog):
  params = train.build_params("glue/sst-2", params_override=_override({"spm_model_file": spm_model_file}))
  model_dir = tmp_path / "m"
  model_dir.mkdir()
  assert train_lib.save_spm_model(object(), params, str(model_dir)) == str(model_dir / "spiece.model")
  assert (model_dir / "spiece.model").read_bytes() == _bytes(spm_model_file)
  mtime = os.stat(model_dir / "spiece.model").st_mtime_ns
  assert train_lib.save_spm_model(object(), params, str(model_dir)) is None  # same bytes: left alone
  assert os.stat(model_dir / "spiece.model").st_mtime_ns == mtime
  (model_dir / "spiece.model").write_bytes(b"another model")
  with caplog.at_level(logging.WARNING):
    assert train_lib.save_spm_model(object(), params, str(model_dir)) is not None
  assert "differs from the SentencePiece model" in caplog.text
  assert (model_dir / "spiece.model").read_bytes() == _bytes(spm_model_file)
  # The task's own choice wins over the config (the text tasks and raw inputs resolve it from init_checkpoint too).
  task = glue.GlueTask(params.task.replace(spm_model_file=""), logging_dir=str(tmp_path / "other"))
  assert train_lib.save_spm_model(task, params, str(tmp_path / "other")) is None  # none configured or found
  pretrain = train.build_params("albert_tiny_pretrain", params_override=json.dumps(
      {"task": {"spm_model_file": spm_model_file}}))
  assert train_lib.save_spm_model(object(), pretrain, str(tmp_path / "pre")) == str(tmp_path / "pre" / "spiece.model")
  assert model_directory.resolve_spm_model("", str(tmp_path / "pre"), "") == str(tmp_path / "pre" / "spiece.model")
