"""convert_checkpoint: what travels beside the weights (label names, multi-label flag, tokenizer options, an embedder's
settings, the TF1 config's epsilon) and what a reused output folder keeps of the previous model (docs/conversion.md,
"What travels beside the weights"); a TF1 checkpoint reached by the native reader is a named error."""

import json
import os

import keras
import numpy as np
import pytest

from official_albert import AlbertConfig
from official_albert import model_directory as md
from official_albert.checkpoints import convert as convert_lib
from official_albert.checkpoints import loading
from official_albert.checkpoints import native
from official_albert.checkpoints import tf1
from official_albert.checkpoints.sentence_transformers_folder import EmbeddingSettings
from official_albert.checkpoints.sentence_transformers_folder import PROMPTS_CONFIG
from official_albert.checkpoints.sentence_transformers_folder import read_embedding_settings
from official_albert.checkpoints.sentence_transformers_folder import read_tokenizer_options
from official_albert.checkpoints.sentence_transformers_folder import recorded_do_lower_case
from official_albert.checkpoints.sentence_transformers_folder import write_embedding_settings
from official_albert.checkpoints.sentence_transformers_folder import write_tokenizer_options
from tests import tiny
from tests.official_albert.oracle import hf_config
from tests.official_albert.oracle import make_hf_model
from tests.official_albert.oracle import save_hf
from tests.official_albert.oracle import transformers


def _hf_classifier(directory, hf_class="AlbertForSequenceClassification", **labels):
  """An HF classification folder (tiny.MODEL sizes) whose config records `labels` (id2label, problem_type...)."""
  return save_hf(make_hf_model(hf_class, hf_config(**tiny.MODEL, **labels), seed=21), directory)


def _hf_labels(directory):
  config = json.loads((directory / md.CONFIG_FILE).read_text())
  return config["id2label"], config.get("problem_type")


def test_hf_label_names_and_multi_label_travel_both_ways(tmp_path):
  # HF → native: id2label and problem_type become labels.json, which the pipelines read.
  src = _hf_classifier(tmp_path / "hf", id2label={0: "negative", 1: "positive"},
                       label2id={"negative": 0, "positive": 1}, problem_type="multi_label_classification")
  convert_lib.convert("hf", src, "native", str(tmp_path / "native"))
  saved = md.read_label_file(str(tmp_path / "native"))
  assert saved is not None and saved.labels == ["negative", "positive"] and saved.multi_label
  # native → HF: labels.json's names and flag go into config.json, as transformers reads them.
  convert_lib.convert("native", str(tmp_path / "native"), "hf", str(tmp_path / "hf_out"), model_type="classifier")
  assert _hf_labels(tmp_path / "hf_out") == ({"0": "negative", "1": "positive"}, "multi_label_classification")
  reloaded = transformers.AlbertForSequenceClassification.from_pretrained(str(tmp_path / "hf_out"))
  assert reloaded.config.id2label == {0: "negative", 1: "positive"}
  assert reloaded.config.problem_type == "multi_label_classification"
  # A native classifier trained here (labels.json, single-label) → HF.
  tiny.save_model_dir(tmp_path / "trained", "classifier", 3)
  tiny.write_labels(tmp_path / "trained")
  convert_lib.convert("native", str(tmp_path / "trained"), "hf", str(tmp_path / "hf3"), model_type="classifier")
  assert _hf_labels(tmp_path / "hf3") == ({"0": "billing", "1": "bug", "2": "praise"}, None)
  # HF's LABEL_i defaults are no names: no labels.json is made of them.
  plain = _hf_classifier(tmp_path / "plain", num_labels=2)
  convert_lib.convert("hf", plain, "native", str(tmp_path / "plain_native"))
  assert not (tmp_path / "plain_native" / md.LABELS_FILE).exists()


