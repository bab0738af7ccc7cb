"""KerasHub presets ↔ native: AlbertBackbone / AlbertTextClassifier / AlbertMaskedLM with random weights convert to
our models with the same outputs (1e-5), and back to presets KerasHub loads with the same weights and outputs.

keras-hub 0.32 is the oracle (requirements-keras-hub.txt); reading a preset needs only h5py, writing needs keras-hub.
"""

import json
import os
import shutil

from absl import flags
import keras
import numpy as np
import pytest

from official_albert import AlbertConfig
from official_albert import convert_checkpoint
from official_albert import model_directory as md
from official_albert.checkpoints import convert as convert_lib
from official_albert.checkpoints import keras_hub_preset
from official_albert.checkpoints import loading
from official_albert.checkpoints.sentence_transformers_folder import EmbeddingSettings
from official_albert.checkpoints.sentence_transformers_folder import read_embedding_settings
from official_albert.checkpoints.sentence_transformers_folder import write_embedding_settings
from official_albert.checkpoints.sentence_transformers_folder import write_tokenizer_options
from tests import tiny
from tests.official_albert.inputs import padded_pair_inputs

keras_hub = pytest.importorskip("keras_hub")

# Two groups of two inner blocks, E != H (the projection), dropout on (inactive at inference).
BACKBONE = dict(vocabulary_size=120, num_layers=4, num_heads=2, embedding_dim=8, hidden_dim=16, intermediate_dim=24,
                num_groups=2, num_inner_repetitions=2, dropout=0.1, max_sequence_length=32)


def _perturb(model, seed):
  """Seeded noise on every variable, so LayerNorms and biases are not 1/0 and a swapped tensor shows."""
  rng = np.random.default_rng(seed)
  for variable in model.weights:
    value = np.asarray(variable.numpy())
    variable.assign(value + 0.1 * rng.standard_normal(value.shape).astype(value.dtype))


def _inputs(vocab=120):
  return padded_pair_inputs(vocab=vocab, seed=3, low=4)


def _kh_feed(data):
  """Our input names → KerasHub's."""
  return {"token_ids": data["input_word_ids"], "padding_mask": data["input_mask"],
          "segment_ids": data["input_type_ids"]}


def _weights_by_path(model):
  return {v.path: np.asarray(v.numpy()) for v in model.weights}


@pytest.mark.parametrize("embedding_dim", [8, 16])
def test_backbone_to_native_and_back(tmp_path, embedding_dim):
  backbone = keras_hub.models.AlbertBackbone(**dict(BACKBONE, embedding_dim=embedding_dim))
  _perturb(backbone, seed=1)
  if embedding_dim == 16:  # E == H: ALBERT has no projection, so only an identity one converts
    backbone.get_layer("embedding_projection").kernel.assign(np.eye(16, dtype="float32"))
    backbone.get_layer("embedding_projection").bias.assign(np.zeros(16, "float32"))
  backbone.save_to_preset(str(tmp_path / "preset"))
  assert md.detect_format(str(tmp_path / "preset")) == "keras_hub"
  summary = convert_lib.convert("keras_hub", str(tmp_path / "preset"), "native", str(tmp_path / "native"))
  assert summary["model_type"] == "encoder" and summary["missing_allowed"] == []
  encoder, _ = loading.load_model(str(tmp_path / "native"), "encoder")
  assert encoder.config.hidden_dropout_prob == 0.1 and encoder.config.num_hidden_groups == 2
  data = _inputs()
  theirs = backbone(_kh_feed(data))
  ours = encoder(data)
  for name in ("sequence_output", "pooled_output"):
    np.testing.assert_allclose(np.asarray(ours[name]), np.asarray(theirs[name]), atol=1e-5, rtol=0, err_msg=name)
  # And back: KerasHub loads our preset with the very same weights.
  back = convert_lib.convert("native", str(tmp_path / "native"), "keras_hub", str(tmp_path / "preset_out"))
  assert back["excluded"] == {}
  reloaded = keras_hub.models.AlbertBackbone.from_preset(str(tmp_path / "preset_out"))
  original = _weights_by_path(backbone)
  for path, value in _weights_by_path(reloaded).items():
    assert value.tobytes() == original[path].tobytes(), path
  np.testing.assert_allclose(np.asarray(reloaded(_kh_feed(data))["sequence_output"]),
                             np.asarray(theirs["sequence_output"]), atol=1e-6, rtol=0)


