"""Inference API: fill-mask (vs HF's pipeline), feature extraction, classification from model directories."""

import importlib.util
import json
import logging
import shutil

from absl import flags
import numpy as np
import pytest

from official_albert import fill_mask
from official_albert.checkpoints import convert as convert_lib
from official_albert.checkpoints import loading
from official_albert.serving import export
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
  # (review s50: seq_length=0 packed at the default length, silently; 2 packed no text; 1.5 failed deep in numpy)
  for bad in (0, 2, -1, 1.5, True):
    for call in (pipelines.classify, pipelines.feature_extraction, embed):
      with pytest.raises(ValueError, match=rf"seq_length={bad!r}; give a whole number >= 3"):
        call(dirs["classifier"], texts, seq_length=bad)


def test_empty_texts_are_flagged(dirs, caplog):
  with caplog.at_level(logging.WARNING):
    results = pipelines.classify(dirs["classifier"], ["a film", "", "  \n"])
  assert "empty" not in results[0] and results[1]["empty"] is True and results[2]["empty"] is True
  assert "2 of 3 texts are empty (the first at index 1)" in caplog.text
  # A text whose pair has words is not empty.
  assert "empty" not in pipelines.classify(dirs["classifier"], [""], text_pairs=["a pair"])[0]


def test_an_empty_pair_packs_one_segment_as_the_glue_records(spm_model_file):
  """(A blank `text_pairs` item packed `[CLS] A [SEP] [SEP]`; GLUE writes such a row `[CLS] A [SEP]`: skew.)"""
  from tasks.glue import data as glue_data  # noqa: PLC0415
  tokenizer = FullTokenizer(spm_model_file)
  texts, pairs = ["a good film", "a good film", "a good film"], ["", "  ", "fine"]
  packed, _ = next(pipelines.packed_batches(tokenizer, texts, pairs, 4, 16, 64, pad_to_cap=True))
  spec = glue_data.get_spec("mrpc")
  for text, pair, row in zip(texts, pairs, packed):
    record = glue_data.convert_example(glue_data.InputExample("0", text, pair, None), spec, tokenizer, 16)
    assert row == {k: record[k].tolist() for k in row}
  assert packed[0]["input_word_ids"].count(3) == 1 and packed[2]["input_word_ids"].count(3) == 2


def test_a_text_that_is_not_a_string_and_a_zero_batch_are_named(dirs):
  """(Each used to fail deep inside: the tokenizer's TypeError naming no text, range()'s 'arg 3 must not be zero'.)"""
  with pytest.raises(ValueError, match=r"texts\[2\] is a NoneType, not a string"):
    pipelines.classify(dirs["classifier"], ["a film", "another", None])
  with pytest.raises(ValueError, match=r"texts\[0\] is a int, not a string"):
    embed(dirs["classifier"], [3])
  # A lone surrogate (a file decoded with errors='surrogateescape'): SentencePiece's TypeError named no text.
  with pytest.raises(ValueError, match=r"texts\[1\] is not valid Unicode: surrogates not allowed at character 2"):
    pipelines.classify(dirs["classifier"], ["a film", "ab\udc80c"])
  with pytest.raises(ValueError, match=r"batch_size=0; give a whole number >= 1"):
    embed(dirs["classifier"], ["a film"], batch_size=0)
  # Every pipeline checks it (fill_mask and the task heads' ran range(0, n, batch_size): 0 was range()'s error, -1
  # answered [] for N texts, or KeyError 1000000000 for question answering).
  from official_albert.serving import task_pipelines  # noqa: PLC0415
  calls = {"fill_mask": lambda b: pipelines.fill_mask(dirs["pretrainer"], TEXTS, batch_size=b),
           "question_answering": lambda b: task_pipelines.question_answering(
               dirs["classifier"], ["who?", "what?"], "Ann wrote it.", batch_size=b),
           "multiple_choice": lambda b: task_pipelines.multiple_choice(
               dirs["classifier"], "Ann wrote it.", ["who?", "what?"], [["Ann", "Bob"], ["it", "that"]],
               batch_size=b),
           "token_classification": lambda b: task_pipelines.token_classification(dirs["classifier"], ["a", "b"],
                                                                                 batch_size=b)}
  for name, call in calls.items():
    for bad in (0, -1):
      with pytest.raises(ValueError, match=rf"batch_size={bad}; give a whole number >= 1"):
        call(bad)