def test_token_classifier_tags_travel(tmp_path):
  tags = {0: "O", 1: "B-PER", 2: "I-PER"}
  src = _hf_classifier(tmp_path / "hf", "AlbertForTokenClassification", id2label=tags,
                       label2id={v: k for k, v in tags.items()})
  convert_lib.convert("hf", src, "native", str(tmp_path / "native"))
  assert md.label_names(str(tmp_path / "native"), 3) == ["O", "B-PER", "I-PER"]
  convert_lib.convert("native", str(tmp_path / "native"), "hf", str(tmp_path / "hf_out"),
                      model_type="token_classifier")
  assert _hf_labels(tmp_path / "hf_out") == ({"0": "O", "1": "B-PER", "2": "I-PER"}, None)


def test_label_file_of_another_model_is_refused_by_name(tmp_path):
  tiny.save_model_dir(tmp_path / "trained", "classifier", 3)
  tiny.write_labels(tmp_path / "trained", labels=("a", "b"))
  with pytest.raises(ValueError, match=r"labels\.json: 2 labels but the model has 3 outputs"):
    convert_lib.convert("native", str(tmp_path / "trained"), "hf", str(tmp_path / "hf"), model_type="classifier")


@pytest.mark.parametrize("output_format", ["native", "hf", "tf1"])
def test_tokenizer_options_travel_with_every_model(tmp_path, output_format):
  """A cased model (do_lower_case=false) stays cased: the options are not only an embedder's."""
  tiny.save_model_dir(tmp_path / "trained", "classifier", 3)
  write_tokenizer_options(str(tmp_path / "trained"), {"do_lower_case": False})
  summary = convert_lib.convert("native", str(tmp_path / "trained"), output_format, str(tmp_path / "out"),
                                model_type="classifier")
  assert read_tokenizer_options(str(tmp_path / "out"))["do_lower_case"] is False
  assert "tokenizer_config.json" in summary["files"]
  if output_format == "hf":  # transformers' slow tokenizer reads it as written
    tokenizer = transformers.AlbertTokenizer.from_pretrained(str(tmp_path / "out"))
    assert not tokenizer.do_lower_case and tokenizer.tokenize("Hello") != tokenizer.tokenize("hello")
    convert_lib.convert("hf", str(tmp_path / "out"), "native", str(tmp_path / "back"))
    assert read_tokenizer_options(str(tmp_path / "back"))["do_lower_case"] is False


def test_reused_output_folder_keeps_nothing_of_the_previous_model(tmp_path):
  """A classifier with labels, SentencePiece model and tokenizer options, then another without them, into one
  folder: the second model is not read with the first one's side files; a file this tool does not write stays."""
  tiny.save_model_dir(tmp_path / "a", "classifier", 2)
  tiny.write_labels(tmp_path / "a", labels=("spam", "ham"))
  write_tokenizer_options(str(tmp_path / "a"), {"do_lower_case": False})
  (tmp_path / "a" / md.LABELS_TEXT_FILE).write_text("spam\nham\n")
  out = tmp_path / "out"
  convert_lib.convert("native", str(tmp_path / "a"), "native", str(out), model_type="classifier")
  (out / "notes.txt").write_text("mine")
  assert {md.SPM_FILE, md.LABELS_FILE, md.LABELS_TEXT_FILE, "tokenizer_config.json"} <= set(os.listdir(out))
  src = _hf_classifier(tmp_path / "b", id2label={0: "negative", 1: "positive"},
                       label2id={"negative": 0, "positive": 1})
  summary = convert_lib.convert("hf", src, "native", str(out))
  assert sorted(summary["removed"]) == sorted([md.SPM_FILE, md.LABELS_TEXT_FILE, "tokenizer_config.json"])
  assert sorted(os.listdir(out)) == sorted(
      [md.CONFIG_FILE, md.LABELS_FILE, "model.ckpt.data-00000-of-00001", "model.ckpt.index", "notes.txt"])
  assert md.label_names(str(out), 2) == ["negative", "positive"]
  assert "removed the previous model's" in convert_lib.format_summary(summary)


