"""OpenVINO export (issue 18): the folder's contents and settings, text in through the folder gives FullTokenizer's
ids, the pipelines accept the folder, the int8 gate refuses a broken calibration, and a missing openvino package
gives an error naming the extra. That every head's IR equals the Keras model on real text (f32 ≤ 1e-4 absolute, bf16
cosine ≥ 0.999, its input names, dynamic batch and length) is the export harness's (test_export_harness.py), on
the same folders."""

import builtins
import importlib.util
import json
import os
import re

from absl import app
from absl import flags
import numpy as np
import pytest

ov = pytest.importorskip("openvino")

from official_albert import AlbertConfig  # noqa: E402
from official_albert import export_saved_model  # noqa: E402
from official_albert.checkpoints import convert as convert_lib  # noqa: E402
from official_albert.serving import openvino_export as ove  # noqa: E402
from official_albert.serving import openvino_ir  # noqa: E402
from official_albert.serving import openvino_quantize  # noqa: E402
from official_albert.serving import openvino_runtime  # noqa: E402
from official_albert.serving import pipelines  # noqa: E402
from official_albert.serving.openvino_runtime import OpenVINOExport  # noqa: E402
from official_albert.tokenization import FullTokenizer  # noqa: E402
from official_albert.tokenization import pack_ids  # noqa: E402
from tests import tiny  # noqa: E402
from tests.official_albert.serving import export_harness  # noqa: E402

SEQ = export_harness.SEQ
TEXTS = ["The quick brown fox jumps over the lazy dog.", "Naïve café — 日本語 Straße ✓ déjà vu, 1990, ok.",
         "In 1990, the library had 12 modules; by 2001 about 340, or 7%, of the files were parsed.", "short"]
PAIRS = ["Who jumps?", "What is it?", "How many modules were there in 1990?", "a second segment here"]


@pytest.fixture(scope="module")
def exports(tiny_exports):
  """{model name: (model dir, f32 IR folder, Keras model)}: the export harness's dense folders (written once per
  run; every head's IR equal to Keras is the harness's openvino_f32 / openvino_bf16 cells)."""
  return {name: (tiny_exports.models.dir(name), tiny_exports.folder("openvino_f32", name),
                 tiny_exports.models.model(name)) for name in ("encoder", "classifier", "regression", "pretrainer",
                                                               "multiple_choice")}


def _inputs(head, tokenizer):
  del tokenizer  # (the harness packs with the test SentencePiece model, as the folders' tokenizer does)
  return export_harness.inputs_for(head)


def _broken_gate_pretrainer(directory):
  """The pretrainer whose int8 MLM agreement a one-line calibration breaks (the weights this test had before the
  harness: constant-initialised weights perturbed only)."""
  import keras  # pylint: disable=g-import-not-at-top

  from official_albert.checkpoints.loading import build_model  # pylint: disable=g-import-not-at-top
  from official_albert.checkpoints.native import save_pretrained  # pylint: disable=g-import-not-at-top
  from tests.official_albert.serving.random_models import perturb_weights  # pylint: disable=g-import-not-at-top
  keras.utils.set_random_seed(107)  # (106 until each weight got its own initializer: its int8 model passed the gate)
  model = build_model("pretrainer", AlbertConfig(**tiny.MODEL), 2, 3)
  perturb_weights(model, seed=6, only_constant=True)
  save_pretrained(model, str(directory), spm_model_file=str(tiny.SPM_MODEL_FILE))
  return str(directory)