def test_one_pair_string_is_one_pair_and_a_pair_that_is_not_a_string_is_named(dirs):
  """`text_pairs` is read as `texts` is: one string is one pair (it was split into characters: 'text_pairs has 14
  entries but texts has 1'), and a None item is named as a None text is (it was the tokenizer's bare TypeError)."""
  one = pipelines.classify(dirs["classifier"], "the premise", text_pairs="the hypothesis")
  assert len(one) == 1
  assert one[0]["probabilities"] == pipelines.classify(dirs["classifier"], ["the premise"],
                                                       text_pairs=["the hypothesis"])[0]["probabilities"]
  with pytest.raises(ValueError, match=r"text_pairs\[1\] is a NoneType, not a string"):
    pipelines.classify(dirs["classifier"], ["a", "b"], text_pairs=["ok", None])
  with pytest.raises(ValueError, match=r"text_pairs\[0\] is a NoneType, not a string"):
    pipelines.feature_extraction(dirs["classifier"], ["a"], text_pairs=[None])
  assert len(pipelines.feature_extraction(dirs["classifier"], "a", text_pairs="b")) == 1


def test_a_directory_tokenizes_as_its_records_say(dirs, tmp_path):
  """The pipelines read every tokenizer option the directory records, as embed and HF's AlbertTokenizer do:
  keep_accents / remove_space of tokenizer_config.json, and do_lower_case of a GLUE / SQuAD / RACE run, which records
  it only in params.yaml."""
  model_dir = tmp_path / "cls"
  shutil.copytree(dirs["classifier"], model_dir)
  (model_dir / "tokenizer_config.json").write_text(json.dumps({"keep_accents": True, "remove_space": False}))
  (model_dir / "params.yaml").write_text("task:\n  do_lower_case: false\n")
  _, tokenizer, _ = pipelines.resolve_model(str(model_dir), "classifier", None, None, "hf")
  assert (tokenizer.do_lower_case, tokenizer.keep_accents, tokenizer.remove_space) == (False, True, False)
  _, tokenizer, _ = pipelines.resolve_model(str(model_dir), "classifier", None, True, "hf")
  assert tokenizer.do_lower_case is True  # (the caller's do_lower_case wins)


# ----------------------------------------------------------------------------------------------- SavedModel folders
@pytest.fixture(scope="module")
def pretrainer_saved_model(tiny_exports):
  """The export harness's pretrainer SavedModel (seq_length 48, max_predictions_per_seq 20), loaded once."""
  return pipelines.LoadedSavedModel(tiny_exports.folder("saved_model", "pretrainer"))


def test_fill_mask_takes_a_pretrainer_saved_model(pretrainer_saved_model):
  """As classify and embed take theirs (not "no spiece.model ... convert_checkpoint"); no texts: no answers."""
  assert pipelines.fill_mask(pretrainer_saved_model.folder, TEXTS, top_k=2) == pipelines.fill_mask_saved_model(
      pretrainer_saved_model, TEXTS, top_k=2)
  assert pipelines.fill_mask_saved_model(pretrainer_saved_model, []) == []


class _CountingSignature:
  """A SavedModel signature that counts its calls and the texts of each."""

  def __init__(self, signature):
    self.signature, self.structured_outputs, self.batches = signature, signature.structured_outputs, []

  def __call__(self, text):
    self.batches.append(int(text.shape[0]))
    return self.signature(text=text)