def test_a_conversion_failing_midway_leaves_no_model_with_the_previous_labels(tmp_path, monkeypatch):
  """A full disk after the new weights were written left them beside the previous model's labels.json, which named
  their outputs with no error: the folder now has no config and is refused."""
  for name, labels in (("a", ("billing", "bug")), ("b", ("negative", "positive"))):
    tiny.save_model_dir(tmp_path / name, "classifier", 2)
    tiny.write_labels(tmp_path / name, labels=labels)
  out = tmp_path / "out"
  convert_lib.convert("native", str(tmp_path / "a"), "hf", str(out))
  assert md.label_names(str(out), 2) == ["billing", "bug"]

  def full_disk(*args, **kwargs):
    raise OSError(28, "No space left on device")
  monkeypatch.setattr(convert_lib, "write_side_files", full_disk)
  with pytest.raises(OSError, match="No space left"):
    convert_lib.convert("native", str(tmp_path / "b"), "hf", str(out))
  assert not (out / md.LABELS_FILE).exists() and not (out / md.CONFIG_FILE).exists()
  with pytest.raises(FileNotFoundError, match="no config.json"):
    md.detect_format(str(out))
  monkeypatch.undo()
  convert_lib.convert("native", str(tmp_path / "b"), "hf", str(out))
  assert md.label_names(str(out), 2) == ["negative", "positive"]


def test_a_conversion_the_writer_refuses_leaves_the_previous_model_whole(tmp_path):
  """The previous model's config and labels are cleared only once the writer can write: a native output into a
  folder named like a glob is refused by save_pretrained before writing, and the folder kept its config."""
  tiny.save_model_dir(tmp_path / "a", "classifier", 2)
  out = tmp_path / "model [v2]"
  convert_lib.convert("native", str(tmp_path / "a"), "hf", str(out), model_type="classifier")
  tiny.write_labels(out, labels=("keep", "these"))
  before = sorted(os.listdir(out))
  with pytest.raises(ValueError, match="glob character"):
    convert_lib.convert("native", str(tmp_path / "a"), "native", str(out), model_type="classifier")
  assert sorted(os.listdir(out)) == before and md.label_names(str(out), 2) == ["keep", "these"]


def test_reused_output_folder_drops_a_previous_embedder(tmp_path):
  """An embedder's sentence-transformers files go when a plain encoder is converted into its folder: the folder is
  then embedded with the directory default (mean pooling, no normalisation), not the old settings. An embedder
  without prompts converted over one with a default prompt does not prepend the old prompt to every text."""
  prompted = EmbeddingSettings(("cls",), True, 32, prompts={"query": "query: "}, default_prompt_name="query")
  tiny.save_model_dir(tmp_path / "embedder", "encoder")
  write_embedding_settings(str(tmp_path / "embedder"), prompted, 32)
  out = tmp_path / "out"
  convert_lib.convert("native", str(tmp_path / "embedder"), "native", str(out))
  assert read_embedding_settings(str(out)) == prompted
  tiny.save_model_dir(tmp_path / "unprompted", "encoder")
  write_embedding_settings(str(tmp_path / "unprompted"), EmbeddingSettings(("mean",), False, 32), 32)
  summary = convert_lib.convert("native", str(tmp_path / "unprompted"), "native", str(out))
  assert PROMPTS_CONFIG in summary["removed"] and read_embedding_settings(str(out)).prompt() == ""
  tiny.save_model_dir(tmp_path / "plain", "encoder")
  convert_lib.convert("native", str(tmp_path / "plain"), "native", str(out), model_type="encoder")
  assert read_embedding_settings(str(out)) is None
  assert not any((out / name).exists() for name in ("1_Pooling", "2_Normalize", "sentence_bert_config.json",
                                                    PROMPTS_CONFIG))


