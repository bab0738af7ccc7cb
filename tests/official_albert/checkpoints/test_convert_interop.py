"""What an HF / TF1 / sentence-transformers model keeps through conversion: its problem type, its config's defaults,
its head dropout and token ids, its similarity function, and the summary's caveat on transformers' fast tokenizer."""

import json
import logging

import keras
import numpy as np
import pytest

from official_albert import AlbertConfig
from official_albert import model_directory as md
from official_albert.checkpoints import convert as convert_lib
from official_albert.checkpoints import loading
from official_albert.checkpoints.sentence_transformers_folder import PROMPTS_CONFIG
from official_albert.checkpoints.sentence_transformers_folder import read_embedding_settings
from tests import tiny
from tests.official_albert.oracle import hf_config
from tests.official_albert.oracle import make_hf_model
from tests.official_albert.oracle import save_hf
from tests.official_albert.oracle import torch
from tests.official_albert.oracle import transformers

SPM = "tests/fixtures/test_spm.model"


def _hf(directory, hf_class="AlbertForSequenceClassification", **fields):
  return save_hf(make_hf_model(hf_class, hf_config(**{**tiny.MODEL, **fields}), seed=5), directory)


def _config(directory):
  return json.loads((directory / md.CONFIG_FILE).read_text())


def test_one_output_multi_label_stays_multi_label_through_native(tmp_path):
  """A one-output sigmoid classifier is not a regression: transformers' pipeline must keep applying a sigmoid."""
  src = _hf(tmp_path / "hf", num_labels=1, id2label={0: "toxic"}, label2id={"toxic": 0},
            problem_type="multi_label_classification")
  convert_lib.convert("hf", src, "native", str(tmp_path / "native"))
  assert md.read_label_file(str(tmp_path / "native")).multi_label
  convert_lib.convert("native", str(tmp_path / "native"), "hf", str(tmp_path / "out"), model_type="classifier")
  assert _config(tmp_path / "out")["problem_type"] == "multi_label_classification"
  assert _config(tmp_path / "out")["id2label"] == {"0": "toxic"}
  # A one-output regression stays one.
  convert_lib.convert("hf", _hf(tmp_path / "reg", num_labels=1, problem_type="regression"), "hf",
                      str(tmp_path / "reg_out"))
  assert _config(tmp_path / "reg_out")["problem_type"] == "regression"


def test_multi_output_regression_is_refused_by_name(tmp_path):
  """Our classifier regresses one output: three regression outputs would come back as a softmax over 3 classes."""
  src = _hf(tmp_path / "hf", num_labels=3, problem_type="regression")
  for output_format in ("native", "hf"):
    with pytest.raises(ValueError, match=r"config\.json: problem_type='regression' with 3 outputs"):
      convert_lib.convert("hf", src, output_format, str(tmp_path / f"out_{output_format}"))
    assert not (tmp_path / f"out_{output_format}").exists()
  # Its encoder converts.
  convert_lib.convert("hf", src, "native", str(tmp_path / "encoder"), model_type="encoder")


def test_hf_config_without_head_count_is_transformers_64_heads(tmp_path):
  """A key missing from an HF config.json means transformers' default (64 heads), as transformers reads it."""
  fields = dict(tiny.MODEL, hidden_size=128, num_attention_heads=64)
  model = make_hf_model("AlbertModel", hf_config(**fields), seed=3)
  save_hf(model, tmp_path)
  data = _config(tmp_path)
  data.pop("num_attention_heads")
  (tmp_path / md.CONFIG_FILE).write_text(json.dumps(data))
  reloaded = transformers.AlbertModel.from_pretrained(str(tmp_path)).eval()
  assert reloaded.config.num_attention_heads == 64
  ours, _ = loading.load_model(str(tmp_path), "encoder")
  assert ours.config.num_attention_heads == 64
  ids = np.random.RandomState(0).randint(0, 1000, (2, 9)).astype("int32")
  mask, types = np.ones_like(ids), np.zeros_like(ids)
  got = np.asarray(ours({"input_word_ids": ids, "input_mask": mask, "input_type_ids": types})["sequence_output"])
  want = reloaded(torch.tensor(ids, dtype=torch.long)).last_hidden_state.detach().numpy()
  np.testing.assert_allclose(got, want, atol=1e-5)
  # The original release's config (no HF keys) has the same defaults; ours (native) keep albert-base's.
  assert AlbertConfig.from_dict({"vocab_size": 10, "hidden_size": 128}, source="original").num_attention_heads == 64
  assert AlbertConfig.from_dict({"vocab_size": 10}, source="native").num_attention_heads == 12


def test_negative_block_sparse_seed_is_refused_by_name():
  with pytest.raises(ValueError, match=r"block_sparse_seed must be an integer >= 0, got -1"):
    AlbertConfig(**tiny.MODEL, attention_type="block_sparse", block_size=8, block_sparse_seed=-1)


