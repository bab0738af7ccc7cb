"""Early exit served: SavedModel and OpenVINO exports at a patience or depth fixed at export, and
`pipelines.classify(..., patience=N)`, each equal to the in-process model; patience 0 is today's export bit for bit."""

import importlib.util
import logging
import os
import shutil

import numpy as np
import pytest
import tensorflow as tf

from official_albert import AlbertConfig
from official_albert import pipelines
from official_albert.checkpoints.loading import build_model
from official_albert.checkpoints.loading import load_model
from official_albert.checkpoints.native import save_pretrained
from official_albert.modeling import early_exit
from official_albert.serving import export
from official_albert.tokenization import FullTokenizer
from tests import tiny

SPM = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(__file__))), "fixtures", "test_spm.model")
LAYERS = 5
TINY = dict(tiny.MODEL, num_hidden_layers=LAYERS, max_position_embeddings=32)
TEXTS = ["the invoice is wrong", "it crashes on start", "great work", "a", "nothing works at all", "thanks",
         "the app is slow", "best support ever"]
IDS = ("input_word_ids", "input_mask", "input_type_ids")


@pytest.fixture(scope="module")
def dirs(tmp_path_factory):
  """A classifier with exit heads and the same weights without them (native directories with spiece.model), and
  copies of both without spiece.model (`*_ids`: their exports have the id signatures only, in a third of the time,
  for the checks that read only those or only the export's warning)."""
  root = tmp_path_factory.mktemp("early_exit_serving")
  model = tiny.exit_head_classifier(_packed(), scale=100.0, spread=50.0, **TINY)
  save_pretrained(model, str(root / "with"), spm_model_file=SPM)
  plain = build_model("classifier", AlbertConfig(**TINY), num_labels=3)
  for source, target in zip(model.encoder.weights + model.classifier.weights,
                            plain.encoder.weights + plain.classifier.weights):
    target.assign(source)
  save_pretrained(plain, str(root / "without"), spm_model_file=SPM)
  for name in ("with", "without"):
    shutil.copytree(root / name, root / f"{name}_ids", ignore=shutil.ignore_patterns("spiece.model"))
  return root


def _packed(texts=TEXTS):
  tokenizer = FullTokenizer(SPM)
  ids = tokenizer.encode_ids_batch(texts)
  from official_albert.tokenization import pack_ids
  length = max(len(a) for a in ids) + 2
  rows = [pack_ids(a, None, length) for a in ids]
  return {k: np.asarray([r[k] for r in rows], np.int32) for k in IDS}


def _export(dirs, name, **options):
  path = str(dirs / f"export_{name}")
  if not os.path.exists(path):
    export.export_from_model_dir(str(dirs / options.pop("source", "with")), path, head="classifier", seq_length=24,
                                 pad_to_multiple_of=0, **options)
  return tf.saved_model.load(path)


@pytest.mark.slow
def test_patience_off_export_is_todays_bit_for_bit(dirs):
  x = _packed()
  plain = _export(dirs, "plain", source="without").signatures["from_ids"](**{k: tf.constant(v) for k, v in x.items()})
  served = _export(dirs, "p0").signatures["from_ids"](**{k: tf.constant(v) for k, v in x.items()})
  for key in ("logits", "pooled_output"):
    np.testing.assert_array_equal(served[key].numpy(), plain[key].numpy())
  np.testing.assert_array_equal(served["exit_iteration"].numpy(), [LAYERS] * len(TEXTS))
  text = _export(dirs, "p0").signatures["serving_default"](text=tf.constant(TEXTS))
  text_plain = _export(dirs, "plain").signatures["serving_default"](text=tf.constant(TEXTS))
  assert set(text) == set(text_plain)
  for key in text_plain:
    np.testing.assert_array_equal(text[key].numpy(), text_plain[key].numpy())


@pytest.mark.slow
def test_patience_export_round_trip_equals_the_in_process_model(dirs):
  model, _ = load_model(str(dirs / "with"), "classifier")
  x = _packed()
  expected = model(x, patience=1)
  assert len(set(expected["exit_iteration"].numpy())) >= 2
  served = _export(dirs, "p1", patience=1)
  out = served.signatures["from_ids"](**{k: tf.constant(v) for k, v in x.items()})
  np.testing.assert_array_equal(out["exit_iteration"].numpy(), expected["exit_iteration"].numpy())
  # (heads 100x their init: float32 round-off of graph vs eager kernels shows at 1e-5)
  np.testing.assert_allclose(out["logits"].numpy(), expected["logits"].numpy(), rtol=1e-4, atol=1e-4)
  text = served.signatures["serving_default"](text=tf.constant(TEXTS))
  np.testing.assert_array_equal(text["exit_iteration"].numpy(), expected["exit_iteration"].numpy())
  np.testing.assert_array_equal(text["predictions"].numpy(), np.argmax(expected["logits"].numpy(), -1))
  # classify on the SavedModel folder: each row's exit iteration; its patience is the export's.
  answers = pipelines.classify(str(dirs / "export_p1"), TEXTS)
  assert [a["exit_iteration"] for a in answers] == [int(e) for e in expected["exit_iteration"].numpy()]
  with pytest.raises(ValueError, match="fixed at its export"):
    pipelines.classify(str(dirs / "export_p1"), TEXTS, patience=2)
  with pytest.raises(ValueError, match="packed length are fixed at its export"):  # (it was ignored, silently)
    pipelines.classify(str(dirs / "export_p1"), TEXTS, seq_length=16)