def test_tf1_output_over_another_format_is_read_as_tf1(tmp_path):
  """A TF1 conversion into a folder that held an HF model removes the HF config.json (reported), which format
  detection would read first: the folder loads as the new TF1 model, not the old one. Detection itself prefers the
  TF1 checkpoint over a stale HF or KerasHub config.json only when that config's weights are absent."""
  tiny.save_model_dir(tmp_path / "a", "encoder", seed=1)
  new = tiny.save_model_dir(tmp_path / "b", "encoder", seed=2)
  out = tmp_path / "out"
  convert_lib.convert("native", str(tmp_path / "a"), "hf", str(out))
  summary = convert_lib.convert("native", str(tmp_path / "b"), "tf1", str(out))
  assert md.CONFIG_FILE in summary["removed"] and not (out / md.CONFIG_FILE).exists()
  assert md.detect_format(str(out)) == "tf1"
  loaded, _ = loading.load_model(str(out), "encoder")
  np.testing.assert_array_equal(loaded.embeddings.word_embeddings.numpy(), new.embeddings.word_embeddings.numpy())
  # A stale config.json put back: with the HF weights beside it (the previous model's model.safetensors) both
  # readings are possible and config.json decides; without them only the TF1 checkpoint can be meant.
  (out / md.CONFIG_FILE).write_text(json.dumps({"model_type": "albert", **tiny.MODEL}))
  assert md.detect_format(str(out)) == "hf"
  os.remove(out / md.HF_WEIGHTS_FILE)
  assert md.detect_format(str(out)) == "tf1"
  (out / md.CONFIG_FILE).write_text(json.dumps({"class_name": "AlbertBackbone",
                                                "registered_name": "keras_hub>AlbertBackbone", "config": {}}))
  assert md.detect_format(str(out)) == "tf1"


def test_embedder_length_is_cut_to_cut_positions(tmp_path):
  """An embedder converted with fewer positions than its max_seq_length records the model's positions (a longer
  length would make sentence-transformers feed more positions than the model has)."""
  tiny.save_model_dir(tmp_path / "embedder", "encoder")
  write_embedding_settings(str(tmp_path / "embedder"), EmbeddingSettings(("mean",), False, 64), 32)
  convert_lib.convert("native", str(tmp_path / "embedder"), "hf", str(tmp_path / "out"), max_position_embeddings=16)
  assert read_embedding_settings(str(tmp_path / "out")).max_seq_length == 16
  assert json.loads((tmp_path / "out" / "sentence_bert_config.json").read_text())["max_seq_length"] == 16
  assert json.loads((tmp_path / "out" / "tokenizer_config.json").read_text())["model_max_length"] == 16


@pytest.mark.parametrize("output_format", ["native", "hf"])
def test_run_recorded_casing_travels(tmp_path, output_format):
  """A GLUE/SQuAD/RACE run records do_lower_case only in params.yaml: its converted model stays cased."""
  run = tmp_path / "run"
  tiny.save_model_dir(run, "classifier", 3)
  (run / md.PARAMS_FILE).write_text("task:\n  do_lower_case: false\n")
  convert_lib.convert("native", str(run), output_format, str(tmp_path / "out"), model_type="classifier")
  assert read_tokenizer_options(str(tmp_path / "out"))["do_lower_case"] is False
  assert recorded_do_lower_case(str(tmp_path / "out")) is False


def test_embedder_settings_travel_to_tf1(tmp_path):
  """An embedder's pooling, normalisation, prompts and training record travel with a TF1 output too: the output
  embeds as the input does."""
  from official_albert import pipelines
  settings = EmbeddingSettings(("cls",), True, 32, prompts={"q": "query: "}, default_prompt_name="q")
  tiny.save_model_dir(tmp_path / "embedder", "encoder")
  write_embedding_settings(str(tmp_path / "embedder"), settings, 32)
  md.write_embedding_training_file(str(tmp_path / "embedder"), {"matryoshka_dims": [16, 32]})
  summary = convert_lib.convert("native", str(tmp_path / "embedder"), "tf1", str(tmp_path / "out"))
  assert PROMPTS_CONFIG in summary["files"] and summary["excluded"] == {}
  assert read_embedding_settings(str(tmp_path / "out")) == settings
  assert md.read_embedding_training_file(str(tmp_path / "out")) == {"matryoshka_dims": [16, 32]}
  texts = ["the invoice is wrong", "great work"]
  np.testing.assert_allclose(pipelines.embed(str(tmp_path / "out"), texts),
                             pipelines.embed(str(tmp_path / "embedder"), texts), atol=1e-6)