@pytest.mark.slow
def test_text_classifier_with_tokenizer_to_native_and_back(tmp_path, spm_model_file):
  backbone = keras_hub.models.AlbertBackbone(**dict(BACKBONE, vocabulary_size=1000))
  tokenizer = keras_hub.models.AlbertTokenizer(proto=spm_model_file)
  preprocessor = keras_hub.models.AlbertTextClassifierPreprocessor(tokenizer, sequence_length=16)
  classifier = keras_hub.models.AlbertTextClassifier(backbone, num_classes=3, dropout=0.2, preprocessor=preprocessor)
  _perturb(classifier, seed=2)
  classifier.save_to_preset(str(tmp_path / "preset"))
  summary = convert_lib.convert("keras_hub", str(tmp_path / "preset"), "native", str(tmp_path / "native"))
  assert summary["model_type"] == "classifier"
  assert (tmp_path / "native" / md.SPM_FILE).read_bytes() == open(spm_model_file, "rb").read()
  model, _ = loading.load_model(str(tmp_path / "native"), "classifier")
  assert model.num_labels == 3 and model.config.classifier_dropout_prob == 0.2
  data = _inputs(vocab=1000)
  theirs = np.asarray(classifier(_kh_feed(data)))  # (called: predict would run the text preprocessor)
  np.testing.assert_allclose(np.asarray(model(data)["logits"]), theirs, atol=1e-5, rtol=0)
  # Back to a preset: KerasHub's from_preset gives the classifier and its text preprocessing.
  convert_lib.convert("native", str(tmp_path / "native"), "keras_hub", str(tmp_path / "preset_out"),
                      model_type="classifier")
  assert os.path.exists(tmp_path / "preset_out" / md.KERAS_HUB_SPM_FILE)
  reloaded = keras_hub.models.AlbertTextClassifier.from_preset(str(tmp_path / "preset_out"))
  np.testing.assert_allclose(np.asarray(reloaded(_kh_feed(data))), theirs, atol=1e-6, rtol=0)
  texts = ["the quick brown fox", "jumps over the lazy dog"]
  np.testing.assert_allclose(np.asarray(reloaded.predict(texts, verbose=0)),
                             np.asarray(classifier.predict(texts, verbose=0)), atol=1e-6, rtol=0)


def test_masked_lm_weights_convert_exactly(tmp_path):
  """AlbertMaskedLM ↔ pretrainer: every weight exact both ways; the SOP head is reported as absent / left out, and the
  MLM logits differ only through KerasHub's MLM LayerNorm epsilon (1e-5, ALBERT's 1e-12)."""
  backbone = keras_hub.models.AlbertBackbone(**BACKBONE)
  masked_lm = keras_hub.models.AlbertMaskedLM(backbone)
  _perturb(masked_lm, seed=4)
  masked_lm.save_to_preset(str(tmp_path / "preset"))
  summary = convert_lib.convert("keras_hub", str(tmp_path / "preset"), "native", str(tmp_path / "native"))
  assert summary["model_type"] == "pretrainer"
  assert summary["missing_allowed"] == ["cls/seq_relationship/output_bias", "cls/seq_relationship/output_weights"]
  back = convert_lib.convert("native", str(tmp_path / "native"), "keras_hub", str(tmp_path / "preset_out"))
  assert set(back["excluded"]) >= {"cls/seq_relationship/output_bias", "cls/seq_relationship/output_weights"}
  reloaded = keras_hub.models.AlbertMaskedLM.from_preset(str(tmp_path / "preset_out"))
  original = _weights_by_path(masked_lm)
  for path, value in _weights_by_path(reloaded).items():
    assert value.tobytes() == original[path].tobytes(), path
  model, _ = loading.load_model(str(tmp_path / "native"), "pretrainer")
  data = _inputs()
  positions = np.array([[1, 3, 5], [0, 2, 4]], "int32")
  theirs = np.asarray(masked_lm({**_kh_feed(data), "mask_positions": positions}))
  ours = np.asarray(model({**data, "masked_lm_positions": positions})["mlm_logits"])
  scale = np.abs(theirs).max()
  assert np.abs(ours - theirs).max() < 1e-2 * scale  # the epsilon's effect, not a wrong weight
  assert (ours.argmax(-1) == theirs.argmax(-1)).all()