def test_export_folder_contents(exports, spm_model_file):
  _, folder, model = exports["classifier"]
  assert sorted(os.listdir(folder)) == sorted([ove.XML_NAME, ove.BIN_NAME, ove.SPM_NAME, ove.SERVING_CONFIG,
                                               ove.MODEL_CONFIG, ove.LABELS_FILE])
  settings = ove.read_export(folder)
  assert settings["head"] == "classifier" and settings["precision"] == "f32" and settings["seq_length"] == SEQ
  assert (settings["do_lower_case"], settings["tokenizer_mode"]) == (True, "hf")
  assert AlbertConfig.from_json_file(os.path.join(folder, ove.MODEL_CONFIG)) == model.config
  ir = ov.Core().read_model(os.path.join(exports["pretrainer"][1], ove.XML_NAME))
  assert ir.get_rt_info(["runtime_options", "INFERENCE_PRECISION_HINT"]).astype(str) == "bf16"
  # The precision stored in the IR is applied when the IR is compiled as it is (OpenVINO Model Server does that).
  core = ov.Core()
  if "BF16" in core.get_property("CPU", "OPTIMIZATION_CAPABILITIES"):
    assert core.compile_model(ir, "CPU").get_property("INFERENCE_PRECISION_HINT") == ov.Type.bf16
  assert not [p for p in os.listdir(os.path.dirname(folder)) if ".tmp-" in p]
  with pytest.raises(FileExistsError, match="overwrite"):
    ove.export_openvino(exports["classifier"][0], folder, head="classifier")


def test_text_in_gives_full_tokenizer_ids(exports, spm_model_file):
  """The folder's tokenizer (its spiece.model + settings) packs exactly FullTokenizer's ids."""
  tokenizer = FullTokenizer(spm_model_file)
  export = OpenVINOExport(exports["encoder"][1])
  packed = export.encode(TEXTS, PAIRS)
  for b, (a, p) in enumerate(zip(TEXTS, PAIRS)):
    row = pack_ids(tokenizer.encode_ids(a), tokenizer.encode_ids(p), packed["input_word_ids"].shape[1])
    assert packed["input_word_ids"][b].tolist() == row["input_word_ids"]
    assert packed["input_type_ids"][b].tolist() == row["input_type_ids"]
  ours = pipelines.feature_extraction(exports["encoder"][1], TEXTS)
  theirs = pipelines.feature_extraction(exports["encoder"][0], TEXTS)
  for mine, tf_row in zip(ours, theirs):
    assert mine["input_word_ids"] == tf_row["input_word_ids"] and mine["tokens"] == tf_row["tokens"]
    np.testing.assert_allclose(mine["sequence_output"], tf_row["sequence_output"], atol=1e-4, rtol=0)


def test_an_empty_pair_packs_one_segment_as_the_pipelines(exports, spm_model_file):
  """(`encode` packed a pair with no pieces `[CLS] A [SEP] [SEP]`; the pipelines pack it `[CLS] A [SEP]`, as GLUE.)"""
  packed = OpenVINOExport(exports["encoder"][1]).encode([TEXTS[0], TEXTS[0]], ["", "  "])
  row = pack_ids(FullTokenizer(spm_model_file).encode_ids(TEXTS[0]), None, packed["input_word_ids"].shape[1])
  for key in ("input_word_ids", "input_mask", "input_type_ids"):
    assert packed[key].tolist() == [row[key]] * 2, key


@pytest.mark.slow
def test_the_folder_tokenizes_as_the_directory_records(exports, tmp_path):
  """keep_accents / remove_space of the directory's tokenizer_config.json are recorded in serving_config.json and
  read back, so the folder gives the directory's ids (not accent-stripped ones)."""
  import shutil  # pylint: disable=g-import-not-at-top
  model_dir = tmp_path / "accents"
  shutil.copytree(exports["encoder"][0], model_dir)
  (model_dir / "tokenizer_config.json").write_text(json.dumps({"keep_accents": True, "remove_space": False}))
  folder = ove.export_openvino(str(model_dir), str(tmp_path / "accents_ov"), head="encoder", precision="f32",
                               seq_length=SEQ)
  settings = ove.read_export(folder)
  assert (settings["do_lower_case"], settings["keep_accents"], settings["remove_space"]) == (True, True, False)
  tokenizer = OpenVINOExport(folder).tokenizer
  assert (tokenizer.keep_accents, tokenizer.remove_space) == (True, False)
  texts = ["Naïve café, déjà vu"]
  assert ([r["input_word_ids"] for r in pipelines.feature_extraction(folder, texts)]
          == [r["input_word_ids"] for r in pipelines.feature_extraction(str(model_dir), texts)]
          != [r["input_word_ids"] for r in pipelines.feature_extraction(exports["encoder"][0], texts)])