def test_fill_mask_saved_model_batches_and_refuses_top_k_below_1(pretrainer_saved_model):
  """(It sent every text in one serve_text call whatever batch_size said, and top_k=0 answered every mask with []
  where a model directory raises.)"""
  counting = _CountingSignature(pretrainer_saved_model.loaded.signatures["serve_text"])
  spy = pipelines.LoadedSavedModel.__new__(pipelines.LoadedSavedModel)
  spy.folder = pretrainer_saved_model.folder
  spy.loaded = type("Loaded", (), {"signatures": {"serve_text": counting}})()
  texts = TEXTS + [TRAILING]
  expected = pipelines.fill_mask_saved_model(pretrainer_saved_model, texts, top_k=2)
  tokenizer = pipelines.saved_model_tokenizer(pretrainer_saved_model.loaded.signatures)[0]
  assert pipelines.fill_mask(spy, texts, top_k=2, tokenizer=tokenizer, batch_size=2) == expected
  assert counting.batches == [2, 1]
  for top_k in (0, -3, 2.5, True):  # (2.5: a TypeError from a slice before, review s50)
    with pytest.raises(ValueError, match=rf"top_k must be a whole number >= 1, got {top_k}"):
      pipelines.fill_mask(pretrainer_saved_model, texts, top_k=top_k)
    with pytest.raises(ValueError, match=rf"top_k must be a whole number >= 1, got {top_k}"):
      pipelines.fill_mask_saved_model(pretrainer_saved_model, texts, top_k=top_k)
  with pytest.raises(ValueError, match=r"texts is None: give a string or a list of strings"):
    pipelines.fill_mask(pretrainer_saved_model, None)
  with pytest.raises(ValueError, match=r"batch_size=-1; give a whole number >= 1"):
    pipelines.fill_mask(pretrainer_saved_model, texts, batch_size=-1)


def test_fill_mask_saved_model_refuses_masks_it_cannot_answer(pretrainer_saved_model):
  """The export answers the first --max_predictions_per_seq [MASK]s within --seq_length tokens: a text with more is
  an error naming both, not an answer without the others."""
  with pytest.raises(ValueError, match=r"text 0 has 21 \[MASK\]s but .* answers 20: .*--max_predictions_per_seq=20 "
                                       r"masks within --seq_length=48"):
    pipelines.fill_mask_saved_model(pretrainer_saved_model, "a" + " [MASK]" * 21)
  # A text longer than the export's length, whether or not a [MASK] falls past the cut: its graph cut the text, and
  # the answer (its `sequence` too) saw only the first 48 tokens, silently.
  from official_albert.serving import served_rows  # pylint: disable=g-import-not-at-top
  from official_albert.serving.http_protocols import ApiError  # pylint: disable=g-import-not-at-top
  tokenizer = pipelines.saved_model_tokenizer(pretrainer_saved_model.loaded.signatures)[0]
  for past_the_cut in ("a [MASK] " + "word " * 60 + "b [MASK]", "the [MASK] " + "word " * 60):
    with pytest.raises(ValueError, match=r"text 1 .* packs to \d+ tokens but .* --seq_length=48"):
      pipelines.fill_mask_saved_model(pretrainer_saved_model, [TEXTS[0], past_the_cut])
    # The server refuses such a text by itself (a 400 of its request, before the batch runs).
    with pytest.raises(ApiError, match=r"text\[1\]: \d+ tokens packed, beyond the export's seq_length=48"):
      served_rows.mask_rows(tokenizer, [TEXTS[0], past_the_cut], None, "mlm", cut_at=48)


