"""The pretraining task records how its input was tokenized (journey 24, F1): a run on records made with
`--do_lower_case=false` writes `<model_dir>/tokenizer_config.json`, so fine-tuning, fill_mask and the exports from
that folder tokenize cased (`model_tokenizer_options`) instead of silently lower-casing; inputs made with mixed
settings are refused; records without a stats file change nothing (logged once); only a fresh run on the chief
writes the record.
"""

import json
import os

import pytest

from data_prep import create_pretraining_data as cpd
from data_prep import pretraining_instances as pi
from data_prep import tokenize_corpus as tc
from official_albert import train
from official_albert.checkpoints.sentence_transformers_folder import model_tokenizer_options
from official_albert.training.hyperparams import ConfigError
from official_albert.training.trainer import Trainer
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


def _trainer(model_dir, input_path, dynamic=False, **task):
  data = {"input_path": input_path, "global_batch_size": 4, "seq_length": SEQ, "max_predictions_per_seq": PREDS,
          "dynamic_masking": dynamic}
  override = {"task": dict({"model": dict(TINY, preset=""), "train_data": data}, **task),
              "trainer": {"train_steps": 1, "steps_per_loop": 1, "checkpoint_interval": 1},
              "runtime": {"distribution_strategy": "one_device", "seed": 3}}
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


def test_only_a_fresh_run_on_the_chief_writes_the_record(inputs, tmp_path):
  task = _trainer(tmp_path / "pre", inputs["cased"]).task
  task.logging_dir = None  # what the trainer gives every worker but the chief
  task.save_assets()
  assert not os.path.exists(tmp_path / "pre")
  first = _trainer(tmp_path / "run", inputs["cased"])
  first.initialize_or_resume()
  first.train()
  again = _trainer(tmp_path / "run", inputs["uncased"])  # resumed: the record of the data it was trained on stays
  assert again.initialize_or_resume()
  assert _recorded(tmp_path / "run")["do_lower_case"] is False
  assert pretraining.records_tokenizer_options([inputs["uncased"]]) == ({"do_lower_case": True,
                                                                          "tokenizer_mode": "hf"}, [])