@pytest.mark.slow
def test_multi_label_folder_classifies_with_sigmoids(exports, tmp_path):
  """A multi-label text classifier keeps its names and `multi_label` in the folder: classify on the folder gives the
  TF directory's per-label sigmoids and predicted label list (a softmax would silently mis-score it)."""
  import shutil  # pylint: disable=g-import-not-at-top
  model_dir = str(tmp_path / "multi")
  shutil.copytree(exports["classifier"][0], model_dir)
  with open(os.path.join(model_dir, "labels.json"), "w") as f:
    json.dump({"labels": ["billing", "bug", "praise"], "multi_label": True}, f)
  # (f32: the harness's weights are far from their initial ones, and bf16 moves a sigmoid by ~1e-3)
  folder = ove.export_openvino(model_dir, str(tmp_path / "multi_ov"), head="classifier", precision="f32",
                               seq_length=SEQ)
  with open(os.path.join(folder, "labels.json")) as f:
    assert json.load(f) == {"labels": ["billing", "bug", "praise"], "multi_label": True, "multi_label_threshold": 0.5}
  ours, theirs = pipelines.classify(folder, TEXTS), pipelines.classify(model_dir, TEXTS)
  for a, b in zip(ours, theirs):
    assert a.keys() == b.keys() and "labels" in a and a["labels"] == b["labels"]
    np.testing.assert_allclose(list(a["probabilities"].values()), list(b["probabilities"].values()), atol=1e-4)
  assert any(abs(sum(r["probabilities"].values()) - 1) > 0.05 for r in ours)  # sigmoids, not a softmax


def test_pipelines_accept_the_folder(exports):
  """classify (f32 folder) and fill_mask (bf16 folder) return the TF model's structure and answers."""
  model_dir, folder, _ = exports["classifier"]
  ours = pipelines.classify(folder, TEXTS, text_pairs=PAIRS)
  theirs = pipelines.classify(model_dir, TEXTS, text_pairs=PAIRS, labels=list(tiny.LABELS))
  for a, b in zip(ours, theirs):
    assert a.keys() == b.keys() and a["label"] == b["label"] and a["label_id"] == b["label_id"]
    np.testing.assert_allclose(list(a["probabilities"].values()), list(b["probabilities"].values()), atol=1e-4)
  reg = pipelines.classify(exports["regression"][1], TEXTS)
  np.testing.assert_allclose([r["score"] for r in reg], [r["score"] for r in pipelines.classify(
      exports["regression"][0], TEXTS)], atol=1e-4)
  text = "The [MASK] sat on the [MASK], 1990."
  ours = pipelines.fill_mask(exports["pretrainer"][1], text, top_k=3)
  theirs = pipelines.fill_mask(exports["pretrainer"][0], text, top_k=10)
  assert len(ours) == len(theirs) == 2
  for mine, tf_row in zip(ours, theirs):
    assert [set(p) for p in mine] == [set(p) for p in tf_row[:3]]
    # bf16 on a random model: near-tied tokens may swap, but each prediction is one of TF's with TF's score.
    tf_scores = {p["token"]: (p["score"], p["sequence"]) for p in tf_row}
    for pred in mine:
      assert pred["token"] in tf_scores and abs(pred["score"] - tf_scores[pred["token"]][0]) < 0.01
      assert pred["sequence"] == tf_scores[pred["token"]][1]
  with pytest.raises(ValueError, match="classifier export"):
    pipelines.fill_mask(folder, text)


