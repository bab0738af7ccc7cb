"""Matryoshka widths in the encoder exports (issue 46 item 4): `export_saved_model --dim=K` (SavedModel `embed`
signature and `sentence_embedding` outputs, OpenVINO, LiteRT) serves the vectors `pipelines.embed(dir, texts, dim=K)`
returns — the first K dimensions, re-normalised —, refuses a K the directory was not trained at unless forced (as
`embed` does), and the OpenVINO / LiteRT folders keep the trained widths, so that `embed(folder, texts, dim=K)` and
the server's OpenAI `dimensions` cut their vectors the same way.

The model: the session's tiny encoder directory (hidden 32, mean pooling; tests/tiny.py), recorded as trained at
the widths [32, 16] as `text_embedding` records a Matryoshka embedder.
"""

import json
import os

import numpy as np
import pytest

from official_albert import model_directory as md
from official_albert import pipelines
from official_albert.modeling.embedder import AlbertEmbedder
from official_albert.serving import export
from tests import tiny

TEXTS = list(tiny.TEXTS) + ["the records cache is reused while the files match", "Paris is in France."]


@pytest.fixture(scope="module")
def embedder_dir(tmp_path_factory, tiny_model_dirs):
  folder = tmp_path_factory.mktemp("dim") / "enc"
  tiny_model_dirs.copy("encoder", folder)
  md.write_embedding_training_file(str(folder), {"loss": "mnrl", "matryoshka_dims": [32, 16]})
  return str(folder)


@pytest.fixture(scope="module")
def want(embedder_dir):
  """embed(dir, texts, dim=K) for the widths exported below."""
  return {k: pipelines.embed(embedder_dir, TEXTS, dim=k, force=k == 8) for k in (16, 8)}


def test_embedder_dim_is_the_cut_of_its_full_vector(tiny_model_dirs):
  """`AlbertEmbedder(dim=K)` (what the exports' graphs run) = the full vector cut and re-normalised, and it survives
  get_config."""
  import tensorflow as tf
  model = tiny_model_dirs.model("encoder")
  encoder = getattr(model, "encoder", model)
  inputs = {"input_word_ids": tf.constant([[2, 10, 11, 3, 0], [2, 12, 3, 0, 0]]),
            "input_mask": tf.constant([[1, 1, 1, 1, 0], [1, 1, 1, 0, 0]]), "input_type_ids": tf.zeros([2, 5], tf.int32)}
  full = np.asarray(AlbertEmbedder(encoder=encoder)(inputs)["sentence_embedding"])
  cut = AlbertEmbedder(encoder=encoder, dim=16)
  got = np.asarray(cut(inputs)["sentence_embedding"])
  np.testing.assert_allclose(got, full[:, :16] / np.linalg.norm(full[:, :16], axis=1, keepdims=True), atol=1e-6)
  assert cut.get_config()["dim"] == 16
  with pytest.raises(ValueError, match=r"dim=33 is not in 1..32"):
    AlbertEmbedder(encoder=encoder, dim=33)


@pytest.mark.slow
def test_saved_model_dim_serves_the_trained_width(tmp_path, embedder_dir, want):
  """`--dim=16`: the SavedModel's `embed` and `serve_text` give embed(dir, dim=16)'s vectors; `embed` on the folder
  and the server's model of it give the same."""
  import tensorflow as tf
  import tensorflow_text  # noqa: F401  (the SavedModel's SentencePiece ops)
  path = export.export_from_model_dir(embedder_dir, str(tmp_path / "sm"), "encoder", seq_length=64, dim=16)
  loaded = tf.saved_model.load(path)
  vectors = loaded.signatures["embed"](text=tf.constant(TEXTS))["sentence_embedding"].numpy()
  np.testing.assert_allclose(vectors, want[16], atol=1e-5)
  np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
  assert loaded.signatures["serve_text"](text=tf.constant(TEXTS[:2]))["sentence_embedding"].shape == (2, 16)
  # The folder keeps the trained widths, and `embed` reads it (its `embed` signature, in batches) as the server does:
  # its vectors are 16 wide, so dim=16 is the whole vector and dim=8 is refused naming the widths.
  assert md.read_embedding_training_file(path)["matryoshka_dims"] == [32, 16]
  np.testing.assert_allclose(pipelines.embed(path, TEXTS, batch_size=3), want[16], atol=1e-5)
  np.testing.assert_allclose(pipelines.embed(path, TEXTS[0], dim=16), want[16][0], atol=1e-5)
  with pytest.raises(ValueError, match=r"trained at the widths \[32, 16\].*not at dim=8"):
    pipelines.embed(path, TEXTS, dim=8)
  with pytest.raises(ValueError, match="fixed at export"):
    pipelines.embed(path, TEXTS, pooling="cls")
  from official_albert.serving.served_model import ServedModel
  served = ServedModel("enc", path)
  np.testing.assert_allclose(served.truncate(served.predict(TEXTS)["sentence_embedding"], 16), want[16], atol=1e-5)
  assert (served.head, served.backend, served.embedding_width()) == ("encoder", "saved_model", 16)


