"""LiteRT export (issue 32): the encoder (with its sentence embedding), classifier and multiple-choice folders run in
the pipelines with the model directory's answers; the shared block is stored once (albert-base: file ≈ 4 bytes ×
parameters); int8 passes or is refused by OpenVINO's accuracy gate. That the files equal the TF float32 model
(≤ 1e-4) at any batch and length in the `ai-edge-litert` interpreter is the export harness's (test_export_harness.py),
on the same folders."""

import os

from absl import flags
import keras
import numpy as np
import pytest

pytest.importorskip("ai_edge_litert")

from official_albert import AlbertConfig  # noqa: E402
from official_albert import export_saved_model  # noqa: E402
from official_albert import pipelines  # noqa: E402
from official_albert.checkpoints.loading import build_model  # noqa: E402
from official_albert.checkpoints.native import save_pretrained  # noqa: E402
from official_albert.serving import litert_export  # noqa: E402
from official_albert.serving.litert_runtime import LiteRTExport  # noqa: E402
from official_albert.serving.openvino_ir import ID_NAMES  # noqa: E402
from official_albert.serving.openvino_quantize import AccuracyGateError  # noqa: E402
from official_albert.tokenization import FullTokenizer  # noqa: E402
from official_albert.tokenization import pack_ids  # noqa: E402
from tests.official_albert.serving import export_harness  # noqa: E402
from tests.official_albert.serving.random_models import perturb_weights  # noqa: E402

TINY = dict(vocab_size=1000, embedding_size=16, hidden_size=64, num_hidden_layers=3, num_attention_heads=2,
            intermediate_size=128, max_position_embeddings=64)
TEXTS = ["The quick brown fox jumps over the lazy dog.", "Naïve café — 日本語 Straße ✓ déjà vu, 1990, ok.",
         "In 1990, the library had 12 modules; by 2001 about 340, or 7%, of the files were parsed.", "short"]
NUM_CHOICES = export_harness.NUM_CHOICES
HEADS = export_harness.LITERT_MODELS


@pytest.fixture(scope="module")
def model_dirs(tiny_exports):
  """{model name: (model dir, Keras model)}: the export harness's (their LiteRT folders are its litert cells)."""
  return {name: (tiny_exports.models.dir(name), tiny_exports.models.model(name)) for name in HEADS}


def _inputs(head, tokenizer, seq):
  ids = [tokenizer.encode_ids(t) for t in TEXTS]
  if head == "multiple_choice":
    rows = [[pack_ids(a, ids[(k + c) % len(ids)], seq) for c in range(NUM_CHOICES)] for k, a in enumerate(ids)]
    return {n: np.asarray([[r[n] for r in row] for row in rows], np.int32) for n in ID_NAMES}
  rows = [pack_ids(a, None, seq) for a in ids]
  return {n: np.asarray([r[n] for r in rows], np.int32) for n in ID_NAMES}


@pytest.mark.parametrize("name", ["classifier", "encoder", "multiple_choice"])
def test_pipelines_accept_the_litert_folder(tiny_exports, model_dirs, name):
  """The pipelines on the folder give the model directory's answers (the file's outputs equal to Keras at any batch
  and length are the export harness's litert cells, on the same folders)."""
  model_dir, _ = model_dirs[name]
  folder = tiny_exports.folder("litert", name)
  export = LiteRTExport(folder)
  assert export.head == export_harness.MODELS[name][0] and os.path.getsize(os.path.join(folder, "model.tflite")) > 0
  if name == "classifier":
    assert export.num_labels == 3
    got, want = pipelines.classify(folder, TEXTS), pipelines.classify(model_dir, TEXTS)
    assert [r["label"] for r in got] == [r["label"] for r in want]
    np.testing.assert_allclose([r["score"] for r in got], [r["score"] for r in want], atol=1e-4)
  if name == "encoder":
    assert "sentence_embedding" in export.output_names and export.settings["embedding"]["pooling"] == ["mean"]
    np.testing.assert_allclose(pipelines.embed(folder, TEXTS), pipelines.embed(model_dir, TEXTS), atol=1e-4)
  if name == "multiple_choice":
    got = pipelines.multiple_choice(folder, TEXTS[0], "Which one?", TEXTS[1:1 + NUM_CHOICES], max_seq_length=48,
                                    max_qa_length=20)
    want = pipelines.multiple_choice(model_dir, TEXTS[0], "Which one?", TEXTS[1:1 + NUM_CHOICES], max_seq_length=48,
                                    max_qa_length=20)
    assert got["label"] == want["label"]
    np.testing.assert_allclose(got["scores"], want["scores"], atol=1e-4)


def test_early_exit_is_refused(model_dirs, tmp_path):
  """The LiteRT file runs every row at full depth: a patience or depth is refused, not written down unrun."""
  model_dir, _ = model_dirs["classifier"]
  for options in ({"patience": 2}, {"depth": 2}):
    with pytest.raises(ValueError, match="LiteRT export runs every row at full depth"):
      litert_export.export_litert(model_dir, str(tmp_path / "lite"), "classifier", **options)