@pytest.mark.slow
def test_binary_writes_the_folder_and_accepts_hf_dirs(exports, tmp_path, capsys):
  model_dir = exports["classifier"][0]
  hf_dir = str(tmp_path / "hf")
  convert_lib.convert("native", model_dir, "hf", hf_dir, model_type="classifier")
  fv = flags.FlagValues()
  export_saved_model.define_flags(fv)
  fv(["x", f"--model_dir={hf_dir}", f"--export_dir={tmp_path / 'ov'}", "--head=classifier", "--format=openvino",
      f"--seq_length={SEQ}"])
  export_saved_model.main([], fv)
  inputs = _inputs("classifier", FullTokenizer(os.path.join(hf_dir, "spiece.model")))
  got = ove.run_compiled(ove.compile_openvino(str(tmp_path / "ov"), precision="f32"), inputs)["logits"]
  want = ove.run_compiled(ove.compile_openvino(exports["classifier"][1], precision="f32"), inputs)["logits"]
  np.testing.assert_allclose(got, want, atol=1e-5)
  assert ove.read_export(str(tmp_path / "ov"))["precision"] == "bf16"  # the default
  # The export times its IR at both precisions here and says which one to serve with.
  advice = [line for line in capsys.readouterr().out.splitlines() if line.startswith("On this machine")]
  assert len(advice) == 1 and re.search(r"f32 [\d.]+ ms, bf16 [\d.]+ ms: (f32|bf16) is faster", advice[0]), advice


def test_time_precisions_times_every_head_shape(exports):
  for head in ("classifier", "multiple_choice"):
    ms = openvino_runtime.time_precisions(exports[head][1], repeats=2)
    assert set(ms) == {"f32", "bf16"} and all(v > 0 for v in ms.values()), (head, ms)


def _calibration_file(path, lines):
  path.write_text("\n".join(lines) + "\n", encoding="utf-8")
  return str(path)


def test_heldout_labels_of_numeric_names_are_names_only(tmp_path):
  # A 1-3 star classifier (labels.json ['1', '2', '3']). Before: '01' was read as output id 1 (class '2'), and a
  # byte-order mark or a stray space made the first label '\ufeff3' / '3 ', refused as "not a number".
  names = ["1", "2", "3"]
  path = tmp_path / "heldout.tsv"
  path.write_text("3 \tgreat\n1\tawful\n 2\tok\n", encoding="utf-8-sig")
  rows = openvino_quantize.read_rows(str(path), "classifier", None, labelled=True)
  assert [label for _, label in rows] == ["3", "1", "2"]
  assert openvino_quantize.label_values(str(path), "classifier", rows, names, None, False).tolist() == [2, 0, 1]
  path.write_text("1\tawful\n01\tawful again\n", encoding="utf-8")
  rows = openvino_quantize.read_rows(str(path), "classifier", None, labelled=True)
  with pytest.raises(ValueError, match=r"heldout\.tsv: held-out row 2: label '01' is not one of the model's label "
                                       r"names \['1', '2', '3'\]\. These names are numbers, .* Write the label as "
                                       r"labels\.json spells it"):
    openvino_quantize.label_values(str(path), "classifier", rows, names, None, False)
  with pytest.raises(ValueError, match=r"held-out row 2: label '0' is not one of the model's label names"):
    openvino_quantize.label_sets(str(path), [([""], "1|3"), ([""], "2|0")], names, 3)
  # Names that are not numbers still take an output id.
  assert openvino_quantize.label_values(str(path), "classifier", rows, ["neg", "pos"], None, False).tolist() == [1, 1]