def test_a_pretrainer_export_in_a_reference_tokenizer_mode_is_refused(dirs, tmp_path):
  """The in-graph tokenizer keeps [MASK] as one token only in "hf" mode: such an export found no [MASK] in any text,
  and its error blamed the length."""
  for mode in ("reference", "upstream_py3"):
    with pytest.raises(ValueError, match=f"tokenizer_mode='{mode}': a pretrainer SavedModel's text signatures fill"):
      export.export_from_model_dir(dirs["pretrainer"], str(tmp_path / mode), head="pretrainer", tokenizer_mode=mode)
    assert not (tmp_path / mode).exists()
  # An OpenVINO folder tokenizes in Python, which keeps [MASK] in every mode: exported, and it answers.
  if importlib.util.find_spec("openvino") is not None:
    from official_albert.serving.openvino_export import export_openvino  # noqa: PLC0415 (the openvino extra)
    export_openvino(dirs["pretrainer"], str(tmp_path / "ov"), head="pretrainer", precision="f32",
                    tokenizer_mode="reference", seq_length=32)
    assert len(pipelines.fill_mask(str(tmp_path / "ov"), TEXTS[0], top_k=2)) == 2


def test_feature_extraction_names_a_saved_model_folder(pretrainer_saved_model):
  with pytest.raises(ValueError, match="the feature_extraction does not run a SavedModel folder; call its signatures"):
    pipelines.feature_extraction(pretrainer_saved_model.folder, ["a text"])


def test_classify_on_a_saved_model_checks_the_pairs_count(tiny_exports):
  """As on a directory (not a TF shape error, nor the surplus pairs past the last batch silently ignored)."""
  folder = pipelines.LoadedSavedModel(tiny_exports.folder("saved_model", "classifier"))
  for texts, pairs in ((["a", "b", "c"], ["x", "y"]), (["a", "b"], ["x", "y", "z"])):
    with pytest.raises(ValueError, match=f"text_pairs has {len(pairs)} entries but texts has {len(texts)}"):
      pipelines.classify(folder, texts, text_pairs=pairs, batch_size=2)


# A block_sparse model: above 28 tokens (5 + 2·1 blocks of 4) its pattern follows the padded length. LONG_TEXT packs
# to 90 tokens, LONGER_TEXT to more than the 128 positions.
BLOCK_SPARSE = dict(attention_type="block_sparse", block_size=4, num_random_blocks=1, initializer_range=0.5,
                    max_position_embeddings=128, num_hidden_layers=3)
LONG_TEXT = " ".join(["the invoice is wrong and it crashes on start"] * 4)
LONGER_TEXT = " ".join(["great work"] * 25)


@pytest.fixture(scope="module")
def block_sparse_dirs(tmp_path_factory):
  root = tmp_path_factory.mktemp("block_sparse")
  out = {}
  for head in ("classifier", "token_classifier", "multiple_choice", "pretrainer"):
    out[head] = str(root / head)
    tiny.save_model_dir(out[head], head, num_labels=None if head == "pretrainer" else tiny.NUM_LABELS, **BLOCK_SPARSE)
  return out


