"""Inference API: fill-mask (vs HF's pipeline), feature extraction, classification from model directories."""

import json
import logging
import shutil

from absl import flags
import numpy as np
import pytest

from official_albert import fill_mask
from official_albert.checkpoints import convert as convert_lib
from official_albert.checkpoints import loading
from official_albert.serving import pipelines
from official_albert.serving.embedding import embed
from official_albert.tokenization import FullTokenizer
from tests import tiny
from tests.official_albert.oracle import torch
from tests.official_albert.oracle import transformers

TEXTS = ["Hello I'm a [MASK] model.", "The [MASK] sat on the [MASK], 1990, ok."]
TRAILING = "Hello [MASK] 😀"  # decodes with a trailing space that HF strips


@pytest.fixture(scope="module")
def dirs(tmp_path_factory, tiny_model_dirs):
  """The session's random-weight pretrainer and 3-way classifier directories (tests/tiny.py), and their HF
  conversions."""
  root = tmp_path_factory.mktemp("pipelines")
  out = {}
  for model_type in ("pretrainer", "classifier"):
    out[model_type] = tiny_model_dirs[model_type]
    convert_lib.convert("native", out[model_type], "hf", str(root / f"{model_type}_hf"), model_type=model_type)
    out[f"{model_type}_hf"] = str(root / f"{model_type}_hf")
  return out


def test_fill_mask_returns_k_distinct_tokens_with_descending_scores(dirs):
  preds = pipelines.fill_mask(dirs["pretrainer"], TEXTS[0], top_k=5)
  assert len(preds) == 5 and all(set(p) == {"sequence", "score", "token", "token_str"} for p in preds)
  scores = [p["score"] for p in preds]
  assert len({p["token"] for p in preds}) == 5
  assert scores == sorted(scores, reverse=True) and 0 < sum(scores) <= 1
  # Two masks: one list of predictions per mask.
  two = pipelines.fill_mask(dirs["pretrainer"], TEXTS[1], top_k=3)
  assert len(two) == 2 and all(len(p) == 3 for p in two)


def test_fill_mask_matches_hf_pipeline(dirs):
  """Same tokens, token strings, sequences and scores as HF's fill-mask pipeline on the converted directory."""
  ours = pipelines.fill_mask(dirs["pretrainer_hf"], TEXTS, top_k=4)
  tokenizer = transformers.AlbertTokenizer.from_pretrained(dirs["pretrainer_hf"], local_files_only=True)
  model = transformers.AlbertForMaskedLM.from_pretrained(dirs["pretrainer_hf"])
  hf_pipeline = transformers.pipeline("fill-mask", model=model, tokenizer=tokenizer, device="cpu")
  theirs = hf_pipeline(TEXTS, top_k=4)
  flat_ours = [ours[0]] + ours[1] + [pipelines.fill_mask(dirs["pretrainer_hf"], TRAILING, top_k=4)]
  flat_theirs = [theirs[0]] + theirs[1] + [hf_pipeline(TRAILING, top_k=4)]
  for mine, hf in zip(flat_ours, flat_theirs):
    for a, b in zip(mine, hf):
      assert (a["token"], a["token_str"], a["sequence"]) == (b["token"], b["token_str"], b["sequence"])
      assert abs(a["score"] - b["score"]) < 1e-5


def test_fill_mask_in_the_reference_tokenizer_modes_finds_the_masks(dirs):
  """The reference modes spell "[MASK]" out as pieces (as the original tokenizer); fill_mask still reads it as the
  mask, with the text around it tokenized in that mode (equal to "hf" where the modes agree)."""
  text = "hello [MASK] world, and the [MASK]"
  want = pipelines.fill_mask(dirs["pretrainer"], text, top_k=3)
  for mode in ("reference", "upstream_py3"):
    assert pipelines.fill_mask(dirs["pretrainer"], text, top_k=3, mode=mode) == want


def test_fill_mask_ranks_only_pieces_of_a_vocabulary_smaller_than_the_model(tmp_path):
  """A model with more embedding rows (1,100) than its SentencePiece model has pieces (1,000) is allowed; fill_mask
  names only ids that are pieces (ids past them crashed SentencePiece)."""
  tiny.save_model_dir(tmp_path / "wide", "pretrainer", vocab_size=1100)
  preds = pipelines.fill_mask(str(tmp_path / "wide"), TEXTS[0], top_k=2000)
  assert len(preds) == 1000 and max(p["token"] for p in preds) < 1000