@pytest.mark.slow
def test_int8_passes_the_gate_or_is_refused(model_dirs, tmp_path):
  model_dir, _ = model_dirs["classifier"]
  calibration = tmp_path / "calibration.txt"
  calibration.write_text("\n".join(f"{t} {i}" for i in range(10) for t in TEXTS) + "\n", encoding="utf-8")
  folder = litert_export.export_litert(model_dir, str(tmp_path / "int8"), "classifier", "int8",
                                       calibration_file=str(calibration), max_accuracy_drop=0.5, seq_length=64)
  export = LiteRTExport(folder)
  gate = export.settings["int8_gate"]
  assert export.settings["weights"] == "int8" and gate["heldout_examples"] == 8
  assert set(gate["metrics"]) == {"argmax agreement with f32"}
  f32 = litert_export.export_litert(model_dir, str(tmp_path / "f32"), "classifier", seq_length=64)
  # The matmul weights are int8: the file shrinks by nearly 4x beside the float32 embedding tables.
  assert os.path.getsize(os.path.join(folder, "model.tflite")) < 0.6 * os.path.getsize(os.path.join(f32,
                                                                                                   "model.tflite"))
  with pytest.raises(AccuracyGateError, match=r"argmax agreement with f32 on 8 held-out examples"):
    litert_export.export_litert(model_dir, str(tmp_path / "refused"), "classifier", "int8",
                                calibration_file=str(calibration), max_accuracy_drop=-1.0, seq_length=64)
  assert not (tmp_path / "refused").exists()


def test_binary_and_refusals(model_dirs, tmp_path):
  model_dir, _ = model_dirs["encoder"]
  fv = flags.FlagValues()
  export_saved_model.define_flags(fv)
  fv(["export", f"--model_dir={model_dir}", f"--export_dir={tmp_path / 'lite'}", "--head=encoder", "--format=litert",
      "--pooling=cls,max", "--normalize_embeddings", "--seq_length=64"])
  export_saved_model.main([], fv)
  export = LiteRTExport(str(tmp_path / "lite"))
  assert export.settings["embedding"] == {"pooling": ["cls", "max"], "normalize": True, "max_seq_length": 64}
  vectors = pipelines.embed(str(tmp_path / "lite"), TEXTS)
  assert vectors.shape == (4, 2 * export_harness.tiny.MODEL["hidden_size"])
  assert np.allclose(np.linalg.norm(vectors, axis=-1), 1, atol=1e-5)
  with pytest.raises(ValueError, match="--format=litert exports --head=encoder | classifier | multiple_choice"):
    litert_export.export_litert(model_dir, str(tmp_path / "x"), "span", seq_length=64)
  with pytest.raises(ValueError, match="precision='bf16' is not one of"):
    litert_export.export_litert(model_dir, str(tmp_path / "x"), "encoder", "bf16", seq_length=64)
  sparse = build_model("encoder", AlbertConfig(**TINY, attention_type="block_sparse", block_size=8))
  save_pretrained(sparse, str(tmp_path / "sparse"))
  with pytest.raises(ValueError, match=r"attention_type='block_sparse'.*--attention_type=dense"):
    litert_export.export_litert(str(tmp_path / "sparse"), str(tmp_path / "x"), "encoder", seq_length=64)
  assert not (tmp_path / "x").exists()


@pytest.mark.slow
def test_albert_base_file_stores_the_shared_block_once(tmp_path, spm_model_file):
  """albert-base shape (random weights): f32 file ≤ 1.1 × 4 bytes × parameters, int8 ≤ 1.1 × 1 byte × parameters
  (the word table is int8 too: dynamic-range quantization gathers its int8 rows); outputs vs TF ≤ 1e-4."""
  config = AlbertConfig.from_preset("albert-base-v2")
  keras.utils.set_random_seed(7)
  model = build_model("classifier", config, 2)
  perturb_weights(model, seed=7)
  params = int(sum(np.prod(v.shape) for v in model.weights))
  f32 = litert_export.to_litert(model, "classifier")
  assert len(f32) <= 1.1 * 4 * params, (len(f32), params)
  int8 = litert_export.to_litert(model, "classifier", quantize=True)
  assert len(int8) <= 1.1 * params, (len(int8), params)
  interpreter = litert_export.require_litert().Interpreter(model_content=f32)
  tokenizer = FullTokenizer(spm_model_file)
  inputs = _inputs("classifier", tokenizer, 64)
  ours = interpreter.get_signature_runner()(**inputs)["logits"]
  np.testing.assert_allclose(ours, model(inputs)["logits"].numpy(), atol=1e-4, rtol=0)


def _lines(path, lines):
  path.write_text("\n".join(lines) + "\n", encoding="utf-8")
  return str(path)