def test_tf1_output_keeps_head_dropout_and_token_ids(tmp_path):
  src = _hf(tmp_path / "hf", num_labels=2, classifier_dropout_prob=0.2, pad_token_id=5)
  convert_lib.convert("hf", src, "tf1", str(tmp_path / "tf1"))
  written = json.loads((tmp_path / "tf1" / md.TF1_CONFIG_FILE).read_text())
  assert written["classifier_dropout_prob"] == 0.2 and written["pad_token_id"] == 5
  assert "bos_token_id" not in written  # (the defaults are not written: the release's keys stay as they were)
  convert_lib.convert("tf1", str(tmp_path / "tf1"), "hf", str(tmp_path / "back"), model_type="classifier")
  back = _config(tmp_path / "back")
  assert back["classifier_dropout_prob"] == 0.2 and back["pad_token_id"] == 5


def test_similarity_function_travels_and_is_warned_about(tmp_path, caplog):
  src = tmp_path / "st"
  _hf(src, "AlbertModel")
  (src / "modules.json").write_text(json.dumps([
      {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
      {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}]))
  (src / "1_Pooling").mkdir()
  (src / "1_Pooling" / "config.json").write_text(json.dumps({"word_embedding_dimension": 32,
                                                             "pooling_mode_cls_token": True}))
  (src / PROMPTS_CONFIG).write_text(json.dumps({"prompts": {}, "default_prompt_name": None,
                                                "similarity_fn_name": "dot"}))
  with caplog.at_level(logging.WARNING):
    assert read_embedding_settings(str(src)).similarity_fn_name == "dot"
  assert "similarity_fn_name='dot'" in caplog.text and "cosine" in caplog.text
  for output_format in ("hf", "native"):
    convert_lib.convert("hf", str(src), output_format, str(tmp_path / output_format))
    written = json.loads((tmp_path / output_format / PROMPTS_CONFIG).read_text())
    assert written["similarity_fn_name"] == "dot"
    assert read_embedding_settings(str(tmp_path / output_format)).similarity_fn_name == "dot"


def test_hf_output_summary_names_the_fast_tokenizer_caveat(tmp_path):
  keras.utils.set_random_seed(0)
  src = _hf(tmp_path / "hf", num_labels=2)
  summary = convert_lib.convert("hf", src, "hf", str(tmp_path / "out"), spm_model_file=SPM)
  assert "use_fast=False" in convert_lib.format_summary(summary)
  # The caveat is true: AutoTokenizer gives the fast class; the slow one tokenizes as FullTokenizer.
  from official_albert.tokenization.tokenizer import FullTokenizer
  text = 'state-of-the-art (2019) model -m "quoted" 3.5'
  assert type(transformers.AutoTokenizer.from_pretrained(str(tmp_path / "out"))).__name__ == "AlbertTokenizerFast"
  slow = transformers.AutoTokenizer.from_pretrained(str(tmp_path / "out"), use_fast=False)
  assert slow.tokenize(text) == FullTokenizer(spm_model_file=SPM).tokenize(text)


def test_model_type_contradicting_architectures_is_warned_about(tmp_path, caplog):
  src = _hf(tmp_path / "hf", num_labels=3)
  with caplog.at_level(logging.WARNING):
    loading.load_model_from("hf", src, None, "token_classifier", None, 4, (), ())
  assert "architectures ['AlbertForSequenceClassification'] is a classifier" in caplog.text
  caplog.clear()
  with caplog.at_level(logging.WARNING):
    loading.load_model_from("hf", src, None, "encoder", None, 4, (), ())  # (taking the encoder out is no contradiction)
  assert "architectures" not in caplog.text


def test_initial_values_written_to_the_output_are_warned_about(tmp_path, caplog):
  """A pretrainer read from AlbertForMaskedLM keeps an initial SOP head and pooler, which the output then holds."""
  src = _hf(tmp_path / "mlm", "AlbertForMaskedLM")
  with caplog.at_level(logging.WARNING):
    summary = convert_lib.convert("hf", src, "hf", str(tmp_path / "out"))
  assert summary["missing_allowed"]
  assert "the output holds initial (untrained) values for" in caplog.text and "seq_relationship" in caplog.text


def test_classify_reads_an_hf_multi_label_directory_as_multi_label(tmp_path):
  """Review s50: without labels.json, classify read an HF directory's problem_type="multi_label_classification" as a
  softmax (transformers applies a sigmoid); its answers now equal those of the directory converted to native, whose
  labels.json records the flag."""
  import shutil  # noqa: PLC0415

  from official_albert.serving import pipelines  # noqa: PLC0415
  names = {0: "toxic", 1: "insult", 2: "threat"}
  src = _hf(tmp_path / "hf", num_labels=3, id2label=names, label2id={v: k for k, v in names.items()},
            problem_type="multi_label_classification")
  shutil.copy(SPM, tmp_path / "hf" / md.SPM_FILE)
  convert_lib.convert("hf", src, "native", str(tmp_path / "native"))
  texts = ["you are awful", "have a nice day"]
  got, want = pipelines.classify(src, texts), pipelines.classify(str(tmp_path / "native"), texts)
  for g, w in zip(got, want):
    assert g["labels"] == w["labels"] and set(g["probabilities"]) == set(names.values())
    np.testing.assert_allclose([g["probabilities"][n] for n in names.values()],
                               [w["probabilities"][n] for n in names.values()], atol=1e-6)
  assert sum(got[0]["probabilities"].values()) != pytest.approx(1.0, abs=1e-3)  # (sigmoids, not a softmax)