@pytest.mark.slow
def test_depth_export_equals_the_in_process_model(dirs):
  model, _ = load_model(str(dirs / "without"), "classifier")
  x = _packed()
  out = _export(dirs, "d2", source="without_ids", depth=2).signatures["from_ids"](
      **{k: tf.constant(v) for k, v in x.items()})
  # (The export's graph runs oneDNN's fused kernels, the eager call the plain ones: 3.5e-5 relative apart on an AMX
  # Xeon, within 1e-5 on the EPYCs.)
  np.testing.assert_allclose(out["logits"].numpy(), model(x, depth=2)["logits"].numpy(), rtol=5e-5, atol=1e-5)
  np.testing.assert_array_equal(out["exit_iteration"].numpy(), [2] * len(TEXTS))


def test_patience_needs_exit_heads_and_a_sequence_head(dirs, tmp_path):
  with pytest.raises(ValueError, match="no exit heads"):
    export.export_from_model_dir(str(dirs / "without"), str(tmp_path / "x"), head="classifier", patience=2)
  with pytest.raises(ValueError, match="patience / depth apply to"):
    export.export_from_model_dir(str(dirs / "with"), str(tmp_path / "y"), head="encoder", patience=2)


@pytest.mark.slow
def test_classify_with_patience_returns_each_rows_exit_iteration(dirs):
  model, _ = load_model(str(dirs / "with"), "classifier")
  full = pipelines.classify(str(dirs / "with"), TEXTS, batch_size=3)
  plain = pipelines.classify(str(dirs / "without"), TEXTS, batch_size=3)
  for a, b in zip(full, plain):
    assert a == b and a["exit_iteration"] == LAYERS  # today's fields, bit for bit, plus the exit iteration
  early = pipelines.classify(str(dirs / "with"), TEXTS, batch_size=3, patience=1)
  expected = [model(_packed([t]), patience=1) for t in TEXTS]  # each text alone
  for result, alone in zip(early, expected):
    assert result["exit_iteration"] == int(alone["exit_iteration"][0])
    assert result["label_id"] == int(np.argmax(alone["logits"].numpy()[0]))
    assert set(result) == set(full[0])
  shallow = pipelines.classify(str(dirs / "without"), TEXTS, depth=2)
  assert {r["exit_iteration"] for r in shallow} == {2}
  with pytest.raises(ValueError, match="needs exit heads"):
    pipelines.classify(str(dirs / "without"), TEXTS, patience=1)


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("openvino") is None, reason="openvino is not installed")
def test_openvino_export_with_patience_and_depth(dirs):
  from official_albert.serving import openvino_export
  folder = openvino_export.export_openvino(str(dirs / "with"), str(dirs / "ov_p1"), head="classifier",
                                           precision="f32", seq_length=24, patience=1)
  ov = pipelines.classify(folder, TEXTS, batch_size=4)
  tf_results = pipelines.classify(str(dirs / "with"), TEXTS, batch_size=4, patience=1)
  assert [r["exit_iteration"] for r in ov] == [r["exit_iteration"] for r in tf_results]
  assert [r["label"] for r in ov] == [r["label"] for r in tf_results]
  for a, b in zip(ov, tf_results):
    assert a["score"] == pytest.approx(b["score"], abs=1e-4)
  with pytest.raises(ValueError, match="exported with patience=1"):
    pipelines.classify(folder, TEXTS, patience=2)
  depth_folder = openvino_export.export_openvino(str(dirs / "without"), str(dirs / "ov_d3"), head="classifier",
                                                 precision="f32", seq_length=24, depth=3)
  shallow = pipelines.classify(depth_folder, TEXTS)
  assert {r["exit_iteration"] for r in shallow} == {3}
  assert [r["label"] for r in shallow] == [r["label"] for r in pipelines.classify(str(dirs / "without"), TEXTS,
                                                                                  depth=3)]