def test_the_gate_rows_bound_label_ids_by_the_heads_outputs_and_need_enough_held_out_examples(tmp_path):
  """Without label names an id is bounded by the head's outputs (1-based ids 1-3 of a 3-way head were scored, 3 as if
  a class); one held-out example (f32 and int8 both at 0 passed the gate) or too few calibration lines are refused
  naming the file, for OpenVINO and LiteRT alike (`gate_rows`)."""
  minimum = openvino_quantize.MIN_HELDOUT_EXAMPLES
  calibration = _calibration_file(tmp_path / "cal.txt", [f"line {i}" for i in range(20)])
  heldout = _calibration_file(tmp_path / "heldout.tsv", [f"{1 + i % 3}\ttext {i}" for i in range(minimum)])
  with pytest.raises(ValueError, match=r"heldout\.tsv: label ids must be in \[0, 3\), got \[1, 2, 3\]"):
    openvino_quantize.gate_rows(calibration, heldout, "classifier", None, None, lambda: 3)
  one = _calibration_file(tmp_path / "one.tsv", ["0\ttext"])
  _, rows, _, _, source = openvino_quantize.gate_rows(calibration, one, "classifier", None, None, lambda: 3)
  batches = [{"input_word_ids": np.zeros((len(rows), 4), np.int32)}]
  with pytest.raises(ValueError, match=rf"--heldout_file .*one\.tsv: 1 held-out example\(s\); .* at least {minimum}"):
    openvino_quantize.check_heldout("classifier", batches, source=source)
  _, rows, _, _, source = openvino_quantize.gate_rows(calibration, None, "encoder", None, None, lambda: 3)
  with pytest.raises(ValueError, match=r"cal\.txt \(its every 5th line, held out\): 4 held-out example\(s\)"):
    openvino_quantize.check_heldout("encoder", [{"input_word_ids": np.zeros((len(rows), 4), np.int32)}],
                                    source=source)
  short = _calibration_file(tmp_path / "short.txt", ["a line"] * 5)
  with pytest.raises(ValueError, match=r"short\.txt: 5 non-empty lines; int8 calibration needs at least 10"):
    openvino_quantize.gate_rows(short, heldout, "classifier", None, None, lambda: 3)
  _, rows, labels, regression, _ = openvino_quantize.gate_rows(calibration, heldout, "classifier", None,
                                                               ["a", "b", "c", "d"], lambda: 4)
  assert len(rows) == minimum and not regression and labels.tolist()[:3] == [1, 2, 3]


@pytest.fixture(scope="module")
def real_lines():
  from data_prep import corpus  # pylint: disable=g-import-not-at-top
  text = corpus.python_docs_corpus_text(max_bytes=30_000)
  lines = [line.strip() for line in text.splitlines() if len(line.split()) >= 6]
  assert len(lines) >= 80
  return lines[:80]


@pytest.mark.slow
def test_int8_gate_passes_and_records(exports, real_lines, tmp_path):
  calibration = _calibration_file(tmp_path / "cal.txt", real_lines)
  folder = ove.export_openvino(exports["encoder"][0], str(tmp_path / "int8"), head="encoder", precision="int8",
                               seq_length=SEQ, calibration_file=calibration, max_accuracy_drop=0.05)
  gate = ove.read_export(folder)["int8_gate"]
  assert gate["heldout_examples"] == 16 and not gate["labelled"]
  assert gate["metrics"]["sequence_output cosine"]["int8"] > 0.95
  ir = ov.Core().read_model(os.path.join(folder, ove.XML_NAME))
  assert any(op.get_type_name() == "FakeQuantize" for op in ir.get_ops())
  out = OpenVINOExport(folder)(OpenVINOExport(folder).encode(TEXTS))
  assert out["sequence_output"].shape[:2] == (len(TEXTS), OpenVINOExport(folder).encode(TEXTS)["input_mask"].shape[1])