def test_multi_label_gate_scores_the_labels_at_the_threshold(model_dirs, tmp_path):
  """A multi-label classifier's int8 gate reads its own label names from labels.json (they were refused as 'not a
  number') as label sets (`a|b`), and scores what the model predicts: the labels at its threshold (micro-F1 with
  the held-out sets; label-set agreement with f32 without labels), not the argmax."""
  from official_albert import model_directory as md
  model_dir = str(tmp_path / "multi")
  import shutil
  shutil.copytree(model_dirs["classifier"][0], model_dir)
  names = ["billing", "bug", "praise"]
  md.write_label_file(model_dir, md.LabelFile(names, multi_label=True, threshold=0.5, task="text_classification"))
  texts = [f"{t} {i}" for i in range(3) for t in TEXTS]
  gold = [["billing", "bug"], ["praise"], [], ["bug"]] * 3
  calibration = _lines(tmp_path / "calibration.txt", [f"{t} again" for t in texts] * 4)  # (9 held out: 8 or more)
  heldout = _lines(tmp_path / "heldout.txt", [f"{'|'.join(g)}\t{t}" for g, t in zip(gold, texts)])
  folder = litert_export.export_litert(model_dir, str(tmp_path / "int8"), "classifier", "int8",
                                       calibration_file=calibration, heldout_file=heldout, max_accuracy_drop=1.0,
                                       seq_length=64)
  gate = LiteRTExport(folder).settings["int8_gate"]
  assert gate["labelled"] and set(gate["metrics"]) == {"micro-F1 at the threshold"}
  predicted = [set(r["labels"]) for r in pipelines.classify(model_dir, texts)]  # (at labels.json's threshold)
  tp = sum(len(p & set(g)) for p, g in zip(predicted, gold))
  wrong = sum(len(p ^ set(g)) for p, g in zip(predicted, gold))
  assert gate["metrics"]["micro-F1 at the threshold"]["f32"] == pytest.approx(2 * tp / (2 * tp + wrong), abs=1e-6)
  folder = litert_export.export_litert(model_dir, str(tmp_path / "unlabelled"), "classifier", "int8",
                                       calibration_file=calibration, max_accuracy_drop=1.0, seq_length=64)
  assert set(LiteRTExport(folder).settings["int8_gate"]["metrics"]) == {"label-set agreement with f32"}
  bad = _lines(tmp_path / "bad.txt", ["billing|refund\tsome text"])
  with pytest.raises(ValueError, match=r"bad\.txt: held-out row 1: label 'refund' is not one of \['billing', 'bug', "
                                       r"'praise'\] \(a multi-label row's labels are joined by '\|'\)"):
    litert_export.export_litert(model_dir, str(tmp_path / "x"), "classifier", "int8", calibration_file=calibration,
                                heldout_file=bad, seq_length=64)


def test_multiple_choice_gate_refuses_context_only_lines(model_dirs, tmp_path):
  """Context-only held-out lines make every choice of a row the same sequence: any model (f32 and int8 alike) picks
  choice 0 and the gate passed whatever int8 computed; it now asks for the choices."""
  model_dir, _ = model_dirs["multiple_choice"]
  contexts = [f"{t} story {i}" for i in range(4) for t in TEXTS]
  context_only = _lines(tmp_path / "contexts.txt", contexts)
  with pytest.raises(ValueError, match=r"contexts\.txt: 3 of the 3 held-out lines hold the context only; the "
                                       r"multiple-choice int8 gate needs the choices"):
    litert_export.export_litert(model_dir, str(tmp_path / "int8"), "multiple_choice", "int8",
                                calibration_file=context_only, max_accuracy_drop=1.0, seq_length=64,
                                num_choices=NUM_CHOICES)
  assert not (tmp_path / "int8").exists()
  # Context-only lines still calibrate when the held-out lines have their choices.
  heldout = _lines(tmp_path / "heldout.txt", [f"{i % NUM_CHOICES}\t{c}" + "".join(
      f"\t{TEXTS[(i + k) % len(TEXTS)]}" for k in range(NUM_CHOICES)) for i, c in enumerate(contexts[:8])])
  folder = litert_export.export_litert(model_dir, str(tmp_path / "int8"), "multiple_choice", "int8",
                                       calibration_file=context_only, heldout_file=heldout, max_accuracy_drop=1.0,
                                       seq_length=64, num_choices=NUM_CHOICES)
  assert set(LiteRTExport(folder).settings["int8_gate"]["metrics"]) == {"accuracy"}


def test_without_seq_length_the_folder_packs_to_the_models_positions(model_dirs, tmp_path):
  """docs/litert.md's command names no --seq_length: its default 128 was refused for a model of fewer positions
  (the tiny model's 64, the demo's 32); it is now cut to max_position_embeddings, and the folder records it."""
  model_dir, model = model_dirs["encoder"]
  positions = model.config.max_position_embeddings
  assert positions < 128
  fv = flags.FlagValues()
  export_saved_model.define_flags(fv)
  fv(["export", f"--model_dir={model_dir}", f"--export_dir={tmp_path / 'lite'}", "--head=encoder", "--format=litert"])
  export_saved_model.main([], fv)
  settings = LiteRTExport(str(tmp_path / "lite")).settings
  assert settings["seq_length"] == settings["embedding"]["max_seq_length"] == positions
