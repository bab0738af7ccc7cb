"""The pretraining task records how its input was tokenized (journey 24, F1): a run on records made with
`--do_lower_case=false` writes `<model_dir>/tokenizer_config.json`, so fine-tuning, fill_mask and the exports from
that folder tokenize cased (`model_tokenizer_options`) instead of silently lower-casing; inputs made with mixed
settings are refused; records without a stats file change nothing (logged once) unless the run continues from
task.init_checkpoint (whose folder's record is kept); only a fresh run on the chief
writes the record. Likewise the SentencePiece model (audit 24, F11): inputs whose manifests / stats record two models'
SHA-256 are refused, as is a recorded model other than task.spm_model_file (the piece counts may agree).
"""

import glob
import json
import os
import shutil

import pytest
import tensorflow as tf

from data_prep import create_pretraining_data as cpd
from data_prep import pretraining_instances as pi
from data_prep import tokenize_corpus as tc
from official_albert import train
from official_albert.checkpoints.sentence_transformers_folder import model_tokenizer_options
from official_albert.training.hyperparams import ConfigError
from official_albert.training.trainer import Trainer
from official_albert.training.vocabulary import VocabularyError
from tasks import pretraining
from tests.data_prep.test_create_pretraining_data import corpus_docs
from tests.data_prep.test_create_pretraining_data import write_corpus

SEQ, PREDS = 32, 5
TINY = dict(vocab_size=1000, embedding_size=8, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
            intermediate_size=32, max_position_embeddings=SEQ, hidden_dropout_prob=0.0,
            attention_probs_dropout_prob=0.0)


def _records(root, spm_model_file, corpus, name, **kwargs):
  cpd.create_pretraining_data(cpd.GenerationConfig(
      input_file=corpus, output_file=str(root / name), spm_model_file=spm_model_file, dupe_factor=1, progress=False,
      options=pi.InstanceOptions(max_seq_length=SEQ, max_predictions_per_seq=PREDS), **kwargs))
  return str(root / name)


@pytest.fixture(scope="module")
def inputs(tmp_path_factory, spm_model_file):
  """Records of one corpus made cased (one file, and 2 shards `<prefix>-NNNNN-of-00002`) and uncased, and the corpus
  tokenized cased for the dynamic path."""
  root = tmp_path_factory.mktemp("casing")
  corpus = write_corpus(root / "c.txt", corpus_docs(20, seed=5))
  tc.tokenize_corpus(tc.TokenizeConfig(input_file=corpus, spm_model_file=spm_model_file, output_dir=str(root / "tok"),
                                       do_lower_case=False, progress=False))
  return {"cased": _records(root, spm_model_file, corpus, "cased", do_lower_case=False),
          "sharded": _records(root, spm_model_file, corpus, "sharded", do_lower_case=False, num_output_shards=2),
          "uncased": _records(root, spm_model_file, corpus, "uncased"),
          "tokens": str(root / "tok" / "tokens-*"), "root": root}


def _trainer(model_dir, input_path, dynamic=False, input_resume="auto", **task):
  data = {"input_path": input_path, "global_batch_size": 4, "seq_length": SEQ, "max_predictions_per_seq": PREDS,
          "dynamic_masking": dynamic}
  override = {"task": dict({"model": dict(TINY, preset=""), "train_data": data}, **task),
              "trainer": {"train_steps": 1, "steps_per_loop": 1, "checkpoint_interval": 1},
              "runtime": {"distribution_strategy": "one_device", "seed": 3, "input_resume": input_resume}}
  params = train.build_params("albert_tiny_pretrain", params_override=json.dumps(override))
  return Trainer(params, str(model_dir))


def _recorded(model_dir):
  path = os.path.join(model_dir, "tokenizer_config.json")
  return json.load(open(path)) if os.path.exists(path) else None