def test_tf1_output_keeps_a_layer_norm_epsilon_other_than_the_original(tmp_path):
  keras.utils.set_random_seed(3)
  for eps, written in ((1e-5, True), (1e-12, False)):
    model = loading.build_model("encoder", AlbertConfig(**tiny.MODEL, layer_norm_eps=eps))
    tf1.write_tf1(model, str(tmp_path / str(eps)))
    data = json.loads((tmp_path / str(eps) / md.TF1_CONFIG_FILE).read_text())
    assert ("layer_norm_eps" in data) is written
    assert AlbertConfig.from_json_file(str(tmp_path / str(eps) / md.TF1_CONFIG_FILE)).layer_norm_eps == eps


def test_native_reader_on_a_tf1_checkpoint_names_the_flag(tmp_path):
  keras.utils.set_random_seed(4)
  model = loading.build_model("pretrainer", AlbertConfig(**tiny.MODEL))
  release = str(tmp_path / "release")
  tf1.write_tf1(model, release)
  with pytest.raises(ValueError, match=r"model\.ckpt is a TF1 name-based checkpoint.*--input_format=tf1"):
    convert_lib.convert("native", release, "hf", str(tmp_path / "out"),
                        albert_config_file=os.path.join(release, md.TF1_CONFIG_FILE))
  with pytest.raises(ValueError, match="--input_format=tf1"):
    native.restore_native(model, os.path.join(release, "model.ckpt"))
  # A stale native config.json beside the TF1 output (a folder reused): detection reads the TF1 checkpoint.
  AlbertConfig(**tiny.MODEL).to_json_file(os.path.join(release, md.CONFIG_FILE))
  assert md.detect_format(release) == "tf1"
  loaded, _ = loading.load_model(release, "pretrainer")
  for ours, theirs in zip(loaded.weights, model.weights):
    np.testing.assert_array_equal(np.asarray(ours.numpy()), np.asarray(theirs.numpy()), err_msg=ours.path)


def test_a_conversion_leaves_no_foreign_tokenizer_and_fails_before_writing(tmp_path, monkeypatch):
  """Review s50: a tokenizer another tool saved into the folder (transformers' tokenizer.json, which AutoTokenizer
  reads before spiece.model: the old vocabulary for the new weights) or a previous KerasHub preset's files stayed
  beside a converted model; a missing --spm_model_file failed after the weights were written; a native save that
  failed paired the new config with the old weights (they loaded, where the shapes matched)."""
  tiny.save_model_dir(tmp_path / "a", "encoder")
  out = tmp_path / "out"
  convert_lib.convert("native", str(tmp_path / "a"), "keras_hub", str(out), model_type="encoder")
  for name in ("special_tokens_map.json", "added_tokens.json"):
    (out / name).write_text("{}")
  summary = convert_lib.convert("native", str(tmp_path / "a"), "hf", str(out), model_type="encoder")
  left = set(os.listdir(out))
  assert not left & {"tokenizer.json", "special_tokens_map.json", "added_tokens.json", md.KERAS_HUB_WEIGHTS_FILE,
                     md.KERAS_HUB_METADATA_FILE, md.KERAS_HUB_ALBERT_CONFIG_FILE}, left
  assert {"tokenizer.json", md.KERAS_HUB_WEIGHTS_FILE} <= set(summary["removed"])
  transformers.AutoTokenizer.from_pretrained(str(out))  # (a preset's tokenizer.json left there: KeyError)
  before = sorted(os.listdir(out))
  with pytest.raises(FileNotFoundError, match=r"--spm_model_file=.*nope.model: no such file"):
    convert_lib.convert("native", str(tmp_path / "a"), "native", str(out), spm_model_file=str(tmp_path / "nope.model"))
  assert sorted(os.listdir(out)) == before
  # A native save that fails while moving the checkpoint into place leaves the previous model whole.
  keras.utils.set_random_seed(1)
  first = loading.build_model("encoder", AlbertConfig(**tiny.MODEL))
  native.save_pretrained(first, str(tmp_path / "n"))
  other = loading.build_model("encoder", AlbertConfig(**dict(tiny.MODEL, hidden_act="relu", layer_norm_eps=1e-5)))

  def full_disk(*args, **kwargs):
    raise OSError(28, "No space left on device")

  monkeypatch.setattr(native.checkpoint_files, "move_checkpoint", full_disk)
  with pytest.raises(OSError, match="No space left"):
    native.save_pretrained(other, str(tmp_path / "n"))
  assert loading.load_model(str(tmp_path / "n"), "encoder")[0].config.hidden_act == first.config.hidden_act
  assert [n for n in os.listdir(tmp_path / "n") if n.startswith(md.CONFIG_FILE)] == [md.CONFIG_FILE]