@pytest.mark.slow
def test_int8_gate_refuses_a_broken_calibration(exports, real_lines, tmp_path):
  """Calibrating on one repeated short line: the activation ranges miss real text, and the gate (on real held-out
  text) refuses with both numbers (the MLM top-1 agreement falls to ~0.6; a real calibration keeps ~0.99)."""
  broken = _calibration_file(tmp_path / "broken.txt", ["a"] * 40)
  heldout = _calibration_file(tmp_path / "heldout.txt", real_lines[:16])
  with pytest.raises(openvino_quantize.AccuracyGateError,
                     match=r"int8 export refused: MLM top-1 agreement on 16 held-out examples is 1\.0000 in f32 and "
                     r"0\.[0-8]\d+ in int8 .*--max_accuracy_drop"):
    ove.export_openvino(_broken_gate_pretrainer(tmp_path / "pretrainer"), str(tmp_path / "int8"), head="pretrainer",
                        precision="int8",
                        seq_length=SEQ, calibration_file=broken, heldout_file=heldout)
  assert not os.path.exists(tmp_path / "int8")
  with pytest.raises(ValueError, match="needs --calibration_file"):
    ove.export_openvino(exports["encoder"][0], str(tmp_path / "int8"), head="encoder", precision="int8")
  bad = _calibration_file(tmp_path / "bad.txt", real_lines[:20] + ["a\tb\tc"])
  with pytest.raises(ValueError, match=r"bad\.txt:21: 3 tab-separated text fields"):
    ove.export_openvino(exports["encoder"][0], str(tmp_path / "int8"), head="encoder", precision="int8",
                        seq_length=SEQ, calibration_file=bad)


@pytest.mark.slow
def test_int8_gate_of_multi_label_and_multiple_choice_heads(exports, real_lines, tmp_path):
  """A multi-label classifier's gate reads its own label names as label sets and scores the labels at its threshold
  (micro-F1; its names were refused as 'not a number'); a multiple-choice gate on context-only held-out lines (every
  choice the same sequence: any model passes) is refused before quantizing."""
  import shutil  # pylint: disable=g-import-not-at-top
  model_dir = str(tmp_path / "multi")
  shutil.copytree(exports["classifier"][0], model_dir)
  with open(os.path.join(model_dir, "labels.json"), "w") as f:
    json.dump({"labels": ["billing", "bug", "praise"], "multi_label": True}, f)
  calibration = _calibration_file(tmp_path / "cal.txt", real_lines[:40])
  heldout = _calibration_file(tmp_path / "heldout.txt", [f"{['billing|bug', 'praise', ''][i % 3]}\t{line}"
                                                         for i, line in enumerate(real_lines[40:52])])
  folder = ove.export_openvino(model_dir, str(tmp_path / "int8"), head="classifier", precision="int8",
                               seq_length=SEQ, calibration_file=calibration, heldout_file=heldout,
                               max_accuracy_drop=1.0)
  gate = ove.read_export(folder)["int8_gate"]
  assert gate["labelled"] and set(gate["metrics"]) == {"micro-F1 at the threshold"}
  with pytest.raises(ValueError, match=r"cal\.txt: 8 of the 8 held-out lines hold the context only"):
    ove.export_openvino(exports["multiple_choice"][0], str(tmp_path / "mc"), head="multiple_choice",
                        precision="int8", seq_length=SEQ, num_choices=export_harness.NUM_CHOICES,
                        calibration_file=calibration)
  assert not os.path.exists(tmp_path / "mc")


def test_missing_openvino_names_the_extra(monkeypatch, tmp_path):
  real_import = builtins.__import__

  def no_openvino(name, *args, **kwargs):
    if name == "openvino" or name.startswith("openvino."):
      raise ImportError("No module named 'openvino'")
    return real_import(name, *args, **kwargs)

  monkeypatch.setattr(builtins, "__import__", no_openvino)
  with pytest.raises(ImportError, match=r"pip install -r requirements-openvino\.txt .*official-albert\[openvino\]"):
    ove.require_openvino()
  # The binary fails at start-up, before it looks at --model_dir (which does not exist here).
  fv = flags.FlagValues()
  export_saved_model.define_flags(fv)
  fv(["x", f"--model_dir={tmp_path / 'nothing'}", f"--export_dir={tmp_path / 'out'}", "--format=openvino"])
  with pytest.raises(ImportError, match=r"requirements-openvino\.txt"):
    export_saved_model.main([], fv)