def test_fill_mask_binary(dirs, capsys):
  fv = flags.FlagValues()
  fill_mask.define_flags(fv)
  fv(["fill_mask", f"--model_dir={dirs['pretrainer']}", f"--text={TEXTS[0]}", "--top_k=2"])
  fill_mask.main([], fv)
  lines = capsys.readouterr().out.strip().splitlines()
  assert lines[0] == f"# {TEXTS[0]}"
  rows = [json.loads(line) for line in lines[1:]]
  assert [r["token"] for r in rows] == [p["token"] for p in pipelines.fill_mask(dirs["pretrainer"], TEXTS[0], 2)]


def test_fill_mask_errors(dirs, tmp_path):
  with pytest.raises(ValueError, match=r"no \[MASK\] token in text 'no mask here'"):
    pipelines.fill_mask(dirs["pretrainer"], "no mask here")
  shutil.copytree(dirs["pretrainer"], tmp_path / "nospm")
  (tmp_path / "nospm" / "spiece.model").unlink()
  with pytest.raises(FileNotFoundError, match="no spiece.model"):
    pipelines.fill_mask(str(tmp_path / "nospm"), TEXTS[0])


def test_feature_extraction_is_padding_invariant(dirs, spm_model_file):
  texts = ["a short text", "a somewhat longer text with more pieces, 1990, déjà vu"]
  batch = pipelines.feature_extraction(dirs["classifier"], texts)  # the encoder of any directory
  alone = pipelines.feature_extraction(dirs["classifier"], texts[:1])
  assert batch[0]["tokens"][0] == "[CLS]" and batch[0]["tokens"][-1] == "[SEP]"
  assert batch[0]["sequence_output"].shape == (len(batch[0]["tokens"]), 32)
  assert batch[1]["sequence_output"].shape[0] > batch[0]["sequence_output"].shape[0]
  np.testing.assert_allclose(batch[0]["sequence_output"], alone[0]["sequence_output"], atol=1e-5)
  np.testing.assert_allclose(batch[0]["pooled_output"], alone[0]["pooled_output"], atol=1e-5)
  ids = FullTokenizer(spm_model_file).encode_ids(texts[1])
  assert batch[1]["input_word_ids"] == [2] + ids + [3]


def test_classify_native_and_hf_directories(dirs, spm_model_file, tmp_path):
  texts, pairs = ["a gripping film", "dull"], ["yes", "no at all, really"]
  shutil.copytree(dirs["classifier"], tmp_path / "cls")
  (tmp_path / "cls" / "labels.txt").write_text("neg\nneutral\npos\n")
  results = pipelines.classify(str(tmp_path / "cls"), texts, text_pairs=pairs)
  assert set(results[0]["probabilities"]) == {"neg", "neutral", "pos"}
  # Oracle: HF's model + HF's tokenizer on the converted directory.
  tokenizer = transformers.AlbertTokenizer.from_pretrained(dirs["classifier_hf"], local_files_only=True)
  model = transformers.AlbertForSequenceClassification.from_pretrained(dirs["classifier_hf"]).eval()
  with torch.no_grad():
    logits = model(**tokenizer(texts, pairs, padding=True, return_tensors="pt")).logits
  expected = torch.softmax(logits, -1).numpy()
  for row, probs in zip(results, expected):
    np.testing.assert_allclose(list(row["probabilities"].values()), probs, atol=1e-5)
    assert row["label"] == ["neg", "neutral", "pos"][int(probs.argmax())] and row["label_id"] == probs.argmax()
  hf_results = pipelines.classify(dirs["classifier_hf"], texts, text_pairs=pairs)
  assert hf_results[0]["label"].startswith("LABEL_")
  np.testing.assert_allclose(hf_results[1]["score"], results[1]["score"], atol=1e-6)