@pytest.mark.slow
def test_what_keras_hub_cannot_hold_is_refused_by_name(tmp_path):
  from official_albert import save_pretrained
  for config, model_type, message in [
      (AlbertConfig(vocab_size=50, embedding_size=8, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                    intermediate_size=24, hidden_act="relu"), "encoder", "hidden_act='relu'"),
      (AlbertConfig(vocab_size=50, embedding_size=8, hidden_size=16, num_hidden_layers=3, num_hidden_groups=2,
                    num_attention_heads=2, intermediate_size=24), "encoder", "not divisible by num_hidden_groups"),
      (AlbertConfig(vocab_size=50, embedding_size=8, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                    intermediate_size=24), "span", "KerasHub has no ALBERT class"),
  ]:
    model = loading.build_model(model_type, config)
    directory = tmp_path / f"{model_type}_{config.hidden_act}_{config.num_hidden_layers}"
    save_pretrained(model, str(directory))
    with pytest.raises(keras_hub_preset.KerasHubPresetError, match=message):
      convert_lib.convert("native", str(directory), "keras_hub", str(tmp_path / "out"), model_type=model_type)
    assert not (tmp_path / "out").exists()


def test_non_dense_attention_is_refused_and_unknown_fields_travel(tmp_path):
  """A config field KerasHub has no key for comes back unchanged through official_albert_config.json; an attention
  type KerasHub cannot compute (block-sparse, when the config has one) is refused before anything is written."""
  config = AlbertConfig(vocab_size=50, embedding_size=8, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=24, initializer_range=0.05, attention_probs_dropout_prob=0.05, eos_token_id=7)
  model = loading.build_model("encoder", config)
  from official_albert import save_pretrained
  save_pretrained(model, str(tmp_path / "native"))
  convert_lib.convert("native", str(tmp_path / "native"), "keras_hub", str(tmp_path / "preset"))
  convert_lib.convert("keras_hub", str(tmp_path / "preset"), "native", str(tmp_path / "native2"))
  assert AlbertConfig.from_json_file(str(tmp_path / "native2" / md.CONFIG_FILE)) == config
  if "attention_type" in {f for f in AlbertConfig.__dataclass_fields__}:
    sparse = config.replace(attention_type="block_sparse")
    with pytest.raises(keras_hub_preset.KerasHubPresetError, match="attention_type='block_sparse'"):
      keras_hub_preset.check_expressible(sparse, "encoder")