def test_without_seq_length_the_folder_packs_to_the_models_positions(exports, tmp_path):
  """docs/serving_openvino.md's command names no --seq_length: its default 128 was refused for a model of fewer
  positions (the tiny model's 64, the demo's 32); it is now cut to max_position_embeddings, and the folder records
  it."""
  model_dir, _, model = exports["encoder"]
  positions = model.config.max_position_embeddings
  assert positions < 128
  fv = flags.FlagValues()
  export_saved_model.define_flags(fv)
  fv(["x", f"--model_dir={model_dir}", f"--export_dir={tmp_path / 'ov'}", "--head=encoder", "--format=openvino",
      "--notime_precisions"])
  export_saved_model.main([], fv)
  assert ove.read_export(str(tmp_path / "ov"))["seq_length"] == positions


@pytest.mark.parametrize("fmt", ["openvino_f32", "litert"])
def test_the_folder_refuses_the_inputs_the_keras_model_refuses(tiny_exports, fmt):
  """An HF-named mask, ids past the vocabulary or the segment table and a sequence past the position table are
  refused naming the folder (OpenVINO gathered a zero row for an id past the table and answered; the mask under HF's
  name was dropped and every position attended); a squad_v2 folder needs its p_mask (an all-zero one let an answer
  start in the question)."""
  if fmt == "litert":
    pytest.importorskip("ai_edge_litert")
    from official_albert.serving.litert_runtime import LiteRTExport as Runtime  # pylint: disable=g-import-not-at-top
  else:
    Runtime = OpenVINOExport  # noqa: N806
  folder = tiny_exports.folder(fmt, "classifier")
  export = Runtime(folder)
  inputs = export_harness.inputs_for("classifier")
  assert export(inputs)["logits"].shape[0] == len(inputs["input_word_ids"])
  renamed = {"input_word_ids": inputs["input_word_ids"], "attention_mask": inputs["input_mask"]}
  with pytest.raises(KeyError, match=rf"{re.escape(folder)}: input 'attention_mask' is not read"):
    export(renamed)
  vocab_size, type_vocab_size = export.config.vocab_size, export.config.type_vocab_size
  too_big = dict(inputs, input_word_ids=np.where(np.arange(SEQ) == 1, vocab_size, inputs["input_word_ids"]))
  with pytest.raises(ValueError, match=rf"input_word_ids\[0, 1\] is {vocab_size}, outside \[0, {vocab_size}\)"):
    export(too_big)
  with pytest.raises(ValueError, match=rf"input_type_ids\[0, 0\] is {type_vocab_size}, outside"):
    export(dict(inputs, input_type_ids=np.full_like(inputs["input_type_ids"], type_vocab_size)))
  positions = export.config.max_position_embeddings
  long = {k: np.zeros((1, positions + 1), np.int32) for k in ("input_word_ids", "input_mask", "input_type_ids")}
  with pytest.raises(ValueError, match=rf"sequence length {positions + 1} exceeds max_position_embeddings"):
    export(long)
  if fmt == "openvino_f32":
    squad = OpenVINOExport(tiny_exports.folder(fmt, "squad_v2"))
    squad_inputs = export_harness.inputs_for("squad_v2")
    squad_inputs.pop("p_mask")
    with pytest.raises(KeyError, match="missing input 'p_mask'"):
      squad(squad_inputs)


def test_a_folder_compiles_at_the_precision_its_export_stored(exports):
  """compile_openvino(folder) reads the precision the export recorded in the IR (it read '<OVAny class>', so
  precision=None failed, and the default compiled an f32 folder at bf16 on a bf16 CPU)."""
  folder = exports["classifier"][1]
  assert openvino_ir.read_precision(ov.Core().read_model(os.path.join(folder, "openvino_model.xml"))) == "f32"
  for compiled in (ove.compile_openvino(folder), ove.compile_openvino(folder, precision=None)):
    assert "float32" in str(compiled.get_property("INFERENCE_PRECISION_HINT"))