def test_classify_reads_the_labels_json_that_training_writes(dirs, tmp_path):
  """text_classification saves its label set as labels.json: classify names its outputs from it (before labels.txt),
  and a multi-label model's probabilities are sigmoids with every label at the threshold listed (not a softmax)."""
  texts = ["a gripping film", "dull"]
  shutil.copytree(dirs["classifier"], tmp_path / "cls")
  (tmp_path / "cls" / "labels.txt").write_text("x\ny\nz\n")
  plain = pipelines.classify(str(tmp_path / "cls"), texts)
  (tmp_path / "cls" / "labels.json").write_text(json.dumps({"task": "text_classification",
                                                           "labels": ["neg", "neutral", "pos"]}))
  single = pipelines.classify(str(tmp_path / "cls"), texts)
  assert [r["label"] for r in single] == [["neg", "neutral", "pos"][r["label_id"]] for r in plain]
  assert "labels" not in single[0]
  np.testing.assert_allclose([list(r["probabilities"].values()) for r in single],
                             [list(r["probabilities"].values()) for r in plain], atol=1e-7)

  (tmp_path / "cls" / "labels.json").write_text(json.dumps({"labels": ["neg", "neutral", "pos"],
                                                           "multi_label": True}))
  model = loading.load_model(str(tmp_path / "cls"), "classifier")[0]
  _, inputs = next(pipelines.packed_batches(FullTokenizer(str(tmp_path / "cls" / "spiece.model")), texts, None, 16,
                                             128, model.config.max_position_embeddings))
  logits = np.asarray(model(inputs, training=False)["logits"])
  sigmoid = 1 / (1 + np.exp(-logits))
  multi = pipelines.classify(str(tmp_path / "cls"), texts, threshold=float(np.median(sigmoid)))
  for row, expected in zip(multi, sigmoid):
    np.testing.assert_allclose(list(row["probabilities"].values()), expected, atol=1e-5)
    assert row["labels"] == [name for name, p in zip(["neg", "neutral", "pos"], expected)
                             if p >= float(np.median(sigmoid))]
  renamed = pipelines.classify(str(tmp_path / "cls"), texts, labels=["a", "b", "c"])  # names only: still sigmoids
  np.testing.assert_allclose([list(r["probabilities"].values()) for r in renamed], sigmoid, atol=1e-5)


# ------------------------------------------------------------------------------------- no silent accepts (issue 44)
def test_seq_length_above_the_models_positions_is_cut_with_a_warning(dirs, caplog):
  texts = ["a short text"]
  with caplog.at_level(logging.WARNING):
    cut = pipelines.feature_extraction(dirs["classifier"], texts, seq_length=100)
  assert "seq_length=100 is above the model's max_position_embeddings (64): texts are cut at 64" in caplog.text
  np.testing.assert_allclose(cut[0]["pooled_output"],
                             pipelines.feature_extraction(dirs["classifier"], texts)[0]["pooled_output"], atol=1e-6)
  caplog.clear()
  with caplog.at_level(logging.WARNING):
    embed(dirs["classifier"], texts, seq_length=2048)
    pipelines.classify(dirs["classifier"], texts, seq_length=65)
  assert "seq_length=2048 is above" in caplog.text and "seq_length=65 is above" in caplog.text
  caplog.clear()
  with caplog.at_level(logging.WARNING):
    pipelines.classify(dirs["classifier"], texts)
    embed(dirs["classifier"], texts, seq_length=64)
  assert "is above" not in caplog.text


def test_empty_texts_are_flagged(dirs, caplog):
  with caplog.at_level(logging.WARNING):
    results = pipelines.classify(dirs["classifier"], ["a film", "", "  \n"])
  assert "empty" not in results[0] and results[1]["empty"] is True and results[2]["empty"] is True
  assert "2 of 3 texts are empty (the first at index 1)" in caplog.text
  # A text whose pair has words is not empty.
  assert "empty" not in pipelines.classify(dirs["classifier"], [""], text_pairs=["a pair"])[0]


def test_a_text_that_is_not_a_string_and_a_zero_batch_are_named(dirs):
  """(Each used to fail deep inside: the tokenizer's TypeError naming no text, range()'s 'arg 3 must not be zero'.)"""
  with pytest.raises(ValueError, match=r"texts\[2\] is a NoneType, not a string"):
    pipelines.classify(dirs["classifier"], ["a film", "another", None])
  with pytest.raises(ValueError, match=r"texts\[0\] is a int, not a string"):
    embed(dirs["classifier"], [3])
  with pytest.raises(ValueError, match=r"batch_size=0; give a whole number >= 1"):
    embed(dirs["classifier"], ["a film"], batch_size=0)
