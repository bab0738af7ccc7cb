"""GLUE processors, features, metrics (vs scikit-learn/scipy) and submission files."""

import os

import numpy as np
import pytest

from official_albert.tokenization import truncate_seq_pair
from tasks import glue
from tasks import metrics


class _WhitespaceTokenizer:
  """Deterministic stand-in: one token per word, ids = word length + 10 ([CLS]=2, [SEP]=3)."""

  def tokenize(self, text):
    return text.split()

  def convert_tokens_to_ids(self, tokens):
    return [{"[CLS]": 2, "[SEP]": 3}.get(t, len(t) + 10) for t in tokens]


def _write(path, text):
  os.makedirs(os.path.dirname(path), exist_ok=True)
  with open(path, "w", encoding="utf-8") as f:
    f.write(text)
  return path


# ----------------------------------------------------------------------------------------------------- metrics


def test_metrics_match_sklearn_on_random_predictions():
  sklearn_metrics = pytest.importorskip("sklearn.metrics")
  rng = np.random.default_rng(0)
  for trial in range(20):
    n = int(rng.integers(5, 200))
    labels = rng.integers(0, 2, n)
    # Mix of correlated and random predictions so MCC/F1 cover a range of values.
    preds = np.where(rng.random(n) < trial / 20, labels, rng.integers(0, 2, n))
    assert metrics.accuracy(labels, preds) == pytest.approx(sklearn_metrics.accuracy_score(labels, preds), abs=1e-12)
    assert metrics.f1_score(labels, preds) == pytest.approx(sklearn_metrics.f1_score(labels, preds), abs=1e-12)
    assert metrics.matthews_corrcoef(labels, preds) == pytest.approx(
        sklearn_metrics.matthews_corrcoef(labels, preds), abs=1e-12)


@pytest.mark.parametrize("labels,preds", [
    ([1, 1, 1, 1], [1, 1, 1, 1]),  # all one class in both: zero denominator
    ([0, 1, 0, 1], [1, 1, 1, 1]),  # constant predictions
    ([0, 0, 0, 0], [0, 1, 0, 1]),  # constant labels
    ([0, 0, 0], [0, 0, 0]),
])
def test_mcc_zero_division_is_zero(labels, preds):
  sklearn_metrics = pytest.importorskip("sklearn.metrics")
  assert metrics.matthews_corrcoef(labels, preds) == 0.0
  assert sklearn_metrics.matthews_corrcoef(labels, preds) == 0.0


@pytest.mark.parametrize("labels, preds, counts, mcc, f1, f1_of_class_0", [
    # (tp, tn, fp, fn); MCC = (tp·tn − fp·fn) / sqrt((tp+fp)(tp+fn)(tn+fp)(tn+fn)); F1 = 2tp / (2tp + fp + fn).
    ([1, 1, 1, 0, 0, 0], [1, 1, 1, 0, 0, 1], (3, 2, 1, 0), 6 / np.sqrt(4 * 3 * 3 * 2), 6 / 7, 4 / 5),
    ([1, 1, 1, 1, 0, 0, 0, 0, 0, 0], [1, 1, 0, 0, 1, 0, 0, 0, 0, 0], (2, 5, 1, 2), 8 / np.sqrt(3 * 4 * 6 * 7), 4 / 7,
     10 / 13),
    ([1, 0, 0, 0, 0, 0], [1, 1, 1, 0, 0, 0], (1, 3, 2, 0), 3 / np.sqrt(3 * 1 * 5 * 3), 2 / 4, 6 / 8),
    ([1, 1, 0, 0, 0], [0, 1, 1, 1, 0], (1, 1, 2, 1), -1 / np.sqrt(3 * 2 * 3 * 2), 2 / 5, 2 / 5),
    ([0, 1, 0, 1], [1, 0, 1, 0], (0, 0, 2, 2), -1.0, 0.0, 0.0),
])
def test_mcc_and_f1_hand_computed_with_fp_unequal_fn(labels, preds, counts, mcc, f1, f1_of_class_0):
  """Values worked out by hand from the confusion counts, on cases where fp != fn, so a formula that mixes up the
  false positives and false negatives fails. (MCC, F1 and accuracy are symmetric in (labels, preds), so their
  argument order cannot be tested by value; the positive class can: F1 of class 0 differs, MCC does not.)"""
  assert metrics._confusion(labels, preds) == counts  # pylint: disable=protected-access
  assert metrics.matthews_corrcoef(labels, preds) == pytest.approx(mcc, abs=1e-12)
  assert metrics.matthews_corrcoef(labels, preds, positive=0) == pytest.approx(mcc, abs=1e-12)
  assert metrics.f1_score(labels, preds) == pytest.approx(f1, abs=1e-12)
  assert metrics.f1_score(labels, preds, positive=0) == pytest.approx(f1_of_class_0, abs=1e-12)
  assert glue.compute_metrics("cola", labels, preds)["matthew_corr"] == pytest.approx(mcc, abs=1e-12)