def test_a_damaged_folder_is_an_error_naming_the_file_and_the_fix(tiny_exports, tmp_path):
  """A serving_config.json without its head, a .bin cut short and a cut model.tflite name their file and "re-export"
  (OpenVINO's and LiteRT's own messages name no file: "Incorrect weights in bin file!")."""
  import shutil  # pylint: disable=g-import-not-at-top
  folder = shutil.copytree(tiny_exports.folder("openvino_f32", "classifier"), tmp_path / "ov")
  config = json.loads((folder / "serving_config.json").read_text())
  (folder / "serving_config.json").write_text(json.dumps({k: v for k, v in config.items() if k != "head"}))
  with pytest.raises(ValueError, match=r"serving_config\.json: no \['head'\] .*re-export the folder"):
    OpenVINOExport(str(folder))
  (folder / "serving_config.json").write_text(json.dumps(config))
  weights = (folder / "openvino_model.bin").read_bytes()
  (folder / "openvino_model.bin").write_bytes(weights[:len(weights) // 2])
  with pytest.raises(ValueError, match=r"openvino_model\.xml: OpenVINO cannot read this IR or its \.bin .*re-export"):
    OpenVINOExport(str(folder))
  if importlib.util.find_spec("ai_edge_litert") is not None:
    from official_albert.serving.litert_runtime import LiteRTExport  # pylint: disable=g-import-not-at-top
    litert = shutil.copytree(tiny_exports.folder("litert", "classifier"), tmp_path / "litert")
    (litert / "model.tflite").write_bytes((litert / "model.tflite").read_bytes()[:1000])
    with pytest.raises(ValueError, match=r"model\.tflite: LiteRT cannot read this model file .*re-export"):
      LiteRTExport(str(litert))


@pytest.mark.parametrize("fmt", ["openvino", "litert"])
def test_options_the_folder_would_not_read_are_refused(exports, tmp_path, fmt):
  """--top_k / --pad_to_multiple_of (the SavedModel's signatures) and a calibration or held-out file without int8
  were accepted and ignored: the folder looked gated, or cut to top k."""
  model_dir = exports["classifier"][0]
  for extra in ("--top_k=3", "--pad_to_multiple_of=8"):
    fv = flags.FlagValues()
    export_saved_model.define_flags(fv)
    fv(["x", f"--model_dir={model_dir}", f"--export_dir={tmp_path / 'out'}", f"--format={fmt}", extra])
    with pytest.raises(Exception, match=rf"{extra.split('=')[0]} applies to --format=saved_model"):
      export_saved_model.main([], fv)
  for extra, message in (("--heldout_file=h.txt", r"heldout_file='h\.txt' with precision='f32'"),
                         ("--precision=int8", rf"--format={fmt} --precision=int8 needs --calibration_file")):
    fv = flags.FlagValues()
    export_saved_model.define_flags(fv)
    args = ["x", f"--model_dir={model_dir}", f"--export_dir={tmp_path / 'out'}", f"--format={fmt}", extra]
    fv(args + (["--precision=f32"] if "heldout" in extra else []))
    with pytest.raises(app.UsageError, match=message):
      export_saved_model.main([], fv)
  export = ove.export_openvino if fmt == "openvino" else __import__(
      "official_albert.serving.litert_export", fromlist=["export_litert"]).export_litert
  with pytest.raises(ValueError, match=r"heldout_file='h\.txt' with precision='f32': they apply to precision='int8'"):
    export(model_dir, str(tmp_path / "out"), "classifier", "f32", heldout_file="h.txt")
  assert not (tmp_path / "out").exists()