def test_damaged_presets_are_named_errors(tmp_path):
  backbone = keras_hub.models.AlbertBackbone(**BACKBONE)
  backbone.save_to_preset(str(tmp_path / "preset"))
  weights = tmp_path / "preset" / md.KERAS_HUB_WEIGHTS_FILE
  data = weights.read_bytes()
  weights.write_bytes(data[:len(data) // 3])
  with pytest.raises(keras_hub_preset.KerasHubPresetError, match=r"model\.weights\.h5.*(truncated|damaged)"):
    convert_lib.convert("keras_hub", str(tmp_path / "preset"), "native", str(tmp_path / "out"))
  # Another KerasHub model's preset.
  shutil.rmtree(tmp_path / "preset")
  keras_hub.models.BertBackbone(vocabulary_size=30, num_layers=1, num_heads=2, hidden_dim=8, intermediate_dim=16,
                                max_sequence_length=8).save_to_preset(str(tmp_path / "preset"))
  with pytest.raises(keras_hub_preset.KerasHubPresetError, match="class_name 'BertBackbone'"):
    convert_lib.convert("keras_hub", str(tmp_path / "preset"), "native", str(tmp_path / "out"))
  # E == H with a projection that is not the identity cannot be represented.
  shutil.rmtree(tmp_path / "preset")
  square = keras_hub.models.AlbertBackbone(**dict(BACKBONE, embedding_dim=16))
  _perturb(square, seed=5)
  square.save_to_preset(str(tmp_path / "preset"))
  with pytest.raises(keras_hub_preset.KerasHubPresetError, match="is not the identity"):
    convert_lib.convert("keras_hub", str(tmp_path / "preset"), "native", str(tmp_path / "out"))
  config = json.loads((tmp_path / "preset" / md.CONFIG_FILE).read_text())
  assert config["class_name"] == "AlbertBackbone"
  # 22 unshared layers: layer 15 runs group 15 in KerasHub and group 14 by int(l / L * G); it loaded, other outputs.
  config["config"].update(num_layers=22, num_groups=22)
  (tmp_path / "preset" / md.CONFIG_FILE).write_text(json.dumps(config))
  with pytest.raises(keras_hub_preset.KerasHubPresetError, match=r"layers \[15\] run another group in KerasHub"):
    keras_hub_preset.preset_config(str(tmp_path / "preset"))


@pytest.mark.slow
def test_binary_commands_of_the_docs(tmp_path, capsys):
  """docs/conversion.md's two commands: a classifier preset → native, and native → preset (--model_type named)."""
  classifier = keras_hub.models.AlbertTextClassifier(keras_hub.models.AlbertBackbone(**BACKBONE), num_classes=2)
  _perturb(classifier, seed=6)
  classifier.save_to_preset(str(tmp_path / "preset"))
  for args in (["--input_format=keras_hub", f"--input={tmp_path / 'preset'}", "--output_format=native",
                f"--output_dir={tmp_path / 'native'}"],
               ["--input_format=native", f"--input={tmp_path / 'native'}", "--output_format=keras_hub",
                f"--output_dir={tmp_path / 'preset_out'}", "--model_type=classifier"]):
    fv = flags.FlagValues()
    convert_checkpoint.define_flags(fv)
    fv(["convert"] + args)
    convert_checkpoint.main([], fv)
    assert "(model_type=classifier)" in capsys.readouterr().out
  reloaded = keras_hub.models.AlbertTextClassifier.from_preset(str(tmp_path / "preset_out"))
  data = _kh_feed(_inputs())
  np.testing.assert_array_equal(np.asarray(reloaded(data)), np.asarray(classifier(data)))


def test_preset_written_over_another_keeps_none_of_its_files(tmp_path):
  """An encoder preset written into a folder that held a classifier preset: the old task.json / head / preprocessor
  go, so the folder reads back as the new encoder (not the new backbone with the old head)."""
  tiny.save_model_dir(tmp_path / "classifier", "classifier", 3)
  tiny.save_model_dir(tmp_path / "encoder", "encoder")
  out = tmp_path / "preset"
  convert_lib.convert("native", str(tmp_path / "classifier"), "keras_hub", str(out), model_type="classifier")
  assert keras_hub_preset.preset_model_type(str(out)) == "classifier"
  summary = convert_lib.convert("native", str(tmp_path / "encoder"), "keras_hub", str(out), model_type="encoder")
  assert keras_hub_preset.preset_model_type(str(out)) == "encoder"
  assert {md.KERAS_HUB_TASK_FILE, md.KERAS_HUB_TASK_WEIGHTS_FILE, md.KERAS_HUB_PREPROCESSOR_FILE} <= set(
      summary["removed"])
  assert not any((out / name).exists() for name in (md.KERAS_HUB_TASK_FILE, md.KERAS_HUB_TASK_WEIGHTS_FILE,
                                                    md.KERAS_HUB_PREPROCESSOR_FILE))
  assert isinstance(keras_hub.models.Backbone.from_preset(str(out)), keras_hub.models.AlbertBackbone)


def test_summary_says_the_preset_does_not_lower_case(tmp_path):
  """KerasHub's tokenizer neither lower-cases nor strips accents: a model trained with ALBERT's defaults gets the
  warning in the summary; a cased model that keeps accents (its tokenizer_config.json) does not. Neither has the
  digit-comma re-split nor the quote normalisation, whatever the options: every summary says so."""
  tiny.save_model_dir(tmp_path / "uncased", "encoder")
  summary = convert_lib.convert("native", str(tmp_path / "uncased"), "keras_hub", str(tmp_path / "p1"))
  assert "lower-cases and strips accents" in summary["excluded"]["preprocessor (text normalisation)"]
  assert "not written: preprocessor (text normalisation)" in convert_lib.format_summary(summary)
  tiny.save_model_dir(tmp_path / "cased", "encoder")
  write_tokenizer_options(str(tmp_path / "cased"), {"do_lower_case": False, "keep_accents": True})
  summary = convert_lib.convert("native", str(tmp_path / "cased"), "keras_hub", str(tmp_path / "p2"))
  assert "preprocessor (text normalisation)" not in summary["excluded"]
  assert "digit-comma re-split" in summary["excluded"]["preprocessor (digit-comma and quote pieces)"]


def test_bfloat16_preset_is_read_widened_to_float32(tmp_path):
  """Keras stores bfloat16 variables as opaque 2-byte values (attribute dtype='bfloat16'): read exactly as float32."""
  backbone = keras_hub.models.AlbertBackbone(**dict(BACKBONE, dropout=0.0), dtype="bfloat16")
  backbone.save_to_preset(str(tmp_path / "preset"))
  convert_lib.convert("keras_hub", str(tmp_path / "preset"), "native", str(tmp_path / "native"))
  encoder, _ = loading.load_model(str(tmp_path / "native"), "encoder")
  theirs = np.asarray(keras.ops.cast(backbone.get_layer("token_embedding").embeddings, "float32"))
  np.testing.assert_array_equal(encoder.embeddings.word_embeddings.numpy(), theirs)


def test_later_conversion_drops_the_preset_tokenizer_asset(tmp_path):
  """A model without a SentencePiece model converted into a folder that held a preset: the preset's tokenizer asset
  (which SentencePiece lookup finds) goes, so the new model is not read with the old model's vocabulary."""
  tiny.save_model_dir(tmp_path / "a", "encoder", seed=1)
  tiny.save_model_dir(tmp_path / "b", "encoder", seed=2)
  os.remove(tmp_path / "b" / md.SPM_FILE)
  out = tmp_path / "out"
  convert_lib.convert("native", str(tmp_path / "a"), "keras_hub", str(out))
  assert (out / md.KERAS_HUB_SPM_FILE).exists()
  summary = convert_lib.convert("native", str(tmp_path / "b"), "native", str(out))
  assert md.KERAS_HUB_SPM_FILE in summary["removed"] and not (out / "assets").exists()
  assert md.ModelDirectory(str(out)).spm_model is None
  convert_lib.convert("native", str(tmp_path / "a"), "keras_hub", str(out))
  summary = convert_lib.convert("native", str(tmp_path / "b"), "keras_hub", str(out))  # a preset without the asset
  assert summary["removed"].count(md.KERAS_HUB_SPM_FILE) == 1 and not (out / "assets").exists()
  assert md.ModelDirectory(str(out)).spm_model is None


def test_embedder_settings_travel_beside_the_preset(tmp_path):
  """An embedder's settings are written beside its preset (our readers embed the preset as the input) and the
  summary says KerasHub's classes do not apply them; KerasHub still loads the preset."""
  from official_albert import pipelines
  settings = EmbeddingSettings(("cls",), True, 32, prompts={"q": "query: "}, default_prompt_name="q")
  tiny.save_model_dir(tmp_path / "embedder", "encoder")
  write_embedding_settings(str(tmp_path / "embedder"), settings, 32)
  summary = convert_lib.convert("native", str(tmp_path / "embedder"), "keras_hub", str(tmp_path / "preset"))
  assert "sentence embedding settings (KerasHub's classes)" in summary["excluded"]
  assert read_embedding_settings(str(tmp_path / "preset")) == settings
  texts = ["the invoice is wrong", "great work"]
  np.testing.assert_allclose(pipelines.embed(str(tmp_path / "preset"), texts),
                             pipelines.embed(str(tmp_path / "embedder"), texts), atol=1e-5)
  assert isinstance(keras_hub.models.Backbone.from_preset(str(tmp_path / "preset")), keras_hub.models.AlbertBackbone)


def _task_json(preset):
  return json.loads((preset / md.KERAS_HUB_TASK_FILE).read_text())


def test_sigmoid_classifier_is_multi_label_both_ways(tmp_path):
  """KerasHub's record of multi-label is the classifier's activation="sigmoid": read, it becomes labels.json's
  multi_label (it was read as a softmax classifier, one label per text, with no error); written back, our multi-label
  classifier gets the sigmoid; an activation with no counterpart here, or a labels.json that says single-label, is
  refused by name."""
  classifier = keras_hub.models.AlbertTextClassifier(keras_hub.models.AlbertBackbone(**BACKBONE), num_classes=3,
                                                     activation="sigmoid")
  preset = tmp_path / "preset"
  classifier.save_to_preset(str(preset))
  convert_lib.convert("keras_hub", str(preset), "native", str(tmp_path / "native"))
  labels = md.read_label_file(str(tmp_path / "native"))
  assert labels is not None and labels.multi_label and len(labels.labels) == 3
  convert_lib.convert("native", str(tmp_path / "native"), "keras_hub", str(tmp_path / "back"))
  assert _task_json(tmp_path / "back")["config"]["activation"] == "sigmoid"
  from official_albert.serving import pipelines as serving_pipelines  # noqa: PLC0415
  # The preset folder itself, as classify and the server read it (it was a softmax, one label per text).
  assert serving_pipelines.hf_problem_type(str(preset)) == serving_pipelines.MULTI_LABEL
  assert serving_pipelines.hf_problem_type(str(tmp_path)) is None  # (no config.json: a TF1 folder, an export)
  tiny.write_labels(preset, multi_label=False)  # a labels.json that disagrees with the sigmoid
  with pytest.raises(ValueError, match="multi_label: false.*activation \"sigmoid\""):
    convert_lib.convert("keras_hub", str(preset), "native", str(tmp_path / "native2"))
  os.remove(preset / md.LABELS_FILE)
  task = _task_json(preset)
  task["config"]["activation"] = "relu"
  (preset / md.KERAS_HUB_TASK_FILE).write_text(json.dumps(task))
  with pytest.raises(keras_hub_preset.KerasHubPresetError, match="activation is 'relu'"):
    convert_lib.convert("keras_hub", str(preset), "native", str(tmp_path / "native3"))
  task["config"]["activation"] = "softmax"  # one label per text: our classifier as it is, no labels.json
  (preset / md.KERAS_HUB_TASK_FILE).write_text(json.dumps(task))
  convert_lib.convert("keras_hub", str(preset), "native", str(tmp_path / "native4"))
  assert md.read_label_file(str(tmp_path / "native4")) is None


def test_text_classifier_preset_is_not_read_as_another_classifier_kind(tmp_path):
  """A token or multiple-choice classifier stores the same variables as KerasHub's AlbertTextClassifier: read as one,
  the preset loaded with no error and computed another task (a native folder's records refuse it; task.json does)."""
  classifier = keras_hub.models.AlbertTextClassifier(keras_hub.models.AlbertBackbone(**BACKBONE), num_classes=1)
  classifier.save_to_preset(str(tmp_path / "preset"))
  for model_type in ("token_classifier", "multiple_choice"):
    with pytest.raises(keras_hub_preset.KerasHubPresetError, match=f"read as a {model_type}.*--model_type=classifier"):
      convert_lib.convert("keras_hub", str(tmp_path / "preset"), "native", str(tmp_path / "out"),
                          model_type=model_type)
    with pytest.raises(keras_hub_preset.KerasHubPresetError, match=f"read as a {model_type}"):
      loading.load_model(str(tmp_path / "preset"), model_type)
  assert not (tmp_path / "out").exists()


def test_exit_heads_are_refused_before_the_output_folder_is_touched(tmp_path):
  """An exit-head classifier has no KerasHub class: refused before the output folder's previous preset loses a file
  (its config.json was removed first, the folder left unreadable)."""
  from official_albert import save_pretrained
  tiny.save_model_dir(tmp_path / "encoder", "encoder")
  out = tmp_path / "preset"
  convert_lib.convert("native", str(tmp_path / "encoder"), "keras_hub", str(out))
  before = sorted(os.listdir(out))
  inputs = {"input_word_ids": np.array([[2, 10, 11, 3]], "int32"), "input_mask": np.ones((1, 4), "int32"),
            "input_type_ids": np.zeros((1, 4), "int32")}
  save_pretrained(tiny.exit_head_classifier(inputs, 1.0, 0.5), str(tmp_path / "exits"))
  with pytest.raises(keras_hub_preset.KerasHubPresetError, match="exit heads.*--output_format=native or hf"):
    convert_lib.convert("native", str(tmp_path / "exits"), "keras_hub", str(out), model_type="classifier")
  assert sorted(os.listdir(out)) == before
  assert keras_hub_preset.preset_model_type(str(out)) == "encoder"


def test_preset_as_init_checkpoint_gives_its_config_and_vocabulary(tmp_path):
  """Fine-tuning from a preset (task.init_checkpoint): its config.json is KerasHub's, read as the converter reads it
  (it failed as an AlbertConfig: "unknown AlbertConfig key(s)"), and the vocabulary check finds the table's rows."""
  from official_albert.training import model_source
  from official_albert.training import vocabulary
  from official_albert.training.experiment_config import ModelConfig
  keras_hub.models.AlbertBackbone(**BACKBONE).save_to_preset(str(tmp_path / "preset"))
  source = model_source.find_model_source("train", None, str(tmp_path / "preset"))
  model = model_source.model_from(source, ModelConfig())
  assert (model.vocab_size, model.num_hidden_layers, model.num_hidden_groups, model.embedding_size) == (120, 4, 2, 8)
  assert model.hidden_dropout_prob == ModelConfig().hidden_dropout_prob  # a training field: the experiment's
  assert vocabulary.checkpoint_vocab_rows(str(tmp_path / "preset")) == (
      120, str(tmp_path / "preset" / md.KERAS_HUB_WEIGHTS_FILE))


def test_preset_preprocessor_packs_pairs_as_our_records(spm_model_file):
  """KerasHub's pair packing ([CLS] a [SEP] b [SEP], its round-robin trimmer) gives the ids and segments of our
  records' (`truncate_seq_pair`: the longer side loses its last piece) for every length pair up to past the cap.
  (A direct preprocessor call takes the pair as `x=(a, b)`: a positional tuple is read as (x, y).)"""
  from official_albert.tokenization.tokenizer import FullTokenizer  # noqa: PLC0415 (beside the oracle)
  from official_albert.tokenization.tokenizer import truncate_seq_pair  # noqa: PLC0415
  length = 12
  preprocessor = keras_hub.models.AlbertTextClassifierPreprocessor(
      keras_hub.models.AlbertTokenizer(proto=spm_model_file), sequence_length=length)
  ours = FullTokenizer(spm_model_file=spm_model_file, do_lower_case=False)
  words = "the quick brown fox jumps over the lazy dog again and again".split()
  pairs = [(" ".join(words[:i]), " ".join(words[-j:])) for i in range(1, 12, 2) for j in range(1, 12, 2)]
  packed = preprocessor(x=([a for a, _ in pairs], [b for _, b in pairs]))
  for row, (a, b) in enumerate(pairs):
    tokens_a, tokens_b = ours.tokenize(a), ours.tokenize(b)
    truncate_seq_pair(tokens_a, tokens_b, length - 3)
    mask = np.asarray(packed["padding_mask"][row])
    ids = ours.convert_tokens_to_ids(["[CLS]"] + tokens_a + ["[SEP]"] + tokens_b + ["[SEP]"])
    assert np.asarray(packed["token_ids"][row])[mask].tolist() == ids, (a, b)
    segments = [0] * (len(tokens_a) + 2) + [1] * (len(tokens_b) + 1)
    assert np.asarray(packed["segment_ids"][row])[mask].tolist() == segments, (a, b)
