"""Requests that are valid under each protocol's spec, answered by the HTTP app in process (FastAPI's TestClient)
with stand-in models, as the spec (and the servers clients move from: KServe, Triton, TF Serving, OpenAI) answer
them: an empty OIP `outputs` list is every output, TF Serving's `signature_name` decides the inputs, and OpenAI's
`encoding_format: null` is the default. The real server process is test_server.py."""

import types
import warnings

import numpy as np
import pytest

pytest.importorskip("fastapi")
pytest.importorskip("prometheus_client")
pytest.importorskip("httpx")
pytest.importorskip("grpc")

with warnings.catch_warnings():  # Starlette 1.10 prefers httpx2 for its test client; httpx (the extra's) works
  warnings.simplefilter("ignore")
  from fastapi import testclient  # noqa: E402

from official_albert.serving import grpc_service  # noqa: E402
from official_albert.serving import http_app  # noqa: E402
from official_albert.serving import oip_grpc_messages  # noqa: E402


class PairClassifier:
  """A 2-label classifier taking pairs, as a SavedModel with serve_text and serve_text_pair; it records the pairs
  of each call and answers label "b" (with "a" when the row came with a pair, so the answer shows which was run)."""

  name, head, backend, labels, has_exits, takes_pairs = "m", "classifier", "stand_in", ["a", "b"], False, True
  model = types.SimpleNamespace(loaded=types.SimpleNamespace(signatures={"serve_text": None, "serve_text_pair": None}))

  def __init__(self):
    self.pairs = []

  def predict(self, texts, pairs=None):
    self.pairs.append(pairs)
    return {"label": np.asarray(["b" if pairs is None else "a"] * len(texts), object),
            "label_id": np.ones(len(texts), np.int64),
            "probabilities": np.tile(np.asarray([[0.25, 0.75]], np.float32), (len(texts), 1))}

  def token_count(self, text, pair=None):
    return len(text.split()) + 2


class Encoder:
  """An encoder answering a 2-wide vector per text."""

  name, head, backend, takes_pairs = "e", "encoder", "stand_in", False

  def predict(self, texts, pairs=None):
    return {"sentence_embedding": np.tile(np.asarray([[0.6, 0.8]], np.float32), (len(texts), 1))}

  def token_count(self, text, pair=None):
    return 3

  def truncate(self, vectors, dimensions):
    assert dimensions is None
    return vectors


def _client(*models):
  app = http_app.create_app({m.name: m for m in models}, http_app.Settings(max_batch_size=4), http_app.ServerState())
  return testclient.TestClient(app)


def _names(answer):
  assert answer.status_code == 200, answer.text
  return [t["name"] for t in answer.json()["outputs"]]


def test_an_empty_outputs_list_is_every_output_as_over_grpc():
  """OIP REST `"outputs": []` answered no outputs; the spec, KServe and Triton read an empty list as every output,
  as this server's gRPC route does (a ModelInferRequest's repeated `outputs` cannot tell empty from absent)."""
  request = oip_grpc_messages.messages()["ModelInferRequest"](model_name="m")
  request.inputs.add(name="text", datatype="BYTES", shape=[1]).contents.bytes_contents.append(b"x")
  grpc_body = grpc_service.request_body(request)  # what the gRPC route answers, through the same oip_infer
  assert "outputs" not in grpc_body
  with _client(PairClassifier()) as client:
    every = _names(client.post("/v2/models/m/infer", json=grpc_body))
    assert every == ["label", "label_id", "probabilities"]
    for path in ("/v2/models/m/infer", "/v2/models/m/versions/1/infer"):
      assert _names(client.post(path, json={**grpc_body, "outputs": []})) == every
    assert _names(client.post("/v2/models/m/infer", json={**grpc_body, "outputs": [{"name": "label"}]})) == ["label"]


@pytest.mark.parametrize("signature, body, words", [
    ("serve_text", {"instances": [{"text": "x", "text_b": "y"}]}, "instances[].text_b: signature_name 'serve_text' "
     "takes the inputs ['text'] per row"),
    ("serve_text", {"inputs": {"text": ["x"], "text_b": ["y"]}}, "inputs.text_b: signature_name 'serve_text'"),
    ("serve_text_pair", {"instances": [{"text": "x"}]}, "text_b: missing; signature_name 'serve_text_pair' takes "
     "the inputs ['text', 'text_b'] per row"),
    ("serve_text_pair", {"inputs": {"text": ["x"]}}, "text_b: missing;"),
])
def test_tf_serving_signature_name_is_honoured(signature, body, words):
  """`signature_name` was checked and then ignored: serve_text with a text_b answered the pair, serve_text_pair
  without one answered the text alone. Each is a 400 naming the signature's inputs, as TF Serving refuses them."""
  model = PairClassifier()
  with _client(model) as client:
    refused = client.post("/v1/models/m:predict", json={"signature_name": signature, **body})
    assert refused.status_code == 400 and words in refused.json()["error"], refused.text
    assert model.pairs == []  # refused before the model ran
    pair = client.post("/v1/models/m:predict", json={"signature_name": "serve_text_pair",
                                                     "instances": [{"text": "x", "text_b": "y"}]})
    assert pair.status_code == 200 and pair.json()["predictions"][0]["label"] == "a", pair.text
    single = client.post("/v1/models/m:predict", json={"signature_name": "serve_text", "instances": ["x"]})
    assert single.status_code == 200 and single.json()["predictions"][0]["label"] == "b", single.text
    for default in ({}, {"signature_name": "serving_default"}):  # the default takes what the model takes, as before
      both = client.post("/v1/models/m:predict", json={**default, "instances": [{"text": "x", "text_b": "y"}]})
      alone = client.post("/v1/models/m:predict", json={**default, "instances": ["x"]})
      assert both.status_code == alone.status_code == 200, (both.text, alone.text)
    assert model.pairs == [["y"], None, ["y"], None, ["y"], None]


def test_openai_encoding_format_null_is_float():
  """OpenAI's optional fields sent as null count as absent: `model: null` and `dimensions: null` did, but
  `encoding_format: null` was a 400. It is the default, float."""
  with _client(Encoder()) as client:
    answer = client.post("/v1/embeddings", json={"model": None, "input": ["a"], "encoding_format": None,
                                                 "dimensions": None})
    assert answer.status_code == 200, answer.text
    assert answer.json()["data"][0]["embedding"] == pytest.approx([0.6, 0.8])
    refused = client.post("/v1/embeddings", json={"input": ["a"], "encoding_format": "FLOAT"})
    assert refused.status_code == 400 and refused.json()["error"].startswith("encoding_format:"), refused.text
