"""Sentence embeddings: `pipelines.embed` on a sentence-transformers ALBERT folder gives the vectors
`SentenceTransformer.encode` gives (cosine >= 0.9999 on real text), for each pooling; the settings files of both
sentence-transformers generations are read; what is not computed here is refused by name.

The oracle (sentence-transformers, pinned in requirements-test.txt) runs in its own process
(sentence_transformers_oracle.py); the tests that need it skip when it is not installed.
"""

import importlib.util
import json
import os
import pathlib
import re
import subprocess
import sys

import numpy as np
import pytest

from official_albert import pipelines
from official_albert.checkpoints import convert as convert_lib
from official_albert.checkpoints.sentence_transformers_folder import EmbeddingSettings
from official_albert.checkpoints.sentence_transformers_folder import read_embedding_settings
from official_albert.checkpoints.sentence_transformers_folder import write_embedding_settings
from official_albert.modeling.layers.pooling import POOLING_MODES
from official_albert.modeling.layers.pooling import SentencePooling

REPO_ROOT = pathlib.Path(__file__).resolve().parents[3]
ORACLE = pathlib.Path(__file__).with_name("sentence_transformers_oracle.py")
needs_oracle = pytest.mark.skipif(importlib.util.find_spec("sentence_transformers") is None,
                                  reason="sentence-transformers (requirements-test.txt) is not installed")


def real_texts(count=40):
  """Sentences of this repository's README (real English with code names, numbers and punctuation), plus a few with
  accents, quotes and long runs, varied in length."""
  text = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
  sentences = [s.strip() for s in re.split(r"(?<=[.!?])\s+", re.sub(r"\s+", " ", text)) if 20 <= len(s.strip()) <= 600]
  extra = ["Café déjà vu — a naïve coöperation at the Zürich Straße.", "He said ``hello'' and 'goodbye'.",
           "In 1990, 3,500 people paid $12.50 each.", "short", "ALBERT " * 90]
  return sentences[:count - len(extra)] + extra


def _cosine(a, b):
  a = a / np.linalg.norm(a, axis=-1, keepdims=True)
  b = b / np.linalg.norm(b, axis=-1, keepdims=True)
  return (a * b).sum(-1)


PROMPTS = {"query": "query: ", "document": "passage: "}
# The oracle's folders, {name: (how many `real_texts`, the oracle's flags)}: built and encoded by one child process
# (`oracle`), which imports torch, transformers and sentence-transformers once (~15 s of CPU) for all of them.
ORACLE_JOBS = {
    "mean": (40, dict(pooling="mean")),
    "cls,max": (40, dict(pooling="cls,max", normalize=True, max_seq_length=24)),
    "mean_sqrt_len_tokens,lasttoken,weightedmean": (40, dict(pooling="mean_sqrt_len_tokens,lasttoken,weightedmean")),
    "converted": (12, dict(pooling="cls,max", normalize=True, max_seq_length=40, seed=3)),
    "exports": (24, dict(pooling="cls,max", normalize=True, max_seq_length=24, seed=5)),
    "prompted": (16, dict(pooling="mean", seed=7, prompts=json.dumps(PROMPTS), default_prompt_name="query")),
}


def make_sentence_transformers_folders(root, spm_model_file, jobs):
  """The oracle's folders and their `encode(texts)`, {name: (folder, vectors)} for `jobs` ({name: (texts, flags)}),
  all run in one subprocess (see sentence_transformers_oracle.py)."""
  root = pathlib.Path(root)
  specs = []
  for name, (texts, flags) in jobs.items():
    out = root / f"job{len(specs)}"
    out.mkdir(parents=True)
    (out / "texts.json").write_text(json.dumps(texts), encoding="utf-8")
    specs.append(dict(flags, output_dir=str(out), texts_file=str(out / "texts.json"),
                      spm_model_file=str(spm_model_file)))
  (root / "jobs.json").write_text(json.dumps(specs), encoding="utf-8")
  env = {**os.environ, "USE_TF": "0", "TF_CPP_MIN_LOG_LEVEL": "2"}
  result = subprocess.run([sys.executable, str(ORACLE), f"--jobs_file={root / 'jobs.json'}"], capture_output=True,
                          text=True, env=env, timeout=900)
  assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-4000:]
  return {name: (spec["output_dir"] + "/model", np.load(pathlib.Path(spec["output_dir"]) / "expected.npy"))
          for name, spec in zip(jobs, specs)}