@pytest.mark.parametrize("which", ["cased", "sharded", "tokens"])
def test_a_fresh_run_records_the_casing_its_records_were_made_with(inputs, tmp_path, which):
  """Fine-tuning from the pretraining folder (a new model_dir, task.init_checkpoint=that folder) then tokenizes cased,
  as `tasks.text` reads it (`model_tokenizer_options`)."""
  pattern = inputs[which] + ("-*" if which == "sharded" else "")
  _trainer(tmp_path / "pre", pattern, dynamic=which == "tokens").initialize_or_resume()
  assert _recorded(tmp_path / "pre") == {"do_lower_case": False, "keep_accents": False, "remove_space": True}
  assert model_tokenizer_options(str(tmp_path / "ft"), None, str(tmp_path / "pre"))["do_lower_case"] is False


def test_the_record_reads_the_training_input_only(inputs, tmp_path):
  """A `--mode=train` run's validation files may not exist yet, or be made otherwise: the run never reads them (it
  stopped at start with 'No input files match' when the record listed them)."""
  validation = {"input_path": str(tmp_path / "not-made-yet-*"), "global_batch_size": 4, "seq_length": SEQ,
                "max_predictions_per_seq": PREDS}
  _trainer(tmp_path / "pre", inputs["cased"], validation_data=validation).initialize_or_resume()
  assert _recorded(tmp_path / "pre")["do_lower_case"] is False


def test_inputs_made_with_two_casings_are_refused_naming_both(inputs, tmp_path):
  with pytest.raises(ConfigError, match=r"cased\.stats\.json records do_lower_case=False but .*uncased\.stats\.json "
                                        r"\(for .*uncased\) records do_lower_case=True"):
    _trainer(tmp_path / "pre", f"{inputs['cased']},{inputs['uncased']}").initialize_or_resume()
  assert _recorded(tmp_path / "pre") is None


def test_records_without_stats_record_nothing_and_say_so_once(inputs, tmp_path, caplog):
  """Records made by another tool (no stats file): today's behaviour (no record, ALBERT's uncased default)."""
  own = tmp_path / "own.tf_record"
  own.write_bytes(open(inputs["cased"], "rb").read())
  caplog.set_level("INFO", logger="tasks.pretraining")
  _trainer(tmp_path / "pre", str(own)).initialize_or_resume()
  assert _recorded(tmp_path / "pre") is None
  assert sum("has no stats file recording its tokenizer settings" in r.getMessage() for r in caplog.records) == 1


def test_continued_pretraining_on_records_without_stats_keeps_the_models_casing(inputs, tmp_path):
  """Before: a cased model pretrained further on records another tool made (no stats) recorded nothing, so
  fine-tuning from the new folder lower-cased it; now the folder records task.init_checkpoint's folder's settings."""
  first = _trainer(tmp_path / "pre", inputs["cased"])
  first.initialize_or_resume()
  first.train()
  own = tmp_path / "own.tf_record"
  own.write_bytes(open(inputs["cased"], "rb").read())
  checkpoint = tf.train.latest_checkpoint(str(tmp_path / "pre"))
  _trainer(tmp_path / "more", str(own), init_checkpoint=checkpoint).initialize_or_resume()
  assert _recorded(tmp_path / "more") == {"do_lower_case": False, "keep_accents": False, "remove_space": True}
  assert model_tokenizer_options(str(tmp_path / "ft"), None, str(tmp_path / "more"))["do_lower_case"] is False


def test_only_a_fresh_run_on_the_chief_writes_the_record(inputs, tmp_path):
  task = _trainer(tmp_path / "pre", inputs["cased"]).task
  task.logging_dir = None  # what the trainer gives every worker but the chief
  task.save_assets()
  assert not os.path.exists(tmp_path / "pre")
  first = _trainer(tmp_path / "run", inputs["cased"])
  first.initialize_or_resume()
  first.train()
  # Resumed over other files (skip: an iterator position fits its own file list only): the record of the data it
  # was trained on stays.
  again = _trainer(tmp_path / "run", inputs["uncased"], input_resume="skip")
  assert again.initialize_or_resume()
  assert _recorded(tmp_path / "run")["do_lower_case"] is False
  assert pretraining.records_tokenizer_options([inputs["uncased"]]) == ({"do_lower_case": True,
                                                                          "tokenizer_mode": "hf"}, [])