@pytest.mark.slow
def test_an_untrained_width_is_refused_unless_forced(tmp_path, embedder_dir, want):
  """As `embed`: dim=8 is no width the directory was trained at (refused before anything is traced, naming the
  trained widths and the fix); force_dim=True exports it; dim on another head is refused."""
  with pytest.raises(ValueError, match=r"export --dim: .* trained at the widths \[32, 16\].*not at dim=8.*force"):
    export.export_from_model_dir(embedder_dir, str(tmp_path / "sm8"), "encoder", seq_length=64, dim=8)
  assert not os.path.exists(tmp_path / "sm8")
  with pytest.raises(ValueError, match=r"dim=40 is not in 1..32"):
    export.export_from_model_dir(embedder_dir, str(tmp_path / "sm40"), "encoder", seq_length=64, dim=40)
  with pytest.raises(ValueError, match=r"dim=16 cuts the encoder's sentence embedding; head='classifier'"):
    export.export_from_model_dir(embedder_dir, str(tmp_path / "cls"), "classifier", dim=16)
  pytest.importorskip("openvino")
  from official_albert.serving import openvino_export
  folder = openvino_export.export_openvino(embedder_dir, str(tmp_path / "ov8"), "encoder", "f32", seq_length=64,
                                           dim=8, force_dim=True)
  np.testing.assert_allclose(pipelines.embed(folder, TEXTS), want[8], atol=1e-4)


@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["openvino", "litert"])
def test_export_folders_take_dim_at_export_and_per_call(tmp_path, embedder_dir, want, fmt):
  """`--dim=16`: the folder's vectors are embed(dir, dim=16)'s and serving_config.json records the width. A
  full-width folder keeps the trained widths (embedding_training.json), so `embed(folder, texts, dim=16)` cuts its
  vectors the same way and dim=8 is refused naming them; the server's model of the folder answers OpenAI's
  `dimensions` with the same vectors."""
  if fmt == "openvino":
    pytest.importorskip("openvino")
    from official_albert.serving.openvino_export import export_openvino as write
    write_folder = lambda out, **kw: write(embedder_dir, out, "encoder", "f32", seq_length=64, **kw)  # noqa: E731
  else:
    pytest.importorskip("ai_edge_litert")
    from official_albert.serving.litert_export import export_litert as write
    write_folder = lambda out, **kw: write(embedder_dir, out, "encoder", "f32", seq_length=64, **kw)  # noqa: E731
  cut = write_folder(str(tmp_path / "cut"), dim=16)
  np.testing.assert_allclose(pipelines.embed(cut, TEXTS), want[16], atol=1e-4)
  config = json.load(open(os.path.join(cut, "serving_config.json")))
  assert config["embedding"]["dim"] == 16
  assert pipelines.embed(cut, []).shape == (0, 16)  # (no texts: the folder's width, as for a model directory)
  full = write_folder(str(tmp_path / "full"))
  assert "dim" not in json.load(open(os.path.join(full, "serving_config.json")))["embedding"]
  assert md.read_embedding_training_file(full)["matryoshka_dims"] == [32, 16]
  np.testing.assert_allclose(pipelines.embed(full, TEXTS, dim=16), want[16], atol=1e-4)
  assert pipelines.embed(full, []).shape == (0, 32) and pipelines.embed(full, [], dim=16).shape == (0, 16)
  with pytest.raises(ValueError, match=r"trained at the widths \[32, 16\].*not at dim=8"):
    pipelines.embed(full, TEXTS, dim=8)
  np.testing.assert_allclose(pipelines.embed(full, TEXTS, dim=8, force=True), want[8], atol=1e-4)

  from official_albert.serving.served_model import ServedModel
  served = ServedModel("enc", full)
  vectors = served.truncate(served.predict(TEXTS)["sentence_embedding"], 16)
  np.testing.assert_allclose(vectors, want[16], atol=1e-4)
  with pytest.raises(ValueError, match=r"\[32, 16\]"):
    served.truncate(served.predict(TEXTS[:1])["sentence_embedding"], 8)