@pytest.mark.slow
def test_a_patience_that_can_never_trigger_is_warned(dirs, caplog, tmp_path):
  """A row leaves early only with patience <= L - 2 (its count of unchanged iterations is at most i - 1 after
  iteration i): patience 100 (or L - 1) on this L = 5 model runs every text at full depth, with a warning."""
  assert early_exit.unreachable_patience(LAYERS - 2, LAYERS) is None
  with caplog.at_level(logging.WARNING):
    results = pipelines.classify(str(dirs / "with"), TEXTS, patience=LAYERS - 1)
  assert {r["exit_iteration"] for r in results} == {LAYERS}
  assert f"patience={LAYERS - 1} can never end a row early on a model of {LAYERS} iterations" in caplog.text
  caplog.clear()
  with caplog.at_level(logging.WARNING):
    pipelines.classify(str(dirs / "with"), TEXTS[:1], patience=100)
    export.export_from_model_dir(str(dirs / "with_ids"), str(tmp_path / "x"), head="classifier", seq_length=24,
                                 patience=100)
  assert caplog.text.count("patience=100 can never end a row early") == 2 and "export: patience=100" in caplog.text
  caplog.clear()
  with caplog.at_level(logging.WARNING):
    pipelines.classify(str(dirs / "with"), TEXTS[:1], patience=LAYERS - 2)
  assert "can never end" not in caplog.text


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("openvino") is None, reason="openvino is not installed")
def test_the_openvino_export_warns_of_a_patience_that_can_never_trigger(dirs, caplog, tmp_path):
  """Issue 44: the OpenVINO export, like the SavedModel one, converts a patience no row can reach (>= L - 1) with a
  warning naming it (the IR runs every row at full depth); a reachable one is converted without it."""
  from official_albert.serving import openvino_export
  with caplog.at_level(logging.WARNING):
    folder = openvino_export.export_openvino(str(dirs / "with"), str(tmp_path / "ov_p100"), head="classifier",
                                             precision="f32", seq_length=24, patience=100)
  assert f"export: patience=100 can never end a row early on a model of {LAYERS} iterations" in caplog.text
  assert {r["exit_iteration"] for r in pipelines.classify(folder, TEXTS[:3])} == {LAYERS}
  caplog.clear()
  model = load_model(str(dirs / "with"), "classifier")[0]
  with caplog.at_level(logging.WARNING):
    openvino_export.to_openvino_model(model, "classifier", patience=LAYERS - 2)
  assert "can never end" not in caplog.text


def test_the_litert_export_refuses_any_patience_naming_the_formats_that_take_it(dirs, tmp_path):
  """Issue 44: LiteRT converts no early exit, so a patience (reachable or not) is refused, never written down
  unrun: the error names the formats that serve it. Needs no LiteRT runtime (refused before it is imported)."""
  from official_albert.serving import litert_export
  for patience in (1, 100):
    with pytest.raises(ValueError, match=rf"patience={patience}, depth=None: the LiteRT export runs every row at "
                                         r"full depth.*--format=saved_model or --format=openvino"):
      litert_export.export_litert(str(dirs / "with"), str(tmp_path / f"lite_{patience}"), head="classifier",
                                  seq_length=24, patience=patience)


def test_a_multi_label_exit_compares_label_sets_at_the_models_threshold(tmp_path):
  """classify's `threshold` picks the labels shown; the exit rule stays at labels.json's threshold, as the model's
  exports do (the display threshold moved the exit, and the probabilities with it)."""
  from official_albert import model_directory as md  # noqa: PLC0415
  tf.keras.utils.set_random_seed(7)
  model = build_model("classifier", AlbertConfig(vocab_size=1000, embedding_size=16, hidden_size=32,
                                                 num_hidden_layers=4, num_attention_heads=2, intermediate_size=64,
                                                 max_position_embeddings=64), 3, None, True)
  for head, bias in zip(early_exit.exit_heads(model) + [model.classifier], (-0.5, 0.5, 1.0, 2.0)):
    head.output_weights.assign(np.zeros(head.output_weights.shape, "float32"))
    head.output_bias.assign(np.array([bias, -5, -5], "float32"))  # label a: off, on, on, on across iterations
  save_pretrained(model, str(tmp_path), spm_model_file=SPM)
  md.write_label_file(str(tmp_path), md.LabelFile(["a", "b", "c"], multi_label=True, threshold=0.5))
  answers = {t: pipelines.classify(str(tmp_path), ["a text"], patience=1, threshold=t)[0] for t in (None, 0.2, 0.8)}
  assert {a["exit_iteration"] for a in answers.values()} == {3}
  assert answers[0.2]["probabilities"] == answers[None]["probabilities"] == answers[0.8]["probabilities"]


@pytest.mark.parametrize("exit_threshold", [0.0, -1.0, float("nan")])
def test_a_regression_exit_threshold_that_never_exits_is_refused(tmp_path, exit_threshold):
  """0, a negative or NaN silently turned early exit off for a regression head."""
  tf.keras.utils.set_random_seed(7)
  model = build_model("classifier", AlbertConfig(vocab_size=1000, embedding_size=16, hidden_size=32,
                                                 num_hidden_layers=4, num_attention_heads=2, intermediate_size=64,
                                                 max_position_embeddings=64), 1, None, True)
  save_pretrained(model, str(tmp_path), spm_model_file=SPM)
  with pytest.raises(ValueError, match="must be a finite number > 0"):
    pipelines.classify(str(tmp_path), ["a text"], patience=1, exit_threshold=exit_threshold)


def test_an_exit_threshold_the_call_does_not_use_is_warned(dirs, caplog):
  """exit_threshold rules a regression head's exit under patience; elsewhere it was accepted and did nothing."""
  with caplog.at_level(logging.WARNING):
    pipelines.classify(str(dirs / "with"), ["a text"], exit_threshold=0.5)
  assert "does not use it" in caplog.text