@pytest.fixture(scope="module")
def oracle(tmp_path_factory, spm_model_file):
  """{name: (sentence-transformers folder, `SentenceTransformer.encode(real_texts(n))`)} of `ORACLE_JOBS`."""
  return make_sentence_transformers_folders(tmp_path_factory.mktemp("oracle"), spm_model_file,
                                            {name: (real_texts(n), flags) for name, (n, flags) in ORACLE_JOBS.items()})


def test_a_directory_trained_cased_by_a_benchmark_task_is_embedded_cased(tmp_path, tiny_model_dirs):
  """GLUE, SQuAD and RACE runs record task.do_lower_case only in params.yaml; embed reads it there (it lower-cased)."""
  folder = tiny_model_dirs.copy("encoder", tmp_path / "cased")
  (tmp_path / "cased" / "params.yaml").write_text("task:\n  do_lower_case: false\n")
  texts = ["The Invoice Is WRONG", "it crashes"]
  cased = pipelines.embed(folder, texts)
  np.testing.assert_array_equal(cased, pipelines.embed(folder, texts, do_lower_case=False))
  assert not np.allclose(cased[0], pipelines.embed(folder, texts, do_lower_case=True)[0])


def test_sentence_bert_config_lower_casing_is_followed(tmp_path, tiny_model_dirs):
  """sentence-transformers lower-cases the text when sentence_bert_config.json says `"do_lower_case": true`, whatever
  tokenizer_config.json says; embed did not (a cased tokenizer file won)."""
  folder = tiny_model_dirs.copy("encoder", tmp_path / "st")
  _write(tmp_path / "st", "modules.json", [
      {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
      {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}])
  _write(tmp_path / "st", "1_Pooling/config.json", {"pooling_mode_mean_tokens": True})
  _write(tmp_path / "st", "tokenizer_config.json", {"do_lower_case": False})
  texts = ["The Invoice Is WRONG", "it crashes"]
  cased = pipelines.embed(folder, texts)
  np.testing.assert_array_equal(cased, pipelines.embed(folder, texts, do_lower_case=False))
  _write(tmp_path / "st", "sentence_bert_config.json", {"max_seq_length": 32, "do_lower_case": True})
  lowered = pipelines.embed(folder, texts)
  np.testing.assert_array_equal(lowered, pipelines.embed(folder, texts, do_lower_case=True))
  assert not np.allclose(lowered[0], cased[0])


@pytest.mark.slow
@needs_oracle
@pytest.mark.parametrize("pooling,normalize,max_seq_length", [("mean", False, None), ("cls,max", True, 24),
                                                               ("mean_sqrt_len_tokens,lasttoken,weightedmean", False,
                                                                None)])
def test_embed_equals_sentence_transformers_encode(oracle, pooling, normalize, max_seq_length):
  texts = real_texts()
  folder, expected = oracle[pooling]
  assert ORACLE_JOBS[pooling] == (len(texts), dict(pooling=pooling, **(dict(normalize=True) if normalize else {}),
                                                   **(dict(max_seq_length=max_seq_length) if max_seq_length else {})))
  settings = read_embedding_settings(folder)
  assert settings.pooling == tuple(pooling.split(",")) and settings.normalize == normalize
  assert settings.max_seq_length == (max_seq_length or 512)  # else the tokenizer's model_max_length
  ours = pipelines.embed(folder, texts, batch_size=16)
  assert ours.shape == expected.shape == (len(texts), 32 * len(pooling.split(",")))
  assert _cosine(ours, expected).min() >= 0.9999
  np.testing.assert_allclose(ours, expected, atol=1e-4, rtol=0)
  single = pipelines.embed(folder, texts[0])
  assert single.shape == expected.shape[1:] and _cosine(single, expected[0]) >= 0.9999


@pytest.mark.slow
@needs_oracle
def test_converted_folder_keeps_its_pooling(tmp_path, oracle):
  """convert_checkpoint of a sentence-transformers folder to native carries the embedding settings along, so the
  native directory embeds the same; and sentence-transformers reads the files we write."""
  texts = real_texts(12)
  folder, expected = oracle["converted"]  # cls,max, normalized, max_seq_length 40
  convert_lib.convert("hf", folder, "native", str(tmp_path / "native"))
  assert read_embedding_settings(str(tmp_path / "native")) == read_embedding_settings(folder)
  assert _cosine(pipelines.embed(str(tmp_path / "native"), texts), expected).min() >= 0.9999


def test_pooling_layer_matches_numpy():
  rng = np.random.default_rng(0)
  x = rng.standard_normal((3, 7, 5)).astype("float32")
  mask = np.array([[1] * 7, [1] * 4 + [0] * 3, [1] + [0] * 6], "int32")
  for mode in POOLING_MODES:
    got = np.asarray(SentencePooling([mode])(x, mask))
    for b in range(3):
      n = int(mask[b].sum())
      tokens = x[b, :n]
      want = {"cls": tokens[0], "max": tokens.max(0), "mean": tokens.mean(0),
              "mean_sqrt_len_tokens": tokens.sum(0) / np.sqrt(n), "lasttoken": tokens[-1],
              "weightedmean": (tokens * np.arange(1, n + 1)[:, None]).sum(0) / np.arange(1, n + 1).sum()}[mode]
      np.testing.assert_allclose(got[b], want, rtol=1e-5, atol=1e-6, err_msg=mode)
  both = np.asarray(SentencePooling(["max", "cls"], normalize=True)(x, mask))
  np.testing.assert_allclose(np.linalg.norm(both, axis=-1), 1.0, rtol=1e-6)
  raw = np.concatenate([x.max(1, where=mask[:, :, None] > 0, initial=-1e9), x[:, 0]], axis=-1)
  np.testing.assert_allclose(both, raw / np.linalg.norm(raw, axis=-1, keepdims=True), rtol=1e-5, atol=1e-6)
  with pytest.raises(ValueError, match="expected one or more distinct modes"):
    SentencePooling(["mean", "average"])


def _write(folder, name, data):
  path = folder / name
  path.parent.mkdir(parents=True, exist_ok=True)
  path.write_text(json.dumps(data))


def test_settings_of_both_generations_and_refusals(tmp_path):
  legacy = tmp_path / "legacy"
  _write(legacy, "modules.json", [
      {"idx": 0, "name": "0", "path": "0_Transformer", "type": "sentence_transformers.models.Transformer"},
      {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}])
  _write(legacy, "1_Pooling/config.json", {"word_embedding_dimension": 768, "pooling_mode_cls_token": True,
                                           "pooling_mode_mean_tokens": True, "pooling_mode_max_tokens": False})
  _write(legacy, "0_Transformer/sentence_bert_config.json", {"max_seq_length": 100, "do_lower_case": False})
  assert read_embedding_settings(str(legacy)) == EmbeddingSettings(("cls", "mean"), False, 100, "0_Transformer")
  assert read_embedding_settings(str(tmp_path)) is None  # no modules.json
  # What we write is read back the same (legacy form when the order allows, else the list form).
  for settings in (EmbeddingSettings(("cls", "mean"), True, 64), EmbeddingSettings(("max", "cls"), False, None)):
    out = tmp_path / f"out_{len(settings.pooling)}_{settings.normalize}"
    write_embedding_settings(str(out), settings, 32)
    assert read_embedding_settings(str(out)) == settings
  # A Dense module after the pooling is not computed here: refused by name.
  _write(legacy, "modules.json", [
      {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
      {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
      {"idx": 2, "name": "2", "path": "2_Dense", "type": "sentence_transformers.models.Dense"}])
  with pytest.raises(ValueError, match=r"module '2' of type 'sentence_transformers\.models\.Dense' is not computed"):
    read_embedding_settings(str(legacy))
  _write(legacy, "modules.json", [
      {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
      {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}])
  _write(legacy, "1_Pooling/config.json", {"pooling_mode": "median"})
  with pytest.raises(ValueError, match=r"1_Pooling/config\.json: pooling=\['median'\]"):
    read_embedding_settings(str(legacy))


@pytest.mark.slow
@needs_oracle
def test_saved_model_and_openvino_embed_like_sentence_transformers(tmp_path, oracle):
  """The encoder exports of a sentence-transformers folder: the SavedModel's `embed` signature (text in, tokenized
  in-graph) and the OpenVINO folder (through pipelines.embed) give SentenceTransformer.encode's vectors."""
  import tensorflow as tf
  import tensorflow_text  # noqa: F401  (the SavedModel's SentencePiece ops)

  from official_albert.serving import export
  from official_albert.serving import openvino_export
  texts = real_texts(24)
  folder, expected = oracle["exports"]  # cls,max, normalized, max_seq_length 24
  saved_model = export.export_from_model_dir(folder, str(tmp_path / "sm"), "encoder", seq_length=64)
  loaded = tf.saved_model.load(saved_model)
  vectors = loaded.signatures["embed"](text=tf.constant(texts))["sentence_embedding"].numpy()
  assert _cosine(vectors, expected).min() >= 0.9999
  ids = loaded.signatures["serve_text"](text=tf.constant(texts[:2]))
  assert ids["sentence_embedding"].shape == (2, 64)  # serve_text (cut at seq_length=64 here) carries it too
  pytest.importorskip("openvino")
  ov_dir = openvino_export.export_openvino(folder, str(tmp_path / "ov"), "encoder", "f32")
  ov_vectors = pipelines.embed(ov_dir, texts)
  assert _cosine(ov_vectors, expected).min() >= 0.9999
  with pytest.raises(ValueError, match="fixed at export"):
    pipelines.embed(ov_dir, texts, pooling="mean")


def _prompted_folders(tmp_path, tiny_model_dirs):
  """A sentence-transformers folder over the tiny encoder whose config_sentence_transformers.json has `PROMPTS` and
  default_prompt_name "query", and the same folder without that file."""
  plain = tiny_model_dirs.copy("encoder", tmp_path / "plain")
  _write(tmp_path / "plain", "modules.json", [
      {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
      {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}])
  _write(tmp_path / "plain", "1_Pooling/config.json", {"pooling_mode_mean_tokens": True})
  prompted = tiny_model_dirs.copy("encoder", tmp_path / "prompted")
  for name in ("modules.json", "1_Pooling/config.json"):
    _write(tmp_path / "prompted", name, json.loads((tmp_path / "plain" / name).read_text()))
  _write(tmp_path / "prompted", "config_sentence_transformers.json",
         {"prompts": PROMPTS, "default_prompt_name": "query", "similarity_fn_name": "cosine"})
  return prompted, plain


def test_the_folders_prompts_are_prepended_as_encode_does(tmp_path, tiny_model_dirs):
  """SentenceTransformer.encode prepends the folder's default prompt (config_sentence_transformers.json) to every
  text, or the one `prompt_name` / `prompt` asks for; embed ignored them (cosine 0.994-0.999 to encode)."""
  from official_albert.serving import served_model
  prompted, plain = _prompted_folders(tmp_path, tiny_model_dirs)
  texts = ["A man is eating food.", "short", "In 1990, 3,500 people paid $12.50 each."]
  queries = pipelines.embed(plain, ["query: " + t for t in texts])
  np.testing.assert_allclose(pipelines.embed(prompted, texts), queries, atol=1e-6)
  settings = read_embedding_settings(prompted)
  assert settings.prompt() == "query: " and settings.prompt("document") == "passage: "
  np.testing.assert_allclose(pipelines.embed(prompted, texts[0]), queries[0], atol=1e-6)
  np.testing.assert_allclose(pipelines.embed(prompted, texts, prompt_name="document"),
                             pipelines.embed(plain, ["passage: " + t for t in texts]), atol=1e-6)
  np.testing.assert_allclose(pipelines.embed(prompted, texts, prompt=""), pipelines.embed(plain, texts), atol=1e-6)
  with pytest.raises(ValueError, match=r"prompt_name='passage' is not one of the folder's prompts "
                                       r"\['document', 'query'\]"):
    pipelines.embed(prompted, texts, prompt_name="passage")
  # The server's embeddings are the folder's: its default prompt too.
  served = served_model.ServedModel("e", prompted)
  np.testing.assert_allclose(served.predict(texts)["sentence_embedding"], queries, atol=1e-5)
  # Converted / written settings keep the prompts (sentence-transformers reads them back from the same file).
  write_embedding_settings(str(tmp_path / "written"), settings, 32)
  assert read_embedding_settings(str(tmp_path / "written")) == settings
  _write(tmp_path / "prompted", "config_sentence_transformers.json", {"prompts": PROMPTS, "default_prompt_name": "q"})
  with pytest.raises(ValueError, match=r"config_sentence_transformers\.json: default_prompt_name='q' is not one"):
    read_embedding_settings(prompted)


@pytest.mark.slow
def test_encoder_exports_prepend_the_default_prompt(tmp_path, tiny_model_dirs):
  """The encoder exports of a folder with a default prompt embed as the folder does: the SavedModel's `embed`
  signature prepends it in its graph, the OpenVINO / LiteRT folders record the prompts and `embed` prepends them."""
  import tensorflow as tf
  import tensorflow_text  # noqa: F401  (the SavedModel's SentencePiece ops)

  from official_albert.serving import export
  prompted, plain = _prompted_folders(tmp_path, tiny_model_dirs)
  texts = ["A man is eating food.", "short", "In 1990, 3,500 people paid $12.50 each."]
  want = pipelines.embed(plain, ["query: " + t for t in texts])
  saved_model = export.export_from_model_dir(prompted, str(tmp_path / "sm"), "encoder", seq_length=64)
  vectors = tf.saved_model.load(saved_model).signatures["embed"](text=tf.constant(texts))["sentence_embedding"]
  np.testing.assert_allclose(vectors.numpy(), want, atol=1e-5)
  np.testing.assert_allclose(pipelines.embed(saved_model, texts), want, atol=1e-5)
  with pytest.raises(ValueError, match="prepends the prompt fixed at export"):
    pipelines.embed(saved_model, texts, prompt_name="document")
  formats = []
  if importlib.util.find_spec("openvino") is not None:
    from official_albert.serving import openvino_export
    formats.append(openvino_export.export_openvino(prompted, str(tmp_path / "ov"), "encoder", "f32", seq_length=64))
  if importlib.util.find_spec("ai_edge_litert") is not None:
    from official_albert.serving import litert_export
    formats.append(litert_export.export_litert(prompted, str(tmp_path / "lite"), "encoder", seq_length=64))
  for folder in formats:
    record = json.loads((pathlib.Path(folder) / "serving_config.json").read_text())["embedding"]
    assert record["prompts"] == PROMPTS and record["default_prompt_name"] == "query", folder
    np.testing.assert_allclose(pipelines.embed(folder, texts), want, atol=1e-4)
    np.testing.assert_allclose(pipelines.embed(folder, texts, prompt_name="document"),
                               pipelines.embed(plain, ["passage: " + t for t in texts]), atol=1e-4)


@pytest.mark.slow
def test_every_text_signature_of_an_encoder_saved_model_prepends_the_default_prompt(tmp_path, tiny_model_dirs):
  """A text's vector is the same through the encoder SavedModel's `serve_text` (also `serving_default`) and `embed`
  signatures and the pipeline on the folder: the folder's default prompt prepended in each (serve_text embedded the
  text alone: another vector); `serve_text_pair` prepends it to `text`. `tokenization_info` records the prompt and
  the length `embed` packs at (the folder's max_seq_length 24, below --seq_length 64), which clients count with. A
  text longer than 24 tokens gets embed's vector (cut at 24) from the text signatures too, not one over 64 tokens."""
  import tensorflow as tf
  import tensorflow_text  # noqa: F401  (the SavedModel's SentencePiece ops)

  from official_albert.serving import embedding
  from official_albert.serving import export
  from official_albert.serving import saved_model_runtime
  prompted, plain = _prompted_folders(tmp_path, tiny_model_dirs)
  _write(tmp_path / "prompted", "sentence_bert_config.json", {"max_seq_length": 24})
  long = "the invoice is wrong and it crashes on start, great work everyone on the fix of the parser today"
  texts = ["A man is eating food.", "short", "In 1990, 3,500 people.", long]  # (the last: 52 pieces with the prompt)
  want = pipelines.embed(prompted, texts)
  # (the plain folder has no max_seq_length 24: the texts within it)
  np.testing.assert_allclose(want[:3], pipelines.embed(plain, ["query: " + t for t in texts[:3]]), atol=1e-6)
  signatures = tf.saved_model.load(export.export_from_model_dir(prompted, str(tmp_path / "sm"), "encoder",
                                                                seq_length=64)).signatures
  text = tf.constant(texts)
  np.testing.assert_allclose(signatures["embed"](text=text)["sentence_embedding"].numpy(), want, atol=1e-5)
  served = signatures["serve_text"](text=text)
  np.testing.assert_allclose(served["sentence_embedding"].numpy(), want, atol=1e-5)
  np.testing.assert_allclose(signatures["serving_default"](text=text)["sentence_embedding"].numpy(), want, atol=1e-5)
  pair = signatures["serve_text_pair"](text=text, text_b=tf.constant(["b"] * len(texts)))
  first = (pair["input_type_ids"].numpy() == 0) & (pair["input_mask"].numpy() == 1)
  for row, ids in enumerate(served["input_word_ids"].numpy()):  # [CLS] query: text [SEP] in both
    np.testing.assert_array_equal(pair["input_word_ids"].numpy()[row][first[row]],
                                  ids[:int(served["input_mask"].numpy()[row].sum())])
  assert saved_model_runtime.saved_model_embed_text(signatures) == ("query: ", 24)
  assert [embedding.default_prompt(f) for f in (str(tmp_path / "sm"), prompted, plain)] == ["query: ", "query: ", ""]


@pytest.mark.slow
@needs_oracle
def test_embed_equals_encode_with_a_default_prompt(oracle):
  """Against sentence-transformers itself: a folder saved with prompts and a default prompt name."""
  texts = real_texts(16)
  folder, expected = oracle["prompted"]  # saved with PROMPTS, default prompt name "query"
  assert _cosine(pipelines.embed(folder, texts), expected).min() >= 0.9999