def test_pearson_spearman_match_scipy_including_ties():
  stats = pytest.importorskip("scipy.stats")
  rng = np.random.default_rng(1)
  for _ in range(10):
    n = int(rng.integers(3, 100))
    labels = np.round(rng.uniform(0, 5, n) * 2) / 2  # many ties, like STS-B's 0.5 steps
    preds = labels + rng.normal(0, 1.5, n)
    preds[: n // 3] = np.round(preds[: n // 3])  # ties in predictions too
    assert metrics.pearson(preds, labels) == pytest.approx(stats.pearsonr(preds, labels)[0], abs=1e-10)
    assert metrics.spearman(preds, labels) == pytest.approx(stats.spearmanr(preds, labels)[0], abs=1e-10)
  np.testing.assert_allclose(metrics.rankdata([3, 1, 3, 2, 3]), stats.rankdata([3, 1, 3, 2, 3]))
  # A NaN prediction (a diverged STS-B head): scipy's correlations are NaN. Before, the NaN got a rank of its own and
  # spearman came out finite (0.7 and 1.0 here) while pearson was NaN. ±inf are ranked by both: spearman a number.
  labels = np.array([1.0, 2.0, 3.0, 4.0, 5.0])
  for preds in ([1.0, 2.0, np.nan, 4.0, 5.0], [np.nan] * 5):
    assert np.isnan(stats.spearmanr(preds, labels)[0]) and np.isnan(metrics.spearman(preds, labels))
    assert np.isnan(metrics.spearman(labels, preds)) and np.isnan(metrics.pearson(preds, labels))
    np.testing.assert_array_equal(metrics.rankdata(preds), stats.rankdata(preds))  # all NaN
  for preds in ([1.0, 2.0, np.inf, 4.0, 5.0], [-np.inf, 2.0, 3.0, 4.0, np.inf]):
    assert metrics.spearman(preds, labels) == pytest.approx(stats.spearmanr(preds, labels)[0], abs=1e-10)
    with np.errstate(invalid="ignore"):  # scipy's pearsonr computes inf - inf
      assert np.isnan(metrics.pearson(preds, labels)) and np.isnan(stats.pearsonr(preds, labels)[0])


def test_compute_metrics_per_task_names():
  assert set(glue.compute_metrics("cola", [0, 1], [0, 1])) == {"eval_accuracy", "matthew_corr"}
  mrpc = glue.compute_metrics("mrpc", [0, 1, 1, 1], [0, 1, 0, 1])
  assert mrpc["eval_accuracy"] == 0.75 and mrpc["f1"] == pytest.approx(0.8)
  assert "f1" in glue.compute_metrics("qqp", [0, 1], [1, 1])
  assert set(glue.compute_metrics("sts-b", [1.0, 2.0, 3.5], [1.1, 2.5, 3.0])) == {"pearson", "spearman", "MSE", "mse"}
  assert set(glue.compute_metrics("rte", [0, 1], [0, 0])) == {"eval_accuracy"}
  assert glue.key_metric("CoLA") == "matthew_corr" and glue.key_metric("sts-b") == "pearson"
  assert glue.key_metric("mnli") == "eval_accuracy"
  with pytest.raises(ValueError, match="shape"):
    glue.compute_metrics("sst-2", [0, 1, 1], [0, 1])


def test_stsb_reports_mse_under_the_reference_name_and_keeps_the_old_alias():
  """The reference's metric_fn (ALBERT classifier_utils) names STS-B's error `MSE`; `mse` is what earlier runs wrote,
  kept with the same value so their result files and `best_checkpoint_metric: mse` settings keep working."""
  out = glue.compute_metrics("sts-b", [1.0, 2.0, 3.5], [1.5, 2.0, 3.0])
  assert out["MSE"] == out["mse"] == pytest.approx((0.25 + 0.0 + 0.25) / 3)
  # The names the task states before an evaluation (to check `best_checkpoint_metric`) are the ones it reports.
  assert glue.GlueTask(glue.GlueTaskConfig(task_name="sts-b")).compute_metric_names() == list(out)


# -------------------------------------------------------------------------------------------------- processors


def test_real_samples_parse_with_counts_and_labels(shared_data_dir):
  root = str(shared_data_dir / "glue")
  expected = {("cola", "train"): 7250, ("cola", "dev"): 1043, ("sst-2", "train"): 5000, ("sst-2", "dev"): 872,
              ("mrpc", "train"): 6, ("mrpc", "dev"): 6, ("sts-b", "train"): 9, ("sts-b", "dev"): 9}
  for (task, split), count in expected.items():
    examples = glue.read_examples(task, root, split)
    assert len(examples) == count, (task, split)
    spec = glue.get_spec(task)
    if spec.is_regression:
      assert all(isinstance(e.label, float) and 0.0 <= e.label <= 5.0 for e in examples)
      assert all(e.text_b for e in examples)
    else:
      assert {e.label for e in examples} == set(spec.labels), (task, split)
  # CoLA has no header: the first data row is the first example; SST-2's header row is skipped.
  cola = glue.read_examples("cola", root, "dev")
  assert cola[0].text_a == "The sailors rode the breeze clear of the rocks." and cola[0].label == "1"
  sst = glue.read_examples("sst-2", root, "dev")
  assert sst[0].text_a.startswith("it 's a charming") and sst[0].label == "1"
  assert sum(e.label == "1" for e in sst) == 444
  mrpc = glue.read_examples("mrpc", root, "train")  # CRLF file, bare quotes inside the text
  assert mrpc[0].label == "1" and mrpc[0].text_b.startswith('" The foodservice')
  assert not mrpc[0].text_b.endswith("\r")
  stsb = glue.read_examples("sts-b", root, "dev")
  assert stsb[0].label == 5.0 and stsb[0].text_a == "A man with a hard hat is dancing."


def test_missing_column_names_file_and_line_or_is_counted(tmp_path, caplog):
  path = _write(str(tmp_path / "RTE" / "train.tsv"),
                "index\tsentence1\tsentence2\tlabel\n0\tA b.\tC d.\tentailment\n1\tonly one sentence\n"
                "2\tE f.\tG h.\tnot_entailment\n")
  with pytest.raises(glue.GlueDataError, match=r"train\.tsv:3"):
    glue.read_examples("rte", str(tmp_path), "train")
  with caplog.at_level("WARNING"):
    examples = glue.read_examples("rte", str(tmp_path), "train", skip_bad_rows=True)
  assert [e.label for e in examples] == ["entailment", "not_entailment"]
  assert "skipped 1 of 4 rows" in caplog.text and path in caplog.text


def test_qqp_skips_short_rows_by_default_and_counts_them(tmp_path, caplog):
  _write(str(tmp_path / "QQP" / "dev.tsv"),
         "id\tqid1\tqid2\tquestion1\tquestion2\tis_duplicate\n1\t1\t2\tHow?\tWhy?\t0\n2\t3\t4\tbroken row\n"
         "3\t5\t6\tWhat?\tWho?\t1\n")
  with caplog.at_level("WARNING"):
    examples = glue.read_examples("qqp", str(tmp_path), "dev")
  assert [(e.text_a, e.label) for e in examples] == [("How?", "0"), ("What?", "1")]
  assert "skipped 1" in caplog.text
  with pytest.raises(glue.GlueDataError, match=r"dev\.tsv:3"):
    glue.read_examples("qqp", str(tmp_path), "dev", skip_bad_rows=False)
  # (review s51: the reference skips them in train / dev only; a test row skipped left its id out of QQP.tsv, which
  # the GLUE server refuses)
  _write(str(tmp_path / "QQP" / "test.tsv"), "id\tquestion1\tquestion2\n0\tq1\tq2\n1\tonly one\n")
  with pytest.raises(glue.GlueDataError, match=r"test\.tsv:3: qqp row has 2 columns"):
    glue.read_examples("qqp", str(tmp_path), "test")
  assert len(glue.read_examples("qqp", str(tmp_path), "test", skip_bad_rows=True)) == 1


def test_bad_label_and_bad_score_are_errors(tmp_path):
  _write(str(tmp_path / "SST-2" / "train.tsv"), "sentence\tlabel\ngood\t1\nbad\t2\n")
  with pytest.raises(glue.GlueDataError, match=r"train\.tsv:3: label '2'"):
    glue.read_examples("sst-2", str(tmp_path), "train")
  _write(str(tmp_path / "STS-B" / "dev.tsv"),
         "index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2\tscore\n"
         "0\tg\tf\ty\t0\tn\tn\tA.\tB.\tfive\n")
  with pytest.raises(glue.GlueDataError, match=r"dev\.tsv:2: STS-B score 'five'"):
    glue.read_examples("sts-b", str(tmp_path), "dev")
  for bad in ("NaN", "infinity", "1_0"):  # (float() read them: a NaN loss, a score of 10)
    _write(str(tmp_path / "STS-B" / "dev.tsv"),
           "index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2\tscore\n"
           f"0\tg\tf\ty\t0\tn\tn\tA.\tB.\t{bad}\n")
    with pytest.raises(glue.GlueDataError, match=rf"dev\.tsv:2: STS-B score '{bad}' is not a finite decimal"):
      glue.read_examples("sts-b", str(tmp_path), "dev")
  # An STS-B row missing its score column must not silently read sentence2 as the label.
  _write(str(tmp_path / "STS-B" / "train.tsv"),
         "index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2\tscore\n"
         "0\tg\tf\ty\t0\tn\tn\tA.\t4.0\n")
  with pytest.raises(glue.GlueDataError, match=r"train\.tsv:2"):
    glue.read_examples("sts-b", str(tmp_path), "train")


def test_test_files_mnli_mismatched_and_ax_layouts(tmp_path):
  mnli_cols = ["index", "promptID", "pairID", "genre", "s1_bp", "s2_bp", "s1_p", "s2_p", "sentence1", "sentence2"]
  row = ["7", "p", "q", "fiction", "x", "x", "x", "x", "Premise here.", "Hypothesis here."]
  _write(str(tmp_path / "MNLI" / "test_mismatched.tsv"), "\t".join(mnli_cols) + "\n" + "\t".join(row) + "\n")
  dev_cols = mnli_cols + ["label1", "label2", "label3", "label4", "label5", "gold_label"]
  dev_row = row + ["neutral", "neutral", "entailment", "neutral", "neutral", "neutral"]
  _write(str(tmp_path / "MNLI" / "dev_mismatched.tsv"), "\t".join(dev_cols) + "\n" + "\t".join(dev_row) + "\n")
  (test,) = glue.read_examples("mismnli", str(tmp_path), "test")
  assert (test.guid, test.text_a, test.text_b, test.label) == ("7", "Premise here.", "Hypothesis here.", None)
  (dev,) = glue.read_examples("mnli-mm", str(tmp_path), "dev")
  assert dev.label == "neutral" and dev.text_b == "Hypothesis here."
  _write(str(tmp_path / "diagnostic" / "diagnostic.tsv"), "index\tsentence1\tsentence2\n0\tA.\tB.\n1\tC.\tD.\n")
  ax = glue.read_examples("ax", str(tmp_path), "test")
  assert [(e.guid, e.text_a, e.text_b, e.label) for e in ax] == [("0", "A.", "B.", None), ("1", "C.", "D.", None)]
  with pytest.raises(ValueError, match="no 'train' split"):
    glue.read_examples("ax", str(tmp_path), "train")
  _write(str(tmp_path / "CoLA" / "test.tsv"), "index\tsentence\n0\tThe cat sat.\n")
  (cola,) = glue.read_examples("cola", str(tmp_path), "test")
  assert (cola.guid, cola.text_a) == ("0", "The cat sat.")


# ---------------------------------------------------------------------------------------------------- features


def test_pair_truncation_pops_from_the_longer_side():
  spec = glue.get_spec("rte")
  ex = glue.InputExample("g", "a1 a2 a3 a4 a5 a6", "b1 b2", "entailment")
  f = glue.convert_example(ex, spec, _WhitespaceTokenizer(), max_seq_length=8)
  # L-3 = 5 tokens: A is popped from its end until 3 + 2 fit.
  assert f["input_word_ids"].tolist() == [2, 12, 12, 12, 3, 12, 12, 3]
  assert f["input_type_ids"].tolist() == [0, 0, 0, 0, 0, 1, 1, 1]
  assert f["input_mask"].tolist() == [1] * 8
  assert f["label_ids"] == 0
  a, b = ["x"] * 4, ["y"] * 4
  truncate_seq_pair(a, b, 5)  # the one rule GLUE packs with (official_albert.tokenization)
  assert (len(a), len(b)) == (3, 2)  # ties pop from B, then the longer side


def test_single_sentence_cut_to_l_minus_2_and_padding():
  spec = glue.get_spec("sst-2")
  f = glue.convert_example(glue.InputExample("g", "one two three four five", None, "1"), spec,
                           _WhitespaceTokenizer(), max_seq_length=5)
  assert f["input_word_ids"].tolist() == [2, 13, 13, 15, 3]
  f = glue.convert_example(glue.InputExample("g", "hi", None, "0"), spec, _WhitespaceTokenizer(), max_seq_length=6)
  assert f["input_word_ids"].tolist() == [2, 12, 3, 0, 0, 0]
  assert f["input_mask"].tolist() == [1, 1, 1, 0, 0, 0]
  assert f["input_type_ids"].tolist() == [0] * 6


@pytest.mark.parametrize("text_b", ["", "   "])
def test_an_empty_or_blank_text_b_packs_one_segment_as_the_reference(text_b):
  """The reference's `if example.text_b:` / `if tokens_b:`: a QQP / MNLI row with an empty second column is
  `[CLS] A [SEP]` (A cut at L-2, all segment 0), not `[CLS] A [SEP] [SEP]` with one piece less of A."""
  spec = glue.get_spec("qqp")
  f = glue.convert_example(glue.InputExample("g", "a1 a2 a3 a4 a5 a6", text_b, "0"), spec, _WhitespaceTokenizer(),
                           max_seq_length=6)
  assert f["input_word_ids"].tolist() == [2, 12, 12, 12, 12, 3]
  assert f["input_type_ids"].tolist() == [0] * 6


def test_stsb_labels_are_float_and_unlabelled_is_marked():
  arrays = glue.convert_examples([glue.InputExample("g", "a", "b", 3.8), glue.InputExample("t", "a", "b", None)],
                                 "sts-b", _WhitespaceTokenizer(), 8)
  assert arrays["label_ids"].dtype == np.float32
  assert arrays["label_ids"][0] == pytest.approx(3.8) and np.isnan(arrays["label_ids"][1])
  arrays = glue.convert_examples([glue.InputExample("t", "a", "b", None)], "mnli", _WhitespaceTokenizer(), 8)
  assert arrays["label_ids"].tolist() == [-1] and arrays["input_word_ids"].shape == (1, 8)


def test_real_tokenizer_features_on_mrpc(shared_data_dir, spm_model_file):
  from official_albert.tokenization import FullTokenizer
  tok = FullTokenizer(spm_model_file)
  examples = glue.read_examples("mrpc", str(shared_data_dir / "glue"), "dev")
  arrays = glue.convert_examples(examples, "mrpc", tok, 64)
  ids, types, mask = arrays["input_word_ids"], arrays["input_type_ids"], arrays["input_mask"]
  assert ids.shape == (6, 64) and (ids[:, 0] == 2).all()
  for row in range(6):
    n = int(mask[row].sum())
    seps = np.flatnonzero(ids[row, :n] == 3)
    assert len(seps) == 2 and seps[-1] == n - 1
    assert (types[row, :seps[0] + 1] == 0).all() and (types[row, seps[0] + 1:n] == 1).all()
    assert (ids[row, n:] == 0).all()
  assert arrays["label_ids"].tolist() == [glue.get_spec("mrpc").labels.index(e.label) for e in examples]


# ------------------------------------------------------------------------------------------------- submissions


def test_submission_files_use_glue_names_and_label_strings(tmp_path):
  examples = [glue.InputExample("0", "a", "b"), glue.InputExample("1", "c", "d")]
  path = glue.write_submission("mnli-mm", examples, np.array([[0.1, 0.2, 3.0], [2.0, 0.0, 0.0]]), str(tmp_path))
  assert os.path.basename(path) == "MNLI-mm.tsv"
  assert open(path).read() == "index\tprediction\n0\tneutral\n1\tcontradiction\n"
  path = glue.write_submission("mnli", examples, np.array([[0.1, 2.0, 0.0], [0, 0, 1.0]]), str(tmp_path))
  assert os.path.basename(path) == "MNLI-m.tsv" and "1\tneutral" in open(path).read()
  path = glue.write_submission("sts-b", examples, np.array([[4.12345], [0.5]]), str(tmp_path))
  assert open(path).read() == "index\tprediction\n0\t4.123\n1\t0.500\n"
  path = glue.write_submission("ax", examples, np.array([[0, 5.0, 0], [0, 0, 1.0]]), str(tmp_path))
  assert os.path.basename(path) == "AX.tsv"
  assert sorted(s.submission_name for s in glue.TASKS.values()) == sorted(
      ["CoLA.tsv", "SST-2.tsv", "MRPC.tsv", "STS-B.tsv", "QQP.tsv", "MNLI-m.tsv", "MNLI-mm.tsv", "QNLI.tsv",
       "RTE.tsv", "WNLI.tsv", "AX.tsv"])
  with pytest.raises(ValueError, match="expected logits"):
    glue.write_submission("rte", examples, np.zeros([2, 3]), str(tmp_path))
  assert not [n for n in os.listdir(tmp_path) if ".tmp" in n]


# ------------------------------------------------------------------------------------------ headers and encoding


def test_a_file_without_its_header_keeps_its_first_example_and_warns(tmp_path, caplog):
  # The reference skips line 1 unchecked: a 10-row SST-2 file saved without its header gave 9 examples, silently.
  rows = [f"sentence number {i} is {'good' if i % 2 else 'bad'}\t{i % 2}" for i in range(10)]
  path = _write(str(tmp_path / "SST-2" / "train.tsv"), "\n".join(rows) + "\n")
  with caplog.at_level("WARNING"):
    examples = glue.read_examples("sst-2", str(tmp_path), "train")
  assert [e.text_a for e in examples] == [r.split("\t")[0] for r in rows]
  assert f"{path}:1: sst-2 train file without its header row (expected 'sentence\\tlabel')" in caplog.text
  # The same for a test file (integer index in the first row) and for STS-B (a score is a number).
  _write(str(tmp_path / "SST-2" / "test.tsv"), "0\tfirst sentence\n1\tsecond sentence\n")
  assert [e.guid for e in glue.read_examples("sst-2", str(tmp_path), "test")] == ["0", "1"]
  _write(str(tmp_path / "STS-B" / "dev.tsv"), "0\tg\tf\ty\t0\tn\tn\tA.\tB.\t3.5\n")
  assert [e.label for e in glue.read_examples("sts-b", str(tmp_path), "dev")] == [3.5]


def test_a_header_that_is_not_the_tasks_is_an_error_naming_file_and_expected_header(tmp_path):
  # An RTE file handed to QNLI, and an SST-2 file whose columns were renamed/reordered.
  path = _write(str(tmp_path / "QNLI" / "dev.tsv"),
                "index\tsentence1\tsentence2\tlabel\n0\tA b.\tC d.\tentailment\n")
  with pytest.raises(glue.GlueDataError) as raised:
    glue.read_examples("qnli", str(tmp_path), "dev")
  assert str(raised.value).startswith(
      f"{path}:1: the first row 'index\\tsentence1\\tsentence2\\tlabel' is neither the qnli dev header "
      "'index\\tquestion\\tsentence\\tlabel' nor an example")
  assert "Fix: use the GLUE release's QNLI dev file or restore its header row" in str(raised.value)
  _write(str(tmp_path / "SST-2" / "dev.tsv"), "label\tsentence\n1\tgood\n")
  with pytest.raises(glue.GlueDataError, match=r"dev\.tsv:1: the first row 'label\\tsentence'"):
    glue.read_examples("sst-2", str(tmp_path), "dev")


def test_header_check_ignores_case_byte_order_mark_and_unread_columns(tmp_path):
  _write(str(tmp_path / "MRPC" / "train.tsv"),
         "\ufeffquality\t#1 id\t#2 id\t#1 String\t#2 String\n1\t1\t2\tA b.\tC d.\n")
  (mrpc,) = glue.read_examples("mrpc", str(tmp_path), "train")
  assert (mrpc.label, mrpc.text_a) == ("1", "A b.")
  # MNLI's parse columns are not read: other names there do not matter (test_test_files_... uses short ones).
  assert glue.HEADERS[("MNLI", "dev")][-1] == "gold_label" and len(glue.HEADERS[("MNLI", "dev")]) == 16


def test_invalid_utf8_names_file_line_and_the_fix(tmp_path):
  path = str(tmp_path / "SST-2" / "train.tsv")
  os.makedirs(os.path.dirname(path))
  with open(path, "wb") as f:
    f.write(b"sentence\tlabel\ngood film\t1\nun caf\xe9 noir\t0\n")
  with pytest.raises(glue.GlueDataError) as raised:
    glue.read_examples("sst-2", str(tmp_path), "train")
  assert str(raised.value) == (
      f"{path}:3: invalid UTF-8 (byte 0xe9 at byte 7 of the line, byte offset 33 of the file). GLUE files are UTF-8. "
      f"Fix: convert the file to UTF-8 (from Latin-1: `iconv -f latin1 -t utf-8 {path} > fixed.tsv`) or correct "
      "line 3.")


def test_predict_records_of_a_train_split_keep_the_files_order(tmp_path, spm_model_file):
  """Review s51: a train split's records are written shuffled (train_shuffle_seed), also when built to predict
  (`task.predict_split=train`) or by create_finetuning_data; the submission's ids are read in file order, so each
  prediction went to another row's id. Predict records are now written in file order; shuffled ones are refused."""
  import json  # noqa: PLC0415
  import types  # noqa: PLC0415

  from official_albert.tokenization import FullTokenizer  # noqa: PLC0415
  from tasks.glue import data as glue_data  # noqa: PLC0415
  from tasks.records import check_record_order  # noqa: PLC0415
  rows = [f"text number {i}\t{i % 2}" for i in range(12)]
  _write(str(tmp_path / "SST-2" / "train.tsv"), "sentence\tlabel\n" + "\n".join(rows) + "\n")
  params = types.SimpleNamespace(task_name="sst-2", predict_skip_bad_rows=None, skip_bad_rows=None,
                                 predict_split="train")
  data_config = types.SimpleNamespace(input_path=str(tmp_path / "SST-2"), seq_length=16)
  tokenizer = FullTokenizer(spm_model_file)
  order = {}
  for role in ("train", "predict"):
    writer, split = glue_data.raw_writer(params, data_config, role)
    records, _ = writer.records(split, tokenizer)
    order[role] = [int(r["label_ids"]) for r in records]
  assert order["predict"] == [i % 2 for i in range(12)] and order["train"] != order["predict"]
  record = tmp_path / "train.tf_record"
  record.write_bytes(b"")
  for seed, refused in ((12345, True), (-1, False), (None, False)):
    (tmp_path / "train.meta.json").write_text(json.dumps({"cache_key": {"split": "train", "train_shuffle_seed": seed}}))
    if refused:
      with pytest.raises(ValueError, match=r"train split written in a shuffled order \(train_shuffle_seed=12345"):
        check_record_order(str(record), "GLUE sst-2 predict")
    else:
      check_record_order(str(record), "GLUE sst-2 predict")


def test_a_list_or_pattern_of_raw_tsvs_is_refused_by_name(tmp_path):
  """Review s51: `input_path=a.tsv,b.tsv` (or a glob of TSVs) went to the TFRecord reader: "corrupted record at 0"."""
  import types  # noqa: PLC0415

  from tasks.glue import data as glue_data  # noqa: PLC0415
  _write(str(tmp_path / "SST-2" / "train.tsv"), "sentence\tlabel\ngood\t1\n")
  params = types.SimpleNamespace(task_name="sst-2", predict_skip_bad_rows=None, skip_bad_rows=None,
                                 predict_split="test")
  tsv = str(tmp_path / "SST-2" / "train.tsv")
  for path in (f"{tsv},{tsv}", str(tmp_path / "SST-2" / "*.tsv")):
    with pytest.raises(ValueError, match=r"raw file\(s\) or folder\(s\) .*reads one folder or one file"):
      glue_data.raw_writer(params, types.SimpleNamespace(input_path=path, seq_length=16), "train")
  records = str(tmp_path / "a.tf_record")
  assert glue_data.raw_writer(params, types.SimpleNamespace(input_path=f"{records},{records}", seq_length=16),
                              "train") is None