def test_a_tagger_from_hf_or_a_classifier_from_tf1_keeps_its_kind(tmp_path):
  """Review s50: HF → native dropped the head's kind (architectures), so a tagger was read as a sequence classifier
  without an error, as a trained one is not; a TF1 classifier was read as a pretrainer, and the error's hint
  (allow_missing) would have dropped its trained head."""
  src = _hf_classifier(tmp_path / "hf", "AlbertForTokenClassification", num_labels=3)  # (default LABEL_i names)
  convert_lib.convert("hf", src, "native", str(tmp_path / "native"))
  assert md.read_label_file(str(tmp_path / "native")).task == "token_classification"
  assert loading.infer_model_type("native", str(tmp_path / "native")) == "token_classifier"
  with pytest.raises(ValueError, match="trained as a token_classifier, but it is read as a classifier"):
    convert_lib.convert("native", str(tmp_path / "native"), "hf", str(tmp_path / "wrong"), model_type="classifier")
  tiny.save_model_dir(tmp_path / "cls", "classifier", 3)
  tiny.write_labels(tmp_path / "cls")
  convert_lib.convert("native", str(tmp_path / "cls"), "tf1", str(tmp_path / "tf1"), model_type="classifier")
  assert loading.infer_model_type("tf1", str(tmp_path / "tf1")) == "classifier"
  back = convert_lib.convert("tf1", str(tmp_path / "tf1"), "native", str(tmp_path / "back"))
  assert back["model_type"] == "classifier" and md.label_names(str(tmp_path / "back"), 3) == [
      "billing", "bug", "praise"]
  os.remove(tmp_path / "tf1" / md.LABELS_FILE)
  with pytest.raises(ValueError, match="a classifier-style head .*pass --model_type=classifier, token_classifier"):
    convert_lib.convert("tf1", str(tmp_path / "tf1"), "native", str(tmp_path / "again"))


@pytest.mark.parametrize("name,content,words", [
    ("modules.json", ["0_Transformer"], "a list of module objects"),
    ("1_Pooling/config.json", {"pooling_mode": 5}, "pooling=5: expected a mode's name"),
    ("1_Pooling/config.json", ["mean"], "expected a JSON object"),
    (PROMPTS_CONFIG, ["query: "], "expected a JSON object"),
    ("sentence_bert_config.json", [256], "expected a JSON object"),
])
def test_malformed_sentence_transformers_files_are_named(tmp_path, name, content, words):
  """A file of the wrong JSON shape raised a bare AttributeError / TypeError naming no file."""
  files = {"modules.json": [{"idx": 0, "type": "sentence_transformers.models.Transformer", "path": ""},
                            {"idx": 1, "type": "sentence_transformers.models.Pooling", "path": "1_Pooling"}],
           "1_Pooling/config.json": {"pooling_mode": "mean"}, name: content}
  for file_name, data in files.items():
    (tmp_path / file_name).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / file_name).write_text(json.dumps(data))
  with pytest.raises(ValueError, match=words) as error:
    read_embedding_settings(str(tmp_path))
  assert name in str(error.value)