OTHER_SPM = "b" * 64  # what a SentencePiece model of the same size but other pieces records


def _copy_recording(sources, folder, sha):
  """Copies of input files and their manifests / stats into `folder`, recording `sha` as their SentencePiece model's
  SHA-256 (None: no record, as an older tool wrote)."""
  folder.mkdir()
  for source in sources:
    for path in (source, source + ".manifest.json", source + ".stats.json"):
      if not os.path.exists(path):
        continue
      shutil.copy(path, folder)
      if path != source:
        with open(path) as f:
          meta = json.load(f)
        section = meta["generation"] if path.endswith(".stats.json") else meta
        section.pop("spm_model_sha256", None)
        if sha:
          section["spm_model_sha256"] = sha
        with open(folder / os.path.basename(path), "w") as f:
          json.dump(meta, f)
  stats = os.path.join(os.path.dirname(sources[0]), "tokens.stats.json")  # a finished tokenize_corpus folder
  if os.path.exists(stats):
    shutil.copy(stats, folder)
  return str(folder / os.path.basename(sources[0]))


def _build(tmp_path, input_path, **task):
  trainer = _trainer(tmp_path / "pre", input_path, dynamic="tokens-" in input_path, **task)
  return trainer.task.build_inputs(trainer.task.params.train_data)


def test_token_shards_of_two_sentencepiece_models_are_refused_naming_one_of_each(inputs, tmp_path, spm_model_file):
  """The shards' vocabulary facts agree (same size), so only the recorded SHA-256 tells the models apart; a mixed set
  was taken for shards of an older tool and passed the piece-count check."""
  shards = [p for p in sorted(glob.glob(inputs["tokens"])) if not p.endswith(".json")]
  ours = _copy_recording(shards, tmp_path / "ours", None)  # an older tokenize_corpus: no record
  other = _copy_recording(shards, tmp_path / "other", OTHER_SPM)
  with pytest.raises(VocabularyError, match=rf"two SentencePiece models: .*tokens-000000 with SHA-256 [0-9a-f]{{64}} "
                                            rf"but .*other/tokens-000000 with {OTHER_SPM}"):
    _build(tmp_path, f"{inputs['tokens']},{other}")
  with pytest.raises(VocabularyError, match=rf"other/tokens-000000 was made with another SentencePiece model .*"
                                            rf"task\.spm_model_file={spm_model_file}"):
    _build(tmp_path, f"{ours},{other}", spm_model_file=spm_model_file)
  _build(tmp_path, inputs["tokens"], spm_model_file=spm_model_file)  # its own model: accepted


def test_records_of_two_sentencepiece_models_are_refused_by_their_stats(inputs, tmp_path, spm_model_file):
  """create_pretraining_data's stats record the model's SHA-256 (`generation.spm_model_sha256`); records whose stats
  record none (older runs) are not checked, as before."""
  other = _copy_recording([inputs["cased"]], tmp_path / "other", OTHER_SPM)
  with pytest.raises(VocabularyError, match=rf"two SentencePiece models: .*cased with SHA-256 [0-9a-f]{{64}} but "
                                            rf".*other/cased with {OTHER_SPM}"):
    _build(tmp_path, f"{inputs['cased']},{other}")
  with pytest.raises(VocabularyError, match=rf"other/cased was made with another SentencePiece model \(SHA-256 "
                                            rf"{OTHER_SPM[:12]}…\) than task\.spm_model_file={spm_model_file}"):
    _build(tmp_path, other, spm_model_file=spm_model_file)
  _build(tmp_path, inputs["cased"], spm_model_file=spm_model_file)
  _build(tmp_path, _copy_recording([inputs["cased"]], tmp_path / "older", None), spm_model_file=spm_model_file)