def test_block_sparse_answers_do_not_depend_on_the_batch_mates(block_sparse_dirs):
  """Rows are packed to the full length, as the export runs them: the same text gets the same answer in any batch."""
  from official_albert.serving import task_pipelines
  classifier = block_sparse_dirs["classifier"]
  alone = pipelines.classify(classifier, [LONG_TEXT])[0]["probabilities"]
  batched = pipelines.classify(classifier, [LONG_TEXT, LONGER_TEXT])[0]["probabilities"]
  np.testing.assert_allclose(list(batched.values()), list(alone.values()), atol=1e-6)
  alone = pipelines.feature_extraction(classifier, [LONG_TEXT])[0]
  batched = pipelines.feature_extraction(classifier, [LONG_TEXT, LONGER_TEXT])[0]
  np.testing.assert_allclose(batched["sequence_output"], alone["sequence_output"], atol=1e-5)
  np.testing.assert_allclose(embed(classifier, [LONG_TEXT, LONGER_TEXT])[:1], embed(classifier, [LONG_TEXT]),
                             atol=1e-5)
  tagger = block_sparse_dirs["token_classifier"]
  alone = task_pipelines.token_classification(tagger, [LONG_TEXT])[0]
  batched = task_pipelines.token_classification(tagger, [LONG_TEXT, LONGER_TEXT])[0]
  np.testing.assert_allclose([w["score"] for w in batched], [w["score"] for w in alone], atol=1e-6)
  chooser = block_sparse_dirs["multiple_choice"]
  question = (LONG_TEXT, "what is wrong _ ?", ["the invoice", "nothing"])
  other = (LONGER_TEXT + " " + LONGER_TEXT, "what _ ?", ["great work", "the invoice is wrong and it crashes"])
  alone = task_pipelines.multiple_choice(chooser, *([x] for x in question))[0]["scores"]
  batched = task_pipelines.multiple_choice(chooser, *([x, y] for x, y in zip(question, other)))[0]["scores"]
  np.testing.assert_allclose(batched, alone, atol=1e-6)
  # fill_mask (the server's fill-mask head batches other clients' texts): packed to the positions too.
  masked = " ".join(["the invoice is wrong and it crashes on start"] * 2) + " [MASK] ."
  alone = pipelines.fill_mask(block_sparse_dirs["pretrainer"], [masked], top_k=3)[0]
  batched = pipelines.fill_mask(block_sparse_dirs["pretrainer"], [masked, LONG_TEXT + " [MASK]"], top_k=3)[0]
  assert [p["token"] for p in batched] == [p["token"] for p in alone]
  np.testing.assert_allclose([p["score"] for p in batched], [p["score"] for p in alone], atol=1e-6)


def test_block_sparse_token_ids_and_export_texts_do_not_depend_on_the_batch_mates(block_sparse_dirs, tmp_path):
  """The server's token-id rows run at the length the same text runs at (not the batch's longest row); an export
  folder's `encode` packs a block_sparse model's texts at its seq_length, as the pipelines do."""
  from official_albert import file_io
  from official_albert.config import AlbertConfig
  from official_albert.serving import export_folder
  from official_albert.serving.served_model import ServedModel
  from official_albert.tokenization import pack_ids
  served = ServedModel("c", block_sparse_dirs["classifier"])
  ids = served.tokenizer.encode_ids_batch([LONG_TEXT, LONGER_TEXT])
  packed = [pack_ids(ids[0], None, len(ids[0]) + 2), pack_ids(ids[1][:126], None, 128)]
  rows = [served.id_rows(np.asarray([p["input_word_ids"]]), np.asarray([p["input_mask"]]),
                         np.asarray([p["input_type_ids"]]))[0] for p in packed]
  alone = served.predict_ids(rows[:1])["probabilities"][0]
  # atol 1e-5: another batch is another matmul shape, whose kernels round otherwise (6.6e-7 of these probabilities
  # on an AMD EPYC, against 1e-6 before: CPU-dependent); a text run at another length differs by ~0.2.
  np.testing.assert_allclose(served.predict_ids(rows)["probabilities"][0], alone, atol=1e-5)
  np.testing.assert_allclose(served.predict_ids(rows[::-1])["probabilities"][1], alone, atol=1e-5)
  np.testing.assert_allclose(served.predict([LONG_TEXT])["probabilities"][0], alone, atol=1e-5)
  folder = tmp_path / "export"
  folder.mkdir()
  file_io.atomic_write_json(str(folder / export_folder.MODEL_CONFIG),
                            AlbertConfig(**dict(tiny.MODEL, **BLOCK_SPARSE)).to_dict())
  shutil.copy(tiny.SPM_MODEL_FILE, folder / "spiece.model")
  export = export_folder.ExportFolder(str(folder), {"head": "classifier", "do_lower_case": True,
                                                    "tokenizer_mode": "hf", "seq_length": 96})
  alone = export.encode([LONG_TEXT])
  assert alone["input_word_ids"].shape == (1, 96)
  for name, values in export.encode([LONG_TEXT, "great work"]).items():
    np.testing.assert_array_equal(values[:1], alone[name])
